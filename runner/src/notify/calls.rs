//! One supervised call, from the notification to the answer: decode what it asks,
//! read its arguments out of the caller's memory, find the object it would reach, judge
//! the object (`stockade_policy::supervision`), and make the change on the object
//! judged, never by the caller's path again.
//!
//! Why no call is let through (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`): the kernel would
//! then read the path again from the caller's memory and walk it again, and another
//! thread of the caller (or a rename) could by then make it lead elsewhere. The
//! supervisor walks the path once, with `openat2` refusing `/proc` magic links, keeps
//! what it found open, checks that the very object is reachable beneath a writable root
//! without following any link, and changes that object through its descriptor.
//!
//! The supervisor holds the caller's credentials and capabilities (the runner made them
//! so before it started supervising), so every change it makes the kernel judges as the
//! caller's own: owner checks, `CAP_FOWNER`, write permission for times.

use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
use nix::sys::stat::{Mode, SFlag, fstat};
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use stockade_policy::supervision::{self, Place};

use crate::seccomp::SYS_FCHMODAT2;

/// The longest path the kernel takes (`PATH_MAX`, with its NUL).
const PATH_MAX: usize = 4096;

/// What the supervisor judges against: the writable roots, each held open from the
/// start (a root replaced later by a link does not move the check), the workspace, and
/// the protected paths.
pub struct Rules {
    pub roots: Vec<PathBuf>,
    pub root_fds: Vec<Option<OwnedFd>>,
    pub workspace: PathBuf,
    pub protected: Vec<PathBuf>,
}

/// The change a call asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Change {
    Mode(u32),
    Owner(u32, u32),
    /// Times: where they are in the caller's memory (0: now), and in which layout.
    Times(u64, TimesLayout),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TimesLayout {
    /// `struct timespec[2]` (utimensat).
    Timespec,
    /// `struct timeval[2]` (utimes, futimesat).
    Timeval,
    /// `struct utimbuf` (utime).
    Utimbuf,
}

/// A decoded call: the object (a directory descriptor and an optional path in the
/// caller's memory) and the change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Call {
    dirfd: i32,
    /// Address of the path; `None` for a call on a descriptor.
    path: Option<u64>,
    nofollow: bool,
    /// `AT_EMPTY_PATH`: an empty path means the descriptor itself.
    empty_path: bool,
    change: Change,
}

/// Decodes a supervised call from its number and arguments; `None` for any other.
fn decode(nr: i64, a: [u64; 6]) -> Option<Call> {
    let int = |v: u64| v as u32 as i32;
    let at = |dirfd: u64, path: u64, flags: u64, change| Call {
        dirfd: int(dirfd),
        path: Some(path),
        nofollow: flags as u32 & libc::AT_SYMLINK_NOFOLLOW as u32 != 0,
        empty_path: flags as u32 & libc::AT_EMPTY_PATH as u32 != 0,
        change,
    };
    let on_fd = |fd: u64, change| Call {
        dirfd: int(fd),
        path: None,
        nofollow: false,
        empty_path: true,
        change,
    };
    let cwd = libc::AT_FDCWD as u32 as u64;
    let nofollow = libc::AT_SYMLINK_NOFOLLOW as u64;
    let mode = |v: u64| Change::Mode(v as u32 & 0o7777);
    let owner = |u: u64, g: u64| Change::Owner(u as u32, g as u32);
    let call = match nr {
        #[cfg(target_arch = "x86_64")]
        libc::SYS_chmod => at(cwd, a[0], 0, mode(a[1])),
        libc::SYS_fchmod => on_fd(a[0], mode(a[1])),
        // fchmodat has no flags argument.
        libc::SYS_fchmodat => at(a[0], a[1], 0, mode(a[2])),
        SYS_FCHMODAT2 => at(a[0], a[1], a[3], mode(a[2])),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_chown => at(cwd, a[0], 0, owner(a[1], a[2])),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_lchown => at(cwd, a[0], nofollow, owner(a[1], a[2])),
        libc::SYS_fchown => on_fd(a[0], owner(a[1], a[2])),
        libc::SYS_fchownat => at(a[0], a[1], a[4], owner(a[2], a[3])),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_utime => at(cwd, a[0], 0, Change::Times(a[1], TimesLayout::Utimbuf)),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_utimes => at(cwd, a[0], 0, Change::Times(a[1], TimesLayout::Timeval)),
        // A null path changes the descriptor's file, for futimesat as for utimensat
        // (where no flags are allowed then).
        #[cfg(target_arch = "x86_64")]
        libc::SYS_futimesat if a[1] == 0 => on_fd(a[0], Change::Times(a[2], TimesLayout::Timeval)),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_futimesat => at(a[0], a[1], 0, Change::Times(a[2], TimesLayout::Timeval)),
        libc::SYS_utimensat if a[1] == 0 => on_fd(a[0], Change::Times(a[2], TimesLayout::Timespec)),
        libc::SYS_utimensat => at(a[0], a[1], a[3], Change::Times(a[2], TimesLayout::Timespec)),
        _ => return None,
    };
    Some(call)
}

/// The calling task, as the supervisor reaches it: its `/proc` directory and memory.
/// Opened before the notification is checked to be still alive, so that everything read
/// through them is the caller's, not a later process's with the same id.
pub(super) struct Caller {
    pub(super) tid: u32,
    proc_dir: OwnedFd,
    mem: std::fs::File,
}

impl Caller {
    pub(super) fn open(tid: u32) -> Result<Caller, i32> {
        let proc_dir = nix::fcntl::open(
            format!("/proc/{tid}").as_str(),
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|_| libc::EPERM)?;
        let mem = nix::fcntl::openat(
            &proc_dir,
            "mem",
            OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|_| libc::EPERM)?;
        Ok(Caller {
            tid,
            proc_dir,
            mem: mem.into(),
        })
    }

    /// `len` bytes at `addr` in the caller's memory; EFAULT where they cannot be read.
    pub(super) fn read(&self, addr: u64, len: usize) -> Result<Vec<u8>, i32> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0u8; len];
        match self.mem.read_exact_at(&mut buf, addr) {
            Ok(()) => Ok(buf),
            Err(_) => Err(libc::EFAULT),
        }
    }

    /// The NUL-terminated string at `addr`, read a page at most at a time (a string near
    /// the end of a mapping must not fail for the bytes beyond it).
    pub(super) fn read_path(&self, addr: u64) -> Result<Vec<u8>, i32> {
        use std::os::unix::fs::FileExt;
        if addr == 0 {
            return Err(libc::EFAULT);
        }
        let mut out = Vec::new();
        let mut at = addr;
        while out.len() < PATH_MAX {
            let to_page_end = 4096 - (at % 4096) as usize;
            let mut buf = vec![0u8; to_page_end.min(PATH_MAX - out.len())];
            let n = self.mem.read_at(&mut buf, at).map_err(|_| libc::EFAULT)?;
            if n == 0 {
                return Err(libc::EFAULT);
            }
            if let Some(end) = buf[..n].iter().position(|&b| b == 0) {
                out.extend_from_slice(&buf[..end]);
                return Ok(out);
            }
            out.extend_from_slice(&buf[..n]);
            at += n as u64;
        }
        Err(libc::ENAMETOOLONG)
    }

    /// An entry of the caller's `/proc` directory (`cwd`, `root`, `fd/N`), followed to
    /// what it stands for, as an `O_PATH` descriptor.
    pub(super) fn open_entry(&self, entry: &str) -> Result<OwnedFd, i32> {
        nix::fcntl::openat(
            &self.proc_dir,
            entry,
            OFlag::O_PATH | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            // No such descriptor: what the call itself would answer.
            nix::errno::Errno::ENOENT if entry.starts_with("fd/") => libc::EBADF,
            nix::errno::Errno::ENOENT => libc::ENOENT,
            _ => libc::EPERM,
        })
    }

    /// The caller's thread group id, for recognising `/proc/PID/fd/N` of its own.
    pub(super) fn tgid(&self) -> u32 {
        self.status_field("Tgid:")
            .and_then(|v| v.parse().ok())
            .unwrap_or(self.tid)
    }

    /// The caller's umask (`None` where the kernel does not say: before Linux 4.7).
    pub(super) fn umask(&self) -> Option<u32> {
        self.status_field("Umask:")
            .and_then(|v| u32::from_str_radix(&v, 8).ok())
    }

    /// A field of the caller's `/proc/TID/status`, trimmed.
    fn status_field(&self, name: &str) -> Option<String> {
        let status = nix::fcntl::openat(
            &self.proc_dir,
            "status",
            OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .ok()
        .and_then(|fd| std::io::read_to_string(std::fs::File::from(fd)).ok())?;
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
    }

    /// The caller's controlling terminal (`tty_nr` of `/proc/TID/stat`; 0: none).
    pub(super) fn tty(&self) -> u64 {
        let stat = nix::fcntl::openat(
            &self.proc_dir,
            "stat",
            OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .ok()
        .and_then(|fd| std::io::read_to_string(std::fs::File::from(fd)).ok());
        stat.as_deref().map_or(0, tty_of_stat)
    }
}

/// `tty_nr`, the seventh field of a `stat` line, counted after the command's name
/// (which may hold spaces and parentheses: the last `)` ends it).
pub(super) fn tty_of_stat(stat: &str) -> u64 {
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(4))
        .and_then(|v| v.parse::<i64>().ok())
        .map_or(0, |v| v as u32 as u64)
}

/// Answers one notification: 0 when the change was made, else the errno the caller
/// gets. `alive` says whether the notification is still pending (the caller has not
/// died, its id not been reused), checked once everything of the caller's is open.
pub fn answer(rules: &Rules, tid: u32, nr: i64, args: [u64; 6], alive: &dyn Fn() -> bool) -> i32 {
    let Some(call) = decode(nr, args) else {
        return libc::ENOSYS;
    };
    match find_and_change(rules, tid, call, alive) {
        Ok(()) => 0,
        Err(errno) => errno,
    }
}

fn find_and_change(
    rules: &Rules,
    tid: u32,
    call: Call,
    alive: &dyn Fn() -> bool,
) -> Result<(), i32> {
    let caller = Caller::open(tid)?;
    if !alive() {
        return Err(libc::ESRCH);
    }
    let path = call.path.map(|addr| caller.read_path(addr)).transpose()?;
    let times = match call.change {
        Change::Times(addr, layout) => times(&caller, addr, layout)?,
        _ => None,
    };
    let target = find(&caller, &call, path.as_deref())?;
    // The objects opened through `/proc/TID` were the caller's only while it lives.
    if !alive() {
        return Err(libc::ESRCH);
    }
    judge(rules, &target)?;
    change(&target, call.change, times.as_ref())
}

/// The times a call asks for, as `utimensat` takes them (`None`: now).
fn times(
    caller: &Caller,
    addr: u64,
    layout: TimesLayout,
) -> Result<Option<[libc::timespec; 2]>, i32> {
    if addr == 0 {
        return Ok(None);
    }
    let word =
        |b: &[u8], i: usize| i64::from_ne_bytes(b[8 * i..8 * i + 8].try_into().unwrap_or_default());
    let spec = |sec: i64, nsec: i64| libc::timespec {
        tv_sec: sec,
        tv_nsec: nsec,
    };
    Ok(Some(match layout {
        TimesLayout::Timespec => {
            let b = caller.read(addr, 32)?;
            [
                spec(word(&b, 0), word(&b, 1)),
                spec(word(&b, 2), word(&b, 3)),
            ]
        }
        TimesLayout::Timeval => {
            let b = caller.read(addr, 32)?;
            let usec = [word(&b, 1), word(&b, 3)];
            if usec.iter().any(|u| !(0..1_000_000).contains(u)) {
                return Err(libc::EINVAL);
            }
            [
                spec(word(&b, 0), usec[0] * 1000),
                spec(word(&b, 2), usec[1] * 1000),
            ]
        }
        TimesLayout::Utimbuf => {
            let b = caller.read(addr, 16)?;
            [spec(word(&b, 0), 0), spec(word(&b, 1), 0)]
        }
    }))
}

/// The object the call would reach, opened `O_PATH`: through the caller's descriptor,
/// or by walking its path from its working directory, root or directory descriptor.
fn find(caller: &Caller, call: &Call, path: Option<&[u8]>) -> Result<OwnedFd, i32> {
    let dir_entry = |fd: i32| match fd {
        libc::AT_FDCWD => "cwd".to_string(),
        fd if fd < 0 => String::new(),
        fd => format!("fd/{fd}"),
    };
    let Some(path) = path else {
        return match dir_entry(call.dirfd) {
            e if e.is_empty() || e == "cwd" => Err(libc::EBADF),
            e => caller.open_entry(&e),
        };
    };
    if path.is_empty() {
        if !call.empty_path {
            return Err(libc::ENOENT);
        }
        return match dir_entry(call.dirfd) {
            e if e.is_empty() => Err(libc::EBADF),
            e => caller.open_entry(&e),
        };
    }
    if path.starts_with(b"/proc/") || path.starts_with(b"/dev/") {
        let tgid = caller.tgid();
        if let Some(fd) = supervision::descriptor_path(path, tgid, caller.tid) {
            return caller.open_entry(&format!("fd/{fd}"));
        }
    }
    let absolute = path[0] == b'/';
    let base = if absolute {
        caller.open_entry("root")?
    } else {
        match dir_entry(call.dirfd) {
            e if e.is_empty() => return Err(libc::EBADF),
            e => caller.open_entry(&e)?,
        }
    };
    let mut flags = OFlag::O_PATH | OFlag::O_CLOEXEC;
    if call.nofollow {
        flags |= OFlag::O_NOFOLLOW;
    }
    let mut resolve = ResolveFlag::RESOLVE_NO_MAGICLINKS;
    if absolute {
        // The caller's root stands for `/`, as it does for the caller.
        resolve |= ResolveFlag::RESOLVE_IN_ROOT;
    }
    let path = CString::new(path).map_err(|_| libc::EINVAL)?;
    open_retrying(base.as_fd(), &path, flags, resolve)
}

/// `openat2`, retried a few times when a concurrent rename made the kernel give up
/// (`EAGAIN`, which scoped lookups answer rather than risk a wrong result).
pub(super) fn open_retrying(
    base: BorrowedFd<'_>,
    path: &CString,
    flags: OFlag,
    resolve: ResolveFlag,
) -> Result<OwnedFd, i32> {
    let how = || OpenHow::new().flags(flags).resolve(resolve);
    let mut last = libc::EAGAIN;
    for _ in 0..4 {
        match openat2(base, path.as_c_str(), how()) {
            Ok(fd) => return Ok(fd),
            Err(nix::errno::Errno::EAGAIN) => continue,
            Err(e) => {
                last = e as i32;
                break;
            }
        }
    }
    Err(last)
}

/// Whether the object `target` may change: an object on a read-only mount may not, with
/// the kernel's own answer (EROFS: under the namespace stage everything outside the
/// writable roots, and each protected path, is such a mount, and a command there gets
/// what it gets without the supervisor); a private object (a pipe, a socket, a file
/// deleted everywhere) is its holders' alone; anything else must be reachable, by the
/// path the kernel now gives it, beneath a writable root without following a link, and
/// not be protected. EPERM otherwise: an inherited descriptor the caller opened on its
/// own read-write mount, outside the roots, is refused here, stage or not.
fn judge(rules: &Rules, target: &OwnedFd) -> Result<(), i32> {
    if read_only_mount(target) {
        return Err(libc::EROFS);
    }
    let st = fstat(target).map_err(|_| libc::EPERM)?;
    // A name the kernel cannot give (too long) is judged as no name in a root: refused.
    let link = std::fs::read_link(format!("/proc/self/fd/{}", target.as_raw_fd()))
        .map(PathBuf::into_os_string)
        .map_err(|_| libc::EPERM)?;
    if !supervision::names_a_file(&link) || st.st_nlink == 0 {
        return Ok(());
    }
    let place = supervision::place(
        std::path::Path::new(&link),
        &rules.roots,
        &rules.workspace,
        &rules.protected,
    );
    let Place::Inside { root, beneath } = place else {
        return Err(libc::EPERM);
    };
    let Some(Some(root_fd)) = rules.root_fds.get(root) else {
        return Err(libc::EPERM);
    };
    let rel = if beneath.as_os_str().is_empty() {
        CString::from(c".")
    } else {
        CString::new(beneath.into_os_string().into_vec()).map_err(|_| libc::EPERM)?
    };
    let again = open_retrying(
        root_fd.as_fd(),
        &rel,
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        ResolveFlag::RESOLVE_BENEATH
            | ResolveFlag::RESOLVE_NO_SYMLINKS
            | ResolveFlag::RESOLVE_NO_MAGICLINKS,
    )
    .map_err(|_| libc::EPERM)?;
    let st_again = fstat(&again).map_err(|_| libc::EPERM)?;
    if (st_again.st_dev, st_again.st_ino) != (st.st_dev, st.st_ino) {
        return Err(libc::EPERM);
    }
    Ok(())
}

/// Whether `fd`'s mount is read-only (`fstatvfs` works on an `O_PATH` descriptor).
fn read_only_mount(fd: &OwnedFd) -> bool {
    nix::sys::statvfs::fstatvfs(fd)
        .is_ok_and(|vfs| vfs.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
}

fn is_link(fd: &OwnedFd) -> bool {
    fstat(fd)
        .is_ok_and(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK)
}

/// Makes the change on the object judged. Through the descriptor itself where the call
/// takes an empty path (`AT_EMPTY_PATH`), else through its `/proc/self/fd` entry, which
/// leads to exactly that object whatever its names are now.
fn change(
    target: &OwnedFd,
    change: Change,
    times: Option<&[libc::timespec; 2]>,
) -> Result<(), i32> {
    let fd = target.as_raw_fd();
    let proc_path = CString::new(format!("/proc/self/fd/{fd}")).map_err(|_| libc::EINVAL)?;
    let r = match change {
        // Linux keeps no mode on a link: what fchmodat answers for one.
        Change::Mode(_) if is_link(target) => return Err(libc::EOPNOTSUPP),
        Change::Mode(mode) => {
            if mode & (libc::S_ISUID | libc::S_ISGID) != 0 {
                // The main filter refuses these before they arrive; never made here.
                return Err(libc::EPERM);
            }
            // SAFETY: a NUL-terminated path that lives across the call.
            unsafe { libc::chmod(proc_path.as_ptr(), mode) }
        }
        // SAFETY: an empty NUL-terminated path and a descriptor of ours.
        Change::Owner(uid, gid) => unsafe {
            libc::fchownat(fd, c"".as_ptr(), uid, gid, libc::AT_EMPTY_PATH)
        },
        Change::Times(..) => {
            let ptr = times.map_or(std::ptr::null(), |t| t.as_ptr());
            // SAFETY: an empty path, a descriptor of ours, and null or two timespecs
            // that live across the call.
            let r = unsafe { libc::utimensat(fd, c"".as_ptr(), ptr, libc::AT_EMPTY_PATH) };
            if r != 0 && nix::errno::Errno::last() == nix::errno::Errno::EINVAL && !is_link(target)
            {
                // A kernel without AT_EMPTY_PATH for utimensat: the /proc entry.
                // SAFETY: as above, with a NUL-terminated path.
                unsafe { libc::utimensat(libc::AT_FDCWD, proc_path.as_ptr(), ptr, 0) }
            } else {
                r
            }
        }
    };
    match r {
        0 => Ok(()),
        _ => Err(nix::errno::Errno::last() as i32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_decode_to_their_object_and_change() {
        let path = 0x1000;
        let c = decode(libc::SYS_fchmodat, [(-100i64) as u64, path, 0o755, 0, 0, 0]).unwrap();
        assert_eq!(c.dirfd, libc::AT_FDCWD);
        assert_eq!(c.path, Some(path));
        assert_eq!(c.change, Change::Mode(0o755));
        let c = decode(
            libc::SYS_fchownat,
            [3, path, 1, 2, libc::AT_SYMLINK_NOFOLLOW as u64, 0],
        )
        .unwrap();
        assert!(c.nofollow && !c.empty_path);
        assert_eq!(c.change, Change::Owner(1, 2));
        let c = decode(libc::SYS_fchown, [4, 1, u32::MAX as u64, 0, 0, 0]).unwrap();
        assert_eq!((c.dirfd, c.path), (4, None));
        // utimensat with a null path is the descriptor's own file.
        let c = decode(libc::SYS_utimensat, [5, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!((c.dirfd, c.path), (5, None));
        #[cfg(target_arch = "x86_64")]
        {
            let c = decode(libc::SYS_futimesat, [6, 0, 0, 0, 0, 0]).unwrap();
            assert_eq!((c.dirfd, c.path), (6, None));
            let c = decode(libc::SYS_futimesat, [6, path, 0, 0, 0, 0]).unwrap();
            assert_eq!((c.dirfd, c.path), (6, Some(path)));
        }
        assert!(decode(libc::SYS_openat, [0; 6]).is_none());
    }

    #[test]
    fn every_call_the_filter_sends_is_decoded() {
        // A call added to the main filter's metadata lists reaches the supervisor: it
        // must be one it can answer (else every such call fails with ENOSYS).
        for nr in super::super::filter::supervised() {
            assert!(decode(nr, [3, 0x1000, 0, 0, 0, 0]).is_some(), "{nr}");
        }
    }
}
