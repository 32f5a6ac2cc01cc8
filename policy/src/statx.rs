//! statx(2), asked of the kernel directly.
//!
//! Not through the C library's wrapper: glibc's `statx` is an optional symbol that Rust's
//! std refers to weakly, and a statically linked, link-time optimised binary can end up
//! with the weak reference alone, calling address 0 (seen: the launcher built with
//! `crt-static` crashed on its first `confine`); musl's is missing before 1.2.5. Rust's
//! std itself reads birth times only on glibc. One system call has none of these
//! dependencies.

use std::ffi::CStr;
use std::io;
use std::os::fd::RawFd;

/// `statx(dirfd, path, flags, mask)`: what the kernel filled in, or its error.
pub fn statx(dirfd: RawFd, path: &CStr, flags: i32, mask: u32) -> io::Result<libc::statx> {
    // SAFETY: statx is plain data; all-zero is a valid value to be overwritten.
    let mut buf: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: the path is NUL-terminated and outlives the call; the kernel writes only
    // into `buf`, which lives for the call and has the layout it expects.
    let r = unsafe {
        libc::syscall(
            libc::SYS_statx,
            dirfd,
            path.as_ptr(),
            flags,
            mask,
            &mut buf as *mut libc::statx,
        )
    };
    if r == 0 {
        Ok(buf)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The birth time in `buf`, when the filesystem reported one.
pub fn birth(buf: &libc::statx) -> Option<(i64, u32)> {
    (buf.stx_mask & libc::STATX_BTIME != 0).then_some((buf.stx_btime.tv_sec, buf.stx_btime.tv_nsec))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_described_and_a_missing_one_is_the_kernels_error() {
        let dir = std::env::temp_dir();
        let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
        let buf = statx(libc::AT_FDCWD, &path, 0, libc::STATX_TYPE | libc::STATX_INO).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(buf.stx_ino, std::fs::metadata(&dir).unwrap().ino());
        assert_eq!(u32::from(buf.stx_mode) & libc::S_IFMT, libc::S_IFDIR);
        let missing = statx(
            libc::AT_FDCWD,
            c"/nonexistent-stockade-statx",
            0,
            libc::STATX_TYPE,
        );
        assert_eq!(missing.unwrap_err().raw_os_error(), Some(libc::ENOENT));
    }
}
