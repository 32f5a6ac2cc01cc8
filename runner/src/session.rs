//! Detaching from the caller's terminal. A process whose controlling terminal is the
//! caller's can push input into it (TIOCSTI) or steer it; in a new session the terminal
//! is no longer its controlling one. The seccomp filter refuses TIOCSTI either way.
//! Whether to start one is the request's to say (see `stockade_policy::session`).

use crate::error::RunnerError;
use nix::unistd::{getpgrp, getpid, isatty, setsid};
use stockade_policy::session::RunnerSession;

/// Whether `rule` starts a new session here. Decided before anything changes: the
/// seccomp filter, built first, needs to know whether the command will share its
/// parent's process group.
pub fn starts_new(rule: RunnerSession) -> bool {
    match rule {
        RunnerSession::New => true,
        RunnerSession::Keep => false,
        // A leader cannot start a session; its spawner put it there on purpose.
        // Any of stdin, stdout and stderr: a command can take a terminal's foreground
        // through any descriptor on it (and with `TOSTOP` stop its spawner's writes).
        RunnerSession::WhenTerminal => {
            let tty = isatty(std::io::stdin()).unwrap_or(false)
                || isatty(std::io::stdout()).unwrap_or(false)
                || isatty(std::io::stderr()).unwrap_or(false);
            tty && getpgrp() != getpid()
        }
    }
}

/// Starts a new session if [`starts_new`] said so.
pub fn apply(new: bool) -> Result<(), RunnerError> {
    if new {
        setsid().map_err(|e| RunnerError::Setsid(e.into()))?;
    }
    Ok(())
}
