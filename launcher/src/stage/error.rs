//! Why the stage could not be set up, and the one failure line it prints for it (tagged
//! as the runner's own are: to the executor the stage is part of the runner).

use std::ffi::CString;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use stockade_policy::exit;
use stockade_policy::failure_tag;

/// Why the stage could not be set up.
#[derive(Debug)]
pub struct StageError {
    pub(super) what: String,
    pub(super) source: Option<io::Error>,
}

impl std::fmt::Display for StageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.source {
            Some(e) => write!(f, "namespace stage: {}: {e}", self.what),
            None => write!(f, "namespace stage: {}", self.what),
        }
    }
}

impl std::error::Error for StageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|e| e as _)
    }
}

pub(super) fn fail(what: impl Into<String>) -> StageError {
    StageError {
        what: what.into(),
        source: None,
    }
}

pub(super) fn os_fail(what: impl Into<String>) -> StageError {
    StageError {
        what: what.into(),
        source: Some(io::Error::last_os_error()),
    }
}

pub(super) fn check(ret: libc::c_long, what: impl FnOnce() -> String) -> Result<(), StageError> {
    if ret < 0 {
        Err(os_fail(what()))
    } else {
        Ok(())
    }
}

pub(super) fn cstr(p: &Path) -> Result<CString, StageError> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| fail(format!("{} contains a NUL byte", p.display())))
}

/// The runner's failure tag, for the stage's own failure lines.
pub(super) static TAG: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// Prints the one failure line, as the runner would (tagged when a tag was given).
pub(super) fn report(err: &StageError) {
    let tag = TAG.get().and_then(|t| t.as_deref());
    let line = format!(
        "{}{}\n",
        failure_tag::line_prefix(tag),
        exit::one_line(&err.to_string())
    );
    let _ = io::stderr().write_all(line.as_bytes());
}
