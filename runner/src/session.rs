//! Detaching from the caller's terminal. A process whose controlling terminal is the
//! caller's can push input into it (TIOCSTI) or steer it; in a new session the terminal
//! is no longer its controlling one. The seccomp filter refuses TIOCSTI either way.

use crate::error::RunnerError;
use std::io;

/// Starts a new session when stdin is a terminal and the runner is not already a process
/// group leader (a leader cannot; its supervisor put it there on purpose).
pub fn detach_from_terminal() -> Result<(), RunnerError> {
    // SAFETY: isatty only inspects descriptor 0.
    if unsafe { libc::isatty(0) } != 1 {
        return Ok(());
    }
    // SAFETY: getpgrp and getpid only return numbers.
    let leader = unsafe { libc::getpgrp() == libc::getpid() };
    if leader {
        return Ok(());
    }
    // SAFETY: setsid changes only this process's session and group.
    if unsafe { libc::setsid() } < 0 {
        return Err(RunnerError::Setsid(io::Error::last_os_error()));
    }
    Ok(())
}
