#!/usr/bin/env bash
# demo.sh - build nymph and run its main job end to end on this machine (Debian 12, as root).
#
# The story, in order: a control plane (nymph-control on an embedded SQLite database) -> a login-node manager
# (`nymph install`, a detached daemon) -> a process job run by the manager itself -> a single-node Slurm
# cluster (started here if none runs) -> a `slurm`-runner job and a training-profile job, each submitted with
# sbatch, tracked to its final state and checked against `sacct` -> `nymph kill` of the manager and its
# exitReason. It stops exactly what it started (the Slurm daemons it brought up, the control plane, the
# manager) and removes its temporary directory.
#
#   packaging/demo.sh              install packages, build (release preset), run everything
#   packaging/demo.sh --no-slurm   skip the Slurm part (no Slurm packages, no cluster)
#   NYMPH_DEMO_SKIP_BUILD=1 ...    reuse build/release
#   NYMPH_DEMO_KEEP=1 ...          keep the temporary directory (logs, database) for a look afterwards
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

WITH_SLURM=1
case ${1:-} in
  "") ;;
  --no-slurm) WITH_SLURM=0 ;;
  -h | --help) sed -n '2,14s/^# \{0,1\}//p' "$0"; exit 0 ;;
  *) echo "usage: $0 [--no-slurm]" >&2; exit 2 ;;
esac
[[ $EUID -eq 0 ]] || { echo "demo.sh: run as root (it installs packages and may start a Slurm cluster)" >&2; exit 1; }
export PATH=$PATH:/usr/sbin:/sbin

T0=$(date +%s)
step=0
say() { step=$((step + 1)); printf '\n\033[1m== %d. %s\033[0m\n' "$step" "$*"; }
note() { printf '   %s\n' "$@"; }

if [[ ${NYMPH_DEMO_SKIP_BUILD:-0} != 1 ]]; then
  say "installing dependencies and building nymph and nymph-control (release preset)"
  if ((WITH_SLURM)); then packaging/deps-debian.sh; else packaging/deps-debian.sh --no-slurm; fi
  cmake --preset release >/dev/null
  cmake --build --preset release --target nymph nymph-control
fi
NYMPH=$ROOT/build/release/agent/nymph
CONTROL=$ROOT/build/release/control/nymph-control

DEMO=$(mktemp -d /tmp/nymph-demo.XXXXXX)
chmod 0755 "$DEMO"
: >"$DEMO/serve.out"
server_pid=""
LAUNCH=""
LAB_STATE=$DEMO/lab-started
cleanup() {
  local rc=$?
  trap - EXIT
  # On an early exit the manager may still run: stop it first (a no-op once `nymph kill` below has run).
  [[ -n $LAUNCH ]] && "$NYMPH" kill "$LAUNCH" >/dev/null 2>&1 || true  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
  # Stops only the lab daemons this demo started (none if a lab was already running).
  [[ -f $LAB_STATE ]] && NYMPH_SLURM_FIXTURE_STATE=$LAB_STATE tests/slurm-lab/fixture.sh stop >"$DEMO/lab-stop.log" 2>&1
  if [[ ${NYMPH_DEMO_KEEP:-0} == 1 ]]; then echo "kept $DEMO"; else rm -rf "$DEMO"; fi
  exit "$rc"
}
trap cleanup EXIT

say "the control plane: nymph-control serve on an embedded SQLite database"
(umask 077 && "$CONTROL" token create --db "$DEMO/control.db" --role admin --name demo-admin >"$DEMO/admin.token")
(umask 077 && "$CONTROL" token create --db "$DEMO/control.db" --role agent --name demo-agent >"$DEMO/agent.token")
"$CONTROL" serve --listen 127.0.0.1:0 --db "$DEMO/control.db" >"$DEMO/serve.out" 2>"$DEMO/serve.log" &
server_pid=$!
until read -r _ _ URL <"$DEMO/serve.out" 2>/dev/null && [[ -n ${URL:-} ]]; do
  kill -0 "$server_pid" || { cat "$DEMO/serve.log"; exit 1; }
  sleep 0.1
done
note "listening on $URL (database $DEMO/control.db, log $DEMO/serve.log)" \
  "two tokens: an admin token for this shell, an agent token for the manager"
export NYMPH_CONTROL_URL=$URL NYMPH_CONTROL_TOKEN_FILE=$DEMO/admin.token

if ((WITH_SLURM)); then
  # Bring the lab up before the manager starts, so that it finds sbatch working and advertises the slurm runner.
  say "a single-node Slurm cluster on this machine (munge, MariaDB, slurmdbd, slurmctld, slurmd)"
  tests/slurm-lab/install.sh | sed 's/^/   /'
  NYMPH_SLURM_FIXTURE_STATE=$LAB_STATE tests/slurm-lab/fixture.sh start >"$DEMO/lab-start.log" 2>&1 ||
    { cat "$DEMO/lab-start.log"; exit 1; }
  # shellcheck disable=SC1091
  . /var/lib/nymph-slurm-lab/env.sh
  started=$(tr '\n' ' ' <"$LAB_STATE")
  note "$(grep '^SLURM LAB READY' "$DEMO/lab-start.log" | cut -d' ' -f4-6)" \
    "started by this demo (stopped at the end): ${started:-nothing, a lab was already running}"
fi

say "a login-node manager: nymph install (one launch, a detached daemon)"
# The training profile "smoke" is an approved script the manager may submit; it must not be writable by others.
install -d -m 0755 "$DEMO/profiles"
install -m 0755 packaging/examples/slurm-smoke.sh "$DEMO/profiles/slurm-smoke.sh"
export HOME=$DEMO/home
mkdir -p "$HOME"
"$NYMPH" install --server "$URL" --token-file "$DEMO/agent.token" --label demo \
  --training-profile "smoke=$DEMO/profiles/slurm-smoke.sh" | tee "$DEMO/install.out" | sed 's/^/   /'
LAUNCH=$(awk '/^launch ID:/ {print $NF; exit}' "$DEMO/install.out")
"$CONTROL" workers
note "the manager registered and holds one long poll open; it runs jobs as this Unix user ($(id -un))"

# run_job TITLE SUBMIT-ARGS... : submit, stream the logs while it runs, then show the job with its attempts.
run_job() {
  local title=$1 id
  shift
  id=$("$CONTROL" submit "$@")
  note "$title: job $id" "-- its stdout, streamed while it runs:"
  "$CONTROL" logs "$id" --follow | sed 's/^/   | /'
  "$CONTROL" job "$id" | sed -n '/^id:/,/^$/p;/^ATTEMPT  *LEASE/,/^$/p' | sed 's/^/   /'
  JOB_ID=$id
}

say "a process job: the manager runs it itself, on the login node"
run_job "process job" -- /bin/sh -c 'echo "hello from $(hostname) in $PWD"; for i in 1 2 3; do echo "step $i"; sleep 0.2; done'

slurm_job_of() { "$CONTROL" job "$1" --json | grep -o '"slurmJobId":"[0-9]*"' | head -n 1 | cut -d'"' -f4; }
if ((WITH_SLURM)); then
  say "a Slurm job: the manager renders an sbatch script, submits it, tracks it to its end"
  run_job "slurm-runner job" --runner slurm --slurm-option partition=debug -- \
    /bin/sh -c 'echo "slurm job $SLURM_JOB_ID on $(hostname), partition $SLURM_JOB_PARTITION"'
  SLURM_CMD_JOB=$(slurm_job_of "$JOB_ID")

  say "a training job: the approved profile 'smoke' goes through sbatch; its result comes back as JSON"
  run_job "training job" --runner slurm --kind training \
    --payload '{"profile":"smoke","parameters":{"message":"hello"}}'
  SLURM_TRAIN_JOB=$(slurm_job_of "$JOB_ID")

  say "what Slurm itself recorded (sacct)"
  for i in $(seq 50); do
    n=$(sacct -n -X -P -j "$SLURM_CMD_JOB,$SLURM_TRAIN_JOB" -o State | grep -c COMPLETED || true)
    [[ $n == 2 ]] && break
    sleep 0.2
  done
  sacct -X -j "$SLURM_CMD_JOB,$SLURM_TRAIN_JOB" -o JobID,JobName%36,Partition,Account,User,State,ExitCode,Elapsed |
    sed 's/^/   /'
else
  say "Slurm part skipped (--no-slurm)"
fi

say "all jobs"
"$CONTROL" jobs

say "stopping the manager: nymph launches, then nymph kill"
"$NYMPH" launches
"$NYMPH" kill "${LAUNCH:-demo}"
"$CONTROL" workers
note "the worker is gone and says why: exitReason sigterm"

say "done in $(($(date +%s) - T0)) s; what to look at next"
note "docs/protocol.md       the /v1 protocol the manager and nymph-control speak" \
  "docs/profiles.md       approved training profiles (packaging/examples/slurm-smoke.sh is the one above)" \
  "docs/install.md        installing on a real cluster: nymph doctor, nymph install, the systemd unit" \
  "tests/slurm-lab/       the Slurm cluster used above (start.sh, stop.sh, reset.sh)" \
  "tests/run-all.sh       every test, the real Slurm cluster included"
