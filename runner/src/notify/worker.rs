//! The supervisor's worker: the thread that performs the command's writes once the
//! supervisor has judged them. The supervisor holds no Landlock domain (it must read the
//! command's memory, which a domain would forbid), so it must not make a change itself:
//! it would be allowed what the command's Landlock refuses (a file outside the writable
//! roots). Landlock restricts a thread, not a process, so this thread restricts itself
//! with the command's own ruleset (the child hands it over with the listener) and every
//! change is made here, refused exactly as the command's own call would be.
//!
//! The command cannot reach the worker either: its domain is not the worker's (nor
//! above it), so Landlock refuses the command ptrace of it and (ABI 6) signals to it,
//! as it does for the rest of the supervisor. Below ABI 6 the command can signal the
//! worker's thread id, as any process of its user: the supervisor then dies, and every
//! supervised call of the command fails (never made unchecked).

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::mpsc;

/// What a performed call gives back: a descriptor to hand to the command, or nothing
/// (the call's value is 0), or the errno it failed with.
pub type Outcome = Result<Option<OwnedFd>, i32>;
type Job = Box<dyn FnOnce() -> Outcome + Send>;

pub struct Worker {
    jobs: mpsc::Sender<Job>,
    done: mpsc::Receiver<Outcome>,
    ruleset: Option<Arc<OwnedFd>>,
    tag: Option<Arc<str>>,
}

impl Worker {
    /// Starts the worker, restricted with `ruleset` (none: the command has no Landlock
    /// domain either). A worker that cannot restrict itself is a setup failure: the run
    /// fails, never a worker stronger than its command.
    /// `tag`: the command's audit tag, taken as the thread's name while it restricts
    /// itself, so that Landlock's audit records of its refusals are read as the
    /// command's (`stockade_policy::landlock_audit`).
    pub fn start(ruleset: Option<OwnedFd>, tag: Option<String>) -> Result<Worker, String> {
        let ruleset = ruleset.map(Arc::new);
        let tag: Option<Arc<str>> = tag.map(Arc::from);
        let own_tag = tag.clone();
        let (jobs, job_rx) = mpsc::channel::<Job>();
        let (done_tx, done) = mpsc::channel::<Outcome>();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
        let own = ruleset.clone();
        std::thread::Builder::new()
            .name("stockade-writes".into())
            .spawn(move || {
                let confined = confine(own.as_deref(), own_tag.as_deref());
                let ok = confined.is_ok();
                let _ = ready_tx.send(confined);
                if !ok {
                    return;
                }
                while let Ok(job) = job_rx.recv() {
                    if done_tx.send(job()).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| format!("cannot start the write worker: {e}"))?;
        ready_rx
            .recv()
            .map_err(|_| "the write worker exited before it was ready".to_string())??;
        Ok(Worker {
            jobs,
            done,
            ruleset,
            tag,
        })
    }

    /// Performs `job` on the worker and waits for it. A worker that is gone refuses.
    pub fn run(&self, job: impl FnOnce() -> Outcome + Send + 'static) -> Outcome {
        if self.jobs.send(Box::new(job)).is_err() {
            return Err(libc::EPERM);
        }
        self.done.recv().unwrap_or(Err(libc::EPERM))
    }

    /// Performs `job` on a thread of its own, restricted the same way, for a call that
    /// can wait as long as another process likes (opening a named pipe for writing
    /// waits for a reader): the supervisor goes on answering meanwhile. The job answers
    /// the notification itself; it is given `false` when its thread could not restrict
    /// itself (it must then refuse). `Err` when no thread could be started.
    pub fn run_apart(&self, job: impl FnOnce(bool) + Send + 'static) -> Result<(), i32> {
        let ruleset = self.ruleset.clone();
        let tag = self.tag.clone();
        std::thread::Builder::new()
            .name("stockade-fifo".into())
            .spawn(move || job(confine(ruleset.as_deref(), tag.as_deref()).is_ok()))
            .map(|_| ())
            .map_err(|_| libc::EAGAIN)
    }
}

/// Restricts the calling thread with `ruleset`, named `tag` meanwhile.
fn confine(ruleset: Option<&OwnedFd>, tag: Option<&str>) -> Result<(), String> {
    let Some(ruleset) = ruleset else {
        return Ok(());
    };
    let named = tag
        .and_then(|t| std::ffi::CString::new(t).ok())
        .is_some_and(|t| nix::sys::prctl::set_name(&t).is_ok());
    // SAFETY: a descriptor of ours and no flags; the call reads no memory.
    let rc = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0) };
    if named {
        let _ = nix::sys::prctl::set_name(c"stockade-writes");
    }
    if rc != 0 {
        return Err(format!(
            "the write worker cannot restrict itself with the command's Landlock ruleset: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}
