#!/usr/bin/env bash
# The packaging check CI runs after the test suite (.ci/run), as root:
#   1. build the .deb (dpkg-buildpackage) and lint it (lintian: no error or warning);
#   2. install it with dpkg -i; from the installed paths, as root and as an ordinary
#      user: stockade probe, a confined command (denied outside, allowed inside),
#      confine + explain + the runner + classify;
#   3. man stockade and man stockade-runner render; the bash completion loads and
#      completes;
#   4. purge it and check that no file of the package is left;
#   5. build the RPM with rpmbuild from the same vendored source tree.
# Installs what it needs with apt-get (dpkg-dev debhelper dh-apparmor lintian rpm
# rpmlint man-db bash-completion file). Refuses to run where a stockade package is installed already,
# since it purges the package at the end. Prints its total time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
start=$(date +%s)
say() { printf 'check.sh: %s\n' "$*"; }
fail() { printf 'check.sh: FAILED: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "run as root (it installs and purges a package)"
if dpkg-query -W -f '${Status}' stockade 2>/dev/null | grep -q 'installed'; then
    fail "a stockade package is installed already; purge it first (this check would)"
fi

need=()
for tool in dpkg-buildpackage:dpkg-dev dh:debhelper dh_apparmor:dh-apparmor lintian:lintian rpmbuild:rpm \
    rpmlint:rpmlint man:man-db file:file; do
    command -v "${tool%%:*}" >/dev/null || need+=("${tool#*:}")
done
[ -f /usr/share/bash-completion/bash_completion ] || need+=(bash-completion)
if [ ${#need[@]} -gt 0 ]; then
    say "installing ${need[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${need[@]}" >/dev/null
fi

# Not beneath /tmp: stockade refuses a control directory (and binaries) where confined
# commands may write.
work=$(mktemp -d /var/lib/stockade-check.XXXXXX)
chmod 0755 "$work"
cleanup() {
    dpkg-query -W stockade >/dev/null 2>&1 && dpkg --purge stockade >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT

say "exporting the source tree with vendored crates"
packaging/source-tree.sh "$work/src"

say "building the .deb"
deb=$(packaging/build-deb.sh "$work/src" | tail -n 1)
say "lintian $deb"
lintian --fail-on error,warning --tag-display-limit 0 "$deb" \
    || fail "lintian reports errors or warnings"
# The profile is loaded on install where AppArmor is enabled (dh_apparmor's snippet).
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./postinst 2>/dev/null | grep -q 'apparmor_parser' \
    || fail "the .deb's postinst does not load the AppArmor profile"
# ... and unloaded on removal, which dh_apparmor leaves to the package (its prerm).
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./prerm 2>/dev/null | grep -q 'apparmor_parser -R' \
    || fail "the .deb's prerm does not unload the AppArmor profile"

[ "$(dpkg-deb -f "$deb" Recommends)" = bash-completion ] \
    || fail "the .deb does not recommend bash-completion"

say "installing"
dpkg -i "$deb" >/dev/null
expected=(/usr/bin/stockade /usr/libexec/stockade/stockade-runner
    /usr/share/man/man1/stockade.1.gz /usr/share/man/man1/stockade-runner.1.gz
    /usr/share/bash-completion/completions/stockade
    /usr/share/zsh/vendor-completions/_stockade
    /usr/share/fish/vendor_completions.d/stockade.fish
    /usr/share/doc/stockade/README.md.gz /usr/share/doc/stockade/provider-contract.md.gz
    /usr/share/doc/stockade/copyright /usr/share/doc/stockade/changelog.gz
    /etc/apparmor.d/stockade)
for f in "${expected[@]}"; do
    [ -e "$f" ] || fail "the package did not install $f"
done
dpkg -L stockade | sort > "$work/installed"

# Runs the installed stockade as USER (root or the ordinary user) in a fresh
# workspace, with no STOCKADE_RUNNER: the runner must be found at its libexec path.
as() {
    local user=$1; shift
    if [ "$user" = root ]; then
        env -u STOCKADE_RUNNER XDG_RUNTIME_DIR="$work/run-root" "$@"
    else
        setpriv --reuid="$user" --regid="$user" --init-groups \
            env -u STOCKADE_RUNNER -u XDG_RUNTIME_DIR HOME="/home/$user" "$@"
    fi
}

installed_run() {
    local user=$1 ws res
    ws=$(mktemp -d "$work/ws-$user.XXXXXX")
    [ "$user" = root ] || chown "$user:" "$ws"
    # What this script (root) writes goes to a directory of its own, never into the
    # user's workspace, where a planted symbolic link would redirect root's writes.
    res=$(mktemp -d "$work/res-$user.XXXXXX")
    chmod 0755 "$res"
    mkdir -p "$work/run-root" && chmod 0700 "$work/run-root"
    cd "$ws"
    as "$user" stockade probe >"$res/probe.txt" || fail "stockade probe as $user"
    grep -q 'landlock' "$res/probe.txt" || fail "stockade probe as $user printed no Landlock line"
    # Denied outside the workspace, allowed inside: the kernel's answer, both ways. The
    # outside directory is one USER could write unconfined (their own), so the refusal
    # is the sandbox's and not Unix permissions' (which stockade must not call a denial).
    local code=0 outside
    outside=$(mktemp -d "$work/outside-$user.XXXXXX")
    chmod 0755 "$outside"
    [ "$user" = root ] || chown "$user:" "$outside"
    as "$user" sh -c "echo control > '$outside/control'" \
        || fail "as $user, unconfined, the outside directory is not writable"
    as "$user" stockade run -- sh -c "echo inside > in.txt; echo x > '$outside/check'" \
        >"$res/out" 2>"$res/err" || code=$?
    [ "$code" = 2 ] || fail "confined run as $user exited $code (sh exits 2 on a failed redirection): $(cat "$res/err")"
    [ -f "$ws/in.txt" ] || fail "confined run as $user could not write its workspace"
    [ ! -e "$outside/check" ] || fail "confined run as $user wrote outside its workspace"
    grep -q '^\[sandbox: file access denied under workspace-write mode\]$' "$res/err" \
        || fail "no denial marker as $user: $(cat "$res/err")"
    # The provider path: confine, explain, spawn the argv, classify.
    as "$user" stockade confine --mode read-only -- sh -c 'echo x > note.txt' >"$res/c.json"
    local argv request
    # The whole argv (the namespace stage first, where it runs; then the runner,
    # --request, --sha256, --failure-tag): paths and hex digits, no spaces.
    argv=$(sed -n 's/.*"argv":\[\([^]]*\)\].*/\1/p' "$res/c.json" | tr -d '"' | tr ',' ' ')
    request=$(printf '%s\n' $argv | sed -n '/^--request$/{n;p;}')
    case " $argv " in
    *" /usr/libexec/stockade/stockade-runner --request "*) ;;
    *) fail "ConfinedArgv as $user does not start the installed runner: $argv" ;;
    esac
    as "$user" stockade explain "$request" | grep -q 'the runner would accept this request' \
        || fail "stockade explain as $user"
    code=0
    # shellcheck disable=SC2086 # the argv's words, split on purpose
    as "$user" $argv 2>"$res/err2" || code=$?
    as "$user" stockade classify --confined "$res/c.json" --exit-code "$code" \
        --stderr "$res/err2" >"$res/verdict"
    grep -q '"outcome":"denied"' "$res/verdict" \
        || fail "classify as $user: $(cat "$res/verdict")"
    cd "$root"
    say "installed stockade works as $user"
}

installed_run root
id stockade-t >/dev/null 2>&1 || useradd -m stockade-t
installed_run stockade-t

say "man pages and completions"
for page in stockade stockade-run stockade-confine stockade-classify stockade-probe \
    stockade-explain stockade-runner; do
    MANWIDTH=80 man -P cat "$page" 2>"$work/man.err" >"$work/man.out" || fail "man $page"
    [ -s "$work/man.out" ] && [ ! -s "$work/man.err" ] \
        || fail "man $page: $(cat "$work/man.err")"
done
MANWIDTH=80 man -P cat stockade | grep -q 'stockade explain' || fail "man stockade lacks the walkthrough"
bash -c '
    source /usr/share/bash-completion/bash_completion
    _comp_load stockade 2>/dev/null || __load_completion stockade
    complete -p stockade >/dev/null
    COMP_WORDS=(stockade ex); COMP_CWORD=1; COMP_LINE="stockade ex"; COMP_POINT=11
    $(complete -p stockade | sed -n "s/.*-F \([^ ]*\).*/\1/p") stockade ex stockade
    [ "${COMPREPLY[*]}" = explain ] || exit 1
    COMP_WORDS=(stockade run --mode ""); COMP_CWORD=3; COMP_LINE="stockade run --mode "
    COMP_POINT=${#COMP_LINE}
    $(complete -p stockade | sed -n "s/.*-F \([^ ]*\).*/\1/p") stockade "" --mode
    [ "${COMPREPLY[*]}" = "read-only workspace-write danger-full-access" ]
' || fail "the bash completion does not load, or does not complete 'stockade ex' and 'stockade run --mode '"

# Root's control directory beneath /run, as an executor that never classified leaves
# it: the purge removes it (it is provably stockade's), wherever /run is.
if [ -e /run/stockade-0 ]; then
    say "/run/stockade-0 exists already: not checking that the purge removes it"
    made_run_dir=no
elif [ -d /run/user/0 ]; then
    # Root's base is /run/user/0/stockade where that runtime directory exists (a login
    # session made it), and /run/stockade-0 only where it does not.
    say "/run/user/0 exists: root's control base is there, not /run/stockade-0; not checking the purge of /run/stockade-0"
    made_run_dir=no
else
    (cd "$work" && env -u XDG_RUNTIME_DIR -u STOCKADE_CONTROL_DIR -u STOCKADE_RUNNER \
        stockade confine --mode read-only -- true >/dev/null) \
        || fail "stockade confine as root without XDG_RUNTIME_DIR"
    ls -d /run/stockade-0/req-* >/dev/null 2>&1 || fail "no request left in /run/stockade-0"
    made_run_dir=yes
fi

say "purging"
dpkg --purge stockade >/dev/null
[ "$made_run_dir" = no ] || [ ! -e /run/stockade-0 ] \
    || fail "the purge left /run/stockade-0: $(ls -a /run/stockade-0)"
left=()
while IFS= read -r path; do
    # Directories other packages share (/usr, /usr/share/man/man1, ...) stay.
    [ -e "$path" ] && [ ! -d "$path" ] && left+=("$path")
    case $path in
    /usr/libexec/stockade | /usr/share/doc/stockade) [ -e "$path" ] && left+=("$path") ;;
    esac
done <"$work/installed"
[ ${#left[@]} -eq 0 ] || fail "left after purge: ${left[*]}"
dpkg-query -W stockade >/dev/null 2>&1 && fail "dpkg still knows the package after purge"

say "building the RPM"
rpms=$(packaging/build-rpm.sh "$work/src")
rpm=$(grep -v -- '-debug' <<<"$rpms" | head -n 1)
rpm -qlp "$rpm" >"$work/rpm-files"
for f in /usr/bin/stockade /usr/libexec/stockade/stockade-runner \
    /usr/share/licenses/stockade/LICENSE /usr/share/doc/stockade/README.md \
    /usr/share/doc/stockade/provider-contract.md /usr/share/zsh/site-functions/_stockade \
    /etc/apparmor.d/stockade; do
    grep -qx "$f" "$work/rpm-files" || fail "the RPM lacks $f"
done
grep -q '^/usr/share/man/man1/stockade.1' "$work/rpm-files" || fail "the RPM lacks stockade.1"
rpm -qcp "$rpm" | grep -qx /etc/apparmor.d/stockade \
    || fail "the RPM does not mark the AppArmor profile as a configuration file"
rpm -qp --changelog "$rpm" | grep -q . || fail "the RPM has no changelog"
# Loaded on install, unloaded on removal (a loaded profile outlives its file).
rpm -qp --scripts "$rpm" >"$work/rpm-scripts"
grep -q 'apparmor_parser -r' "$work/rpm-scripts" || fail "the RPM does not load the AppArmor profile"
grep -A8 '^preuninstall' "$work/rpm-scripts" | grep -q 'apparmor_parser -R' \
    || fail "the RPM does not unload the AppArmor profile on removal"
sed -n '/^postuninstall/,$p' "$work/rpm-scripts" | grep -q 'purge_control_dirs /run' \
    || fail "the RPM does not remove root's control directories on erase"
# The project's placeholders (the .invalid URL and packager address, README: "Building
# for a distribution") must be ones rpmlint accepts, as lintian accepts the Maintainer.
rpmlint "$rpm" >"$work/rpmlint.out" 2>&1 || true
if grep -Ei 'url|mail|packager|maintainer|changelog' "$work/rpmlint.out"; then
    fail "rpmlint objects to the URL or an address (above)"
fi

say "passed in $(($(date +%s) - start)) s ($deb, $rpm)"
