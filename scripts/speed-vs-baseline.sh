#!/usr/bin/env bash
# Issue 18's acceptance measurement: the simulator's datagrams per wall second against the
# issue's baseline commit, both binaries on this machine in one sitting, alternating
# (crates/sim/PERFORMANCE.md, "Where the issue stands").
#
#   scripts/speed-vs-baseline.sh [--base REV] [--binary PATH] [--pairs K] [--quick]
#
#   --base REV     the baseline commit (default 0dfa792: the last commit before issue 18's
#                  first change); built once in a worktree and kept under
#                  target/speed-vs-baseline/
#   --binary PATH  the `worldmesh` to measure (default: this tree's release build, made
#                  and copied aside, so a rebuild during the run changes nothing)
#   --pairs K      runs of each binary per world, the first of each pair alternating
#                  (default 2)
#   --quick        16 and 32 nodes for 10 s only: checks the script, measures nothing
#
# Worlds: the default scenario (fed-rect, 8 players per node, PlanetLab delays, seed 1)
# for 60 s at 16 / 32 / 64 / 128 nodes, as `worldmesh experiment sim-speed` runs it, and
# the `dht` locator for 20 s at 32 / 64 nodes (on 1 and 2 threads where the binary has
# `--threads`). Both binaries must send the same datagrams in each world, or the script
# stops: a different count means a different workload, not a faster simulator.
# Datagrams sent per wall second is sim-speed's own column; wall time is each binary's
# own "wall time, s". Results: target/speed-vs-baseline/results.csv and a table on stdout.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
OUT="$TARGET_DIR/speed-vs-baseline"
BASE=0dfa792
BINARY=""
PAIRS=2
QUICK=0

# The header above, without its comment marks.
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
fail() {
    echo "speed-vs-baseline.sh: $*" >&2
    exit 2
}

while [[ $# -gt 0 ]]; do
    case "$1" in
    --base) BASE="${2:?--base needs a commit}" && shift 2 ;;
    --binary) BINARY="${2:?--binary needs a path}" && shift 2 ;;
    --pairs) PAIRS="${2:?--pairs needs a number}" && shift 2 ;;
    --quick) QUICK=1 && shift ;;
    -h | --help) usage && exit 0 ;;
    *) fail "unknown argument '$1' (scripts/speed-vs-baseline.sh --help)" ;;
    esac
done
[[ "$PAIRS" =~ ^[1-9][0-9]?$ ]] || fail "--pairs takes 1 to 99, not '$PAIRS'"
BASE_REV="$(git -C "$ROOT" rev-parse --verify --quiet "$BASE^{commit}")" ||
    fail "--base '$BASE' is not a commit of $ROOT"
[[ -z "$BINARY" || -x "$BINARY" ]] || fail "--binary '$BINARY' is not an executable file"
mkdir -p "$OUT"

# The baseline, built once per commit.
BASE_BIN="$OUT/worldmesh-${BASE_REV:0:12}"
if [[ ! -x "$BASE_BIN" ]]; then
    echo "speed-vs-baseline.sh: building the baseline ${BASE_REV:0:12} (a few minutes)" >&2
    tree="$OUT/base-src"
    git -C "$ROOT" worktree remove --force "$tree" 2>/dev/null || rm -rf "$tree"
    git -C "$ROOT" worktree add --detach "$tree" "$BASE_REV" >/dev/null
    (cd "$tree" && cargo build --locked --release -p worldmesh-cli --target-dir "$OUT/base-target")
    cp "$OUT/base-target/release/worldmesh" "$BASE_BIN"
    git -C "$ROOT" worktree remove --force "$tree"
fi

# The binary measured, copied aside.
CAND_BIN="$OUT/worldmesh-candidate"
if [[ -n "$BINARY" ]]; then
    [[ "$BINARY" -ef "$CAND_BIN" ]] || cp "$BINARY" "$CAND_BIN"
else
    echo "speed-vs-baseline.sh: building this tree's release binary" >&2
    (cd "$ROOT" && cargo build --release -p worldmesh-cli --target-dir "$TARGET_DIR")
    cp "$TARGET_DIR/release/worldmesh" "$CAND_BIN"
fi
# The baseline predates `--threads` (it always ran on one thread).
THREADS_FLAG=0
help="$("$CAND_BIN" simulate --help)"
[[ $help == *--threads* ]] && THREADS_FLAG=1

# One run of `simulate ARGS --quiet`: prints "datagrams wall_seconds".
run() {
    local bin="$1" threads="$2"
    shift 2
    local extra=()
    [[ $bin == "$CAND_BIN" && $THREADS_FLAG == 1 ]] && extra=(--threads "$threads")
    "$bin" simulate "$@" --quiet "${extra[@]}" | awk '
        /^datagrams sent/ { d = $9 }
        /^wall time, s/ { w = $4 }
        END { if (d == "" || w == "") exit 1; print d, w }' ||
        fail "no datagram count or wall time from '$bin simulate $* ${extra[*]}'"
}

CSV="$OUT/results.csv"
echo "world,binary,threads,pair,datagrams,wall_s,datagrams_per_wall_s" >"$CSV"
declare -A BEST
declare -A COUNT

# measure NAME THREADS ARGS...: the baseline on one thread against the candidate on each
# of THREADS (comma-separated), PAIRS times, alternating which goes first.
measure() {
    local name="$1" threads="$2"
    shift 2
    local args=("$@")
    if [[ $QUICK == 1 ]]; then
        args=("${args[@]/60s/10s}")
        args=("${args[@]/20s/10s}")
    fi
    local order=(base cand)
    for ((p = 1; p <= PAIRS; p++)); do
        for who in "${order[@]}"; do
            local bin="$BASE_BIN" ts="1"
            if [[ $who == cand ]]; then
                bin="$CAND_BIN"
                [[ $THREADS_FLAG == 1 ]] && ts="${threads//,/ }"
            fi
            for t in $ts; do
                local res
                res="$(run "$bin" "$t" "${args[@]}")"
                local d="${res% *}" w="${res#* }"
                local key="$name|$who|$t"
                if [[ -n "${COUNT[$name]:-}" && "${COUNT[$name]}" != "$d" ]]; then
                    fail "$name: $who sent $d datagrams where a run before sent ${COUNT[$name]}: not the same workload"
                fi
                COUNT[$name]="$d"
                local rate
                rate="$(awk -v d="$d" -v w="$w" 'BEGIN { printf "%.0f", d / w }')"
                echo "$name,$who,$t,$p,$d,$w,$rate" >>"$CSV"
                echo "  $name  $who  $t thread(s)  pair $p: $rate datagrams/wall s ($d in $w s)" >&2
                if [[ -z "${BEST[$key]:-}" || "$rate" -gt "${BEST[$key]}" ]]; then
                    BEST[$key]="$rate"
                fi
            done
        done
        order=("${order[1]}" "${order[0]}")
    done
}

SIZES=(16 32 64 128)
DHT=(32 64)
[[ $QUICK == 1 ]] && SIZES=(16 32) && DHT=(32)
echo "speed-vs-baseline.sh: baseline ${BASE_REV:0:12} against $CAND_BIN, $PAIRS pair(s), $(date -u '+%F %H:%M UTC')" >&2
for n in "${SIZES[@]}"; do
    measure "default-$n" 1 --nodes "$n" --duration 60s
done
for n in "${DHT[@]}"; do
    measure "dht-$n" 1,2 --nodes "$n" --locator dht --duration 20s
done

ratio() {
    if [[ -n "$1" ]]; then awk -v c="$1" -v b="$2" 'BEGIN { printf "%.2f×", c / b }'; else echo "–"; fi
}
names=()
for n in "${SIZES[@]}"; do names+=("default-$n"); done
for n in "${DHT[@]}"; do names+=("dht-$n"); done
echo
echo "Datagrams per wall second, best of $PAIRS run(s) each (all runs: $CSV)"
echo
echo "| world | baseline ${BASE_REV:0:7} | candidate, 1 thread | ratio | candidate, 2 threads | ratio |"
echo "|---|---:|---:|---:|---:|---:|"
for name in "${names[@]}"; do
    b="${BEST[$name|base|1]}"
    c1="${BEST[$name|cand|1]:-}"
    c2="${BEST[$name|cand|2]:-}"
    echo "| $name | $b | ${c1:-–} | $(ratio "$c1" "$b") | ${c2:-–} | $(ratio "$c2" "$b") |"
done
echo
echo "Issue 18 asks for ≥ 4× on one thread and ≥ 7× on two, at every size from 16 to 128 nodes."
