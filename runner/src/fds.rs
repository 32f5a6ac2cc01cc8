//! Inherited file descriptors. Landlock checks a file when it is opened, so a writable
//! descriptor to a file outside the sandbox, inherited from the caller, would let the
//! target write there. Every descriptor above 2 is marked close-on-exec unless the
//! request keeps it.
//!
//! Marking rather than closing: the runner's own descriptors (all opened close-on-exec)
//! keep working until `execve`, and the target sees exactly the same thing: nothing above
//! 2 but what was kept.

use crate::error::RunnerError;
use std::io;

/// `CLOSE_RANGE_CLOEXEC` (linux/close_range.h, Linux 5.11).
const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;

/// A descriptor whose close-on-exec flag could not be read or set.
#[derive(Debug)]
pub struct FdError {
    pub fd: i32,
    pub source: io::Error,
}

impl std::fmt::Display for FdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "descriptor {}: {}", self.fd, self.source)
    }
}

impl std::error::Error for FdError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

fn fd_error(fd: i32, source: io::Error) -> RunnerError {
    RunnerError::Fds(FdError { fd, source })
}

fn flags(fd: i32) -> io::Result<libc::c_int> {
    // SAFETY: F_GETFD reads the descriptor flags of `fd`; it touches no memory.
    let r = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn set_cloexec(fd: i32, on: bool) -> io::Result<()> {
    let old = flags(fd)?;
    let new = if on {
        old | libc::FD_CLOEXEC
    } else {
        old & !libc::FD_CLOEXEC
    };
    // SAFETY: F_SETFD sets the descriptor flags of `fd`; it touches no memory.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, new) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Marks `first..=last` close-on-exec.
fn cloexec_range(first: u32, last: u32) -> io::Result<()> {
    if first > last {
        return Ok(());
    }
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only changes descriptor flags.
    let r = unsafe { libc::syscall(libc::SYS_close_range, first, last, CLOSE_RANGE_CLOEXEC) };
    if r == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if !matches!(err.raw_os_error(), Some(libc::ENOSYS | libc::EINVAL)) {
        return Err(err);
    }
    // Kernels before 5.11: walk the open descriptors instead.
    let open: Vec<u32> = std::fs::read_dir("/proc/self/fd")?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    for fd in open.into_iter().filter(|fd| (first..=last).contains(fd)) {
        match set_cloexec(fd as i32, true) {
            // The directory's own descriptor, closed since.
            Err(e) if e.raw_os_error() == Some(libc::EBADF) => {}
            other => other?,
        }
    }
    Ok(())
}

/// Lets only `keep` (all above 2, as validated) and 0..=2 survive `execve`.
pub fn restrict(keep: &[i32]) -> Result<(), RunnerError> {
    // The ranges below are computed in ascending order, whatever order the request used.
    let mut keep = keep.to_vec();
    keep.sort_unstable();
    keep.dedup();
    for &fd in &keep {
        match flags(fd) {
            Err(e) if e.raw_os_error() == Some(libc::EBADF) => {
                return Err(RunnerError::KeepFdNotOpen { fd });
            }
            Err(e) => return Err(fd_error(fd, e)),
            Ok(_) => set_cloexec(fd, false).map_err(|e| fd_error(fd, e))?,
        }
    }
    let mut first = 3u32;
    for &fd in &keep {
        let fd = fd as u32;
        if fd > first {
            cloexec_range(first, fd - 1).map_err(|e| fd_error(fd as i32, e))?;
        }
        first = fd + 1;
    }
    cloexec_range(first, u32::MAX).map_err(|e| fd_error(first as i32, e))
}
