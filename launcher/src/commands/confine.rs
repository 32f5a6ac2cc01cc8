//! `stockade confine`: resolve the policy, judge the kernel, write the launch request,
//! and describe the result as ConfinedArgv. [`confine`] is also the first step of
//! `stockade run`.

use crate::commands::cli::{ConfineArgs, InheritEnvRule};
use crate::commands::env;
use crate::commands::probe;
use crate::control::binding;
use crate::control::error::ControlError;
use crate::control::locate;
use crate::control::placement;
use crate::control::private_dir::{self, PrivateDir};
use crate::control::spare;
use crate::error::LauncherError;
use crate::proxy;
use crate::supervise::Start;
use crate::supervise::stdout;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use stockade_policy::attribution::Scope;
use stockade_policy::binding::Binding;
use stockade_policy::confined::{self, CONTRACT_VERSION, ConfinedArgv};
use stockade_policy::confined::{
    denial_signatures, runner_failure_rules, tagged_runner_failure_rules,
};
use stockade_policy::domains::DomainPolicy;
use stockade_policy::failure_tag;
use stockade_policy::grants;
use stockade_policy::guarantees::{self, Asks, Enforcement, KernelFacts, ModeVerdict};
use stockade_policy::inherit::{EnvFilter, Inherit, InheritEnv};
use stockade_policy::proxy_env::proxy_env;
use stockade_policy::receipt::{self, BindingReport};
use stockade_policy::roots::Invoker;
use stockade_policy::script_directories;
use stockade_policy::session::RunnerSession;
use stockade_policy::stage::{self, PidMode};
use stockade_policy::stage_report::{self, DirMeta};
use stockade_policy::{LaunchRequest, Mode, Policy, PolicyRequest};

/// A confined (or, for danger-full-access, raw) command ready to spawn.
#[derive(Debug)]
pub struct Confinement {
    pub confined: ConfinedArgv,
    /// The private directory holding the request; `None` when there is no request.
    pub private_dir: Option<PrivateDir>,
    /// Default protected names that did not exist when confined (see
    /// `stockade_policy::stage::unprotected_names`), with the stage or without it:
    /// `stockade run` reports those that appear.
    pub unprotected: Vec<std::path::PathBuf>,
    /// The protected paths nothing holds read-only (no stage): `stockade run` takes
    /// their state before the command and reports what changed (see
    /// `crate::commands::protected_changes`). Empty under the stage.
    pub watched: Vec<std::path::PathBuf>,
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
/// (`--bind-executable-hash`); `audit_tag`: the runner's tag when the caller reads
/// Landlock's audit records for the command.
pub fn confine(
    policy: &PolicyRequest,
    command: &[OsString],
    env: Vec<(OsString, OsString)>,
    session: RunnerSession,
    hash: bool,
    audit_tag: Option<String>,
) -> Result<Confinement, LauncherError> {
    // `stockade run` starts the argv with no environment (see `run::helper_env`).
    let spawner = Spawner {
        env: false,
        die_with: false,
        audit_tag,
    };
    prepare(
        policy,
        command,
        env,
        Inherit::default(),
        session,
        hash,
        spawner,
    )
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
    die_with_executor: bool,
) -> Result<Confinement, LauncherError> {
    let spawner = Spawner {
        env: true,
        die_with: die_with_executor,
        audit_tag: None,
    };
    let mut confinement = prepare(policy, command, env, inherit, session, hash, spawner)?;
    if die_with_executor {
        // The launcher starts first: its placement and loader environment were checked
        // as for the stage (`prepare`, `launcher_first`).
        match crate::control::locate::launcher()
            .map_err(LauncherError::LauncherPath)
            .and_then(|l| utf8(l.as_os_str(), "the launcher path"))
        {
            Ok(launcher) => {
                let rest = std::mem::take(&mut confinement.confined.argv);
                confinement.confined.argv =
                    crate::supervise::lifeline::die_with_parent_argv(launcher, rest);
            }
            Err(e) => {
                if let Some(dir) = confinement.private_dir {
                    dir.remove();
                }
                return Err(e);
            }
        }
    }
    Ok(confinement)
}

/// Who spawns the argv, as far as `confine` must know.
#[derive(Clone, Debug)]
struct Spawner {
    /// The argv starts with the spawner's environment (an executor's), which the dynamic
    /// loader of a development build obeys, or with none (`stockade run`).
    env: bool,
    /// The argv is to die with its spawner (`--die-with-executor`): it starts with the
    /// launcher's `__die-with-parent` (see `crate::supervise::lifeline`).
    die_with: bool,
    /// The tag the runner restricts itself under when the spawner reads Landlock's
    /// audit records (`stockade run` only: see `crate::commands::audit_reader`).
    audit_tag: Option<String>,
}

/// [`confine_inheriting`], for `spawner`.
fn prepare(
    policy: &PolicyRequest,
    command: &[OsString],
    env: Vec<(OsString, OsString)>,
    inherit: Inherit,
    session: RunnerSession,
    hash: bool,
    spawner: Spawner,
) -> Result<Confinement, LauncherError> {
    let mode = policy.mode;
    let cwd = std::env::current_dir().map_err(LauncherError::CurrentDir)?;
    let program = command.first().map(OsString::as_os_str).unwrap_or_default();
    let search = stockade_policy::environment::lookup(&env, "PATH").map(OsString::as_os_str);
    let binding = binding::bind(program, search, &cwd, inherit.cwd, hash)?;
    if Start::of(mode) == Start::Program {
        return unconfined(mode, command, cwd, &env, binding);
    }

    let tmpdir = stockade_policy::environment::lookup(&env, "TMPDIR").map(Path::new);
    let invoker = invoker_with_command_movers(&env, policy);
    let resolved = resolve(policy, &cwd, tmpdir, &invoker)?;
    let allow_dns = resolved.allow_dns();
    let proxy_port = resolved.domains().map(|d| d.proxy_port());
    let asks = Asks::of(&resolved);
    // Before the facts: a successful trial of the stage's namespaces is remembered there.
    let base = control_base(&resolved)?;
    let facts = probe::kernel_facts(&asks, &base);
    let enforcement = enforcement(mode, &asks, &facts)?;
    let staged = asks.wants_stage() && facts.namespaces;
    let unheld = if staged {
        Unheld::default()
    } else {
        unheld_protected(policy, &resolved)
    };
    // The argv starts the launcher itself first (as proxy host or stage) where the policy
    // names domains or wants the stage.
    let launcher_first = resolved.domains().is_some() || staged || spawner.die_with;
    let loader_env = spawner.env.then_some(env.as_slice());
    let runner = check_binaries(&resolved, loader_env, launcher_first, tmpdir, &invoker)?;
    let tag = new_failure_tag()?;
    let mut not_granted = not_granted(&resolved);
    let dir = spare::take_or_create(&base)?;
    let status_path = dir.status_path();
    let allows_loopback = resolved
        .domains()
        .is_some_and(|d| d.rules().allows_loopback());
    let own_loopback = staged && !allows_loopback;
    let (mut env, mut inherit) = network_env(env, inherit, proxy_port, own_loopback, allow_dns);
    if mode == Mode::WorkspaceWrite {
        redirect_package_caches(resolved.workspace(), &mut env, &mut inherit);
    }
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
        audit_tag: spawner.audit_tag.clone(),
    };
    // From here on every failure removes the private directory: nobody will ever spawn
    // this request.
    let started = match start(
        &dir,
        &request,
        &status_path,
        &runner,
        &tag,
        staged,
        &invoker.homes,
    ) {
        Ok(started) => started,
        Err(e) => {
            dir.remove();
            return Err(e);
        }
    };
    not_granted.extend(started.unknown_protected.iter().map(|p| {
        format!(
            "protected path {}: the invoking user cannot look it up, so whether it exists is not known: not protected, and not checked after the run",
            p.display()
        )
    }));
    let report = BindingReport::new(
        started.digest,
        Some(receipt::policy_digest(&request.policy)),
        program,
        &request.binding,
    );
    Ok(Confinement {
        confined: ConfinedArgv {
            contract: CONTRACT_VERSION,
            argv: started.argv,
            enforcement: Some(enforcement),
            // The supervisor holding protected paths answers with the stage's words.
            denial_signatures: denial_signatures(mode, staged || protect_held(&request, staged)),
            runner_failure_rules: tagged_runner_failure_rules(mode, Some(&tag)),
            mode,
            guarantees: guarantees::report(&asks, &facts),
            status_path: Some(started.status_path),
            status_channel: Some(confined::status_channel(&facts)),
            not_granted,
            binding: Some(report),
            journal: None,
        },
        private_dir: Some(dir),
        unprotected: started
            .unprotected
            .into_iter()
            .chain(unheld.missing)
            .collect(),
        watched: unheld.existing,
        shared: started.shared,
        binding: request.binding,
    })
}

/// danger-full-access: nothing to enforce, so nothing to write; the executor runs the
/// raw argv.
fn unconfined(
    mode: Mode,
    command: &[OsString],
    cwd: std::path::PathBuf,
    env: &[(OsString, OsString)],
    binding: Binding,
) -> Result<Confinement, LauncherError> {
    let program = command.first().map(OsString::as_os_str).unwrap_or_default();
    let argv = command
        .iter()
        .map(|a| utf8(a, "the command"))
        .collect::<Result<_, _>>()?;
    let digest = receipt::unconfined_request_digest(command, &cwd, env, &binding);
    let report = BindingReport::new(digest, None, program, &binding);
    Ok(Confinement {
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
            journal: None,
        },
        private_dir: None,
        unprotected: Vec::new(),
        watched: Vec::new(),
        shared: Vec::new(),
        binding,
    })
}

/// The invoking user, with the variables that move credential stores taken from the
/// command's own environment too (`--env GNUPGHOME=...`): those stores are hidden as well.
fn invoker_with_command_movers(env: &[(OsString, OsString)], policy: &PolicyRequest) -> Invoker {
    let reads_past_modes = policy
        .keep_capabilities
        .iter()
        .any(|c| c.reads_past_modes());
    let mut invoker = placement::invoker(reads_past_modes);
    let movers = stockade_policy::credentials::variables();
    let command_movers = env.iter().filter(|(n, _)| movers.iter().any(|m| n == m));
    invoker.store_variables.extend(command_movers.cloned());
    invoker
}

/// The policy resolved for this caller, with a proxy port reserved when it names
/// domains.
fn resolve(
    policy: &PolicyRequest,
    cwd: &Path,
    tmpdir: Option<&Path>,
    invoker: &Invoker,
) -> Result<Policy, LauncherError> {
    let mut policy = policy.clone();
    if !policy.domains.is_empty() {
        policy.proxy_port = Some(proxy::reserve_port().map_err(LauncherError::ProxyPort)?);
    }
    Ok(policy.resolve(cwd, tmpdir, invoker)?)
}

/// How completely `mode` is enforced here, or why it cannot be.
fn enforcement(mode: Mode, asks: &Asks, facts: &KernelFacts) -> Result<Enforcement, LauncherError> {
    match guarantees::verdict(asks, facts) {
        ModeVerdict::Confined(e) => Ok(e),
        ModeVerdict::Unavailable { missing } => Err(LauncherError::Unavailable { mode, missing }),
        ModeVerdict::Unconfined => Err(LauncherError::Internal(
            "a confined mode was judged unconfined",
        )),
    }
}

/// The runner's path, once it and the launcher are found out of the command's reach, and
/// so is whatever `loader_env` (the spawner's environment the argv starts with, if any)
/// tells the dynamic loader of a binary that starts first: the runner, or the launcher
/// when `launcher_first` (proxy host or stage).
fn check_binaries(
    resolved: &Policy,
    loader_env: Option<&[(OsString, OsString)]>,
    launcher_first: bool,
    tmpdir: Option<&Path>,
    invoker: &Invoker,
) -> Result<String, LauncherError> {
    let runner = locate::runner()?;
    placement::check("runner", &runner, resolved, tmpdir, invoker)?;
    if let Some(env) = loader_env {
        placement::check_loader_env("runner", &runner, env, resolved, tmpdir, invoker)?;
    }
    let launcher = locate::launcher().map_err(|e| ControlError::ExposedBinary {
        what: "launcher",
        path: "/proc/self/exe".into(),
        why: format!("its location cannot be determined: {e}"),
    })?;
    placement::check("launcher", &launcher, resolved, tmpdir, invoker)?;
    if let Some(env) = loader_env.filter(|_| launcher_first) {
        placement::check_loader_env("launcher", &launcher, env, resolved, tmpdir, invoker)?;
    }
    utf8(runner.as_os_str(), "the runner path")
}

/// The control base, which must be out of the command's reach: a policy that could write
/// it could rewrite the requests and status files of other commands.
fn control_base(resolved: &Policy) -> Result<std::path::PathBuf, LauncherError> {
    let base = private_dir::base()?;
    if let Some(root) = private_dir::root_containing(&base, &grants::writable_roots(resolved)) {
        return Err(LauncherError::ControlBaseWritable {
            base,
            root: root.clone(),
        });
    }
    Ok(base)
}

/// What the caller asked for and does not get, each in a sentence.
fn not_granted(resolved: &Policy) -> Vec<String> {
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
    not_granted
}

/// The environment (the request's, or the one inherited at spawn time) with the
/// network's variables set; with an inherited environment the request carries none.
fn network_env(
    mut env: Vec<(OsString, OsString)>,
    mut inherit: Inherit,
    proxy_port: Option<u16>,
    own_loopback: bool,
    allow_dns: bool,
) -> (Vec<(OsString, OsString)>, Inherit) {
    let target = match inherit.env.as_mut() {
        Some(inherited) => &mut inherited.set,
        None => &mut env,
    };
    if let Some(port) = proxy_port {
        // The command's clients go through the proxy: set over whatever the caller had.
        // Under the stage the command's loopback is its own, reached directly, unless
        // the rules send it to the host's loopback through the proxy on purpose.
        let vars: Vec<(OsString, OsString)> = proxy_env(port, own_loopback)
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        target.retain(|(k, _)| !vars.iter().any(|(name, _)| name == k));
        target.extend(vars);
    }
    if allow_dns {
        // The C library's resolver asks over UDP unless told otherwise, and UDP is
        // refused: `use-vc` makes it use TCP, which port 53 is allowed for.
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
    (env, inherit)
}

/// What starts the command once its request is written: the argv and what the run
/// looks at afterwards.
struct Started {
    argv: Vec<String>,
    digest: String,
    status_path: String,
    unprotected: Vec<std::path::PathBuf>,
    /// Protected names the invoking user cannot look up: neither protected nor watched.
    unknown_protected: Vec<std::path::PathBuf>,
    shared: Vec<SharedRoot>,
}

/// Writes the request into `dir` and builds the argv that starts it: the runner, behind
/// the namespace stage when `staged`, behind the proxy host when the network is by name.
/// Whether the runner's supervisor holds the protected paths for `request` (no stage):
/// promised where the launcher found it can, and the runner fails rather than start
/// without it.
fn protect_held(request: &LaunchRequest, staged: bool) -> bool {
    !staged
        && request.promised.supervisor_writes
        && Asks::of(&request.policy).wants_write_supervisor()
        && !request.policy.protected().is_empty()
}

fn start(
    dir: &PrivateDir,
    request: &LaunchRequest,
    status_path: &Path,
    runner: &str,
    tag: &str,
    staged: bool,
    homes: &[std::path::PathBuf],
) -> Result<Started, LauncherError> {
    request.validate().map_err(LauncherError::Invalid)?;
    let (request_path, digest) = dir.write_request(request)?;
    // What the policy refuses, for naming each refusal once the command settled.
    // Whether the runner's metadata supervisor may answer the command's metadata calls:
    // promised without the stage; under it, the runner starts one for an inherited
    // descriptor the mounts do not hold (a log stdout appends to), which it alone knows
    // of. An `Operation not permitted` it did not cause is Unix's, which the Unix check
    // tells apart.
    let supervised = Asks::of(&request.policy).wants_supervisor()
        && ((request.promised.supervisor && !request.promised.namespaces) || staged);
    let mut scope = Scope::of(&request.policy, &request.cwd, staged, supervised).with_homes(homes);
    // Without the stage the supervisor holds the protected paths where the launcher
    // found it can (the runner fails rather than start without it).
    scope.protect_held = protect_held(request, staged);
    // Where its shell script goes with `cd`: a relative path in a line may start there.
    let home = request
        .env
        .iter()
        .find(|(k, _)| k == "HOME")
        .map(|(_, v)| Path::new(v));
    scope.script_dirs = script_directories::of(&request.argv, &request.cwd, home);
    dir.write_scope(&scope)?;
    let request_path = utf8(request_path.as_os_str(), "the request path")?;
    let status_path = utf8(status_path.as_os_str(), "the status path")?;
    let runner_argv = vec![
        runner.to_string(),
        "--request".to_string(),
        request_path,
        "--sha256".to_string(),
        digest.clone(),
        failure_tag::FLAG.to_string(),
        tag.to_string(),
    ];
    let (unprotected, unknown_protected) = if staged {
        missing_protected(&request.policy)
    } else {
        refuse_hidden_in_writable_root(&request.policy)?;
        Default::default()
    };
    let shared = shared_roots(&request.policy);
    // With the network by name, the proxy host starts first and hands one end of a
    // socket pair to the stage on a descriptor the command was not promised.
    let channel = (3..)
        .find(|fd| !request.policy.keep_fds().contains(fd))
        .unwrap_or(3);
    let net = match request.policy.domains() {
        Some(domains) if staged => Some(crate::stage::NetProxy {
            channel,
            port: domains.proxy_port(),
        }),
        _ => None,
    };
    let argv = if staged {
        let watch = crate::stage::Watch {
            shared: shared.iter().map(|r| r.path.clone()).collect(),
            missing: unprotected.clone(),
            report: None,
            keep_capabilities: request.policy.kept_capabilities(),
        };
        stage_argv(dir, &request.policy, &status_path, watch, net, &runner_argv)?
    } else {
        runner_argv
    };
    let argv = match request.policy.domains() {
        Some(domains) => proxy_argv(dir, domains, net, &argv)?,
        None => argv,
    };
    Ok(Started {
        argv,
        digest,
        status_path,
        unprotected,
        unknown_protected,
        shared,
    })
}

/// The default protected names missing from the roots, each looked up once: those
/// provably absent (watched: one that appears is reported), and those the invoker cannot
/// look up (which may exist: reported as unknown, never as absent).
fn missing_protected(policy: &Policy) -> (Vec<std::path::PathBuf>, Vec<std::path::PathBuf>) {
    let mut absent = Vec::new();
    let mut unknown = Vec::new();
    for name in stage::unprotected_names(policy, &|_| false) {
        let lookup = name.symlink_metadata();
        if stage::absent(&lookup) {
            absent.push(name);
        } else if lookup.is_err() {
            unknown.push(name);
        }
    }
    (absent, unknown)
}

/// The protected paths no read-only bind holds (the stage is not there): the defaults
/// in each root the command can write (`--no-stage` resolves none, yet a command
/// could still plant a hook) and any the policy resolved, links among them; and the
/// default names shown missing, to report those that appear as the stage would.
fn unheld_protected(request: &PolicyRequest, resolved: &Policy) -> Unheld {
    if request.mode != Mode::WorkspaceWrite {
        return Unheld::default();
    }
    let roots: Vec<std::path::PathBuf> = std::iter::once(resolved.workspace().to_path_buf())
        .chain(resolved.writable_roots().iter().cloned())
        .collect();
    let explicit: Vec<std::path::PathBuf> = resolved
        .protected()
        .iter()
        .map(|p| p.path.clone())
        .collect();
    let kind = |p: &Path| match p.symlink_metadata() {
        Err(_) => stage::PathKind::Missing,
        Ok(m) if m.file_type().is_symlink() => stage::PathKind::Link,
        Ok(m) if m.is_dir() => stage::PathKind::Directory,
        Ok(_) => stage::PathKind::File,
    };
    let found = stage::protected_paths(&roots, &explicit, request.default_protect, &kind);
    let missing = if request.default_protect {
        roots
            .iter()
            .flat_map(|root| {
                stage::DEFAULT_PROTECTED
                    .iter()
                    .chain(&stage::DEFAULT_PROTECTED_FILES)
                    .map(move |name| root.join(name))
            })
            .filter(|p| stage::absent(&p.symlink_metadata()))
            .collect()
    } else {
        Vec::new()
    };
    Unheld {
        existing: found
            .paths
            .into_iter()
            .map(|p| p.path)
            .chain(found.links)
            .collect(),
        missing,
    }
}

/// What [`unheld_protected`] found.
#[derive(Default)]
struct Unheld {
    existing: Vec<std::path::PathBuf>,
    missing: Vec<std::path::PathBuf>,
}

/// Without the stage, a hidden path inside a writable root can be renamed out of hiding
/// (Landlock lets a command move what it cannot read), and the next command would read
/// it under its new name. Only the stage's read-only bind stops that.
fn refuse_hidden_in_writable_root(policy: &Policy) -> Result<(), LauncherError> {
    let writable = grants::writable_roots(policy);
    match policy
        .hidden()
        .iter()
        .find(|h| writable.iter().any(|r| h.starts_with(r)))
    {
        Some(hidden) => Err(LauncherError::HiddenInWritableRoot {
            path: hidden.clone(),
        }),
        None => Ok(()),
    }
}

/// The namespace stage's argv in front of `runner_argv`. The stage runs first where it
/// has work and the machine allows it; the control directory stays writable in it, for
/// the runner's status record.
fn stage_argv(
    dir: &PrivateDir,
    policy: &Policy,
    status_path: &str,
    mut watch: crate::stage::Watch,
    net: Option<crate::stage::NetProxy>,
    runner_argv: &[String],
) -> Result<Vec<String>, LauncherError> {
    let control = Path::new(status_path).parent();
    let writable = grants::writable_roots(policy);
    let pids = policy.pids() != PidMode::Share;
    let plan = stage::plan(policy, &writable, control, pids);
    if !watch.shared.is_empty() || !watch.missing.is_empty() {
        watch.report = Some(dir.create_report()?);
    }
    let launcher = launcher_path()?;
    Ok(crate::stage::argv(
        &plan,
        &watch,
        net,
        &launcher,
        runner_argv,
    ))
}

/// The proxy host's argv in front of `argv`, for the network by name.
fn proxy_argv(
    dir: &PrivateDir,
    domains: &DomainPolicy,
    net: Option<crate::stage::NetProxy>,
    argv: &[String],
) -> Result<Vec<String>, LauncherError> {
    let launcher = launcher_path()?;
    let spec = proxy::host::Spec {
        rules: domains.rules().clone(),
        record: dir.network_record_path(),
        listen: match net {
            Some(net) => proxy::host::Listen::NetnsChannel(net.channel),
            None => proxy::host::Listen::Port(domains.proxy_port()),
        },
    };
    Ok(proxy::host::argv(&spec, &launcher, argv))
}

/// This executable's path, for the argv of the stage and the proxy host.
fn launcher_path() -> Result<String, LauncherError> {
    locate::launcher()
        .map_err(LauncherError::LauncherPath)
        .and_then(|p| utf8(p.as_os_str(), "the launcher path"))
}

/// Points the package managers' caches into the workspace (see
/// `stockade_policy::package_caches`), unless the caller named the variable itself: in
/// the request's environment, or with `--env` over an inherited one (whose spawn-time
/// values are not known here, so the redirection is set over them).
fn redirect_package_caches(
    workspace: &Path,
    env: &mut Vec<(OsString, OsString)>,
    inherit: &mut Inherit,
) {
    let target = match inherit.env.as_mut() {
        Some(inherited) => &mut inherited.set,
        None => env,
    };
    for (name, dir) in stockade_policy::package_caches::cache_env(workspace) {
        if stockade_policy::environment::lookup(target, name).is_none() {
            target.push((name.into(), dir.into_os_string()));
        }
    }
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
    let prepared = prepared(args)?;
    prepared.hand_over(|json| stdout::write(&format!("{json}\n")))?;
    Ok(0)
}

/// A ConfinedArgv prepared and not yet handed over: its JSON line (without the newline)
/// and the private directory holding its request.
pub struct Prepared {
    pub json: String,
    private_dir: Option<PrivateDir>,
}

impl Prepared {
    /// Hands the line over with `write`; when that fails the request goes: nobody will
    /// ever spawn a request that was not handed over.
    pub fn hand_over(
        self,
        write: impl FnOnce(&str) -> Result<(), LauncherError>,
    ) -> Result<(), LauncherError> {
        let written = write(&self.json);
        if written.is_err()
            && let Some(dir) = self.private_dir
        {
            dir.remove();
        }
        written
    }
}

/// `stockade confine ARGS` up to what it prints: the request written (and recorded under
/// `--journal KEY`) and the ConfinedArgv serialised. `serve` answers with the same line.
pub fn prepared(args: &ConfineArgs) -> Result<Prepared, LauncherError> {
    let mut confinement = confine_inheriting(
        &args.policy.to_request(),
        &args.command.command,
        env::target_env(&args.env).vars,
        inherit(args),
        // The executor spawns the runner: only then are its stdin and group known.
        RunnerSession::WhenTerminal,
        args.bind.bind_executable_hash,
        args.die_with_executor,
    )?;
    // `classify` records the verdict under the key (checked against the journal then).
    confinement.confined.journal = args.journal.journal.clone();
    let json = record_request(args, &confinement)
        .and_then(|()| serde_json::to_string(&confinement.confined).map_err(LauncherError::Json));
    match json {
        Ok(json) => Ok(Prepared {
            json,
            private_dir: confinement.private_dir,
        }),
        Err(e) => {
            if let Some(dir) = confinement.private_dir {
                dir.remove();
            }
            Err(e)
        }
    }
}

/// With `--journal KEY`: records the request under KEY before the ConfinedArgv is
/// handed over (nothing can start before).
fn record_request(args: &ConfineArgs, confinement: &Confinement) -> Result<(), LauncherError> {
    let Some(key) = &args.journal.journal else {
        return Ok(());
    };
    crate::journal::Journal::open()?.record_request(
        key,
        stockade_policy::journal::Requester::Confine,
        confinement.confined.mode,
        &args.command.command,
        confinement.private_dir.as_ref().map(|d| d.path()),
    )
}
