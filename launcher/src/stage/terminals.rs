//! The caller's terminals, opened again through the stage's read-only view of the host's
//! `/dev/pts` before the command's own devpts instance covers it.
//!
//! A terminal the command inherits (stdin, stdout, stderr, a kept descriptor) was opened
//! by the caller on its own read-write mount of `/dev/pts`: through it the command could
//! `fchmod` the caller's terminal (`crw-rw-rw-`, writable by every local user) or change
//! its owner and times. Once the whole tree is read-only here, the same terminal opened
//! again by its name is the same device on a read-only mount: reads, writes, `isatty`
//! and terminal modes work as before, every metadata change is `EROFS`. The runner
//! recognises such a descriptor by its mount (see the runner's `descriptors`). After the
//! private devpts is mounted the caller's terminal has no name here any more, so this
//! must come first. A terminal that cannot be opened again (not the caller's to open,
//! exclusive mode) is left as it is, and the runner names it.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

/// Pseudo-terminal ends (`/dev/pts/N`): majors 136 to 143. Other terminals (a virtual
/// console, a serial line) are left alone: opening one again can have effects of its own.
const PTS_MAJORS: std::ops::RangeInclusive<u32> = 136..=143;

/// Every descriptor the runner will inherit (not close-on-exec) that is a pseudo-terminal
/// is put back as the same terminal opened through this mount namespace's `/dev/pts`,
/// when that is the same device on a read-only mount. Best effort by design: what is not
/// done here the runner finds and reports.
pub(super) fn reopen_read_only() {
    for fd in inherited() {
        reopen(fd);
    }
}

/// The descriptors without close-on-exec, as `/proc/self/fd` lists them.
fn inherited() -> Vec<libc::c_int> {
    use std::os::fd::AsFd;
    let listed = std::fs::File::open("/proc/self/fd")
        .and_then(|dir| stockade_policy::directory::entries(dir.as_fd()));
    let Ok(entries) = listed else {
        return vec![0, 1, 2];
    };
    // The listing's own descriptor is closed by now: F_GETFD below finds it unopened.
    let fds: Vec<libc::c_int> = entries
        .iter()
        .filter_map(|e| e.name.to_str()?.parse().ok())
        .collect();
    let kept = |&fd: &libc::c_int| {
        // SAFETY: F_GETFD only reads a descriptor's flags (an unopened one is -1).
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        flags >= 0 && flags & libc::FD_CLOEXEC == 0
    };
    fds.into_iter().filter(kept).collect()
}

fn reopen(fd: libc::c_int) {
    let Some(st) = fstat(fd) else { return };
    let is_pts =
        st.st_mode & libc::S_IFMT == libc::S_IFCHR && PTS_MAJORS.contains(&libc::major(st.st_rdev));
    if !is_pts || read_only_mount(fd) {
        return;
    }
    let Some(new) = open_again(fd) else { return };
    let same = fstat(new.as_raw_fd())
        .is_some_and(|n| (n.st_dev, n.st_ino, n.st_rdev) == (st.st_dev, st.st_ino, st.st_rdev));
    if same && read_only_mount(new.as_raw_fd()) {
        // SAFETY: dup2 onto a descriptor this process holds (it stays without
        // close-on-exec, as it was); `new` is closed when it drops.
        unsafe { libc::dup2(new.as_raw_fd(), fd) };
    }
}

/// The terminal `fd` refers to, by the name the kernel gives it, with `fd`'s access mode
/// and status flags: never as a controlling terminal, without following a link, and
/// without waiting while it opens.
fn open_again(fd: libc::c_int) -> Option<OwnedFd> {
    let path = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    if !path.is_absolute() {
        return None;
    }
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: F_GETFL only reads the status flags of `fd`.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return None;
    }
    let kept = flags & (libc::O_ACCMODE | libc::O_APPEND | libc::O_NONBLOCK);
    let open_flags = kept | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: open reads a NUL-terminated path alive for the call; a non-negative return
    // is a descriptor this process now owns.
    let new = unsafe { libc::open(c.as_ptr(), open_flags) };
    if new < 0 {
        return None;
    }
    // SAFETY: as above.
    let new = unsafe { OwnedFd::from_raw_fd(new) };
    // SAFETY: F_SETFL only sets status flags of the descriptor just opened.
    let r = unsafe { libc::fcntl(new.as_raw_fd(), libc::F_SETFL, kept) };
    (r == 0).then_some(new)
}

fn fstat(fd: libc::c_int) -> Option<libc::stat> {
    // SAFETY: a plain C struct, for which all zeroes is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat fills the struct it is given; an unopened `fd` is an error.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(st)
}

/// Whether `fd`'s mount is read-only.
fn read_only_mount(fd: libc::c_int) -> bool {
    // SAFETY: a plain C struct, for which all zeroes is a valid value.
    let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: fstatvfs fills the struct it is given.
    let r = unsafe { libc::fstatvfs(fd, &mut vfs) };
    r == 0 && vfs.f_flag & libc::ST_RDONLY != 0
}
