//! Which filesystem access a resolved policy grants, and where.
//!
//! This is the one place that decides the filesystem shape of each mode. The runner
//! turns these grants into Landlock rules; `--explain` and the tests read them as they
//! are. Everything not granted here is denied by the kernel.

use crate::mode::Mode;
use crate::policy::{Policy, SHARED_TMP};
use crate::roots::FileId;
use std::path::PathBuf;

/// The only device file every confined mode may write: commands redirect to it all the
/// time. It is granted as a *file*, so the rest of `/dev` (including `/dev/shm`) stays
/// unwritable.
pub const DEV_NULL: &str = "/dev/null";

/// A kind of access granted on a path.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// Read files, list directories and execute programs beneath a directory.
    ReadExecute,
    /// Read, write and truncate one file (not a hierarchy).
    ReadWriteFile,
    /// Every filesystem access beneath a directory: create, write, remove, rename, ...
    Full,
    /// List directories beneath a directory, nothing else: a read grant's ancestor of a
    /// hidden path (see [`crate::hidden`]).
    ListOnly,
    /// Everything [`Access::Full`] gives but reading and executing files: a writable
    /// root's ancestor of a hidden path.
    FullExceptRead,
}

/// How the runner reaches a granted path; decides whether links may be followed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Opened {
    /// A root the policy names (canonical when the policy was resolved).
    Root,
    /// A directory on the way to a hidden path: reached component by component from `/`
    /// without following links; a link there gets no rule.
    Ancestor,
    /// An entry of an ancestor that is not on the way to a hidden path: opened from its
    /// listed parent without following links; a link gets no rule. `directory` is what
    /// the listing said it is, which decides the rule's rights (directory rights on a
    /// file are refused by the kernel).
    Beside { directory: bool },
}

/// Why a grant exists; shown by `stockade-runner --explain` and in errors.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Everything is readable in the confined modes.
    ReadEverywhere,
    /// `/dev/null`.
    DevNull,
    /// A device the caller allowed (`--allow-device`).
    Device,
    /// The workspace root.
    Workspace,
    /// The shared `/tmp`.
    SharedTmp,
    /// The target's `$TMPDIR`.
    TmpDir,
    /// An extra `--writable` root.
    WritableRoot,
}

impl Reason {
    pub fn describe(self) -> &'static str {
        match self {
            Reason::ReadEverywhere => "read everywhere",
            Reason::DevNull => "/dev/null",
            Reason::Device => "allowed device (--allow-device)",
            Reason::Workspace => "workspace root",
            Reason::SharedTmp => "shared /tmp",
            Reason::TmpDir => "$TMPDIR",
            Reason::WritableRoot => "writable root",
        }
    }
}

/// One filesystem grant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    pub path: PathBuf,
    pub access: Access,
    pub reason: Reason,
    /// For a writable root: the directory the path led to when the policy was resolved
    /// (`None` when the policy does not record it, which the request validation
    /// refuses). The runner grants the root only while the path still leads there.
    pub identity: Option<FileId>,
    pub opened: Opened,
}

impl Grant {
    fn new(path: impl Into<PathBuf>, access: Access, reason: Reason) -> Self {
        Grant {
            path: path.into(),
            access,
            reason,
            identity: None,
            opened: Opened::Root,
        }
    }
}

/// The filesystem grants of `policy`, in a stable order. `danger-full-access` has none:
/// it is not confined at all, and the runner refuses to run it.
pub fn grants(policy: &Policy) -> Vec<Grant> {
    let mut out = Vec::new();
    if !policy.mode.is_confined() {
        return out;
    }
    out.push(Grant::new("/", Access::ReadExecute, Reason::ReadEverywhere));
    out.push(Grant::new(DEV_NULL, Access::ReadWriteFile, Reason::DevNull));
    // Read and written as `/dev/null` is, in either confined mode: asked for by name.
    for device in &policy.devices {
        out.push(Grant::new(device, Access::ReadWriteFile, Reason::Device));
    }
    if policy.mode == Mode::WorkspaceWrite {
        out.push(Grant::new(
            &policy.workspace,
            Access::Full,
            Reason::Workspace,
        ));
        out.push(Grant::new(SHARED_TMP, Access::Full, Reason::SharedTmp));
        if let Some(tmpdir) = &policy.tmpdir {
            out.push(Grant::new(tmpdir, Access::Full, Reason::TmpDir));
        }
        for root in &policy.writable_roots {
            out.push(Grant::new(root, Access::Full, Reason::WritableRoot));
        }
    }
    for grant in out.iter_mut().filter(|g| g.access == Access::Full) {
        grant.identity = policy
            .root_ids
            .iter()
            .find(|r| r.path == grant.path)
            .map(|r| r.id);
    }
    out
}

/// The directories a policy lets a command write beneath (its writable roots).
pub fn writable_roots(policy: &Policy) -> Vec<PathBuf> {
    grants(policy)
        .into_iter()
        .filter(|g| g.access == Access::Full)
        .map(|g| g.path)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(mode: Mode) -> Policy {
        Policy::for_tests(mode, "/work/ws")
            .with_writable_roots(vec!["/srv/cache".into()])
            .with_root_ids(vec![crate::roots::RootId {
                path: "/tmp".into(),
                id: FileId {
                    dev: 1,
                    ino: 2,
                    birth: None,
                },
            }])
            .with_tmpdir(Some("/var/tmp/me".into()))
    }

    #[test]
    fn read_only_reads_everything_and_writes_only_dev_null() {
        let g = grants(&policy(Mode::ReadOnly));
        assert_eq!(
            g,
            vec![
                Grant::new("/", Access::ReadExecute, Reason::ReadEverywhere),
                Grant::new("/dev/null", Access::ReadWriteFile, Reason::DevNull),
            ]
        );
        assert!(writable_roots(&policy(Mode::ReadOnly)).is_empty());
    }

    #[test]
    fn workspace_write_adds_workspace_tmp_tmpdir_and_extra_roots() {
        let g = grants(&policy(Mode::WorkspaceWrite));
        assert_eq!(g.len(), 6);
        assert_eq!(&g[..2], &grants(&policy(Mode::ReadOnly))[..]);
        assert_eq!(
            writable_roots(&policy(Mode::WorkspaceWrite)),
            vec![
                PathBuf::from("/work/ws"),
                PathBuf::from("/tmp"),
                PathBuf::from("/var/tmp/me"),
                PathBuf::from("/srv/cache"),
            ]
        );
    }

    #[test]
    fn writable_roots_carry_their_recorded_identity() {
        let g = grants(&policy(Mode::WorkspaceWrite));
        let tmp = g.iter().find(|g| g.reason == Reason::SharedTmp).unwrap();
        assert_eq!(
            tmp.identity,
            Some(FileId {
                dev: 1,
                ino: 2,
                birth: None,
            })
        );
        let ws = g.iter().find(|g| g.reason == Reason::Workspace).unwrap();
        assert_eq!(ws.identity, None);
        assert!(
            g.iter()
                .all(|g| g.access == Access::Full || g.identity.is_none())
        );
    }

    #[test]
    fn dev_null_is_a_file_grant_so_dev_shm_is_not_writable() {
        for mode in [Mode::ReadOnly, Mode::WorkspaceWrite] {
            let g = grants(&policy(mode));
            assert!(
                g.iter()
                    .all(|g| g.access != Access::Full || !g.path.starts_with("/dev"))
            );
            assert!(g.contains(&Grant::new(
                "/dev/null",
                Access::ReadWriteFile,
                Reason::DevNull
            )));
        }
    }

    #[test]
    fn read_only_ignores_writable_roots_and_tmpdir() {
        let g = grants(&policy(Mode::ReadOnly));
        assert!(g.iter().all(|g| g.access != Access::Full));
    }

    #[test]
    fn danger_full_access_has_no_grants() {
        assert!(grants(&policy(Mode::DangerFullAccess)).is_empty());
    }
}
