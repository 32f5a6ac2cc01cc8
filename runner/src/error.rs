//! Everything that can stop the runner before the target starts, with the exit code of
//! each (see `stockade_policy::exit`) and a message a user can act on.

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::PathBuf;
use stockade_policy::exit;
use stockade_policy::guarantees::{Feature, Guarantee, KernelFacts};
use stockade_policy::request::{DecodeError, ValidationError};

/// The runner's command line, shown by `--help` and after every usage error.
pub const USAGE: &str = "usage: stockade-runner --request FILE | --explain FILE | --version";

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
    /// The request path was replaced while it was being consumed.
    RequestReplaced {
        path: PathBuf,
    },
    /// The request file could not be removed, so it could be replayed.
    RequestUnlink {
        path: PathBuf,
        source: io::Error,
    },
    Decode(DecodeError),
    Invalid(ValidationError),
    /// `danger-full-access` is never run by the runner: it would run unconfined.
    Unconfined,
    /// The working directory cannot be entered.
    Chdir {
        cwd: PathBuf,
        source: io::Error,
    },
    NoNewPrivs(io::Error),
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
    },
    /// Landlock refused the ruleset.
    Landlock(String),
    /// The seccomp filter could not be built or installed.
    Seccomp(String),
    /// A capability set could not be emptied.
    Capabilities(String),
    /// Inherited descriptors could not be kept from the target.
    Fds(String),
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
}

impl RunnerError {
    pub fn exit_code(&self) -> i32 {
        match self {
            RunnerError::NotFound { .. } => exit::NOT_FOUND,
            RunnerError::CannotExecute { .. } => exit::CANNOT_EXECUTE,
            _ => exit::RUNNER_FAILURE,
        }
    }

    /// A stable identifier of the failure, written in the `failed` status record.
    /// Executors may match on it: an identifier is never renamed or reused.
    pub fn kind(&self) -> &'static str {
        match self {
            RunnerError::Usage(_) => "usage",
            RunnerError::RequestMissing { .. } => "request-missing",
            RunnerError::RequestSymlink { .. } => "request-symlink",
            RunnerError::RequestIo { .. } => "request-io",
            RunnerError::RequestNotRegular { .. } => "request-not-regular",
            RunnerError::RequestForeignOwner { .. } => "request-foreign-owner",
            RunnerError::RequestTooOpen { .. } => "request-too-open",
            RunnerError::RequestReplaced { .. } => "request-replaced",
            RunnerError::RequestUnlink { .. } => "request-unlink",
            RunnerError::Decode(_) => "request-decode",
            RunnerError::Invalid(_) => "request-invalid",
            RunnerError::Unconfined => "unconfined",
            RunnerError::Chdir { .. } => "chdir",
            RunnerError::NoNewPrivs(_) => "no-new-privs",
            RunnerError::GrantPath { .. } => "grant-path",
            RunnerError::GrantNotDirectory { .. } => "grant-not-directory",
            RunnerError::Unavailable { .. } => "sandbox-unavailable",
            RunnerError::LessThanPromised { .. } => "less-than-reported",
            RunnerError::Landlock(_) => "landlock",
            RunnerError::Seccomp(_) => "seccomp",
            RunnerError::Capabilities(_) => "capabilities",
            RunnerError::Fds(_) => "fds",
            RunnerError::KeepFdNotOpen { .. } => "keep-fd-not-open",
            RunnerError::Setsid(_) => "setsid",
            RunnerError::Status { .. } => "status",
            RunnerError::Stdout(_) => "stdout",
            RunnerError::NotFound { .. } => "not-found",
            RunnerError::CannotExecute { .. } => "cannot-execute",
        }
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
                "request file {} does not exist (a request is consumed by its first run and cannot be replayed)",
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
            RunnerError::Decode(e) => e.fmt(f),
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
            RunnerError::GrantPath { what, path, source } => {
                write!(f, "{what} {} cannot be opened: {source}", path.display())
            }
            RunnerError::GrantNotDirectory { what, path } => {
                write!(f, "{what} {} is not a directory", path.display())
            }
            RunnerError::Unavailable { missing } => {
                f.write_str("sandbox unavailable: the kernel lacks")?;
                for (i, (g, feature)) in missing.iter().enumerate() {
                    let sep = if i == 0 { " " } else { ", " };
                    write!(f, "{sep}{feature} (needed for {})", g.name())?;
                }
                Ok(())
            }
            RunnerError::LessThanPromised {
                promised,
                achieved,
                missing,
            } => {
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
                f.write_str("; refusing to run")
            }
            RunnerError::Landlock(e) => write!(f, "landlock: {e}"),
            RunnerError::Seccomp(e) => write!(f, "seccomp filter: {e}"),
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
                write!(f, "{}: command not found", program.to_string_lossy())
            }
            RunnerError::CannotExecute { program, source } => write!(
                f,
                "cannot execute {}: {}",
                program.to_string_lossy(),
                errno_name(source)
            ),
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
            RunnerError::RequestUnlink {
                path: p(),
                source: io(),
            },
            RunnerError::Decode(DecodeError::BadMagic),
            RunnerError::Invalid(ValidationError::EmptyArgv),
            RunnerError::Unconfined,
            RunnerError::Chdir {
                cwd: p(),
                source: io(),
            },
            RunnerError::NoNewPrivs(io()),
            RunnerError::GrantPath {
                what: "workspace root",
                path: p(),
                source: io(),
            },
            RunnerError::GrantNotDirectory {
                what: "workspace root",
                path: p(),
            },
            RunnerError::Unavailable { missing: vec![] },
            RunnerError::LessThanPromised {
                promised: KernelFacts {
                    landlock_abi: 7,
                    seccomp: true,
                    namespaces: false,
                },
                achieved: KernelFacts {
                    landlock_abi: 5,
                    seccomp: true,
                    namespaces: false,
                },
                missing: vec![],
            },
            RunnerError::Landlock(String::new()),
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
        ];
        let mut kinds: Vec<&str> = all.iter().map(RunnerError::kind).collect();
        for kind in &kinds {
            assert!(
                kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'),
                "{kind}"
            );
        }
        kinds.sort();
        kinds.dedup();
        assert_eq!(kinds.len(), all.len());
    }
}
