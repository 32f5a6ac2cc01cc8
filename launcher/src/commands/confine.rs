//! `stockade confine`: resolve the policy, judge the kernel, write the launch request,
//! and describe the result as ConfinedArgv. [`confine`] is also the first step of
//! `stockade run`.

use crate::commands::cli::{ConfineArgs, InheritEnvRule};
use crate::commands::env;
use crate::commands::probe;
use crate::control::binding;
use crate::control::locate;
use crate::control::placement;
use crate::control::private_dir::{self, PrivateDir};
use crate::error::LauncherError;
use crate::proxy;
use crate::supervise::stdout;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use stockade_policy::binding::Binding;
use stockade_policy::confined::{self, CONTRACT_VERSION, ConfinedArgv};
use stockade_policy::confined::{
    denial_signatures, runner_failure_rules, tagged_runner_failure_rules,
};
use stockade_policy::failure_tag;
use stockade_policy::grants;
use stockade_policy::guarantees::{self, Asks, ModeVerdict};
use stockade_policy::inherit::{EnvFilter, Inherit, InheritEnv};
use stockade_policy::proxy_env::proxy_env;
use stockade_policy::receipt::{self, BindingReport};
use stockade_policy::session::RunnerSession;
use stockade_policy::stage::{self, PidMode};
use stockade_policy::stage_report::{self, DirMeta};
use stockade_policy::{LaunchRequest, Mode, PolicyRequest};

/// What a ConfinedArgv's argv starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// `stockade-runner` (possibly behind the namespace stage).
    Runner,
    /// The program itself (nothing is confined).
    Program,
}

impl Start {
    /// The rule [`confine_inheriting`] follows: every confined mode starts the runner.
    pub fn of(mode: Mode) -> Start {
        if mode.is_confined() {
            Start::Runner
        } else {
            Start::Program
        }
    }
}

/// A confined (or, for danger-full-access, raw) command ready to spawn.
#[derive(Debug)]
pub struct Confinement {
    pub confined: ConfinedArgv,
    /// The private directory holding the request; `None` when there is no request.
    pub private_dir: Option<PrivateDir>,
    /// Default protected names that did not exist when confined (see
    /// `stockade_policy::stage::unprotected_names`): `stockade run` reports those that
    /// appear.
    pub unprotected: Vec<std::path::PathBuf>,
    /// The shared writable roots the caller owns, as they were when confined (see
    /// `stockade_policy::stage_report`): `stockade run` checks them after the command
    /// and puts back what changed, with or without the stage.
    pub shared: Vec<SharedRoot>,
    /// What was bound (the runner checks it; for `danger-full-access`, `stockade run`).
    pub binding: Binding,
}

/// The protected files that have other names (hard links): the read-only bind holds
/// the protected name, not the file, which the command can still change through any
/// other name inside a writable root (an earlier command that made `.envrc` and linked
/// it as `notes.txt` keeps `.envrc` writable for every later one).
fn hard_linked(protected: &[stockade_policy::stage::Protected]) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    protected
        .iter()
        .filter_map(|p| {
            let meta = p.path.symlink_metadata().ok()?;
            (meta.is_file() && meta.nlink() > 1).then(|| {
                format!(
                    "protected path {} has {} names (hard links): writable through the others, so not protected; remove them (find -samefile) to protect it",
                    p.path.display(),
                    meta.nlink()
                )
            })
        })
        .collect()
}

/// A shared writable root the caller owns (see `stockade_policy::stage_report`), open
/// since it was confined.
#[derive(Debug)]
pub struct SharedRoot {
    pub path: std::path::PathBuf,
    /// Its metadata when confined.
    pub was: DirMeta,
    /// The directory itself, opened without following any link: what `stockade run`
    /// looks at and puts back afterwards, wherever the command moved it.
    pub dir: std::fs::File,
}

/// The writable roots of `policy` that are shared directories the caller owns, with
/// their metadata now, each opened without following a link (one that cannot be is left
/// out: the runner refuses a root replaced by a link).
fn shared_roots(policy: &stockade_policy::Policy) -> Vec<SharedRoot> {
    use std::os::unix::fs::MetadataExt;
    let opened = std::cell::RefCell::new(Vec::new());
    let chosen = stage_report::shared_roots(policy, nix::unistd::getuid().as_raw(), &|root| {
        let dir = crate::stage::open_dir_no_symlinks(root).ok()?;
        let m = dir.metadata().ok()?;
        opened.borrow_mut().push((root.to_path_buf(), dir));
        Some(DirMeta::new(m.mode(), m.uid(), m.gid()))
    });
    let mut opened = opened.into_inner();
    chosen
        .into_iter()
        .filter_map(|(path, was)| {
            let i = opened.iter().position(|(p, _)| *p == path)?;
            let (_, dir) = opened.swap_remove(i);
            Some(SharedRoot { path, was, dir })
        })
        .collect()
}

fn utf8(s: &std::ffi::OsStr, what: &'static str) -> Result<String, LauncherError> {
    s.to_str()
        .map(str::to_string)
        .ok_or(LauncherError::NotUtf8 { what })
}

/// Prepares `command` to run under `policy` with environment `env`; the runner does
/// about its session what `session` says; `hash`: bind the executable's content too
/// (`--bind-executable-hash`).
pub fn confine(
    policy: &PolicyRequest,
    command: &[OsString],
    env: Vec<(OsString, OsString)>,
    session: RunnerSession,
    hash: bool,
) -> Result<Confinement, LauncherError> {
    confine_inheriting(policy, command, env, Inherit::default(), session, hash)
}

/// [`confine`], with the working directory and environment taken at spawn time as
/// `inherit` says. `env` is still what `$TMPDIR` is resolved from (the spawner's
/// environment is not known yet); with an inherited environment the request carries
/// none of it; its `PATH` is what `argv[0]` is resolved over for the binding (the
/// runner resolves it again over the `PATH` it inherits, and refuses another file).
pub fn confine_inheriting(
    policy: &PolicyRequest,
    command: &[OsString],
    env: Vec<(OsString, OsString)>,
    inherit: Inherit,
    session: RunnerSession,
    hash: bool,
) -> Result<Confinement, LauncherError> {
    let mode = policy.mode;
    let cwd = std::env::current_dir().map_err(LauncherError::CurrentDir)?;
    let program = command.first().map(OsString::as_os_str).unwrap_or_default();
    let search = stockade_policy::environment::lookup(&env, "PATH").map(OsString::as_os_str);
    let binding = binding::bind(program, search, &cwd, inherit.cwd, hash)?;
    if Start::of(mode) == Start::Program {
        // Nothing to enforce, so nothing to write: the executor runs the raw argv.
        let argv = command
            .iter()
            .map(|a| utf8(a, "the command"))
            .collect::<Result<_, _>>()?;
        let digest = receipt::unconfined_request_digest(command, &cwd, &env, &binding);
        let report = BindingReport::new(digest, None, program, &binding);
        return Ok(Confinement {
            confined: ConfinedArgv {
                contract: CONTRACT_VERSION,
                argv,
                enforcement: None,
                denial_signatures: denial_signatures(mode, false),
                runner_failure_rules: runner_failure_rules(mode),
                mode,
                guarantees: BTreeMap::new(),
                status_path: None,
                status_channel: None,
                not_granted: Vec::new(),
                binding: Some(report),
            },
            private_dir: None,
            unprotected: Vec::new(),
            shared: Vec::new(),
            binding,
        });
    }

    let tmpdir = stockade_policy::environment::lookup(&env, "TMPDIR").map(Path::new);
    let mut invoker = placement::invoker();
    // The command reads the variables that move credential stores from its own
    // environment (`--env GNUPGHOME=...`): those stores are hidden too.
    let movers = stockade_policy::credentials::variables();
    let command_movers = env.iter().filter(|(n, _)| movers.iter().any(|m| n == m));
    invoker.store_variables.extend(command_movers.cloned());
    let mut policy = policy.clone();
    if !policy.domains.is_empty() {
        policy.proxy_port = Some(proxy::reserve_port().map_err(LauncherError::ProxyPort)?);
    }
    let resolved = policy.resolve(&cwd, tmpdir, &invoker)?;
    let allow_dns = resolved.allow_dns();
    let proxy_port = resolved.domains().map(|d| d.proxy_port());
    let asks = Asks::of(&resolved);
    let facts = probe::kernel_facts(&asks);
    let enforcement = match guarantees::verdict(&asks, &facts) {
        ModeVerdict::Confined(e) => e,
        ModeVerdict::Unavailable { missing } => {
            return Err(LauncherError::Unavailable { mode, missing });
        }
        ModeVerdict::Unconfined => {
            return Err(LauncherError::Internal(
                "a confined mode was judged unconfined",
            ));
        }
    };
    let runner = locate::runner()?;
    placement::check("runner", &runner, &resolved, tmpdir, &invoker)?;
    placement::check_loader_env(&runner, &env, &resolved, tmpdir, &invoker)?;
    let launcher = locate::launcher().map_err(|e| LauncherError::ExposedBinary {
        what: "launcher",
        path: "/proc/self/exe".into(),
        why: format!("its location cannot be determined: {e}"),
    })?;
    placement::check("launcher", &launcher, &resolved, tmpdir, &invoker)?;
    let runner = utf8(runner.as_os_str(), "the runner path")?;
    let tag = new_failure_tag()?;

    // The control base must be out of the command's reach: a policy that could write it
    // could rewrite the requests and status files of other commands.
    let base = private_dir::base()?;
    if let Some(root) = private_dir::root_containing(&base, &grants::writable_roots(&resolved)) {
        return Err(LauncherError::ControlBaseWritable {
            base,
            root: root.clone(),
        });
    }
    let mut not_granted: Vec<String> = resolved
        .tmpdir_refused()
        .into_iter()
        .map(str::to_string)
        .collect();
    not_granted.extend(resolved.hidden_not_followed().iter().cloned());
    not_granted.extend(resolved.protect_links().iter().map(|p| {
        format!(
            "protected path {} is a symbolic link (planted by an earlier command?): not protected",
            p.display()
        )
    }));
    not_granted.extend(hard_linked(resolved.protected()));
    let dir = PrivateDir::create(&base)?;
    let status_path = dir.status_path();
    let (mut env, mut inherit) = (env, inherit);
    if let Some(port) = proxy_port {
        // The command's clients go through the proxy: set over whatever the caller had,
        // in the request's environment or over the one inherited at spawn time.
        let vars: Vec<(OsString, OsString)> = proxy_env(port)
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        let target = match inherit.env.as_mut() {
            Some(inherited) => &mut inherited.set,
            None => &mut env,
        };
        target.retain(|(k, _)| !vars.iter().any(|(name, _)| name == k));
        target.extend(vars);
    }
    if allow_dns {
        // The C library's resolver asks over UDP unless told otherwise, and UDP is
        // refused: `use-vc` makes it use TCP, which port 53 is allowed for.
        let target = match inherit.env.as_mut() {
            Some(inherited) => &mut inherited.set,
            None => &mut env,
        };
        let was = stockade_policy::environment::lookup(target, "RES_OPTIONS").cloned();
        let mut value = OsString::from("use-vc");
        if let Some(was) = was.filter(|w| !w.is_empty()) {
            value = [was, value].join(std::ffi::OsStr::new(" "));
        }
        target.retain(|(k, _)| k != "RES_OPTIONS");
        target.push(("RES_OPTIONS".into(), value));
    }
    let env = if inherit.env.is_some() {
        Vec::new()
    } else {
        env
    };
    let request = LaunchRequest {
        argv: command.to_vec(),
        cwd,
        env,
        policy: resolved,
        promised: facts,
        status_path: Some(status_path.clone()),
        inherit,
        session,
        binding,
        confined_in: crate::stage::mount_namespace(),
    };
    let write = || -> Result<(String, String, String), LauncherError> {
        request.validate().map_err(LauncherError::Invalid)?;
        let (request_path, digest) = dir.write_request(&request)?;
        Ok((
            utf8(request_path.as_os_str(), "the request path")?,
            digest,
            utf8(status_path.as_os_str(), "the status path")?,
        ))
    };
    let (request_path, digest, status_path) = match write() {
        Ok(p) => p,
        Err(e) => {
            dir.remove();
            return Err(e);
        }
    };
    let report = BindingReport::new(
        digest.clone(),
        Some(receipt::policy_digest(&request.policy)),
        program,
        &request.binding,
    );
    let runner_argv = vec![
        runner,
        "--request".to_string(),
        request_path,
        "--sha256".to_string(),
        digest,
        failure_tag::FLAG.to_string(),
        tag.clone(),
    ];
    let staged = asks.wants_stage() && facts.namespaces;
    let (unprotected, unknown): (Vec<_>, Vec<_>) = if staged {
        stage::unprotected_names(&request.policy, &|p| p.symlink_metadata().is_ok())
            .into_iter()
            .partition(|p| stage::absent(&p.symlink_metadata()))
    } else {
        Default::default()
    };
    not_granted.extend(unknown.iter().map(|p| {
        format!(
            "protected path {}: the invoking user cannot look it up, so whether it exists is not known: not protected, and not checked after the run",
            p.display()
        )
    }));
    if !staged {
        // A hidden path inside a writable root can be renamed out of hiding (Landlock
        // lets a command move what it cannot read), and the next command would read it
        // under its new name. Only the stage's read-only bind stops that.
        let writable = grants::writable_roots(&request.policy);
        if let Some(hidden) = request
            .policy
            .hidden()
            .iter()
            .find(|h| writable.iter().any(|r| h.starts_with(r)))
        {
            dir.remove();
            return Err(LauncherError::HiddenInWritableRoot {
                path: hidden.clone(),
            });
        }
    }
    let shared = shared_roots(&request.policy);
    // With the network by name, the proxy host starts first and hands one end of a
    // socket pair to the stage on a descriptor the command was not promised.
    let channel = (3..)
        .find(|fd| !request.policy.keep_fds().contains(fd))
        .unwrap_or(3);
    let net = match proxy_port {
        Some(port) if staged => Some(crate::stage::NetProxy { channel, port }),
        _ => None,
    };
    let argv = if staged {
        // The stage runs first where it has work and the machine allows it; the control
        // directory stays writable in it, for the runner's status record.
        let control = Path::new(&status_path).parent();
        let writable = grants::writable_roots(&request.policy);
        let pids = request.policy.pids() != PidMode::Share;
        let plan = stage::plan(&request.policy, &writable, control, pids);
        let mut watch = crate::stage::Watch {
            shared: shared.iter().map(|r| r.path.clone()).collect(),
            missing: unprotected.clone(),
            report: None,
            keep_capabilities: request.policy.kept_capabilities(),
        };
        if !watch.shared.is_empty() || !watch.missing.is_empty() {
            match dir.create_report() {
                Ok(path) => watch.report = Some(path),
                Err(e) => {
                    dir.remove();
                    return Err(e);
                }
            }
        }
        let launcher = locate::launcher()
            .map_err(LauncherError::LauncherPath)
            .and_then(|p| utf8(p.as_os_str(), "the launcher path"));
        match launcher {
            Ok(launcher) => crate::stage::argv(&plan, &watch, net, &launcher, &runner_argv),
            Err(e) => {
                // Nobody will ever spawn this request.
                dir.remove();
                return Err(e);
            }
        }
    } else {
        runner_argv
    };
    let network_record = request.policy.domains().map(|_| dir.network_record_path());
    let argv = match (request.policy.domains(), &network_record) {
        (Some(domains), Some(record)) => {
            let launcher = locate::launcher()
                .map_err(LauncherError::LauncherPath)
                .and_then(|p| utf8(p.as_os_str(), "the launcher path"));
            let launcher = match launcher {
                Ok(l) => l,
                Err(e) => {
                    dir.remove();
                    return Err(e);
                }
            };
            let spec = proxy::host::Spec {
                rules: domains.rules().clone(),
                record: record.clone(),
                listen: match net {
                    Some(net) => proxy::host::Listen::NetnsChannel(net.channel),
                    None => proxy::host::Listen::Port(domains.proxy_port()),
                },
            };
            proxy::host::argv(&spec, &launcher, &argv)
        }
        _ => argv,
    };
    Ok(Confinement {
        confined: ConfinedArgv {
            contract: CONTRACT_VERSION,
            argv,
            enforcement: Some(enforcement),
            denial_signatures: denial_signatures(mode, staged),
            runner_failure_rules: tagged_runner_failure_rules(mode, Some(&tag)),
            mode,
            guarantees: guarantees::report(&asks, &facts),
            status_path: Some(status_path),
            status_channel: Some(confined::status_channel(&facts)),
            not_granted,
            binding: Some(report),
        },
        private_dir: Some(dir),
        unprotected,
        shared,
        binding: request.binding,
    })
}

/// A fresh runner failure tag (see `stockade_policy::failure_tag`): 16 bytes from the
/// kernel's random pool.
fn new_failure_tag() -> Result<String, LauncherError> {
    let mut bytes = [0u8; 16];
    let mut filled = 0;
    while filled < bytes.len() {
        let rest = &mut bytes[filled..];
        // SAFETY: getrandom writes at most `rest.len()` bytes into `rest`, which is valid
        // for writes of that length.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(LauncherError::FailureTag(e));
        }
        filled += n as usize;
    }
    Ok(failure_tag::from_bytes(&bytes))
}

/// What `confine`'s flags ask the runner to take at spawn time.
fn inherit(args: &ConfineArgs) -> Inherit {
    let env = args.inherit.inherit_env.map(|rule| InheritEnv {
        filter: match rule {
            InheritEnvRule::Filtered => EnvFilter::Rule,
            InheritEnvRule::Unfiltered => EnvFilter::Unfiltered,
        },
        clear: args.env.clear_env,
        keep: args.env.keep_env.clone(),
        set: args.env.env.clone(),
    });
    Inherit {
        cwd: args.inherit.inherit_cwd,
        env,
    }
}

/// `stockade confine`: prints the ConfinedArgv as one JSON line.
pub fn run(args: &ConfineArgs) -> Result<i32, LauncherError> {
    let confinement = confine_inheriting(
        &args.policy.to_request(),
        &args.command.command,
        env::target_env(&args.env).vars,
        inherit(args),
        // The executor spawns the runner: only then are its stdin and group known.
        RunnerSession::WhenTerminal,
        args.bind.bind_executable_hash,
    )?;
    let written = serde_json::to_string(&confinement.confined)
        .map_err(LauncherError::Json)
        .and_then(|json| stdout::write(&format!("{json}\n")));
    if let Err(e) = written {
        // Nobody will ever spawn a request we could not hand over.
        if let Some(dir) = confinement.private_dir {
            dir.remove();
        }
        return Err(e);
    }
    Ok(0)
}
