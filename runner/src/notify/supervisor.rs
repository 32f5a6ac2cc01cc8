//! The supervisor's life: made no stronger than the command, it takes the listener,
//! answers notifications and forwards signals until the command exits, then exits as
//! the command did.

use super::calls::{self, Rules};
use super::worker::Worker;
use super::writes::{self, Pending, Protection, Reply};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
use nix::sys::stat::Mode;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::io::IoSliceMut;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;
use stockade_policy::Policy;
use stockade_policy::grants;

/// The signals the supervisor passes on to the command: what executors and terminals
/// send to stop, interrupt or resize a command. SIGKILL cannot be caught (the command
/// then dies with the supervisor, see `mod.rs`); job-control stops stop both.
pub const FORWARDED: [Signal; 9] = [
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGTERM,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGALRM,
    Signal::SIGWINCH,
    Signal::SIGCONT,
];

/// The forwarded signals and SIGCHLD: blocked in the supervisor, read from a signalfd.
pub fn signal_set() -> SigSet {
    let mut set = SigSet::empty();
    for s in FORWARDED {
        set.add(s);
    }
    set.add(Signal::SIGCHLD);
    set
}

/// The paths the supervisor judges by, taken from the policy before the fork.
pub struct RulePaths {
    roots: Vec<PathBuf>,
    workspace: PathBuf,
    protected: Vec<PathBuf>,
    keep_caps: u64,
    /// Whether the supervisor also performs the calls that write or replace names.
    protect: bool,
    /// The protected paths alone, for those calls (a hidden path is Landlock's to
    /// refuse, with its own answer).
    protected_names: Vec<PathBuf>,
    /// The command's audit tag, for the worker's domain (see `worker`).
    audit_tag: Option<String>,
}

pub fn rules_of(policy: &Policy, protect: bool, audit_tag: Option<&str>) -> RulePaths {
    RulePaths {
        roots: grants::writable_roots(policy),
        workspace: policy.workspace().to_path_buf(),
        // Hidden paths are judged as protected too, should one lie inside a root (the
        // launcher refuses that without the stage today): their modes are the owner's.
        protected: policy
            .protected()
            .iter()
            .map(|p| p.path.clone())
            .chain(policy.hidden().iter().cloned())
            .collect(),
        keep_caps: policy.kept_capabilities().mask(),
        protect,
        protected_names: policy.protected().iter().map(|p| p.path.clone()).collect(),
        audit_tag: audit_tag.map(str::to_string),
    }
}

/// What the supervisor answers by: the metadata rules, and the protected paths with
/// the worker that performs writes, when it holds them.
struct Held {
    rules: Rules,
    writes: Option<(Protection, Worker)>,
}

/// The supervisor: never returns. A setup that fails is told to the child, which fails
/// the run with it (one failure line, from the child); the supervisor then exits as the
/// child does.
pub fn run(sock: OwnedFd, child: Pid, paths: RulePaths) -> ! {
    let signals = SignalFd::with_flags(
        &signal_set(),
        SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK,
    );
    let protect = paths.protect;
    let taken = match (signals.as_ref(), weaken(paths.keep_caps)) {
        (Ok(_), Ok(())) => take_listener(&sock),
        (Err(e), _) => Err(format!("signalfd: {e}")),
        (_, Err(e)) => Err(e),
    };
    let protection = protect.then(|| Protection::of(paths.protected_names.clone()));
    let audit_tag = paths.audit_tag.clone();
    let rules = open_rules(paths);
    // The worker and the kernel's hand-over of descriptors, where writes are performed:
    // either missing fails the run (the listener is dropped unanswered).
    let (listener, writes) = match taken {
        Ok((Some(l), ruleset)) if protect => match start_writes(&l, ruleset, audit_tag) {
            Ok(worker) => (Ok(Some(l)), protection.map(|p| (p, worker))),
            Err(e) => (Err(e), None),
        },
        Ok((l, _)) => (Ok(l), None),
        Err(e) => (Err(e), None),
    };
    let held = Held { rules, writes };
    let listener = match listener {
        Ok(Some(l)) => {
            let _ = nix::unistd::write(&sock, b"R");
            Some(l)
        }
        Ok(None) => None,
        Err(reason) => {
            let mut msg = b"F".to_vec();
            msg.extend_from_slice(reason.as_bytes());
            let _ = nix::unistd::write(&sock, &msg);
            None
        }
    };
    drop(sock);
    let status = match signals {
        Ok(signals) => supervise(listener.map(Arc::new), &signals, child, &held),
        // No signal channel: nothing was handed over; wait for the child's failure.
        Err(_) => waitpid(child, None).ok(),
    };
    exit_as(status)
}

/// Makes the supervisor no stronger than the command: the command's capabilities,
/// no_new_privs, and not dumpable (its memory unreadable by processes of the same user).
fn weaken(keep: u64) -> Result<(), String> {
    crate::caps::restrict(keep).map_err(|e| e.to_string())?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| format!("no_new_privs: {e}"))?;
    nix::sys::prctl::set_dumpable(false).map_err(|e| format!("dumpable: {e}"))?;
    Ok(())
}

/// Starts the write worker with the command's ruleset, once the kernel is known to hand
/// descriptors over as an answer (Linux 5.14): a supervisor that cannot never performs
/// an open, so it does not start.
fn start_writes(
    listener: &OwnedFd,
    ruleset: Option<OwnedFd>,
    audit_tag: Option<String>,
) -> Result<Worker, String> {
    let probe = libc::seccomp_notif_addfd {
        id: 0,
        flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
        srcfd: listener.as_raw_fd() as u32,
        newfd: 0,
        newfd_flags: 0,
    };
    // SAFETY: ADDFD reads one struct, which lives across the call; no notification has
    // id 0 pending, so nothing is added anywhere.
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ADDFD,
            &probe,
        )
    };
    if r == 0 || nix::errno::Errno::last() != nix::errno::Errno::ENOENT {
        return Err("the kernel cannot hand the command a descriptor as a call's answer (SECCOMP_ADDFD_FLAG_SEND, Linux 5.14): protected paths cannot be held without the stage".into());
    }
    Worker::start(ruleset, audit_tag)
}

/// The listener the child sends, and the ruleset beside it; `None` when the child
/// failed before it could.
fn take_listener(sock: &OwnedFd) -> Result<(Option<OwnedFd>, Option<OwnedFd>), String> {
    let mut byte = [0u8; 1];
    let mut iov = [IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; 2]);
    let msg = recvmsg::<()>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .map_err(|e| format!("receiving the listener: {e}"))?;
    for cmsg in msg
        .cmsgs()
        .map_err(|e| format!("receiving the listener: {e}"))?
    {
        if let ControlMessageOwned::ScmRights(fds) = cmsg {
            // SAFETY: the kernel just installed these descriptors in our table for us.
            let mut owned = fds.iter().map(|&fd| unsafe { OwnedFd::from_raw_fd(fd) });
            return Ok((owned.next(), owned.next()));
        }
    }
    Ok((None, None))
}

/// Opens the writable roots as they are now: a root that cannot be opened is judged as
/// missing (nothing beneath it may change).
fn open_rules(paths: RulePaths) -> Rules {
    let root_fds = paths
        .roots
        .iter()
        .map(|r| {
            nix::fcntl::open(
                r,
                nix::fcntl::OFlag::O_PATH
                    | nix::fcntl::OFlag::O_DIRECTORY
                    | nix::fcntl::OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .ok()
        })
        .collect();
    Rules {
        roots: paths.roots,
        root_fds,
        workspace: paths.workspace,
        protected: paths.protected,
    }
}

/// Answers notifications and forwards signals until the child has exited: its status.
/// Processes the command leaves running after that lose their supervisor with it.
fn supervise(
    mut listener: Option<Arc<OwnedFd>>,
    signals: &SignalFd,
    child: Pid,
    held: &Held,
) -> Option<WaitStatus> {
    loop {
        if let Some(status) = reaped(child) {
            return Some(status);
        }
        let (notified, signalled) = {
            let mut fds = vec![PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
            if let Some(l) = &listener {
                fds.push(PollFd::new(l.as_fd(), PollFlags::POLLIN));
            }
            match poll(&mut fds, PollTimeout::NONE) {
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => return waitpid(child, None).ok(),
                Ok(_) => {}
            }
            let revents = |i: usize| {
                fds.get(i)
                    .and_then(PollFd::revents)
                    .unwrap_or(PollFlags::empty())
            };
            (revents(1), revents(0))
        };
        if signalled.contains(PollFlags::POLLIN) {
            forward(signals, child);
        }
        if notified.contains(PollFlags::POLLIN) {
            if let Some(l) = &listener {
                answer_one(l, held);
            }
        } else if notified.intersects(PollFlags::POLLHUP | PollFlags::POLLERR) {
            // No process is left that the filter holds.
            listener = None;
        }
    }
}

/// The child's status once it has exited or been killed.
fn reaped(child: Pid) -> Option<WaitStatus> {
    match waitpid(child, Some(WaitPidFlag::WNOHANG)) {
        Ok(s @ (WaitStatus::Exited(..) | WaitStatus::Signaled(..))) => Some(s),
        // Not ours to wait for any more: nothing to mirror.
        Err(nix::errno::Errno::ECHILD) => Some(WaitStatus::Exited(
            child,
            stockade_policy::exit::RUNNER_FAILURE,
        )),
        _ => None,
    }
}

/// Passes each pending forwarded signal on to the child. Those a terminal sent its
/// whole foreground group (`SI_KERNEL`) reached the child already when it shares the
/// group.
fn forward(signals: &SignalFd, child: Pid) {
    let same_group = nix::unistd::getpgid(Some(child)).ok() == Some(nix::unistd::getpgrp());
    while let Ok(Some(info)) = signals.read_signal() {
        let Ok(sig) = Signal::try_from(info.ssi_signo as i32) else {
            continue;
        };
        if sig == Signal::SIGCHLD || (same_group && info.ssi_code == libc::SI_KERNEL) {
            continue;
        }
        let _ = nix::sys::signal::kill(child, sig);
    }
}

/// Receives one notification and answers it.
fn answer_one(listener: &Arc<OwnedFd>, held: &Held) {
    let mut req = libc::seccomp_notif {
        id: 0,
        pid: 0,
        flags: 0,
        data: libc::seccomp_data {
            nr: 0,
            arch: 0,
            instruction_pointer: 0,
            args: [0; 6],
        },
    };
    let fd = listener.as_raw_fd();
    // SAFETY: RECV writes one `struct seccomp_notif` into `req`, which it must find
    // zeroed (it is).
    if unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut req) } != 0 {
        // The caller died meanwhile, or a signal interrupted: nothing to answer.
        return;
    }
    let id = req.id;
    let alive = || {
        // SAFETY: ID_VALID reads one u64, which lives across the call.
        unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0 }
    };
    let nr = req.data.nr as i64;
    let reply = match &held.writes {
        Some((protection, worker)) if writes::is_write(nr) => {
            let cx = writes::Context {
                protection,
                worker,
                alive: &alive,
                pending: Pending {
                    listener: listener.clone(),
                    id,
                },
            };
            writes::answer(&cx, req.pid, nr, req.data.args)
        }
        _ => match calls::answer(&held.rules, req.pid, nr, req.data.args, &alive) {
            0 => Reply::Done,
            errno => Reply::Errno(errno),
        },
    };
    writes::send(fd, id, reply);
}

/// Exits as the child did: its exit code, or death by the same signal (without a core
/// of the supervisor's own).
fn exit_as(status: Option<WaitStatus>) -> ! {
    match status {
        Some(WaitStatus::Exited(_, code)) => std::process::exit(code),
        Some(WaitStatus::Signaled(_, sig, _)) => {
            let _ = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 0, 0);
            // SAFETY: the default disposition; no handler of ours runs.
            unsafe { libc::signal(sig as i32, libc::SIG_DFL) };
            let mut set = SigSet::empty();
            set.add(sig);
            let _ = set.thread_unblock();
            // To the process the kernel says this is, not a thread id the C library
            // cached (musl's raise(3) would use one).
            let _ = nix::sys::signal::kill(nix::unistd::getpid(), sig);
            std::process::exit(128 + sig as i32)
        }
        _ => std::process::exit(stockade_policy::exit::RUNNER_FAILURE),
    }
}
