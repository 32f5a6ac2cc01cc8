#!/usr/bin/env bash
# Builds stockade for distribution and stages an install tree:
#
#   DESTDIR/usr/bin/stockade                           the launcher
#   DESTDIR/usr/libexec/stockade/stockade-runner       the runner, statically linked
#
# usage: packaging/build-dist.sh [DESTDIR]     (default: target/dist)
#
# The runner is linked statically (`-C target-feature=+crt-static`, glibc static-pie):
# it is exec'd before every confined command, and skipping the dynamic loader is most of
# what makes it start as fast as a C runner (bench/results.md has the numbers). The
# launcher stays dynamically linked; it runs once per command and its start-up is not on
# the measured path twice. The workspace's release profile (Cargo.toml) supplies LTO,
# one codegen unit, panic=abort and stripping. Extra RUSTFLAGS from the environment are
# kept (distro hardening flags, remap-path-prefix).
#
# The launcher finds the runner at $STOCKADE_RUNNER, else next to itself, else at
# /usr/libexec/stockade/stockade-runner: the layout below needs no configuration.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$root/target/dist}
cd "$root"

host=$(rustc -vV | sed -n 's/^host: //p')
# An explicit --target keeps crt-static away from build scripts and proc macros, which
# must stay dynamic.
cargo build --release --locked -p stockade-launcher
RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-C target-feature=+crt-static" \
    cargo build --release --locked -p stockade-runner --target "$host"

install -D -m 0755 target/release/stockade "$dest/usr/bin/stockade"
install -D -m 0755 "target/$host/release/stockade-runner" \
    "$dest/usr/libexec/stockade/stockade-runner"
install -D -m 0644 README.md "$dest/usr/share/doc/stockade/README.md"

# Refuse to stage a runner that is not static after all (e.g. a toolchain that ignored
# the flag): it would work, but slower, and nobody would notice.
if command -v file >/dev/null &&
    ! file -b "$dest/usr/libexec/stockade/stockade-runner" | grep -q 'static'; then
    echo "build-dist.sh: the staged runner is not statically linked" >&2
    exit 1
fi
echo "staged in $dest:"
(cd "$dest" && find . -type f | sort)
