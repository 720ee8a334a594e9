#!/usr/bin/env bash
# QUIC (mutual TLS) vs the insecure plain-UDP baseline on the same real cluster: per-node
# wire bytes and CPU of node processes, as ratios (issue 13 targets: <= 1.3x bytes,
# <= 1.5x CPU). A benchmark, not a test: run it on a quiet machine.
#
#   scripts/bench-transport.sh [NODES] [DURATION] [RUNS] [extra `worldmesh cluster` flags...]
#   e.g. scripts/bench-transport.sh 8 30s 3
#
# Each run starts NODES `worldmesh node` processes (release build) behind a start barrier,
# once over QUIC and once over `--transport udp-insecure`, alternating, and reads every
# node's report (out/bench-transport/<transport>-<run>/report.json): wire bytes sent (UDP
# payload + 28 per datagram, handshakes, acks and keep-alives included), application bytes
# sent, and the process's CPU time over the run (sum over its threads of
# /proc/<pid>/task/*/schedstat). Needs python3 for the arithmetic.
set -euo pipefail
cd "$(dirname "$0")/.."
NODES=${1:-8}
DURATION=${2:-30s}
RUNS=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
BIN=target/release/worldmesh
OUT=out/bench-transport
cargo build --release -q -p worldmesh-cli
rm -rf "$OUT"
mkdir -p "$OUT"
for run in $(seq 1 "$RUNS"); do
  for t in quic udp-insecure; do
    echo "run $run: $t" >&2
    nice -n 10 "$BIN" cluster --nodes "$NODES" --duration "$DURATION" --transport "$t" \
      --out "$OUT/$t-$run" "$@" > "$OUT/$t-$run.txt" 2> "$OUT/$t-$run.err"
  done
done
python3 - "$OUT" "$RUNS" <<'PY'
import json, sys, statistics
out, runs = sys.argv[1], int(sys.argv[2])
def load(t, r):
    rep = json.load(open(f"{out}/{t}-{r}/report.json"))
    nodes = rep["nodes"]
    n = len(nodes)
    wire = sum(x["transport"]["wire_sent"]["bytes"] for x in nodes) / n
    app = sum(sum(c["sent"]["bytes"] for c in x["transport"]["classes"]) for x in nodes) / n
    cpu = sum(x["cpu_seconds"] for x in nodes) / n
    secs = (min(x["ended_unix_ms"] for x in nodes) - max(x["started_unix_ms"] for x in nodes)) / 1000
    return dict(wire=wire, app=app, cpu=cpu, valid=rep["valid"], secs=secs)
rows = []
print(f"{'run':>3} {'transport':<13} {'wire B/node':>12} {'app B/node':>11} {'overhead':>9} {'CPU s/node':>10} valid")
for r in range(1, runs + 1):
    q, u = load("quic", r), load("udp-insecure", r)
    for name, x in (("quic", q), ("udp-insecure", u)):
        print(f"{r:>3} {name:<13} {x['wire']:>12.0f} {x['app']:>11.0f} {x['wire']/x['app']:>8.3f}x {x['cpu']:>10.3f} {x['valid']}")
    rows.append((q["wire"] / u["wire"], q["cpu"] / u["cpu"]))
b = [r[0] for r in rows]; c = [r[1] for r in rows]
print(f"QUIC / UDP wire bytes per node: median {statistics.median(b):.3f}x (runs: {', '.join(f'{x:.3f}' for x in b)})")
print(f"QUIC / UDP CPU per node:        median {statistics.median(c):.3f}x (runs: {', '.join(f'{x:.3f}' for x in c)})")
PY
