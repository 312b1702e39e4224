#!/usr/bin/env bash
# bench/slurm_rpcs/agent_rss.sh [BUILD_DIR] [N...]: the whole agent's RSS per tracked Slurm job at each N (default
# 1000), as the lab user on the running lab (tests/slurm-lab/start.sh); agent_rss.py says how it is measured.
# Needs root (runs the bench as the lab user). Build a non-sanitized tree for meaningful figures:
#   cmake -S . -B build/release -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build build/release
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=$(cd "${1:-$HERE/../../build/release}" && pwd)
shift || true
. /var/lib/nymph-slurm-lab/env.sh
cd /
exec runuser -u "$SLURM_LAB_USER" -- env SLURM_CONF="$SLURM_CONF" SLURM_LAB_JOBS_DIR="$SLURM_LAB_JOBS_DIR" \
  PATH="$PATH" ${NYMPH_BENCH_HOLD_S:+NYMPH_BENCH_HOLD_S=$NYMPH_BENCH_HOLD_S} \
  ${NYMPH_BENCH_SMAPS:+NYMPH_BENCH_SMAPS=$NYMPH_BENCH_SMAPS} ${NYMPH_BENCH_AGENT_WRAPPER:+NYMPH_BENCH_AGENT_WRAPPER="$NYMPH_BENCH_AGENT_WRAPPER"} \
  python3 "$HERE/agent_rss.py" "$BUILD" "$@"
