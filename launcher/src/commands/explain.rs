//! `stockade explain FILE`: the runner's `--explain`, reachable by name after install
//! (the runner lives in a libexec directory, off `PATH`). The launcher finds the runner
//! as it does for `confine` and replaces itself with `stockade-runner --explain FILE`, so
//! the output, errors and exit code are the runner's own. With `--path`, the launcher
//! answers itself, from the policy model (`explain_path.rs`).

use crate::commands::cli::ExplainArgs;
use crate::control::locate;
use crate::error::LauncherError;
use std::os::unix::process::CommandExt;

/// Returns only when the runner could not be executed.
pub fn run(args: &ExplainArgs) -> Result<i32, LauncherError> {
    if !args.paths.is_empty() {
        return crate::commands::explain_path::run(&args.file, &args.paths);
    }
    let runner = locate::runner()?;
    let source = std::process::Command::new(&runner)
        .arg("--explain")
        .arg(&args.file)
        .exec();
    Err(LauncherError::ExecRunner {
        path: runner,
        source,
    })
}
