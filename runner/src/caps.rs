//! Capabilities: a confined command holds none, even when started as root.
//!
//! Every set is cleared, then read back: the target is only started when the permitted,
//! effective, inheritable and ambient sets are empty (and the bounding set too, when the
//! runner could clear it). With no_new_privs set and the permitted set empty, `execve`
//! grants nothing back, not even to uid 0.
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

/// Sets effective, permitted and inheritable to empty in one call.
fn capset_empty() -> Result<(), std::io::Error> {
    let mut h = header();
    let d = [Data::default(); 2];
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
        }
    }
}

impl std::error::Error for CapsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CapsError::Clear { source, .. } | CapsError::Read { source, .. } => Some(source),
            CapsError::StillHolds { .. } => None,
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

fn still_holds(set: &'static str, mask: u64) -> RunnerError {
    RunnerError::Capabilities(CapsError::StillHolds { set, mask })
}

/// Drops every capability from the bounding set (needs CAP_SETPCAP in the effective
/// set).
///
/// The kernel has no call that drops several at once. Numbers are tried upwards until
/// the kernel answers EINVAL ("not a capability"), so that capabilities newer than this
/// runner are dropped too, without reading /proc (already under Landlock here). A drop
/// that succeeds has removed that capability; any other failure fails the run.
fn drop_bounding() -> Result<(), RunnerError> {
    for cap in 0..=MAX_CAP {
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

/// Clears every capability set of the calling thread and verifies they are empty.
pub fn drop_all() -> Result<(), RunnerError> {
    // Without CAP_SETPCAP the bounding set cannot shrink. That is an unprivileged
    // caller: its permitted set is what matters, and no_new_privs keeps execve from
    // granting anything the bounding set would otherwise allow.
    let before = capget().map_err(read_error)?;
    let can_bound = before.effective & (1 << CAP_SETPCAP) != 0;
    // The order matters: the bounding set first, while CAP_SETPCAP is still effective.
    if can_bound {
        drop_bounding()?;
    }
    prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as u32,
        0,
    )
    .map_err(|e| error("ambient", e))?;
    capset_empty().map_err(|e| error("permitted", e))?;

    // Read everything back.
    let after = capget().map_err(read_error)?;
    for (set, mask) in [
        ("effective", after.effective),
        ("permitted", after.permitted),
        ("inheritable", after.inheritable),
    ] {
        if mask != 0 {
            return Err(still_holds(set, mask));
        }
    }
    // No single call reads the ambient and bounding sets.
    let ambient = read_back("ambient", |cap| {
        prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_IS_SET as u32,
            cap,
        )
    })?;
    if ambient != 0 {
        return Err(still_holds("ambient", ambient));
    }
    if can_bound {
        let bounding = read_back("bounding", |cap| prctl(libc::PR_CAPBSET_READ, cap, 0))?;
        if bounding != 0 {
            return Err(still_holds("bounding", bounding));
        }
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
    fn capget_reads_the_sets_of_this_thread() {
        // Effective is always a subset of permitted; the test may or may not be root.
        let sets = capget().unwrap();
        assert_eq!(sets.effective & !sets.permitted, 0);
    }
}
