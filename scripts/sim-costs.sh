#!/usr/bin/env bash
# The simulator's cost per datagram, counted rather than timed: instructions and cache
# misses of one `worldmesh simulate` run under valgrind's cachegrind. Two runs of one binary
# differ by about 0.01 % in instructions and 0.2 % in misses (the hash tables' random seeds,
# the addresses), where wall times on a shared 2-core VM move by a quarter between runs
# (crates/sim/PERFORMANCE.md, sixteenth round). Use it to compare two builds
# or two commits on the same run; issue 18's acceptance stays in wall time
# (scripts/speed-vs-baseline.sh, `worldmesh experiment sim-speed`).
#
#   scripts/sim-costs.sh [--binary PATH] [--last-level BYTES,WAYS] [-- SIMULATE ARGS...]
#
#   --binary PATH              the `worldmesh` to count (default: this tree's release
#                              build, made first)
#   --last-level BYTES,WAYS    the modelled last-level cache (default 1048576,8: one core's
#                              L2 on PERFORMANCE.md's machine; 33554432,16 models its L3)
#   SIMULATE ARGS              for `worldmesh simulate` (default: --threads 1 --duration
#                              20s, the default 64-node world); --quiet is always added.
#                              Give --threads 1 with your own: valgrind runs threads one
#                              at a time, and a parallel run counts its rounds' work too
#
# Prints the datagrams and bytes sent, and per datagram: instructions, L1 instruction and
# data misses, last-level misses; and instructions per byte. The counts include building
# the world (about 111 M instructions for the default one). Needs valgrind
# (`apt-get install valgrind`); the default run takes about a minute and a half.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
BINARY=""
LAST_LEVEL="1048576,8"
DEFAULT_ARGS=(--threads 1 --duration 20s)

# The header above, without its comment marks.
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
fail() {
    echo "sim-costs.sh: $*" >&2
    exit 2
}

while [[ $# -gt 0 ]]; do
    case "$1" in
    --binary) BINARY="${2:?--binary needs a path}" && shift 2 ;;
    --last-level) LAST_LEVEL="${2:?--last-level needs BYTES,WAYS}" && shift 2 ;;
    --) shift && break ;;
    -h | --help) usage && exit 0 ;;
    *) fail "unknown argument '$1' (simulate's own go after --; scripts/sim-costs.sh --help)" ;;
    esac
done
ARGS=("$@")
[[ ${#ARGS[@]} -gt 0 ]] || ARGS=("${DEFAULT_ARGS[@]}")
[[ "$LAST_LEVEL" =~ ^[1-9][0-9]{0,10},[1-9][0-9]{0,2}$ ]] ||
    fail "--last-level takes BYTES,WAYS (e.g. 1048576,8), not '$LAST_LEVEL'"
[[ -z "$BINARY" || -x "$BINARY" ]] || fail "--binary '$BINARY' is not an executable file"
command -v valgrind >/dev/null || fail "valgrind is not installed (apt-get install valgrind)"

if [[ -z "$BINARY" ]]; then
    (cd "$ROOT" && cargo build --release -p worldmesh-cli --target-dir "$TARGET_DIR")
    BINARY="$TARGET_DIR/release/worldmesh"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "sim-costs.sh: $BINARY simulate ${ARGS[*]} --quiet, under cachegrind (LL $LAST_LEVEL)" >&2
valgrind --tool=cachegrind --cache-sim=yes --LL="$LAST_LEVEL,64" \
    --cachegrind-out-file="$work/cachegrind.out" \
    "$BINARY" simulate "${ARGS[@]}" --quiet >"$work/report.txt" 2>"$work/valgrind.txt" ||
    fail "the run failed; valgrind said:
$(tail -n 20 "$work/valgrind.txt")"

# Datagrams from the summary; bytes summed over the table of messages by class.
read -r datagrams bytes < <(awk '
    /^datagrams sent/ { d = $9 }
    /^class +packets +bytes/ { table = 1; next }
    table && /^-+$/ { next }
    table && NF == 0 { table = 0 }
    table && NF >= 4 { b += $3 }
    END { printf "%s %.0f\n", d, b }' "$work/report.txt")
[[ "$datagrams" =~ ^[1-9][0-9]*$ ]] || fail "no datagram count in the report (was the run empty?)"

# valgrind's summary lines ("==PID== I   refs:      8,919,334,620"): the first number.
count() {
    awk -v label="$1" 'index($0, label) { gsub(",", ""); for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+$/) { print $i; exit } }' "$work/valgrind.txt"
}
instr="$(count 'I   refs:')"
i1="$(count 'I1  misses:')"
d1="$(count 'D1  misses:')"
ll="$(count 'LL misses:')"

awk -v d="$datagrams" -v b="$bytes" -v ir="$instr" -v i1="$i1" -v d1="$d1" -v ll="$ll" -v lvl="$LAST_LEVEL" 'BEGIN {
    printf "datagrams sent             %.0f\n", d
    printf "bytes sent                 %.0f (%.1f per datagram)\n", b, b / d
    printf "per datagram:\n"
    printf "  instructions             %.0f\n", ir / d
    printf "  L1 instruction misses    %.1f\n", i1 / d
    printf "  L1 data misses           %.1f\n", d1 / d
    printf "  last-level misses        %.1f (a %s-byte, %s-way last level)\n", ll / d, substr(lvl, 1, index(lvl, ",") - 1), substr(lvl, index(lvl, ",") + 1)
    if (b > 0) printf "instructions per byte      %.1f\n", ir / b
}'
