//! `stockade`: the executor-facing side of the sandbox.
//!
//! - `confine` writes a launch request and prints the ConfinedArgv JSON;
//! - `run` confines, supervises and reports (streams passed through with markers after
//!   them, or captured into one JSON document with `--json`);
//! - `probe` shows the kernel facts and which guarantees each mode would get here;
//! - `classify` prints the verdict on a settled process spawned from a ConfinedArgv;
//! - `explain` execs the runner's `--explain` on a request file;
//! - `serve` answers `confine` requests read from stdin, for a provider that keeps it alive.
//!
//! Every failure of stockade itself, usage errors included, prints one `stockade: ` line
//! and exits 125 (126/127 when a command run without the runner cannot be started).
//!
//! Entry point: the C `main`, not Rust's `fn main`, as in the runner. std's start-up
//! would read `/proc/self/maps` (glibc computing the main thread's stack for std's stack
//! overflow guard) and set up an alternate signal stack on every run, and the launcher
//! is on the path of every command. What that start-up does that matters here is done
//! by hand in `main`: standard descriptors that are closed are opened on `/dev/null`
//! (so no file the launcher opens can land on fd 0-2), SIGPIPE is ignored (a closed
//! stdout is an error to report, not a silent death; commands get the default back, as
//! `Command` resets it), and stdout is flushed at exit.
// The unit-test harness brings its own `main`.
#![cfg_attr(not(test), no_main)]

mod commands;
mod control;
mod error;
mod journal;
mod proxy;
mod stage;
mod supervise;

/// The allocator of the musl builds (why: `stockade_policy::allocator`); glibc builds
/// keep glibc's.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: stockade_policy::allocator::Allocator =
    stockade_policy::allocator::Allocator::new();

use clap::Parser;
use commands::cli::{Cli, Command};
use commands::{classify, confine, explain, outcome, probe, run, serve};
use std::io::Write;
use stockade_policy::exit;

/// An exit status for `code`; anything outside 0-255 is a failure of stockade itself.
fn exit_status(code: i32) -> i32 {
    if (0..=255).contains(&code) {
        code
    } else {
        exit::RUNNER_FAILURE
    }
}

/// The process entry point (see the module comment for why it is the C one).
// SAFETY: `main` is the one C entry symbol of this binary; nothing else defines it.
#[cfg(not(test))]
#[unsafe(no_mangle)]
extern "C" fn main(argc: std::ffi::c_int, argv: *const *const std::ffi::c_char) -> std::ffi::c_int {
    open_standard_descriptors();
    // SAFETY: setting a signal's disposition to "ignore" before anything else runs.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    // Read before anything can change the argument memory (the stage scrubs the runner's
    // failure tag from it), and from `argv` itself: std's `args_os` is empty under musl.
    // SAFETY: argc/argv are what the kernel handed `main`; nothing has changed them yet.
    let args = unsafe { stockade_policy::c_main::arguments(argc, argv) };
    if args
        .get(1)
        .is_some_and(|a| a == stage::SUBCOMMAND || a == proxy::host::SUBCOMMAND)
    {
        // The stage (and the namespace's init, its copy) and the proxy host live as long
        // as the command, whose /proc shows their command line: the runner's failure tag
        // must go.
        // SAFETY: argc/argv are what the kernel handed `main`; no other thread exists.
        unsafe { stockade_policy::failure_tag::scrub_from_argv(argc, argv) };
    }
    let code = launcher_main(args);
    let _ = std::io::stdout().flush();
    code
}

/// Unit-test builds bring the harness's own entry point; this keeps the code reachable.
#[cfg(test)]
fn main() {
    open_standard_descriptors();
    std::process::exit(launcher_main(std::env::args_os().collect()))
}

/// Opens `/dev/null` on each of fd 0, 1 and 2 that is closed, as std's start-up does:
/// otherwise the next file opened (a request file, a cgroup) would become the stdin,
/// stdout or stderr of whatever writes there.
fn open_standard_descriptors() {
    for fd in 0..3 {
        // SAFETY: fcntl(F_GETFD) only queries a descriptor number; open returns a new
        // descriptor (the lowest free one, which is `fd`) that stays open on purpose.
        unsafe {
            if libc::fcntl(fd, libc::F_GETFD) == -1
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::EBADF)
            {
                libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
            }
        }
    }
}

fn launcher_main(args: Vec<std::ffi::OsString>) -> i32 {
    // The namespace stage and the proxy host are internal steps of a ConfinedArgv, not
    // user commands: they are dispatched before clap so that they never appear in help or
    // completions.
    if args.get(1).is_some_and(|a| a == stage::SUBCOMMAND) {
        return stage::main(&args[2..]);
    }
    if args.get(1).is_some_and(|a| a == proxy::host::SUBCOMMAND) {
        return proxy::host::main(&args[2..]);
    }
    if args
        .get(1)
        .is_some_and(|a| a == supervise::lifeline::DIE_WITH_PARENT)
    {
        return supervise::lifeline::die_with_parent_main(&args[2..]);
    }
    // A low file-size limit from the caller (`ulimit -f`) must fail a write, so that a
    // request too large for it is an error naming it (125) rather than the launcher
    // killed by SIGXFSZ without a word. Not for the two steps above: they start the
    // command, which gets the caller's disposition (`run` gives its child the default
    // back before exec).
    // SAFETY: installs the ignore disposition for one signal; no handler runs.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    let _ = e.print();
                    exit_status(0)
                }
                // No subcommand at all: the whole help, not a line, is the useful answer.
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    let _ = e.print();
                    exit_status(exit::RUNNER_FAILURE)
                }
                _ => {
                    let _ = writeln!(
                        std::io::stderr(),
                        "{}",
                        commands::usage::usage_error_line(&e, &args)
                    );
                    exit_status(exit::RUNNER_FAILURE)
                }
            };
        }
    };
    if let Err(message) = cli.check() {
        let _ = writeln!(std::io::stderr(), "stockade: {message}");
        return exit_status(exit::RUNNER_FAILURE);
    }
    let result = match &cli.command {
        Command::Confine(args) => confine::run(args),
        Command::Run(args) => run::run(args),
        Command::Probe(args) => probe::probe_command(args.json),
        Command::Classify(args) => classify::run(args),
        Command::Explain(args) => explain::run(args),
        Command::Outcome(args) => outcome::run(args),
        Command::Serve(_) => serve::run(),
    };
    match result {
        Ok(code) => exit_status(code),
        Err(e) => {
            // Not eprintln!: it panics when stderr is a closed pipe, and the exit code
            // must still say what happened. A terminal may be one whose output a command
            // stopped (after `stockade run`, the very reason for the error): the line is
            // dropped after a bound rather than hold the launcher for ever.
            let line = format!("stockade: {e}\n");
            if nix::unistd::isatty(std::io::stderr()).unwrap_or(false) {
                let until = std::time::Instant::now() + supervise::FINAL_WRITE_WAIT;
                supervise::output::write_stderr_until(&line, until);
            } else {
                let _ = std::io::stderr().write_all(line.as_bytes());
            }
            exit_status(e.exit_code())
        }
    }
}
