#!/usr/bin/env bash
# demo.sh - build nymph and run its main job end to end on this machine (Debian 12, as root).
# Grows with the project; today it builds the release preset and shows what this host would advertise.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
packaging/deps-debian.sh --no-slurm
cmake --preset release >/dev/null
cmake --build --preset release
build/release/agent/nymph --version
build/release/agent/nymph probe
