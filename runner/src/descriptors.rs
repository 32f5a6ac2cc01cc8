//! Which descriptors the target inherits reach metadata outside the writable roots (see
//! `stockade_policy::descriptors`): stdin, stdout, stderr and the kept ones, opened by
//! the caller on its own mounts, where the stage's read-only mounts do not apply.
//!
//! A descriptor is fine when its object is private (a pipe, socket or anonymous inode),
//! when its own mount is read-only (every metadata change through it is `EROFS`: the
//! stage opens the caller's terminals again that way, see the launcher's
//! `stage::terminals`), or when it lies beneath a writable root: found by walking `..` up
//! from its directory and comparing each ancestor's device and inode with the roots',
//! never by comparing path strings. A directory, a named pipe, a pseudo-terminal, a
//! harmless device or a regular file opened only for reading outside the roots is opened
//! again through the read-only mounts and put in place of the caller's descriptor;
//! anything else that cannot be shown to be fine is named.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use stockade_policy::Policy;
use stockade_policy::descriptors::{DescriptorKind, OpenOutside};

/// linux/magic.h: filesystems whose inodes belong to no path anyone else opens.
const PRIVATE_FILESYSTEMS: [i64; 4] = [
    0x5049_5045, // PIPEFS_MAGIC
    0x534F_434B, // SOCKFS_MAGIC
    0x0904_1934, // ANON_INODE_FS_MAGIC
    0x5049_4446, // PIDFS_MAGIC
];

/// How far up a directory walk goes before giving up (deeper trees are named).
const MAX_DEPTH: usize = 4096;

/// Devices that are safe to open a second time (opening them has no effect of its own):
/// `/dev/null`, `/dev/zero`, `/dev/full`, `/dev/random`, `/dev/urandom`. A cloning or
/// arming device (`/dev/ptmx`, `/dev/tty`, a watchdog, `/dev/net/tun`) never is.
const REOPENABLE_DEVICES: [(u32, u32); 5] = [(1, 3), (1, 5), (1, 7), (1, 8), (1, 9)];
/// Pseudo-terminal ends (`/dev/pts/N`): majors 136 to 143.
const PTS_MAJORS: std::ops::RangeInclusive<u32> = 136..=143;

/// Opens each of `open` that is a directory, a named pipe, a harmless device, a
/// pseudo-terminal or a regular file opened only for reading again, by the name the
/// kernel gives it, through this process's mounts (the namespace stage's: read-only
/// outside the writable roots), and puts that descriptor in its place: the same object
/// with the same status flags, on which every metadata change is `EROFS`, through the
/// descriptor and through `/proc/self/fd/N` alike. A file read goes on from the offset
/// the caller's descriptor had; what the command reads no longer moves the caller's
/// offset (a file the caller shares for reading, as `{ cmd; rest; } < file`, is read by
/// `rest` from where it was before `cmd`). Returns those left as they were (a regular
/// file open for writing, which cannot be opened for writing on a read-only mount;
/// anything whose new descriptor is not the same object on a read-only mount).
///
/// Called before Landlock: a device opened afterwards would be refused for writing, and
/// its ioctls (terminal modes) governed, where the caller's descriptor was not.
pub fn reopen_read_only(open: Vec<OpenOutside>) -> Vec<OpenOutside> {
    open.into_iter().filter(|o| !reopen(o.fd)).collect()
}

/// Whether `fd` now refers to its object through a read-only mount.
fn reopen(fd: i32) -> bool {
    let Some(st) = fstat(fd) else {
        return false;
    };
    if !reopenable(fd, &st) {
        return false;
    }
    let Ok(path) = std::fs::read_link(format!("/proc/self/fd/{fd}")) else {
        return false;
    };
    let Some(new) = open_again(fd, &path) else {
        return false;
    };
    let same = fstat(new.as_raw_fd())
        .is_some_and(|n| (n.st_dev, n.st_ino, n.st_rdev) == (st.st_dev, st.st_ino, st.st_rdev));
    if !same || !read_only_mount(new.as_raw_fd()) || !same_offset(fd, &new, &st) {
        return false;
    }
    // SAFETY: dup2 onto a descriptor this process holds; the new one is then closed
    // when `new` drops. dup2 leaves `fd` without close-on-exec, as it was.
    unsafe { libc::dup2(new.as_raw_fd(), fd) == fd }
}

fn reopenable(fd: i32, st: &libc::stat) -> bool {
    let (major, minor) = (libc::major(st.st_rdev), libc::minor(st.st_rdev));
    match st.st_mode & libc::S_IFMT {
        libc::S_IFIFO | libc::S_IFDIR => true,
        libc::S_IFCHR => {
            REOPENABLE_DEVICES.contains(&(major, minor)) || PTS_MAJORS.contains(&major)
        }
        libc::S_IFREG => read_only_access(fd),
        _ => false,
    }
}

/// Whether `fd` was opened only for reading (or only as a path).
fn read_only_access(fd: i32) -> bool {
    // SAFETY: F_GETFL only reads the status flags of `fd`.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    flags >= 0 && (flags & libc::O_PATH != 0 || flags & libc::O_ACCMODE == libc::O_RDONLY)
}

/// For a regular file, moves `new` to `fd`'s offset (a path-only descriptor has none);
/// whether that worked. Other objects have no offset to keep.
fn same_offset(fd: i32, new: &OwnedFd, st: &libc::stat) -> bool {
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return true;
    }
    // SAFETY: lseek only reads or sets a descriptor's offset.
    unsafe {
        let at = libc::lseek(fd, 0, libc::SEEK_CUR);
        if at < 0 {
            // A path-only descriptor (EBADF): nothing to keep.
            return libc::fcntl(fd, libc::F_GETFL) & libc::O_PATH != 0;
        }
        libc::lseek(new.as_raw_fd(), at, libc::SEEK_SET) == at
    }
}

/// `path` opened with `fd`'s access mode and status flags, never as a controlling
/// terminal, without following a link in its last component. Non-blocking while it
/// opens (a named pipe opened for writing would wait for a reader), then as `fd` was.
fn open_again(fd: i32, path: &Path) -> Option<OwnedFd> {
    if !path.is_absolute() {
        return None;
    }
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: F_GETFL only reads the status flags of `fd`.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return None;
    }
    let kept = flags & (libc::O_ACCMODE | libc::O_APPEND | libc::O_NONBLOCK | libc::O_PATH);
    let open_flags = kept | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: open reads a NUL-terminated path alive for the call; a non-negative
    // return is a descriptor this process now owns.
    let new = unsafe { libc::open(c.as_ptr(), open_flags) };
    if new < 0 {
        return None;
    }
    // SAFETY: as above.
    let new = unsafe { OwnedFd::from_raw_fd(new) };
    if kept & libc::O_PATH != 0 {
        // An `O_PATH` descriptor has no status flags to set (and refuses F_SETFL).
        return Some(new);
    }
    // SAFETY: F_SETFL only sets status flags of the descriptor just opened.
    let r = unsafe { libc::fcntl(new.as_raw_fd(), libc::F_SETFL, kept) };
    (r == 0).then_some(new)
}

/// Whether `fd`'s mount is read-only.
fn read_only_mount(fd: i32) -> bool {
    // SAFETY: a plain C struct, for which all zeroes is a valid value.
    let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: fstatvfs fills the struct it is given.
    let r = unsafe { libc::fstatvfs(fd, &mut vfs) };
    r == 0 && vfs.f_flag & libc::ST_RDONLY != 0
}

/// The target's descriptors (0, 1, 2 and `--keep-fd` ones) through which it could change
/// metadata outside the writable roots of `policy`.
pub fn open_outside(policy: &Policy) -> Vec<OpenOutside> {
    let roots: Vec<(u64, u64)> = policy
        .root_ids()
        .iter()
        .map(|r| (r.id.dev, r.id.ino))
        .collect();
    let mut fds = vec![0, 1, 2];
    fds.extend(policy.keep_fds().iter().copied().filter(|&fd| fd > 2));
    fds.into_iter().filter_map(|fd| judge(fd, &roots)).collect()
}

/// `Some` when `fd` is open and its object is not shown to be private, on a read-only
/// mount or beneath a root.
fn judge(fd: i32, roots: &[(u64, u64)]) -> Option<OpenOutside> {
    let st = fstat(fd)?;
    if private_filesystem(fd) || read_only_mount(fd) {
        return None;
    }
    let kind = kind_of(fd, &st);
    let beneath = match kind {
        DescriptorKind::Directory => walks_into_root(fd, roots),
        _ => parent_of(fd, &st).is_some_and(|dir| walks_into_root(dir.as_raw_fd(), roots)),
    };
    (!beneath).then_some(OpenOutside { fd, kind })
}

fn fstat(fd: i32) -> Option<libc::stat> {
    // SAFETY: a plain C struct, for which all zeroes is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat fills the struct it is given; an unopened `fd` is an error.
    let r = unsafe { libc::fstat(fd, &mut st) };
    (r == 0).then_some(st)
}

/// Whether `fd` is on a filesystem of private inodes. A descriptor whose filesystem
/// cannot be told is not.
fn private_filesystem(fd: i32) -> bool {
    // SAFETY: a plain C struct, for which all zeroes is a valid value.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: fstatfs fills the struct it is given.
    if unsafe { libc::fstatfs(fd, &mut fs) } != 0 {
        return false;
    }
    PRIVATE_FILESYSTEMS.contains(&(fs.f_type as i64))
}

fn kind_of(fd: i32, st: &libc::stat) -> DescriptorKind {
    match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => DescriptorKind::Directory,
        libc::S_IFIFO => DescriptorKind::Fifo,
        // SAFETY: isatty only queries the descriptor.
        libc::S_IFCHR if unsafe { libc::isatty(fd) } == 1 => DescriptorKind::Terminal,
        libc::S_IFCHR | libc::S_IFBLK => DescriptorKind::Device,
        _ => DescriptorKind::File,
    }
}

/// The directory holding the object `fd` refers to, when the name the kernel gives for
/// it still leads to that very object (same device and inode): `None` for a deleted
/// file, a name outside this mount namespace's view, or one that changed.
fn parent_of(fd: i32, st: &libc::stat) -> Option<OwnedFd> {
    let path = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    let (parent, name) = (path.parent()?, path.file_name()?);
    if !path.is_absolute() {
        return None;
    }
    let dir = open_path(libc::AT_FDCWD, parent)?;
    let entry = stat_at(dir.as_raw_fd(), Path::new(name))?;
    (entry.st_dev == st.st_dev && entry.st_ino == st.st_ino).then_some(dir)
}

/// Whether `dir` or a directory above it (by `..`) is one of `roots`.
fn walks_into_root(dir: i32, roots: &[(u64, u64)]) -> bool {
    let Some(mut here) = open_path(dir, Path::new(".")) else {
        return false;
    };
    for _ in 0..MAX_DEPTH {
        let Some(st) = fstat(here.as_raw_fd()) else {
            return false;
        };
        let id = (st.st_dev, st.st_ino);
        if roots.contains(&id) {
            return true;
        }
        let Some(up) = open_path(here.as_raw_fd(), Path::new("..")) else {
            return false;
        };
        // `/` is its own parent.
        if fstat(up.as_raw_fd()).is_some_and(|p| (p.st_dev, p.st_ino) == id) {
            return false;
        }
        here = up;
    }
    false
}

/// An `O_PATH` descriptor of the directory `path` relative to `dir`.
fn open_path(dir: i32, path: &Path) -> Option<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
    // SAFETY: openat reads a NUL-terminated path alive for the call and returns a new
    // descriptor or -1.
    let fd = unsafe { libc::openat(dir, c.as_ptr(), flags) };
    // SAFETY: a non-negative return is a descriptor this process now owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `fstatat` of `name` in `dir`, without following a link.
fn stat_at(dir: i32, name: &Path) -> Option<libc::stat> {
    let c = CString::new(name.as_os_str().as_bytes()).ok()?;
    // SAFETY: a plain C struct, for which all zeroes is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstatat reads a NUL-terminated name alive for the call and fills the struct.
    let r = unsafe { libc::fstatat(dir, c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    (r == 0).then_some(st)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;
    use std::path::PathBuf;

    fn root(path: &Path) -> Vec<(u64, u64)> {
        let m = std::fs::metadata(path).unwrap();
        vec![(m.dev(), m.ino())]
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("stockade-fds-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("root/deep")).unwrap();
        std::fs::create_dir_all(dir.join("outside")).unwrap();
        dir
    }

    #[test]
    fn files_and_directories_beneath_a_root_are_fine_and_others_named() {
        let dir = scratch("judge");
        let roots = root(&dir.join("root"));
        let inside = std::fs::File::create(dir.join("root/deep/f")).unwrap();
        let outside = std::fs::File::create(dir.join("outside/f")).unwrap();
        let inside_dir = std::fs::File::open(dir.join("root/deep")).unwrap();
        let outside_dir = std::fs::File::open(dir.join("outside")).unwrap();
        assert_eq!(judge(inside.as_raw_fd(), &roots), None);
        assert_eq!(judge(inside_dir.as_raw_fd(), &roots), None);
        let named = judge(outside.as_raw_fd(), &roots).unwrap();
        assert_eq!(named.kind, DescriptorKind::File);
        let named = judge(outside_dir.as_raw_fd(), &roots).unwrap();
        assert_eq!(named.kind, DescriptorKind::Directory);
        // A file inside that is gone has no name to show where it was: named.
        std::fs::remove_file(dir.join("root/deep/f")).unwrap();
        assert!(judge(inside.as_raw_fd(), &roots).is_some());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn pipes_and_sockets_are_private_and_devices_are_named() {
        let (r, w) = nix::unistd::pipe().unwrap();
        assert_eq!(judge(r.as_raw_fd(), &[]), None);
        assert_eq!(judge(w.as_raw_fd(), &[]), None);
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(judge(a.as_raw_fd(), &[]), None);
        // Opened read-only and never changed: a test only looks at it.
        let null = std::fs::File::open("/dev/null").unwrap();
        let named = judge(null.as_raw_fd(), &[]).unwrap();
        assert_eq!(named.kind, DescriptorKind::Device);
        // Not open: nothing to name.
        assert_eq!(judge(9999, &[]), None);
    }
}
