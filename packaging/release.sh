#!/usr/bin/env bash
# release.sh - every release artifact from one command (Debian 12 build host; docs/install.md).
#
# Builds the `static` preset (fully static, stripped nymph and nymph-control: Release, -static, static glibc,
# OpenSSL and Boost, header-only fmt/spdlog/toml++) and writes to build/static/dist/:
#   nymph-<version>-linux-x86_64.tar.gz (+ .sha256)   bin/nymph, bin/nymph-control, config.example.toml,
#                                                     examples/, systemd/, docs/, README.md, LICENSE
#   nymph_<version>_amd64.deb, nymph-<version>-1.x86_64.rpm   (CPack; both binaries, docs, user unit)
#   SHA256SUMS                                         all of the above
# Needs cmake, ninja, g++, rpm (rpmbuild), dpkg-dev: packaging/deps-debian.sh installs them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
build=$root/build/static
dist=$build/dist

cmake --preset static >/dev/null
cmake --build --preset static --target nymph nymph-control

version=$("$build/agent/nymph" --version | awk '{print $2}')
name=nymph-$version-linux-x86_64
rm -rf "$dist"
mkdir -p "$dist"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# The tarball: a directory a person unpacks anywhere (no root, no installation step).
top=$stage/$name
mkdir -p "$top/bin" "$top/docs" "$top/systemd" "$top/examples"
install -m 0755 "$build/agent/nymph" "$build/control/nymph-control" "$top/bin/"
install -m 0644 packaging/config.example.toml README.md LICENSE "$top/"
install -m 0644 docs/*.md "$top/docs/"
install -m 0644 packaging/systemd/nymph.service packaging/systemd/README.md "$top/systemd/"
if compgen -G 'packaging/examples/*' >/dev/null; then cp -a packaging/examples/. "$top/examples/"; fi
tar -C "$stage" --owner=0 --group=0 --numeric-owner --sort=name -czf "$dist/$name.tar.gz" "$name"
(cd "$dist" && sha256sum "$name.tar.gz" >"$name.tar.gz.sha256")

# The packages, from the same build tree (its install rules: packaging/CMakeLists.txt).
(cd "$build" && cpack --config CPackConfig.cmake >/dev/null)
rm -rf "$dist/_CPack_Packages"
(cd "$dist" && sha256sum -- *.tar.gz *.deb *.rpm >SHA256SUMS)

ls -l "$dist"
