//! Checking the binding just before the target starts (the rule and its comparison live
//! in `stockade_policy::binding`; this is the runner's I/O).
//!
//! The working directory is checked right after the runner enters it: from then on the
//! process's working directory is that inode, whatever happens to its path. `argv[0]` is
//! resolved with the policy's rule after confinement is complete, each candidate opened
//! (`O_PATH`, no read needed) and examined on its descriptor; what it found is compared
//! with what `confine` bound. The target is then executed from that very descriptor
//! (`execveat` with `AT_EMPTY_PATH`), so no swap between the check and `execve` can
//! change what runs.
//!
//! The exception is a file the kernel hands to an interpreter: a `#!` script, or a file
//! of no format the kernel knows, which `/bin/sh` runs. The interpreter opens it by name
//! after `execve` (a descriptor would reach it only as `/dev/fd/N`, which needs `/proc`
//! and changes the script's `$0`), so such a file is executed by path, after the path
//! was checked once more to lead to the verified file. A swap between that check and the
//! interpreter's own open is not caught (another process of the user can time it to the
//! open events), so such a start is recorded as `by-name` and the receipt does not say
//! the binding was verified.

use crate::error::RunnerError;
use nix::fcntl::{OFlag, open};
use nix::sys::stat::{FileStat, Mode, fstat};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use stockade_policy::LaunchRequest;
use stockade_policy::binding::{
    self, CwdBinding, ExecBinding, ExecId, Executable, Probe, Resolved, Seen, Timestamp,
};
use stockade_policy::digest::Sha256;
use stockade_policy::roots::FileId;
use stockade_policy::status::TargetStart;

/// How the verified file is executed.
#[derive(Debug, PartialEq, Eq)]
pub enum Method {
    /// From the verified descriptor.
    Descriptor,
    /// By path: an interpreter must open it by name.
    Path,
}

/// A verified executable.
#[derive(Debug)]
pub struct Target {
    /// The candidate as found (relative to the working directory when relative).
    pub path: PathBuf,
    /// The verified file (close-on-exec).
    pub fd: OwnedFd,
    pub method: Method,
}

/// What to start, once the binding held.
#[derive(Debug)]
pub enum Start {
    Exec(Target),
    /// Nothing by that name, as when confined (127).
    NotFound,
    /// Nothing that can be executed, as when confined (126, with the errno).
    NotExecutable {
        errno: i32,
    },
}

impl Start {
    /// How the target starts, for the status record: a file executed by path is opened
    /// again by name by its interpreter, after every check.
    pub fn target_start(&self) -> TargetStart {
        match self {
            Start::Exec(Target {
                method: Method::Path,
                ..
            }) => TargetStart::ByName,
            _ => TargetStart::Descriptor,
        }
    }
}

fn timestamp(sec: i64, nsec: i64) -> Timestamp {
    Timestamp {
        sec,
        nsec: nsec.clamp(0, 999_999_999) as u32,
    }
}

/// The identity of a file from its `fstat`.
pub fn exec_id(st: &FileStat) -> ExecId {
    ExecId {
        dev: st.st_dev,
        ino: st.st_ino,
        size: st.st_size.max(0) as u64,
        modified: timestamp(st.st_mtime, st.st_mtime_nsec),
        changed: timestamp(st.st_ctime, st.st_ctime_nsec),
    }
}

/// Refuses a working directory that is not the one bound (the runner is in it now).
pub fn check_cwd(bound: &CwdBinding) -> Result<(), RunnerError> {
    let CwdBinding::Bound { path, .. } = bound else {
        return Ok(());
    };
    let unreadable = |e: nix::Error| RunnerError::Chdir {
        cwd: path.clone(),
        source: e.into(),
    };
    let here = open(
        ".",
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(unreadable)?;
    let st = fstat(&here).map_err(unreadable)?;
    let now = FileId {
        dev: st.st_dev,
        ino: st.st_ino,
        birth: crate::roots::birth_time(&here),
    };
    bound.check(now).map_err(RunnerError::BindingChanged)
}

/// One candidate, looked at on a descriptor that needs no read access.
fn probe(path: &Path) -> Probe<(OwnedFd, ExecId)> {
    match open(path, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty()) {
        Err(e) => Probe::of_open_error(e as i32),
        Ok(fd) => match fstat(&fd) {
            Err(e) => Probe::Failed(e as i32),
            Ok(st) => {
                let id = exec_id(&st);
                Probe::of_mode(st.st_mode, (fd, id))
            }
        },
    }
}

/// Resolves `argv[0]` as the policy's rule says, compares it with the binding, and
/// returns what to execute. A difference is a runner failure naming it: nothing runs.
pub fn verify(request: &LaunchRequest) -> Result<Start, RunnerError> {
    let program = request.argv[0].as_os_str();
    let search = request.env_var("PATH").map(|p| p.as_os_str());
    let resolved = binding::resolve(program, search, probe);
    let bound = &request.binding.executable;
    bound
        .check(program, resolved.seen(|(_, id)| id))
        .map_err(RunnerError::BindingChanged)?;
    let (path, fd) = match resolved {
        Resolved::NotFound => return Ok(Start::NotFound),
        Resolved::NotExecutable { errno } => return Ok(Start::NotExecutable { errno }),
        Resolved::Found {
            path,
            file: (fd, _),
        } => (path, fd),
    };
    let ExecBinding::Found(bound) = bound else {
        // `check` admits a found file only against a found binding.
        return Err(RunnerError::BindingChanged(binding::Drift::Executable {
            program: program.to_string_lossy().into_owned(),
            then: "nothing".into(),
            now: path.display().to_string(),
        }));
    };
    verify_found(program, bound, path, fd)
}

/// The found file: read it where that is allowed (for the digest, and to tell a file an
/// interpreter opens by name from a binary), each descriptor checked to be the file.
fn verify_found(
    program: &std::ffi::OsStr,
    bound: &Executable,
    path: PathBuf,
    opened: OwnedFd,
) -> Result<Start, RunnerError> {
    let unverifiable = |source: io::Error| RunnerError::BindingUnverifiable {
        path: path.clone(),
        source,
    };
    // O_NONBLOCK: should a FIFO be put in its place, opening must not hang.
    let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOCTTY | OFlag::O_NONBLOCK;
    let readable = match open(&path, flags, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(e) if bound.sha256.is_some() => return Err(unverifiable(e.into())),
        // Executable but not readable (mode --x, or hidden): no interpreter could read
        // it either, so it is a binary, executed from the verified descriptor.
        Err(_) => {
            return Ok(Start::Exec(Target {
                path,
                fd: opened,
                method: Method::Descriptor,
            }));
        }
    };
    let same = |fd: BorrowedFd<'_>| -> Result<(), RunnerError> {
        let st = fstat(fd).map_err(|e| unverifiable(e.into()))?;
        let seen = Seen::Found {
            path: &path,
            id: &exec_id(&st),
        };
        ExecBinding::Found(bound.clone())
            .check(program, seen)
            .map_err(RunnerError::BindingChanged)
    };
    same(readable.as_fd())?;
    if bound.sha256.is_some() {
        let digest = hash(&readable, bound.id.size).map_err(unverifiable)?;
        bound
            .check_content(&path, &digest)
            .map_err(RunnerError::BindingChanged)?;
        // Written while it was read: its status change time moved.
        same(readable.as_fd())?;
    }
    // A script, or something only `/bin/sh` would run: both open it by name.
    let method = if binding::started_by_name(header(&readable)) {
        Method::Path
    } else {
        Method::Descriptor
    };
    if method == Method::Path {
        // The path must still lead to the verified file: it is what runs.
        let again = open(&path, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty())
            .map_err(|e| unverifiable(e.into()))?;
        same(again.as_fd())?;
    }
    Ok(Start::Exec(Target {
        path,
        fd: OwnedFd::from(readable),
        method,
    }))
}

/// The first four bytes of the file, when it has them.
fn header(file: &File) -> Option<[u8; 4]> {
    let mut buf = [0u8; 4];
    match file.read_at(&mut buf, 0) {
        Ok(4) => Some(buf),
        _ => None,
    }
}

/// The SHA-256 of exactly `size` bytes from the start of the file; a file that ends
/// sooner or goes on is reported as the size having changed, by the digest comparison.
fn hash(file: &File, size: u64) -> io::Result<[u8; 32]> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut at: u64 = 0;
    // One byte past the bound size tells a file that grew.
    while at <= size {
        let n = match file.read_at(&mut buf, at) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        h.update(&buf[..n]);
        at += n as u64;
    }
    Ok(h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_errno_values_are_this_platforms() {
        assert_eq!(binding::ENOENT, libc::ENOENT);
        assert_eq!(binding::EACCES, libc::EACCES);
        assert_eq!(binding::ENODEV, libc::ENODEV);
        assert_eq!(binding::ENOTDIR, libc::ENOTDIR);
        assert_eq!(binding::ETIMEDOUT, libc::ETIMEDOUT);
        assert_eq!(binding::ESTALE, libc::ESTALE);
    }

    #[test]
    fn hashing_covers_exactly_the_file() {
        let dir = std::env::temp_dir().join(format!("stockade-runner-hash-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("f");
        let content: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
        std::fs::write(&file, &content).unwrap();
        let fd = File::open(&file).unwrap();
        let whole = stockade_policy::digest::sha256(&content);
        assert_eq!(hash(&fd, content.len() as u64).unwrap(), whole);
        // Bound smaller than the file is: what follows makes the digest differ from the
        // one bound (of that many bytes).
        let shorter = content.len() - 10;
        assert_ne!(
            hash(&fd, shorter as u64).unwrap(),
            stockade_policy::digest::sha256(&content[..shorter])
        );
        assert_eq!(header(&fd), Some([0, 1, 2, 3]));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
