//! The supervisor's death ends the command.
//!
//! `stockade run` may itself be killed (SIGKILL from its caller, the out-of-memory
//! killer, a crashing agent taking its process tree down). Without the launcher nobody
//! enforces the timeout, ends what the command left behind or writes the receipt, so
//! the command's range must end with it, unless `--keep-background` asked for the
//! opposite. Three mechanisms, each covering what the one before cannot:
//! - **the parent-death signal** ([`die_with_parent`]): the launcher's direct child (the
//!   proxy host, the namespace stage, the runner or the program) is killed when the
//!   launcher dies, and each stockade process in the chain below does the same for its
//!   own child (the proxy host for the stage, the stage for the runner). The signal is
//!   cleared by `fork`, so it holds for the chain only, not for what the command starts;
//!   it survives `execve` except of a set-id or file-capability program, which the
//!   confined modes cannot gain (`no_new_privs`).
//! - **the pid namespace**: the stage's init is pid 1 there and dies with the stage
//!   (parent-death signal); the kernel then kills every process of the namespace,
//!   however it detached. This is what ends a confined command's whole range.
//! - **the guardian** ([`Guardian`]), with cgroup containment: a small process outside
//!   the range that waits on a pipe only the launcher holds. When the launcher ends
//!   without standing it down (it died), the pipe reads end-of-file and the guardian
//!   kills the command's cgroup (`cgroup.kill`) and removes it.
//!
//! What none of them holds: with subreaper containment and no pid namespace (nothing
//! confined, `--share-pids`, or a machine without namespaces), a process the command
//! started that left the direct child's tree outlives a killed launcher.

use super::containment::Cgroup;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use stockade_policy::exit;

/// In a forked child, before it executes: dies (SIGKILL) when its parent `parent`
/// dies. The parent may already have died before the signal was set up, in which case
/// it never comes: the child then ends at once rather than run unsupervised.
///
/// The signal follows the parent *thread*: every caller forks from a single-threaded
/// process (the launcher, the proxy host before its threads start, the stage).
///
/// # Safety (for callers)
/// Async-signal-safe: only `prctl`, `getppid` and `_exit`.
pub(crate) fn die_with_parent(parent: libc::pid_t) {
    // SAFETY: prctl with integer arguments; getppid and _exit cannot fail.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != parent {
            libc::_exit(exit::RUNNER_FAILURE);
        }
    }
}

/// The subcommand that dies with its parent, then executes the rest of its argv
/// (`confine --die-with-executor`).
pub const DIE_WITH_PARENT: &str = "__die-with-parent";

/// `argv` started through [`DIE_WITH_PARENT`] of `launcher`.
pub fn die_with_parent_argv(launcher: String, argv: Vec<String>) -> Vec<String> {
    let mut out = vec![launcher, DIE_WITH_PARENT.into(), "--".into()];
    out.extend(argv);
    out
}

/// `stockade __die-with-parent -- ARGV...`: sets the parent-death signal (SIGKILL) and
/// executes ARGV (an absolute path, as `confine` writes it; the environment passes
/// through). The signal survives `execve`, and every stockade process of the chain
/// passes it on to its child. Its parent may have died before the signal was set: then
/// this process was re-parented, which shows when the new parent is init; under another
/// subreaper that window (between the spawner's fork and the `prctl`, microseconds) is
/// not closed. Returns only on failure, with the exit code.
pub fn die_with_parent_main(args: &[std::ffi::OsString]) -> i32 {
    use std::os::unix::process::CommandExt;
    let rest = match args.split_first() {
        Some((dashes, rest)) if dashes == "--" && !rest.is_empty() => rest,
        _ => {
            eprintln_safe(
                "stockade-runner: usage: stockade __die-with-parent -- PROGRAM [ARGS...]",
            );
            return exit::RUNNER_FAILURE;
        }
    };
    // Failure lines carry the runner's failure tag, as the runner's own do: to the
    // executor this process is part of the runner.
    let prefix = match rest
        .iter()
        .position(|a| a == stockade_policy::failure_tag::FLAG)
        .and_then(|i| rest.get(i + 1))
        .and_then(|t| t.to_str())
        .filter(|t| stockade_policy::failure_tag::is_valid(t))
    {
        Some(tag) => format!("stockade-runner: [{tag}]"),
        None => "stockade-runner:".into(),
    };
    // SAFETY: prctl with integer arguments; getppid cannot fail.
    let orphaned = unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        libc::getppid() == 1
    };
    if orphaned {
        eprintln_safe(&format!(
            "{prefix} the process that spawned this command is gone: not starting it"
        ));
        return exit::RUNNER_FAILURE;
    }
    let err = std::process::Command::new(&rest[0]).args(&rest[1..]).exec();
    eprintln_safe(&format!(
        "{prefix} cannot start {}: {err}",
        std::path::Path::new(&rest[0]).display()
    ));
    exit::RUNNER_FAILURE
}

/// One line on stderr, never panicking on a closed stream.
fn eprintln_safe(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// The parent-death signal this process has, to be passed on to the child it forks
/// (`fork` clears it in the child): 0 when it has none.
pub(crate) fn own_death_signal() -> libc::c_int {
    let mut sig: libc::c_int = 0;
    // SAFETY: PR_GET_PDEATHSIG writes one int into a local.
    unsafe { libc::prctl(libc::PR_GET_PDEATHSIG, &mut sig as *mut libc::c_int) };
    sig
}

/// The byte that tells the guardian the launcher is done and it may leave.
const STAND_DOWN: u8 = b'd';

/// A process that kills the command's cgroup if the launcher dies (see the module's
/// documentation). Dropping it stands it down.
#[derive(Debug)]
pub struct Guardian {
    /// The pipe's write end: only the launcher holds it (close-on-exec, and the stage
    /// forked in the launcher's child closes every such descriptor first).
    pipe: OwnedFd,
    /// A pipe the other way whose only write end the guardian holds: end-of-file once it
    /// exited, which the launcher waits for (bounded) so the guardian never outlives it.
    gone: OwnedFd,
}

/// How long a standing-down launcher waits for the guardian to exit.
const STAND_DOWN_WAIT_MS: libc::c_int = 2000;

/// A close-on-exec pipe: (read end, write end).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and belong to nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

impl Guardian {
    /// Starts the guardian of `cgroup`. Called before the launcher becomes a subreaper:
    /// the guardian is orphaned at once (double fork) and re-parented away from the
    /// launcher, so it is never counted among, nor reaped as, the command's processes.
    pub fn start(cgroup: &Cgroup) -> io::Result<Guardian> {
        let (read, write) = pipe()?;
        let (gone, alive) = pipe()?;
        // SAFETY: the launcher is single-threaded here; the child only runs `intermediate`,
        // which never returns.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            intermediate(
                [read.as_raw_fd(), alive.as_raw_fd()],
                write.as_raw_fd(),
                cgroup,
            );
        }
        drop(read);
        drop(alive);
        let mut status = 0;
        // SAFETY: waits for the intermediate child this function forked; writes a local.
        while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
            && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
        {}
        if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
            return Err(io::Error::other(
                "the guardian process could not be started",
            ));
        }
        Ok(Guardian { pipe: write, gone })
    }
}

impl Drop for Guardian {
    fn drop(&mut self) {
        // SAFETY: one write from a local byte on the descriptor this value owns.
        unsafe { libc::write(self.pipe.as_raw_fd(), [STAND_DOWN].as_ptr().cast(), 1) };
        let mut pfd = libc::pollfd {
            fd: self.gone.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one pollfd in a local; it returns at end of file (the guardian
        // exited) or after the bound.
        unsafe { libc::poll(&mut pfd, 1, STAND_DOWN_WAIT_MS) };
    }
}

/// The first child: leaves the launcher's session (a Ctrl-C to the terminal's group
/// must not reach the guardian), forks the guardian and exits, orphaning it.
fn intermediate(keep: [RawFd; 2], write: RawFd, cgroup: &Cgroup) -> ! {
    // SAFETY: in the forked child of the single-threaded launcher: setsid, fork, close
    // and _exit only; the grandchild runs `guard`, which never returns.
    unsafe {
        libc::close(write);
        if libc::setsid() < 0 {
            libc::_exit(1);
        }
        match libc::fork() {
            0 => guard(keep, cgroup),
            pid if pid < 0 => libc::_exit(1),
            _ => libc::_exit(0),
        }
    }
}

/// The guardian: drops everything of the launcher's it does not need, waits for the
/// launcher's word or its death, and on its death ends the cgroup.
fn guard([read, alive]: [RawFd; 2], cgroup: &Cgroup) -> ! {
    let mut keep = cgroup.descriptors();
    keep.extend([read, alive]);
    release_descriptors(&keep);
    // SAFETY: dispositions set to "ignore" in this single-threaded process, and a
    // clean signal mask (the launcher blocks the signals it reads through a signalfd).
    unsafe {
        for sig in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGPIPE,
        ] {
            libc::signal(sig, libc::SIG_IGN);
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
    }
    let mut byte = [0u8; 1];
    let got = loop {
        // SAFETY: read into a local buffer of its length.
        let n = unsafe { libc::read(read, byte.as_mut_ptr().cast(), 1) };
        if n >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break n;
        }
    };
    if got != 1 || byte[0] != STAND_DOWN {
        // End of file: the launcher is gone without a word.
        cgroup.end_all();
    }
    // SAFETY: ends the guardian without the launcher's exit code.
    unsafe { libc::_exit(0) }
}

/// Closes every descriptor but `keep`, and puts `/dev/null` on 0, 1 and 2:
/// the guardian must not hold the caller's pipes open (a caller reading `stockade
/// run`'s output to its end would wait for the guardian).
fn release_descriptors(keep: &[RawFd]) {
    let open: Vec<RawFd> = std::fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    for fd in open {
        if fd > 2 && !keep.contains(&fd) {
            // SAFETY: closing a descriptor of this process that nothing here uses.
            unsafe { libc::close(fd) };
        }
    }
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        for fd in 0..3 {
            // SAFETY: dup2 onto the standard descriptors of this process.
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
    }
}
