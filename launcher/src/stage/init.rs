//! The processes around the command: with a pid namespace, the namespace's init (it
//! reaps, forwards signals, reports the command's wait status) and the outer process that
//! replays that status; without one, the stage as the runner's parent while it watches.

use super::error::{StageError, check, fail, os_fail, report};
use super::exec::{drop_capabilities, exec_runner, release_stdio};
use super::mounts::mounts;
use super::watch::Watcher;
use std::ffi::OsString;
use std::io;
use stockade_policy::exit;
use stockade_policy::stage::MountPlan;

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
            // Not raise(3): musl's sends to the thread id it cached at its own fork, and
            // `run`'s stage is a child made by a raw clone3, so that id is the launcher's,
            // which would die in its place. getpid(2) asks the kernel.
            libc::kill(libc::getpid(), sig);
        }
        128 + sig
    } else {
        libc::WEXITSTATUS(status)
    }
}

/// The process outside the pid namespace: forks its init, forwards signals to it, and
/// replays the command's wait status, which init sends through a pipe (init's own exit
/// status cannot carry a signal: nothing can kill a namespace's init from inside).
pub(super) fn outer(
    spec: &MountPlan,
    runner: &[OsString],
    watcher: Watcher,
) -> Result<i32, StageError> {
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
pub(super) fn parent_gone(write_end: libc::c_int) -> bool {
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
pub(super) fn init(
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
pub(super) fn parent_of_runner(
    runner: &[OsString],
    mut watcher: Watcher,
) -> Result<i32, StageError> {
    let child = fork_runner(runner, &[])?;
    drop_capabilities(watcher.keep)?;
    forward_signals_to(child);
    let status = Reaper::new().wait(child, child, &mut watcher)?;
    watcher.finish();
    Ok(replay(status))
}

/// Forks the child that execs the runner, closing `close` in it first.
fn fork_runner(runner: &[OsString], close: &[libc::c_int]) -> Result<libc::pid_t, StageError> {
    // A stage that dies with its parent passes that on: the runner (the command) dies
    // with the stage (see `crate::supervise::lifeline`).
    let death_signal = crate::supervise::lifeline::own_death_signal();
    // SAFETY: getpid cannot fail.
    let parent = unsafe { libc::getpid() };
    // SAFETY: single-threaded; the child only closes descriptors and execs.
    let child = unsafe { libc::fork() };
    if child < 0 {
        return Err(os_fail("cannot fork the runner"));
    }
    if child == 0 {
        if death_signal != 0 {
            crate::supervise::lifeline::die_with_parent(parent);
        }
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
