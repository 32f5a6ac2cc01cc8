//! Files handed to the runner by path (the request file, the status file): how they are
//! opened, and the facts the one trust rule (`stockade_policy::trust`) is applied to.

use std::fs::Metadata;
use stockade_policy::trust::{self, FileFacts, FileKind, Untrusted};

/// How such a file is opened: never through a symbolic link, never blocking on a FIFO,
/// never inherited by the target, never becoming the controlling terminal.
pub const OPEN_FLAGS: libc::c_int =
    libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY;

/// A regular file, owned by the runner's effective uid, with no group or other bits.
pub fn check(meta: &Metadata) -> Result<(), Untrusted> {
    trust::judge(
        &FileFacts::of(meta),
        FileKind::Regular,
        nix::unistd::geteuid().as_raw(),
    )
}
