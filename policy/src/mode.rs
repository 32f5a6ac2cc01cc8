//! The sandbox modes, spelled exactly as the harness spells them.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// How much a command may touch.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Read and execute anything; write nothing but `/dev/null`.
    ReadOnly,
    /// `read-only`, plus full access beneath the workspace, `/tmp`, `$TMPDIR` and any
    /// extra writable roots.
    WorkspaceWrite,
    /// No confinement at all: the raw command runs and the runner is not involved.
    DangerFullAccess,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::ReadOnly, Mode::WorkspaceWrite, Mode::DangerFullAccess];

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::WorkspaceWrite => "workspace-write",
            Mode::DangerFullAccess => "danger-full-access",
        }
    }

    /// Whether this mode runs the command under the runner's confinement.
    pub fn is_confined(self) -> bool {
        !matches!(self, Mode::DangerFullAccess)
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mode spelling that is not one of the three.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownMode(pub String);

impl fmt::Display for UnknownMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown sandbox mode '{}': expected read-only, workspace-write or danger-full-access",
            self.0
        )
    }
}

impl std::error::Error for UnknownMode {}

impl FromStr for Mode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| UnknownMode(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_round_trip() {
        for mode in Mode::ALL {
            assert_eq!(mode.as_str().parse::<Mode>(), Ok(mode));
            assert_eq!(
                serde_json::to_string(&mode).unwrap(),
                format!("\"{}\"", mode.as_str())
            );
        }
    }

    #[test]
    fn unknown_spelling_is_named() {
        let err = "readonly".parse::<Mode>().unwrap_err();
        assert!(err.to_string().contains("'readonly'"));
    }
}
