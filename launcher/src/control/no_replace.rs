//! Renaming without ever replacing what is already at the destination.
//!
//! `rename(2)` silently replaces an empty directory or any file at the new name; the
//! launcher's records and private directories must never land over something another
//! process put there. `renameat2(RENAME_NOREPLACE)` is called through `syscall(2)`
//! rather than a C library wrapper, which musl does not have: the same code then builds
//! against glibc and musl.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Renames `from` to `to`; fails with `EEXIST` when `to` exists.
pub(crate) fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    let from = c_path(from)?;
    let to = c_path(to)?;
    // SAFETY: both paths are NUL-terminated strings that outlive the call; the kernel
    // reads them and nothing else.
    let done = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if done == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path holds a NUL byte"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_onto_a_free_name_and_never_over_an_existing_one() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("c"),
        );
        std::fs::write(&a, "a").unwrap();
        std::fs::write(&b, "b").unwrap();
        let refused = rename_no_replace(&a, &b).unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(libc::EEXIST));
        assert_eq!(
            std::fs::read(&b).unwrap(),
            b"b",
            "the existing file is kept"
        );
        rename_no_replace(&a, &c).unwrap();
        assert_eq!(std::fs::read(&c).unwrap(), b"a");
        assert!(!a.exists());
    }
}
