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

use crate::grants::{Access, Grant, Opened};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Credential stores in the invoking user's home directory, hidden by default.
pub const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".aws",
    ".netrc",
    ".git-credentials",
    ".config/gh",
    ".kube",
    ".docker/config.json",
    ".gnupg",
    ".password-store",
    ".local/share/keyrings",
    ".config/gcloud",
    ".azure",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials.toml",
    ".cargo/credentials",
    ".terraform.d",
    ".vault-token",
    // Browser profiles: cookies, saved passwords, session tokens.
    ".mozilla",
    ".thunderbird",
    ".config/google-chrome",
    ".config/google-chrome-beta",
    ".config/google-chrome-unstable",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".config/microsoft-edge-beta",
    ".config/vivaldi",
    ".config/opera",
];

/// System credential files, hidden by default when the invoking user is root (anyone
/// else cannot read them anyway).
pub const ROOT_SECRETS: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/root/.ssh",
];

pub use crate::roots::Invoker;

/// The default hidden paths for `invoker` (the control bases excluded), existing or not.
pub fn defaults(invoker: &Invoker) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for home in &invoker.homes {
        out.extend(HOME_SECRETS.iter().map(|s| home.join(s)));
    }
    if invoker.uid == 0 {
        out.extend(ROOT_SECRETS.iter().map(PathBuf::from));
    }
    out
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
    /// Anything else: a regular file, device, socket or FIFO (file rights only).
    Other,
}

/// One entry of a listed directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: OsString,
    pub kind: EntryKind,
}

/// The Landlock rules for `grants` once `hidden` (absolute, canonical) is carved out.
///
/// `list` names the entries of an ancestor directory; an ancestor it cannot list (gone,
/// replaced by a link, unreadable) grants nothing beneath it: less access, never more.
/// Grants no hidden path lies beneath are returned unchanged, in their order; file grants
/// (`/dev/null`) are never carved.
pub fn carve<L>(grants: &[Grant], hidden: &[PathBuf], mut list: L) -> Vec<Grant>
where
    L: FnMut(&Path) -> Option<Vec<Entry>>,
{
    let hidden = outermost(hidden);
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
        if below.is_empty() {
            out.push(grant.clone());
            continue;
        }
        // Every directory from the grant's root down to each hidden path's parent.
        let mut ancestors = BTreeSet::new();
        for h in &below {
            let mut p = h.parent();
            while let Some(a) = p {
                if !a.starts_with(&grant.path) {
                    break;
                }
                ancestors.insert(a.to_path_buf());
                p = a.parent();
            }
        }
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
            entries.sort_by(|x, y| x.name.cmp(&y.name));
            for e in entries {
                if e.kind == EntryKind::Symlink || e.name == "." || e.name == ".." {
                    continue;
                }
                let child = a.join(&e.name);
                if ancestors.contains(&child) || below.contains(&&child) {
                    continue;
                }
                out.push(Grant {
                    path: child,
                    access: grant.access,
                    reason: grant.reason,
                    identity: None,
                    opened: Opened::Beside,
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
        carve(grants, &hidden, |p| tree.get(p).cloned())
            .into_iter()
            .map(|g| (g.path.display().to_string(), g.access, g.opened))
            .collect()
    }

    fn has(rules: &[(String, Access, Opened)], path: &str, access: Access) -> bool {
        rules.iter().any(|(p, a, _)| p == path && *a == access)
    }

    #[test]
    fn nothing_hidden_changes_nothing() {
        assert_eq!(carve(&read_all(), &[], |_| None), read_all());
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
        let r = carve(&read_all(), &hidden, |p| {
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
        let r = carve(&grants, &["/home/u/.ssh".into()], |p| {
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
        };
        let d = defaults(&inv);
        assert!(d.contains(&PathBuf::from("/home/u/.ssh")));
        assert!(d.contains(&PathBuf::from("/forged/.aws")));
        assert!(d.contains(&PathBuf::from("/home/u/.cargo/credentials.toml")));
        assert!(!d.contains(&PathBuf::from("/etc/shadow")));
        assert!(!d.iter().any(|p| p.starts_with("/run")));
        let root = Invoker { uid: 0, ..inv };
        assert!(defaults(&root).contains(&PathBuf::from("/etc/shadow")));
        assert!(defaults(&root).contains(&PathBuf::from("/root/.ssh")));
    }
}
