//! `model-probe PLAN`: performs each operation the plan lists, inside the sandbox, and
//! prints the kernel's answer for each: `OP<TAB>PATH<TAB>INTO<TAB>ok` or `...<TAB>E<errno>`
//! (the model differential driver, `tests/src/bin/model_differential/`, compares them
//! with the model's).
//!
//! A plan line is `OP<TAB>PATH[<TAB>INTO]`. Each operation leaves the tree as it found it
//! where it succeeds: a created file is removed, a renamed entry renamed back, a new link
//! removed, a removed entry made again (same kind and mode); a restoration that fails is
//! printed as `restore-failed` (the rest of the answers may then be off), a rename that
//! cannot be moved back as `ok-unrestored` (the answers for what it moved are then left
//! out). `ok` means the
//! call got past the sandbox: a directory that is not empty (`ENOTEMPTY`) and an ioctl
//! the device does not know (`ENOTTY`) count as ok.

use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

fn main() {
    let Some(plan) = std::env::args_os().nth(1) else {
        eprintln!("usage: model-probe PLAN");
        std::process::exit(2);
    };
    let plan = std::fs::read_to_string(plan).expect("model-probe: cannot read the plan");
    let mut out = String::new();
    for line in plan.lines() {
        let mut f = line.split('\t');
        let (Some(op), Some(path)) = (f.next(), f.next()) else {
            continue;
        };
        let into = f.next().map(PathBuf::from);
        let path = Path::new(path);
        let result = match perform(op, path, into.as_deref()) {
            Ok(()) => "ok".to_string(),
            Err(Failure::Errno(e)) => format!("E{e}"),
            Err(Failure::Exit(code)) => format!("rc{code}"),
            Err(Failure::Restore(e)) => format!("restore-failed E{e}"),
            Err(Failure::Unrestored(e)) => format!("ok-unrestored E{e}"),
        };
        let into = into.map(|p| p.display().to_string()).unwrap_or_default();
        out.push_str(&format!("{op}\t{}\t{into}\t{result}\n", path.display()));
    }
    std::io::stdout().write_all(out.as_bytes()).unwrap();
}

enum Failure {
    Errno(i32),
    /// The program ran but did not exit 7 (what the test's scripts exit with).
    Exit(i32),
    Restore(i32),
    /// Done, but it could not be undone: what was moved stays where it went.
    Unrestored(i32),
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn c(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).expect("no NUL in a plan path")
}

/// The result of a libc call returning -1 on failure.
fn check(r: libc::c_int) -> Result<libc::c_int, Failure> {
    if r < 0 {
        Err(Failure::Errno(errno()))
    } else {
        Ok(r)
    }
}

fn open(path: &Path, flags: libc::c_int) -> Result<libc::c_int, Failure> {
    // SAFETY: a NUL-terminated path; the kernel returns a descriptor or -1.
    check(unsafe { libc::open(c(path).as_ptr(), flags | libc::O_CLOEXEC, 0o644) })
}

fn close(fd: libc::c_int) {
    // SAFETY: a descriptor this program opened and closes once.
    unsafe { libc::close(fd) };
}

fn perform(op: &str, path: &Path, into: Option<&Path>) -> Result<(), Failure> {
    let into = || into.expect("rename and link need a directory");
    match op {
        "read" => open(path, libc::O_RDONLY | libc::O_NONBLOCK).map(close),
        "write" => open(path, libc::O_WRONLY | libc::O_NONBLOCK).map(close),
        "truncate" => {
            let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            // SAFETY: a NUL-terminated path and a length.
            check(unsafe { libc::truncate(c(path).as_ptr(), size as libc::off_t) }).map(drop)
        }
        "exec" => match std::process::Command::new(path).status() {
            Err(e) => Err(Failure::Errno(e.raw_os_error().unwrap_or(0))),
            Ok(s) if s.code() == Some(7) => Ok(()),
            Ok(s) => Err(Failure::Exit(s.code().unwrap_or(-1))),
        },
        "ioctl" => ioctl(path),
        "list" => list(path),
        "create" => {
            let new = path.join(".model-new");
            open(&new, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL)?;
            let _ = std::fs::remove_file(&new);
            Ok(())
        }
        "metadata" => {
            let mode = std::fs::metadata(path)
                .map(|m| m.mode() & 0o777)
                .unwrap_or(0o644);
            // SAFETY: a NUL-terminated path and a mode without set-id bits.
            check(unsafe { libc::chmod(c(path).as_ptr(), mode) }).map(drop)
        }
        "xattr" => xattr(path),
        "remove" => remove(path),
        "rename" => {
            let to = into().join(moved_name(path, "mv"));
            std::fs::rename(path, &to).map_err(io)?;
            // Moving back may be refused where moving there was not (into a directory
            // whose new entries cannot be read, the way back would make it readable):
            // the move itself was allowed.
            std::fs::rename(&to, path)
                .map_err(|e| Failure::Unrestored(e.raw_os_error().unwrap_or(0)))
        }
        "link" => {
            let to = into().join(moved_name(path, "ln"));
            std::fs::hard_link(path, &to).map_err(io)?;
            std::fs::remove_file(&to).map_err(|e| Failure::Restore(e.raw_os_error().unwrap_or(0)))
        }
        _ => Err(Failure::Errno(libc::EINVAL)),
    }
}

fn io(e: std::io::Error) -> Failure {
    Failure::Errno(e.raw_os_error().unwrap_or(0))
}

fn moved_name(path: &Path, suffix: &str) -> String {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    format!("{}.{suffix}", name.unwrap_or_default())
}

fn ioctl(path: &Path) -> Result<(), Failure> {
    let fd = open(path, libc::O_RDONLY | libc::O_NONBLOCK)?;
    let mut term = std::mem::MaybeUninit::<libc::termios>::uninit();
    // SAFETY: TCGETS into a buffer of its type, on a descriptor this program holds.
    let r = unsafe { libc::ioctl(fd, libc::TCGETS, term.as_mut_ptr()) };
    let e = errno();
    close(fd);
    // The driver's own answer (not a terminal) means the call reached it.
    match r {
        0.. => Ok(()),
        _ if e == libc::ENOTTY || e == libc::EINVAL => Ok(()),
        _ => Err(Failure::Errno(e)),
    }
}

fn list(path: &Path) -> Result<(), Failure> {
    for entry in std::fs::read_dir(path).map_err(io)? {
        entry.map_err(io)?;
    }
    Ok(())
}

fn xattr(path: &Path) -> Result<(), Failure> {
    let name = c(Path::new("user.stockade_model"));
    // SAFETY: NUL-terminated path and name, a one-byte value.
    check(unsafe { libc::setxattr(c(path).as_ptr(), name.as_ptr(), b"1".as_ptr().cast(), 1, 0) })?;
    // SAFETY: as above.
    unsafe { libc::removexattr(c(path).as_ptr(), name.as_ptr()) };
    Ok(())
}

/// Removes the entry and makes it again as it was (kind, mode, link target, device).
fn remove(path: &Path) -> Result<(), Failure> {
    let meta = std::fs::symlink_metadata(path).map_err(io)?;
    let kind = meta.file_type();
    let target = kind
        .is_symlink()
        .then(|| std::fs::read_link(path).ok())
        .flatten();
    let gone = if kind.is_dir() {
        std::fs::remove_dir(path)
    } else {
        std::fs::remove_file(path)
    };
    match gone {
        Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) => return Ok(()),
        Err(e) => return Err(io(e)),
        Ok(()) => {}
    }
    let cpath = c(path);
    let mode = meta.mode() & 0o777;
    // SAFETY: NUL-terminated paths; each call returns 0 or -1.
    let r = unsafe {
        if kind.is_dir() {
            libc::mkdir(cpath.as_ptr(), mode)
        } else if let Some(target) = &target {
            libc::symlink(c(target).as_ptr(), cpath.as_ptr())
        } else if kind.is_char_device() {
            libc::mknod(
                cpath.as_ptr(),
                libc::S_IFCHR | mode,
                meta.rdev() as libc::dev_t,
            )
        } else {
            let fd = libc::open(
                cpath.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                mode,
            );
            if fd >= 0 {
                libc::write(fd, SCRIPT.as_ptr().cast(), SCRIPT.len());
                libc::close(fd);
                0
            } else {
                -1
            }
        }
    };
    if r < 0 {
        return Err(Failure::Restore(errno()));
    }
    Ok(())
}

/// What every file of the test's trees holds: a script that exits 7.
const SCRIPT: &[u8] = b"#!/bin/sh\nexit 7\n";
