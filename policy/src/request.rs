//! The launch request: everything the runner needs to start one confined command, and
//! its file format.
//!
//! # File format
//!
//! ```text
//! offset  size  field
//! 0       8     magic  b"STKDREQ\n"
//! 8       2     format version, little endian (`FORMAT_VERSION`, currently 5)
//! 10      4     body length N, little endian
//! 14      N     body: bincode 2 (standard config) encoding of the request
//! ```
//!
//! A file is rejected, with a distinct [`DecodeError`], when it is larger than
//! [`MAX_REQUEST_BYTES`], when the magic or version differ, when it is shorter than its
//! header says (truncated), when bytes follow the body, or when the body does not decode.
//! Paths, arguments and environment entries are carried as raw bytes: Linux allows any
//! byte but NUL in them, and the format must not lose what the caller passed.

use crate::binding::{Binding, CwdBinding, ExecBinding};
use crate::environment;
use crate::grants::{self, Access};
use crate::guarantees::KernelFacts;
use crate::inherit::Inherit;
use crate::policy::{Policy, first_unkeepable_fd, has_port_zero};
use crate::session::RunnerSession;
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// The first bytes of every launch request file.
pub const MAGIC: [u8; 8] = *b"STKDREQ\n";
/// The format version this build writes and reads.
pub const FORMAT_VERSION: u16 = 6;
/// Magic, version and body length.
pub const HEADER_LEN: usize = 8 + 2 + 4;
/// The largest request file accepted (4 MiB): larger than any argv + environment the
/// kernel would accept for `execve`, small enough that reading it is harmless.
pub const MAX_REQUEST_BYTES: usize = 4 << 20;

/// Everything needed to start one confined command. The struct is the wire body
/// (serde, with raw bytes for everything the OS treats as bytes): its fields and the
/// policy's are written down once, here and in [`Policy`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchRequest {
    /// The target's argv; `argv[0]` is resolved like `execvp` over the request's `PATH`.
    #[serde(with = "crate::raw")]
    pub argv: Vec<OsString>,
    /// The directory the target starts in (absolute).
    #[serde(with = "crate::raw")]
    pub cwd: PathBuf,
    /// The target's complete environment, in order.
    #[serde(with = "crate::raw")]
    pub env: Vec<(OsString, OsString)>,
    /// The resolved policy to enforce.
    pub policy: Policy,
    /// The kernel facts the launcher judged this policy against when it reported
    /// `enforcement` and `guarantees` to the executor. Both derive from the policy and
    /// these facts, so the runner refuses to start the target unless what the kernel
    /// actually gave covers them ([`KernelFacts::covers`]): the report is never a lie.
    pub promised: KernelFacts,
    /// The status file the runner reports to (see [`crate::status`]), absolute; `None`
    /// when the launcher provides no status channel.
    #[serde(with = "crate::raw")]
    pub status_path: Option<PathBuf>,
    /// Whether the runner uses the working directory and environment it was spawned
    /// with instead of `cwd` and `env` (see [`crate::inherit`]).
    pub inherit: Inherit,
    /// Whether the runner starts a new session (see [`crate::session`]).
    pub session: RunnerSession,
    /// The executable and working directory as they were when the command was confined:
    /// the runner refuses to start anything else (see [`crate::binding`]).
    pub binding: Binding,
    /// The id of the mount namespace `confine` ran in (`NS_GET_MNTNS_ID`: unique while
    /// the system runs, never reused), when the kernel tells it (`None`: a kernel
    /// without that request, before Linux 6.11, or no `/proc`). The namespace stage
    /// always starts the runner in a new one, so a runner still in this one was not
    /// started by the stage, whatever else looks as the stage leaves it (a `/` that is
    /// read-only of its own). Not the device and inode of `/proc/self/ns/mnt`: the
    /// kernel hands a freed namespace's inode number to the next one, which may be the
    /// stage's own.
    pub confined_in: Option<u64>,
    /// The comm the runner restricts itself under, when the launcher reads Landlock's
    /// audit records for this command (see [`crate::landlock_audit`]): only then does the
    /// runner ask the kernel to record the command's refusals after `execve`, so nothing
    /// reaches the machine's audit log for a command nobody reads the records of.
    pub audit_tag: Option<String>,
}

/// Why request bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Larger than [`MAX_REQUEST_BYTES`].
    TooLarge { len: usize },
    /// Shorter than the header, or than the body length the header announces.
    Truncated { expected: usize, actual: usize },
    /// The file does not start with [`MAGIC`]: not a stockade launch request.
    BadMagic,
    /// Written by a stockade with another format version.
    UnsupportedVersion { found: u16 },
    /// Bytes follow the body the header announced.
    TrailingBytes { extra: usize },
    /// The body is not a valid encoding of a request.
    Corrupt { reason: String },
}

/// What is wrong with the bytes; whoever read them names the file before it.
impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::TooLarge { len } => write!(
                f,
                "too large ({len} bytes; the limit is {MAX_REQUEST_BYTES})"
            ),
            DecodeError::Truncated { expected, actual } => {
                write!(f, "truncated ({actual} of {expected} bytes)")
            }
            DecodeError::BadMagic => f.write_str("bad magic header: not a stockade launch request"),
            DecodeError::UnsupportedVersion { found } => write!(
                f,
                "format version {found}, where this runner reads version {FORMAT_VERSION}: launcher and runner come from different stockade builds"
            ),
            DecodeError::TrailingBytes { extra } => {
                write!(f, "{extra} trailing bytes after the request")
            }
            DecodeError::Corrupt { reason } => write!(f, "corrupt: {reason}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Why a request could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EncodeError {
    /// The argv and environment together exceed [`MAX_REQUEST_BYTES`].
    TooLarge { len: usize },
    /// The encoder refused the body.
    Bincode(String),
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::TooLarge { len } => write!(
                f,
                "the launch request would be {len} bytes, over the {MAX_REQUEST_BYTES}-byte limit: the command line or environment is too large"
            ),
            EncodeError::Bincode(e) => write!(f, "cannot encode the launch request: {e}"),
        }
    }
}

impl std::error::Error for EncodeError {}

/// Why a decoded request is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValidationError {
    EmptyArgv,
    /// The audit tag is not one the launcher makes (`stk-` and 11 hex digits).
    BadAuditTag {
        tag: String,
    },
    NulInArgv {
        index: usize,
    },
    RelativeCwd {
        cwd: PathBuf,
    },
    NulInCwd,
    EmptyEnvName {
        index: usize,
    },
    EqualsInEnvName {
        name: String,
    },
    NulInEnv {
        name: String,
    },
    RelativePolicyPath {
        path: PathBuf,
    },
    /// A policy path with a `.` or `..` component: resolution makes every path
    /// canonical, and the carve-out walks components as they are written, so
    /// `/a/../b` would grant `b` beside `/a/..` instead of hiding it.
    NonCanonicalPolicyPath {
        path: PathBuf,
    },
    NulInPolicyPath,
    /// A descriptor to keep that is 0, 1, 2 or negative.
    BadKeepFd {
        fd: i32,
    },
    /// Port 0 among the allowed TCP ports.
    TcpPortZero,
    /// Network rules resolution never combines: allowed ports or DNS with the whole
    /// network allowed (they would claim a limit that is not there).
    ContradictoryNetwork {
        why: &'static str,
    },
    /// A hidden path that is, or contains, the workspace or a writable root: resolution
    /// refuses to hide where the command works, and such a rule would hide nothing.
    HiddenCoversRoot {
        hidden: PathBuf,
        root: PathBuf,
    },
    /// An allowed device that does not lie beneath `/dev`: resolution admits only device
    /// files there, and a read and write grant anywhere else is a writable root without
    /// its checks.
    DeviceOutsideDev {
        path: PathBuf,
    },
    RelativeStatusPath {
        path: PathBuf,
    },
    NulInStatusPath,
    /// A writable root without the identity it had when the policy was resolved.
    UnidentifiedRoot {
        path: PathBuf,
    },
    /// Domain rules that resolution would have refused, a proxy on port 0, or a
    /// network that is not denied under them.
    BadDomains {
        why: String,
    },
    /// A path of the binding is relative or holds a NUL byte.
    BadBindingPath {
        path: PathBuf,
    },
    /// The working directory binding does not fit the request: bound to another
    /// directory than `cwd`, bound although the directory is inherited, or not bound
    /// although it is not.
    CwdBindingMismatch,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValidationError::EmptyArgv => {
                f.write_str("request has an empty argv: no program to run")
            }
            ValidationError::BadAuditTag { tag } => write!(
                f,
                "request has an audit tag {tag:?} that is not `stk-` and 11 hex digits"
            ),
            ValidationError::NulInArgv { index } => {
                write!(f, "request argv[{index}] contains a NUL byte")
            }
            ValidationError::RelativeCwd { cwd } => {
                write!(f, "request cwd {} is not an absolute path", cwd.display())
            }
            ValidationError::NulInCwd => f.write_str("request cwd contains a NUL byte"),
            ValidationError::EmptyEnvName { index } => {
                write!(f, "request environment entry {index} has an empty name")
            }
            ValidationError::EqualsInEnvName { name } => {
                write!(f, "request environment name {name:?} contains '='")
            }
            ValidationError::NulInEnv { name } => {
                write!(f, "request environment entry {name:?} contains a NUL byte")
            }
            ValidationError::RelativePolicyPath { path } => {
                write!(f, "request policy path {} is not absolute", path.display())
            }
            ValidationError::NonCanonicalPolicyPath { path } => write!(
                f,
                "request policy path {} has a . or .. component (stockade confine writes canonical paths)",
                path.display()
            ),
            ValidationError::NulInPolicyPath => {
                f.write_str("request policy path contains a NUL byte")
            }
            ValidationError::BadKeepFd { fd } => write!(
                f,
                "request keeps descriptor {fd}; only descriptors above 2 can be named"
            ),
            ValidationError::TcpPortZero => {
                f.write_str("request allows TCP port 0, which cannot be connected to")
            }
            ValidationError::ContradictoryNetwork { why } => {
                write!(f, "request's network rules contradict each other: {why}")
            }
            ValidationError::HiddenCoversRoot { hidden, root } => write!(
                f,
                "request hides {}, which contains {} where the command may write",
                hidden.display(),
                root.display()
            ),
            ValidationError::DeviceOutsideDev { path } => write!(
                f,
                "request allows the device {}, which does not lie beneath /dev",
                path.display()
            ),
            ValidationError::BadDomains { why } => {
                write!(f, "request's network by name is not usable: {why}")
            }
            ValidationError::RelativeStatusPath { path } => {
                write!(f, "request status path {} is not absolute", path.display())
            }
            ValidationError::NulInStatusPath => {
                f.write_str("request status path contains a NUL byte")
            }
            ValidationError::UnidentifiedRoot { path } => write!(
                f,
                "request grants writable root {} without its device and inode",
                path.display()
            ),
            ValidationError::BadBindingPath { path } => write!(
                f,
                "request binds the path {} which is not absolute or holds a NUL byte",
                path.display()
            ),
            ValidationError::CwdBindingMismatch => f.write_str(
                "request's working directory binding does not match its cwd (or binds an inherited one)",
            ),
        }
    }
}

impl std::error::Error for ValidationError {}

/// The one bincode configuration for both directions: standard encoding, and a decode
/// limit so that a hostile length prefix cannot make the decoder allocate more than a
/// request file may hold.
pub(crate) fn config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<MAX_REQUEST_BYTES>()
}

impl LaunchRequest {
    /// Encodes the request into the file format described in the module docs. A request
    /// that would exceed [`MAX_REQUEST_BYTES`] is refused here, so the launcher never
    /// writes a file the runner would reject.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let encoded = bincode::serde::encode_to_vec(self, config())
            .map_err(|e| EncodeError::Bincode(e.to_string()))?;
        let len = HEADER_LEN + encoded.len();
        if len > MAX_REQUEST_BYTES {
            return Err(EncodeError::TooLarge { len });
        }
        let mut out = Vec::with_capacity(HEADER_LEN + encoded.len());
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&(encoded.len() as u32).to_le_bytes());
        out.extend_from_slice(&encoded);
        Ok(out)
    }

    /// Decodes request bytes. Does not validate: see [`LaunchRequest::validate`].
    pub fn decode(bytes: &[u8]) -> Result<LaunchRequest, DecodeError> {
        if bytes.len() > MAX_REQUEST_BYTES {
            return Err(DecodeError::TooLarge { len: bytes.len() });
        }
        // Check the magic on whatever prefix we have, so that a short foreign file is
        // reported as foreign rather than as truncated.
        let magic_len = bytes.len().min(MAGIC.len());
        if bytes[..magic_len] != MAGIC[..magic_len] {
            return Err(DecodeError::BadMagic);
        }
        if bytes.len() < HEADER_LEN {
            return Err(DecodeError::Truncated {
                expected: HEADER_LEN,
                actual: bytes.len(),
            });
        }
        let version = u16::from_le_bytes([bytes[8], bytes[9]]);
        if version != FORMAT_VERSION {
            return Err(DecodeError::UnsupportedVersion { found: version });
        }
        let body_len = u32::from_le_bytes([bytes[10], bytes[11], bytes[12], bytes[13]]) as usize;
        let expected = HEADER_LEN.saturating_add(body_len);
        if bytes.len() < expected {
            return Err(DecodeError::Truncated {
                expected,
                actual: bytes.len(),
            });
        }
        if bytes.len() > expected {
            return Err(DecodeError::TrailingBytes {
                extra: bytes.len() - expected,
            });
        }
        let (request, used): (LaunchRequest, usize) =
            bincode::serde::decode_from_slice(&bytes[HEADER_LEN..], config()).map_err(|e| {
                DecodeError::Corrupt {
                    reason: e.to_string(),
                }
            })?;
        if used != body_len {
            return Err(DecodeError::Corrupt {
                reason: format!("the body is {body_len} bytes but the request ends after {used}"),
            });
        }
        Ok(request)
    }

    /// Checks what the format cannot express: each violation is its own error.
    pub fn validate(&self) -> Result<(), ValidationError> {
        self.validate_command()?;
        validate_policy(&self.policy)?;
        self.validate_binding()
    }

    /// The argv, working directory and environment can be passed to `execve`.
    fn validate_command(&self) -> Result<(), ValidationError> {
        if self.argv.is_empty() {
            return Err(ValidationError::EmptyArgv);
        }
        if let Some(tag) = self.audit_tag.as_ref()
            && !crate::landlock_audit::valid_tag(tag)
        {
            return Err(ValidationError::BadAuditTag { tag: tag.clone() });
        }
        if let Some(index) = self.argv.iter().position(|a| a.as_bytes().contains(&0)) {
            return Err(ValidationError::NulInArgv { index });
        }
        if self.cwd.as_os_str().as_bytes().contains(&0) {
            return Err(ValidationError::NulInCwd);
        }
        if !self.cwd.is_absolute() {
            return Err(ValidationError::RelativeCwd {
                cwd: self.cwd.clone(),
            });
        }
        // Entries set over an inherited environment obey the same rules as `env`.
        let set = self.inherit.env.iter().flat_map(|e| e.set.iter());
        for (index, (name, value)) in self.env.iter().chain(set).enumerate() {
            // Only a refused entry is shown: no copy of every name on the runner's path.
            let shown = || name.to_string_lossy().into_owned();
            if name.is_empty() {
                return Err(ValidationError::EmptyEnvName { index });
            }
            if name.as_bytes().contains(&0) || value.as_bytes().contains(&0) {
                return Err(ValidationError::NulInEnv { name: shown() });
            }
            if name.as_bytes().contains(&b'=') {
                return Err(ValidationError::EqualsInEnvName { name: shown() });
            }
        }
        Ok(())
    }

    /// The binding's paths are absolute and its working directory is the request's.
    fn validate_binding(&self) -> Result<(), ValidationError> {
        let bound_paths = match (&self.binding.executable, &self.binding.cwd) {
            (ExecBinding::Found(e), CwdBinding::Bound { path, .. }) => vec![&e.path, path],
            (ExecBinding::Found(e), CwdBinding::Inherited) => vec![&e.path],
            (_, CwdBinding::Bound { path, .. }) => vec![path],
            (_, CwdBinding::Inherited) => Vec::new(),
        };
        if let Some(path) = bound_paths
            .into_iter()
            .find(|p| !p.is_absolute() || p.as_os_str().as_bytes().contains(&0))
        {
            return Err(ValidationError::BadBindingPath { path: path.clone() });
        }
        let cwd_fits = match &self.binding.cwd {
            CwdBinding::Bound { path, .. } => !self.inherit.cwd && *path == self.cwd,
            CwdBinding::Inherited => self.inherit.cwd,
        };
        if !cwd_fits {
            return Err(ValidationError::CwdBindingMismatch);
        }
        if let Some(status) = &self.status_path {
            if status.as_os_str().as_bytes().contains(&0) {
                return Err(ValidationError::NulInStatusPath);
            }
            if !status.is_absolute() {
                return Err(ValidationError::RelativeStatusPath {
                    path: status.clone(),
                });
            }
        }
        Ok(())
    }

    /// The value of `name` in the request's environment (see [`environment::lookup`]).
    pub fn env_var(&self, name: &str) -> Option<&OsString> {
        environment::lookup(&self.env, name)
    }

    /// A request for tests (feature `testing`): `argv` in `cwd` under `policy`, judged
    /// against `promised`, with an empty environment, no status channel, nothing
    /// inherited and the runner's session left to the spawn. Tests set the public fields
    /// they need; the field list is written here, not in each test. The binding is a
    /// placeholder (nothing found, the cwd as device 0 inode 0) that validates but that no
    /// runner accepts: a test that runs the request binds it as `confine` would.
    #[cfg(any(test, feature = "testing"))]
    pub fn for_tests(
        argv: Vec<OsString>,
        cwd: impl Into<PathBuf>,
        policy: Policy,
        promised: KernelFacts,
    ) -> LaunchRequest {
        let cwd = cwd.into();
        LaunchRequest {
            argv,
            cwd: cwd.clone(),
            env: Vec::new(),
            policy,
            promised,
            status_path: None,
            inherit: Inherit::default(),
            session: RunnerSession::default(),
            binding: Binding {
                executable: ExecBinding::NotFound,
                cwd: CwdBinding::Bound {
                    path: cwd,
                    id: crate::roots::FileId {
                        dev: 0,
                        ino: 0,
                        birth: None,
                    },
                },
            },
            confined_in: None,
            audit_tag: None,
        }
    }
}

/// The resolved policy a request carries is one resolution could have produced:
/// canonical absolute paths, identified roots, a consistent network.
fn validate_policy(p: &Policy) -> Result<(), ValidationError> {
    for path in std::iter::once(&p.workspace)
        .chain(&p.writable_roots)
        .chain(&p.tmpdir)
        .chain(p.root_ids.iter().map(|r| &r.path))
        .chain(&p.hidden)
        .chain(&p.devices)
    {
        if path.as_os_str().as_bytes().contains(&0) {
            return Err(ValidationError::NulInPolicyPath);
        }
        if !path.is_absolute() {
            return Err(ValidationError::RelativePolicyPath { path: path.clone() });
        }
        // `Path::components` drops inner `.`s, so the bytes are looked at too.
        let dotted = path
            .as_os_str()
            .as_bytes()
            .split(|&b| b == b'/')
            .any(|c| c == b"." || c == b"..");
        if dotted {
            return Err(ValidationError::NonCanonicalPolicyPath { path: path.clone() });
        }
    }
    let dev = std::path::Path::new(crate::devices::DEVICE_TREE);
    if let Some(path) = p.devices.iter().find(|d| !d.starts_with(dev) || *d == dev) {
        return Err(ValidationError::DeviceOutsideDev { path: path.clone() });
    }
    if let Some(fd) = first_unkeepable_fd(&p.keep_fds) {
        return Err(ValidationError::BadKeepFd { fd });
    }
    // A writable root is granted only as the directory it was when resolved.
    // A private /tmp is the stage's own fresh tmpfs, never the caller's directory.
    let private_tmp = |g: &grants::Grant| {
        p.tmp == crate::stage::TmpMode::Private && g.path == std::path::Path::new("/tmp")
    };
    if let Some(g) = grants::grants(p)
        .into_iter()
        .find(|g| g.access == Access::Full && g.identity.is_none() && !private_tmp(g))
    {
        return Err(ValidationError::UnidentifiedRoot { path: g.path });
    }
    if has_port_zero(&p.allow_tcp_connect) {
        return Err(ValidationError::TcpPortZero);
    }
    // (danger-full-access enforces no network rule, and resolution keeps its flags.)
    if p.mode().is_confined() && p.network == crate::policy::Network::Allow {
        if !p.allow_tcp_connect.is_empty() {
            return Err(ValidationError::ContradictoryNetwork {
                why: "TCP ports are listed while the whole network is allowed",
            });
        }
        if p.allow_dns {
            return Err(ValidationError::ContradictoryNetwork {
                why: "DNS is allowed on its own while the whole network is allowed",
            });
        }
    }
    if p.mode().is_confined() && p.allow_dns && p.domains.is_some() {
        return Err(ValidationError::ContradictoryNetwork {
            why: "DNS is allowed beside the network by name, whose proxy resolves names",
        });
    }
    // The same roots resolution judges hidden paths against.
    let mut roots = grants::writable_roots(p);
    roots.insert(0, p.workspace.clone());
    for hidden in &p.hidden {
        if let Some(root) = roots.iter().find(|root| root.starts_with(hidden)) {
            return Err(ValidationError::HiddenCoversRoot {
                hidden: hidden.clone(),
                root: root.clone(),
            });
        }
    }
    if let Some(d) = &p.domains {
        let bad = |why: String| Err(ValidationError::BadDomains { why });
        if let Err(e) = d.rules.check() {
            return bad(e.to_string());
        }
        if d.proxy_port == 0 {
            return bad("the proxy's port is 0".into());
        }
        if p.network != crate::policy::Network::Deny || !p.allow_tcp_connect.is_empty() {
            return bad("the network is not denied around the proxy".into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode::Mode;
    use crate::policy::Network;
    use crate::roots::{FileId, RootId};
    use std::os::unix::ffi::OsStringExt;
    use std::path::Path;

    fn sample() -> LaunchRequest {
        LaunchRequest {
            argv: vec![
                "bash".into(),
                "-c".into(),
                OsString::from_vec(b"echo \xff".to_vec()),
            ],
            cwd: "/work/ws".into(),
            env: vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("EMPTY".into(), "".into()),
            ],
            policy: Policy {
                writable_roots: vec![
                    "/srv/a".into(),
                    PathBuf::from(OsString::from_vec(b"/srv/\xfe".to_vec())),
                ],
                tmpdir: Some("/var/tmp".into()),
                network: Network::Deny,
                allow_tcp_connect: vec![443],
                allow_unix_sockets: true,
                keep_fds: vec![3, 9],
                root_ids: [
                    PathBuf::from("/work/ws"),
                    "/tmp".into(),
                    "/var/tmp".into(),
                    "/srv/a".into(),
                    PathBuf::from(OsString::from_vec(b"/srv/\xfe".to_vec())),
                ]
                .into_iter()
                .zip(1..)
                .map(|(path, ino)| RootId {
                    path,
                    id: FileId {
                        dev: 8,
                        ino,
                        birth: Some((1_700_000_000, ino as u32)),
                    },
                })
                .collect(),
                tmpdir_refused: Some("$TMPDIR / is not granted".into()),
                hidden: vec!["/home/u/.ssh".into()],
                keep_capabilities: vec![
                    crate::capability::Capability::Chown,
                    crate::capability::Capability::DacOverride,
                ],
                ..Policy::for_tests(Mode::WorkspaceWrite, "/work/ws")
            },
            promised: KernelFacts {
                landlock_abi: 7,
                seccomp: true,
                namespaces: true,
                supervisor: false,
                supervisor_writes: false,
            },
            status_path: Some("/run/user/0/stockade/req-1/status".into()),
            inherit: Inherit {
                cwd: true,
                env: Some(crate::inherit::InheritEnv {
                    filter: crate::inherit::EnvFilter::Rule,
                    clear: false,
                    keep: vec!["API_TOKEN".into()],
                    set: vec![("TERM".into(), "dumb".into())],
                }),
            },
            session: RunnerSession::New,
            binding: Binding {
                executable: ExecBinding::Found(crate::binding::Executable {
                    path: PathBuf::from(OsString::from_vec(b"/usr/bin/\xfebash".to_vec())),
                    id: crate::binding::ExecId {
                        dev: 8,
                        ino: 77,
                        size: 1_400_000,
                        modified: crate::binding::Timestamp { sec: 1, nsec: 2 },
                        changed: crate::binding::Timestamp { sec: 3, nsec: 4 },
                    },
                    sha256: Some([9; 32]),
                }),
                cwd: CwdBinding::Inherited,
            },
            confined_in: Some(444_913),
            audit_tag: Some("stk-0123456789a".into()),
        }
    }

    #[test]
    fn round_trip_keeps_every_byte() {
        let req = sample();
        let bytes = req.encode().unwrap();
        assert_eq!(&bytes[..8], &MAGIC);
        assert_eq!(LaunchRequest::decode(&bytes).unwrap(), req);
        req.validate().unwrap();
    }

    #[test]
    fn every_truncation_is_reported_as_truncated() {
        let bytes = sample().encode().unwrap();
        for len in 0..bytes.len() {
            let err = LaunchRequest::decode(&bytes[..len]).unwrap_err();
            assert!(
                matches!(err, DecodeError::Truncated { .. }),
                "len {len}: {err:?}"
            );
        }
    }

    #[test]
    fn oversized_request_is_refused_when_encoding() {
        let mut req = sample();
        req.env
            .push(("BIG".into(), "x".repeat(MAX_REQUEST_BYTES).into()));
        assert!(matches!(req.encode(), Err(EncodeError::TooLarge { .. })));
    }

    #[test]
    fn trailing_bytes_are_refused() {
        let mut bytes = sample().encode().unwrap();
        bytes.push(0);
        assert_eq!(
            LaunchRequest::decode(&bytes),
            Err(DecodeError::TrailingBytes { extra: 1 })
        );
    }

    #[test]
    fn bad_magic_and_version_are_distinct() {
        let mut bytes = sample().encode().unwrap();
        bytes[0] = b'X';
        assert_eq!(LaunchRequest::decode(&bytes), Err(DecodeError::BadMagic));
        assert_eq!(
            LaunchRequest::decode(b"#!/bin/sh\n"),
            Err(DecodeError::BadMagic)
        );
        let mut bytes = sample().encode().unwrap();
        bytes[8] = 9;
        assert_eq!(
            LaunchRequest::decode(&bytes),
            Err(DecodeError::UnsupportedVersion { found: 9 })
        );
    }

    #[test]
    fn oversized_is_refused_before_parsing() {
        let bytes = vec![0u8; MAX_REQUEST_BYTES + 1];
        assert_eq!(
            LaunchRequest::decode(&bytes),
            Err(DecodeError::TooLarge {
                len: MAX_REQUEST_BYTES + 1
            })
        );
    }

    #[test]
    fn corrupt_body_is_named() {
        let mut bytes = sample().encode().unwrap();
        // The mode is encoded as a variant index; an impossible one is corrupt.
        let body = HEADER_LEN;
        for b in &mut bytes[body..] {
            *b = 0xff;
        }
        assert!(matches!(
            LaunchRequest::decode(&bytes),
            Err(DecodeError::Corrupt { .. })
        ));
    }

    #[test]
    fn short_body_inside_announced_length_is_corrupt() {
        let req = sample();
        let mut bytes = req.encode().unwrap();
        // Announce one byte more and append it: the body decodes before its end.
        let len = u32::from_le_bytes(bytes[10..14].try_into().unwrap()) + 1;
        bytes[10..14].copy_from_slice(&len.to_le_bytes());
        bytes.push(0);
        assert!(matches!(
            LaunchRequest::decode(&bytes),
            Err(DecodeError::Corrupt { .. })
        ));
    }

    #[test]
    fn each_validation_error_is_its_own() {
        let check = |f: &dyn Fn(&mut LaunchRequest), want: ValidationError| {
            let mut r = sample();
            f(&mut r);
            assert_eq!(r.validate(), Err(want));
        };
        check(&|r| r.argv.clear(), ValidationError::EmptyArgv);
        // A tag the runner would set as its comm: only the launcher's own form.
        check(
            &|r| r.audit_tag = Some("stk-0123456789\n".into()),
            ValidationError::BadAuditTag {
                tag: "stk-0123456789\n".into(),
            },
        );
        check(
            &|r| r.argv[1] = OsString::from_vec(b"a\0b".to_vec()),
            ValidationError::NulInArgv { index: 1 },
        );
        check(
            &|r| r.cwd = "rel".into(),
            ValidationError::RelativeCwd { cwd: "rel".into() },
        );
        check(
            &|r| r.cwd = PathBuf::from(OsString::from_vec(b"/a\0".to_vec())),
            ValidationError::NulInCwd,
        );
        check(
            &|r| r.env.push(("A=B".into(), "c".into())),
            ValidationError::EqualsInEnvName { name: "A=B".into() },
        );
        check(
            &|r| {
                r.env
                    .push(("A".into(), OsString::from_vec(b"x\0".to_vec())))
            },
            ValidationError::NulInEnv { name: "A".into() },
        );
        check(
            &|r| r.env.push(("".into(), "x".into())),
            ValidationError::EmptyEnvName { index: 2 },
        );
        check(
            &|r| {
                let set = &mut r.inherit.env.as_mut().unwrap().set;
                set.push(("B=C".into(), "x".into()));
            },
            ValidationError::EqualsInEnvName { name: "B=C".into() },
        );
        check(
            &|r| r.policy.writable_roots.push("rel".into()),
            ValidationError::RelativePolicyPath { path: "rel".into() },
        );
        for dotted in ["/a/../b", "/a/./b", "/a/..", "/srv/a/."] {
            check(
                &|r| r.policy.hidden.push(dotted.into()),
                ValidationError::NonCanonicalPolicyPath {
                    path: dotted.into(),
                },
            );
        }
        for outside in ["/etc/passwd", "/dev", "/devices/x"] {
            check(
                &|r| r.policy.devices.push(outside.into()),
                ValidationError::DeviceOutsideDev {
                    path: outside.into(),
                },
            );
        }
        check(
            &|r| r.policy.devices.push("/dev/../etc/shadow".into()),
            ValidationError::NonCanonicalPolicyPath {
                path: "/dev/../etc/shadow".into(),
            },
        );
        check(
            &|r| r.policy.hidden.push("/".into()),
            ValidationError::HiddenCoversRoot {
                hidden: "/".into(),
                root: "/work/ws".into(),
            },
        );
        check(
            &|r| r.policy.hidden.push("/srv/a".into()),
            ValidationError::HiddenCoversRoot {
                hidden: "/srv/a".into(),
                root: "/srv/a".into(),
            },
        );
        check(
            &|r| {
                r.policy.network = crate::policy::Network::Allow;
                r.policy.allow_tcp_connect = vec![443];
            },
            ValidationError::ContradictoryNetwork {
                why: "TCP ports are listed while the whole network is allowed",
            },
        );
        check(
            &|r| {
                r.policy.network = crate::policy::Network::Allow;
                r.policy.allow_tcp_connect.clear();
                r.policy.allow_dns = true;
            },
            ValidationError::ContradictoryNetwork {
                why: "DNS is allowed on its own while the whole network is allowed",
            },
        );
        check(
            &|r| r.policy.workspace = "/srv/../etc".into(),
            ValidationError::NonCanonicalPolicyPath {
                path: "/srv/../etc".into(),
            },
        );
        check(
            &|r| {
                r.policy
                    .root_ids
                    .retain(|id| id.path != Path::new("/srv/a"))
            },
            ValidationError::UnidentifiedRoot {
                path: "/srv/a".into(),
            },
        );
        check(
            &|r| r.policy.keep_fds.push(1),
            ValidationError::BadKeepFd { fd: 1 },
        );
        check(
            &|r| r.policy.allow_tcp_connect.push(0),
            ValidationError::TcpPortZero,
        );
        check(
            &|r| {
                r.policy.network = crate::policy::Network::Deny;
                r.policy.domains = Some(crate::domains::DomainPolicy {
                    rules: crate::domains::DomainRules {
                        allow: vec![
                            crate::domains::HostRule::parse(
                                "a.test",
                                crate::domains::RuleKind::Allow,
                            )
                            .unwrap(),
                        ],
                        ..Default::default()
                    },
                    proxy_port: 0,
                })
            },
            ValidationError::BadDomains {
                why: "the proxy's port is 0".into(),
            },
        );
        check(
            &|r| r.status_path = Some("status".into()),
            ValidationError::RelativeStatusPath {
                path: "status".into(),
            },
        );
        check(
            &|r| r.status_path = Some(PathBuf::from(OsString::from_vec(b"/s\0".to_vec()))),
            ValidationError::NulInStatusPath,
        );
        check(
            &|r| {
                if let ExecBinding::Found(e) = &mut r.binding.executable {
                    e.path = "bash".into();
                }
            },
            ValidationError::BadBindingPath {
                path: "bash".into(),
            },
        );
        let dir = crate::roots::FileId {
            dev: 1,
            ino: 2,
            birth: None,
        };
        // Inherited, yet bound; then not inherited, bound elsewhere; then unbound.
        check(
            &|r| {
                r.binding.cwd = CwdBinding::Bound {
                    path: r.cwd.clone(),
                    id: dir,
                }
            },
            ValidationError::CwdBindingMismatch,
        );
        check(
            &|r| {
                r.inherit.cwd = false;
                r.binding.cwd = CwdBinding::Bound {
                    path: "/elsewhere".into(),
                    id: dir,
                }
            },
            ValidationError::CwdBindingMismatch,
        );
        check(
            &|r| r.inherit.cwd = false,
            ValidationError::CwdBindingMismatch,
        );
    }

    #[test]
    fn env_var_takes_the_last_entry() {
        let mut r = sample();
        r.env.push(("PATH".into(), "/opt/bin".into()));
        assert_eq!(r.env_var("PATH").unwrap(), "/opt/bin");
        assert_eq!(r.env_var("NOPE"), None);
    }
}
