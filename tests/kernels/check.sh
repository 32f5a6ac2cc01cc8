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
#   ATTACK              the static attack helper (tests/src/bin/attack.rs; default:
#                       attack on PATH): one system call, prints `ok` or `errno NAME`
#   SCRATCH             a directory outside /tmp to work in (default /var/tmp)
#   MODEL_DIFFERENTIAL  the static model-differential driver (tests/src/bin/
#                       model_differential/), MODEL_PROBE its model-probe: when set, the
#                       policy model is checked against this kernel for
#                       STOCKADE_MODEL_SECONDS from STOCKADE_MODEL_SEED (the guests set
#                       all four; unset, the check says it is skipped)
# Prints one `KM ok NAME` or `KM FAIL NAME: why` line per check, then
# `KM RESULT pass` or `KM RESULT fail`; exits 0 only on pass.

S=${STOCKADE:-stockade}
A=${ATTACK:-attack}
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
    # A command `stockade run` started in a group of its own joins the group of a process
    # above it in the same session, from where kill(0) signals that group: the victim
    # (in the outer shell's group) must not see the signal. Below ABI 6 the filter
    # refuses the setpgid; from ABI 6 the Landlock scope keeps the signal from the
    # victim. Without the stage, where only those stand: with it (pids shared or not)
    # the join fails with EPERM without either. SIGWINCH (28): ignored by everyone but
    # the victim, which traps it.
    cat >"$base/joined.sh" <<'JOINED'
sh -c 'trap "echo got >>$1" WINCH; echo ready >$1; while :; do sleep 1; done' sh "$base/victim" &
v=$!
while [ ! -s "$base/victim" ]; do sleep 1; done
group=$(sed 's/.*) //' /proc/$$/stat | cut -d' ' -f3)
"$S" run --mode danger-full-access -- sh -c '"$1" run $2 -- "$3" setpgid-kill $4 28' \
    sh "$S" "$flags" "$A" "$group" </dev/null
sleep 2
kill $v
JOINED
    for flags in "--no-stage" "--mode danger-full-access"; do
        rm -f "$base/victim"
        out=$(base=$base S=$S A=$A flags=$flags setsid sh "$base/joined.sh" 2>"$base/err")
        seen=$(grep -c got "$base/victim")
        case $flags,$seen in
        *danger*,1) ok "signals: unconfined, joining the outer shell's group reaches it (control)" ;;
        *danger*,*) bad "signals: the unconfined control did not reach the victim: '$out' $(cat "$base/err")" ;;
        *,0) ok "signals: $flags: joining the outer shell's group reaches nobody there ($out)" ;;
        *) bad "signals: $flags: the outer shell's group was signalled from inside: '$out' $(cat "$base/err")" ;;
        esac
    done

    # --- what each Landlock ABI adds, attacked with raw system calls --------------
    # Without the stage, so that each answer is Landlock's or the filter's (a mount or
    # network namespace would refuse some of these for its own reasons). Where the
    # kernel lacks the feature the attack succeeds, and the guarantee must say so.
    "$A" session >/dev/null 2>&1 || bad "the attack helper ($A) does not run"
    # ward NAME -- FLAGS: the status confine reports for guarantee NAME under FLAGS.
    ward() {
        g=$1
        shift 2
        "$S" confine "$@" -- true | guarantee "$g"
    }
    # confined FLAGS -- ARGS: the attack helper's one line, run confined with FLAGS.
    confined() {
        flags=
        while [ "$1" != -- ]; do
            flags="$flags $1"
            shift
        done
        shift
        "$S" run $flags -- "$A" "$@" 2>>"$base/err"
    }
    # held WHAT MIN-ABI RESULT WANT STATUS: from MIN-ABI on RESULT must be WANT; below
    # it the attack may succeed, and the guarantee's STATUS must not claim otherwise.
    held() {
        if [ "$EXPECT_ABI" -ge "$2" ]; then
            [ "$3" = "$4" ] && ok "$1: $3" || bad "$1: expected '$4', got '$3' $(cat "$base/err")"
        elif [ "$5" = enforced ]; then
            bad "$1: reported enforced on ABI $EXPECT_ABI, got '$3'"
        else
            ok "$1: not held on ABI $EXPECT_ABI, reported $5 ($3)"
        fi
    }
    : >"$base/err"
    ww="--mode workspace-write --no-stage"
    echo keep >"$outside/victim"
    echo keep >"$ws/mine"
    # refer (ABI 2; ABI 1 refuses every link across directories): a hard link of a file
    # outside the roots into the workspace would make it writable there.
    r=$(confined $ww -- link "$outside/victim" "$ws/victim-link")
    held "refer: hard link from outside into the workspace" 1 "$r" "errno EXDEV" "$(ward refer -- $ww)"
    r=$(confined $ww -- link "$ws/mine" "$ws/mine-link")
    [ "$r" = ok ] && ok "refer: a link within the workspace works (control)" || bad "refer control: $r"
    r=$(confined $ww -- rename "$ws/mine-link" "$outside/moved")
    [ "$r" != ok ] && [ ! -e "$outside/moved" ] && ok "refer: rename out of the workspace refused ($r)" ||
        bad "refer: rename out of the workspace: $r"
    # truncate (ABI 3): truncate(2) by path, which opens nothing for writing.
    r=$(confined $ww -- truncate "$outside/victim")
    held "truncate: outside the roots" 3 "$r" "errno EACCES" "$(ward truncate -- $ww)"
    if [ "$EXPECT_ABI" -ge 3 ]; then
        [ "$(cat "$outside/victim")" = keep ] && ok "truncate: the file outside is intact" ||
            bad "truncate: the file outside was emptied"
    fi
    r=$(confined $ww -- truncate "$ws/mine")
    [ "$r" = ok ] && ok "truncate: in the workspace works (control)" || bad "truncate control: $r"
    # deviceIoctl (ABI 5): an ioctl on a device opened in the sandbox. On /dev/zero the
    # driver answers ENOTTY; Landlock refuses with EACCES before it gets there.
    ro="--mode read-only --no-stage"
    r=$(confined $ro -- ioctl-dev /dev/zero)
    held "deviceIoctl: ioctl on /dev/zero" 5 "$r" "errno EACCES" "$(ward deviceIoctl -- $ro)"
    r=$(confined --mode danger-full-access -- ioctl-dev /dev/zero)
    [ "$r" = "errno ENOTTY" ] && ok "deviceIoctl: unconfined, the driver answers (control)" ||
        bad "deviceIoctl control: $r"

    # --- TCP and abstract unix sockets, against servers outside ---------------------
    port=$((40000 + $$ % 10000))
    "$A" tcp-serve $port >"$base/serve1" 2>&1 &
    s1=$!
    "$A" tcp-serve $((port + 1)) >"$base/serve2" 2>&1 &
    s2=$!
    "$A" abstract-listen "@km-$$" >"$base/serve3" 2>&1 &
    s3=$!
    while [ "$(cat "$base"/serve[123] | grep -c listening)" != 3 ]; do
        kill -0 $s1 $s2 $s3 || break
        sleep 1
    done
    # Network denied: the filter refuses TCP sockets on every ABI.
    r=$(confined --no-stage -- tcp-connect $port)
    [ "$r" = "errno EACCES" ] && ok "tcp: connect with the network denied refused" || bad "tcp connect: $r"
    r=$(confined --no-stage -- tcp-bind)
    [ "$r" = "errno EACCES" ] && ok "tcp: bind with the network denied refused" || bad "tcp bind: $r"
    r=$(confined --no-stage --network allow -- tcp-connect $port)
    [ "$r" = ok ] && ok "tcp: connect with --network allow works (control)" || bad "tcp control: $r"
    # Ports (ABI 4): allowed ones only; without ABI 4 nothing runs.
    if [ "$EXPECT_ABI" -ge 4 ]; then
        r=$(confined --no-stage --allow-tcp-connect $port -- tcp-connect $port)
        [ "$r" = ok ] && ok "tcp: --allow-tcp-connect $port reaches it" || bad "tcp allowed port: $r"
        r=$(confined --no-stage --allow-tcp-connect $port -- tcp-connect $((port + 1)))
        [ "$r" = "errno EACCES" ] && ok "tcp: --allow-tcp-connect $port, another port refused" ||
            bad "tcp other port: $r"
    else
        for extra in "--allow-tcp-connect $port" "--allow-tcp-connect $port --no-stage" \
            "--allow-domain example.org --no-stage"; do
            r=$("$S" run $extra -- "$A" tcp-connect $port 2>"$base/err")
            rc=$?
            [ $rc = 125 ] && [ -z "$r" ] && grep -q SANDBOX_UNAVAILABLE "$base/err" &&
                ok "tcp: $extra without ABI 4 refused, nothing ran" ||
                bad "tcp: $extra on ABI $EXPECT_ABI: exit $rc, '$r' $(cat "$base/err")"
        done
    fi
    # --allow-domain under the stage (any ABI): the proxy is the only way out.
    r=$("$S" run --allow-domain allowed.test:$port --allow-domain 127.0.0.1:$port \
        --resolve allowed.test=127.0.0.1 -- sh -c '"$1" tcp-connect $2; echo ${http_proxy:+proxy}' \
        sh "$A" $port 2>"$base/err" | tr '\n' ' ')
    case $r in
    "errno ECONNREFUSED proxy " | "errno EACCES proxy ")
        ok "domains: with the stage, a connect around the proxy misses ($r)" ;;
    *) bad "domains: a connect around the proxy: '$r' $(cat "$base/err")" ;;
    esac
    # Abstract unix sockets: refused with unix sockets (the default); with them, the
    # Landlock scope (ABI 6) keeps those created outside out of reach.
    : >"$base/err"
    r=$(confined --no-stage -- unix-connect "@km-$$")
    [ "$r" = "errno EACCES" ] && ok "abstract: unix sockets refused by default" || bad "abstract default: $r"
    u="--no-stage --allow-unix-sockets"
    r=$(confined $u -- unix-connect "@km-$$")
    held "abstract: --allow-unix-sockets, a socket outside" 6 "$r" "errno EPERM" "$(ward abstractSockets -- $u)"
    r=$(confined $u -- abstract-self "@km-self-$$")
    [ "$r" = ok ] && ok "abstract: its own abstract socket works (control)" || bad "abstract control: $r"
    r=$(confined --mode danger-full-access -- unix-connect "@km-$$")
    [ "$r" = ok ] && ok "abstract: unconfined, the socket outside is reachable (control)" ||
        bad "abstract unconfined control: $r"
    kill $s1 $s2 $s3

    # --- the stage's masks: a hidden directory covered by an empty read-only mount ----
    # Kernels before 6.15 refuse to clone the detached mask source; the stage then
    # attaches it first (launcher/src/stage/mounts.rs). Control: the same directory
    # unhidden is no mount of its own.
    mkdir -p "$base/mw/h" && : >"$base/mw/h/inside"
    mounted() { awk -v p="$base/mw/h" '$5 == p && / - tmpfs /' | grep -c .; }
    r=$("$S" run --mode read-only --no-default-hide --workspace "$base/mw" --hide "$base/mw/h" \
        -- sh -c 'cat /proc/self/mountinfo; ls -A "$1"' sh "$base/mw/h" 2>"$base/err")
    [ "$(printf '%s\n' "$r" | mounted)" = 1 ] && ! printf '%s\n' "$r" | grep -qx inside &&
        ok "stage: a hidden directory is masked by an empty mount" ||
        bad "stage: no mask on the hidden directory: $(printf '%s' "$r" | grep -c .) lines, $(cat "$base/err")"
    r=$("$S" run --mode read-only --no-default-hide --workspace "$base/mw" \
        -- sh -c 'cat /proc/self/mountinfo; ls -A "$1"' sh "$base/mw/h" 2>"$base/err")
    [ "$(printf '%s\n' "$r" | mounted)" = 0 ] && printf '%s\n' "$r" | grep -qx inside &&
        ok "stage: unhidden, the directory is itself (control)" ||
        bad "stage: the unhidden directory: $(cat "$base/err")"

    # --- the policy model against this kernel ---------------------------------------
    # Random trees and policies, confined for real with and without the stage, every
    # operation performed inside and compared with what stockade_policy::model answers
    # for this kernel's Landlock ABI; a guarantee the model finds missing must be
    # reported so (not enforced, and the run partial). The guests carry the driver; the
    # host runs it as `cargo test` (tests/tests/model_differential.rs).
    if [ -n "${MODEL_DIFFERENTIAL:-}" ]; then
        mkdir -p "$base/model"
        "$MODEL_DIFFERENTIAL" --stockade "$(command -v "$S")" --probe "${MODEL_PROBE:-model-probe}" \
            --scratch "$base/model" >"$base/model.out" 2>&1
        rc=$?
        summary=$(grep '^model differential: seeds' "$base/model.out")
        if [ $rc = 0 ]; then
            ok "$summary"
        else
            bad "model differential exited $rc: ${summary:-no summary}"
            sed 's/^/KM   | /' "$base/model.out"
        fi
    else
        echo "KM skip model differential: MODEL_DIFFERENTIAL not set (the host runs it as cargo test)"
    fi
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

# --- resource limits: the defaults, held where the cgroup has the controllers ------
# The guests' init mounts cgroup v2 with memory and pids enabled below the root
# (EXPECT_CGROUP_LIMITS=1); the host's layout decides there, and the end-to-end tests
# (tests/tests/limits.rs) check that what it reports is consistent.
if [ "${EXPECT_CGROUP_LIMITS:-0}" = 1 ]; then
    lm=workspace-write
    [ "$EXPECT_ABI" = 0 ] && lm=danger-full-access
    r=$("$S" run --json --mode $lm -- true 2>"$base/err")
    for k in memory:cgroup-memory processes:cgroup-pids; do
        printf '%s' "$r" | grep -q "\"kind\":\"${k%%:*}\",\"value\":[0-9]*,\"by\":\"${k#*:}\",\"caveat\":null,\"default\":true" &&
            ok "limits: the ${k%%:*} default is held by ${k#*:}" ||
            bad "limits: the ${k%%:*} default: $r $(cat "$base/err")"
    done
    r=$("$S" run --json --mode $lm --no-default-limits -- true 2>"$base/err")
    printf '%s' "$r" | grep -q '"limits":{"held":\[\],"defaultsUnheld":\[\]' &&
        ok "limits: --no-default-limits holds none" || bad "limits: --no-default-limits: $r"
    # Forking past a process limit (the shell gives up at the refused fork; stockade
    # ends the sleeps left): the verdict names it. Control: the same loop within it.
    fork='i=0; while [ $i -lt $1 ]; do sleep 30 & i=$((i+1)); done; echo forked $i'
    r=$("$S" run --json --mode $lm --max-processes 16 -- sh -c "$fork" sh 40 2>"$base/err")
    printf '%s' "$r" | grep -q '"exceeded":"processes"' &&
        ok "limits: past 16 processes, exceeded processes" ||
        bad "limits: past 16 processes: $r $(cat "$base/err")"
    r=$("$S" run --json --mode $lm --max-processes 16 -- sh -c "$fork" sh 4 2>"$base/err")
    printf '%s' "$r" | grep -q '"text":"forked 4\\n".*"exceeded":null' &&
        ok "limits: within 16 processes, nothing exceeded (control)" ||
        bad "limits: within 16 processes: $r $(cat "$base/err")"
    # A memory hog past its limit (a shell holding 64 MiB in a variable, 40 MiB
    # allowed): the group's out-of-memory killer ends it, and the verdict names it.
    # Control: 4 MiB under the same limit.
    hog='x=$(head -c $1 /dev/zero | tr "\0" a); echo held ${#x}'
    r=$("$S" run --json --mode $lm --max-memory 40M -- sh -c "$hog" sh 67108864 2>"$base/err")
    printf '%s' "$r" | grep -q '"exceeded":"memory"' &&
        ok "limits: past 40 MiB, exceeded memory" ||
        bad "limits: past 40 MiB: $r $(cat "$base/err")"
    r=$("$S" run --json --mode $lm --max-memory 40M -- sh -c "$hog" sh 4194304 2>"$base/err")
    printf '%s' "$r" | grep -q '"text":"held 4194304\\n".*"exceeded":null' &&
        ok "limits: within 40 MiB, nothing exceeded (control)" ||
        bad "limits: within 40 MiB: $r $(cat "$base/err")"
    # The same as an ordinary user (uid 1000) with a delegated group, as a service
    # manager gives one: the user owns u1000 (controllers enabled for its children by
    # root) and starts in u1000/session, which stays root's, so stockade makes its
    # group beside the session (the kernel's rule: no processes where controllers are
    # handed down).
    cg=/sys/fs/cgroup/u1000
    home=$base/home-u
    if mkdir -p "$cg/session" "$home/ws" &&
        echo "+memory +pids" >"$cg/cgroup.subtree_control" &&
        chown 1000:1000 "$cg" "$cg/cgroup.procs" "$cg/cgroup.subtree_control" "$cg/cgroup.threads" &&
        chown -R 1000:1000 "$home"; then
        # The command line in $1 runs as uid 1000 through su, from its workspace.
        grep -q '^u:' /etc/passwd 2>/dev/null || {
            echo "u:x:1000:1000::$home:/bin/sh" >>/etc/passwd
            echo "u:x:1000:" >>/etc/group
        }
        as_user() {
            printf '%s\n' "$1" >"$home/job"
            sh -c 'echo $$ >/sys/fs/cgroup/u1000/session/cgroup.procs &&
                exec su -s /bin/sh u -c "cd $0/ws && HOME=$0 sh $0/job"' "$home"
        }
        r=$(as_user "$S run --json --mode $lm -- true" 2>"$base/err")
        for k in memory:cgroup-memory processes:cgroup-pids; do
            printf '%s' "$r" | grep -q '"containment":"cgroup"' &&
                printf '%s' "$r" | grep -q "\"kind\":\"${k%%:*}\",\"value\":[0-9]*,\"by\":\"${k#*:}\",\"caveat\":null,\"default\":true" &&
                ok "limits: as uid 1000, the ${k%%:*} default is held by its delegated group" ||
                bad "limits: as uid 1000, the ${k%%:*} default: $r $(cat "$base/err")"
        done
        r=$(as_user "$S run --json --mode $lm --max-processes 16 -- sh -c '$fork' sh 40" 2>"$base/err")
        printf '%s' "$r" | grep -q '"by":"cgroup-pids"' && printf '%s' "$r" | grep -q '"exceeded":"processes"' &&
            ok "limits: as uid 1000, past 16 processes in its group, exceeded processes" ||
            bad "limits: as uid 1000, past 16 processes: $r $(cat "$base/err")"
    else
        bad "limits: cannot delegate $cg to uid 1000"
    fi
else
    echo "KM skip limits in a cgroup with the controllers: EXPECT_CGROUP_LIMITS not set"
fi

cd / && rm -rf "$base"
if [ $failed = 0 ]; then
    echo "KM RESULT pass"
    exit 0
fi
echo "KM RESULT fail"
exit 1
