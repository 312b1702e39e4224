#!/usr/bin/env bash
# reset.sh - return this machine to "never saw nymph" for everything the project itself created (as root).
#
# CI runs on a machine that keeps what earlier runs left, so a green run could hide a missing set-up step.
# .ci/run therefore calls this first. It removes, by name, only what nymph's own scripts and tests create:
#   1. the lab daemons (munged, mariadbd, slurmdbd, slurmctld, slurmd) started by start.sh: through their pid
#      files, and any left without one whose command line or environment names the lab directory;
#   2. every process of the lab user (SLURM_LAB_USER, default nymphci): its jobs and nymph daemons;
#   3. nymph processes left by earlier test runs (nymph, nymph-control, nymph-test-child run from a build tree
#      or a /tmp/nymph-* directory);
#   4. the lab user with its home directory and group;
#   5. the lab state directory (SLURM_LAB_DIR, default /var/lib/nymph-slurm-lab; only if start.sh's marker file
#      is in it) and the /etc/slurm/slurm.conf link into it;
#   6. /tmp/nymph-* (the tests' and the demo's temporary directories, the fixture's record).
# Installed Debian packages stay. Prints what it removed; safe to run on a machine that never saw nymph.
#
#   tests/slurm-lab/reset.sh
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
source "$SCRIPT_DIR/common.sh"
export PATH=$PATH:/usr/sbin:/sbin

[[ $EUID -eq 0 ]] || { echo "reset.sh must be run as root" >&2; exit 1; }
[[ $LAB_DIR == /* && $LAB_DIR != / ]] || { echo "reset.sh: SLURM_LAB_DIR must be an absolute path other than /" >&2; exit 1; }

say() { echo "[reset] $*"; }

# gone_within TENTHS PID... : true once none of the pids exists, checking every 0.1 s for TENTHS tenths.
gone_within() {
  local tenths=$1 pid i alive
  shift
  for ((i = 0; i < tenths; i++)); do
    alive=0
    for pid in "$@"; do [[ -e /proc/$pid ]] && alive=1; done
    ((alive)) || return 0
    sleep 0.1
  done
  return 1
}

# kill_and_wait PID... : SIGTERM, up to 10 s, then SIGKILL; waits until each is gone.
kill_and_wait() {
  (($# > 0)) || return 0
  kill -TERM "$@" 2>/dev/null || true
  gone_within 100 "$@" && return 0
  kill -KILL "$@" 2>/dev/null || true
  gone_within 50 "$@" || true
}

# 1. Lab daemons: pid files first (stop.sh), then strays that name the lab directory.
if [[ -d $RUN_DIR ]]; then
  for ((idx = ${#LAB_DAEMONS[@]} - 1; idx >= 0; idx--)); do lab_stop_daemon "${LAB_DAEMONS[idx]}"; done
fi
strays=()
for proc in /proc/[0-9]*; do
  exe=$(readlink "$proc/exe" 2>/dev/null) || continue
  case ${exe% (deleted)} in
    */munged | */mariadbd | */slurmdbd | */slurmctld | */slurmd | */slurmstepd) ;;
    *) continue ;;
  esac
  if tr '\0' '\n' <"$proc/cmdline" 2>/dev/null | grep -qF "$LAB_DIR" ||
    tr '\0' '\n' <"$proc/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$SLURM_CONF_FILE"; then
    strays+=("${proc#/proc/}")
  fi
done
if ((${#strays[@]} > 0)); then
  say "stopping lab daemons without a pid file: ${strays[*]}"
  kill_and_wait "${strays[@]}"
fi

# 2. The lab user's processes.
if id -u "$LAB_USER" >/dev/null 2>&1; then
  mapfile -t user_pids < <(pgrep -u "$LAB_USER" || true)
  if ((${#user_pids[@]} > 0)); then
    say "stopping ${#user_pids[@]} process(es) of $LAB_USER"
    kill_and_wait "${user_pids[@]}"
  fi
fi

# 3. nymph processes from earlier test runs.
leftovers=()
for proc in /proc/[0-9]*; do
  exe=$(readlink "$proc/exe" 2>/dev/null) || continue
  exe=${exe% (deleted)}
  case ${exe##*/} in nymph | nymph-control | nymph-test-child) ;; *) continue ;; esac
  [[ $exe == */build/* || $exe == /tmp/nymph-* ]] && leftovers+=("${proc#/proc/}")
done
if ((${#leftovers[@]} > 0)); then
  say "stopping nymph processes left by earlier runs: ${leftovers[*]}"
  kill_and_wait "${leftovers[@]}"
fi

# 4. The lab user, its home and group.
if id -u "$LAB_USER" >/dev/null 2>&1; then
  home=$(getent passwd "$LAB_USER" | cut -d: -f6)
  userdel --remove "$LAB_USER" 2>/dev/null || userdel "$LAB_USER"
  [[ -n $home && $home != / && -d $home ]] && rm -rf --one-file-system "$home"
  say "removed user $LAB_USER (home $home)"
fi
if getent group "$LAB_USER" >/dev/null; then
  groupdel "$LAB_USER"
  say "removed group $LAB_USER"
fi

# 5. The lab state directory and the /etc/slurm/slurm.conf link into it.
if [[ -L /etc/slurm/slurm.conf && $(readlink /etc/slurm/slurm.conf) == "$SLURM_CONF_FILE" ]]; then
  rm -f /etc/slurm/slurm.conf
  say "removed the /etc/slurm/slurm.conf link"
fi
if [[ -d $LAB_DIR ]]; then
  if [[ -f $MARKER ]]; then
    rm -rf --one-file-system "$LAB_DIR"
    say "removed $LAB_DIR"
  else
    say "ERROR: $LAB_DIR exists but was not created by start.sh (no $MARKER); not touching it" >&2
    exit 1
  fi
fi

# 6. Temporary directories of the tests and the demo.
shopt -s nullglob
tmp=(/tmp/nymph-*)
if ((${#tmp[@]} > 0)); then
  rm -rf --one-file-system "${tmp[@]}"
  say "removed ${#tmp[@]} /tmp/nymph-* entries"
fi
say "done: no lab user, no lab state, no lab daemons"
