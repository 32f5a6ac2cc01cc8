//! Detaching from the caller's terminal. A process whose controlling terminal is the
//! caller's can push input into it (TIOCSTI) or steer it; in a new session the terminal
//! is no longer its controlling one. The seccomp filter refuses TIOCSTI either way.
//! Whether to start one is the request's to say (see `stockade_policy::session`).

use crate::error::RunnerError;
use nix::unistd::{getpgrp, getpid, isatty, setsid};
use stockade_policy::session::RunnerSession;

/// Starts a new session if `rule` says so.
pub fn apply(rule: RunnerSession) -> Result<(), RunnerError> {
    let new = match rule {
        RunnerSession::New => true,
        RunnerSession::Keep => false,
        // A leader cannot start a session; its spawner put it there on purpose.
        RunnerSession::WhenTerminal => {
            isatty(std::io::stdin()).unwrap_or(false) && getpgrp() != getpid()
        }
    };
    if new {
        setsid().map_err(|e| RunnerError::Setsid(e.into()))?;
    }
    Ok(())
}
