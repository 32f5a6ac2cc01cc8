//! What the namespace stage must set up for a resolved policy: the mount plan.
//!
//! Landlock and seccomp cannot hold everything a confined command should not do: mode and
//! time changes on files outside the writable roots, rewriting repository files that run
//! code outside the sandbox later (`.git/hooks`, `.git/config`, `.envrc`, shell start-up
//! files), a `/tmp` shared with every other process, and seeing other processes. Where
//! the machine can create namespaces, the launcher's stage mounts the whole tree
//! read-only except the writable roots, binds the protected paths read-only again on top,
//! and gives the command its own pid and IPC namespaces.
//!
//! This module is pure: it decides *what* to mount from the policy; the launcher's
//! `stage/` (`launcher/src/stage/mounts.rs`) does it.

use crate::policy::Policy;

/// `NS_GET_MNTNS_ID` (`_IOR(0xb7, 5, __u64)`): asked of an open `/proc/PID/ns/mnt`, the
/// kernel (Linux 6.11 and later) answers the mount namespace's 64-bit id, which is never
/// reused while the system runs. The launcher records its namespace's id in the request
/// and the runner compares its own (see `LaunchRequest::confined_in`); older kernels
/// answer `ENOTTY` and the comparison is left out.
pub const NS_GET_MNTNS_ID: u64 = 0x8008_b705;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Paths protected by default inside each workspace and `--writable` root: each can make
/// code run outside the sandbox later (git hooks and `core.hooksPath`/`core.fsmonitor`
/// in the config, direnv's `.envrc`, shell start-up files).
pub const DEFAULT_PROTECTED: [&str; 13] = [
    ".git/hooks",
    ".git/config",
    // Where git looks for its directory, config and hooks besides the two above: a
    // `commondir` or `config.worktree` file, linked worktrees and submodules (each with
    // its own hooks and config), and `info` (attributes that name filters).
    ".git/commondir",
    ".git/config.worktree",
    ".git/worktrees",
    ".git/modules",
    ".git/info",
    ".envrc",
    ".bashrc",
    ".bash_profile",
    ".profile",
    ".zshrc",
    ".zprofile",
];

/// Whether `/tmp` is the machine's or the command's own.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TmpMode {
    /// The machine's `/tmp` (writable in workspace-write): files survive the command and
    /// other commands see them. The default: agents pass files between commands there.
    #[default]
    Shared,
    /// A fresh, empty tmpfs that vanishes with the command. Requires namespaces.
    Private,
}

impl FromStr for TmpMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "shared" => Ok(TmpMode::Shared),
            "private" => Ok(TmpMode::Private),
            _ => Err(format!(
                "unknown /tmp mode '{s}': expected shared or private"
            )),
        }
    }
}

impl fmt::Display for TmpMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TmpMode::Shared => "shared",
            TmpMode::Private => "private",
        })
    }
}

/// Whether the command sees the machine's processes.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PidMode {
    /// A pid namespace where the machine can create one, the machine's otherwise (the
    /// default: it hides every other process's command line at the cost of a fork).
    #[default]
    IsolateWhereAvailable,
    /// A pid namespace, or nothing runs (`--isolate-pids`).
    Isolate,
    /// The machine's processes (`--share-pids`).
    Share,
}

/// Paths protected only when they are regular files: a `.git` *file* (a linked worktree
/// or a submodule) names the git directory with its `gitdir:` line. A `.git` directory
/// stays writable (commits write objects, refs and the index there) but for
/// [`DEFAULT_PROTECTED`].
pub const DEFAULT_PROTECTED_FILES: [&str; 1] = [".git"];

/// What a candidate protected path is, as the caller sees it (no system call here).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PathKind {
    Missing,
    File,
    Directory,
    /// A symbolic link: a bind would land on its target, not on the link, which a
    /// command could still replace; such a path is reported, not protected.
    Link,
}

/// One protected path: a path inside a writable root that the stage binds read-only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Protected {
    /// The path as it will be bound (absolute, inside `root`).
    #[serde(with = "crate::raw")]
    pub path: PathBuf,
    /// The writable root it lies in.
    #[serde(with = "crate::raw")]
    pub root: PathBuf,
}

/// The protected paths of a policy: each default name (unless `default_protect` is off)
/// inside each of `roots`, and each explicit path inside one of them, that `exists` at
/// resolution time. Paths outside every writable root are read-only anyway and need no
/// bind; a path that does not exist is not created in the user's tree (so it is not
/// protected: README says what that leaves open).
pub fn protected_paths(
    roots: &[PathBuf],
    explicit: &[PathBuf],
    default_protect: bool,
    kind: &dyn Fn(&Path) -> PathKind,
) -> ProtectedSet {
    let mut set = ProtectedSet::default();
    let mut add = |path: PathBuf, root: &Path, files_only: bool| match kind(&path) {
        PathKind::Missing => {}
        PathKind::Directory if files_only => {}
        PathKind::Link => set.links.push(path),
        PathKind::File | PathKind::Directory => {
            if !set.paths.iter().any(|p| p.path == path) {
                set.paths.push(Protected {
                    path,
                    root: root.to_path_buf(),
                });
            }
        }
    };
    for root in roots {
        if default_protect {
            for name in DEFAULT_PROTECTED {
                add(root.join(name), root, false);
            }
            for name in DEFAULT_PROTECTED_FILES {
                add(root.join(name), root, true);
            }
        }
    }
    for path in explicit {
        // The innermost root wins, so pinning stays below the root that holds it.
        if let Some(root) = roots
            .iter()
            .filter(|r| path.starts_with(r) && path != *r)
            .max_by_key(|r| r.components().count())
        {
            add(path.clone(), root, false);
        }
    }
    set
}

/// The protected paths found, and the links found where one was expected.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProtectedSet {
    pub paths: Vec<Protected>,
    pub links: Vec<PathBuf>,
}

/// The default protected names that do not exist yet in the writable roots of `policy`
/// (`exists` says which do): a command can create one (a mount needs something to sit
/// on, and stockade does not create files in the user's tree), so `stockade run` checks
/// them after the run and reports each that appeared.
pub fn unprotected_names(policy: &Policy, exists: &dyn Fn(&Path) -> bool) -> Vec<PathBuf> {
    if !policy.default_protect || policy.mode != crate::Mode::WorkspaceWrite {
        return Vec::new();
    }
    std::iter::once(&policy.workspace)
        .chain(&policy.writable_roots)
        .flat_map(|root| {
            DEFAULT_PROTECTED
                .iter()
                .chain(&DEFAULT_PROTECTED_FILES)
                .map(move |name| root.join(name))
        })
        .filter(|p| !exists(p))
        .collect()
}

/// Whether a protected name that was missing before the run is there now, given the
/// answer of looking it up (without following a final link). Only "no such file" (or a
/// parent that is not a directory) proves it absent: any other answer, such as a
/// permission error after the command made a parent directory unreadable, counts as
/// present, since absence could not be shown.
pub fn appeared<T>(lookup: &std::io::Result<T>) -> bool {
    !absent(lookup)
}

/// Whether the answer of looking a name up shows it absent: "no such file", or a parent
/// that is not a directory. Before the run, only such names are watched: one the invoker
/// cannot look up (a workspace it cannot search) might exist or not, and its state after
/// the run would tell nothing about the command.
pub fn absent<T>(lookup: &std::io::Result<T>) -> bool {
    matches!(
        lookup,
        Err(e) if matches!(
            e.kind(),
            std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
        )
    )
}

/// The mounts the stage makes, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MountPlan {
    /// Directories bound back read-write after the whole tree is made read-only: the
    /// writable roots, and the private directory the runner reports through.
    pub rw: Vec<PathBuf>,
    /// Directories between a writable root and a protected path, bound onto themselves
    /// (still writable) so that they are mount points: a mount point cannot be renamed
    /// or removed (`EBUSY`), so `mv .git elsewhere && mkdir .git` cannot get around a
    /// read-only `.git/hooks`.
    pub pin: Vec<PathBuf>,
    /// Protected paths bound read-only on top.
    pub ro: Vec<PathBuf>,
    /// Hidden paths covered last, each by an empty read-only mount of the stage's own
    /// (see [`MASK_MODE`]): what lies beneath is out of reach by path in the command's
    /// mount namespace, and the runner, once it has seen each such mount for itself,
    /// leaves that path out of its Landlock carve-out (the carve-out's rules for every
    /// entry beside a hidden path are most of the runner's start-up work as root).
    pub mask: Vec<PathBuf>,
    /// A fresh tmpfs on `/tmp`.
    pub private_tmp: bool,
    /// A pid namespace with its own `/proc`.
    pub pids: bool,
    /// A network namespace of its own, loopback up (see `Policy::own_network`).
    pub network: bool,
    /// A fresh tmpfs on [`SHM`] (see [`private_shm`]).
    pub private_shm: bool,
    /// A devpts instance of the command's own on [`PTS`], its `ptmx` bound on [`PTMX`].
    pub private_pts: bool,
}

/// POSIX shared memory and semaphores (`shm_open`, `sem_open`: Python's
/// `multiprocessing`, anything using them) are files here. The stage gives every
/// command an empty tmpfs of its own on it, gone with the command: what it puts there is
/// its own memory, and the host's (another command's, another user's) is out of sight.
pub const SHM: &str = "/dev/shm";
/// Where pseudo-terminals live: the stage mounts a devpts instance of the command's own
/// here (`newinstance`), so it can make terminals (`script`, `expect`, Python's `pty`)
/// while the host's, the caller's included, are not there to open.
pub const PTS: &str = "/dev/pts";
/// The multiplexer a new terminal is opened through: the stage binds its instance's
/// `ptmx` over it.
pub const PTMX: &str = "/dev/ptmx";
/// Where the POSIX message queues of the IPC namespace are seen as files. The stage,
/// which gives every command an IPC namespace of its own, mounts that namespace's mqueue
/// filesystem here where the machine has the directory: the queues the command makes
/// (`mq_open`) are its own, gone with it, and the host's (another command's) are neither
/// there to list nor to open. Where the machine has no such directory, POSIX message
/// queues stay refused (`EPERM`).
pub const MQUEUE: &str = "/dev/mqueue";
/// The mount options of the private devpts: terminals anyone in the namespace may
/// allocate through its `ptmx`, each terminal readable and writable by its owner.
pub const PTS_OPTIONS: &str = "newinstance,ptmxmode=0666,mode=0620";

/// Whether the stage mounts a private tmpfs on [`SHM`]: unless the caller shares it on
/// purpose, naming it (or something holding or below it) as a writable root.
pub fn private_shm(writable: &[PathBuf]) -> bool {
    let shm = Path::new(SHM);
    !writable
        .iter()
        .any(|r| r.starts_with(shm) || shm.starts_with(r))
}

/// The mode of the stage's empty mounts over hidden paths: nothing may be listed,
/// searched or read there, so a read beneath a hidden directory, or of a hidden file,
/// fails with `EACCES` as the Landlock carve-out's denial does (a command keeping
/// `CAP_DAC_OVERRIDE` finds them empty).
pub const MASK_MODE: u32 = 0o000;

/// Where the kernel adds device nodes while a command runs (the stage shares the
/// machine's `/dev`): a mask covers only what exists when the stage starts, so a hidden
/// path beneath it is never taken as covered by the runner, which carves `/dev` instead
/// (a rule for each standard device, [`crate::devices`], and none for anything else).
/// The stage does not mask those paths either: the mount would cost start-up and decide
/// nothing.
pub use crate::devices::DEVICE_TREE;

/// Whether the hidden path `hidden` may be covered by an empty mount: not when it holds
/// (or is) one of `keep`, paths the runner or the command must still reach (the private
/// directory holding the request and status files, the working directory, the runner
/// program). Such a path stays hidden by the Landlock carve-out alone.
pub fn maskable(hidden: &Path, keep: &[&Path]) -> bool {
    !keep
        .iter()
        .any(|k| !k.as_os_str().is_empty() && k.starts_with(hidden))
}

/// The mount plan for `policy` when the stage runs, with `writable` the policy's writable
/// roots and `control` the private directory the runner must still write in.
pub fn plan(
    policy: &Policy,
    writable: &[PathBuf],
    control: Option<&Path>,
    pids: bool,
) -> MountPlan {
    let mut rw: Vec<PathBuf> = writable.to_vec();
    if let Some(control) = control
        && !rw.iter().any(|r| control.starts_with(r))
    {
        rw.push(control.to_path_buf());
    }
    // Protected paths, and hidden paths inside a writable root: Landlock keeps the
    // command from reading the latter, but only a mount keeps it from renaming one out
    // of hiding, where the next command could read it.
    let mut bound: Vec<Protected> = policy.protected.clone();
    for hidden in &policy.hidden {
        if let Some(root) = writable
            .iter()
            .filter(|r| hidden.starts_with(r) && hidden != *r)
            .max_by_key(|r| r.components().count())
            && !bound.iter().any(|b| &b.path == hidden)
        {
            bound.push(Protected {
                path: hidden.clone(),
                root: root.clone(),
            });
        }
    }
    let mut pin = Vec::new();
    for p in &bound {
        let mut ancestors: Vec<&Path> = p
            .path
            .ancestors()
            .skip(1)
            .take_while(|a| *a != p.root && a.starts_with(&p.root))
            .collect();
        ancestors.reverse();
        for a in ancestors {
            if !pin.iter().any(|x: &PathBuf| x == a) {
                pin.push(a.to_path_buf());
            }
        }
    }
    // A command keeping a capability that reads past file modes would find a mask empty
    // (`No such file or directory` beneath a hidden directory) where the carve-out,
    // which the runner then applies to every hidden path, answers with a denial: no
    // masks for it.
    let reads_past_modes = policy.keep_capabilities.iter().any(|c| {
        matches!(
            c,
            crate::capability::Capability::DacOverride
                | crate::capability::Capability::DacReadSearch
        )
    });
    let mask = policy
        .hidden
        .iter()
        .filter(|h| {
            !reads_past_modes
                && !h.starts_with(DEVICE_TREE)
                && maskable(h, &[control.unwrap_or(Path::new(""))])
        })
        .cloned()
        .collect();
    MountPlan {
        rw,
        pin,
        ro: bound.into_iter().map(|p| p.path).collect(),
        mask,
        private_tmp: policy.tmp == TmpMode::Private,
        pids,
        network: policy.own_network(),
        private_shm: private_shm(writable),
        private_pts: true,
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn only_no_such_file_proves_a_protected_name_absent() {
        use std::io::{Error, ErrorKind};
        assert!(appeared::<()>(&Ok(())));
        assert!(!appeared::<()>(&Err(Error::from(ErrorKind::NotFound))));
        assert!(!appeared::<()>(&Err(Error::from(ErrorKind::NotADirectory))));
        assert!(appeared::<()>(&Err(Error::from(
            ErrorKind::PermissionDenied
        ))));
        // ELOOP: something is there, whatever it is.
        assert!(appeared::<()>(&Err(Error::from_raw_os_error(40))));
    }
    use super::*;

    #[test]
    fn defaults_are_protected_in_each_root_when_they_exist() {
        let roots = vec![PathBuf::from("/w"), PathBuf::from("/x")];
        let kind = |p: &Path| match p.to_str().unwrap() {
            "/w/.git/hooks" | "/w/.git" => PathKind::Directory,
            "/w/.git/config" | "/x/.bashrc" | "/w/src/keep" | "/x/.git" => PathKind::File,
            "/x/.envrc" => PathKind::Link,
            _ => PathKind::Missing,
        };
        let got = protected_paths(
            &roots,
            &["/w/src/keep".into(), "/etc/x".into()],
            true,
            &kind,
        );
        let paths: Vec<_> = got.paths.iter().map(|p| p.path.to_str().unwrap()).collect();
        // A `.git` directory is not protected as a whole; a `.git` file is.
        assert_eq!(
            paths,
            [
                "/w/.git/hooks",
                "/w/.git/config",
                "/x/.bashrc",
                "/x/.git",
                "/w/src/keep"
            ]
        );
        assert_eq!(got.links, vec![PathBuf::from("/x/.envrc")]);
        // --no-default-protect keeps only the explicit ones.
        let got = protected_paths(&roots, &["/w/src/keep".into()], false, &kind);
        assert_eq!(got.paths.len(), 1);
        // Nothing exists: nothing to bind.
        let none = protected_paths(&roots, &[], true, &|_| PathKind::Missing);
        assert!(none.paths.is_empty() && none.links.is_empty());
    }

    #[test]
    fn an_explicit_path_belongs_to_its_innermost_root() {
        let roots = vec![PathBuf::from("/w"), PathBuf::from("/w/sub")];
        let file = |_: &Path| PathKind::File;
        let got = protected_paths(&roots, &["/w/sub/a/b".into()], false, &file);
        assert_eq!(got.paths[0].root, PathBuf::from("/w/sub"));
        // A root itself is not a protected path.
        assert!(
            protected_paths(&roots, &["/w".into()], false, &file)
                .paths
                .is_empty()
        );
    }

    #[test]
    fn every_hidden_path_is_masked_but_one_holding_what_must_stay_reachable() {
        let mut policy = Policy::for_tests(crate::Mode::WorkspaceWrite, "/w");
        policy.hidden = vec![
            "/etc/shadow".into(),
            "/run/base".into(),
            "/w/.env".into(),
            // Beneath /dev: carved, never masked (nodes appear there while it runs).
            "/dev/sda".into(),
            "/dev/userfaultfd".into(),
        ];
        let control = Path::new("/run/base/req-1");
        let plan = plan(&policy, &["/w".into()], Some(control), true);
        assert_eq!(
            plan.mask,
            [PathBuf::from("/etc/shadow"), PathBuf::from("/w/.env")]
        );
        // A hidden path inside a writable root is still bound read-only under its mask.
        assert_eq!(plan.ro, [PathBuf::from("/w/.env")]);
        assert!(maskable(Path::new("/a/b"), &[Path::new("/a/bc")]));
        assert!(!maskable(Path::new("/a/b"), &[Path::new("/a/b")]));
        assert!(!maskable(
            Path::new("/a"),
            &[Path::new("/x"), Path::new("/a/b/c")]
        ));
        assert!(maskable(Path::new("/a"), &[Path::new("")]));
    }

    #[test]
    fn nothing_is_masked_for_a_command_that_reads_past_file_modes() {
        for cap in [
            crate::capability::Capability::DacOverride,
            crate::capability::Capability::DacReadSearch,
        ] {
            let mut policy = Policy::for_tests(crate::Mode::WorkspaceWrite, "/w")
                .with_keep_capabilities(vec![cap]);
            policy.hidden = vec!["/etc/shadow".into(), "/w/.env".into()];
            let plan = plan(&policy, &["/w".into()], None, true);
            assert!(plan.mask.is_empty(), "{cap:?}: {:?}", plan.mask);
            // Still bound read-only: only a mount keeps it from being renamed out of hiding.
            assert_eq!(plan.ro, [PathBuf::from("/w/.env")]);
        }
    }
}
