//! Why the supervisor cannot do its job; the launcher's error composes it.

use super::containment;

/// Why the supervisor cannot do its job (nothing ran, or the command was never started).
#[derive(Debug)]
pub enum SuperviseError {
    /// The signals the loop reads could not be blocked and watched.
    Signals(nix::Error),
    /// The launcher could not become a subreaper.
    Subreaper(nix::Error),
    /// `--containment cgroup` was asked for and no cgroup can be made.
    Cgroup(containment::CgroupError),
    /// The launcher itself ran out of something (descriptors, memory, processes) or
    /// could not put the command in its cgroup.
    Start {
        program: String,
        source: std::io::Error,
    },
}

impl std::fmt::Display for SuperviseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SuperviseError::Signals(e) => write!(f, "cannot watch signals: {e}"),
            SuperviseError::Subreaper(e) => write!(f, "cannot become a subreaper: {e}"),
            SuperviseError::Cgroup(e) => write!(f, "cgroup containment is unavailable: {e}"),
            SuperviseError::Start { program, source } => {
                write!(f, "cannot start {program}: {source}")
            }
        }
    }
}

impl std::error::Error for SuperviseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SuperviseError::Signals(e) | SuperviseError::Subreaper(e) => Some(e),
            SuperviseError::Cgroup(e) => Some(e),
            SuperviseError::Start { source, .. } => Some(source),
        }
    }
}
