//! Reaching the entries around hidden paths, for the rules `stockade_policy::hidden`
//! carves out of the grants: every ancestor is opened component by component from `/`
//! without following links, listed from that descriptor, and each entry beside it is
//! opened from the same descriptor, again without following links. A link met anywhere
//! on the way gets no rule, so nothing a link points to is granted through it.
//!
//! Why the runner lists, at start, rather than the launcher at `confine` time:
//! - entries created between `confine` and the spawn (a new file in `~`) get their rule,
//!   instead of turning unreadable;
//! - entries deleted in between are simply not listed, rather than a path that no
//!   longer exists (or that a link now replaces) reaching the ruleset;
//! - the runner has to open every entry to make its rule anyway: listing adds one
//!   `getdents` per ancestor (a home of a few hundred entries is a few calls);
//! - the request stays small: a list carried in it would grow with the directories
//!   (a directory of 100 000 entries would pass the 4 MiB request cap) and be
//!   something more for the request to get wrong.
//!
//! Opening with `O_PATH` never blocks: FIFOs, sockets and devices are reached without
//! being opened for I/O; a mount point yields the mounted root, which is what a path
//! beneath it reaches too, and an entry beside the path (opened `O_PATH` without
//! `O_DIRECTORY`) does not trigger an automount.

use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstatat};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use stockade_policy::directory::{self, EntryType};
use stockade_policy::hidden::{Entry, EntryKind};

/// Directories reached so far, each `None` when it could not be reached as a directory
/// without following a link (gone, replaced by a link, not searchable).
#[derive(Default)]
pub struct Tree {
    dirs: HashMap<PathBuf, Option<OwnedFd>>,
}

fn is_dir(stat: &FileStat) -> bool {
    SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR
}

fn is_link(stat: &FileStat) -> bool {
    SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK
}

fn is_block_device(stat: &FileStat) -> bool {
    SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFBLK
}

impl Tree {
    /// The directory at the absolute `path`, reached from `/` one component at a time.
    pub fn dir(&mut self, path: &Path) -> Option<BorrowedFd<'_>> {
        self.reach(path);
        self.dirs.get(path)?.as_ref().map(|fd| fd.as_fd())
    }

    fn reach(&mut self, path: &Path) {
        if self.dirs.contains_key(path) {
            return;
        }
        // Listable when it can be read, else reachable only (its entries get no rule).
        let open = |parent: BorrowedFd<'_>, name: &OsStr| {
            let flags = OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
            openat(parent, name, flags | OFlag::O_RDONLY, Mode::empty())
                .or_else(|_| openat(parent, name, flags | OFlag::O_PATH, Mode::empty()))
                .ok()
        };
        let fd = match (path.parent(), path.file_name()) {
            (None, _) => nix::fcntl::open(
                "/",
                OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .ok(),
            (Some(parent), Some(name)) => {
                self.reach(parent);
                match self.dirs.get(parent) {
                    Some(Some(pfd)) => open(pfd.as_fd(), name),
                    _ => None,
                }
            }
            // `..` or a relative path: never part of a canonical policy path.
            (Some(_), None) => None,
        };
        self.dirs.insert(path.to_path_buf(), fd);
    }

    /// The entries of the directory at `path`; `None` when it cannot be reached or read.
    /// Read from the descriptor that reached it (`stockade_policy::directory`), which is
    /// then also the one the entries are opened from.
    pub fn list(&mut self, path: &Path) -> Option<Vec<Entry>> {
        let dir = self.dir(path)?;
        let listed = directory::entries(dir).ok()?;
        let mut out = Vec::with_capacity(listed.len());
        for entry in listed {
            let kind = match entry.entry_type {
                EntryType::Directory => EntryKind::Directory,
                EntryType::Symlink => EntryKind::Symlink,
                EntryType::BlockDevice => EntryKind::BlockDevice,
                // The filesystem does not say: ask without following.
                EntryType::Unknown => {
                    match fstatat(dir, entry.name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
                        Ok(st) if is_dir(&st) => EntryKind::Directory,
                        Ok(st) if is_link(&st) => EntryKind::Symlink,
                        Ok(st) if is_block_device(&st) => EntryKind::BlockDevice,
                        Ok(_) => EntryKind::Other,
                        Err(_) => continue,
                    }
                }
                _ => EntryKind::Other,
            };
            out.push(Entry {
                name: entry.name,
                kind,
            });
        }
        Some(out)
    }

    /// Opens the entry at `path` (beside an ancestor, which must have been listed) from
    /// its parent's descriptor, without following a link. `None` when it is gone or
    /// cannot be reached: it then gets no rule.
    ///
    /// What the entry is was read from the listing (`d_type`), not asked again: an
    /// entry replaced since by a link is opened as the link itself (`O_PATH` with
    /// `O_NOFOLLOW`), and a rule on a link's own inode grants nothing, since Landlock
    /// judges an access by the directories above the object reached, which a link never
    /// is. One `fstat` fewer per entry (a home directory has hundreds).
    pub fn open_beside(&mut self, path: &Path) -> Option<OwnedFd> {
        let (parent, name) = (path.parent()?, path.file_name()?);
        let pfd = self.dir(parent)?;
        openat(
            pfd,
            name,
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::stat::fstat;

    fn tempdir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("stockade-carve-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d.canonicalize().unwrap()
    }

    #[test]
    fn links_are_listed_as_links_and_never_opened_or_walked_through() {
        let d = tempdir();
        std::fs::create_dir(d.join("secret")).unwrap();
        std::fs::write(d.join("secret/key"), b"k").unwrap();
        std::fs::write(d.join("file"), b"f").unwrap();
        std::os::unix::fs::symlink(d.join("secret"), d.join("link")).unwrap();
        nix::unistd::mkfifo(&d.join("fifo"), Mode::from_bits_truncate(0o600)).unwrap();

        let mut tree = Tree::default();
        let mut entries = tree.list(&d).unwrap();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let kinds: Vec<(String, EntryKind)> = entries
            .iter()
            .map(|e| (e.name.to_string_lossy().into_owned(), e.kind))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("fifo".into(), EntryKind::Other),
                ("file".into(), EntryKind::Other),
                ("link".into(), EntryKind::Symlink),
                ("secret".into(), EntryKind::Directory),
            ]
        );
        // A link is opened as itself, never as what it points to.
        let link = tree.open_beside(&d.join("link")).unwrap();
        let st = fstat(&link).unwrap();
        assert!(is_link(&st), "{:o}", st.st_mode);
        // Walking through the link is refused: it is no directory of its own.
        assert!(tree.list(&d.join("link")).is_none());
        assert!(tree.open_beside(&d.join("link/key")).is_none());
        // A FIFO is opened without blocking.
        assert!(!is_dir(
            &fstat(tree.open_beside(&d.join("fifo")).unwrap()).unwrap()
        ));
        assert!(is_dir(
            &fstat(tree.open_beside(&d.join("secret")).unwrap()).unwrap()
        ));
        assert!(tree.open_beside(&d.join("gone")).is_none());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
