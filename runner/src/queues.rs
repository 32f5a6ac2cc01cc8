//! The command's own POSIX message queues (see `stockade_policy::stage::MQUEUE`).
//!
//! A queue `mq_open` makes is a file of the IPC namespace's mqueue filesystem, which
//! Landlock governs like any file: it is usable only with a rule on that filesystem, and
//! the system calls only where the filter lets them through. Both are given only when
//! `/dev/mqueue` is shown to be the filesystem of this process's own IPC namespace (the
//! stage's fresh mount): a queue made here lands on it. The host's queues must never be
//! granted so: an open descriptor on one of them is enough for `mq_timedreceive` to take
//! its messages.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use stockade_policy::Policy;
use stockade_policy::stage::MQUEUE;

/// linux/magic.h
const MQUEUE_MAGIC: i64 = 0x1980_0202;

/// `/dev/mqueue` (an `O_PATH` descriptor) when it holds this IPC namespace's queues and
/// no hidden path lies on or below it; `None` otherwise (the queues then stay refused).
/// Called only under the stage, whose IPC namespace is the command's own: the probe
/// queue it makes and removes is seen by nobody else.
pub fn own(policy: &Policy) -> Option<std::fs::File> {
    let path = std::path::Path::new(MQUEUE);
    let hidden = policy
        .hidden()
        .iter()
        .any(|h| h.starts_with(path) || path.starts_with(h));
    if hidden {
        return None;
    }
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    if filesystem(dir.as_raw_fd()) != Some(MQUEUE_MAGIC) {
        return None;
    }
    let probe = probe_queue()?;
    let same = dev(probe.as_raw_fd()).is_some() && dev(probe.as_raw_fd()) == dev(dir.as_raw_fd());
    same.then_some(dir)
}

/// A queue made in this IPC namespace, removed by name at once (the descriptor keeps it
/// alive long enough to be looked at).
fn probe_queue() -> Option<OwnedFd> {
    let name = CString::new(format!("stockade-runner-{}", std::process::id())).ok()?;
    let flags = libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_CLOEXEC;
    // SAFETY: mq_open reads a NUL-terminated name alive for the call; a null attribute
    // pointer asks for the defaults. A non-negative return is a descriptor we own.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_mq_open,
            name.as_ptr(),
            flags,
            0o600,
            std::ptr::null::<libc::mq_attr>(),
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: as above; mq_unlink reads the same name.
    unsafe {
        libc::syscall(libc::SYS_mq_unlink, name.as_ptr());
        Some(OwnedFd::from_raw_fd(fd as libc::c_int))
    }
}

fn filesystem(fd: libc::c_int) -> Option<i64> {
    // SAFETY: a plain C struct, for which all zeroes is a valid value.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: fstatfs fills the struct it is given.
    (unsafe { libc::fstatfs(fd, &mut fs) } == 0).then_some(fs.f_type as i64)
}

fn dev(fd: libc::c_int) -> Option<u64> {
    // SAFETY: a plain C struct, for which all zeroes is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat fills the struct it is given.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(st.st_dev)
}
