//! `stockade classify`: the verdict on a settled process spawned from a ConfinedArgv.
//!
//! The decision itself is `stockade_policy::classify::classify`; this module gathers its
//! inputs (the ConfinedArgv JSON, the exit facts, the collected stderr, the runner's
//! status record) and consumes the private directory afterwards. `stockade run` uses
//! [`verdict`] for the same decision on the processes it supervises (and removes the
//! private directory it made itself, through `PrivateDir::remove`).

use crate::cli::ClassifyArgs;
use crate::error::LauncherError;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use stockade_policy::classify::{self, Settled, Status, Verdict};
use stockade_policy::confined::{CONTRACT_VERSION, ConfinedArgv, StatusChannel};
use stockade_policy::status::{CorruptStatus, MAX_RECORD_BYTES, STATUS_FILE, StatusRecord};

use crate::private_dir;

/// Reads what the status channel of `confined` says. Only an out-of-band channel counts:
/// an in-band status file could have been written by the command.
pub fn status(confined: &ConfinedArgv) -> Status {
    let (Some(path), Some(StatusChannel::OutOfBand)) =
        (confined.status_path.as_deref(), confined.status_channel)
    else {
        return Status::Unavailable;
    };
    let corrupt = |why: String| Status::OutOfBand(Err(CorruptStatus(why)));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path);
    let file = match file {
        Ok(f) => f,
        // Already classified, or removed as stale: no evidence either way.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Status::Unavailable,
        Err(e) => return corrupt(format!("cannot open the status file {path}: {e}")),
    };
    match file.metadata() {
        Ok(m) if m.file_type().is_file() => {}
        _ => return corrupt(format!("the status file {path} is not a regular file")),
    }
    let mut bytes = Vec::new();
    if let Err(e) = file
        .take(MAX_RECORD_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
    {
        return corrupt(format!("cannot read the status file {path}: {e}"));
    }
    Status::OutOfBand(StatusRecord::decode(&bytes))
}

/// The verdict on a process spawned from `confined` that settled with these facts.
pub fn verdict(
    confined: &ConfinedArgv,
    exit_code: Option<i32>,
    signal: Option<&str>,
    stderr: &str,
) -> Verdict {
    let settled = Settled {
        exit_code,
        signal,
        stderr,
    };
    classify::classify(confined, &settled, &status(confined))
}

/// Removes the private directory of `confined` (request leftovers and the status file).
/// Only a directory that looks like one `confine` made is removed: named `req-*`, holding
/// the status file, a real directory owned by us. Anything else is left alone.
pub fn consume(confined: &ConfinedArgv) {
    let Some(status) = confined.status_path.as_deref().map(Path::new) else {
        return;
    };
    let Some(dir) = status.parent() else { return };
    if status.file_name().is_some_and(|n| n == STATUS_FILE)
        && private_dir::own_private_dir(dir).is_some()
    {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The name of a signal given as a name (`SIGKILL`, `KILL`) or a number (`9`).
pub fn signal_name(given: &str) -> Result<String, LauncherError> {
    use nix::sys::signal::Signal;
    use std::str::FromStr;
    let bad = || LauncherError::BadSignal(given.to_string());
    let signal = match given.parse::<i32>() {
        Ok(n) => Signal::try_from(n).map_err(|_| bad())?,
        Err(_) => {
            let upper = given.to_ascii_uppercase();
            let name = if upper.starts_with("SIG") {
                upper
            } else {
                format!("SIG{upper}")
            };
            Signal::from_str(&name).map_err(|_| bad())?
        }
    };
    Ok(signal.as_str().to_string())
}

/// The most `classify` reads of either input. Executors pass a bounded stderr tail and a
/// small JSON object; anything larger is refused rather than read into memory whole.
pub const MAX_INPUT_BYTES: u64 = 64 << 20;

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
        std::fs::File::open(path).and_then(|f| f.take(limit).read_to_end(&mut bytes).map(|_| ()))
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
    let verdict = verdict(
        &confined,
        args.exit_code,
        signal.as_deref(),
        &String::from_utf8_lossy(&stderr),
    );
    let line = serde_json::to_string(&verdict).map_err(LauncherError::Json)?;
    crate::stdout::write(&format!("{line}\n"))?;
    consume(&confined);
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
        for bad in ["SIGNOPE", "0", "999", ""] {
            assert!(signal_name(bad).is_err(), "{bad}");
        }
    }
}
