#!/usr/bin/env bash
# The provider's end-to-end test, run by .ci/run after the workspace is built: installs
# the published harness packages (pinned in package.json, with node 22 and TypeScript)
# into a scratch directory, builds the provider against their type definitions, and
# drives the harness's own bash executor through it against the real kernel.
# Needs the npm registry and `cargo build --workspace` output.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin="${CARGO_TARGET_DIR:-$repo/target}/debug"
(cd "$repo" && cargo build --workspace --quiet)
for b in stockade stockade-runner no-landlock netclient; do
  [ -x "$bin/$b" ] || { echo "integrations/dsh/test.sh: $bin/$b is missing: run cargo build --workspace first" >&2; exit 1; }
done

scratch="$(mktemp -d "${TMPDIR:-/tmp}/stockade-dsh-XXXXXX")"
# Fixtures live outside /tmp, which workspace-write grants.
fixtures=/var/tmp/stockade-dsh-e2e
mkdir -p "$fixtures"
trap 'rm -rf "$scratch"' EXIT
cp -r "$here/package.json" "$here/tsconfig.json" "$here/src" "$here/test" "$scratch/"
cd "$scratch"
if ! npm install --no-audit --no-fund --loglevel=error >npm.log 2>&1; then
  echo "integrations/dsh/test.sh: npm install of the harness packages failed:" >&2
  tail -20 npm.log >&2
  exit 1
fi
node="$scratch/node_modules/node/bin/node"
"$node" --version | grep -q '^v22\.' || { echo "integrations/dsh/test.sh: npm's node@22 did not install" >&2; exit 1; }
PATH="$scratch/node_modules/node/bin:$PATH" ./node_modules/.bin/tsc -p .
# A deadline for the whole run: a synchronous confine that never returns blocks the
# test's own event loop, and so its timers, for good.
STOCKADE="$bin/stockade" STOCKADE_RUNNER="$bin/stockade-runner" NO_LANDLOCK="$bin/no-landlock" NETCLIENT="$bin/netclient" \
  SCRATCH_BASE="$fixtures" timeout --kill-after=10 600 "$node" test/e2e.mjs || {
  status=$?
  [ "$status" != 124 ] || echo "integrations/dsh/test.sh: the end-to-end test did not finish within 600 s (a confine that never returned?)" >&2
  exit "$status"
}
