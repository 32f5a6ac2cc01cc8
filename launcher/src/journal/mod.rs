//! The journal's files (format and answers: `stockade_policy::journal`): written with
//! write, `fsync`, rename and a directory `fsync`, so a crash at any point leaves each
//! record whole or absent; read back by `stockade outcome`.
//!
//! The directory is `BASE/journal` in the control base, which no confined command can
//! reach (the base is hidden from every confined command), so no command can write,
//! replace or remove a record. An unconfined command (danger-full-access) runs as the
//! same user with nothing hidden: its records are as trustworthy as the command.

use crate::control::no_replace::rename_no_replace;
use crate::control::private_dir::{self, REQUEST_FILE};
use crate::error::LauncherError;
use std::ffi::OsString;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};
use stockade_policy::journal::{
    self, DirFacts, FINISHED_SUFFIX, Facts, JOURNAL_DIR, MAX_RECORD_BYTES, Requested, Requester,
    STARTED_SUFFIX, StatusFacts, VERSION, WITHDRAWN_FILE,
};
use stockade_policy::status::{STATUS_FILE, StatusRecord};
use stockade_policy::trust::FileKind;

fn fail(what: impl Into<String>) -> LauncherError {
    LauncherError::Journal(what.into())
}

/// The journal directory of this user's control base.
#[derive(Debug)]
pub struct Journal {
    base: PathBuf,
    dir: PathBuf,
}

impl Journal {
    /// Opens (creating it 0700 when missing) the journal directory, refusing one that is
    /// a link, not ours, or open to others; sweeps records older than the private
    /// directories' own limit.
    pub fn open() -> Result<Journal, LauncherError> {
        let base = private_dir::base()?;
        private_dir::ensure_base(&base)?;
        let dir = base.join(JOURNAL_DIR);
        match DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(fail(format!("cannot create {}: {e}", dir.display()))),
        }
        let meta = std::fs::symlink_metadata(&dir)
            .map_err(|e| fail(format!("cannot examine {}: {e}", dir.display())))?;
        private_dir::trusted(&meta, FileKind::Directory)
            .map_err(|u| fail(format!("{}: {u}; remove it", dir.display())))?;
        let journal = Journal { base, dir };
        journal.sweep();
        Ok(journal)
    }

    fn path(&self, key: &str, suffix: &str) -> PathBuf {
        self.dir.join(format!("{key}{suffix}"))
    }

    /// Records request `key` before anything can start; a key already in the journal is
    /// refused (a key names one request, and answers stay about that one).
    pub fn record_request(
        &self,
        key: &str,
        by: Requester,
        mode: stockade_policy::Mode,
        argv: &[OsString],
        request_dir: Option<&Path>,
    ) -> Result<(), LauncherError> {
        journal::check_key(key).map_err(fail)?;
        let cwd = std::env::current_dir().map_err(LauncherError::CurrentDir)?;
        let record = Requested {
            version: VERSION,
            key: key.into(),
            by,
            created: now(),
            mode: mode.to_string(),
            argv: argv
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            cwd: cwd.to_string_lossy().into_owned(),
            request_dir: request_dir
                .and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned()),
        };
        let bytes = serde_json::to_vec(&record).map_err(LauncherError::Json)?;
        self.write(&self.path(key, ""), &bytes).map_err(|e| match e.raw_os_error() {
            Some(libc::EEXIST) => fail(format!(
                "key {key:?} is already in the journal (a key names one request: choose a new one, and ask `stockade outcome {key}` about the old)"
            )),
            _ => fail(format!("cannot record request {key:?}: {e}")),
        })
    }

    /// Records that `run` is about to start an unconfined command.
    pub fn record_started(&self, key: &str) -> std::io::Result<()> {
        self.write(&self.path(key, STARTED_SUFFIX), b"{}")
    }

    /// Records the settled command's result (`run`'s result, or `classify`'s verdict);
    /// a result already recorded stays (EEXIST): the first one stands.
    pub fn record_finished(&self, key: &str, result: &serde_json::Value) -> std::io::Result<()> {
        let bytes = serde_json::to_vec(result).map_err(std::io::Error::other)?;
        if bytes.len() > MAX_RECORD_BYTES {
            return Err(std::io::Error::other(format!(
                "the result is {} bytes, over the journal's {MAX_RECORD_BYTES}",
                bytes.len()
            )));
        }
        self.write(&self.path(key, FINISHED_SUFFIX), &bytes)
    }

    /// Whether the request recorded under `key` is the one `classify` was handed: made by
    /// `confine`, for the private directory named `request_dir` (`None`: nothing
    /// confined).
    pub fn owner(&self, key: &str, request_dir: Option<&str>) -> Owner {
        let bytes = match read_record(&self.path(key, "")) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Owner::Missing,
            Err(e) => return Owner::Unreadable(e.to_string()),
        };
        let requested: Requested = match serde_json::from_slice(&bytes) {
            Ok(r) => r,
            Err(e) => return Owner::Unreadable(e.to_string()),
        };
        if requested.by != Requester::Confine || requested.request_dir.as_deref() != request_dir {
            return Owner::Other(format!(
                "journal key {key:?} names another request (recorded by {:?} for private directory {:?}, not {:?}): was the ConfinedArgv changed?",
                requested.by, requested.request_dir, request_dir
            ));
        }
        Owner::This
    }

    /// Writes `bytes` to a new file beside `path`, `fsync`s it, renames it to `path`
    /// unless something is there already (EEXIST), and `fsync`s the directory.
    fn write(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        let tmp = self
            .dir
            .join(format!(".tmp-{}-{}", std::process::id(), now_nanos()));
        let written = (|| {
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&tmp)?;
            file.write_all(bytes)?;
            file.sync_all()?;
            rename_no_replace(&tmp, path)?;
            File::open(&self.dir)?.sync_all()
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }

    /// Answers for `key`: the state, why, the request record, and the result when
    /// finished. An unconsumed request is withdrawn first, so that "not started" stays
    /// true.
    pub fn answer(&self, key: &str) -> Result<Answer, LauncherError> {
        journal::check_key(key).map_err(fail)?;
        let requested = match read_record(&self.path(key, "")) {
            Ok(Some(bytes)) => serde_json::from_slice::<Requested>(&bytes)
                .map_err(|e| fail(format!("the record of {key:?} is unreadable: {e}")))?,
            Ok(None) => {
                return Err(fail(format!(
                    "no request {key:?} in the journal {} (never recorded, or swept after {} hours)",
                    self.dir.display(),
                    private_dir::STALE_AFTER.as_secs() / 3600
                )));
            }
            Err(e) => return Err(fail(format!("cannot read the record of {key:?}: {e}"))),
        };
        let finished = read_record(&self.path(key, FINISHED_SUFFIX));
        let result = match &finished {
            Ok(Some(bytes)) => serde_json::from_slice(bytes).ok(),
            _ => None,
        };
        let dir = requested
            .request_dir
            .as_deref()
            .map(|name| self.request_dir_facts(name));
        let facts = Facts {
            finished: result.is_some(),
            started: self.path(key, STARTED_SUFFIX).exists(),
            dir,
            requested,
        };
        let (state, reason) = journal::judge(&facts);
        Ok(Answer {
            key: key.into(),
            state: state.as_str(),
            reason,
            requested: facts.requested,
            result,
        })
    }

    /// What the request's private directory shows; an unconsumed request is withdrawn
    /// (renamed away, which no runner then finds) before it is reported so.
    fn request_dir_facts(&self, name: &str) -> DirFacts {
        // A name that is not a plain entry of the base is not ours to look at.
        if name.contains('/') || name.starts_with('.') {
            return DirFacts::Gone;
        }
        let dir = self.base.join(name);
        if !dir.is_dir() {
            return DirFacts::Gone;
        }
        if dir.join(WITHDRAWN_FILE).exists() {
            return DirFacts::Withdrawn;
        }
        let withdrawn = rename_no_replace(&dir.join(REQUEST_FILE), &dir.join(WITHDRAWN_FILE));
        if withdrawn.is_ok() {
            return DirFacts::Unconsumed;
        }
        DirFacts::Consumed(status_facts(&dir.join(STATUS_FILE)))
    }

    /// Removes records older than the private directories' limit (their modification
    /// time: no command can reach them to change it).
    fn sweep(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let now = SystemTime::now();
        for entry in entries.flatten() {
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .is_some_and(|age| age > private_dir::STALE_AFTER);
            if old {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

/// Whose request a key names, as [`Journal::owner`] finds it.
#[derive(Debug)]
pub enum Owner {
    /// The request `classify` was handed.
    This,
    /// No record under the key (never made, or swept).
    Missing,
    /// The record cannot be read (why).
    Unreadable(String),
    /// Another request's: the key in the ConfinedArgv was changed, and one request's
    /// verdict must never stand for another's (why, in words).
    Other(String),
}

/// What `stockade outcome` prints.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    pub key: String,
    pub state: &'static str,
    pub reason: String,
    pub requested: Requested,
    /// The result `run` recorded (with the receipt), when finished.
    pub result: Option<serde_json::Value>,
}

fn status_facts(path: &Path) -> StatusFacts {
    match read_record(path) {
        Ok(None) => StatusFacts::Unreadable("the status file is gone".into()),
        Err(e) => StatusFacts::Unreadable(e.to_string()),
        Ok(Some(bytes)) => match StatusRecord::decode(&bytes) {
            Ok(None) => StatusFacts::Empty,
            Ok(Some(StatusRecord::Confined { .. })) => StatusFacts::Confined,
            Ok(Some(StatusRecord::Failed { kind, .. })) => StatusFacts::Failed(kind.to_string()),
            Err(e) => StatusFacts::Unreadable(e.to_string()),
        },
    }
}

/// A record's bytes (`None`: no such file), without following a link, at most
/// [`MAX_RECORD_BYTES`].
fn read_record(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    private_dir::trusted(&meta, FileKind::Regular)
        .map_err(|u| std::io::Error::other(u.to_string()))?;
    let mut bytes = Vec::new();
    file.take(MAX_RECORD_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() > MAX_RECORD_BYTES {
        return Err(std::io::Error::other("the record is too large"));
    }
    Ok(Some(bytes))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}
