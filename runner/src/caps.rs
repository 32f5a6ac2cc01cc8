//! Capabilities: a confined command holds none, even when started as root, unless the
//! policy keeps some (`--keep-capability`, an allow-list of file-access capabilities:
//! `stockade_policy::capability` says which and why).
//!
//! Every set is cleared, then read back: the target is only started when the permitted,
//! effective, inheritable and ambient sets are empty (and the bounding set too, when the
//! runner could clear it). The ambient set is read back for the kept capabilities only:
//! the kernel keeps it within permitted and inheritable, which are read back whole. With no_new_privs set and the permitted set empty, `execve`
//! grants nothing back, not even to uid 0.
//!
//! Keeping a set K instead: every set is made exactly K and read back the same way. The
//! bounding set K (nothing outside it can ever be gained again) and the permitted set K
//! are what limit the command; no_new_privs makes `execve` intersect what root would get
//! with the permitted set before it. Root's own `execve` rule would carry K on (uid 0
//! gets its bounding set), but not under `SECBIT_NOROOT`, which a container may set: so K
//! is also made ambient (which needs it inheritable too), and ambient capabilities pass
//! through `execve` for every uid. The command, and every program it starts, hold
//! exactly K. The runner refuses to start the target when it does not hold K itself (an
//! ordinary user, or root without one of them): keeping less than reported is no
//! sandbox failure, but a command that then fails on a file it was meant to reach would
//! look like one.
//!
//! Written on the raw system calls, not with the `caps` crate's per-capability helpers:
//! those clear and read each set one capability at a time (about 210 `prctl`s per run),
//! while the kernel clears effective, permitted and inheritable in one `capset`, reads
//! them in one `capget` and clears the ambient set in one `prctl`. Only the bounding set
//! has no bulk call: one `PR_CAPBSET_DROP` per capability. The runner is on the path of
//! every command (bench/results.md has the measurements). `caps` still names
//! capabilities in error messages.

use crate::error::RunnerError;

/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit sets, as two 32-bit halves.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;
const CAP_SETPCAP: u32 = 8;
/// The kernel's capability sets are 64 bits wide: no capability number is above this.
const MAX_CAP: u32 = 63;

/// `struct __user_cap_header_struct` (linux/capability.h).
#[repr(C)]
struct Header {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`: one 32-bit half of each set.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Data {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Effective, permitted and inheritable sets of the calling thread, as 64-bit masks.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
struct Sets {
    effective: u64,
    permitted: u64,
    inheritable: u64,
}

fn header() -> Header {
    Header {
        version: CAPABILITY_VERSION_3,
        pid: 0, // the calling thread
    }
}

fn capget() -> Result<Sets, std::io::Error> {
    let mut h = header();
    let mut d = [Data::default(); 2];
    // SAFETY: capget writes one header and two data structs (version 3), which `h` and
    // `d` are, laid out as linux/capability.h declares them.
    let rc = unsafe { libc::syscall(libc::SYS_capget, &mut h as *mut Header, d.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let join = |lo: u32, hi: u32| u64::from(lo) | (u64::from(hi) << 32);
    Ok(Sets {
        effective: join(d[0].effective, d[1].effective),
        permitted: join(d[0].permitted, d[1].permitted),
        inheritable: join(d[0].inheritable, d[1].inheritable),
    })
}

/// Sets effective, permitted and inheritable in one call.
fn capset(sets: Sets) -> Result<(), std::io::Error> {
    let mut h = header();
    let half = |shift: u32| Data {
        effective: (sets.effective >> shift) as u32,
        permitted: (sets.permitted >> shift) as u32,
        inheritable: (sets.inheritable >> shift) as u32,
    };
    let d = [half(0), half(32)];
    // SAFETY: capset reads one header and two data structs (version 3), which `h` and
    // `d` are; it only ever writes the header's version field.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &mut h as *mut Header, d.as_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// One prctl with integer arguments; its return value, or the error.
fn prctl(option: libc::c_int, arg2: u32, arg3: u32) -> Result<libc::c_int, std::io::Error> {
    let (arg2, arg3) = (libc::c_ulong::from(arg2), libc::c_ulong::from(arg3));
    // SAFETY: the options used here (PR_CAPBSET_DROP, PR_CAPBSET_READ, PR_CAP_AMBIENT)
    // take integers only; no memory is passed to the kernel.
    let rc = unsafe { libc::prctl(option, arg2, arg3, 0 as libc::c_ulong, 0 as libc::c_ulong) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(rc)
}

/// Why the capability sets could not be emptied.
#[derive(Debug)]
pub enum CapsError {
    /// Clearing `set` failed (for the bounding set, at capability `cap`).
    Clear {
        set: &'static str,
        cap: Option<u32>,
        source: std::io::Error,
    },
    /// Reading back `set` failed (`None`: effective, permitted and inheritable at once).
    Read {
        set: Option<&'static str>,
        source: std::io::Error,
    },
    /// `set` still holds the capabilities in `mask` after it was cleared.
    StillHolds { set: &'static str, mask: u64 },
    /// `set` lacks the capabilities in `mask`, which it was to keep.
    Lacks { set: &'static str, mask: u64 },
    /// The runner does not hold the capabilities in `mask`, which the request keeps.
    NotHeld { mask: u64 },
    /// Raising capability `cap` in the ambient set failed.
    Raise { cap: u32, source: std::io::Error },
}

impl std::fmt::Display for CapsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CapsError::Clear {
                set,
                cap: None,
                source,
            } => write!(f, "cannot clear the {set} set: {source}"),
            CapsError::Clear {
                set,
                cap: Some(cap),
                source,
            } => write!(f, "cannot clear the {set} set: capability {cap}: {source}"),
            CapsError::Read { set: None, source } => {
                write!(f, "cannot read the capability sets: {source}")
            }
            CapsError::Read {
                set: Some(set),
                source,
            } => write!(f, "cannot read the {set} set: {source}"),
            CapsError::StillHolds { set, mask } => write!(
                f,
                "the {set} set still holds {} after clearing it",
                names(*mask)
            ),
            CapsError::Lacks { set, mask } => write!(
                f,
                "the {set} set does not hold {}, which it was to keep",
                names(*mask)
            ),
            CapsError::NotHeld { mask } => write!(
                f,
                "the request keeps {} (--keep-capability), which the runner does not hold: start it as root (with those capabilities), or confine without the flag",
                names(*mask)
            ),
            CapsError::Raise { cap, source } => write!(
                f,
                "cannot keep {} through execve (ambient set): {source}",
                names(1 << cap)
            ),
        }
    }
}

impl std::error::Error for CapsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CapsError::Clear { source, .. }
            | CapsError::Read { source, .. }
            | CapsError::Raise { source, .. } => Some(source),
            CapsError::StillHolds { .. } | CapsError::Lacks { .. } | CapsError::NotHeld { .. } => {
                None
            }
        }
    }
}

fn error(set: &'static str, source: std::io::Error) -> RunnerError {
    RunnerError::Capabilities(CapsError::Clear {
        set,
        cap: None,
        source,
    })
}

/// The capabilities in `mask`, by name where `caps` knows them, sorted.
fn names(mask: u64) -> String {
    let mut names: Vec<String> = (0..=MAX_CAP)
        .filter(|&n| mask & (1 << n) != 0)
        .map(|n| {
            caps::all()
                .into_iter()
                .find(|c| u32::from(c.index()) == n)
                .map_or_else(|| format!("capability {n}"), |c| c.to_string())
        })
        .collect();
    names.sort();
    names.join(", ")
}

fn read_error(source: std::io::Error) -> RunnerError {
    RunnerError::Capabilities(CapsError::Read { set: None, source })
}

/// Checks that `set` holds exactly `keep` (`held` is what it holds).
fn exactly(set: &'static str, held: u64, keep: u64) -> Result<(), RunnerError> {
    if held & !keep != 0 {
        return Err(RunnerError::Capabilities(CapsError::StillHolds {
            set,
            mask: held & !keep,
        }));
    }
    if keep & !held != 0 {
        return Err(RunnerError::Capabilities(CapsError::Lacks {
            set,
            mask: keep & !held,
        }));
    }
    Ok(())
}

/// Drops every capability but those in `keep` from the bounding set (needs CAP_SETPCAP
/// in the effective set).
///
/// The kernel has no call that drops several at once. Numbers are tried upwards until
/// the kernel answers EINVAL ("not a capability"), so that capabilities newer than this
/// runner are dropped too, without reading /proc (already under Landlock here). A drop
/// that succeeds has removed that capability; any other failure fails the run.
fn drop_bounding(keep: u64) -> Result<(), RunnerError> {
    for cap in 0..=MAX_CAP {
        if keep & (1 << cap) != 0 {
            continue;
        }
        match prctl(libc::PR_CAPBSET_DROP, cap, 0) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && cap > 0 => return Ok(()),
            Err(source) => {
                return Err(RunnerError::Capabilities(CapsError::Clear {
                    set: "bounding",
                    cap: Some(cap),
                    source,
                }));
            }
        }
    }
    Ok(())
}

/// Reads back, one capability at a time, what is left in a set that has no bulk read:
/// `query(cap)` is a prctl answering 1 when `cap` is in the set. Numbers are tried
/// upwards until the kernel answers EINVAL, past its last capability. Reads commit no
/// credentials, unlike drops: these are the cheap calls.
fn read_back(
    set: &'static str,
    query: impl Fn(u32) -> Result<libc::c_int, std::io::Error>,
) -> Result<u64, RunnerError> {
    let mut left = 0u64;
    for cap in 0..=MAX_CAP {
        match query(cap) {
            Ok(1) => left |= 1 << cap,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && cap > 0 => break,
            Err(source) => {
                return Err(RunnerError::Capabilities(CapsError::Read {
                    set: Some(set),
                    source,
                }));
            }
        }
    }
    Ok(left)
}

/// Makes every capability set of the calling thread exactly `keep` (empty, unless the
/// policy keeps some) and verifies it. `keep` holds only capabilities of the policy's
/// allow-list.
pub fn restrict(keep: u64) -> Result<(), RunnerError> {
    let before = capget().map_err(read_error)?;
    if before.permitted & keep != keep {
        return Err(RunnerError::Capabilities(CapsError::NotHeld {
            mask: keep & !before.permitted,
        }));
    }
    // Without CAP_SETPCAP the bounding set cannot shrink. That is an unprivileged
    // caller: its permitted set is what matters, and no_new_privs keeps execve from
    // granting anything the bounding set would otherwise allow.
    let can_bound = before.effective & (1 << CAP_SETPCAP) != 0;
    // The order matters: the bounding set first, while CAP_SETPCAP is still effective.
    if can_bound {
        drop_bounding(keep)?;
    }
    prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as u32,
        0,
    )
    .map_err(|e| error("ambient", e))?;
    let kept = Sets {
        effective: keep,
        permitted: keep,
        // Ambient capabilities must be inheritable too.
        inheritable: keep,
    };
    capset(kept).map_err(|e| error("permitted", e))?;
    for cap in (0..=MAX_CAP).filter(|cap| keep & (1 << cap) != 0) {
        prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_RAISE as u32, cap)
            .map_err(|source| RunnerError::Capabilities(CapsError::Raise { cap, source }))?;
    }

    // Read everything back.
    let after = capget().map_err(read_error)?;
    exactly("effective", after.effective, keep)?;
    exactly("permitted", after.permitted, keep)?;
    exactly("inheritable", after.inheritable, keep)?;
    // No single call reads the ambient set. Only the kept capabilities need asking: the
    // kernel holds the ambient set within permitted and inheritable (every `capset`
    // masks it so), and both were just read back as exactly `keep`.
    let mut ambient = 0u64;
    for cap in (0..=MAX_CAP).filter(|cap| keep & (1 << cap) != 0) {
        let set = prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_IS_SET as u32,
            cap,
        )
        .map_err(|source| {
            RunnerError::Capabilities(CapsError::Read {
                set: Some("ambient"),
                source,
            })
        })?;
        if set == 1 {
            ambient |= 1 << cap;
        }
    }
    exactly("ambient", ambient, keep)?;
    if can_bound {
        let bounding = read_back("bounding", |cap| prctl(libc::PR_CAPBSET_READ, cap, 0))?;
        exactly("bounding", bounding, keep)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_kernel_names_and_unknown_numbers_stay_numbers() {
        let mask = (1 << 21) | (1 << 0) | (1 << 62);
        assert_eq!(names(mask), "CAP_CHOWN, CAP_SYS_ADMIN, capability 62");
    }

    #[test]
    fn a_set_must_hold_exactly_what_is_kept() {
        assert!(exactly("ambient", 0b10, 0b10).is_ok());
        assert!(exactly("ambient", 0, 0).is_ok());
        let err = exactly("bounding", 0b110, 0b10).unwrap_err().to_string();
        assert!(
            err.contains("bounding set still holds CAP_DAC_READ_SEARCH"),
            "{err}"
        );
        let err = exactly("effective", 0, 0b1000).unwrap_err().to_string();
        assert!(
            err.contains("effective set does not hold CAP_FOWNER, which it was to keep"),
            "{err}"
        );
    }

    #[test]
    fn capget_reads_the_sets_of_this_thread() {
        // Effective is always a subset of permitted; the test may or may not be root.
        let sets = capget().unwrap();
        assert_eq!(sets.effective & !sets.permitted, 0);
    }
}
