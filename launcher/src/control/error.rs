//! Failures of the control directory and of the binaries it names (the runner, the
//! launcher, the bound executable). The launcher's error composes them; each still exits
//! 125 with one `stockade: ` line.

use std::fmt;
use std::io;
use std::path::PathBuf;
use stockade_policy::binding::Drift;
use stockade_policy::request::EncodeError;

#[derive(Debug)]
pub enum ControlError {
    /// The runner binary is not where it was looked for.
    RunnerMissing {
        path: PathBuf,
        hint: &'static str,
        /// The other places looked at first, where nothing was.
        also: Vec<PathBuf>,
    },
    /// The runner may exist, but this user cannot reach or execute it.
    RunnerUnreachable {
        path: PathBuf,
        uid: u32,
        /// The first directory on the way (or the file) that does not let the user through.
        blocked: PathBuf,
        /// Its mode and owner, when they can be read.
        how: Option<String>,
    },
    /// The directory that holds request files is unusable.
    PrivateDir {
        path: PathBuf,
        reason: String,
    },
    /// A request file could not be written.
    WriteRequest {
        path: PathBuf,
        source: io::Error,
    },
    Encode(EncodeError),
    /// The runner or the launcher lies where a confined command could replace it.
    ExposedBinary {
        what: &'static str,
        path: PathBuf,
        why: String,
    },
    /// The executable cannot be bound as asked (too large or unreadable to hash).
    BindExecutable {
        path: PathBuf,
        why: String,
    },
    /// `danger-full-access` under `stockade run`: the executable or working directory is
    /// not what was bound; nothing ran.
    BindingChanged(Drift),
}

impl fmt::Display for ControlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ControlError::RunnerMissing { path, hint, also } => {
                write!(f, "stockade-runner not found at {}", path.display())?;
                if !also.is_empty() {
                    let also: Vec<String> = also.iter().map(|p| p.display().to_string()).collect();
                    write!(f, " (nor at {})", also.join(" or "))?;
                }
                write!(f, ": {hint}")
            }
            ControlError::RunnerUnreachable {
                path,
                uid,
                blocked,
                how,
            } => {
                let how = how.as_ref().map(|h| format!(" ({h})")).unwrap_or_default();
                let what = if blocked == path {
                    format!("uid {uid} may not execute it{how}")
                } else {
                    format!("{} does not let uid {uid} through{how}", blocked.display())
                };
                write!(
                    f,
                    "stockade-runner at {} cannot be reached by uid {uid}: {what}; install stockade where every user can reach it (the packages put the runner in /usr/libexec/stockade/), make that directory searchable by this user, or set $STOCKADE_RUNNER to a runner this user can execute",
                    path.display()
                )
            }
            ControlError::PrivateDir { path, reason } => write!(
                f,
                "control directory {} is unusable: {reason}",
                path.display()
            ),
            ControlError::WriteRequest { path, source } => write!(
                f,
                "cannot write launch request {}: {source}",
                path.display()
            ),
            ControlError::Encode(e) => e.fmt(f),
            ControlError::ExposedBinary { what, path, why } => write!(
                f,
                "refusing to run: the {what} {} could be replaced by a confined command or another user ({why}), and what replaced it would run unconfined; install stockade where only root or you can write (e.g. /usr/bin/stockade and /usr/libexec/stockade/stockade-runner, or set $STOCKADE_RUNNER to such a path), or choose a workspace and writable roots that do not contain it",
                path.display()
            ),
            ControlError::BindExecutable { path, why } => write!(
                f,
                "cannot bind the executable {}: {why}; the command was not run",
                path.display()
            ),
            ControlError::BindingChanged(drift) => drift.fmt(f),
        }
    }
}

impl std::error::Error for ControlError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ControlError::Encode(e) => Some(e),
            ControlError::WriteRequest { source, .. } => Some(source),
            _ => None,
        }
    }
}
