//! Taking a launch request from its file: opened without following links, checked for
//! ownership and permissions, read, checked against the digest the argv carries (so a
//! file `confine` did not write, or that changed since, is refused and left alone),
//! unlinked *before* it is decoded (a request is consumed exactly once, whatever happens
//! next), then decoded and validated.

use crate::error::RunnerError;
use crate::trust;
use std::fs::{File, Metadata};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use stockade_policy::LaunchRequest;
use stockade_policy::digest;
use stockade_policy::request::{DecodeError, MAX_REQUEST_BYTES};
use stockade_policy::trust::Untrusted;

/// Opens the request file without following a symlink and without blocking on a FIFO,
/// and refuses a file of the kernel's own filesystems before anything reads it (see
/// `stockade_policy::trust::kernel_filesystem`: as root, `/proc/kmsg` passes the owner
/// and mode checks, and reading it consumes the kernel log).
pub fn open(path: &Path) -> Result<(File, Metadata), RunnerError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(trust::OPEN_FLAGS)
        .open(path)
        .map_err(|source| match source.raw_os_error() {
            Some(libc::ENOENT) => RunnerError::RequestMissing { path: path.into() },
            Some(libc::ELOOP) => RunnerError::RequestSymlink { path: path.into() },
            _ => RunnerError::RequestIo {
                path: path.into(),
                source,
            },
        })?;
    let meta = file.metadata().map_err(|source| RunnerError::RequestIo {
        path: path.into(),
        source,
    })?;
    let fs = nix::sys::statfs::fstatfs(&file).map_err(|e| RunnerError::RequestIo {
        path: path.into(),
        source: e.into(),
    })?;
    if let Some(filesystem) =
        stockade_policy::trust::kernel_filesystem(fs.filesystem_type().0 as u64)
    {
        return Err(RunnerError::RequestKernelFile {
            path: path.into(),
            filesystem,
        });
    }
    Ok((file, meta))
}

/// Refuses a file that another user could have written or read.
pub fn check_trust(path: &Path, meta: &Metadata) -> Result<(), RunnerError> {
    let path = path.into();
    trust::check(meta).map_err(|untrusted| match untrusted {
        Untrusted::WrongKind { .. } => RunnerError::RequestNotRegular { path },
        Untrusted::ForeignOwner { owner, euid } => {
            RunnerError::RequestForeignOwner { path, owner, euid }
        }
        Untrusted::TooOpen { mode } => RunnerError::RequestTooOpen { path, mode },
    })
}

/// Reads at most one byte more than the size cap, so an oversized file is recognised
/// without reading all of it. The buffer is sized from `expected` (the file's size when
/// opened), so a normal request is read in one `read` rather than a doubling series.
pub fn read_capped(path: &Path, file: File, expected: u64) -> Result<Vec<u8>, RunnerError> {
    let cap = MAX_REQUEST_BYTES as u64 + 1;
    // One byte more than the size, so that the read that sees end-of-file needs no growth.
    let mut bytes = Vec::with_capacity(expected.saturating_add(1).min(cap) as usize);
    file.take(cap)
        .read_to_end(&mut bytes)
        .map_err(|source| RunnerError::RequestIo {
            path: path.into(),
            source,
        })?;
    Ok(bytes)
}

/// Decodes request bytes read from `path` (named in the error).
pub fn decode(path: &Path, bytes: &[u8]) -> Result<LaunchRequest, RunnerError> {
    LaunchRequest::decode(bytes).map_err(|source| RunnerError::Decode {
        path: path.into(),
        source,
    })
}

/// Consumes the request at `path`, whose bytes must have `digest`. A file with other
/// bytes (changed since `confine` wrote it, or not a request at all, such as a key file
/// of ours) is refused and left untouched. A request that matches is unlinked before it
/// is decoded: after this returns, successfully or not, it no longer exists.
pub fn consume(path: &Path, digest: &[u8; 32]) -> Result<LaunchRequest, RunnerError> {
    let (file, meta) = open(path)?;
    check_trust(path, &meta)?;
    let bytes = read_capped(path, file, meta.len())?;
    // Larger than any request `confine` writes: not one, so not ours to remove.
    if bytes.len() > MAX_REQUEST_BYTES {
        return Err(RunnerError::Decode {
            path: path.into(),
            source: DecodeError::TooLarge { len: bytes.len() },
        });
    }
    if !digest::same(&digest::sha256(&bytes), digest) {
        return Err(RunnerError::RequestDigest { path: path.into() });
    }
    // The same inode must still be at the path, or we would unlink someone else's file
    // and leave ours to be replayed.
    match std::fs::symlink_metadata(path) {
        Ok(now) if now.dev() == meta.dev() && now.ino() == meta.ino() => {}
        Ok(_) => return Err(RunnerError::RequestReplaced { path: path.into() }),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(RunnerError::RequestMissing { path: path.into() });
        }
        Err(source) => {
            return Err(RunnerError::RequestIo {
                path: path.into(),
                source,
            });
        }
    }
    std::fs::remove_file(path).map_err(|source| RunnerError::RequestUnlink {
        path: path.into(),
        source,
    })?;
    let request = decode(path, &bytes)?;
    request.validate().map_err(RunnerError::Invalid)?;
    Ok(request)
}
