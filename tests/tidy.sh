#!/usr/bin/env bash
# tidy.sh - run clang-tidy (Debian's clang-tidy-14, checks in the root .clang-tidy) over nymph's own translation
# units. Needs the `ci` preset's compile database (cmake --preset ci writes build/ci/compile_commands.json).
# See docs/static-analysis.md for the check list and why each check is on or off.
#
#   tests/tidy.sh          what CI runs: the translation units changed since the commit in .ci/tidy-baseline (the
#                          last commit at which the whole tree was clean), plus every translation unit that
#                          includes, directly or through other project headers, a changed project header. Checks
#                          the whole tree instead when a .clang-tidy changed since the baseline, or when the
#                          baseline commit is not in this clone (shallow clone, tarball).
#   tests/tidy.sh --all    the whole tree
#   tests/tidy.sh FILE...  just these translation units (paths relative to the repository root)
#
# Environment: NYMPH_TIDY_JOBS (parallel clang-tidy processes, default 2), NYMPH_TIDY_BUILD (build directory with
# compile_commands.json, default build/ci), CLANG_TIDY (default clang-tidy-14), NYMPH_TIDY_DRY_RUN=1 (print the
# translation units that would be checked, check nothing).
# Exits 0 when clang-tidy reports nothing; otherwise prints every finding and exits 1 (2 on usage errors).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

jobs=${NYMPH_TIDY_JOBS:-2}
build=${NYMPH_TIDY_BUILD:-build/ci}
tidy=${CLANG_TIDY:-clang-tidy-14}
db=$build/compile_commands.json
baseline_file=.ci/tidy-baseline
# The project's source directories; everything else in the database (nothing today) and under build/ is skipped.
src_dirs='agent|bench|common|control|fuzz|http|installer|platform|protocol|runners|slurm|tests'

die() { echo "tidy: $*" >&2; exit 2; }
command -v "$tidy" >/dev/null || die "$tidy not found (Debian: apt-get install clang-tidy)"
[[ -f $db ]] || die "$db missing: run 'cmake --preset ci' first"

# Every project translation unit in the compile database, as a path relative to the repository root. CMake writes
# one `"file": "/abs/path",` line per entry.
mapfile -t db_tus < <(sed -n 's/^ *"file": "\(.*\)",\{0,1\}$/\1/p' "$db" | sed "s|^$root/||" |
  grep -E "^($src_dirs)/" | sort -u)
((${#db_tus[@]} > 0)) || die "no project translation units in $db"

in_db() {  # prints the arguments that are translation units of the database
  local f
  for f in "$@"; do printf '%s\n' "$f"; done | sort -u | comm -12 - <(printf '%s\n' "${db_tus[@]}")
}

# The changed translation units since the baseline, and the ones that include a changed header (transitively).
changed_tus() {
  local base=$1 changed headers includers seen h
  # Committed, staged and unstaged changes to tracked files, and untracked files not ignored.
  changed=$({ git diff --name-only "$base" --; git ls-files --others --exclude-standard; } | sort -u)
  echo "$changed" | grep -E '\.(cpp|cc)$' || true
  headers=$(echo "$changed" | grep -E "^($src_dirs)/.*\.(hpp|h|ipp)$" || true)
  seen=" "
  while [[ -n $headers ]]; do
    includers=""
    for h in $headers; do
      [[ $seen == *" $h "* ]] && continue
      seen+="$h "
      includers+=$(git grep -lF "#include \"$h\"" -- '*.cpp' '*.cc' '*.hpp' '*.h' '*.ipp' || true)$'\n'
    done
    echo "$includers" | grep -E '\.(cpp|cc)$' || true
    headers=$(echo "$includers" | grep -E '\.(hpp|h|ipp)$' | sort -u || true)
  done
}

if [[ ${1:-} == --all ]]; then
  tus=("${db_tus[@]}")
  why="whole tree (--all)"
elif (($# > 0)); then
  [[ $1 != -* ]] || die "usage: tests/tidy.sh [--all | FILE...]"
  mapfile -t tus < <(in_db "$@")
  ((${#tus[@]} == $#)) || die "not all of '$*' are project translation units of $db"
  why="the given files"
else
  base=$(tr -d '[:space:]' <"$baseline_file" 2>/dev/null || true)
  if [[ -z $base ]] || ! git rev-parse -q --verify "$base^{commit}" >/dev/null 2>&1; then
    tus=("${db_tus[@]}")
    why="whole tree (baseline '${base:-none}' from $baseline_file is not in this clone)"
  elif [[ -n $(git diff --name-only "$base" -- .clang-tidy '*/.clang-tidy'; git ls-files --others \
                 --exclude-standard -- .clang-tidy '*/.clang-tidy') ]]; then
    tus=("${db_tus[@]}")
    why="whole tree (a .clang-tidy changed since baseline ${base:0:12})"
  else
    mapfile -t tus < <(in_db $(changed_tus "$base"))
    why="changed since baseline ${base:0:12} (and their includers)"
  fi
fi

echo "tidy: ${#tus[@]} of ${#db_tus[@]} translation units: $why; $jobs jobs"
((${#tus[@]} > 0)) || { echo "tidy: nothing to check"; exit 0; }
[[ -z ${NYMPH_TIDY_DRY_RUN:-} ]] || { printf '%s\n' "${tus[@]}"; exit 0; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
start=$SECONDS
# One log per translation unit so parallel output never interleaves; a failing unit leaves a .fail marker.
printf '%s\0' "${tus[@]}" | xargs -0 -P "$jobs" -I{} sh -c '
  log="$2/$(printf %s "$3" | tr / _)"
  "$1" -p "$4" --quiet --extra-arg=-Wno-unknown-warning-option "$3" >"$log" 2>&1 || : >"$log.fail"
' sh "$tidy" "$out" {} "$build" || true

failed=0
for f in "${tus[@]}"; do
  log="$out/$(printf %s "$f" | tr / _)"
  if [[ -e $log.fail ]]; then
    failed=$((failed + 1))
    echo "=== $f"
    # clang-tidy's own chatter ("N warnings generated", "Suppressed N warnings") is not a finding.
    grep -vE '^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$|^Suppressed [0-9]+ warnings|^Use -header-filter' \
      "$log" || true
  fi
done
echo "tidy: ${#tus[@]} translation units in $((SECONDS - start)) s; $failed with findings"
((failed == 0))
