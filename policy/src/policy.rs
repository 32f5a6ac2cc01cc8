//! Policies: what the caller asks for ([`PolicyRequest`]) and the resolved form every
//! later step works from ([`Policy`]).
//!
//! [`PolicyRequest::resolve`] is the single place where defaults are filled in and paths
//! are made absolute and canonical. Nothing downstream applies a default of its own.

use crate::capability::{Capability, CapabilitySet};
use crate::domains::{DomainPolicy, DomainRules, RulesError};
use crate::hidden;
use crate::mode::Mode;
use crate::roots::{self, ALLOW_BROAD_ROOT_FLAG, Invoker, RootId};
use crate::stage::{self, PathKind, PidMode, Protected, ProtectedSet, TmpMode};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::str::FromStr;

/// The port `--allow-dns` opens (TCP).
pub const DNS_PORT: u16 = 53;

/// The shared scratch directory granted to `workspace-write` commands.
pub const SHARED_TMP: &str = "/tmp";

/// Whether a confined command may use the network.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Network {
    /// Sockets of every family may be created (file-only confinement).
    Allow,
    /// No socket but `AF_UNIX` may be created, except TCP to explicitly allowed ports.
    Deny,
}

impl Network {
    pub fn as_str(self) -> &'static str {
        match self {
            Network::Allow => "allow",
            Network::Deny => "deny",
        }
    }

    /// The default for `mode`: confined modes deny the network (a caller wanting
    /// file-only semantics asks for `allow`); `danger-full-access` is never restricted.
    pub fn default_for(mode: Mode) -> Network {
        if mode.is_confined() {
            Network::Deny
        } else {
            Network::Allow
        }
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Network {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "allow" => Ok(Network::Allow),
            "deny" => Ok(Network::Deny),
            _ => Err(format!(
                "unknown network policy '{s}': expected allow or deny"
            )),
        }
    }
}

/// A policy as the caller states it, before resolution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyRequest {
    pub mode: Mode,
    /// The workspace root; `None` means the caller's current directory.
    pub workspace: Option<PathBuf>,
    /// Extra writable roots (`--writable`), used in `workspace-write`.
    pub writable: Vec<PathBuf>,
    /// `--network`; `None` means the mode's default ([`Network::default_for`]).
    pub network: Option<Network>,
    /// `--allow-tcp-connect PORT`: outgoing TCP ports allowed while the network is
    /// denied.
    pub allow_tcp_connect: Vec<u16>,
    /// `--allow-unix-sockets`: allow creating `AF_UNIX` sockets (which can reach services
    /// outside the sandbox), unix datagram pairs included. Stream and seqpacket
    /// `socketpair`s are always allowed.
    pub allow_unix_sockets: bool,
    /// `--keep-fd N`: inherited descriptors above 2 that reach the target.
    pub keep_fds: Vec<i32>,
    /// `--allow-broad-root`: grant a workspace or writable root that is `/`, the home
    /// directory or an ancestor of either (see [`crate::roots`]).
    pub allow_broad_root: bool,
    /// `--hide PATH`: extra paths no confined command may read.
    pub hide: Vec<PathBuf>,
    /// `--allow-device PATH`: device files beneath `/dev` the command may read and write
    /// (see [`crate::devices`]), beyond the standard ones.
    pub allow_devices: Vec<PathBuf>,
    /// Whether the default hidden set applies (`--no-default-hide` clears it). The
    /// control directories are hidden either way.
    pub default_hide: bool,
    /// `--protect PATH`: paths inside a writable root bound read-only by the namespace
    /// stage (relative paths are taken from the current directory).
    pub protect: Vec<PathBuf>,
    /// Whether [`stage::DEFAULT_PROTECTED`] is protected in each writable root
    /// (`--no-default-protect` turns it off).
    pub default_protect: bool,
    /// `--tmp shared|private`; `None` is [`TmpMode::Shared`].
    pub tmp: Option<TmpMode>,
    /// `--isolate-pids` / `--share-pids`; `None` is [`PidMode::IsolateWhereAvailable`].
    pub pids: Option<PidMode>,
    /// `--no-stage`: never start the namespace stage, even where it could run (its
    /// guarantees are then not requested, or unavailable where a mode needs them).
    pub no_stage: bool,
    /// `--keep-capability NAME`: capabilities the command keeps when started as root
    /// (see [`crate::capability`]); the invoker must hold each.
    pub keep_capabilities: Vec<Capability>,
    /// `--allow-domain`, `--deny-domain`, `--resolve`: the network by name, through the
    /// filtering proxy (see [`crate::domains`]). Empty: no proxy.
    pub domains: DomainRules,
    /// The loopback port the launcher reserved for the proxy; required with `domains`
    /// (the launcher finds a free one: it is not the caller's choice).
    pub proxy_port: Option<u16>,
    /// `--allow-dns`: with the network denied, name resolution over TCP port 53 (see
    /// [`Policy::allow_dns`]).
    pub allow_dns: bool,
}

/// A resolved policy: every path absolute, canonical and known to exist as a directory
/// at resolution time.
///
/// This struct *is* the policy part of the launch request's wire format (serde, see
/// [`crate::request`]): a field added here travels to the runner with no other change.
///
/// Its fields are private to this crate: a `Policy` comes from
/// [`PolicyRequest::resolve`] or from a decoded and validated request, never from a
/// literal elsewhere, and is read through its accessors. Tests that need a policy
/// `resolve` would not make (a forged root, a kernel-only scenario) build one with
/// [`Policy::for_tests`] (feature `testing`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    pub(crate) mode: Mode,
    /// The canonical workspace root.
    #[serde(with = "crate::raw")]
    pub(crate) workspace: PathBuf,
    /// The canonical extra writable roots, in the order given.
    #[serde(with = "crate::raw")]
    pub(crate) writable_roots: Vec<PathBuf>,
    /// The canonical `$TMPDIR` of the target's environment, when it names an existing
    /// directory (`workspace-write` grants it).
    #[serde(with = "crate::raw")]
    pub(crate) tmpdir: Option<PathBuf>,
    /// Whether the network is usable (always `Allow` in `danger-full-access`).
    pub(crate) network: Network,
    /// TCP ports the target may connect to while the network is denied; sorted, unique.
    pub(crate) allow_tcp_connect: Vec<u16>,
    /// Whether `AF_UNIX` sockets may be created.
    pub(crate) allow_unix_sockets: bool,
    /// Inherited descriptors (all above 2) passed to the target; sorted, unique. Every
    /// other descriptor above 2 is closed on exec.
    pub(crate) keep_fds: Vec<i32>,
    /// The identity of every writable root (workspace, `/tmp`, `$TMPDIR`, `--writable`)
    /// as it was resolved: the runner grants a root only while its path still leads to
    /// that directory. Empty when nothing is writable.
    pub(crate) root_ids: Vec<RootId>,
    /// Why `$TMPDIR` of the target's environment was not granted, when it was set and
    /// refused (the text names the path).
    pub(crate) tmpdir_refused: Option<String>,
    /// Paths no confined command may read: canonical, existing at resolution time, none
    /// beneath another, sorted (see [`crate::hidden`]).
    #[serde(with = "crate::raw")]
    pub(crate) hidden: Vec<PathBuf>,
    /// Default hidden names whose symbolic links were not followed, each with why (the
    /// text names the path): nothing is hidden for them. Reported in ConfinedArgv's
    /// `notGranted` (see [`crate::hidden::judge_default`]).
    pub(crate) hidden_not_followed: Vec<String>,
    /// Device files the command may read and write (`--allow-device`): canonical, each a
    /// character or block device beneath `/dev` at resolution time; sorted, unique.
    #[serde(with = "crate::raw")]
    pub(crate) devices: Vec<PathBuf>,
    /// Whether the default hidden set applies: then the runner also hides the credential
    /// stores its spawn-time environment moves, when it inherits that environment
    /// ([`Policy::hide_stores_moved_by`]).
    pub(crate) default_hide: bool,
    /// The protected paths that existed at resolution time (see [`stage`]).
    pub(crate) protected: Vec<Protected>,
    /// Protected names that were symbolic links at resolution time: not protected (a
    /// bind would land on the target), reported in ConfinedArgv's `notGranted`.
    #[serde(with = "crate::raw")]
    pub(crate) protect_links: Vec<PathBuf>,
    /// Whether the caller named protected paths itself: then the stage is required.
    pub(crate) protect_explicit: bool,
    /// Whether the default protected names were asked for (the stage is desired).
    pub(crate) default_protect: bool,
    pub(crate) tmp: TmpMode,
    pub(crate) pids: PidMode,
    /// Whether the namespace stage may run (`--no-stage` forbids it).
    pub(crate) stage: bool,
    /// The capabilities the command keeps (all others are dropped); sorted, unique,
    /// empty unless asked for. The type admits only the allow-list.
    pub(crate) keep_capabilities: Vec<Capability>,
    /// The network by name: present when the command reaches the network only through
    /// the filtering proxy.
    pub(crate) domains: Option<DomainPolicy>,
    /// Whether TCP port 53 may be connected to, for name resolution over TCP.
    pub(crate) allow_dns: bool,
}

/// Read access to a resolved policy (see the fields for what each means).
impl Policy {
    pub fn mode(&self) -> Mode {
        self.mode
    }
    /// The canonical workspace root.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }
    /// The canonical extra writable roots, in the order given.
    pub fn writable_roots(&self) -> &[PathBuf] {
        &self.writable_roots
    }
    /// The granted `$TMPDIR` of the target's environment, if any.
    pub fn tmpdir(&self) -> Option<&Path> {
        self.tmpdir.as_deref()
    }
    pub fn network(&self) -> Network {
        self.network
    }
    /// TCP ports the target may connect to while the network is denied; sorted, unique.
    pub fn allow_tcp_connect(&self) -> &[u16] {
        &self.allow_tcp_connect
    }
    pub fn allow_unix_sockets(&self) -> bool {
        self.allow_unix_sockets
    }
    /// Inherited descriptors above 2 passed to the target; sorted, unique.
    pub fn keep_fds(&self) -> &[i32] {
        &self.keep_fds
    }
    /// The identity each writable root had when the policy was resolved.
    pub fn root_ids(&self) -> &[RootId] {
        &self.root_ids
    }
    /// Why `$TMPDIR` was not granted, when it was set and refused.
    pub fn tmpdir_refused(&self) -> Option<&str> {
        self.tmpdir_refused.as_deref()
    }
    /// Paths no confined command may read.
    pub fn hidden(&self) -> &[PathBuf] {
        &self.hidden
    }
    /// Default hidden names whose links were not followed, each with why.
    pub fn hidden_not_followed(&self) -> &[String] {
        &self.hidden_not_followed
    }
    /// Hides, besides the hidden set, the credential stores that `environment` (the one
    /// the runner was spawned with, which `--inherit-env` passes to the command) moves,
    /// judged as at resolution (see [`moved_stores`]); `homes` are the invoking user's.
    /// Nothing when the default hidden set does not apply. Returns why the stores not
    /// hidden were not.
    pub fn hide_stores_moved_by(
        &mut self,
        environment: &[(std::ffi::OsString, std::ffi::OsString)],
        homes: &[PathBuf],
    ) -> Vec<String> {
        if !self.default_hide {
            return Vec::new();
        }
        let (stores, not_hidden) = moved_stores(self, environment, homes);
        self.hidden.extend(stores);
        self.hidden = hidden::outermost(&self.hidden);
        not_hidden
    }
    /// The device files the command may read and write beyond the standard ones
    /// (`--allow-device`).
    pub fn allowed_devices(&self) -> &[PathBuf] {
        &self.devices
    }
    /// Whether reading `/dev` is limited to the standard devices ([`crate::devices`]):
    /// with the default hidden set, in the confined modes.
    pub fn hides_devices(&self) -> bool {
        self.default_hide
    }
    /// The protected paths that existed at resolution time.
    pub fn protected(&self) -> &[Protected] {
        &self.protected
    }
    /// Protected names that were symbolic links at resolution time (not protected).
    pub fn protect_links(&self) -> &[PathBuf] {
        &self.protect_links
    }
    /// Whether the caller named protected paths itself (the stage is then required).
    pub fn protect_explicit(&self) -> bool {
        self.protect_explicit
    }
    /// Whether the default protected names were asked for.
    pub fn default_protect(&self) -> bool {
        self.default_protect
    }
    pub fn tmp(&self) -> TmpMode {
        self.tmp
    }
    pub fn pids(&self) -> PidMode {
        self.pids
    }
    /// Whether the namespace stage may run.
    pub fn stage(&self) -> bool {
        self.stage
    }
    /// The capabilities the command keeps; sorted, unique.
    pub fn keep_capabilities(&self) -> &[Capability] {
        &self.keep_capabilities
    }
    /// The same, as the kernel's mask.
    pub fn kept_capabilities(&self) -> CapabilitySet {
        CapabilitySet::of(&self.keep_capabilities)
    }

    /// The network by name, when the command reaches the network through the proxy.
    pub fn domains(&self) -> Option<&DomainPolicy> {
        self.domains.as_ref()
    }

    /// `--allow-dns`: with the network denied, TCP connects to port 53 are allowed (on
    /// any host: a Landlock port rule names no address), and the launcher sets
    /// `RES_OPTIONS=use-vc` so that the C library's resolver asks over TCP. UDP stays
    /// refused: no rule can limit it to a port or a host.
    pub fn allow_dns(&self) -> bool {
        self.allow_dns
    }

    /// Whether TCP sockets must stay creatable while the network is denied: for the
    /// allowed ports, or to reach the proxy. Every other family, type and protocol is
    /// refused either way.
    pub fn tcp_sockets(&self) -> bool {
        self.network == Network::Deny
            && (!self.allow_tcp_connect.is_empty() || self.domains.is_some() || self.allow_dns)
    }

    /// Whether, under the namespace stage, the command gets a network namespace of its
    /// own: with the network denied, either the network by name (the proxy listening in
    /// it is the only way out) or no network at all, where a namespace holding nothing
    /// but its own loopback lets the command serve and reach itself on `127.0.0.1` (a
    /// test suite's local server) while nothing outside, the host's loopback included,
    /// can be reached. Not with `--allow-tcp-connect` or `--allow-dns`: those name ports
    /// on the host's network, which such a namespace cannot reach.
    pub fn own_network(&self) -> bool {
        self.network == Network::Deny
            && (self.domains.is_some() || (self.allow_tcp_connect.is_empty() && !self.allow_dns))
    }

    /// The TCP ports Landlock lets the command connect to, with every other connect and
    /// bind refused; `None` when Landlock is to handle no network right at all.
    ///
    /// `netns` says whether the command runs in the stage's network namespace (see
    /// [`Policy::own_network`]), which has nothing but loopback (and the proxy
    /// listening there). The namespace alone holds the network then, and no port rule is
    /// added: binding and connecting on the namespace's own loopback work, and a
    /// connection anywhere else fails with "network unreachable" (the truth) rather than
    /// with the "permission denied" of a refused file access. Without it, the proxy's
    /// port is the only one allowed.
    pub fn landlock_connect_ports(&self, netns: bool) -> Option<Vec<u16>> {
        match (self.network, &self.domains) {
            (Network::Allow, _) => None,
            (Network::Deny, _) if netns && self.own_network() => None,
            (Network::Deny, Some(d)) => Some(vec![d.proxy_port]),
            (Network::Deny, None) => {
                let mut ports = self.allow_tcp_connect.clone();
                if self.allow_dns && !ports.contains(&DNS_PORT) {
                    ports.push(DNS_PORT);
                }
                Some(ports)
            }
        }
    }
}

/// Policies for tests: some need one `resolve` would not make (a root that was never
/// resolved, a forged request, a seccomp filter for a chosen network policy). Outside
/// this crate they are built only here, so the field list is written once more, not
/// once per test.
#[cfg(any(test, feature = "testing"))]
impl Policy {
    /// A `mode` policy for `workspace` granting nothing else: no extra roots, no
    /// `$TMPDIR`, the mode's default network, no ports, descriptors, hidden or protected
    /// paths, no root identities and no stage. Adjust it with the `with_` methods.
    pub fn for_tests(mode: Mode, workspace: impl Into<PathBuf>) -> Policy {
        Policy {
            mode,
            workspace: workspace.into(),
            writable_roots: Vec::new(),
            tmpdir: None,
            network: Network::default_for(mode),
            allow_tcp_connect: Vec::new(),
            allow_unix_sockets: false,
            keep_fds: Vec::new(),
            root_ids: Vec::new(),
            tmpdir_refused: None,
            hidden: Vec::new(),
            hidden_not_followed: Vec::new(),
            devices: Vec::new(),
            default_hide: false,
            protected: Vec::new(),
            protect_links: Vec::new(),
            protect_explicit: false,
            default_protect: false,
            tmp: TmpMode::default(),
            pids: PidMode::Share,
            stage: false,
            keep_capabilities: Vec::new(),
            domains: None,
            allow_dns: false,
        }
    }
    /// Network by name through a proxy on `proxy_port` (the network is then denied).
    pub fn with_domains(self, rules: DomainRules, proxy_port: u16) -> Policy {
        Policy {
            network: Network::Deny,
            domains: Some(DomainPolicy { rules, proxy_port }),
            ..self
        }
    }
    pub fn with_mode(self, mode: Mode) -> Policy {
        Policy { mode, ..self }
    }
    pub fn with_workspace(self, workspace: impl Into<PathBuf>) -> Policy {
        Policy {
            workspace: workspace.into(),
            ..self
        }
    }
    pub fn with_writable_roots(self, writable_roots: Vec<PathBuf>) -> Policy {
        Policy {
            writable_roots,
            ..self
        }
    }
    pub fn with_tmpdir(self, tmpdir: Option<PathBuf>) -> Policy {
        Policy { tmpdir, ..self }
    }
    pub fn with_network(self, network: Network) -> Policy {
        Policy { network, ..self }
    }
    pub fn with_allow_tcp_connect(self, allow_tcp_connect: Vec<u16>) -> Policy {
        Policy {
            allow_tcp_connect,
            ..self
        }
    }
    pub fn with_allow_unix_sockets(self, allow_unix_sockets: bool) -> Policy {
        Policy {
            allow_unix_sockets,
            ..self
        }
    }
    pub fn with_root_ids(self, root_ids: Vec<RootId>) -> Policy {
        Policy { root_ids, ..self }
    }
    pub fn with_keep_capabilities(self, keep_capabilities: Vec<Capability>) -> Policy {
        Policy {
            keep_capabilities,
            ..self
        }
    }
}

/// Why a policy could not be resolved. Each names the path at fault.
#[derive(Debug)]
pub enum PolicyError {
    /// The current directory (the default workspace) could not be determined.
    CurrentDir(io::Error),
    /// The workspace root does not exist or cannot be opened.
    Workspace { path: PathBuf, source: io::Error },
    /// The workspace root exists but is not a directory.
    WorkspaceNotDirectory { path: PathBuf },
    /// A writable root does not exist or cannot be opened.
    WritableRoot { path: PathBuf, source: io::Error },
    /// A writable root exists but is not a directory.
    WritableRootNotDirectory { path: PathBuf },
    /// `--keep-fd` names stdin/stdout/stderr (always kept) or a negative number.
    KeepFd { fd: i32 },
    /// `--allow-tcp-connect 0`: not a port anything can connect to.
    TcpPortZero,
    /// `--allow-tcp-connect` with `--network allow` in a confined mode: every port is
    /// reachable already, so the port list would silently mean nothing.
    TcpPortsWithNetworkAllowed,
    /// A writable root is `/`, a home directory or an ancestor of one, and
    /// `--allow-broad-root` was not given.
    BroadRoot {
        /// How the root was named: `--workspace`, `the current directory` or `--writable`.
        named_by: &'static str,
        path: PathBuf,
        why: String,
    },
    /// A writable root cannot be pinned down (a link, or it vanished while resolving).
    RootIdentity { path: PathBuf, source: io::Error },
    /// A workspace or writable root is reached through a symbolic link a confined
    /// command could have planted.
    LinkedRoot {
        named_by: &'static str,
        path: PathBuf,
        why: String,
    },
    /// A hidden path contains the workspace or a writable root: the command could not
    /// read the tree it works in.
    HiddenContainsRoot {
        hidden: PathBuf,
        root: PathBuf,
        default: bool,
    },
    /// The workspace or a writable root lies inside a directory where stockade keeps
    /// its requests and status files: that directory could not be hidden from the
    /// command, which would read other commands' pending requests (their environments)
    /// there and, through a writable root, rewrite their status files.
    RootInControlDir { root: PathBuf, base: PathBuf },
    /// A `--hide` path that exists in some form but cannot be resolved (a file named
    /// with a trailing slash, an unreadable directory on the way): hiding nothing
    /// without a word would report a hidden path that is not.
    HideUnresolvable { path: PathBuf, source: io::Error },
    /// A flag that only the namespace stage can honour, with `--no-stage`.
    NeedsStage { flag: &'static str },
    /// `--protect PATH` names nothing.
    ProtectMissing { path: PathBuf },
    /// `--allow-device PATH` names no device file beneath `/dev`, or one that is hidden.
    Device(crate::devices::DeviceError),
    /// `--tmp private` with a writable root beneath `/tmp`, which the private tmpfs hides.
    RootUnderPrivateTmp { path: PathBuf },
    /// `--keep-capability` names capabilities the invoker does not hold (an ordinary
    /// user holds none): there is nothing to keep.
    CapabilityNotHeld { missing: CapabilitySet, uid: u32 },
    /// The domain rules cannot mean what they say (see [`RulesError`]).
    Domains(RulesError),
    /// `--allow-domain` with `--network allow`: every host is reachable already.
    DomainsWithNetworkAllowed,
    /// `--allow-domain` with `--allow-tcp-connect`: a port rule reaches every host on
    /// that port, around the domain list.
    DomainsWithTcpPorts,
    /// Domain rules without the port the launcher reserves for the proxy.
    ProxyPortMissing,
    /// `--allow-dns` with `--network allow`, or with `--allow-domain` (whose proxy
    /// resolves names itself).
    DnsWithoutDeniedNetwork { with: &'static str },
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyError::CurrentDir(e) => write!(
                f,
                "cannot determine the current directory to use as the workspace: {e}; pass --workspace DIR"
            ),
            PolicyError::Workspace { path, source } => write!(
                f,
                "workspace root {} cannot be opened: {source}",
                path.display()
            ),
            PolicyError::WorkspaceNotDirectory { path } => {
                write!(f, "workspace root {} is not a directory", path.display())
            }
            PolicyError::WritableRoot { path, source } => write!(
                f,
                "writable root {} cannot be opened: {source}",
                path.display()
            ),
            PolicyError::WritableRootNotDirectory { path } => {
                write!(f, "writable root {} is not a directory", path.display())
            }
            PolicyError::KeepFd { fd } => write!(
                f,
                "--keep-fd {fd}: only descriptors above 2 can be named (0, 1 and 2 are always passed on)"
            ),
            PolicyError::TcpPortZero => {
                f.write_str("--allow-tcp-connect 0: port 0 cannot be connected to")
            }
            PolicyError::ProtectMissing { path } => write!(
                f,
                "--protect {}: no such file or directory; protect a path that exists (stockade does not create it)",
                path.display()
            ),
            PolicyError::Device(e) => e.fmt(f),
            PolicyError::RootUnderPrivateTmp { path } => write!(
                f,
                "--tmp private would hide the writable root {}, which lies beneath /tmp; use --tmp shared or a root elsewhere",
                path.display()
            ),
            PolicyError::CapabilityNotHeld { missing, uid } => capability_not_held(f, missing, *uid),
            PolicyError::NeedsStage { flag } => write!(
                f,
                "{flag} needs the namespace stage, which --no-stage turns off; drop one of them"
            ),
            PolicyError::Domains(e) => write!(f, "{e}"),
            PolicyError::DomainsWithNetworkAllowed => f.write_str(
                "--allow-domain has no effect with --network allow (every host is reachable); drop one of them",
            ),
            PolicyError::DomainsWithTcpPorts => f.write_str(
                "--allow-tcp-connect lets the command reach every host on that port, around the --allow-domain list; use one of them (a port of an allowed host is --allow-domain HOST:PORT)",
            ),
            PolicyError::DnsWithoutDeniedNetwork { with } => write!(
                f,
                "--allow-dns has no effect with {with}; drop one of them"
            ),
            PolicyError::ProxyPortMissing => {
                f.write_str("no port was reserved for the network proxy")
            }
            PolicyError::TcpPortsWithNetworkAllowed => f.write_str(
                "--allow-tcp-connect has no effect with --network allow (every port is reachable); drop one of them",
            ),
            PolicyError::BroadRoot {
                named_by,
                path,
                why,
            } => write!(
                f,
                "refusing to make {} writable ({named_by}): {why}; name a narrower directory, or pass {ALLOW_BROAD_ROOT_FLAG} to allow it on purpose",
                path.display()
            ),
            PolicyError::LinkedRoot {
                named_by,
                path,
                why,
            } => write!(
                f,
                "refusing to make {} writable ({named_by}): {why}; name the directory itself",
                path.display()
            ),
            PolicyError::RootIdentity { path, source } => write!(
                f,
                "writable root {} cannot be pinned down: {source}",
                path.display()
            ),
            PolicyError::RootInControlDir { root, base } => write!(
                f,
                "{} lies inside {}, where stockade keeps the requests and status files of other commands, which the command could then read and change; choose a workspace and writable roots outside it, or set STOCKADE_CONTROL_DIR to a private directory that holds none of them",
                root.display(),
                base.display()
            ),
            PolicyError::HideUnresolvable { path, source } => write!(
                f,
                "--hide {}: cannot resolve it ({source}), so nothing would be hidden; name it as it is (a file without a trailing slash) or make it reachable",
                path.display()
            ),
            PolicyError::HiddenContainsRoot {
                hidden,
                root,
                default,
            } => write!(
                f,
                "hidden path {} contains {}, which the command works in; {}",
                hidden.display(),
                root.display(),
                if *default {
                    "choose a workspace outside it (or pass --no-default-hide)"
                } else {
                    "drop that --hide or choose a workspace outside it"
                }
            ),
        }
    }
}

/// `--keep-capability` naming capabilities this process does not hold.
fn capability_not_held(
    f: &mut fmt::Formatter<'_>,
    missing: &CapabilitySet,
    uid: u32,
) -> fmt::Result {
    write!(
        f,
        "{} {}: this process (uid {uid}) does not hold {}, so the command cannot keep it; {}",
        crate::capability::FLAG,
        missing.names(),
        if missing.iter().count() == 1 {
            "it"
        } else {
            "them"
        },
        if uid == 0 {
            "run stockade with it, or drop the flag"
        } else {
            "only root holds capabilities to keep: drop the flag, or own the workspace as this user"
        }
    )
}

impl std::error::Error for PolicyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PolicyError::CurrentDir(source)
            | PolicyError::Workspace { source, .. }
            | PolicyError::WritableRoot { source, .. }
            | PolicyError::RootIdentity { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// What workspace-write's checks of its roots found (see `PolicyRequest::resolve`).
#[derive(Default)]
struct CheckedRoots {
    root_ids: Vec<RootId>,
    /// `$TMPDIR`, when granted.
    tmpdir: Option<PathBuf>,
    tmpdir_refused: Option<String>,
}

/// The kept descriptors and the network flags, resolved.
struct NetworkFlags {
    keep_fds: Vec<i32>,
    allow_tcp_connect: Vec<u16>,
    network: Network,
    domains: Option<DomainPolicy>,
}

impl PolicyRequest {
    /// A request for `mode` with every other choice left to its default.
    pub fn new(mode: Mode) -> Self {
        PolicyRequest {
            mode,
            workspace: None,
            writable: Vec::new(),
            network: None,
            allow_tcp_connect: Vec::new(),
            allow_unix_sockets: false,
            keep_fds: Vec::new(),
            allow_broad_root: false,
            hide: Vec::new(),
            allow_devices: Vec::new(),
            default_hide: true,
            protect: Vec::new(),
            default_protect: true,
            tmp: None,
            pids: None,
            no_stage: false,
            keep_capabilities: Vec::new(),
            domains: DomainRules::default(),
            proxy_port: None,
            allow_dns: false,
        }
    }

    /// Fills in defaults, canonicalises every path and pins down every writable root.
    ///
    /// - `cwd` is the caller's current directory: the default workspace, and the base
    ///   that relative paths are taken from.
    /// - `tmpdir` is `$TMPDIR` of the *target's* environment. It is the target's
    ///   preference, not something the caller asked to be writable: it is granted only
    ///   when [`roots::check_implicit_tmpdir`] finds it safe, and otherwise left out with
    ///   the reason kept in [`Policy::tmpdir_refused`].
    /// - `invoker` says whose home directories make a root too broad.
    ///
    /// A workspace or writable root that does not exist or is not a directory is an error
    /// naming it: a root is never skipped silently. In `workspace-write`, a broad root
    /// (`/`, a home directory or an ancestor of one) is refused unless
    /// `allow_broad_root`, and every writable root is identified by device and inode.
    pub fn resolve(
        &self,
        cwd: &Path,
        tmpdir: Option<&Path>,
        invoker: &Invoker,
    ) -> Result<Policy, PolicyError> {
        let (workspace_in, workspace, writable_roots) = self.resolve_roots(cwd)?;
        let checked = if self.mode == Mode::WorkspaceWrite {
            self.check_writable_roots(
                cwd,
                &workspace_in,
                &workspace,
                &writable_roots,
                tmpdir,
                invoker,
            )?
        } else {
            CheckedRoots::default()
        };
        let NetworkFlags {
            keep_fds,
            allow_tcp_connect,
            network,
            domains,
        } = self.resolve_network()?;
        let CheckedRoots {
            root_ids,
            tmpdir,
            tmpdir_refused,
        } = checked;
        let (protected, protect_links) =
            self.resolve_protected(cwd, &workspace, &writable_roots)?;
        let stage = self.mode.is_confined() && !self.no_stage;
        let confined = self.mode.is_confined();
        let keep_capabilities = self.resolve_kept_capabilities(invoker)?;
        let mut policy = Policy {
            mode: self.mode,
            workspace,
            writable_roots,
            tmpdir,
            network,
            allow_tcp_connect,
            allow_unix_sockets: self.allow_unix_sockets,
            keep_fds,
            root_ids,
            tmpdir_refused,
            hidden: Vec::new(),
            hidden_not_followed: Vec::new(),
            devices: if confined {
                crate::devices::resolve(&self.allow_devices, cwd, !self.no_stage)
                    .map_err(PolicyError::Device)?
            } else {
                Vec::new()
            },
            default_hide: self.mode.is_confined() && self.default_hide,
            // Without the stage the runner's supervisor holds them, where it can.
            protected: if confined { protected } else { Vec::new() },
            protect_links: if confined { protect_links } else { Vec::new() },
            protect_explicit: confined && !self.protect.is_empty(),
            default_protect: confined && self.default_protect,
            tmp: self.tmp.unwrap_or_default(),
            pids: if stage {
                self.pids.unwrap_or_default()
            } else {
                PidMode::Share
            },
            stage,
            keep_capabilities,
            domains,
            allow_dns: self.mode.is_confined() && self.allow_dns,
        };
        if self.mode.is_confined() {
            (policy.hidden, policy.hidden_not_followed) =
                self.resolve_hidden(cwd, &policy, invoker)?;
            crate::devices::none_hidden(&policy.devices, &policy.hidden)
                .map_err(PolicyError::Device)?;
        }
        Ok(policy)
    }

    /// The workspace (as named, and canonical) and the extra writable roots, each an
    /// existing directory.
    fn resolve_roots(&self, cwd: &Path) -> Result<(PathBuf, PathBuf, Vec<PathBuf>), PolicyError> {
        let workspace_in = match &self.workspace {
            Some(p) => cwd.join(p),
            None => cwd.to_path_buf(),
        };
        let workspace = canonical_dir(&workspace_in).map_err(|e| match e {
            DirError::Io(source) => PolicyError::Workspace {
                path: workspace_in.clone(),
                source,
            },
            DirError::NotDirectory => PolicyError::WorkspaceNotDirectory {
                path: workspace_in.clone(),
            },
        })?;
        let mut writable_roots = Vec::with_capacity(self.writable.len());
        for root in &self.writable {
            let path = cwd.join(root);
            let canonical = canonical_dir(&path).map_err(|e| match e {
                DirError::Io(source) => PolicyError::WritableRoot {
                    path: path.clone(),
                    source,
                },
                DirError::NotDirectory => {
                    PolicyError::WritableRootNotDirectory { path: path.clone() }
                }
            })?;
            if !writable_roots.contains(&canonical) {
                writable_roots.push(canonical);
            }
        }
        Ok((workspace_in, workspace, writable_roots))
    }

    /// workspace-write's checks of its roots: none broad (unless allowed), none named
    /// through a planted link; `$TMPDIR` granted only when safe; and each root's
    /// identity (device and inode) taken.
    fn check_writable_roots(
        &self,
        cwd: &Path,
        workspace_in: &Path,
        workspace: &PathBuf,
        writable_roots: &[PathBuf],
        tmpdir: Option<&Path>,
        invoker: &Invoker,
    ) -> Result<CheckedRoots, PolicyError> {
        let (mut root_ids, mut tmpdir_granted, mut tmpdir_refused) = (Vec::new(), None, None);
        if !self.allow_broad_root {
            let workspace_named_by = match self.workspace {
                Some(_) => "--workspace",
                None => "the workspace defaults to the current directory",
            };
            let named = std::iter::once((workspace, workspace_named_by))
                .chain(writable_roots.iter().map(|r| (r, "--writable")));
            for (root, named_by) in named {
                if let Some(why) = roots::broad_reason(root, &invoker.homes) {
                    return Err(PolicyError::BroadRoot {
                        named_by,
                        path: root.clone(),
                        why,
                    });
                }
            }
        }
        let mut granted = vec![workspace.clone(), PathBuf::from(SHARED_TMP)];
        granted.extend(writable_roots.iter().cloned());
        // A root named through a link that lies where confined commands write (an
        // earlier command could have planted it there) is not what the user meant.
        let named = std::iter::once((workspace_in.to_path_buf(), "--workspace"))
            .chain(self.writable.iter().map(|r| (cwd.join(r), "--writable")));
        for (raw, named_by) in named {
            // The walk resolves the name a second time: it must reach the very
            // directory the root was resolved to. A command that can rename what lies
            // above the name (a workspace in /tmp, or inside another command's
            // workspace) could otherwise swap a link in for the first resolution and
            // out for the walk, and the root granted would be the link's target.
            match roots::walk_checking_links(&raw, invoker.uid, &granted) {
                Err(why) => {
                    return Err(PolicyError::LinkedRoot {
                        named_by,
                        path: raw,
                        why,
                    });
                }
                Ok(walked) if !granted.contains(&walked) => {
                    return Err(PolicyError::LinkedRoot {
                        named_by,
                        path: raw,
                        why: format!(
                            "it now leads to {}, not to the directory it was resolved to a moment before: a link on its way changed while it was being resolved",
                            walked.display()
                        ),
                    });
                }
                Ok(_) => {}
            }
        }
        if let Some(raw) = tmpdir {
            match roots::check_implicit_tmpdir(raw, invoker, &granted) {
                Ok(dir) => tmpdir_granted = Some(dir),
                Err(why) => {
                    tmpdir_refused =
                        Some(format!("$TMPDIR {} is not granted: {why}", raw.display()))
                }
            }
        }
        for root in granted.iter().chain(&tmpdir_granted) {
            if root_ids.iter().any(|r: &RootId| &r.path == root) {
                continue;
            }
            // A private /tmp is a fresh tmpfs the namespace stage mounts: there is no
            // directory of the caller's to pin, and nothing planted can be in it.
            if self.tmp == Some(TmpMode::Private) && root == Path::new(SHARED_TMP) {
                continue;
            }
            let id = RootId::of(root).map_err(|source| PolicyError::RootIdentity {
                path: root.clone(),
                source,
            })?;
            root_ids.push(id);
        }
        Ok(CheckedRoots {
            root_ids,
            tmpdir: tmpdir_granted,
            tmpdir_refused,
        })
    }

    /// The kept descriptors and the network: TCP ports, the whole network or not, the
    /// network by name, and DNS on its own, checked against each other.
    fn resolve_network(&self) -> Result<NetworkFlags, PolicyError> {
        let mut keep_fds = self.keep_fds.clone();
        if let Some(fd) = first_unkeepable_fd(&keep_fds) {
            return Err(PolicyError::KeepFd { fd });
        }
        keep_fds.sort_unstable();
        keep_fds.dedup();
        let mut allow_tcp_connect = self.allow_tcp_connect.clone();
        if has_port_zero(&allow_tcp_connect) {
            return Err(PolicyError::TcpPortZero);
        }
        allow_tcp_connect.sort_unstable();
        allow_tcp_connect.dedup();
        // danger-full-access ignores the network flags: nothing is enforced there.
        let network = if self.mode.is_confined() {
            self.network.unwrap_or(Network::default_for(self.mode))
        } else {
            Network::Allow
        };
        if self.mode.is_confined() && network == Network::Allow && !allow_tcp_connect.is_empty() {
            return Err(PolicyError::TcpPortsWithNetworkAllowed);
        }
        let domains = self.resolve_domains(network, &allow_tcp_connect)?;
        if self.mode.is_confined() && self.allow_dns {
            if network == Network::Allow {
                return Err(PolicyError::DnsWithoutDeniedNetwork {
                    with: "--network allow (every port is reachable)",
                });
            }
            if domains.is_some() {
                return Err(PolicyError::DnsWithoutDeniedNetwork {
                    with: "--allow-domain (the proxy resolves the names its clients ask for)",
                });
            }
        }
        Ok(NetworkFlags {
            keep_fds,
            allow_tcp_connect,
            network,
            domains,
        })
    }

    /// The protected paths (and those that are links) beneath the roots a command can
    /// write, and the flags that need the namespace stage refused without it.
    fn resolve_protected(
        &self,
        cwd: &Path,
        workspace: &Path,
        writable_roots: &[PathBuf],
    ) -> Result<(Vec<stage::Protected>, Vec<PathBuf>), PolicyError> {
        // Protection only means something where the command can write: the workspace and
        // the extra roots (not the shared /tmp or $TMPDIR, which are no repositories).
        let protect_roots: Vec<PathBuf> = if self.mode == Mode::WorkspaceWrite {
            std::iter::once(workspace.to_path_buf())
                .chain(writable_roots.iter().cloned())
                .collect()
        } else {
            Vec::new()
        };
        let explicit: Vec<PathBuf> = self.protect.iter().map(|p| cwd.join(p)).collect();
        let kind = |p: &Path| match p.symlink_metadata() {
            Err(_) => PathKind::Missing,
            Ok(m) if m.file_type().is_symlink() => PathKind::Link,
            Ok(m) if m.is_dir() => PathKind::Directory,
            Ok(_) => PathKind::File,
        };
        if self.mode.is_confined()
            && let Some(path) = explicit.iter().find(|p| kind(p) == PathKind::Missing)
        {
            // Protecting nothing while reporting it protected would be a lie; creating
            // it in the user's tree is not ours to do.
            return Err(PolicyError::ProtectMissing { path: path.clone() });
        }
        let found = if self.mode.is_confined() {
            stage::protected_paths(&protect_roots, &explicit, self.default_protect, &kind)
        } else {
            ProtectedSet::default()
        };
        let protected = found.paths;
        let protect_links = found.links;
        if self.tmp == Some(TmpMode::Private)
            && let Some(root) = protect_roots.iter().find(|r| r.starts_with(SHARED_TMP))
        {
            // The private tmpfs is mounted on /tmp after the roots are bound back: it
            // would hide this one.
            return Err(PolicyError::RootUnderPrivateTmp { path: root.clone() });
        }
        if self.no_stage {
            let conflict = if self.tmp == Some(TmpMode::Private) {
                Some("--tmp private")
            } else if self.pids == Some(PidMode::Isolate) {
                Some("--isolate-pids")
            } else {
                None
            };
            if let Some(flag) = conflict {
                return Err(PolicyError::NeedsStage { flag });
            }
        }
        Ok((protected, protect_links))
    }

    /// The capabilities the command keeps, each held by the invoker.
    fn resolve_kept_capabilities(&self, invoker: &Invoker) -> Result<Vec<Capability>, PolicyError> {
        // Like the network flags, meaningless where nothing is confined (the launcher
        // refuses the flag there). Elsewhere each must be held to be kept.
        let mut keep_capabilities = Vec::new();
        if self.mode.is_confined() {
            keep_capabilities = self.keep_capabilities.clone();
            keep_capabilities.sort_unstable();
            keep_capabilities.dedup();
            let asked = CapabilitySet::of(&keep_capabilities);
            let missing = asked.mask() & !invoker.capabilities;
            if missing != 0 {
                let missing: Vec<Capability> =
                    asked.iter().filter(|c| missing & c.bit() != 0).collect();
                return Err(PolicyError::CapabilityNotHeld {
                    missing: CapabilitySet::of(&missing),
                    uid: invoker.uid,
                });
            }
        }
        Ok(keep_capabilities)
    }

    /// The network by name: `None` without rules (and in danger-full-access, which
    /// confines nothing); the rules checked as a whole, and against the other network
    /// flags, which would make them mean nothing.
    fn resolve_domains(
        &self,
        network: Network,
        allow_tcp_connect: &[u16],
    ) -> Result<Option<DomainPolicy>, PolicyError> {
        if !self.mode.is_confined() || self.domains.is_empty() {
            return Ok(None);
        }
        self.domains.check().map_err(PolicyError::Domains)?;
        if network == Network::Allow {
            return Err(PolicyError::DomainsWithNetworkAllowed);
        }
        if !allow_tcp_connect.is_empty() {
            return Err(PolicyError::DomainsWithTcpPorts);
        }
        let proxy_port = self
            .proxy_port
            .filter(|&p| p != 0)
            .ok_or(PolicyError::ProxyPortMissing)?;
        Ok(Some(DomainPolicy {
            rules: self.domains.clone(),
            proxy_port,
        }))
    }

    /// The hidden set of `policy`: `--hide` paths, the defaults (unless dropped) and the
    /// control bases, each canonicalised (a link hides its target); paths that do not
    /// exist cost nothing and are dropped. A default name's links are followed only as
    /// [`hidden::judge_default`] allows; the ones it does not follow come back as the
    /// second list, each with why. A hidden path that contains the workspace or a
    /// writable root is refused. A control base beneath a writable root is not hidden:
    /// carving it out would make every file created directly in that root (`/tmp`)
    /// unreadable; the request's status channel is in-band then anyway. One that
    /// contains the workspace or a root is refused: it could not be hidden.
    fn resolve_hidden(
        &self,
        cwd: &Path,
        policy: &Policy,
        invoker: &Invoker,
    ) -> Result<(Vec<PathBuf>, Vec<String>), PolicyError> {
        let writable = crate::grants::writable_roots(policy);
        let mut roots = writable.clone();
        roots.push(policy.workspace.clone());
        // Where a command of any policy could have planted a link: this one's roots,
        // and the shared temporary directories every workspace-write command writes.
        let mut plantable = writable.clone();
        plantable.extend(SHARED_WRITABLE.iter().map(PathBuf::from));
        let reach = hidden::Reach {
            writable: &plantable,
            roots: &roots,
            homes: &invoker.homes,
        };
        let mut asked: Vec<(PathBuf, bool)> =
            self.hide.iter().map(|p| (cwd.join(p), false)).collect();
        if self.default_hide {
            asked.extend(hidden::defaults(invoker).into_iter().map(|p| (p, true)));
        }
        let mut out = Vec::new();
        let mut not_followed = Vec::new();
        // Every default name lies in the same few directories (a home, `~/.config`): each
        // is looked at once, not once per name through it (350 `statx` per `confine`).
        let mut node = Nodes::listing(asked.iter().filter(|(_, d)| *d).map(|(p, _)| p.as_path()));
        for (path, default) in asked {
            let canonical = if default {
                let Some(walked) = hidden::walk(&path, |p: &Path| node.of(p)) else {
                    continue;
                };
                match hidden::judge_default(&path, &walked, &reach) {
                    Ok(target) => target,
                    Err(why) => {
                        not_followed.push(why);
                        continue;
                    }
                }
            } else {
                // A `--hide` that names nothing costs nothing (documented); one that
                // names something this resolution cannot reach is refused, never dropped.
                match path.canonicalize() {
                    Ok(canonical) => canonical,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(source) => return Err(PolicyError::HideUnresolvable { path, source }),
                }
            };
            if let Some(root) = roots.iter().find(|r| r.starts_with(&canonical)) {
                return Err(PolicyError::HiddenContainsRoot {
                    hidden: canonical,
                    root: root.clone(),
                    default,
                });
            }
            out.push(canonical);
        }
        if self.default_hide {
            // Stores the invoker's environment moved (`KUBECONFIG`, `GNUPGHOME`, ...).
            let (stores, not_hidden) =
                moved_stores(policy, &invoker.store_variables, &invoker.homes);
            out.extend(stores);
            not_followed.extend(not_hidden);
        }
        // Other users' bases are kept from others by their 0700 modes, which a kept DAC
        // capability reads past.
        let reads_past_modes = policy
            .keep_capabilities
            .iter()
            .any(|c| c.reads_past_modes());
        let others: &[PathBuf] = if reads_past_modes {
            &invoker.other_control_bases
        } else {
            &[]
        };
        for base in invoker.control_bases.iter().chain(others) {
            // A base is never a link (the launcher refuses one as a base): a candidate
            // that is a link holds no requests of ours, and following it would let
            // whoever made it choose what every later command of this user loses sight
            // of (`ln -s /usr CANDIDATE`).
            if base
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink())
            {
                continue;
            }
            // A base made only after resolution (by this very `confine`, with the
            // directories above it on a user's first run) is hidden all the same: it will
            // hold other commands' requests while this one runs.
            let Some(canonical) = resolved_to_be(base) else {
                continue;
            };
            // `/` is no base (the launcher refuses it, naming why).
            let inside_writable = writable.iter().any(|r| canonical.starts_with(r));
            if inside_writable || canonical.parent().is_none() {
                continue;
            }
            // A base holding the workspace or a root could not be hidden: every other
            // command's request there would be readable (writable, beneath a root).
            if let Some(root) = roots.iter().find(|r| r.starts_with(&canonical)) {
                return Err(PolicyError::RootInControlDir {
                    root: root.clone(),
                    base: canonical,
                });
            }
            out.push(canonical);
        }
        Ok((hidden::outermost(&out), not_followed))
    }
}

/// The credential stores `environment` moves ([`crate::credentials::moved`]) that exist,
/// each as [`hidden::judge_moved`] decides for `policy`'s roots and the user's `homes`:
/// the paths to hide, and why the others are not hidden.
fn moved_stores(
    policy: &Policy,
    environment: &[(std::ffi::OsString, std::ffi::OsString)],
    homes: &[PathBuf],
) -> (Vec<PathBuf>, Vec<String>) {
    let writable = crate::grants::writable_roots(policy);
    let mut roots = writable.clone();
    roots.push(policy.workspace.clone());
    let mut plantable = writable;
    plantable.extend(SHARED_WRITABLE.iter().map(PathBuf::from));
    let reach = hidden::Reach {
        writable: &plantable,
        roots: &roots,
        homes,
    };
    let (mut stores, mut not_hidden) = (Vec::new(), Vec::new());
    for (path, variable) in crate::credentials::moved(environment) {
        let Some(walked) = hidden::walk(&path, node) else {
            continue;
        };
        match hidden::judge_moved(&path, variable, &walked, &reach) {
            Ok(target) => stores.push(target),
            Err(why) => not_hidden.push(why),
        }
    }
    (stores, not_hidden)
}

/// Directories every user (and so every workspace-write command) can write, whatever
/// the policy: a link there was not necessarily made by the user.
const SHARED_WRITABLE: &[&str] = &[SHARED_TMP, "/var/tmp", "/dev/shm"];

/// [`node`], each path asked once within one resolution.
/// In a directory where many names are asked (a home: forty stores, most of them
/// absent), the directory is listed once and a name it does not hold is missing without
/// an `lstat` of its own; a directory that cannot be listed is asked name by name.
#[derive(Default)]
struct Nodes {
    nodes: std::collections::HashMap<PathBuf, hidden::Node>,
    /// Directories worth listing (see [`LISTED_FROM`]), and their names once listed
    /// (`None`: not listable).
    listed:
        std::collections::HashMap<PathBuf, Option<std::collections::HashSet<std::ffi::OsString>>>,
}

/// From how many names asked in one directory it is listed rather than asked name by
/// name: a listing is one `getdents` for a few dozen entries, an `lstat` one per name.
/// Not from four: root's `/etc` holds four hidden names (`shadow`, `gshadow` and their
/// backups), all present, so listing its ~150 entries (and keeping their names) only
/// added to the four `lstat`s: 15% of a served `confine` (bench/cpu-cost.md).
const LISTED_FROM: usize = 5;

impl Nodes {
    /// Lists, when first asked there, each directory holding at least [`LISTED_FROM`]
    /// of `paths`.
    fn listing<'a>(paths: impl Iterator<Item = &'a Path>) -> Nodes {
        let mut counts: std::collections::HashMap<&Path, usize> = Default::default();
        for parent in paths.filter_map(Path::parent) {
            *counts.entry(parent).or_default() += 1;
        }
        Nodes {
            nodes: Default::default(),
            listed: counts
                .into_iter()
                .filter(|&(_, n)| n >= LISTED_FROM)
                .map(|(dir, _)| (dir.to_path_buf(), None))
                .collect(),
        }
    }

    fn of(&mut self, path: &Path) -> hidden::Node {
        if let Some(known) = self.nodes.get(path) {
            return known.clone();
        }
        let found = if self.absent(path) {
            hidden::Node::Missing
        } else {
            node(path)
        };
        self.nodes.insert(path.to_path_buf(), found.clone());
        found
    }

    /// Whether the listing of `path`'s directory shows it absent.
    fn absent(&mut self, path: &Path) -> bool {
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return false;
        };
        if matches!(self.listed.get(dir), Some(None)) {
            match names_in(dir) {
                Some(names) => self.listed.insert(dir.to_path_buf(), Some(names)),
                None => self.listed.remove(dir),
            };
        }
        self.listed
            .get(dir)
            .and_then(Option::as_ref)
            .is_some_and(|names| !names.contains(name))
    }
}

/// The names in the directory at `dir`, or `None` when it cannot be listed whole.
fn names_in(dir: &Path) -> Option<std::collections::HashSet<std::ffi::OsString>> {
    use std::os::fd::AsFd;
    let opened = std::fs::File::open(dir).ok()?;
    let entries = crate::directory::entries(opened.as_fd()).ok()?;
    Some(entries.into_iter().map(|e| e.name).collect())
}

/// What `path` is, not following it: for [`hidden::walk`]. A path that cannot be
/// examined counts as missing (nothing is hidden for it, as `canonicalize` failing).
fn node(path: &Path) -> hidden::Node {
    use hidden::Node;
    match path.symlink_metadata() {
        Err(_) => Node::Missing,
        Ok(m) if m.file_type().is_symlink() => match std::fs::read_link(path) {
            Ok(target) => Node::Link(target),
            Err(_) => Node::Missing,
        },
        Ok(m) if m.is_dir() => Node::Directory,
        Ok(m) if m.is_file() => Node::File,
        Ok(_) => Node::Other,
    }
}

/// The first descriptor in `fds` that cannot be named to keep: 0, 1 and 2 are always
/// passed on, and negative numbers are not descriptors. Shared by [`PolicyRequest::resolve`]
/// (the caller's flags) and request validation (a decoded file).
pub(crate) fn first_unkeepable_fd(fds: &[i32]) -> Option<i32> {
    fds.iter().copied().find(|&fd| fd <= 2)
}

/// Whether `ports` names port 0, which nothing can connect to. Shared like
/// [`first_unkeepable_fd`].
pub(crate) fn has_port_zero(ports: &[u16]) -> bool {
    ports.contains(&0)
}

/// Where the absolute `path` will be once the directories it names are made: its
/// nearest existing ancestor resolved through links, then the missing rest as written
/// (`..` there steps back over a directory still to be made, as it will once made).
/// `None` for a relative path.
fn resolved_to_be(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    let (existing, rest) = path
        .ancestors()
        .find_map(|a| Some((a.canonicalize().ok()?, path.strip_prefix(a).ok()?)))?;
    let mut out = existing;
    for step in rest.components() {
        match step {
            Component::Normal(name) => out.push(name),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    Some(out)
}

enum DirError {
    Io(io::Error),
    NotDirectory,
}

fn canonical_dir(path: &Path) -> Result<PathBuf, DirError> {
    let canonical = path.canonicalize().map_err(DirError::Io)?;
    if canonical.is_dir() {
        Ok(canonical)
    } else {
        Err(DirError::NotDirectory)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_directory_answers_as_a_look_at_each_name_would() {
        let dir = tempdir();
        let d = dir.as_path();
        std::fs::write(d.join("file"), b"x").unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        std::os::unix::fs::symlink("file", d.join("link")).unwrap();
        let names = ["file", "sub", "link", "gone", "also-gone", "sub/inner"];
        let paths: Vec<PathBuf> = names.iter().map(|n| d.join(n)).collect();
        let mut nodes = Nodes::listing(paths.iter().map(PathBuf::as_path));
        assert!(nodes.listed.contains_key(d), "{:?}", nodes.listed.keys());
        for path in &paths {
            assert_eq!(nodes.of(path), node(path), "{}", path.display());
        }
        // The directory was listed, and a name made since then is not looked at again:
        // one resolution answers from one moment.
        assert!(matches!(nodes.listed.get(d), Some(Some(_))));
        // Fewer names than LISTED_FROM in a directory: no listing.
        let few = Nodes::listing([d.join("a"), d.join("sub/b")].iter().map(PathBuf::as_path));
        assert!(few.listed.is_empty());
        // A directory that cannot be listed is asked name by name.
        assert!(names_in(&d.join("file")).is_none());
        let mut through_file = Nodes::listing(
            ["a", "b", "c", "d", "e"]
                .iter()
                .map(|n| d.join("file").join(n))
                .collect::<Vec<_>>()
                .iter()
                .map(PathBuf::as_path),
        );
        assert_eq!(through_file.of(&d.join("file/a")), hidden::Node::Missing);
        assert!(through_file.listed.is_empty());
    }

    fn tempdir() -> PathBuf {
        let base = std::env::temp_dir().join(format!(
            "stockade-policy-test-{}-{}",
            std::process::id(),
            rand_suffix()
        ));
        std::fs::create_dir_all(&base).unwrap();
        base.canonicalize().unwrap()
    }

    /// This process as the invoker, with no home directory (tests add one when needed).
    fn invoker() -> Invoker {
        use std::os::unix::fs::MetadataExt;
        Invoker {
            uid: std::fs::metadata(tempdir()).unwrap().uid(),
            homes: Vec::new(),
            runtime_dir: None,
            control_bases: Vec::new(),
            capabilities: 0,
            store_variables: Vec::new(),
            other_control_bases: Vec::new(),
            readable_root_secrets: Vec::new(),
        }
    }

    fn rand_suffix() -> u64 {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        N.fetch_add(1, Ordering::Relaxed)
    }

    #[test]
    fn workspace_defaults_to_cwd() {
        let dir = tempdir();
        let policy = PolicyRequest::new(Mode::WorkspaceWrite)
            .resolve(&dir, None, &invoker())
            .unwrap();
        assert_eq!(policy.workspace, dir);
        assert!(policy.writable_roots.is_empty());
        assert_eq!(policy.tmpdir, None);
    }

    #[test]
    fn relative_paths_are_taken_from_cwd_and_canonicalised() {
        let dir = tempdir();
        std::fs::create_dir(dir.join("ws")).unwrap();
        std::fs::create_dir(dir.join("extra")).unwrap();
        let req = PolicyRequest {
            workspace: Some("ws/../ws".into()),
            writable: vec!["extra".into(), "./extra".into()],
            ..PolicyRequest::new(Mode::WorkspaceWrite)
        };
        std::fs::create_dir(dir.join("t")).unwrap();
        let policy = req.resolve(&dir, Some(&dir.join("t")), &invoker()).unwrap();
        assert_eq!(policy.workspace, dir.join("ws"));
        assert_eq!(policy.writable_roots, vec![dir.join("extra")]);
        assert_eq!(policy.tmpdir, Some(dir.join("t")));
        let ids: Vec<&Path> = policy.root_ids.iter().map(|r| r.path.as_path()).collect();
        assert_eq!(
            ids,
            [
                &dir.join("ws"),
                Path::new("/tmp"),
                &dir.join("extra"),
                &dir.join("t")
            ]
        );
        assert_eq!(policy.root_ids[0], RootId::of(&dir.join("ws")).unwrap());
    }

    #[test]
    fn missing_workspace_is_named() {
        let dir = tempdir();
        let req = PolicyRequest {
            workspace: Some(dir.join("absent")),
            ..PolicyRequest::new(Mode::ReadOnly)
        };
        let err = req.resolve(&dir, None, &invoker()).unwrap_err();
        assert!(matches!(err, PolicyError::Workspace { .. }));
        assert!(err.to_string().contains("absent"), "{err}");
    }

    #[test]
    fn workspace_that_is_a_file_is_refused() {
        let dir = tempdir();
        std::fs::write(dir.join("f"), b"").unwrap();
        let req = PolicyRequest {
            workspace: Some(dir.join("f")),
            ..PolicyRequest::new(Mode::ReadOnly)
        };
        let err = req.resolve(&dir, None, &invoker()).unwrap_err();
        assert!(
            matches!(err, PolicyError::WorkspaceNotDirectory { .. }),
            "{err}"
        );
    }

    #[test]
    fn missing_writable_root_is_named() {
        let dir = tempdir();
        let req = PolicyRequest {
            writable: vec![dir.join("nope")],
            ..PolicyRequest::new(Mode::WorkspaceWrite)
        };
        let err = req.resolve(&dir, None, &invoker()).unwrap_err();
        assert!(matches!(err, PolicyError::WritableRoot { .. }));
        assert!(err.to_string().contains("nope"), "{err}");
    }

    #[test]
    fn tmpdir_that_does_not_exist_is_ignored() {
        let dir = tempdir();
        let policy = PolicyRequest::new(Mode::WorkspaceWrite)
            .resolve(&dir, Some(&dir.join("missing")), &invoker())
            .unwrap();
        assert_eq!(policy.tmpdir, None);
        let policy = PolicyRequest::new(Mode::WorkspaceWrite)
            .resolve(&dir, Some(Path::new("relative")), &invoker())
            .unwrap();
        assert_eq!(policy.tmpdir, None);
    }

    #[test]
    fn network_is_denied_by_default_only_in_confined_modes() {
        let dir = tempdir();
        for (mode, want) in [
            (Mode::ReadOnly, Network::Deny),
            (Mode::WorkspaceWrite, Network::Deny),
            (Mode::DangerFullAccess, Network::Allow),
        ] {
            let policy = PolicyRequest::new(mode)
                .resolve(&dir, None, &invoker())
                .unwrap();
            assert_eq!(policy.network, want, "{mode}");
        }
        let req = PolicyRequest {
            network: Some(Network::Allow),
            ..PolicyRequest::new(Mode::ReadOnly)
        };
        assert_eq!(
            req.resolve(&dir, None, &invoker()).unwrap().network,
            Network::Allow
        );
        let req = PolicyRequest {
            network: Some(Network::Deny),
            ..PolicyRequest::new(Mode::DangerFullAccess)
        };
        assert_eq!(
            req.resolve(&dir, None, &invoker()).unwrap().network,
            Network::Allow
        );
    }

    #[test]
    fn tcp_ports_with_the_network_allowed_are_refused_in_confined_modes() {
        let dir = tempdir();
        let ports = |mode, network| PolicyRequest {
            network,
            allow_tcp_connect: vec![443],
            ..PolicyRequest::new(mode)
        };
        let err = ports(Mode::WorkspaceWrite, Some(Network::Allow))
            .resolve(&dir, None, &invoker())
            .unwrap_err();
        assert!(
            matches!(err, PolicyError::TcpPortsWithNetworkAllowed),
            "{err}"
        );
        assert!(err.to_string().contains("--network allow"), "{err}");
        // Controls: with the network denied (explicitly or by default) the ports are the
        // exceptions; danger-full-access ignores every network flag.
        for (mode, network) in [
            (Mode::WorkspaceWrite, Some(Network::Deny)),
            (Mode::ReadOnly, None),
            (Mode::DangerFullAccess, Some(Network::Allow)),
        ] {
            assert!(
                ports(mode, network).resolve(&dir, None, &invoker()).is_ok(),
                "{mode}"
            );
        }
    }

    #[test]
    fn domain_rules_resolve_with_the_proxy_port_and_refuse_what_would_bypass_them() {
        use crate::domains::{HostRule, Pin, RuleKind};
        let dir = tempdir();
        let rules = DomainRules {
            allow: vec![HostRule::parse("*.example.org", RuleKind::Allow).unwrap()],
            ..DomainRules::default()
        };
        let req = PolicyRequest {
            domains: rules.clone(),
            proxy_port: Some(40000),
            ..PolicyRequest::new(Mode::WorkspaceWrite)
        };
        let policy = req.resolve(&dir, None, &invoker()).unwrap();
        let d = policy.domains().unwrap();
        assert_eq!((d.rules(), d.proxy_port()), (&rules, 40000));
        assert_eq!(policy.network(), Network::Deny);
        let err = |r: PolicyRequest| r.resolve(&dir, None, &invoker()).unwrap_err();
        assert!(matches!(
            err(PolicyRequest {
                network: Some(Network::Allow),
                ..req.clone()
            }),
            PolicyError::DomainsWithNetworkAllowed
        ));
        let e = err(PolicyRequest {
            allow_tcp_connect: vec![22],
            ..req.clone()
        });
        assert!(matches!(e, PolicyError::DomainsWithTcpPorts), "{e}");
        assert!(e.to_string().contains("--allow-domain HOST:PORT"), "{e}");
        assert!(matches!(
            err(PolicyRequest {
                proxy_port: None,
                ..req.clone()
            }),
            PolicyError::ProxyPortMissing
        ));
        let mut pinned = req.clone();
        pinned.domains.pins = vec![Pin::parse("a.example.org=127.0.0.1").unwrap()];
        let e = err(pinned);
        assert!(matches!(e, PolicyError::Domains(_)), "{e}");
        // Controls: no rules, no proxy; danger-full-access confines nothing.
        let none = PolicyRequest::new(Mode::WorkspaceWrite)
            .resolve(&dir, None, &invoker())
            .unwrap();
        assert!(none.domains().is_none());
        let danger = PolicyRequest {
            mode: Mode::DangerFullAccess,
            ..req
        };
        assert!(
            danger
                .resolve(&dir, None, &invoker())
                .unwrap()
                .domains()
                .is_none()
        );
    }

    #[test]
    fn ports_and_fds_are_sorted_unique_and_checked() {
        let dir = tempdir();
        let req = PolicyRequest {
            allow_tcp_connect: vec![443, 80, 443],
            keep_fds: vec![7, 3, 7],
            ..PolicyRequest::new(Mode::WorkspaceWrite)
        };
        let policy = req.resolve(&dir, None, &invoker()).unwrap();
        assert_eq!(policy.allow_tcp_connect, vec![80, 443]);
        assert_eq!(policy.keep_fds, vec![3, 7]);
        for fd in [2, -1] {
            let req = PolicyRequest {
                keep_fds: vec![fd],
                ..PolicyRequest::new(Mode::WorkspaceWrite)
            };
            let err = req.resolve(&dir, None, &invoker()).unwrap_err();
            assert!(matches!(err, PolicyError::KeepFd { .. }), "{err}");
        }
        let req = PolicyRequest {
            allow_tcp_connect: vec![0],
            ..PolicyRequest::new(Mode::WorkspaceWrite)
        };
        assert!(matches!(
            req.resolve(&dir, None, &invoker()),
            Err(PolicyError::TcpPortZero)
        ));
    }

    #[test]
    fn broad_roots_are_refused_naming_the_flag_unless_allowed() {
        let dir = tempdir();
        std::fs::create_dir_all(dir.join("home/u/proj")).unwrap();
        let me = Invoker {
            homes: vec![dir.join("home/u")],
            ..invoker()
        };
        let cases: [(Option<PathBuf>, Vec<PathBuf>, &Path, &str); 4] = [
            (None, vec![], Path::new("/"), "current directory"),
            (
                Some(dir.join("home/u")),
                vec![],
                &dir.join("home/u"),
                "--workspace",
            ),
            (
                Some(dir.join("home/u/proj")),
                vec![dir.join("home")],
                &dir.join("home"),
                "--writable",
            ),
            (
                Some(dir.join("home/u/proj")),
                vec!["/".into()],
                Path::new("/"),
                "--writable",
            ),
        ];
        for (workspace, writable, cwd, named) in cases {
            let req = PolicyRequest {
                workspace,
                writable,
                ..PolicyRequest::new(Mode::WorkspaceWrite)
            };
            let err = req.resolve(cwd, None, &me).unwrap_err();
            assert!(matches!(err, PolicyError::BroadRoot { .. }), "{err}");
            let msg = err.to_string();
            assert!(
                msg.contains("--allow-broad-root") && msg.contains(named),
                "{msg}"
            );
            // Allowed on purpose, and never a question in read-only.
            let allowed = PolicyRequest {
                allow_broad_root: true,
                ..req.clone()
            };
            assert!(allowed.resolve(cwd, None, &me).is_ok(), "{msg}");
            let read_only = PolicyRequest {
                mode: Mode::ReadOnly,
                ..req
            };
            assert!(
                read_only
                    .resolve(cwd, None, &me)
                    .unwrap()
                    .root_ids
                    .is_empty()
            );
        }
        // Control: a workspace inside the home is the normal case.
        let req = PolicyRequest::new(Mode::WorkspaceWrite);
        assert!(req.resolve(&dir.join("home/u/proj"), None, &me).is_ok());
    }

    #[test]
    fn a_writable_root_linked_from_inside_the_workspace_is_refused() {
        // Not beneath /tmp: a link there is refused whatever it is.
        let dir = PathBuf::from(format!(
            "/var/tmp/stockade-policy-test-{}-{}",
            std::process::id(),
            rand_suffix()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(dir.join("ws")).unwrap();
        std::fs::create_dir_all(dir.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(dir.join("elsewhere"), dir.join("ws/cache")).unwrap();
        std::os::unix::fs::symlink(dir.join("elsewhere"), dir.join("mine")).unwrap();
        let req = |writable: &str| PolicyRequest {
            workspace: Some("ws".into()),
            writable: vec![writable.into()],
            ..PolicyRequest::new(Mode::WorkspaceWrite)
        };
        let err = req("ws/cache").resolve(&dir, None, &invoker()).unwrap_err();
        assert!(matches!(err, PolicyError::LinkedRoot { .. }), "{err}");
        assert!(err.to_string().contains("ws/cache"), "{err}");
        // Control: a link the user keeps outside every writable root is followed.
        let policy = req("mine").resolve(&dir, None, &invoker()).unwrap();
        assert_eq!(policy.writable_roots, [dir.join("elsewhere")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_refused_tmpdir_is_left_out_with_its_reason() {
        let dir = tempdir();
        let req = PolicyRequest::new(Mode::WorkspaceWrite);
        let policy = req.resolve(&dir, Some(Path::new("/")), &invoker()).unwrap();
        assert_eq!(policy.tmpdir, None);
        let why = policy.tmpdir_refused.unwrap();
        assert!(why.contains("$TMPDIR / is not granted"), "{why}");
        assert!(!policy.root_ids.iter().any(|r| r.path == Path::new("/")));
    }

    #[test]
    fn hidden_paths_are_canonical_existing_and_never_contain_a_root() {
        let dir = tempdir();
        for d in ["home/.ssh", "ws", "run/stockade", "tmpd/stockade-0"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        std::os::unix::fs::symlink(dir.join("home/.ssh"), dir.join("link")).unwrap();
        // Not root: root's extra defaults (/etc/shadow, ...) are tested in hidden.rs.
        let inv = Invoker {
            uid: 4242,
            homes: vec![dir.join("home")],
            control_bases: vec![dir.join("run/stockade"), dir.join("tmpd/stockade-0")],
            ..invoker()
        };
        let req = PolicyRequest {
            workspace: Some(dir.join("ws")),
            writable: vec![dir.join("tmpd")],
            hide: vec!["link".into(), "absent".into()],
            ..PolicyRequest::new(Mode::WorkspaceWrite)
        };
        // The link hides its target (once); the absent path costs nothing. The control
        // bases here lie beneath the shared /tmp, a writable root in workspace-write, so
        // they are not carved out of it; read-only hides them.
        let policy = req.resolve(&dir, None, &inv).unwrap();
        assert_eq!(policy.hidden, vec![dir.join("home/.ssh")]);
        let read_only = PolicyRequest {
            mode: Mode::ReadOnly,
            ..req.clone()
        };
        let bases = vec![dir.join("run/stockade"), dir.join("tmpd/stockade-0")];
        let mut all = vec![dir.join("home/.ssh")];
        all.extend(bases.clone());
        assert_eq!(read_only.resolve(&dir, None, &inv).unwrap().hidden, all);
        let none = PolicyRequest {
            default_hide: false,
            hide: Vec::new(),
            ..read_only
        };
        assert_eq!(none.resolve(&dir, None, &inv).unwrap().hidden, bases);
        // A candidate base that is a link is no base of ours: its target stays visible.
        std::fs::create_dir(dir.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(dir.join("elsewhere"), dir.join("run/linked")).unwrap();
        let linked = Invoker {
            control_bases: vec![dir.join("run/linked"), dir.join("run/stockade")],
            ..inv.clone()
        };
        assert_eq!(
            none.resolve(&dir, None, &linked).unwrap().hidden,
            vec![dir.join("run/stockade")]
        );
        // A user's first run makes `~/.local/state/stockade` with its parents after
        // resolution: hidden where it will be, through a link in what exists, and past
        // a `..` over a directory still to be made.
        std::fs::create_dir(dir.join("fresh")).unwrap();
        std::os::unix::fs::symlink(dir.join("fresh"), dir.join("fresh-link")).unwrap();
        let to_be = dir.join("fresh/.local/state/stockade");
        for base in [
            dir.join("fresh/.local/state/stockade"),
            dir.join("fresh-link/.local/state/stockade"),
            dir.join("fresh/made/../.local/state/stockade"),
        ] {
            let first_run = Invoker {
                control_bases: vec![base.clone()],
                ..inv.clone()
            };
            let hidden = none.resolve(&dir, None, &first_run).unwrap().hidden;
            assert_eq!(hidden, vec![to_be.clone()], "{}", base.display());
        }
        // A base that holds the workspace or a writable root could not be hidden: refused,
        // naming both. (Here beneath /tmp, only read-only mode's workspace shows it: in
        // workspace-write /tmp is a root holding the base; tests/control_files.rs has a
        // writable root.)
        let holding = Invoker {
            control_bases: vec![dir.clone()],
            ..inv.clone()
        };
        let err = none.resolve(&dir, None, &holding).unwrap_err();
        assert!(
            matches!(&err, PolicyError::RootInControlDir { root, base } if *root == dir.join("ws") && *base == dir),
            "{err}"
        );
        let unconfined = PolicyRequest {
            mode: Mode::DangerFullAccess,
            ..req.clone()
        };
        assert!(
            unconfined
                .resolve(&dir, None, &inv)
                .unwrap()
                .hidden
                .is_empty()
        );

        for bad in [dir.join("ws"), dir.clone(), dir.join("tmpd")] {
            let req = PolicyRequest {
                hide: vec![bad.clone()],
                ..req.clone()
            };
            let err = req.resolve(&dir, None, &inv).unwrap_err();
            assert!(
                matches!(err, PolicyError::HiddenContainsRoot { .. }),
                "{err}"
            );
            assert!(err.to_string().contains(&*bad.to_string_lossy()), "{err}");
        }
    }
    #[test]
    fn kept_capabilities_are_sorted_unique_and_must_be_held() {
        use crate::capability::Capability::{Chown, DacOverride, Fowner};
        let dir = tempdir();
        let req = |mode| PolicyRequest {
            keep_capabilities: vec![Fowner, DacOverride, Fowner],
            ..PolicyRequest::new(mode)
        };
        let held = |mask: u64| Invoker {
            capabilities: mask,
            ..invoker()
        };
        let policy = req(Mode::WorkspaceWrite)
            .resolve(&dir, None, &held(u64::MAX))
            .unwrap();
        assert_eq!(policy.keep_capabilities(), [DacOverride, Fowner]);
        assert_eq!(policy.kept_capabilities().mask(), 0b1010);
        // Not held: an ordinary user holds none; root in a container may lack one.
        let err = req(Mode::ReadOnly)
            .resolve(&dir, None, &held(0))
            .unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, PolicyError::CapabilityNotHeld { .. }),
            "{msg}"
        );
        assert!(
            msg.starts_with("--keep-capability CAP_DAC_OVERRIDE, CAP_FOWNER:"),
            "{msg}"
        );
        let err = req(Mode::WorkspaceWrite)
            .resolve(&dir, None, &held(Chown.bit() | Fowner.bit()))
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("--keep-capability CAP_DAC_OVERRIDE: "),
            "{err}"
        );
        // Nothing is confined in danger-full-access, so nothing is kept or checked.
        let policy = req(Mode::DangerFullAccess)
            .resolve(&dir, None, &held(0))
            .unwrap();
        assert!(policy.keep_capabilities().is_empty());
        // The default keeps none.
        let policy = PolicyRequest::new(Mode::WorkspaceWrite)
            .resolve(&dir, None, &held(0))
            .unwrap();
        assert!(policy.kept_capabilities().is_empty());
    }
}
