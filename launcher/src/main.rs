//! `stockade`: the executor-facing side of the sandbox.
//!
//! - `confine` writes a launch request and prints the ConfinedArgv JSON;
//! - `run` confines, spawns and waits, passing the command's streams through;
//! - `probe` shows the kernel facts and which guarantees each mode would get here.
//! - `classify` prints the verdict on a settled process spawned from a ConfinedArgv.
//!
//! Every failure of stockade itself prints one `stockade: ` line and exits 125.

mod classify;
mod cli;
mod confine;
mod containment;
mod duration;
mod env;
mod error;
mod locate;
mod output;
mod probe;
mod request_file;
mod run;
mod stdout;
mod supervise;
mod tail;
mod terminal;

use clap::Parser;
use cli::{Cli, Command, ConfineArgs};
use error::LauncherError;
use std::io::Write;
use std::process::ExitCode;
use stockade_policy::exit;

fn confine_command(args: &ConfineArgs) -> Result<i32, LauncherError> {
    let confinement = confine::confine(
        &args.policy.to_request(),
        &args.command.command,
        env::target_env(&args.env).vars,
    )?;
    // Serialising a plain struct of strings cannot fail.
    let json = serde_json::to_string(&confinement.confined).unwrap_or_default();
    if let Err(e) = stdout::write(&format!("{json}\n")) {
        // Nobody will ever spawn a request we could not hand over.
        if let Some(dir) = confinement.private_dir {
            dir.remove();
        }
        return Err(e);
    }
    Ok(0)
}

fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(exit::RUNNER_FAILURE as u8))
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            let code = match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => 0,
                _ => exit::RUNNER_FAILURE,
            };
            let _ = e.print();
            return exit_code(code);
        }
    };
    let result = match &cli.command {
        Command::Confine(args) => confine_command(args),
        Command::Run(args) => run::run(args),
        Command::Probe(args) => probe::probe_command(args.json),
        Command::Classify(args) => classify::run(args),
    };
    match result {
        Ok(code) => exit_code(code),
        Err(e) => {
            // Not eprintln!: it panics when stderr is a closed pipe, and the exit code
            // must still say what happened.
            let _ = writeln!(std::io::stderr(), "stockade: {e}");
            exit_code(e.exit_code())
        }
    }
}
