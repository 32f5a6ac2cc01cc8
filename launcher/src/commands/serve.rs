//! `stockade serve`: `stockade confine` for a provider that keeps one process alive
//! instead of starting one per command (a process start is most of what `confine`
//! costs, and a synchronous caller waits for all of it).
//!
//! The channel is the process's own stdin and stdout, pipes only its parent holds: no
//! socket to find, no peer to authenticate, nothing a confined command can reach (it
//! inherits neither end, and Landlock keeps it from this process's `/proc` entries).
//! Requests are answered one at a time, in order, each exactly as `stockade confine
//! ARGS` started in the request's directory would answer it, with this process's
//! environment (a provider whose environment changed starts a new one). Nothing from
//! one request is kept for the next but what a `confine` process would find on disk
//! too, and the private directory made ahead after each answer, while the caller runs
//! the command (`control::spare`): the next request only writes its files.
//!
//! A request is one line of JSON, `{"cwd": DIR, "args": [ARG...]}` (the arguments after
//! `stockade confine`); the answer one line, `{"confined": CONFINEDARGV}` or `{"error":
//! "stockade: ...", "exitCode": N}` (what `confine` would have printed on stderr and
//! exited with). A line that is not such a request is answered with an error too; one
//! longer than [`MAX_REQUEST`] ends the process (its tail could not be told from the
//! next request). stdin's end ends the process with 0.

use crate::commands::cli::{Cli, Command};
use crate::commands::{confine, usage};
use crate::control::{locate, private_dir, spare};
use crate::error::LauncherError;
use clap::{CommandFactory, FromArgMatches};
use serde::Deserialize;
use std::ffi::OsString;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use stockade_policy::exit;

/// The longest request line: a command's arguments and environment are limited to a
/// few MiB by the kernel (`ARG_MAX`), and the request carries the arguments only.
pub const MAX_REQUEST: u64 = 8 << 20;

/// One request line.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    /// Where `stockade confine` would have been started (absolute).
    cwd: PathBuf,
    /// The arguments after `stockade confine`.
    args: Vec<String>,
}

pub fn run() -> Result<i32, LauncherError> {
    let served = serve_requests();
    // Whatever ended it: the directory made ahead for a next request is not needed.
    spare::discard();
    served
}

fn serve_requests() -> Result<i32, LauncherError> {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut output = std::io::stdout().lock();
    // The parser is built once (every subcommand, option and help text: a tenth of a
    // request's CPU time when built per request); each request's arguments are matched
    // against it afresh, nothing of one request's matches kept for the next.
    let mut parser = Cli::command();
    loop {
        let Some(line) = next_line(&mut input).map_err(LauncherError::Serve)? else {
            return Ok(0);
        };
        if !locate::launcher_unchanged() {
            return Err(LauncherError::Serve(
                "this launcher's file was replaced while it served (an upgrade?); start stockade serve again".into(),
            ));
        }
        answer(&line, &mut parser, &mut output)?;
        // While the caller runs the command: the next request's directory, made now.
        if let Ok(base) = private_dir::base() {
            spare::prepare(&base);
        }
    }
}

/// The next request line without its newline; `None` at the end of stdin.
fn next_line(input: &mut impl BufRead) -> Result<Option<Vec<u8>>, String> {
    let mut line = Vec::new();
    let read = std::io::Read::take(&mut *input, MAX_REQUEST + 1)
        .read_until(b'\n', &mut line)
        .map_err(|e| format!("cannot read a request from stdin: {e}"))?;
    if read == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        return Err(if read as u64 > MAX_REQUEST {
            format!("a request line is longer than {MAX_REQUEST} bytes")
        } else {
            "stdin ended in the middle of a request line".into()
        });
    }
    line.pop();
    Ok(Some(line))
}

/// Answers one request line on `output`; only a failure to write the answer is an error.
fn answer(
    line: &[u8],
    parser: &mut clap::Command,
    output: &mut impl Write,
) -> Result<(), LauncherError> {
    let prepared = prepare(line, parser);
    // Back to `/` once prepared (whatever came of it), before anything is written.
    leave_directory();
    match prepared {
        Ok(prepared) => {
            prepared.hand_over(|json| write_line(output, &format!("{{\"confined\":{json}}}")))
        }
        Err((line, code)) => {
            let refusal = serde_json::json!({ "error": line, "exitCode": code });
            write_line(output, &refusal.to_string())
        }
    }
}

/// Back to `/`, so that between requests this process holds no workspace (one being
/// removed, a filesystem being unmounted).
fn leave_directory() {
    let _ = std::env::set_current_dir("/");
}

/// The request's ConfinedArgv, prepared as `stockade confine` would; or the one line and
/// the exit code `confine` would have failed with.
fn prepare(line: &[u8], parser: &mut clap::Command) -> Result<confine::Prepared, (String, i32)> {
    let failed = |message: String| (format!("stockade: {message}"), exit::RUNNER_FAILURE);
    let request: Request = serde_json::from_slice(line).map_err(|e| {
        failed(format!(
            "not a serve request ({e}): one JSON object a line, {{\"cwd\": DIR, \"args\": [CONFINE ARGS...]}}"
        ))
    })?;
    if !request.cwd.is_absolute() {
        return Err(failed(format!(
            "the request's cwd {} is not an absolute path",
            request.cwd.display()
        )));
    }
    std::env::set_current_dir(&request.cwd)
        .map_err(|e| failed(format!("cannot enter {}: {e}", request.cwd.display())))?;
    let words = ["stockade", "confine"].map(String::from);
    let argv: Vec<OsString> = words
        .into_iter()
        .chain(request.args)
        .map(OsString::from)
        .collect();
    let cli = parse(parser, &argv).map_err(|e| {
        use clap::error::ErrorKind;
        match e.kind() {
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => failed(
                "--help and --version are not confine requests (stockade confine --help)".into(),
            ),
            _ => (usage::usage_error_line(&e, &argv), exit::RUNNER_FAILURE),
        }
    })?;
    cli.check().map_err(failed)?;
    let Command::Confine(args) = &cli.command else {
        return Err(failed("not a confine request".into()));
    };
    confine::prepared(args).map_err(|e| {
        let code = e.exit_code();
        let code = if (0..=255).contains(&code) {
            code
        } else {
            exit::RUNNER_FAILURE
        };
        (format!("stockade: {e}"), code)
    })
}

/// What `Cli::try_parse_from` gives, from the kept `parser`.
fn parse(parser: &mut clap::Command, argv: &[OsString]) -> Result<Cli, clap::Error> {
    let mut matches = parser.try_get_matches_from_mut(argv)?;
    Cli::from_arg_matches_mut(&mut matches).map_err(|e| e.format(parser))
}

fn write_line(output: &mut impl Write, text: &str) -> Result<(), LauncherError> {
    output
        .write_all(text.as_bytes())
        .and_then(|()| output.write_all(b"\n"))
        .and_then(|()| output.flush())
        .map_err(LauncherError::WriteOutput)
}
