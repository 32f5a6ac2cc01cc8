#!/usr/bin/env bash
# Builds stockade for distribution and stages an install tree:
#
#   DESTDIR/usr/bin/stockade                           the launcher
#   DESTDIR/usr/libexec/stockade/stockade-runner       the runner
#   DESTDIR/usr/share/man/man1/stockade*.1             man pages (uncompressed)
#   DESTDIR/usr/share/bash-completion/completions/stockade
#   DESTDIR$ZSH_COMPLETION_DIR/_stockade               (default /usr/share/zsh/site-functions)
#   DESTDIR/usr/share/fish/vendor_completions.d/stockade.fish
#   DESTDIR/usr/share/doc/stockade/{README.md,provider-contract.md}
#
# usage: packaging/build-dist.sh [DESTDIR]     (default: target/dist)
#
# Both binaries are linked statically (`-C target-feature=+crt-static`, static-pie,
# still position independent): one of them starts before every confined command and the
# other before that, and skipping the dynamic loader is most of what makes the runner
# start as fast as a static C runner and saves the launcher about as much again
# (bench/results.md has the numbers). They are built against musl where the toolchain
# has that target, else glibc (packaging/target-triple says why, and how to choose);
# the line "build-dist.sh: building for TARGET" on stderr says which. Neither uses NSS or
# dlopen, so static glibc is safe here. The workspace's release profile (Cargo.toml) supplies LTO,
# one codegen unit, panic=abort and stripping. Extra RUSTFLAGS from the environment are
# kept (distro hardening flags, remap-path-prefix).
#
# Man pages (but the runner's, which is hand-written in packaging/man/) and completions
# are generated from the launcher's clap definitions by stockade-docgen, built here
# too, so they always match `--help`. With a `vendor/` directory in the tree (made by
# `cargo vendor`, as packaging/source-tree.sh does), the build is offline and uses only
# those crates.
#
# The launcher finds the runner at $STOCKADE_RUNNER, else next to itself, else in
# ../libexec/stockade/ beside its bin directory, else at
# /usr/libexec/stockade/stockade-runner: the layout below needs no configuration.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$root/target/dist}
zsh_dir=${ZSH_COMPLETION_DIR:-/usr/share/zsh/site-functions}
cd "$root"

offline=()
if [ -d "$root/vendor" ]; then
    offline=(--offline
        --config 'source.crates-io.replace-with="vendored-sources"'
        --config "source.vendored-sources.directory=\"$root/vendor\"")
fi

target=$("$root/packaging/target-triple")
echo "build-dist.sh: building for $target" >&2
# An explicit --target keeps crt-static away from build scripts and proc macros, which
# must stay dynamic.
RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-C target-feature=+crt-static" \
    cargo build "${offline[@]}" --release --locked --target "$target" \
    -p stockade-launcher -p stockade-runner -p stockade-docgen

# Cargo's output directory, wherever CARGO_TARGET_DIR puts it.
out=${CARGO_TARGET_DIR:-$root/target}/$target/release
install -D -m 0755 "$out/stockade" "$dest/usr/bin/stockade"
install -D -m 0755 "$out/stockade-runner" \
    "$dest/usr/libexec/stockade/stockade-runner"

generated=$(mktemp -d)
trap 'rm -rf "$generated"' EXIT
"$out/stockade-docgen" "$generated"
install -d "$dest/usr/share/man/man1"
install -m 0644 "$generated"/man/*.1 packaging/man/stockade-runner.1 "$dest/usr/share/man/man1/"
install -D -m 0644 "$generated/completions/stockade.bash" \
    "$dest/usr/share/bash-completion/completions/stockade"
install -D -m 0644 "$generated/completions/_stockade" "$dest$zsh_dir/_stockade"
install -D -m 0644 "$generated/completions/stockade.fish" \
    "$dest/usr/share/fish/vendor_completions.d/stockade.fish"
install -D -m 0644 README.md "$dest/usr/share/doc/stockade/README.md"
install -D -m 0644 docs/provider-contract.md "$dest/usr/share/doc/stockade/provider-contract.md"
# Lets an ordinary user's stockade create the namespace stage's user namespace where
# AppArmor restricts them (Ubuntu 23.10 and later); the packages load it on install.
install -D -m 0644 packaging/apparmor/stockade "$dest/etc/apparmor.d/stockade"

# Refuse to stage a binary that is not static after all (e.g. a toolchain that ignored
# the flag): it would work, but slower, and nobody would notice.
for bin in usr/bin/stockade usr/libexec/stockade/stockade-runner; do
    if command -v file >/dev/null && ! file -b "$dest/$bin" | grep -q 'static'; then
        echo "build-dist.sh: the staged $bin is not statically linked" >&2
        exit 1
    fi
done
echo "staged in $dest:"
(cd "$dest" && find . -type f | sort)
