#!/usr/bin/env bash
# A profile-guided, whole-program-optimised build of the `worldmesh` binary, for long
# simulations and experiment sweeps (crates/sim/PERFORMANCE.md, "A profile-guided build").
#
#   scripts/pgo-build.sh        build it (about 12 minutes on 2 cores); prints its path
#
# 1. Builds the binary instrumented (`-Cprofile-generate`, cargo profile `pgo`: fat LTO,
#    one codegen unit) under target/pgo-instrumented.
# 2. Runs it on a training set: simulations of fed and p2p worlds, every locator and a lossy
#    network, on seed 7 (the experiments and the README's figures use seed 1, so the
#    measurements are not the training runs), and a three-node cluster over QUIC on
#    loopback for the server's own path.
# 3. Merges the counts with the toolchain's own `llvm-profdata` (rustup's `llvm-tools`
#    component, added if missing: a system llvm-profdata of another LLVM version cannot read
#    rustc's profiles).
# 4. Builds target/<host>/pgo/worldmesh with `-Cprofile-use`.
#
# The profile changes only how the code is laid out and inlined, never what it computes:
# reports are byte-identical to the release build's. Code the training never ran is
# optimised as cold; for production nodes the plain release build stays the reference.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TRIPLE="$(rustc -vV | sed -n 's/^host: //p')"
SYSROOT="$(rustc --print sysroot)"
PROFDATA="$SYSROOT/lib/rustlib/$TRIPLE/bin/llvm-profdata"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
TRAIN_DIR="$TARGET_DIR/pgo-instrumented"
PROFILES="$TRAIN_DIR/profiles"
MERGED="$TRAIN_DIR/merged.profdata"

case "${1:-}" in
"") ;;
-h | --help)
    sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
*)
    echo "pgo-build.sh: unknown argument '$1' (scripts/pgo-build.sh --help)" >&2
    exit 2
    ;;
esac

if [[ ! -x "$PROFDATA" ]]; then
    echo "pgo-build.sh: adding rustup's llvm-tools component (for llvm-profdata)" >&2
    rustup component add llvm-tools >&2 || true
fi
if [[ ! -x "$PROFDATA" ]]; then
    echo "pgo-build.sh: $PROFDATA is missing; install it with 'rustup component add llvm-tools'" >&2
    exit 1
fi

# `--target` keeps the flags off build scripts and proc-macros, so only the binary
# writes profiles.
build() {
    (cd "$ROOT" && RUSTFLAGS="${RUSTFLAGS:-} $1" cargo build --locked --profile pgo \
        --target "$TRIPLE" --target-dir "$2" -p worldmesh-cli)
}

echo "pgo-build.sh: 1/4 building the instrumented binary" >&2
rm -rf "$PROFILES" "$MERGED"
build "-Cprofile-generate=$PROFILES" "$TRAIN_DIR"
TRAINEE="$TRAIN_DIR/$TRIPLE/pgo/worldmesh"

echo "pgo-build.sh: 2/4 training" >&2
train() {
    echo "  worldmesh $*" >&2
    LLVM_PROFILE_FILE="$PROFILES/%m_%p.profraw" "$TRAINEE" "$@" >/dev/null
}
S=(--seed 7 --quiet)
train simulate --nodes 64 --duration 10s "${S[@]}"
train simulate --nodes 16 --duration 20s "${S[@]}"
train simulate --nodes 128 --duration 3s "${S[@]}"
train simulate --nodes 400 --players-per-node 1 --duration 10s "${S[@]}"
train simulate --nodes 50 --duration 10s "${S[@]}"
train simulate --nodes 32 --duration 6s --locator dht "${S[@]}"
train simulate --nodes 32 --duration 6s --locator rangedht --range-key hilbert "${S[@]}"
train simulate --nodes 16 --duration 10s --loss 0.02 --jitter-ms 3 "${S[@]}"
train cluster --nodes 3 --duration 5s --seed 7

echo "pgo-build.sh: 3/4 merging $(find "$PROFILES" -name '*.profraw' | wc -l) profiles" >&2
"$PROFDATA" merge -o "$MERGED" "$PROFILES"

echo "pgo-build.sh: 4/4 building with the profile" >&2
build "-Cprofile-use=$MERGED -Cllvm-args=-pgo-warn-missing-function=false" "$TARGET_DIR"
echo "$TARGET_DIR/$TRIPLE/pgo/worldmesh"
