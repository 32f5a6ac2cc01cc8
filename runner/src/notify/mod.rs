//! The metadata supervisor: where the namespace stage does not run, workspace-write's
//! `metadata` guarantee (no mode, owner or time changes outside the writable roots, none
//! on a protected path) is held by a process of the runner's own that answers those
//! calls for the command (seccomp user notification). Under the stage the same process
//! holds what its read-only mounts do not: the inherited descriptors the caller opened
//! on its own read-write mounts outside the roots (a log file stdout appends to, a
//! device), started only when there is one (see `Supervision` in `main.rs`). It then
//! lives in the stage's mount and pid namespaces and walks paths as the command sees
//! them.
//!
//! Roles, decided by who must see what:
//! - the runner's process stays the supervisor: it is the process the executor spawned
//!   and waits for, it forwards the signals it is sent to the command, and it exits with
//!   the command's status (or dies of the same signal). It must be an ancestor of every
//!   process it reads the memory of: with Yama's `ptrace_scope` 1 (Ubuntu's default, and
//!   a container's kernel is the host's) only an ancestor may;
//! - a child confines itself as before, installs the supervisor's filter beside the main
//!   one, hands the listener over a socket pair, waits until the supervisor says it is
//!   ready (a supervisor that could not start leaves the child nothing to run with: it
//!   fails, fail-closed), and execs the command. It dies with the supervisor
//!   (`PR_SET_PDEATHSIG`: a command that changes that for itself lives on, its metadata
//!   calls failing, as below).
//!
//! The supervisor cannot be reached by the command: it holds no Landlock domain, so the
//! command's domain forbids ptrace of it and reading its memory, and (ABI 6) signalling
//! it; below ABI 6 the main filter refuses signals to the command's parent, which it is.
//! It drops its capabilities to the command's and sets no_new_privs before it answers
//! anything, so no change it makes goes beyond what the command could have done itself.
//! If it dies, the kernel fails every pending and later notified call (`ENOSYS`): never
//! a change made unchecked.

mod calls;
mod filter;
mod supervisor;
mod worker;
mod writes;

use crate::error::RunnerError;
use nix::sys::signal::{SigSet, SigmaskHow, sigprocmask};
use nix::sys::socket::{
    AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType, sendmsg, socketpair,
};
use nix::unistd::{ForkResult, fork};
use std::io::IoSlice;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use stockade_policy::Policy;

/// The child's end of the hand-over: after [`split`], in the process that becomes the
/// command.
pub struct Handoff {
    sock: OwnedFd,
    /// Whether the filter also sends the calls that write or replace names.
    protect: bool,
}

/// Why supervision could not start.
#[derive(Debug)]
pub enum NotifyError {
    /// The socket pair or the fork failed.
    Split(nix::errno::Errno),
    /// The kernel refused the filter with a listener (`EBUSY`: a filter above already
    /// has one, as under another supervisor).
    Install(nix::errno::Errno),
    /// The listener could not be handed over, or the supervisor never said it was ready.
    Handoff(std::io::Error),
}

impl std::fmt::Display for NotifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotifyError::Split(e) => write!(f, "cannot start the metadata supervisor: {e}"),
            NotifyError::Install(e) => write!(
                f,
                "the kernel refused the metadata supervisor's filter (seccomp user notification): {e}"
            ),
            NotifyError::Handoff(e) => {
                write!(f, "the metadata supervisor did not take over: {e}")
            }
        }
    }
}

impl std::error::Error for NotifyError {}

/// Forks: the calling process becomes the supervisor and never returns from here (it
/// exits as the command does); the child returns its [`Handoff`] and goes on confining
/// itself. The signals the supervisor forwards are blocked across the fork, so none is
/// lost before it listens, and unblocked again in the child.
/// `audit_tag`: the name the command's Landlock domain was created under, which the
/// worker that performs its writes takes too (its refusals are the command's).
pub fn split(
    policy: &Policy,
    protect: bool,
    audit_tag: Option<&str>,
) -> Result<Handoff, RunnerError> {
    let (parent_end, child_end) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| RunnerError::Notify(NotifyError::Split(e)))?;
    let mut old = SigSet::empty();
    sigprocmask(
        SigmaskHow::SIG_BLOCK,
        Some(&supervisor::signal_set()),
        Some(&mut old),
    )
    .map_err(|e| RunnerError::Notify(NotifyError::Split(e)))?;
    let rules = supervisor::rules_of(policy, protect, audit_tag);
    let parent = nix::unistd::getpid();
    // SAFETY: the runner has one thread; the child only runs the runner's own code.
    match unsafe { fork() } {
        Err(e) => {
            let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
            Err(RunnerError::Notify(NotifyError::Split(e)))
        }
        Ok(ForkResult::Parent { child }) => {
            drop(child_end);
            // Out of the executor's process group, leaving the command in it: a signal
            // sent to the whole group reaches the command once, directly, and the
            // supervisor forwards only what was sent to it alone. A session leader (the
            // runner's own session beside a terminal) cannot move; it keeps skipping
            // what a terminal sent its group.
            let _ =
                nix::unistd::setpgid(nix::unistd::Pid::from_raw(0), nix::unistd::Pid::from_raw(0));
            supervisor::run(parent_end, child, rules)
        }
        Ok(ForkResult::Child) => {
            drop(parent_end);
            let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
            die_with_parent(parent);
            Ok(Handoff {
                sock: child_end,
                protect,
            })
        }
    }
}

/// Asks for SIGKILL when the supervisor dies, and checks it has not already.
fn die_with_parent(parent: nix::unistd::Pid) {
    // SAFETY: PR_SET_PDEATHSIG takes a signal number and reads no memory.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    if nix::unistd::getppid() != parent {
        std::process::exit(stockade_policy::exit::RUNNER_FAILURE);
    }
}

impl Handoff {
    /// Installs the supervisor's filter (after the main one: no_new_privs is set),
    /// hands the listener over, with the command's Landlock ruleset when the supervisor
    /// performs writes (its worker restricts itself with it), and waits for the
    /// supervisor to say it is ready.
    pub fn install(self, ruleset: Option<OwnedFd>) -> Result<(), RunnerError> {
        let listener = install_filter(self.protect)
            .map_err(|e| RunnerError::Notify(NotifyError::Install(e)))?;
        self.hand_over(listener, ruleset)
    }

    /// Sends the installed filter's listener (and the ruleset) to the supervisor and
    /// waits until it says it is ready.
    fn hand_over(self, listener: OwnedFd, ruleset: Option<OwnedFd>) -> Result<(), RunnerError> {
        let handoff = |e: std::io::Error| RunnerError::Notify(NotifyError::Handoff(e));
        let mut fds = vec![listener.as_raw_fd()];
        fds.extend(ruleset.as_ref().map(|r| r.as_raw_fd()));
        sendmsg::<()>(
            self.sock.as_raw_fd(),
            &[IoSlice::new(b"L")],
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::empty(),
            None,
        )
        .map_err(|e| handoff(e.into()))?;
        drop(listener);
        drop(ruleset);
        // `R`: ready; `F` and why not; nothing: it died.
        let mut answer = [0u8; 512];
        let why = |text: String| handoff(std::io::Error::other(text));
        match nix::unistd::read(&self.sock, &mut answer) {
            Ok(1) if answer[0] == b'R' => Ok(()),
            Ok(n) if n > 0 && answer[0] == b'F' => {
                Err(why(String::from_utf8_lossy(&answer[1..n]).into_owned()))
            }
            Ok(_) => Err(why("it exited before it was ready".into())),
            Err(e) => Err(handoff(e.into())),
        }
    }
}

impl Handoff {
    /// As [`Handoff::install`], where the supervisor was not promised: a kernel that
    /// refuses the filter (before Linux 5.0, or below another supervisor's listener)
    /// is `false`, and the supervisor, handed nothing, only waits for the command. Once
    /// the filter is installed every failure is the run's: the command's metadata calls
    /// would otherwise all fail.
    pub fn install_if_possible(self) -> Result<bool, RunnerError> {
        let listener = match install_filter(false) {
            Ok(listener) => listener,
            Err(_) => return Ok(false),
        };
        self.hand_over(listener, None).map(|()| true)
    }
}

/// Whether the supervisor could read a command's memory here, as it must to judge any
/// call: Yama's scope 2 and 3 (admin-only attach, or none) refuse that to a supervisor
/// holding no more capabilities than its command, and every change would be refused.
pub fn memory_readable() -> bool {
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    scope.is_none_or(|s| s < 2)
}

/// `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV` (Linux 5.19): once the supervisor has
/// received a call, only a fatal signal interrupts the caller's wait. Without it a
/// signal arriving while the supervisor creates a file makes the kernel drop the answer
/// and restart the call, which then finds the file there (`O_EXCL`: EEXIST).
const WAIT_KILLABLE_RECV: libc::c_ulong = 1 << 5;

/// `seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER)` with the
/// supervisor's program (with the write calls when `protect`): the listener's
/// descriptor.
fn install_filter(protect: bool) -> Result<OwnedFd, nix::errno::Errno> {
    let program = filter::program(protect);
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr() as *mut libc::sock_filter,
    };
    let install = |flags: libc::c_ulong| {
        // SAFETY: `prog` points at `program`, which lives across the call; the kernel
        // copies the instructions and returns a new descriptor or -1.
        unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                flags,
                &prog as *const libc::sock_fprog,
            )
        }
    };
    let listener = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER;
    let mut fd = match protect {
        true => install(listener | WAIT_KILLABLE_RECV),
        false => -1,
    };
    if fd < 0 {
        // Before 5.19 (or not performing writes): interruptible, as before.
        fd = install(listener);
    }
    if fd < 0 {
        return Err(nix::errno::Errno::last());
    }
    // SAFETY: the kernel just returned this descriptor; nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    nix::fcntl::fcntl(
        &fd,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )?;
    Ok(fd)
}
