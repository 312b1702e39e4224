#!/usr/bin/env bash
# run-all.sh - the one command that runs every test of nymph on a fresh Debian 12 machine (as root).
#
# Installs the Debian packages (packaging/deps-debian.sh), creates the unprivileged lab user the Slurm tests run
# as (tests/slurm-lab/prepare.sh: their test discovery runs as that user at build time), configures and builds
# the `ci` preset (Debug, ASan+UBSan, warnings as errors) and the release artifacts (packaging/release.sh: the
# `static` preset), runs clang-tidy on what changed (tests/tidy.sh), then runs every ctest label: unit,
# integration, deploy and slurm. The slurm label's fixture starts the single-node lab cluster (tests/slurm-lab)
# and stops what it started. Nothing else needs setting up beforehand; tests/slurm-lab/reset.sh undoes everything
# this creates.
#
#   tests/run-all.sh                 everything
#   NYMPH_TEST_LABELS=unit tests/run-all.sh   only the given ctest label regex (`tidy` selects the clang-tidy step)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

packaging/deps-debian.sh
export PATH=$PATH:/usr/sbin:/sbin
tests/slurm-lab/prepare.sh
cmake --preset ci
cmake --build --preset ci
# clang-tidy (docs/static-analysis.md) over the translation units changed since .ci/tidy-baseline, or the whole
# tree when the baseline is missing or a .clang-tidy changed; needs the ci preset's compile_commands.json.
# Skipped when NYMPH_TEST_LABELS does not select `tidy` (not a ctest label: this step is its only user).
if [[ -z ${NYMPH_TEST_LABELS:-} || tidy =~ $NYMPH_TEST_LABELS ]]; then
  nice -n 10 tests/tidy.sh
fi
# The portable static binaries and the release artifacts (tarball, .deb, .rpm) that the `deploy` label tests
# (skipped when NYMPH_TEST_LABELS does not select that label).
# The optimised build is where GCC's middle-end warnings show (the ci preset is -O0): it must print none.
if [[ -z ${NYMPH_TEST_LABELS:-} || deploy =~ $NYMPH_TEST_LABELS ]]; then
  mkdir -p build
  packaging/release.sh 2>&1 | tee build/release-artifacts.log
  if grep -q 'warning:' build/release-artifacts.log; then
    echo "run-all: the optimised (static) build printed warnings; see above (build/release-artifacts.log)" >&2
    exit 1
  fi
fi
# The fuzz targets (fuzz/README.md), each for a short fixed time on its corpus, two at a time: clang build of the
# `fuzz` preset (only the parsers the targets need), then fuzz/run.sh. New corpus inputs and crashes stay in
# build/fuzz. Skipped when NYMPH_TEST_LABELS does not select `fuzz`.
if [[ -z ${NYMPH_TEST_LABELS:-} || fuzz =~ $NYMPH_TEST_LABELS ]]; then
  fuzz_start=$SECONDS
  cmake --preset fuzz
  cmake --build --preset fuzz
  # A fixed seed and an input cap keep CI's runs alike and bounded (not bit-for-bit: two runs of the same commit
  # here reached coverage a few edges apart); new findings are for fuzz/run.sh by hand to chase.
  NYMPH_FUZZ_SEED=${NYMPH_FUZZ_SEED:-1} NYMPH_FUZZ_RUNS=${NYMPH_FUZZ_RUNS:-100000} fuzz/run.sh "${NYMPH_FUZZ_SECONDS:-15}"
  echo "run-all: fuzz stage took $((SECONDS - fuzz_start)) s"
fi
args=(--preset ci)
[[ -n ${NYMPH_TEST_LABELS:-} ]] && args+=(-L "$NYMPH_TEST_LABELS")
exec ctest "${args[@]}"
