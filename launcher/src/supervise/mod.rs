//! Supervising a command: spawn it inside a managed range, copy or capture its output,
//! end it on timeout or when the launcher is told to stop, and wait until it has
//! *settled*: the direct child exited and no process of the range is left.
//!
//! Everything happens on one thread, in one `poll` loop over a signalfd (SIGCHLD and the
//! signals that stop the launcher) and the output pipes, so memory and ordering stay
//! simple and no thread can block the teardown.

pub(crate) mod containment;
pub(crate) mod error;
pub(crate) mod lifeline;
pub(crate) mod limits;
pub(crate) mod output;
pub(crate) mod spawn;
pub(crate) mod stdout;
pub(crate) mod tail;
pub(crate) mod terminal;

use crate::control::binding::{self, Verified};
use crate::control::error::ControlError;
use crate::control::private_dir;
use crate::error::LauncherError;
use crate::stage;
use containment::{Cgroup, Member, Range, Unproven};
pub use error::SuperviseError;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::unistd::Pid;
pub use output::FINAL_WRITE_WAIT;
use output::{Capture, Captured, SpillDir};
use spawn::{SpawnError, Spawned};
use std::ffi::OsString;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use stockade_policy::binding::Binding;
use stockade_policy::receipt::{Cleanup, UnknownCleanup};
use stockade_policy::session::RunnerSession;

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

/// The runner a ConfinedArgv's argv starts: the word before its `--request` (after the
/// namespace stage's words, where it runs). Only for an argv that starts the runner
/// ([`Start::Runner`]): a program's own words may hold a `--request`.
pub fn runner_of(argv: &[String]) -> Option<&std::path::Path> {
    let at = argv.iter().position(|a| a == "--request")?;
    argv.get(at.checked_sub(1)?).map(std::path::Path::new)
}

/// What a ConfinedArgv's argv starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// `stockade-runner` (possibly behind the namespace stage).
    Runner,
    /// The program itself (nothing is confined).
    Program,
}

impl Start {
    /// The rule `confine_inheriting` follows: every confined mode starts the runner.
    pub fn of(mode: stockade_policy::Mode) -> Start {
        if mode.is_confined() {
            Start::Runner
        } else {
            Start::Program
        }
    }
}

/// How the command's processes are kept together (`--containment`; the launcher's
/// `ContainmentChoice` maps onto it one to one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Containment {
    /// A cgroup where one can be made, else the subreaper.
    Auto,
    /// A cgroup, or the run fails.
    Cgroup,
    /// The subreaper only.
    Subreaper,
}

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
pub enum Session {
    /// Its own process group in the launcher's session.
    OwnGroup,
    /// Its own process group, given the foreground of the terminal the launcher owns
    /// (an unconfined command on a terminal: job control as in a shell).
    OwnGroupForeground,
    /// Left in the launcher's group (a leader cannot start a session), and the runner
    /// told to start a new one: a confined command never has the caller's terminal as
    /// its controlling terminal (it can still read and write it).
    RunnerDetaches,
}

impl Session {
    /// The one decision on the command's session for `stockade run`, made before the
    /// request is written: the runner's half of it travels there ([`Session::runner`]).
    ///
    /// A confined command gets a session of its own whenever any of stdin, stdout and
    /// stderr is a terminal: a terminal it can write but that is not its controlling one
    /// cannot be taken (`tcsetpgrp` on any of them fails), so it cannot make the
    /// launcher's group a background one and stop it through `TOSTOP`.
    pub fn choose(start: Start) -> Session {
        let tty = terminal::any_stdio_is_a_terminal();
        if tty && start == Start::Runner {
            Session::RunnerDetaches
        } else if terminal::owns_foreground() {
            Session::OwnGroupForeground
        } else {
            Session::OwnGroup
        }
    }

    /// What the runner is told to do about its session (ignored when nothing is
    /// confined: there is no runner).
    pub fn runner(self) -> RunnerSession {
        match self {
            Session::RunnerDetaches => RunnerSession::New,
            Session::OwnGroup | Session::OwnGroupForeground => RunnerSession::Keep,
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
    pub containment: Containment,
    pub output: Output,
    /// Decided with [`Session::choose`] before the request was written.
    pub session: Session,
    /// What was bound when confined, when the launcher must check it just before the
    /// command starts (nothing confined: no runner checks it).
    pub binding: Option<&'a Binding>,
    /// Resource limits (`--max-memory`, ...).
    pub limits: stockade_policy::limits::Limits,
    /// Something else to read while the command runs (Landlock's audit records), in the
    /// same loop: its socket must not fill while the command makes refusals.
    pub side: Option<&'a std::cell::RefCell<dyn SideReader>>,
    /// The runner the argv starts, when it starts one ([`runner_of`]): its metadata
    /// supervisor forwards signals, so a timeout's signals pass it by.
    pub runner: Option<&'a std::path::Path>,
}

/// A source the supervision loop reads beside the command's output.
pub trait SideReader {
    /// The descriptor to wait on for input.
    fn fd(&self) -> BorrowedFd<'_>;
    /// Reads what is waiting, a bounded amount, without blocking.
    fn read_ready(&mut self);
}

impl std::fmt::Debug for dyn SideReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SideReader")
    }
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
    /// Whether every process of the range is known to be gone.
    pub cleanup: Cleanup,
    /// Whether stdout and stderr were read to their end (`None`: stdout passed through).
    pub stdout_complete: Option<bool>,
    pub stderr_complete: bool,
    /// When the final writes to the caller's stderr give up (see [`FINAL_WRITE_WAIT`]).
    pub final_writes_until: Instant,
    /// `danger-full-access`: the launcher's verified file is a script its interpreter
    /// opened again by name (the runner records this itself in the confined modes).
    pub started_by_name: bool,
    /// The resource limits, what held each, and the defaults nothing held.
    pub limits: stockade_policy::limits::Planned,
    /// The limit the command hit, when that can be told.
    pub limit_exceeded: Option<stockade_policy::limits::Kind>,
}

/// The signals the loop reads from its signalfd.
fn watched_signals() -> SigSet {
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGCHLD);
    for s in STOP_SIGNALS {
        mask.add(s);
    }
    mask
}

/// Blocks the signals the loop handles and returns a descriptor that reads them. The
/// launcher has no other threads, so nothing else can receive them. The command gets a
/// clean mask back before it executes (see `spawn`).
fn signal_fd() -> Result<SignalFd, LauncherError> {
    let mask = watched_signals();
    let err = |e: nix::Error| LauncherError::Supervise(SuperviseError::Signals(e));
    mask.thread_block().map_err(err)?;
    SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC).map_err(err)
}

fn spawn(
    plan: &Plan,
    cgroup: Option<&Cgroup>,
    session: Session,
    verified: Option<&Verified>,
    applied: &limits::Applied,
) -> Result<Spawned, SpawnError> {
    let rlimits = applied.clone();
    let Some((program, args)) = plan.argv.split_first() else {
        return Err(SpawnError::Start(std::io::Error::from_raw_os_error(
            libc::ENOENT,
        )));
    };
    // A verified file is started by the path it was verified at, under its own name.
    let mut cmd = match verified {
        Some(v) => {
            let mut cmd = Command::new(std::ffi::OsStr::from_bytes(v.path.as_bytes()));
            cmd.arg0(program);
            cmd
        }
        None => Command::new(program),
    };
    cmd.args(args)
        .env_clear()
        .envs(plan.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::inherit());
    if session != Session::RunnerDetaches {
        // Signals for the range never hit the launcher.
        cmd.process_group(0);
    }
    let foreground = session == Session::OwnGroupForeground;
    let die_with_launcher = !plan.keep_background;
    let launcher = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec and only makes
    // async-signal-safe system calls (prctl, getppid, _exit, tcsetpgrp, sigprocmask,
    // signal) on memory it owns; it allocates nothing and touches no lock.
    unsafe {
        cmd.pre_exec(move || {
            if die_with_launcher {
                crate::supervise::lifeline::die_with_parent(launcher);
            }
            rlimits.set_in_child()?;
            if foreground {
                terminal::take_foreground_in_child();
            }
            // The launcher ignores SIGXFSZ (see `run`) and an ignored signal survives
            // exec: give the command the default back.
            libc::signal(libc::SIGXFSZ, libc::SIG_DFL);
            // Likewise the terminal stop signals `run` ignores (see `terminal`).
            libc::signal(libc::SIGTTOU, libc::SIG_DFL);
            libc::signal(libc::SIGTTIN, libc::SIG_DFL);
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
    if let Some(stage_args) = stage::own_args(plan.argv) {
        let env = plan.env.to_vec();
        // SAFETY: runs in the forked child of the single-threaded launcher, after the
        // hook above, in place of the `execve` of `stockade __stage` (see
        // `stage::run_in_child`); it never returns.
        unsafe {
            cmd.pre_exec(move || stage::run_in_child(&stage_args, env.clone()));
        }
    }
    let stdout = match plan.output {
        Output::PassThrough => spawn::Stdout::Inherit,
        Output::Capture { .. } => spawn::Stdout::Pipe,
    };
    spawn::spawn(cmd, stdout, cgroup, verified)
}

/// What one round of reaping saw.
struct Reaped {
    /// The direct child was seen to stop (job control).
    stopped: bool,
    /// Some child is still to be waited for (the round did not end with `ECHILD`).
    children_left: bool,
}

/// How the direct child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    Exited(i32),
    /// Killed by this signal number (any: a real-time one too).
    Signaled(i32),
}

/// Reaps every exited child (orphans re-parent to us), keeping the direct child's status.
///
/// With `waitpid(2)` itself, not nix's: nix turns a status into its `Signal` type, and
/// for a signal that type has no name for (every real-time signal: `kill -RTMIN+5 $$`)
/// it returns an error after the kernel has already reaped the child. The child's end
/// was then lost, and `stockade run` waited for it for ever, its timeout and SIGTERM
/// included (a command could hang its supervisor with one `kill`).
fn reap(direct: Pid, status: &mut Option<Ended>) -> Reaped {
    let mut stopped = false;
    loop {
        let mut raw: libc::c_int = 0;
        // SAFETY: waitpid writes the status into a local.
        let pid = unsafe { libc::waitpid(-1, &mut raw, libc::WNOHANG | libc::WUNTRACED) };
        if pid == 0 {
            return Reaped {
                stopped,
                children_left: true,
            };
        }
        if pid < 0 {
            match nix::errno::Errno::last() {
                nix::errno::Errno::EINTR => continue,
                e => {
                    return Reaped {
                        stopped,
                        children_left: e != nix::errno::Errno::ECHILD,
                    };
                }
            }
        }
        let ours = pid == direct.as_raw();
        if libc::WIFEXITED(raw) {
            if ours {
                *status = Some(Ended::Exited(libc::WEXITSTATUS(raw)));
            }
        } else if libc::WIFSIGNALED(raw) {
            if ours {
                *status = Some(Ended::Signaled(libc::WTERMSIG(raw)));
            }
        } else if libc::WIFSTOPPED(raw) {
            stopped |= ours;
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

fn set_nonblocking(fd: &impl AsFd) {
    // Non-blocking reads let the loop drain pipes without waiting on a writer that
    // outlives the range (a descriptor passed to an outside process).
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    if let Ok(flags) = fcntl(fd, FcntlArg::F_GETFL) {
        let flags = OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK;
        let _ = fcntl(fd, FcntlArg::F_SETFL(flags));
    }
}

/// A pipe from the command and where its bytes go.
struct Stream<R> {
    pipe: Option<R>,
    capture: Capture,
    /// The pipe was read to its end (not merely given up on).
    eof: bool,
}

impl<R: Read + AsFd> Stream<R> {
    /// Reads what is available, at most `max_reads` times (so a chatty writer cannot
    /// starve the loop), and not while its live copy waits for room; closes the pipe at
    /// end of file.
    fn pump(&mut self, buf: &mut [u8], spill: &mut SpillDir, max_reads: usize) {
        for _ in 0..max_reads {
            if self.stalled() {
                return;
            }
            let Some(pipe) = self.pipe.as_mut() else {
                return;
            };
            match pipe.read(buf) {
                Ok(0) => {
                    self.pipe = None;
                    self.eof = true;
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

    /// The live copy is full: the command's bytes wait in its pipe until ours drains.
    fn stalled(&mut self) -> bool {
        self.capture.echo().is_some_and(|e| e.full())
    }

    /// The pipe to watch for input, unless the stream is stalled.
    fn read_fd(&mut self) -> Option<BorrowedFd<'_>> {
        if self.stalled() {
            return None;
        }
        self.pipe.as_ref().map(|p| p.as_fd())
    }
}

/// Where the supervision stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// The command runs; nobody asked it to end.
    Running,
    /// SIGTERM was sent; SIGKILL follows at `kill_at` (and every tick after it).
    Terminating { kill_at: Instant },
}

/// One command under supervision: its range, its output, and what happened to it. Each
/// event (children changed, output, a signal to the launcher, the timeout, the kill
/// time) has its own method; `run` only waits for events and asks whether it settled.
struct Supervisor<'a> {
    plan: &'a Plan<'a>,
    range: Range,
    direct: Pid,
    foreground: bool,
    start: Instant,
    deadline: Option<Instant>,
    phase: Phase,
    /// The direct child's exit, once reaped.
    status: Option<Ended>,
    /// Whether the launcher still has a child to wait for.
    children_left: bool,
    /// The range's live members when the direct child exited.
    left_behind: Option<Vec<Member>>,
    timed_out: bool,
    aborted: Option<Signal>,
    out: Option<Stream<File>>,
    err: Stream<File>,
    spill: SpillDir,
    buf: Vec<u8>,
    /// When the first SIGKILL round was sent.
    killing_since: Option<Instant>,
    /// Why the launcher stopped trying to end the range (it reports, rather than waits
    /// for ever).
    gave_up: Option<String>,
    /// The resource limits, what holds each, and the defaults nothing holds.
    limits: stockade_policy::limits::Planned,
}

impl Supervisor<'_> {
    /// Settled: the direct child exited and the range is empty, or what is left was
    /// deliberately kept (and nobody asked to end it).
    fn settled(&self) -> bool {
        if self.gave_up.is_some() {
            return true;
        }
        let kept = self.plan.keep_background && self.phase == Phase::Running;
        self.status.is_some() && (kept || self.range.is_empty(self.children_left))
    }

    fn terminate(&mut self) {
        self.range.signal(Signal::SIGTERM);
        // A stopped process would only see SIGTERM once continued (as `timeout` does).
        self.range.signal(Signal::SIGCONT);
        self.phase = Phase::Terminating {
            kill_at: Instant::now() + self.plan.grace,
        };
    }

    fn reap(&mut self) -> Reaped {
        let reaped = reap(self.direct, &mut self.status);
        self.children_left = reaped.children_left;
        reaped
    }

    /// SIGCHLD (or any wake-up): collect exited children, follow job control, and note
    /// the direct child's exit once.
    fn on_children(&mut self) {
        let reaped = self.reap();
        if reaped.stopped
            && self.foreground
            && self.status.is_none()
            && self.phase == Phase::Running
        {
            follow_job_stop(self.direct);
        }
        if self.status.is_some() && self.left_behind.is_none() {
            self.on_direct_exit();
        }
    }

    /// The direct child exited: whatever is still live in the range is left behind, and
    /// is ended unless it is to be kept.
    fn on_direct_exit(&mut self) {
        let mut members = Vec::new();
        // A process that forks and exits in a loop may be between generations when it is
        // looked for: look again while the range is not empty.
        for _ in 0..SETTLE_LOOKS {
            if self.range.is_empty(self.children_left) {
                break;
            }
            members = self.range.members();
            if !members.is_empty() {
                break;
            }
            self.reap();
        }
        let empty = self.range.is_empty(self.children_left);
        if !empty && !self.plan.keep_background && self.phase == Phase::Running {
            self.terminate();
        }
        self.left_behind = Some(members);
    }

    /// The grace period is over: kill everything, in quick rounds so that a process that
    /// forks in a loop is caught between forks, then again every tick.
    fn on_kill_time(&mut self) {
        let since = *self.killing_since.get_or_insert_with(Instant::now);
        let mut refused = Vec::new();
        for _ in 0..KILL_ROUNDS {
            refused = self.range.signal(Signal::SIGKILL);
            self.reap();
            if self.range.is_empty(self.children_left) {
                return;
            }
        }
        self.phase = Phase::Terminating {
            kill_at: Instant::now() + TICK,
        };
        // Give up, and say so, rather than wait for ever: when the kernel refuses to
        // signal every process left, or when they outlive the kill rounds for long.
        let left = self.range.members();
        let all_refused = !left.is_empty() && left.iter().all(|m| refused.contains(&m.pid));
        if all_refused {
            self.gave_up = Some(format!(
                "the kernel refused to signal {} (EPERM)",
                describe(&left)
            ));
        } else if since.elapsed() >= GIVE_UP_AFTER {
            self.gave_up = Some(format!(
                "still running {}s after the first SIGKILL: {}",
                GIVE_UP_AFTER.as_secs(),
                describe(&left)
            ));
        }
    }

    fn on_timeout(&mut self) {
        self.timed_out = true;
        self.terminate();
    }

    /// A signal that stops the launcher: end the range; asked again, with no more grace.
    fn on_stop_signal(&mut self, sig: Signal) {
        self.aborted.get_or_insert(sig);
        match self.phase {
            Phase::Running => self.terminate(),
            Phase::Terminating { .. } => {
                self.phase = Phase::Terminating {
                    kill_at: Instant::now(),
                }
            }
        }
    }

    fn on_output(&mut self) {
        if let Some(s) = self.out.as_mut() {
            s.pump(&mut self.buf, &mut self.spill, PUMP_READS);
        }
        if let Some(echo) = self.err.capture.echo() {
            echo.flush();
        }
        self.err.pump(&mut self.buf, &mut self.spill, PUMP_READS);
    }

    fn on_signals(&mut self, signals: &SignalFd) {
        while let Ok(Some(info)) = signals.read_signal() {
            if let Ok(sig) = Signal::try_from(info.ssi_signo as i32)
                && STOP_SIGNALS.contains(&sig)
            {
                self.on_stop_signal(sig);
            }
        }
    }

    /// How long to wait for the next event.
    fn wait(&self, now: Instant) -> PollTimeout {
        let wait = match (self.phase, self.status.is_some(), self.deadline) {
            (Phase::Terminating { kill_at }, _, _) => {
                TICK.min(kill_at.saturating_duration_since(now).max(TICK / 4))
            }
            (Phase::Running, true, _) => TICK,
            (Phase::Running, false, Some(d)) => d.saturating_duration_since(now),
            (Phase::Running, false, None) => return PollTimeout::NONE,
        };
        // Rounded up so the loop does not spin just before a deadline.
        let ms = wait.as_micros().div_ceil(1000).min(i32::MAX as u128);
        PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)
    }

    /// Waits for the next event: a signal, output, room on our own stderr, or a time.
    fn poll(&mut self, signals: &SignalFd) {
        let timeout = self.wait(Instant::now());
        let mut fds = vec![PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
        if let Some(fd) = self.out.as_mut().and_then(Stream::read_fd) {
            fds.push(PollFd::new(fd, PollFlags::POLLIN));
        }
        let mut err_fds = Vec::new();
        if let Some(fd) = self.err.pipe.as_ref().map(|p| p.as_fd())
            && !self.err.capture.echo().is_some_and(|e| e.full())
        {
            err_fds.push(PollFd::new(fd, PollFlags::POLLIN));
        }
        fds.extend(err_fds);
        let echo_fd = self.err.capture.echo().and_then(|e| e.poll_fd());
        if let Some(fd) = echo_fd {
            fds.push(PollFd::new(fd, PollFlags::POLLOUT));
        }
        let side = self.plan.side.map(|s| s.borrow());
        if let Some(side) = &side {
            fds.push(PollFd::new(side.fd(), PollFlags::POLLIN));
        }
        if let Err(e) = poll(&mut fds, timeout)
            && e != nix::errno::Errno::EINTR
        {
            // Cannot wait (out of memory): do not spin, and keep every other event going.
            std::thread::sleep(TICK);
        }
    }

    /// One turn of the loop after a wake-up: times, then output, then signals.
    fn on_wake(&mut self, signals: &SignalFd) {
        if let Some(side) = self.plan.side {
            side.borrow_mut().read_ready();
        }
        self.on_output();
        self.on_signals(signals);
        let now = Instant::now();
        if let Phase::Terminating { kill_at } = self.phase
            && now >= kill_at
        {
            self.on_kill_time();
        }
        if self.phase == Phase::Running
            && self.status.is_none()
            && self.deadline.is_some_and(|d| now >= d)
        {
            self.on_timeout();
        }
    }

    /// Takes what is still buffered and reports. With the range empty nobody in it writes
    /// any more; a writer outside it (a descriptor passed on) or deliberately left
    /// running gets a bounded number of reads.
    fn finish(mut self) -> Settled {
        let duration = self.start.elapsed();
        // Orphans of the range re-parented to us as it emptied (a cgroup counts a process
        // as gone once it exits, before anyone reaps it). Reap every such zombie now: left
        // to an init that does not reap (containers, some CI machines), thousands of them
        // from a fork-heavy command would exhaust the pid space.
        let mut ignored = None;
        reap(Pid::from_raw(-1), &mut ignored);
        if self.foreground {
            terminal::reclaim_foreground();
        }
        let empty = self.range.is_empty(self.children_left);
        let cleanup = self.cleanup();
        let drain = if empty { DRAIN_READS } else { PUMP_READS };
        if let Some(s) = self.out.as_mut() {
            s.pump(&mut self.buf, &mut self.spill, drain);
        }
        // One deadline for every final write, the markers `run` prints after included:
        // a reader that never takes them costs FINAL_WRITE_WAIT once, not per write.
        let final_writes_until = Instant::now() + FINAL_WRITE_WAIT;
        if let Some(echo) = self.err.capture.echo() {
            echo.finish(final_writes_until);
        }
        self.err.pump(&mut self.buf, &mut self.spill, drain);
        if let Some(echo) = self.err.capture.echo() {
            echo.finish(final_writes_until);
        }
        let (oom_kills, pids_refused) = limits::events(self.range.cgroup());
        self.range.release(empty);
        let stdout_complete = self.out.as_ref().map(|s| s.eof);
        let stderr_complete = self.err.eof;
        let stdout = self.out.map(|s| s.capture.finish());
        let stderr = self.err.capture.finish();
        self.spill.finish();
        let (exit_code, signal) = match self.status {
            Some(Ended::Exited(code)) => (Some(code), None),
            Some(Ended::Signaled(sig)) => (None, Some(sig)),
            _ => (None, None),
        };
        Settled {
            exit_code,
            signal,
            timed_out: self.timed_out,
            aborted: self.aborted,
            duration,
            containment: self.range.kind(),
            left_behind: self.left_behind.unwrap_or_default(),
            stdout,
            stderr,
            cleanup,
            stdout_complete,
            stderr_complete,
            final_writes_until,
            started_by_name: false,
            limit_exceeded: stockade_policy::limits::exceeded(
                &self.limits.held,
                oom_kills,
                pids_refused,
                signal,
            ),
            limits: self.limits,
        }
    }

    /// Whether the range is known to be empty, and if not, why (the receipt's
    /// `cleanup`). Called once the run is settled.
    fn cleanup(&self) -> Cleanup {
        let unknown = |reason, detail| Cleanup::Unknown { reason, detail };
        match (self.range.proof(self.children_left), &self.gave_up) {
            (Ok(by), _) => Cleanup::Proven { by },
            (Err(_), Some(why)) => unknown(UnknownCleanup::CouldNotEnd, why.clone()),
            (Err(Unproven::Unreadable), None) => unknown(
                UnknownCleanup::Unreadable,
                "the cgroup's cgroup.events could not be read".into(),
            ),
            (Err(Unproven::NotEmpty), None) if self.plan.keep_background => unknown(
                UnknownCleanup::Kept,
                format!(
                    "kept running (--keep-background): {}",
                    describe(&self.range.members())
                ),
            ),
            (Err(Unproven::NotEmpty), None) => unknown(
                UnknownCleanup::CouldNotEnd,
                format!(
                    "still running when the run was reported: {}",
                    describe(&self.range.members())
                ),
            ),
        }
    }
}

/// Processes for a message: the first few by pid and command.
fn describe(members: &[Member]) -> String {
    if members.is_empty() {
        return "processes that could not be listed".into();
    }
    let mut shown: Vec<String> = members
        .iter()
        .take(5)
        .map(|m| format!("pid {} ({})", m.pid, m.command))
        .collect();
    if members.len() > 5 {
        shown.push(format!("and {} more", members.len() - 5));
    }
    shown.join(", ")
}

/// How many times the range is looked at for live members when the direct child exits.
/// Each look ends the loop once it finds one or the range is empty, so only a process
/// forking and exiting in a loop makes it look again; a fast one (a static binary's fork
/// takes microseconds) is between generations in most looks on a loaded machine: ten were
/// seen to miss it, and the run then reported nothing left behind.
const SETTLE_LOOKS: usize = 200;

/// Quick kill rounds at the kill time before falling back to one per tick.
const KILL_ROUNDS: usize = 64;

/// Reads per stream when draining after settlement.
const DRAIN_READS: usize = 64;

/// How long after the first SIGKILL the launcher keeps trying to end a range that does
/// not empty before it reports the cleanup unknown and returns.
const GIVE_UP_AFTER: Duration = Duration::from_secs(10);

/// Runs the plan to settlement. Once the command started, nothing returns early: every
/// failure to observe the range counts it as not empty, and the range is ended.
pub fn run(plan: &Plan) -> Result<Settled, LauncherError> {
    // Writing past a lowered file-size limit must fail the write (the spill is then
    // dropped), not kill the launcher with the command's processes left running.
    // SAFETY: installs the ignore disposition for one signal; no handler runs.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    let signals = signal_fd()?;
    containment::reserve_descriptor();
    let settled = supervise(plan, &signals);
    // The clean-up after the run (the private directory) may need that descriptor.
    containment::release_reserve();
    settled
}

/// Once the run is settled and cleaned up, the launcher only writes its report: from
/// then on a stop signal ends it at once (a terminal that never takes the report cannot
/// hold it). Not earlier, so a signal cannot cut the clean-up short.
pub fn release_stop_signals() {
    let _ = watched_signals().thread_unblock();
}

/// The range's enclosure, before the command starts: its cgroup where there is one,
/// the guardian that ends that cgroup should the launcher die, and the launcher as a
/// subreaper.
fn enclose(plan: &Plan) -> Result<(Option<Cgroup>, Option<lifeline::Guardian>), LauncherError> {
    let cgroup = match plan.containment {
        Containment::Subreaper => None,
        Containment::Auto => Cgroup::create().ok(),
        Containment::Cgroup => Some(
            Cgroup::create().map_err(|e| LauncherError::Supervise(SuperviseError::Cgroup(e)))?,
        ),
    };
    // Before the launcher becomes a subreaper, so the guardian is re-parented away from
    // it (lifeline.rs). Dropped on every return: it then stands down.
    let guardian = match (&cgroup, plan.keep_background) {
        (Some(cg), false) => Some(lifeline::Guardian::start(cg).map_err(|source| {
            cg.remove();
            LauncherError::Supervise(SuperviseError::Start {
                program: "the cgroup's guardian".into(),
                source,
            })
        })?),
        _ => None,
    };
    // Orphaned descendants re-parent to us, so they stay visible and get reaped.
    nix::sys::prctl::set_child_subreaper(true).map_err(|e| {
        if let Some(cg) = &cgroup {
            cg.remove();
        }
        LauncherError::Supervise(SuperviseError::Subreaper(e))
    })?;
    Ok((cgroup, guardian))
}

fn supervise(plan: &Plan, signals: &SignalFd) -> Result<Settled, LauncherError> {
    let session = plan.session;
    // The guardian stands down when this returns, however it returns.
    let (cgroup, _guardian) = enclose(plan)?;
    // danger-full-access has no runner to check the binding: the launcher does, here,
    // and the child once more on the file it executes.
    let verified = match plan.binding {
        Some(b) => match binding::check(b, plan.argv, plan.env) {
            Ok(v) => v,
            Err(e) => {
                if let Some(cg) = &cgroup {
                    cg.remove();
                }
                return Err(e);
            }
        },
        None => None,
    };
    let verified = verified.as_ref();
    // Limits the cgroup holds are written into it now; the rest are set in the child.
    let applied = limits::apply(&plan.limits, cgroup.as_ref()).inspect_err(|_| {
        if let Some(cg) = &cgroup {
            cg.remove();
        }
    })?;
    let (child, cgroup, applied) = match spawn(plan, cgroup.as_ref(), session, verified, &applied) {
        Ok(child) => (child, cgroup, applied),
        // Creating the command inside the group failed (nothing ran): with automatic
        // containment, start it without the group.
        Err(SpawnError::Join(_)) if plan.containment == Containment::Auto => {
            if let Some(cg) = &cgroup {
                cg.remove();
            }
            // What the group would have held falls back to resource limits.
            let applied = limits::apply(&plan.limits, None)?;
            let child = spawn(plan, None, session, verified, &applied)
                .map_err(|e| spawn_error(plan, verified, e))?;
            (child, None, applied)
        }
        Err(e) => {
            if let Some(cg) = &cgroup {
                cg.remove();
            }
            return Err(spawn_error(plan, verified, e));
        }
    };
    let start = Instant::now();
    let (out_capture, err_capture) = match plan.output {
        Output::PassThrough => (None, Capture::echoing("stderr", STDERR_TAIL_BYTES)),
        Output::Capture {
            max_output,
            max_spill,
        } => (
            Some(Capture::spilling(
                private_dir::SPILL_FILES[0],
                max_output,
                max_spill,
            )),
            Capture::spilling(private_dir::SPILL_FILES[1], max_output, max_spill),
        ),
    };
    let out = out_capture.map(|capture| Stream {
        pipe: child.stdout,
        capture,
        eof: false,
    });
    let err = Stream {
        pipe: Some(child.stderr),
        capture: err_capture,
        eof: false,
    };
    if let Some(p) = out.as_ref().and_then(|s| s.pipe.as_ref()) {
        set_nonblocking(p);
    }
    if let Some(p) = err.pipe.as_ref() {
        set_nonblocking(p);
    }
    let mut sup = Supervisor {
        plan,
        range: Range::new(cgroup, child.pid, plan.runner),
        direct: child.pid,
        foreground: session == Session::OwnGroupForeground,
        start,
        deadline: plan.timeout.map(|t| start + t),
        phase: Phase::Running,
        status: None,
        children_left: true,
        left_behind: None,
        timed_out: false,
        aborted: None,
        out,
        err,
        spill: SpillDir::default(),
        buf: vec![0u8; 64 * 1024],
        killing_since: None,
        gave_up: None,
        limits: applied.planned,
    };
    loop {
        sup.on_children();
        if sup.settled() {
            break;
        }
        sup.poll(signals);
        sup.on_wake(signals);
    }
    let mut settled = sup.finish();
    settled.started_by_name = verified.is_some_and(|v| v.by_name);
    Ok(settled)
}

/// A program that cannot be found or executed is the command's failure (127, 126); the
/// launcher running out of descriptors, memory or processes, or failing to join the
/// group, is the wrapper's own (125).
fn spawn_error(plan: &Plan, verified: Option<&Verified>, e: SpawnError) -> LauncherError {
    let launcher_failed = match &e {
        SpawnError::Join(_) => true,
        SpawnError::Start(source) => matches!(
            source.raw_os_error(),
            Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM | libc::EAGAIN)
        ),
        SpawnError::Changed => {
            return match verified {
                Some(v) => ControlError::BindingChanged(v.changed_in_child()).into(),
                None => LauncherError::Internal("a file changed that nobody verified"),
            };
        }
    };
    let (SpawnError::Join(source) | SpawnError::Start(source)) = e else {
        return LauncherError::Internal("a spawn error without a cause");
    };
    let program = plan.argv.first().cloned().unwrap_or_default();
    if launcher_failed {
        return LauncherError::Supervise(SuperviseError::Start { program, source });
    }
    LauncherError::Spawn { program, source }
}
