//! Supervising a command: spawn it inside a managed range, copy or capture its output,
//! end it on timeout or when the launcher is told to stop, and wait until it has
//! *settled*: the direct child exited and no process of the range is left.
//!
//! Everything happens on one thread, in one `poll` loop over a signalfd (SIGCHLD and the
//! signals that stop the launcher) and the output pipes, so memory and ordering stay
//! simple and no thread can block the teardown.

use crate::cli::ContainmentChoice;
use crate::containment::{self, Cgroup, Member, Range};
use crate::error::LauncherError;
use crate::output::{Capture, Captured, SpillDir};
use crate::spawn::{self, Spawned};
use crate::terminal;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How much of stderr is kept for classification when it is passed through. The
/// runner's failure line is the only thing it prints, so it is always inside this tail.
pub const STDERR_TAIL_BYTES: usize = 64 * 1024;

/// How often the range is re-examined while waiting for it to empty. Descendants that
/// are not our children exit without telling us.
const TICK: Duration = Duration::from_millis(20);

/// Reads per stream per loop round.
const PUMP_READS: usize = 16;

/// The signals that make the launcher tear the range down.
const STOP_SIGNALS: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

/// What to do with the command's output.
#[derive(Clone, Copy, Debug)]
pub enum Output {
    /// stdout inherited; stderr copied through live, a tail kept.
    PassThrough,
    /// Both captured: a tail of `max_output` bytes each, spilled up to `max_spill`.
    Capture { max_output: usize, max_spill: u64 },
}

/// Where the command stands towards the launcher's session and terminal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Session {
    /// Its own process group in the launcher's session.
    OwnGroup,
    /// Its own process group, given the foreground of the terminal the launcher owns
    /// (an unconfined command on a terminal: job control as in a shell).
    OwnGroupForeground,
    /// Left in the launcher's group so that the runner, seeing a terminal on stdin and
    /// not being a group leader, starts a new session: a confined command never has the
    /// caller's terminal as its controlling terminal (it can still read and write it).
    RunnerDetaches,
}

impl Session {
    fn choose(plan: &Plan) -> Session {
        let tty = nix::unistd::isatty(std::io::stdin()).unwrap_or(false);
        if tty && plan.runner_detaches {
            Session::RunnerDetaches
        } else if terminal::owns_foreground() {
            Session::OwnGroupForeground
        } else {
            Session::OwnGroup
        }
    }
}

/// Everything the supervisor needs to run one command.
#[derive(Debug)]
pub struct Plan<'a> {
    pub argv: &'a [String],
    pub env: &'a [(OsString, OsString)],
    pub timeout: Option<Duration>,
    pub grace: Duration,
    pub keep_background: bool,
    pub containment: ContainmentChoice,
    pub output: Output,
    pub denial_signatures: &'a [String],
    /// The argv starts `stockade-runner`, which starts a new session when its stdin is a
    /// terminal (unless it already leads a process group).
    pub runner_detaches: bool,
}

/// The facts of a settled command.
#[derive(Debug)]
pub struct Settled {
    /// The exit code, `None` when killed by a signal.
    pub exit_code: Option<i32>,
    /// The terminating signal.
    pub signal: Option<i32>,
    /// The timeout expired while the direct child was running.
    pub timed_out: bool,
    /// The signal that told the launcher to stop, if one did.
    pub aborted: Option<Signal>,
    pub duration: Duration,
    pub containment: containment::Kind,
    /// Processes of the range still running when the direct child exited.
    pub left_behind: Vec<Member>,
    /// `None` when stdout was passed through.
    pub stdout: Option<Captured>,
    pub stderr: Captured,
    /// Whether any denial signature appeared anywhere in stderr.
    pub denial_seen: bool,
}

/// Blocks the signals the loop handles and returns a descriptor that reads them. The
/// launcher has no other threads, so nothing else can receive them. The command gets a
/// clean mask back before it executes (see `spawn`).
fn signal_fd() -> Result<SignalFd, LauncherError> {
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGCHLD);
    for s in STOP_SIGNALS {
        mask.add(s);
    }
    let err = |e: nix::Error| LauncherError::Supervise(format!("cannot watch signals: {e}"));
    mask.thread_block().map_err(err)?;
    SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC).map_err(err)
}

fn spawn(plan: &Plan, cgroup: Option<&Cgroup>, session: Session) -> std::io::Result<Spawned> {
    let program = plan.argv.first().map(String::as_str).unwrap_or_default();
    let mut cmd = Command::new(program);
    cmd.args(&plan.argv[1..])
        .env_clear()
        .envs(plan.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::inherit());
    if session != Session::RunnerDetaches {
        // Signals for the range never hit the launcher, and the runner sees it is
        // already a group leader.
        cmd.process_group(0);
    }
    let foreground = session == Session::OwnGroupForeground;
    // SAFETY: the closure runs in the forked child before exec and only makes
    // async-signal-safe system calls (tcsetpgrp, sigprocmask) on memory it owns; it
    // allocates nothing and touches no lock.
    unsafe {
        cmd.pre_exec(move || {
            if foreground {
                terminal::take_foreground_in_child();
            }
            // The launcher blocks the signals it reads through its signalfd, and a blocked
            // mask survives exec: give the command a clean one.
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            if libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let stdout = match plan.output {
        Output::PassThrough => spawn::Stdout::Inherit,
        Output::Capture { .. } => spawn::Stdout::Pipe,
    };
    spawn::spawn(cmd, stdout, cgroup)
}

/// Reaps every exited child (orphans re-parent to us), keeping the direct child's status.
/// Returns whether the direct child was seen to stop (job control).
fn reap(direct: Pid, status: &mut Option<WaitStatus>) -> bool {
    let mut stopped = false;
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG | WaitPidFlag::WUNTRACED)) {
            Ok(WaitStatus::StillAlive) | Err(_) => return stopped,
            Ok(s @ (WaitStatus::Exited(pid, _) | WaitStatus::Signaled(pid, _, _))) => {
                if pid == direct {
                    *status = Some(s);
                }
            }
            Ok(WaitStatus::Stopped(pid, _)) => stopped |= pid == direct,
            Ok(_) => {}
        }
    }
}

/// The command was stopped from its terminal (Ctrl-Z): stop the launcher too, so the
/// user's shell sees its job stopped, and when the shell continues us (`fg`), give the
/// terminal back to the command and continue it.
fn follow_job_stop(direct: Pid) {
    terminal::reclaim_foreground();
    let _ = nix::sys::signal::raise(Signal::SIGSTOP);
    terminal::give_foreground(direct);
    let _ = nix::sys::signal::killpg(direct, Signal::SIGCONT);
}

fn set_nonblocking(fd: &impl AsRawFd) {
    // Non-blocking reads let the loop drain pipes without waiting on a writer that
    // outlives the range (a descriptor passed to an outside process).
    let raw = fd.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own, with plain integer arguments.
    unsafe {
        let flags = libc::fcntl(raw, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(raw, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
}

/// A pipe from the command and where its bytes go.
struct Stream<R> {
    pipe: Option<R>,
    capture: Capture,
}

impl<R: Read + AsFd> Stream<R> {
    /// Reads what is available, at most `max_reads` times (so a chatty writer cannot
    /// starve the loop); closes the pipe at end of file.
    fn pump(&mut self, buf: &mut [u8], spill: &mut SpillDir, max_reads: usize) {
        let Some(pipe) = self.pipe.as_mut() else {
            return;
        };
        for _ in 0..max_reads {
            match pipe.read(buf) {
                Ok(0) => {
                    self.pipe = None;
                    return;
                }
                Ok(n) => self.capture.push(&buf[..n], spill),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    self.pipe = None;
                    return;
                }
            }
        }
    }
}

/// The termination in progress: SIGTERM was sent; SIGKILL follows at `kill_at`.
struct Termination {
    kill_at: Instant,
}

/// Runs the plan to settlement.
pub fn run(plan: &Plan) -> Result<Settled, LauncherError> {
    let signals = signal_fd()?;
    // Orphaned descendants re-parent to us, so they stay visible and get reaped.
    nix::sys::prctl::set_child_subreaper(true)
        .map_err(|e| LauncherError::Supervise(format!("cannot become a subreaper: {e}")))?;
    let session = Session::choose(plan);
    let foreground = session == Session::OwnGroupForeground;
    let cgroup = match plan.containment {
        ContainmentChoice::Subreaper => None,
        ContainmentChoice::Auto => Cgroup::create().ok(),
        ContainmentChoice::Cgroup => Some(Cgroup::create().map_err(|e| {
            LauncherError::Supervise(format!("cgroup containment is unavailable: {e}"))
        })?),
    };
    let (child, cgroup) = match spawn(plan, cgroup.as_ref(), session) {
        Ok(child) => (child, cgroup),
        // The command never started (the failure is before exec): try again without the
        // cgroup, which is the one extra step that can fail there.
        Err(_) if cgroup.is_some() && plan.containment == ContainmentChoice::Auto => {
            if let Some(cg) = &cgroup {
                cg.remove();
            }
            let child = spawn(plan, None, session).map_err(|source| spawn_error(plan, source))?;
            (child, None)
        }
        Err(source) => {
            if let Some(cg) = &cgroup {
                cg.remove();
            }
            return Err(spawn_error(plan, source));
        }
    };
    let start = Instant::now();
    let direct = child.pid;
    let range = Range::new(cgroup, direct);

    let mut spill = SpillDir::default();
    let (out_capture, err_capture) = match plan.output {
        Output::PassThrough => (None, Capture::echoing("stderr", STDERR_TAIL_BYTES)),
        Output::Capture {
            max_output,
            max_spill,
        } => (
            Some(Capture::spilling("stdout", max_output, max_spill)),
            Capture::spilling("stderr", max_output, max_spill),
        ),
    };
    let mut out = out_capture.map(|capture| Stream {
        pipe: child.stdout,
        capture,
    });
    let mut err = Stream {
        pipe: Some(child.stderr),
        capture: err_capture.scanning(plan.denial_signatures),
    };
    if let Some(p) = out.as_ref().and_then(|s| s.pipe.as_ref()) {
        set_nonblocking(p);
    }
    if let Some(p) = err.pipe.as_ref() {
        set_nonblocking(p);
    }

    let deadline = plan.timeout.map(|t| start + t);
    let mut status: Option<WaitStatus> = None;
    let mut left_behind: Option<Vec<Member>> = None;
    let mut termination: Option<Termination> = None;
    let mut timed_out = false;
    let mut aborted: Option<Signal> = None;
    let mut buf = vec![0u8; 64 * 1024];
    let terminate = |range: &Range| {
        range.signal(Signal::SIGTERM);
        // A stopped process would only see SIGTERM once continued (as `timeout` does).
        range.signal(Signal::SIGCONT);
        Some(Termination {
            kill_at: Instant::now() + plan.grace,
        })
    };

    loop {
        if reap(direct, &mut status) && foreground && status.is_none() && termination.is_none() {
            follow_job_stop(direct);
        }
        if status.is_some() && left_behind.is_none() {
            let members = range.members();
            if !members.is_empty() && !plan.keep_background && termination.is_none() {
                termination = terminate(&range);
            }
            left_behind = Some(members);
        }
        // Settled: the direct child exited and the range is empty, or what is left was
        // deliberately kept (and nobody asked to end it).
        let kept = plan.keep_background && termination.is_none();
        if status.is_some() && (kept || range.is_empty()) {
            break;
        }
        let now = Instant::now();
        if let Some(t) = &termination
            && now >= t.kill_at
        {
            // Repeated every tick: a process forked between listing and killing is
            // caught on the next round (a cgroup kill has no such gap).
            range.signal(Signal::SIGKILL);
        }

        let wait = match (&termination, status.is_some(), deadline) {
            (Some(t), _, _) => TICK.min(t.kill_at.saturating_duration_since(now).max(TICK / 4)),
            (None, true, _) => TICK,
            (None, false, Some(d)) => d.saturating_duration_since(now),
            (None, false, None) => Duration::MAX,
        };
        let timeout = if wait == Duration::MAX {
            PollTimeout::NONE
        } else {
            // Rounded up so the loop does not spin just before a deadline.
            let ms = wait.as_micros().div_ceil(1000).min(i32::MAX as u128);
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)
        };
        let mut fds = vec![PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
        let out_fd = out
            .as_ref()
            .and_then(|s| s.pipe.as_ref())
            .map(|p| p.as_fd());
        let err_fd = err.pipe.as_ref().map(|p| p.as_fd());
        fds.extend(
            [out_fd, err_fd]
                .into_iter()
                .flatten()
                .map(|fd| PollFd::new(fd, PollFlags::POLLIN)),
        );
        match poll(&mut fds, timeout) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(LauncherError::Supervise(format!("poll failed: {e}"))),
        }
        drop(fds);

        if let Some(s) = out.as_mut() {
            s.pump(&mut buf, &mut spill, PUMP_READS);
        }
        err.pump(&mut buf, &mut spill, PUMP_READS);

        while let Ok(Some(info)) = signals.read_signal() {
            let Ok(sig) = Signal::try_from(info.ssi_signo as i32) else {
                continue;
            };
            if !STOP_SIGNALS.contains(&sig) {
                continue;
            }
            aborted.get_or_insert(sig);
            match &mut termination {
                None => termination = terminate(&range),
                // Asked again: no more grace.
                Some(t) => t.kill_at = Instant::now(),
            }
        }
        if let Some(d) = deadline
            && status.is_none()
            && termination.is_none()
            && Instant::now() >= d
        {
            timed_out = true;
            termination = terminate(&range);
        }
    }
    let duration = start.elapsed();
    if foreground {
        terminal::reclaim_foreground();
    }

    // Take what is still buffered. With the range empty nobody writes any more; with
    // processes deliberately left running, take one pipe's worth and stop.
    let empty = range.is_empty();
    let drain = if empty { usize::MAX } else { PUMP_READS };
    if let Some(s) = out.as_mut() {
        s.pump(&mut buf, &mut spill, drain);
    }
    err.pump(&mut buf, &mut spill, drain);
    range.release(empty);
    let denial_seen = err.capture.signature_seen();
    let stdout = out.map(|s| s.capture.finish());
    let stderr = err.capture.finish();
    spill.finish();

    let (exit_code, signal) = match status {
        Some(WaitStatus::Exited(_, code)) => (Some(code), None),
        Some(WaitStatus::Signaled(_, sig, _)) => (None, Some(sig as i32)),
        _ => (None, None),
    };
    Ok(Settled {
        exit_code,
        signal,
        timed_out,
        aborted,
        duration,
        containment: range.kind(),
        left_behind: left_behind.unwrap_or_default(),
        stdout,
        stderr,
        denial_seen,
    })
}

fn spawn_error(plan: &Plan, source: std::io::Error) -> LauncherError {
    LauncherError::Spawn {
        program: plan.argv.first().cloned().unwrap_or_default(),
        source,
    }
}
