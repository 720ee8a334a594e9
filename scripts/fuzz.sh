#!/usr/bin/env bash
# Coverage-guided fuzzing of worldmesh's decoders on the stable toolchain (docs/fuzzing.md).
#
#   scripts/fuzz.sh --list                 the targets
#   scripts/fuzz.sh --build                build every target (libFuzzer + SanitizerCoverage)
#   scripts/fuzz.sh TARGET [SECONDS] [-- LIBFUZZER_ARGS...]
#                                          fuzz TARGET (default 600 s) from its seeds
#   scripts/fuzz.sh --all [SECONDS]        every target in turn
#   scripts/fuzz.sh --replay TARGET FILE...  run inputs once (a crash reproduces)
#   scripts/fuzz.sh --seeds                regenerate fuzz/corpus/*/seed-* from the encoders
#
# No nightly and no cargo-fuzz: libfuzzer-sys (from crates.io) builds libFuzzer with the
# system C++ compiler, and rustc's stable -C passes=sancov-module instruments the code.
# No sanitizer: findings are panics (overflow checks and debug assertions are on), aborts,
# time-outs and memory blow-ups. Builds and runs are niced and use one job by default
# (CARGO_BUILD_JOBS overrides).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FUZZ="$ROOT/fuzz"
TRIPLE="$(rustc -vV | sed -n 's/^host: //p')"
TARGET_DIR="${FUZZ_TARGET_DIR:-$FUZZ/target}"
BIN="$TARGET_DIR/$TRIPLE/release"
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"
TARGETS=(wire_frame replica_codec node_datagram locator_datagram client_proto text_configs latency_matrix dashboard_msg)

# SanitizerCoverage as cargo-fuzz configures it (edge counters, PC table, comparison
# tracing, stack depth), on stable codegen flags. With --target the flags reach only the
# target's code, not build scripts or proc-macros.
SANCOV="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares -Cllvm-args=-sanitizer-coverage-stack-depth \
-Cforce-frame-pointers=yes"

need_cxx() {
    if ! command -v c++ >/dev/null && ! command -v g++ >/dev/null; then
        echo "fuzz.sh: a C++ compiler is needed to build libFuzzer; installing g++" >&2
        apt-get install -y g++ >/dev/null
    fi
}

build() {
    need_cxx
    (cd "$FUZZ" && RUSTFLAGS="$SANCOV" nice -n 10 cargo build --locked --release \
        --target "$TRIPLE" --target-dir "$TARGET_DIR" $(printf -- '--bin %s ' "${TARGETS[@]}"))
}

known() {
    local t
    for t in "${TARGETS[@]}"; do [[ "$t" == "$1" ]] && return 0; done
    echo "fuzz.sh: unknown target '$1' (scripts/fuzz.sh --list)" >&2
    exit 2
}

run() {
    local t="$1" secs="$2"
    shift 2
    known "$t"
    build # a no-op when nothing changed
    local work="$TARGET_DIR/corpus/$t" art="$FUZZ/artifacts/$t"
    mkdir -p "$work" "$art"
    # New inputs go to the git-ignored working corpus; the committed seeds are read only.
    nice -n 10 "$BIN/$t" "$work" "$FUZZ/corpus/$t" \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$art/" "$@"
}

case "${1:---help}" in
--list) printf '%s\n' "${TARGETS[@]}" ;;
--build) build ;;
--seeds)
    (cd "$FUZZ" && nice -n 10 cargo run --locked --release --target-dir "$TARGET_DIR/plain" \
        --bin gen_seeds -- "$FUZZ")
    ;;
--replay)
    t="${2:?usage: fuzz.sh --replay TARGET FILE...}"
    known "$t"
    shift 2
    build
    "$BIN/$t" -runs=1 "$@"
    ;;
--all)
    for t in "${TARGETS[@]}"; do run "$t" "${2:-600}"; done
    ;;
-h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' ;;
-*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
*)
    t="$1"
    secs="${2:-600}"
    shift $(($# < 2 ? $# : 2))
    [[ "${1:-}" == "--" ]] && shift
    run "$t" "$secs" "$@"
    ;;
esac
