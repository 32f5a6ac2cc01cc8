//! Each operation judged at the places `layout.rs` describes, in the order the kernel
//! asks: a mask met on the way, then the stage's mounts (another mount, a read-only
//! one), then the seccomp filter and Landlock, then a mount point that cannot move.

use super::layout::Layout;
use super::tree::{Node, Tree};
use super::{Answer, Op, Refusal};
use crate::guarantees::Guarantee;
use crate::mode::Mode;
use std::path::Path;

/// The first Landlock ABI that governs links and renames across directories.
const REFER_ABI: u32 = 2;
/// The first that governs truncation.
const TRUNCATE_ABI: u32 = 3;
/// The first that governs ioctl on devices.
const IOCTL_ABI: u32 = 5;

/// A step that refuses, or lets the question go on.
type Step = Result<(), Answer>;

fn refuse(r: Refusal) -> Step {
    Err(Answer::Denied(r))
}

pub(super) struct Judge<'a> {
    pub(super) layout: &'a Layout,
    pub(super) tree: &'a Tree,
    pub(super) abi: u32,
    /// Whether the runner's metadata supervisor judges metadata (only without the stage).
    pub(super) supervised: bool,
    /// Whether it also holds the protected paths (every write of a name is its own).
    pub(super) protect_supervised: bool,
}

impl Judge<'_> {
    pub(super) fn answer(&self, path: &Path, op: &Op) -> Answer {
        let Some(node) = self.tree.node(path) else {
            return Answer::NotApplicable;
        };
        if !self.applies(path, &node, op) {
            return Answer::NotApplicable;
        }
        if !self.layout.mode.is_confined() {
            return Answer::Allowed;
        }
        // What a following operation reaches (it applies, so there is something).
        let target = || self.tree.follow(path).map(|(t, _)| t).unwrap_or_default();
        let steps = match op {
            Op::Remove => self.reach(path).and_then(|()| self.remove(path)),
            Op::Rename(into) | Op::Link(into) => self
                .reach(path)
                .and_then(|()| self.reach(into))
                .and_then(|()| self.move_or_link(path, into, matches!(op, Op::Rename(_)))),
            // The filter answers before any path is looked up.
            Op::Metadata | Op::Xattr => self
                .seccomp(op)
                .and_then(|()| self.reach(path))
                .and_then(|()| self.reach(&target()))
                .and_then(|()| self.metadata(&target())),
            _ => self
                .reach(path)
                .and_then(|()| self.reach(&target()))
                .and_then(|()| self.on_target(&target(), op)),
        };
        match steps {
            Ok(())
                if self.layout.hidden(path)
                    || self
                        .tree
                        .follow(path)
                        .is_some_and(|(t, _)| self.layout.hidden(&t)) =>
            {
                Answer::Limit(limit(op))
            }
            Ok(()) => Answer::Allowed,
            Err(answer) => answer,
        }
    }

    /// Whether `op` means anything on `path` (a `node`), or on what it leads to.
    fn applies(&self, path: &Path, node: &Node, op: &Op) -> bool {
        match op {
            Op::Remove | Op::Rename(_) => true,
            Op::Link(_) => *node != Node::Dir,
            _ => match self.tree.follow(path) {
                None => false,
                Some((_, kind)) => applies(op, &kind),
            },
        }
    }

    /// A path strictly beneath a mask cannot be looked up at all.
    fn reach(&self, p: &Path) -> Step {
        if self.layout.beneath_mask(p) {
            return refuse(Refusal::Mask);
        }
        Ok(())
    }

    fn seccomp(&self, op: &Op) -> Step {
        match op {
            Op::Xattr => refuse(Refusal::SeccompXattr),
            Op::Metadata if self.layout.mode == Mode::ReadOnly => refuse(Refusal::Seccomp),
            _ => Ok(()),
        }
    }

    /// Read, write, truncate, execute, ioctl, list or create on what the path leads to.
    fn on_target(&self, t: &Path, op: &Op) -> Step {
        let l = self.layout;
        if l.masked(t) {
            return refuse(Refusal::Mask);
        }
        let read = || {
            if l.hidden(t) {
                return refuse(Refusal::Landlock);
            }
            Ok(())
        };
        let file_write = |kind_is_file: bool| {
            // A read-only mount refuses a write to a file, never to a device.
            if kind_is_file && self.read_only_mount(t) {
                return refuse(Refusal::ReadOnlyMount);
            }
            self.protected_unbound(t)?;
            if !l.writable(t) {
                return refuse(Refusal::Landlock);
            }
            Ok(())
        };
        match op {
            Op::Read | Op::Exec => read(),
            Op::List => Ok(()),
            Op::Write => file_write(self.is_file(t)),
            Op::Create => file_write(true),
            Op::Truncate => {
                if self.read_only_mount(t) {
                    return refuse(Refusal::ReadOnlyMount);
                }
                self.protected_unbound(t)?;
                if !l.writable(t) {
                    return self.unless_abi(TRUNCATE_ABI, Guarantee::Truncate, Refusal::Landlock);
                }
                Ok(())
            }
            Op::Ioctl => {
                read()?;
                if !l.writable(t) {
                    return self.unless_abi(IOCTL_ABI, Guarantee::DeviceIoctl, Refusal::Landlock);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn is_file(&self, t: &Path) -> bool {
        self.tree.node(t) == Some(Node::File)
    }

    fn read_only_mount(&self, p: &Path) -> bool {
        self.layout.read_only(p)
    }

    /// A protected path the stage could not bind (it did not run) is writable like the
    /// rest of its root: the guarantee is missing, not kept.
    fn protected_unbound(&self, p: &Path) -> Step {
        if self.protect_supervised && self.layout.protected(p) {
            return refuse(Refusal::SupervisorReadOnly);
        }
        if !self.layout.staged && self.layout.protected(p) {
            return Err(Answer::Unenforced(Guarantee::ProtectedPaths));
        }
        Ok(())
    }

    /// Refused with `refusal` from `abi` on; below it the kernel cannot refuse it.
    fn unless_abi(&self, abi: u32, guarantee: Guarantee, refusal: Refusal) -> Step {
        if self.abi >= abi {
            refuse(refusal)
        } else {
            Err(Answer::Unenforced(guarantee))
        }
    }

    /// chmod, chown, times: Landlock governs none; the stage's read-only mounts do.
    fn metadata(&self, t: &Path) -> Step {
        let l = self.layout;
        if l.masked(t) || self.read_only_mount(t) {
            return refuse(Refusal::ReadOnlyMount);
        }
        if self.supervised {
            return self.supervised_metadata(t);
        }
        if !l.staged && l.protected(t) {
            return Err(Answer::Unenforced(Guarantee::ProtectedPaths));
        }
        if !l.staged && !l.writable(t) {
            return Err(Answer::Unenforced(Guarantee::Metadata));
        }
        Ok(())
    }

    /// Without the stage, the supervisor's rule: beneath a writable root and not
    /// protected; a root's own directory only when it is the workspace (a shared root such
    /// as `/tmp` keeps its mode and owner).
    fn supervised_metadata(&self, t: &Path) -> Step {
        let l = self.layout;
        if l.protected(t) {
            return refuse(Refusal::Supervisor);
        }
        match l.root_of(t) {
            Some(root) if root != t || root == l.workspace() => Ok(()),
            _ => refuse(Refusal::Supervisor),
        }
    }

    /// Removing the entry `p` itself (never followed).
    fn remove(&self, p: &Path) -> Step {
        let l = self.layout;
        let parent = p.parent().unwrap_or(Path::new("/"));
        // The supervisor judges the name before the kernel (and Landlock) sees the call.
        self.supervised_removal(p)?;
        if self.read_only_mount(parent) {
            return refuse(Refusal::ReadOnlyMount);
        }
        if !l.writable(parent) {
            return refuse(Refusal::Landlock);
        }
        if l.staged && l.mount_point(p) {
            return refuse(Refusal::MountPoint);
        }
        self.holds_unbound(p)
    }

    /// Removing or renaming a protected path, or a directory holding one, is what the
    /// stage's mounts refuse; without them nothing does.
    fn holds_unbound(&self, p: &Path) -> Step {
        if !self.layout.staged && self.layout.holds_protected(p) {
            return Err(Answer::Unenforced(Guarantee::ProtectedPaths));
        }
        Ok(())
    }

    /// Without the stage, the supervisor's judgement of a name it is asked to remove: a
    /// protected path EBUSY (even one beneath another), else strictly beneath a
    /// protected path EROFS, else a directory holding one EBUSY.
    fn supervised_removal(&self, p: &Path) -> Step {
        let l = self.layout;
        if !self.protect_supervised {
            return Ok(());
        }
        if l.is_protected(p) {
            return refuse(Refusal::SupervisorBusy);
        }
        if l.beneath_protected(p) {
            return refuse(Refusal::SupervisorReadOnly);
        }
        if l.holds_protected(p) {
            return refuse(Refusal::SupervisorBusy);
        }
        Ok(())
    }

    /// Renaming `p` into the directory `into`, or linking it there (a new name).
    fn move_or_link(&self, p: &Path, into: &Path, rename: bool) -> Step {
        let l = self.layout;
        let parent = p.parent().unwrap_or(Path::new("/"));
        if self.protect_supervised {
            if rename {
                self.supervised_removal(p)?;
            } else if l.protected(p) {
                return refuse(Refusal::SupervisorLink);
            }
            // The new name is a fresh one in `into`: refused on or beneath a protected
            // directory.
            if l.protected(into) {
                return refuse(Refusal::SupervisorReadOnly);
            }
        }
        if l.masked(into) {
            return refuse(Refusal::Mask);
        }
        if l.staged {
            // A rename compares the two directories' mounts before it asks for write
            // access; a link asks for write access where the new name goes first, then
            // compares the object's own mount.
            let from = if rename { parent } else { p };
            let cross = l.mount_of(from).0 != l.mount_of(into).0;
            if cross && rename {
                return refuse(Refusal::CrossMount);
            }
            if l.read_only(into) {
                return refuse(Refusal::ReadOnlyMount);
            }
            if cross {
                return refuse(Refusal::CrossMount);
            }
        }
        if (rename && !l.writable(parent)) || !l.writable(into) {
            return refuse(Refusal::Landlock);
        }
        if self.abi < REFER_ABI {
            return Err(Answer::DeniedPartial(Refusal::NoRefer, Guarantee::Refer));
        }
        // A new name may give no more than the old one did (README: Landlock refuses a
        // link made across roots): a file outside the roots linked into one would be
        // writable there, hidden content moved or linked where a new entry is readable
        // would be readable. Landlock refuses (EXDEV).
        let gains_write = !rename && !l.writable(p);
        // A link beside a hidden path has no rule of its own (reads through it are judged
        // at its target): where it lies, it holds only its directory's rights.
        let bare_link = matches!(self.tree.node(p), Some(Node::Symlink(_)))
            && l.carved_ancestor(p.parent().unwrap_or(Path::new("/")));
        let readable = l.object_readable(p) && !bare_link;
        if gains_write || (!readable && l.readable_when_new(into)) {
            return refuse(Refusal::Refer);
        }
        if rename && l.staged && l.mount_point(p) {
            return refuse(Refusal::MountPoint);
        }
        if rename {
            self.holds_unbound(p)
        } else {
            Ok(())
        }
    }
}

/// Whether `op` means anything on what a path leads to.
fn applies(op: &Op, kind: &Node) -> bool {
    match op {
        Op::Read | Op::Write => matches!(kind, Node::File | Node::CharDevice),
        Op::Truncate | Op::Exec => *kind == Node::File,
        Op::Ioctl => *kind == Node::CharDevice,
        Op::List | Op::Create => *kind == Node::Dir,
        Op::Metadata => true,
        Op::Xattr => matches!(kind, Node::File | Node::Dir),
        Op::Remove | Op::Rename(_) | Op::Link(_) => true,
    }
}

/// The documented limit that lets `op` through on a hidden path.
fn limit(op: &Op) -> &'static str {
    match op {
        Op::List => {
            "the names inside a hidden directory stay listable (only their contents are hidden)"
        }
        Op::Create => {
            "a file created in a hidden directory of a writable root is writable, never readable"
        }
        _ => {
            "a hidden path inside a writable root can still be written, truncated, removed or renamed, never read"
        }
    }
}
