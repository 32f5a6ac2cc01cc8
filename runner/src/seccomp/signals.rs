//! Signals to processes outside the command, refused by pid.
//!
//! Landlock's signal scope (ABI 6) keeps every process outside the sandbox out of a
//! command's reach, and the namespace stage's pid namespace hides them. Where neither
//! holds (a kernel before 6.12 with `--no-stage`, in a container, or where user
//! namespaces are restricted), the kernel lets a command signal every process of its
//! user: `kill -STOP $PPID` stops `stockade run` (its timeout never fires and the
//! command outlives it), `kill -9 -1` ends every process of the user (as root, nearly
//! all of them), and the parent's process group is one `kill` away.
//!
//! A filter sees numbers, not processes, so it protects the ones the runner can name
//! when it builds the filter ([`Outside`]): its parent (the launcher, the executor, or
//! the stage) and the parent's process group and, where the kernel has no Landlock
//! signal scope, every ancestor above the parent and its group: with the network by name
//! `stockade run` is the runner's grandparent or further up (the proxy host, and the
//! stage without a pid namespace, come between), and `kill -STOP` of it stopped the
//! run and its timeout. Every signal call whose target is one of them, or `-1` (every
//! process the caller may signal), is refused with EPERM, as the kernel refuses a
//! signal it does not permit:
//! - `kill` and `rt_sigqueueinfo` by the pid (a negative one names a group);
//! - `tkill`, `tgkill` and `rt_tgsigqueueinfo` by the first argument: the thread group
//!   of `tgkill` must be the thread's own, so naming the parent means naming its pid;
//! - `kill(0, ...)`, the caller's own group, when the runner starts in the parent's;
//! - `setpgid` into the parent's group or, where they are named, an ancestor's (from
//!   inside one, `kill(0, ...)` reaches it whole: a command that `stockade run` started
//!   in a group of its own joined the group of the shell above `stockade run`, in the
//!   same session, and signalled it);
//! - `fcntl(F_SETOWN)` to them: the owner of a descriptor is sent SIGIO, or whatever
//!   `F_SETSIG` names (SIGKILL included), when I/O happens on it; `F_SETOWN_EX`, and the
//!   socket ioctls `FIOSETOWN`/`SIOCSPGRP`, carry the pid in memory and are refused
//!   whatever it is (in the ioctl block);
//! - `pidfd_send_signal` always, with ENOSYS ("not implemented", as before 5.1): a
//!   pidfd may come from opening `/proc/PID`, so the filter cannot know whose it is;
//!   callers (Go's runtime among them) then fall back to `kill`, which is checked.
//!   `pidfd_open` stays allowed: with sending refused, a pidfd of an outside process
//!   only tells when it exits (`pidfd_getfd`, `process_madvise`, `setns` are refused
//!   elsewhere).
//!
//! Where Landlock's signal scope holds (ABI 6), the signal calls leave the parent (and
//! the leader of its group), named as a process, to it: the scope refuses them too, and
//! only its refusal leaves an audit record that names it (`kill 1` under the stage,
//! whose init is the parent, was an unexplained `Operation not permitted`). Everything
//! else stays the filter's too: `-1`, the groups (the scope lets a signal to a group
//! through when any member is the command's own), `kill(0, ...)`, the supervisor (which
//! the scope does not cover: it runs in the command's domain), and `F_SETOWN` to the
//! parent (the scope judges only the SIGIO when it is sent, so the filter's refusal at
//! `fcntl` is the earlier one).
//!
//! What stays open below ABI 6 without the stage: any other process of the same user
//! that is not an ancestor (a sibling, a cousin, an ancestor's other threads by their
//! thread ids) named by its explicit pid. The `signals` guarantee says so in its note.

use super::bpf::{Code, Insn, JEQ_K, To, load_arg};
use super::{ALLOW, ENOSYS, EPERM, Label};
use nix::unistd::{Pid, getpgid, getpgrp, getppid};

/// `F_SETOWN_EX` (linux/fcntl.h; the same number on every architecture), which libc
/// does not name.
const F_SETOWN_EX: u32 = 15;

/// The most ancestors above the parent [`Outside::of_parent`] names: a bound on the
/// filter's size (two comparisons each, with its group), far past any real chain.
const MAX_ANCESTORS: usize = 32;

/// The processes outside the command that the filter keeps signals from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outside {
    /// The runner's parent; `None` when it has no pid here (outside this pid namespace).
    pub parent: Option<i32>,
    /// The parent's process group; `None` when it has no id here.
    pub parent_group: Option<i32>,
    /// Whether the command starts in the parent's process group: then `kill(0, ...)`,
    /// which signals the caller's own group, reaches the parent too.
    pub shares_group: bool,
    /// The parent's ancestors (its parent and up, pid 1 excluded) and their process
    /// groups, each refused as a process and as a group; empty where Landlock's signal
    /// scope already keeps them out of reach.
    pub ancestors: Vec<i32>,
    /// The runner's own metadata supervisor (`crate::notify`), the command's parent
    /// where it runs: refused as a process.
    pub supervisor: Option<i32>,
    /// Whether Landlock's signal scope holds for the command: the signal calls then
    /// leave the parent, and its group's leader, named as processes to it
    /// ([`Outside::signal_targets`]).
    pub scoped: bool,
    /// Whether the supervisor leads a process group the command is not in (it leaves
    /// the executor's group for one of its own, or the command starts a new session):
    /// that group is then refused too, and may not be joined (from inside it,
    /// `kill(0, SIGSTOP)` would stop the supervisor). Where the command stays in the
    /// supervisor's group, the group is the command's own.
    pub supervisor_group: bool,
}

impl Outside {
    /// The runner's parent as it is now, for a runner that starts a new session
    /// (`new_session`) or stays in its process group, with the parent's ancestors where
    /// Landlock's signal scope will not hold (`scoped` false).
    pub fn of_parent(new_session: bool, scoped: bool) -> Outside {
        // 0: the parent lives outside this pid namespace (the stage's), where nothing
        // can name it anyway.
        let ppid = getppid().as_raw();
        if ppid <= 0 {
            return Outside {
                scoped,
                ..Outside::default()
            };
        }
        let group = getpgid(Some(Pid::from_raw(ppid)))
            .ok()
            .map(Pid::as_raw)
            .filter(|&g| g > 0);
        Outside {
            parent: Some(ppid),
            parent_group: group,
            shares_group: !new_session && group == Some(getpgrp().as_raw()),
            ancestors: if scoped {
                Vec::new()
            } else {
                ancestors_of(ppid)
            },
            supervisor: None,
            scoped,
            supervisor_group: false,
        }
    }

    /// The process groups a command must not join ([`setpgid`]): the parent's, the
    /// supervisor's where the command is not in it and, where named, the ancestors' (the list holds their pids too: a pid that leads no group
    /// cannot be joined anyway).
    pub fn groups(&self) -> Vec<u32> {
        let named = self
            .parent_group
            .into_iter()
            .chain(self.ancestors.iter().copied())
            .chain(self.supervisor_pgid());
        let mut groups: Vec<u32> = named.filter(|&g| g > 0).map(|g| g as u32).collect();
        groups.sort_unstable();
        groups.dedup();
        groups
    }

    /// The supervisor's process group, where the command is not in it.
    fn supervisor_pgid(&self) -> Option<i32> {
        self.supervisor.filter(|_| self.supervisor_group)
    }

    /// The pid arguments a signal must not carry, as the 32-bit words the filter
    /// compares (a pid is an `int`: the kernel reads the low half of the register):
    /// `-1`, the parent and its group each as a process and as a group, and `0` when the
    /// caller's group is the parent's.
    pub fn targets(&self) -> Vec<u32> {
        let mut pids = vec![-1];
        let named = [self.parent, self.parent_group].into_iter().flatten();
        for id in named.chain(self.ancestors.iter().copied()) {
            pids.extend([id, -id]);
        }
        if self.shares_group {
            pids.push(0);
        }
        pids.extend(self.supervisor);
        pids.extend(self.supervisor_pgid().map(|g| -g));
        let mut words: Vec<u32> = pids.into_iter().map(|p| p as u32).collect();
        words.sort_unstable();
        words.dedup();
        words
    }

    /// The pid arguments the signal calls must not carry: [`Outside::targets`], less
    /// the parent and its group's leader as processes where Landlock's scope refuses
    /// them (and records it). The supervisor stays: it is in the command's domain.
    pub fn signal_targets(&self) -> Vec<u32> {
        let mut words = self.targets();
        if self.scoped {
            let to_scope = |p: i32| Some(p) != self.supervisor && p > 0;
            let left: Vec<u32> = [self.parent, self.parent_group]
                .into_iter()
                .flatten()
                .filter(|&p| to_scope(p))
                .map(|p| p as u32)
                .collect();
            words.retain(|w| !left.contains(w));
        }
        words
    }
}

/// The ancestors of `pid` (its parent and up, until pid 1, a pid outside this pid
/// namespace, or one that cannot be read) and their process groups, at most
/// [`MAX_ANCESTORS`] of them, from `/proc/PID/stat`.
pub(super) fn ancestors_of(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut current = pid;
    for _ in 0..MAX_ANCESTORS {
        let Some(parent) = parent_of(current).filter(|&p| p > 1) else {
            break;
        };
        out.push(parent);
        if let Ok(group) = getpgid(Some(Pid::from_raw(parent)))
            && group.as_raw() > 1
        {
            out.push(group.as_raw());
        }
        current = parent;
    }
    out
}

/// The parent of `pid`: the field after the state in `/proc/PID/stat`, read after the
/// last `)` (the command name before it may hold spaces and parentheses).
pub(super) fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The signal calls and where each goes.
pub(super) fn rules(outside: &Outside) -> Vec<(i64, To<Label>)> {
    let target = To::Label(Label::SignalTarget);
    let mut rules = vec![
        (libc::SYS_kill, target),
        (libc::SYS_tkill, target),
        (libc::SYS_tgkill, target),
        (libc::SYS_rt_sigqueueinfo, target),
        (libc::SYS_rt_tgsigqueueinfo, target),
        (libc::SYS_fcntl, To::Label(Label::Fcntl)),
        (libc::SYS_pidfd_send_signal, ENOSYS),
    ];
    if !outside.groups().is_empty() {
        rules.push((libc::SYS_setpgid, To::Label(Label::Setpgid)));
    }
    rules
}

/// EPERM when the accumulator is one of `targets`, allow otherwise.
pub(super) fn targets(targets: &[u32]) -> Code<Label> {
    let mut code = Code::new();
    for (i, &t) in targets.iter().enumerate() {
        let miss = if i + 1 == targets.len() {
            ALLOW
        } else {
            To::Next
        };
        code.push((JEQ_K, t, EPERM, miss));
    }
    code
}

/// The signal calls: the pid (or thread group) in the first argument, to [`targets`]
/// of [`Outside::signal_targets`].
pub(super) fn signal_target() -> [Insn<Label>; 2] {
    to_targets(load_arg(0), Label::SignalTargets)
}

/// Loads a pid and goes to the compares at `targets`.
fn to_targets(load: Insn<Label>, targets: Label) -> [Insn<Label>; 2] {
    let check = To::Label(targets);
    // Either way: classic BPF's conditional jump, used as an unconditional one.
    [load, (JEQ_K, 0, check, check)]
}

/// `fcntl(fd, cmd, arg)`: `F_SETOWN_EX` and `F_SETLEASE` refused, `F_SETOWN`'s
/// argument (an `int` there) loaded and checked by [`targets`], every other command
/// allowed. A lease on a file of the user's outside the roots (any file it owns) would
/// stall every process outside that opens it for writing for the lease-break time.
pub(super) fn fcntl() -> Code<Label> {
    let mut code = vec![
        load_arg(1),
        (JEQ_K, F_SETOWN_EX, EPERM, To::Next),
        (JEQ_K, libc::F_SETLEASE as u32, EPERM, To::Next),
        (JEQ_K, libc::F_SETOWN as u32, To::Next, ALLOW),
    ];
    code.extend(to_targets(load_arg(2), Label::Targets));
    code
}

/// `setpgid(pid, pgid)`: EPERM when `pgid` is one of `groups` ([`Outside::groups`]).
/// `0` (a group of its own) and every group of the command's own stay allowed.
pub(super) fn setpgid(groups: &[u32]) -> Code<Label> {
    let mut code = vec![load_arg(1)];
    code.extend(targets(groups));
    code
}
