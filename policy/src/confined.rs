//! ConfinedArgv: what `stockade confine` hands an executor, field for field the shape the
//! executor's wire contract defines (documented in `docs/provider-contract.md`).

use crate::exit;
use crate::guarantees::{Asks, Enforcement, Guarantee, GuaranteeReport, KernelFacts};
use crate::mode::Mode;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What `EACCES` reads as, and the whole denial dialect. Landlock answers every denied
/// file access and TCP port with it, and the seccomp socket filter uses it for every
/// socket family the policy denies (`socket(2)` documents EACCES for exactly that), so
/// a denied network reads as a denial too.
pub const PERMISSION_DENIED: &str = "permission denied";
/// What `EPERM` reads as: deliberately *not* a denial signature. The seccomp filter
/// answers the privileged escape hatches (ptrace, mount, namespaces, bpf, ...) with it,
/// the answer an unprivileged process gets outside any sandbox, and Landlock scopes
/// answer a signal leaving the sandbox with it; but so does every failed `kill` of
/// another user's process and every non-root `chown`. A denial makes an executor offer
/// to run the command outside the sandbox, so a signature must name only what the
/// sandbox refused; these refusals are reported as ordinary failures.
pub const OPERATION_NOT_PERMITTED: &str = "operation not permitted";
/// `strerror(EROFS)`, lower-cased: a write or metadata change outside the writable roots
/// under the namespace stage, which mounts everything else read-only.
pub const READ_ONLY_FILE_SYSTEM: &str = "read-only file system";
/// `strerror(EBUSY)`, lower-cased: under the namespace stage, a rename or removal of one
/// of its mount points: a protected path (`.git/config`, which git rewrites by renaming
/// `config.lock` over it: `git config`, `git remote add`, branch tracking) or a directory
/// pinned above one (`mv .git elsewhere`). Inside the sandbox nothing else answers it:
/// mounting and unmounting are refused (`EPERM`) and no device that could be busy is
/// granted.
pub const DEVICE_OR_RESOURCE_BUSY: &str = "device or resource busy";

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
pub const CONTRACT_VERSION: u32 = 2;

/// Whether the runner's status can be trusted over what the command prints.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StatusChannel {
    /// The status file lies outside every writable root: only the runner can write it,
    /// so its record decides runner failure.
    OutOfBand,
    /// The kernel does not confine truncation (Landlock ABI below 3): a command could
    /// empty the status file, so classification uses the exit-code rules.
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

/// The channel a status file gives on a kernel with `facts`. The file always lies
/// outside every writable root (the launcher refuses a policy that could write its
/// control base), but below Landlock ABI 3 truncation is not confined, so a command could
/// empty the file by path and pass a failed exit off as a runner that never started:
/// the file is then not trustworthy, and the channel is in-band. `classify` derives the
/// channel again with this rule rather than reading it from its input.
pub fn status_channel(facts: &KernelFacts) -> StatusChannel {
    // What truncation needs does not depend on the policy's other asks.
    let truncate = Guarantee::Truncate.needs(&Asks::defaults(Mode::ReadOnly));
    if truncate.available(facts) {
        StatusChannel::OutOfBand
    } else {
        StatusChannel::InBand
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
    /// Roots the command asked for implicitly that are not granted, each with its reason
    /// (today only `$TMPDIR`: see `roots::check_implicit_tmpdir`); absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_granted: Vec<String>,
    /// What `confine` bound: request and policy digests, the executable `argv[0]`
    /// resolved to and the working directory (see [`crate::binding`]). The runner refuses
    /// to start anything else; for `danger-full-access` nothing checks it (the executor
    /// runs the raw argv). Absent in ConfinedArgv from builds before receipts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding: Option<crate::receipt::BindingReport>,
    /// The journal key the request was recorded under (`confine --journal KEY`), so
    /// that `classify` records the verdict there (see [`crate::journal`]); absent
    /// without one. `classify` records only when the journal's record under the key
    /// names this request's private directory: a key changed in the JSON is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal: Option<String>,
}

/// The denial signatures a command confined under `mode` can produce: the message of the
/// one errno the sandbox answers a file access it refuses with (see [`PERMISSION_DENIED`]
/// and, for why EPERM is left out, [`OPERATION_NOT_PERMITTED`]). Under the namespace
/// stage (`staged`) the tree outside the writable roots is mounted read-only, and the
/// kernel checks that before Landlock: a write there reads `EROFS`
/// ([`READ_ONLY_FILE_SYSTEM`]), the stage's own refusal, and renaming onto or moving a
/// protected path reads `EBUSY` ([`DEVICE_OR_RESOURCE_BUSY`]).
pub fn denial_signatures(mode: Mode, staged: bool) -> Vec<String> {
    if !mode.is_confined() {
        return Vec::new();
    }
    let mut out = vec![PERMISSION_DENIED.to_string()];
    if staged {
        out.push(READ_ONLY_FILE_SYSTEM.to_string());
        out.push(DEVICE_OR_RESOURCE_BUSY.to_string());
    }
    out
}

/// The rules that recognise a failure of `stockade-runner` itself: exit 125 with a line
/// carrying the runner prefix. Exit 126/127 (target not executable / not found) carry the
/// same prefix but are the command's failure, not the sandbox's, so they do not match.
pub fn runner_failure_rules(mode: Mode) -> Vec<RunnerFailureRule> {
    tagged_runner_failure_rules(mode, None)
}

/// [`runner_failure_rules`] for a runner started with failure tag `tag` (see
/// [`crate::failure_tag`]): the rule then matches the runner's own line only, never a
/// line the command prints.
pub fn tagged_runner_failure_rules(mode: Mode, tag: Option<&str>) -> Vec<RunnerFailureRule> {
    if !mode.is_confined() {
        return Vec::new();
    }
    vec![RunnerFailureRule {
        allowed_exit_codes: Some(vec![exit::RUNNER_FAILURE]),
        fatal_signatures: vec![match tag {
            Some(tag) => crate::failure_tag::signature(tag),
            None => exit::RUNNER_PREFIX.to_string(),
        }],
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
                    supervisor: false,
                    supervisor_writes: false,
                },
            ),
            status_path: Some("/run/user/0/stockade/req-x/status".into()),
            status_channel: Some(StatusChannel::OutOfBand),
            not_granted: vec!["$TMPDIR / is not granted: too broad".into()],
            binding: None,
            journal: None,
        };
        let v: serde_json::Value = serde_json::to_value(&c).unwrap();
        assert_eq!(v["contract"], 2);
        assert_eq!(v["statusPath"], "/run/user/0/stockade/req-x/status");
        assert_eq!(v["statusChannel"], "out-of-band");
        assert_eq!(v["notGranted"][0], "$TMPDIR / is not granted: too broad");
        assert_eq!(v["enforcement"], "full");
        assert_eq!(v["mode"], "read-only");
        assert_eq!(v["denialSignatures"][0], "permission denied");
        assert_eq!(v["denialSignatures"].as_array().unwrap().len(), 1);
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
    fn the_channel_is_in_band_where_truncation_is_not_confined() {
        let abi = |n| KernelFacts {
            landlock_abi: n,
            seccomp: true,
            namespaces: false,
            supervisor: false,
            supervisor_writes: false,
        };
        for n in [0, 1, 2] {
            assert_eq!(status_channel(&abi(n)), StatusChannel::InBand);
        }
        for n in [3, 5, 7] {
            assert_eq!(status_channel(&abi(n)), StatusChannel::OutOfBand);
        }
    }

    #[test]
    fn danger_full_access_has_no_dialect() {
        assert!(denial_signatures(Mode::DangerFullAccess, true).is_empty());
        assert!(runner_failure_rules(Mode::DangerFullAccess).is_empty());
    }
}
