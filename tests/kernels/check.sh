#!/bin/sh
# The checks of the kernel matrix, run inside each guest by its init (busybox sh) and
# once on the host by tests/kernels/run. POSIX sh only: the guest has busybox and the
# two static binaries, nothing else.
#
# Expectations come from the environment (the guest's init takes them from the kernel
# command line):
#   EXPECT_ABI          the Landlock ABI `probe --json` must report (0: no Landlock)
#   EXPECT_ENFORCEMENT  full | partial          (ignored when EXPECT_ABI=0)
#   EXPECT_CHANNEL      out-of-band | in-band   (ignored when EXPECT_ABI=0)
#   STOCKADE            the launcher (default: stockade on PATH)
#   SCRATCH             a directory outside /tmp to work in (default /var/tmp)
# Prints one `KM ok NAME` or `KM FAIL NAME: why` line per check, then
# `KM RESULT pass` or `KM RESULT fail`; exits 0 only on pass.

S=${STOCKADE:-stockade}
failed=0
ok() { echo "KM ok   $1"; }
bad() {
    echo "KM FAIL $1"
    failed=1
}

# The value of "key":VALUE (a number, true/false/null or a string without quotes) in
# the compact JSON on stdin; for guarantees, "NAME":{"status":"VALUE".
json_field() { grep -o "\"$1\":\"*[a-z0-9-]*" | head -1 | sed 's/.*:"*//'; }
guarantee() { grep -o "\"$1\":{\"status\":\"[a-z-]*\"" | head -1 | sed 's/.*"status":"//; s/"$//'; }

base=${SCRATCH:-/var/tmp}/km.$$
ws=$base/ws
outside=$base/outside
mkdir -p "$ws" "$outside" || {
    echo "KM FAIL cannot create $base"
    echo "KM RESULT fail"
    exit 1
}
cd "$ws" || exit 1

# --- probe --------------------------------------------------------------------------
probe=$("$S" probe --json)
abi=$(printf '%s' "$probe" | json_field landlockAbi)
[ "$abi" = "$EXPECT_ABI" ] && ok "probe landlockAbi=$abi" ||
    bad "probe landlockAbi: expected $EXPECT_ABI, got '$abi': $probe"
sec=$(printf '%s' "$probe" | json_field seccomp)
[ "$sec" = true ] && ok "probe seccomp=true" || bad "probe seccomp: got '$sec'"

# A process that must not survive a run: its command line carries a marker.
# Read from /proc: ps differs between busybox and procps. Zombies have no cmdline.
survivors() {
    for f in /proc/[0-9]*/cmdline; do
        tr '\0' ' ' 2>/dev/null <"$f"
        echo
    done | grep "^sleep $1"
}

if [ "$EXPECT_ABI" != 0 ]; then
    # --- confine: the facts it reports -----------------------------------------------
    for mode in read-only workspace-write; do
        c=$("$S" confine --mode "$mode" -- true)
        rc=$?
        [ $rc = 0 ] || bad "confine $mode exited $rc"
        e=$(printf '%s' "$c" | json_field enforcement)
        [ "$e" = "$EXPECT_ENFORCEMENT" ] && ok "confine $mode enforcement=$e" ||
            bad "confine $mode enforcement: expected $EXPECT_ENFORCEMENT, got '$e'"
        ch=$(printf '%s' "$c" | json_field statusChannel)
        [ "$ch" = "$EXPECT_CHANNEL" ] && ok "confine $mode statusChannel=$ch" ||
            bad "confine $mode statusChannel: expected $EXPECT_CHANNEL, got '$ch'"
        fw=$(printf '%s' "$c" | guarantee filesystemWrites)
        [ "$fw" = enforced ] && ok "confine $mode filesystemWrites=enforced" ||
            bad "confine $mode filesystemWrites: got '$fw'"
        sf=$(printf '%s' "$c" | guarantee syscallFilter)
        [ "$sf" = enforced ] && ok "confine $mode syscallFilter=enforced" ||
            bad "confine $mode syscallFilter: got '$sf'"
        # The argv runs once, confined: spawn it as an executor would.
        # Every element (the stage, the runner, --request, --sha256, --failure-tag):
        # paths and hex digits, no spaces.
        argv=$(printf '%s' "$c" | sed 's/.*"argv":\[\([^]]*\)\].*/\1/' | tr -d '"' | tr ',' ' ')
        $argv || bad "confined argv of $mode exited $?"
    done
    case $EXPECT_ABI in
    1 | 2) want_trunc=unavailable ;;
    *) want_trunc=enforced ;;
    esac
    t=$("$S" confine -- true | guarantee truncate)
    [ "$t" = "$want_trunc" ] && ok "confine truncate=$t" || bad "confine truncate: expected $want_trunc, got '$t'"

    # --- writes: inside the roots allowed, outside denied (with a control) ---------
    "$S" run --mode workspace-write -- touch "$ws/inside" 2>"$base/err"
    rc=$?
    [ $rc = 0 ] && [ -e "$ws/inside" ] && ok "workspace-write: write inside the workspace" ||
        bad "workspace-write: write inside exited $rc: $(cat "$base/err")"
    "$S" run --mode workspace-write -- touch "$outside/denied" 2>"$base/err"
    rc=$?
    if [ $rc = 1 ] && [ ! -e "$outside/denied" ] && grep -q 'sandbox: file access denied' "$base/err"; then
        ok "workspace-write: write outside the roots denied"
    else
        bad "workspace-write: write outside: exit $rc, exists=$([ -e "$outside/denied" ] && echo yes), $(cat "$base/err")"
    fi
    "$S" run --mode danger-full-access -- touch "$outside/control" 2>"$base/err"
    [ -e "$outside/control" ] && ok "danger-full-access: the same write outside succeeds (control)" ||
        bad "danger-full-access control write failed: $(cat "$base/err")"
    "$S" run --mode read-only -- touch "$ws/ro" 2>"$base/err"
    rc=$?
    [ $rc = 1 ] && [ ! -e "$ws/ro" ] && ok "read-only: write in the workspace denied" ||
        bad "read-only: write in the workspace: exit $rc: $(cat "$base/err")"
    out=$("$S" run --mode read-only -- cat "$ws/inside" 2>&1)
    rc=$?
    [ $rc = 0 ] && ok "read-only: reading succeeds" || bad "read-only: read exited $rc: $out"

    # --- supervision: a timeout ends the command and its background ---------------
    "$S" run --timeout 2s --grace 1s -- sh -c 'sleep 1001 & sleep 1002' 2>"$base/err"
    rc=$?
    [ $rc = 124 ] && ok "timeout: exit 124" || bad "timeout: exit $rc: $(cat "$base/err")"
    left=$(survivors 100[12])
    [ -z "$left" ] && ok "timeout: no process left" || bad "timeout left: $left"
    "$S" run -- sh -c 'sleep 1003 &' 2>"$base/err"
    rc=$?
    left=$(survivors 1003)
    [ $rc = 0 ] && [ -z "$left" ] && ok "background process ended after the command" ||
        bad "background: exit $rc, left: $left, $(cat "$base/err")"

    # --- signals: the launcher and everyone out of reach, supervision intact --------
    # Without the stage (no pid namespace) and below ABI 6 (no Landlock signal scope)
    # the syscall filter alone refuses these, by pid. The guests send SIGKILL to -1 for
    # real (a miss ends this script); the host run only probes with signal 0.
    if [ -n "${SCRATCH:-}" ]; then all_sig=0; else all_sig=9; fi
    "$S" run --no-stage --timeout 2s --grace 1s -- sh -c "
        kill -STOP \$PPID; echo stop=\$?
        kill -$all_sig -1; echo all=\$?
        sleep 1005" >"$base/out" 2>"$base/err" &
    lp=$!
    # A stopped launcher never times its command out: note it and continue it.
    stopped=no
    while kill -0 $lp 2>/dev/null; do
        if [ "$(cut -d' ' -f3 /proc/$lp/stat 2>/dev/null)" = T ]; then
            stopped=yes
            kill -CONT $lp
        fi
        sleep 1
    done
    wait $lp
    rc=$?
    left=$(survivors 1005)
    if [ $rc = 124 ] && [ $stopped = no ] && grep -qx stop=1 "$base/out" &&
        grep -qx all=1 "$base/out" && [ -z "$left" ]; then
        ok "signals: kill -STOP \$PPID and kill -$all_sig -1 refused, the timeout ended the command"
    else
        bad "signals: exit $rc, launcher stopped: $stopped, $(tr '\n' ' ' <"$base/out"), left: $left, $(cat "$base/err")"
    fi
    # Control: signals within the command's own tree still work.
    out=$("$S" run --no-stage -- sh -c '
        sleep 1006 & kill $!; wait $!; echo child=$?
        kill -0 0; echo group=$?
        timeout 1 sleep 1007; echo timeout=$?' 2>"$base/err" | tr '\n' ' ')
    case $out in
    "child=143 group=0 timeout=124 " | "child=143 group=0 timeout=143 ")
        ok "signals: the command's own child, group and timeout(1) still work" ;;
    *) bad "signals within the command's tree: $out $(cat "$base/err")" ;;
    esac
    # With the network by name the proxy host (and the stage, sharing pids) stand between
    # the runner and `stockade run`: the launcher is an ancestor further up, which the
    # filter protects too where Landlock has no signal scope.
    out=$("$S" run --share-pids --allow-domain example.org -- sh -c '
        p=$PPID
        while [ "$p" -gt 1 ]; do
            case $(tr "\0" " " <"/proc/$p/cmdline") in "$1 run "*) break ;; esac
            p=$(sed "s/.*) //" "/proc/$p/stat" | cut -d" " -f2)
        done
        if [ "$p" -gt 1 ] && [ "$p" != "$PPID" ]; then kill -0 "$p"; echo up=$?; fi' sh "$S" 2>"$base/err")
    [ "$out" = up=1 ] && ok "signals: with --allow-domain, stockade run further up is out of reach" ||
        bad "signals to stockade run above the proxy host: '$out' $(cat "$base/err")"
    out=$("$S" run --mode danger-full-access -- sh -c 'kill -0 $PPID; echo parent=$?' 2>&1)
    [ "$out" = parent=0 ] && ok "signals: unconfined, the launcher can be signalled (control)" ||
        bad "signals control: $out"
else
    # --- no Landlock: every confined mode refuses and runs nothing ------------------
    for mode in read-only workspace-write; do
        c=$("$S" confine --mode "$mode" -- true 2>"$base/err")
        rc=$?
        if [ $rc = 125 ] && [ -z "$c" ] && grep -q SANDBOX_UNAVAILABLE "$base/err"; then
            ok "confine $mode: SANDBOX_UNAVAILABLE"
        else
            bad "confine $mode: exit $rc, stdout '$c', $(cat "$base/err")"
        fi
        "$S" run --mode "$mode" -- touch "$ws/ran-$mode" 2>"$base/err"
        rc=$?
        if [ $rc = 125 ] && [ ! -e "$ws/ran-$mode" ] && grep -q SANDBOX_UNAVAILABLE "$base/err"; then
            ok "run $mode: SANDBOX_UNAVAILABLE, nothing ran"
        else
            bad "run $mode: exit $rc, ran=$([ -e "$ws/ran-$mode" ] && echo yes), $(cat "$base/err")"
        fi
    done
    # Control: the unconfined mode still runs.
    "$S" run --mode danger-full-access -- touch "$ws/ran-danger" 2>"$base/err"
    [ -e "$ws/ran-danger" ] && ok "danger-full-access runs (control)" ||
        bad "danger-full-access did not run: $(cat "$base/err")"
fi

cd / && rm -rf "$base"
if [ $failed = 0 ]; then
    echo "KM RESULT pass"
    exit 0
fi
echo "KM RESULT fail"
exit 1
