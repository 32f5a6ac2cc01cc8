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
//!
//! Defaults ([`Defaults`]): a run that names no memory or process limit gets one where
//! the command's cgroup has the controller, so that a fork bomb or a runaway allocation
//! ends in its own group instead of taking the machine, sized so that ordinary builds
//! never meet it. They hold through the cgroup only: the per-process fallbacks would
//! break ordinary work (`RLIMIT_AS` fails runtimes that reserve address space they
//! never touch; `RLIMIT_NPROC` counts every process of the user, and binds nobody as
//! root), so where the controller is missing the default is reported as not held.

use serde::Serialize;

/// The smallest `--max-file-size`: stockade's own records (the status file, the stage's
/// report) are written under the limit too.
pub const MIN_FILE_SIZE: u64 = 64 * 1024;
/// The smallest `--max-memory` (the stage and runner must still start under it).
pub const MIN_MEMORY: u64 = 32 * 1024 * 1024;

/// The fewest processes the default allows, whatever the machine (threads count: a
/// JVM or a parallel `rustc` holds dozens each).
pub const DEFAULT_PROCESSES_MIN: u64 = 4096;
/// Processes the default allows per CPU, above [`DEFAULT_PROCESSES_MIN`]: a parallel
/// build or test run grows with the CPUs.
pub const DEFAULT_PROCESSES_PER_CPU: u64 = 128;

/// The limits asked for; `None`: no limit of that kind was asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    pub memory: Option<u64>,
    pub processes: Option<u64>,
    /// Seconds of CPU time.
    pub cpu_time: Option<u64>,
    pub file_size: Option<u64>,
    /// What applies where no memory or process limit was asked for; `None`: nothing
    /// (`--no-default-limits`).
    pub defaults: Option<Defaults>,
}

/// The default memory and process limits of this machine, filled in once when a run's
/// request is resolved (`Defaults::for_machine`), held only through the cgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Defaults {
    /// Three quarters of the machine's memory (`None` when it could not be read): the
    /// rest stays for everything else, the caller included.
    pub memory: Option<u64>,
    pub processes: u64,
}

impl Defaults {
    /// The defaults for a machine with `memory_total` bytes of memory and `cpus` CPUs.
    pub fn for_machine(memory_total: Option<u64>, cpus: u64) -> Defaults {
        Defaults {
            memory: memory_total.map(|m| m / 4 * 3).filter(|&m| m >= MIN_MEMORY),
            processes: DEFAULT_PROCESSES_MIN.max(DEFAULT_PROCESSES_PER_CPU.saturating_mul(cpus)),
        }
    }
}

/// How a run's limits hold: each one held, and each default that nothing here holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Planned {
    pub held: Vec<Held>,
    pub defaults_unheld: Vec<Kind>,
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
    /// A default ([`Defaults`]), not a limit the caller asked for.
    pub default: bool,
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

    /// Whether any limit applies: one asked for, or the defaults.
    pub fn any(&self) -> bool {
        *self != Limits::default()
    }

    /// The memory and process limits the cgroup is asked to hold: each asked for, else
    /// its default. The caller writes them into the group and passes what it could
    /// write to [`Limits::plan`].
    pub fn for_cgroup(&self) -> (Option<u64>, Option<u64>) {
        let defaults = self.defaults;
        (
            self.memory.or(defaults.and_then(|d| d.memory)),
            self.processes.or(defaults.map(|d| d.processes)),
        )
    }

    /// How each limit holds, given whether the command's group holds its memory and
    /// process limits (`memory.max`, `pids.max` written): an asked limit the group
    /// does not hold falls back to a resource limit; a default only holds through the
    /// group.
    pub fn plan(&self, cgroup_memory: bool, cgroup_pids: bool) -> Planned {
        let mut planned = Planned::default();
        let (memory, processes) = self.for_cgroup();
        let group = [
            (Kind::Memory, self.memory, memory, cgroup_memory),
            (Kind::Processes, self.processes, processes, cgroup_pids),
        ];
        for (kind, asked, value, in_group) in group {
            let Some(value) = value else { continue };
            let by = match (in_group, kind) {
                (true, Kind::Memory) => By::CgroupMemory,
                (true, _) => By::CgroupPids,
                (false, _) if asked.is_none() => {
                    planned.defaults_unheld.push(kind);
                    continue;
                }
                (false, Kind::Memory) => By::RlimitAs,
                (false, _) => By::RlimitNproc,
            };
            planned.held.push(held(kind, value, by, asked.is_none()));
        }
        if let Some(c) = self.cpu_time {
            planned
                .held
                .push(held(Kind::CpuTime, c, By::RlimitCpu, false));
        }
        if let Some(f) = self.file_size {
            planned
                .held
                .push(held(Kind::FileSize, f, By::RlimitFsize, false));
        }
        planned
    }
}

fn held(kind: Kind, value: u64, by: By, default: bool) -> Held {
    Held {
        kind,
        value,
        by,
        caveat: by.caveat(),
        default,
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
            defaults: Some(DEFAULTS),
        };
        let bys = |m, p| {
            limits
                .plan(m, p)
                .held
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
        assert_eq!(Limits::default().plan(true, true), Planned::default());
    }

    const DEFAULTS: Defaults = Defaults {
        memory: Some(3 << 30),
        processes: 4096,
    };

    #[test]
    fn defaults_hold_through_the_cgroup_only_and_an_asked_limit_replaces_them() {
        let limits = Limits {
            defaults: Some(DEFAULTS),
            ..Limits::default()
        };
        let all = limits.plan(true, true);
        let got: Vec<_> = all
            .held
            .iter()
            .map(|h| (h.kind, h.value, h.by, h.default))
            .collect();
        assert_eq!(
            got,
            [
                (Kind::Memory, 3 << 30, By::CgroupMemory, true),
                (Kind::Processes, 4096, By::CgroupPids, true)
            ]
        );
        assert!(all.defaults_unheld.is_empty());
        // No controller: never a resource limit in their place, and said so.
        let none = limits.plan(false, false);
        assert!(none.held.is_empty(), "{none:?}");
        assert_eq!(none.defaults_unheld, [Kind::Memory, Kind::Processes]);
        // Asked for: the asked value, not a default, with its fallback.
        let asked = Limits {
            processes: Some(50),
            ..limits
        };
        assert_eq!(asked.for_cgroup(), (Some(3 << 30), Some(50)));
        let p = asked.plan(false, false);
        assert_eq!(p.defaults_unheld, [Kind::Memory]);
        assert_eq!(
            p.held
                .iter()
                .map(|h| (h.value, h.by, h.default))
                .collect::<Vec<_>>(),
            [(50, By::RlimitNproc, false)]
        );
        // Turned off: nothing at all.
        assert_eq!(Limits::default().for_cgroup(), (None, None));
        assert!(!Limits::default().any());
        assert!(limits.any());
    }

    #[test]
    fn the_defaults_scale_with_the_machine() {
        let small = Defaults::for_machine(Some(4 << 30), 2);
        assert_eq!(small.memory, Some(3 << 30));
        assert_eq!(small.processes, DEFAULT_PROCESSES_MIN);
        let big = Defaults::for_machine(Some(256 << 30), 64);
        assert_eq!(big.processes, 64 * DEFAULT_PROCESSES_PER_CPU);
        // Unknown memory, or too little for the sandbox: no memory default.
        assert_eq!(Defaults::for_machine(None, 1).memory, None);
        assert_eq!(Defaults::for_machine(Some(16 << 20), 1).memory, None);
    }

    #[test]
    fn a_hit_limit_is_named_only_when_that_limit_was_set() {
        let all = Limits {
            memory: Some(1 << 30),
            processes: Some(100),
            cpu_time: Some(5),
            file_size: Some(1 << 20),
            defaults: None,
        };
        let cg = all.plan(true, true).held;
        assert_eq!(exceeded(&cg, 1, 0, Some(9)), Some(Kind::Memory));
        assert_eq!(exceeded(&cg, 0, 3, None), Some(Kind::Processes));
        assert_eq!(exceeded(&cg, 0, 0, Some(SIGXCPU)), Some(Kind::CpuTime));
        assert_eq!(exceeded(&cg, 0, 0, Some(SIGXFSZ)), Some(Kind::FileSize));
        assert_eq!(exceeded(&cg, 0, 0, Some(9)), None);
        // Not set: a SIGXCPU from elsewhere (an inherited limit) is not ours to name.
        assert_eq!(
            exceeded(
                &Limits::default().plan(true, true).held,
                1,
                1,
                Some(SIGXCPU)
            ),
            None
        );
        // The rlimit fallbacks of memory and processes cannot be told apart.
        assert_eq!(exceeded(&all.plan(false, false).held, 1, 1, None), None);
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
