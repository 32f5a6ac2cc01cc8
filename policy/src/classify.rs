//! Classifying a settled process: did the runner fail, did the sandbox deny an access,
//! or did the command just fail?
//!
//! [`runner_failure_detail`] and [`is_denied`] give exactly the answers of an executor
//! that judges with the ConfinedArgv's `runnerFailureRules` and `denialSignatures` on the
//! same inputs. [`classify`] builds the verdict of `stockade classify` on top of them:
//! with an out-of-band status record it lets the record, not stderr, decide runner
//! failure (and names a record someone changed `tampered`); without one it is that
//! exit-rules algorithm.
//! An exit code of `None` means the process was killed by a signal.

use crate::confined::{ConfinedArgv, RunnerFailureRule};
use crate::denial_record::DenialRecord;
use crate::descriptors::OpenOutside;
use crate::exit;
use crate::guarantees::Enforcement;
use crate::mode::Mode;
use crate::network_denials::DenialLog;
use crate::receipt::{BindingUnverifiable, Cleanup, Receipt, UnknownCleanup};
use crate::stage_report::{CorruptReport, RootChange, StageReport};
use crate::status::{CorruptStatus, StatusRecord, TargetStart};
use serde::{Deserialize, Serialize};

/// The one-word outcome of a settled command.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Exited 0.
    Ok,
    /// Exited nonzero, no denial seen, not a runner failure.
    Failed,
    /// Exited nonzero and stderr shows the sandbox denied an access.
    Denied,
    /// The sandbox runner failed: the command never started.
    RunnerFailed,
    /// Killed by a signal.
    Signaled,
    /// The status record was tampered with (unreadable, changed mode or owner, not one
    /// complete record, gone before its time), or the stage's report or the proxy's
    /// record of refused connections was (`detail` names which), or the namespace stage found (and put
    /// back) a change to a shared writable root's own mode or owner (`/tmp` as root, see
    /// `sharedRootsChanged`): only the confined command, or someone outside the sandbox
    /// (another command of the same user confined without the stage included), could have
    /// done that. Neither a runner failure nor a clean run; `detail` says what was found.
    Tampered,
}

/// What the verdict's runner-failure decision rests on.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Evidence {
    /// The runner's out-of-band status file (unforgeable by the command).
    StatusChannel,
    /// The harness's exit-code and stderr rules (forgeable by the command).
    ExitRules,
}

/// The verdict `stockade classify` prints.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Classification {
    /// [`crate::confined::CONTRACT_VERSION`].
    pub contract: u32,
    pub outcome: Outcome,
    pub mode: Mode,
    pub denied: bool,
    pub runner_failed: bool,
    /// The runner's failure message, the first stderr line showing a denial, or the
    /// signal; `None` for `ok` and ordinary failures.
    pub detail: Option<String>,
    /// The enforcement in force while the command ran; `None` when nothing was confined
    /// (`danger-full-access`, or the runner failed).
    pub enforcement: Option<Enforcement>,
    /// Inherited descriptors through which the command could change metadata outside the
    /// writable roots, as the runner's status record names them (`metadata` was then
    /// not held, and `enforcement` is `partial`): each `{"fd", "kind"}`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metadata_open: Vec<OpenOutside>,
    /// Variables the environment rule withheld from the environment the runner
    /// inherited (`--inherit-env`), by name, as its status record names them: what the
    /// executor passed and the command never got (`--keep-env NAME` passes one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_removed: Vec<String>,
    /// How many more were withheld than the record had room to name.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub env_removed_more: usize,
    pub evidence: Evidence,
    /// Shared writable roots whose own mode or owner changed while the command ran, as
    /// the namespace stage reported them (each put back, or said not to be).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_roots_changed: Vec<RootChange>,
    /// Default protected names that did not exist when the command started and do now
    /// (created by it, so not protected), as the namespace stage reported them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protected_appeared: Vec<String>,
    /// Connections the filtering proxy refused (the network by name), as it recorded
    /// them. Does not change the outcome: a refused connection is reported, and the
    /// command's exit says what it made of it.
    #[serde(default, skip_serializing_if = "DenialLog::is_empty")]
    pub network: DenialLog,
    /// Every refusal stockade caused that could be named (see
    /// [`crate::denial_record`]), whatever the exit code; `denied` is true when the
    /// command failed and this is not empty (see [`with_denials`]).
    #[serde(default)]
    pub denials: Vec<DenialRecord>,
    /// The receipt fields an executor's process allows (see [`crate::receipt`]): what
    /// `confine` bound (as the ConfinedArgv given states it), whether the runner checked
    /// it, and the exit facts. The stream digests and `timedOut` are `null` and `cleanup`
    /// is `unknown` (`not-supervised`): only `stockade run`, which reads the streams and
    /// owns the process range, can give them.
    pub receipt: Receipt,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What the status channel says about one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StatusEvidence {
    /// No trustworthy channel: the ConfinedArgv says `in-band`, has no status file, or
    /// the status file is gone (already classified or removed as stale).
    Unavailable,
    /// The out-of-band status file's content: `Ok(None)` when empty.
    OutOfBand(Result<Option<StatusRecord>, CorruptStatus>),
    /// The out-of-band status file is not as the runner leaves it; why.
    Tampered(String),
}

/// The settled facts of a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExitFacts<'a> {
    /// The exit code; `None` when killed by a signal.
    pub exit_code: Option<i32>,
    /// The terminating signal's name, when killed by one.
    pub signal: Option<&'a str>,
    /// The collected stderr (or its tail).
    pub stderr: &'a str,
}

/// Classifies a settled process spawned from `confined`, with its receipt.
pub fn classify(
    confined: &ConfinedArgv,
    settled: &ExitFacts<'_>,
    status: &StatusEvidence,
) -> Classification {
    let mut v = verdict(confined, settled, status);
    v.receipt.binding_verified = binding_verified(confined, status, v.runner_failed);
    v.receipt.binding_unverifiable = binding_unverifiable(confined, status);
    v
}

/// Whether the binding was checked and held, from the status record: the runner writes
/// `confined` only after the check passed, `failed` when anything (the check among them)
/// stopped it. Without a record: a runner failure means nothing started (`false`); else
/// there is no evidence (`null`). A target started by name (a script, which its
/// interpreter opens again by path after the check) is `null` too: the check held, but
/// what ran is not proven to be what was checked ([`binding_unverifiable`] says why).
/// `danger-full-access` has no runner: `null`.
pub fn binding_verified(
    confined: &ConfinedArgv,
    status: &StatusEvidence,
    runner_failed: bool,
) -> Option<bool> {
    if !confined.mode.is_confined() {
        return None;
    }
    match status {
        StatusEvidence::OutOfBand(Ok(Some(StatusRecord::Confined { start, .. }))) => match start {
            TargetStart::Descriptor => Some(true),
            TargetStart::ByName => None,
        },
        StatusEvidence::OutOfBand(Ok(Some(StatusRecord::Failed { .. }))) => Some(false),
        _ if runner_failed => Some(false),
        _ => None,
    }
}

/// Why the binding of a run the runner checked cannot be said to have held: its record
/// says the target was started by name. `None` for every other run.
pub fn binding_unverifiable(
    confined: &ConfinedArgv,
    status: &StatusEvidence,
) -> Option<BindingUnverifiable> {
    match status {
        StatusEvidence::OutOfBand(Ok(Some(StatusRecord::Confined {
            start: TargetStart::ByName,
            ..
        }))) if confined.mode.is_confined() => Some(BindingUnverifiable::by_name()),
        _ => None,
    }
}

/// The receipt fields known from the ConfinedArgv and the exit facts alone.
fn receipt_of(confined: &ConfinedArgv, settled: &ExitFacts<'_>) -> Receipt {
    let binding = confined.binding.as_ref();
    Receipt {
        contract: crate::confined::CONTRACT_VERSION,
        mode: confined.mode,
        request_digest: binding.map(|b| b.request_digest.clone()),
        policy_digest: binding.and_then(|b| b.policy_digest.clone()),
        executable: binding.map(|b| b.executable.clone()),
        cwd: binding.map(|b| b.cwd.clone()),
        binding_verified: None,
        binding_unverifiable: None,
        stdout: None,
        stderr: None,
        exit_code: settled.exit_code,
        signal: settled.signal.map(str::to_string),
        timed_out: None,
        cleanup: Cleanup::Unknown {
            reason: UnknownCleanup::NotSupervised,
            detail: "the executor supervised the process; stockade did not see its range".into(),
        },
    }
}

fn verdict(
    confined: &ConfinedArgv,
    settled: &ExitFacts<'_>,
    status: &StatusEvidence,
) -> Classification {
    let code = settled.exit_code;
    let mut v = Classification {
        contract: crate::confined::CONTRACT_VERSION,
        outcome: Outcome::Ok,
        mode: confined.mode,
        denied: false,
        runner_failed: false,
        detail: None,
        enforcement: confined.enforcement,
        metadata_open: Vec::new(),
        env_removed: Vec::new(),
        env_removed_more: 0,
        evidence: Evidence::ExitRules,
        shared_roots_changed: Vec::new(),
        protected_appeared: Vec::new(),
        network: DenialLog::default(),
        denials: Vec::new(),
        receipt: receipt_of(confined, settled),
    };
    let tampered = match status {
        StatusEvidence::Tampered(why) => Some(why.clone()),
        // The runner writes one whole record with one write(2): anything else in the
        // file was put there by someone else.
        StatusEvidence::OutOfBand(Err(corrupt)) => Some(corrupt.to_string()),
        _ => None,
    };
    if let Some(why) = tampered {
        v.evidence = Evidence::StatusChannel;
        v.outcome = Outcome::Tampered;
        v.detail = Some(format!("the status record was tampered with: {why}"));
        // The record is what says what the kernel gave; without a trustworthy one,
        // what `confine` expected is no evidence of what was enforced.
        v.enforcement = None;
        return v;
    }
    let runner_failure = match status {
        StatusEvidence::Tampered(_) | StatusEvidence::OutOfBand(Err(_)) => None,
        StatusEvidence::Unavailable => {
            runner_failure_detail(code, settled.stderr, &confined.runner_failure_rules)
        }
        StatusEvidence::OutOfBand(Ok(record)) => {
            v.evidence = Evidence::StatusChannel;
            match record {
                Some(StatusRecord::Confined {
                    enforcement,
                    metadata_open,
                    env_removed,
                    ..
                }) => {
                    v.enforcement = Some(*enforcement);
                    v.metadata_open = metadata_open.clone();
                    v.env_removed = env_removed.names.clone();
                    v.env_removed_more = env_removed.more;
                    None
                }
                Some(StatusRecord::Failed { kind, message }) => {
                    Some(format!("{}{message} [{kind}]", exit::RUNNER_PREFIX))
                }
                // Nothing recorded: the runner never confined, so the target never ran.
                // A nonzero exit is the runner's (its stderr line is the best detail); a
                // signal is reported as a signal, as the harness does.
                None => match code {
                    None | Some(0) => None,
                    Some(_) => Some(
                        first_runner_line(settled.stderr).unwrap_or_else(|| {
                            format!(
                                "{}the runner exited before applying confinement and recorded no status",
                                exit::RUNNER_PREFIX
                            )
                        }),
                    ),
                },
            }
        }
    };
    if let Some(detail) = runner_failure {
        v.outcome = Outcome::RunnerFailed;
        v.runner_failed = true;
        v.detail = Some(detail);
        v.enforcement = None;
        return v;
    }
    if code.is_none() {
        v.outcome = Outcome::Signaled;
        v.detail = Some(match settled.signal {
            Some(sig) => format!("killed by signal {sig}"),
            None => "killed by a signal".to_string(),
        });
        return v;
    }
    if is_denied(code, settled.stderr, &confined.denial_signatures) {
        v.outcome = Outcome::Denied;
        v.denied = true;
        v.detail = denial_line(settled.stderr, &confined.denial_signatures);
        return v;
    }
    v.outcome = if code == Some(0) {
        Outcome::Ok
    } else {
        Outcome::Failed
    };
    v
}

/// What the namespace stage's report file says about one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StageEvidence {
    /// No report file: the stage did not run or had nothing to watch.
    None,
    /// The report file's content.
    Report(Result<StageReport, CorruptReport>),
    /// The report file is not as `confine` made it; why.
    Tampered(String),
}

/// Adds what the namespace stage reported to a verdict from [`classify`]: a changed
/// shared root (or a report someone changed) makes the outcome `tampered`, which
/// outranks every other outcome as a changed status record does (`denied` and
/// `runnerFailed` are then false), and the findings are listed.
pub fn with_stage(mut v: Classification, stage: &StageEvidence) -> Classification {
    let report = match stage {
        StageEvidence::None => return v,
        StageEvidence::Report(Ok(report)) => report.clone(),
        StageEvidence::Report(Err(corrupt)) => {
            return tampered(v, corrupt.to_string());
        }
        StageEvidence::Tampered(why) => {
            return tampered(v, format!("the stage's report was tampered with: {why}"));
        }
    };
    v.protected_appeared = report.appeared;
    if let Some(first) = report.changed.first() {
        let more = match report.changed.len() {
            1 => String::new(),
            n => format!(" (and {} more changes)", n - 1),
        };
        v = tampered(v, format!("{first}{more}"));
        v.shared_roots_changed = report.changed;
    }
    v
}

/// Adds the named refusals to a verdict, and lets them decide the denial: a command
/// that failed is `denied` when stockade caused a refusal it met, whatever its stderr
/// says otherwise (an EACCES Unix permissions give anyway is no denial). Runner failure,
/// a signal and tampering outrank denial and are kept as they are.
pub fn with_denials(mut v: Classification, records: Vec<DenialRecord>) -> Classification {
    v.denials = records;
    if matches!(v.outcome, Outcome::Denied | Outcome::Failed) {
        v.denied = !v.denials.is_empty();
        v.outcome = if v.denied {
            Outcome::Denied
        } else {
            Outcome::Failed
        };
        v.detail = v.denials.first().map(DenialRecord::marker);
    }
    v
}

/// Makes a verdict `tampered` with `detail`, as a changed status record or stage report
/// does: it outranks every other outcome (`denied` and `runnerFailed` are then false). A
/// verdict already `tampered` keeps its first finding. For the launcher's own control
/// files beside those two (the proxy's record of refused connections).
pub fn with_tampering(v: Classification, detail: String) -> Classification {
    if v.outcome == Outcome::Tampered {
        return v;
    }
    tampered(v, detail)
}

fn tampered(mut v: Classification, detail: String) -> Classification {
    v.outcome = Outcome::Tampered;
    v.detail = Some(detail);
    v.denied = false;
    v.runner_failed = false;
    v
}

fn first_runner_line(stderr: &str) -> Option<String> {
    split_lines(stderr)
        .find(|l| l.starts_with(exit::RUNNER_PREFIX))
        .map(str::to_string)
}

/// The first stderr line carrying a denial signature (the signature may, rarely, span
/// lines; then there is no single line to show).
fn denial_line(stderr: &str, signatures: &[String]) -> Option<String> {
    split_lines(stderr)
        .find(|l| {
            let lower = l.to_lowercase();
            signatures.iter().any(|s| lower.contains(s.as_str()))
        })
        .map(str::to_string)
}

/// The runner failure detail, if the rules say the runner itself failed: the first
/// stderr line (after removing informational lines) that contains a non-blank fatal
/// signature of a rule whose exit codes admit `exit_code`.
pub fn runner_failure_detail(
    exit_code: Option<i32>,
    stderr: &str,
    rules: &[RunnerFailureRule],
) -> Option<String> {
    let code = match exit_code {
        None | Some(0) => return None,
        Some(c) => c,
    };
    for rule in rules {
        if let Some(allowed) = &rule.allowed_exit_codes
            && !allowed.contains(&code)
        {
            continue;
        }
        let informational: Vec<String> = rule
            .informational_lines
            .iter()
            .flatten()
            .map(|l| l.to_lowercase())
            .collect();
        let signatures: Vec<String> = rule
            .fatal_signatures
            .iter()
            .filter(|s| !s.trim().is_empty())
            .map(|s| s.to_lowercase())
            .collect();
        for line in split_lines(stderr) {
            let lower = line.to_lowercase();
            if informational.contains(&lower) {
                continue;
            }
            if signatures.iter().any(|s| lower.contains(s.as_str())) {
                return Some(line.to_string());
            }
        }
    }
    None
}

/// The denial rule: a process that failed (exited non-zero) and whose stderr carries a
/// denial signature (`signature_seen`, asked only for a failed process). A process that
/// exited 0 or was killed by a signal was never denied. `stockade classify` scans the
/// stderr tail it is given ([`is_denied`]); `stockade run` the whole stream as it goes.
pub fn denied(exit_code: Option<i32>, signature_seen: impl FnOnce() -> bool) -> bool {
    matches!(exit_code, Some(code) if code != 0) && signature_seen()
}

/// Whether stderr carries one of the denial signatures of a failed process ([`denied`]).
pub fn is_denied(exit_code: Option<i32>, stderr: &str, signatures: &[String]) -> bool {
    denied(exit_code, || {
        crate::denial::DenialScanner::found_in(signatures, stderr)
    })
}

/// Splits on `\n` and `\r\n`, as the harness's `/\r?\n/` does. Lazily: the text is
/// the command's stderr, and a list of its lines would cost 16 bytes per line (1 GiB
/// for the 64 MiB `classify` accepts, were it all line breaks).
fn split_lines(s: &str) -> impl Iterator<Item = &str> {
    s.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l))
}

#[cfg(test)]
mod tests {

    #[test]
    fn named_refusals_decide_the_denial_of_a_failed_command_only() {
        use crate::denial_record::{DenialRecord, Kind, Source};
        let record = DenialRecord {
            kind: Kind::FileWrite,
            path: Some("/etc/x".into()),
            host: None,
            port: None,
            rule: "r".into(),
            grant: Some("--writable /etc".into()),
            alternative: None,
            line: None,
            evidence: Source::PolicyCheck,
        };
        let confined = crate::confined::ConfinedArgv {
            contract: crate::confined::CONTRACT_VERSION,
            argv: vec!["x".into()],
            enforcement: None,
            denial_signatures: crate::confined::denial_signatures(Mode::ReadOnly, false),
            runner_failure_rules: crate::confined::runner_failure_rules(Mode::ReadOnly),
            mode: Mode::ReadOnly,
            guarantees: Default::default(),
            status_path: None,
            status_channel: None,
            not_granted: Vec::new(),
            binding: None,
            journal: None,
        };
        let judged = |code: i32, records: Vec<DenialRecord>| {
            let facts = ExitFacts {
                exit_code: Some(code),
                signal: None,
                stderr: "ls: cannot open directory '/root': Permission denied",
            };
            with_denials(
                classify(&confined, &facts, &StatusEvidence::Unavailable),
                records,
            )
        };
        // The signature matched, but nothing stockade caused: an ordinary failure.
        let v = judged(2, vec![]);
        assert_eq!((v.outcome, v.denied), (Outcome::Failed, false));
        let v = judged(2, vec![record.clone()]);
        assert_eq!((v.outcome, v.denied), (Outcome::Denied, true));
        assert_eq!(v.detail, Some(record.marker()));
        // Exit 0: reported, never denied.
        let v = judged(0, vec![record.clone()]);
        assert_eq!(
            (v.outcome, v.denied, v.denials.len()),
            (Outcome::Ok, false, 1)
        );
    }
    use super::*;
    use crate::confined::{denial_signatures, runner_failure_rules};
    use crate::mode::Mode;

    fn rule(codes: Option<Vec<i32>>, fatal: &[&str], info: Option<&[&str]>) -> RunnerFailureRule {
        RunnerFailureRule {
            allowed_exit_codes: codes,
            fatal_signatures: fatal.iter().map(|s| s.to_string()).collect(),
            informational_lines: info.map(|i| i.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn exit_zero_or_signal_is_never_a_runner_failure() {
        let rules = runner_failure_rules(Mode::ReadOnly);
        for code in [None, Some(0)] {
            assert_eq!(
                runner_failure_detail(code, "stockade-runner: boom", &rules),
                None
            );
        }
    }

    #[test]
    fn the_stockade_rule_matches_only_exit_125() {
        let rules = runner_failure_rules(Mode::WorkspaceWrite);
        let err = "some output\nstockade-runner: workspace root /x cannot be opened\n";
        assert_eq!(
            runner_failure_detail(Some(125), err, &rules).as_deref(),
            Some("stockade-runner: workspace root /x cannot be opened")
        );
        assert_eq!(runner_failure_detail(Some(127), err, &rules), None);
        assert_eq!(runner_failure_detail(Some(1), err, &rules), None);
    }

    #[test]
    fn signatures_match_case_insensitively_within_one_line() {
        let rules = vec![rule(None, &["Landlock-Run: "], None)];
        assert_eq!(
            runner_failure_detail(Some(3), "x\r\nLANDLOCK-RUN: bad\r\n", &rules).as_deref(),
            Some("LANDLOCK-RUN: bad")
        );
        // A signature split over two lines does not match.
        let rules = vec![rule(None, &["a b"], None)];
        assert_eq!(runner_failure_detail(Some(1), "a\nb", &rules), None);
    }

    #[test]
    fn informational_lines_are_removed_first_by_exact_full_line_equality() {
        let rules = vec![rule(
            Some(vec![125]),
            &["landlock-run: "],
            Some(&["landlock-run: partial enforcement"]),
        )];
        let stderr = "LANDLOCK-RUN: PARTIAL ENFORCEMENT\nhello\n";
        assert_eq!(runner_failure_detail(Some(125), stderr, &rules), None);
        // Not a full-line match: still fatal.
        let stderr = "landlock-run: partial enforcement!\n";
        assert!(runner_failure_detail(Some(125), stderr, &rules).is_some());
    }

    #[test]
    fn blank_fatal_signatures_never_match() {
        let rules = vec![rule(None, &["", "  "], None)];
        assert_eq!(runner_failure_detail(Some(1), "anything", &rules), None);
    }

    #[test]
    fn first_matching_rule_wins_and_rules_without_codes_match_any_nonzero() {
        let rules = vec![
            rule(Some(vec![2]), &["second"], None),
            rule(None, &["first"], None),
        ];
        assert_eq!(
            runner_failure_detail(Some(9), "second\nfirst", &rules).as_deref(),
            Some("first")
        );
        assert_eq!(
            runner_failure_detail(Some(2), "first\nsecond", &rules).as_deref(),
            Some("second")
        );
    }

    #[test]
    fn denial_needs_a_failed_exit_and_a_signature_anywhere() {
        let sigs = denial_signatures(Mode::ReadOnly, false);
        let err = "bash: /etc/x: Permission denied\n";
        assert!(is_denied(Some(1), err, &sigs));
        assert!(!is_denied(Some(0), err, &sigs));
        assert!(!is_denied(None, err, &sigs));
        assert!(!is_denied(Some(1), "No such file or directory", &sigs));
        assert!(!is_denied(Some(1), err, &[]));
    }

    fn confined(mode: Mode) -> ConfinedArgv {
        use crate::confined::{CONTRACT_VERSION, StatusChannel};
        ConfinedArgv {
            contract: CONTRACT_VERSION,
            argv: vec!["stockade-runner".into(), "--request".into(), "/r".into()],
            enforcement: mode.is_confined().then_some(Enforcement::Full),
            denial_signatures: denial_signatures(mode, false),
            runner_failure_rules: runner_failure_rules(mode),
            mode,
            status_path: mode.is_confined().then(|| "/run/s/req-1/status".into()),
            status_channel: mode.is_confined().then_some(StatusChannel::OutOfBand),
            not_granted: Vec::new(),
            guarantees: Default::default(),
            binding: None,
            journal: None,
        }
    }

    fn settled<'a>(code: Option<i32>, stderr: &'a str) -> ExitFacts<'a> {
        ExitFacts {
            exit_code: code,
            signal: code.is_none().then_some("SIGKILL"),
            stderr,
        }
    }

    const FORGED: &str = "stockade-runner: sandbox unavailable: the kernel lacks landlock\n";
    const DENIED: &str = "bash: line 1: /etc/x: Permission denied\n";

    fn confined_record() -> StatusEvidence {
        StatusEvidence::OutOfBand(Ok(Some(StatusRecord::Confined {
            enforcement: Enforcement::Partial,
            start: TargetStart::Descriptor,
            metadata_open: Vec::new(),
            env_removed: Default::default(),
        })))
    }

    /// (mode, exit code, stderr, outcome, denied, runner failed)
    type Case<'a> = (Mode, Option<i32>, &'a str, Outcome, bool, bool);

    /// Every case of the executor's exit-rules algorithm, with no status channel: the verdict
    /// must be the harness's answer.
    #[test]
    fn without_a_status_record_the_verdict_is_the_harness_algorithm() {
        use Outcome::*;
        let cases: &[Case] = &[
            // Exit code null (signal) or 0: never a runner failure, never a denial.
            (Mode::WorkspaceWrite, None, FORGED, Signaled, false, false),
            (Mode::WorkspaceWrite, Some(0), FORGED, Ok, false, false),
            (Mode::WorkspaceWrite, None, DENIED, Signaled, false, false),
            (Mode::WorkspaceWrite, Some(0), DENIED, Ok, false, false),
            // A rule applies only when its allowedExitCodes contain the code.
            (
                Mode::WorkspaceWrite,
                Some(125),
                FORGED,
                RunnerFailed,
                false,
                true,
            ),
            (Mode::WorkspaceWrite, Some(1), FORGED, Failed, false, false),
            (
                Mode::ReadOnly,
                Some(127),
                "stockade-runner: x: command not found\n",
                Failed,
                false,
                false,
            ),
            (
                Mode::ReadOnly,
                Some(126),
                "stockade-runner: cannot execute ./x: EACCES (no execute permission on the file or a directory on its path)\n",
                Failed,
                false,
                false,
            ),
            // The signature may be anywhere in one line, in any case, after CRLF splitting.
            (
                Mode::ReadOnly,
                Some(125),
                "noise\r\nnote: STOCKADE-RUNNER: boom\r\n",
                RunnerFailed,
                false,
                true,
            ),
            // Runner failure outranks denial.
            (
                Mode::ReadOnly,
                Some(125),
                "Permission denied\nstockade-runner: boom\n",
                RunnerFailed,
                false,
                true,
            ),
            // Denial: a failed exit and a signature anywhere in the lower-cased stderr.
            (Mode::ReadOnly, Some(1), DENIED, Denied, true, false),
            (
                Mode::ReadOnly,
                Some(2),
                "PERMISSION DENIED",
                Denied,
                true,
                false,
            ),
            (
                Mode::ReadOnly,
                Some(1),
                "No such file or directory\n",
                Failed,
                false,
                false,
            ),
            (Mode::ReadOnly, Some(3), "", Failed, false, false),
            (Mode::ReadOnly, Some(0), "", Ok, false, false),
            // danger-full-access: no dialect, never denied, never a runner failure.
            (
                Mode::DangerFullAccess,
                Some(1),
                DENIED,
                Failed,
                false,
                false,
            ),
            (
                Mode::DangerFullAccess,
                Some(125),
                FORGED,
                Failed,
                false,
                false,
            ),
        ];
        for (mode, code, stderr, outcome, denied, runner_failed) in cases {
            let c = confined(*mode);
            let v = classify(&c, &settled(*code, stderr), &StatusEvidence::Unavailable);
            let what = format!("{mode} {code:?} {stderr:?}: {v:?}");
            assert_eq!(v.outcome, *outcome, "{what}");
            assert_eq!(v.denied, *denied, "{what}");
            assert_eq!(v.runner_failed, *runner_failed, "{what}");
            assert_eq!(v.evidence, Evidence::ExitRules, "{what}");
            // The verdict agrees with the harness's two functions on the same inputs.
            assert_eq!(
                v.runner_failed,
                runner_failure_detail(*code, stderr, &c.runner_failure_rules).is_some(),
                "{what}"
            );
            assert_eq!(
                v.denied,
                !v.runner_failed && is_denied(*code, stderr, &c.denial_signatures),
                "{what}"
            );
            if *mode == Mode::DangerFullAccess || *runner_failed {
                assert_eq!(v.enforcement, None, "{what}");
            } else {
                assert_eq!(v.enforcement, Some(Enforcement::Full), "{what}");
            }
        }
    }

    #[test]
    fn informational_lines_never_make_a_runner_failure() {
        // The postmortem case: a "partial enforcement" line is informational.
        let mut c = confined(Mode::WorkspaceWrite);
        c.runner_failure_rules = vec![rule(
            Some(vec![125]),
            &["stockade-runner: "],
            Some(&["stockade-runner: partial enforcement"]),
        )];
        let v = classify(
            &c,
            &settled(Some(125), "STOCKADE-RUNNER: PARTIAL ENFORCEMENT\n"),
            &StatusEvidence::Unavailable,
        );
        assert_eq!(v.outcome, Outcome::Failed);
    }

    #[test]
    fn descriptors_the_record_names_reach_the_verdict() {
        use crate::descriptors::DescriptorKind;
        let c = confined(Mode::WorkspaceWrite);
        let open = vec![OpenOutside {
            fd: 1,
            kind: DescriptorKind::File,
        }];
        let record = StatusEvidence::OutOfBand(Ok(Some(StatusRecord::Confined {
            enforcement: Enforcement::Partial,
            start: TargetStart::Descriptor,
            metadata_open: open.clone(),
            env_removed: Default::default(),
        })));
        let v = classify(&c, &settled(Some(0), ""), &record);
        assert_eq!(v.outcome, Outcome::Ok);
        assert_eq!(v.enforcement, Some(Enforcement::Partial));
        assert_eq!(v.metadata_open, open);
        let j = serde_json::to_value(&v).unwrap();
        assert_eq!(j["metadataOpen"][0]["fd"], 1, "{j}");
        assert_eq!(j["metadataOpen"][0]["kind"], "file", "{j}");
        // None named: the field is absent.
        let v = classify(&c, &settled(Some(0), ""), &confined_record());
        assert!(
            serde_json::to_value(&v)
                .unwrap()
                .get("metadataOpen")
                .is_none()
        );
    }

    #[test]
    fn a_confined_record_makes_a_forged_runner_line_an_ordinary_failure() {
        let c = confined(Mode::WorkspaceWrite);
        let v = classify(&c, &settled(Some(125), FORGED), &confined_record());
        assert_eq!(v.outcome, Outcome::Failed);
        assert!(!v.runner_failed);
        assert_eq!(v.evidence, Evidence::StatusChannel);
        // The achieved enforcement comes from the record.
        assert_eq!(v.enforcement, Some(Enforcement::Partial));
        // Denial is still judged on stderr.
        let v = classify(&c, &settled(Some(1), DENIED), &confined_record());
        assert_eq!(v.outcome, Outcome::Denied);
        assert_eq!(v.detail.as_deref(), Some(DENIED.trim_end()));
        // 126/127 after confinement are the command's failures.
        let v = classify(
            &c,
            &settled(Some(127), "stockade-runner: nope: command not found\n"),
            &confined_record(),
        );
        assert_eq!(v.outcome, Outcome::Failed);
        assert_eq!(v.detail, None);
    }

    #[test]
    fn a_failed_record_is_a_runner_failure_whatever_the_exit_says() {
        let c = confined(Mode::ReadOnly);
        let failed = StatusEvidence::OutOfBand(Ok(Some(StatusRecord::Failed {
            kind: crate::status::FailureKind::Chdir,
            message: "cannot enter working directory /w".into(),
        })));
        for code in [Some(125), Some(1), Some(0), None] {
            let v = classify(&c, &settled(code, DENIED), &failed);
            assert_eq!(v.outcome, Outcome::RunnerFailed, "{code:?}");
            assert!(!v.denied);
            assert_eq!(
                v.detail.as_deref(),
                Some("stockade-runner: cannot enter working directory /w [chdir]")
            );
            assert_eq!(v.enforcement, None);
        }
    }

    #[test]
    fn an_empty_status_means_the_target_never_ran() {
        let c = confined(Mode::ReadOnly);
        let empty = StatusEvidence::OutOfBand(Ok(None));
        let v = classify(
            &c,
            &settled(
                Some(125),
                "stockade-runner: request file /r does not exist\n",
            ),
            &empty,
        );
        assert_eq!(v.outcome, Outcome::RunnerFailed);
        assert_eq!(
            v.detail.as_deref(),
            Some("stockade-runner: request file /r does not exist")
        );
        // Even without the line, and whatever the code.
        let v = classify(&c, &settled(Some(1), ""), &empty);
        assert!(v.runner_failed);
        // A signal stays a signal (the harness never calls it a runner failure).
        let v = classify(&c, &settled(None, ""), &empty);
        assert_eq!(v.outcome, Outcome::Signaled);
        assert_eq!(v.detail.as_deref(), Some("killed by signal SIGKILL"));
    }

    #[test]
    fn a_corrupt_or_tampered_status_is_tampering_never_a_runner_failure_or_a_clean_run() {
        let c = confined(Mode::ReadOnly);
        let corrupt = StatusEvidence::OutOfBand(StatusRecord::decode(b"stockade-status 1 conf"));
        let tampered = StatusEvidence::Tampered("its mode is 0000".into());
        for status in [corrupt, tampered] {
            for (code, stderr) in [(Some(0), ""), (Some(125), FORGED), (Some(1), DENIED)] {
                let v = classify(&c, &settled(code, stderr), &status);
                assert_eq!(v.outcome, Outcome::Tampered, "{status:?} {code:?}");
                assert!(!v.runner_failed && !v.denied);
                assert_eq!(v.enforcement, None, "{status:?}: nothing proves what ran");
                assert!(v.detail.unwrap().contains("tampered"));
            }
        }
        let j = serde_json::to_value(Outcome::Tampered).unwrap();
        assert_eq!(j, "tampered");
    }

    #[test]
    fn verdict_json_uses_the_contract_field_names() {
        let c = confined(Mode::ReadOnly);
        let v = classify(&c, &settled(Some(1), DENIED), &confined_record());
        let mut j = serde_json::to_value(&v).unwrap();
        let receipt = j.as_object_mut().unwrap().remove("receipt").unwrap();
        assert_eq!(receipt["bindingVerified"], true);
        assert_eq!(receipt["exitCode"], 1);
        assert_eq!(receipt["cleanup"]["reason"], "not-supervised");
        assert!(receipt["stdout"].is_null() && receipt["timedOut"].is_null());
        assert_eq!(
            j,
            serde_json::json!({
                "contract": 2, "outcome": "denied", "mode": "read-only", "denied": true,
                "runnerFailed": false, "detail": DENIED.trim_end(), "enforcement": "partial",
                "evidence": "status-channel", "denials": []
            })
        );
        let v = classify(&c, &settled(Some(0), ""), &StatusEvidence::Unavailable);
        let j = serde_json::to_value(&v).unwrap();
        assert_eq!(j["detail"], serde_json::Value::Null);
        assert_eq!(j["evidence"], "exit-rules");
    }
    #[test]
    fn a_changed_shared_root_makes_a_clean_run_tampered_and_lists_the_findings() {
        use crate::stage_report::{DirMeta, RootChange, StageReport};
        let c = confined(Mode::WorkspaceWrite);
        let change = RootChange {
            path: "/tmp".into(),
            was: DirMeta::new(0o1777, 0, 0),
            found: DirMeta::new(0o777, 0, 0),
            put_back: true,
        };
        let report = StageReport {
            changed: vec![change.clone()],
            appeared: vec!["/w/.envrc".into()],
        };
        let clean = classify(&c, &settled(Some(0), ""), &confined_record());
        assert_eq!(clean.outcome, Outcome::Ok);
        let v = with_stage(clean.clone(), &StageEvidence::Report(Ok(report.clone())));
        assert_eq!(v.outcome, Outcome::Tampered);
        assert_eq!(
            v.detail.as_deref(),
            Some(
                "shared directory /tmp changed from mode 1777 owner 0:0 to mode 0777 owner 0:0; put back"
            )
        );
        let j = serde_json::to_value(&v).unwrap();
        assert_eq!(
            j["sharedRootsChanged"],
            serde_json::json!([{"path": "/tmp", "was": {"mode": "1777", "uid": 0, "gid": 0},
                "found": {"mode": "0777", "uid": 0, "gid": 0}, "putBack": true}])
        );
        assert_eq!(j["protectedAppeared"], serde_json::json!(["/w/.envrc"]));
        let back: Classification = serde_json::from_value(j).unwrap();
        assert_eq!(back, v);

        // Only names that appeared: reported, the outcome stays.
        let only_appeared = StageReport {
            changed: Vec::new(),
            appeared: vec!["/w/.envrc".into()],
        };
        let v = with_stage(clean.clone(), &StageEvidence::Report(Ok(only_appeared)));
        assert_eq!(v.outcome, Outcome::Ok);
        assert_eq!(v.protected_appeared, ["/w/.envrc"]);
        // No report: nothing changes, and the JSON has no new fields.
        let v = with_stage(clean.clone(), &StageEvidence::None);
        assert_eq!(v, clean);
        let j = serde_json::to_value(&v).unwrap();
        assert!(j.get("sharedRootsChanged").is_none() && j.get("protectedAppeared").is_none());
        // A report someone changed is tampering too.
        let v = with_stage(clean, &StageEvidence::Tampered("gone".into()));
        assert_eq!(v.outcome, Outcome::Tampered);
    }

    #[test]
    fn the_receipt_says_whether_the_runner_checked_the_binding() {
        use crate::binding::{Binding, CwdBinding, ExecBinding};
        use crate::status::FailureKind;
        let mut c = confined(Mode::WorkspaceWrite);
        c.binding = Some(crate::receipt::BindingReport::new(
            "d1".into(),
            Some("p1".into()),
            std::ffi::OsStr::new("tool"),
            &Binding {
                executable: ExecBinding::NotFound,
                cwd: CwdBinding::Inherited,
            },
        ));
        let failed = StatusEvidence::OutOfBand(Ok(Some(StatusRecord::Failed {
            kind: FailureKind::BindingChanged,
            message: "the executable changed".into(),
        })));
        let v = classify(&c, &settled(Some(125), ""), &failed);
        assert!(v.runner_failed);
        assert_eq!(v.receipt.binding_verified, Some(false));
        assert_eq!(v.receipt.request_digest.as_deref(), Some("d1"));
        assert_eq!(v.receipt.policy_digest.as_deref(), Some("p1"));
        let v = classify(&c, &settled(Some(127), ""), &confined_record());
        assert_eq!(v.receipt.binding_verified, Some(true));
        assert_eq!(v.receipt.binding_unverifiable, None);
        // A script its interpreter opened again by name: checked, but not proven.
        let by_name = StatusEvidence::OutOfBand(Ok(Some(StatusRecord::Confined {
            enforcement: Enforcement::Full,
            start: TargetStart::ByName,
            metadata_open: Vec::new(),
            env_removed: Default::default(),
        })));
        let v = classify(&c, &settled(Some(0), ""), &by_name);
        assert_eq!(v.receipt.binding_verified, None);
        let j = serde_json::to_value(&v.receipt).unwrap();
        assert_eq!(j["bindingUnverifiable"]["status"], "by-name", "{j}");
        assert_eq!(v.outcome, Outcome::Ok);
        let empty = StatusEvidence::OutOfBand(Ok(None));
        let v = classify(&c, &settled(Some(125), ""), &empty);
        assert_eq!(v.receipt.binding_verified, Some(false));
        // In-band: only a runner failure is evidence (nothing started).
        let v = classify(&c, &settled(Some(0), ""), &StatusEvidence::Unavailable);
        assert_eq!(v.receipt.binding_verified, None);
        let v = classify(
            &c,
            &settled(Some(125), FORGED),
            &StatusEvidence::Unavailable,
        );
        assert_eq!(v.receipt.binding_verified, Some(false));
        let d = confined(Mode::DangerFullAccess);
        let v = classify(&d, &settled(Some(0), ""), &StatusEvidence::Unavailable);
        assert_eq!(v.receipt.binding_verified, None);
        assert!(v.receipt.executable.is_none());
    }
}
