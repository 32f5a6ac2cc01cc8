//! The namespace stage: the privileged setup that runs between the executor and the
//! runner when the policy asks for what only mounts and namespaces can hold.
//!
//! ConfinedArgv then starts `stockade __stage [STAGE FLAGS] -- RUNNER ARGS...` instead of
//! the runner. This process:
//! 1. creates the namespaces: user (when not root, the caller's uid and gid mapped to
//!    themselves), mount, IPC, pid when asked, and network for the network by name: it
//!    brings its loopback up, listens on the proxy's port there and sends that socket
//!    to the proxy host outside (see `crate::proxy::host`), so the only way out of the
//!    namespace is the proxy;
//! 2. makes every mount private and read-only, then binds each writable root back
//!    read-write and each protected path read-only again on top of that (so a protected
//!    path inside a writable root stays read-only), mounts a fresh tmpfs on `/tmp` when it
//!    is private, and a fresh `/proc` for the pid namespace;
//! 3. with a pid namespace, forks: the child is the namespace's init (it reaps, forwards
//!    signals, and reports the command's wait status to the outer process through a
//!    pipe), the outer process replays that status (exit code, or the same signal), so
//!    supervision and the exit-code contract are unchanged;
//! 4. drops every capability it holds and `execve`s the runner, which applies Landlock
//!    and seccomp as without the stage (the process that stays to watch keeps the
//!    capabilities the command keeps, and no other: see 5);
//! 5. while the command runs, looks at the shared writable roots the caller owns (`/tmp`
//!    as root) every few milliseconds and puts their mode and owner back when they
//!    changed; once it has ended, checks the protected names that did not exist; and
//!    appends what it found to the report file (`stockade_policy::stage_report`). A
//!    command keeping `CAP_CHOWN` can give such a root to another user, after which its
//!    owner (root, without capabilities) could not take it back: so the watcher keeps
//!    what the command keeps, whatever the command can change it can put back.
//!    Without a pid namespace it forks for this only when there is something to watch,
//!    and waits for the runner as its parent.
//!
//! Every failure prints one `stockade-runner: namespace stage: ...` line and exits 125:
//! to the executor the stage is part of the runner, and nothing runs unconfined.
//!
//! Landlock and seccomp still do the fine-grained work; the stage adds what they cannot
//! express: mode and time changes outside the writable roots fail with `EROFS`,
//! repository start-up files cannot be rewritten, `/tmp` can be private, and other
//! processes (their `/proc/PID/cmdline`, System V IPC objects) are out of sight.

use std::ffi::{CString, OsString};
use std::io::{self, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use stockade_policy::capability::{Capability, CapabilitySet};
use stockade_policy::exit;
use stockade_policy::failure_tag;
use stockade_policy::stage::{MASK_MODE, MountPlan};
use stockade_policy::stage_report::{
    DirMeta, MAX_RECORDS, MAX_REPORT_BYTES, RootChange, StageRecord,
};
use stockade_policy::trust::FileKind;

/// The hidden subcommand that starts the stage. Not a documented user command.
pub const SUBCOMMAND: &str = "__stage";

/// What the stage watches besides mounting (see `stockade_policy::stage_report`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Watch {
    /// Shared writable roots the caller owns: their mode and owner are put back.
    pub shared: Vec<PathBuf>,
    /// Protected names that did not exist when confined: reported if they appear.
    pub missing: Vec<PathBuf>,
    /// The report file `confine` created (empty, 0600) for what the stage finds.
    pub report: Option<PathBuf>,
    /// The capabilities the command keeps: the watcher keeps them too, to put back what
    /// they let the command change.
    pub keep_capabilities: CapabilitySet,
}

impl Watch {
    fn is_empty(&self) -> bool {
        self.shared.is_empty() && self.missing.is_empty()
    }
}

/// The network namespace of the network by name: the descriptor the proxy host passes
/// (one end of a socket pair) and the port to listen on inside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetProxy {
    pub channel: libc::c_int,
    pub port: u16,
}

impl NetProxy {
    const FLAG: &str = "--netns-proxy";

    fn parse(value: &str) -> Result<NetProxy, String> {
        let bad = || format!("{} {value:?}: expected FD:PORT", NetProxy::FLAG);
        let (fd, port) = value.split_once(':').ok_or_else(bad)?;
        let channel = fd.parse().ok().filter(|&fd| fd > 2).ok_or_else(bad)?;
        let port = port.parse().ok().filter(|&p| p != 0).ok_or_else(bad)?;
        Ok(NetProxy { channel, port })
    }
}

/// The stage's command line for `plan` and `watch`: `LAUNCHER __stage FLAGS -- RUNNER
/// ARGS...`.
pub fn argv(
    plan: &MountPlan,
    watch: &Watch,
    net: Option<NetProxy>,
    launcher: &str,
    runner_argv: &[String],
) -> Vec<String> {
    let mut argv = vec![launcher.to_string(), SUBCOMMAND.to_string()];
    if let Some(net) = net {
        argv.push(NetProxy::FLAG.into());
        argv.push(format!("{}:{}", net.channel, net.port));
    }
    for (flag, paths) in [
        ("--rw", &plan.rw),
        ("--pin", &plan.pin),
        ("--ro", &plan.ro),
        ("--mask", &plan.mask),
        ("--shared", &watch.shared),
        ("--missing", &watch.missing),
    ] {
        for p in paths {
            argv.push(flag.into());
            argv.push(encode_path(p));
        }
    }
    if let Some(report) = &watch.report {
        argv.push("--report".into());
        argv.push(encode_path(report));
    }
    for cap in watch.keep_capabilities.iter() {
        argv.push(stockade_policy::capability::FLAG.into());
        argv.push(cap.name().into());
    }
    if plan.private_tmp {
        argv.push("--private-tmp".into());
    }
    if plan.pids {
        argv.push("--pids".into());
    }
    argv.push("--".into());
    argv.extend(runner_argv.iter().cloned());
    argv
}

/// What marks a path in the stage's argv as hex-encoded bytes (see [`encode_path`]). No
/// path the stage takes starts with it: they are all absolute.
const HEX_PATH: &str = "hex:";

/// A path as it travels in the stage's argv. ConfinedArgv's argv is a list of strings,
/// so a name that is not UTF-8 cannot travel as itself, and a lossy copy names another
/// path: the stage then binds, pins and masks nothing there (the path is reported
/// protected or hidden while a command writes it, or renames it out of hiding for the
/// next command to read) and leaves such a writable root read-only. Such a path travels
/// as its bytes in hex after [`HEX_PATH`]; every other path as itself.
fn encode_path(path: &Path) -> String {
    match path.to_str() {
        Some(s) => s.to_string(),
        None => {
            let hex: String = path
                .as_os_str()
                .as_bytes()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            format!("{HEX_PATH}{hex}")
        }
    }
}

/// The path [`encode_path`] wrote.
fn decode_path(arg: &std::ffi::OsStr) -> Result<PathBuf, String> {
    let Some(hex) = arg.as_bytes().strip_prefix(HEX_PATH.as_bytes()) else {
        return Ok(PathBuf::from(arg));
    };
    let digit = |b: u8| (b as char).to_digit(16);
    if hex.len() % 2 != 0 {
        return Err(format!("{arg:?}: not hex-encoded bytes"));
    }
    hex.chunks(2)
        .map(|pair| match (digit(pair[0]), digit(pair[1])) {
            (Some(hi), Some(lo)) => Ok((hi * 16 + lo) as u8),
            _ => Err(format!("{arg:?}: not hex-encoded bytes")),
        })
        .collect::<Result<Vec<u8>, String>>()
        .map(|bytes| PathBuf::from(OsString::from_vec(bytes)))
}

/// Parses the stage's own flags (written by [`argv`]); the rest is the runner's argv.
type Parsed = (MountPlan, Watch, Option<NetProxy>, Vec<OsString>);

fn parse(args: &[OsString]) -> Result<Parsed, String> {
    let mut plan = MountPlan::default();
    let mut watch = Watch::default();
    let mut keep = Vec::new();
    let mut net = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut path = |flag: &str| -> Result<PathBuf, String> {
            let p = decode_path(it.next().ok_or(format!("{flag} needs a PATH"))?)?;
            if !p.is_absolute() {
                return Err(format!("{flag} {}: not an absolute path", p.display()));
            }
            Ok(p)
        };
        match arg.to_str() {
            Some("--rw") => plan.rw.push(path("--rw")?),
            Some("--pin") => plan.pin.push(path("--pin")?),
            Some("--ro") => plan.ro.push(path("--ro")?),
            Some("--mask") => plan.mask.push(path("--mask")?),
            Some("--shared") => watch.shared.push(path("--shared")?),
            Some("--missing") => watch.missing.push(path("--missing")?),
            Some("--report") => watch.report = Some(path("--report")?),
            Some(stockade_policy::capability::FLAG) => {
                let name = it.next().ok_or("--keep-capability needs a NAME")?;
                let cap: Capability = name
                    .to_str()
                    .ok_or_else(|| format!("--keep-capability {name:?}: not a capability"))?
                    .parse()
                    .map_err(|e| format!("--keep-capability: {e}"))?;
                keep.push(cap);
            }
            Some("--private-tmp") => plan.private_tmp = true,
            Some("--pids") => plan.pids = true,
            Some(NetProxy::FLAG) => {
                let value = it.next().and_then(|v| v.to_str()).unwrap_or_default();
                net = Some(NetProxy::parse(value)?);
            }
            Some("--") => {
                let rest: Vec<OsString> = it.cloned().collect();
                if rest.is_empty() {
                    return Err("no runner command after --".into());
                }
                if !watch.is_empty() && watch.report.is_none() {
                    return Err("--shared and --missing need a --report file".into());
                }
                watch.keep_capabilities = CapabilitySet::of(&keep);
                return Ok((plan, watch, net, rest));
            }
            _ => return Err(format!("unknown argument {:?}", arg.to_string_lossy())),
        }
    }
    Err("no runner command (missing --)".into())
}

/// Why the stage could not be set up.
#[derive(Debug)]
pub struct StageError {
    what: String,
    source: Option<io::Error>,
}

impl std::fmt::Display for StageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.source {
            Some(e) => write!(f, "namespace stage: {}: {e}", self.what),
            None => write!(f, "namespace stage: {}", self.what),
        }
    }
}

impl std::error::Error for StageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|e| e as _)
    }
}

fn fail(what: impl Into<String>) -> StageError {
    StageError {
        what: what.into(),
        source: None,
    }
}

fn os_fail(what: impl Into<String>) -> StageError {
    StageError {
        what: what.into(),
        source: Some(io::Error::last_os_error()),
    }
}

fn check(ret: libc::c_long, what: impl FnOnce() -> String) -> Result<(), StageError> {
    if ret < 0 {
        Err(os_fail(what()))
    } else {
        Ok(())
    }
}

fn cstr(p: &Path) -> Result<CString, StageError> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| fail(format!("{} contains a NUL byte", p.display())))
}

/// `stockade __stage ...`: never returns on success (the runner replaces it, or the
/// outer process replays the command's wait status).
pub fn main(args: &[OsString]) -> i32 {
    let err = match parse(args) {
        Ok((spec, watch, net, runner)) => {
            // Failure lines carry the runner's failure tag, as the runner's own do: to
            // the executor the stage is part of the runner.
            let tag = runner
                .iter()
                .position(|a| a == failure_tag::FLAG)
                .and_then(|i| runner.get(i + 1))
                .and_then(|t| t.to_str())
                .filter(|t| failure_tag::is_valid(t))
                .map(str::to_string);
            let _ = TAG.set(tag);
            match enter(&spec, &watch, net, &runner) {
                Ok(code) => return code,
                Err(e) => e,
            }
        }
        Err(e) => fail(e),
    };
    report(&err);
    exit::RUNNER_FAILURE
}

/// The stage run in the child `stockade run` forks for the command, instead of executing
/// `stockade __stage` there: the same code on the same arguments, without a second start
/// of this binary (one `execve` and the C library's start-up, on the path of every
/// command: bench/results.md). A stage started by a ConfinedArgv's executor is executed
/// as before. What an `execve` would have done for the stage is done here first: every
/// close-on-exec descriptor of the launcher is closed (none stays open in the processes
/// that outlive the command), SIGPIPE is ignored as the stage's `main` would, and the
/// runner is executed with `env` (the command's environment, which `execve` would have
/// given the stage), not the launcher's. Never returns.
///
/// # Safety
/// Only in a child forked from the single-threaded launcher (or proxy host), before
/// anything else runs there.
pub unsafe fn run_in_child(args: &[OsString], env: Vec<(OsString, OsString)>) -> ! {
    close_exec_descriptors();
    // SAFETY: setting a disposition to "ignore" in this single-threaded child.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let _ = RUNNER_ENV.set(env);
    let code = main(args);
    // SAFETY: ends the child without running the launcher's exit code (its stdout
    // buffer, its destructors): that is the launcher's, not the stage's.
    unsafe { libc::_exit(code) }
}

/// The stage's own arguments when `argv` starts this very launcher's namespace stage
/// (`THIS-BINARY __stage ARGS...`, as `confine` writes it): `stockade run`, and the
/// proxy host before it, then run the stage in the child they fork ([`run_in_child`])
/// instead of executing this binary again. `None` for anything else.
pub fn own_args<S: AsRef<std::ffi::OsStr>>(argv: &[S]) -> Option<Vec<OsString>> {
    let (program, rest) = argv.split_first()?;
    let (sub, args) = rest.split_first()?;
    if sub.as_ref() != SUBCOMMAND
        || crate::control::locate::launcher().ok()? != std::path::Path::new(program.as_ref())
    {
        return None;
    }
    Some(args.iter().map(|a| a.as_ref().to_os_string()).collect())
}

/// The runner's environment when the stage runs in the launcher's child (see
/// [`run_in_child`]); unset in a stage started by `execve`, whose environment is its own.
static RUNNER_ENV: std::sync::OnceLock<Vec<(OsString, OsString)>> = std::sync::OnceLock::new();

/// Closes every descriptor marked close-on-exec, as `execve` would.
fn close_exec_descriptors() {
    let close_if_cloexec = |fd: libc::c_int| {
        // SAFETY: fcntl queries a descriptor number; close ends this process's copy of a
        // descriptor that an `execve` would have closed, and nothing here holds it.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC != 0 {
                libc::close(fd);
            }
        }
    };
    match std::fs::read_dir("/proc/self/fd") {
        Ok(dir) => {
            // Collected first (the listing and its descriptor end with this statement):
            // that descriptor is close-on-exec too.
            let fds: Vec<libc::c_int> = dir
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .filter(|&fd| fd > 2)
                .collect();
            fds.into_iter().for_each(close_if_cloexec);
        }
        // No /proc: every descriptor up to the open-file limit.
        Err(_) => {
            // SAFETY: sysconf only reads a limit.
            let max = unsafe { libc::sysconf(libc::_SC_OPEN_MAX) }.clamp(1024, 65_536);
            (3..max as libc::c_int).for_each(close_if_cloexec);
        }
    }
}

/// The runner's failure tag, for the stage's own failure lines.
static TAG: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// Prints the one failure line, as the runner would (tagged when a tag was given).
fn report(err: &StageError) {
    let tag = TAG.get().and_then(|t| t.as_deref());
    let line = format!(
        "{}{}\n",
        failure_tag::line_prefix(tag),
        exit::one_line(&err.to_string())
    );
    let _ = io::stderr().write_all(line.as_bytes());
}

/// The id of the mount namespace this process is in, as the request records it: the
/// stage always leaves it (`CLONE_NEWNS` below), so the runner can tell a stage that ran
/// from an argv that skipped it. `None` where the kernel does not tell the id.
pub fn mount_namespace() -> Option<u64> {
    use std::os::fd::AsRawFd;
    let ns = std::fs::File::open("/proc/self/ns/mnt").ok()?;
    let mut id: u64 = 0;
    // SAFETY: the request writes one u64 into `id`, which outlives the call, on a
    // descriptor this function owns.
    let r = unsafe {
        libc::ioctl(
            ns.as_raw_fd(),
            stockade_policy::stage::NS_GET_MNTNS_ID as _,
            &mut id as *mut u64,
        )
    };
    (r == 0).then_some(id)
}

/// The flags of `unshare` for `spec` (and a network namespace when `net`), as the
/// caller `uid`.
fn namespace_flags(spec: &MountPlan, net: bool, uid: u32) -> libc::c_int {
    let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWIPC;
    if uid != 0 {
        flags |= libc::CLONE_NEWUSER;
    }
    if spec.pids {
        flags |= libc::CLONE_NEWPID;
    }
    if net {
        flags |= libc::CLONE_NEWNET;
    }
    flags
}

fn enter(
    spec: &MountPlan,
    watch: &Watch,
    net: Option<NetProxy>,
    runner: &[OsString],
) -> Result<i32, StageError> {
    // SAFETY: getuid/getgid cannot fail and touch no memory.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    // Before anything else: the snapshot of each shared root is taken before the
    // command exists, and the report file is opened while it is still ours alone.
    let watcher = Watcher::open(watch)?;
    let flags = namespace_flags(spec, net.is_some(), uid);
    // SAFETY: unshare takes flags only; on success this (single-threaded) process is in
    // the new namespaces (the pid namespace applies to its children).
    let r = unsafe { libc::unshare(flags) };
    check(r as libc::c_long, || {
        "cannot create namespaces (unshare)".into()
    })?;
    if flags & libc::CLONE_NEWUSER != 0 {
        map_ids(uid, gid)?;
    }
    if let Some(net) = net {
        crate::proxy::netns::hand_over_listener(net.channel, net.port)
            .map_err(|(what, source)| StageError { what, source })?;
    }
    if spec.pids {
        return outer(spec, runner, watcher);
    }
    mounts(spec, runner)?;
    if watcher.is_idle() {
        return exec_runner(runner);
    }
    parent_of_runner(runner, watcher)
}

/// Maps the caller's uid and gid to themselves in the new user namespace.
fn map_ids(uid: u32, gid: u32) -> Result<(), StageError> {
    let write = |file: &str, text: String| {
        std::fs::write(file, text).map_err(|e| StageError {
            what: format!("cannot write {file}"),
            source: Some(e),
        })
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const AT_RECURSIVE: libc::c_uint = 0x8000;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Sets (or clears) the read-only attribute on every mount at and beneath `path`.
fn set_readonly(path: &Path, readonly: bool) -> Result<(), StageError> {
    let c = cstr(path)?;
    let attr = MountAttr {
        attr_set: if readonly { MOUNT_ATTR_RDONLY } else { 0 },
        attr_clr: if readonly { 0 } else { MOUNT_ATTR_RDONLY },
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: `c` is a NUL-terminated path and `attr` a properly sized mount_attr that
    // outlive the call; the kernel only reads them.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c.as_ptr(),
            AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check(r, || {
        format!(
            "cannot make {} {}",
            path.display(),
            if readonly { "read-only" } else { "writable" }
        )
    })
}

const OPEN_TREE_CLONE: libc::c_uint = 1;
const OPEN_TREE_CLOEXEC: libc::c_uint = libc::O_CLOEXEC as libc::c_uint;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;

const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;

/// A detached copy of the mount tree at the directory `dir` (an open descriptor;
/// `open_tree(OPEN_TREE_CLONE)`, Linux 5.2), every mount keeping its flags. `path` names
/// it in errors.
fn clone_tree(dir: &std::fs::File, path: &Path) -> Result<std::os::fd::OwnedFd, StageError> {
    use std::os::fd::{AsRawFd, FromRawFd};
    // SAFETY: a directory descriptor and an empty NUL-terminated path, both alive for the
    // call; the kernel returns a new descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            dir.as_raw_fd(),
            c"".as_ptr(),
            OPEN_TREE_CLONE
                | OPEN_TREE_CLOEXEC
                | AT_RECURSIVE
                | libc::AT_EMPTY_PATH as libc::c_uint,
        )
    };
    check(fd, || {
        format!("cannot copy the mounts of writable root {}", path.display())
    })?;
    // SAFETY: `fd` is a descriptor the kernel just returned to us alone.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// Puts a detached tree from [`clone_tree`] on top of the directory `dir` (an open
/// descriptor; `move_mount`). `path` names it in errors.
fn attach(tree: &std::os::fd::OwnedFd, dir: &std::fs::File, path: &Path) -> Result<(), StageError> {
    use std::os::fd::AsRawFd;
    // SAFETY: an open tree descriptor, a directory descriptor and empty NUL-terminated
    // paths, all valid for the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            dir.as_raw_fd(),
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    };
    check(r, || {
        format!("cannot put writable root {} back", path.display())
    })
}

fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
    what: &str,
) -> Result<(), StageError> {
    let source = source.map(cstr).transpose()?;
    let target_c = cstr(target)?;
    let fstype = fstype.map(|t| CString::new(t).expect("static fs type"));
    let data = data.map(|d| CString::new(d).expect("static mount data"));
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is null or a NUL-terminated string that outlives the call.
    let r = unsafe {
        libc::mount(
            ptr(&source),
            target_c.as_ptr(),
            ptr(&fstype),
            flags,
            ptr(&data) as *const libc::c_void,
        )
    };
    check(r as libc::c_long, || format!("{what} {}", target.display()))
}

/// The mount layout: everything read-only but the writable roots, protected paths
/// read-only again, `/tmp` and `/proc` fresh when asked, hidden paths covered.
fn mounts(spec: &MountPlan, runner: &[OsString]) -> Result<(), StageError> {
    let root = Path::new("/");
    // The working directory still refers to the mount it was entered on, which is now
    // read-only (and, for a private /tmp, the host's /tmp): re-entered by name below,
    // so it resolves through the new layout. One without a name is left to the runner,
    // which refuses it.
    let cwd = std::env::current_dir().ok();
    // Nothing done here may propagate back to the caller's mount namespace.
    mount(
        None,
        root,
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
        "cannot make mounts private at",
    )?;
    // Each writable root is cloned as it stands (its submounts with their own flags,
    // read-only ones included) before the whole tree is made read-only, and the clone is
    // put back on top: the roots are writable exactly where they were, and a mount the
    // machine made read-only stays so. Clearing the flag afterwards instead would make
    // such mounts writable (or fail on mounts locked by a user namespace).
    // Each root is opened once, following no link on the way, and cloned from and put
    // back on that very descriptor: a command that can rename what lies above a root
    // (a workspace in /tmp) could otherwise swap in a link for the moment the stage
    // looks, and swap it back before the runner checks the root, and the stage would
    // have made the link's target (`/etc`) a writable mount, open to `chmod`.
    let mut clones = Vec::new();
    for path in &spec.rw {
        let dir = match open_dir_no_symlinks(path) {
            Ok(dir) => dir,
            // A root gone or replaced by a link since confine: the runner refuses it
            // with its own failure kind and record, so the stage leaves that to it.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOENT | libc::ELOOP | libc::ENOTDIR)
                ) =>
            {
                continue;
            }
            Err(e) => {
                return Err(StageError {
                    what: format!(
                        "cannot open writable root {} without following links",
                        path.display()
                    ),
                    source: Some(e),
                });
            }
        };
        let clone = clone_tree(&dir, path)?;
        clones.push((path, dir, clone));
    }
    set_readonly(root, true)?;
    for (path, dir, clone) in &clones {
        attach(clone, dir, path)?;
    }
    if spec.private_tmp {
        mount(
            Some(Path::new("tmpfs")),
            Path::new("/tmp"),
            Some("tmpfs"),
            libc::MS_NOSUID | libc::MS_NODEV,
            Some("mode=1777"),
            "cannot mount a private tmpfs on",
        )?;
    }
    for dir in &spec.pin {
        // Still writable, but a mount point: it cannot be renamed or removed, so the
        // protected path below it cannot be moved out of the way. Gone since confine:
        // nothing below it is left to protect.
        if skip_missing(dir)? {
            continue;
        }
        mount(
            Some(dir),
            dir,
            None,
            libc::MS_BIND | libc::MS_REC,
            None,
            "cannot pin",
        )?;
    }
    for path in &spec.ro {
        if skip_missing(path)? {
            continue;
        }
        mount(
            Some(path),
            path,
            None,
            libc::MS_BIND | libc::MS_REC,
            None,
            "cannot bind protected path",
        )?;
        set_readonly(path, true)?;
    }
    if spec.pids {
        mount(
            Some(Path::new("proc")),
            Path::new("/proc"),
            Some("proc"),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            None,
            "cannot mount a fresh /proc on",
        )?;
    }
    // Last, so that nothing mounted afterwards covers a mask's parent.
    let runner_program = runner.first().map(Path::new);
    let keep: Vec<&Path> = spec
        .rw
        .iter()
        .map(PathBuf::as_path)
        .chain(cwd.as_deref())
        .chain(runner_program)
        .collect();
    mask_hidden(&spec.mask, &keep);
    if let Some(cwd) = cwd {
        std::env::set_current_dir(&cwd).map_err(|e| StageError {
            what: format!(
                "cannot re-enter the working directory {} inside the sandbox's mounts",
                cwd.display()
            ),
            source: Some(e),
        })?;
    }
    Ok(())
}

const FSOPEN_CLOEXEC: libc::c_uint = 1;
const FSCONFIG_SET_STRING: libc::c_uint = 1;
const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
const FSMOUNT_CLOEXEC: libc::c_uint = 1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_NOEXEC: u64 = 0x8;

/// Takes a descriptor the kernel returned (or -1) as owned.
fn owned(fd: libc::c_long) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: a non-negative `fd` was just returned by the kernel to this process alone.
    (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// The stage's mask source: a fresh tmpfs, not attached anywhere, holding an empty
/// directory `d` and an empty regular file `f`, each of mode [`MASK_MODE`], the whole
/// mount read-only. Returns the mount's descriptor. A directory is covered with a copy of
/// `d`, a file with a copy of `f` (Linux 5.2 for the mount calls, 5.12 for
/// `mount_setattr`, as the rest of the stage).
fn mask_source() -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::AsRawFd;
    let mode = format!("{:o}", MASK_MODE);
    let mode = CString::new(mode).ok()?;
    // SAFETY: each call takes descriptors this function owns and NUL-terminated
    // strings that outlive it; the kernel returns a new descriptor or -1.
    unsafe {
        let fs = owned(libc::syscall(
            libc::SYS_fsopen,
            c"tmpfs".as_ptr(),
            FSOPEN_CLOEXEC,
        ))?;
        for (key, value) in [
            (c"mode", mode.as_c_str()),
            (c"size", c"4k"),
            (c"nr_inodes", c"3"),
        ] {
            let r = libc::syscall(
                libc::SYS_fsconfig,
                fs.as_raw_fd(),
                FSCONFIG_SET_STRING,
                key.as_ptr(),
                value.as_ptr(),
                0,
            );
            (r == 0).then_some(())?;
        }
        let r = libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0,
        );
        (r == 0).then_some(())?;
        let mnt = owned(libc::syscall(
            libc::SYS_fsmount,
            fs.as_raw_fd(),
            FSMOUNT_CLOEXEC,
            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
        ))?;
        let file = owned(libc::openat(
            mnt.as_raw_fd(),
            c"f".as_ptr(),
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
            MASK_MODE,
        ) as libc::c_long)?;
        // The mode asked for is filtered by the umask: set it as meant.
        (libc::fchmod(file.as_raw_fd(), MASK_MODE) == 0).then_some(())?;
        drop(file);
        (libc::mkdirat(mnt.as_raw_fd(), c"d".as_ptr(), MASK_MODE) == 0).then_some(())?;
        (libc::fchmodat(mnt.as_raw_fd(), c"d".as_ptr(), MASK_MODE, 0) == 0).then_some(())?;
        let attr = MountAttr {
            attr_set: MOUNT_ATTR_RDONLY,
            attr_clr: 0,
            propagation: 0,
            userns_fd: 0,
        };
        let r = libc::syscall(
            libc::SYS_mount_setattr,
            mnt.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        );
        (r == 0).then_some(mnt)
    }
}

/// Covers each hidden path of `paths` with an empty read-only mount (see
/// [`mask_source`]), but one that holds a path of `keep` (see
/// `stockade_policy::stage::maskable`). Best effort by design: the runner looks at
/// each hidden path itself and hides whatever it does not find covered with its Landlock
/// carve-out, so a path this cannot cover (gone, a link now, a kernel without the mount
/// calls) is still hidden, only at the carve-out's cost.
fn mask_hidden(paths: &[PathBuf], keep: &[&Path]) {
    use std::os::fd::AsRawFd;
    let paths: Vec<&PathBuf> = paths
        .iter()
        .filter(|p| stockade_policy::stage::maskable(p, keep))
        .collect();
    if paths.is_empty() {
        return;
    }
    let Some(source) = mask_source() else {
        return;
    };
    for path in paths {
        // A link (planted since confine) is left alone: the mount would land on its
        // target. What a link on the way leads to is the runner's to find out.
        let Ok(meta) = path.symlink_metadata() else {
            continue;
        };
        if meta.file_type().is_symlink() {
            continue;
        }
        let from = if meta.is_dir() { c"d" } else { c"f" };
        let Ok(target) = cstr(path) else {
            continue;
        };
        // SAFETY: descriptors owned here and NUL-terminated strings that outlive the
        // calls; the kernel returns a new descriptor or -1.
        unsafe {
            let Some(copy) = owned(libc::syscall(
                libc::SYS_open_tree,
                source.as_raw_fd(),
                from.as_ptr(),
                OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC,
            )) else {
                continue;
            };
            libc::syscall(
                libc::SYS_move_mount,
                copy.as_raw_fd(),
                c"".as_ptr(),
                libc::AT_FDCWD,
                target.as_ptr(),
                MOVE_MOUNT_F_EMPTY_PATH,
            );
        }
    }
}

/// Whether a protected path (or a directory above one) vanished since `confine` looked,
/// or became a symbolic link: then there is nothing to bind. A link is never a reason to
/// fail: one planted by an earlier command would otherwise make every later run a runner
/// failure. `confine` leaves links out and reports them in `notGranted`.
fn skip_missing(path: &Path) -> Result<bool, StageError> {
    // A link made since confine (which leaves links out and reports them) is skipped the
    // same way: a bind would land on its target, not on the link.
    Ok(match path.symlink_metadata() {
        Err(_) => true,
        Ok(m) => m.file_type().is_symlink(),
    })
}

/// Clears every capability set this process holds but `keep` (the runner clears them
/// again, and its bounding set): the watcher keeps what the command keeps, nothing else.
fn drop_capabilities(keep: CapabilitySet) -> Result<(), StageError> {
    // Kept capabilities are all below 32: the first half holds them.
    crate::control::capabilities::restrict_to(keep.mask() as u32).map_err(|e| StageError {
        what: "cannot drop capabilities".into(),
        source: Some(e),
    })
}

fn exec_runner(runner: &[OsString]) -> Result<i32, StageError> {
    let mut cmd = std::process::Command::new(&runner[0]);
    cmd.args(&runner[1..]);
    if let Some(env) = RUNNER_ENV.get() {
        cmd.env_clear().envs(env.iter().map(|(k, v)| (k, v)));
    }
    let err = std::os::unix::process::CommandExt::exec(&mut cmd);
    Err(StageError {
        what: format!("cannot execute the runner {}", runner[0].to_string_lossy()),
        source: Some(err),
    })
}

/// Signals the outer process and the init process pass on to the command.
const FORWARDED: [libc::c_int; 8] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGCONT,
];

static FORWARD_TO: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = FORWARD_TO.load(std::sync::atomic::Ordering::Relaxed);
    if pid != 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    }
}

pub(crate) fn forward_signals_to(pid: libc::pid_t) {
    FORWARD_TO.store(pid, std::sync::atomic::Ordering::Relaxed);
    for sig in FORWARDED {
        // SAFETY: installs a handler that only calls kill, which is async-signal-safe.
        unsafe { libc::signal(sig, forward as *const () as libc::sighandler_t) };
    }
}

/// Waits for `pid`, retrying on EINTR (a forwarded signal), and returns its wait status.
pub(crate) fn wait_for(pid: libc::pid_t) -> Result<libc::c_int, StageError> {
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes the status into a local.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Ok(status);
        }
        if io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Err(os_fail("cannot wait for the namespace's init"));
        }
    }
}

/// Ends this process the way the command ended: the same exit code, or the same signal.
pub(crate) fn replay(status: libc::c_int) -> i32 {
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        // SAFETY: restoring the default action and raising the signal on this process;
        // a core-dumping signal must not leave a core of the stage, so RLIMIT_CORE is 0.
        unsafe {
            let zero = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &zero);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::raise(sig);
        }
        128 + sig
    } else {
        libc::WEXITSTATUS(status)
    }
}

/// The process outside the pid namespace: forks its init, forwards signals to it, and
/// replays the command's wait status, which init sends through a pipe (init's own exit
/// status cannot carry a signal: nothing can kill a namespace's init from inside).
fn outer(spec: &MountPlan, runner: &[OsString], watcher: Watcher) -> Result<i32, StageError> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    check(r as libc::c_long, || "cannot create a pipe".into())?;
    let (read_end, write_end) = (fds[0], fds[1]);
    // SAFETY: this process is single-threaded; the child only runs code below.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(os_fail("cannot fork the namespace's init"));
    }
    if pid == 0 {
        // SAFETY: closing this process's copy of the read end.
        unsafe { libc::close(read_end) };
        let code = match init(spec, runner, write_end, watcher) {
            Ok(code) => code,
            Err(e) => {
                report(&e);
                exit::RUNNER_FAILURE
            }
        };
        // SAFETY: ends the init process without running the outer process's exit code.
        unsafe { libc::_exit(code) };
    }
    // The outer process watches nothing: init holds the snapshots (and outlives it).
    drop(watcher);
    // SAFETY: closing the outer copy of the write end, so EOF means init is gone.
    unsafe { libc::close(write_end) };
    forward_signals_to(pid);
    let mut buf = [0u8; Report::LEN];
    let n = loop {
        // SAFETY: read into a local buffer of its length.
        let n = unsafe { libc::read(read_end, buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break n;
        }
    };
    if n == Report::LEN as isize {
        let report = Report::from_bytes(buf);
        if report.alone {
            // Init is leaving: gone before this process ends, it is never mistaken for
            // something the command left behind.
            let _ = wait_for(pid);
        }
        // Otherwise the command is done and init is still reaping what it left behind,
        // which is the supervisor's business, as it would be without the stage.
        return Ok(replay(report.status));
    }
    // No report: init failed before the command ran (it printed why) or was killed.
    Ok(replay(wait_for(pid)?))
}

/// Whether the process holding the read end of `write_end`'s pipe is gone: the kernel
/// flags the write end of a pipe whose every reader closed it (`POLLERR`). Init's
/// parent is outside the pid namespace, where `getppid` answers 0 whether it lives or
/// not, so this pipe (whose read end only the outer process holds) is how init asks.
fn parent_gone(write_end: libc::c_int) -> bool {
    let mut pfd = libc::pollfd {
        fd: write_end,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: poll on one pollfd in a local, without waiting.
    let r = unsafe { libc::poll(&mut pfd, 1, 0) };
    r > 0 && pfd.revents & (libc::POLLERR | libc::POLLHUP) != 0
}

/// The pid namespace's init: sets up the mounts, starts the runner, reaps everything,
/// and reports the runner's (the command's) wait status.
fn init(
    spec: &MountPlan,
    runner: &[OsString],
    report_fd: libc::c_int,
    mut watcher: Watcher,
) -> Result<i32, StageError> {
    // If the outer process dies (SIGKILL), so does the namespace: init's death kills
    // every process in it.
    // SAFETY: prctl with an integer argument.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    // The outer process may have died before the line above: then no signal will come,
    // and nothing must start.
    if parent_gone(report_fd) {
        // SAFETY: ends this process at once; nobody is left to tell.
        unsafe { libc::_exit(exit::RUNNER_FAILURE) };
    }
    mounts(spec, runner)?;
    let child = fork_runner(runner, &[report_fd])?;
    drop_capabilities(watcher.keep)?;
    release_stdio();
    forward_signals_to(child);
    // Reap every process of the namespace until the runner's own status arrives.
    let mut reaping = Reaper::new();
    let status = reaping.wait(-1, child, &mut watcher)?;
    // The command is done: the last look at what it could have changed, written down
    // before its status goes out, so whoever reads the status finds the report complete.
    watcher.finish();
    // Whether the command left anything behind: with nothing left, init is alone in the
    // namespace and leaves now, and the outer process waits for it before it ends, so
    // that whoever supervises never sees init outlive the command as if the command had
    // left a process behind.
    let alone = reaping.nothing_left();
    // Otherwise the outer process may now end with the command's status; init stays to
    // reap what the command left behind (supervision ends or keeps those, as without
    // the stage), so it must not die with the outer process any more. A signal to init
    // now goes to every process left in the namespace (kill(-1) from init reaches
    // exactly those): a supervisor ending the range gives them their grace period, and
    // init leaves once the namespace is empty.
    FORWARD_TO.store(-1, std::sync::atomic::Ordering::Relaxed);
    let report = Report { status, alone }.to_bytes();
    // SAFETY: prctl with an integer argument; one write (atomic: shorter than PIPE_BUF)
    // from a local buffer.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, 0);
        libc::write(report_fd, report.as_ptr().cast(), report.len());
        libc::close(report_fd);
    }
    if !alone {
        // What the command left behind can still change a shared root: it is put back
        // (and reported, while the report file is there) until the namespace is empty.
        reaping.wait(-1, 0, &mut watcher)?;
    }
    Ok(0)
}

/// What init tells the outer process once the command ended: its wait status, and
/// whether init is alone in the namespace (then it leaves at once, and the outer process
/// waits for it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Report {
    status: libc::c_int,
    alone: bool,
}

impl Report {
    const LEN: usize = 8;

    fn to_bytes(self) -> [u8; Report::LEN] {
        let mut bytes = [0u8; Report::LEN];
        bytes[..4].copy_from_slice(&self.status.to_ne_bytes());
        bytes[4..].copy_from_slice(&i32::from(self.alone).to_ne_bytes());
        bytes
    }

    fn from_bytes(bytes: [u8; Report::LEN]) -> Report {
        let word =
            |i: usize| i32::from_ne_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        Report {
            status: word(0),
            alone: word(4) != 0,
        }
    }
}

/// Without a pid namespace, when there is something to watch: the runner runs as this
/// process's child, and this process puts shared roots back while it waits, then ends
/// the way the command ended (as the outer process does with a pid namespace).
fn parent_of_runner(runner: &[OsString], mut watcher: Watcher) -> Result<i32, StageError> {
    let child = fork_runner(runner, &[])?;
    drop_capabilities(watcher.keep)?;
    forward_signals_to(child);
    let status = Reaper::new().wait(child, child, &mut watcher)?;
    watcher.finish();
    Ok(replay(status))
}

/// Forks the child that execs the runner, closing `close` in it first.
fn fork_runner(runner: &[OsString], close: &[libc::c_int]) -> Result<libc::pid_t, StageError> {
    // SAFETY: single-threaded; the child only closes descriptors and execs.
    let child = unsafe { libc::fork() };
    if child < 0 {
        return Err(os_fail("cannot fork the runner"));
    }
    if child == 0 {
        for &fd in close {
            // SAFETY: the child's copy of a descriptor that is not its business.
            unsafe { libc::close(fd) };
        }
        let e = match exec_runner(runner) {
            Err(e) => e,
            Ok(_) => fail("the runner returned"),
        };
        report(&e);
        // SAFETY: ends the failed child at once.
        unsafe { libc::_exit(exit::RUNNER_FAILURE) };
    }
    Ok(child)
}

extern "C" fn on_child(_: libc::c_int) {}

/// Waits for children while the watcher puts shared roots back. SIGCHLD stays blocked
/// except inside `ppoll`, which unblocks it atomically: a child that ends between a
/// `waitpid` and the sleep still wakes it (the signal stays pending until then).
struct Reaper {
    /// The signal mask to sleep with: the one before SIGCHLD was blocked.
    sleep_mask: libc::sigset_t,
}

impl Reaper {
    /// Blocks SIGCHLD (after the runner was forked: it must not inherit the block) and
    /// gives it a handler, so that it interrupts `ppoll` rather than being ignored.
    fn new() -> Reaper {
        // SAFETY: installs a handler that does nothing; sigset operations on locals;
        // sigprocmask on this single-threaded process.
        unsafe {
            libc::signal(libc::SIGCHLD, on_child as *const () as libc::sighandler_t);
            let mut block: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut block);
            libc::sigaddset(&mut block, libc::SIGCHLD);
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigprocmask(libc::SIG_BLOCK, &block, &mut old);
            libc::sigdelset(&mut old, libc::SIGCHLD);
            Reaper { sleep_mask: old }
        }
    }

    /// Reaps every child that already ended; true when no child is left (`ECHILD`).
    fn nothing_left(&mut self) -> bool {
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes the status into a local.
            let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if r > 0 {
                continue;
            }
            if r == 0 {
                return false;
            }
            match io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::ECHILD) => return true,
                _ => return false,
            }
        }
    }

    /// Reaps children of `which` (`-1`: any, as init) until `target` ends, and returns
    /// its wait status; with `target` 0, until no child is left (returns 0).
    fn wait(
        &mut self,
        which: libc::pid_t,
        target: libc::pid_t,
        watcher: &mut Watcher,
    ) -> Result<libc::c_int, StageError> {
        loop {
            loop {
                let mut status = 0;
                // SAFETY: waitpid writes the status into a local.
                let r = unsafe { libc::waitpid(which, &mut status, libc::WNOHANG) };
                if r > 0 && r == target {
                    return Ok(status);
                }
                if r > 0 {
                    continue;
                }
                if r == 0 {
                    break;
                }
                match io::Error::last_os_error().raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::ECHILD) if target == 0 => return Ok(0),
                    _ => return Err(os_fail("cannot wait for the runner")),
                }
            }
            watcher.check_roots();
            watcher.sleep(&self.sleep_mask);
        }
    }
}

/// One shared writable root under watch: a descriptor of the directory itself (the
/// command cannot swap the inode behind it), and its metadata before the command.
struct Guarded {
    path: PathBuf,
    dir: std::fs::File,
    was: DirMeta,
    /// A state that could not be put back, reported once.
    left: Option<DirMeta>,
}

/// What the stage watches while the command runs, and where it reports.
struct Watcher {
    roots: Vec<Guarded>,
    missing: Vec<PathBuf>,
    report: Option<std::fs::File>,
    written: usize,
    /// The capabilities kept while watching.
    keep: CapabilitySet,
}

/// How often the shared roots are looked at while the command runs: a change is put back
/// within about this long. Looked at, not watched: an inotify watch would report a
/// change at once, but releasing one costs the kernel an RCU grace period (about 15 ms
/// here) on every exit, longer than the whole stage; an `fstat` every 20 ms costs
/// nothing measurable.
const LOOK_EVERY_MS: i64 = 20;

fn dir_meta(file: &std::fs::File) -> Option<DirMeta> {
    use std::os::unix::fs::MetadataExt;
    file.metadata()
        .ok()
        .map(|m| DirMeta::new(m.mode(), m.uid(), m.gid()))
}

impl Watcher {
    /// Opens the report file (it must be as `confine` made it: a regular 0600 file of
    /// this user, empty) and each shared root, and takes each root's snapshot.
    fn open(watch: &Watch) -> Result<Watcher, StageError> {
        use std::os::unix::fs::OpenOptionsExt;
        let report = match &watch.report {
            None => None,
            Some(path) => {
                let bad = |why: String| fail(format!("report file {}: {why}", path.display()));
                let file = std::fs::OpenOptions::new()
                    .append(true)
                    .custom_flags(
                        libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY,
                    )
                    .open(path)
                    .map_err(|e| bad(e.to_string()))?;
                let meta = file.metadata().map_err(|e| bad(e.to_string()))?;
                crate::control::private_dir::trusted(&meta, FileKind::Regular)
                    .map_err(|u| bad(u.to_string()))?;
                if meta.len() != 0 {
                    return Err(bad("it is not empty (a report file is used once)".into()));
                }
                // A file size limit from the spawner (`ulimit -f`) below what the report
                // may take would kill the stage with SIGXFSZ at the write past it, while
                // the command runs, leaving a cut report: refused before it starts.
                use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit};
                if let Ok((limit, _)) = getrlimit(Resource::RLIMIT_FSIZE)
                    && limit != RLIM_INFINITY
                    && limit < MAX_REPORT_BYTES as u64
                {
                    return Err(bad(format!(
                        "the file size limit this stage was started with (RLIMIT_FSIZE, `ulimit -f`) is {limit} bytes, below the {MAX_REPORT_BYTES} the report may take; raise it"
                    )));
                }
                Some(file)
            }
        };
        let mut roots = Vec::new();
        for path in &watch.shared {
            // A root gone (or reached through a link) since confine: the runner refuses
            // it.
            let Ok(dir) = open_dir_no_symlinks(path) else {
                continue;
            };
            let Some(was) = dir_meta(&dir) else {
                continue;
            };
            roots.push(Guarded {
                path: path.clone(),
                dir,
                was,
                left: None,
            });
        }
        Ok(Watcher {
            roots,
            missing: watch.missing.clone(),
            report,
            written: 0,
            keep: watch.keep_capabilities,
        })
    }

    /// Whether there is nothing to watch (the stage then execs the runner itself).
    fn is_idle(&self) -> bool {
        self.roots.is_empty() && self.missing.is_empty()
    }

    /// Puts back each shared root whose mode or owner changed, and reports it.
    fn check_roots(&mut self) {
        let mut found = Vec::new();
        for g in &mut self.roots {
            let Some(now) = dir_meta(&g.dir) else {
                continue;
            };
            if now == g.was || g.left == Some(now) {
                continue;
            }
            let put_back = restore(&g.dir, now, g.was);
            g.left = (!put_back).then_some(now);
            found.push(StageRecord::Changed(RootChange {
                path: g.path.to_string_lossy().into_owned(),
                was: g.was,
                found: now,
                put_back,
            }));
        }
        for record in found {
            self.record(&record);
        }
    }

    /// Sleeps until it is time to look at the roots again (never, without any) or a
    /// signal (a child's end) arrives, with `mask` as the signal mask meanwhile.
    fn sleep(&self, mask: &libc::sigset_t) {
        let interval = libc::timespec {
            tv_sec: 0,
            tv_nsec: LOOK_EVERY_MS * 1_000_000,
        };
        let timeout = if self.roots.is_empty() {
            std::ptr::null()
        } else {
            &interval as *const libc::timespec
        };
        // SAFETY: ppoll on no descriptors, with a local timespec or null and a signal
        // mask that outlive the call.
        unsafe { libc::ppoll(std::ptr::null_mut(), 0, timeout, mask) };
    }

    /// The last look once the command has ended: the roots, and which protected names
    /// appeared.
    fn finish(&mut self) {
        self.check_roots();
        let appeared: Vec<StageRecord> = std::mem::take(&mut self.missing)
            .into_iter()
            .filter(|p| stockade_policy::stage::appeared(&p.symlink_metadata()))
            .map(|p| StageRecord::Appeared(p.to_string_lossy().into_owned()))
            .collect();
        for record in appeared {
            self.record(&record);
        }
    }

    /// Appends one record with one write, up to [`MAX_RECORDS`].
    fn record(&mut self, record: &StageRecord) {
        if self.written >= MAX_RECORDS {
            return;
        }
        if let Some(file) = &mut self.report {
            // Best effort: the directory may be gone (the launcher removed it once the
            // command's status was in); a write to the unlinked file harms nobody.
            let _ = file.write_all(&record.encode());
            self.written += 1;
        }
    }
}

/// Puts the mode and owner of the directory `dir` is open on back from `now` to `was`;
/// whether they are `was` afterwards.
fn restore(dir: &std::fs::File, now: DirMeta, was: DirMeta) -> bool {
    use std::os::fd::AsRawFd;
    let fd = dir.as_raw_fd();
    // Owner first: a change of owner or group can clear set-id bits the mode below then
    // restores. As the owner, no capability is needed for either (a group change only to
    // a group of the caller's, as the original was).
    // SAFETY: fchown/fchmod on a directory descriptor the caller holds.
    unsafe {
        if now.uid != was.uid || now.gid != was.gid {
            libc::fchown(fd, was.uid, was.gid);
        }
        libc::fchmod(fd, was.mode as libc::mode_t);
    }
    dir_meta(dir) == Some(was)
}

/// Opens the directory `path` (absolute, canonical) for reading its metadata and
/// putting it back, following no symbolic link anywhere on the way: `openat2` with
/// `RESOLVE_NO_SYMLINKS`, or before Linux 5.6 one `O_NOFOLLOW` step per component. A
/// command that can write a directory above a shared root could otherwise replace it with
/// a link, and the mode put back would land on whatever the link names (`/usr/share`,
/// as root), outside every writable root.
pub fn open_dir_no_symlinks(path: &Path) -> io::Result<std::fs::File> {
    use std::os::fd::FromRawFd;
    let c = cstr(path).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let flags = (libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64;
    let how = OpenHow {
        flags,
        mode: 0,
        resolve: libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: openat2 reads a NUL-terminated path and an `open_how` of the size passed,
    // both alive for the call; it returns a new descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            c.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd >= 0 {
        // SAFETY: a non-negative return is a descriptor this process now owns.
        return Ok(unsafe { std::fs::File::from_raw_fd(fd as libc::c_int) });
    }
    let err = io::Error::last_os_error();
    if !matches!(err.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM)) {
        return Err(err);
    }
    open_dir_walking(path)
}

/// `struct open_how` of openat2(2) (libc's is non-exhaustive, so not constructible).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// The fallback of [`open_dir_no_symlinks`]: from `/`, each component opened `O_PATH`
/// without following it, the last one for reading.
fn open_dir_walking(path: &Path) -> io::Result<std::fs::File> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::path::Component;
    let step = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let last = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let names: Vec<&std::ffi::OsStr> = path
        .components()
        .filter_map(|c| match c {
            Component::RootDir => None,
            Component::Normal(n) => Some(Ok(n)),
            _ => Some(Err(())),
        })
        .collect::<Result<_, _>>()
        .map_err(|()| io::Error::from_raw_os_error(libc::EINVAL))?;
    let open = |dir: libc::c_int, name: &std::ffi::CStr, flags: libc::c_int| {
        // SAFETY: a NUL-terminated name and a directory descriptor alive for the call.
        let fd = unsafe { libc::openat(dir, name.as_ptr(), flags) };
        if fd < 0 {
            Err(io::Error::last_os_error())
        } else {
            // SAFETY: a descriptor the kernel just returned to this process alone.
            Ok(unsafe { OwnedFd::from_raw_fd(fd) })
        }
    };
    let mut dir = open(
        libc::AT_FDCWD,
        c"/",
        if names.is_empty() { last } else { step },
    )?;
    for (i, name) in names.iter().enumerate() {
        let name = CString::new(name.as_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let flags = if i + 1 == names.len() { last } else { step };
        dir = open(dir.as_raw_fd(), &name, flags)?;
    }
    Ok(std::fs::File::from(dir))
}

/// The check `stockade run` makes once the command has settled, with or without the
/// stage: whether the shared root `dir` (opened when confined, so it is that very
/// directory wherever the command moved it, never what a path leads to now) still has
/// the metadata `was` it had then, and if not, puts it back.
pub fn check_shared(path: &Path, dir: &std::fs::File, was: DirMeta) -> Option<RootChange> {
    let now = dir_meta(dir)?;
    if now == was {
        return None;
    }
    Some(RootChange {
        path: path.to_string_lossy().into_owned(),
        was,
        found: now,
        put_back: restore(dir, now, was),
    })
}

/// Points init's standard descriptors at `/dev/null` once the runner has its own copies.
/// Init outlives the command while anything it left behind runs (`--keep-background`):
/// holding the command's stdout and stderr open would keep every reader of them (the
/// executor, `stockade run`'s capture) waiting for an end of file that never comes, where
/// without the stage a background process that redirected its output releases them.
fn release_stdio() {
    // SAFETY: open of a NUL-terminated literal; dup2 and close on descriptors this
    // process owns.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        for fd in 0..3 {
            if null >= 0 {
                libc::dup2(null, fd);
            } else {
                libc::close(fd);
            }
        }
        if null > 2 {
            libc::close(null);
        }
    }
}

/// Whether namespaces for `spec` can be created here, and if not, why: tried for real
/// in a short-lived child, since sysctls, AppArmor and container seccomp profiles can
/// each refuse them.
pub fn available(pids: bool, net: bool) -> Result<(), String> {
    let spec = MountPlan {
        pids,
        ..MountPlan::default()
    };
    // SAFETY: getuid cannot fail.
    let flags = namespace_flags(&spec, net, unsafe { libc::getuid() });
    // SAFETY: the child only calls unshare and _exit, both async-signal-safe.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: see above.
        unsafe {
            let code = if libc::unshare(flags) == 0 {
                0
            } else {
                *libc::__errno_location()
            };
            libc::_exit(code.min(255));
        }
    }
    let status = wait_for(pid).map_err(|e| e.to_string())?;
    match libc::WEXITSTATUS(status) {
        0 => Ok(()),
        errno => Err(format!(
            "unshare refused: {}",
            io::Error::from_raw_os_error(errno)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_comes_back_from_the_argv_byte_for_byte() {
        let odd = PathBuf::from(OsString::from_vec(b"/w/sec\xff/.env".to_vec()));
        let plan = MountPlan {
            rw: vec!["/w".into(), odd.clone()],
            ro: vec![odd.join("x")],
            mask: vec![PathBuf::from("/hex:/x")],
            ..MountPlan::default()
        };
        let watch = Watch {
            missing: vec![odd.join(".envrc")],
            report: Some(odd.join("report")),
            ..Watch::default()
        };
        let argv = argv(
            &plan,
            &watch,
            None,
            "/bin/stockade",
            &["/bin/runner".into()],
        );
        assert!(
            argv.iter().any(|a| a == "hex:2f772f736563ff2f2e656e76"),
            "{argv:?}"
        );
        let args: Vec<OsString> = argv[2..].iter().map(OsString::from).collect();
        let (parsed, parsed_watch, _, runner) = parse(&args).unwrap();
        assert_eq!(parsed, plan);
        assert_eq!(parsed_watch.missing, watch.missing);
        assert_eq!(parsed_watch.report, watch.report);
        assert_eq!(runner, [OsString::from("/bin/runner")]);
        for bad in ["hex:2f7", "hex:zz"] {
            let args = [OsString::from("--rw"), bad.into(), "--".into(), "r".into()];
            assert!(parse(&args).is_err(), "{bad}");
        }
    }

    /// The check init makes right after asking for SIGKILL on its parent's death: if the
    /// parent died before that, no signal will ever come, and the pipe whose read end
    /// only the parent held is what says so. The kernel's answer for a real pipe.
    #[test]
    fn a_pipe_whose_reader_is_gone_says_the_parent_is_gone() {
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into the array.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        let (read_end, write_end) = (fds[0], fds[1]);
        assert!(!parent_gone(write_end), "the reader is still there");
        // SAFETY: closing a descriptor this test owns.
        unsafe { libc::close(read_end) };
        assert!(parent_gone(write_end), "the reader is gone");
        // SAFETY: as above.
        unsafe { libc::close(write_end) };
    }

    /// Runs init's start-up check in a grandchild whose parent dies before it (when
    /// `parent_dies_first`) or lives on, and returns the grandchild's exit code: 7 when
    /// it found its parent gone, 8 when not. Everything happens in a forked process
    /// that is its own child reaper, so the orphan comes back to be waited for; the
    /// order is forced by a pipe, not by time.
    fn init_check_with_parent(parent_dies_first: bool) -> i32 {
        // SAFETY: the forked processes only call async-signal-safe functions (fork,
        // pipe, prctl, read, close, poll, waitpid) and _exit.
        unsafe {
            let x = libc::fork();
            assert!(x >= 0);
            if x != 0 {
                let mut status = 0;
                assert_eq!(libc::waitpid(x, &mut status, 0), x);
                return libc::WEXITSTATUS(status);
            }
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
            let (mut fds, mut go) = ([0; 2], [0; 2]);
            libc::pipe(fds.as_mut_ptr());
            libc::pipe(go.as_mut_ptr());
            let (read_end, write_end) = (fds[0], fds[1]);
            let outer = libc::fork();
            if outer == 0 {
                let init = libc::fork();
                if init == 0 {
                    libc::close(read_end);
                    libc::close(go[1]);
                    // Wait for the go-ahead (EOF: every writer closed).
                    let mut b = 0u8;
                    while libc::read(go[0], (&mut b as *mut u8).cast(), 1) > 0 {}
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    libc::_exit(if parent_gone(write_end) { 7 } else { 8 });
                }
                libc::close(write_end);
                libc::close(go[0]);
                libc::close(go[1]);
                if !parent_dies_first {
                    // Stay, holding the read end, until init has answered.
                    let mut status = 0;
                    libc::waitpid(init, &mut status, 0);
                    libc::_exit(libc::WEXITSTATUS(status));
                }
                libc::_exit(0);
            }
            libc::close(read_end);
            libc::close(write_end);
            libc::close(go[0]);
            let mut status = 0;
            if parent_dies_first {
                // The parent is gone and reaped before init asks.
                libc::waitpid(outer, &mut status, 0);
                libc::close(go[1]);
                // Init, an orphan now, comes back to this reaper.
                libc::waitpid(-1, &mut status, 0);
            } else {
                libc::close(go[1]);
                libc::waitpid(outer, &mut status, 0);
            }
            libc::_exit(libc::WEXITSTATUS(status));
        }
    }

    #[test]
    fn kept_capabilities_reach_the_watcher_through_the_stage_argv() {
        let watch = Watch {
            shared: vec!["/tmp".into()],
            report: Some("/run/x/stage".into()),
            keep_capabilities: CapabilitySet::of(&[Capability::Fowner, Capability::Chown]),
            ..Watch::default()
        };
        let net = NetProxy {
            channel: 3,
            port: 40000,
        };
        let argv = argv(
            &MountPlan::default(),
            &watch,
            Some(net),
            "/l",
            &["/r".into()],
        );
        let args: Vec<OsString> = argv[2..].iter().map(OsString::from).collect();
        let (_, parsed, parsed_net, runner) = parse(&args).unwrap();
        assert_eq!(parsed, watch);
        assert_eq!(
            parsed_net,
            Some(net),
            "the network namespace's proxy round trips too"
        );
        assert_eq!(runner, [OsString::from("/r")]);
        // Only names of the allow-list: anything else is refused, not dropped.
        let bad: Vec<OsString> = ["--keep-capability", "CAP_SYS_ADMIN", "--", "/r"]
            .iter()
            .map(OsString::from)
            .collect();
        let err = parse(&bad).unwrap_err();
        assert!(err.contains("CAP_SYS_ADMIN cannot be kept"), "{err}");
    }

    #[test]
    fn init_leaves_when_its_parent_died_before_the_death_signal_was_set() {
        assert_eq!(init_check_with_parent(true), 7);
        // Control: with the parent alive, init carries on.
        assert_eq!(init_check_with_parent(false), 8);
    }
}
