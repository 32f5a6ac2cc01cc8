#!/usr/bin/env bash
# Builds the RPM with rpmbuild from packaging/stockade.spec, offline from a source
# tarball with vendored crates:
#   target/packages/stockade-VERSION-1.ARCH.rpm
# usage: packaging/build-rpm.sh [SOURCE_TREE]
#
# The tarball is made from SOURCE_TREE, or from a fresh packaging/source-tree.sh copy.
# --nodeps: on a non-RPM distribution (Debian ships rpmbuild as the `rpm` package) the
# RPM database knows none of the BuildRequires; the toolchain is whatever cargo is on
# PATH.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
out="$root/target/packages"
# A fixed build directory (rpmbuild's BUILD is beneath it): cargo recompiles the
# workspace crates when their path changes, so the next build reuses this one's work.
work="$out/rpm"
rm -rf "$work"
mkdir -p "$work"
src=${1:-}
if [ -z "$src" ]; then
    src="$work/src"
    packaging/source-tree.sh "$src"
fi
mkdir -p "$work/top/SOURCES"
tar -C "$(dirname "$src")" --transform "s|^$(basename "$src")|stockade-$version|" \
    -czf "$work/top/SOURCES/stockade-$version.tar.gz" "$(basename "$src")"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
rpmbuild -bb --nodeps --define "_topdir $work/top" --define "version $version" \
    packaging/stockade.spec >"$work/build.log" 2>&1 || {
    tail -n 40 "$work/build.log" >&2
    echo "build-rpm.sh: rpmbuild failed (last lines above)" >&2
    exit 1
}
find "$work/top/RPMS" -name '*.rpm' -exec mv {} "$out/" \; -exec basename {} \; \
    | sed "s|^|$out/|"
