//! ConfinedArgv: what `stockade confine` hands an executor, field for field the shape in
//! the harness's wire contract (`../shared/CONTEXT.md`, section 1).

use crate::exit;
use crate::guarantees::{Enforcement, GuaranteeReport};
use crate::mode::Mode;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What `EACCES` reads as. Landlock answers every denied file access and TCP port with
/// it, and the seccomp socket filter uses it for every socket family the policy denies
/// (`socket(2)` documents EACCES for exactly that), so a denied network reads as a
/// denial too.
pub const PERMISSION_DENIED: &str = "permission denied";
/// What `EPERM` reads as. The seccomp filter answers the privileged escape hatches
/// (ptrace, mount, namespaces, bpf, keyrings, perf, userfaultfd, io_uring, TIOCSTI, ...)
/// with it, the natural answer for an unprivileged caller; Landlock scopes answer a
/// signal or an abstract-socket connection leaving the sandbox with it. Every confined
/// policy installs that filter, so every confined policy can produce it.
pub const OPERATION_NOT_PERMITTED: &str = "operation not permitted";
/// `strerror(EROFS)`, lower-cased: a write or metadata change outside the writable roots
/// under the namespace stage, which mounts everything else read-only.
pub const READ_ONLY_FILE_SYSTEM: &str = "read-only file system";

/// A rule recognising the runner's own failure in a settled process's facts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunnerFailureRule {
    /// Nonzero exit codes the rule may match; `None` means any nonzero code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_exit_codes: Option<Vec<i32>>,
    /// Case-insensitive substrings, matched within one stderr line.
    pub fatal_signatures: Vec<String>,
    /// Lines removed before matching, by case-insensitive exact full-line equality.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub informational_lines: Option<Vec<String>>,
}

/// The version of the executor-facing JSON (ConfinedArgv and the classify verdict).
/// Executors check it; a change that alters the meaning of a field bumps it.
pub const CONTRACT_VERSION: u32 = 1;

/// Whether the runner's status can be trusted over what the command prints.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StatusChannel {
    /// The status file lies outside every writable root: only the runner can write it,
    /// so its record decides runner failure.
    OutOfBand,
    /// The status file lies beneath a writable root (no private directory outside them
    /// was usable): a command could forge it, so classification uses the exit-code rules.
    InBand,
}

impl StatusChannel {
    pub fn as_str(self) -> &'static str {
        match self {
            StatusChannel::OutOfBand => "out-of-band",
            StatusChannel::InBand => "in-band",
        }
    }
}

/// The wrapped command and how to interpret its outcome.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfinedArgv {
    /// [`CONTRACT_VERSION`].
    pub contract: u32,
    /// What the executor spawns.
    pub argv: Vec<String>,
    /// How completely the mode is enforced; absent for `danger-full-access`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforcement: Option<Enforcement>,
    /// This backend's denial dialect: lower-case substrings of stderr.
    pub denial_signatures: Vec<String>,
    pub runner_failure_rules: Vec<RunnerFailureRule>,
    pub mode: Mode,
    /// Every guarantee by name, with whether it is enforced for this command and the
    /// kernel feature it needs; absent for `danger-full-access`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub guarantees: BTreeMap<String, GuaranteeReport>,
    /// The runner's status file (see [`crate::status`]); absent when there is no runner
    /// (`danger-full-access`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_path: Option<String>,
    /// Whether the status file is out of the command's reach; absent with `status_path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_channel: Option<StatusChannel>,
}

/// The denial signatures a command confined under `mode` can produce: the messages of
/// the errnos the sandbox answers with (no other errno is used for a denial; the x32
/// guard and clone3 answer ENOSYS, which is "not there", not a denial). Under the
/// namespace stage (`staged`) the tree outside the writable roots is mounted read-only,
/// and the kernel checks that before Landlock: a write there reads `EROFS`.
pub fn denial_signatures(mode: Mode, staged: bool) -> Vec<String> {
    if !mode.is_confined() {
        return Vec::new();
    }
    let mut out = vec![
        PERMISSION_DENIED.to_string(),
        OPERATION_NOT_PERMITTED.to_string(),
    ];
    if staged {
        out.push(READ_ONLY_FILE_SYSTEM.to_string());
    }
    out
}

/// The rules that recognise a failure of `stockade-runner` itself: exit 125 with a line
/// carrying the runner prefix. Exit 126/127 (target not executable / not found) carry the
/// same prefix but are the command's failure, not the sandbox's, so they do not match.
pub fn runner_failure_rules(mode: Mode) -> Vec<RunnerFailureRule> {
    if !mode.is_confined() {
        return Vec::new();
    }
    vec![RunnerFailureRule {
        allowed_exit_codes: Some(vec![exit::RUNNER_FAILURE]),
        fatal_signatures: vec![exit::RUNNER_PREFIX.to_string()],
        informational_lines: None,
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_uses_the_wire_field_names() {
        let c = ConfinedArgv {
            contract: CONTRACT_VERSION,
            argv: vec!["/usr/bin/stockade-runner".into()],
            enforcement: Some(Enforcement::Full),
            denial_signatures: denial_signatures(Mode::ReadOnly, false),
            runner_failure_rules: runner_failure_rules(Mode::ReadOnly),
            mode: Mode::ReadOnly,
            guarantees: crate::guarantees::report(
                &crate::guarantees::Asks::defaults(Mode::ReadOnly),
                &crate::guarantees::KernelFacts {
                    landlock_abi: 4,
                    seccomp: true,
                    namespaces: true,
                },
            ),
            status_path: Some("/run/user/0/stockade/req-x/status".into()),
            status_channel: Some(StatusChannel::OutOfBand),
        };
        let v: serde_json::Value = serde_json::to_value(&c).unwrap();
        assert_eq!(v["contract"], 1);
        assert_eq!(v["statusPath"], "/run/user/0/stockade/req-x/status");
        assert_eq!(v["statusChannel"], "out-of-band");
        assert_eq!(v["enforcement"], "full");
        assert_eq!(v["mode"], "read-only");
        assert_eq!(v["denialSignatures"][0], "permission denied");
        assert_eq!(v["denialSignatures"][1], "operation not permitted");
        assert_eq!(v["guarantees"]["network"]["status"], "enforced");
        assert_eq!(v["guarantees"]["signals"]["status"], "unavailable");
        assert_eq!(v["guarantees"]["signals"]["needs"], "landlock-abi-6");
        assert_eq!(v["runnerFailureRules"][0]["allowedExitCodes"][0], 125);
        assert_eq!(
            v["runnerFailureRules"][0]["fatalSignatures"][0],
            "stockade-runner: "
        );
        assert!(
            v["runnerFailureRules"][0]
                .get("informationalLines")
                .is_none()
        );
        let back: ConfinedArgv = serde_json::from_value(v).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn danger_full_access_has_no_dialect() {
        assert!(denial_signatures(Mode::DangerFullAccess, true).is_empty());
        assert!(runner_failure_rules(Mode::DangerFullAccess).is_empty());
    }
}
