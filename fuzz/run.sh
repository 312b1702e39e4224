#!/usr/bin/env bash
# run.sh - runs every fuzz target of the `fuzz` preset for a fixed time, at most two at once.
#
#   fuzz/run.sh [SECONDS] [TARGET...]      default: 20 seconds, every target
#
# Build first: cmake --preset fuzz && cmake --build --preset fuzz. Each target starts from its seed corpus
# (fuzz/corpus/<name>, read only) plus what earlier runs found (build/fuzz/corpus/<name>, where new inputs go),
# with its dictionary (fuzz/<name>.dict) when there is one. Logs: build/fuzz/logs/<name>.log. A crash, leak,
# timeout or violated property leaves its input in build/fuzz/crashes/<name>/ and makes this script exit 1,
# naming the target and the file. Environment: NYMPH_FUZZ_JOBS (default 2) targets at once, NYMPH_FUZZ_BUILD
# (default build/fuzz) the build directory, NYMPH_FUZZ_SEED a fixed libFuzzer seed and NYMPH_FUZZ_RUNS
# a cap on inputs per target (CI sets both, so its runs stay alike, though libFuzzer is not bit-for-bit
# repeatable).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds=${1:-20}
shift || true
build=${NYMPH_FUZZ_BUILD:-build/fuzz}
jobs=${NYMPH_FUZZ_JOBS:-2}
targets=("$@")
if ((${#targets[@]} == 0)); then
  for f in fuzz/corpus/*/; do targets+=("$(basename "$f")"); done
fi

mkdir -p "$build/logs"
run_one() {
  local name=$1 bin="$build/fuzz/fuzz_$1"
  local found="$build/corpus/$name" crashes="$build/crashes/$name"
  [[ -x $bin ]] || { echo "run.sh: $bin is not built (cmake --build --preset fuzz)" >&2; return 1; }
  mkdir -p "$found" "$crashes"
  local dict=()
  [[ -f fuzz/$name.dict ]] && dict=(-dict="fuzz/$name.dict")
  # -rss_limit_mb and -timeout make runaway memory and slow inputs findings too; -max_len bounds one input.
  local seed=()
  [[ -n ${NYMPH_FUZZ_SEED:-} ]] && seed=(-seed="$NYMPH_FUZZ_SEED")
  [[ -n ${NYMPH_FUZZ_RUNS:-} ]] && seed+=(-runs="$NYMPH_FUZZ_RUNS")
  nice -n 10 "$bin" "$found" "fuzz/corpus/$name" "${dict[@]}" "${seed[@]}" -max_total_time="$seconds" -max_len=16384 \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$crashes/" \
    >"$build/logs/$name.log" 2>&1
}

failed=0
declare -A running=()  # pid -> target
# Waits for any running target and reports it.
wait_any() {
  local pid status=0
  wait -n -p pid "${!running[@]}" || status=$?
  local name=${running[$pid]}
  unset "running[$pid]"
  if ((status == 0)); then
    local stats
    stats=$(grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE)' "$build/logs/$name.log" | tail -1 || true)
    echo "run.sh: $name ok: $stats"
  else
    failed=1
    local artifact
    artifact=$(ls -t "$build/crashes/$name"/* 2>/dev/null | head -1 || true)
    echo "run.sh: $name FAILED: ${artifact:-no artifact} (log: $build/logs/$name.log)" >&2
    grep -E 'ERROR|property violated|SUMMARY' "$build/logs/$name.log" | head -5 >&2 || true
  fi
}
for name in "${targets[@]}"; do
  ((${#running[@]} < jobs)) || wait_any
  run_one "$name" &
  running[$!]=$name
done
while ((${#running[@]} > 0)); do wait_any; done
exit "$failed"
