#!/usr/bin/env bash
# deps-debian.sh - install every Debian 12 package nymph needs to build, test and run its Slurm lab.
#
# Idempotent: packages already installed are skipped and no network is used when nothing is missing.
# Fails loudly, naming the package, when a package cannot be installed.
#
#   packaging/deps-debian.sh            build + test dependencies and the Slurm lab packages
#   packaging/deps-debian.sh --no-slurm build + test dependencies only
set -euo pipefail

[[ $EUID -eq 0 ]] || { echo "deps-debian.sh: must run as root (apt-get)" >&2; exit 1; }

build_pkgs=(
  build-essential cmake ninja-build ccache pkg-config git file binutils curl ca-certificates procps
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev libboost-filesystem1.81-dev libboost-system1.81-dev
  libtomlplusplus-dev libspdlog-dev libfmt-dev libssl-dev libsqlite3-dev sqlite3 libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # static analysis: clang-tidy (Debian 12's is clang-tidy-14; tests/tidy.sh)
  clang-tidy
  # deployment: .rpm packaging, static checks (file, objdump), test CAs (openssl)
  rpm openssl
  # fuzzing: the libFuzzer targets of fuzz/ (preset fuzz)
  clang-14 libclang-rt-14-dev
)
slurm_pkgs=(munge slurm-client slurmctld slurmd slurmdbd mariadb-server)

want=("${build_pkgs[@]}")
[[ ${1:-} == --no-slurm ]] || want+=("${slurm_pkgs[@]}")

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

missing=()
for p in "${want[@]}"; do installed "$p" || missing+=("$p"); done

if ((${#missing[@]} == 0)); then
  echo "[deps] all ${#want[@]} packages already installed"
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
apt_opts=(-q -o DPkg::Lock::Timeout=600 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
# Keep maintainer scripts from starting munge/mariadb/slurm services: the lab runs its own instances.
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod 0755 "$policy"
  trap 'rm -f "$policy"' EXIT
fi

echo "[deps] installing: ${missing[*]}"
apt-get "${apt_opts[@]}" update || echo "[deps] warning: apt-get update reported errors; trying to install anyway" >&2
# libboost1.81-dev conflicts with the default libboost-dev (1.74) headers.
if installed libboost1.74-dev; then
  apt-get "${apt_opts[@]}" remove -y libboost1.74-dev libboost-dev || true
fi
if ! apt-get "${apt_opts[@]}" install -y --no-install-recommends "${missing[@]}"; then
  echo "[deps] apt-get install failed; checking packages one by one" >&2
fi

failed=()
for p in "${missing[@]}"; do installed "$p" || failed+=("$p"); done
if ((${#failed[@]} > 0)); then
  echo "[deps] ERROR: these packages could not be installed: ${failed[*]}" >&2
  exit 1
fi
echo "[deps] installed ${#missing[@]} packages"
