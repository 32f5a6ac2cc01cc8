//! Hidden paths: files and directories no confined command may read (credential stores,
//! stockade's own control directories), enforced with Landlock alone.
//!
//! Landlock only ever *adds* access along a path: a rule cannot deny beneath a grant.
//! So a hidden path is carved out of the grant above it. Every directory on the way from
//! the grant's root to the hidden path (an *ancestor*) keeps only its directory rights
//! (`READ_DIR` for a read grant, so `ls ~` works; everything but reading and executing
//! files for a writable root), and every other entry of those ancestors (a *sibling*)
//! gets the full original grant as a rule of its own: beneath a sibling directory, or on
//! a sibling file (`~/.bashrc`). The hidden path itself gets no rule, so nothing grants
//! reading it. Paths are grouped by parent: each ancestor is listed once, however many
//! hidden paths lie below it.
//!
//! What the kernel still allows on a hidden path (the documented limits):
//! - `READ_DIR` granted on an ancestor covers its whole hierarchy, so the *names* inside
//!   a hidden directory stay listable, though no file in it can be read;
//! - an entry created directly in an ancestor after confinement has no rule of its own,
//!   so it is unreadable too (rules attach to the entries that existed when they were
//!   made);
//! - inside a writable root the ancestors keep their write rights: the command can still
//!   write, truncate, remove or rename a hidden file (replace it), never read it.
//!
//! Symbolic links among the siblings get no rule: a read through a link is governed by
//! the rules on its target, so `~/link -> ~/.ssh` stays hidden. Which entries exist is
//! asked of a listing function, so this module stays free of I/O and unit-testable; the
//! runner lists at start (see `runner/src/carve.rs` for why there).
//!
//! Links among the *default* names: a default name is resolved through links when the
//! policy is made, so that `~/.ssh -> ~/dotfiles/ssh` hides the real directory. But a
//! command that can write where a default name lies (`--writable ~/.cargo`, a workspace
//! `~/.config`) can plant a link there, and whatever it points at would be hidden from
//! every later command: `ln -s /usr ~/.cargo/credentials.toml` made them all exit 126,
//! `ln -s / ...` made every `confine` fail. So [`judge_default`] follows a default
//! name's links only as far as a command cannot have chosen them (see there); what it
//! does not follow hides nothing and is reported. `--hide` paths are the caller's own
//! words and are followed as before.

use crate::devices::DEVICE_TREE;
use crate::grants::{Access, Grant, Opened};
use std::collections::{BTreeSet, HashSet, VecDeque};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// System credential files, hidden by default when the invoking user is root, or from
/// another who can read them (`Invoker::readable_root_secrets`; anyone else cannot read
/// them anyway).
pub const ROOT_SECRETS: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/root/.ssh",
];

pub use crate::roots::Invoker;

/// The default hidden paths for `invoker` (the control bases excluded), existing or not:
/// every credential store's default locations ([`crate::credentials::STORES`]) beneath
/// its homes, root's system files (the devices beyond the standard ones are hidden by
/// the runner's carve-out itself: [`crate::devices`]). Stores the environment moved
/// elsewhere: [`crate::credentials::moved`].
pub fn defaults(invoker: &Invoker) -> Vec<PathBuf> {
    let mut out = Vec::new();
    out.extend(crate::credentials::in_homes(&invoker.homes));
    if invoker.uid == 0 {
        out.extend(ROOT_SECRETS.iter().map(PathBuf::from));
    } else {
        out.extend(invoker.readable_root_secrets.iter().cloned());
    }
    out
}

/// What a path is, as [`walk`] needs to know: a link with its target, or what else.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    Missing,
    Link(PathBuf),
    Directory,
    /// A regular file.
    File,
    /// A device, socket or FIFO.
    Other,
}

/// What a path leads to once every link on the way is followed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Walked {
    /// The canonical path it leads to.
    pub target: PathBuf,
    /// Each link met on the way, as the path where it lies (its parent canonical).
    pub links: Vec<PathBuf>,
    /// What the target is ([`Node::Directory`], [`Node::File`] or [`Node::Other`]).
    pub kind: Node,
}

/// The most links one resolution follows, as the kernel's path walk allows.
const MAX_LINKS: usize = 40;

/// One step of a path walk.
enum Step {
    Root,
    Parent,
    Name(OsString),
}

fn steps(path: &Path) -> impl Iterator<Item = Step> + '_ {
    path.components().filter_map(|c| match c {
        Component::RootDir => Some(Step::Root),
        Component::ParentDir => Some(Step::Parent),
        Component::Normal(n) => Some(Step::Name(n.to_os_string())),
        Component::CurDir | Component::Prefix(_) => None,
    })
}

/// Resolves the absolute `path` as the kernel would, component by component, asking
/// `node` what each partial path is (without following it), and noting every link it
/// follows. `None` when the path does not lead anywhere: a missing component, a
/// non-directory in the middle, too many links, or a relative path.
pub fn walk<F: FnMut(&Path) -> Node>(path: &Path, mut node: F) -> Option<Walked> {
    if !path.is_absolute() {
        return None;
    }
    let mut pending: VecDeque<Step> = steps(path).collect();
    let mut resolved = PathBuf::from("/");
    let mut kind = Node::Directory;
    let mut links = Vec::new();
    while let Some(step) = pending.pop_front() {
        let name = match step {
            Step::Root => {
                resolved = PathBuf::from("/");
                kind = Node::Directory;
                continue;
            }
            Step::Parent => {
                resolved.pop();
                kind = Node::Directory;
                continue;
            }
            Step::Name(name) => name,
        };
        if kind != Node::Directory {
            return None;
        }
        let candidate = resolved.join(&name);
        match node(&candidate) {
            Node::Missing => return None,
            Node::Link(target) => {
                if links.len() == MAX_LINKS {
                    return None;
                }
                links.push(candidate);
                // The target's steps come next, before what followed the link; a
                // relative target goes on from the link's directory (`resolved`).
                for step in steps(&target).collect::<Vec<_>>().into_iter().rev() {
                    pending.push_front(step);
                }
            }
            other => {
                resolved = candidate;
                kind = other;
            }
        }
    }
    Some(Walked {
        target: resolved,
        links,
        kind,
    })
}

/// Trees of the system that no default name's link may hide: programs, libraries and
/// the kernel's interfaces.
const SYSTEM_TREES: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/dev", "/proc",
    "/sys", "/nix", "/snap",
];

/// Top-level directories no default name's link may hide as a whole (what lies beneath
/// them may be a user's secret).
const SYSTEM_DIRS: &[&str] = &[
    "/etc", "/var", "/opt", "/run", "/srv", "/home", "/root", "/tmp", "/mnt", "/media",
];

/// Whether `path` is `/`, one of the system's top-level directories, or lies in one of
/// its program, library or kernel trees.
fn is_system(path: &Path) -> bool {
    path == Path::new("/")
        || SYSTEM_TREES.iter().any(|t| path.starts_with(t))
        || SYSTEM_DIRS.iter().any(|d| path == Path::new(d))
}

/// Where a policy's commands stand, for [`judge_default`].
pub struct Reach<'a> {
    /// The directories a command may write beneath: where it could have planted a link
    /// (this policy's writable roots, and the shared temporary directories every
    /// workspace-write command can write).
    pub writable: &'a [PathBuf],
    /// The workspace and every writable root: never hidden, nor any ancestor of one.
    pub roots: &'a [PathBuf],
    /// The invoking user's home directories.
    pub homes: &'a [PathBuf],
}

/// Whether the default hidden name `name`, which resolved as `walked`, hides its target:
/// `Ok(target)`, or `Err(why)` when its links are not followed (nothing is hidden for
/// it, and `why`, naming it, is reported in ConfinedArgv's `notGranted`).
///
/// A name without links hides what it is. A name that leads through links hides their
/// target only when it is none of: `/`, a system directory ([`is_system`]), a root or
/// an ancestor of one, a home directory or an ancestor of one. And when any of those
/// links lies inside a directory a command may write (it could have planted it for the
/// next command), only a regular file beneath a home directory and outside everything a
/// command may write is hidden: a user's own `~/.netrc -> ~/secrets/netrc` in a writable
/// `~` keeps working, and a planted link can at worst hide one of the user's own files.
pub fn judge_default(name: &Path, walked: &Walked, reach: &Reach) -> Result<PathBuf, String> {
    let target = &walked.target;
    if walked.links.is_empty() {
        return Ok(target.clone());
    }
    let refuse = |what: String| {
        Err(format!(
            "hidden path {} leads through a symbolic link to {}, {what}: not followed, nothing hidden for it",
            name.display(),
            target.display()
        ))
    };
    if is_system(target) {
        return refuse("a system directory".into());
    }
    if let Some(root) = reach.roots.iter().find(|r| r.starts_with(target)) {
        return refuse(format!(
            "which holds {}, where the command works",
            root.display()
        ));
    }
    if let Some(home) = reach.homes.iter().find(|h| h.starts_with(target)) {
        return refuse(format!("which holds the home directory {}", home.display()));
    }
    let planted = walked.links.iter().find_map(|l| {
        reach
            .writable
            .iter()
            .find(|w| l.starts_with(w))
            .map(|w| (l, w))
    });
    if let Some((link, root)) = planted {
        // A home of `/` (a forged $HOME) would admit every file.
        let user_file = walked.kind == Node::File
            && reach
                .homes
                .iter()
                .any(|h| h.parent().is_some() && target.starts_with(h) && target != h)
            && !reach.writable.iter().any(|w| target.starts_with(w));
        if !user_file {
            return Err(format!(
                "hidden path {} leads through the symbolic link {}, which lies in {} where commands can write (a command could have planted it), to {}: only a file of the home directory outside every writable root is hidden that way; not followed, nothing hidden for it",
                name.display(),
                link.display(),
                root.display(),
                target.display()
            ));
        }
    }
    Ok(target.clone())
}

/// Whether the credential store `path`, which the environment variable `variable` put
/// there and which resolved as `walked`, is hidden: `Ok(target)`, or `Err(why)`. The
/// variable is the invoker's own word, but a value such as `GNUPGHOME=$HOME` or
/// `XDG_CONFIG_HOME=/` must not hide the home, a system directory or where the command
/// works (that would fail every `confine`, or hide what commands need): such a store is
/// not hidden, and `why` says so. Links on the way are judged as a default name's.
pub fn judge_moved(
    path: &Path,
    variable: &str,
    walked: &Walked,
    reach: &Reach,
) -> Result<PathBuf, String> {
    let target = &walked.target;
    let refuse = |what: String| {
        Err(format!(
            "credential store {} (from ${variable}) is {}, {what}: not hidden",
            path.display(),
            target.display()
        ))
    };
    // A store beneath `/usr` (`CARGO_HOME=/usr/local/cargo`) is hidden; a whole system
    // directory, or anything among the kernel's and the devices', is not.
    let kernel = ["/dev", "/proc", "/sys"];
    if target == Path::new("/")
        || SYSTEM_TREES
            .iter()
            .chain(SYSTEM_DIRS)
            .any(|d| target == Path::new(d))
        || kernel.iter().any(|k| target.starts_with(k))
    {
        return refuse("a system directory or device".into());
    }
    if !matches!(walked.kind, Node::File | Node::Directory) {
        return refuse("not a file or directory".into());
    }
    if let Some(root) = reach.roots.iter().find(|r| r.starts_with(target)) {
        return refuse(format!(
            "which holds {}, where the command works",
            root.display()
        ));
    }
    if let Some(home) = reach.homes.iter().find(|h| h.starts_with(target)) {
        return refuse(format!("which holds the home directory {}", home.display()));
    }
    judge_default(path, walked, reach)
}

/// Drops every path that lies beneath (or equals) another one: hiding a directory hides
/// what is inside. Returns the rest sorted.
pub fn outermost(paths: &[PathBuf]) -> Vec<PathBuf> {
    let sorted: BTreeSet<&PathBuf> = paths.iter().collect();
    let mut out: Vec<PathBuf> = Vec::new();
    for p in sorted {
        if !out.iter().any(|o| p.starts_with(o)) {
            out.push(p.clone());
        }
    }
    out
}

/// What a listed directory entry is, as far as carving cares.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A directory (a mount point included).
    Directory,
    /// A symbolic link: never granted anything (its target's rules govern it).
    Symlink,
    /// A block device: never granted anything beside a hidden path. The policy hides
    /// every block device the invoking user could read when it was made (each holds the
    /// raw bytes of a filesystem, hidden paths and all); one found now that it did not
    /// name appeared since (a loop device attached between `confine` and this start) and
    /// is the same kind of thing.
    BlockDevice,
    /// Anything else: a regular file, character device, socket or FIFO (file rights only).
    Other,
}

/// One entry of a listed directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: OsString,
    pub kind: EntryKind,
}

/// The Landlock rules for `grants` once `hidden` (absolute, canonical) is carved out,
/// and, with `devices`, every entry of `/dev` but the standard ones
/// ([`crate::devices`]): `/dev` is then carved like the parent of a hidden path, and of
/// its entries only the standard ones get a rule.
///
/// `list` names the entries of an ancestor directory; an ancestor it cannot list (gone,
/// replaced by a link, unreadable) grants nothing beneath it: less access, never more.
/// Grants no hidden path lies beneath are returned unchanged, in their order; file grants
/// (`/dev/null`) are never carved.
pub fn carve<L>(grants: &[Grant], hidden: &[PathBuf], devices: bool, mut list: L) -> Vec<Grant>
where
    L: FnMut(&Path) -> Option<Vec<Entry>>,
{
    let hidden = outermost(hidden);
    let device_tree = Path::new(DEVICE_TREE);
    let mut out = Vec::new();
    for grant in grants {
        let Some(carved) = carved_access(grant.access) else {
            out.push(grant.clone());
            continue;
        };
        let below: Vec<&PathBuf> = hidden
            .iter()
            .filter(|h| h.starts_with(&grant.path) && **h != grant.path)
            .collect();
        let devices_below = devices && device_tree.starts_with(&grant.path);
        if below.is_empty() && !devices_below {
            out.push(grant.clone());
            continue;
        }
        // Every directory from the grant's root down to each hidden path's parent (and
        // `/dev`, whose entries are judged by name below).
        let mut ancestors = BTreeSet::new();
        let lowest = below
            .iter()
            .filter_map(|h| h.parent())
            .chain(devices_below.then_some(device_tree));
        for dir in lowest {
            let within = dir.ancestors().take_while(|a| a.starts_with(&grant.path));
            ancestors.extend(within.map(Path::to_path_buf));
        }
        // Entries that get no rule of their own beside: the ancestors (carved above)
        // and the hidden paths themselves.
        let skip: HashSet<&[u8]> = ancestors
            .iter()
            .map(|a| a.as_os_str().as_bytes())
            .chain(below.iter().map(|h| h.as_os_str().as_bytes()))
            .collect();
        // A writable root nested inside this grant carves its own part with at least
        // these rights: listing its ancestors again would only add duplicate rules.
        let covered = |a: &Path| {
            grants.iter().any(|inner| {
                inner.path != grant.path
                    && inner.path.starts_with(&grant.path)
                    && a.starts_with(&inner.path)
                    && covers(inner.access, grant.access)
            })
        };
        for a in &ancestors {
            if covered(a) {
                continue;
            }
            out.push(Grant {
                path: a.clone(),
                access: carved,
                reason: grant.reason,
                // The root itself keeps its pinned identity; ancestors have none.
                identity: if *a == grant.path {
                    grant.identity
                } else {
                    None
                },
                opened: if *a == grant.path {
                    grant.opened
                } else {
                    Opened::Ancestor
                },
            });
            let Some(entries) = list(a) else {
                continue;
            };
            let mut entries = entries;
            entries.sort_unstable_by(|x, y| x.name.cmp(&y.name));
            for e in entries {
                let directory = match e.kind {
                    EntryKind::Symlink | EntryKind::BlockDevice => continue,
                    EntryKind::Directory => true,
                    EntryKind::Other => false,
                };
                if e.name == "." || e.name == ".." {
                    continue;
                }
                if devices_below
                    && a.as_path() == device_tree
                    && !crate::devices::is_standard(&e.name)
                {
                    continue;
                }
                let child = a.join(&e.name);
                // Canonical paths compare as bytes: a hash lookup per entry, not a
                // component-by-component scan of every hidden path (a home directory of
                // a few hundred entries made that the runner's largest own cost).
                if skip.contains(child.as_os_str().as_bytes()) {
                    continue;
                }
                out.push(Grant {
                    path: child,
                    access: grant.access,
                    reason: grant.reason,
                    identity: None,
                    opened: Opened::Beside { directory },
                });
            }
        }
    }
    out
}

/// The access an ancestor of a hidden path keeps: directory rights without reading or
/// executing files. `None` for grants that are never carved (file grants).
fn carved_access(access: Access) -> Option<Access> {
    match access {
        Access::ReadExecute => Some(Access::ListOnly),
        Access::Full => Some(Access::FullExceptRead),
        Access::ReadWriteFile | Access::ListOnly | Access::FullExceptRead => None,
    }
}

/// Whether a grant of `inner` gives at least what `outer` gives.
fn covers(inner: Access, outer: Access) -> bool {
    inner == outer || (inner == Access::Full && outer == Access::ReadExecute)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grants::Reason;
    use std::collections::BTreeMap;

    /// A fake filesystem: directory -> entries.
    fn fs(dirs: &[(&str, &[(&str, EntryKind)])]) -> BTreeMap<PathBuf, Vec<Entry>> {
        dirs.iter()
            .map(|(d, es)| {
                (
                    PathBuf::from(d),
                    es.iter()
                        .map(|(n, k)| Entry {
                            name: (*n).into(),
                            kind: *k,
                        })
                        .collect(),
                )
            })
            .collect()
    }

    use EntryKind::{Directory as D, Other as F, Symlink as L};

    fn home_fs() -> BTreeMap<PathBuf, Vec<Entry>> {
        fs(&[
            ("/", &[("etc", D), ("home", D), ("bin", L), ("tmp", D)]),
            ("/home", &[("u", D), ("v", D)]),
            (
                "/home/u",
                &[
                    (".ssh", D),
                    (".bashrc", F),
                    ("proj", D),
                    ("link", L),
                    (".aws", D),
                    ("fifo", F),
                    (".config", D),
                ],
            ),
            ("/home/u/.config", &[("gh", D), ("git", D)]),
            ("/tmp", &[("stockade-0", D), ("x", F)]),
        ])
    }

    fn read_all() -> Vec<Grant> {
        vec![Grant {
            path: "/".into(),
            access: Access::ReadExecute,
            reason: Reason::ReadEverywhere,
            identity: None,
            opened: Opened::Root,
        }]
    }

    fn run(grants: &[Grant], hidden: &[&str]) -> Vec<(String, Access, Opened)> {
        let tree = home_fs();
        let hidden: Vec<PathBuf> = hidden.iter().map(PathBuf::from).collect();
        carve(grants, &hidden, false, |p| tree.get(p).cloned())
            .into_iter()
            .map(|g| (g.path.display().to_string(), g.access, g.opened))
            .collect()
    }

    fn has(rules: &[(String, Access, Opened)], path: &str, access: Access) -> bool {
        rules.iter().any(|(p, a, _)| p == path && *a == access)
    }

    #[test]
    fn nothing_hidden_changes_nothing() {
        assert_eq!(carve(&read_all(), &[], false, |_| None), read_all());
    }

    #[test]
    fn ancestors_list_only_siblings_keep_the_grant_hidden_gets_nothing() {
        let r = run(&read_all(), &["/home/u/.ssh", "/home/u/.aws"]);
        for a in ["/", "/home", "/home/u"] {
            assert!(has(&r, a, Access::ListOnly), "{a}: {r:?}");
        }
        for s in [
            "/etc",
            "/tmp",
            "/home/v",
            "/home/u/.bashrc",
            "/home/u/proj",
            "/home/u/fifo",
            "/home/u/.config",
        ] {
            assert!(has(&r, s, Access::ReadExecute), "{s}: {r:?}");
        }
        // Hidden paths, and links (a link to .ssh must not grant .ssh), get no rule.
        for none in ["/home/u/.ssh", "/home/u/.aws", "/home/u/link", "/bin"] {
            assert!(r.iter().all(|(p, _, _)| p != none), "{none}: {r:?}");
        }
        // Grouped by parent: /home/u is listed and granted once.
        assert_eq!(r.iter().filter(|(p, _, _)| p == "/home/u").count(), 1);
        assert_eq!(r.iter().filter(|(p, _, _)| p == "/").count(), 1);
        assert!(r.iter().all(|(p, _, o)| (p == "/") == (*o == Opened::Root)));
    }

    #[test]
    fn a_deeper_hidden_path_makes_its_parent_an_ancestor() {
        let r = run(&read_all(), &["/home/u/.config/gh"]);
        assert!(has(&r, "/home/u/.config", Access::ListOnly));
        assert!(!has(&r, "/home/u/.config", Access::ReadExecute));
        assert!(has(&r, "/home/u/.config/git", Access::ReadExecute));
        assert!(has(&r, "/home/u/.ssh", Access::ReadExecute));
    }

    #[test]
    fn a_block_device_beside_a_hidden_path_gets_no_rule() {
        use EntryKind::BlockDevice as B;
        let tree = fs(&[
            ("/", &[("dev", D), ("etc", D)]),
            (
                "/dev",
                &[("loop0", B), ("loop9", B), ("null", F), ("pts", D)],
            ),
        ]);
        let hidden = vec![PathBuf::from("/dev/loop0")];
        let r: Vec<PathBuf> = carve(&read_all(), &hidden, false, |p| tree.get(p).cloned())
            .into_iter()
            .map(|g| g.path)
            .collect();
        for granted in ["/dev/null", "/dev/pts", "/etc"] {
            assert!(r.contains(&PathBuf::from(granted)), "{granted}: {r:?}");
        }
        // loop9 was not named by the policy: attached since, no rule either.
        for not in ["/dev/loop0", "/dev/loop9"] {
            assert!(!r.contains(&PathBuf::from(not)), "{not}: {r:?}");
        }
    }

    #[test]
    fn with_devices_hidden_only_the_standard_entries_of_dev_get_a_rule() {
        let o = EntryKind::Other;
        let tree = fs(&[
            ("/", &[("dev", D), ("etc", D)]),
            (
                "/dev",
                &[
                    ("null", o),
                    ("urandom", o),
                    ("pts", D),
                    ("shm", D),
                    ("tty", o),
                    ("tty1", o),
                    ("ttyS0", o),
                    ("kmsg", o),
                    ("input", D),
                ],
            ),
        ]);
        let carved = |devices: bool, hidden: &[PathBuf]| -> Vec<(PathBuf, Access)> {
            carve(&read_all(), hidden, devices, |p| tree.get(p).cloned())
                .into_iter()
                .map(|g| (g.path, g.access))
                .collect()
        };
        let r = carved(true, &[]);
        let read = |p: &str| r.contains(&(PathBuf::from(p), Access::ReadExecute));
        for granted in ["/dev/null", "/dev/urandom", "/dev/shm", "/dev/tty", "/etc"] {
            assert!(read(granted), "{granted}: {r:?}");
        }
        for not in [
            "/dev/tty1",
            "/dev/ttyS0",
            "/dev/kmsg",
            "/dev/input",
            "/dev/pts",
            "/dev",
            "/",
        ] {
            assert!(!read(not), "{not}: {r:?}");
        }
        // `/dev` and `/` stay listable, as ancestors.
        assert!(
            r.contains(&(PathBuf::from("/dev"), Access::ListOnly)),
            "{r:?}"
        );
        // A standard entry the caller hides stays hidden.
        let r = carved(true, &[PathBuf::from("/dev/shm")]);
        assert!(!r.iter().any(|(p, _)| p == Path::new("/dev/shm")), "{r:?}");
        // Without the allow-list (`--no-default-hide`), `/` is granted whole.
        assert_eq!(
            carved(false, &[]),
            vec![(PathBuf::from("/"), Access::ReadExecute)]
        );
    }

    #[test]
    fn nested_hidden_paths_collapse_to_the_outermost() {
        assert_eq!(
            outermost(&["/a/b/c".into(), "/a/b".into(), "/z".into(), "/a/b".into()]),
            vec![PathBuf::from("/a/b"), PathBuf::from("/z")]
        );
        let r = run(&read_all(), &["/home/u/.config/gh", "/home/u/.config"]);
        assert!(r.iter().all(|(p, _, _)| !p.starts_with("/home/u/.config")));
    }

    #[test]
    fn an_ancestor_that_cannot_be_listed_grants_nothing_beneath_it() {
        let hidden = vec![PathBuf::from("/gone/x")];
        let r = carve(&read_all(), &hidden, false, |p| {
            (p == Path::new("/")).then(|| {
                vec![Entry {
                    name: "etc".into(),
                    kind: D,
                }]
            })
        });
        assert_eq!(r.len(), 3, "{r:?}"); // "/" list-only, /etc, /gone list-only
        assert!(
            r.iter()
                .any(|g| g.path == Path::new("/gone") && g.access == Access::ListOnly)
        );
    }

    #[test]
    fn writable_roots_are_carved_too_and_keep_their_write_rights() {
        let mut grants = read_all();
        grants.push(Grant {
            path: "/home/u".into(),
            access: Access::Full,
            reason: Reason::Workspace,
            identity: None,
            opened: Opened::Root,
        });
        grants.push(Grant {
            path: "/dev/null".into(),
            access: Access::ReadWriteFile,
            reason: Reason::DevNull,
            identity: None,
            opened: Opened::Root,
        });
        let r = run(&grants, &["/home/u/.ssh"]);
        assert!(has(&r, "/home/u", Access::FullExceptRead));
        assert!(has(&r, "/home/u/.bashrc", Access::Full));
        assert!(has(&r, "/home/u/proj", Access::Full));
        assert!(has(&r, "/dev/null", Access::ReadWriteFile));
        // The read grant's carve stops where the writable root's starts.
        assert!(!has(&r, "/home/u", Access::ListOnly));
        assert!(!has(&r, "/home/u/.bashrc", Access::ReadExecute));
        assert!(has(&r, "/home", Access::ListOnly));
        assert!(r.iter().all(|(p, _, _)| p != "/home/u/.ssh"));
    }

    #[test]
    fn a_grant_with_nothing_hidden_beneath_is_unchanged() {
        let mut grants = read_all();
        let ws = Grant {
            path: "/tmp".into(),
            access: Access::Full,
            reason: Reason::SharedTmp,
            identity: None,
            opened: Opened::Root,
        };
        grants.push(ws.clone());
        let r = carve(&grants, &["/home/u/.ssh".into()], false, |p| {
            home_fs().get(p).cloned()
        });
        assert!(r.contains(&ws));
        assert!(
            r.iter()
                .any(|g| g.path == Path::new("/tmp") && g.access == Access::ReadExecute)
        );
    }

    #[test]
    fn defaults_cover_each_home_and_root_extras_only_for_root() {
        let inv = Invoker {
            uid: 1000,
            homes: vec!["/home/u".into(), "/forged".into()],
            runtime_dir: None,
            control_bases: vec!["/run/user/1/stockade".into()],
            capabilities: 0,
            store_variables: Vec::new(),
            other_control_bases: Vec::new(),
            readable_root_secrets: Vec::new(),
        };
        let d = defaults(&inv);
        assert!(d.contains(&PathBuf::from("/home/u/.ssh")));
        assert!(d.contains(&PathBuf::from("/forged/.aws")));
        assert!(d.contains(&PathBuf::from("/home/u/.cargo/credentials.toml")));
        assert!(!d.contains(&PathBuf::from("/etc/shadow")));
        assert!(!d.iter().any(|p| p.starts_with("/run")));
        // One who can read a system secret (the `shadow` group) has it hidden too.
        let shadow = Invoker {
            readable_root_secrets: vec!["/etc/gshadow".into()],
            ..inv.clone()
        };
        assert!(defaults(&shadow).contains(&PathBuf::from("/etc/gshadow")));
        assert!(!defaults(&shadow).contains(&PathBuf::from("/etc/shadow")));
        let root = Invoker { uid: 0, ..inv };
        assert!(defaults(&root).contains(&PathBuf::from("/etc/shadow")));
        assert!(defaults(&root).contains(&PathBuf::from("/root/.ssh")));
    }

    /// A fake filesystem for [`walk`]: path -> node; everything else is missing.
    fn nodes(entries: &[(&str, Node)]) -> impl FnMut(&Path) -> Node {
        let map: BTreeMap<PathBuf, Node> = entries
            .iter()
            .map(|(p, n)| (PathBuf::from(p), n.clone()))
            .collect();
        move |p: &Path| map.get(p).cloned().unwrap_or(Node::Missing)
    }

    fn link(t: &str) -> Node {
        Node::Link(t.into())
    }

    fn home_tree() -> Vec<(&'static str, Node)> {
        vec![
            ("/home", Node::Directory),
            ("/home/u", Node::Directory),
            ("/home/u/.cargo", Node::Directory),
            ("/home/u/vault", Node::Directory),
            ("/home/u/vault/token", Node::File),
            ("/home/u/dotfiles", link("vault")),
            ("/usr", Node::Directory),
            ("/etc", Node::Directory),
        ]
    }

    #[test]
    fn walk_follows_links_as_the_kernel_does_and_notes_where_each_lies() {
        let mut tree = home_tree();
        tree.extend([
            ("/home/u/.netrc", link("dotfiles/token")),
            (
                "/home/u/.cargo/credentials.toml",
                link("../dotfiles/./token"),
            ),
            ("/home/u/.ssh", link("/usr")),
            ("/home/u/loop", link("loop")),
            ("/home/u/dangling", link("/nowhere")),
        ]);
        let w = walk(Path::new("/home/u/.netrc"), nodes(&tree)).unwrap();
        assert_eq!(w.target, Path::new("/home/u/vault/token"));
        assert_eq!(w.kind, Node::File);
        assert_eq!(
            w.links,
            vec![
                PathBuf::from("/home/u/.netrc"),
                PathBuf::from("/home/u/dotfiles")
            ]
        );
        let w = walk(Path::new("/home/u/.cargo/credentials.toml"), nodes(&tree)).unwrap();
        assert_eq!(w.target, Path::new("/home/u/vault/token"));
        assert_eq!(w.links.len(), 2);
        let w = walk(Path::new("/home/u/.ssh"), nodes(&tree)).unwrap();
        assert_eq!(
            (w.target.as_path(), w.kind),
            (Path::new("/usr"), Node::Directory)
        );
        // No links: the path itself.
        let w = walk(Path::new("/home/u/vault/token"), nodes(&tree)).unwrap();
        assert!(w.links.is_empty());
        // Nowhere to go: missing, dangling, a loop, a file in the middle, relative.
        for p in [
            "/home/u/.aws",
            "/home/u/dangling",
            "/home/u/loop",
            "/home/u/vault/token/x",
            "home/u/vault",
        ] {
            assert_eq!(walk(Path::new(p), nodes(&tree)), None, "{p}");
        }
    }

    fn judged(
        name: &str,
        extra: &[(&'static str, Node)],
        writable: &[&str],
    ) -> Result<PathBuf, String> {
        let mut tree = home_tree();
        tree.extend(extra.iter().cloned());
        let walked = walk(Path::new(name), nodes(&tree)).expect("resolves");
        let writable: Vec<PathBuf> = writable.iter().map(PathBuf::from).collect();
        let mut roots = writable.clone();
        roots.push("/home/u/ws".into());
        let homes = vec![PathBuf::from("/home/u")];
        let reach = Reach {
            writable: &writable,
            roots: &roots,
            homes: &homes,
        };
        judge_default(Path::new(name), &walked, &reach)
    }

    #[test]
    fn a_default_name_s_link_never_hides_the_system_a_root_a_home_or_an_ancestor() {
        let name = "/home/u/.cargo/credentials.toml";
        for (target, why) in [
            ("/usr", "system directory"),
            ("/", "system directory"),
            ("/usr/share/keyrings", "system directory"),
            ("/etc", "system directory"),
            ("/home", "system directory"),
            ("/home/u", "which holds"),
            ("/home/u/ws", "where the command works"),
        ] {
            let extra = [
                (name, link(target)),
                ("/home/u/ws", Node::Directory),
                ("/usr/share", Node::Directory),
                ("/usr/share/keyrings", Node::Directory),
            ];
            // Whether or not a command could have planted it.
            for writable in [&["/home/u/.cargo"][..], &[][..]] {
                let err = judged(name, &extra, writable).unwrap_err();
                assert!(err.contains(why), "{target} {writable:?}: {err}");
                assert!(err.contains(name) && err.contains("not followed"), "{err}");
            }
        }
    }

    #[test]
    fn a_link_where_commands_write_hides_only_a_file_of_the_home_outside_the_roots() {
        let name = "/home/u/.cargo/credentials.toml";
        let cargo = &["/home/u/.cargo"][..];
        // The user's own link to a secret file: hidden, planted or not.
        let to_token = [(name, link("/home/u/vault/token"))];
        for writable in [cargo, &[][..]] {
            assert_eq!(
                judged(name, &to_token, writable),
                Ok(PathBuf::from("/home/u/vault/token"))
            );
        }
        // A directory of the home: followed only when no command could have planted it.
        let to_dir = [(name, link("/home/u/vault"))];
        let err = judged(name, &to_dir, cargo).unwrap_err();
        assert!(
            err.contains("could have planted") && err.contains("/home/u/.cargo"),
            "{err}"
        );
        assert_eq!(
            judged(name, &to_dir, &[]),
            Ok(PathBuf::from("/home/u/vault"))
        );
        // A file inside a writable root, or outside every home.
        let in_root = [
            (name, link("/home/u/.cargo/other")),
            ("/home/u/.cargo/other", Node::File),
        ];
        assert!(judged(name, &in_root, cargo).is_err());
        let elsewhere = [
            (name, link("/srv/token")),
            ("/srv", Node::Directory),
            ("/srv/token", Node::File),
        ];
        assert!(judged(name, &elsewhere, cargo).is_err());
        assert_eq!(
            judged(name, &elsewhere, &[]),
            Ok(PathBuf::from("/srv/token"))
        );
        // A link on the way counts as much as the name itself: ~/.config planted in a
        // writable ~ leads every name beneath it.
        let through = [
            ("/home/u/.config", link("/home/u/vault")),
            ("/home/u/vault/gh", Node::Directory),
        ];
        assert!(judged("/home/u/.config/gh", &through, &["/home/u"]).is_err());
        // No link: hidden as it is (a directory a command made hides only itself).
        let plain = [(name, Node::Directory)];
        assert_eq!(judged(name, &plain, cargo), Ok(PathBuf::from(name)));
    }
}
