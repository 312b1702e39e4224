#!/usr/bin/env bash
# static_vs_dynamic.sh - the static nymph against the dynamic one, side by side in one run:
# file size (stripped), start-up time (`nymph --version`, `nymph probe`: mean over RUNS executions) and the
# resident memory of an idle `nymph run` registered with a local nymph-control (VmRSS once it is serving).
#
#   bench/static_vs_dynamic.sh            builds what is missing: `static` preset (nymph, nymph-control) and
#                                         `release` preset (nymph, dynamic)
#   RUNS=500 bench/static_vs_dynamic.sh
#   NYMPH_STATIC_NYMPH=... NYMPH_DYNAMIC_NYMPH=... NYMPH_CONTROL=... bench/static_vs_dynamic.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

static=${NYMPH_STATIC_NYMPH:-build/static/agent/nymph}
dynamic=${NYMPH_DYNAMIC_NYMPH:-build/release/agent/nymph}
control=${NYMPH_CONTROL:-build/static/control/nymph-control}
runs=${RUNS:-200}

if [[ ! -x $static || ! -x $control ]]; then
  cmake --preset static >/dev/null && cmake --build --preset static --target nymph nymph-control
fi
if [[ ! -x $dynamic ]]; then
  cmake --preset release >/dev/null && cmake --build --preset release --target nymph
fi
static=$(realpath "$static") dynamic=$(realpath "$dynamic") control=$(realpath "$control")

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Polls `cmd` (an external state: a file the other process writes) every 20 ms until it succeeds, for at most
# `seconds`.
wait_until() {
  local seconds=$1; shift
  local deadline=$((SECONDS + seconds))
  until "$@"; do
    ((SECONDS < deadline)) || { echo "timed out waiting for: $*" >&2; return 1; }
    sleep 0.02
  done
}

# Mean wall time in ms of `runs` executions of the command.
mean_ms() {
  local i start end
  for ((i = 0; i < 10; i++)); do "$@" >/dev/null 2>&1; done  # warm the page cache
  start=$EPOCHREALTIME
  for ((i = 0; i < runs; i++)); do "$@" >/dev/null 2>&1; done
  end=$EPOCHREALTIME
  awk -v s="$start" -v e="$end" -v n="$runs" 'BEGIN { printf "%.2f", (e - s) * 1000 / n }'
}

# VmRSS / VmHWM (KiB) of an idle `nymph run` of binary $1, once its status.json says "serving".
idle_rss() {
  local bin=$1 dir
  dir=$(mktemp -d "$work/agent-XXXX")
  (umask 077; printf '%s\n' "$agent_token" >"$dir/token")
  cat >"$dir/config.toml" <<TOML
[server]
url = "$url"
token_file = "token"
[runners.slurm]
enabled = false
[log]
file = "agent.log"
TOML
  (cd "$dir" && exec "$bin" run --config config.toml) &
  local pid=$!
  pids+=("$pid")
  wait_until 30 grep -q '"state": *"serving"' "$dir/status.json" 2>/dev/null
  local rss hwm
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
  hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status")
  kill -TERM "$pid"
  wait "$pid" || true
  echo "$rss $hwm"
}

# One control plane for both agents.
"$control" token create --db "$work/cp.db" --role admin --name bench >/dev/null
agent_token=$("$control" token create --db "$work/cp.db" --role agent --name bench)
"$control" serve --listen 127.0.0.1:0 --db "$work/cp.db" >"$work/cp.out" 2>"$work/cp.err" &
pids+=("$!")
wait_until 30 grep -q '^listening on ' "$work/cp.out"
url=$(sed -n 's/^listening on //p' "$work/cp.out")

stripped_size() { strip -o "$work/stripped" "$1" && stat -c %s "$work/stripped"; }

read -r s_rss s_hwm < <(idle_rss "$static")
read -r d_rss d_hwm < <(idle_rss "$dynamic")
s_ver=$(mean_ms "$static" --version); d_ver=$(mean_ms "$dynamic" --version)
s_probe=$(mean_ms "$static" probe); d_probe=$(mean_ms "$dynamic" probe)

echo "nymph static vs dynamic ($(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg), $runs runs each)"
printf '%-34s %16s %16s\n' "" "static" "dynamic"
printf '%-34s %16s %16s\n' "binary" "$static" "$dynamic"
printf '%-34s %16s %16s\n' "file says" "$(file -b "$static" | grep -o 'statically linked\|static-pie linked' || echo '?')" \
  "$(file -b "$dynamic" | grep -o 'dynamically linked' || echo '?')"
printf '%-34s %13.1f MB %13.1f MB\n' "size, stripped" "$(awk -v b="$(stripped_size "$static")" 'BEGIN { print b / 1e6 }')" \
  "$(awk -v b="$(stripped_size "$dynamic")" 'BEGIN { print b / 1e6 }')"
printf '%-34s %13s ms %13s ms\n' "start-up: nymph --version (mean)" "$s_ver" "$d_ver"
printf '%-34s %13s ms %13s ms\n' "start-up: nymph probe (mean)" "$s_probe" "$d_probe"
printf '%-34s %13s KiB %12s KiB\n' "idle nymph run: VmRSS" "$s_rss" "$d_rss"
printf '%-34s %13s KiB %12s KiB\n' "idle nymph run: VmHWM (peak)" "$s_hwm" "$d_hwm"
