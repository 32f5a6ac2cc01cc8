//! `stockade run`: confine, spawn, wait, then report what happened in the wrapper
//! conventions users know.

use crate::cli::RunArgs;
use crate::confine;
use crate::env;
use crate::error::LauncherError;
use crate::supervise;
use stockade_policy::classify;
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
    if let Some(dir) = confinement.private_dir {
        dir.remove();
    }
    let settled = settled?;

    let stderr = String::from_utf8_lossy(&settled.stderr_tail);
    let runner_failed =
        classify::runner_failure_detail(settled.exit_code, &stderr, &c.runner_failure_rules)
            .is_some();
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
