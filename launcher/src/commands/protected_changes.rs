//! Protected paths without the namespace stage: nothing binds them read-only, so a
//! command can rewrite `.git/config`, a hook, or add a file under `.git/hooks`. Their
//! state is taken before the command starts and compared once it settled; each
//! difference is reported (`protectedChanged`, a marker, `tampered`), not undone.

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Files up to this size are digested; larger ones are compared by their inode's
/// numbers alone (a write moves the change time, which no caller can set back).
const DIGEST_CAP: u64 = 1 << 20;
/// At most this many bytes are digested per look, so a submodule's objects under
/// `.git/modules` cost a bounded read; files past it are compared by their numbers.
const DIGEST_BUDGET: u64 = 64 << 20;
/// At most this many entries are recorded beneath each protected path, so a command
/// that filled `.git/hooks` before cannot make the next run's look unbounded. Each path
/// has a cap of its own: a large one (a submodule's objects) must not leave the names
/// of the paths after it uncompared.
const ENTRY_CAP: usize = 4096;
/// How deep a protected directory is walked.
const DEPTH_CAP: usize = 16;

/// What one name was: enough to tell any write, replacement or change of kind.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    kind: u32,
    dev: u64,
    ino: u64,
    mode: u32,
    uid: u32,
    gid: u32,
    nlink: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    /// The content's digest (a file under the caps) or a link's target.
    content: Option<Vec<u8>>,
}

impl Entry {
    /// Whether nothing tells `self` and `now` apart: contents are compared only when both
    /// looks digested them (the budget may have run out at another file in one of them).
    fn same(&self, now: &Entry) -> bool {
        let content = match (&self.content, &now.content) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        };
        content
            && Entry {
                content: None,
                ..self.clone()
            } == Entry {
                content: None,
                ..now.clone()
            }
    }
}

/// How a protected name changed during the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Change {
    Added,
    Modified,
    Removed,
}

impl Change {
    fn as_str(self) -> &'static str {
        match self {
            Change::Added => "added",
            Change::Modified => "modified",
            Change::Removed => "removed",
        }
    }
}

/// One protected name that changed, as `run --json` reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Changed {
    pub path: String,
    pub change: Change,
}

impl Changed {
    /// The marker line (control characters escaped: a name under `.git/hooks` is the
    /// command's choice, and must not forge a marker of its own).
    pub fn marker(&self) -> String {
        format!(
            "[sandbox: protected path changed ({}): {}]",
            self.change.as_str(),
            crate::supervise::containment::printable(&self.path)
        )
    }
}

/// The protected paths' state when taken: every name under each, up to the caps.
#[derive(Debug, Default)]
pub struct Snapshot {
    entries: BTreeMap<PathBuf, Option<Entry>>,
    /// Directories whose walk stopped at a cap: names below them are not compared.
    cut: Vec<PathBuf>,
    /// Bytes still to digest in this look.
    budget: u64,
    /// Entries still to record beneath the protected path being walked.
    left: usize,
}

impl Snapshot {
    /// Takes the state of `paths` (each a protected file or directory).
    pub fn take(paths: &[PathBuf]) -> Snapshot {
        let mut snap = Snapshot {
            budget: DIGEST_BUDGET,
            ..Snapshot::default()
        };
        for path in paths {
            snap.left = ENTRY_CAP;
            snap.walk(path, 0);
        }
        snap
    }

    /// What differs in `after` from `self`, names below a cut directory left out. A
    /// directory cut in one look and not in the other is itself reported modified: the
    /// command added (or removed) enough names to move a cap, and what lies below it
    /// can no longer be compared (filling `.git/hooks` must not hide a rewritten hook).
    pub fn changes(&self, after: &Snapshot) -> Vec<Changed> {
        let cut = |p: &Path| {
            self.cut
                .iter()
                .chain(&after.cut)
                .any(|c| p.starts_with(c) && p != c)
        };
        let mut out = Vec::new();
        let names = self.entries.keys().chain(after.entries.keys());
        let mut seen = BTreeSet::new();
        for name in names {
            if !seen.insert(name) || cut(name) {
                continue;
            }
            let was = self.entries.get(name).cloned().flatten();
            let now = after.entries.get(name).cloned().flatten();
            let change = match (was, now) {
                (None, Some(_)) => Change::Added,
                (Some(_), None) => Change::Removed,
                (Some(a), Some(b)) if !a.same(&b) => Change::Modified,
                _ => continue,
            };
            out.push(Changed {
                path: name.display().to_string(),
                change,
            });
        }
        let (was_cut, now_cut): (BTreeSet<&PathBuf>, BTreeSet<&PathBuf>) =
            (self.cut.iter().collect(), after.cut.iter().collect());
        for dir in was_cut.symmetric_difference(&now_cut) {
            out.push(Changed {
                path: dir.display().to_string(),
                change: Change::Modified,
            });
        }
        out
    }

    /// Records `path` and, for a directory, the names below it.
    fn walk(&mut self, path: &Path, depth: usize) {
        if self.left == 0 {
            if let Some(parent) = path.parent() {
                self.cut.push(parent.to_path_buf());
            }
            return;
        }
        self.left -= 1;
        let entry = entry(path, &mut self.budget);
        let is_dir = entry.as_ref().is_some_and(|e| e.kind == libc::S_IFDIR);
        self.entries.insert(path.to_path_buf(), entry);
        if !is_dir {
            return;
        }
        if depth >= DEPTH_CAP {
            self.cut.push(path.to_path_buf());
            return;
        }
        // Sorted, so the same names are recorded before and after when a cap is hit.
        let mut names: Vec<PathBuf> = match std::fs::read_dir(path) {
            Ok(dir) => dir.filter_map(|e| e.ok().map(|e| e.path())).collect(),
            Err(_) => {
                // Unreadable now: what is below cannot be compared.
                self.cut.push(path.to_path_buf());
                return;
            }
        };
        names.sort();
        for name in names {
            self.walk(&name, depth + 1);
        }
    }
}

/// The state of one name, not following a final link; `None` when it is not there (or
/// cannot be looked up, which a later look then reports as a change).
fn entry(path: &Path, budget: &mut u64) -> Option<Entry> {
    let meta = path.symlink_metadata().ok()?;
    let kind = meta.mode() & libc::S_IFMT;
    // A directory's own size, times and link count move with each name added or
    // removed below it, which is reported as that name: only what it is, and who may
    // change it, is compared.
    let dir = kind == libc::S_IFDIR;
    let unless_dir = |v: i64| if dir { 0 } else { v };
    let content = match kind {
        libc::S_IFREG if meta.size() <= DIGEST_CAP.min(*budget) => {
            *budget -= meta.size();
            digest(path, &meta)
        }
        libc::S_IFLNK => std::fs::read_link(path)
            .ok()
            .map(|t| t.into_os_string().into_encoded_bytes()),
        _ => None,
    };
    Some(Entry {
        kind,
        dev: meta.dev(),
        ino: meta.ino(),
        mode: meta.mode(),
        uid: meta.uid(),
        gid: meta.gid(),
        nlink: unless_dir(meta.nlink() as i64) as u64,
        size: unless_dir(meta.size() as i64) as u64,
        mtime: (unless_dir(meta.mtime()), unless_dir(meta.mtime_nsec())),
        ctime: (unless_dir(meta.ctime()), unless_dir(meta.ctime_nsec())),
        content,
    })
}

/// The digest of a regular file's content, read without following a link and without
/// blocking (a name swapped for a FIFO since the look is not waited on), and only when
/// the file opened is the one looked at.
fn digest(path: &Path, meta: &std::fs::Metadata) -> Option<Vec<u8>> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .ok()?;
    let opened = file.metadata().ok()?;
    if !opened.is_file() || opened.ino() != meta.ino() || opened.dev() != meta.dev() {
        return None;
    }
    let mut hash = stockade_policy::digest::Sha256::new();
    let mut buf = [0u8; 16 * 1024];
    let mut left = DIGEST_CAP;
    while left > 0 {
        let n = file.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        hash.update(&buf[..n]);
        left = left.saturating_sub(n as u64);
    }
    Some(hash.finish().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rewrite_an_added_name_and_a_removal_are_each_reported() {
        let dir = tempfile::tempdir().unwrap();
        let hooks = dir.path().join("hooks");
        let config = dir.path().join("config");
        std::fs::create_dir(&hooks).unwrap();
        std::fs::write(hooks.join("pre-commit"), "true\n").unwrap();
        std::fs::write(hooks.join("old"), "x").unwrap();
        std::fs::write(&config, "[core]\n").unwrap();
        let paths = [hooks.clone(), config.clone()];
        let before = Snapshot::take(&paths);
        assert!(before.changes(&Snapshot::take(&paths)).is_empty());
        std::fs::write(hooks.join("pre-commit"), "evil\n").unwrap();
        std::fs::write(hooks.join("new"), "evil\n").unwrap();
        std::fs::remove_file(hooks.join("old")).unwrap();
        let changes = before.changes(&Snapshot::take(&paths));
        let named = |p: &Path, c: Change| {
            changes
                .iter()
                .any(|x| x.path == p.display().to_string() && x.change == c)
        };
        assert!(
            named(&hooks.join("pre-commit"), Change::Modified),
            "{changes:?}"
        );
        assert!(named(&hooks.join("new"), Change::Added), "{changes:?}");
        assert!(named(&hooks.join("old"), Change::Removed), "{changes:?}");
        assert!(
            !changes
                .iter()
                .any(|c| c.path == config.display().to_string())
        );
    }

    #[test]
    fn names_past_the_cap_cannot_hide_a_rewrite() {
        let dir = tempfile::tempdir().unwrap();
        let (big, hooks) = (dir.path().join("big"), dir.path().join("hooks"));
        for d in [&big, &hooks] {
            std::fs::create_dir(d).unwrap();
        }
        for i in 0..ENTRY_CAP + 10 {
            std::fs::write(big.join(i.to_string()), "").unwrap();
        }
        let hook = hooks.join("pre-commit");
        std::fs::write(&hook, "true\n").unwrap();
        let paths = [big.clone(), hooks.clone()];
        let before = Snapshot::take(&paths);
        // Control: a protected path already past its cap reports nothing by itself.
        assert!(before.changes(&Snapshot::take(&paths)).is_empty());
        // A large path before it leaves the hooks compared.
        std::fs::write(&hook, "evil\n").unwrap();
        let changes = before.changes(&Snapshot::take(&paths));
        let names: Vec<_> = changes.iter().map(|c| (c.path.clone(), c.change)).collect();
        assert_eq!(names, [(hook.display().to_string(), Change::Modified)]);
        // Filling the hooks past the cap in the same run is reported, not a blind spot.
        let before = Snapshot::take(&paths);
        std::fs::create_dir(hooks.join("a")).unwrap();
        for i in 0..ENTRY_CAP {
            std::fs::write(hooks.join("a").join(i.to_string()), "").unwrap();
        }
        std::fs::write(&hook, "worse\n").unwrap();
        let changes = before.changes(&Snapshot::take(&paths));
        assert!(
            changes
                .iter()
                .any(|c| c.path == hooks.display().to_string() && c.change == Change::Modified),
            "{changes:?}"
        );
    }

    #[test]
    fn a_name_with_a_line_break_cannot_forge_a_marker() {
        let c = Changed {
            path: "/w/.git/hooks/x\n[sandbox: fine]".into(),
            change: Change::Added,
        };
        assert!(!c.marker().contains('\n'));
    }
}
