//! Failures of the launcher itself. Each exits 125 (nothing ran) with one
//! `stockade: ` line.

use std::fmt;
use std::io;
use std::path::PathBuf;
use stockade_policy::guarantees::{Feature, Guarantee};
use stockade_policy::policy::PolicyError;
use stockade_policy::request::ValidationError;
use stockade_policy::{Mode, exit};

/// Executors look for this code to tell "cannot confine here" from other failures.
pub const SANDBOX_UNAVAILABLE: &str = "SANDBOX_UNAVAILABLE";

#[derive(Debug)]
pub enum LauncherError {
    Policy(PolicyError),
    /// The mode cannot be confined on this kernel.
    Unavailable {
        mode: Mode,
        missing: Vec<(Guarantee, Feature)>,
    },
    /// The policy's writable roots contain the control base.
    ControlBaseWritable {
        base: PathBuf,
        root: PathBuf,
    },
    /// The command or environment cannot be passed to `execve`.
    Invalid(ValidationError),
    /// A path or argument that must appear in JSON is not valid UTF-8.
    NotUtf8 {
        what: &'static str,
    },
    /// The command could not be started.
    Spawn {
        program: String,
        source: io::Error,
    },
    /// The control directory or a binary it names is unusable.
    Control(crate::control::error::ControlError),
    /// The supervisor cannot do its job (signals, containment, starting the command).
    Supervise(crate::supervise::error::SuperviseError),
    CurrentDir(io::Error),
    /// No random bytes for the runner failure tag.
    FailureTag(io::Error),
    /// A hidden path lies inside a writable root and the namespace stage cannot run.
    HiddenInWritableRoot {
        path: PathBuf,
    },
    /// The launcher's own path (for the namespace stage's argv) cannot be determined.
    LauncherPath(io::Error),
    /// An input of `classify` cannot be read.
    ReadInput {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    /// The ConfinedArgv given to `classify` is not usable.
    BadConfined(String),
    /// `--signal` names no signal.
    BadSignal(String),
    /// Our own stdout is gone.
    WriteOutput(io::Error),
    /// `stockade serve` cannot go on (its input, or its own file replaced).
    Serve(String),
    /// A result could not be serialised as JSON.
    Json(serde_json::Error),
    /// A combination the launcher's own logic rules out happened after all.
    Internal(&'static str),
    /// The journal could not record or answer (see `crate::journal`).
    Journal(String),
    /// No loopback port could be reserved for the network proxy.
    ProxyPort(io::Error),
    /// The runner was found but could not be started (`stockade explain`).
    ExecRunner {
        path: PathBuf,
        source: io::Error,
    },
}

impl fmt::Display for LauncherError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LauncherError::Policy(e) => e.fmt(f),
            LauncherError::Unavailable { mode, missing } => {
                write!(
                    f,
                    "{SANDBOX_UNAVAILABLE}: {mode} mode cannot be confined on this kernel: it lacks"
                )?;
                for (i, (g, feature)) in missing.iter().enumerate() {
                    let sep = if i == 0 { " " } else { ", " };
                    write!(f, "{sep}{feature} (needed for {})", g.name())?;
                }
                f.write_str("; the command was not run")
            }
            LauncherError::HiddenInWritableRoot { path } => write!(
                f,
                "{SANDBOX_UNAVAILABLE}: hidden path {} lies inside a writable root, and without the namespace stage (unavailable here, or --no-stage) a command could rename it out of hiding for the next command to read; drop that writable root, or pass --no-default-hide (or drop the --hide)",
                path.display()
            ),
            LauncherError::LauncherPath(e) => write!(
                f,
                "cannot determine this executable's path for the namespace stage: {e}"
            ),
            LauncherError::ControlBaseWritable { base, root } => write!(
                f,
                "the writable root {} contains the control directory {}, where the requests and status files of other commands live; grant a narrower root, or set STOCKADE_CONTROL_DIR to a private directory outside every writable root",
                root.display(),
                base.display()
            ),
            LauncherError::Invalid(e) => e.fmt(f),
            LauncherError::NotUtf8 { what } => {
                write!(f, "{what} is not valid UTF-8 and cannot be put in JSON")
            }
            LauncherError::Spawn { program, source } => {
                write!(f, "cannot start {program}: {source}")
            }
            LauncherError::Control(e) => e.fmt(f),
            LauncherError::Supervise(e) => write!(f, "cannot supervise the command: {e}"),
            LauncherError::FailureTag(e) => {
                write!(
                    f,
                    "cannot draw random bytes for the runner failure tag: {e}"
                )
            }
            LauncherError::CurrentDir(e) => {
                write!(f, "cannot determine the current directory: {e}")?;
                if e.kind() == io::ErrorKind::PermissionDenied {
                    // It or a directory on its way is closed to this user (a checkout
                    // beneath /root run by another user): say what to do.
                    let uid = nix::unistd::getuid().as_raw();
                    write!(
                        f,
                        "; it or a directory above it is closed to uid {uid}: run stockade from a directory this user can reach"
                    )?;
                }
                Ok(())
            }
            LauncherError::ReadInput { what, path, source } => {
                write!(
                    f,
                    "cannot read the {what} from {}: {source}",
                    path.display()
                )
            }
            LauncherError::BadConfined(e) => write!(f, "--confined: {e}"),
            LauncherError::BadSignal(s) => write!(
                f,
                "--signal {s:?} is not a signal name (like SIGKILL or KILL) or number"
            ),
            LauncherError::WriteOutput(e) => write!(f, "cannot write to stdout: {e}"),
            LauncherError::Serve(why) => write!(f, "serve: {why}"),
            LauncherError::Json(e) => write!(f, "cannot serialise the result as JSON: {e}"),
            LauncherError::Internal(what) => write!(f, "internal error: {what}"),
            LauncherError::Journal(what) => write!(f, "journal: {what}"),
            LauncherError::ProxyPort(e) => write!(
                f,
                "cannot reserve a port free on every address for the network proxy (--allow-domain): {e}"
            ),
            LauncherError::ExecRunner { path, source } => {
                write!(f, "cannot start the runner {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for LauncherError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LauncherError::Policy(e) => Some(e),
            LauncherError::Control(e) => e.source(),
            LauncherError::Invalid(e) => Some(e),
            LauncherError::Supervise(e) => Some(e),
            LauncherError::Json(e) => Some(e),
            LauncherError::Spawn { source, .. }
            | LauncherError::ReadInput { source, .. }
            | LauncherError::ExecRunner { source, .. }
            | LauncherError::CurrentDir(source)
            | LauncherError::FailureTag(source)
            | LauncherError::LauncherPath(source)
            | LauncherError::ProxyPort(source)
            | LauncherError::WriteOutput(source) => Some(source),
            _ => None,
        }
    }
}

impl LauncherError {
    /// The exit code `stockade` exits with: a program that could not be started follows
    /// the wrapper conventions (127 not found, 126 not executable); everything else means
    /// stockade itself failed and nothing ran (125).
    pub fn exit_code(&self) -> i32 {
        match self {
            LauncherError::Spawn { source, .. } => match source.kind() {
                io::ErrorKind::NotFound => exit::NOT_FOUND,
                _ => exit::CANNOT_EXECUTE,
            },
            _ => exit::RUNNER_FAILURE,
        }
    }
}

impl From<crate::control::error::ControlError> for LauncherError {
    fn from(e: crate::control::error::ControlError) -> Self {
        LauncherError::Control(e)
    }
}

impl From<PolicyError> for LauncherError {
    fn from(e: PolicyError) -> Self {
        LauncherError::Policy(e)
    }
}
