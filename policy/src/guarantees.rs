//! The guarantees a confined policy asks for, the kernel feature each one needs, and so
//! whether enforcement on a given kernel is `full`, `partial` or impossible.
//!
//! Which guarantees are *required* (their absence refuses to run) and which are only
//! *desired* (their absence makes enforcement `partial`) depends on the policy: a denied
//! network is required, so `--allow-tcp-connect` with the network denied needs Landlock
//! ABI 4 and never degrades to allowing every port.
//!
//! The launcher probes the kernel into [`KernelFacts`]; the runner learns the same facts
//! from the ruleset it actually applied. Both judge them here, so `confine` reports
//! exactly what the runner will enforce.

use crate::capability::CapabilitySet;
use crate::mode::Mode;
use crate::policy::{Network, Policy};
use crate::stage::{PidMode, TmpMode};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
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
    /// Whether seccomp filters (`SECCOMP_SET_MODE_FILTER`) are available.
    pub seccomp: bool,
    /// Whether the namespace stage can run: mount, IPC and (when asked) pid namespaces,
    /// with a user namespace when not root. Tried for real, since sysctls, AppArmor and
    /// container seccomp profiles can each refuse them.
    pub namespaces: bool,
    /// Whether the runner's metadata supervisor can run: a seccomp filter with a user
    /// notification listener can be installed (Linux 5.0+; refused when a filter above
    /// already has one, as under another supervisor). Tried for real, and only when the
    /// namespace stage cannot run; absent from older requests, hence the default.
    #[serde(default)]
    pub supervisor: bool,
    /// Whether that supervisor can also hold the protected paths: it performs every
    /// call that can write or replace a name itself and hands the command the descriptor
    /// it opened (`SECCOMP_IOCTL_NOTIF_ADDFD` with `SECCOMP_ADDFD_FLAG_SEND`, Linux
    /// 5.14). Tried for real with `supervisor`; absent from older requests.
    #[serde(default)]
    pub supervisor_writes: bool,
}

impl KernelFacts {
    /// Whether a kernel with these facts gives at least what one with `promised` would:
    /// every guarantee's availability only grows with each fact, so every guarantee and
    /// the enforcement judged on `promised` hold on `self` too. The runner's one check
    /// that it is not about to start the target with less than the executor was told.
    pub fn covers(&self, promised: &KernelFacts) -> bool {
        self.landlock_abi >= promised.landlock_abi
            && (self.seccomp || !promised.seccomp)
            && (self.namespaces || !promised.namespaces)
            && (self.supervisor || !promised.supervisor)
            && (self.supervisor_writes || !promised.supervisor_writes)
    }
}

/// A kernel feature a guarantee depends on.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Feature {
    /// Landlock at this ABI version or newer.
    LandlockAbi(u32),
    /// seccomp BPF filters (Linux 3.5+).
    Seccomp,
    /// The launcher's namespace stage (user, mount, IPC and pid namespaces: a read-only
    /// mount of everything but the writable roots), where the machine allows it.
    Namespaces,
    /// Plain system calls every supported kernel has (capability sets, fd flags).
    Always,
    /// The namespace stage, or else Landlock at this ABI version: either holds it.
    NamespacesOrLandlockAbi(u32),
    /// The namespace stage, or else the runner's metadata supervisor (seccomp user
    /// notification): either holds it.
    NamespacesOrSupervisor,
    /// The namespace stage, or else the supervisor performing the calls that write or
    /// replace names (seccomp user notification handing descriptors over).
    NamespacesOrWriteSupervisor,
}

impl Feature {
    pub fn available(self, facts: &KernelFacts) -> bool {
        match self {
            Feature::LandlockAbi(n) => facts.landlock_abi >= n,
            Feature::Seccomp => facts.seccomp,
            Feature::Namespaces => facts.namespaces,
            Feature::Always => true,
            Feature::NamespacesOrLandlockAbi(n) => facts.namespaces || facts.landlock_abi >= n,
            Feature::NamespacesOrSupervisor => facts.namespaces || facts.supervisor,
            Feature::NamespacesOrWriteSupervisor => {
                facts.namespaces || (facts.supervisor && facts.supervisor_writes)
            }
        }
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Feature::LandlockAbi(n) => write!(f, "landlock-abi-{n}"),
            Feature::Seccomp => f.write_str("seccomp"),
            Feature::Namespaces => f.write_str("namespace-stage"),
            Feature::Always => f.write_str("none"),
            Feature::NamespacesOrLandlockAbi(n) => {
                write!(f, "namespace-stage or landlock-abi-{n}")
            }
            Feature::NamespacesOrSupervisor => f.write_str("namespace-stage or seccomp-notify"),
            Feature::NamespacesOrWriteSupervisor => {
                f.write_str("namespace-stage or seccomp-notify-addfd")
            }
        }
    }
}

/// What a policy asks of the sandbox: the part of a [`Policy`] guarantees depend on.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Asks {
    pub mode: Mode,
    pub network: Network,
    /// Some outgoing TCP ports are allowed while the network is denied.
    pub tcp_connect: bool,
    /// The network is reached by name, through the filtering proxy (`--allow-domain`).
    pub domains: bool,
    pub allow_unix_sockets: bool,
    /// Protected paths: required when named by the caller, desired for the defaults.
    pub protect: Requirement,
    /// A private `/tmp` was asked for (required).
    pub private_tmp: bool,
    pub pids: PidMode,
    /// Whether the namespace stage may run at all (`--no-stage` says no).
    pub stage: bool,
    /// Capabilities the command keeps (`--keep-capability`): then it is not asked to
    /// hold none.
    pub keep_capabilities: CapabilitySet,
}

impl Asks {
    pub fn of(policy: &Policy) -> Asks {
        Asks {
            mode: policy.mode,
            network: policy.network,
            tcp_connect: policy.network == Network::Deny
                && (!policy.allow_tcp_connect.is_empty() || policy.allow_dns),
            domains: policy.domains.is_some(),
            allow_unix_sockets: policy.allow_unix_sockets,
            protect: if policy.protect_explicit {
                Requirement::Required
            } else if policy.default_protect && policy.mode == Mode::WorkspaceWrite {
                Requirement::Desired
            } else {
                Requirement::NotApplicable
            },
            private_tmp: policy.tmp == TmpMode::Private,
            pids: policy.pids,
            stage: policy.stage,
            keep_capabilities: policy.kept_capabilities(),
        }
    }

    /// Whether the namespace stage has anything to do for this policy.
    pub fn wants_stage(&self) -> bool {
        self.stage
            && Guarantee::ALL.iter().any(|g| {
                // The stage is preferred to the supervisor where both could hold one.
                matches!(
                    g.needs(self),
                    Feature::Namespaces
                        | Feature::NamespacesOrSupervisor
                        | Feature::NamespacesOrWriteSupervisor
                ) && g.requirement(self) != Requirement::NotApplicable
            })
    }

    /// Whether the runner's metadata supervisor has anything to do for this policy where
    /// the namespace stage does not run.
    pub fn wants_supervisor(&self) -> bool {
        Guarantee::ALL.iter().any(|g| {
            matches!(
                g.needs(self),
                Feature::NamespacesOrSupervisor | Feature::NamespacesOrWriteSupervisor
            ) && g.requirement(self) != Requirement::NotApplicable
        })
    }

    /// Whether that supervisor also holds the protected paths (their contents and
    /// names) for this policy.
    pub fn wants_write_supervisor(&self) -> bool {
        Guarantee::ProtectedPaths.needs(self) == Feature::NamespacesOrWriteSupervisor
            && Guarantee::ProtectedPaths.requirement(self) != Requirement::NotApplicable
    }

    /// Whether the stage gives the command a network namespace of its own (as
    /// [`crate::Policy::own_network`] decides).
    pub fn own_network(&self) -> bool {
        self.network == Network::Deny && (self.domains || !self.tcp_connect)
    }

    /// What `mode` asks for when the caller passes no other flag (`stockade probe`).
    pub fn defaults(mode: Mode) -> Asks {
        Asks {
            mode,
            network: Network::default_for(mode),
            tcp_connect: false,
            domains: false,
            allow_unix_sockets: false,
            protect: if mode == Mode::WorkspaceWrite {
                Requirement::Desired
            } else {
                Requirement::NotApplicable
            },
            private_tmp: false,
            pids: if mode.is_confined() {
                PidMode::default()
            } else {
                PidMode::Share
            },
            stage: mode.is_confined(),
            keep_capabilities: CapabilitySet::default(),
        }
    }
}

/// One property of the sandbox a caller can rely on.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
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
    /// With the network denied, no socket but `AF_UNIX` can be created (seccomp); with
    /// allowed TCP ports, connecting to any other port is denied (Landlock ABI 4), and
    /// what Landlock's port rules do not see is refused (seccomp): TCP Fast Open
    /// (`MSG_FASTOPEN`, `TCP_FASTOPEN_CONNECT`) and `listen`, which binds an unbound
    /// socket to a free port by itself.
    Network,
    /// No `AF_UNIX` socket can be created, so no host service (D-Bus, systemd, docker,
    /// `/dev/log`) can be reached through one; unix stream and seqpacket pairs still
    /// work, datagram pairs (which address any pathname socket) do not (seccomp).
    UnixSockets,
    /// No process outside the sandbox can be signalled (Landlock ABI 6 scope). Without
    /// it the seccomp filter still refuses the signals it can name by pid: to `-1`, the
    /// runner's parent and the parent's process group (the note says what stays open).
    Signals,
    /// No abstract unix socket created outside the sandbox can be connected to (ABI 6).
    AbstractSockets,
    /// Kernel attack surface and escape hatches are filtered: ptrace, mount, namespaces,
    /// bpf, keyrings, io_uring, TIOCSTI, x32 and foreign architectures, ... (seccomp).
    SyscallFilter,
    /// The target holds no capability, even when started as root. Not requested when
    /// the policy keeps some (`--keep-capability`): every other one is still dropped,
    /// and the report's note names those kept and what they open.
    Capabilities,
    /// No inherited descriptor above 2 reaches the target unless the request keeps it.
    Fds,
    /// No set-uid or set-gid bit can be set (by chmod or on creation) and no extended
    /// attribute or ACL written or removed, anywhere (seccomp).
    SetidAndXattrs,
    /// No metadata (mode bits, owner, times) changes outside the writable roots. In
    /// read-only mode every such call is refused (seccomp); in workspace-write a
    /// read-only mount of the rest holds it (the namespace stage), or else the runner's
    /// supervisor, which decides each metadata call by the object it reaches.
    Metadata,
    /// No call addressed by pid, process group or user (prlimit, setpriority, the
    /// sched_set* calls, ioprio_set, migrate_pages, move_pages, process_madvise, kcmp,
    /// ...) reaches a process other than the caller itself (seccomp).
    Processes,
    /// No System V IPC object or POSIX message queue can be created or used, so none
    /// shared with processes outside is reached and none outlives the run (seccomp).
    Ipc,
    /// The hidden paths (credential stores, stockade's control directories, `--hide`)
    /// cannot be read (Landlock ABI 1: carved out of the read grants; under the namespace
    /// stage, each path the runner finds covered by the stage's empty read-only mount is
    /// hidden by that mount instead, and the carve-out keeps every other).
    HiddenPaths,
    /// Protected paths inside the writable roots (`.git/hooks`, `.git/config`, `.envrc`,
    /// shell start-up files, `--protect`) cannot be changed, removed or renamed away
    /// (namespace stage: read-only binds).
    ProtectedPaths,
    /// `/tmp` is the command's own, empty and gone with it (namespace stage).
    PrivateTmp,
    /// No process outside the sandbox can be seen or addressed by pid, and System V IPC
    /// objects are the command's own (pid and IPC namespaces).
    PidIsolation,
    /// With `--allow-domain`, the filtering proxy is the command's only way out: its
    /// network namespace has nothing but loopback, where only the proxy listens, so
    /// every connection is decided by name whatever the command does (namespace stage).
    /// Without it, the proxy's port is the one TCP port the command may connect to
    /// (`network`), on any host: clients that honour the proxy variables are decided by
    /// name, a command that connects to that port of another host directly is not.
    DomainFilter,
}

impl Guarantee {
    pub const ALL: [Guarantee; 20] = [
        Guarantee::FilesystemWrites,
        Guarantee::Refer,
        Guarantee::Truncate,
        Guarantee::DeviceIoctl,
        Guarantee::Network,
        Guarantee::UnixSockets,
        Guarantee::Signals,
        Guarantee::AbstractSockets,
        Guarantee::SyscallFilter,
        Guarantee::Capabilities,
        Guarantee::Fds,
        Guarantee::SetidAndXattrs,
        Guarantee::Metadata,
        Guarantee::Processes,
        Guarantee::Ipc,
        Guarantee::HiddenPaths,
        Guarantee::ProtectedPaths,
        Guarantee::PrivateTmp,
        Guarantee::PidIsolation,
        Guarantee::DomainFilter,
    ];

    /// The stable name used in JSON and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Guarantee::FilesystemWrites => "filesystemWrites",
            Guarantee::Refer => "refer",
            Guarantee::Truncate => "truncate",
            Guarantee::DeviceIoctl => "deviceIoctl",
            Guarantee::Network => "network",
            Guarantee::UnixSockets => "unixSockets",
            Guarantee::Signals => "signals",
            Guarantee::AbstractSockets => "abstractSockets",
            Guarantee::SyscallFilter => "syscallFilter",
            Guarantee::Capabilities => "capabilities",
            Guarantee::Fds => "fds",
            Guarantee::SetidAndXattrs => "setidAndXattrs",
            Guarantee::Metadata => "metadata",
            Guarantee::Processes => "processes",
            Guarantee::Ipc => "ipc",
            Guarantee::HiddenPaths => "hiddenPaths",
            Guarantee::ProtectedPaths => "protectedPaths",
            Guarantee::PrivateTmp => "privateTmp",
            Guarantee::PidIsolation => "pidIsolation",
            Guarantee::DomainFilter => "domainFilter",
        }
    }

    /// Whether this guarantee governs a *file effect*: what a command can do to files
    /// (write, truncate, link/rename, device ioctl, ...). Only a missing file effect makes
    /// enforcement `partial`, which is what `partial` means to executors: the backend
    /// cannot govern every file effect the mode promises. Network, process and the other
    /// facts stay in the `guarantees` object without touching `enforcement`. A new
    /// guarantee about files belongs in the `true` arm.
    pub fn is_file_effect(self) -> bool {
        match self {
            Guarantee::FilesystemWrites
            | Guarantee::Refer
            | Guarantee::Truncate
            | Guarantee::DeviceIoctl
            | Guarantee::SetidAndXattrs
            | Guarantee::Metadata
            | Guarantee::HiddenPaths
            | Guarantee::ProtectedPaths => true,
            Guarantee::Processes
            | Guarantee::Ipc
            | Guarantee::PrivateTmp
            | Guarantee::PidIsolation
            | Guarantee::DomainFilter => false,
            Guarantee::Network
            | Guarantee::UnixSockets
            | Guarantee::Signals
            | Guarantee::AbstractSockets
            | Guarantee::SyscallFilter
            | Guarantee::Capabilities
            | Guarantee::Fds => false,
        }
    }

    /// The kernel feature this guarantee needs under `asks`.
    pub fn needs(self, asks: &Asks) -> Feature {
        match self {
            Guarantee::FilesystemWrites => Feature::LandlockAbi(1),
            Guarantee::Refer => Feature::LandlockAbi(2),
            Guarantee::Truncate => Feature::LandlockAbi(3),
            Guarantee::DeviceIoctl => Feature::LandlockAbi(5),
            // Port rules need Landlock's TCP access rights; the socket filter (seccomp)
            // is needed either way and is required through `SyscallFilter`.
            Guarantee::Network if asks.tcp_connect => Feature::LandlockAbi(4),
            // Through the proxy: a network namespace with only loopback holds it, or
            // else a port rule allowing the proxy's port only.
            Guarantee::Network if asks.domains => Feature::NamespacesOrLandlockAbi(4),
            Guarantee::Network | Guarantee::UnixSockets | Guarantee::SyscallFilter => {
                Feature::Seccomp
            }
            Guarantee::Signals | Guarantee::AbstractSockets => Feature::LandlockAbi(6),
            Guarantee::Capabilities | Guarantee::Fds => Feature::Always,
            Guarantee::SetidAndXattrs | Guarantee::Processes | Guarantee::Ipc => Feature::Seccomp,
            // Read-only mode refuses every metadata call; workspace-write must allow them
            // inside the writable roots, and a filter cannot tell where a path leads: the
            // stage's read-only mounts can, or the supervisor the filter hands them to.
            Guarantee::Metadata => match asks.mode {
                Mode::ReadOnly => Feature::Seccomp,
                _ => Feature::NamespacesOrSupervisor,
            },
            Guarantee::HiddenPaths => Feature::LandlockAbi(1),
            // The stage's read-only binds, or the supervisor performing every call that
            // writes or replaces a name (a protected file sits in a directory that must
            // stay writable: Landlock cannot hold it).
            Guarantee::ProtectedPaths => Feature::NamespacesOrWriteSupervisor,
            Guarantee::PrivateTmp | Guarantee::PidIsolation | Guarantee::DomainFilter => {
                Feature::Namespaces
            }
        }
    }

    /// How much a policy asking `asks` depends on this guarantee.
    pub fn requirement(self, asks: &Asks) -> Requirement {
        if !asks.mode.is_confined() {
            return Requirement::NotApplicable;
        }
        match self {
            // Without filesystem rules there is no sandbox at all.
            Guarantee::FilesystemWrites => Requirement::Required,
            Guarantee::Refer | Guarantee::Truncate | Guarantee::DeviceIoctl => Requirement::Desired,
            // A denied network the kernel cannot deny is a lie, never an allow-all.
            Guarantee::Network => match asks.network {
                Network::Deny => Requirement::Required,
                Network::Allow => Requirement::NotApplicable,
            },
            Guarantee::UnixSockets if asks.allow_unix_sockets => Requirement::NotApplicable,
            Guarantee::UnixSockets => Requirement::Required,
            // Scopes arrived late (6.12); older kernels still confine files and syscalls.
            Guarantee::Signals | Guarantee::AbstractSockets => Requirement::Desired,
            // Keeping some was asked for: "holds none" is not (the rest are dropped all
            // the same, and a runner that cannot drop them fails).
            Guarantee::Capabilities if !asks.keep_capabilities.is_empty() => {
                Requirement::NotApplicable
            }
            Guarantee::SyscallFilter | Guarantee::Capabilities | Guarantee::Fds => {
                Requirement::Required
            }
            Guarantee::SetidAndXattrs | Guarantee::Processes | Guarantee::Ipc => {
                Requirement::Required
            }
            // Desired: where the namespace stage cannot run, workspace-write still runs,
            // reported `partial`, rather than not at all.
            Guarantee::Metadata => Requirement::Desired,
            // The same rules as the filesystem ones: a sandbox that let every command
            // read the others' requests would leak their secrets.
            Guarantee::HiddenPaths => Requirement::Required,
            Guarantee::ProtectedPaths => asks.protect,
            Guarantee::PrivateTmp if asks.private_tmp => Requirement::Required,
            Guarantee::PrivateTmp => Requirement::NotApplicable,
            Guarantee::PidIsolation => match asks.pids {
                PidMode::Isolate => Requirement::Required,
                PidMode::IsolateWhereAvailable => Requirement::Desired,
                PidMode::Share => Requirement::NotApplicable,
            },
            // Desired: without namespaces the port rule still confines the command to
            // the proxy's port, and the report says what that leaves open.
            Guarantee::DomainFilter if asks.domains => Requirement::Desired,
            Guarantee::DomainFilter => Requirement::NotApplicable,
        }
    }
}

/// How much a mode depends on a guarantee.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// Cannot run without it: its absence is a runner failure / `SANDBOX_UNAVAILABLE`.
    Required,
    /// Enforced when the kernel can; its absence makes enforcement `partial` when it is
    /// a file effect ([`Guarantee::is_file_effect`]), and is reported in `guarantees`
    /// either way.
    Desired,
    /// The policy does not ask for it.
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
    pub needs: Feature,
    pub enforced: bool,
}

/// The verdict for one mode on one kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModeVerdict {
    /// Not confined at all (`danger-full-access`).
    Unconfined,
    /// Confined; `Partial` when some desired file-effect guarantee is unavailable.
    Confined(Enforcement),
    /// A required guarantee is unavailable: the mode must not run.
    Unavailable { missing: Vec<(Guarantee, Feature)> },
}

/// Assesses every guarantee a policy asking `asks` depends on against `facts`.
pub fn assess(asks: &Asks, facts: &KernelFacts) -> Vec<Assessment> {
    Guarantee::ALL
        .into_iter()
        .map(|g| {
            let (requirement, needs) = (g.requirement(asks), g.needs(asks));
            Assessment {
                guarantee: g,
                requirement,
                needs,
                enforced: requirement != Requirement::NotApplicable && needs.available(facts),
            }
        })
        .collect()
}

/// Judges whether a policy asking `asks` can run on a kernel with `facts`, and how
/// completely.
pub fn verdict(asks: &Asks, facts: &KernelFacts) -> ModeVerdict {
    if !asks.mode.is_confined() {
        return ModeVerdict::Unconfined;
    }
    let assessed = assess(asks, facts);
    let missing: Vec<_> = assessed
        .iter()
        .filter(|a| a.requirement == Requirement::Required && !a.enforced)
        .map(|a| (a.guarantee, a.needs))
        .collect();
    if !missing.is_empty() {
        return ModeVerdict::Unavailable { missing };
    }
    let partial = assessed.iter().any(|a| {
        a.requirement == Requirement::Desired && !a.enforced && a.guarantee.is_file_effect()
    });
    ModeVerdict::Confined(if partial {
        Enforcement::Partial
    } else {
        Enforcement::Full
    })
}

/// The guarantees enforced for `asks` on `facts`: what the launcher reports, and what
/// the runner must achieve before it starts the target.
pub fn enforced(asks: &Asks, facts: &KernelFacts) -> Vec<Guarantee> {
    assess(asks, facts)
        .into_iter()
        .filter(|a| a.enforced)
        .map(|a| a.guarantee)
        .collect()
}

/// How one guarantee stands, as shown in ConfinedArgv's `guarantees` and by
/// `stockade probe --json`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GuaranteeStatus {
    /// The kernel enforces it for this command.
    Enforced,
    /// The policy asks for it but the kernel lacks the feature it needs.
    Unavailable,
    /// The policy does not ask for it (for example `network` with `--network allow`).
    NotRequested,
}

impl GuaranteeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            GuaranteeStatus::Enforced => "enforced",
            GuaranteeStatus::Unavailable => "unavailable",
            GuaranteeStatus::NotRequested => "not-requested",
        }
    }
}

/// One entry of the `guarantees` object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GuaranteeReport {
    pub status: GuaranteeStatus,
    /// Whether the policy cannot run without it (`false`: its absence is `partial` for a
    /// file effect, and only reported otherwise).
    pub required: bool,
    /// The kernel feature it needs, e.g. `landlock-abi-4`, `seccomp`, `none`.
    pub needs: String,
    /// What the status does not say: the limits of a guarantee as given here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The limits of `guarantee` under `asks`, with `status`, where there are some worth
/// saying in the report itself. `metadata_held`: whether the metadata guarantee is
/// enforced in the same report.
fn note(
    guarantee: Guarantee,
    asks: &Asks,
    status: GuaranteeStatus,
    metadata_held: bool,
    staged: bool,
) -> Option<String> {
    if guarantee == Guarantee::Capabilities && asks.mode.is_confined() {
        return kept_capabilities_note(asks.keep_capabilities, metadata_held);
    }
    let text = match (guarantee, asks.mode, status) {
        // Held by the runner's supervisor instead of the stage's mounts.
        (Guarantee::Metadata, Mode::WorkspaceWrite, GuaranteeStatus::Enforced) if !staged => Some(
            "outside the writable roots and on protected paths, by path or descriptor: without the namespace stage the runner's supervisor receives every mode, owner and time change (seccomp user notification), finds the object itself and makes the change only inside the writable roots, on the object it checked; descriptors on private objects (pipes, sockets, deleted files) are the command's own; a process still running after the command has exited gets ENOSYS for these calls; chattr's ioctls and file_setattr are refused (EOPNOTSUPP)",
        ),
        // The writable roots' own directories are the roots' (inside them), so no mount
        // holds their mode or owner; for a shared one the caller owns, the change is
        // undone, not prevented (see `stage_report`).
        (Guarantee::Metadata, Mode::WorkspaceWrite, GuaranteeStatus::Enforced) => Some(
            "outside the writable roots, by path and through the descriptors the command inherits (stdin, stdout, stderr, --keep-fd), which the caller opened on its own read-write mounts: a directory, a pseudo-terminal, a named pipe, /dev/null (zero, full, random, urandom) or a file opened only for reading is opened again through the read-only mounts; for any other outside the roots (a log file stdout appends to, another device or terminal) the runner also starts its metadata supervisor (seccomp user notification), which refuses every mode, owner and time change outside the roots, through a descriptor or its /proc/self/fd and /dev/stdout names (EPERM); where the kernel refuses the supervisor's filter (before Linux 5.0, under another supervisor) or Yama's ptrace_scope is 2 or more, the runner names those descriptors in its status record and the run is then partial (metadataOpen in stockade run --json and classify); pipes and sockets are private; a shared writable root the caller owns (/tmp, /var/tmp, /dev/shm as root) can have its own mode and owner changed: the stage looks every 20 ms, puts them back and reports the change (outcome tampered): other processes can see a change for up to that long, and a command that changes them in a loop keeps them changed for part of its run",
        ),
        // Held by the runner's supervisor instead of the stage's read-only binds.
        (Guarantee::ProtectedPaths, _, GuaranteeStatus::Enforced) if !staged => Some(
            "without the namespace stage the runner's supervisor receives every call that writes or replaces a name (writing opens, rename, link, symlink, unlink, mkdir, mknod, truncate; seccomp user notification) and refuses those on a protected path with the stage's answers (EROFS on or beneath one, also through a hard link made before the run; EBUSY for removing or replacing one or a directory holding one; EXDEV for a hard link to one); the rest it performs itself on the objects it checked, in a thread restricted with the command's Landlock ruleset, and hands the opened descriptor over",
        ),
        (Guarantee::ProtectedPaths, _, GuaranteeStatus::Unavailable) => Some(
            "nothing holds the protected paths' contents (no namespace stage, and no supervisor that can hand descriptors over: Linux 5.14): stockade run reports each change after the command (protectedChanged, tampered), not undone",
        ),
        (Guarantee::Metadata, Mode::WorkspaceWrite, GuaranteeStatus::Unavailable) => Some(
            "without the namespace stage, only stockade run puts a shared writable root's own mode and owner (/tmp as root) back, once the command has settled",
        ),
        // A pathname unix socket is reached through the filesystem, not the network
        // namespace: a service behind one (D-Bus, docker) connects wherever it likes.
        (Guarantee::DomainFilter, _, GuaranteeStatus::Enforced) if asks.allow_unix_sockets => Some(
            "the command's network namespace has only loopback, where only the proxy listens: every TCP/IP connection it makes is decided by name; with --allow-unix-sockets it can still reach services outside through their unix sockets (a D-Bus, systemd or docker socket), which connect wherever they like",
        ),
        (Guarantee::DomainFilter, _, GuaranteeStatus::Enforced) => Some(
            "the command's network namespace has only loopback, where only the proxy listens: every connection it makes is decided by name",
        ),
        (Guarantee::DomainFilter, _, GuaranteeStatus::Unavailable) => Some(
            "without a network namespace the command may connect to the proxy's port number on any host (Landlock rules name ports, not hosts): clients that use the proxy are decided by name, a connection made around it to that port elsewhere is not",
        ),
        // Below ABI 6 the filter's rules by pid are what is left (see the runner's
        // seccomp signals module).
        (Guarantee::Signals, _, GuaranteeStatus::Unavailable) => Some(
            "without the Landlock signal scope the syscall filter refuses signals to every process (-1), to the runner's parent and every ancestor above it (stockade run, the proxy host, the executor that spawned the argv, its own parents) and to their process groups, and kill(0) when the command starts in the parent's group; any other process of the same user (a sibling, an ancestor's other threads) can still be signalled by its own pid unless the namespace stage's pid namespace hides it (pidIsolation)",
        ),
        _ => None,
    };
    text.map(str::to_string)
}

/// What a command keeping `kept` holds and can do with it, with the metadata guarantee
/// held (`metadata_held`) or not; `None` when it keeps nothing.
pub fn kept_capabilities_note(kept: CapabilitySet, metadata_held: bool) -> Option<String> {
    if kept.is_empty() {
        return None;
    }
    let mut text = format!(
        "the command keeps {} (--keep-capability) when started as root; every other capability is dropped. ",
        kept.names()
    );
    let opens: Vec<&str> = kept.iter().map(|c| c.opens()).collect();
    text.push_str(&opens.join("; "));
    text.push_str(
        ". The filesystem rules still hold: no write outside the writable roots, no read of a hidden path",
    );
    if kept.iter().any(|c| c.changes_metadata_only()) {
        text.push_str(if metadata_held {
            "; outside the writable roots no owner or mode can change (metadata)"
        } else {
            "; with metadata unavailable (no namespace stage), owners and modes can change outside the writable roots too"
        });
    }
    Some(text)
}

/// The `guarantees` object: every guarantee by its stable name.
pub fn report(asks: &Asks, facts: &KernelFacts) -> BTreeMap<String, GuaranteeReport> {
    let assessed = assess(asks, facts);
    let metadata_held = assessed
        .iter()
        .any(|a| a.guarantee == Guarantee::Metadata && a.enforced);
    assessed
        .into_iter()
        .map(|a| {
            let status = match (a.requirement, a.enforced) {
                (Requirement::NotApplicable, _) => GuaranteeStatus::NotRequested,
                (_, true) => GuaranteeStatus::Enforced,
                (_, false) => GuaranteeStatus::Unavailable,
            };
            (
                a.guarantee.name().to_string(),
                GuaranteeReport {
                    status,
                    required: a.requirement == Requirement::Required,
                    needs: a.needs.to_string(),
                    note: note(a.guarantee, asks, status, metadata_held, facts.namespaces),
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn abi(n: u32) -> KernelFacts {
        KernelFacts {
            landlock_abi: n,
            seccomp: true,
            namespaces: true,
            supervisor: false,
            supervisor_writes: false,
        }
    }

    fn defaults(mode: Mode) -> Asks {
        Asks::defaults(mode)
    }

    #[test]
    fn no_landlock_means_unavailable() {
        for mode in [Mode::ReadOnly, Mode::WorkspaceWrite] {
            match verdict(&defaults(mode), &abi(0)) {
                ModeVerdict::Unavailable { missing } => {
                    assert_eq!(
                        missing,
                        vec![
                            (Guarantee::FilesystemWrites, Feature::LandlockAbi(1)),
                            (Guarantee::HiddenPaths, Feature::LandlockAbi(1))
                        ]
                    )
                }
                v => panic!("{v:?}"),
            }
        }
    }

    #[test]
    fn abis_below_5_are_partial_and_abi_5_is_full() {
        for n in 1..5 {
            assert_eq!(
                verdict(&defaults(Mode::WorkspaceWrite), &abi(n)),
                ModeVerdict::Confined(Enforcement::Partial),
                "abi {n}"
            );
        }
        // ABI 5 governs every file effect; the missing scopes (signals, abstract
        // sockets) are not file effects: `full`, with them `unavailable` in the report.
        for n in [5, 6, TESTED_LANDLOCK_ABI, 10] {
            assert_eq!(
                verdict(&defaults(Mode::ReadOnly), &abi(n)),
                ModeVerdict::Confined(Enforcement::Full)
            );
        }
    }

    #[test]
    fn no_seccomp_means_unavailable_never_unfiltered() {
        let facts = KernelFacts {
            landlock_abi: 7,
            seccomp: false,
            namespaces: true,
            supervisor: false,
            supervisor_writes: false,
        };
        let ModeVerdict::Unavailable { missing } = verdict(&defaults(Mode::ReadOnly), &facts)
        else {
            panic!()
        };
        let names: Vec<_> = missing.iter().map(|(g, _)| g.name()).collect();
        assert_eq!(
            names,
            [
                "network",
                "unixSockets",
                "syscallFilter",
                "setidAndXattrs",
                "processes",
                "ipc"
            ]
        );
    }

    #[test]
    fn workspace_write_metadata_is_unavailable_without_the_namespace_stage() {
        let asks = defaults(Mode::WorkspaceWrite);
        let unstaged = KernelFacts {
            namespaces: false,
            ..abi(TESTED_LANDLOCK_ABI)
        };
        assert_eq!(
            verdict(&asks, &unstaged),
            ModeVerdict::Confined(Enforcement::Partial)
        );
        // With the stage, everything outside the writable roots is mounted read-only.
        assert_eq!(
            verdict(&asks, &abi(TESTED_LANDLOCK_ABI)),
            ModeVerdict::Confined(Enforcement::Full)
        );
        assert_eq!(
            report(&asks, &abi(TESTED_LANDLOCK_ABI))["metadata"].status,
            GuaranteeStatus::Enforced
        );
        let r = report(&asks, &unstaged);
        assert_eq!(r["metadata"].status, GuaranteeStatus::Unavailable);
        assert_eq!(r["metadata"].needs, "namespace-stage or seccomp-notify");
        assert!(!r["metadata"].required);
        for held in ["setidAndXattrs", "processes", "ipc"] {
            assert_eq!(r[held].status, GuaranteeStatus::Enforced, "{held}");
            assert!(r[held].required, "{held}");
        }
        // Read-only mode refuses every metadata call: nothing is missing there.
        let r = report(&defaults(Mode::ReadOnly), &abi(TESTED_LANDLOCK_ABI));
        assert_eq!(r["metadata"].status, GuaranteeStatus::Enforced);
        assert_eq!(r["metadata"].needs, "seccomp");
    }

    #[test]
    fn the_supervisor_holds_metadata_where_the_stage_does_not_run() {
        let asks = defaults(Mode::WorkspaceWrite);
        let supervised = KernelFacts {
            namespaces: false,
            supervisor: true,
            supervisor_writes: true,
            ..abi(TESTED_LANDLOCK_ABI)
        };
        let r = report(&asks, &supervised);
        assert_eq!(r["metadata"].status, GuaranteeStatus::Enforced);
        assert!(
            r["metadata"]
                .note
                .as_deref()
                .unwrap()
                .contains("supervisor")
        );
        // Protected paths: held where the supervisor can hand descriptors over (it
        // performs every write of a name), else they need the stage's binds: partial.
        assert_eq!(r["protectedPaths"].status, GuaranteeStatus::Enforced);
        assert_eq!(
            r["protectedPaths"].needs,
            "namespace-stage or seccomp-notify-addfd"
        );
        assert_eq!(
            verdict(&asks, &supervised),
            ModeVerdict::Confined(Enforcement::Full)
        );
        assert!(asks.wants_write_supervisor());
        let metadata_only = KernelFacts {
            supervisor_writes: false,
            ..supervised
        };
        let r = report(&asks, &metadata_only);
        assert_eq!(r["metadata"].status, GuaranteeStatus::Enforced);
        assert_eq!(r["protectedPaths"].status, GuaranteeStatus::Unavailable);
        assert_eq!(
            verdict(&asks, &metadata_only),
            ModeVerdict::Confined(Enforcement::Partial)
        );
        assert!(!metadata_only.covers(&supervised));
        // Without protected paths asked for (--no-stage): full.
        let no_stage = Asks {
            stage: false,
            protect: Requirement::NotApplicable,
            ..asks
        };
        assert_eq!(
            verdict(&no_stage, &supervised),
            ModeVerdict::Confined(Enforcement::Full)
        );
        assert!(no_stage.wants_supervisor() && !no_stage.wants_stage());
        // A runner that could not install it gives less than promised.
        let unsupervised = KernelFacts {
            supervisor: false,
            supervisor_writes: false,
            ..supervised
        };
        assert!(!unsupervised.covers(&supervised));
        // The stage is still preferred where it can run, and read-only mode needs
        // neither.
        assert!(asks.wants_stage());
        assert!(!defaults(Mode::ReadOnly).wants_supervisor());
    }

    #[test]
    fn tcp_ports_with_network_denied_require_landlock_abi_4() {
        let asks = Asks {
            tcp_connect: true,
            ..defaults(Mode::WorkspaceWrite)
        };
        assert_eq!(
            verdict(&asks, &abi(3)),
            ModeVerdict::Unavailable {
                missing: vec![(Guarantee::Network, Feature::LandlockAbi(4))]
            }
        );
        assert_eq!(
            verdict(&asks, &abi(4)),
            ModeVerdict::Confined(Enforcement::Partial)
        );
        // Without port rules the socket filter alone denies the network.
        assert_eq!(
            verdict(&defaults(Mode::WorkspaceWrite), &abi(3)),
            ModeVerdict::Confined(Enforcement::Partial)
        );
    }

    #[test]
    fn report_names_every_guarantee_with_its_feature() {
        let asks = Asks {
            network: Network::Allow,
            allow_unix_sockets: true,
            ..defaults(Mode::ReadOnly)
        };
        let r = report(&asks, &abi(5));
        assert_eq!(r.len(), Guarantee::ALL.len());
        assert_eq!(r["filesystemWrites"].status, GuaranteeStatus::Enforced);
        assert!(r["filesystemWrites"].required);
        assert_eq!(r["signals"].status, GuaranteeStatus::Unavailable);
        assert_eq!(r["signals"].needs, "landlock-abi-6");
        // What the filter still refuses, and what stays open, is said.
        let note = r["signals"].note.as_deref().unwrap_or_default();
        assert!(
            note.contains("parent") && note.contains("own pid"),
            "{note}"
        );
        assert_eq!(report(&asks, &abi(6))["signals"].note, None);
        assert_eq!(r["network"].status, GuaranteeStatus::NotRequested);
        assert_eq!(r["unixSockets"].status, GuaranteeStatus::NotRequested);
        assert_eq!(r["syscallFilter"].needs, "seccomp");
        assert_eq!(r["capabilities"].needs, "none");
        assert_eq!(r["fds"].status, GuaranteeStatus::Enforced);
        let enforced = enforced(&asks, &abi(5));
        assert!(!enforced.contains(&Guarantee::Signals));
        assert!(enforced.contains(&Guarantee::DeviceIoctl));
    }

    #[test]
    fn covering_facts_give_every_promised_guarantee() {
        let no_seccomp = KernelFacts {
            landlock_abi: 7,
            seccomp: false,
            namespaces: true,
            supervisor: false,
            supervisor_writes: false,
        };
        let all = [abi(0), abi(1), abi(3), abi(5), abi(6), abi(7), no_seccomp];
        for asks in [
            defaults(Mode::ReadOnly),
            defaults(Mode::WorkspaceWrite),
            Asks {
                tcp_connect: true,
                ..defaults(Mode::WorkspaceWrite)
            },
        ] {
            for promised in all {
                for achieved in all {
                    if !achieved.covers(&promised) {
                        continue;
                    }
                    let given = enforced(&asks, &achieved);
                    for g in enforced(&asks, &promised) {
                        assert!(given.contains(&g), "{g:?}: {promised:?} -> {achieved:?}");
                    }
                    if verdict(&asks, &promised) == ModeVerdict::Confined(Enforcement::Full) {
                        assert_eq!(
                            verdict(&asks, &achieved),
                            ModeVerdict::Confined(Enforcement::Full)
                        );
                    }
                }
            }
        }
        assert!(!abi(5).covers(&abi(6)));
        assert!(!no_seccomp.covers(&abi(7)));
    }

    #[test]
    fn only_file_effects_make_enforcement_partial() {
        let asks = defaults(Mode::WorkspaceWrite);
        for a in assess(&asks, &abi(7)) {
            if a.requirement != Requirement::Desired {
                continue;
            }
            // The kernel that lacks exactly this guarantee's feature, and nothing newer.
            let Feature::LandlockAbi(n) = a.needs else {
                continue;
            };
            let below = verdict(&asks, &abi(n - 1));
            let others_missing = assess(&asks, &abi(n - 1)).iter().any(|b| {
                b.guarantee != a.guarantee
                    && b.requirement == Requirement::Desired
                    && !b.enforced
                    && b.guarantee.is_file_effect()
            });
            if a.guarantee.is_file_effect() || others_missing {
                assert_eq!(below, ModeVerdict::Confined(Enforcement::Partial), "{a:?}");
            } else {
                assert_eq!(below, ModeVerdict::Confined(Enforcement::Full), "{a:?}");
            }
        }
        assert!(Guarantee::Truncate.is_file_effect());
        assert!(!Guarantee::Signals.is_file_effect());
        assert!(!Guarantee::Network.is_file_effect());
    }

    #[test]
    fn danger_full_access_is_unconfined_even_without_landlock() {
        assert_eq!(
            verdict(&defaults(Mode::DangerFullAccess), &abi(0)),
            ModeVerdict::Unconfined
        );
        assert!(enforced(&defaults(Mode::DangerFullAccess), &abi(7)).is_empty());
    }

    #[test]
    fn kept_capabilities_are_named_in_the_report_and_leave_enforcement_alone() {
        use crate::capability::{Capability, CapabilitySet};
        let keep = |caps: &[Capability]| Asks {
            keep_capabilities: CapabilitySet::of(caps),
            ..defaults(Mode::WorkspaceWrite)
        };
        let staged = abi(TESTED_LANDLOCK_ABI);
        let unstaged = KernelFacts {
            namespaces: false,
            ..staged
        };
        // The default: none kept, and that is required.
        let r = report(&defaults(Mode::WorkspaceWrite), &staged);
        assert_eq!(r["capabilities"].status, GuaranteeStatus::Enforced);
        assert!(r["capabilities"].required);
        assert_eq!(r["capabilities"].note, None);

        let asks = keep(&[Capability::DacOverride]);
        let r = report(&asks, &staged);
        assert_eq!(r["capabilities"].status, GuaranteeStatus::NotRequested);
        assert!(!r["capabilities"].required);
        let note = r["capabilities"].note.clone().unwrap();
        assert!(note.contains("keeps CAP_DAC_OVERRIDE"), "{note}");
        assert!(note.contains("no read of a hidden path"), "{note}");
        assert!(!note.contains("owner or mode"), "{note}");
        // Not a file effect the mode promises: enforcement is what it was.
        for facts in [staged, unstaged, abi(3)] {
            assert_eq!(
                verdict(&asks, &facts),
                verdict(&defaults(Mode::WorkspaceWrite), &facts)
            );
        }
        assert!(!enforced(&asks, &staged).contains(&Guarantee::Capabilities));

        // Owner and mode changes: held outside the roots by the stage, or said not to be.
        let asks = keep(&[Capability::Chown, Capability::Fowner]);
        let note = report(&asks, &staged)["capabilities"].note.clone().unwrap();
        assert!(note.contains("CAP_CHOWN, CAP_FOWNER"), "{note}");
        assert!(note.contains("no owner or mode can change"), "{note}");
        let note = report(&asks, &unstaged)["capabilities"]
            .note
            .clone()
            .unwrap();
        assert!(note.contains("outside the writable roots too"), "{note}");
    }

    #[test]
    fn domains_are_held_by_a_network_namespace_or_else_by_the_proxy_port_alone() {
        let asks = Asks {
            domains: true,
            ..defaults(Mode::ReadOnly)
        };
        let facts = |abi: u32, namespaces: bool| KernelFacts {
            landlock_abi: abi,
            seccomp: true,
            namespaces,
            supervisor: false,
            supervisor_writes: false,
        };
        let status = |facts: &KernelFacts, g: Guarantee| report(&asks, facts)[g.name()].status;
        assert!(asks.wants_stage(), "the network namespace is the stage's");
        // With the namespace: enforced whatever Landlock can do with ports.
        for abi in [1, 3, 7] {
            let f = facts(abi, true);
            assert_eq!(status(&f, Guarantee::Network), GuaranteeStatus::Enforced);
            assert_eq!(
                status(&f, Guarantee::DomainFilter),
                GuaranteeStatus::Enforced
            );
        }
        let note = |asks: &Asks| report(asks, &facts(7, true))["domainFilter"].note.clone();
        let note_of_plain = note(&asks).unwrap();
        assert!(
            note_of_plain.contains("every connection"),
            "{note_of_plain}"
        );
        // A unix socket leads outside whatever the network namespace holds: the note
        // does not claim every connection then.
        let unix = Asks {
            allow_unix_sockets: true,
            ..asks
        };
        let note_of_unix = note(&unix).unwrap();
        assert!(
            note_of_unix.contains("every TCP/IP connection")
                && note_of_unix.contains("--allow-unix-sockets"),
            "{note_of_unix}"
        );
        // Without it: the port rule holds the network, and the report says the domain
        // filter is not enforced, with what that leaves open; enforcement is untouched
        // (not a file effect).
        let f = facts(7, false);
        assert_eq!(
            status(&facts(4, false), Guarantee::Network),
            GuaranteeStatus::Enforced
        );
        assert_eq!(status(&f, Guarantee::Network), GuaranteeStatus::Enforced);
        assert_eq!(
            status(&f, Guarantee::DomainFilter),
            GuaranteeStatus::Unavailable
        );
        let note = report(&asks, &f)["domainFilter"].note.clone().unwrap();
        assert!(note.contains("any host"), "{note}");
        assert_eq!(verdict(&asks, &f), ModeVerdict::Confined(Enforcement::Full));
        // Neither: the network cannot be held, nothing runs.
        match verdict(&asks, &facts(3, false)) {
            ModeVerdict::Unavailable { missing } => assert_eq!(
                missing,
                vec![(Guarantee::Network, Feature::NamespacesOrLandlockAbi(4))]
            ),
            v => panic!("{v:?}"),
        }
        // Not asked: not reported.
        let plain = defaults(Mode::ReadOnly);
        assert_eq!(
            report(&plain, &facts(7, true))["domainFilter"].status,
            GuaranteeStatus::NotRequested
        );
    }

    /// The provider contract lists every guarantee an executor can meet in `guarantees`;
    /// a guarantee added here without a word there is a contract change nobody was told.
    #[test]
    fn the_provider_contract_names_every_guarantee() {
        let doc = include_str!("../../docs/provider-contract.md");
        for g in Guarantee::ALL {
            assert!(
                doc.contains(&format!("`{}`", g.name())),
                "docs/provider-contract.md does not name the guarantee `{}`",
                g.name()
            );
        }
    }
}
