//! `stockade run`: confine, spawn, wait, then report what happened in the wrapper
//! conventions users know.

use crate::classify;
use crate::cli::RunArgs;
use crate::confine;
use crate::env;
use crate::error::LauncherError;
use crate::supervise;
use nix::sys::signal::Signal;
use stockade_policy::exit;

/// Runs the command and returns the exit code `stockade run` should exit with.
pub fn run(args: &RunArgs) -> Result<i32, LauncherError> {
    let confinement = confine::confine(
        &args.policy.to_request(),
        &args.command.command,
        env::target_env(),
    )?;
    let c = &confinement.confined;
    let settled = supervise::run(&c.argv, &c.denial_signatures);
    // The verdict reads the runner's status record, so it comes before the private
    // directory is removed.
    let runner_failed = settled.as_ref().is_ok_and(|s| {
        let signal = s.signal.and_then(|n| Signal::try_from(n).ok());
        let stderr = String::from_utf8_lossy(&s.stderr_tail);
        classify::verdict(c, s.exit_code, signal.map(Signal::as_str), &stderr).runner_failed
    });
    if let Some(dir) = confinement.private_dir {
        dir.remove();
    }
    let settled = settled?;

    // The same rule as `classify::is_denied`, applied to the whole stream rather than
    // the tail: a failed exit and a signature anywhere in stderr.
    let denied =
        !runner_failed && !matches!(settled.exit_code, None | Some(0)) && settled.denial_seen;
    if denied {
        eprintln!(
            "stockade: sandbox denied a file access under {} mode",
            c.mode
        );
    }
    Ok(match (settled.exit_code, settled.signal) {
        (Some(code), _) => code,
        (None, Some(sig)) => exit::SIGNAL_BASE + sig,
        (None, None) => exit::RUNNER_FAILURE,
    })
}
