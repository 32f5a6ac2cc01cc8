#!/usr/bin/env bash
# Exports the repository's files (tracked, plus untracked ones not ignored: what a
# fresh clone of this working tree would hold) into DEST and vendors every crate the
# build needs into DEST/vendor, so the packages build offline from DEST alone.
#   usage: packaging/source-tree.sh DEST
# DEST must not exist. Uses the crates registry once, through cargo, for `cargo vendor`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:?usage: packaging/source-tree.sh DEST}
if [ -e "$dest" ]; then
    echo "source-tree.sh: $dest exists already" >&2
    exit 1
fi
mkdir -p "$dest"
cd "$root"
# Files deleted in the working tree but still tracked are skipped.
git ls-files -z --cached --others --exclude-standard \
    | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done \
    | tar --null -T - -cf - | tar -xf - -C "$dest"
(cd "$dest" && cargo vendor --locked --quiet vendor >/dev/null)
