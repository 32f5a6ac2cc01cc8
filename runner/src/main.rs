//! `stockade-runner`: consumes one launch request, confines itself, and execs the target.
//!
//! Order: consume request -> open status file -> chdir(cwd) -> no_new_privs -> Landlock
//! -> `confined` status record -> execve. A failure after the status file is open also
//! writes a `failed` record (see status.rs).
//!
//! Failure contract: every failure before the target starts prints exactly one stderr
//! line beginning `stockade-runner: ` and exits 125; a target that is not found exits
//! 127, one that cannot be executed 126, each with one such line. On success the runner
//! writes nothing at all: the target owns stdout and stderr.

mod error;
mod exec;
mod explain;
mod request_file;
mod ruleset;
mod status;

use error::RunnerError;
use status::StatusFile;
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use stockade_policy::exit::RUNNER_PREFIX;
use stockade_policy::grants;
use stockade_policy::guarantees::{self, Enforcement, Verdict};
use stockade_policy::{LaunchRequest, Mode};

const USAGE: &str = "usage: stockade-runner --request FILE | --explain FILE | --version";

enum Command {
    Run(PathBuf),
    Explain(PathBuf),
    Version,
    Help,
}

fn parse_args(mut args: impl Iterator<Item = OsString>) -> Result<Command, RunnerError> {
    let flag = args
        .next()
        .ok_or_else(|| RunnerError::Usage("missing arguments".into()))?;
    let command = match flag.to_str() {
        Some("--request") | Some("--explain") => {
            let file = args.next().ok_or_else(|| {
                RunnerError::Usage(format!("{} needs a FILE", flag.to_string_lossy()))
            })?;
            if flag == "--request" {
                Command::Run(file.into())
            } else {
                Command::Explain(file.into())
            }
        }
        Some("--version") => Command::Version,
        Some("--help") | Some("-h") => Command::Help,
        _ => {
            return Err(RunnerError::Usage(format!(
                "unknown argument {:?}",
                flag.to_string_lossy()
            )));
        }
    };
    if let Some(extra) = args.next() {
        return Err(RunnerError::Usage(format!(
            "unexpected argument {:?}",
            extra.to_string_lossy()
        )));
    }
    Ok(command)
}

/// Applies the request's confinement to this process. After this returns, everything
/// this process and its descendants do is confined, with the returned enforcement.
fn confine(request: &LaunchRequest) -> Result<Enforcement, RunnerError> {
    if request.policy.mode == Mode::DangerFullAccess {
        return Err(RunnerError::Unconfined);
    }
    std::env::set_current_dir(&request.cwd).map_err(|source| RunnerError::Chdir {
        cwd: request.cwd.clone(),
        source,
    })?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| RunnerError::NoNewPrivs(e.into()))?;
    let applied = ruleset::restrict(&grants::grants(&request.policy))?;
    // Judge what the kernel actually gave, with the same rules the launcher used to
    // report enforcement to the executor.
    let achieved = match guarantees::verdict(request.policy.mode, &applied.facts) {
        Verdict::Confined(e) if applied.enforced => e,
        Verdict::Unavailable { missing } => return Err(RunnerError::Unavailable { missing }),
        _ => {
            return Err(RunnerError::Landlock(
                "the kernel did not enforce the ruleset (Landlock unsupported or disabled)".into(),
            ));
        }
    };
    if achieved == Enforcement::Partial && request.enforcement == Enforcement::Full {
        return Err(RunnerError::LessThanReported {
            reported: request.enforcement,
        });
    }
    Ok(achieved)
}

fn run(path: &std::path::Path) -> RunnerError {
    let request = match request_file::consume(path) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let status = match request.status_path.as_deref().map(StatusFile::open) {
        None => None,
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => return e,
    };
    let achieved = match confine(&request) {
        Ok(achieved) => achieved,
        Err(e) => {
            if let Some(status) = status {
                status.failed(&e);
            }
            return e;
        }
    };
    // The last step before execve: from here on the target's exit facts are its own.
    if let Some(status) = status
        && let Err(e) = status.confined(achieved)
    {
        return e;
    }
    exec::exec(&request)
}

/// Prints the one failure line. Newlines in paths are escaped so it stays one line.
fn report(err: &RunnerError) {
    let message = err.to_string().replace('\n', "\\n").replace('\r', "\\r");
    let line = format!("{RUNNER_PREFIX}{message}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// Writes to stdout without `println!`, which panics on a closed pipe.
fn print(text: &str) -> ExitCode {
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(stockade_policy::exit::RUNNER_FAILURE as u8),
    }
}

fn main() -> ExitCode {
    let err = match parse_args(std::env::args_os().skip(1)) {
        Ok(Command::Run(path)) => run(&path),
        Ok(Command::Explain(path)) => match explain::explain(&path) {
            Ok(text) => return print(&text),
            Err(e) => e,
        },
        Ok(Command::Version) => {
            return print(&format!("stockade-runner {}\n", env!("CARGO_PKG_VERSION")));
        }
        Ok(Command::Help) => return print(&format!("{USAGE}\n")),
        Err(e) => e,
    };
    report(&err);
    ExitCode::from(err.exit_code() as u8)
}
