//! Everything that can stop the runner before the target starts, with the exit code of
//! each (see `stockade_policy::exit`) and a message a user can act on.

use crate::caps::CapsError;
use crate::fds::FdError;
use crate::ruleset::LandlockError;
use crate::seccomp::SeccompError;
use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::PathBuf;
use stockade_policy::binding::Drift;
use stockade_policy::exit;
use stockade_policy::guarantees::{Feature, Guarantee, KernelFacts};
use stockade_policy::request::{DecodeError, ValidationError};
use stockade_policy::status::FailureKind;

/// The runner's command line, shown by `--help` and after every usage error.
pub const USAGE: &str = "usage: stockade-runner --request FILE --sha256 HEX [--failure-tag TAG] | --explain FILE | --version";

#[derive(Debug)]
pub enum RunnerError {
    /// The command line is not one the runner understands.
    Usage(String),
    /// The request file does not exist: never written, or consumed already.
    RequestMissing {
        path: PathBuf,
    },
    /// The request path is a symbolic link (never followed).
    RequestSymlink {
        path: PathBuf,
    },
    /// The request path cannot be opened or read.
    RequestIo {
        path: PathBuf,
        source: io::Error,
    },
    /// The request path is not a regular file.
    RequestNotRegular {
        path: PathBuf,
    },
    /// The request path is a file of the kernel's own (`/proc/kmsg`): refused unread.
    RequestKernelFile {
        path: PathBuf,
        filesystem: &'static str,
    },
    /// The request file belongs to another user.
    RequestForeignOwner {
        path: PathBuf,
        owner: u32,
        euid: u32,
    },
    /// The request file is readable or writable by group or others.
    RequestTooOpen {
        path: PathBuf,
        mode: u32,
    },
    /// The file's bytes do not have the digest the argv gives: not the request `confine`
    /// wrote (changed since, or not a request at all). It is left as it is.
    RequestDigest {
        path: PathBuf,
    },
    /// The request path was replaced while it was being consumed.
    RequestReplaced {
        path: PathBuf,
    },
    /// The request file could not be removed, so it could be replayed.
    RequestUnlink {
        path: PathBuf,
        source: io::Error,
    },
    /// The request file's bytes (with the right digest) are not a request this runner
    /// reads.
    Decode {
        path: PathBuf,
        source: DecodeError,
    },
    Invalid(ValidationError),
    /// `danger-full-access` is never run by the runner: it would run unconfined.
    Unconfined,
    /// The working directory cannot be entered.
    Chdir {
        cwd: PathBuf,
        source: io::Error,
    },
    NoNewPrivs(io::Error),
    /// The request inherits the working directory, and the one the runner was started
    /// in cannot be named (deleted, or outside the process's root).
    InheritedCwd(io::Error),
    /// A path the policy grants cannot be opened (for example a deleted workspace).
    GrantPath {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    /// A directory grant names something that is not a directory.
    GrantNotDirectory {
        what: &'static str,
        path: PathBuf,
    },
    /// A writable root's path no longer leads to the directory the policy named (it was
    /// replaced by a link, or removed and recreated, after the command was confined).
    RootReplaced {
        what: &'static str,
        path: PathBuf,
        now: String,
    },
    /// The kernel cannot give a guarantee the mode requires.
    Unavailable {
        missing: Vec<(Guarantee, Feature)>,
    },
    /// The kernel gives less than the launcher promised the executor: `missing` names the
    /// guarantees reported as enforced that this kernel does not give (empty when only
    /// a fact the report rests on is lower).
    LessThanPromised {
        promised: KernelFacts,
        achieved: KernelFacts,
        missing: Vec<Guarantee>,
        /// The namespace stage was promised and this trace of it is missing.
        stage_missing: Option<&'static str>,
    },
    /// Landlock refused the ruleset.
    Landlock(LandlockError),
    /// The seccomp filter could not be built or installed.
    Seccomp(SeccompError),
    /// The metadata supervisor could not start, or its filter not be installed.
    Notify(crate::notify::NotifyError),
    /// A capability set could not be emptied.
    Capabilities(CapsError),
    /// Inherited descriptors could not be kept from the target.
    Fds(FdError),
    /// A descriptor the request keeps is not open.
    KeepFdNotOpen {
        fd: i32,
    },
    /// A new session could not be started.
    Setsid(io::Error),
    /// The status file cannot be opened or written.
    Status {
        path: PathBuf,
        reason: String,
    },
    /// `--explain`, `--version` or `--help` could not write its text.
    Stdout(io::Error),
    /// The target does not exist (exit 127).
    NotFound {
        program: OsString,
    },
    /// The target exists but cannot be executed (exit 126).
    CannotExecute {
        program: OsString,
        source: io::Error,
    },
    /// The executable or the working directory is not what `confine` bound.
    BindingChanged(Drift),
    /// The bound executable could not be read to compare its content's digest.
    BindingUnverifiable {
        path: PathBuf,
        source: io::Error,
    },
}

impl RunnerError {
    pub fn exit_code(&self) -> i32 {
        match self {
            RunnerError::NotFound { .. } => exit::NOT_FOUND,
            RunnerError::CannotExecute { .. } => exit::CANNOT_EXECUTE,
            _ => exit::RUNNER_FAILURE,
        }
    }

    /// The failure's kind, written in the `failed` status record.
    pub fn kind(&self) -> FailureKind {
        match self {
            RunnerError::Usage(_) => FailureKind::Usage,
            RunnerError::RequestMissing { .. } => FailureKind::RequestMissing,
            RunnerError::RequestSymlink { .. } => FailureKind::RequestSymlink,
            RunnerError::RequestIo { .. } => FailureKind::RequestIo,
            RunnerError::RequestNotRegular { .. } | RunnerError::RequestKernelFile { .. } => {
                FailureKind::RequestNotRegular
            }
            RunnerError::RequestForeignOwner { .. } => FailureKind::RequestForeignOwner,
            RunnerError::RequestTooOpen { .. } => FailureKind::RequestTooOpen,
            RunnerError::RequestReplaced { .. } => FailureKind::RequestReplaced,
            RunnerError::RequestDigest { .. } => FailureKind::RequestDigest,
            RunnerError::RequestUnlink { .. } => FailureKind::RequestUnlink,
            RunnerError::Decode { .. } => FailureKind::RequestDecode,
            RunnerError::Invalid(_) => FailureKind::RequestInvalid,
            RunnerError::Unconfined => FailureKind::Unconfined,
            RunnerError::Chdir { .. } => FailureKind::Chdir,
            RunnerError::InheritedCwd(_) => FailureKind::InheritedCwd,
            RunnerError::NoNewPrivs(_) => FailureKind::NoNewPrivs,
            RunnerError::GrantPath { .. } => FailureKind::GrantPath,
            RunnerError::GrantNotDirectory { .. } => FailureKind::GrantNotDirectory,
            RunnerError::RootReplaced { .. } => FailureKind::RootReplaced,
            RunnerError::Unavailable { .. } => FailureKind::SandboxUnavailable,
            RunnerError::LessThanPromised { .. } => FailureKind::LessThanReported,
            RunnerError::Landlock(_) => FailureKind::Landlock,
            RunnerError::Seccomp(_) | RunnerError::Notify(_) => FailureKind::Seccomp,
            RunnerError::Capabilities(_) => FailureKind::Capabilities,
            RunnerError::Fds(_) => FailureKind::Fds,
            RunnerError::KeepFdNotOpen { .. } => FailureKind::KeepFdNotOpen,
            RunnerError::Setsid(_) => FailureKind::Setsid,
            RunnerError::Status { .. } => FailureKind::Status,
            RunnerError::Stdout(_) => FailureKind::Stdout,
            RunnerError::NotFound { .. } => FailureKind::NotFound,
            RunnerError::CannotExecute { .. } => FailureKind::CannotExecute,
            RunnerError::BindingChanged(_) => FailureKind::BindingChanged,
            RunnerError::BindingUnverifiable { .. } => FailureKind::BindingUnverifiable,
        }
    }
}

/// The most of a program name a failure line repeats: the name is the command's own
/// `argv[0]`, which may be any length (the line, and the status record that copies it,
/// would otherwise grow with it).
const SHOWN_PROGRAM_CHARS: usize = 256;

/// `program` as a failure line shows it: lossily decoded, cut to
/// [`SHOWN_PROGRAM_CHARS`] characters (then `...`).
fn shown_program(program: &std::ffi::OsStr) -> String {
    let text = program.to_string_lossy();
    match text.char_indices().nth(SHOWN_PROGRAM_CHARS) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.into_owned(),
    }
}

/// Describes an errno without the words "permission denied": a target that is merely not
/// executable must not read as a sandbox denial to the executor's classifier.
fn errno_name(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EACCES) => {
            "EACCES (no execute permission on the file or a directory on its path)".into()
        }
        Some(libc::EPERM) => "EPERM (execution not allowed)".into(),
        Some(code) => format!("{} ({})", io::Error::from_raw_os_error(code), code),
        None => e.to_string(),
    }
}

impl fmt::Display for RunnerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunnerError::Usage(msg) => write!(f, "{msg}; {USAGE}"),
            RunnerError::RequestMissing { path } => write!(
                f,
                "request file {} does not exist (a request is consumed by its first run: it ran already, `stockade outcome` withdrew it, or the path is not the one confine printed)",
                path.display()
            ),
            RunnerError::RequestSymlink { path } => write!(
                f,
                "request file {} is a symbolic link; refusing to follow it",
                path.display()
            ),
            RunnerError::RequestIo { path, source } => {
                write!(f, "cannot read request file {}: {source}", path.display())
            }
            RunnerError::RequestNotRegular { path } => {
                write!(f, "request file {} is not a regular file", path.display())
            }
            RunnerError::RequestKernelFile { path, filesystem } => write!(
                f,
                "request file {} is not a regular file: it lies on the kernel's {filesystem} filesystem, whose files are read from the kernel, not from storage (nothing was read from it)",
                path.display()
            ),
            RunnerError::RequestForeignOwner { path, owner, euid } => write!(
                f,
                "request file {} is owned by uid {owner}, not by the runner's uid {euid}",
                path.display()
            ),
            RunnerError::RequestTooOpen { path, mode } => write!(
                f,
                "request file {} has mode {mode:04o}; it must not be readable or writable by group or others",
                path.display()
            ),
            RunnerError::RequestDigest { path } => write!(
                f,
                "request file {} does not have the digest given with --sha256: it changed after `stockade confine` wrote it, or is not a request; left untouched",
                path.display()
            ),
            RunnerError::RequestReplaced { path } => write!(
                f,
                "request file {} was replaced while it was being read",
                path.display()
            ),
            RunnerError::RequestUnlink { path, source } => write!(
                f,
                "cannot remove request file {} after opening it, so it could be replayed: {source}",
                path.display()
            ),
            RunnerError::Decode { path, source } => {
                write!(f, "request file {} is unusable: {source}", path.display())
            }
            RunnerError::Invalid(e) => write!(f, "invalid request: {e}"),
            RunnerError::Unconfined => f.write_str(
                "the request asks for danger-full-access; the runner only runs confined modes",
            ),
            RunnerError::Chdir { cwd, source } => write!(
                f,
                "cannot enter working directory {}: {source}",
                cwd.display()
            ),
            RunnerError::NoNewPrivs(e) => write!(f, "cannot set no_new_privs: {e}"),
            RunnerError::InheritedCwd(e) => write!(
                f,
                "the request inherits the working directory, and the one the runner was started in cannot be named (deleted, or outside the root): {e}"
            ),
            RunnerError::GrantPath { what, path, source } => {
                write!(f, "{what} {} cannot be opened: {source}", path.display())
            }
            RunnerError::GrantNotDirectory { what, path } => {
                write!(f, "{what} {} is not a directory", path.display())
            }
            RunnerError::RootReplaced { what, path, now } => write!(
                f,
                "{what} {} was replaced since the command was confined: it now {now}; refusing to grant it (confine the command again)",
                path.display()
            ),
            RunnerError::Unavailable { missing } => unavailable(f, missing),
            RunnerError::LessThanPromised {
                promised,
                achieved,
                missing,
                stage_missing,
            } => less_than_promised(f, promised, achieved, missing, stage_missing.as_deref()),
            RunnerError::Landlock(e) => write!(f, "landlock: {e}"),
            RunnerError::Seccomp(e) => write!(f, "seccomp filter: {e}"),
            RunnerError::Notify(e) => write!(f, "{e}"),
            RunnerError::Capabilities(e) => write!(f, "capabilities: {e}"),
            RunnerError::Fds(e) => {
                write!(f, "cannot keep inherited descriptors from the target: {e}")
            }
            RunnerError::KeepFdNotOpen { fd } => write!(
                f,
                "descriptor {fd} is to be kept for the command but is not open"
            ),
            RunnerError::Setsid(e) => write!(f, "cannot start a new session: {e}"),
            RunnerError::Status { path, reason } => {
                write!(f, "status file {} is unusable: {reason}", path.display())
            }
            RunnerError::Stdout(e) => write!(f, "cannot write to standard output: {e}"),
            RunnerError::NotFound { program } => {
                write!(f, "{}: command not found", shown_program(program))
            }
            RunnerError::CannotExecute { program, source } => write!(
                f,
                "cannot execute {}: {}",
                shown_program(program),
                errno_name(source)
            ),
            RunnerError::BindingChanged(drift) => drift.fmt(f),
            RunnerError::BindingUnverifiable { path, source } => write!(
                f,
                "cannot read the executable {} to compare its content with the digest bound when the command was confined: {}; nothing was run",
                path.display(),
                errno_name(source)
            ),
        }
    }
}

/// The refusal of a kernel that lacks what the mode needs, naming each feature.
fn unavailable(f: &mut fmt::Formatter<'_>, missing: &[(Guarantee, Feature)]) -> fmt::Result {
    f.write_str("sandbox unavailable: the kernel lacks")?;
    for (i, (g, feature)) in missing.iter().enumerate() {
        let sep = if i == 0 { " " } else { ", " };
        write!(f, "{sep}{feature} (needed for {})", g.name())?;
    }
    Ok(())
}

/// The refusal of a kernel (or a start without the stage) that gives less than the
/// executor was told.
fn less_than_promised(
    f: &mut fmt::Formatter<'_>,
    promised: &KernelFacts,
    achieved: &KernelFacts,
    missing: &[Guarantee],
    stage_missing: Option<&str>,
) -> fmt::Result {
    write!(
        f,
        "the kernel gives less than was reported for this request (Landlock ABI {} and seccomp {} promised, {} and {} achieved)",
        promised.landlock_abi,
        if promised.seccomp { "on" } else { "off" },
        achieved.landlock_abi,
        if achieved.seccomp { "on" } else { "off" },
    )?;
    if !missing.is_empty() {
        let names: Vec<&str> = missing.iter().map(|g| g.name()).collect();
        write!(f, "; not given: {}", names.join(", "))?;
    }
    if let Some(why) = stage_missing {
        write!(
            f,
            "; the namespace stage did not start this runner ({why}): was the argv run as confine printed it?"
        )?;
    }
    f.write_str("; refusing to run")
}

impl std::error::Error for RunnerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunnerError::RequestIo { source, .. }
            | RunnerError::RequestUnlink { source, .. }
            | RunnerError::Chdir { source, .. }
            | RunnerError::GrantPath { source, .. }
            | RunnerError::CannotExecute { source, .. }
            | RunnerError::NoNewPrivs(source)
            | RunnerError::InheritedCwd(source)
            | RunnerError::Setsid(source)
            | RunnerError::Stdout(source) => Some(source),
            RunnerError::Decode { source, .. } => Some(source),
            RunnerError::Invalid(e) => Some(e),
            RunnerError::Landlock(e) => Some(e),
            RunnerError::Seccomp(e) => Some(e),
            RunnerError::Notify(e) => Some(e),
            RunnerError::Capabilities(e) => Some(e),
            RunnerError::Fds(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_kinds_are_distinct_status_record_identifiers() {
        let io = || io::Error::from_raw_os_error(libc::ENOENT);
        let p = || PathBuf::from("/p");
        let all = [
            RunnerError::Usage(String::new()),
            RunnerError::RequestMissing { path: p() },
            RunnerError::RequestSymlink { path: p() },
            RunnerError::RequestIo {
                path: p(),
                source: io(),
            },
            RunnerError::RequestNotRegular { path: p() },
            RunnerError::RequestForeignOwner {
                path: p(),
                owner: 1,
                euid: 0,
            },
            RunnerError::RequestTooOpen {
                path: p(),
                mode: 0o644,
            },
            RunnerError::RequestReplaced { path: p() },
            RunnerError::RequestDigest { path: p() },
            RunnerError::RequestUnlink {
                path: p(),
                source: io(),
            },
            RunnerError::Decode {
                path: p(),
                source: DecodeError::BadMagic,
            },
            RunnerError::Invalid(ValidationError::EmptyArgv),
            RunnerError::Unconfined,
            RunnerError::Chdir {
                cwd: p(),
                source: io(),
            },
            RunnerError::NoNewPrivs(io()),
            RunnerError::InheritedCwd(io()),
            RunnerError::GrantPath {
                what: "workspace root",
                path: p(),
                source: io(),
            },
            RunnerError::GrantNotDirectory {
                what: "workspace root",
                path: p(),
            },
            RunnerError::RootReplaced {
                what: "workspace root",
                path: p(),
                now: String::new(),
            },
            RunnerError::Unavailable { missing: vec![] },
            RunnerError::LessThanPromised {
                promised: KernelFacts {
                    landlock_abi: 7,
                    seccomp: true,
                    namespaces: false,
                    supervisor: false,
                    supervisor_writes: false,
                },
                achieved: KernelFacts {
                    landlock_abi: 5,
                    seccomp: true,
                    namespaces: false,
                    supervisor: false,
                    supervisor_writes: false,
                },
                missing: vec![],
                stage_missing: None,
            },
            RunnerError::Landlock(LandlockError::NotEnforced),
            RunnerError::Seccomp(SeccompError::Duplicate),
            RunnerError::Capabilities(CapsError::StillHolds {
                set: "ambient",
                mask: 1,
            }),
            RunnerError::Fds(FdError {
                fd: 3,
                source: io(),
            }),
            RunnerError::KeepFdNotOpen { fd: 3 },
            RunnerError::Setsid(io()),
            RunnerError::Status {
                path: p(),
                reason: String::new(),
            },
            RunnerError::Stdout(io()),
            RunnerError::NotFound {
                program: "x".into(),
            },
            RunnerError::CannotExecute {
                program: "x".into(),
                source: io(),
            },
            RunnerError::BindingChanged(Drift::Executable {
                program: "x".into(),
                then: String::new(),
                now: String::new(),
            }),
            RunnerError::BindingUnverifiable {
                path: p(),
                source: io(),
            },
        ];
        // A file of the kernel's is reported under the kind of any other non-regular file.
        let kernel = RunnerError::RequestKernelFile {
            path: p(),
            filesystem: "proc",
        };
        assert_eq!(kernel.kind(), FailureKind::RequestNotRegular);
        assert!(kernel.to_string().contains("the kernel's proc filesystem"));
        let long = RunnerError::NotFound {
            program: "p".repeat(100_000).into(),
        }
        .to_string();
        assert_eq!(long, format!("{}...: command not found", "p".repeat(256)));
        let short = RunnerError::NotFound {
            program: "é".repeat(256).into(),
        }
        .to_string();
        assert_eq!(short, format!("{}: command not found", "é".repeat(256)));
        let mut kinds: Vec<&str> = all.iter().map(|e| e.kind().as_str()).collect();
        kinds.sort();
        kinds.dedup();
        assert_eq!(kinds.len(), all.len());
    }
}
