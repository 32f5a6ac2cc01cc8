//! The stage's mounts: everything read-only, the writable roots bound back read-write,
//! protected paths read-only on top, hidden paths masked, a private `/tmp` and `/proc`.

use super::error::{StageError, check, cstr};
use super::watch::open_dir_no_symlinks;
use std::ffi::{CString, OsString};
use std::path::{Path, PathBuf};
use stockade_policy::stage::{MASK_MODE, MountPlan};

pub(super) const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub(super) const AT_RECURSIVE: libc::c_uint = 0x8000;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `mount_setattr(2)` (Linux 5.12) on the mount `path` names from `dirfd` (with
/// `AT_RECURSIVE` in `flags`, on every mount beneath it too): sets the attributes of
/// `set`, clears those of `clr`. The stage and its trial share it; the raw return value.
pub(super) fn mount_setattr(
    dirfd: libc::c_int,
    path: &std::ffi::CStr,
    flags: libc::c_uint,
    set: u64,
    clr: u64,
) -> libc::c_long {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clr,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: `path` is NUL-terminated and `attr` a properly sized mount_attr, both alive
    // for the call; the kernel only reads them.
    unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dirfd,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    }
}

/// Sets (or clears) the read-only attribute on every mount at and beneath `path`.
fn set_readonly(path: &Path, readonly: bool) -> Result<(), StageError> {
    let c = cstr(path)?;
    let (set, clr) = match readonly {
        true => (MOUNT_ATTR_RDONLY, 0),
        false => (0, MOUNT_ATTR_RDONLY),
    };
    let r = mount_setattr(libc::AT_FDCWD, &c, AT_RECURSIVE, set, clr);
    check(r, || {
        format!(
            "cannot make {} {}",
            path.display(),
            if readonly { "read-only" } else { "writable" }
        )
    })
}

const OPEN_TREE_CLONE: libc::c_uint = 1;
const OPEN_TREE_CLOEXEC: libc::c_uint = libc::O_CLOEXEC as libc::c_uint;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;

/// A detached copy of the mount tree at the directory `dir` (an open descriptor;
/// `open_tree(OPEN_TREE_CLONE)`, Linux 5.2), every mount keeping its flags. `path` names
/// it in errors.
fn clone_tree(dir: &std::fs::File, path: &Path) -> Result<std::os::fd::OwnedFd, StageError> {
    use std::os::fd::{AsRawFd, FromRawFd};
    // SAFETY: a directory descriptor and an empty NUL-terminated path, both alive for the
    // call; the kernel returns a new descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            dir.as_raw_fd(),
            c"".as_ptr(),
            OPEN_TREE_CLONE
                | OPEN_TREE_CLOEXEC
                | AT_RECURSIVE
                | libc::AT_EMPTY_PATH as libc::c_uint,
        )
    };
    check(fd, || {
        format!("cannot copy the mounts of writable root {}", path.display())
    })?;
    // SAFETY: `fd` is a descriptor the kernel just returned to us alone.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// Puts a detached tree from [`clone_tree`] on top of the directory `dir` (an open
/// descriptor; `move_mount`). `path` names it in errors.
fn attach(tree: &std::os::fd::OwnedFd, dir: &std::fs::File, path: &Path) -> Result<(), StageError> {
    use std::os::fd::AsRawFd;
    // SAFETY: an open tree descriptor, a directory descriptor and empty NUL-terminated
    // paths, all valid for the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            dir.as_raw_fd(),
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    };
    check(r, || {
        format!("cannot put writable root {} back", path.display())
    })
}

pub(super) fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
    what: &str,
) -> Result<(), StageError> {
    let source = source.map(cstr).transpose()?;
    let target_c = cstr(target)?;
    let fstype = fstype.map(|t| CString::new(t).expect("static fs type"));
    let data = data.map(|d| CString::new(d).expect("static mount data"));
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is null or a NUL-terminated string that outlives the call.
    let r = unsafe {
        libc::mount(
            ptr(&source),
            target_c.as_ptr(),
            ptr(&fstype),
            flags,
            ptr(&data) as *const libc::c_void,
        )
    };
    check(r as libc::c_long, || format!("{what} {}", target.display()))
}

/// The mount layout: everything read-only but the writable roots, protected paths
/// read-only again, `/tmp` and `/proc` fresh when asked, hidden paths covered.
pub(super) fn mounts(spec: &MountPlan, runner: &[OsString]) -> Result<(), StageError> {
    let root = Path::new("/");
    // The working directory still refers to the mount it was entered on, which is now
    // read-only (and, for a private /tmp, the host's /tmp): re-entered by name below,
    // so it resolves through the new layout. One without a name is left to the runner,
    // which refuses it.
    let cwd = std::env::current_dir().ok();
    // Nothing done here may propagate back to the caller's mount namespace.
    mount(
        None,
        root,
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
        "cannot make mounts private at",
    )?;
    // Each writable root is cloned as it stands (its submounts with their own flags,
    // read-only ones included) before the whole tree is made read-only, and the clone is
    // put back on top: the roots are writable exactly where they were, and a mount the
    // machine made read-only stays so. Clearing the flag afterwards instead would make
    // such mounts writable (or fail on mounts locked by a user namespace).
    // Each root is opened once, following no link on the way, and cloned from and put
    // back on that very descriptor: a command that can rename what lies above a root
    // (a workspace in /tmp) could otherwise swap in a link for the moment the stage
    // looks, and swap it back before the runner checks the root, and the stage would
    // have made the link's target (`/etc`) a writable mount, open to `chmod`.
    let clones = clone_writable_roots(spec)?;
    set_readonly(root, true)?;
    for (path, dir, clone) in &clones {
        attach(clone, dir, path)?;
    }
    // Before the command's own devpts covers the caller's terminals' names.
    super::terminals::reopen_read_only();
    if spec.private_tmp {
        mount(
            Some(Path::new("tmpfs")),
            Path::new("/tmp"),
            Some("tmpfs"),
            libc::MS_NOSUID | libc::MS_NODEV,
            Some("mode=1777"),
            "cannot mount a private tmpfs on",
        )?;
    }
    private_devices(spec)?;
    bind_protected(spec)?;
    if spec.pids {
        mount(
            Some(Path::new("proc")),
            Path::new("/proc"),
            Some("proc"),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            None,
            "cannot mount a fresh /proc on",
        )?;
    }
    // Last, so that nothing mounted afterwards covers a mask's parent.
    let runner_program = runner.first().map(Path::new);
    let keep: Vec<&Path> = spec
        .rw
        .iter()
        .map(PathBuf::as_path)
        .chain(cwd.as_deref())
        .chain(runner_program)
        .collect();
    mask_hidden(&spec.mask, &keep)?;
    if let Some(cwd) = cwd {
        std::env::set_current_dir(&cwd).map_err(|e| StageError {
            what: format!(
                "cannot re-enter the working directory {} inside the sandbox's mounts",
                cwd.display()
            ),
            source: Some(e),
        })?;
    }
    Ok(())
}

/// Each writable root opened (following no link) and its mount tree cloned, before the
/// whole tree is made read-only; a root gone or replaced by a link since confine is left
/// to the runner, which refuses it with its own failure kind and record.
fn clone_writable_roots(
    spec: &MountPlan,
) -> Result<Vec<(&PathBuf, std::fs::File, std::os::fd::OwnedFd)>, StageError> {
    let mut clones = Vec::new();
    for path in &spec.rw {
        let dir = match open_dir_no_symlinks(path) {
            Ok(dir) => dir,
            // A root gone or replaced by a link since confine: the runner refuses it
            // with its own failure kind and record, so the stage leaves that to it.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOENT | libc::ELOOP | libc::ENOTDIR)
                ) =>
            {
                continue;
            }
            Err(e) => {
                return Err(StageError {
                    what: format!(
                        "cannot open writable root {} without following links",
                        path.display()
                    ),
                    source: Some(e),
                });
            }
        };
        let clone = clone_tree(&dir, path)?;
        clones.push((path, dir, clone));
    }
    Ok(clones)
}

/// The directories above protected paths pinned (made mount points) and the protected
/// paths bound read-only on top of the writable roots.
fn bind_protected(spec: &MountPlan) -> Result<(), StageError> {
    for dir in &spec.pin {
        // Still writable, but a mount point: it cannot be renamed or removed, so the
        // protected path below it cannot be moved out of the way. Gone since confine:
        // nothing below it is left to protect.
        if skip_missing(dir)? {
            continue;
        }
        mount(
            Some(dir),
            dir,
            None,
            libc::MS_BIND | libc::MS_REC,
            None,
            "cannot pin",
        )?;
    }
    for path in &spec.ro {
        if skip_missing(path)? {
            continue;
        }
        mount(
            Some(path),
            path,
            None,
            libc::MS_BIND | libc::MS_REC,
            None,
            "cannot bind protected path",
        )?;
        set_readonly(path, true)?;
    }
    Ok(())
}

/// The command's own `/dev/shm`, terminals and message queues (see
/// `stockade_policy::stage::SHM`, `PTS` and `MQUEUE`): a fresh tmpfs, a devpts instance
/// whose `ptmx` is bound over `/dev/ptmx`, and the mqueue filesystem of the IPC
/// namespace made above. Where the machine has no such directory, or `/dev/ptmx` is a
/// link (into `/dev/pts`, where the new instance's `ptmx` already is), there is nothing
/// to cover.
fn private_devices(spec: &MountPlan) -> Result<(), StageError> {
    use stockade_policy::stage::{MQUEUE, PTMX, PTS, PTS_OPTIONS, SHM};
    let is_dir = |p: &str| Path::new(p).symlink_metadata().is_ok_and(|m| m.is_dir());
    if is_dir(MQUEUE) {
        // Always: the IPC namespace is always the command's own. The host's queues,
        // seen here until now, go out of sight with it.
        mount(
            Some(Path::new("mqueue")),
            Path::new(MQUEUE),
            Some("mqueue"),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            None,
            "cannot mount the IPC namespace's message queues on",
        )?;
    }
    if spec.private_shm && is_dir(SHM) {
        mount(
            Some(Path::new("tmpfs")),
            Path::new(SHM),
            Some("tmpfs"),
            libc::MS_NOSUID | libc::MS_NODEV,
            Some("mode=1777"),
            "cannot mount a private tmpfs on",
        )?;
    }
    if spec.private_pts && is_dir(PTS) {
        mount(
            Some(Path::new("devpts")),
            Path::new(PTS),
            Some("devpts"),
            libc::MS_NOSUID | libc::MS_NOEXEC,
            Some(PTS_OPTIONS),
            "cannot mount a private devpts instance on",
        )?;
        let ptmx = Path::new(PTMX);
        if ptmx
            .symlink_metadata()
            .is_ok_and(|m| !m.file_type().is_symlink())
        {
            mount(
                Some(&Path::new(PTS).join("ptmx")),
                ptmx,
                None,
                libc::MS_BIND,
                None,
                "cannot bind the private devpts instance's ptmx onto",
            )?;
        }
    }
    Ok(())
}

const FSOPEN_CLOEXEC: libc::c_uint = 1;
const FSCONFIG_SET_STRING: libc::c_uint = 1;
const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
const FSMOUNT_CLOEXEC: libc::c_uint = 1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_NOEXEC: u64 = 0x8;

/// Takes a descriptor the kernel returned (or -1) as owned.
fn owned(fd: libc::c_long) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: a non-negative `fd` was just returned by the kernel to this process alone.
    (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// The stage's mask source: a fresh tmpfs, not attached anywhere, holding an empty
/// directory `d` and an empty regular file `f`, each of mode [`MASK_MODE`], the whole
/// mount read-only. Returns the mount's descriptor. A directory is covered with a copy of
/// `d`, a file with a copy of `f` (Linux 5.2 for the mount calls, 5.12 for
/// `mount_setattr`, as the rest of the stage).
fn mask_source() -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::AsRawFd;
    let mode = format!("{:o}", MASK_MODE);
    let mode = CString::new(mode).ok()?;
    // SAFETY: each call takes descriptors this function owns and NUL-terminated
    // strings that outlive it; the kernel returns a new descriptor or -1.
    unsafe {
        let fs = owned(libc::syscall(
            libc::SYS_fsopen,
            c"tmpfs".as_ptr(),
            FSOPEN_CLOEXEC,
        ))?;
        for (key, value) in [
            (c"mode", mode.as_c_str()),
            (c"size", c"4k"),
            (c"nr_inodes", c"3"),
        ] {
            let r = libc::syscall(
                libc::SYS_fsconfig,
                fs.as_raw_fd(),
                FSCONFIG_SET_STRING,
                key.as_ptr(),
                value.as_ptr(),
                0,
            );
            (r == 0).then_some(())?;
        }
        let r = libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0,
        );
        (r == 0).then_some(())?;
        let mnt = owned(libc::syscall(
            libc::SYS_fsmount,
            fs.as_raw_fd(),
            FSMOUNT_CLOEXEC,
            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
        ))?;
        let file = owned(libc::openat(
            mnt.as_raw_fd(),
            c"f".as_ptr(),
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
            MASK_MODE,
        ) as libc::c_long)?;
        // The mode asked for is filtered by the umask: set it as meant.
        (libc::fchmod(file.as_raw_fd(), MASK_MODE) == 0).then_some(())?;
        drop(file);
        (libc::mkdirat(mnt.as_raw_fd(), c"d".as_ptr(), MASK_MODE) == 0).then_some(())?;
        (libc::fchmodat(mnt.as_raw_fd(), c"d".as_ptr(), MASK_MODE, 0) == 0).then_some(())?;
        let r = mount_setattr(
            mnt.as_raw_fd(),
            c"",
            libc::AT_EMPTY_PATH as libc::c_uint,
            MOUNT_ATTR_RDONLY,
            0,
        );
        (r == 0).then_some(mnt)
    }
}

/// Covers each hidden path of `paths` with an empty read-only mount (see
/// [`mask_source`]), but one that holds a path of `keep` (see
/// `stockade_policy::stage::maskable`). Best effort by design: the runner looks at
/// each hidden path itself and hides whatever it does not find covered with its Landlock
/// carve-out, so a path this cannot cover (gone, a link now, a kernel without the mount
/// calls) is still hidden, only at the carve-out's cost. The one error: a mount the
/// masks needed for the while that could not be taken off again.
fn mask_hidden(paths: &[PathBuf], keep: &[&Path]) -> Result<(), StageError> {
    // A link (planted since confine) is left alone: the mount would land on its target.
    // What a link on the way leads to is the runner's to find out.
    let targets: Vec<(&Path, bool)> = paths
        .iter()
        .filter(|p| stockade_policy::stage::maskable(p, keep))
        .filter_map(|p| {
            let meta = p.symlink_metadata().ok()?;
            (!meta.file_type().is_symlink()).then_some((p.as_path(), meta.is_dir()))
        })
        .collect();
    if targets.is_empty() {
        return Ok(());
    }
    let Some(source) = mask_source() else {
        return Ok(());
    };
    // The first target's copy tells whether the kernel clones a mount attached nowhere.
    // Kernels before 6.15 refuse to: there the source is attached for the while on a
    // directory apart from every hidden path.
    let mut first = clone_mask(&source, targets[0].1);
    let anchor = match first {
        Some(_) => None,
        None => match attach_source(&source, &targets) {
            Some(anchor) => Some(anchor),
            None => return Ok(()),
        },
    };
    for &(path, is_dir) in &targets {
        if let Some(copy) = first.take().or_else(|| clone_mask(&source, is_dir)) {
            move_onto(&copy, path);
        }
    }
    match anchor {
        Some(anchor) => detach(anchor),
        None => Ok(()),
    }
}

/// A copy of the mask source's empty directory (`is_dir`) or file, attached nowhere.
fn clone_mask(source: &std::os::fd::OwnedFd, is_dir: bool) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::AsRawFd;
    let from = if is_dir { c"d" } else { c"f" };
    // SAFETY: a descriptor owned by the caller and a NUL-terminated name; the kernel
    // returns a new descriptor or -1.
    owned(unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            source.as_raw_fd(),
            from.as_ptr(),
            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC,
        )
    })
}

/// Attaches the mount behind `mount` (a descriptor of a mount attached nowhere) at
/// `target`; whether it did.
fn move_onto(mount: &std::os::fd::OwnedFd, target: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(target) = cstr(target) else {
        return false;
    };
    // SAFETY: a descriptor owned by the caller and NUL-terminated strings that outlive
    // the call.
    unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            mount.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        ) == 0
    }
}

/// Directories the mask source may be attached on while the masks are copied from it,
/// in order: ones the stage itself made or that hold no command's files, covered only
/// until [`detach`].
const ANCHORS: [&str; 6] = ["/proc", "/sys", "/run", "/mnt", "/var", "/usr"];

/// Attaches the mask source on the first of [`ANCHORS`] that is a directory neither
/// above nor beneath a hidden path of `targets` (where it would cover one, or be
/// covered), so that it can be cloned on kernels that clone only attached mounts: that
/// directory, or `None` when none would do or the mount failed.
fn attach_source(
    source: &std::os::fd::OwnedFd,
    targets: &[(&Path, bool)],
) -> Option<&'static Path> {
    let apart = |anchor: &Path| {
        targets
            .iter()
            .all(|(t, _)| !t.starts_with(anchor) && !anchor.starts_with(t))
    };
    let anchor = ANCHORS
        .iter()
        .map(Path::new)
        .find(|a| a.symlink_metadata().is_ok_and(|m| m.is_dir()) && apart(a))?;
    move_onto(source, anchor).then_some(anchor)
}

/// Takes the mask source off `anchor` again, uncovering what was there (the masks
/// copied from it stay). Failing here would leave the command a `/proc` or `/usr` that
/// is not there: an error, never a run.
fn detach(anchor: &Path) -> Result<(), StageError> {
    let at = cstr(anchor)?;
    // SAFETY: a NUL-terminated path that outlives the call.
    let r = unsafe { libc::umount2(at.as_ptr(), libc::MNT_DETACH) };
    check(r.into(), || {
        format!(
            "cannot take the masks' source off {} again",
            anchor.display()
        )
    })
}

/// Whether a protected path (or a directory above one) vanished since `confine` looked,
/// or became a symbolic link: then there is nothing to bind. A link is never a reason to
/// fail: one planted by an earlier command would otherwise make every later run a runner
/// failure. `confine` leaves links out and reports them in `notGranted`.
fn skip_missing(path: &Path) -> Result<bool, StageError> {
    // A link made since confine (which leaves links out and reports them) is skipped the
    // same way: a bind would land on its target, not on the link.
    Ok(match path.symlink_metadata() {
        Err(_) => true,
        Ok(m) => m.file_type().is_symlink(),
    })
}
