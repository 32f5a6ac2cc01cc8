//! Capabilities a confined command may keep (`--keep-capability NAME`): the one way to
//! give a command started as root back part of what root is to files, which the runner
//! otherwise takes away entirely.
//!
//! Why there is a knob at all: root without capabilities is an ordinary user to every
//! file it does not own. An agent running as root in a container whose bind-mounted
//! workspace belongs to another uid can then not write its own workspace, which it could
//! outside the sandbox.
//!
//! Why only these four: each one widens what the command may do to files *within* what
//! the sandbox's other layers allow, and none reaches past them.
//! - The filesystem rules are Landlock's, which does not consult capabilities: writes
//!   outside the writable roots and reads of hidden paths (carved out of the read
//!   grants) stay denied to a command holding any of these.
//! - `open_by_handle_at`, which `CAP_DAC_READ_SEARCH` would otherwise open (a file
//!   opened by handle skips every path on the way to it), is refused by the seccomp
//!   filter in every confined mode.
//! - Set-uid and set-gid bits, extended attributes and ACLs cannot be set (seccomp), so
//!   `CAP_FOWNER` and `CAP_CHOWN` cannot make a file that runs as someone else; the kernel
//!   clears set-id bits on every `chown`.
//! - Owner, mode and time changes outside the writable roots are refused by the namespace
//!   stage's read-only mounts in workspace-write and by the filter in read-only mode (the
//!   `metadata` guarantee); where that guarantee is unavailable (no stage), `CAP_FOWNER`
//!   and `CAP_CHOWN` reach every file outside too, and the report says so.
//!
//! Everything else is refused by name: `CAP_SYS_ADMIN` (mounts, namespaces, most of the
//! kernel), `CAP_SETUID`/`CAP_SETGID` (become any user), `CAP_SYS_PTRACE` (other
//! processes' memory), `CAP_NET_*` (raw sockets, interfaces), `CAP_SYS_MODULE`,
//! `CAP_MKNOD` (device nodes: raw disks), `CAP_SETFCAP` (file capabilities),
//! `CAP_LINUX_IMMUTABLE` (immutable files nobody can remove), `CAP_FSETID` (a rewritten
//! set-id file keeps its bit), and the rest, each of which reaches past the file rules.

use crate::mode::Mode;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The flag that keeps a capability.
pub const FLAG: &str = "--keep-capability";

/// A capability a confined command may keep. The enum *is* the allow-list: a request
/// naming anything else does not decode.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Capability {
    /// `CAP_CHOWN`: change the owner and group of any file.
    Chown,
    /// `CAP_DAC_OVERRIDE`: read, write and search whatever the owner and mode.
    DacOverride,
    /// `CAP_DAC_READ_SEARCH`: read and search whatever the owner and mode.
    DacReadSearch,
    /// `CAP_FOWNER`: what only a file's owner may do (mode, times, sticky-bit removal).
    Fowner,
}

/// The kernel's capability names by number (linux/capability.h), without the `CAP_`
/// prefix: a name of one that cannot be kept is refused as that, not as unknown.
const KERNEL_NAMES: [&str; 41] = [
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
];

impl Capability {
    /// Every capability that can be kept, in the kernel's order.
    pub const ALLOWED: [Capability; 4] = [
        Capability::Chown,
        Capability::DacOverride,
        Capability::DacReadSearch,
        Capability::Fowner,
    ];

    /// The kernel's number for it (linux/capability.h).
    pub fn number(self) -> u32 {
        match self {
            Capability::Chown => 0,
            Capability::DacOverride => 1,
            Capability::DacReadSearch => 2,
            Capability::Fowner => 3,
        }
    }

    /// Its bit in a 64-bit capability set.
    pub fn bit(self) -> u64 {
        1 << self.number()
    }

    /// The kernel's name, `CAP_DAC_OVERRIDE`.
    pub fn name(self) -> &'static str {
        match self {
            Capability::Chown => "CAP_CHOWN",
            Capability::DacOverride => "CAP_DAC_OVERRIDE",
            Capability::DacReadSearch => "CAP_DAC_READ_SEARCH",
            Capability::Fowner => "CAP_FOWNER",
        }
    }

    /// Whether all it gives is changing metadata (owner, mode, times, removal from
    /// sticky directories): nothing in read-only mode, where no such call is allowed.
    /// Whether holding it reads past file modes (`CAP_DAC_OVERRIDE`,
    /// `CAP_DAC_READ_SEARCH`): other users' 0700 directories mean nothing to it.
    pub fn reads_past_modes(self) -> bool {
        matches!(self, Capability::DacOverride | Capability::DacReadSearch)
    }

    pub fn changes_metadata_only(self) -> bool {
        matches!(self, Capability::Chown | Capability::Fowner)
    }

    /// Whether keeping it means something in `mode` (the launcher refuses it otherwise).
    pub fn meaningful_in(self, mode: Mode) -> bool {
        match mode {
            Mode::DangerFullAccess => false,
            Mode::ReadOnly => !self.changes_metadata_only(),
            Mode::WorkspaceWrite => true,
        }
    }

    /// What the command can do with it that it could not without, within the sandbox's
    /// other layers: the trade-off, as the report states it.
    pub fn opens(self) -> &'static str {
        match self {
            Capability::DacOverride => {
                "CAP_DAC_OVERRIDE reads and writes files whatever their owner and mode, where the filesystem rules allow: other users' private files become readable, and writable inside the writable roots (/tmp included)"
            }
            Capability::DacReadSearch => {
                "CAP_DAC_READ_SEARCH reads files and lists directories whatever their owner and mode, where the filesystem rules allow: other users' private files become readable (open_by_handle_at stays refused)"
            }
            Capability::Fowner => {
                "CAP_FOWNER changes the mode and times of files it does not own, and removes or renames other users' files in sticky directories (/tmp)"
            }
            Capability::Chown => {
                "CAP_CHOWN gives files to any user and group (the kernel clears set-id bits, which stay unsettable)"
            }
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The names that can be kept, for messages: `CAP_CHOWN, CAP_DAC_OVERRIDE, ...`.
pub fn allowed_names() -> String {
    let names: Vec<&str> = Capability::ALLOWED.iter().map(|c| c.name()).collect();
    names.join(", ")
}

/// Why a name cannot be kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CapabilityError {
    /// A capability of the kernel that is not on the allow-list (its `CAP_` name).
    NotAllowed(String),
    /// Not the name of any capability (as given).
    Unknown(String),
}

impl fmt::Display for CapabilityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CapabilityError::NotAllowed(name) => write!(
                f,
                "{name} cannot be kept: only the file-access capabilities {} can (others reach past the sandbox's other layers)",
                allowed_names()
            ),
            CapabilityError::Unknown(name) => write!(
                f,
                "unknown capability {name:?}: only {} can be kept",
                allowed_names()
            ),
        }
    }
}

impl std::error::Error for CapabilityError {}

impl FromStr for Capability {
    type Err = CapabilityError;

    /// `dac_override`, `CAP_DAC_OVERRIDE`, `Cap_Dac_Override`: the kernel's name, with or
    /// without `CAP_`, in any case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let upper = s.trim().to_ascii_uppercase();
        let bare = upper.strip_prefix("CAP_").unwrap_or(&upper);
        if let Some(c) = Capability::ALLOWED
            .into_iter()
            .find(|c| &c.name()[4..] == bare)
        {
            return Ok(c);
        }
        if KERNEL_NAMES.contains(&bare) {
            return Err(CapabilityError::NotAllowed(format!("CAP_{bare}")));
        }
        Err(CapabilityError::Unknown(s.to_string()))
    }
}

/// A set of capabilities that can be kept, as the kernel's 64-bit mask. The mask is
/// built only from [`Capability`] values, so it never holds one off the allow-list.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CapabilitySet(u64);

impl CapabilitySet {
    pub fn of(caps: &[Capability]) -> CapabilitySet {
        CapabilitySet(caps.iter().fold(0, |m, c| m | c.bit()))
    }

    /// The kernel's mask: bit N is capability N.
    pub fn mask(self) -> u64 {
        self.0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn contains(self, c: Capability) -> bool {
        self.0 & c.bit() != 0
    }

    /// The capabilities in the set, in the kernel's order.
    pub fn iter(self) -> impl Iterator<Item = Capability> {
        Capability::ALLOWED
            .into_iter()
            .filter(move |c| self.contains(*c))
    }

    /// `CAP_CHOWN, CAP_FOWNER`, or `none`.
    pub fn names(self) -> String {
        if self.is_empty() {
            return "none".into();
        }
        let names: Vec<&str> = self.iter().map(Capability::name).collect();
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_taken_with_or_without_the_prefix_in_any_case() {
        for s in [
            "dac_override",
            "DAC_OVERRIDE",
            "CAP_DAC_OVERRIDE",
            "cap_dac_override",
            "Cap_Dac_Override",
        ] {
            assert_eq!(s.parse::<Capability>(), Ok(Capability::DacOverride), "{s}");
        }
        for c in Capability::ALLOWED {
            assert_eq!(c.name().parse::<Capability>(), Ok(c));
            assert_eq!(c.name()[4..].to_lowercase().parse::<Capability>(), Ok(c));
        }
    }

    #[test]
    fn every_other_capability_is_refused_by_its_name_naming_the_allowed_set() {
        for bare in KERNEL_NAMES {
            let allowed = Capability::ALLOWED.iter().any(|c| &c.name()[4..] == bare);
            let parsed = bare.to_lowercase().parse::<Capability>();
            if allowed {
                assert!(parsed.is_ok(), "{bare}");
                continue;
            }
            let err = parsed.unwrap_err();
            assert_eq!(err, CapabilityError::NotAllowed(format!("CAP_{bare}")));
            let msg = err.to_string();
            assert!(
                msg.starts_with(&format!("CAP_{bare} cannot be kept")),
                "{msg}"
            );
            assert!(
                msg.contains("CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER"),
                "{msg}"
            );
            assert!(!msg.contains('\n'), "{msg}");
        }
        for named in ["sys_admin", "CAP_SETUID", "setgid", "sys_ptrace", "net_raw"] {
            assert!(
                matches!(
                    named.parse::<Capability>(),
                    Err(CapabilityError::NotAllowed(_))
                ),
                "{named}"
            );
        }
        let err = "cap_everything".parse::<Capability>().unwrap_err();
        assert!(matches!(err, CapabilityError::Unknown(_)), "{err}");
        assert!(err.to_string().contains("\"cap_everything\""), "{err}");
        assert!(err.to_string().contains("CAP_FOWNER"), "{err}");
        assert!("".parse::<Capability>().is_err());
        assert!("cap_".parse::<Capability>().is_err());
    }

    #[test]
    fn numbers_are_the_kernels() {
        for c in Capability::ALLOWED {
            assert_eq!(KERNEL_NAMES[c.number() as usize], &c.name()[4..]);
        }
        let set = CapabilitySet::of(&[Capability::Fowner, Capability::DacOverride]);
        assert_eq!(set.mask(), 0b1010);
        assert_eq!(set.names(), "CAP_DAC_OVERRIDE, CAP_FOWNER");
        assert_eq!(CapabilitySet::default().names(), "none");
    }

    #[test]
    fn metadata_capabilities_mean_nothing_in_read_only_mode() {
        assert!(Capability::DacReadSearch.meaningful_in(Mode::ReadOnly));
        assert!(Capability::DacOverride.meaningful_in(Mode::ReadOnly));
        assert!(!Capability::Chown.meaningful_in(Mode::ReadOnly));
        assert!(!Capability::Fowner.meaningful_in(Mode::ReadOnly));
        for c in Capability::ALLOWED {
            assert!(c.meaningful_in(Mode::WorkspaceWrite));
            assert!(!c.meaningful_in(Mode::DangerFullAccess));
        }
    }
}
