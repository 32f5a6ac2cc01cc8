//! Capabilities: a confined command holds none, even when started as root.
//!
//! Every set is cleared, then read back: the target is only started when the permitted,
//! effective, inheritable and ambient sets are empty (and the bounding set too, when the
//! runner could clear it). With no_new_privs set and the permitted set empty, `execve`
//! grants nothing back, not even to uid 0.

use crate::error::RunnerError;
use caps::{CapSet, Capability};

/// The order matters: dropping from the bounding set needs CAP_SETPCAP in the effective
/// set, and the effective set must shrink before the permitted set it is a subset of.
const ORDER: [CapSet; 5] = [
    CapSet::Bounding,
    CapSet::Ambient,
    CapSet::Inheritable,
    CapSet::Effective,
    CapSet::Permitted,
];

fn set_name(set: CapSet) -> &'static str {
    match set {
        CapSet::Ambient => "ambient",
        CapSet::Bounding => "bounding",
        CapSet::Effective => "effective",
        CapSet::Inheritable => "inheritable",
        CapSet::Permitted => "permitted",
    }
}

fn error(set: CapSet, e: impl std::fmt::Display) -> RunnerError {
    RunnerError::Capabilities(format!("cannot clear the {} set: {e}", set_name(set)))
}

/// Clears every capability set of the calling thread and verifies they are empty.
pub fn drop_all() -> Result<(), RunnerError> {
    // Without CAP_SETPCAP the bounding set cannot shrink. That is an unprivileged
    // caller: its permitted set is what matters, and no_new_privs keeps execve from
    // granting anything the bounding set would otherwise allow.
    let can_bound = caps::has_cap(None, CapSet::Effective, Capability::CAP_SETPCAP)
        .map_err(|e| error(CapSet::Effective, e))?;
    for set in ORDER {
        if matches!(set, CapSet::Bounding) && !can_bound {
            continue;
        }
        caps::clear(None, set).map_err(|e| error(set, e))?;
    }
    for set in ORDER {
        if matches!(set, CapSet::Bounding) && !can_bound {
            continue;
        }
        let left = caps::read(None, set).map_err(|e| error(set, e))?;
        if !left.is_empty() {
            let mut names: Vec<String> = left.iter().map(|c| c.to_string()).collect();
            names.sort();
            return Err(RunnerError::Capabilities(format!(
                "the {} set still holds {} after clearing it",
                set_name(set),
                names.join(", ")
            )));
        }
    }
    Ok(())
}
