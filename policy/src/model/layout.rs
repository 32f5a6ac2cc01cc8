//! What a policy makes of each place, as the README promises it: which paths are
//! hidden, which lie beneath a writable root, which the namespace stage binds read-only
//! or covers, and where its mounts begin. Positions only; the operations are judged in
//! `ops.rs`.

use crate::Policy;
use crate::capability::Capability;
use crate::mode::Mode;
use crate::stage::TmpMode;
use std::path::{Path, PathBuf};

/// The only device every confined mode may write.
const DEV_NULL: &str = "/dev/null";
// Where device nodes appear while a command runs: a hidden path there is never covered
// by a mount, only carved out (README, hidden paths).
use crate::devices::DEVICE_TREE;
/// The shared temporary directory, writable in workspace-write.
const SHARED_TMP: &str = "/tmp";

/// What a mount of the stage is: decides whether what lies on it can be written.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum MountKind {
    /// A writable root bound back read-write.
    Root,
    /// A directory between a root and a protected path, bound onto itself (still
    /// writable, but a mount point: it cannot be renamed or removed).
    Pin,
    /// A protected path (or a hidden path inside a root) bound read-only again.
    Bound,
    /// An empty read-only mount of mode 000 over a hidden path.
    Mask,
    /// Everything else: the machine's tree, made read-only.
    System,
}

impl MountKind {
    fn read_only(self) -> bool {
        matches!(self, MountKind::Bound | MountKind::Mask | MountKind::System)
    }
}

/// The places of one policy under one set-up.
pub(super) struct Layout {
    pub(super) mode: Mode,
    /// The writable roots, in the order the stage binds them back.
    roots: Vec<PathBuf>,
    hidden: Vec<PathBuf>,
    /// Whether every entry of `/dev` but the standard ones is hidden (carved out, never
    /// masked: see [`crate::devices`]).
    devices: bool,
    /// Device files the policy lets the command read and write (`--allow-device`).
    allowed_devices: Vec<PathBuf>,
    /// Hidden paths the stage covers with a mask (none without the stage, nor for a
    /// command that reads past file modes, which would find them empty).
    masked: Vec<PathBuf>,
    /// Masked paths the runner leaves out of the carve-out (all but with unix sockets).
    covered: Vec<PathBuf>,
    /// Protected paths, whether or not the stage can bind them.
    protected: Vec<PathBuf>,
    /// The stage's mount points, in the order they are made (none without it).
    mounts: Vec<(PathBuf, MountKind)>,
    pub(super) staged: bool,
    workspace: PathBuf,
}

impl Layout {
    /// `masks`: whether the stage can make its empty mounts on this kernel (see
    /// [`super::Model::with_masks`]); without them every hidden path is carved out.
    pub(super) fn of(policy: &Policy, staged: bool, masks: bool) -> Layout {
        let mode = policy.mode();
        let staged = staged && policy.stage() && mode.is_confined();
        let roots = writable_roots(policy);
        let hidden = if mode.is_confined() {
            policy.hidden().to_vec()
        } else {
            Vec::new()
        };
        // A command that reads past file modes would find a mask empty, and one that can
        // be handed a directory descriptor from outside could look beneath it: the
        // carve-out hides everything for them (README, namespace stage).
        let kept = policy.kept_capabilities();
        let reads_past_modes =
            kept.contains(Capability::DacOverride) || kept.contains(Capability::DacReadSearch);
        let masked: Vec<PathBuf> = hidden
            .iter()
            .filter(|h| staged && masks && !reads_past_modes && !h.starts_with(DEVICE_TREE))
            .cloned()
            .collect();
        // With unix sockets a process outside could pass in a descriptor that reaches
        // beneath a mask: the masks stay, and the carve-out hides every path as well.
        let covered = if policy.allow_unix_sockets() {
            Vec::new()
        } else {
            masked.clone()
        };
        let protected: Vec<PathBuf> = policy.protected().iter().map(|p| p.path.clone()).collect();
        let mut layout = Layout {
            mode,
            roots,
            hidden,
            devices: mode.is_confined() && policy.hides_devices(),
            allowed_devices: policy.allowed_devices().to_vec(),
            masked,
            covered,
            protected,
            mounts: Vec::new(),
            staged,
            workspace: policy.workspace().to_path_buf(),
        };
        if staged {
            layout.mounts = layout.stage_mounts(policy);
        }
        layout
    }

    /// The mounts the stage makes, in order: the roots bound back (a later root holding
    /// an earlier one covers it), the directories above each read-only path pinned, the
    /// protected paths and the hidden paths inside a root bound read-only, the masks.
    fn stage_mounts(&self, policy: &Policy) -> Vec<(PathBuf, MountKind)> {
        let mut mounts: Vec<(PathBuf, MountKind)> = Vec::new();
        for root in &self.roots {
            let private_tmp = policy.tmp() == TmpMode::Private && root.starts_with(SHARED_TMP);
            if !private_tmp && self.outer_root(root).is_none() {
                mounts.push((root.clone(), MountKind::Root));
            }
        }
        // Each read-only path with the root it lies in: a protected path's own (it may
        // be a root itself, inside another), a hidden path's innermost.
        let mut bound: Vec<(PathBuf, PathBuf)> = policy
            .protected()
            .iter()
            .map(|p| (p.path.clone(), p.root.clone()))
            .collect();
        for h in &self.hidden {
            let root = self
                .roots
                .iter()
                .filter(|r| h.starts_with(r) && *r != h)
                .max_by_key(|r| r.components().count());
            if let Some(root) = root
                && !bound.iter().any(|(b, _)| b == h)
            {
                bound.push((h.clone(), root.clone()));
            }
        }
        for (b, root) in &bound {
            let mut pins: Vec<&Path> = b
                .ancestors()
                .skip(1)
                .take_while(|a| a != root && a.starts_with(root))
                .collect();
            pins.reverse();
            for a in pins {
                if !mounts.iter().any(|(m, _)| m == a) {
                    mounts.push((a.to_path_buf(), MountKind::Pin));
                }
            }
        }
        for (b, _) in bound {
            mounts.push((b, MountKind::Bound));
        }
        for m in &self.masked {
            mounts.push((m.clone(), MountKind::Mask));
        }
        mounts
    }

    /// Another writable root holding the root `root`: the stage binds each root back from
    /// the tree as it was, so the outer one's copy is what a path reaches (the inner
    /// one is no mount of its own there, though its directory cannot move: `EBUSY`).
    fn outer_root(&self, root: &Path) -> Option<&Path> {
        self.roots
            .iter()
            .find(|r| root.starts_with(r) && r.as_path() != root)
            .map(PathBuf::as_path)
    }

    /// The innermost writable root holding `p`.
    pub(super) fn root_of(&self, p: &Path) -> Option<&Path> {
        self.roots
            .iter()
            .filter(|r| p.starts_with(r))
            .max_by_key(|r| r.components().count())
            .map(PathBuf::as_path)
    }

    pub(super) fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// Whether the policy lets a command write at `p` (beneath a root, `/dev/null` or
    /// an allowed device).
    pub(super) fn writable(&self, p: &Path) -> bool {
        p == Path::new(DEV_NULL)
            || self.allowed_devices.iter().any(|d| d == p)
            || self.root_of(p).is_some()
    }

    pub(super) fn hidden(&self, p: &Path) -> bool {
        self.hidden.iter().any(|h| p.starts_with(h)) || self.device_hidden(p)
    }

    /// Whether `p` is a device the allow-list hides (or lies beneath one).
    fn device_hidden(&self, p: &Path) -> bool {
        self.devices
            && crate::devices::beyond_standard(p).is_some()
            && !self.allowed_devices.iter().any(|d| d == p)
    }

    /// Whether `p` is itself a path the stage covers with a mask.
    pub(super) fn masked(&self, p: &Path) -> bool {
        self.masked.iter().any(|m| m == p)
    }

    /// Whether `p` lies strictly beneath a mask: no lookup reaches it.
    pub(super) fn beneath_mask(&self, p: &Path) -> bool {
        self.masked.iter().any(|m| p.starts_with(m) && p != m)
    }

    /// Whether `p` is a directory on the way to a hidden path the carve-out hides (not a
    /// mask): it keeps only its directory rights, so an entry created in it, or moved
    /// into it, cannot be read (README, the carve-out's limits).
    pub(super) fn carved_ancestor(&self, p: &Path) -> bool {
        self.hidden
            .iter()
            .any(|h| !self.covered.contains(h) && h.starts_with(p) && h != p)
            || (self.devices && Path::new(DEVICE_TREE).starts_with(p))
    }

    /// Whether `p` is hidden by the carve-out (by its place, where a mask would hide
    /// it wherever it went).
    fn carved(&self, p: &Path) -> bool {
        self.hidden
            .iter()
            .any(|h| !self.covered.contains(h) && p.starts_with(h))
            || self.device_hidden(p)
    }

    /// Whether the object at `p` may be read where it is, as far as the carve-out goes:
    /// not carved out, and not a carved directory (which holds something hidden).
    pub(super) fn object_readable(&self, p: &Path) -> bool {
        !self.carved(p) && !self.carved_ancestor(p)
    }

    /// Whether a new entry put directly in the directory `d` could be read there.
    pub(super) fn readable_when_new(&self, d: &Path) -> bool {
        !self.carved(d) && !self.carved_ancestor(d)
    }

    pub(super) fn protected(&self, p: &Path) -> bool {
        self.protected.iter().any(|x| p.starts_with(x))
    }

    /// Whether `p` is a protected path itself.
    pub(super) fn is_protected(&self, p: &Path) -> bool {
        self.protected.iter().any(|x| p == x)
    }

    /// Whether `p` lies strictly beneath a protected path.
    pub(super) fn beneath_protected(&self, p: &Path) -> bool {
        self.protected.iter().any(|x| p.starts_with(x) && p != x)
    }

    /// Whether `p` is protected or holds a protected path.
    pub(super) fn holds_protected(&self, p: &Path) -> bool {
        self.protected
            .iter()
            .any(|x| p.starts_with(x) || x.starts_with(p))
    }

    /// The stage's mount `p` lies on (its own when `p` is a mount point); `System` for the
    /// machine's tree (and always without the stage).
    pub(super) fn mount_of(&self, p: &Path) -> (Option<&Path>, MountKind) {
        // The last made among the deepest: later mounts lie on top.
        let mut best: Option<(&Path, MountKind)> = None;
        for (m, kind) in &self.mounts {
            if p.starts_with(m)
                && best.is_none_or(|(b, _)| m.components().count() >= b.components().count())
            {
                best = Some((m.as_path(), *kind));
            }
        }
        match best {
            Some((m, kind)) => (Some(m), kind),
            None => (None, MountKind::System),
        }
    }

    /// Whether the stage's mounts refuse writes at `p`: on the read-only tree, a mask,
    /// or anywhere beneath a path bound read-only (which is made read-only with every
    /// mount beneath it, pins and roots included: what is protected stays so).
    pub(super) fn read_only(&self, p: &Path) -> bool {
        self.staged
            && (self.mount_of(p).1.read_only()
                || self
                    .mounts
                    .iter()
                    .any(|(m, kind)| *kind == MountKind::Bound && p.starts_with(m)))
    }

    /// Whether `p` is one of the stage's mount points (cannot be removed or renamed).
    pub(super) fn mount_point(&self, p: &Path) -> bool {
        self.mount_of(p).0 == Some(p)
            || (self.staged
                && self
                    .roots
                    .iter()
                    .any(|r| r == p && self.outer_root(r).is_some()))
    }
}

/// The writable roots of `policy` in the order the stage binds them back: workspace,
/// `/tmp`, `$TMPDIR`, each `--writable` (README, modes); none outside workspace-write.
fn writable_roots(policy: &Policy) -> Vec<PathBuf> {
    if policy.mode() != Mode::WorkspaceWrite {
        return Vec::new();
    }
    let mut roots = vec![policy.workspace().to_path_buf(), PathBuf::from(SHARED_TMP)];
    roots.extend(policy.tmpdir().map(Path::to_path_buf));
    roots.extend(policy.writable_roots().iter().cloned());
    let mut unique: Vec<PathBuf> = Vec::new();
    for r in roots {
        if !unique.contains(&r) {
            unique.push(r);
        }
    }
    unique
}
