//! Files handed to the runner by path (the request file, the status file): how they are
//! opened, and whether no other user could have read or written them. The one rule both
//! are held to.

use std::fmt;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;

/// How such a file is opened: never through a symbolic link, never blocking on a FIFO,
/// never inherited by the target, never becoming the controlling terminal.
pub const OPEN_FLAGS: libc::c_int =
    libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY;

/// Why a file is not trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Untrusted {
    NotRegular,
    ForeignOwner {
        owner: u32,
        euid: u32,
    },
    /// Readable or writable by group or others; `mode` is the permission bits.
    TooOpen {
        mode: u32,
    },
}

/// A regular file, owned by the runner's effective uid, with no group or other bits.
pub fn check(meta: &Metadata) -> Result<(), Untrusted> {
    if !meta.file_type().is_file() {
        return Err(Untrusted::NotRegular);
    }
    let euid = nix::unistd::geteuid().as_raw();
    if meta.uid() != euid {
        return Err(Untrusted::ForeignOwner {
            owner: meta.uid(),
            euid,
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(Untrusted::TooOpen { mode });
    }
    Ok(())
}

impl fmt::Display for Untrusted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Untrusted::NotRegular => f.write_str("it is not a regular file"),
            Untrusted::ForeignOwner { owner, euid } => write!(
                f,
                "it is owned by uid {owner}, not by the runner's uid {euid}"
            ),
            Untrusted::TooOpen { mode } => write!(
                f,
                "it has mode {mode:04o}; it must not be readable or writable by group or others"
            ),
        }
    }
}
