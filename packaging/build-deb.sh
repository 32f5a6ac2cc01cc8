#!/usr/bin/env bash
# Builds a binary Debian package from the tree build-dist.sh stages:
#   target/stockade_VERSION_ARCH.deb
# usage: packaging/build-deb.sh
# Needs dpkg-deb (and `file`, used by build-dist.sh). Not used by CI.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
arch=$(dpkg --print-architecture)
stage=$(mktemp -d "$root/target/deb.XXXXXX")
trap 'rm -rf "$stage"' EXIT
chmod 0755 "$stage"

packaging/build-dist.sh "$stage" >/dev/null
mkdir -p "$stage/DEBIAN"
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" \
    -e "s/@SIZE@/$(du -sk --exclude=DEBIAN "$stage" | cut -f1)/" \
    packaging/debian-control.in > "$stage/DEBIAN/control"
out="$root/target/stockade_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$stage" "$out"
