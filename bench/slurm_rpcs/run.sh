#!/usr/bin/env bash
# bench/slurm_rpcs/run.sh [BUILD_DIR] [N...]: the Slurm runner with 1, 100, 1 000 and 10 000 (or the N given)
# tracked jobs on the lab cluster: submission time and RPCs (one sbatch each, and one job array for comparison),
# slurmctld RPCs per cycle by type, agent CPU per cycle and RSS per tracked job, end -> final event p50/p99 of
# NYMPH_BENCH_SAMPLE (20) short jobs beside them, and with NYMPH_BENCH_IDLE_S=S RPCs per minute over S s of quiet
# (slurm_rpcs.cpp says how each is measured). Needs root (runs the bench as the lab user) and a running lab
# (tests/slurm-lab/start.sh). NYMPH_BENCH_FIXED_VS_ADAPTIVE_S=S measures instead, for N = 100 and 1000 (or the
# N given), slurmctld RPCs per minute over S seconds with nothing changing: a fixed 10 s cycle, then the agent's
# defaults (10 s doubling to 60 s). NYMPH_BENCH_SUBMIT=1 measures instead the time, sbatch calls and RPCs to submit
# N jobs through the runner at once: one sbatch per job (the baseline), then job arrays. NYMPH_BENCH_HELD_FILE=F keeps
# the held jobs in F.N for the next run to reuse (tracking figures again without N sbatch calls; cancel them with
# `scancel $(cat F.N)`); NYMPH_BENCH_MALLOC_STATS=1 prints glibc's malloc_stats() and RSS by mapping between cycles. Build a non-sanitized tree for meaningful RSS figures:
#   cmake -S . -B build/release -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build build/release --target nymph-bench-slurm-rpcs
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=$(cd "${1:-$HERE/../../build/release}" && pwd)
shift || true
. /var/lib/nymph-slurm-lab/env.sh
cd /
exec runuser -u "$SLURM_LAB_USER" -- env SLURM_CONF="$SLURM_CONF" ${NYMPH_BENCH_IDLE_S:+NYMPH_BENCH_IDLE_S=$NYMPH_BENCH_IDLE_S} \
  ${NYMPH_BENCH_SAMPLE:+NYMPH_BENCH_SAMPLE=$NYMPH_BENCH_SAMPLE} \
  ${NYMPH_BENCH_FIXED_VS_ADAPTIVE_S:+NYMPH_BENCH_FIXED_VS_ADAPTIVE_S=$NYMPH_BENCH_FIXED_VS_ADAPTIVE_S} \
  ${NYMPH_BENCH_SUBMIT:+NYMPH_BENCH_SUBMIT=$NYMPH_BENCH_SUBMIT} \
  ${NYMPH_BENCH_HELD_FILE:+NYMPH_BENCH_HELD_FILE=$NYMPH_BENCH_HELD_FILE} \
  ${NYMPH_BENCH_MALLOC_STATS:+NYMPH_BENCH_MALLOC_STATS=$NYMPH_BENCH_MALLOC_STATS} \
  "$BUILD/bench/slurm_rpcs/nymph-bench-slurm-rpcs" "$SLURM_LAB_JOBS_DIR/nymph-bench-$$" "$@"
