//! `stockade outcome KEY`: what became of the request recorded under KEY (see
//! `stockade_policy::journal`), as one JSON object on stdout.

use crate::commands::cli::OutcomeArgs;
use crate::error::LauncherError;
use crate::journal::Journal;
use crate::supervise::stdout;

pub fn run(args: &OutcomeArgs) -> Result<i32, LauncherError> {
    let answer = Journal::open()?.answer(&args.key)?;
    let json = serde_json::to_string(&answer).map_err(LauncherError::Json)?;
    stdout::write(&format!("{json}\n"))?;
    Ok(0)
}
