//! `stockade classify`: the verdict on a settled process spawned from a ConfinedArgv.
//!
//! The decision itself is `stockade_policy::classify::classify`; this module gathers its
//! inputs (the ConfinedArgv JSON, the exit facts, the collected stderr, the runner's
//! status record) and consumes the private directory afterwards. `stockade run` uses
//! [`verdict`] for the same decision on the processes it supervises (and removes the
//! private directory it made itself, through `PrivateDir::remove`).

use crate::commands::cli::ClassifyArgs;
use crate::commands::evidence::{self, HostPermissions};
use crate::commands::probe;
use crate::control::private_dir;
use crate::error::LauncherError;
use crate::journal::{Journal, Owner};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;
use stockade_policy::attribution::{self, SCOPE_FILE, Scope};
use stockade_policy::audit_attribution;
use stockade_policy::classify::{self, Classification, ExitFacts, StageEvidence, StatusEvidence};
use stockade_policy::confined::{self, CONTRACT_VERSION, ConfinedArgv, StatusChannel};
use stockade_policy::landlock_audit::Collected;
use stockade_policy::network_denials::{self, DenialLog, LOG_FILE};
use stockade_policy::stage_report::{MAX_REPORT_BYTES, REPORT_FILE, StageReport};
use stockade_policy::status::{MAX_RECORD_BYTES, STATUS_FILE, StatusRecord};
use stockade_policy::trust::FileKind;

/// The private directory a ConfinedArgv's `statusPath` names, once checked: exactly
/// `BASE/req-SECONDS-RANDOM-INODE/status` in this user's control base, with no `.`, `..`
/// or extra components. Nothing in the JSON is trusted beyond what is checked here.
#[derive(Debug)]
pub struct Verified {
    dir: PathBuf,
    created: u64,
    /// The status file's inode, as the directory's name records it.
    inode: u64,
}

/// Checks `confined`'s status path (see [`Verified`]); `None` when it has none.
pub fn verify(confined: &ConfinedArgv) -> Result<Option<Verified>, LauncherError> {
    let Some(given) = confined.status_path.as_deref() else {
        if confined.mode.is_confined() {
            // `confine` always names one for a confined mode: dropping it would turn the
            // verdict over to the forgeable exit rules.
            return Err(LauncherError::BadConfined(format!(
                "a {} ConfinedArgv without a statusPath was not made by stockade confine",
                confined.mode
            )));
        }
        return Ok(None);
    };
    let base = private_dir::base()?;
    let path = Path::new(given);
    let bad = || {
        LauncherError::BadConfined(format!(
            "statusPath {given} is not a status file in this user's control directory {} (was the ConfinedArgv changed, or made with another {} or XDG_RUNTIME_DIR?)",
            base.display(),
            private_dir::CONTROL_DIR_ENV
        ))
    };
    let mut parts = path.strip_prefix(&base).map_err(|_| bad())?.components();
    let (Some(Component::Normal(name)), Some(Component::Normal(file)), None) =
        (parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    // `status_inode` accepts only request directories (`req-`).
    let (Some(created), Some(inode)) = (
        private_dir::created_at(name),
        private_dir::status_inode(name),
    ) else {
        return Err(bad());
    };
    // `strip_prefix` compares components, so `BASE/./x` or a doubled slash is caught by
    // comparing the rebuilt path with what was given.
    let dir = base.join(name);
    if file != STATUS_FILE || dir.join(file).as_os_str() != path.as_os_str() {
        return Err(bad());
    }
    Ok(Some(Verified {
        dir,
        created,
        inode,
    }))
}

/// Reads what the status channel says about `verified`. The channel is derived here
/// (from the kernel facts, as `confine` derived it), never read from the JSON; a status
/// file that is not as the runner leaves it is tampering.
fn read_status(verified: &Verified) -> StatusEvidence {
    if confined::status_channel(&probe::basic_kernel_facts()) != StatusChannel::OutOfBand {
        return StatusEvidence::Unavailable;
    }
    let dir = &verified.dir;
    let dir_meta = match std::fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if private_dir::is_stale(verified.created, SystemTime::now()) {
                // Swept by age: no evidence either way.
                return StatusEvidence::Unavailable;
            }
            return StatusEvidence::Tampered(format!(
                "its private directory {} is gone before its time (classified already, or removed by someone)",
                dir.display()
            ));
        }
        Err(e) => {
            return StatusEvidence::Tampered(format!("cannot examine {}: {e}", dir.display()));
        }
    };
    if let Err(u) = private_dir::trusted(&dir_meta, FileKind::Directory) {
        return StatusEvidence::Tampered(format!("its private directory {}: {u}", dir.display()));
    }
    let path = dir.join(STATUS_FILE);
    let tampered = |why: String| StatusEvidence::Tampered(format!("{}: {why}", path.display()));
    // The runner never removes or replaces it, so any failure to open it (gone, mode
    // changed, descriptors exhausted) is someone's doing.
    let (file, meta) = match open_control_file(&path) {
        Ok(Some(opened)) => opened,
        Ok(None) => {
            let gone = std::io::Error::from_raw_os_error(libc::ENOENT);
            return tampered(format!("cannot open it: {gone}"));
        }
        Err(why) => return tampered(why),
    };
    if meta.ino() != verified.inode {
        return tampered(format!(
            "it is not the file confine created (inode {}, not {})",
            meta.ino(),
            verified.inode
        ));
    }
    if meta.mode() & 0o7777 != STATUS_MODE {
        return tampered(format!(
            "its mode is {:04o}, not the {STATUS_MODE:04o} it was made with",
            meta.mode() & 0o7777
        ));
    }
    let mut bytes = Vec::new();
    if let Err(e) = file
        .take(MAX_RECORD_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
    {
        return tampered(format!("cannot read it: {e}"));
    }
    StatusEvidence::OutOfBand(StatusRecord::decode(&bytes))
}

/// What the namespace stage's report file in `verified`'s directory says (see
/// `stockade_policy::stage_report`). No file: the stage had nothing to watch. A file not
/// as `confine` made it is tampering, as for the status file.
fn read_stage(verified: &Verified) -> StageEvidence {
    let path = verified.dir.join(REPORT_FILE);
    let tampered = |why: String| StageEvidence::Tampered(format!("{}: {why}", path.display()));
    let (file, _) = match open_control_file(&path) {
        Ok(Some(opened)) => opened,
        Ok(None) => return StageEvidence::None,
        Err(why) => return tampered(why),
    };
    let mut bytes = Vec::new();
    if let Err(e) = file
        .take(MAX_REPORT_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
    {
        return tampered(format!("cannot read it: {e}"));
    }
    StageEvidence::Report(StageReport::decode(&bytes))
}

/// What the filtering proxy's record of refused connections in `verified`'s directory
/// says (see `stockade_policy::network_denials`). No file: no proxy ran, nothing was
/// refused. A file not as the proxy made it (a mode other than 0600, unreadable, a link)
/// is tampering, as for the status file: the command owns it and may change its mode
/// where no read-only mount covers the control directory (`--no-stage`), and a record
/// that could not be read would otherwise be reported as no refusal at all, hiding every
/// connection the proxy refused.
fn read_network(verified: &Verified) -> Result<DenialLog, String> {
    let path = verified.dir.join(LOG_FILE);
    let tampered = |why: String| {
        format!(
            "the proxy's record of refused connections was tampered with: {}: {why}",
            path.display()
        )
    };
    match read_record(&path, network_denials::MAX_LOG_BYTES as u64) {
        Ok(Some(bytes)) => Ok(DenialLog::parse(&bytes)),
        Ok(None) => Ok(DenialLog::default()),
        Err(why) => Err(tampered(why)),
    }
}

/// The bytes (at most `max`) of a record `confine` or the proxy made in a private
/// directory with [`RECORD_MODE`]; `Ok(None)` when there is none; `Err`: why it cannot be
/// trusted (not a regular file only this user can change, another mode, unreadable).
fn read_record(path: &std::path::Path, max: u64) -> Result<Option<Vec<u8>>, String> {
    let Some((file, meta)) = open_control_file(path)? else {
        return Ok(None);
    };
    if meta.mode() & 0o7777 != RECORD_MODE {
        return Err(format!(
            "its mode is {:04o}, not the {RECORD_MODE:04o} it was made with",
            meta.mode() & 0o7777
        ));
    }
    let mut bytes = Vec::new();
    file.take(max)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {e}"))?;
    Ok(Some(bytes))
}

/// Adds what the proxy recorded to a verdict: its refusals, or `tampered` when the
/// record is not as the proxy made it.
fn with_network(mut v: Classification, verified: &Verified) -> Classification {
    match read_network(verified) {
        Ok(log) => {
            v.network = log;
            v
        }
        Err(why) => classify::with_tampering(v, why),
    }
}

/// Opens a file of a private directory for reading without following a link or blocking
/// on a FIFO, and checks it is a regular file only this user can change. `Ok(None)`: it
/// does not exist; `Err`: why it cannot be trusted.
fn open_control_file(
    path: &std::path::Path,
) -> Result<Option<(std::fs::File, std::fs::Metadata)>, String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path);
    let file = match file {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot open it: {e}")),
    };
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot examine it: {e}"))?;
    private_dir::trusted(&meta, FileKind::Regular).map_err(|u| u.to_string())?;
    Ok(Some((file, meta)))
}

/// The mode `confine` creates a status file with.
const STATUS_MODE: u32 = 0o600;
/// The mode the proxy creates its record of refused connections with.
const RECORD_MODE: u32 = 0o600;

/// What the status channel of `confined` says; a status path that fails [`verify`] is
/// tampering (the caller that can refuse bad input calls `verify` first).
pub fn status(confined: &ConfinedArgv) -> StatusEvidence {
    match verify(confined) {
        Ok(Some(v)) => read_status(&v),
        Ok(None) => StatusEvidence::Unavailable,
        Err(e) => StatusEvidence::Tampered(e.to_string()),
    }
}

/// What the namespace stage reported for `confined` (nothing when its status path does
/// not verify: [`status`] names that tampering already).
pub fn stage(confined: &ConfinedArgv) -> StageEvidence {
    match verify(confined) {
        Ok(Some(v)) => read_stage(&v),
        _ => StageEvidence::None,
    }
}

/// The verdict on a process spawned from `confined` that settled with these facts,
/// with what the namespace stage reported and what the proxy refused.
pub fn verdict(
    confined: &ConfinedArgv,
    exit_code: Option<i32>,
    signal: Option<&str>,
    stderr: &str,
    audit: Option<&Collected>,
) -> Classification {
    let settled = ExitFacts {
        exit_code,
        signal,
        stderr,
    };
    let v = classify::with_stage(
        classify::classify(confined, &settled, &status(confined)),
        &stage(confined),
    );
    match verify(confined) {
        Ok(Some(verified)) => with_denials(with_network(v, &verified), &verified, stderr, audit),
        _ => v,
    }
}

/// Names the refusals stockade caused: the proxy's record, the kernel's audit records of
/// the command's domain when `stockade run` read them, and the command's error lines
/// checked against the scope `confine` kept and Unix permissions for this user (for
/// what no audit record names).
/// Without a scope (a ConfinedArgv from an older stockade) the exit rules' `denied`
/// stands; a scope not as `confine` made it is tampering.
fn with_denials(
    v: Classification,
    verified: &Verified,
    stderr: &str,
    audit: Option<&Collected>,
) -> Classification {
    let mut records = Vec::new();
    let scope = match read_scope(verified) {
        Ok(scope) => scope,
        Err(why) => return classify::with_tampering(v, why),
    };
    if let Some(scope) = &scope {
        records = attribution::from_stderr(scope, stderr, &HostPermissions);
        if let Some(collected) = audit {
            let mut kernel = audit_attribution::from_audit(scope, collected);
            kernel.retain(|r| !evidence::fails_anyway(r));
            records = audit_attribution::merge(kernel, records);
        }
    }
    records.extend(attribution::from_proxy(&v.network));
    if scope.is_none() {
        let mut v = v;
        v.denials = records;
        return v;
    }
    classify::with_denials(v, records)
}

/// What the scope file in `verified`'s directory says (see
/// `stockade_policy::attribution::Scope`); `Ok(None)` when there is none.
fn read_scope(verified: &Verified) -> Result<Option<Scope>, String> {
    let path = verified.dir.join(SCOPE_FILE);
    let tampered = |why: String| {
        format!(
            "the policy's scope was tampered with: {}: {why}",
            path.display()
        )
    };
    let bytes = match read_record(&path, attribution::MAX_SCOPE_BYTES as u64 + 1) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(None),
        Err(why) => return Err(tampered(why)),
    };
    serde_json::from_slice::<Scope>(&bytes)
        .map(Some)
        .map_err(|e| tampered(format!("it is not one whole scope: {e}")))
}

/// Removes a verified private directory: only the files `confine` puts there, then the
/// directory (left alone if anything else is inside).
pub fn consume(verified: &Verified) {
    private_dir::remove_private(&verified.dir);
}

/// The name of a signal given as a name (`SIGKILL`, `KILL`) or a number (`9`). A
/// real-time signal has no name of its own: it is `SIGN` by its number (as `stockade
/// run` reports it), given as `39`, `SIG39`, `SIGRTMIN+5` or `RTMAX-25` (the C
/// library's numbering, as `kill -l` prints it).
pub fn signal_name(given: &str) -> Result<String, LauncherError> {
    use nix::sys::signal::Signal;
    use std::str::FromStr;
    let bad = || LauncherError::BadSignal(given.to_string());
    let upper = given.to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    let (min, max) = (libc::SIGRTMIN(), libc::SIGRTMAX());
    // The kernel's real-time range starts at 32 (the C library keeps the first two).
    let real_time = |n: i32| (32..=max).contains(&n).then(|| format!("SIG{n}"));
    let offset = |rest: &str, sign: char| {
        rest.strip_prefix(sign)
            .and_then(|k| k.parse::<i32>().ok())
            .filter(|k| *k >= 0)
    };
    let number = if let Some(rest) = bare.strip_prefix("RTMIN") {
        if rest.is_empty() {
            Some(min)
        } else {
            offset(rest, '+').map(|k| min + k)
        }
    } else if let Some(rest) = bare.strip_prefix("RTMAX") {
        if rest.is_empty() {
            Some(max)
        } else {
            offset(rest, '-').map(|k| max - k)
        }
    } else {
        bare.parse::<i32>().ok()
    };
    if let Some(n) = number {
        return match Signal::try_from(n) {
            Ok(signal) if !bare.starts_with("RT") => Ok(signal.as_str().to_string()),
            _ => real_time(n).ok_or_else(bad),
        };
    }
    let signal = Signal::from_str(&format!("SIG{bare}")).map_err(|_| bad())?;
    Ok(signal.as_str().to_string())
}

/// The most `classify` reads of either input. Executors pass a bounded stderr tail and a
/// small JSON object; anything larger is refused rather than read into memory whole.
pub const MAX_INPUT_BYTES: u64 = 64 << 20;

/// Opens an input file without blocking (a FIFO in its place must not hang `classify`)
/// and refuses anything but a regular file of storage: a file of the kernel's own
/// filesystems is refused unread (as root, reading `/proc/kmsg` consumes the kernel log;
/// see `stockade_policy::trust::kernel_filesystem`).
fn open_input(path: &Path) -> std::io::Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)?;
    if !file.metadata()?.file_type().is_file() {
        return Err(std::io::Error::other(
            "not a regular file (pass a file, or - for stdin)",
        ));
    }
    let fs = nix::sys::statfs::fstatfs(&file)?;
    if let Some(name) = stockade_policy::trust::kernel_filesystem(fs.filesystem_type().0 as u64) {
        return Err(std::io::Error::other(format!(
            "not a regular file: it lies on the kernel's {name} filesystem, nothing was read (pass a file, or - for stdin)"
        )));
    }
    Ok(file)
}

fn read_input(what: &'static str, path: &Path) -> Result<Vec<u8>, LauncherError> {
    let mut bytes = Vec::new();
    let limit = MAX_INPUT_BYTES + 1;
    let result = if path == Path::new("-") {
        std::io::stdin()
            .lock()
            .take(limit)
            .read_to_end(&mut bytes)
            .map(|_| ())
    } else {
        open_input(path).and_then(|f| f.take(limit).read_to_end(&mut bytes).map(|_| ()))
    };
    let too_large = || {
        std::io::Error::other(format!(
            "larger than {MAX_INPUT_BYTES} bytes; pass the last part of the stream"
        ))
    };
    result
        .and_then(|()| {
            if bytes.len() as u64 > MAX_INPUT_BYTES {
                Err(too_large())
            } else {
                Ok(())
            }
        })
        .map_err(|source| LauncherError::ReadInput {
            what,
            path: path.to_path_buf(),
            source,
        })?;
    Ok(bytes)
}

/// The journal and key `classify` records the verdict under: the ConfinedArgv's key
/// (`confine --journal KEY`), once the journal's record under it is checked to be this
/// very request (a key changed in the JSON is refused). `None`: no key, or the journal
/// cannot take the record (said on stderr; the answer then stays `unknown`, never
/// wrong). A confined command that runs `classify` itself finds no journal: the control
/// base is hidden from it.
fn journal_target(
    confined: &ConfinedArgv,
    verified: Option<&Verified>,
) -> Result<Option<(Journal, String)>, LauncherError> {
    let Some(key) = &confined.journal else {
        return Ok(None);
    };
    stockade_policy::journal::check_key(key).map_err(LauncherError::BadConfined)?;
    let dir_name = verified
        .and_then(|v| v.dir.file_name())
        .map(|n| n.to_string_lossy().into_owned());
    let journal = match Journal::open() {
        Ok(journal) => journal,
        Err(e) => {
            not_recorded(key, &e.to_string());
            return Ok(None);
        }
    };
    match journal.owner(key, dir_name.as_deref()) {
        Owner::This => Ok(Some((journal, key.clone()))),
        Owner::Missing => {
            not_recorded(
                key,
                "no request is recorded under it (swept, or never made)",
            );
            Ok(None)
        }
        Owner::Unreadable(why) => {
            not_recorded(key, &format!("its request record cannot be read: {why}"));
            Ok(None)
        }
        Owner::Other(why) => Err(LauncherError::BadConfined(why)),
    }
}

/// Records `verdict` (with its receipt) as the result of `key`; a result already there
/// stays. A failure is said on stderr and changes nothing else.
fn record_verdict(journal: &Journal, key: &str, verdict: &Classification) {
    let recorded = serde_json::to_value(verdict)
        .map_err(std::io::Error::other)
        .and_then(|value| journal.record_finished(key, &value));
    if let Err(e) = recorded {
        let why = match e.raw_os_error() {
            Some(libc::EEXIST) => "a result is already recorded (the first one stands)".into(),
            _ => e.to_string(),
        };
        not_recorded(key, &why);
    }
}

/// Says on stderr, never panicking on a closed stream, that the verdict of `key` was
/// not recorded.
fn not_recorded(key: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "stockade: the verdict of {key:?} is not recorded in the journal: {why}"
    );
}

/// `stockade classify`: prints the verdict as one JSON line, then consumes the private
/// directory.
pub fn run(args: &ClassifyArgs) -> Result<i32, LauncherError> {
    if args.confined == Path::new("-") && args.stderr.as_deref() == Some(Path::new("-")) {
        return Err(LauncherError::BadConfined(
            "--confined and --stderr cannot both be read from stdin (-)".into(),
        ));
    }
    let json = read_input("ConfinedArgv", &args.confined)?;
    let confined: ConfinedArgv = serde_json::from_slice(&json)
        .map_err(|e| LauncherError::BadConfined(format!("not ConfinedArgv JSON: {e}")))?;
    if confined.contract != CONTRACT_VERSION {
        return Err(LauncherError::BadConfined(format!(
            "contract version {} is not supported (this stockade speaks {CONTRACT_VERSION})",
            confined.contract
        )));
    }
    let stderr = match &args.stderr {
        Some(path) => read_input("stderr", path)?,
        None => Vec::new(),
    };
    let signal = args.signal.as_deref().map(signal_name).transpose()?;
    // A status path that is not this user's own is refused before anything is read, and
    // so is a journal key that names another request.
    let verified = verify(&confined)?;
    let journal = journal_target(&confined, verified.as_ref())?;
    let status = verified
        .as_ref()
        .map_or(StatusEvidence::Unavailable, read_status);
    let settled = ExitFacts {
        exit_code: args.exit_code,
        signal: signal.as_deref(),
        stderr: &String::from_utf8_lossy(&stderr),
    };
    let stage = verified.as_ref().map_or(StageEvidence::None, read_stage);
    let mut verdict =
        classify::with_stage(classify::classify(&confined, &settled, &status), &stage);
    if let Some(v) = &verified {
        verdict = with_denials(with_network(verdict, v), v, settled.stderr, None);
    }
    let line = serde_json::to_string(&verdict).map_err(LauncherError::Json)?;
    // Recorded before the private directory (the evidence of "started") is consumed: a
    // crash in between still answers "unknown", never wrong.
    if let Some((journal, key)) = &journal {
        record_verdict(journal, key, &verdict);
    }
    crate::supervise::stdout::write(&format!("{line}\n"))?;
    if let Some(verified) = &verified {
        consume(verified);
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_are_named_by_name_or_number() {
        for given in ["SIGKILL", "KILL", "kill", "9"] {
            assert_eq!(signal_name(given).unwrap(), "SIGKILL", "{given}");
        }
        let min = libc::SIGRTMIN();
        let five = format!("SIG{}", min + 5);
        for given in ["SIGRTMIN+5", "rtmin+5", &(min + 5).to_string(), &five] {
            assert_eq!(signal_name(given).unwrap(), five, "{given}");
        }
        assert_eq!(signal_name("SIGRTMAX").unwrap(), "SIG64");
        assert_eq!(signal_name("64").unwrap(), "SIG64");
        for bad in [
            "SIGNOPE",
            "0",
            "999",
            "",
            "65",
            "SIGRTMIN-1",
            "RTMAX+1",
            "RTMIN+x",
        ] {
            assert!(signal_name(bad).is_err(), "{bad}");
        }
    }
}
