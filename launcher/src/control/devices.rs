//! The devices beneath `/dev` that reach past the sandbox and that this user can read:
//! hidden by default (`stockade_policy::roots::Invoker::raw_devices`).
//!
//! A process that confines many commands (`stockade serve`) remembers which nodes are
//! raw between calls, since finding them takes an `lstat` of every character device
//! (a hundred here, several hundred on a desktop) and `/dev` rarely changes. What is
//! remembered is checked on every call, and thrown away on any doubt:
//! - every directory listed is looked at again (device, inode, change and modification
//!   times): a node added, removed or renamed changes its directory's modification time,
//!   a changed mode its change time;
//! - `/proc/devices` is read again (a driver registered since can make an existing node
//!   raw);
//! - a listing is only remembered when every directory in it had stopped changing two
//!   seconds before the walk began, so that a change in the same clock tick as the walk
//!   cannot leave the times as they were (file times are taken from a coarse clock);
//! - whether the user can read each raw node is asked every time (`access`), never
//!   remembered: a mode or an access control list changes without touching a directory.
//!
//! The walk leaves out directories where no node can open as a device (`holds_devices`:
//! `/dev/shm`, `/dev/pts`, `/dev/mqueue`), which also change too often to remember.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where device nodes live.
const DEVICE_TREE: &str = "/dev";

/// How deep beneath `/dev` block devices are looked for: their nodes sit directly in it
/// (`/dev/sda`, `/dev/dm-0`, `/dev/loop0`) and, on some systems, one or two levels down
/// (`/dev/mapper/NAME`); the trees of names (`/dev/disk/by-uuid/...`) are links to them.
const DEVICE_DEPTH: usize = 3;

/// The character device that makes a userfaultfd with an ioctl (Linux 6.1), where the
/// seccomp filter refuses the system call.
const USERFAULTFD_DEVICE: &str = "/dev/userfaultfd";

/// The drivers (as `/proc/devices` names them) of character devices that read past the
/// sandbox: SCSI generic and block SCSI generic (`SG_IO` sends a disk read commands on a
/// descriptor opened for reading), NVMe passthrough (the same), memory technology
/// devices (a flash chip's raw bytes, by plain `read`), the virtual consoles' screen
/// contents, input events and raw HID reports (every key typed on the machine).
const RAW_CHAR_DRIVERS: &[&str] = &[
    "sg",
    "bsg",
    "nvme",
    "nvme-generic",
    "mtd",
    "vcs",
    "input",
    "hidraw",
];

/// How long every listed directory must have been unchanged before a walk for the walk
/// to be remembered: well above the coarse clock's tick.
const SETTLED: Duration = Duration::from_secs(2);

/// Whether listings are remembered between calls (`stockade serve` turns it on).
static REMEMBER: AtomicBool = AtomicBool::new(false);
static REMEMBERED: Mutex<Option<Listing>> = Mutex::new(None);

/// From now on this process remembers the listing between calls (see the module comment).
pub fn remember_between_calls() {
    REMEMBER.store(true, Ordering::Relaxed);
}

/// A directory's identity and times, as far as a listing depends on them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Stamp {
    dev: u64,
    ino: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

impl Stamp {
    /// `path`'s stamp, not following a link (`None`: gone, or not a directory).
    fn of(path: &Path) -> Option<Stamp> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::symlink_metadata(path).ok()?;
        m.is_dir().then(|| Stamp {
            dev: m.dev(),
            ino: m.ino(),
            modified: (m.mtime(), m.mtime_nsec()),
            changed: (m.ctime(), m.ctime_nsec()),
        })
    }

    /// Whether nothing changed it within [`SETTLED`] before `walk_began`.
    fn settled_before(&self, walk_began: SystemTime) -> bool {
        let Ok(began) = walk_began.duration_since(UNIX_EPOCH) else {
            return false;
        };
        let limit = began.saturating_sub(SETTLED).as_secs() as i64;
        self.modified.0 < limit && self.changed.0 < limit
    }
}

/// What a walk found: every raw node (readable or not), the directories listed with
/// their stamps, and the `/proc/devices` it was judged by.
struct Listing {
    dirs: Vec<(PathBuf, Option<Stamp>)>,
    proc_devices: String,
    raw: Vec<PathBuf>,
}

impl Listing {
    fn still_true(&self, proc_devices: &str) -> bool {
        self.proc_devices == proc_devices
            && self
                .dirs
                .iter()
                .all(|(dir, stamp)| Stamp::of(dir) == *stamp)
    }
}

/// The raw devices beneath `/dev` that the real uid and groups can read (`access(R_OK)`):
/// every block device (root owns their nodes and reads them without any capability; a
/// command reading one reads the raw bytes of a filesystem, past every hidden path and
/// every file mode on it), the character devices of [`RAW_CHAR_DRIVERS`], and
/// `/dev/userfaultfd` (root only, by its mode). An ordinary user outside the `disk`
/// group has none of the disks.
pub fn readable_raw_devices() -> Vec<PathBuf> {
    let proc_devices = read_proc("/proc/devices").unwrap_or_default();
    let raw = remembered(&proc_devices).unwrap_or_else(|| {
        let walk_began = SystemTime::now();
        let listing = walk(Path::new(DEVICE_TREE), proc_devices);
        let raw = listing.raw.clone();
        remember(listing, walk_began);
        raw
    });
    let readable = |path: &Path| nix::unistd::access(path, nix::unistd::AccessFlags::R_OK).is_ok();
    raw.into_iter().filter(|p| readable(p)).collect()
}

/// A file of `/proc`, read whole. `/proc` files give no size, so `read_to_string` would
/// begin with a 32-byte read and double it read after read; one buffer of a few pages
/// takes them in a read or two.
pub fn read_proc(path: &str) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::with_capacity(16 << 10);
    std::fs::File::open(path)?.read_to_string(&mut text)?;
    Ok(text)
}

/// The raw nodes remembered, when remembering is on and the listing is still true.
fn remembered(proc_devices: &str) -> Option<Vec<PathBuf>> {
    if !REMEMBER.load(Ordering::Relaxed) {
        return None;
    }
    let held = REMEMBERED.lock().ok()?;
    let listing = held.as_ref()?;
    listing
        .still_true(proc_devices)
        .then(|| listing.raw.clone())
}

fn remember(listing: Listing, walk_began: SystemTime) {
    if !REMEMBER.load(Ordering::Relaxed) {
        return;
    }
    let settled = listing
        .dirs
        .iter()
        .all(|(_, stamp)| stamp.is_some_and(|s| s.settled_before(walk_began)));
    if let Ok(mut held) = REMEMBERED.lock() {
        *held = settled.then_some(listing);
    }
}

/// Lists `top` down to [`DEVICE_DEPTH`] without following links: the block devices and
/// raw character devices, whoever can read them.
fn walk(top: &Path, proc_devices: String) -> Listing {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let raw_majors = char_majors(&proc_devices, RAW_CHAR_DRIVERS);
    let raw_char = |path: &Path| {
        path == Path::new(USERFAULTFD_DEVICE)
            || std::fs::symlink_metadata(path)
                .is_ok_and(|m| raw_majors.contains(&nix::sys::stat::major(m.rdev())))
    };
    let mut listing = Listing {
        dirs: Vec::new(),
        raw: Vec::new(),
        proc_devices,
    };
    let mut dirs = vec![(top.to_path_buf(), 1)];
    while let Some((dir, depth)) = dirs.pop() {
        // Stamped before it is listed (a change while listing moves its times on), and
        // only where the listing may be remembered: a process that confines once has
        // no use for the stamps.
        if REMEMBER.load(Ordering::Relaxed) {
            listing.dirs.push((dir.clone(), Stamp::of(&dir)));
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() && depth < DEVICE_DEPTH {
                if holds_devices(&path) {
                    dirs.push((path, depth + 1));
                }
            } else if kind.is_block_device() || (kind.is_char_device() && raw_char(&path)) {
                listing.raw.push(path);
            }
        }
    }
    listing.raw.sort();
    listing
}

/// Whether the directory at `path` can hold a device node that opens: not one of a
/// filesystem mounted `nodev` (`/dev/shm`: a node there cannot be opened as a device),
/// and not devpts or mqueue, which make their own entries (terminals, message queues)
/// and take no `mknod`. Those are left out of the walk, and so out of what a remembered
/// listing depends on: devpts changes with every terminal opened, `/dev/shm` with every
/// shared-memory file.
fn holds_devices(path: &Path) -> bool {
    use nix::sys::statfs::FsType;
    const DEVPTS_SUPER_MAGIC: FsType = FsType(0x1cd1);
    const MQUEUE_MAGIC: FsType = FsType(0x1980_0202);
    let Ok(fs) = nix::sys::statfs::statfs(path) else {
        return true;
    };
    let kind = fs.filesystem_type();
    if kind == DEVPTS_SUPER_MAGIC || kind == MQUEUE_MAGIC {
        return false;
    }
    nix::sys::statvfs::statvfs(path)
        .map(|v| !v.flags().contains(nix::sys::statvfs::FsFlags::ST_NODEV))
        .unwrap_or(true)
}

/// The major numbers `/proc/devices` gives the character drivers in `names`.
fn char_majors(devices: &str, names: &[&str]) -> Vec<u64> {
    devices
        .lines()
        .skip_while(|l| l.trim() != "Character devices:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| {
            let (major, name) = l.trim().split_once(' ')?;
            names
                .contains(&name.trim())
                .then(|| major.parse().ok())
                .flatten()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_raw_drivers_majors_are_read_from_proc_devices() {
        let devices = "Character devices:\n  1 mem\n  7 vcs\n 13 input\n248 bsg\n\nBlock devices:\n  7 loop\n259 blkext\n";
        assert_eq!(char_majors(devices, RAW_CHAR_DRIVERS), [7, 13, 248]);
        assert_eq!(char_majors("", RAW_CHAR_DRIVERS), Vec::<u64>::new());
    }

    #[test]
    fn a_listing_is_true_until_a_directory_or_the_drivers_change() {
        // Stamps are only taken where listings are remembered.
        remember_between_calls();
        let top = tempfile::tempdir().unwrap();
        let sub = top.path().join("mapper");
        std::fs::create_dir(&sub).unwrap();
        let listing = walk(top.path(), "Character devices:\n".into());
        assert_eq!(listing.dirs.len(), 2);
        assert!(listing.still_true("Character devices:\n"));
        // A driver registered since.
        assert!(!listing.still_true("Character devices:\n 21 sg\n"));
        // A node added one level down (the directory's modification time moves).
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(sub.join("new"), b"").unwrap();
        assert!(!listing.still_true("Character devices:\n"));
        let listing = walk(top.path(), String::new());
        assert!(listing.still_true(""));
        // A mode changed (the change time moves), and the directory replaced.
        std::thread::sleep(Duration::from_millis(20));
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(!listing.still_true(""));
        let listing = walk(top.path(), String::new());
        std::fs::remove_dir_all(&sub).unwrap();
        std::fs::create_dir(&sub).unwrap();
        assert!(!listing.still_true(""));
    }

    #[test]
    fn only_a_listing_of_directories_settled_before_the_walk_is_remembered() {
        let stamp = |secs: i64| Stamp {
            dev: 1,
            ino: 2,
            modified: (secs, 0),
            changed: (secs, 0),
        };
        let began = UNIX_EPOCH + Duration::from_secs(1000);
        assert!(stamp(990).settled_before(began));
        assert!(!stamp(999).settled_before(began));
        assert!(!stamp(1000).settled_before(began));
        assert!(
            !Stamp {
                changed: (999, 0),
                ..stamp(990)
            }
            .settled_before(began)
        );
    }
}
