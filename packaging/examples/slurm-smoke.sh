#!/bin/sh
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=1
#SBATCH --mem=100M
#SBATCH --time=00:05:00
#
# nymph training profile "smoke": a CPU transport smoke test, not a trainer. It proves that a training job
# travels from the control plane through the agent and Slurm to a compute node and that its result comes
# back: it reads `message` from its input, and writes {"message": ..., "host": ..., "slurmJobId": ...}.
#
#   nymph run --training-profile smoke=/opt/nymph/profiles/slurm-smoke.sh ...
#   nymph-control submit --runner slurm --kind training --payload '{"profile":"smoke","parameters":{"message":"hello"}}'
#
# Usage: slurm-smoke.sh INPUT.json RESULT.json   (or NYMPH_INPUT / NYMPH_RESULT). The #SBATCH lines above
# are its resources and its own time limit (5 minutes); under the process runner it runs in milliseconds.
#
# Parameters are data: the input is scanned by awk as text and the message's JSON literal is copied into the
# result as it is (it is valid JSON because nymph wrote the input). Nothing from the input is ever evaluated
# by the shell, and no tool beyond POSIX sh and awk is needed (no jq, no python).
set -eu

input=${1:-${NYMPH_INPUT:-}}
result=${2:-${NYMPH_RESULT:-}}
if [ -z "$input" ] || [ -z "$result" ]; then
  echo "usage: slurm-smoke.sh INPUT.json RESULT.json (or set NYMPH_INPUT and NYMPH_RESULT)" >&2
  exit 2
fi
if [ ! -f "$input" ]; then
  echo "slurm-smoke: input file $input does not exist" >&2
  exit 2
fi

SMOKE_HOST=$(hostname 2>/dev/null || uname -n)
export SMOKE_HOST
LC_ALL=C
export LC_ALL

tmp="$result.tmp.$$"
trap 'rm -f "$tmp"' EXIT
# The awk program: finds the top-level key "message" of the JSON object in the input, copies its value
# (any JSON value; null when absent) verbatim, and prints the result object.
awk '
function fail(why) { print "slurm-smoke: input is not a JSON object: " why > "/dev/stderr"; failed = 1; exit 3 }
function ch() { return substr(doc, i, 1) }
function skip_ws(   c) {
  for (;;) { c = ch(); if (c == " " || c == "\t" || c == "\n" || c == "\r") i++; else return }
}
# i is at a double quote: moves i past the closing quote.
function skip_string(   c) {
  i++
  while (i <= n) {
    c = ch()
    if (c == "\\") i += 2
    else if (c == "\"") { i++; return }
    else i++
  }
  fail("unterminated string")
}
# i is at the start of a value: moves i past it.
function skip_value(   c, depth) {
  c = ch()
  if (c == "\"") { skip_string(); return }
  if (c == "{" || c == "[") {
    depth = 0
    while (i <= n) {
      c = ch()
      if (c == "\"") { skip_string(); continue }
      if (c == "{" || c == "[") depth++
      else if (c == "}" || c == "]") { depth--; if (depth == 0) { i++; return } }
      i++
    }
    fail("unterminated value")
  }
  while (i <= n) {
    c = ch()
    if (c == "," || c == "}" || c == "]" || c == " " || c == "\t" || c == "\n" || c == "\r") break
    i++
  }
}
# s as a JSON string literal.
function quote(s,   out, k, c) {
  out = ""
  for (k = 1; k <= length(s); k++) {
    c = substr(s, k, 1)
    if (c == "\\" || c == "\"") out = out "\\" c
    else if (c < " ") out = out sprintf("\\u%04x", index(ctl, c))
    else out = out c
  }
  return "\"" out "\""
}
BEGIN { for (k = 1; k < 32; k++) ctl = ctl sprintf("%c", k) }
{ doc = doc (NR > 1 ? "\n" : "") $0 }
END {
  if (failed) exit 3
  n = length(doc); i = 1; message = "null"
  skip_ws()
  if (ch() != "{") fail("it does not start with {")
  i++
  for (;;) {
    skip_ws()
    if (ch() == "}") break
    if (ch() != "\"") fail("expected a member name")
    start = i; skip_string(); key = substr(doc, start, i - start)
    skip_ws()
    if (ch() != ":") fail("expected :")
    i++; skip_ws()
    start = i; skip_value()
    if (key == "\"message\"") message = substr(doc, start, i - start)
    skip_ws()
    if (ch() == ",") { i++; continue }
    if (ch() == "}") break
    fail("expected , or }")
  }
  job = ENVIRON["SLURM_JOB_ID"]
  printf "{\"message\":%s,\"host\":%s,\"slurmJobId\":%s}\n", message, quote(ENVIRON["SMOKE_HOST"]), (job ~ /^[0-9]+$/ ? "\"" job "\"" : "null")
}
' "$input" >"$tmp"
mv -f "$tmp" "$result"
trap - EXIT
echo "slurm-smoke: result written on ${SMOKE_HOST} (Slurm job ${SLURM_JOB_ID:-none})"
