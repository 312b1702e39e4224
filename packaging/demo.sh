#!/usr/bin/env bash
# demo.sh - build nymph and run its main job end to end on this machine (Debian 12, as root).
#
# Starts nymph-control on an embedded SQLite database, creates tokens, `nymph install`s a real launch
# against it, submits a process job (and, when the lab Slurm cluster is up, a Slurm job), streams their
# logs, prints the workers and jobs, then `nymph kill`s the launch and shows its exitReason - and stops
# everything it started. Everything lives in a temporary directory removed at the end.
#
#   packaging/demo.sh              build (release preset) and run
#   NYMPH_DEMO_SKIP_BUILD=1 ...    reuse build/release
#   NYMPH_DEMO_KEEP=1 ...          keep the temporary directory (logs, database) for a look afterwards
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

if [[ ${NYMPH_DEMO_SKIP_BUILD:-0} != 1 ]]; then
  say "installing dependencies and building (release preset)"
  packaging/deps-debian.sh --no-slurm
  cmake --preset release >/dev/null
  cmake --build --preset release
fi
NYMPH=$ROOT/build/release/agent/nymph
CONTROL=$ROOT/build/release/control/nymph-control

DEMO=$(mktemp -d /tmp/nymph-demo.XXXXXX)
chmod 0755 "$DEMO"
server_pid=""
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
  if [[ ${NYMPH_DEMO_KEEP:-0} == 1 ]]; then echo "kept $DEMO"; else rm -rf "$DEMO"; fi
}
trap cleanup EXIT

say "control plane: nymph-control serve on an embedded SQLite database"
(umask 077 && "$CONTROL" token create --db "$DEMO/control.db" --role admin --name demo-admin >"$DEMO/admin.token")
(umask 077 && "$CONTROL" token create --db "$DEMO/control.db" --role agent --name demo-agent >"$DEMO/agent.token")
: >"$DEMO/serve.out"
"$CONTROL" serve --listen 127.0.0.1:0 --db "$DEMO/control.db" >"$DEMO/serve.out" 2>"$DEMO/serve.log" &
server_pid=$!
until read -r _ _ URL <"$DEMO/serve.out" 2>/dev/null && [[ -n ${URL:-} ]]; do
  kill -0 "$server_pid" || { cat "$DEMO/serve.log"; exit 1; }
  sleep 0.1
done
echo "listening on $URL"
export NYMPH_CONTROL_URL=$URL NYMPH_CONTROL_TOKEN_FILE=$DEMO/admin.token

say "nymph install: one launch (a detached daemon) against it"
export HOME=$DEMO/home
mkdir -p "$HOME"
if [[ -f /var/lib/nymph-slurm-lab/env.sh ]] && command -v sbatch >/dev/null && scontrol ping >/dev/null 2>&1; then
  # shellcheck disable=SC1091
  . /var/lib/nymph-slurm-lab/env.sh
  SLURM_UP=1
else
  SLURM_UP=0
fi
"$NYMPH" install --server "$URL" --token-file "$DEMO/agent.token" --label demo | tee "$DEMO/install.out"
LAUNCH=$(awk '/^launch ID:/ {print $NF; exit}' "$DEMO/install.out")

say "workers"
"$CONTROL" workers

say "a process job, its logs streamed while it runs"
"$CONTROL" submit --follow -- /bin/sh -c 'echo "hello from $(hostname) in $PWD"; for i in 1 2 3; do echo "step $i"; sleep 0.2; done'

if [[ $SLURM_UP == 1 ]]; then
  say "a Slurm job through the login-node manager (lab cluster is up)"
  "$CONTROL" submit --runner slurm --slurm-option partition=debug --follow -- /bin/sh -c 'echo "slurm job $SLURM_JOB_ID on $(hostname)"'
else
  say "no lab Slurm cluster running: skipping the Slurm job (tests/slurm-lab/start.sh starts one)"
fi

say "jobs"
"$CONTROL" jobs

say "nymph launches, then nymph kill"
"$NYMPH" launches
"$NYMPH" kill "${LAUNCH:-demo}"

say "workers after the stop (status gone, exitReason sigterm)"
"$CONTROL" workers
