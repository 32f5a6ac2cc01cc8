//! `stockade`: the executor-facing side of the sandbox.
//!
//! - `confine` writes a launch request and prints the ConfinedArgv JSON;
//! - `run` confines, supervises and reports (streams passed through with markers after
//!   them, or captured into one JSON document with `--json`);
//! - `probe` shows the kernel facts and which guarantees each mode would get here;
//! - `classify` prints the verdict on a settled process spawned from a ConfinedArgv.
//!
//! Every failure of stockade itself, usage errors included, prints one `stockade: ` line
//! and exits 125 (126/127 when a command run without the runner cannot be started).

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
use cli::{Cli, Command};
use std::io::Write;
use std::process::ExitCode;
use stockade_policy::exit;

fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(exit::RUNNER_FAILURE as u8))
}

/// A usage error as the one `stockade: ` line every failure of stockade prints: clap's
/// message with its lines joined, the usage kept, the closing `--help` hint dropped.
fn usage_error_line(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    let mut line = String::from("stockade:");
    for part in rendered.lines().map(str::trim) {
        if part.is_empty() || part.starts_with("For more information") {
            continue;
        }
        match part.strip_prefix("Usage: ") {
            Some(usage) => line.push_str(&format!("; usage: {usage}")),
            None => {
                line.push(' ');
                line.push_str(part.strip_prefix("error: ").unwrap_or(part));
            }
        }
    }
    line
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    let _ = e.print();
                    exit_code(0)
                }
                // No subcommand at all: the whole help, not a line, is the useful answer.
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    let _ = e.print();
                    exit_code(exit::RUNNER_FAILURE)
                }
                _ => {
                    let _ = writeln!(std::io::stderr(), "{}", usage_error_line(&e));
                    exit_code(exit::RUNNER_FAILURE)
                }
            };
        }
    };
    let result = match &cli.command {
        Command::Confine(args) => confine::run(args),
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
