//! The command line of `stockade`. Parsing only: every decision is made elsewhere.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;
use stockade_policy::capability::Capability;
use stockade_policy::domains::{DomainRules, HostRule, Pin, RuleKind};
use stockade_policy::stage::{PidMode, TmpMode};
use stockade_policy::{Mode, Network, PolicyRequest};

#[derive(Parser, Debug)]
#[command(
    name = "stockade",
    version,
    about = "Run commands confined by Landlock and seccomp: stockade confine | run | classify | probe | explain | serve",
    long_about = "Run commands confined by Landlock and seccomp.\n\n\
`stockade run` runs a command confined and supervised and reports what happened; \
`stockade confine` prepares a confined command for an executor that spawns it itself, and \
`stockade classify` judges how it ended; `stockade probe` shows what this kernel can enforce; \
`stockade explain` shows what a prepared request would do. Modes: read-only, \
workspace-write (the default: the workspace, /tmp and $TMPDIR are writable) and \
danger-full-access (no confinement). The command always follows --.",
    after_help = AFTER_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The end of `stockade --help`. Its `Environment:` block is also the ENVIRONMENT section
/// of stockade(1) (packaging/docgen reads it from here): one line per variable, the name,
/// two spaces or more, what it does.
pub const AFTER_HELP: &str = "Examples:
  stockade run -- bash -c 'echo hi > out.txt'    # writes only beneath the current directory
  stockade run --mode read-only --timeout 30s -- make -n
  stockade probe                                 # what this kernel can enforce

Exit codes: the command's own code; 124 timed out; 125 stockade or its runner failed (nothing ran); \
126 the program could not be executed; 127 the program was not found; 128+N killed by signal N.

Environment:
  STOCKADE_RUNNER       The runner to use. Otherwise stockade-runner next to this executable, else ../libexec/stockade/stockade-runner beside its bin directory, else /usr/libexec/stockade/stockade-runner.
  STOCKADE_CONTROL_DIR  The control directory, which holds every request, status and spill file (an absolute path, private to the user). Otherwise $XDG_RUNTIME_DIR/stockade, else /run/user/UID/stockade, else /run/stockade-0 for root, else ~/.local/state/stockade. Never beneath /tmp, /dev/shm or a $TMPDIR a command could be granted: there, or anywhere not private, it is an error, never a move elsewhere.
  XDG_RUNTIME_DIR       When set (absolute) and STOCKADE_CONTROL_DIR is not, the control directory is $XDG_RUNTIME_DIR/stockade.
  HOME                  The last control directory, ~/.local/state/stockade; and a home (this one and the one in /etc/passwd) or an ancestor of one is a broad root, refused as a writable root without --allow-broad-root.
  TMPDIR                The command's $TMPDIR is writable in workspace-write only when it is safe: a directory of the user's beneath /tmp, /var/tmp, /dev/shm, /run/user/UID or the home, not a broad root, reached through no link another user or a command could have planted; otherwise it is left out and named in notGranted.";

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Write a launch request for CMD and print the ConfinedArgv JSON an executor spawns.
    #[command(after_help = "Examples:
  stockade confine --mode read-only -- bash -c 'ls /root' > c.json
  mapfile -t argv < <(jq -r '.argv[]' c.json); \"${argv[@]}\" 2> err; echo $? > code
  stockade classify --confined c.json --exit-code \"$(cat code)\" --stderr err")]
    Confine(ConfineArgs),
    /// Run CMD confined and supervised: everything it starts is ended with it; output
    /// passes through (or is captured with --json).
    #[command(after_help = "Examples:
  stockade run -- bash -c 'echo hello > hello.txt; touch /etc/nope'
  stockade run --mode read-only --timeout 2m -- grep -rn TODO src
  stockade run --json --max-output 16K --max-spill 64M -- make")]
    Run(RunArgs),
    /// Classify a settled process spawned from a ConfinedArgv: print one JSON verdict
    /// (recorded in the journal when it was confined with `--journal KEY`) and remove
    /// the private directory (see docs/provider-contract.md).
    #[command(after_help = "Examples:
  stockade classify --confined c.json --exit-code 1 --stderr err.txt
  stockade classify --confined c.json --signal SIGKILL
  stockade classify --confined - --exit-code 0 < c.json")]
    Classify(ClassifyArgs),
    /// Show the kernel facts stockade depends on and, per mode, which guarantees would be
    /// enforced here.
    #[command(after_help = "Examples:
  stockade probe
  stockade probe --json | jq '.modes[\"workspace-write\"].verdict'")]
    Probe(ProbeArgs),
    /// Show what a launch request written by `stockade confine` would do (argv, cwd,
    /// environment, filesystem grants) and whether the runner would accept it, without
    /// consuming or running it.
    #[command(after_help = "Examples:
  stockade confine --mode read-only -- ls /root > c.json
  stockade explain \"$(jq -r '.argv[] | select(test(\"/request$\"))' c.json)\"")]
    Explain(ExplainArgs),
    /// After a crash: whether the request recorded under KEY (`--journal KEY`) was never
    /// started, finished (with its receipt), or its outcome is unknown; prints one JSON
    /// object. An unconsumed request is withdrawn, so "not-started" stays true.
    #[command(after_help = "Examples:
  stockade run --journal build-42 -- make
  stockade outcome build-42 | jq -r .state")]
    Outcome(OutcomeArgs),
    /// Answer confine requests for a provider that keeps this process alive: one JSON
    /// line per request on stdin (`{"cwd": DIR, "args": [CONFINE ARGS...]}`), one JSON
    /// line per answer on stdout (`{"confined": CONFINEDARGV}` or `{"error": LINE,
    /// "exitCode": N}`), until stdin ends. Each request is exactly `stockade confine
    /// ARGS` run in DIR, without a process start per call (see
    /// docs/provider-contract.md, section 10).
    #[command(after_help = "Examples:
  printf '{\"cwd\":\"%s\",\"args\":[\"--mode\",\"read-only\",\"--\",\"ls\"]}\\n' \"$PWD\" | stockade serve")]
    Serve(ServeArgs),
}

#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// The request file: the argument after `--request` in the ConfinedArgv's `argv`.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Instead of the whole request, what its policy lets a command do to PATH (read,
    /// write, truncate, execute, list, create in, remove, metadata, ...), answered by the
    /// policy model. Repeatable.
    #[arg(long = "path", value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ProbeArgs {
    /// Print one JSON object (stable field names) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The policy flags every subcommand that takes a policy shares.
#[derive(Args, Debug, Clone)]
pub struct PolicyArgs {
    /// Sandbox mode: read-only, workspace-write or danger-full-access.
    #[arg(long, value_name = "MODE", default_value_t = Mode::WorkspaceWrite,
        value_parser = MODES,
        hide_possible_values = true)]
    pub mode: Mode,
    /// Workspace root, writable in workspace-write mode [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// An extra writable root in workspace-write mode (repeatable).
    #[arg(long = "writable", value_name = "DIR")]
    pub writable: Vec<PathBuf>,
    /// Network in the confined modes: allow or deny [default: deny; refused with
    /// danger-full-access, which confines nothing].
    #[arg(long, value_name = "allow|deny", value_parser = NETWORKS,
        hide_possible_values = true)]
    pub network: Option<Network>,
    /// With the network denied, still allow outgoing TCP to PORT (repeatable; needs
    /// Landlock ABI 4, else nothing runs; refused with --network allow, where every port
    /// is reachable).
    #[arg(long = "allow-tcp-connect", value_name = "PORT")]
    pub allow_tcp_connect: Vec<u16>,
    /// With the network denied, let the command resolve names: TCP to port 53 (of any
    /// host) and RES_OPTIONS=use-vc, so that the C library's resolver asks over TCP
    /// (needs Landlock ABI 4; UDP stays refused; resolvers that never use TCP, such as
    /// musl's and Go's own, still fail).
    #[arg(long = "allow-dns")]
    pub allow_dns: bool,
    /// Allow creating unix sockets, which can reach services outside the sandbox (a
    /// D-Bus, systemd or docker socket), and datagram socketpairs (which can address
    /// any of them). Stream and seqpacket socketpairs are always allowed.
    #[arg(long = "allow-unix-sockets")]
    pub allow_unix_sockets: bool,
    /// Pass inherited descriptor N (above 2) on to the command (repeatable); every other
    /// descriptor above 2 is closed.
    #[arg(long = "keep-fd", value_name = "N")]
    pub keep_fd: Vec<i32>,
    /// Allow a workspace or --writable root that is /, your home directory or an
    /// ancestor of either (refused otherwise: it would make them writable).
    #[arg(long = "allow-broad-root")]
    pub allow_broad_root: bool,
    /// A path no confined command may read, in every confined mode (repeatable).
    #[arg(long = "hide", value_name = "PATH")]
    pub hide: Vec<PathBuf>,
    /// Let the command read and write the device file PATH beneath /dev (repeatable),
    /// such as /dev/kvm or /dev/dri/renderD128: only the standard devices (/dev/null,
    /// /dev/urandom, /dev/tty, ...) are readable otherwise, and only /dev/null writable.
    #[arg(long = "allow-device", value_name = "PATH")]
    pub allow_device: Vec<PathBuf>,
    /// Do not hide the default credential stores (~/.ssh, ~/.aws, ...), the system's
    /// secrets and the devices beyond the standard ones (/dev/null, /dev/urandom, ...);
    /// stockade's own control directories stay hidden.
    #[arg(long = "no-default-hide")]
    pub no_default_hide: bool,
    /// Bind PATH (inside a writable root) read-only, so the command cannot change,
    /// remove or rename it (repeatable; needs namespaces, else nothing runs).
    #[arg(long = "protect", value_name = "PATH")]
    pub protect: Vec<PathBuf>,
    /// Do not protect .git/hooks, .git/config, .envrc and shell start-up files in each
    /// writable root.
    #[arg(long = "no-default-protect")]
    pub no_default_protect: bool,
    /// /tmp: shared (the machine's) or private (empty, the command's own, gone after it;
    /// needs namespaces, else nothing runs) [default: shared].
    #[arg(long = "tmp", value_name = "shared|private",
        value_parser = TMP_MODES, hide_possible_values = true)]
    pub tmp: Option<TmpMode>,
    /// Require a pid namespace: no other process can be seen (else nothing runs)
    /// [default: one where namespaces are available].
    #[arg(long = "isolate-pids", conflicts_with = "share_pids")]
    pub isolate_pids: bool,
    /// Let the command see the machine's processes (no pid namespace).
    #[arg(long = "share-pids")]
    pub share_pids: bool,
    /// Never start the namespace stage (Landlock and seccomp only; metadata and
    /// protected paths are then held by the runner's supervisor where the kernel lets
    /// it, the stage's other guarantees not requested, or reported unavailable).
    #[arg(long = "no-stage")]
    pub no_stage: bool,
    /// Keep capability NAME when started as root (repeatable): CAP_DAC_OVERRIDE,
    /// CAP_DAC_READ_SEARCH, CAP_FOWNER or CAP_CHOWN (or dac_override, ...; no other).
    /// Root then reaches files it does not own, such as a workspace of another uid; the
    /// filesystem rules still hold, but other users' private files become readable
    /// [default: none kept; refused where this process does not hold NAME].
    #[arg(long = "keep-capability", value_name = "NAME")]
    pub keep_capability: Vec<Capability>,
    /// Let the command reach HOST through stockade's filtering proxy (repeatable):
    /// example.org, *.example.org (names below it), * (any name), an IP address or
    /// range (10.0.0.0/8, [fd00::1]); :PORT, else ports 80 and 443. Nothing else is
    /// reachable; IP literals and names that resolve to loopback, private or link-local
    /// addresses are refused unless such an address is allowed this way.
    #[arg(long = "allow-domain", value_name = "HOST[:PORT]", value_parser = parse_allow_rule)]
    pub allow_domain: Vec<HostRule>,
    /// Refuse HOST through the proxy even where --allow-domain admits it (repeatable;
    /// :PORT, else every port).
    #[arg(long = "deny-domain", value_name = "HOST[:PORT]", value_parser = parse_deny_rule)]
    pub deny_domain: Vec<HostRule>,
    /// Have the proxy resolve NAME to ADDRESS instead of asking DNS (repeatable). A
    /// loopback or private ADDRESS must be allowed with --allow-domain ADDRESS too.
    #[arg(long = "resolve", value_name = "NAME=ADDRESS", value_parser = Pin::parse)]
    pub resolve: Vec<Pin>,
}

fn parse_allow_rule(text: &str) -> Result<HostRule, String> {
    HostRule::parse(text, RuleKind::Allow)
}

fn parse_deny_rule(text: &str) -> Result<HostRule, String> {
    HostRule::parse(text, RuleKind::Deny)
}

impl PolicyArgs {
    pub fn to_request(&self) -> PolicyRequest {
        PolicyRequest {
            mode: self.mode,
            workspace: self.workspace.clone(),
            writable: self.writable.clone(),
            network: self.network,
            allow_tcp_connect: self.allow_tcp_connect.clone(),
            allow_unix_sockets: self.allow_unix_sockets,
            keep_fds: self.keep_fd.clone(),
            allow_broad_root: self.allow_broad_root,
            hide: self.hide.clone(),
            allow_devices: self.allow_device.clone(),
            default_hide: !self.no_default_hide,
            protect: self.protect.clone(),
            default_protect: !self.no_default_protect,
            tmp: self.tmp,
            pids: if self.isolate_pids {
                Some(PidMode::Isolate)
            } else if self.share_pids {
                Some(PidMode::Share)
            } else {
                None
            },
            no_stage: self.no_stage,
            keep_capabilities: self.keep_capability.clone(),
            domains: DomainRules {
                allow: self.allow_domain.clone(),
                deny: self.deny_domain.clone(),
                pins: self.resolve.clone(),
            },
            // Reserved by `confine`, which knows whether a proxy runs at all.
            proxy_port: None,
            allow_dns: self.allow_dns,
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

/// The environment flags: the request carries the complete environment, so `confine` and
/// `run` build it the same way (see `env.rs`).
#[derive(Args, Debug, Clone, Default)]
pub struct EnvArgs {
    /// Set NAME to VALUE in the command's environment (repeatable; applied last).
    #[arg(long = "env", value_name = "NAME=VALUE", value_parser = super::env::parse_assignment)]
    pub env: Vec<(OsString, OsString)>,
    /// Pass NAME through although it looks like a secret or --clear-env drops it (repeatable).
    #[arg(
        long = "keep-env",
        value_name = "NAME",
        value_parser = clap::builder::TypedValueParser::try_map(
            clap::builder::OsStringValueParser::new(),
            super::env::parse_keep_name,
        )
    )]
    pub keep_env: Vec<OsString>,
    /// Start from nothing but PATH, HOME, LANG, LC_*, TERM and USER.
    #[arg(long = "clear-env")]
    pub clear_env: bool,
}

/// What the binding covers besides the executable's identity.
#[derive(Args, Debug, Clone, Default)]
pub struct BindArgs {
    /// Also bind the executable's content: its SHA-256 is computed now and again just
    /// before it starts (files up to 256 MiB; each run reads the whole file).
    #[arg(long = "bind-executable-hash")]
    pub bind_executable_hash: bool,
}

/// The journal key (see `stockade outcome`).
#[derive(Args, Debug, Clone, Default)]
pub struct JournalArgs {
    /// Record this request in the journal under KEY (1-64 letters, digits, - and _, new
    /// each time), so that after a crash `stockade outcome KEY` tells whether it ran.
    #[arg(long = "journal", value_name = "KEY", value_parser = parse_journal_key)]
    pub journal: Option<String>,
}

fn parse_journal_key(key: &str) -> Result<String, String> {
    stockade_policy::journal::check_key(key).map(|()| key.to_string())
}

/// `stockade serve` takes no arguments: everything a request needs is in its line.
#[derive(Args, Debug)]
pub struct ServeArgs {}

#[derive(Args, Debug)]
pub struct OutcomeArgs {
    /// The key the request was recorded under (`--journal KEY`).
    #[arg(value_name = "KEY")]
    pub key: String,
}

#[derive(Args, Debug)]
pub struct ConfineArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    #[command(flatten)]
    pub env: EnvArgs,
    #[command(flatten)]
    pub inherit: InheritArgs,
    #[command(flatten)]
    pub bind: BindArgs,
    #[command(flatten)]
    pub journal: JournalArgs,
    /// End the command when the process that spawns the argv dies (the argv then starts
    /// with `stockade __die-with-parent --`). By default it outlives its executor.
    #[arg(long = "die-with-executor")]
    pub die_with_executor: bool,
    #[command(flatten)]
    pub command: CommandArgs,
}

/// `confine` only: take the working directory and environment from whoever spawns the
/// argv, not from `confine`'s own (the policy still comes only from the request).
#[derive(Args, Debug, Clone, Default)]
pub struct InheritArgs {
    /// Start the command in the directory the runner is spawned in.
    #[arg(long = "inherit-cwd")]
    pub inherit_cwd: bool,
    /// Build the command's environment from the runner's spawn-time environment, through
    /// the environment rule (filtered, the default; --keep-env, --clear-env and --env
    /// apply) or unchanged (unfiltered; --env still applies).
    #[arg(
        long = "inherit-env",
        value_name = "RULE",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "filtered"
    )]
    pub inherit_env: Option<InheritEnvRule>,
}

/// Whether the environment rule applies to an inherited environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum InheritEnvRule {
    Filtered,
    Unfiltered,
}

/// How `stockade run` supervises the command.
#[derive(Args, Debug, Clone)]
pub struct SuperviseArgs {
    /// End the command (and everything it started) after DURATION: 500ms, 30s, 2m, 1h.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = DURATIONS, hide_possible_values = true)]
    pub timeout: Option<Duration>,
    /// Time between SIGTERM and SIGKILL when ending the command.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = DURATIONS, default_value = "3s", hide_possible_values = true)]
    pub grace: Duration,
    /// How to hold everything the command starts: a cgroup v2 group when one can be
    /// created (auto), or a subreaper and process group.
    #[arg(long, value_name = "KIND", value_enum, default_value_t = ContainmentChoice::Auto)]
    pub containment: ContainmentChoice,
    /// Leave processes that outlive the command running (they are reported, not killed).
    #[arg(long = "keep-background")]
    pub keep_background: bool,
    /// Capture both streams and print one JSON result on stdout.
    #[arg(long)]
    pub json: bool,
    /// With --json: bytes of each stream kept in memory (the tail): 64000, 16K, 1M
    /// (K, M, G are binary: 1K = 1024; KiB, MiB, GiB too).
    #[arg(long = "max-output", value_name = "SIZE", requires = "json", allow_hyphen_values = true, value_parser = super::size::parse_usize, default_value = "64000")]
    pub max_output: usize,
    /// With --json: bytes of each stream kept in its spill file; past this the file is
    /// deleted: 64M, 1G (binary units).
    #[arg(long = "max-spill", value_name = "SIZE", requires = "json", allow_hyphen_values = true, value_parser = super::size::parse, default_value = "64M")]
    pub max_spill: u64,
    /// Memory the command may use: 512M, 4G (its cgroup's memory.max where the memory
    /// controller is there, else RLIMIT_AS per process).
    #[arg(long = "max-memory", value_name = "SIZE", allow_hyphen_values = true, value_parser = super::size::parse)]
    pub max_memory: Option<u64>,
    /// Processes the command may have at once (its cgroup's pids.max where the pids
    /// controller is there, else RLIMIT_NPROC, which counts all of this user's).
    #[arg(long = "max-processes", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_processes: Option<u64>,
    /// CPU time each process of the command may use (RLIMIT_CPU): 30s, 10m.
    #[arg(long = "max-cpu-time", value_name = "DURATION", allow_hyphen_values = true, value_parser = DURATIONS, hide_possible_values = true)]
    pub max_cpu_time: Option<Duration>,
    /// The largest file the command may write (RLIMIT_FSIZE): 1G.
    #[arg(long = "max-file-size", value_name = "SIZE", allow_hyphen_values = true, value_parser = super::size::parse)]
    pub max_file_size: Option<u64>,
    /// No default memory and process limits (by default, where the command's cgroup
    /// has the controllers: 3/4 of the machine's memory, and 4096 processes or 128 per
    /// CPU, whichever is more).
    #[arg(long = "no-default-limits")]
    pub no_default_limits: bool,
}

impl SuperviseArgs {
    /// The resource limits asked for (CPU time in whole seconds, rounded up); the
    /// machine's defaults are filled in by `run` (`limits_of`).
    pub fn limits(&self) -> stockade_policy::limits::Limits {
        stockade_policy::limits::Limits {
            memory: self.max_memory,
            processes: self.max_processes,
            cpu_time: self
                .max_cpu_time
                .map(|d| d.as_secs() + u64::from(d.subsec_nanos() > 0)),
            file_size: self.max_file_size,
            defaults: None,
        }
    }
}

/// Which containment `stockade run` may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ContainmentChoice {
    /// A cgroup when one can be created, else a subreaper.
    Auto,
    /// A cgroup, or fail (exit 125) without running anything.
    Cgroup,
    /// A subreaper and process group, even where a cgroup is available.
    Subreaper,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    #[command(flatten)]
    pub env: EnvArgs,
    #[command(flatten)]
    pub supervise: SuperviseArgs,
    #[command(flatten)]
    pub bind: BindArgs,
    #[command(flatten)]
    pub journal: JournalArgs,
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
    /// The signal that killed the process (SIGKILL, KILL or 9; a real-time one by number or as SIGRTMIN+N).
    #[arg(long, value_name = "NAME")]
    pub signal: Option<String>,
    /// The process's collected stderr (a file, or - for stdin) [default: empty].
    #[arg(long, value_name = "FILE|-")]
    pub stderr: Option<PathBuf>,
}

impl Cli {
    /// Refuses what parses but cannot be what the caller meant: a flag that means
    /// nothing in the chosen mode, or an empty program name. Ignoring either silently
    /// would let a caller believe it took effect; the message names the fix.
    pub fn check(&self) -> Result<(), String> {
        let (policy, command) = match &self.command {
            Command::Confine(a) => (&a.policy, &a.command),
            Command::Run(a) => {
                a.supervise.limits().check()?;
                (&a.policy, &a.command)
            }
            Command::Classify(_)
            | Command::Probe(_)
            | Command::Explain(_)
            | Command::Outcome(_)
            | Command::Serve(_) => {
                return Ok(());
            }
        };
        policy.check()?;
        command.check()
    }
}

impl PolicyArgs {
    /// The first flag given that means nothing under `--mode`.
    fn check(&self) -> Result<(), String> {
        match self.mode {
            Mode::ReadOnly if !self.writable.is_empty() => Err(
                "--writable has no effect in read-only mode, where nothing is writable; \
use --mode workspace-write or drop --writable"
                    .into(),
            ),
            Mode::ReadOnly if !self.protect.is_empty() => Err(
                "--protect has no effect in read-only mode, where nothing is writable; \
use --mode workspace-write or drop --protect"
                    .into(),
            ),
            Mode::ReadOnly
                if let Some(cap) = self
                    .keep_capability
                    .iter()
                    .find(|c| !c.meaningful_in(Mode::ReadOnly)) =>
            {
                Err(format!(
                    "--keep-capability {cap} has no effect in read-only mode, where no owner, mode or time can change; \
use --mode workspace-write or drop it"
                ))
            }
            Mode::DangerFullAccess => {
                let given = [
                    ("--writable", !self.writable.is_empty()),
                    ("--network", self.network.is_some()),
                    ("--allow-tcp-connect", !self.allow_tcp_connect.is_empty()),
                    ("--allow-dns", self.allow_dns),
                    ("--allow-unix-sockets", self.allow_unix_sockets),
                    ("--keep-fd", !self.keep_fd.is_empty()),
                    ("--hide", !self.hide.is_empty()),
                    ("--allow-device", !self.allow_device.is_empty()),
                    ("--protect", !self.protect.is_empty()),
                    ("--tmp", self.tmp.is_some()),
                    ("--isolate-pids", self.isolate_pids),
                    ("--keep-capability", !self.keep_capability.is_empty()),
                    ("--allow-domain", !self.allow_domain.is_empty()),
                    ("--deny-domain", !self.deny_domain.is_empty()),
                    ("--resolve", !self.resolve.is_empty()),
                ];
                match given.iter().find(|(_, present)| *present) {
                    Some((flag, _)) => Err(format!(
                        "{flag} has no effect in danger-full-access mode, which confines nothing; \
drop it, or use --mode workspace-write or read-only"
                    )),
                    None => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }
}

impl CommandArgs {
    fn check(&self) -> Result<(), String> {
        match self.command.first() {
            Some(program) if program.is_empty() => Err(
                "the program name (the first word after --) is empty; name the command to run, as in: -- ls -l"
                    .into(),
            ),
            _ => Ok(()),
        }
    }
}

/// A value parsed as before (the parser's message names the accepted spellings) that
/// also lists its spellings, or for a free-form value some examples, so that the
/// generated completions offer those instead of file names.
#[derive(Clone)]
struct Choices<T> {
    names: &'static [&'static str],
    parse: fn(&str) -> Result<T, String>,
}

impl<T> Choices<T> {
    const fn new(names: &'static [&'static str], parse: fn(&str) -> Result<T, String>) -> Self {
        Choices { names, parse }
    }
}

impl<T: Clone + Send + Sync + 'static> clap::builder::TypedValueParser for Choices<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        let parse = self.parse;
        clap::builder::StringValueParser::new()
            .try_map(move |s: String| parse(&s))
            .parse_ref(cmd, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            self.names
                .iter()
                .map(|n| clap::builder::PossibleValue::new(*n)),
        ))
    }
}

/// `--mode`, `--network`, `--tmp` by their own spellings; durations by examples.
const MODES: Choices<Mode> = Choices::new(
    &["read-only", "workspace-write", "danger-full-access"],
    |s| {
        s.parse()
            .map_err(|e: stockade_policy::mode::UnknownMode| e.to_string())
    },
);
const NETWORKS: Choices<Network> = Choices::new(&["allow", "deny"], |s| s.parse());
const TMP_MODES: Choices<TmpMode> = Choices::new(&["shared", "private"], |s| s.parse());
const DURATIONS: Choices<Duration> = Choices::new(
    &["500ms", "10s", "30s", "2m", "10m", "1h"],
    super::duration::parse,
);

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
        assert!(
            Cli::try_parse_from(["stockade", "run", "--network", "maybe", "--", "ls"]).is_err()
        );
        assert!(
            Cli::try_parse_from(["stockade", "run", "--allow-tcp-connect", "x", "--", "ls"])
                .is_err()
        );
    }

    #[test]
    fn hardening_flags_reach_the_policy_request() {
        let cli = Cli::try_parse_from([
            "stockade",
            "run",
            "--network",
            "deny",
            "--allow-tcp-connect",
            "443",
            "--allow-tcp-connect",
            "80",
            "--allow-unix-sockets",
            "--keep-fd",
            "5",
            "--",
            "ls",
        ])
        .unwrap();
        let Command::Run(args) = cli.command else {
            panic!()
        };
        let req = args.policy.to_request();
        assert_eq!(req.network, Some(Network::Deny));
        assert_eq!(req.allow_tcp_connect, vec![443, 80]);
        assert!(req.allow_unix_sockets);
        assert_eq!(req.keep_fds, vec![5]);
        let cli = Cli::try_parse_from(["stockade", "probe", "--json"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Probe(ProbeArgs { json: true })
        ));
    }

    #[test]
    fn run_options_parse_with_their_defaults() {
        let cli = Cli::try_parse_from(["stockade", "run", "--", "true"]).unwrap();
        let Command::Run(args) = cli.command else {
            panic!()
        };
        assert_eq!(args.supervise.timeout, None);
        assert_eq!(args.supervise.grace, Duration::from_secs(3));
        assert_eq!(args.supervise.max_output, 64_000);
        assert_eq!(args.supervise.max_spill, 64 * 1024 * 1024);
        let cli = Cli::try_parse_from([
            "stockade",
            "run",
            "--json",
            "--max-output",
            "16K",
            "--max-spill",
            "1G",
            "--timeout",
            "1h",
            "--",
            "true",
        ])
        .unwrap();
        let Command::Run(args) = cli.command else {
            panic!()
        };
        assert_eq!(args.supervise.max_output, 16 * 1024);
        assert_eq!(args.supervise.max_spill, 1 << 30);
        assert_eq!(args.supervise.timeout, Some(Duration::from_secs(3600)));
        let cli = Cli::try_parse_from([
            "stockade",
            "run",
            "--timeout",
            "500ms",
            "--env",
            "A=b=c",
            "--keep-env",
            "X",
            "--clear-env",
            "--json",
            "--",
            "true",
        ])
        .unwrap();
        let Command::Run(args) = cli.command else {
            panic!()
        };
        assert_eq!(args.supervise.timeout, Some(Duration::from_millis(500)));
        assert_eq!(args.env.env, vec![("A".into(), "b=c".into())]);
        assert!(args.env.clear_env && args.supervise.json);
        for bad in [
            ["--timeout", "5"],
            ["--env", "=x"],
            ["--grace", "0s"],
            ["--timeout", "-1s"],
            ["--max-spill", "1M"],
        ] {
            let argv = ["stockade", "run", bad[0], bad[1], "--", "true"];
            assert!(Cli::try_parse_from(argv).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn inherit_flags_parse_and_do_not_swallow_the_command() {
        let parse = |args: &[&str]| {
            let argv = ["stockade", "confine"].iter().chain(args);
            match Cli::try_parse_from(argv).map(|c| c.command) {
                Ok(Command::Confine(a)) => Ok((a.inherit, a.command.command)),
                Ok(_) => panic!(),
                Err(e) => Err(e),
            }
        };
        let (inherit, cmd) = parse(&["--inherit-cwd", "--inherit-env", "--", "pwd"]).unwrap();
        assert!(inherit.inherit_cwd);
        assert_eq!(inherit.inherit_env, Some(InheritEnvRule::Filtered));
        assert_eq!(cmd, vec!["pwd"]);
        let (inherit, _) = parse(&["--inherit-env=unfiltered", "--", "pwd"]).unwrap();
        assert_eq!(inherit.inherit_env, Some(InheritEnvRule::Unfiltered));
        let (inherit, _) = parse(&["--", "pwd"]).unwrap();
        assert!(!inherit.inherit_cwd && inherit.inherit_env.is_none());
        assert!(parse(&["--inherit-env=maybe", "--", "pwd"]).is_err());
    }

    #[test]
    fn flags_that_mean_nothing_in_the_mode_and_empty_programs_are_refused() {
        let check = |args: &[&str]| {
            Cli::try_parse_from(["stockade"].iter().chain(args))
                .unwrap()
                .check()
        };
        // Controls: the same flags where they mean something.
        assert!(check(&["run", "--writable", "/tmp", "--", "true"]).is_ok());
        assert!(check(&["run", "--allow-tcp-connect", "80", "--", "true"]).is_ok());
        assert!(check(&["run", "--mode", "danger-full-access", "--", "true"]).is_ok());
        assert!(
            check(&[
                "run",
                "--mode",
                "read-only",
                "--workspace",
                "/",
                "--",
                "true"
            ])
            .is_ok()
        );
        let err = check(&[
            "run",
            "--mode",
            "read-only",
            "--writable",
            "/tmp",
            "--",
            "true",
        ]);
        assert!(err.unwrap_err().contains("read-only"));
        for flag in [
            &["--writable", "/tmp"][..],
            &["--network", "deny"],
            &["--network", "allow"],
            &["--allow-tcp-connect", "80"],
            &["--allow-unix-sockets"],
            &["--keep-fd", "5"],
        ] {
            let args = [
                &["confine", "--mode", "danger-full-access"][..],
                flag,
                &["--", "true"],
            ]
            .concat();
            let err = check(&args).unwrap_err();
            assert!(err.starts_with(flag[0]), "{flag:?}: {err}");
        }
        let err = check(&[
            "run",
            "--mode",
            "read-only",
            "--keep-capability",
            "dac_read_search",
            "--keep-capability",
            "fowner",
            "--",
            "true",
        ])
        .unwrap_err();
        assert!(
            err.starts_with("--keep-capability CAP_FOWNER has no effect in read-only mode"),
            "{err}"
        );
        // Control: reading is what the DAC capabilities give in read-only mode.
        assert!(
            check(&[
                "run",
                "--mode",
                "read-only",
                "--keep-capability",
                "dac_read_search",
                "--",
                "true"
            ])
            .is_ok()
        );
        let err = check(&[
            "confine",
            "--mode",
            "danger-full-access",
            "--keep-capability",
            "chown",
            "--",
            "true",
        ])
        .unwrap_err();
        assert!(err.starts_with("--keep-capability has no effect"), "{err}");
        assert!(check(&["confine", "--", ""]).unwrap_err().contains("empty"));
        assert!(
            check(&["run", "--", "", "x"])
                .unwrap_err()
                .contains("empty")
        );
        assert!(check(&["run", "--", "x", ""]).is_ok());
    }

    #[test]
    fn kept_capabilities_parse_in_any_spelling_and_only_from_the_allow_list() {
        let parse = |names: &[&str]| {
            let mut argv = vec!["stockade", "confine"];
            for n in names {
                argv.extend(["--keep-capability", n]);
            }
            argv.extend(["--", "true"]);
            Cli::try_parse_from(argv).map(|c| match c.command {
                Command::Confine(a) => a.policy.to_request().keep_capabilities,
                _ => panic!(),
            })
        };
        assert_eq!(
            parse(&["dac_override", "CAP_FOWNER", "Cap_Chown", "DAC_READ_SEARCH"]).unwrap(),
            [
                Capability::DacOverride,
                Capability::Fowner,
                Capability::Chown,
                Capability::DacReadSearch
            ]
        );
        assert!(parse(&[]).unwrap().is_empty());
        for bad in ["sys_admin", "CAP_SETUID", "net_raw", "nonsense"] {
            let err = parse(&["dac_override", bad]).unwrap_err().to_string();
            assert!(err.contains("CAP_CHOWN, CAP_DAC_OVERRIDE"), "{bad}: {err}");
        }
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
