//! Deciding which refusals a confined command met were stockade's, and naming each one.
//!
//! Where no kernel record of a refusal is at hand, the best honest evidence is the
//! command's own error line: it names the path it was refused (`touch: cannot touch
//! '/etc/x': Permission denied`). A refusal there is stockade's only when both hold:
//! - the policy refuses that access to that path ([`Scope`]), and
//! - Unix permissions for the invoking user would allow it (the launcher asks the kernel,
//!   outside the sandbox: [`UnixCheck`]).
//!
//! `ls /root` as an ordinary user fails the second test (the same error without
//! stockade), so it is not a denial; a write outside the roots as root passes both. A line
//! naming no path, or a path stockade does not refuse, is no record at all: `denied` is
//! then false, whatever words the line holds. The network kinds come from the proxy's
//! record and from the resolver's words under the default deny.

use crate::denial_record::{DenialRecord, Kind, Source};
use crate::domains::Refusal;
use crate::mode::Mode;
use crate::network_denials::{DenialLog, reason_token};
use crate::policy::{Network, Policy};
use serde::{Deserialize, Serialize};
use std::path::{Component, Path, PathBuf};

/// The most records attributed from one command's stderr.
pub const MAX_RECORDS: usize = 64;

/// The scope's file in the command's private directory (written by `confine` as JSON,
/// 0600, read by `stockade classify` and `stockade run`).
pub const SCOPE_FILE: &str = "scope";

/// The most bytes of a scope file a reader looks at.
pub const MAX_SCOPE_BYTES: usize = 1024 * 1024;

/// What the policy of one command refuses, as attribution needs it. `confine` keeps it
/// beside the status record so `stockade classify` can attribute too.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Scope {
    pub mode: Mode,
    /// The command's working directory: relative paths in error lines start there.
    #[serde(with = "crate::raw")]
    pub cwd: PathBuf,
    /// The directories the command's shell script changes into (`cd DIR`), in order: a
    /// relative path in a line may start in one of them instead
    /// ([`crate::script_directories`]). Set by the launcher beside [`Scope::of`].
    #[serde(with = "crate::raw", default)]
    pub script_dirs: Vec<PathBuf>,
    #[serde(with = "crate::raw")]
    pub workspace: PathBuf,
    /// Directories everything may be written beneath.
    #[serde(with = "crate::raw")]
    pub writable: Vec<PathBuf>,
    /// Single files that may be written (`/dev/null`).
    #[serde(with = "crate::raw")]
    pub writable_files: Vec<PathBuf>,
    #[serde(with = "crate::raw")]
    pub hidden: Vec<PathBuf>,
    /// Whether only the standard devices may be read ([`crate::devices`]).
    #[serde(default)]
    pub devices_hidden: bool,
    /// The devices the command may read and write besides (`--allow-device`).
    #[serde(with = "crate::raw", default)]
    pub devices_allowed: Vec<PathBuf>,
    /// The invoking user's homes: a directory that is one (or holds one) is a broad
    /// root, which `--writable` grants only beside `--allow-broad-root`.
    #[serde(with = "crate::raw", default)]
    pub homes: Vec<PathBuf>,
    /// The protected paths, and whether the caller named them (`--protect`).
    #[serde(with = "crate::raw")]
    pub protected: Vec<PathBuf>,
    pub protect_explicit: bool,
    pub network: Network,
    /// TCP ports the command may connect to while the network is denied.
    #[serde(default)]
    pub tcp_connect: Vec<u16>,
    /// Whether unix sockets may be made (`--allow-unix-sockets`).
    #[serde(default)]
    pub unix_sockets: bool,
    /// Whether the network is reached by name through the filtering proxy (its own
    /// record names what it refused).
    pub by_name: bool,
    /// Whether the namespace stage ran: its read-only mounts hold the protected paths
    /// (without it nothing does, and "read-only file system" is the host's word).
    #[serde(default)]
    pub staged: bool,
    /// Whether the runner's metadata supervisor held modes, owners and times (no stage,
    /// workspace-write; under the stage, where the runner starts it for the inherited
    /// descriptors the mounts do not hold): it refuses a change outside the writable roots
    /// or on a protected path with `Operation not permitted`, the word Unix uses too, so
    /// only a metadata line naming such a path is its refusal.
    #[serde(default)]
    pub supervised: bool,
    /// Whether that supervisor also held the protected paths' contents and names (no
    /// stage; it performs every write of a name): it refuses with the stage's words
    /// (`Read-only file system`, `Device or resource busy`), which name a refusal of
    /// ours only on a protected path (elsewhere they are the host's). Set by the
    /// launcher beside [`Scope::of`].
    #[serde(default)]
    pub protect_held: bool,
    /// Whether the command had a network namespace of its own (the stage's, loopback
    /// only): a failure on its own loopback is the command's, and "network is
    /// unreachable" anywhere else is the sandbox's refusal.
    #[serde(default)]
    pub own_network: bool,
}

impl Scope {
    /// The scope of a resolved policy, for a command started in `cwd`, under the
    /// namespace stage when `staged`, and under the metadata supervisor when
    /// `supervised` (beside the stage, or without it).
    pub fn of(policy: &Policy, cwd: &Path, staged: bool, supervised: bool) -> Scope {
        use crate::grants::{Access, grants};
        let all = grants(policy);
        let of = |access: Access| -> Vec<PathBuf> {
            all.iter()
                .filter(|g| g.access == access)
                .map(|g| g.path.clone())
                .collect()
        };
        Scope {
            mode: policy.mode(),
            cwd: cwd.to_path_buf(),
            script_dirs: Vec::new(),
            workspace: policy.workspace().to_path_buf(),
            writable: of(Access::Full),
            writable_files: of(Access::ReadWriteFile),
            hidden: policy.hidden().to_vec(),
            devices_hidden: policy.hides_devices(),
            devices_allowed: policy.allowed_devices().to_vec(),
            homes: Vec::new(),
            // Without the stage nothing holds their contents: a write there is not
            // refused; the supervisor still holds their metadata.
            protected: if staged || supervised {
                policy.protected().iter().map(|p| p.path.clone()).collect()
            } else {
                Vec::new()
            },
            protect_explicit: policy.protect_explicit(),
            network: policy.network(),
            tcp_connect: policy.allow_tcp_connect().to_vec(),
            unix_sockets: policy.allow_unix_sockets(),
            by_name: policy.domains().is_some(),
            staged,
            supervised,
            protect_held: false,
            own_network: staged && policy.own_network(),
        }
    }

    /// The same scope, knowing the invoking user's `homes` (for the grants it names).
    pub fn with_homes(mut self, homes: &[PathBuf]) -> Scope {
        self.homes = homes.to_vec();
        self
    }

    /// The refusal words this scope's layers give: EACCES always; a read-only mount and
    /// a busy mount point only under the stage (without it they are the host's).
    fn refusal_words(&self) -> &'static [&'static str] {
        if self.staged || self.protect_held {
            &FILE_REFUSALS
        } else {
            &FILE_REFUSALS[..1]
        }
    }

    /// The refusal words a line holds: one of [`Scope::refusal_words`], or the
    /// supervisor's `Operation not permitted` on a line about a metadata change.
    fn refusal_in(&self, lower: &str) -> Option<&'static str> {
        let words = self.refusal_words().iter().find(|w| lower.contains(*w));
        words.copied().or_else(|| {
            (self.supervised
                && lower.contains(NOT_PERMITTED)
                && METADATA_VERBS.iter().any(|v| lower.contains(v)))
            .then_some(NOT_PERMITTED)
        })
    }
}

/// The words of EPERM: the metadata supervisor's refusal, and Unix's for a change only
/// a file's owner may make.
const NOT_PERMITTED: &str = "operation not permitted";

/// The access an error line is about.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    /// Changing a file's mode, owner or times: Unix allows its owner (and root).
    Metadata,
}

/// Whether Unix permissions (and the host's mounts) let the invoking user make `access`
/// to `path`, asked outside the sandbox. For a path that does not exist, a write means
/// creating it: the question is then about the nearest existing directory above it.
pub trait UnixCheck {
    fn allows(&self, path: &Path, access: Access) -> bool;

    /// `path` with its symbolic links followed, as the host sees it (the policy's roots
    /// are canonical: a link in `/tmp` may lead out of every root). As given by default.
    fn resolve(&self, path: &Path) -> PathBuf {
        path.to_path_buf()
    }

    /// Whether the invoking user holds capability number `capability` (linux/capability.h)
    /// outside the sandbox: then an operation only it allows was refused by stockade
    /// ([`crate::privileged_ops`]). Not held by default.
    fn holds(&self, _capability: u32) -> bool {
        false
    }

    /// Whether the invoking user may trace its own children outside the sandbox (Yama's
    /// `ptrace_scope` at most 1, or no Yama). Not by default.
    fn may_trace_children(&self) -> bool {
        false
    }
}

/// The denial records for one command's stderr, from its error lines (`policy-check`
/// evidence). Each distinct (kind, path) once, in the order the lines came.
pub fn from_stderr(scope: &Scope, stderr: &str, unix: &dyn UnixCheck) -> Vec<DenialRecord> {
    let mut out: Vec<DenialRecord> = Vec::new();
    if !scope.mode.is_confined() {
        return out;
    }
    // The last few lines with text, for what a pathless refusal was about: bounded, as
    // stderr may be millions of line breaks.
    let mut before: Vec<&str> = Vec::with_capacity(CONTEXT_LINES + 1);
    for line in stderr.split('\n') {
        // A line about an operation only a capability allows is judged as that alone.
        let record = unix_socket_refusal(scope, &before, line, unix)
            .or_else(|| network_refusal(scope, line))
            .or_else(|| {
                crate::privileged_ops::judge(scope, &before, line, unix).unwrap_or_else(|| {
                    file_refusal(scope, &before, line, unix)
                        .or_else(|| unresolved_host(scope, line))
                })
            });
        if !line.trim().is_empty() {
            before.push(line);
            if before.len() > CONTEXT_LINES {
                before.remove(0);
            }
        }
        // Each distinct refusal once; lines naming nothing (strace's several about one
        // refused ptrace) by the rule that refused them.
        let same = |o: &DenialRecord, r: &DenialRecord| {
            o.kind == r.kind
                && (o.target() == r.target()
                    || (o.kind == Kind::Process
                        && o.path.is_none()
                        && r.path.is_none()
                        && o.rule == r.rule))
        };
        if let Some(r) = record
            && !out.iter().any(|o| same(o, &r))
        {
            out.push(r);
            if out.len() == MAX_RECORDS {
                break;
            }
        }
    }
    // Bash says `connect: ...` before the line naming `/dev/tcp/HOST/PORT`: one refusal.
    if out
        .iter()
        .any(|r| r.kind == Kind::NetworkAddress && r.host.is_some())
    {
        out.retain(|r| r.kind != Kind::NetworkAddress || r.host.is_some());
    }
    out
}

/// The records of the proxy's refusals (`proxy` evidence).
pub fn from_proxy(log: &DenialLog) -> Vec<DenialRecord> {
    log.denied
        .iter()
        .map(|d| {
            let (kind, grant) = match d.reason {
                Refusal::NonPublicAddress(_) | Refusal::IpLiteral => {
                    (Kind::NetworkAddress, "--allow-domain ADDRESS".to_string())
                }
                Refusal::MulticastDns => {
                    (Kind::NetworkName, format!("--resolve {}=ADDRESS", d.host))
                }
                Refusal::PortNotAllowed => (
                    Kind::NetworkName,
                    format!("--allow-domain {}:{}", d.host, d.port),
                ),
                Refusal::NotAllowed | Refusal::DeniedByRule => {
                    (Kind::NetworkName, format!("--allow-domain {}", d.host))
                }
            };
            DenialRecord {
                kind,
                path: None,
                host: Some(d.host.clone()),
                port: Some(d.port),
                rule: format!(
                    "network by name: {} ({})",
                    d.reason.describe(),
                    reason_token(d.reason)
                ),
                grant: Some(grant),
                alternative: Some("--network allow".into()),
                line: None,
                evidence: Source::Proxy,
            }
        })
        .collect()
}

/// The words of a busy mount point (renaming onto a protected path's bind).
const DEVICE_OR_RESOURCE_BUSY: &str = "device or resource busy";

/// The words of a refusal by the filesystem: EACCES, a read-only mount (the namespace
/// stage's), or a busy mount point. EACCES first: without the stage it is the only one.
const FILE_REFUSALS: [&str; 3] = [
    "permission denied",
    "read-only file system",
    DEVICE_OR_RESOURCE_BUSY,
];

/// Verbs that say an error line is about writing (creating, changing, removing).
const WRITE_VERBS: [&str; 15] = [
    "cannot create",
    "cannot touch",
    "cannot remove",
    "cannot write",
    "cannot move",
    "cannot make",
    "cannot overwrite",
    "failed to create",
    "could not create",
    "could not lock",
    "could not write",
    "unable to create",
    "unable to write",
    "unable to update",
    "can't create",
];

/// Words that say an error line is about changing a file's metadata.
const METADATA_VERBS: [&str; 4] = [
    "changing permissions",
    "changing ownership",
    "changing group",
    "setting times",
];

/// Verbs that say an error line is about reading.
const READ_VERBS: [&str; 6] = [
    "cannot open directory",
    "cannot access",
    "cannot read",
    "cannot stat",
    "can't open file",
    "could not read",
];

/// Programs that only read the files they name (their error line says which).
const READERS: [&str; 16] = [
    "cat",
    "head",
    "tail",
    "less",
    "more",
    "grep",
    "ls",
    "wc",
    "sort",
    "diff",
    "find",
    "du",
    "stat",
    "od",
    "md5sum",
    "sha256sum",
];

/// Whether the line is from a program that only reads (`cat: PATH: ...`).
fn reads_only(lower: &str) -> bool {
    let program = lower.split(": ").next().unwrap_or("");
    READERS.contains(&program)
}

/// One error line's refusal of a file access, when it is the policy's: the path it
/// names checked against the policy and Unix permissions, or, when it names none, the
/// refusal as far as the lines `before` it say (see [`pathless`]).
fn file_refusal(
    scope: &Scope,
    before: &[&str],
    line: &str,
    unix: &dyn UnixCheck,
) -> Option<DenialRecord> {
    let lower = line.to_lowercase();
    let words = scope.refusal_in(&lower)?;
    // `script: failed to create pseudo-terminal`: the words name no file.
    if TERMINAL_WORDS.iter().any(|w| lower.contains(w)) {
        return Some(terminal(scope));
    }
    let Some(path) = named_path(line, words) else {
        // EPERM naming no path is Unix's as often as the supervisor's: no record.
        if words == NOT_PERMITTED {
            return None;
        }
        return pathless(scope, before, line, words);
    };
    let hint = if METADATA_VERBS.iter().any(|v| lower.contains(v)) {
        Some(Access::Metadata)
    } else if words != "permission denied" || WRITE_VERBS.iter().any(|v| lower.contains(v)) {
        Some(Access::Write)
    } else if READ_VERBS.iter().any(|v| lower.contains(v)) || reads_only(&lower) {
        Some(Access::Read)
    } else {
        None
    };
    let accesses: &[Access] = match hint {
        Some(Access::Write) => &[Access::Write],
        Some(Access::Read) => &[Access::Read],
        Some(Access::Metadata) => &[Access::Metadata],
        None => &[Access::Read, Access::Write],
    };
    let path = shared_memory(before, path);
    // A relative path starts where the command started or, when its script changed
    // directory, in one of those: the first where the policy refused it and Unix would
    // not have (from the start, a path the policy allows was not refused there).
    let starts = if path.is_absolute() {
        &[][..]
    } else {
        &scope.script_dirs[..]
    };
    std::iter::once(&scope.cwd).chain(starts).find_map(|start| {
        let path = unix.resolve(&absolute(start, &path));
        accesses
            .iter()
            .find_map(|&access| refusal_at(scope, &path, access, words, unix))
    })
}

/// The record of `access` to `path` refused with `words`, when the policy refused it and
/// Unix permissions would have allowed it.
fn refusal_at(
    scope: &Scope,
    path: &Path,
    access: Access,
    words: &str,
    unix: &dyn UnixCheck,
) -> Option<DenialRecord> {
    let (kind, rule, grant) = refused(scope, path, access)?;
    // Without the stage a read-only mount or a busy mount point is the host's, but on a
    // protected path the supervisor's.
    if !scope.staged && FILE_REFUSALS[1..].contains(&words) && kind != Kind::ProtectedPath {
        return None;
    }
    // Refused anyway without stockade: not a denial.
    if !unix.allows(path, access) {
        return None;
    }
    Some(DenialRecord {
        kind,
        path: Some(path.display().to_string()),
        host: None,
        port: None,
        rule,
        grant,
        alternative: None,
        line: None,
        evidence: Source::PolicyCheck,
    })
}

/// Words that say the lines before are about POSIX shared memory or semaphores.
const SHARED_MEMORY_WORDS: [&str; 4] = ["semlock", "shm_open", "shared_memory", "/dev/shm"];

/// `path` as the kernel sees it: a POSIX shared memory name (`shm_open("/psm_x")`, which
/// Python's error line names as `'/psm_x'`) lies in `/dev/shm`.
fn shared_memory(before: &[&str], path: PathBuf) -> PathBuf {
    let single = path.is_absolute() && path.components().count() == 2;
    let said = before.iter().any(|l| {
        let l = l.to_lowercase();
        SHARED_MEMORY_WORDS.iter().any(|w| l.contains(w))
    });
    match path.file_name() {
        Some(name) if single && said => Path::new("/dev/shm").join(name),
        _ => path,
    }
}

/// Words that say a line is about making a terminal (`/dev/ptmx`).
const TERMINAL_WORDS: [&str; 4] = ["pseudo-terminal", "openpty", "forkpty", "/dev/ptmx"];

/// The refusal of a new terminal: opening `/dev/ptmx`, the host's without the stage (the
/// stage gives the command a devpts instance of its own).
fn terminal(scope: &Scope) -> DenialRecord {
    DenialRecord {
        kind: Kind::Device,
        path: Some("/dev/ptmx".into()),
        host: None,
        port: None,
        rule: format!(
            "{} mode: the host's terminals are not the command's (the namespace stage gives it a devpts of its own)",
            scope.mode
        ),
        grant: (!scope.staged).then(|| "the namespace stage, without --no-stage".to_string()),
        alternative: None,
        line: None,
        evidence: Source::PolicyCheck,
    }
}

/// How many lines before a pathless refusal say what it was about (a traceback's
/// last frames).
const CONTEXT_LINES: usize = 4;

/// How much of the end of each of those lines is read.
const CONTEXT_CHARS: usize = 400;

/// A refusal whose line names no path: `PROGRAM: ...: Permission denied` or Python's
/// `PermissionError: [Errno 13] Permission denied`, the words ending the line as the C
/// library's message does. What the lines `before` it name (a socket, shared memory, a
/// terminal) gives its kind; else it is reported `unattributed`, with the line: nothing
/// names a path to check against Unix permissions, and the policy's layers give that
/// errno where Unix gives `Operation not permitted` (`kill 1`, `chown`, raw sockets). A
/// line of the words alone (`Permission denied`, or ssh's `Permission denied
/// (publickey)`) is no refusal of ours.
fn pathless(scope: &Scope, before: &[&str], line: &str, words: &str) -> Option<DenialRecord> {
    // A rename onto a busy mount point always names what it renamed.
    if words == DEVICE_OR_RESOURCE_BUSY {
        return None;
    }
    let lower = line.trim_end().to_lowercase();
    let head = lower.strip_suffix(words)?;
    if !(head.ends_with(": ") || head.ends_with("] ")) || head.trim().len() < 2 {
        return None;
    }
    // The end of each line is where a traceback names the call.
    let context: String = before
        .iter()
        .flat_map(|l| {
            let from = l
                .char_indices()
                .rev()
                .nth(CONTEXT_CHARS)
                .map_or(0, |(i, _)| i);
            [&l[from..], "\n"]
        })
        .collect::<String>()
        .to_lowercase();
    let said = |words: &[&str]| {
        words
            .iter()
            .any(|w| context.contains(w) || lower.contains(w))
    };
    if said(&TERMINAL_WORDS) || said(&["pty.", "pty("]) {
        return Some(terminal(scope));
    }
    if said(&SHARED_MEMORY_WORDS)
        && let Some((kind, rule, grant)) = refused(scope, Path::new("/dev/shm"), Access::Write)
    {
        return Some(file_record(kind, "/dev/shm", rule, grant));
    }
    if said(&["socket"]) {
        return Some(socket(scope));
    }
    Some(DenialRecord {
        kind: Kind::Unattributed,
        path: None,
        host: None,
        port: None,
        rule: format!(
            "{} mode: refused where the command's line names no path to check",
            scope.mode
        ),
        grant: None,
        alternative: None,
        line: Some(line.trim().to_string()),
        evidence: Source::PolicyCheck,
    })
}

/// A record of a refused file access at `path`.
fn file_record(kind: Kind, path: &str, rule: String, grant: Option<String>) -> DenialRecord {
    DenialRecord {
        kind,
        path: Some(path.to_string()),
        host: None,
        port: None,
        rule,
        grant,
        alternative: None,
        line: None,
        evidence: Source::PolicyCheck,
    }
}

/// A socket the policy refused: any internet socket while the network is denied on
/// the host's network, else a family it never allows (raw, packet, netlink).
fn socket(scope: &Scope) -> DenialRecord {
    let denied_here = scope.network == Network::Deny && !scope.own_network;
    DenialRecord {
        kind: Kind::Socket,
        path: None,
        host: None,
        port: None,
        rule: if denied_here {
            format!("{} mode: the network is denied", scope.mode)
        } else {
            format!(
                "{} mode: raw, packet, netlink and MPTCP sockets are refused",
                scope.mode
            )
        },
        grant: denied_here.then(|| "--network allow".to_string()),
        alternative: None,
        line: None,
        evidence: Source::PolicyCheck,
    }
}

/// Words that say a line, or the lines before it, are about a unix socket.
const UNIX_SOCKET_WORDS: [&str; 5] = [
    "af_unix",
    "dial unix ",
    "unix://",
    "unix socket",
    "unix connect",
];

/// A unix socket the filter refused to make (`--allow-unix-sockets` not given): Go's
/// `dial unix /var/run/docker.sock: socket: permission denied`, or a Python traceback
/// whose source line makes an `AF_UNIX` socket. Unix never refuses making one, so it is
/// the sandbox's refusal, unless the socket the line names is one the invoking user may
/// not connect to anyway (its file's mode: the grant would not help).
fn unix_socket_refusal(
    scope: &Scope,
    before: &[&str],
    line: &str,
    unix: &dyn UnixCheck,
) -> Option<DenialRecord> {
    let lower = line.to_lowercase();
    if scope.unix_sockets || !scope.mode.is_confined() || !lower.contains("permission denied") {
        return None;
    }
    let about = |l: &str| {
        let l = l.to_lowercase();
        UNIX_SOCKET_WORDS.iter().any(|w| l.contains(w))
    };
    // The lines before count only for a line that names nothing itself (Python's bare
    // `PermissionError`): a path named is that path's refusal.
    let pathless = named_path(line, "permission denied").is_none();
    let said = about(line) || (pathless && before.iter().any(|l| about(l)));
    if !said {
        return None;
    }
    let path = socket_path(line);
    if let Some(p) = &path
        && !unix.allows(p, Access::Write)
    {
        return None;
    }
    Some(DenialRecord {
        kind: Kind::Socket,
        path: path.map(|p| p.display().to_string()),
        host: None,
        port: None,
        rule: format!(
            "{} mode: unix sockets are refused (a daemon's socket does what its client asks, outside the sandbox)",
            scope.mode
        ),
        grant: Some("--allow-unix-sockets".into()),
        alternative: None,
        line: Some(line.trim().to_string()),
        evidence: Source::PolicyCheck,
    })
}

/// The socket a line names after `dial unix ` or `unix://`, when absolute.
fn socket_path(line: &str) -> Option<PathBuf> {
    let lower = line.to_lowercase();
    ["dial unix ", "unix://"].iter().find_map(|marker| {
        let at = lower.find(marker)? + marker.len();
        let rest = line.get(at..)?;
        let end = rest
            .find(|c: char| c == ':' || c.is_whitespace() || c == '"')
            .unwrap_or(rest.len());
        let path = PathBuf::from(&rest[..end]);
        path.is_absolute().then_some(path)
    })
}

/// The standard devices as a rule names them.
const STANDARD_DEVICES_IN_WORDS: &str =
    "null, zero, full, random, urandom, tty, ptmx, shm and mqueue";

/// Whether the policy refuses `access` to `path`: the kind, the rule in words and the
/// narrowest grant.
pub fn refused(
    scope: &Scope,
    path: &Path,
    access: Access,
) -> Option<(Kind, String, Option<String>)> {
    let mode = scope.mode;
    if let Some(h) = scope.hidden.iter().find(|h| path.starts_with(h)) {
        return Some((
            Kind::HiddenPath,
            format!("{mode} mode: {} is hidden", h.display()),
            Some(format!(
                "--no-default-hide (or leaving out --hide {})",
                h.display()
            )),
        ));
    }
    // Allowed by name: read and written as `/dev/null` is.
    if scope.devices_allowed.iter().any(|d| d == path) {
        return None;
    }
    // Reading only: writing a device but `/dev/null` is refused by the write rule below,
    // which no hiding option changes.
    if let Some(entry) = (scope.devices_hidden && access == Access::Read)
        .then(|| crate::devices::beyond_standard(path))
        .flatten()
    {
        return Some((
            Kind::HiddenPath,
            format!(
                "{mode} mode: /dev/{} is not a standard device (only {} may be read)",
                entry.to_string_lossy(),
                STANDARD_DEVICES_IN_WORDS
            ),
            // A directory of devices (`/dev/input`) is given back only with the rest.
            Some(device_grant(path).unwrap_or_else(|| "--no-default-hide".to_string())),
        ));
    }
    if let Some(pid) = other_process(path) {
        return Some((
            Kind::Process,
            format!("{mode} mode: process {pid} is outside the sandbox"),
            None,
        ));
    }
    if access == Access::Read {
        return None;
    }
    // Without the stage only the supervisor holds them, and only their metadata.
    let held = scope.staged || scope.protect_held || access == Access::Metadata;
    if let Some(p) = scope.protected.iter().find(|p| held && path.starts_with(p)) {
        let grant = if scope.protect_explicit {
            format!("leaving out --protect {}", p.display())
        } else {
            "--no-default-protect".to_string()
        };
        let what = if scope.staged || (scope.protect_held && access != Access::Metadata) {
            "(read-only)"
        } else {
            "(its mode, owner and times do not change)"
        };
        return Some((
            Kind::ProtectedPath,
            format!("{mode} mode: {} is protected {what}", p.display()),
            Some(grant),
        ));
    }
    if scope.writable.iter().any(|w| path.starts_with(w))
        || scope.writable_files.iter().any(|f| path == f)
    {
        return None;
    }
    let dir = grant_dir(path);
    let inside_workspace = path.starts_with(&scope.workspace);
    // A home (or what holds one, or a kernel tree) is granted only with the flag that
    // allows a broad root on purpose: without it the grant named would be refused.
    let broad = match crate::roots::broad_reason(&dir, &scope.homes) {
        Some(_) => " --allow-broad-root",
        None => "",
    };
    let grant = match (mode, inside_workspace) {
        (Mode::ReadOnly, true) => "--mode workspace-write".to_string(),
        (Mode::ReadOnly, false) => {
            format!("--mode workspace-write --writable {}{broad}", dir.display())
        }
        _ => format!("--writable {}{broad}", dir.display()),
    };
    let (kind, rule) = if access == Access::Metadata {
        (
            Kind::Metadata,
            "modes, owners and times change only beneath the writable roots".to_string(),
        )
    } else if path.starts_with("/dev") {
        if let Some(grant) = device_grant(path) {
            let rule = format!("{mode} mode: only /dev/null is a writable device");
            return Some((Kind::Device, rule, Some(grant)));
        }
        (
            Kind::Device,
            "only /dev/null is a writable device".to_string(),
        )
    } else if mode == Mode::ReadOnly {
        (Kind::FileWrite, "nothing is writable".to_string())
    } else {
        (
            Kind::FileWrite,
            "writable only beneath the workspace, /tmp, $TMPDIR and --writable roots".to_string(),
        )
    };
    Some((kind, format!("{mode} mode: {rule}"), Some(grant)))
}

/// The grant of one device file, `--allow-device PATH`, when `path` is one beneath
/// `/dev` (a directory of devices, or a file created in `/dev`, has none).
fn device_grant(path: &Path) -> Option<String> {
    use std::os::unix::fs::FileTypeExt;
    let kind = std::fs::metadata(path).ok()?.file_type();
    let beneath_dev = path.starts_with(crate::devices::DEVICE_TREE);
    (beneath_dev && (kind.is_char_device() || kind.is_block_device()))
        .then(|| format!("--allow-device {}", path.display()))
}

/// The directory `--writable` would name for `path`: itself when it is a directory, else
/// the nearest existing directory above it.
fn grant_dir(path: &Path) -> PathBuf {
    if path.is_dir() {
        return path.to_path_buf();
    }
    let mut dir = path.parent().unwrap_or(Path::new("/"));
    while !dir.is_dir() {
        match dir.parent() {
            Some(up) => dir = up,
            None => break,
        }
    }
    dir.to_path_buf()
}

/// The process a `/proc/PID/...` path is about, when it is not the reader itself.
fn other_process(path: &Path) -> Option<u32> {
    let rest = path.strip_prefix("/proc").ok()?;
    let first = rest.components().next()?;
    let pid: u32 = first.as_os_str().to_str()?.parse().ok()?;
    // Below `/proc/PID` itself: the directory is listed for everyone.
    (rest.components().count() > 1).then_some(pid)
}

/// `path` made absolute from `cwd`, `.` and `..` taken lexically (as the shell's `cd`
/// does by default).
pub(crate) fn absolute(cwd: &Path, path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    };
    let mut out = PathBuf::from("/");
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

/// The path an error line names beside the refusal's `words`: a quoted name (`'x'`,
/// `"x"`, `‘x’`) anywhere, else the `: `-separated field just before the words, with a
/// leading verb (`cannot create x`) taken off.
fn named_path(line: &str, words: &str) -> Option<PathBuf> {
    if let Some(q) = quoted(line).filter(|q| looks_like_path(q)) {
        return Some(PathBuf::from(q));
    }
    let lower = line.to_lowercase();
    let at = lower.find(words)?;
    // Lower-casing may change byte offsets outside ASCII: then take the line as is.
    let before = line.get(..at).unwrap_or(line);
    let fields: Vec<&str> = before.split(": ").collect();
    // The first field is the program's name (`ls`, `bash`): never the path.
    let field = fields
        .iter()
        .skip(1)
        .rev()
        .map(|f| f.trim())
        .find(|f| !f.is_empty())?;
    let field = strip_verb(field);
    looks_like_path(field).then(|| PathBuf::from(field))
}

/// Verbs that say neither reading nor writing: dash's `cannot open X` (a `<` redirection,
/// but other programs open for writing with the same words), stripped from the path
/// only; both accesses are then tried.
const OPEN_VERBS: [&str; 1] = ["cannot open"];

fn strip_verb(field: &str) -> &str {
    let lower = field.to_lowercase();
    let verbs = WRITE_VERBS.iter().chain(READ_VERBS.iter());
    for verb in verbs.chain(OPEN_VERBS.iter()) {
        if let Some(rest) = lower.strip_prefix(verb) {
            let rest = &field[field.len() - rest.len()..];
            // `cannot create directory x`, `cannot create regular file x`.
            let rest = rest.trim_start();
            for noun in ["directory ", "regular file ", "file "] {
                if let Some(r) = rest.strip_prefix(noun) {
                    return r.trim();
                }
            }
            // git: `could not write config file .git/config`: the last word, a path.
            return match rest.trim().rsplit_once(' ') {
                Some((_, last)) if last.contains('/') => last,
                _ => rest.trim(),
            };
        }
    }
    field
}

/// The first quoted text in `line`.
fn quoted(line: &str) -> Option<&str> {
    for (open, close) in [('\'', '\''), ('"', '"'), ('‘', '’'), ('`', '\'')] {
        if let Some(start) = line.find(open) {
            let inner = &line[start + open.len_utf8()..];
            if let Some(end) = inner.find(close) {
                return Some(&inner[..end]);
            }
        }
    }
    None
}

/// A path, not words: absolute or with a slash, or one word.
fn looks_like_path(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('-')
        && (s.starts_with('/') || !s.contains(char::is_whitespace))
        && !s.starts_with("line ")
        && s.parse::<u64>().is_err()
}

/// A socket or connection the denied network refused, from the command's words:
/// bash's `/dev/tcp/HOST/PORT` or `socket:`/`connect:` with `Permission denied` (the
/// seccomp filter's and Landlock's answer), or curl's failed connection to a port no
/// rule allows (no connection but to an allowed port can succeed then). Unix
/// permissions never refuse creating an internet socket or connecting with EACCES.
/// In a network namespace of the command's own the words differ: its own loopback is
/// its own (a refused connection there is the command's), and everything else is
/// `Network is unreachable` (see [`unreachable`]).
fn network_refusal(scope: &Scope, line: &str) -> Option<DenialRecord> {
    if scope.network != Network::Deny {
        return None;
    }
    let lower = line.to_lowercase();
    let denied = lower.contains("permission denied");
    let said =
        |call: &str| lower.contains(&format!("{call}:")) || lower.contains(&format!("{call}()"));
    if denied && said("socket") && !lower.contains(".sock") {
        return Some(socket(scope));
    }
    if scope.own_network {
        return unreachable(scope, line, &lower);
    }
    if denied && let Some((host, port, tcp)) = dev_tcp(line) {
        let grant = if tcp {
            tcp_grant(port)
        } else {
            "--network allow".into()
        };
        return Some(network_record(scope, Some(host), port, grant));
    }
    // A pathname unix socket's own mode refuses its users (`docker.sock`): Unix's.
    let unix_socket = lower.contains(".sock") || lower.contains("unix");
    if denied && said("connect") && !unix_socket {
        return Some(network_record(scope, None, None, tcp_grant(None)));
    }
    let (host, port) = connect_target(line, &lower)?;
    let port = port?;
    if scope.tcp_connect.contains(&port) {
        return None;
    }
    Some(network_record(
        scope,
        Some(host),
        Some(port),
        tcp_grant(Some(port)),
    ))
}

/// A connection refused in a network namespace of the command's own: `Network is
/// unreachable` (nothing but its own loopback is there), named with the host and port
/// the line gives; curl's words for it (`Failed to connect to HOST port N`) count for a
/// host that is not loopback. A failure on loopback is the command's own server's.
fn unreachable(scope: &Scope, line: &str, lower: &str) -> Option<DenialRecord> {
    let target = dev_tcp(line)
        .map(|(host, port, _)| (host, port))
        .or_else(|| connect_target(line, lower));
    if let Some((host, _)) = &target
        && is_loopback(host)
    {
        return None;
    }
    if !lower.contains("network is unreachable") && target.is_none() {
        return None;
    }
    let (host, port) = target.map_or((None, None), |(h, p)| (Some(h), p));
    // `--allow-tcp-connect` keeps the host's network (no namespace of its own), so it
    // lets the connection out; by name, the proxy is the only way out of the namespace.
    let grant = match (&host, port) {
        (Some(h), _) if h.parse::<std::net::IpAddr>().is_err() => format!("--allow-domain {h}"),
        (_, Some(p)) if !scope.by_name => tcp_grant(Some(p)),
        _ => "--network allow".to_string(),
    };
    Some(network_record(scope, host, port, grant))
}

/// A refused connection's record.
fn network_record(
    scope: &Scope,
    host: Option<String>,
    port: Option<u16>,
    grant: String,
) -> DenialRecord {
    let alternative = (grant != "--network allow").then(|| "--network allow".to_string());
    DenialRecord {
        kind: Kind::NetworkAddress,
        path: None,
        host,
        port,
        rule: format!("{} mode: the network is denied", scope.mode),
        grant: Some(grant),
        alternative,
        line: None,
        evidence: Source::PolicyCheck,
    }
}

fn tcp_grant(port: Option<u16>) -> String {
    match port {
        Some(p) => format!("--allow-tcp-connect {p}"),
        None => "--allow-tcp-connect PORT".to_string(),
    }
}

/// Whether `host` is loopback: a name for it or an address in it.
fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare == "localhost"
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|a| a.is_loopback())
}

/// Bash's `/dev/tcp/HOST/PORT` (or `/dev/udp/...`) in a line: host, port, and whether
/// it is TCP.
fn dev_tcp(line: &str) -> Option<(String, Option<u16>, bool)> {
    for (prefix, tcp) in [("/dev/tcp/", true), ("/dev/udp/", false)] {
        if let Some(at) = line.find(prefix) {
            let rest = &line[at + prefix.len()..];
            let mut parts = rest.splitn(2, '/');
            let host = parts.next().unwrap_or_default().to_string();
            let port: Option<u16> = parts
                .next()
                .map(|p| {
                    p.chars()
                        .take_while(char::is_ascii_digit)
                        .collect::<String>()
                })
                .and_then(|p| p.parse().ok());
            return Some((host, port, tcp));
        }
    }
    None
}

/// The host and port of a failed connection as clients word it: curl's `Failed to
/// connect to HOST port N`, ssh's and nc's `connect to [host] HOST port N`.
fn connect_target(line: &str, lower: &str) -> Option<(String, Option<u16>)> {
    let at = ["failed to connect to ", "connect to host ", "connect to "]
        .iter()
        .find_map(|m| lower.find(m).map(|at| at + m.len()))?;
    let mut words = line.get(at..)?.split_whitespace();
    let host = words.next()?.to_string();
    (words.next()? == "port").then_some(())?;
    let port: u16 = words
        .next()?
        .trim_end_matches(|c: char| !c.is_ascii_digit())
        .parse()
        .ok()?;
    Some((host, Some(port)))
}

/// A name the default deny kept from resolving (`curl: (6) Could not resolve host:
/// NAME`), when the network is denied outright (by name, the proxy's record says it).
fn unresolved_host(scope: &Scope, line: &str) -> Option<DenialRecord> {
    if scope.network != Network::Deny || scope.by_name {
        return None;
    }
    let lower = line.to_lowercase();
    let marker = "could not resolve host: ";
    let at = lower.find(marker)?;
    let host: String = line
        .get(at + marker.len()..)?
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .collect();
    if host.is_empty() {
        return None;
    }
    Some(DenialRecord {
        kind: Kind::NetworkName,
        path: None,
        rule: format!("{} mode: the network is denied", scope.mode),
        grant: Some(format!("--allow-domain {host}")),
        host: Some(host),
        port: None,
        alternative: Some("--network allow".into()),
        line: None,
        evidence: Source::PolicyCheck,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unix permissions as a table: everything allowed except what is listed.
    struct Table(Vec<(&'static str, Access)>);
    impl UnixCheck for Table {
        fn allows(&self, path: &Path, access: Access) -> bool {
            !self
                .0
                .iter()
                .any(|(p, a)| path.starts_with(p) && *a == access)
        }
    }

    fn scope(mode: Mode) -> Scope {
        Scope {
            mode,
            cwd: "/ws".into(),
            script_dirs: Vec::new(),
            workspace: "/ws".into(),
            writable: if mode == Mode::WorkspaceWrite {
                vec!["/ws".into(), "/tmp".into()]
            } else {
                vec![]
            },
            writable_files: vec!["/dev/null".into()],
            hidden: vec!["/root/.ssh".into()],
            devices_hidden: true,
            devices_allowed: Vec::new(),
            homes: vec!["/home/u".into()],
            protected: vec!["/ws/.envrc".into(), "/ws/.git/config".into()],
            protect_explicit: false,
            network: Network::Deny,
            tcp_connect: vec![443],
            unix_sockets: false,
            by_name: false,
            staged: true,
            supervised: false,
            protect_held: false,
            own_network: false,
        }
    }

    fn one(s: &Scope, line: &str, unix: &Table) -> Option<DenialRecord> {
        let mut v = from_stderr(s, line, unix);
        assert!(v.len() <= 1);
        v.pop()
    }

    #[test]
    fn paths_are_found_in_the_usual_error_lines() {
        for (line, path) in [
            ("touch: cannot touch '/etc/x': Permission denied", "/etc/x"),
            (
                "mkdir: cannot create directory ‘/etc/d’: Permission denied",
                "/etc/d",
            ),
            ("sh: 1: cannot create /etc/x: Permission denied", "/etc/x"),
            ("bash: line 1: /etc/x: Permission denied", "/etc/x"),
            ("bash: /etc/x: Read-only file system", "/etc/x"),
            (
                "PermissionError: [Errno 13] Permission denied: '/etc/x'",
                "/etc/x",
            ),
            (
                "cp: cannot create regular file '/etc/x': Permission denied",
                "/etc/x",
            ),
            ("sh: 1: cannot create ../x: Permission denied", "/x"),
            ("rm: cannot remove 'a/b': Permission denied", "/ws/a/b"),
        ] {
            let r = one(&scope(Mode::ReadOnly), line, &Table(vec![]));
            assert_eq!(r.and_then(|r| r.path), Some(path.to_string()), "{line}");
        }
        // git names the file after its words; its rename onto the protected file's
        // mount is refused busy.
        let r = one(
            &scope(Mode::WorkspaceWrite),
            "error: could not write config file .git/config: Device or resource busy",
            &Table(vec![]),
        )
        .unwrap();
        assert_eq!(
            (r.kind, r.path.as_deref(), r.grant.as_deref()),
            (
                Kind::ProtectedPath,
                Some("/ws/.git/config"),
                Some("--no-default-protect")
            )
        );
        // `git gc` (its update-server-info) names the file after its words too.
        let mut s = scope(Mode::WorkspaceWrite);
        s.protected.push("/ws/.git/info".into());
        let r = one(
            &s,
            "error: unable to update .git/info/refs: Read-only file system",
            &Table(vec![]),
        )
        .unwrap();
        assert_eq!(
            (r.kind, r.path.as_deref()),
            (Kind::ProtectedPath, Some("/ws/.git/info/refs"))
        );
    }

    #[test]
    fn a_refusal_naming_no_path_is_reported_unattributed_or_by_what_it_was_about() {
        let s = scope(Mode::WorkspaceWrite);
        let root = Table(vec![]);
        for line in [
            "x: Permission denied",
            "PermissionError: [Errno 13] Permission denied",
        ] {
            let r = one(&s, line, &root).unwrap_or_else(|| panic!("{line}"));
            assert_eq!(r.kind, Kind::Unattributed, "{line}");
            assert_eq!(r.line.as_deref(), Some(line));
            assert_eq!(r.grant, None);
        }
        // The words alone, or a remote refusal, are no refusal of ours.
        for line in [
            "Permission denied",
            "git@example.org: Permission denied (publickey).",
            "bash: x: Device or resource busy",
        ] {
            assert_eq!(one(&s, line, &root), None, "{line}");
        }
        // What the traceback was doing names the kind.
        let traceback = |frame: &str| {
            format!(
                "  File \"x.py\", line 1\n    {frame}\nPermissionError: [Errno 13] Permission denied\n"
            )
        };
        let mut plain = s.clone();
        plain.staged = false;
        let v = from_stderr(&plain, &traceback("_socket.socket.__init__(self)"), &root);
        assert_eq!((v.len(), v[0].kind), (1, Kind::Socket));
        assert_eq!(v[0].grant.as_deref(), Some("--network allow"));
        let v = from_stderr(&plain, &traceback("sl = _multiprocessing.SemLock("), &root);
        assert_eq!(v[0].path.as_deref(), Some("/dev/shm"), "{v:?}");
        // A shared memory name is a file in /dev/shm.
        let named =
            traceback("self._fd = _posixshmem.shm_open(").replace("denied\n", "denied: '/psm_1'\n");
        let v = from_stderr(&plain, &named, &root);
        assert_eq!(v[0].path.as_deref(), Some("/dev/shm/psm_1"), "{v:?}");
        assert_eq!(v[0].grant.as_deref(), Some("--writable /dev/shm"), "{v:?}");
        let r = one(
            &plain,
            "script: failed to create pseudo-terminal: Permission denied",
            &root,
        )
        .unwrap();
        assert_eq!(
            (r.kind, r.path.as_deref(), r.grant.as_deref()),
            (
                Kind::Device,
                Some("/dev/ptmx"),
                Some("the namespace stage, without --no-stage")
            )
        );
        // Without the stage a read-only mount is the host's.
        assert_eq!(
            one(&plain, "bash: /opt/x: Read-only file system", &root),
            None
        );
    }

    #[test]
    fn in_a_network_namespace_of_its_own_loopback_is_the_command_s_and_the_rest_unreachable() {
        let mut s = scope(Mode::WorkspaceWrite);
        s.own_network = true;
        s.tcp_connect = vec![];
        let root = Table(vec![]);
        for line in [
            "bash: line 1: /dev/tcp/127.0.0.1/9: Connection refused",
            "curl: (7) Failed to connect to 127.0.0.1 port 9 after 0 ms: Couldn't connect to server",
            "curl: (7) Failed to connect to localhost port 9 after 0 ms: Couldn't connect to server",
        ] {
            assert_eq!(one(&s, line, &root), None, "{line}");
        }
        let v = from_stderr(
            &s,
            "bash: connect: Network is unreachable\nbash: line 1: /dev/tcp/192.0.2.1/80: Network is unreachable\n",
            &root,
        );
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(
            (v[0].kind, v[0].target(), v[0].grant.as_deref()),
            (
                Kind::NetworkAddress,
                "192.0.2.1:80".to_string(),
                Some("--allow-tcp-connect 80")
            )
        );
        let r = one(&s, "OSError: [Errno 101] Network is unreachable", &root).unwrap();
        assert_eq!(
            (r.kind, r.grant.as_deref()),
            (Kind::NetworkAddress, Some("--network allow"))
        );
        let line = "curl: (7) Failed to connect to 192.0.2.1 port 81 after 0 ms: Couldn't connect to server";
        assert_eq!(one(&s, line, &root).unwrap().target(), "192.0.2.1:81");
        // By name the proxy is the only way out: --allow-tcp-connect would not help.
        s.by_name = true;
        assert_eq!(
            one(&s, line, &root).unwrap().grant.as_deref(),
            Some("--network allow")
        );
        let line = "ssh: connect to host example.org port 22: Network is unreachable";
        assert_eq!(
            one(&s, line, &root).unwrap().grant.as_deref(),
            Some("--allow-domain example.org")
        );
    }

    #[test]
    fn a_refusal_unix_makes_anyway_is_not_a_denial() {
        let s = scope(Mode::ReadOnly);
        let user = Table(vec![
            ("/root", Access::Read),
            ("/root", Access::Write),
            ("/etc", Access::Write),
        ]);
        assert_eq!(
            one(
                &s,
                "ls: cannot open directory '/root': Permission denied",
                &user
            ),
            None
        );
        assert_eq!(
            one(&s, "touch: cannot touch '/etc/x': Permission denied", &user),
            None
        );
        // As root the same write is the policy's.
        let r = one(
            &s,
            "touch: cannot touch '/etc/x': Permission denied",
            &Table(vec![]),
        )
        .unwrap();
        assert_eq!(r.kind, Kind::FileWrite);
        assert_eq!(
            r.grant.as_deref(),
            Some("--mode workspace-write --writable /etc")
        );
        // A read the policy allows is never its refusal.
        assert_eq!(
            one(&s, "cat: /etc/shadow: Permission denied", &Table(vec![])),
            None
        );
    }

    /// A character device of this machine beyond the standard ones, if it has one.
    fn a_device_beyond_the_standard_ones() -> Option<PathBuf> {
        use std::os::unix::fs::FileTypeExt;
        std::fs::read_dir("/dev").ok()?.flatten().find_map(|e| {
            let is_char = e.file_type().ok()?.is_char_device();
            let path = e.path();
            (is_char && crate::devices::beyond_standard(&path).is_some()).then_some(path)
        })
    }

    #[test]
    fn a_relative_path_after_the_script_changed_directory_starts_there() {
        let mut s = scope(Mode::WorkspaceWrite);
        let root = Table(vec![]);
        let line = "touch: cannot touch 'rel': Read-only file system";
        // From the start `/ws/rel` is writable: without the script's directories, nothing.
        assert_eq!(one(&s, line, &root), None);
        s.script_dirs = vec!["/ws/sub".into(), "/etc".into()];
        let r = one(&s, line, &root).unwrap();
        assert_eq!(
            (r.kind, r.path.as_deref(), r.grant.as_deref()),
            (Kind::FileWrite, Some("/etc/rel"), Some("--writable /etc"))
        );
        // Where Unix refuses it anyway (an ordinary user in `/etc`), still nothing.
        s.script_dirs = vec!["/etc".into()];
        let user = Table(vec![("/etc", Access::Write)]);
        assert_eq!(one(&s, line, &user), None);
        // An absolute path is what it says, whatever the script did.
        s.script_dirs = vec!["/etc".into()];
        let line = "touch: cannot touch '/ws/x': Read-only file system";
        assert_eq!(one(&s, line, &root), None);
    }

    #[test]
    fn each_file_kind_with_its_grant() {
        let s = scope(Mode::WorkspaceWrite);
        let root = Table(vec![]);
        let r = one(&s, "cat: /root/.ssh/id: Permission denied", &root).unwrap();
        assert_eq!(r.kind, Kind::HiddenPath);
        let r = one(&s, "bash: .envrc: Read-only file system", &root).unwrap();
        assert_eq!(
            (r.kind, r.grant.as_deref()),
            (Kind::ProtectedPath, Some("--no-default-protect"))
        );
        let line = "chmod: changing permissions of '/opt/f': Read-only file system";
        let r = one(&s, line, &root).unwrap();
        assert_eq!(
            (r.kind, r.grant.as_deref()),
            (Kind::Metadata, Some("--writable /opt"))
        );
        // Unix lets only the owner: another user's file is refused anyway.
        assert_eq!(
            one(&s, line, &Table(vec![("/opt", Access::Metadata)])),
            None
        );
        let r = one(
            &s,
            "sh: 1: cannot create /dev/sda: Permission denied",
            &root,
        )
        .unwrap();
        assert_eq!(r.kind, Kind::Device);
        // A redirection either way: reading it is refused first (hidden), by the
        // allow-list of devices.
        let r = one(&s, "bash: /dev/sda: Permission denied", &root).unwrap();
        assert_eq!(r.kind, Kind::HiddenPath);
        // Read: hidden by the allow-list of devices, which --no-default-hide lifts.
        let r = one(
            &s,
            "sh: 1: cannot open /dev/ttyS0: Permission denied",
            &root,
        )
        .unwrap();
        assert_eq!(r.path.as_deref(), Some("/dev/ttyS0"));
        // A device file is granted by name; what is not one (gone, or a directory of
        // them) only with the rest of the hidden set.
        let r = one(&s, "cat: /dev/stockade-none: Permission denied", &root).unwrap();
        assert_eq!(
            (r.kind, r.grant.as_deref()),
            (Kind::HiddenPath, Some("--no-default-hide"))
        );
        if let Some(device) = a_device_beyond_the_standard_ones() {
            let line = format!("cat: {}: Permission denied", device.display());
            let r = one(&s, &line, &root).unwrap();
            let grant = format!("--allow-device {}", device.display());
            assert_eq!(
                (r.kind, r.grant.as_deref()),
                (Kind::HiddenPath, Some(&*grant))
            );
            let line = format!("bash: {}: Permission denied", device.display());
            assert_eq!(
                one(&s, &line, &root).unwrap().grant.as_deref(),
                Some(&*grant)
            );
            // Allowed, neither reading nor writing it is refused.
            let mut allowed = s.clone();
            allowed.devices_allowed = vec![device.clone()];
            assert_eq!(one(&allowed, &line, &root), None);
            let line = format!(
                "sh: 1: cannot create {}: Permission denied",
                device.display()
            );
            assert_eq!(one(&allowed, &line, &root), None);
        }
        assert_eq!(one(&s, "cat: /dev/urandom: Permission denied", &root), None);
        let r = one(&s, "cat: /proc/1/environ: Permission denied", &root).unwrap();
        assert_eq!(r.kind, Kind::Process);
        assert_eq!(one(&s, "bash: /ws/x: Permission denied", &root), None);
        assert_eq!(one(&s, "bash: /dev/null: Permission denied", &root), None);
        let r = one(
            &s,
            "touch: cannot touch '/opt/x/y': Permission denied",
            &root,
        )
        .unwrap();
        assert_eq!(r.grant.as_deref(), Some("--writable /opt"));
    }

    #[test]
    fn without_the_stage_the_supervisors_read_only_answer_on_a_protected_path_is_a_denial() {
        let mut s = scope(Mode::WorkspaceWrite);
        s.staged = false;
        s.supervised = true;
        s.protect_held = true;
        let root = Table(vec![]);
        for line in [
            "bash: .envrc: Read-only file system",
            "error: could not write config file .git/config: Device or resource busy",
        ] {
            let r = one(&s, line, &root).unwrap();
            assert_eq!(r.kind, Kind::ProtectedPath, "{line}");
        }
        // Elsewhere the same words are the host's (a read-only mount it has).
        assert_eq!(one(&s, "bash: /opt/x: Read-only file system", &root), None);
        assert_eq!(one(&s, "bash: src/x: Read-only file system", &root), None);
        // Where the supervisor does not hold them, nothing refused the write.
        s.protect_held = false;
        assert_eq!(one(&s, "bash: .envrc: Read-only file system", &root), None);
    }

    #[test]
    fn a_grant_of_a_home_or_what_holds_one_names_allow_broad_root() {
        // The scope's home is /home/u: it, or /home holding it where it does not exist
        // here (the grant's directory is the nearest that exists), is broad; so is / in
        // itself; /opt is not.
        let s = scope(Mode::WorkspaceWrite);
        let root = Table(vec![]);
        let grant = |line: &str| one(&s, line, &root).and_then(|r| r.grant);
        let home = grant("touch: cannot touch '/home/u/nope': Permission denied").unwrap();
        assert!(
            [
                "--writable /home/u --allow-broad-root",
                "--writable /home --allow-broad-root"
            ]
            .contains(&home.as_str()),
            "{home}"
        );
        assert_eq!(
            grant("touch: cannot touch '/nope': Permission denied").as_deref(),
            Some("--writable / --allow-broad-root")
        );
        assert_eq!(
            grant("touch: cannot touch '/opt/nope': Permission denied").as_deref(),
            Some("--writable /opt")
        );
    }

    #[test]
    fn the_supervisors_eperm_on_metadata_outside_the_roots_or_protected_is_a_denial() {
        let mut s = scope(Mode::WorkspaceWrite);
        s.staged = false;
        s.supervised = true;
        let root = Table(vec![]);
        for line in [
            "chmod: changing permissions of '/opt/f': Operation not permitted",
            "chown: changing ownership of '/opt/f': Operation not permitted",
            "touch: setting times of '/opt/f': Operation not permitted",
        ] {
            let r = one(&s, line, &root).unwrap_or_else(|| panic!("{line}"));
            assert_eq!(
                (r.kind, r.path.as_deref(), r.grant.as_deref()),
                (Kind::Metadata, Some("/opt/f"), Some("--writable /opt")),
                "{line}"
            );
        }
        let line = "chmod: changing permissions of '.git/config': Operation not permitted";
        let r = one(&s, line, &root).unwrap();
        assert_eq!(
            (r.kind, r.path.as_deref(), r.grant.as_deref()),
            (
                Kind::ProtectedPath,
                Some("/ws/.git/config"),
                Some("--no-default-protect")
            )
        );
        // Inside the roots EPERM is Unix's (chown to another user); another user's
        // file is refused anyway; a line of no metadata change or no path is no record.
        for (line, unix) in [
            (
                "chown: changing ownership of '/ws/a': Operation not permitted",
                &root,
            ),
            (
                "chmod: changing permissions of '/opt/f': Operation not permitted",
                &Table(vec![("/opt", Access::Metadata)]),
            ),
            ("bash: /opt/f: Operation not permitted", &root),
            ("kill: (1) - Operation not permitted", &root),
            ("chown: changing ownership: Operation not permitted", &root),
        ] {
            assert_eq!(one(&s, line, unix), None, "{line}");
        }
        // Without the supervisor EPERM is never ours, and without the stage a protected
        // path's contents are not held.
        s.supervised = false;
        let line = "chmod: changing permissions of '/opt/f': Operation not permitted";
        assert_eq!(one(&s, line, &root), None);
        s.supervised = true;
        let r = one(&s, "bash: .envrc: Permission denied", &root);
        assert_eq!(r, None);
    }

    #[test]
    fn a_unix_socket_the_filter_refused_names_allow_unix_sockets() {
        let s = scope(Mode::WorkspaceWrite);
        let root = Table(vec![]);
        let docker = "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock: Get \"http://%2Fvar%2Frun%2Fdocker.sock/v1.50/containers/json\": dial unix /var/run/docker.sock: socket: permission denied";
        let r = one(&s, docker, &root).unwrap();
        assert_eq!(
            (r.kind, r.path.as_deref(), r.grant.as_deref()),
            (
                Kind::Socket,
                Some("/var/run/docker.sock"),
                Some("--allow-unix-sockets")
            )
        );
        // A socket the user may not connect to anyway: the grant would not help.
        let user = Table(vec![("/var/run/docker.sock", Access::Write)]);
        assert_eq!(one(&s, docker, &user), None);
        // Allowed, it is not the sandbox's.
        let mut allowed = s.clone();
        allowed.unix_sockets = true;
        assert_eq!(one(&allowed, docker, &root), None);
        // Python's bare error after a source line making one.
        let traceback = "  File \"/ws/u.py\", line 2, in <module>\n    s = socket.socket(socket.AF_UNIX)\n  File \"/usr/lib/python3.11/socket.py\", line 232, in __init__\n    _socket.socket.__init__(self, family, type, proto, fileno)\nPermissionError: [Errno 13] Permission denied\n";
        let v = from_stderr(&s, traceback, &root);
        assert_eq!(v.len(), 1);
        assert_eq!(
            (v[0].kind, v[0].grant.as_deref()),
            (Kind::Socket, Some("--allow-unix-sockets"))
        );
        // A line naming a path after one about a unix socket is that path's.
        let both = "warning: no unix socket for the agent\ntouch: cannot touch '/opt/x': Permission denied\n";
        let v = from_stderr(&s, both, &root);
        assert_eq!((v.len(), v[0].kind), (1, Kind::FileWrite));
    }

    #[test]
    fn sockets_and_connections_the_denied_network_refused() {
        let s = scope(Mode::WorkspaceWrite);
        let root = Table(vec![]);
        let r = one(&s, "bash: /dev/tcp/1.2.3.4/80: Permission denied", &root).unwrap();
        assert_eq!(
            (r.kind, r.target()),
            (Kind::NetworkAddress, "1.2.3.4:80".to_string())
        );
        assert_eq!(r.grant.as_deref(), Some("--allow-tcp-connect 80"));
        let r = one(&s, "bash: socket: Permission denied", &root).unwrap();
        assert_eq!(
            (r.kind, r.grant.as_deref()),
            (Kind::Socket, Some("--network allow"))
        );
        let line =
            "curl: (7) Failed to connect to 1.2.3.4 port 80 after 0 ms: Couldn't connect to server";
        let r = one(&s, line, &root).unwrap();
        assert_eq!(r.target(), "1.2.3.4:80");
        // An allowed port's failure is the server's, and an allowed network's.
        assert_eq!(one(&s, &line.replace("port 80", "port 443"), &root), None);
        let mut allowed = s.clone();
        allowed.network = Network::Allow;
        assert_eq!(one(&allowed, line, &root), None);
        assert_eq!(
            one(&allowed, "bash: socket: Permission denied", &root),
            None
        );
    }

    #[test]
    fn an_unresolved_name_under_the_default_deny_points_at_allow_domain() {
        let s = scope(Mode::WorkspaceWrite);
        let r = one(
            &s,
            "curl: (6) Could not resolve host: example.com",
            &Table(vec![]),
        )
        .unwrap();
        assert_eq!(r.kind, Kind::NetworkName);
        assert_eq!(r.host.as_deref(), Some("example.com"));
        assert_eq!(r.grant.as_deref(), Some("--allow-domain example.com"));
        let mut allowed = s.clone();
        allowed.network = Network::Allow;
        assert_eq!(
            one(
                &allowed,
                "curl: (6) Could not resolve host: example.com",
                &Table(vec![])
            ),
            None
        );
    }
}
