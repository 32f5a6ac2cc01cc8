//! Resource limits on the command (`stockade_policy::limits` says what each holds
//! through): the cgroup's controls written before the command starts, the resource
//! limits set in the launcher's child before it executes (inherited by the stage, the
//! runner and everything the command starts), and what the cgroup counted afterwards.

use super::containment::Cgroup;
use crate::error::LauncherError;
use nix::sys::resource::Resource;
use stockade_policy::limits::{By, Defaults, Limits, Planned};

/// The limits as they hold for one run, and the resource limits still to set in the
/// child.
#[derive(Clone, Debug, Default)]
pub struct Applied {
    pub planned: Planned,
    rlimits: Vec<(Resource, libc::rlim_t, libc::rlim_t)>,
}

/// Writes the cgroup's controls for the limits it can hold (the asked ones, else the
/// defaults) and plans resource limits for the asked rest. An asked limit nothing can
/// hold here is an error, before anything runs; a default nothing holds is reported.
pub fn apply(limits: &Limits, cgroup: Option<&Cgroup>) -> Result<Applied, LauncherError> {
    if !limits.any() {
        return Ok(Applied::default());
    }
    let has = |controller: &str| {
        cgroup
            .and_then(|cg| cg.read_control("cgroup.controllers"))
            .is_some_and(|c| c.split_whitespace().any(|w| w == controller))
    };
    let write =
        |name: &str, value: String| cgroup.is_some_and(|cg| cg.write_control(name, &value).is_ok());
    let (memory, processes) = limits.for_cgroup();
    let memory = memory.is_some_and(|m| has("memory") && write("memory.max", m.to_string()));
    if memory && limits.memory.is_some() {
        // Swap would let the group exceed its memory unseen; a kernel without swap
        // accounting has no such file, and then there is no swap to use either. Only
        // for a limit asked for: the default is a ceiling against a runaway, and a
        // large build that swaps unconfined must still finish.
        let _ = write("memory.swap.max", "0".into());
    }
    let pids = processes.is_some_and(|p| has("pids") && write("pids.max", p.to_string()));
    let planned = limits.plan(memory, pids);
    // SAFETY: geteuid cannot fail.
    if planned.held.iter().any(|h| h.by == By::RlimitNproc) && unsafe { libc::geteuid() } == 0 {
        return Err(LauncherError::Supervise(
            super::error::SuperviseError::Start {
                program: "the command".into(),
                source: std::io::Error::other(
                    "--max-processes cannot be held here: the command's cgroup has no pids controller (cgroup v2 with pids delegated; --containment cgroup) and RLIMIT_NPROC does not bind root",
                ),
            },
        ));
    }
    let rlimits = planned
        .held
        .iter()
        .filter_map(|h| {
            let v = h.value as libc::rlim_t;
            match h.by {
                By::RlimitAs => Some((Resource::RLIMIT_AS, v, v)),
                By::RlimitNproc => Some((Resource::RLIMIT_NPROC, v, v)),
                // SIGXCPU at the soft limit, SIGKILL a second later should it be caught.
                By::RlimitCpu => Some((Resource::RLIMIT_CPU, v, v.saturating_add(1))),
                By::RlimitFsize => Some((Resource::RLIMIT_FSIZE, v, v)),
                By::CgroupMemory | By::CgroupPids => None,
            }
        })
        .collect();
    Ok(Applied { planned, rlimits })
}

/// The machine's defaults ([`Defaults`]): its memory from `/proc/meminfo`, its CPUs
/// as this process may use them.
pub fn machine_defaults() -> Defaults {
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            kib.checked_mul(1024)
        });
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    Defaults::for_machine(memory, cpus)
}

impl Applied {
    /// In the forked child before it executes: sets the planned resource limits (only
    /// `setrlimit`, async-signal-safe, on memory the parent allocated).
    pub fn set_in_child(&self) -> std::io::Result<()> {
        for &(resource, soft, hard) in &self.rlimits {
            nix::sys::resource::setrlimit(resource, soft, hard)?;
        }
        Ok(())
    }
}

/// What the cgroup counted: processes the out-of-memory killer ended, and forks
/// refused at `pids.max`. Read before the group is removed.
pub fn events(cgroup: Option<&Cgroup>) -> (u64, u64) {
    let count = |file: &str, key: &str| {
        cgroup
            .and_then(|cg| cg.read_control(file))
            .and_then(|text| {
                text.lines().find_map(|l| {
                    let (k, v) = l.split_once(' ')?;
                    (k == key).then(|| v.trim().parse().ok()).flatten()
                })
            })
            .unwrap_or(0)
    };
    (
        count("memory.events", "oom_kill"),
        count("pids.events", "max"),
    )
}
