//! Writing stockade's own results to stdout. A stdout that is gone (a closed pipe, a full
//! disk) is a failure of stockade itself and goes through the one error path: one
//! `stockade: ` line and exit 125.

use crate::error::LauncherError;
use crate::supervise::output;
use std::io::Write;

/// Writes `text` to stdout and flushes it.
pub fn write(text: &str) -> Result<(), LauncherError> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(LauncherError::WriteOutput)
}

/// Writes a result that follows a command's run. A terminal there may be one the
/// command shares (its stdin): the command can stop the terminal's output (`TCOOFF`, as
/// Ctrl-S does), and a blocking write would then hold `stockade run` for ever, long
/// after the command ended. So on a terminal the write gives up at `until`, and the
/// result is lost with an error saying why. A pipe or file is the caller's alone and is
/// written as usual (a caller that reads slowly gets the whole result).
pub fn write_after_run(text: &str, until: std::time::Instant) -> Result<(), LauncherError> {
    if !nix::unistd::isatty(std::io::stdout()).unwrap_or(false) {
        return write(text);
    }
    if output::write_stdout_until(text, until) {
        return Ok(());
    }
    Err(LauncherError::WriteOutput(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!(
            "the terminal did not take the whole result within {} s after the command ended (its output is stopped: TCOOFF or Ctrl-S)",
            crate::supervise::FINAL_WRITE_WAIT.as_secs()
        ),
    )))
}
