//! Hidden paths the namespace stage covered with its empty mounts, as this runner finds
//! them: each such path is left out of the Landlock carve-out (`stockade_policy::hidden`),
//! whose rule for every entry beside a hidden path is most of the runner's start-up work
//! (as root: every entry of `/etc` for `/etc/shadow`).
//!
//! Nothing the stage says is taken on trust: the request was written before the stage
//! ran, and a command could have planted, at a hidden path inside a writable root, an
//! empty file of mode 000 for a later command to mistake for a mask, then, once that
//! command had skipped the carve-out, put the real file back (a rename inside the root)
//! and read it there. So a path counts as covered only when, reached from `/` without
//! following any link (`carve::Tree`), it is the root of a mount (a planted file is
//! never one: no confined command can mount, and this mount namespace is the stage's
//! own, private, holding only what the stage mounted and copies of the machine's mounts),
//! on a read-only tmpfs, of mode 000, and empty (a regular file of size 0, or a directory
//! without entries). Such a mount hides what lies beneath in this namespace for as long
//! as the command runs: it cannot be unmounted (no capability, and the seccomp filter), nor
//! renamed or removed (a mount point: `EBUSY`), nor written (read-only).
//!
//! What reaches beneath a mount but not beneath the carve-out, and why each is closed:
//! - a descriptor of a directory opened outside this mount namespace, kept by the
//!   command: a lookup from it sees none of the stage's mounts. So when any descriptor
//!   the command will hold (0, 1, 2 and the kept ones) is a directory, nothing counts as
//!   covered and the carve-out hides every path;
//! - a directory descriptor received over a unix socket (`SCM_RIGHTS`) from a process
//!   outside this mount namespace (an earlier command run without the stage, still
//!   alive, say): the same lookup past the masks. Only `--allow-unix-sockets` lets a
//!   command reach such a process (the seccomp filter refuses `AF_UNIX` sockets but
//!   `socketpair`, and Landlock scopes abstract ones from ABI 6), so with it nothing
//!   counts as covered either;
//! - a command keeping `CAP_DAC_OVERRIDE` or `CAP_DAC_READ_SEARCH` reads past the mask's
//!   mode 000 and finds it empty: no secret, but no denial either, where a hidden path
//!   must be denied (the executor's cue to ask): the carve-out hides every path then;
//! - `/proc/PID/root` of a process outside the namespace: Landlock refuses a sandboxed
//!   process any ptrace-mode access to a process outside its domain, which that link
//!   needs (and with its own pid namespace, no such process is in sight);
//! - another name of the same file (a hard link): the carve-out does not hide it either
//!   (Landlock rules follow the path walked, and a hard link beside a hidden file even
//!   gets a rule of its own on the same inode), and inside a writable root the hidden
//!   file is a mount of its own, so no command can link it elsewhere (`EXDEV`).
//!
//! What a mask cannot do at all: hide what is not there yet. The stage shares the
//! machine's `/dev`, where the kernel adds a node for every block device that appears
//! while the command runs (a loop device attached, a snapshot or a disk made by someone
//! else): covered by no mask, and under a grant of all of `/`, it would be read raw, every
//! hidden path on its filesystem with it. So a hidden path beneath `/dev` never counts as
//! covered: the carve-out gives a rule only to the standard devices there
//! (`stockade_policy::devices`, as without the stage), and a node added later lies under
//! none.

use crate::carve::Tree;
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use stockade_policy::Policy;
use stockade_policy::capability::Capability;
use stockade_policy::stage::{DEVICE_TREE, MASK_MODE};

/// `STATX_ATTR_MOUNT_ROOT` (linux/stat.h, Linux 5.8).
const STATX_ATTR_MOUNT_ROOT: u64 = 0x2000;
/// The size tmpfs gives a directory without entries (two of its bogus 20-byte entries,
/// `.` and `..`). Any other filesystem, or a kernel that counts otherwise, is not taken
/// for a mask: the carve-out then hides the path.
const TMPFS_EMPTY_DIR_SIZE: u64 = 40;

/// The hidden paths of `policy` this runner finds covered by the stage (none when the
/// stage did not run, `staged` false). `tree` is the carve-out's own, so the directories
/// reached here are not reached twice.
pub fn covered(policy: &Policy, staged: bool, tree: &mut Tree) -> Vec<PathBuf> {
    if !staged
        || reads_past_modes(policy)
        || policy.allow_unix_sockets()
        || holds_a_directory(policy.keep_fds())
    {
        return Vec::new();
    }
    policy
        .hidden()
        .iter()
        .filter(|h| !h.starts_with(DEVICE_TREE) && is_mask(h, tree))
        .cloned()
        .collect()
}

/// Whether the command keeps a capability that reads past a file's mode: it would read
/// a mask as an empty file or directory, where a hidden path must answer with a denial
/// (the executor's cue), so the carve-out hides every path.
pub fn reads_past_modes(policy: &Policy) -> bool {
    let kept = policy.kept_capabilities();
    kept.contains(Capability::DacOverride) || kept.contains(Capability::DacReadSearch)
}

/// Whether any descriptor the command will hold (0, 1, 2 and `kept`) is a directory, or
/// cannot be examined.
fn holds_a_directory(kept: &[i32]) -> bool {
    [0, 1, 2]
        .iter()
        .chain(kept)
        .any(|&fd| match nix::sys::stat::fstat(borrow(fd)) {
            Ok(st) => st.st_mode & libc::S_IFMT == libc::S_IFDIR,
            Err(nix::errno::Errno::EBADF) => false,
            Err(_) => true,
        })
}

/// A descriptor number as a borrowed descriptor, for `fstat` alone.
fn borrow(fd: i32) -> std::os::fd::BorrowedFd<'static> {
    // SAFETY: only passed to fstat, which answers EBADF for a number that is not open;
    // it is never closed through this borrow.
    unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }
}

/// Whether `path`, reached without following links, is the stage's kind of mask.
fn is_mask(path: &Path, tree: &mut Tree) -> bool {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return false;
    };
    let Some(dir) = tree.dir(parent) else {
        return false;
    };
    let Ok(parent_stat) = nix::sys::stat::fstat(dir) else {
        return false;
    };
    let Ok(name) = CString::new(name.as_bytes()) else {
        return false;
    };
    // SAFETY: openat with a directory descriptor held by `tree` and a NUL-terminated
    // name; the kernel returns a new descriptor or -1.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return false;
    }
    // SAFETY: a descriptor the kernel just returned to this process alone.
    let fd: OwnedFd = unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) };
    // Of the descriptor itself (empty path).
    let Ok(stx) = stockade_policy::statx::statx(
        fd.as_raw_fd(),
        c"",
        libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
        libc::STATX_TYPE | libc::STATX_MODE | libc::STATX_NLINK | libc::STATX_SIZE,
    ) else {
        return false;
    };
    let mut fs = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: fstatfs of an O_PATH descriptor into a buffer of its type.
    if unsafe { libc::fstatfs(fd.as_raw_fd(), fs.as_mut_ptr()) } != 0 {
        return false;
    }
    // SAFETY: filled by the successful call above.
    let fs = unsafe { fs.assume_init() };
    // The mount's flags: the C library's statvfs takes them from the same call.
    let mut vfs = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: fstatvfs of an O_PATH descriptor into a buffer of its type.
    if unsafe { libc::fstatvfs(fd.as_raw_fd(), vfs.as_mut_ptr()) } != 0 {
        return false;
    }
    // SAFETY: filled by the successful call above.
    let vfs = unsafe { vfs.assume_init() };
    looks_like_mask(&Seen {
        own_device: libc::makedev(stx.stx_dev_major, stx.stx_dev_minor) != parent_stat.st_dev,
        mount_root: stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT != 0
            && stx.stx_attributes & STATX_ATTR_MOUNT_ROOT != 0,
        mode: u32::from(stx.stx_mode),
        nlink: stx.stx_nlink,
        size: stx.stx_size,
        // The field's type differs between C libraries (glibc: signed, musl: unsigned).
        #[allow(clippy::unnecessary_cast)]
        tmpfs: fs.f_type as i64 == libc::TMPFS_MAGIC as i64,
        read_only: vfs.f_flag & libc::ST_RDONLY != 0,
    })
}

/// What [`is_mask`] saw of a path.
struct Seen {
    /// On another device than the directory holding it: a bind of a file onto itself
    /// (the stage binds protected paths, and hidden paths inside a writable root, so)
    /// never is, whatever the file is.
    own_device: bool,
    mount_root: bool,
    mode: u32,
    nlink: u32,
    size: u64,
    tmpfs: bool,
    read_only: bool,
}

fn looks_like_mask(s: &Seen) -> bool {
    let empty = match s.mode & libc::S_IFMT {
        libc::S_IFDIR => s.nlink == 2 && s.size == TMPFS_EMPTY_DIR_SIZE,
        libc::S_IFREG => s.size == 0,
        _ => false,
    };
    s.own_device && s.mount_root && s.tmpfs && s.read_only && s.mode & 0o7777 == MASK_MODE && empty
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_empty_read_only_tmpfs_mount_root_of_mode_000_is_a_mask() {
        let mask = Seen {
            own_device: true,
            mount_root: true,
            mode: libc::S_IFDIR,
            nlink: 2,
            size: TMPFS_EMPTY_DIR_SIZE,
            tmpfs: true,
            read_only: true,
        };
        assert!(looks_like_mask(&mask));
        let file = Seen {
            mode: libc::S_IFREG,
            nlink: 1,
            size: 0,
            ..mask
        };
        assert!(looks_like_mask(&file));
        let not = |f: fn(&mut Seen)| {
            let mut s = Seen { ..mask };
            f(&mut s);
            !looks_like_mask(&s)
        };
        // A file planted in a writable root: everything but the mount; bound read-only
        // onto itself by the stage (on a tmpfs root), everything but its own device.
        assert!(not(|s| s.mount_root = false));
        assert!(not(|s| s.own_device = false));
        assert!(not(|s| s.tmpfs = false));
        assert!(not(|s| s.read_only = false));
        assert!(not(|s| s.mode = libc::S_IFDIR | 0o500));
        assert!(not(|s| s.size += 20));
        assert!(not(|s| s.nlink = 3));
        assert!(not(|s| s.mode = libc::S_IFLNK));
    }

    #[test]
    fn a_directory_descriptor_the_command_keeps_disables_every_mask() {
        let dir = std::fs::File::open("/").unwrap();
        let file = std::fs::File::open("/proc/self/status").unwrap();
        assert!(holds_a_directory(&[dir.as_raw_fd()]));
        assert!(!holds_a_directory(&[file.as_raw_fd()]) || holds_a_directory(&[]));
        // A number that is not open holds nothing.
        assert!(!holds_a_directory(&[4000]) || holds_a_directory(&[]));
    }
}
