//! Resource limits on a supervised command (`stockade run --max-memory`,
//! `--max-processes`, `--max-cpu-time`, `--max-file-size`): what each holds through,
//! and how a run that hit one is told apart.
//!
//! Where the command's cgroup has the controller (cgroup v2, the `memory` and `pids`
//! controllers enabled for it), memory and processes are held by the group as a whole:
//! `memory.max` with `memory.swap.max` 0 (the out-of-memory killer ends the group's
//! largest process; `memory.events` counts `oom_kill`), and `pids.max` (a `fork` past
//! it fails with EAGAIN; `pids.events` counts `max`). Otherwise each falls back to a
//! per-process resource limit, inherited by everything the command starts:
//! - memory: `RLIMIT_AS`, the address space of *each* process (not their sum; a program
//!   that reserves far more than it touches, as some runtimes do, fails early). A failed
//!   allocation is the command's own error, so it is not told apart.
//! - processes: `RLIMIT_NPROC`, which counts *every* process of the user, not only the
//!   command's, and which root ignores: as root without a `pids` controller the limit
//!   cannot be held, and nothing runs.
//! - cpu time: `RLIMIT_CPU`, per process: SIGXCPU at the limit (told apart), SIGKILL a
//!   second later.
//! - file size: `RLIMIT_FSIZE`, per file written: SIGXFSZ (told apart) or EFBIG.

use serde::Serialize;

/// The smallest `--max-file-size`: stockade's own records (the status file, the stage's
/// report) are written under the limit too.
pub const MIN_FILE_SIZE: u64 = 64 * 1024;
/// The smallest `--max-memory` (the stage and runner must still start under it).
pub const MIN_MEMORY: u64 = 32 * 1024 * 1024;

/// The limits asked for; `None`: no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    pub memory: Option<u64>,
    pub processes: Option<u64>,
    /// Seconds of CPU time.
    pub cpu_time: Option<u64>,
    pub file_size: Option<u64>,
}

/// One kind of limit.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Memory,
    Processes,
    CpuTime,
    FileSize,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Memory => "memory",
            Kind::Processes => "processes",
            Kind::CpuTime => "cpu-time",
            Kind::FileSize => "file-size",
        }
    }
}

/// What holds a limit.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum By {
    /// `memory.max` and `memory.swap.max` of the command's cgroup.
    CgroupMemory,
    /// `pids.max` of the command's cgroup.
    CgroupPids,
    RlimitAs,
    RlimitNproc,
    RlimitCpu,
    RlimitFsize,
}

impl By {
    /// What the mechanism does not cover, for the reader of the result.
    pub fn caveat(self) -> Option<&'static str> {
        match self {
            By::CgroupMemory | By::CgroupPids => None,
            By::RlimitAs => Some(
                "per process, address space (not resident memory); a failed allocation shows as the command's own error",
            ),
            By::RlimitNproc => Some("counts every process of this user, not only the command's"),
            By::RlimitCpu => Some("per process"),
            By::RlimitFsize => Some("per file written"),
        }
    }
}

/// One limit as it holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Held {
    pub kind: Kind,
    pub value: u64,
    pub by: By,
    pub caveat: Option<&'static str>,
}

impl Limits {
    /// Refuses values too small for stockade itself to start the command under them.
    pub fn check(&self) -> Result<(), String> {
        if let Some(m) = self.memory.filter(|&m| m < MIN_MEMORY) {
            return Err(format!(
                "--max-memory {m}: below {} MiB, the sandbox itself cannot start",
                MIN_MEMORY >> 20
            ));
        }
        if let Some(f) = self.file_size.filter(|&f| f < MIN_FILE_SIZE) {
            return Err(format!(
                "--max-file-size {f}: below {} KiB, stockade cannot write its own records",
                MIN_FILE_SIZE >> 10
            ));
        }
        if self.processes == Some(0) || self.cpu_time == Some(0) {
            return Err("--max-processes and --max-cpu-time must be above zero".into());
        }
        Ok(())
    }

    /// Whether any limit was asked for.
    pub fn any(&self) -> bool {
        *self != Limits::default()
    }

    /// How each asked limit holds, given which cgroup controllers the command's group
    /// has (`memory`, `pids`).
    pub fn plan(&self, cgroup_memory: bool, cgroup_pids: bool) -> Vec<Held> {
        let held = |kind, value, by: By| Held {
            kind,
            value,
            by,
            caveat: by.caveat(),
        };
        let mut out = Vec::new();
        if let Some(m) = self.memory {
            let by = if cgroup_memory {
                By::CgroupMemory
            } else {
                By::RlimitAs
            };
            out.push(held(Kind::Memory, m, by));
        }
        if let Some(p) = self.processes {
            let by = if cgroup_pids {
                By::CgroupPids
            } else {
                By::RlimitNproc
            };
            out.push(held(Kind::Processes, p, by));
        }
        if let Some(c) = self.cpu_time {
            out.push(held(Kind::CpuTime, c, By::RlimitCpu));
        }
        if let Some(f) = self.file_size {
            out.push(held(Kind::FileSize, f, By::RlimitFsize));
        }
        out
    }
}

/// Which limit a run hit, from what the cgroup counted and the signal that ended the
/// command; `None` when none is known to have been hit.
pub fn exceeded(
    held: &[Held],
    oom_kills: u64,
    pids_refused: u64,
    signal: Option<i32>,
) -> Option<Kind> {
    let has = |by: By| held.iter().any(|h| h.by == by);
    if has(By::CgroupMemory) && oom_kills > 0 {
        return Some(Kind::Memory);
    }
    if has(By::CgroupPids) && pids_refused > 0 {
        return Some(Kind::Processes);
    }
    match signal {
        Some(SIGXCPU) if has(By::RlimitCpu) => Some(Kind::CpuTime),
        Some(SIGXFSZ) if has(By::RlimitFsize) => Some(Kind::FileSize),
        _ => None,
    }
}

/// Signal numbers on Linux (the policy crate makes no system calls and has no libc).
const SIGXCPU: i32 = 24;
const SIGXFSZ: i32 = 25;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_limit_holds_through_the_cgroup_where_it_can_else_an_rlimit() {
        let limits = Limits {
            memory: Some(1 << 30),
            processes: Some(100),
            cpu_time: Some(5),
            file_size: Some(1 << 20),
        };
        let bys = |m, p| {
            limits
                .plan(m, p)
                .into_iter()
                .map(|h| h.by)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            bys(true, true),
            [
                By::CgroupMemory,
                By::CgroupPids,
                By::RlimitCpu,
                By::RlimitFsize
            ]
        );
        assert_eq!(
            bys(false, false),
            [
                By::RlimitAs,
                By::RlimitNproc,
                By::RlimitCpu,
                By::RlimitFsize
            ]
        );
        assert!(Limits::default().plan(true, true).is_empty());
    }

    #[test]
    fn a_hit_limit_is_named_only_when_that_limit_was_set() {
        let all = Limits {
            memory: Some(1 << 30),
            processes: Some(100),
            cpu_time: Some(5),
            file_size: Some(1 << 20),
        };
        let cg = all.plan(true, true);
        assert_eq!(exceeded(&cg, 1, 0, Some(9)), Some(Kind::Memory));
        assert_eq!(exceeded(&cg, 0, 3, None), Some(Kind::Processes));
        assert_eq!(exceeded(&cg, 0, 0, Some(SIGXCPU)), Some(Kind::CpuTime));
        assert_eq!(exceeded(&cg, 0, 0, Some(SIGXFSZ)), Some(Kind::FileSize));
        assert_eq!(exceeded(&cg, 0, 0, Some(9)), None);
        // Not set: a SIGXCPU from elsewhere (an inherited limit) is not ours to name.
        assert_eq!(
            exceeded(&Limits::default().plan(true, true), 1, 1, Some(SIGXCPU)),
            None
        );
        // The rlimit fallbacks of memory and processes cannot be told apart.
        assert_eq!(exceeded(&all.plan(false, false), 1, 1, None), None);
    }

    #[test]
    fn values_too_small_for_the_sandbox_are_refused() {
        let refused = |l: Limits| l.check().is_err();
        assert!(refused(Limits {
            memory: Some(1 << 20),
            ..Limits::default()
        }));
        assert!(refused(Limits {
            file_size: Some(4096),
            ..Limits::default()
        }));
        assert!(refused(Limits {
            processes: Some(0),
            ..Limits::default()
        }));
        assert!(!refused(Limits {
            memory: Some(MIN_MEMORY),
            file_size: Some(MIN_FILE_SIZE),
            ..Limits::default()
        }));
    }
}
