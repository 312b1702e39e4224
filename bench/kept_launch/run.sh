#!/usr/bin/env bash
# Issue 18's figures for kept launches (`nymph install --slurm --keep`): the serving gap at each hand-over (time with
# no live worker of the chain: the successor's registration minus the predecessor's exit, 0 when they overlap),
# jobs cut by a walltime, and the Slurm calls the chain adds per generation. They come from the lab test of three
# 2-minute generations with jobs submitted throughout, which prints them; needs the lab (tests/slurm-lab/start.sh)
# and root (the test runs nymph as the lab user).
#
#   bench/kept_launch/run.sh [BUILD_DIR]    default build/ci (the test is built by the ci preset)
set -euo pipefail
build=${1:-build/ci}
export SLURM_CONF=${SLURM_CONF:-/var/lib/nymph-slurm-lab/etc/slurm.conf}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$build/tests/installer/installer_chain_e2e_test" --gtest_filter='KeptLaunchE2E.ThreeGenerations*' |
  grep -E '^(hand-over|jobs:|slurm calls:|\[  (PASSED|FAILED) )'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
