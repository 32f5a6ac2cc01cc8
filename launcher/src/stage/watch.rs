//! What the stage watches while the command runs: the shared writable roots the caller
//! owns (put back when their mode or owner changed) and the protected names that did not
//! exist, reported afterwards (`stockade_policy::stage_report`).

use super::args::Watch;
use super::error::{StageError, cstr, fail};
use std::ffi::CString;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use stockade_policy::capability::CapabilitySet;
use stockade_policy::stage_report::{
    DirMeta, MAX_RECORDS, MAX_REPORT_BYTES, RootChange, StageRecord,
};
use stockade_policy::trust::FileKind;

/// One shared writable root under watch: a descriptor of the directory itself (the
/// command cannot swap the inode behind it), and its metadata before the command.
struct Guarded {
    path: PathBuf,
    dir: std::fs::File,
    was: DirMeta,
    /// A state that could not be put back, reported once.
    left: Option<DirMeta>,
}

/// What the stage watches while the command runs, and where it reports.
pub(super) struct Watcher {
    roots: Vec<Guarded>,
    missing: Vec<PathBuf>,
    report: Option<std::fs::File>,
    written: usize,
    /// The capabilities kept while watching.
    pub(super) keep: CapabilitySet,
}

/// How often the shared roots are looked at while the command runs: a change is put back
/// within about this long. Looked at, not watched: an inotify watch would report a
/// change at once, but releasing one costs the kernel an RCU grace period (about 15 ms
/// here) on every exit, longer than the whole stage; an `fstat` every 20 ms costs
/// nothing measurable.
const LOOK_EVERY_MS: i64 = 20;

fn dir_meta(file: &std::fs::File) -> Option<DirMeta> {
    use std::os::unix::fs::MetadataExt;
    file.metadata()
        .ok()
        .map(|m| DirMeta::new(m.mode(), m.uid(), m.gid()))
}

impl Watcher {
    /// Opens the report file (it must be as `confine` made it: a regular 0600 file of
    /// this user, empty) and each shared root, and takes each root's snapshot.
    pub(super) fn open(watch: &Watch) -> Result<Watcher, StageError> {
        use std::os::unix::fs::OpenOptionsExt;
        let report = match &watch.report {
            None => None,
            Some(path) => {
                let bad = |why: String| fail(format!("report file {}: {why}", path.display()));
                let file = std::fs::OpenOptions::new()
                    .append(true)
                    .custom_flags(
                        libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY,
                    )
                    .open(path)
                    .map_err(|e| bad(e.to_string()))?;
                let meta = file.metadata().map_err(|e| bad(e.to_string()))?;
                crate::control::private_dir::trusted(&meta, FileKind::Regular)
                    .map_err(|u| bad(u.to_string()))?;
                if meta.len() != 0 {
                    return Err(bad("it is not empty (a report file is used once)".into()));
                }
                // A file size limit from the spawner (`ulimit -f`) below what the report
                // may take would kill the stage with SIGXFSZ at the write past it, while
                // the command runs, leaving a cut report: refused before it starts.
                use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit};
                if let Ok((limit, _)) = getrlimit(Resource::RLIMIT_FSIZE)
                    && limit != RLIM_INFINITY
                    && limit < MAX_REPORT_BYTES as u64
                {
                    return Err(bad(format!(
                        "the file size limit this stage was started with (RLIMIT_FSIZE, `ulimit -f`) is {limit} bytes, below the {MAX_REPORT_BYTES} the report may take; raise it"
                    )));
                }
                Some(file)
            }
        };
        let mut roots = Vec::new();
        for path in &watch.shared {
            // A root gone (or reached through a link) since confine: the runner refuses
            // it.
            let Ok(dir) = open_dir_no_symlinks(path) else {
                continue;
            };
            let Some(was) = dir_meta(&dir) else {
                continue;
            };
            roots.push(Guarded {
                path: path.clone(),
                dir,
                was,
                left: None,
            });
        }
        Ok(Watcher {
            roots,
            missing: watch.missing.clone(),
            report,
            written: 0,
            keep: watch.keep_capabilities,
        })
    }

    /// Whether there is nothing to watch (the stage then execs the runner itself).
    pub(super) fn is_idle(&self) -> bool {
        self.roots.is_empty() && self.missing.is_empty()
    }

    /// Puts back each shared root whose mode or owner changed, and reports it.
    pub(super) fn check_roots(&mut self) {
        let mut found = Vec::new();
        for g in &mut self.roots {
            let Some(now) = dir_meta(&g.dir) else {
                continue;
            };
            if now == g.was || g.left == Some(now) {
                continue;
            }
            let put_back = restore(&g.dir, now, g.was);
            g.left = (!put_back).then_some(now);
            found.push(StageRecord::Changed(RootChange {
                path: g.path.to_string_lossy().into_owned(),
                was: g.was,
                found: now,
                put_back,
            }));
        }
        for record in found {
            self.record(&record);
        }
    }

    /// Sleeps until it is time to look at the roots again (never, without any) or a
    /// signal (a child's end) arrives, with `mask` as the signal mask meanwhile.
    pub(super) fn sleep(&self, mask: &libc::sigset_t) {
        let interval = libc::timespec {
            tv_sec: 0,
            tv_nsec: LOOK_EVERY_MS * 1_000_000,
        };
        let timeout = if self.roots.is_empty() {
            std::ptr::null()
        } else {
            &interval as *const libc::timespec
        };
        // SAFETY: ppoll on no descriptors, with a local timespec or null and a signal
        // mask that outlive the call.
        unsafe { libc::ppoll(std::ptr::null_mut(), 0, timeout, mask) };
    }

    /// The last look once the command has ended: the roots, and which protected names
    /// appeared.
    pub(super) fn finish(&mut self) {
        self.check_roots();
        let appeared: Vec<StageRecord> = std::mem::take(&mut self.missing)
            .into_iter()
            .filter(|p| stockade_policy::stage::appeared(&p.symlink_metadata()))
            .map(|p| StageRecord::Appeared(p.to_string_lossy().into_owned()))
            .collect();
        for record in appeared {
            self.record(&record);
        }
    }

    /// Appends one record with one write, up to [`MAX_RECORDS`].
    fn record(&mut self, record: &StageRecord) {
        if self.written >= MAX_RECORDS {
            return;
        }
        if let Some(file) = &mut self.report {
            // Best effort: the directory may be gone (the launcher removed it once the
            // command's status was in); a write to the unlinked file harms nobody.
            let _ = file.write_all(&record.encode());
            self.written += 1;
        }
    }
}

/// Puts the mode and owner of the directory `dir` is open on back from `now` to `was`;
/// whether they are `was` afterwards.
fn restore(dir: &std::fs::File, now: DirMeta, was: DirMeta) -> bool {
    use std::os::fd::AsRawFd;
    if was.open_to_everyone() {
        // Seen weakened when the run began (another command's doing?): never put back.
        return false;
    }
    let fd = dir.as_raw_fd();
    // Owner first: a change of owner or group can clear set-id bits the mode below then
    // restores. As the owner, no capability is needed for either (a group change only to
    // a group of the caller's, as the original was).
    // SAFETY: fchown/fchmod on a directory descriptor the caller holds.
    unsafe {
        if now.uid != was.uid || now.gid != was.gid {
            libc::fchown(fd, was.uid, was.gid);
        }
        libc::fchmod(fd, was.mode as libc::mode_t);
    }
    dir_meta(dir) == Some(was)
}

/// Opens the directory `path` (absolute, canonical) for reading its metadata and
/// putting it back, following no symbolic link anywhere on the way: `openat2` with
/// `RESOLVE_NO_SYMLINKS`, or before Linux 5.6 one `O_NOFOLLOW` step per component. A
/// command that can write a directory above a shared root could otherwise replace it with
/// a link, and the mode put back would land on whatever the link names (`/usr/share`,
/// as root), outside every writable root.
pub fn open_dir_no_symlinks(path: &Path) -> io::Result<std::fs::File> {
    use std::os::fd::FromRawFd;
    let c = cstr(path).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let flags = (libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64;
    let how = OpenHow {
        flags,
        mode: 0,
        resolve: libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: openat2 reads a NUL-terminated path and an `open_how` of the size passed,
    // both alive for the call; it returns a new descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            c.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd >= 0 {
        // SAFETY: a non-negative return is a descriptor this process now owns.
        return Ok(unsafe { std::fs::File::from_raw_fd(fd as libc::c_int) });
    }
    let err = io::Error::last_os_error();
    if !matches!(err.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM)) {
        return Err(err);
    }
    open_dir_walking(path)
}

/// `struct open_how` of openat2(2) (libc's is non-exhaustive, so not constructible).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// The fallback of [`open_dir_no_symlinks`]: from `/`, each component opened `O_PATH`
/// without following it, the last one for reading.
fn open_dir_walking(path: &Path) -> io::Result<std::fs::File> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::path::Component;
    let step = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let last = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let names: Vec<&std::ffi::OsStr> = path
        .components()
        .filter_map(|c| match c {
            Component::RootDir => None,
            Component::Normal(n) => Some(Ok(n)),
            _ => Some(Err(())),
        })
        .collect::<Result<_, _>>()
        .map_err(|()| io::Error::from_raw_os_error(libc::EINVAL))?;
    let open = |dir: libc::c_int, name: &std::ffi::CStr, flags: libc::c_int| {
        // SAFETY: a NUL-terminated name and a directory descriptor alive for the call.
        let fd = unsafe { libc::openat(dir, name.as_ptr(), flags) };
        if fd < 0 {
            Err(io::Error::last_os_error())
        } else {
            // SAFETY: a descriptor the kernel just returned to this process alone.
            Ok(unsafe { OwnedFd::from_raw_fd(fd) })
        }
    };
    let mut dir = open(
        libc::AT_FDCWD,
        c"/",
        if names.is_empty() { last } else { step },
    )?;
    for (i, name) in names.iter().enumerate() {
        let name = CString::new(name.as_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let flags = if i + 1 == names.len() { last } else { step };
        dir = open(dir.as_raw_fd(), &name, flags)?;
    }
    Ok(std::fs::File::from(dir))
}

/// The check `stockade run` makes once the command has settled, with or without the
/// stage: whether the shared root `dir` (opened when confined, so it is that very
/// directory wherever the command moved it, never what a path leads to now) still has
/// the metadata `was` it had then, and if not, puts it back.
pub fn check_shared(path: &Path, dir: &std::fs::File, was: DirMeta) -> Option<RootChange> {
    let now = dir_meta(dir)?;
    if now == was {
        return None;
    }
    Some(RootChange {
        path: path.to_string_lossy().into_owned(),
        was,
        found: now,
        put_back: restore(dir, now, was),
    })
}
