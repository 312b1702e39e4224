#!/usr/bin/env bash
# fixture.sh start|stop - the ctest fixture around the lab cluster (FIXTURES_SETUP / FIXTURES_CLEANUP).
#
# start: records which lab daemons are already running, then runs start.sh (which keeps running daemons).
# stop:  stops only the daemons that `start` brought up, so a lab a developer started by hand stays up.
# The record lives in $NYMPH_SLURM_FIXTURE_STATE (default: /tmp/nymph-slurm-fixture.started).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
source "$HERE/common.sh"
STATE=${NYMPH_SLURM_FIXTURE_STATE:-/tmp/nymph-slurm-fixture.started}

case ${1:-} in
  start)
    [[ $EUID -eq 0 ]] || { echo "the slurm test fixture needs root (it starts the lab daemons)" >&2; exit 1; }
    before=()
    for d in "${LAB_DAEMONS[@]}"; do lab_pid "$d" >/dev/null && before+=("$d"); done
    "$HERE/start.sh"
    : >"$STATE"
    for d in "${LAB_DAEMONS[@]}"; do
      [[ " ${before[*]-} " == *" $d "* ]] || echo "$d" >>"$STATE"
    done
    echo "[fixture] started by this run: $(tr '\n' ' ' <"$STATE")"
    ;;
  stop)
    [[ -f $STATE ]] || { echo "[fixture] nothing recorded; leaving the lab as it is"; exit 0; }
    mapfile -t started <"$STATE"
    rm -f "$STATE"
    if ((${#started[@]} == 0)); then
      echo "[fixture] the lab was already running before the tests; leaving it up"
      exit 0
    fi
    if [[ " ${started[*]} " == *" slurmctld "* ]] && lab_pid slurmctld >/dev/null; then
      mapfile -t jobs < <(squeue -h -o '%i' 2>/dev/null || true)
      ((${#jobs[@]} == 0)) || scancel "${jobs[@]}" 2>/dev/null || true
    fi
    for ((idx = ${#LAB_DAEMONS[@]} - 1; idx >= 0; idx--)); do
      d=${LAB_DAEMONS[idx]}
      [[ " ${started[*]} " == *" $d "* ]] && lab_stop_daemon "$d"
    done
    echo "[fixture] stopped: ${started[*]}"
    ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
