//! Sharing a controlling terminal with the command.
//!
//! The command leads its own process group; if the launcher owns the terminal's
//! foreground, the command would be a background group and stop (SIGTTIN) the moment it
//! read the terminal. So the foreground is handed to the command's group for its run,
//! as a shell does for a job, and taken back afterwards.

use nix::sys::signal::{SigSet, Signal};
use nix::unistd::{Pid, getpgrp, isatty, tcgetpgrp, tcsetpgrp};
use std::io::{stderr, stdin, stdout};

/// Whether any of stdin, stdout and stderr is a terminal.
pub fn any_stdio_is_a_terminal() -> bool {
    isatty(stdin()).unwrap_or(false)
        || isatty(stdout()).unwrap_or(false)
        || isatty(stderr()).unwrap_or(false)
}

/// Keeps the terminal from stopping `stockade run`: a command that takes the
/// terminal's foreground (through any descriptor on it) and turns on `TOSTOP` would stop
/// the launcher at its next write there (SIGTTOU), and with it the timeout and the
/// report. Ignored, the write goes through. The launcher never reads the terminal; SIGTTIN
/// is ignored too. The command gets the default dispositions back before it executes.
pub fn ignore_stop_signals() {
    // SAFETY: installs the ignore disposition for two signals; no handler runs.
    unsafe {
        libc::signal(libc::SIGTTOU, libc::SIG_IGN);
        libc::signal(libc::SIGTTIN, libc::SIG_IGN);
    }
}

/// Whether stdin is a terminal whose foreground process group is the launcher's.
pub fn owns_foreground() -> bool {
    isatty(stdin()).unwrap_or(false) && tcgetpgrp(stdin()).is_ok_and(|pg| pg == getpgrp())
}

/// In the forked child, before exec: make its (new) process group the foreground one.
/// A background group asking for the terminal gets SIGTTOU unless it blocks it, so it is
/// blocked around the call; the caller resets the mask afterwards.
///
/// # Safety
/// Only async-signal-safe calls; meant for `pre_exec`.
pub unsafe fn take_foreground_in_child() {
    // SAFETY: the caller runs this between fork and exec; these are plain system calls
    // on a stack-allocated signal set.
    unsafe {
        let mut ttou: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut ttou);
        libc::sigaddset(&mut ttou, libc::SIGTTOU);
        libc::sigprocmask(libc::SIG_BLOCK, &ttou, std::ptr::null_mut());
        libc::tcsetpgrp(libc::STDIN_FILENO, libc::getpgrp());
    }
}

/// Takes the terminal's foreground back for the launcher's group.
pub fn reclaim_foreground() {
    block_ttou();
    let _ = tcsetpgrp(stdin(), getpgrp());
}

/// Gives the terminal's foreground to the command's group `pgid` again (after the
/// launcher was continued).
pub fn give_foreground(pgid: Pid) {
    block_ttou();
    let _ = tcsetpgrp(stdin(), pgid);
}

/// A background group changing the foreground gets SIGTTOU unless it blocks it. Blocked
/// for good: the launcher never reads the terminal and writes to it only its markers.
fn block_ttou() {
    let mut ttou = SigSet::empty();
    ttou.add(Signal::SIGTTOU);
    let _ = ttou.thread_block();
}
