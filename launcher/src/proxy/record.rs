//! The record of refused connections, written as they happen (see
//! `stockade_policy::network_denials` for the format and why it cannot be forged).
//!
//! Each distinct refusal is appended as one line with one `write`, so a proxy killed at
//! any moment leaves whole lines (a cut last line is skipped by the reader). The file is
//! created fresh (`O_EXCL`, no link followed, 0600) in the command's private directory,
//! which the command cannot reach.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Mutex;
use stockade_policy::network_denials::{MAX_RECORDED, MORE_LINE, NetworkDenial};

/// Where refusals go. Without a file they are only kept in memory (tests).
pub struct Record {
    inner: Mutex<Inner>,
}

struct Inner {
    file: Option<File>,
    seen: Vec<NetworkDenial>,
    more: bool,
}

impl Record {
    /// A record that keeps refusals in memory only.
    pub fn in_memory() -> Record {
        Record {
            inner: Mutex::new(Inner {
                file: None,
                seen: Vec::new(),
                more: false,
            }),
        }
    }

    /// A record written to `path`, which must not exist yet.
    pub fn create(path: &Path) -> io::Result<Record> {
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)?;
        // Every line this record can hold, reserved now: a command that fills the
        // filesystem must not make its refusals vanish (see `private_dir::reserve`).
        crate::control::private_dir::reserve(
            &file,
            stockade_policy::network_denials::MAX_LOG_BYTES,
        );
        let record = Record::in_memory();
        record.lock().file = Some(file);
        Ok(record)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A thread that panicked holding the lock left whole entries behind (each
        // change is one push or one flag): the data stays usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes one refusal: recorded once, up to the bound, then one "more" line.
    pub fn refused(&self, denial: NetworkDenial) {
        let mut inner = self.lock();
        if inner.seen.contains(&denial) {
            return;
        }
        let line = if inner.seen.len() >= MAX_RECORDED {
            if inner.more {
                return;
            }
            inner.more = true;
            format!("{MORE_LINE}\n")
        } else {
            let line = denial.line();
            inner.seen.push(denial);
            line
        };
        if let Some(file) = inner.file.as_mut() {
            // Nothing to do about a failed write but keep serving: the refusal itself
            // stands either way.
            let _ = file.write_all(line.as_bytes());
        }
    }

    /// The refusals recorded so far, and whether more were refused.
    #[cfg(test)]
    pub fn snapshot(&self) -> (Vec<NetworkDenial>, bool) {
        let inner = self.lock();
        (inner.seen.clone(), inner.more)
    }
}
