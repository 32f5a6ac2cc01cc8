//! The denial record: one refusal stockade caused, named exactly (what kind of access,
//! the path or host, the rule that refused it, the narrowest grant that would allow it,
//! and how stockade knows). `stockade run --json` and `stockade classify` list them under
//! `denials`; `stockade run` prints the first few as markers.
//!
//! A record is made only for a refusal the policy caused: an error the command would get
//! anyway (Unix permissions for the invoking user, a read-only mount of the host) is never
//! one (see [`crate::attribution`]).

use serde::{Deserialize, Serialize};

/// What kind of access was refused.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Reading a file or listing a directory.
    FileRead,
    /// Creating, writing, removing or renaming outside the writable roots.
    FileWrite,
    /// Changing a file's mode, owner or times.
    Metadata,
    /// Writing a protected path (`.git/hooks`, `.envrc`, `--protect PATH`).
    ProtectedPath,
    /// Any access to a hidden path (`~/.ssh`, `--hide PATH`).
    HiddenPath,
    /// Writing a device file other than `/dev/null`.
    Device,
    /// Connecting to a host by name that the network rules do not allow.
    NetworkName,
    /// Connecting to an address the network rules do not allow.
    NetworkAddress,
    /// Creating a socket of a family the policy refuses.
    Socket,
    /// Signalling a process outside the sandbox.
    Signal,
    /// Inspecting a process outside the sandbox (`/proc/PID/...`).
    Process,
    /// A refusal whose error line names nothing stockade can check (`script: failed to
    /// create pseudo-terminal: Permission denied`, Python's bare `PermissionError`): it
    /// is reported with the line, as the harness's marker always reported it, since
    /// nothing else the command met gives that errno there.
    Unattributed,
}

impl Kind {
    /// Words for the marker: `file write`, `network name`, ...
    pub fn words(self) -> &'static str {
        match self {
            Kind::FileRead => "file read",
            Kind::FileWrite => "file write",
            Kind::Metadata => "metadata change",
            Kind::ProtectedPath => "protected path write",
            Kind::HiddenPath => "hidden path access",
            Kind::Device => "device write",
            Kind::NetworkName => "network name",
            Kind::NetworkAddress => "network address",
            Kind::Socket => "socket",
            Kind::Signal => "signal",
            Kind::Process => "process access",
            Kind::Unattributed => "access",
        }
    }

    /// Whether the refusal is of the network (a name or an address), not of something
    /// on this machine: those are not called file access in the harness's marker.
    pub fn is_network(self) -> bool {
        matches!(self, Kind::NetworkName | Kind::NetworkAddress)
    }
}

/// How a record was obtained.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// The kernel's own Landlock audit record for this command's domain.
    Audit,
    /// The path (or host) named by the command's own error line, checked against the
    /// policy (it refuses this access) and Unix permissions for the invoking user (they
    /// would allow it): the refusal is the policy's.
    PolicyCheck,
    /// The filtering proxy's record of the connections it refused.
    Proxy,
    /// The seccomp filter.
    Seccomp,
}

/// One refusal stockade caused. In JSON: `{"kind", "path"?, "host"?, "port"?, "rule",
/// "grant"?, "alternative"?, "line"?, "evidence"}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DenialRecord {
    pub kind: Kind,
    /// The absolute path refused (for a file kind), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The host refused (for a network kind), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The mode and rule that refused it, in words.
    pub rule: String,
    /// The narrowest option that would allow it (`--writable DIR`, `--allow-domain
    /// NAME`, ...); `None` when no option allows it (only running unconfined would).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
    /// A broader option that would allow it too (`--network allow`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alternative: Option<String>,
    /// The command's error line, for a refusal it names nothing of (`unattributed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
    pub evidence: Source,
}

/// How many records `stockade run` prints a marker line for; the rest are counted.
pub const MARKED: usize = 3;

impl DenialRecord {
    /// What was refused: the path, `HOST:PORT`, the host, or the error line.
    pub fn target(&self) -> String {
        match (&self.path, &self.host, self.port) {
            (Some(p), _, _) => p.clone(),
            (None, Some(h), Some(port)) => format!("{h}:{port}"),
            (None, Some(h), None) => h.clone(),
            (None, None, _) => match (&self.line, self.kind) {
                (Some(line), _) => format!("\"{}\"", clipped(line)),
                (None, Kind::Socket) => "socket()".into(),
                (None, _) => "(unknown)".into(),
            },
        }
    }

    /// The marker line: `[sandbox: file write denied: /etc/x (allow with --writable /etc)]`.
    pub fn marker(&self) -> String {
        let allow = match (&self.grant, self.kind) {
            (Some(g), _) => format!("allow with {g}"),
            (None, Kind::Unattributed) => "the line names no path to grant".into(),
            (None, _) => "no option allows it".into(),
        };
        format!(
            "[sandbox: {} denied: {} ({allow})]",
            self.kind.words(),
            self.target()
        )
    }
}

/// The most characters of a command's line a marker repeats.
const MAX_LINE_CHARS: usize = 120;

/// `line` cut to [`MAX_LINE_CHARS`], control characters dropped (a marker is one line).
fn clipped(line: &str) -> String {
    let mut out: String = line
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_LINE_CHARS)
        .collect();
    if line.chars().count() > MAX_LINE_CHARS {
        out.push_str("...");
    }
    out
}

/// The marker lines for `records`: one each for the first [`MARKED`], then a count.
pub fn markers(records: &[DenialRecord]) -> Vec<String> {
    let mut lines: Vec<String> = records
        .iter()
        .take(MARKED)
        .map(DenialRecord::marker)
        .collect();
    if records.len() > MARKED {
        lines.push(format!(
            "[sandbox: {} more refusals (listed in --json)]",
            records.len() - MARKED
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &str) -> DenialRecord {
        DenialRecord {
            kind: Kind::FileWrite,
            path: Some(path.into()),
            host: None,
            port: None,
            rule: "r".into(),
            grant: Some("--writable /etc".into()),
            alternative: None,
            line: None,
            evidence: Source::PolicyCheck,
        }
    }

    #[test]
    fn markers_name_kind_and_path_then_count() {
        let records: Vec<_> = (0..5).map(|i| write(&format!("/etc/x{i}"))).collect();
        let lines = markers(&records);
        assert_eq!(
            lines[0],
            "[sandbox: file write denied: /etc/x0 (allow with --writable /etc)]"
        );
        assert_eq!(lines.len(), MARKED + 1);
        assert_eq!(
            lines[MARKED],
            "[sandbox: 2 more refusals (listed in --json)]"
        );
        let json = serde_json::to_value(&records[0]).unwrap();
        assert_eq!(json["kind"], "file-write");
        assert_eq!(json["evidence"], "policy-check");
        assert!(json.get("host").is_none());
    }
}
