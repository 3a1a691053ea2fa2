#!/usr/bin/env bash
# Build tclab with profile-guided optimisation, for long runs and sweeps: the same simulator, the same
# output files, fewer instructions and better-placed branches (docs/BENCHMARKS.md, "A profile-guided
# build"). The release build stays the default because this one takes two full builds and a training
# run (4 minutes from nothing on a quiet 2-core machine, 17 under other builds; a release build 2-8).
#
#   scripts/build-pgo.sh            builds target/pgo/tclab ($CARGO_TARGET_DIR/pgo/tclab if that is set)
#
# 1. an instrumented build (rustc -Cprofile-generate) in target/pgo/gen;
# 2. a training run: the built-in scenarios below, which are not the benchmarks (so that the
#    benchmarks measure a build trained on other work), with their outputs thrown away;
# 3. llvm-profdata merges the counts (rustup's llvm-tools component: `rustup component add
#    llvm-tools`; its LLVM must be rustc's, which a distribution's llvm-profdata rarely is);
# 4. the optimised build (-Cprofile-use) in target/pgo/use. Whole-program LTO on top measured no
#    better (BENCHMARKS), so the release profile is kept as it is.
# Both builds name the target (--target HOST) so that the flags reach tclab's code and its
# dependencies but not the build scripts and proc-macros that run on the build machine (without it,
# those were instrumented too and their counts merged into tclab's profile). RUSTFLAGS already set are
# kept. TCLAB_PGO_SCENARIOS replaces the training list (built-in names or scenario files).
set -euo pipefail
cd "$(dirname "$0")/.."

# Built-in scenario names (`tclab sim --list`); crates/cli/tests/sim_cli.rs checks that each exists.
scenarios="${TCLAB_PGO_SCENARIOS:-seed000-iperf rrul-100mbit-htb-fq_codel rrul-100mbit-cake cake-hosts-cake
seed004-download-conditioned seed001-test3 rrul-10mbit-pie dctcp-fq_codel rrul-100mbit-red seed000-hfsc-rt-180kbit}"

host="$(rustc -vV | sed -n 's/^host: //p')"
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
  echo "build-pgo: $profdata not found: run \`rustup component add llvm-tools\` (rustc's own LLVM tools)" >&2
  exit 1
fi

target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
out="$target_dir/pgo"
raw="$out/raw"
rm -rf "$raw" "$out/train"
mkdir -p "$raw" "$out/train"

# The user's RUSTFLAGS, then one more flag, in cargo's encoded form (arguments separated by 0x1f), so
# that a checkout path with spaces stays one argument.
flags() {
  local enc="" f
  for f in ${RUSTFLAGS:-}; do
    enc+="$f"$'\x1f'
  done
  printf '%s%s' "$enc" "$1"
}

echo "build-pgo: 1/4 instrumented build ($out/gen; cargo is quiet for minutes)"
CARGO_ENCODED_RUSTFLAGS="$(flags "-Cprofile-generate=$raw")" \
  cargo build --release --quiet -p tclab --target "$host" --target-dir "$out/gen"

echo "build-pgo: 2/4 training run"
n=0
for s in $scenarios; do
  n=$((n + 1))
  echo "  $s"
  "$out/gen/$host/release/tclab" sim "$s" --no-plots -o "$out/train/$n" >/dev/null
done

echo "build-pgo: 3/4 merging the profile"
"$profdata" merge -o "$out/tclab.profdata" "$raw"

echo "build-pgo: 4/4 optimised build ($out/use; cargo is quiet for minutes)"
CARGO_ENCODED_RUSTFLAGS="$(flags "-Cprofile-use=$out/tclab.profdata")" \
  cargo build --release --quiet -p tclab --target "$host" --target-dir "$out/use"

cp "$out/use/$host/release/tclab" "$out/tclab"
rm -rf "$out/train"
echo "build-pgo: built $out/tclab"
