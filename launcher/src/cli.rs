//! The command line of `stockade`. Parsing only: every decision is made elsewhere.

use clap::{Args, Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;
use stockade_policy::{Mode, PolicyRequest};

#[derive(Parser, Debug)]
#[command(
    name = "stockade",
    version,
    about = "Run commands confined by Landlock: stockade confine | run | classify",
    after_help = "Exit codes: the command's own code; 125 stockade or its runner failed (nothing ran); \
126 the program could not be executed; 127 the program was not found; 128+N killed by signal N.\n\
The runner is looked up in $STOCKADE_RUNNER, then next to this executable."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Write a launch request for CMD and print the ConfinedArgv JSON an executor spawns.
    Confine(ConfineArgs),
    /// Run CMD confined, passing stdin, stdout and stderr straight through.
    Run(RunArgs),
    /// Classify a settled process spawned from a ConfinedArgv: print one JSON verdict and
    /// remove the private directory (see docs/provider-contract.md).
    Classify(ClassifyArgs),
}

/// The policy flags every subcommand that takes a policy shares.
#[derive(Args, Debug, Clone)]
pub struct PolicyArgs {
    /// Sandbox mode: read-only, workspace-write or danger-full-access.
    #[arg(long, value_name = "MODE", default_value_t = Mode::WorkspaceWrite)]
    pub mode: Mode,
    /// Workspace root, writable in workspace-write mode [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// An extra writable root in workspace-write mode (repeatable).
    #[arg(long = "writable", value_name = "DIR")]
    pub writable: Vec<PathBuf>,
}

impl PolicyArgs {
    pub fn to_request(&self) -> PolicyRequest {
        PolicyRequest {
            mode: self.mode,
            workspace: self.workspace.clone(),
            writable: self.writable.clone(),
        }
    }
}

/// The command to run, after `--`.
#[derive(Args, Debug, Clone)]
pub struct CommandArgs {
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

#[derive(Args, Debug)]
pub struct ConfineArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    #[command(flatten)]
    pub command: CommandArgs,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    #[command(flatten)]
    pub command: CommandArgs,
}

#[derive(Args, Debug)]
pub struct ClassifyArgs {
    /// The ConfinedArgv JSON `stockade confine` printed (a file, or - for stdin).
    #[arg(long, value_name = "FILE|-")]
    pub confined: PathBuf,
    /// The process's exit code.
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::value_parser!(i32).range(0..=255),
        required_unless_present = "signal",
        conflicts_with = "signal"
    )]
    pub exit_code: Option<i32>,
    /// The signal that killed the process (SIGKILL, KILL or 9).
    #[arg(long, value_name = "NAME")]
    pub signal: Option<String>,
    /// The process's collected stderr (a file, or - for stdin) [default: empty].
    #[arg(long, value_name = "FILE|-")]
    pub stderr: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn mode_defaults_to_workspace_write_and_command_follows_dashes() {
        let cli = Cli::try_parse_from(["stockade", "confine", "--", "ls", "-l"]).unwrap();
        let Command::Confine(args) = cli.command else {
            panic!()
        };
        assert_eq!(args.policy.mode, Mode::WorkspaceWrite);
        assert_eq!(args.command.command, vec!["ls", "-l"]);
    }

    #[test]
    fn unknown_mode_and_missing_command_are_errors() {
        assert!(Cli::try_parse_from(["stockade", "run", "--mode", "x", "--", "ls"]).is_err());
        assert!(Cli::try_parse_from(["stockade", "run"]).is_err());
        assert!(Cli::try_parse_from(["stockade", "run", "ls"]).is_err());
    }

    #[test]
    fn classify_takes_exactly_one_of_exit_code_and_signal() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(
                ["stockade", "classify", "--confined", "-"]
                    .iter()
                    .chain(args),
            )
        };
        assert!(parse(&["--exit-code", "3"]).is_ok());
        assert!(parse(&["--signal", "SIGKILL", "--stderr", "f"]).is_ok());
        assert!(parse(&[]).is_err());
        assert!(parse(&["--exit-code", "3", "--signal", "KILL"]).is_err());
        assert!(parse(&["--exit-code", "256"]).is_err());
        assert!(parse(&["--exit-code", "-1"]).is_err());
    }
}
