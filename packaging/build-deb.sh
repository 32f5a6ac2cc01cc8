#!/usr/bin/env bash
# Builds the Debian package with dpkg-buildpackage from packaging/debian:
#   target/packages/stockade_VERSION_ARCH.deb
# usage: packaging/build-deb.sh [SOURCE_TREE]
#        packaging/build-deb.sh --check-deps   (only the build-dependency check below)
#
# dpkg-buildpackage wants ./debian at the top of the source tree; the repository keeps
# it in packaging/debian, so this copies the tree (packaging/source-tree.sh, with
# vendored crates) unless SOURCE_TREE names one made already, puts packaging/debian
# there as debian/, and runs `dpkg-buildpackage -b -us -uc -d` in it. -d skips the
# Build-Depends check: here the Rust toolchain usually comes from rustup, which dpkg
# does not know about. Before anything is built, the other Build-Depends of
# packaging/debian/control are checked with dpkg-checkbuilddeps, and the Rust toolchain
# with `cargo --version`: what is missing is named in one line, with the command that
# installs it (a build that fails after a minute on a missing dh_apparmor says nothing
# useful).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
check_build_deps() {
    local deps missing pkgs
    if ! command -v dpkg-checkbuilddeps >/dev/null; then
        echo "build-deb.sh: missing build dependencies: dpkg-dev; install them with: sudo apt-get install dpkg-dev debhelper dh-apparmor libc6-dev file" >&2
        exit 1
    fi
    # cargo and rustc usually come from rustup, which dpkg does not know: they are
    # checked by running cargo instead.
    deps=$(sed -n 's/^Build-Depends: //p' packaging/debian/control | tr ',' '\n' |
        sed 's/^ *//; s/ *$//' | grep -Ev '^(cargo|rustc)( |$)' | paste -sd, -)
    missing=$(dpkg-checkbuilddeps -d "$deps" packaging/debian/control 2>&1 |
        sed -n 's/.*Unmet build dependencies: //p') || true
    # A virtual package cannot be installed by name: debhelper provides debhelper-compat.
    pkgs=$(printf '%s\n' "$missing" | sed 's/([^)]*)//g' | tr ' ' '\n' | sed '/^$/d' |
        sed 's/^debhelper-compat$/debhelper/' | sort -u | paste -sd' ' -)
    local rust=""
    if ! cargo --version >/dev/null 2>&1; then
        pkgs="${pkgs:+$pkgs }cargo rustc"
        rust=" (cargo and rustc 1.85 or newer: the distribution's, or rustup's)"
    fi
    if [ -n "$pkgs" ]; then
        echo "build-deb.sh: missing build dependencies: $pkgs; install them with: sudo apt-get install $pkgs$rust" >&2
        exit 1
    fi
}
check_build_deps
[ "${1:-}" = --check-deps ] && exit 0
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
changelog_version=$(dpkg-parsechangelog -l packaging/debian/changelog -S Version)
if [ "$version" != "$changelog_version" ]; then
    echo "build-deb.sh: Cargo.toml says $version, packaging/debian/changelog $changelog_version" >&2
    exit 1
fi
out="$root/target/packages"
# A fixed build directory: cargo recompiles the workspace crates when their path
# changes, so a fixed one lets the next build reuse this one's work.
work="$out/deb"
rm -rf "$work"
mkdir -p "$work"
src=${1:-}
if [ -z "$src" ]; then
    src="$work/src"
    packaging/source-tree.sh "$src"
fi
build="$work/stockade-$version"
cp -a "$src" "$build"
rm -rf "$build/debian"
cp -a packaging/debian "$build/debian"
# Builds share one cargo target directory, so the RPM build after this one (and the
# next run) compiles only what changed.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
(cd "$build" && dpkg-buildpackage -b -us -uc -d >"$work/build.log" 2>&1) || {
    tail -n 40 "$work/build.log" >&2
    echo "build-deb.sh: dpkg-buildpackage failed (last lines above)" >&2
    exit 1
}
arch=$(dpkg --print-architecture)
mv "$work/stockade_${version}_${arch}.deb" "$out/"
echo "$out/stockade_${version}_${arch}.deb"
