//! The protected paths without the namespace stage: every call that can write or
//! replace a name (an open that writes or creates, rename, link, symlink,
//! unlink, rmdir, mkdir, mknod, truncate) reaches the supervisor, which finds what the
//! call would reach the way the kernel would for the command (its working directory,
//! directory descriptor and root; its `/proc/self/fd` names), refuses what would change
//! a protected path (by name, or by identity for a file hard-linked elsewhere before
//! the run) with the answer the stage's mounts give, and performs everything else
//! itself: on the objects it found and judged, never by the command's path again, in
//! its worker thread restricted with the command's Landlock ruleset, with the command's
//! umask; an opened file is handed to the command as the call's result
//! (`SECCOMP_ADDFD_FLAG_SEND`). `openat2`, whose flags are in memory, never arrives:
//! the main filter answers it ENOSYS for every command, and callers fall back to
//! `openat`.
//!
//! Landlock cannot hold a protected file: `.git/config` sits in `.git`, where git must
//! create `config.lock` and rename it. Why no call is let through unjudged
//! (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`): the kernel would read the path again, which
//! another thread can have changed by then. Calls are judged and made one at a time, so
//! no rename the supervisor makes can move a directory between another call's check
//! and its change; every rename the command makes is one of them.

use super::calls::{Caller, open_retrying};
use super::worker::{Outcome, Worker};
use nix::fcntl::{OFlag, ResolveFlag};
use nix::sys::stat::{FileStat, SFlag, fstat};
use std::collections::HashSet;
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use stockade_policy::supervision::{self, NameUse, Refusal};

/// The most links followed while creating through dangling ones (the kernel's limit).
const MAX_LINKS: usize = 40;
/// Files beneath protected directories remembered by identity, at most.
const MAX_REMEMBERED: usize = 10_000;
/// `PROC_SUPER_MAGIC`.
const PROC_MAGIC: i64 = 0x9fa0;

/// What the supervisor holds the protected paths by: their paths, and the identities
/// (device, inode) of the files on and beneath them, taken before the command starts,
/// so that a hard link made before the run does not lead around the names.
pub struct Protection {
    pub paths: Vec<PathBuf>,
    pub files: HashSet<(u64, u64)>,
}

impl Protection {
    pub fn of(paths: Vec<PathBuf>) -> Protection {
        let mut files = HashSet::new();
        for p in &paths {
            remember(p, &mut files);
        }
        Protection { paths, files }
    }
}

/// Adds the identities of the files on and beneath `path` (not following links).
fn remember(path: &Path, files: &mut HashSet<(u64, u64)>) {
    let mut pending = vec![path.to_path_buf()];
    while let Some(p) = pending.pop() {
        if files.len() >= MAX_REMEMBERED {
            return;
        }
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        use std::os::unix::fs::MetadataExt;
        if meta.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&p) {
                pending.extend(entries.flatten().map(|e| e.path()));
            }
        } else if meta.is_file() {
            files.insert((meta.dev(), meta.ino()));
        }
    }
}

/// How a call is answered.
pub enum Reply {
    Errno(i32),
    /// Done; the call returns 0.
    Done,
    /// This descriptor is the call's result (with `O_CLOEXEC` when the flag is set).
    Fd(OwnedFd, bool),
    /// A thread of its own answers (an open that can wait).
    Later,
}

/// Sends `reply` for notification `id`.
pub fn send(listener: RawFd, id: u64, reply: Reply) {
    let respond = |error: i32| {
        let resp = libc::seccomp_notif_resp {
            id,
            val: 0,
            error: -error,
            flags: 0,
        };
        // SAFETY: SEND reads one `struct seccomp_notif_resp`, which lives across the
        // call. A caller that died meanwhile makes it fail (ENOENT), changing nothing.
        unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND, &resp) };
    };
    match reply {
        Reply::Later => {}
        Reply::Done => respond(0),
        Reply::Errno(e) => respond(e),
        Reply::Fd(fd, cloexec) => {
            let addfd = libc::seccomp_notif_addfd {
                id,
                flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
                srcfd: fd.as_raw_fd() as u32,
                newfd: 0,
                newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
            };
            // SAFETY: ADDFD reads one `struct seccomp_notif_addfd`, which lives across
            // the call; with SEND it also answers the call with the new descriptor.
            let r = unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ADDFD, &addfd) };
            if r < 0 {
                let e = nix::errno::Errno::last() as i32;
                // No room in the caller's table (EMFILE): its answer. A caller gone
                // (ENOENT) gets nothing.
                if e != libc::ENOENT {
                    respond(e);
                }
            }
        }
    }
}

/// A notification being answered: what a thread answering later needs.
pub struct Pending {
    pub listener: Arc<OwnedFd>,
    pub id: u64,
}

/// A directory (the caller's, by its descriptor, or one of ours) and a path in it.
type At = (i32, u64);

/// A decoded call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Open {
        at: At,
        flags: u64,
        mode: u32,
        resolve: u64,
    },
    Rename {
        from: At,
        to: At,
        flags: u32,
    },
    Link {
        from: At,
        to: At,
        flags: i32,
    },
    Symlink {
        target: u64,
        to: At,
    },
    Unlink {
        at: At,
        flags: i32,
    },
    Mkdir {
        at: At,
        mode: u32,
    },
    Mknod {
        at: At,
        mode: u32,
        dev: u32,
    },
    Truncate {
        path: u64,
        len: i64,
    },
}

fn decode(nr: i64, a: [u64; 6]) -> Option<Op> {
    let fd = |v: u64| v as u32 as i32;
    #[cfg(target_arch = "x86_64")]
    let cwd = libc::AT_FDCWD;
    let op = match nr {
        libc::SYS_openat => Op::Open {
            at: (fd(a[0]), a[1]),
            flags: a[2] as u32 as u64,
            mode: a[3] as u32,
            resolve: 0,
        },
        libc::SYS_renameat2 => Op::Rename {
            from: (fd(a[0]), a[1]),
            to: (fd(a[2]), a[3]),
            flags: a[4] as u32,
        },
        libc::SYS_linkat => Op::Link {
            from: (fd(a[0]), a[1]),
            to: (fd(a[2]), a[3]),
            flags: fd(a[4]),
        },
        libc::SYS_symlinkat => Op::Symlink {
            target: a[0],
            to: (fd(a[1]), a[2]),
        },
        libc::SYS_unlinkat => Op::Unlink {
            at: (fd(a[0]), a[1]),
            flags: fd(a[2]),
        },
        libc::SYS_mkdirat => Op::Mkdir {
            at: (fd(a[0]), a[1]),
            mode: a[2] as u32,
        },
        libc::SYS_mknodat => Op::Mknod {
            at: (fd(a[0]), a[1]),
            mode: a[2] as u32,
            dev: a[3] as u32,
        },
        libc::SYS_truncate => Op::Truncate {
            path: a[0],
            len: a[1] as i64,
        },
        #[cfg(target_arch = "x86_64")]
        nr => return decode_legacy(nr, a, cwd),
        #[cfg(not(target_arch = "x86_64"))]
        _ => return None,
    };
    Some(op)
}

/// The calls without a directory argument, which x86_64 keeps (each is its `...at`
/// twin from the working directory).
#[cfg(target_arch = "x86_64")]
fn decode_legacy(nr: i64, a: [u64; 6], cwd: i32) -> Option<Op> {
    let op = match nr {
        libc::SYS_open => Op::Open {
            at: (cwd, a[0]),
            flags: a[1] as u32 as u64,
            mode: a[2] as u32,
            resolve: 0,
        },
        libc::SYS_creat => Op::Open {
            at: (cwd, a[0]),
            flags: (libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as u64,
            mode: a[1] as u32,
            resolve: 0,
        },
        libc::SYS_rename => Op::Rename {
            from: (cwd, a[0]),
            to: (cwd, a[1]),
            flags: 0,
        },
        libc::SYS_renameat => Op::Rename {
            from: (a[0] as u32 as i32, a[1]),
            to: (a[2] as u32 as i32, a[3]),
            flags: 0,
        },
        libc::SYS_link => Op::Link {
            from: (cwd, a[0]),
            to: (cwd, a[1]),
            flags: 0,
        },
        libc::SYS_symlink => Op::Symlink {
            target: a[0],
            to: (cwd, a[1]),
        },
        libc::SYS_unlink => Op::Unlink {
            at: (cwd, a[0]),
            flags: 0,
        },
        libc::SYS_rmdir => Op::Unlink {
            at: (cwd, a[0]),
            flags: libc::AT_REMOVEDIR,
        },
        libc::SYS_mkdir => Op::Mkdir {
            at: (cwd, a[0]),
            mode: a[1] as u32,
        },
        libc::SYS_mknod => Op::Mknod {
            at: (cwd, a[0]),
            mode: a[1] as u32,
            dev: a[2] as u32,
        },
        _ => return None,
    };
    Some(op)
}

/// Whether `nr` is one of the calls answered here.
pub fn is_write(nr: i64) -> bool {
    decode(nr, [0; 6]).is_some()
}

/// What answering one call needs.
pub struct Context<'a> {
    pub protection: &'a Protection,
    pub worker: &'a Worker,
    pub alive: &'a dyn Fn() -> bool,
    pub pending: Pending,
}

/// Answers one call that writes or replaces a name.
pub fn answer(cx: &Context<'_>, tid: u32, nr: i64, args: [u64; 6]) -> Reply {
    let Some(op) = decode(nr, args) else {
        return Reply::Errno(libc::ENOSYS);
    };
    let caller = match Caller::open(tid) {
        Ok(c) => c,
        Err(e) => return Reply::Errno(e),
    };
    if !(cx.alive)() {
        return Reply::Errno(libc::ESRCH);
    }
    let call = Call {
        cx,
        caller: &caller,
    };
    match call.perform(op) {
        Ok(reply) => reply,
        Err(e) => Reply::Errno(e),
    }
}

/// One call being answered.
struct Call<'a> {
    cx: &'a Context<'a>,
    caller: &'a Caller,
}

/// A name in a directory, as found for a call: the directory held open, the last
/// component, and whether the path ended in `/`.
struct Name {
    dir: OwnedFd,
    name: Vec<u8>,
    slash: bool,
}

impl Name {
    /// The component as the kernel is given it (with its `/`, which makes it follow a
    /// link and want a directory).
    fn arg(&self) -> Result<CString, i32> {
        let mut n = self.name.clone();
        if self.slash {
            n.push(b'/');
        }
        CString::new(n).map_err(|_| libc::EINVAL)
    }

    /// Where the name is, as the kernel names its directory now.
    fn path(&self) -> Result<PathBuf, i32> {
        let dir = fd_path(self.dir.as_fd())?;
        Ok(dir.join(std::ffi::OsStr::from_bytes(&self.name)))
    }
}

/// Where a path starts: the caller's directory descriptor, or a directory of ours.
enum Start<'a> {
    Caller(i32),
    Ours(BorrowedFd<'a>),
}

impl Call<'_> {
    fn perform(&self, op: Op) -> Result<Reply, i32> {
        match op {
            Op::Open {
                at,
                flags,
                mode,
                resolve,
            } => self.open(at, flags, mode, resolve),
            Op::Rename { from, to, flags } => self.rename(from, to, flags),
            Op::Link { from, to, flags } => self.link(from, to, flags),
            Op::Symlink { target, to } => {
                let target = self.caller.read_path(target)?;
                if target.is_empty() {
                    return Err(libc::ENOENT);
                }
                let target = CString::new(target).map_err(|_| libc::EINVAL)?;
                let new = self.name(to)?;
                self.judge_name(&new, NameUse::Create)?;
                let arg = new.arg()?;
                self.done(move || {
                    nix::unistd::symlinkat(target.as_c_str(), &new.dir, arg.as_c_str())
                        .map(|()| None)
                        .map_err(|e| e as i32)
                })
            }
            Op::Unlink { at, flags } => {
                let old = self.name(at)?;
                self.judge_name(&old, NameUse::Remove)?;
                let arg = old.arg()?;
                self.done(move || {
                    // SAFETY: a descriptor of ours and a NUL-terminated name.
                    let r = unsafe { libc::unlinkat(old.dir.as_raw_fd(), arg.as_ptr(), flags) };
                    errno_of(r).map(|()| None)
                })
            }
            Op::Mkdir { at, mode } => self.make(at, move |dir, name| {
                // SAFETY: a descriptor of ours and a NUL-terminated name.
                errno_of(unsafe { libc::mkdirat(dir, name.as_ptr(), mode) })
            }),
            Op::Mknod { at, mode, dev } => self.make(at, move |dir, name| {
                // SAFETY: as mkdirat, with the device number as the caller gave it.
                let r = unsafe { libc::syscall(libc::SYS_mknodat, dir, name.as_ptr(), mode, dev) };
                errno_of(r as i32)
            }),
            Op::Truncate { path, len } => {
                let target = self.existing((libc::AT_FDCWD, path), true, 0)?;
                self.judge_object(&target, NameUse::Write)?;
                self.done(move || {
                    let path = proc_self(&target)?;
                    // SAFETY: a NUL-terminated path of ours.
                    errno_of(unsafe { libc::truncate(path.as_ptr(), len) }).map(|()| None)
                })
            }
        }
    }

    /// Makes a name with `make` (mkdir, mknod) in the caller's umask.
    fn make(
        &self,
        at: At,
        make: impl FnOnce(RawFd, &CString) -> Result<(), i32> + Send + 'static,
    ) -> Result<Reply, i32> {
        let new = self.name(at)?;
        self.judge_name(&new, NameUse::Create)?;
        let umask = self.caller.umask().unwrap_or(0o022);
        let arg = new.arg()?;
        self.done(move || with_umask(umask, || make(new.dir.as_raw_fd(), &arg)).map(|()| None))
    }

    fn rename(&self, from: At, to: At, flags: u32) -> Result<Reply, i32> {
        let old = self.name(from)?;
        let new = self.name(to)?;
        // Exchanging makes each name the other's: both removed and replaced, which the
        // rule answers alike.
        self.judge_name(&old, NameUse::Remove)?;
        self.judge_name(&new, NameUse::Replace)?;
        let (old_arg, new_arg) = (old.arg()?, new.arg()?);
        self.done(move || {
            // SAFETY: descriptors of ours, NUL-terminated names, the caller's flags.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_renameat2,
                    old.dir.as_raw_fd(),
                    old_arg.as_ptr(),
                    new.dir.as_raw_fd(),
                    new_arg.as_ptr(),
                    flags,
                )
            };
            errno_of(r as i32).map(|()| None)
        })
    }

    fn link(&self, from: At, to: At, flags: i32) -> Result<Reply, i32> {
        let known = libc::AT_SYMLINK_FOLLOW | libc::AT_EMPTY_PATH;
        if flags & !known != 0 {
            return Err(libc::EINVAL);
        }
        let path = self.caller.read_path(from.1)?;
        let target = if path.is_empty() && flags & libc::AT_EMPTY_PATH != 0 {
            // The descriptor's own file (an O_TMPFILE given its name).
            self.caller.open_entry(&format!("fd/{}", from.0))?
        } else {
            let follow = flags & libc::AT_SYMLINK_FOLLOW != 0;
            self.find(Start::Caller(from.0), &path, follow, 0)?
        };
        self.judge_object(&target, NameUse::LinkFrom)?;
        let new = self.name(to)?;
        self.judge_name(&new, NameUse::Create)?;
        let arg = new.arg()?;
        self.done(move || {
            let source = proc_self(&target)?;
            // SAFETY: NUL-terminated paths and a descriptor of ours. Following the
            // `/proc/self/fd` link leads to exactly the object judged.
            let r = unsafe {
                libc::linkat(
                    libc::AT_FDCWD,
                    source.as_ptr(),
                    new.dir.as_raw_fd(),
                    arg.as_ptr(),
                    libc::AT_SYMLINK_FOLLOW,
                )
            };
            errno_of(r).map(|()| None)
        })
    }

    /// Runs `job` on the worker once the caller is known to be still waiting.
    fn done(&self, job: impl FnOnce() -> Outcome + Send + 'static) -> Result<Reply, i32> {
        if !(self.cx.alive)() {
            return Err(libc::ESRCH);
        }
        match self.cx.worker.run(job)? {
            Some(fd) => Ok(Reply::Fd(fd, false)),
            None => Ok(Reply::Done),
        }
    }

    /// The directory holding the last component of the path at `at`, and that
    /// component (not followed).
    fn name(&self, at: At) -> Result<Name, i32> {
        let path = self.path_at(at.1)?;
        self.name_from(Start::Caller(at.0), &path, 0)
    }

    fn name_from(&self, start: Start<'_>, path: &[u8], resolve: u64) -> Result<Name, i32> {
        if path.is_empty() {
            return Err(libc::ENOENT);
        }
        let (base, resolve) = self.base(start, path, resolve)?;
        let (dir_part, name, slash) = split(path);
        let dir = if dir_part.is_empty() {
            base
        } else {
            let dir_part = CString::new(dir_part).map_err(|_| libc::EINVAL)?;
            open_retrying(
                base.as_fd(),
                &dir_part,
                OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                resolve | ResolveFlag::RESOLVE_NO_MAGICLINKS,
            )?
        };
        Ok(Name {
            dir,
            name: name.to_vec(),
            slash,
        })
    }

    /// The caller's path at `addr`, with its `/proc/self` named by the caller's id.
    fn path_at(&self, addr: u64) -> Result<Vec<u8>, i32> {
        let path = self.caller.read_path(addr)?;
        Ok(self.own_proc(path))
    }

    /// `/proc/self` and `/proc/thread-self` are the reader's: the caller's, not the
    /// supervisor's.
    fn own_proc(&self, path: Vec<u8>) -> Vec<u8> {
        if !path.starts_with(b"/proc/") {
            return path;
        }
        let tid = self.caller.tid;
        let rest = &path[b"/proc/".len()..];
        let (head, tail) = match rest.iter().position(|&b| b == b'/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, &b""[..]),
        };
        let prefix = match head {
            b"self" => format!("/proc/{}", self.caller.tgid()),
            b"thread-self" => format!("/proc/{}/task/{tid}", self.caller.tgid()),
            _ => return path,
        };
        let mut out = prefix.into_bytes();
        out.extend_from_slice(tail);
        out
    }

    /// Where resolution starts for `path`, with the resolve flags for it.
    fn base(
        &self,
        start: Start<'_>,
        path: &[u8],
        resolve: u64,
    ) -> Result<(OwnedFd, ResolveFlag), i32> {
        let mut flags = ResolveFlag::from_bits(resolve).ok_or(libc::EINVAL)?;
        let absolute = path.first() == Some(&b'/');
        let own = |fd: BorrowedFd<'_>| fd.try_clone_to_owned().map_err(|_| libc::EMFILE);
        if absolute && flags.contains(ResolveFlag::RESOLVE_BENEATH) {
            return Err(libc::EXDEV);
        }
        let base = match (
            absolute && !flags.contains(ResolveFlag::RESOLVE_IN_ROOT),
            start,
        ) {
            (true, _) => {
                // The caller's root stands for `/`, as it does for the caller.
                flags |= ResolveFlag::RESOLVE_IN_ROOT;
                self.caller.open_entry("root")?
            }
            (false, Start::Ours(fd)) => own(fd)?,
            (false, Start::Caller(libc::AT_FDCWD)) => self.caller.open_entry("cwd")?,
            (false, Start::Caller(fd)) if fd < 0 => return Err(libc::EBADF),
            (false, Start::Caller(fd)) => self.caller.open_entry(&format!("fd/{fd}"))?,
        };
        Ok((base, flags))
    }

    /// The existing object the path at `at` reaches, `O_PATH` (`follow`: a final link
    /// is followed), with the caller's descriptor names recognised.
    fn existing(&self, at: At, follow: bool, resolve: u64) -> Result<OwnedFd, i32> {
        let path = self.path_at(at.1)?;
        self.find(Start::Caller(at.0), &path, follow, resolve)
    }

    fn find(
        &self,
        start: Start<'_>,
        path: &[u8],
        follow: bool,
        resolve: u64,
    ) -> Result<OwnedFd, i32> {
        if path.is_empty() {
            return Err(libc::ENOENT);
        }
        if let Some(fd) = self.descriptor(path) {
            return self.caller.open_entry(&format!("fd/{fd}"));
        }
        let (base, resolve) = self.base(start, path, resolve)?;
        let mut flags = OFlag::O_PATH | OFlag::O_CLOEXEC;
        if !follow {
            flags |= OFlag::O_NOFOLLOW;
        }
        let path = CString::new(path).map_err(|_| libc::EINVAL)?;
        open_retrying(
            base.as_fd(),
            &path,
            flags,
            resolve | ResolveFlag::RESOLVE_NO_MAGICLINKS,
        )
    }

    /// The caller's descriptor a path names through `/proc/PID/fd` or `/dev/fd`.
    fn descriptor(&self, path: &[u8]) -> Option<i32> {
        if !(path.starts_with(b"/proc/") || path.starts_with(b"/dev/")) {
            return None;
        }
        supervision::descriptor_path(path, self.caller.tgid(), self.caller.tid)
    }

    /// Refuses a call doing `how` to `name` on a protected path.
    fn judge_name(&self, name: &Name, how: NameUse) -> Result<(), i32> {
        let path = name.path()?;
        match supervision::name_refusal(&path, how, &self.cx.protection.paths) {
            Some(refusal) => Err(errno(refusal)),
            None => Ok(()),
        }
    }

    /// Refuses a call doing `how` (writing it, linking to it) to the object `target`:
    /// by the name the kernel gives it now, or by its identity.
    fn judge_object(&self, target: &OwnedFd, how: NameUse) -> Result<FileStat, i32> {
        let st = fstat(target).map_err(|e| e as i32)?;
        let path = fd_path(target.as_fd())?;
        let by_name = supervision::names_a_file(path.as_os_str())
            .then(|| supervision::name_refusal(&path, how, &self.cx.protection.paths))
            .flatten();
        let by_identity = self
            .cx
            .protection
            .files
            .contains(&(st.st_dev, st.st_ino))
            .then_some(match how {
                NameUse::LinkFrom => Refusal::CrossDevice,
                _ => Refusal::ReadOnly,
            });
        match by_name.or(by_identity) {
            Some(refusal) => Err(errno(refusal)),
            None => Ok(st),
        }
    }
}

/// The open: find the object (or the name to create), judge it, open it on the
/// worker and hand the descriptor over.
impl Call<'_> {
    fn open(&self, at: At, flags: u64, mode: u32, resolve: u64) -> Result<Reply, i32> {
        let f = flags as i32;
        let cloexec = f & libc::O_CLOEXEC != 0;
        let tmpfile = f & libc::O_TMPFILE == libc::O_TMPFILE;
        let create = f & libc::O_CREAT != 0 && !tmpfile;
        let excl = create && f & libc::O_EXCL != 0;
        let nofollow = f & libc::O_NOFOLLOW != 0 || excl;
        let mut path = self.path_at(at.1)?;
        if path.is_empty() {
            return Err(libc::ENOENT);
        }
        let mut ours: Option<OwnedFd> = None;
        for _ in 0..MAX_LINKS {
            let start = match &ours {
                Some(fd) => Start::Ours(fd.as_fd()),
                None => Start::Caller(at.0),
            };
            let start_again = match &ours {
                Some(fd) => Start::Ours(fd.as_fd()),
                None => Start::Caller(at.0),
            };
            match self.find(start, &path, !nofollow, resolve) {
                Ok(_) if excl => return Err(libc::EEXIST),
                Ok(target) => return self.open_existing(target, f, mode, create),
                Err(libc::ENOENT) if create => {}
                Err(e) => return Err(e),
            }
            let name = self.name_from(start_again, &path, resolve)?;
            if name.slash {
                return Err(libc::EISDIR);
            }
            let link = CString::new(name.name.clone()).map_err(|_| libc::EINVAL)?;
            match nix::fcntl::readlinkat(&name.dir, link.as_c_str()) {
                // A dangling link: the kernel creates what it names.
                Ok(target) if !nofollow => {
                    path = target.as_bytes().to_vec();
                    ours = Some(name.dir);
                    continue;
                }
                Ok(_) if excl => return Err(libc::EEXIST),
                Ok(_) => return Err(libc::ELOOP),
                Err(_) => {}
            }
            match self.create(name, f, mode)? {
                Some(fd) => return Ok(Reply::Fd(fd, cloexec)),
                // Made by another meanwhile: found again.
                None if !excl => continue,
                None => return Err(libc::EEXIST),
            }
        }
        Err(libc::ELOOP)
    }

    /// Creates the file `name` as the open asks, never following a link there and
    /// never opening one that exists (`None`: something is there now).
    fn create(&self, name: Name, flags: i32, mode: u32) -> Result<Option<OwnedFd>, i32> {
        self.judge_name(&name, NameUse::Create)?;
        let umask = self.caller.umask().unwrap_or(0o022);
        let arg = name.arg()?;
        let flags = flags | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        match self.done(move || {
            with_umask(umask, || {
                // SAFETY: a descriptor of ours, a NUL-terminated name, plain numbers.
                let fd = unsafe { libc::openat(name.dir.as_raw_fd(), arg.as_ptr(), flags, mode) };
                if fd < 0 {
                    return Err(nix::errno::Errno::last() as i32);
                }
                // SAFETY: the kernel just returned it; nothing else owns it.
                Ok(Some(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) }))
            })
        }) {
            Ok(Reply::Fd(fd, _)) => Ok(Some(fd)),
            Ok(_) => Err(libc::EIO),
            Err(libc::EEXIST) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Opens the existing object `target` as the caller asked.
    fn open_existing(
        &self,
        target: OwnedFd,
        flags: i32,
        mode: u32,
        create: bool,
    ) -> Result<Reply, i32> {
        let cloexec = flags & libc::O_CLOEXEC != 0;
        if flags & libc::O_PATH != 0 {
            // No access to the file's contents: the object found is the answer.
            let st = fstat(&target).map_err(|e| e as i32)?;
            if flags & libc::O_DIRECTORY != 0 && !is(&st, SFlag::S_IFDIR) {
                return Err(libc::ENOTDIR);
            }
            self.not_anothers_proc(&target)?;
            return Ok(Reply::Fd(target, cloexec));
        }
        let st = fstat(&target).map_err(|e| e as i32)?;
        if is(&st, SFlag::S_IFLNK) {
            return Err(libc::ELOOP);
        }
        if writes(flags) {
            self.judge_object(&target, NameUse::Write)?;
        }
        self.not_anothers_proc(&target)?;
        if create && is(&st, SFlag::S_IFDIR) {
            return Err(libc::EISDIR);
        }
        if is(&st, SFlag::S_IFCHR) && st.st_rdev == libc::makedev(5, 0) {
            self.own_terminal()?;
        }
        let reopen = flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW) | libc::O_CLOEXEC;
        if is(&st, SFlag::S_IFIFO) {
            return self.open_apart(target, reopen, cloexec);
        }
        // An unnamed file (O_TMPFILE) takes its mode as a created one does.
        let umask = match flags & libc::O_TMPFILE == libc::O_TMPFILE {
            true => self.caller.umask().unwrap_or(0o022),
            false => 0,
        };
        match self.done(move || with_umask(umask, || reopen_fd(&target, reopen, mode)))? {
            Reply::Fd(fd, _) => Ok(Reply::Fd(fd, cloexec)),
            other => Ok(other),
        }
    }

    /// A named pipe opened for writing waits for a reader, for as long as that takes:
    /// on a thread of its own, which answers the call itself.
    fn open_apart(&self, target: OwnedFd, flags: i32, cloexec: bool) -> Result<Reply, i32> {
        if !(self.cx.alive)() {
            return Err(libc::ESRCH);
        }
        let listener = self.cx.pending.listener.clone();
        let id = self.cx.pending.id;
        self.cx.worker.run_apart(move |confined| {
            let reply = match confined {
                false => Reply::Errno(libc::EPERM),
                true => match reopen_fd(&target, flags, 0) {
                    Ok(Some(fd)) => Reply::Fd(fd, cloexec),
                    Ok(None) => Reply::Errno(libc::EIO),
                    Err(e) => Reply::Errno(e),
                },
            };
            send(listener.as_raw_fd(), id, reply);
        })?;
        Ok(Reply::Later)
    }

    /// `/dev/tty` is the opener's controlling terminal: the supervisor's is the
    /// caller's only while they share it.
    fn own_terminal(&self) -> Result<(), i32> {
        let theirs = self.caller.tty();
        let ours = std::fs::read_to_string("/proc/self/stat")
            .map(|s| super::calls::tty_of_stat(&s))
            .unwrap_or(0);
        match theirs != 0 && theirs == ours {
            true => Ok(()),
            false => Err(libc::ENXIO),
        }
    }

    /// A process's `/proc` files opened by the supervisor would be opened with its
    /// rights over that process (its own memory, for one): only the caller's own, and
    /// those of no process, are opened for it.
    fn not_anothers_proc(&self, target: &OwnedFd) -> Result<(), i32> {
        let on_proc = nix::sys::statfs::fstatfs(target).is_ok_and(|fs| {
            // Signed with glibc, unsigned with musl.
            #[allow(clippy::unnecessary_cast)]
            let magic = fs.filesystem_type().0 as i64;
            magic == PROC_MAGIC
        });
        if !on_proc {
            return Ok(());
        }
        let path = fd_path(target.as_fd())?;
        let owner = path
            .strip_prefix("/proc")
            .ok()
            .and_then(|rest| rest.components().next())
            .and_then(|c| c.as_os_str().to_str()?.parse::<u32>().ok());
        match owner {
            None => Ok(()),
            Some(pid) if pid == self.caller.tid || pid == self.caller.tgid() => Ok(()),
            Some(_) => Err(libc::EACCES),
        }
    }
}

/// Whether open flags write or create.
fn writes(flags: i32) -> bool {
    flags & (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC) != 0
}

fn is(st: &FileStat, kind: SFlag) -> bool {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == kind
}

/// Opens the object `target` holds again, through its `/proc/self/fd` link (which
/// leads to exactly that object), with `flags`.
fn reopen_fd(target: &OwnedFd, flags: i32, mode: u32) -> Outcome {
    let path = proc_self(target)?;
    // SAFETY: a NUL-terminated path of ours and plain numbers (the mode is read only
    // for O_TMPFILE).
    let fd = unsafe { libc::open(path.as_ptr(), flags, mode) };
    if fd < 0 {
        return Err(nix::errno::Errno::last() as i32);
    }
    // SAFETY: the kernel just returned it; nothing else owns it.
    Ok(Some(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) }))
}

fn proc_self(fd: &OwnedFd) -> Result<CString, i32> {
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).map_err(|_| libc::EINVAL)
}

/// The path the kernel gives a descriptor of ours now.
fn fd_path(fd: BorrowedFd<'_>) -> Result<PathBuf, i32> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map_err(|e| e.raw_os_error().unwrap_or(libc::EPERM))
}

/// Runs `f` with the process's umask set to `umask` (only the worker makes files).
fn with_umask<T>(umask: u32, f: impl FnOnce() -> T) -> T {
    // SAFETY: umask takes a number and cannot fail.
    unsafe { libc::umask(umask as libc::mode_t) };
    f()
}

fn errno_of(r: i32) -> Result<(), i32> {
    match r {
        0 => Ok(()),
        _ => Err(nix::errno::Errno::last() as i32),
    }
}

fn errno(refusal: Refusal) -> i32 {
    match refusal {
        Refusal::ReadOnly => libc::EROFS,
        Refusal::Busy => libc::EBUSY,
        Refusal::Exists => libc::EEXIST,
        Refusal::CrossDevice => libc::EXDEV,
    }
}

/// A path split before its last component: the directory part (empty: the start
/// itself), the component, and whether trailing slashes were there.
fn split(path: &[u8]) -> (&[u8], &[u8], bool) {
    let end = path.iter().rposition(|&b| b != b'/').map_or(0, |i| i + 1);
    if end == 0 {
        return (b"/", b".", false);
    }
    let slash = end < path.len();
    let trimmed = &path[..end];
    match trimmed.iter().rposition(|&b| b == b'/') {
        Some(0) => (b"/", &trimmed[1..], slash),
        Some(i) => (&trimmed[..i], &trimmed[i + 1..], slash),
        None => (b"", trimmed, slash),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_before_their_last_component() {
        assert_eq!(split(b"a"), (&b""[..], &b"a"[..], false));
        assert_eq!(split(b"a/b"), (&b"a"[..], &b"b"[..], false));
        assert_eq!(split(b"/a"), (&b"/"[..], &b"a"[..], false));
        assert_eq!(split(b"/a/b/"), (&b"/a"[..], &b"b"[..], true));
        assert_eq!(split(b"a//"), (&b""[..], &b"a"[..], true));
        assert_eq!(split(b"/"), (&b"/"[..], &b"."[..], false));
        assert_eq!(split(b"a/.."), (&b"a"[..], &b".."[..], false));
    }

    #[test]
    fn every_call_the_filter_sends_is_decoded() {
        for nr in super::super::filter::name_writers() {
            assert!(is_write(nr), "{nr}");
        }
        for (nr, _) in super::super::filter::flag_opens() {
            assert!(is_write(nr), "{nr}");
        }
        for nr in super::super::filter::supervised() {
            assert!(!is_write(nr), "{nr}");
        }
    }
}
