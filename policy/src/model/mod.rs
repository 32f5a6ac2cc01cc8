//! A reference model of what a resolved policy allows: for a path of a described file
//! tree and an operation, the answer the sandbox must give.
//!
//! It is written from what the policy *means* (the README's modes, hidden paths,
//! protected paths and namespace stage), not from the rules the runner and the stage
//! hand the kernel: the `model-differential` driver (`tests/src/bin/model_differential/`,
//! run on the host by `tests/tests/model_differential.rs` and in the kernel matrix's
//! 6.1 and 6.12 guests) builds random trees and policies, asks the real kernel and this
//! model, and every disagreement is a bug in one of them. `stockade explain --path`
//! answers from it.
//!
//! What it covers:
//! - the three modes; the writable roots (workspace, `/tmp`, `$TMPDIR`, `--writable`,
//!   nested in each other) and `/dev/null`;
//! - hidden paths: unreadable and not executable, whether carved out of Landlock's
//!   grants or covered by the stage's masks, with the documented limits of the carve-out
//!   (names listable, a hidden path inside a root still writable, removable and
//!   renamable, hidden content never moved or linked where it could be read);
//! - protected paths: read-only, not removable, the directories above them not
//!   renamable (the stage's binds), and unenforced without the stage;
//! - the stage's read-only tree (metadata and writes outside the roots), its mount
//!   boundaries (a rename or link across them fails with `EXDEV`);
//! - the seccomp filter's metadata (read-only mode) and extended-attribute refusals;
//! - the Landlock ABI: below 2 every link or rename across directories is refused
//!   (stricter than asked), below 3 truncation and below 5 device ioctl are not
//!   governed (`Unenforced`: the guarantees table reports them unavailable).
//!
//! What it does not: Unix permissions (the tree is taken to be the caller's own),
//! descriptors the command inherits (a kept directory descriptor turns the masks off; the
//! model assumes none), hard links and bind mounts made before the run (Landlock follows
//! them, README), block devices, the network, processes and signals.

mod layout;
mod ops;
pub mod tree;

pub use tree::{Node, Tree};

use crate::Policy;
use crate::guarantees::Guarantee;
use std::fmt;
use std::path::{Path, PathBuf};

/// Errno values (the same on every Linux architecture stockade builds for).
pub mod errno {
    pub const EPERM: i32 = 1;
    pub const EACCES: i32 = 13;
    pub const EBUSY: i32 = 16;
    pub const EXDEV: i32 = 18;
    pub const EROFS: i32 = 30;
    pub const EOPNOTSUPP: i32 = 95;
}

/// One operation on a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Open a file or device for reading.
    Read,
    /// Open a file or device for writing (without truncating).
    Write,
    /// Truncate a regular file (`truncate(2)`).
    Truncate,
    /// Execute a regular file.
    Exec,
    /// An ioctl on a device (one its driver answers).
    Ioctl,
    /// List a directory.
    List,
    /// Create a new file in a directory.
    Create,
    /// Remove the entry itself (a link is not followed).
    Remove,
    /// Rename the entry into another directory.
    Rename(PathBuf),
    /// Give the entry a second name (a hard link) in another directory.
    Link(PathBuf),
    /// Change its mode, owner or times.
    Metadata,
    /// Set an extended attribute.
    Xattr,
}

impl Op {
    /// The operations that need no destination, in the order a probe may run them
    /// without changing the tree.
    pub const IN_PLACE: [Op; 10] = [
        Op::Read,
        Op::Write,
        Op::Truncate,
        Op::Exec,
        Op::Ioctl,
        Op::List,
        Op::Create,
        Op::Metadata,
        Op::Xattr,
        Op::Remove,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Truncate => "truncate",
            Op::Exec => "exec",
            Op::Ioctl => "ioctl",
            Op::List => "list",
            Op::Create => "create",
            Op::Remove => "remove",
            Op::Rename(_) => "rename",
            Op::Link(_) => "link",
            Op::Metadata => "metadata",
            Op::Xattr => "xattr",
        }
    }

    /// An operation by name; `rename` and `link` take the directory `into`.
    pub fn parse(name: &str, into: Option<&Path>) -> Option<Op> {
        match (name, into) {
            ("rename", Some(d)) => Some(Op::Rename(d.to_path_buf())),
            ("link", Some(d)) => Some(Op::Link(d.to_path_buf())),
            (_, _) => Op::IN_PLACE.into_iter().find(|o| o.name() == name),
        }
    }
}

/// Why the sandbox refuses.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Landlock: the policy grants no such access there.
    Landlock,
    /// Landlock: hidden content would become readable where it is moved or linked.
    Refer,
    /// Landlock below ABI 2: no link or rename across directories at all.
    NoRefer,
    /// The stage's read-only mounts (outside the roots, protected paths).
    ReadOnlyMount,
    /// The stage's mount points (protected paths, the directories above them, masks,
    /// roots) cannot be removed or renamed.
    MountPoint,
    /// A rename or link between two of the stage's mounts.
    CrossMount,
    /// The stage's empty mount over a hidden path (mode 000, read-only).
    Mask,
    /// The seccomp filter (metadata in read-only mode).
    Seccomp,
    /// The seccomp filter's refusal of extended attributes.
    SeccompXattr,
    /// The runner's metadata supervisor, without the stage: a mode, owner or time change
    /// outside the writable roots, on a protected path, or on a shared root's own
    /// directory.
    Supervisor,
    /// The same supervisor holding the protected paths, with the stage's answers: a
    /// write, truncate or new name on or beneath one (EROFS), ...
    SupervisorReadOnly,
    /// ... removing or replacing one or a directory that holds one (EBUSY), ...
    SupervisorBusy,
    /// ... a hard link to one (EXDEV).
    SupervisorLink,
}

impl Refusal {
    /// The errors a command sees for it. A mask answers as its mode and its read-only
    /// mount make the kernel ask, in whatever order the call asks them.
    pub fn errnos(self) -> &'static [i32] {
        use errno::*;
        match self {
            Refusal::Landlock => &[EACCES],
            Refusal::Refer | Refusal::NoRefer | Refusal::CrossMount => &[EXDEV],
            Refusal::ReadOnlyMount => &[EROFS],
            Refusal::MountPoint => &[EBUSY],
            Refusal::Mask => &[EACCES, EROFS, EXDEV, EBUSY],
            Refusal::Seccomp => &[EPERM],
            Refusal::SeccompXattr => &[EOPNOTSUPP],
            Refusal::Supervisor => &[EPERM],
            Refusal::SupervisorReadOnly => &[EROFS],
            Refusal::SupervisorBusy => &[EBUSY],
            Refusal::SupervisorLink => &[EXDEV],
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Refusal::Landlock => "Landlock: the policy grants no such access there",
            Refusal::Refer => {
                "Landlock: what is hidden would become readable where it would be moved or linked"
            }
            Refusal::NoRefer => {
                "Landlock below ABI 2 refuses every link and rename across directories"
            }
            Refusal::ReadOnlyMount => "the namespace stage's read-only mounts",
            Refusal::MountPoint => "a mount point of the namespace stage (cannot move)",
            Refusal::CrossMount => "the namespace stage's mounts differ (EXDEV)",
            Refusal::Mask => "the namespace stage's empty mount over a hidden path",
            Refusal::Seccomp => "the seccomp filter (no metadata changes in read-only mode)",
            Refusal::SeccompXattr => "the seccomp filter (no extended attributes)",
            Refusal::Supervisor => {
                "the runner's metadata supervisor (outside the writable roots, a protected path or a shared root's own directory)"
            }
            Refusal::SupervisorReadOnly => {
                "the runner's supervisor holding a protected path (a write on or beneath one)"
            }
            Refusal::SupervisorBusy => {
                "the runner's supervisor holding a protected path (removing or replacing one or what holds one)"
            }
            Refusal::SupervisorLink => {
                "the runner's supervisor holding a protected path (a hard link to one)"
            }
        }
    }
}

/// The model's answer for one (path, operation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Allowed,
    /// Allowed by a documented limit of the policy (the text says which).
    Limit(&'static str),
    /// The policy refuses it, but this kernel or set-up cannot: allowed, and the
    /// guarantee is reported unavailable (`partial`).
    Unenforced(Guarantee),
    Denied(Refusal),
    /// Refused, more strictly than the policy means, because the guarantee is missing.
    DeniedPartial(Refusal, Guarantee),
    /// The path does not exist, or the operation means nothing on it.
    NotApplicable,
}

impl Answer {
    /// Whether the command's call gets through the sandbox.
    pub fn allowed(&self) -> bool {
        matches!(
            self,
            Answer::Allowed | Answer::Limit(_) | Answer::Unenforced(_)
        )
    }

    /// The refusal, when refused.
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            Answer::Denied(r) | Answer::DeniedPartial(r, _) => Some(*r),
            _ => None,
        }
    }

    /// The guarantee this answer shows missing, if any.
    pub fn missing(&self) -> Option<Guarantee> {
        match self {
            Answer::Unenforced(g) | Answer::DeniedPartial(_, g) => Some(*g),
            _ => None,
        }
    }
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Answer::Allowed => f.write_str("allowed"),
            Answer::Limit(why) => write!(f, "allowed (a documented limit: {why})"),
            Answer::Unenforced(g) => write!(
                f,
                "allowed: partial, the policy refuses it but {} is not enforced here",
                g.name()
            ),
            Answer::Denied(r) => write!(f, "denied: {}", r.describe()),
            Answer::DeniedPartial(r, g) => {
                write!(
                    f,
                    "denied: {} ({} unavailable: partial)",
                    r.describe(),
                    g.name()
                )
            }
            Answer::NotApplicable => f.write_str("not applicable (no such path, or not that kind)"),
        }
    }
}

/// The set-up a policy runs under.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Setup {
    /// The Landlock ABI the kernel offers (1 or more: below it nothing confined runs).
    pub landlock_abi: u32,
    /// Whether the namespace stage runs (the policy allows it and the machine can).
    pub staged: bool,
    /// Whether the runner's metadata supervisor (seccomp user notification) judges mode,
    /// owner and time changes: where the stage does not run and the kernel lets it.
    pub supervised: bool,
    /// Whether that supervisor also performs every call that writes or replaces a name,
    /// refusing those on protected paths with the stage's answers (Linux 5.14).
    pub supervised_writes: bool,
}

/// A policy, a tree and a set-up, ready to answer.
pub struct Model<'a> {
    layout: layout::Layout,
    tree: &'a Tree,
    setup: Setup,
}

impl<'a> Model<'a> {
    pub fn new(policy: &Policy, tree: &'a Tree, setup: Setup) -> Model<'a> {
        Model::with_masks(policy, tree, setup, true)
    }

    /// As [`Model::new`], saying whether the namespace stage can cover hidden paths with
    /// its empty mounts on this kernel (`masks`). It makes them by cloning a detached
    /// tmpfs mount, which older kernels refuse (the 6.1 and 6.12 of the kernel matrix
    /// do): the stage then leaves hidden paths uncovered and the runner carves every one
    /// out, with the carve-out's limits, as without the stage.
    pub fn with_masks(policy: &Policy, tree: &'a Tree, setup: Setup, masks: bool) -> Model<'a> {
        Model {
            layout: layout::Layout::of(policy, setup.staged, masks),
            tree,
            setup,
        }
    }

    /// What the sandbox must answer for `op` on `path`.
    pub fn answer(&self, path: &Path, op: &Op) -> Answer {
        ops::Judge {
            layout: &self.layout,
            tree: self.tree,
            abi: self.setup.landlock_abi,
            supervised: self.setup.supervised && !self.layout.staged,
            protect_supervised: self.setup.supervised
                && self.setup.supervised_writes
                && !self.layout.staged,
        }
        .answer(path, op)
    }
}

#[cfg(test)]
mod tests;
