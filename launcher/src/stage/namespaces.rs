//! The namespaces the stage creates: which ones `unshare` is asked for, the user
//! namespace's id maps, the mount namespace's id the request records, and whether this
//! machine lets the stage run at all.

use super::error::StageError;
use super::init::wait_for;
use std::io;
use stockade_policy::stage::MountPlan;

/// The id of the mount namespace this process is in, as the request records it: the
/// stage always leaves it (`CLONE_NEWNS` below), so the runner can tell a stage that ran
/// from an argv that skipped it. `None` where the kernel does not tell the id.
pub fn mount_namespace() -> Option<u64> {
    use std::os::fd::AsRawFd;
    let ns = std::fs::File::open("/proc/self/ns/mnt").ok()?;
    let mut id: u64 = 0;
    // SAFETY: the request writes one u64 into `id`, which outlives the call, on a
    // descriptor this function owns.
    let r = unsafe {
        libc::ioctl(
            ns.as_raw_fd(),
            stockade_policy::stage::NS_GET_MNTNS_ID as _,
            &mut id as *mut u64,
        )
    };
    (r == 0).then_some(id)
}

/// The flags of `unshare` for `spec` (and a network namespace when `net`), as the
/// caller `uid`.
pub(super) fn namespace_flags(spec: &MountPlan, net: bool, uid: u32) -> libc::c_int {
    let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWIPC;
    if uid != 0 {
        flags |= libc::CLONE_NEWUSER;
    }
    if spec.pids {
        flags |= libc::CLONE_NEWPID;
    }
    if net {
        flags |= libc::CLONE_NEWNET;
    }
    flags
}

/// Maps the caller's uid and gid to themselves in the new user namespace.
pub(super) fn map_ids(uid: u32, gid: u32) -> Result<(), StageError> {
    let write = |file: &str, text: String| {
        std::fs::write(file, text).map_err(|e| StageError {
            what: format!("cannot write {file}"),
            source: Some(e),
        })
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))
}

/// Whether namespaces for `spec` can be created here, and if not, why: tried for real
/// in a short-lived child, since sysctls, AppArmor and container seccomp profiles can
/// each refuse them.
pub fn available(pids: bool, net: bool) -> Result<(), String> {
    let spec = MountPlan {
        pids,
        ..MountPlan::default()
    };
    // SAFETY: getuid cannot fail.
    let flags = namespace_flags(&spec, net, unsafe { libc::getuid() });
    // SAFETY: the child only calls unshare and _exit, both async-signal-safe.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: see above.
        unsafe {
            let code = if libc::unshare(flags) == 0 {
                0
            } else {
                *libc::__errno_location()
            };
            libc::_exit(code.min(255));
        }
    }
    let status = wait_for(pid).map_err(|e| e.to_string())?;
    match libc::WEXITSTATUS(status) {
        0 => Ok(()),
        errno => Err(format!(
            "unshare refused: {}",
            io::Error::from_raw_os_error(errno)
        )),
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
    let spec = MountPlan {
        pids,
        ..MountPlan::default()
    };
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let key = trial_key(namespace_flags(&spec, net, uid), uid);
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

/// What a remembered trial must match: the flags, the caller, the boot, the user and
/// mount namespaces the launcher runs in, and what else decides whether `unshare` is
/// allowed to it: its seccomp filters (a container's profile, a parent sandbox's) and its
/// LSM label (an AppArmor profile that restricts user namespaces). `None` where one of
/// them cannot be read (nothing is then remembered).
fn trial_key(flags: libc::c_int, uid: u32) -> Option<String> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let ns = |name: &str| std::fs::read_link(format!("/proc/self/ns/{name}")).ok();
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let filters: Vec<&str> = status
        .lines()
        .filter(|l| l.starts_with("Seccomp") || l.starts_with("NoNewPrivs"))
        .collect();
    let label = std::fs::read_to_string("/proc/self/attr/current").unwrap_or_default();
    Some(format!(
        "{flags:x} {uid} {} {} {} {} {}\n",
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
