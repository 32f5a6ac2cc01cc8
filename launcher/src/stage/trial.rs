//! Whether this machine lets the stage run: its namespaces and the mounts it makes in
//! them, tried for real in a short-lived child (sysctls, AppArmor, container seccomp
//! profiles and a container's covered `/proc` can each refuse one), and a success
//! remembered for a minute.

use super::init::wait_for;
use super::mounts::{AT_RECURSIVE, MOUNT_ATTR_RDONLY, mount_setattr};
use super::namespaces::{namespace_flags, needs_user_namespace};
use std::ffi::CString;
use std::io;
use std::path::Path;
use stockade_policy::stage::{MQUEUE, MountPlan, PTS, PTS_OPTIONS};

/// Each step the trial takes, in order, with what its refusal means (the cause `probe`
/// shows). The index is what the trial's child reports back.
const STEPS: [&str; 8] = [
    "unshare refused",
    "cannot map the caller in its user namespace",
    "cannot fork into the new pid namespace",
    "cannot make mounts private (mount refused)",
    "cannot make the mounts read-only (mount_setattr)",
    "cannot mount a private tmpfs on /tmp",
    "cannot mount a private mqueue or devpts",
    "cannot mount a fresh /proc (where parts of /proc are covered, as container engines \
     do, the kernel refuses a new one outside the first user namespace)",
];
const UNSHARE: usize = 0;
const MAP: usize = 1;
const FORK: usize = 2;
const PRIVATE: usize = 3;
const READ_ONLY: usize = 4;
const TMP: usize = 5;
const DEVICES: usize = 6;
const PROC: usize = 7;

/// What the trial's child needs, prepared before the fork: after it the child makes
/// system calls only (no allocation, no lock), as in any fork of a process.
struct Trial {
    flags: libc::c_int,
    pids: bool,
    maps: [(CString, CString); 3],
    tmp: bool,
    mqueue: Option<CString>,
    pts: Option<CString>,
    pts_options: CString,
    /// The write end of the pipe a failing step is reported on.
    report: libc::c_int,
}

impl Trial {
    fn new(pids: bool, net: bool) -> Trial {
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let spec = MountPlan {
            pids,
            ..MountPlan::default()
        };
        let c = |s: String| CString::new(s).expect("no NUL in an id map");
        let is_dir = |p: &str| Path::new(p).symlink_metadata().is_ok_and(|m| m.is_dir());
        let dir = |p: &str| is_dir(p).then(|| c(p.into()));
        Trial {
            flags: namespace_flags(&spec, net, needs_user_namespace(uid, net)),
            pids,
            maps: [
                (c("/proc/self/setgroups".into()), c("deny".into())),
                (
                    c("/proc/self/uid_map".into()),
                    c(format!("{uid} {uid} 1\n")),
                ),
                (
                    c("/proc/self/gid_map".into()),
                    c(format!("{gid} {gid} 1\n")),
                ),
            ],
            tmp: is_dir("/tmp"),
            mqueue: dir(MQUEUE),
            pts: dir(PTS),
            pts_options: c(PTS_OPTIONS.into()),
            report: -1,
        }
    }

    /// The child: the stage's namespaces, then (in the new pid namespace's first
    /// process, as the stage's init) its kinds of mounts. Returns the step that failed
    /// and its errno.
    fn run(&self) -> Result<(), (usize, i32)> {
        let errno = || io::Error::last_os_error().raw_os_error().unwrap_or(0);
        let ok = |r: libc::c_long, step: usize| if r == 0 { Ok(()) } else { Err((step, errno())) };
        // SAFETY: unshare takes flags only.
        ok(unsafe { libc::unshare(self.flags) }.into(), UNSHARE)?;
        if self.flags & libc::CLONE_NEWUSER != 0 {
            for (file, text) in &self.maps {
                ok(write_file(file, text), MAP)?;
            }
        }
        if !self.pids {
            return self.mounts();
        }
        // SAFETY: the child makes system calls only, on memory prepared before.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err((FORK, errno()));
        }
        if pid == 0 {
            child_exit(self.mounts(), self.report);
        }
        let mut status = 0;
        // SAFETY: waitpid writes the status into a local.
        while unsafe { libc::waitpid(pid, &mut status, 0) } != pid {
            if errno() != libc::EINTR {
                return Err((FORK, errno()));
            }
        }
        // The pid namespace's first process reported its own failure, if any.
        match libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
            true => Ok(()),
            false => child_exit(Err((usize::MAX, 0)), -1),
        }
    }

    /// The kinds of mounts the stage makes that a machine can refuse.
    fn mounts(&self) -> Result<(), (usize, i32)> {
        let errno = || io::Error::last_os_error().raw_os_error().unwrap_or(0);
        let mount = |src: &std::ffi::CStr,
                     target: &std::ffi::CStr,
                     fstype: Option<&std::ffi::CStr>,
                     flags: libc::c_ulong,
                     data: Option<&std::ffi::CStr>,
                     step: usize| {
            let p = |c: Option<&std::ffi::CStr>| c.map_or(std::ptr::null(), |c| c.as_ptr());
            // SAFETY: NUL-terminated strings (or null) that outlive the call.
            let r = unsafe {
                libc::mount(
                    src.as_ptr(),
                    target.as_ptr(),
                    p(fstype),
                    flags,
                    p(data).cast(),
                )
            };
            if r == 0 { Ok(()) } else { Err((step, errno())) }
        };
        let nodev = libc::MS_NOSUID | libc::MS_NODEV;
        mount(
            c"none",
            c"/",
            None,
            libc::MS_REC | libc::MS_PRIVATE,
            None,
            PRIVATE,
        )?;
        set_read_only_below_root().map_err(|e| (READ_ONLY, e))?;
        if self.tmp {
            mount(
                c"tmpfs",
                c"/tmp",
                Some(c"tmpfs"),
                nodev,
                Some(c"mode=1777"),
                TMP,
            )?;
        }
        if let Some(dir) = &self.mqueue {
            let flags = nodev | libc::MS_NOEXEC;
            mount(c"mqueue", dir, Some(c"mqueue"), flags, None, DEVICES)?;
        }
        if let Some(dir) = &self.pts {
            let flags = libc::MS_NOSUID | libc::MS_NOEXEC;
            let options = Some(self.pts_options.as_c_str());
            mount(c"devpts", dir, Some(c"devpts"), flags, options, DEVICES)?;
        }
        if self.pids {
            let flags = nodev | libc::MS_NOEXEC;
            mount(c"proc", c"/proc", Some(c"proc"), flags, None, PROC)?;
        }
        Ok(())
    }
}

/// Ends a trial's child: a failing step is written to `report` (a step of `usize::MAX`
/// only exits, its child having written), and the exit code says whether one failed.
fn child_exit(result: Result<(), (usize, i32)>, report: libc::c_int) -> ! {
    let code = match result {
        Ok(()) => 0,
        Err((step, errno)) => {
            if step != usize::MAX {
                let bytes = [step as i32, errno];
                // SAFETY: writes 8 bytes from a local array to a pipe this child holds.
                unsafe { libc::write(report, bytes.as_ptr().cast(), 8) };
            }
            1
        }
    };
    // SAFETY: ends the child without running anything of the launcher's.
    unsafe { libc::_exit(code) }
}

/// Writes `text` to the file `path`, as `/proc/self/uid_map` wants: one `write`.
fn write_file(path: &std::ffi::CStr, text: &std::ffi::CStr) -> libc::c_long {
    // SAFETY: NUL-terminated strings that outlive the calls; the descriptor is ours.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return -1;
        }
        let len = text.to_bytes().len();
        let written = libc::write(fd, text.as_ptr().cast(), len);
        libc::close(fd);
        if written == len as isize { 0 } else { -1 }
    }
}

/// Makes every mount read-only, as the stage does before it puts the writable roots
/// back. Returns the errno of a refusal.
fn set_read_only_below_root() -> Result<(), i32> {
    match mount_setattr(libc::AT_FDCWD, c"/", AT_RECURSIVE, MOUNT_ATTR_RDONLY, 0) {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error().raw_os_error().unwrap_or(0)),
    }
}

/// Whether namespaces (a pid namespace when `pids`, a network namespace when `net`) and
/// the stage's kinds of mounts in them can be had here, and if not, why.
pub fn available(pids: bool, net: bool) -> Result<(), String> {
    let mut trial = Trial::new(pids, net);
    let mut pipe = [-1; 2];
    // SAFETY: pipe2 writes two descriptors into a local array.
    if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", io::Error::last_os_error()));
    }
    trial.report = pipe[1];
    // SAFETY: the child makes system calls only, on memory prepared before (`Trial`).
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        child_exit(trial.run(), trial.report);
    }
    let forked = io::Error::last_os_error();
    // SAFETY: closes the write end this process no longer needs.
    unsafe { libc::close(pipe[1]) };
    let mut bytes = [0i32; 2];
    // SAFETY: reads at most 8 bytes into a local array from our read end, then closes it.
    let got = unsafe {
        let got = libc::read(pipe[0], bytes.as_mut_ptr().cast(), 8);
        libc::close(pipe[0]);
        got
    };
    if pid < 0 {
        return Err(format!("fork: {forked}"));
    }
    let status = wait_for(pid).map_err(|e| e.to_string())?;
    match (
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        got,
    ) {
        (true, _) => Ok(()),
        (false, 8) => {
            let step = STEPS.get(bytes[0] as usize).unwrap_or(&"the trial failed");
            Err(format!(
                "{step}: {}",
                io::Error::from_raw_os_error(bytes[1])
            ))
        }
        (false, _) => Err("the trial of the namespaces ended without a cause".into()),
    }
}

/// The file in the control base that records the last trial that succeeded (see
/// [`available_remembered`]).
pub const TRIAL_STAMP: &str = ".namespaces";
/// How long a successful trial is taken as the answer.
pub const TRIAL_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// [`available`], with a success remembered for [`TRIAL_FOR`] in the control base `base`:
/// the trial creates every namespace the stage will (a network namespace is most of the
/// cost of `confine`), and its answer rarely changes.
///
/// Only a success is remembered, and only for the same boot, user and mount namespaces,
/// caller and flags: a trial that failed is tried again every time, so the stage is used
/// as soon as the machine allows it. A remembered success the machine no longer allows
/// (a sysctl turned off within the minute) makes the stage fail when it starts: the
/// command does not run, never runs without what it was promised. The stamp lives in
/// the private control base (0700, this user's, outside every writable root and hidden
/// from confined commands), and is believed only when it is a regular file of this user
/// that nobody else may write, changed in the last minute, holding exactly this key.
pub fn available_remembered(pids: bool, net: bool, base: &std::path::Path) -> Result<(), String> {
    let flags = Trial::new(pids, net).flags;
    // SAFETY: getuid cannot fail.
    let key = trial_key(flags, unsafe { libc::getuid() });
    let stamp = base.join(TRIAL_STAMP);
    if key.as_deref().is_some_and(|k| remembered(&stamp, k)) {
        return Ok(());
    }
    available(pids, net)?;
    if let Some(key) = key {
        remember(base, &stamp, &key);
    }
    Ok(())
}

/// What a remembered trial must match: the version of the trial, the flags, the caller,
/// the boot, the user and mount namespaces the launcher runs in, and what else decides
/// whether the trial's calls are allowed to it: its capabilities, its seccomp filters (a
/// container's profile, a parent sandbox's), its LSM label (an AppArmor profile that
/// restricts user namespaces), and the mounts on and below `/proc` (one covered since
/// makes a fresh /proc refused). `None` where one of them cannot be read (nothing is
/// then remembered).
fn trial_key(flags: libc::c_int, uid: u32) -> Option<String> {
    let this_process = this_process()?;
    let proc_mounts = proc_mounts()?;
    Some(format!("3 {flags:x} {uid} {this_process} {proc_mounts}\n"))
}

/// What the key takes from this process itself (the boot, its user and mount
/// namespaces, its seccomp, no_new_privs and effective capabilities, its LSM label),
/// read once: none of it changes while the launcher runs (it never enters another
/// namespace, installs a filter or changes its own capabilities), and a process that
/// answers many requests (`stockade serve`) would read five files of `/proc` for each.
/// The mounts on `/proc` can change under it: [`proc_mounts`] is read every time.
fn this_process() -> Option<String> {
    static THIS: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    THIS.get_or_init(|| {
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let ns = |name: &str| std::fs::read_link(format!("/proc/self/ns/{name}")).ok();
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let filters: Vec<&str> = status
            .lines()
            .filter(|l| {
                ["Seccomp", "NoNewPrivs", "CapEff"]
                    .iter()
                    .any(|k| l.starts_with(k))
            })
            .collect();
        let label = std::fs::read_to_string("/proc/self/attr/current").unwrap_or_default();
        Some(format!(
            "{} {} {} {} {}",
            boot.trim(),
            ns("user")?.display(),
            ns("mnt")?.display(),
            filters
                .join(" ")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
            label.trim_end_matches(['\0', '\n'])
        ))
    })
    .clone()
}

/// The ids of the mounts on and below `/proc`, in a digest: any mount made or removed
/// there changes it. The mount table is read again only when the kernel says it changed
/// since the last read ([`MountTable`]): a kept process (`stockade serve`) would
/// otherwise have the kernel format every mount of the namespace for every request.
fn proc_mounts() -> Option<String> {
    static TABLE: std::sync::Mutex<Option<MountTable>> = std::sync::Mutex::new(None);
    let mut table = TABLE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(kept) = table.as_ref().filter(|t| !t.changed()) {
        return Some(kept.digest.clone());
    }
    let fresh = MountTable::read();
    let digest = fresh.as_ref().map(|t| t.digest.clone());
    *table = fresh;
    digest
}

/// `/proc/self/mountinfo` kept open with the digest of its last reading. `poll` on it
/// answers `POLLPRI` once the namespace's mount table has changed since the descriptor
/// was opened or last polled (the kernel's own change notice for this file), so an
/// unchanged answer means the digest still holds; a change between opening and reading
/// shows as one more (harmless) re-read.
struct MountTable {
    file: std::fs::File,
    digest: String,
}

impl MountTable {
    fn read() -> Option<MountTable> {
        use std::io::Read;
        let mut file = std::fs::File::open("/proc/self/mountinfo").ok()?;
        // `/proc` files give no size, so `read_to_string` would begin with a 32-byte read
        // and double it read after read; one buffer of a few pages takes it in one or two.
        let mut info = String::with_capacity(16 << 10);
        file.read_to_string(&mut info).ok()?;
        let digest = proc_mounts_digest(&info)?;
        Some(MountTable { file, digest })
    }

    /// Whether the mount table changed since this reading (or cannot tell).
    fn changed(&self) -> bool {
        use std::os::fd::AsRawFd;
        let mut fd = libc::pollfd {
            fd: self.file.as_raw_fd(),
            events: libc::POLLPRI,
            revents: 0,
        };
        // SAFETY: polls one descriptor this struct owns, without waiting; `fd` is a
        // valid pollfd that outlives the call.
        let ready = unsafe { libc::poll(&mut fd, 1, 0) };
        ready != 0 || fd.revents & (libc::POLLPRI | libc::POLLERR | libc::POLLNVAL) != 0
    }
}

/// The digest of the mounts on and below `/proc` in a mountinfo text.
fn proc_mounts_digest(info: &str) -> Option<String> {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let mut count = 0;
    for line in info.lines() {
        let mut fields = line.split(' ');
        let (id, point) = (fields.next()?, fields.nth(3)?);
        if point == "/proc" || point.starts_with("/proc/") {
            (id, point).hash(&mut hasher);
            count += 1;
        }
    }
    Some(format!("{count}:{:x}", hasher.finish()))
}

/// Whether `stamp` records a success for `key`, recent and written by this user alone.
fn remembered(stamp: &std::path::Path, key: &str) -> bool {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let Ok(mut file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(stamp)
    else {
        return false;
    };
    let Ok(meta) = file.metadata() else {
        return false;
    };
    // SAFETY: geteuid cannot fail.
    let own = meta.uid() == unsafe { libc::geteuid() };
    let fresh = meta
        .modified()
        .ok()
        .and_then(|m| m.elapsed().ok())
        .is_some_and(|age| age < TRIAL_FOR);
    if !meta.is_file() || !own || meta.mode() & 0o022 != 0 || !fresh || meta.len() > 512 {
        return false;
    }
    let mut text = String::new();
    file.read_to_string(&mut text).is_ok() && text == key
}

/// Records a success for `key`: written beside and renamed over, so a concurrent reader
/// sees the old stamp or the new one. Best effort: not remembering only costs a trial.
fn remember(base: &std::path::Path, stamp: &std::path::Path, key: &str) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let temp = base.join(format!("{TRIAL_STAMP}.{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temp)
        .and_then(|mut f| f.write_all(key.as_bytes()));
    if written.is_err() || std::fs::rename(&temp, stamp).is_err() {
        let _ = std::fs::remove_file(&temp);
    }
}

#[cfg(test)]
mod tests {
    use super::MountTable;

    /// Set in the copy of this test binary that runs in a mount namespace of its own.
    const CHILD: &str = "STOCKADE_MOUNT_TABLE_CHILD";

    /// A kept reading holds until a mount is made in the namespace, and then it does not:
    /// checked in a copy of this test run in a mount namespace of its own (`unshare`,
    /// with a user namespace for an ordinary user), where it mounts a tmpfs.
    #[test]
    fn a_kept_mount_table_is_read_again_after_a_mount() {
        if std::env::var_os(CHILD).is_some() {
            return in_own_namespace();
        }
        // Nothing changed since the reading: the kept digest serves (this control
        // shows `changed` does not simply always answer yes).
        let table = MountTable::read().expect("/proc/self/mountinfo");
        assert!(!table.changed(), "a fresh reading is reported changed");
        // SAFETY: geteuid cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        let flags: &[&str] = if root { &["-m"] } else { &["-r", "-m"] };
        let out = std::process::Command::new("unshare")
            .args(flags)
            .arg(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "stage::trial::tests::a_kept_mount_table_is_read_again_after_a_mount",
            ])
            .args(["--nocapture", "--test-threads", "1"])
            .env(CHILD, "1")
            .output()
            .expect("unshare (util-linux)");
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() && stderr.contains("unshare failed") {
            // No mount namespace for this user here (a container, a distribution that
            // restricts user namespaces): only the control above could run.
            eprintln!("no mount namespace of its own here: {stderr}");
            return;
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert!(
            stdout.contains("mount table: changed after the mount"),
            "{stdout}"
        );
    }

    fn in_own_namespace() {
        let table = MountTable::read().expect("/proc/self/mountinfo");
        assert!(!table.changed(), "a fresh reading is reported changed");
        let dir = std::env::temp_dir().join(format!("stockade-mount-table-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap();
        let target = std::ffi::CString::new(dir.to_str().unwrap()).unwrap();
        // SAFETY: mounts a tmpfs on a directory this test made, in the mount namespace
        // of its own that `unshare` started it in; every pointer is a valid C string.
        let r = unsafe {
            libc::mount(
                c"stockade-test".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        assert_eq!(r, 0, "mount: {}", std::io::Error::last_os_error());
        let changed = table.changed();
        // SAFETY: unmounts what this test mounted just above.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        let _ = std::fs::remove_dir(&dir);
        assert!(
            changed,
            "the mount table changed and the kept reading says it did not"
        );
        println!("mount table: changed after the mount");
    }
}
