//! `stockade run`: confine, supervise, then report what happened: as markers after the
//! command's own output and an exit code in the wrapper conventions users know, or as
//! one JSON document with `--json`.

use crate::commands::audit_reader::{self, AuditReader};
use crate::commands::classify;
use crate::commands::cli::{ContainmentChoice, RunArgs};
use crate::commands::confine::{self, Confinement};
use crate::commands::env;
use crate::commands::probe;
use crate::commands::protected_changes;
use crate::error::LauncherError;
use crate::journal::Journal;
use crate::supervise::SideReader;
use crate::supervise::output;
use crate::supervise::output::Captured;
use crate::supervise::stdout;
use crate::supervise::{self, Containment, Output, Plan, Session, Settled, Start};
use serde::Serialize;
use std::cell::RefCell;
use std::ffi::OsString;
use stockade_policy::Mode;
use stockade_policy::audit_attribution::Attribution;
use stockade_policy::classify::Outcome;
use stockade_policy::confined::ConfinedArgv;
use stockade_policy::denial_record::{self, DenialRecord, Source};
use stockade_policy::descriptors::OpenOutside;
use stockade_policy::exit;
use stockade_policy::guarantees::Enforcement;
use stockade_policy::journal::Requester;
use stockade_policy::landlock_audit::Collected;
use stockade_policy::network_denials::DenialLog;
use stockade_policy::receipt::{
    BindingUnverifiable, Cleanup, Receipt, StreamDigest, UnknownCleanup,
};
use stockade_policy::stage_report::RootChange;

/// Runs the command and returns the exit code `stockade run` should exit with.
pub fn run(args: &RunArgs) -> Result<i32, LauncherError> {
    supervise::terminal::ignore_stop_signals();
    let built = env::target_env(&args.env);
    let request = args.policy.to_request();
    let session = Session::choose(Start::of(request.mode));
    // Joined before the command exists, so no record of its refusals is missed.
    let reader = open_reader(request.mode);
    let Confinement {
        confined,
        private_dir,
        unprotected,
        watched,
        shared,
        binding,
    } = confine::confine(
        &request,
        &args.command.command,
        built.vars.clone(),
        session.runner(),
        args.bind.bind_executable_hash,
        reader.as_ref().ok().map(|r| r.borrow().tag()),
    )?;
    let journal = match record_request(args, &request, private_dir.as_ref()) {
        Ok(journal) => journal,
        Err(e) => {
            if let Some(dir) = private_dir {
                dir.remove();
            }
            return Err(e);
        }
    };
    let s = &args.supervise;
    let plan = Plan {
        argv: &confined.argv,
        env: helper_env(request.mode, &built.vars),
        timeout: s.timeout,
        grace: s.grace,
        keep_background: s.keep_background,
        containment: containment(s.containment),
        output: if s.json {
            Output::Capture {
                max_output: s.max_output,
                max_spill: s.max_spill,
            }
        } else {
            Output::PassThrough
        },
        session,
        // Without a runner, the launcher checks the binding itself.
        binding: (Start::of(request.mode) == Start::Program).then_some(&binding),
        limits: limits_of(s),
        side: reader.as_ref().ok().map(|r| r as &RefCell<dyn SideReader>),
        runner: match Start::of(request.mode) {
            Start::Runner => supervise::runner_of(&confined.argv),
            Start::Program => None,
        },
    };
    record_unconfined_start(journal.as_ref(), request.mode)?;
    // Without the stage nothing holds the protected paths read-only: their state now,
    // to say afterwards what the command changed (said, not undone).
    let before = protected_changes::Snapshot::take(&watched);
    // The verdict reads the runner's status record, so it comes before the private
    // directory is removed.
    let outcome = supervise::run(&plan).map(|settled| {
        let audit = reader.as_ref().map(RefCell::borrow_mut);
        let mut verdict = judge(&settled, &confined, audit_outcome(audit, s.keep_background));
        let changed = before.changes(&protected_changes::Snapshot::take(&watched));
        if !changed.is_empty() {
            verdict.tampered = true;
            verdict.denied = false;
            verdict.protected_changed = changed;
        }
        // The last look at the shared roots, with or without the stage (which put back
        // what it saw while the command ran): what changed since is put back here.
        for root in &shared {
            if let Some(change) = crate::stage::check_shared(&root.path, &root.dir, root.was) {
                verdict.tampered = true;
                verdict.denied = false;
                verdict.shared_roots_changed.push(change);
            }
        }
        (settled, verdict)
    });
    // The result goes into the journal before the private directory (the evidence of
    // "started") is removed: a crash in between still answers "unknown", never wrong.
    if let (Some((journal, key)), Ok((settled, verdict))) = (&journal, &outcome) {
        let result = RunResult::new(settled, verdict, &confined, &built.removed, s.timeout);
        record_finished(journal, key, &result, exit_code(settled, verdict));
    }
    if let Some(dir) = private_dir {
        dir.remove();
    }
    supervise::release_stop_signals();
    let (settled, verdict) = outcome?;
    let code = exit_code(&settled, &verdict);
    // Protected names the command created: no mount could stop that, so say it. The
    // next run protects them (they exist then).
    let appeared: Vec<String> = unprotected
        .iter()
        .filter(|p| stockade_policy::stage::appeared(&p.symlink_metadata()))
        .map(|p| p.display().to_string())
        .collect();
    if s.json {
        write_json(
            &settled,
            &verdict,
            &confined,
            &built.removed,
            s.timeout,
            appeared,
        )?;
    } else {
        write_markers(&settled, &verdict, &confined, &appeared, s.timeout, code);
    }
    Ok(code)
}

/// No runner leaves a status record for an unconfined command: its start is recorded
/// here, or "not started" could not be told from "started" afterwards.
fn record_unconfined_start(
    journal: Option<&(Journal, String)>,
    mode: stockade_policy::Mode,
) -> Result<(), LauncherError> {
    match journal {
        Some((journal, key)) if Start::of(mode) == Start::Program => {
            journal.record_started(key).map_err(|e| {
                LauncherError::Journal(format!("cannot record the start of {key:?}: {e}"))
            })
        }
        _ => Ok(()),
    }
}

/// `stockade run --json`'s document, on stdout.
fn write_json(
    settled: &Settled,
    verdict: &SandboxVerdict,
    confined: &ConfinedArgv,
    removed: &[OsString],
    timeout: Option<std::time::Duration>,
    appeared: Vec<String>,
) -> Result<(), LauncherError> {
    let mut result = RunResult::new(settled, verdict, confined, removed, timeout);
    result.protected_appeared = appeared;
    result.shared_roots_changed = verdict.shared_roots_changed.clone();
    result.network = verdict.network.clone();
    result.denials = verdict.denials.clone();
    result.attribution = Some(verdict.attribution.clone());
    let json = serde_json::to_string(&result).map_err(LauncherError::Json)?;
    // Never blocks past the bound on a terminal the command may have stopped.
    stdout::write_after_run(&format!("{json}\n"), settled.final_writes_until)?;
    // Output that could not be kept is said where a person reads too, not only in
    // the document: a full disk must never lose output in silence.
    let lost: String = spill_markers(settled).map(|m| m + "\n").collect();
    output::write_stderr_until(&lost, settled.final_writes_until);
    Ok(())
}

/// The reader of Landlock's audit records for a command run in `mode`, or why there is
/// none (see `audit_reader`).
fn open_reader(mode: Mode) -> Result<RefCell<AuditReader>, String> {
    match Start::of(mode) {
        Start::Program => Err("no sandbox: nothing is refused".to_string()),
        _ => AuditReader::open(probe::landlock_abi()).map(RefCell::new),
    }
}

/// With `--journal KEY`: the journal, after recording the request under KEY (before
/// anything can start).
fn record_request(
    args: &RunArgs,
    request: &stockade_policy::PolicyRequest,
    private_dir: Option<&crate::control::private_dir::PrivateDir>,
) -> Result<Option<(Journal, String)>, LauncherError> {
    let Some(key) = &args.journal.journal else {
        return Ok(None);
    };
    let journal = Journal::open()?;
    journal.record_request(
        key,
        Requester::Run,
        request.mode,
        &args.command.command,
        private_dir.map(|d| d.path()),
    )?;
    Ok(Some((journal, key.clone())))
}

/// Records the settled command's result under `key`: the `--json` document without the
/// streams' text (their digests are in the receipt), and the exit code `run` exits with.
/// A failure is said on stderr and changes nothing else: the answer is then "unknown",
/// which is never wrong.
fn record_finished(journal: &Journal, key: &str, result: &RunResult, code: i32) {
    let recorded = serde_json::to_value(result)
        .map_err(std::io::Error::other)
        .and_then(|mut value| {
            if let Some(doc) = value.as_object_mut() {
                doc.remove("stdout");
                doc.remove("stderr");
                doc.insert("stockadeExitCode".into(), code.into());
            }
            journal.record_finished(key, &value)
        });
    if let Err(e) = recorded {
        let line = format!("stockade: cannot record the result of {key:?} in the journal: {e}\n");
        output::write_stderr_until(
            &line,
            std::time::Instant::now() + supervise::FINAL_WRITE_WAIT,
        );
    }
}

/// The environment the confined argv starts with: none when it starts stockade's own
/// helpers (proxy host, stage, runner), which run outside the sandbox and take the
/// command's environment from the request. So nothing the command's environment holds
/// (`LD_PRELOAD`, `LD_LIBRARY_PATH`, `GCONV_PATH`, `LOCPATH`, `RES_OPTIONS`, `HOME`, ...)
/// steers code that runs unconfined. With nothing confined, the program itself.
fn helper_env(mode: Mode, command_env: &[(OsString, OsString)]) -> &[(OsString, OsString)] {
    match Start::of(mode) {
        Start::Runner => &[],
        Start::Program => command_env,
    }
}

/// The markers after a command's passed-through output, on stderr: what changed in the
/// shared roots, what the supervisor saw tampered with, protected names that appeared,
/// and the verdict's own markers.
fn write_markers(
    settled: &Settled,
    verdict: &SandboxVerdict,
    confined: &ConfinedArgv,
    appeared: &[String],
    timeout: Option<std::time::Duration>,
    code: i32,
) {
    // Never blocks past a bound: the command may have stopped our terminal's output.
    // Each refusal named first (the proxy's have lines of their own below): a tampering
    // marker after them stays the last word on the run.
    let named: Vec<DenialRecord> = verdict
        .denials
        .iter()
        .filter(|d| d.evidence != Source::Proxy)
        .cloned()
        .collect();
    let text: String = denial_record::markers(&named)
        .into_iter()
        .chain(
            verdict
                .shared_roots_changed
                .iter()
                .map(|c| format!("[sandbox: {c}]")),
        )
        .chain(
            verdict
                .tampered_detail
                .iter()
                .map(|d| format!("[sandbox: {}]", crate::supervise::containment::printable(d))),
        )
        .chain(
            appeared
                .iter()
                .map(|p| format!("[sandbox: protected path appeared: {p}]")),
        )
        .chain(verdict.protected_changed.iter().map(|c| c.marker()))
        .chain(
            settled
                .limit_exceeded
                .map(|k| format!("[sandbox: limit exceeded: {}]", k.as_str())),
        )
        .chain(markers(
            settled,
            verdict,
            &verdict.network,
            confined.mode,
            timeout,
            code,
        ))
        .map(|m| m + "\n")
        .collect();
    // Each marker is a line of its own: after a command whose stderr ended within a
    // line, a marker appended to that line would not be the last line (a command's
    // own 124 would then read as a timeout), so a line break comes first.
    let text = if !text.is_empty() && ends_within_a_line(&settled.stderr.tail) {
        format!("\n{text}")
    } else {
        text
    };
    // On a terminal the command's output may have left it drawing text invisibly
    // (hidden, or in the background colour) or in another character set: the
    // markers come after a reset of those, so they read as written.
    let text = if !text.is_empty() && nix::unistd::isatty(std::io::stderr()).unwrap_or(false) {
        format!("{TERMINAL_RESET}{text}")
    } else {
        text
    };
    output::write_stderr_until(&text, settled.final_writes_until);
}

/// Plain text again on a terminal: attributes and colours off (`SGR 0`), the first
/// character set designated ASCII (`ESC ( B`) and shifted in (`SI`), the scrolling
/// region the whole screen again (`CSI r`, between a save and a restore of the cursor,
/// which it would move; a one-line region would scroll every marker out of sight), and
/// the default foreground and background colours back (`OSC 110`, `OSC 111`: set to one
/// colour, they hide text whatever `SGR 0` does; a terminal without them ignores them).
const TERMINAL_RESET: &str = "\x1b[0m\x1b(B\x0f\x1b7\x1b[r\x1b8\x1b]110\x07\x1b]111\x07";

/// Whether a stream whose last bytes are `tail` ended within a line (its last byte is
/// not a line feed).
fn ends_within_a_line(tail: &[u8]) -> bool {
    tail.last().is_some_and(|&b| b != b'\n')
}

/// How the sandbox was involved in the outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxVerdict {
    /// The runner itself failed: the command did not run.
    pub runner_failed: bool,
    /// The sandbox denied a file access the command tried.
    pub denied: bool,
    /// The enforcement in force while the command ran (from the runner's status record
    /// when there is one); `None` when nothing was confined.
    pub enforcement: Option<Enforcement>,
    /// Inherited descriptors through which metadata outside the writable roots stayed
    /// changeable, as the runner's status record names them.
    pub metadata_open: Vec<OpenOutside>,
    /// The status record, the stage's report, or a shared root was tampered with.
    pub tampered: bool,
    /// Shared writable roots whose own mode or owner changed (see
    /// `stockade_policy::stage_report`).
    pub shared_roots_changed: Vec<RootChange>,
    /// Whether the binding was checked just before the command started, and held (see
    /// `stockade_policy::receipt::Receipt::binding_verified`).
    pub binding_verified: Option<bool>,
    /// Why `binding_verified` is `None` for a run whose binding the runner checked (a
    /// script, which its interpreter opens again by name).
    pub binding_unverifiable: Option<BindingUnverifiable>,
    /// What was found when a control file (the status record, the stage's report, the
    /// proxy's record) was not as stockade left it; changed shared roots have markers of
    /// their own. Printed as a marker: without it, a run whose verdict was `tampered`
    /// showed no marker at all (the denial marker is withheld then, as `classify`
    /// withholds `denied`), so a command that changed its own status file's mode hid its
    /// denials from a caller reading the markers.
    pub tampered_detail: Option<String>,
    /// Protected paths the command changed where no stage held them read-only.
    pub protected_changed: Vec<protected_changes::Changed>,
    /// The connections the filtering proxy refused, as it recorded them.
    pub network: DenialLog,
    /// Every refusal stockade caused that could be named, the proxy's among them,
    /// whatever the exit code.
    pub denials: Vec<DenialRecord>,
    /// How they were named: from Landlock's audit records, or from the lines only.
    pub attribution: Attribution,
}

/// The one place that decides runner failure and denial for `stockade run`: the
/// classification `stockade classify` gives (status record first, exit rules else; a
/// denial is a refusal named from the stderr the supervisor kept and from the proxy's
/// record, checked against the policy and Unix permissions).
fn judge(settled: &Settled, confined: &ConfinedArgv, audit: AuditOutcome) -> SandboxVerdict {
    let stderr = String::from_utf8_lossy(&settled.stderr.tail);
    let signal = settled.signal.map(signal_name);
    let v = classify::verdict(
        confined,
        settled.exit_code,
        signal.as_deref(),
        &stderr,
        audit.collected.as_ref(),
    );
    // Runner failure and tampering outrank denial (the verdict says so already).
    let tampered = v.outcome == Outcome::Tampered;
    let denied = v.denied && !tampered;
    let denials = v.denials.clone();
    // Without a runner, the launcher checked the binding itself before it started the
    // command (it would not have started otherwise).
    // A script it started by name is not proven, as the runner's by-name record says.
    let (binding_verified, binding_unverifiable) = if confined.mode.is_confined() {
        (
            v.receipt.binding_verified,
            v.receipt.binding_unverifiable.clone(),
        )
    } else if settled.started_by_name {
        (None, Some(BindingUnverifiable::by_name()))
    } else {
        (Some(true), None)
    };
    let tampered_detail = v
        .detail
        .clone()
        .filter(|_| tampered && v.shared_roots_changed.is_empty());
    SandboxVerdict {
        runner_failed: v.runner_failed,
        denied,
        enforcement: v.enforcement,
        metadata_open: v.metadata_open,
        tampered,
        shared_roots_changed: v.shared_roots_changed,
        binding_verified,
        binding_unverifiable,
        tampered_detail,
        protected_changed: Vec::new(),
        network: v.network,
        denials,
        attribution: audit.attribution,
    }
}

/// What the audit records gave: the command's collected refusals, when its domain was
/// found, and how the run's refusals were named (and why not from the kernel).
struct AuditOutcome {
    collected: Option<Collected>,
    attribution: Attribution,
}

/// Reads the rest of the command's records once it settled (until the kernel says its
/// domain is freed, a bounded wait; with processes kept in the background it is not
/// freed, so only what is there is read) and says what they give.
fn audit_outcome(
    reader: Result<std::cell::RefMut<'_, AuditReader>, &String>,
    keep_background: bool,
) -> AuditOutcome {
    let fallback = |reason: String| AuditOutcome {
        collected: None,
        attribution: Attribution {
            evidence: Source::PolicyCheck,
            reason: Some(reason),
            more: 0,
        },
    };
    let mut reader = match reader {
        Ok(r) => r,
        Err(why) => return fallback(why.clone()),
    };
    let wait = match keep_background {
        true => audit_reader::SETTLE_WAIT / 20,
        false => audit_reader::SETTLE_WAIT,
    };
    let ended = reader.finish(wait);
    let c = reader.collector.collected.clone();
    if c.domain.is_none() {
        return fallback(
            "no Landlock audit record of the command's domain arrived (audit turned off, or an audit rule excludes Landlock's records)".into(),
        );
    }
    let listed = c.refused.len() as u64 + c.more;
    let unlisted = c.freed_with.unwrap_or(0).saturating_sub(listed);
    let reason = if c.lost || unlisted > 0 {
        Some(format!(
            "audit records were lost (the kernel's audit backlog or this socket overflowed): the kernel counted {} refusals, {listed} read",
            c.freed_with.unwrap_or(listed)
        ))
    } else if !ended {
        Some("the command's domain was not seen freed (processes left running): refusals after the run are not listed".to_string())
    } else {
        None
    };
    AuditOutcome {
        attribution: Attribution {
            evidence: Source::Audit,
            reason,
            more: c.more + unlisted,
        },
        collected: Some(c),
    }
}

/// The exit code in the conventions of `timeout`/`env`: 124 timed out, 125 the runner
/// failed, 128+N when the launcher itself was stopped by signal N (or the command was
/// killed by it), 125 when the range could not be proven empty (except for processes
/// kept on purpose: see `UnknownCleanup::changes_exit_code`), else the command's own code.
fn exit_code(settled: &Settled, verdict: &SandboxVerdict) -> i32 {
    if let Some(sig) = settled.aborted {
        return exit::SIGNAL_BASE + sig as i32;
    }
    if settled.timed_out {
        return exit::TIMED_OUT;
    }
    if verdict.runner_failed {
        return exit::RUNNER_FAILURE;
    }
    // Something of the command's may still run: never a clean success, whatever the
    // command's own code (which the `[exit code: N]` marker and the JSON keep).
    if settled.cleanup.changes_exit_code() {
        return exit::RUNNER_FAILURE;
    }
    match (settled.exit_code, settled.signal) {
        (Some(code), _) => code,
        (None, Some(sig)) => exit::SIGNAL_BASE + sig,
        (None, None) => exit::RUNNER_FAILURE,
    }
}

/// Processes the command left running when it exited, which stockade then ended, said in
/// text mode as JSON says them in `leftBehind`: a command that starts a server in the background and exits
/// would otherwise see it vanish without a word. Kept ones (`--keep-background`) have the
/// cleanup marker instead; the stage's init, which only reaps, is not the command's.
fn background_marker(settled: &Settled) -> Option<String> {
    // A timeout or a signal to stockade ends everything, and its own marker says so.
    if settled.timed_out || settled.aborted.is_some() {
        return None;
    }
    if matches!(
        settled.cleanup,
        Cleanup::Unknown {
            reason: UnknownCleanup::Kept,
            ..
        }
    ) {
        return None;
    }
    let ended = settled
        .left_behind
        .iter()
        .filter(|m| m.command != crate::supervise::containment::STAGE_INIT)
        .count();
    let what = match ended {
        0 => return None,
        1 => "1 background process".to_string(),
        n => format!("{n} background processes"),
    };
    Some(format!(
        "[sandbox: ended {what} the command left running; --keep-background keeps them]"
    ))
}

fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("SIG{sig}"))
}

/// The markers printed after the command's output, in the order agents know: denial,
/// timeout, signal, then an unknown cleanup and, when the exit status is not the
/// command's own code, `[exit code: N]` last (otherwise the exit code is the exit status
/// itself; pass-through output is never truncated, so there is no truncation marker).
fn markers(
    settled: &Settled,
    verdict: &SandboxVerdict,
    network: &DenialLog,
    mode: Mode,
    timeout: Option<std::time::Duration>,
    status: i32,
) -> Vec<String> {
    // The marker agents know, for a failed command with a refusal on this machine (a
    // file, a device, a socket, or one its line names nothing of); each refusal was
    // named before the other markers. A refused name or address is no file access.
    let mut lines = Vec::new();
    if verdict.denied && verdict.denials.iter().any(|d| !d.kind.is_network()) {
        lines.push(format!("[sandbox: file access denied under {mode} mode]"));
    }
    // Refused connections are facts whatever the exit code: a client may have fallen
    // back, or failed in words that name no file.
    lines.extend(network.markers());
    if settled.timed_out
        && let Some(t) = timeout
    {
        lines.push(format!("[timed out after {}ms]", t.as_millis()));
    }
    if let Some(sig) = settled.signal {
        lines.push(format!("[killed by signal: {}]", signal_name(sig)));
    }
    lines.extend(background_marker(settled));
    lines.extend(settled.cleanup.marker());
    if let Some(code) = settled.exit_code {
        // Stockade's own 125 (the runner failed: the command did not run) is not the
        // command's code; its 124 comes with no exit code at all (the command was ended).
        let own = !verdict.runner_failed;
        let replaced = code != status && settled.cleanup.changes_exit_code();
        // A command that exits 124 or 125 itself would otherwise look like a timeout or a
        // runner failure, and it can print lookalike lines of either before it exits; the
        // marker comes after everything it printed, so a 124 or 125 without it as the last
        // line is stockade's.
        let reserved = code == status && own && is_reserved(code);
        if replaced || reserved {
            lines.push(format!("[exit code: {code}]"));
        }
    }
    lines
}

/// `[output not kept: STREAM: WHY]` for each captured stream whose spill file could not
/// be written.
fn spill_markers(settled: &Settled) -> impl Iterator<Item = String> + '_ {
    let streams = [
        ("stdout", settled.stdout.as_ref()),
        ("stderr", Some(&settled.stderr)),
    ];
    streams.into_iter().filter_map(|(name, c)| {
        let why = c?.spill_error.as_ref()?;
        Some(format!(
            "[output not kept: {name}: {}]",
            crate::supervise::containment::printable(why)
        ))
    })
}

/// The exit codes `stockade run` gives meanings of its own (a timeout, its or its
/// runner's failure), which a command's own code can collide with.
fn is_reserved(code: i32) -> bool {
    code == exit::TIMED_OUT || code == exit::RUNNER_FAILURE
}

/// One stream in the JSON result.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StreamResult {
    text: String,
    truncated: bool,
    spill_path: Option<String>,
    /// The spill file's size as it was left for the caller (at most `--max-spill`), so a
    /// caller knows what it holds on disk without looking.
    spill_bytes: Option<u64>,
    /// Why the spill file could not be written (a full disk): then only `text` was kept,
    /// and the receipt's digest still covers every byte.
    spill_error: Option<String>,
}

impl From<&Captured> for StreamResult {
    fn from(c: &Captured) -> Self {
        StreamResult {
            text: c.text(),
            truncated: c.truncated,
            spill_path: c
                .spill_path
                .as_ref()
                .map(|p| p.to_string_lossy().into_owned()),
            spill_bytes: c
                .spill_path
                .as_ref()
                .and_then(|p| std::fs::metadata(p).ok())
                .map(|m| m.len()),
            spill_error: c.spill_error.clone(),
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SandboxResult {
    mode: Mode,
    denied: bool,
    enforcement: Option<Enforcement>,
    /// Inherited descriptors through which the command could change metadata outside the
    /// writable roots (`enforcement` is then `partial`); absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    metadata_open: Vec<OpenOutside>,
    runner_failed: bool,
    /// Someone changed what the sandbox relies on: the runner's status record or the
    /// stage's report, or a shared writable root's own mode or owner (listed in
    /// `sharedRootsChanged`), or a protected path no stage held (`protectedChanged`).
    /// Not a clean run, whatever the exit code.
    tampered: bool,
}

#[derive(Serialize)]
struct ProcessResult {
    pid: i32,
    command: String,
}

/// The `--json` document. Outcome facts stay separate: a command can time out and
/// still exit 0.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RunResult {
    /// The contract version, as in the ConfinedArgv and the classify verdict.
    contract: u32,
    exit_code: Option<i32>,
    signal: Option<String>,
    timed_out: bool,
    /// The signal that stopped `stockade run` itself, if any.
    aborted: Option<String>,
    duration_ms: u64,
    timeout_ms: Option<u64>,
    stdout: StreamResult,
    stderr: StreamResult,
    sandbox: SandboxResult,
    containment: &'static str,
    env_removed: Vec<String>,
    left_behind: Vec<ProcessResult>,
    /// Default protected names (`.git/hooks`, `.envrc`, ...) that did not exist when the
    /// command started and do now: created by the command, so not protected.
    protected_appeared: Vec<String>,
    /// Protected paths (`.git/config`, names under `.git/hooks`, ...) the command added,
    /// modified or removed where the stage did not hold them read-only (`--no-stage`, or
    /// no namespaces): reported, not put back. Absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    protected_changed: Vec<protected_changes::Changed>,
    /// Shared writable roots (`/tmp` as root, ...) whose own mode or owner changed during
    /// the run, and whether each was put back.
    shared_roots_changed: Vec<RootChange>,
    /// The network by name: what the proxy refused (`{"denied": [{"host", "port",
    /// "reason"}], "moreDenied"}`).
    network: DenialLog,
    /// Every refusal stockade caused that could be named (see
    /// `stockade_policy::denial_record`), whatever the exit code.
    denials: Vec<DenialRecord>,
    /// How the refusals were named: `{"evidence": "audit" | "policy-check", "reason"?,
    /// "more"?}` (see `stockade_policy::audit_attribution::Attribution`).
    #[serde(skip_serializing_if = "Option::is_none")]
    attribution: Option<Attribution>,
    /// What ran and how it ended, closed (see docs/provider-contract.md).
    receipt: Receipt,
    /// The resource limits, what held each, and the one the command hit when that can
    /// be told (`stockade_policy::limits`).
    limits: LimitsResult,
}

/// The run's resource limits: the ones asked for, with this machine's defaults filled
/// in (one step, here) unless `--no-default-limits` turned them off.
fn limits_of(s: &super::cli::SuperviseArgs) -> stockade_policy::limits::Limits {
    stockade_policy::limits::Limits {
        defaults: (!s.no_default_limits).then(supervise::limits::machine_defaults),
        ..s.limits()
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LimitsResult {
    held: Vec<stockade_policy::limits::Held>,
    /// Defaults nothing held here (no cgroup controller for them).
    defaults_unheld: Vec<stockade_policy::limits::Kind>,
    exceeded: Option<stockade_policy::limits::Kind>,
}

impl RunResult {
    fn new(
        settled: &Settled,
        verdict: &SandboxVerdict,
        confined: &ConfinedArgv,
        env_removed: &[std::ffi::OsString],
        timeout: Option<std::time::Duration>,
    ) -> RunResult {
        let empty = Captured {
            tail: Vec::new(),
            truncated: false,
            spill_path: None,
            spill_error: None,
            sha256: [0; 32],
            bytes: 0,
        };
        RunResult {
            contract: stockade_policy::confined::CONTRACT_VERSION,
            exit_code: settled.exit_code,
            signal: settled.signal.map(signal_name),
            timed_out: settled.timed_out,
            aborted: settled.aborted.map(|s| s.as_str().to_string()),
            duration_ms: settled.duration.as_millis() as u64,
            timeout_ms: timeout.map(|t| t.as_millis() as u64),
            stdout: settled.stdout.as_ref().unwrap_or(&empty).into(),
            stderr: (&settled.stderr).into(),
            sandbox: SandboxResult {
                mode: confined.mode,
                denied: verdict.denied,
                enforcement: verdict.enforcement,
                metadata_open: verdict.metadata_open.clone(),
                runner_failed: verdict.runner_failed,
                tampered: verdict.tampered,
            },
            containment: settled.containment.name(),
            env_removed: env_removed
                .iter()
                .map(|n| n.to_string_lossy().into_owned())
                .collect(),
            left_behind: settled
                .left_behind
                .iter()
                .map(|m| ProcessResult {
                    pid: m.pid,
                    command: m.command.clone(),
                })
                .collect(),
            protected_appeared: Vec::new(),
            protected_changed: verdict.protected_changed.clone(),
            shared_roots_changed: Vec::new(),
            network: DenialLog::default(),
            denials: Vec::new(),
            attribution: None,
            receipt: receipt(settled, verdict, confined),
            limits: LimitsResult {
                held: settled.limits.held.clone(),
                defaults_unheld: settled.limits.defaults_unheld.clone(),
                exceeded: settled.limit_exceeded,
            },
        }
    }
}

/// The receipt of a run stockade supervised: the binding `confine` reported, whether it
/// held, the digests of both complete streams, the exit facts and the cleanup.
fn receipt(settled: &Settled, verdict: &SandboxVerdict, confined: &ConfinedArgv) -> Receipt {
    let binding = confined.binding.as_ref();
    let stream = |c: &Captured, complete: bool| StreamDigest {
        sha256: stockade_policy::digest::hex(&c.sha256),
        bytes: c.bytes,
        complete,
    };
    Receipt {
        contract: stockade_policy::confined::CONTRACT_VERSION,
        mode: confined.mode,
        request_digest: binding.map(|b| b.request_digest.clone()),
        policy_digest: binding.and_then(|b| b.policy_digest.clone()),
        executable: binding.map(|b| b.executable.clone()),
        cwd: binding.map(|b| b.cwd.clone()),
        binding_verified: verdict.binding_verified,
        binding_unverifiable: verdict.binding_unverifiable.clone(),
        stdout: settled
            .stdout
            .as_ref()
            .zip(settled.stdout_complete)
            .map(|(c, complete)| stream(c, complete)),
        stderr: Some(stream(&settled.stderr, settled.stderr_complete)),
        exit_code: settled.exit_code,
        signal: settled.signal.map(signal_name),
        timed_out: Some(settled.timed_out),
        cleanup: settled.cleanup.clone(),
    }
}
/// The supervisor's containment for `--containment`.
fn containment(choice: ContainmentChoice) -> Containment {
    match choice {
        ContainmentChoice::Auto => Containment::Auto,
        ContainmentChoice::Cgroup => Containment::Cgroup,
        ContainmentChoice::Subreaper => Containment::Subreaper,
    }
}
