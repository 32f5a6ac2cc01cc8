//! The guarantees a confined mode asks for, the kernel feature each one needs, and so
//! whether enforcement on a given kernel is `full`, `partial` or impossible.
//!
//! The launcher probes the kernel into [`KernelFacts`]; the runner learns the same facts
//! from the ruleset it actually applied. Both judge them here, so `confine` reports
//! exactly what the runner will enforce.

use crate::mode::Mode;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The newest Landlock ABI stockade has been tested against. Access rights of newer ABIs
/// are adopted deliberately (with tests), never by following the crate's newest ABI.
pub const TESTED_LANDLOCK_ABI: u32 = 7;

/// What the running kernel offers, as far as stockade's guarantees are concerned.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KernelFacts {
    /// The Landlock ABI version, 0 when Landlock is unsupported or disabled.
    pub landlock_abi: u32,
}

/// A kernel feature a guarantee depends on.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Feature {
    /// Landlock at this ABI version or newer.
    LandlockAbi(u32),
}

impl Feature {
    pub fn available(self, facts: &KernelFacts) -> bool {
        match self {
            Feature::LandlockAbi(n) => facts.landlock_abi >= n,
        }
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Feature::LandlockAbi(n) => write!(f, "landlock-abi-{n}"),
        }
    }
}

/// One property of the sandbox a caller can rely on.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Guarantee {
    /// Writes outside the writable roots are denied (Landlock ABI 1).
    FilesystemWrites,
    /// Links and renames across directories follow the same rules (ABI 2). Without it the
    /// kernel refuses every such link or rename: stricter, but not what was asked.
    Refer,
    /// Truncating files outside the writable roots is denied (ABI 3). Without it a
    /// command can truncate any file it can name.
    Truncate,
    /// ioctl on newly opened devices is denied outside the writable roots (ABI 5).
    DeviceIoctl,
}

impl Guarantee {
    pub const ALL: [Guarantee; 4] = [
        Guarantee::FilesystemWrites,
        Guarantee::Refer,
        Guarantee::Truncate,
        Guarantee::DeviceIoctl,
    ];

    /// The stable name used in JSON and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Guarantee::FilesystemWrites => "filesystemWrites",
            Guarantee::Refer => "refer",
            Guarantee::Truncate => "truncate",
            Guarantee::DeviceIoctl => "deviceIoctl",
        }
    }

    pub fn needs(self) -> Feature {
        match self {
            Guarantee::FilesystemWrites => Feature::LandlockAbi(1),
            Guarantee::Refer => Feature::LandlockAbi(2),
            Guarantee::Truncate => Feature::LandlockAbi(3),
            Guarantee::DeviceIoctl => Feature::LandlockAbi(5),
        }
    }

    /// How much `mode` depends on this guarantee.
    pub fn requirement(self, mode: Mode) -> Requirement {
        if !mode.is_confined() {
            return Requirement::NotApplicable;
        }
        match self {
            // Without filesystem rules there is no sandbox at all.
            Guarantee::FilesystemWrites => Requirement::Required,
            Guarantee::Refer | Guarantee::Truncate | Guarantee::DeviceIoctl => Requirement::Desired,
        }
    }
}

/// How much a mode depends on a guarantee.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// Cannot run without it: its absence is a runner failure / `SANDBOX_UNAVAILABLE`.
    Required,
    /// Enforced when the kernel can; its absence makes enforcement `partial`.
    Desired,
    /// The mode does not ask for it.
    NotApplicable,
}

/// How completely a mode is enforced, as reported to executors.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Enforcement {
    Full,
    Partial,
}

impl Enforcement {
    pub fn as_str(self) -> &'static str {
        match self {
            Enforcement::Full => "full",
            Enforcement::Partial => "partial",
        }
    }
}

/// Whether each guarantee is given on this kernel.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Assessment {
    pub guarantee: Guarantee,
    pub requirement: Requirement,
    pub enforced: bool,
}

/// The verdict for one mode on one kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Not confined at all (`danger-full-access`).
    Unconfined,
    /// Confined; `Partial` when some desired guarantee is unavailable.
    Confined(Enforcement),
    /// A required guarantee is unavailable: the mode must not run.
    Unavailable { missing: Vec<(Guarantee, Feature)> },
}

/// Assesses every guarantee `mode` asks for against `facts`.
pub fn assess(mode: Mode, facts: &KernelFacts) -> Vec<Assessment> {
    Guarantee::ALL
        .into_iter()
        .map(|g| Assessment {
            guarantee: g,
            requirement: g.requirement(mode),
            enforced: g.requirement(mode) != Requirement::NotApplicable
                && g.needs().available(facts),
        })
        .collect()
}

/// Judges whether `mode` can run on a kernel with `facts`, and how completely.
pub fn verdict(mode: Mode, facts: &KernelFacts) -> Verdict {
    if !mode.is_confined() {
        return Verdict::Unconfined;
    }
    let assessed = assess(mode, facts);
    let missing: Vec<_> = assessed
        .iter()
        .filter(|a| a.requirement == Requirement::Required && !a.enforced)
        .map(|a| (a.guarantee, a.guarantee.needs()))
        .collect();
    if !missing.is_empty() {
        return Verdict::Unavailable { missing };
    }
    let partial = assessed
        .iter()
        .any(|a| a.requirement == Requirement::Desired && !a.enforced);
    Verdict::Confined(if partial {
        Enforcement::Partial
    } else {
        Enforcement::Full
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn abi(n: u32) -> KernelFacts {
        KernelFacts { landlock_abi: n }
    }

    #[test]
    fn no_landlock_means_unavailable() {
        for mode in [Mode::ReadOnly, Mode::WorkspaceWrite] {
            match verdict(mode, &abi(0)) {
                Verdict::Unavailable { missing } => {
                    assert_eq!(
                        missing,
                        vec![(Guarantee::FilesystemWrites, Feature::LandlockAbi(1))]
                    )
                }
                v => panic!("{v:?}"),
            }
        }
    }

    #[test]
    fn old_abis_are_partial_and_abi_5_is_full() {
        for n in 1..5 {
            assert_eq!(
                verdict(Mode::WorkspaceWrite, &abi(n)),
                Verdict::Confined(Enforcement::Partial),
                "abi {n}"
            );
        }
        for n in [5, 6, TESTED_LANDLOCK_ABI, 10] {
            assert_eq!(
                verdict(Mode::ReadOnly, &abi(n)),
                Verdict::Confined(Enforcement::Full)
            );
        }
    }

    #[test]
    fn danger_full_access_is_unconfined_even_without_landlock() {
        assert_eq!(
            verdict(Mode::DangerFullAccess, &abi(0)),
            Verdict::Unconfined
        );
    }
}
