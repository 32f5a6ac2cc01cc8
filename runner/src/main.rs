//! `stockade-runner`: consumes one launch request, confines itself, and execs the target.
//!
//! Order: consume request -> open status file -> refuse danger-full-access -> build the
//! seccomp filter (a filter that cannot be built fails before anything changes) ->
//! chdir(cwd) -> new session (stdin a terminal, not a group leader) -> no_new_privs ->
//! Landlock -> drop capabilities -> inherited fds marked close-on-exec -> install the
//! filter (last: it filters what the steps before use) -> judge what the kernel gave
//! against what was reported -> `confined` status record -> execve. A failure after the
//! status file is open also writes a `failed` record (see status.rs). The status file
//! is close-on-exec, and written with plain write(2), which the filter lets through.
//!
//! Failure contract: every failure before the target starts prints exactly one stderr
//! line beginning `stockade-runner: ` and exits 125; a target that is not found exits
//! 127, one that cannot be executed 126, each with one such line. On success the runner
//! writes nothing at all: the target owns stdout and stderr.
//!
//! Entry point: the C `main`, not Rust's `fn main`. std's start-up would otherwise read
//! `/proc/self/maps`, install signal stacks and set SIGPIPE to "ignored" on every run,
//! losing the disposition the caller left, which the target must get (exec.rs: the
//! runner ignores SIGPIPE itself, and restores the inherited disposition just before
//! `execve`); the runner is on the path of every command. `std::env::args_os` still
//! works (glibc hands argv to std's initialiser).
// The unit-test harness brings its own `main`.
#![cfg_attr(not(test), no_main)]

mod caps;
mod error;
mod exec;
mod explain;
mod fds;
mod request_file;
mod ruleset;
mod seccomp;
mod session;
mod status;
mod trust;

use error::RunnerError;
use status::StatusFile;
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use stockade_policy::LaunchRequest;
use stockade_policy::exit::{self, RUNNER_PREFIX};
use stockade_policy::guarantees::{self, Asks, Enforcement, KernelFacts, Verdict};

/// `--help`: what this program is, before how to call it. Users meet it in
/// `/usr/libexec/stockade/` and wonder; the answer is that `stockade` starts it.
const HELP: &str = "\
stockade-runner: the confining runner of stockade.

It consumes one launch request file written by `stockade confine` (or `stockade run`),
confines itself with Landlock, seccomp and a capability drop, and execs the command the
request names. It is normally started by `stockade`, not by hand: executors spawn the
`argv` that `stockade confine` prints, which starts with this program.

usage: stockade-runner --request FILE | --explain FILE | --version | --help

  --request FILE   consume FILE (it is unlinked before it is read), confine, exec
  --explain FILE   print what FILE would do and whether it would be accepted; consumes nothing
  --version        print the version

Failures before the command starts print one line starting `stockade-runner: ` and exit
125 (126: the program cannot be executed, 127: not found).

Examples:
  stockade confine --mode read-only -- ls /root > c.json
  stockade-runner --explain \"$(jq -r '.argv[2]' c.json)\"     # or: stockade explain FILE
  \"$(jq -r '.argv[0]' c.json)\" --request \"$(jq -r '.argv[2]' c.json)\"

See stockade-runner(1) and stockade(1).
";

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
    let policy = &request.policy;
    if !policy.mode.is_confined() {
        return Err(RunnerError::Unconfined);
    }
    let filter = seccomp::program(policy)?;
    std::env::set_current_dir(&request.cwd).map_err(|source| RunnerError::Chdir {
        cwd: request.cwd.clone(),
        source,
    })?;
    session::detach_from_terminal()?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| RunnerError::NoNewPrivs(e.into()))?;
    let landlock_abi = ruleset::restrict(policy)?;
    caps::drop_all()?;
    fds::restrict(&policy.keep_fds)?;
    seccomp::install(&filter)?;
    // Judge what the kernel actually gave, with the same rules the launcher used to
    // report enforcement to the executor. Reaching here means the filter is installed.
    let achieved = KernelFacts {
        landlock_abi,
        seccomp: true,
    };
    judge(&Asks::of(policy), &achieved, request)
}

/// Refuses to start the target when it would get less than the executor was told.
fn judge(
    asks: &Asks,
    achieved: &KernelFacts,
    request: &LaunchRequest,
) -> Result<Enforcement, RunnerError> {
    let enforcement = match guarantees::verdict(asks, achieved) {
        Verdict::Confined(e) => e,
        Verdict::Unavailable { missing } => return Err(RunnerError::Unavailable { missing }),
        Verdict::Unconfined => return Err(RunnerError::Unconfined),
    };
    let given = guarantees::enforced(asks, achieved);
    if let Some(&guarantee) = request.guarantees.iter().find(|g| !given.contains(g)) {
        return Err(RunnerError::NotAchieved { guarantee });
    }
    if enforcement == Enforcement::Partial && request.enforcement == Enforcement::Full {
        return Err(RunnerError::LessThanReported {
            reported: request.enforcement,
        });
    }
    Ok(enforcement)
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
    let line = format!("{RUNNER_PREFIX}{}\n", exit::one_line(&err.to_string()));
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// Writes to stdout without `println!`, which panics on a closed pipe, and flushes: with
/// the C entry point nothing flushes std's buffer at exit. A failed write is a runner
/// failure like any other: one stderr line and exit 125.
fn print(text: &str) -> Result<(), RunnerError> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(RunnerError::Stdout)
}

/// The process entry point (see the module comment for why it is the C one).
// SAFETY: `main` is the one C entry symbol of this binary; nothing else defines it.
#[cfg(not(test))]
#[unsafe(no_mangle)]
extern "C" fn main(
    _argc: std::ffi::c_int,
    _argv: *const *const std::ffi::c_char,
) -> std::ffi::c_int {
    runner_main()
}

/// Unit-test builds bring the harness's own entry point; this keeps the code reachable.
#[cfg(test)]
fn main() {
    std::process::exit(runner_main())
}

fn runner_main() -> i32 {
    exec::ignore_sigpipe_for_now();
    let result = match parse_args(std::env::args_os().skip(1)) {
        Ok(Command::Run(path)) => Err(run(&path)),
        Ok(Command::Explain(path)) => explain::explain(&path).and_then(|text| print(&text)),
        Ok(Command::Version) => print(&format!("stockade-runner {}\n", env!("CARGO_PKG_VERSION"))),
        Ok(Command::Help) => print(HELP),
        Err(e) => Err(e),
    };
    let Err(err) = result else {
        return 0;
    };
    report(&err);
    err.exit_code()
}

#[cfg(test)]
mod tests {
    use super::*;
    use stockade_policy::guarantees::Guarantee;
    use stockade_policy::{Mode, Network};

    fn request(enforcement: Enforcement, guarantees: Vec<Guarantee>) -> LaunchRequest {
        LaunchRequest {
            argv: vec!["true".into()],
            cwd: "/".into(),
            env: Vec::new(),
            policy: stockade_policy::Policy {
                mode: Mode::ReadOnly,
                workspace: "/".into(),
                writable_roots: Vec::new(),
                tmpdir: None,
                network: Network::Deny,
                allow_tcp_connect: Vec::new(),
                allow_unix_sockets: false,
                keep_fds: Vec::new(),
            },
            enforcement,
            guarantees,
            status_path: None,
        }
    }

    fn achieved(abi: u32) -> KernelFacts {
        KernelFacts {
            landlock_abi: abi,
            seccomp: true,
        }
    }

    #[test]
    fn a_reported_guarantee_the_kernel_did_not_give_is_refused() {
        let asks = Asks::defaults(Mode::ReadOnly);
        let all = guarantees::enforced(&asks, &achieved(7));
        let r = request(Enforcement::Full, all.clone());
        assert!(judge(&asks, &achieved(7), &r).is_ok());
        // Scopes missing (ABI 5): the signals guarantee was promised, so refuse.
        let err = judge(&asks, &achieved(5), &r).unwrap_err();
        assert!(
            matches!(
                err,
                RunnerError::NotAchieved {
                    guarantee: Guarantee::Signals
                }
            ),
            "{err}"
        );
        // Reported partial with what ABI 5 gives: accepted.
        let partial = request(
            Enforcement::Partial,
            guarantees::enforced(&asks, &achieved(5)),
        );
        assert!(judge(&asks, &achieved(5), &partial).is_ok());
        // Reported full without naming guarantees: still refused on less than full.
        let full = request(Enforcement::Full, Vec::new());
        assert!(matches!(
            judge(&asks, &achieved(5), &full),
            Err(RunnerError::LessThanReported { .. })
        ));
    }

    #[test]
    fn tcp_ports_without_landlock_network_rules_are_unavailable() {
        let mut r = request(Enforcement::Partial, Vec::new());
        r.policy.allow_tcp_connect = vec![443];
        let asks = Asks::of(&r.policy);
        let err = judge(&asks, &achieved(3), &r).unwrap_err();
        assert!(matches!(err, RunnerError::Unavailable { .. }), "{err}");
        assert!(err.to_string().contains("landlock-abi-4"), "{err}");
    }
}
