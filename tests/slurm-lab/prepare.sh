#!/usr/bin/env bash
# prepare.sh - create what the test suite needs before anything builds or runs it (as root).
#
# The Slurm tests run as the unprivileged lab user (`runuser -u nymphci --`), and so does their test
# discovery, which CMake runs at *build* time. So the user must exist before the build, not only once the
# lab cluster is started by the ctest fixture. This script:
#   - creates the lab user with its home directory (SLURM_LAB_USER, default nymphci) if it is missing;
#   - checks that the lab user can read the source tree (and so the build tree inside it), and says how to
#     fix it if not - a clone under /root (mode 0700) is the usual cause.
# Idempotent; tests/run-all.sh calls it after installing packages. reset.sh undoes it.
#
#   tests/slurm-lab/prepare.sh
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
source "$SCRIPT_DIR/common.sh"
export PATH=$PATH:/usr/sbin:/sbin
SOURCE_DIR=$(cd "$SCRIPT_DIR/../.." && pwd)

[[ $EUID -eq 0 ]] || { echo "prepare.sh must be run as root (it creates the lab user)" >&2; exit 1; }

lab_ensure_user

if ! (cd / && runuser -u "$LAB_USER" -- test -r "$SOURCE_DIR/CMakeLists.txt" -a -x "$SOURCE_DIR/tests"); then
  blocker=$SOURCE_DIR
  probe=$SOURCE_DIR
  while [[ $probe != / ]]; do
    (cd / && runuser -u "$LAB_USER" -- test -x "$probe") || blocker=$probe
    probe=$(dirname "$probe")
  done
  echo "[prepare] ERROR: the lab user '$LAB_USER' cannot read $SOURCE_DIR (blocked at $blocker)." >&2
  echo "[prepare] The Slurm tests run as that user from the build tree inside the clone. Clone into a" >&2
  echo "[prepare] directory other users can reach (e.g. /opt or /srv; /root is private), or allow traversal:" >&2
  echo "[prepare]   chmod o+x $blocker" >&2
  exit 1
fi
echo "[prepare] lab user $LAB_USER ready ($(id "$LAB_USER")); it can read $SOURCE_DIR"
