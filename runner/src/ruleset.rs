//! The Landlock ruleset: the policy's grants turned into kernel rules, applied to the
//! runner itself so that the target it execs inherits them.
//!
//! Compatibility is decided here and nowhere else. The handled access rights are those
//! of [`HANDLED_ABI`], a version chosen and tested deliberately, not the crate's newest:
//! a crate update must not silently change what is denied.

use crate::error::RunnerError;
use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, LandlockStatus, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
};
use stockade_policy::grants::{Access as GrantAccess, Grant};
use stockade_policy::guarantees::KernelFacts;

/// The ABI whose filesystem access rights are handled (ABI 5 adds the last one,
/// IOCTL_DEV; 6 and 7 add none).
pub const HANDLED_ABI: ABI = ABI::V5;

/// What applying the ruleset achieved.
pub struct Applied {
    /// The Landlock ABI the kernel offered (0: none).
    pub facts: KernelFacts,
    /// Whether the kernel enforced the ruleset at all.
    pub enforced: bool,
}

fn access(grant: GrantAccess) -> BitFlags<AccessFs> {
    match grant {
        GrantAccess::ReadExecute => AccessFs::from_read(HANDLED_ABI),
        // File-only rights: a directory right on a file would make the kernel refuse
        // the rule (the crate would silently drop it and report partial enforcement).
        GrantAccess::ReadWriteFile => {
            AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev
        }
        GrantAccess::Full => AccessFs::from_all(HANDLED_ABI),
    }
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

/// Restricts the calling process to `grants`.
pub fn restrict(grants: &[Grant]) -> Result<Applied, RunnerError> {
    let ll = |e: landlock::RulesetError| RunnerError::Landlock(e.to_string());
    let mut created = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(HANDLED_ABI))
        .map_err(ll)?
        .create()
        .map_err(ll)?;
    for grant in grants {
        let fd = open_grant(grant)?;
        created = created
            .add_rule(PathBeneath::new(fd, access(grant.access)))
            .map_err(ll)?;
    }
    let status = created.restrict_self().map_err(ll)?;
    Ok(Applied {
        facts: KernelFacts {
            landlock_abi: abi_number(&status.landlock),
        },
        enforced: status.ruleset != RulesetStatus::NotEnforced,
    })
}
