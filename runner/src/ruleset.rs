//! The Landlock ruleset: the policy's grants turned into kernel rules, applied to the
//! runner itself so that the target it execs inherits them.
//!
//! Compatibility is decided here and nowhere else. The handled access rights are those
//! of [`HANDLED_ABI`], a version chosen and tested deliberately, not the crate's newest:
//! a crate update must not silently change what is denied.

use crate::carve::Tree;
use crate::error::RunnerError;
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus, NetPort,
    PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use std::path::PathBuf;
use stockade_policy::Policy;
use stockade_policy::grants::{self, Access as GrantAccess, Grant, Opened};
use stockade_policy::hidden;

/// The ABI whose filesystem access rights are handled (ABI 5 adds the last one,
/// IOCTL_DEV; 6 and 7 add none).
pub const HANDLED_ABI: ABI = ABI::V5;
/// The ABI whose network access rights are handled when the network is denied: TCP bind
/// and connect (ABI 4).
pub const HANDLED_NET_ABI: ABI = ABI::V4;
/// The ABI whose scopes are always requested: abstract unix sockets and signals (ABI 6).
pub const HANDLED_SCOPE_ABI: ABI = ABI::V6;
/// [`HANDLED_SCOPE_ABI`] as the number [`kernel_abi`] answers: from it on, the ruleset
/// scopes signals to the sandbox.
pub const SIGNAL_SCOPE_ABI: u32 = 6;

fn access(grant: GrantAccess) -> BitFlags<AccessFs> {
    match grant {
        GrantAccess::ReadExecute => AccessFs::from_read(HANDLED_ABI),
        // File-only rights: a directory right on a file would make the kernel refuse
        // the rule (the crate would silently drop it and report partial enforcement).
        GrantAccess::ReadWriteFile => {
            AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev
        }
        GrantAccess::Full => AccessFs::from_all(HANDLED_ABI),
        GrantAccess::ListOnly => AccessFs::ReadDir.into(),
        GrantAccess::FullExceptRead => {
            AccessFs::from_all(HANDLED_ABI) & !(AccessFs::ReadFile | AccessFs::Execute)
        }
    }
}

/// The rights of a grant on something that is not a directory: the kernel refuses
/// directory rights on a file (the crate would drop the rule's extra rights and report
/// partial enforcement).
fn file_rights(access: BitFlags<AccessFs>) -> BitFlags<AccessFs> {
    access
        & (AccessFs::ReadFile
            | AccessFs::WriteFile
            | AccessFs::Execute
            | AccessFs::Truncate
            | AccessFs::IoctlDev)
}

/// The most entries the carve-out gives rules of their own. Each costs the runner a few
/// system calls and the kernel a rule; a directory on the way to a hidden path that a
/// command could fill (one inside a writable root) must not make every later command
/// slow to start or exhaust kernel memory. Past it, the runner fails rather than start.
pub const MAX_CARVED_ENTRIES: usize = 65_536;

/// Why Landlock could not confine the runner.
#[derive(Debug)]
pub enum LandlockError {
    /// A step of building or applying the ruleset failed.
    Ruleset(landlock::RulesetError),
    /// The kernel accepted the ruleset but enforces none of it.
    NotEnforced,
    /// The ruleset's descriptor could not be duplicated for the rules beside hidden paths.
    Duplicate(std::io::Error),
    /// A rule for an entry beside a hidden path could not be added.
    AddRule {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// Hiding the policy's paths needs more rules than [`MAX_CARVED_ENTRIES`]; `fullest`
    /// is the directory holding the most of them, and `in_fullest` their number there.
    TooManyCarved {
        entries: usize,
        fullest: Option<std::path::PathBuf>,
        in_fullest: usize,
    },
}

impl std::fmt::Display for LandlockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LandlockError::Ruleset(e) => e.fmt(f),
            LandlockError::NotEnforced => f.write_str(
                "the kernel did not enforce the ruleset (Landlock unsupported or disabled)",
            ),
            LandlockError::Duplicate(e) => write!(f, "cannot duplicate the ruleset: {e}"),
            LandlockError::AddRule { path, source } => {
                write!(f, "cannot add the rule for {}: {source}", path.display())
            }
            LandlockError::TooManyCarved {
                entries,
                fullest,
                in_fullest,
            } => write!(
                f,
                "hiding paths needs a rule for each of {entries} entries beside them (the limit is {MAX_CARVED_ENTRIES}; {} holds {in_fullest}): hide a path in a smaller directory",
                fullest
                    .as_ref()
                    .map(|d| d.display().to_string())
                    .unwrap_or_default()
            ),
        }
    }
}

impl std::error::Error for LandlockError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LandlockError::Ruleset(e) => Some(e),
            LandlockError::AddRule { source, .. } | LandlockError::Duplicate(source) => {
                Some(source)
            }
            _ => None,
        }
    }
}

/// Refuses a carve-out larger than [`MAX_CARVED_ENTRIES`], naming the fullest directory.
fn check_carve_size(carved: &[Grant]) -> Result<(), RunnerError> {
    let beside: Vec<&Grant> = carved
        .iter()
        .filter(|g| matches!(g.opened, Opened::Beside { .. }))
        .collect();
    if beside.len() <= MAX_CARVED_ENTRIES {
        return Ok(());
    }
    let mut counts = std::collections::BTreeMap::new();
    for g in &beside {
        *counts.entry(g.path.parent()).or_insert(0usize) += 1;
    }
    let (dir, n) = counts
        .into_iter()
        .max_by_key(|(_, n)| *n)
        .unwrap_or((None, 0));
    Err(RunnerError::Landlock(LandlockError::TooManyCarved {
        entries: beside.len(),
        fullest: dir.map(std::path::Path::to_path_buf),
        in_fullest: n,
    }))
}

/// The policy's grants with its hidden paths carved out, but those in `covered` (found
/// covered by the namespace stage's masks: mask.rs): the one rule set both the runner and
/// `--explain` use. Lists the filesystem around the hidden paths (see carve.rs for why
/// here).
pub fn carved_grants(policy: &Policy, tree: &mut Tree, covered: &[PathBuf]) -> Vec<Grant> {
    let carve: Vec<PathBuf> = policy
        .hidden()
        .iter()
        .filter(|h| !covered.contains(h))
        .cloned()
        .collect();
    hidden::carve(
        &grants::grants(policy),
        &carve,
        policy.hides_devices(),
        |p| tree.list(p),
    )
}

/// Opens a granted path as an `O_PATH` descriptor, checking that directory grants name
/// directories. A grant that cannot be opened is an error naming it, never skipped.
fn open_grant(grant: &Grant) -> Result<PathFd, RunnerError> {
    let what = grant.reason.describe();
    let fd = PathFd::new(&grant.path).map_err(|e| RunnerError::GrantPath {
        what,
        path: grant.path.clone(),
        source: match e {
            landlock::PathFdError::OpenCall { source, .. } => source,
            other => std::io::Error::other(other.to_string()),
        },
    })?;
    if grant.access != GrantAccess::ReadWriteFile {
        let stat = nix::sys::stat::fstat(&fd).map_err(|e| RunnerError::GrantPath {
            what,
            path: grant.path.clone(),
            source: e.into(),
        })?;
        if stat.st_mode & libc::S_IFMT != libc::S_IFDIR {
            return Err(RunnerError::GrantNotDirectory {
                what,
                path: grant.path.clone(),
            });
        }
    }
    Ok(fd)
}

/// The Landlock ABI the kernel offers (0: none), asked before anything is restricted.
pub fn kernel_abi() -> u32 {
    // SAFETY: with a null attribute, size 0 and the VERSION flag, the call reads no
    // memory and only returns the ABI number (or -1 without Landlock).
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(v).unwrap_or(0)
}

/// `LANDLOCK_CREATE_RULESET_VERSION` (linux/landlock.h).
const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;

fn abi_number(status: &LandlockStatus) -> u32 {
    match status {
        LandlockStatus::Available { effective_abi, .. } => match effective_abi {
            ABI::Unsupported => 0,
            ABI::V1 => 1,
            ABI::V2 => 2,
            ABI::V3 => 3,
            ABI::V4 => 4,
            ABI::V5 => 5,
            ABI::V6 => 6,
            ABI::V7 => 7,
            ABI::V8 => 8,
            ABI::V9 => 9,
            // Newer than this match knows: at least the newest it names.
            _ => 10,
        },
        _ => 0,
    }
}

/// Restricts the calling process to the grants of `policy` and, as it asks, to the
/// allowed TCP ports; signals and abstract unix sockets are scoped to the sandbox.
/// Returns the Landlock ABI the kernel offered.
///
/// Best effort: what an older kernel lacks is left out here and judged afterwards from
/// the ABI it reports (`guarantees::verdict`), which refuses to run when a required
/// guarantee is missing. A ruleset the kernel did not enforce at all is refused here.
/// With `staged` (the namespace stage ran), the hidden paths found covered by its masks
/// are not carved out (mask.rs). With `audit_tag` (the launcher reads Landlock's audit
/// records for this command), see [`audited`].
pub fn restrict(
    policy: &Policy,
    netns: bool,
    staged: bool,
    queues: Option<std::fs::File>,
    audit_tag: Option<&str>,
    keep: bool,
) -> Result<(u32, Option<std::os::fd::OwnedFd>), RunnerError> {
    let ll = |e: landlock::RulesetError| RunnerError::Landlock(LandlockError::Ruleset(e));
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(HANDLED_ABI))
        .map_err(ll)?;
    let ports = policy.landlock_connect_ports(netns);
    if ports.is_some() {
        // Handled even without allowed ports: a second lock behind the socket filter.
        ruleset = ruleset
            .handle_access(AccessNet::from_all(HANDLED_NET_ABI))
            .map_err(ll)?;
    }
    let mut created = ruleset
        .scope(Scope::from_all(HANDLED_SCOPE_ABI))
        .map_err(ll)?
        .create()
        .map_err(ll)?;
    for port in ports.unwrap_or_default() {
        created = created
            .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
            .map_err(ll)?;
    }
    let mut tree = Tree::default();
    let covered = crate::mask::covered(policy, staged, &mut tree);
    let carved = carved_grants(policy, &mut tree, &covered);
    check_carve_size(&carved)?;
    let beside = BesideRules::of(&created)?;
    for grant in &carved {
        let rights = access(grant.access);
        created = match (grant.opened, grant.identity) {
            // A writable root: exactly the directory the policy named, or nothing.
            (Opened::Root, Some(expected)) => created.add_rule(PathBeneath::new(
                crate::roots::open_root(grant, expected)?,
                rights,
            )),
            (Opened::Root, None) => created.add_rule(PathBeneath::new(open_grant(grant)?, rights)),
            // Reached without following links; one that is gone or is a link now gets
            // no rule: less access, never more.
            (Opened::Ancestor, _) => match tree.dir(&grant.path) {
                Some(fd) => created.add_rule(PathBeneath::new(fd, rights)),
                None => continue,
            },
            (Opened::Beside { directory }, _) => {
                if let Some(fd) = tree.open_beside(&grant.path) {
                    beside.add(&grant.path, fd, rights, directory)?;
                }
                continue;
            }
        }
        .map_err(ll)?;
    }
    if staged {
        for (fd, rights) in private_devices(policy) {
            created = created.add_rule(PathBeneath::new(fd, rights)).map_err(ll)?;
        }
    }
    // The command's own message queues (see `crate::queues`), its to use fully.
    if let Some(fd) = queues {
        let full = AccessFs::from_all(HANDLED_ABI);
        created = created.add_rule(PathBeneath::new(fd, full)).map_err(ll)?;
    }
    // The same ruleset, for the supervisor's worker to restrict itself with (`keep`:
    // it performs the command's writes, and must be refused what the command is).
    let kept = match keep {
        true => Option::<std::os::fd::OwnedFd>::from(
            created
                .try_clone()
                .map_err(|e| RunnerError::Landlock(LandlockError::Duplicate(e)))?,
        ),
        false => None,
    };
    let audit_tag = audit_tag.filter(|_| kernel_abi() >= AUDIT_ABI);
    let status = match audit_tag {
        Some(tag) => audited(created.log_new_exec(true).map_err(ll)?, tag)?,
        None => created.restrict_self().map_err(ll)?,
    };
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(RunnerError::Landlock(LandlockError::NotEnforced));
    }
    Ok((abi_number(&status.landlock), kept))
}

/// The ABI from which Landlock records refusals after `execve` when asked
/// (`LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON`).
pub const AUDIT_ABI: u32 = 7;

/// Restricts this process with refusals recorded after `execve` too, under the comm
/// `tag`, then makes one refusal at once: a signal 0 to the parent, outside the domain
/// (no signal is sent either way). Its record is the domain's first, so the domain's
/// allocation record, which names the comm at this moment, is the first under `tag`:
/// the launcher knows its command's domain by it (stockade_policy::landlock_audit). The
/// comm is put back before anything else runs (`execve` sets the command's own).
fn audited(
    created: landlock::RulesetCreated,
    tag: &str,
) -> Result<landlock::RestrictionStatus, RunnerError> {
    let ll = |e: landlock::RulesetError| RunnerError::Landlock(LandlockError::Ruleset(e));
    let previous = nix::sys::prctl::get_name().ok();
    // A tag is validated with the request: hex digits, no NUL.
    if let Ok(name) = std::ffi::CString::new(tag) {
        let _ = nix::sys::prctl::set_name(&name);
    }
    let status = created.restrict_self();
    let parent = nix::unistd::getppid();
    // 0: the parent is in another pid namespace; `kill(0)` would be our own group.
    if status.is_ok() && parent.as_raw() > 0 {
        let _ = nix::sys::signal::kill(parent, None);
    }
    if let Some(name) = previous {
        let _ = nix::sys::prctl::set_name(&name);
    }
    status.map_err(ll)
}

/// The rules for the entries beside hidden paths, added to the ruleset directly rather
/// than through the `landlock` crate, which asks the kernel what every descriptor is (one
/// `fstat` per rule) to drop directory rights from files: the listing already said
/// (`d_type`), and these entries are most of the rules (a tenth of the runner's time was
/// those `fstat`s as root). The rights are cut to those the ruleset handles on this
/// kernel, as the crate does, or the kernel would refuse the rule.
struct BesideRules {
    /// The ruleset's descriptor (a duplicate); `None` without Landlock, where nothing is
    /// added and `restrict_self` reports the ruleset as not enforced.
    ruleset: Option<std::os::fd::OwnedFd>,
    handled: BitFlags<AccessFs>,
}

/// `struct landlock_path_beneath_attr` (linux/landlock.h), packed as the kernel reads it.
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// `LANDLOCK_RULE_PATH_BENEATH` (linux/landlock.h).
const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;

impl BesideRules {
    fn of(created: &landlock::RulesetCreated) -> Result<BesideRules, RunnerError> {
        let dup = created
            .try_clone()
            .map_err(|e| RunnerError::Landlock(LandlockError::Duplicate(e)))?;
        Ok(BesideRules {
            ruleset: dup.into(),
            handled: AccessFs::from_all(HANDLED_ABI) & AccessFs::from_all(abi_of(kernel_abi())),
        })
    }

    /// Grants `rights` beneath `entry` (at `path`), file rights only where the listing
    /// did not say directory. An entry that became a file since it was listed as a
    /// directory is refused with `EINVAL` for directory rights: it gets file rights, as
    /// the crate gives them.
    fn add(
        &self,
        path: &std::path::Path,
        entry: std::os::fd::OwnedFd,
        rights: BitFlags<AccessFs>,
        directory: bool,
    ) -> Result<(), RunnerError> {
        let Some(ruleset) = &self.ruleset else {
            return Ok(());
        };
        let rights = if directory {
            rights
        } else {
            file_rights(rights)
        };
        match add_path_beneath(ruleset, &entry, rights & self.handled) {
            Err(e) if directory && e.raw_os_error() == Some(libc::EINVAL) => {
                add_path_beneath(ruleset, &entry, file_rights(rights) & self.handled)
            }
            other => other,
        }
        .map_err(|source| {
            RunnerError::Landlock(LandlockError::AddRule {
                path: path.to_path_buf(),
                source,
            })
        })
    }
}

/// One `landlock_add_rule` of a path-beneath rule; no rights is no rule (the kernel would
/// refuse it).
fn add_path_beneath(
    ruleset: &std::os::fd::OwnedFd,
    entry: &std::os::fd::OwnedFd,
    rights: BitFlags<AccessFs>,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    if rights.is_empty() {
        return Ok(());
    }
    let attr = PathBeneathAttr {
        allowed_access: rights.bits(),
        parent_fd: entry.as_raw_fd(),
    };
    // SAFETY: the kernel reads one `landlock_path_beneath_attr` from `attr`, which lives
    // across the call; both descriptors are owned and open for its duration.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        )
    };
    match r {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// The crate's ABI for the kernel's number, capped at [`HANDLED_ABI`] (only used to cut
/// handled rights, none of which is newer).
fn abi_of(number: u32) -> ABI {
    match number {
        0 => ABI::Unsupported,
        1 => ABI::V1,
        2 => ABI::V2,
        3 => ABI::V3,
        4 => ABI::V4,
        _ => HANDLED_ABI,
    }
}

/// The stage's private devices, the command's own to use fully: its `/dev/shm` tmpfs
/// and its devpts instance with that instance's `ptmx` (see `stockade_policy::stage`).
/// Each is opened without following a link and given a rule only where the stage
/// mounted it (a directory, and for `/dev/ptmx` a character device rather than a link;
/// `/dev/shm` only where the caller did not share the host's as a writable root), and
/// never where a hidden path lies on or below it.
fn private_devices(policy: &Policy) -> Vec<(std::fs::File, BitFlags<AccessFs>)> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    use stockade_policy::stage::{PTMX, PTS, SHM, private_shm};
    let open = |path: &str| {
        let hidden = policy
            .hidden()
            .iter()
            .any(|h| h.starts_with(path) || std::path::Path::new(path).starts_with(h));
        if hidden {
            return None;
        }
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_NOFOLLOW)
            .open(path)
            .ok()
            .and_then(|f| Some((f.metadata().ok()?.file_type(), f)))
    };
    let full = AccessFs::from_all(HANDLED_ABI);
    let mut out = Vec::new();
    if private_shm(&grants::writable_roots(policy))
        && let Some((kind, f)) = open(SHM)
        && kind.is_dir()
    {
        out.push((f, full));
    }
    if let Some((kind, f)) = open(PTS)
        && kind.is_dir()
    {
        out.push((f, full));
        if let Some((kind, f)) = open(PTMX)
            && kind.is_char_device()
        {
            out.push((f, file_rights(full)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use stockade_policy::grants::Reason;

    #[test]
    fn a_carve_out_past_the_limit_is_a_failure_naming_the_fullest_directory() {
        let entry = |dir: &str, i: usize| Grant {
            path: std::path::PathBuf::from(dir).join(format!("e{i}")),
            access: GrantAccess::ReadExecute,
            reason: Reason::ReadEverywhere,
            identity: None,
            opened: Opened::Beside { directory: false },
        };
        let mut carved: Vec<Grant> = (0..MAX_CARVED_ENTRIES)
            .map(|i| entry("/w/big", i))
            .collect();
        assert!(check_carve_size(&carved).is_ok());
        carved.push(entry("/etc", 0));
        let err = check_carve_size(&carved).unwrap_err().to_string();
        assert!(err.contains("/w/big holds 65536"), "{err}");
    }
}
