//! The runner's end of the out-of-band status channel (format: `stockade_policy::status`).
//!
//! The status file is opened right after the request is consumed and before anything is
//! confined: without following a symbolic link, close-on-exec (so the target never holds
//! the descriptor), and only if it passes the request file's trust check (trust.rs: a
//! regular file of ours, no group or other bits; the launcher creates it 0600) and is
//! still empty (a status file is used once). The runner writes one record, with one
//! `write(2)`: `confined` just before `execve`, or `failed` when it fails before that.
//!
//! Exit 126/127 (target not executable / not found) happen after the `confined` record:
//! confinement was applied and the command itself could not start, which the exit code
//! and stderr line already say. They are not runner failures and add no record.

use crate::error::RunnerError;
use crate::trust;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use stockade_policy::descriptors::OpenOutside;
use stockade_policy::environment::withheld::Withheld;
use stockade_policy::guarantees::Enforcement;
use stockade_policy::status::{MAX_RECORD_BYTES, StatusRecord, TargetStart};

/// The soft file size limit, when there is one. A spawner may start the runner with a
/// low one (`ulimit -f`): the write of a record past it would kill the runner with
/// `SIGXFSZ` halfway, leaving a cut record that reads as tampering (or none at all, and
/// a command "killed by a signal" that never ran). So a limit below a record's size is a
/// runner failure before anything is written.
fn file_size_limit() -> Option<u64> {
    use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit};
    getrlimit(Resource::RLIMIT_FSIZE)
        .ok()
        .map(|(soft, _)| soft)
        .filter(|&soft| soft != RLIM_INFINITY)
}

/// An open status file that has not received its record yet.
pub struct StatusFile {
    file: File,
    path: PathBuf,
}

impl StatusFile {
    pub fn open(path: &Path) -> Result<StatusFile, RunnerError> {
        let err = |reason: String| RunnerError::Status {
            path: path.into(),
            reason,
        };
        let file = std::fs::OpenOptions::new()
            .append(true)
            .custom_flags(trust::OPEN_FLAGS)
            .open(path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => err("it is a symbolic link; refusing to follow it".into()),
                // A directory, or a FIFO nobody reads (O_NONBLOCK makes that fail, not hang).
                Some(libc::EISDIR | libc::ENXIO) => err("it is not a regular file".into()),
                _ => err(e.to_string()),
            })?;
        let meta = file.metadata().map_err(|e| err(e.to_string()))?;
        trust::check(&meta).map_err(|untrusted| err(untrusted.to_string()))?;
        if meta.len() != 0 {
            return Err(err("it is not empty (a status file is used once)".into()));
        }
        if let Some(limit) = file_size_limit().filter(|&l| l < MAX_RECORD_BYTES as u64) {
            return Err(err(format!(
                "the file size limit this runner was started with (RLIMIT_FSIZE, `ulimit -f`) is {limit} bytes, below the {MAX_RECORD_BYTES} a status record may take; raise it"
            )));
        }
        Ok(StatusFile {
            file,
            path: path.into(),
        })
    }

    fn write(mut self, record: &StatusRecord) -> Result<(), RunnerError> {
        self.file
            .write_all(&record.encode())
            .map_err(|e| RunnerError::Status {
                path: self.path.clone(),
                reason: format!("cannot write the status record: {e}"),
            })
    }

    /// Records that confinement is applied and the target is about to be executed.
    pub fn confined(
        self,
        enforcement: Enforcement,
        start: TargetStart,
        metadata_open: Vec<OpenOutside>,
        env_removed: Withheld,
    ) -> Result<(), RunnerError> {
        self.write(&StatusRecord::Confined {
            enforcement,
            start,
            metadata_open,
            env_removed,
        })
    }

    /// Records a runner failure. Best effort: the stderr line and exit 125 still say it.
    pub fn failed(self, err: &RunnerError) {
        let _ = self.write(&StatusRecord::Failed {
            kind: err.kind(),
            message: err.to_string(),
        });
    }
}
