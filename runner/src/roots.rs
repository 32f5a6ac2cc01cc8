//! Opening a writable root as exactly the directory the policy named.
//!
//! The launcher records each writable root's device and inode when it resolves the
//! policy; between then and now an earlier command may have replaced the directory (or
//! a directory on its path) with a link to somewhere else, or removed and recreated it.
//! So the runner opens the canonical path without following any symbolic link
//! (`openat2` with `RESOLVE_NO_SYMLINKS`; on kernels before 5.6, one `O_NOFOLLOW` step
//! per component), compares what it got with the recorded identity, and grants the
//! Landlock rule on that very descriptor, so nothing can be swapped between the check
//! and the grant.

use crate::error::RunnerError;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};
use stockade_policy::grants::Grant;
use stockade_policy::roots::FileId;

/// `struct open_how` of openat2(2) (libc's is non-exhaustive, so not constructible).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

const PATH_DIR: OFlag = OFlag::O_PATH
    .union(OFlag::O_DIRECTORY)
    .union(OFlag::O_CLOEXEC)
    .union(OFlag::O_NOFOLLOW);

/// Opens `path` (absolute) as an `O_PATH` directory descriptor with no symbolic link
/// followed anywhere on the way. Errors: `ELOOP` or `ENOTDIR` when a link (or a
/// non-directory) is met, `ENOENT` when something is missing.
pub fn open_dir_nofollow(path: &Path) -> io::Result<OwnedFd> {
    match openat2_no_symlinks(path) {
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM)) => {
            open_walking(path)
        }
        other => other,
    }
}

fn openat2_no_symlinks(path: &Path) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let how = OpenHow {
        flags: PATH_DIR.bits() as u64,
        mode: 0,
        resolve: libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: openat2 reads a NUL-terminated path and an `open_how` of the size passed,
    // both alive for the call; it returns a new descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            c.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a non-negative return is a descriptor this process now owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The fallback for kernels without openat2: from `/`, one `O_NOFOLLOW` open per
/// component. Only plain names are accepted (the paths are canonical).
pub fn open_walking(path: &Path) -> io::Result<OwnedFd> {
    let mut dir = nix::fcntl::open("/", PATH_DIR, Mode::empty())?;
    for component in path.components() {
        match component {
            Component::RootDir => {}
            Component::Normal(name) => {
                dir = nix::fcntl::openat(&dir, name, PATH_DIR, Mode::empty())?;
            }
            _ => return Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
    }
    Ok(dir)
}

/// Opens the writable root of `grant` and checks it is still the directory `expected`
/// names; the descriptor is what the Landlock rule is granted on.
pub fn open_root(grant: &Grant, expected: FileId) -> Result<OwnedFd, RunnerError> {
    let what = grant.reason.describe();
    let replaced = |now: String| RunnerError::RootReplaced {
        what,
        path: grant.path.clone(),
        now,
    };
    let fd = open_dir_nofollow(&grant.path).map_err(|e| match e.raw_os_error() {
        Some(libc::ELOOP) | Some(libc::ENOTDIR) | Some(libc::EXDEV) => {
            replaced("passes through a symbolic link or a non-directory".into())
        }
        _ => RunnerError::GrantPath {
            what,
            path: grant.path.clone(),
            source: e,
        },
    })?;
    let stat = nix::sys::stat::fstat(&fd).map_err(|e| RunnerError::GrantPath {
        what,
        path: grant.path.clone(),
        source: e.into(),
    })?;
    let found = FileId {
        dev: stat.st_dev,
        ino: stat.st_ino,
        // Compared only when recorded: a filesystem without birth times has none then
        // or now; one that had it then and not now is another directory.
        birth: expected.birth.and_then(|_| birth_time(&fd)),
    };
    if found != expected {
        return Err(replaced(format!(
            "leads to another directory (device {} inode {} born {:?}, not device {} inode {} born {:?} as when the command was confined)",
            found.dev, found.ino, found.birth, expected.dev, expected.ino, expected.birth
        )));
    }
    Ok(fd)
}

/// The birth time of what `fd` refers to, when the filesystem reports one.
pub(crate) fn birth_time(fd: &OwnedFd) -> Option<(i64, u32)> {
    use std::os::fd::AsRawFd;
    let buf =
        stockade_policy::statx::statx(fd.as_raw_fd(), c"", libc::AT_EMPTY_PATH, libc::STATX_BTIME)
            .ok()?;
    stockade_policy::statx::birth(&buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("stockade-runner-roots-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("real/sub")).unwrap();
        std::os::unix::fs::symlink(dir.join("real"), dir.join("link")).unwrap();
        std::fs::write(dir.join("file"), b"").unwrap();
        dir.canonicalize().unwrap()
    }

    #[test]
    fn both_ways_refuse_every_link_and_open_real_directories() {
        let dir = scratch();
        for open in [open_dir_nofollow, open_walking] {
            assert!(open(&dir.join("real/sub")).is_ok());
            let e = open(&dir.join("link/sub")).unwrap_err();
            assert!(
                matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR)),
                "{e}"
            );
            let e = open(&dir.join("link")).unwrap_err();
            assert!(
                matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR)),
                "{e}"
            );
            let e = open(&dir.join("file")).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::ENOTDIR));
            let e = open(&dir.join("absent")).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        }
        assert!(open_walking(&dir.join("real/../real")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
