//! `stockade-runner`: consumes one launch request, confines itself, and execs the target.
//!
//! Order: consume request (its bytes must have the digest given as `--sha256`) -> open
//! status file -> refuse danger-full-access -> build the seccomp filter, which keeps
//! signals from the parent and its group (a filter that cannot be built fails before
//! anything changes) -> chdir(cwd) -> new session (as the request says; decided before
//! the filter is built) -> no_new_privs -> Landlock -> drop capabilities (all but those
//! the policy keeps) -> inherited fds marked close-on-exec -> install the
//! filter (last: it filters what the steps before use) -> judge what the kernel gave
//! against what was reported -> resolve `argv[0]` and check it against the binding
//! (binding.rs; the working directory was checked on entering it) -> `confined` status
//! record -> execve of the verified file. A failure after the
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
//! `execve`); the runner is on the path of every command. The arguments are read from
//! `main`'s own argv (`std::env::args_os` is empty there with musl).
// The unit-test harness brings its own `main`.
#![cfg_attr(not(test), no_main)]

mod binding;
mod caps;
mod carve;
mod descriptors;
mod error;
mod exec;
mod explain;
mod fds;
mod mask;
mod notify;
mod queues;
mod request_file;
mod roots;
mod ruleset;
mod seccomp;
mod session;
mod stage;
mod status;
mod trust;

use error::RunnerError;
use status::StatusFile;
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use stockade_policy::LaunchRequest;
use stockade_policy::descriptors::OpenOutside;
use stockade_policy::digest;
use stockade_policy::environment::withheld::Withheld;
use stockade_policy::exit;
use stockade_policy::failure_tag;
use stockade_policy::guarantees::{self, Asks, Enforcement, Feature, KernelFacts, ModeVerdict};

/// The allocator of the musl builds (why: `stockade_policy::allocator`); glibc builds
/// keep glibc's.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: stockade_policy::allocator::Allocator =
    stockade_policy::allocator::Allocator::new();

/// `--help`: what this program is, before how to call it. Users meet it in
/// `/usr/libexec/stockade/` and wonder; the answer is that `stockade` starts it.
const HELP: &str = "\
stockade-runner: the confining runner of stockade.

It consumes one launch request file written by `stockade confine` (or `stockade run`),
confines itself with Landlock, seccomp and a capability drop, and execs the command the
request names. It is normally started by `stockade`, not by hand: executors spawn the
`argv` that `stockade confine` prints, which starts this program (through stockade's
namespace stage unless --no-stage was given).

usage: stockade-runner --request FILE --sha256 HEX [--failure-tag TAG]
       stockade-runner --explain FILE | --version | --help

  --request FILE   consume FILE (it is unlinked before it is decoded), confine, exec
  --sha256 HEX     the SHA-256 FILE's bytes must have; a file with other bytes is
                   refused and left alone (required after --request FILE)
  --failure-tag TAG  put [TAG] after the prefix of every failure line
  --explain FILE   print what FILE would do and whether it would be accepted; consumes nothing
  --version        print the version

The argv `stockade confine` prints gives all of these (under the namespace stage, after
the stage's own arguments): spawn that argv as it is rather than the runner alone.
Failures before the command starts print one line starting `stockade-runner: ` and exit
125 (126: the program cannot be executed, 127: not found). The packages install it as
/usr/libexec/stockade/stockade-runner, which is not on PATH.

Examples:
  stockade confine --mode read-only -- ls /root > c.json
  /usr/libexec/stockade/stockade-runner --explain \"$(jq -r '.argv[] | select(test(\"/request$\"))' c.json)\"
  mapfile -t argv < <(jq -r '.argv[]' c.json); \"${argv[@]}\"

See stockade-runner(1) and stockade(1).
";

enum Command {
    /// `--request FILE --sha256 HEX [--failure-tag TAG]`: the file, the digest its bytes
    /// must have, and the tag that goes into every failure line when given.
    Run(PathBuf, [u8; 32], Option<String>),
    Explain(PathBuf),
    Version,
    Help,
}

/// The optional `--failure-tag TAG` after `--request FILE`.
fn failure_tag(args: &mut impl Iterator<Item = OsString>) -> Result<Option<String>, RunnerError> {
    let mut peek = args.next();
    if peek.as_deref() != Some(std::ffi::OsStr::new(failure_tag::FLAG)) {
        // Not the tag flag: put it back for the "unexpected argument" check.
        return match peek.take() {
            None => Ok(None),
            Some(extra) => Err(RunnerError::Usage(format!(
                "unexpected argument {:?}",
                extra.to_string_lossy()
            ))),
        };
    }
    let tag = args
        .next()
        .ok_or_else(|| RunnerError::Usage(format!("{} needs a TAG", failure_tag::FLAG)))?;
    match tag.to_str() {
        Some(tag) if failure_tag::is_valid(tag) => Ok(Some(tag.to_string())),
        _ => Err(RunnerError::Usage(format!(
            "{} takes 1 to {} lower-case hex digits",
            failure_tag::FLAG,
            failure_tag::MAX_LEN
        ))),
    }
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
                // The digest is required: without it any file of ours could be taken
                // (and removed) as a request.
                if args.next().as_deref() != Some("--sha256".as_ref()) {
                    return Err(RunnerError::Usage(
                        "--request FILE must be followed by --sha256 HEX".into(),
                    ));
                }
                let hex = args.next().unwrap_or_default();
                let digest = hex.to_str().and_then(digest::parse_hex).ok_or_else(|| {
                    RunnerError::Usage(format!(
                        "--sha256 needs 64 hexadecimal digits, not {:?}",
                        hex.to_string_lossy()
                    ))
                })?;
                Command::Run(file.into(), digest, failure_tag(&mut args)?)
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

/// What the runner achieved: the enforcement, and the inherited descriptors through which
/// metadata outside the writable roots stays changeable (then `partial`).
struct Achieved {
    enforcement: Enforcement,
    metadata_open: Vec<OpenOutside>,
}

/// Applies the request's confinement to this process. After this returns, everything
/// this process and its descendants do is confined, with the returned enforcement.
fn confine(request: &LaunchRequest) -> Result<Achieved, RunnerError> {
    let policy = &request.policy;
    if !policy.mode().is_confined() {
        return Err(RunnerError::Unconfined);
    }
    let new_session = session::starts_new(request.session);
    // Who is outside is known now, before the session changes: the parent and its group,
    // and, where Landlock will not scope signals to the sandbox, every ancestor.
    let scoped = ruleset::kernel_abi() >= ruleset::SIGNAL_SCOPE_ABI;
    let mut outside = seccomp::Outside::of_parent(new_session, scoped);
    // Checked only when promised: the check is a few system calls, and a runner started
    // without the stage must not pay for it. Before the filter, which refuses the
    // netlink socket the network namespace's check reads interfaces through.
    let stage_missing = if request.promised.namespaces {
        stage::achieved(policy, request.confined_in).err()
    } else {
        None
    };
    let staged = request.promised.namespaces && stage_missing.is_none();
    // Before Landlock, which would govern the descriptors opened again here, and before
    // the supervisor is chosen: under the stage it holds what the mounts do not.
    let metadata_open = metadata_open(policy, staged);
    let supervision = supervision(request, &metadata_open);
    if supervision != Supervision::Off {
        // This process, once it has become the supervisor: the command's parent. It
        // leaves for a group of its own unless it leads one already (`notify::split`);
        // the command stays in the runner's group unless it starts a new session.
        let me = nix::unistd::getpid();
        outside.supervisor = Some(me.as_raw());
        outside.supervisor_group = new_session || nix::unistd::getpgrp() != me;
    }
    // With the network denied under the stage, the command's network namespace of its
    // own holds the network (a stage that did not run is refused below, before anything
    // starts): its loopback is the command's, and nothing else is there.
    let netns = request.promised.namespaces && policy.own_network();
    // The stage's IPC namespace, and its queues where the stage could mount them.
    let queues = staged.then(|| queues::own(policy)).flatten();
    let own = seccomp::Own {
        network: netns,
        ipc: request.promised.namespaces,
        message_queues: queues.is_some(),
    };
    let filter = seccomp::program(policy, &outside, own)?;
    // The supervisor holds metadata: the runner's process becomes it here, and what
    // follows runs in its child, which becomes the command. The session and who is
    // outside were judged above, by the process the executor spawned, with the
    // supervisor and (where the command is not in it) its group.
    let protect = protects_names(request, supervision);
    let handoff = match supervision {
        Supervision::Off => None,
        _ => Some(notify::split(
            policy,
            protect,
            request.audit_tag.as_deref(),
        )?),
    };
    enter_cwd(request)?;
    session::apply(new_session)?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| RunnerError::NoNewPrivs(e.into()))?;
    let (landlock_abi, ruleset) = ruleset::restrict(
        policy,
        netns,
        staged,
        queues,
        request.audit_tag.as_deref(),
        protect,
    )?;
    caps::restrict(policy.kept_capabilities().mask())?;
    fds::restrict(policy.keep_fds())?;
    seccomp::install(&filter)?;
    // Beside the main filter (both judge every call; the main one's refusals win).
    let supervisor = match (handoff, supervision) {
        (Some(handoff), Supervision::Promised) => handoff.install(ruleset).map(|()| true)?,
        // Not promised: a kernel that refuses the filter leaves the descriptors named.
        (Some(handoff), _) => handoff.install_if_possible()?,
        (None, _) => false,
    };
    // The supervisor judges every metadata call, through any descriptor: none is open.
    let metadata_open = match supervision == Supervision::Descriptors && supervisor {
        true => Vec::new(),
        false => metadata_open,
    };
    let achieved = KernelFacts {
        landlock_abi,
        seccomp: true,
        namespaces: staged,
        supervisor,
        // Promised and not started fails above; vacuous without protected paths.
        supervisor_writes: supervisor && request.promised.supervisor_writes,
    };
    // Judge what the kernel actually gave, with the same rules the launcher used to
    // report enforcement to the executor. Reaching here means the filter is installed.
    let enforcement = judge(&Asks::of(policy), &achieved, request).map_err(|e| match e {
        // Say which of the stage's traces was missing, when that is what fell short.
        RunnerError::LessThanPromised {
            promised,
            achieved,
            missing,
            ..
        } => RunnerError::LessThanPromised {
            promised,
            achieved,
            missing,
            stage_missing,
        },
        e => e,
    })?;
    // Descriptors the caller opened elsewhere leave metadata unheld: reported, not
    // refused (every executor that spawns with stdin on /dev/null would fail otherwise).
    Ok(Achieved {
        enforcement: match metadata_open.is_empty() {
            true => enforcement,
            false => Enforcement::Partial,
        },
        metadata_open,
    })
}

/// Whether the metadata supervisor holds metadata for this request: the launcher found
/// it possible and promised it (only where the stage does not run), and the policy has
/// a use for it (workspace-write).
fn supervised(request: &LaunchRequest) -> bool {
    request.promised.supervisor
        && !request.promised.namespaces
        && Asks::of(&request.policy).wants_supervisor()
}

/// Whether the supervisor also performs every call that writes or replaces a name: with
/// protected paths and no stage, where the launcher found it can (and promised it).
fn protects_names(request: &LaunchRequest, supervision: Supervision) -> bool {
    supervision == Supervision::Promised
        && request.promised.supervisor_writes
        && !request.policy.protected().is_empty()
}

/// Whether, and on whose word, the metadata supervisor runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Supervision {
    Off,
    /// Promised by the launcher (no stage): one that cannot start fails the run.
    Promised,
    /// Under the stage, for the inherited descriptors its read-only mounts do not hold
    /// (`open`, not empty): the supervisor judges every metadata call by the object it
    /// reaches, through any descriptor. Not promised: where the kernel refuses its
    /// filter, or Yama forbids the memory reads it needs (every change would be
    /// refused, inside the roots too), the descriptors stay named and the run partial.
    /// Nothing extra runs when none is open (pipes: the usual case).
    Descriptors,
}

fn supervision(request: &LaunchRequest, open: &[OpenOutside]) -> Supervision {
    if supervised(request) {
        Supervision::Promised
    } else if !open.is_empty() && notify::memory_readable() {
        Supervision::Descriptors
    } else {
        Supervision::Off
    }
}

/// The inherited descriptors through which the target could change metadata outside the
/// writable roots, where the stage's mounts hold it otherwise (`staged`, workspace-write):
/// empty when `metadata` is not held anyway, or is held by the filter refusing every
/// metadata call (read-only mode). Those that can be are opened again through the
/// read-only mounts first, and are then held like any path.
fn metadata_open(policy: &stockade_policy::Policy, staged: bool) -> Vec<OpenOutside> {
    let held_by_mounts = guarantees::Guarantee::Metadata.needs(&Asks::of(policy))
        == Feature::NamespacesOrSupervisor
        && staged;
    if !held_by_mounts {
        return Vec::new();
    }
    descriptors::reopen_read_only(descriptors::open_outside(policy))
}

/// Enters the request's working directory, or checks the inherited one. An inherited
/// directory may lie outside every writable root: the command runs there (reads are
/// allowed everywhere) and its writes there are denied like any other; but a directory
/// that no longer has a name (deleted) is refused rather than run in.
fn enter_cwd(request: &LaunchRequest) -> Result<(), RunnerError> {
    if request.inherit.cwd {
        return std::env::current_dir()
            .map(drop)
            .map_err(RunnerError::InheritedCwd);
    }
    std::env::set_current_dir(&request.cwd).map_err(|source| RunnerError::Chdir {
        cwd: request.cwd.clone(),
        source,
    })?;
    // The directory entered is the process's from now on, whatever becomes of its path.
    binding::check_cwd(&request.binding.cwd)
}

/// Refuses to start the target when it would get less than the executor was told: the
/// report derives from the policy and the facts the launcher promised, so the one check
/// is that what this kernel gave covers those facts.
fn judge(
    asks: &Asks,
    achieved: &KernelFacts,
    request: &LaunchRequest,
) -> Result<Enforcement, RunnerError> {
    let enforcement = match guarantees::verdict(asks, achieved) {
        ModeVerdict::Confined(e) => e,
        ModeVerdict::Unavailable { missing } => return Err(RunnerError::Unavailable { missing }),
        ModeVerdict::Unconfined => return Err(RunnerError::Unconfined),
    };
    if !achieved.covers(&request.promised) {
        let given = guarantees::enforced(asks, achieved);
        let missing = guarantees::enforced(asks, &request.promised)
            .into_iter()
            .filter(|g| !given.contains(g))
            .collect();
        return Err(RunnerError::LessThanPromised {
            promised: request.promised,
            achieved: *achieved,
            missing,
            stage_missing: None,
        });
    }
    Ok(enforcement)
}

fn run(path: &std::path::Path, digest: &[u8; 32]) -> RunnerError {
    let mut request = match request_file::consume(path, digest) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let mut env_removed = Withheld::default();
    if let Some(inherit) = &request.inherit.env {
        let spawned: Vec<(OsString, OsString)> = std::env::vars_os().collect();
        // The credential stores this environment moves are hidden too: the command reads
        // the same variables (`KUBECONFIG`, `GNUPGHOME`) and would find them there.
        let homes = invoker_homes(&spawned);
        request.policy.hide_stores_moved_by(&spawned, &homes);
        // The environment this runner was spawned with, through the request's rule.
        let built = inherit.build_reporting(spawned);
        env_removed = Withheld::of(&built.removed);
        request.env = built.vars;
    }
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
    // Confinement is complete: what runs must be what was bound.
    let start = match binding::verify(&request) {
        Ok(start) => start,
        Err(e) => {
            if let Some(status) = status {
                status.failed(&e);
            }
            return e;
        }
    };
    // The last step before execve: from here on the target's exit facts are its own.
    if let Some(status) = status
        && let Err(e) = status.confined(
            achieved.enforcement,
            start.target_start(),
            achieved.metadata_open,
            env_removed,
        )
    {
        return e;
    }
    exec::exec(&request, start)
}

/// The invoking user's home directories, as `confine` finds them: the passwd database's
/// and `$HOME` of the spawn-time environment.
fn invoker_homes(spawned: &[(OsString, OsString)]) -> Vec<PathBuf> {
    let uid = nix::unistd::getuid().as_raw();
    let passwd_home = std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|text| stockade_policy::roots::home_from_passwd(&text, uid));
    let env_home = stockade_policy::environment::lookup(spawned, "HOME").map(PathBuf::from);
    stockade_policy::roots::Invoker::new(uid, passwd_home.as_deref(), env_home.as_deref()).homes
}

/// Prints the one failure line, tagged when a tag was given. Newlines in paths are
/// escaped so it stays one line.
fn report(err: &RunnerError, tag: Option<&str>) {
    let line = format!(
        "{}{}\n",
        failure_tag::line_prefix(tag),
        exit::one_line(&err.to_string())
    );
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// Writes to stdout without `println!`, which panics on a closed pipe, and flushes: with
/// the C entry point nothing flushes std's buffer at exit. A failed write is a runner
/// failure like any other: one stderr line and exit 125. So is a closed stdout, which
/// std's handle takes as a sink that swallows everything (the output would be lost and
/// the exit status 0).
fn print(text: &str) -> Result<(), RunnerError> {
    nix::fcntl::fcntl(std::io::stdout(), nix::fcntl::FcntlArg::F_GETFD).map_err(|_| {
        RunnerError::Stdout(std::io::Error::new(
            std::io::ErrorKind::NotConnected,
            "it is closed",
        ))
    })?;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(RunnerError::Stdout)
}

/// The process entry point (see the module comment for why it is the C one).
// SAFETY: `main` is the one C entry symbol of this binary; nothing else defines it.
#[cfg(not(test))]
#[unsafe(no_mangle)]
extern "C" fn main(argc: std::ffi::c_int, argv: *const *const std::ffi::c_char) -> std::ffi::c_int {
    // SAFETY: argc/argv are what the kernel handed `main`, read before anything changes them.
    let args = unsafe { stockade_policy::c_main::arguments(argc, argv) };
    // The tag is visible in `/proc` only between the runner's `execve` and this call.
    // SAFETY: argc/argv are what the kernel handed `main`; the runner has one thread.
    unsafe { failure_tag::scrub_from_argv(argc, argv) };
    runner_main(args)
}

/// Unit-test builds bring the harness's own entry point; this keeps the code reachable.
#[cfg(test)]
fn main() {
    std::process::exit(runner_main(std::env::args_os().collect()))
}

fn runner_main(args: Vec<OsString>) -> i32 {
    exec::ignore_sigpipe_for_now();
    let mut tag = None;
    let result = match parse_args(args.into_iter().skip(1)) {
        Ok(Command::Run(path, digest, failure_tag)) => {
            tag = failure_tag;
            Err(run(&path, &digest))
        }
        Ok(Command::Explain(path)) => explain::explain(&path).and_then(|text| print(&text)),
        Ok(Command::Version) => print(&format!("stockade-runner {}\n", env!("CARGO_PKG_VERSION"))),
        Ok(Command::Help) => print(HELP),
        Err(e) => Err(e),
    };
    let Err(err) = result else {
        return 0;
    };
    // Only the runner's own failure (125) is tagged: 126/127 are the command's, and the
    // rule never matches them.
    let tag = tag.filter(|_| err.exit_code() == exit::RUNNER_FAILURE);
    report(&err, tag.as_deref());
    err.exit_code()
}

#[cfg(test)]
mod tests {
    use super::*;
    use stockade_policy::guarantees::Guarantee;
    use stockade_policy::{Mode, Network};

    fn request(promised: u32) -> LaunchRequest {
        LaunchRequest::for_tests(
            vec!["true".into()],
            "/",
            stockade_policy::Policy::for_tests(Mode::ReadOnly, "/").with_network(Network::Deny),
            achieved(promised),
        )
    }

    fn achieved(abi: u32) -> KernelFacts {
        KernelFacts {
            landlock_abi: abi,
            seccomp: true,
            namespaces: false,
            supervisor: false,
            supervisor_writes: false,
        }
    }

    #[test]
    fn less_than_the_promised_facts_is_refused() {
        let asks = Asks::defaults(Mode::ReadOnly);
        assert!(judge(&asks, &achieved(7), &request(7)).is_ok());
        // A newer kernel than the one judged at confine time gives at least as much.
        assert!(judge(&asks, &achieved(7), &request(6)).is_ok());
        // Scopes missing (ABI 5) although ABI 7 was promised: the signals guarantee was
        // reported, so refuse, naming it.
        let err = judge(&asks, &achieved(5), &request(7)).unwrap_err();
        match &err {
            RunnerError::LessThanPromised { missing, .. } => {
                assert!(missing.contains(&Guarantee::Signals), "{err}")
            }
            _ => panic!("{err}"),
        }
        assert!(err.to_string().contains("signals"), "{err}");
        // Reported partial with what ABI 5 gives: accepted.
        assert!(judge(&asks, &achieved(5), &request(5)).is_ok());
    }

    #[test]
    fn tcp_ports_without_landlock_network_rules_are_unavailable() {
        let mut r = request(3);
        r.policy = r.policy.with_allow_tcp_connect(vec![443]);
        let asks = Asks::of(&r.policy);
        let err = judge(&asks, &achieved(3), &r).unwrap_err();
        assert!(matches!(err, RunnerError::Unavailable { .. }), "{err}");
        assert!(err.to_string().contains("landlock-abi-4"), "{err}");
    }
}
