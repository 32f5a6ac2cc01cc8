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
