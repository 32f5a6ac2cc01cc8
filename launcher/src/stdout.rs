//! Writing stockade's own results to stdout. A stdout that is gone (a closed pipe, a full
//! disk) is a failure of stockade itself and goes through the one error path: one
//! `stockade: ` line and exit 125.

use crate::error::LauncherError;
use std::io::Write;

/// Writes `text` to stdout and flushes it.
pub fn write(text: &str) -> Result<(), LauncherError> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(LauncherError::WriteOutput)
}
