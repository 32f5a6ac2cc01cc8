//! The namespaces the stage creates: which ones `unshare` is asked for, the user
//! namespace's id maps, and the mount namespace's id the request records. Whether this
//! machine lets the stage run at all is `trial`'s.

use super::error::StageError;
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

/// `CAP_SYS_ADMIN` and `CAP_NET_ADMIN`, as bits of a capability set.
const SYS_ADMIN: u64 = 1 << 21;
const NET_ADMIN: u64 = 1 << 12;

/// Whether the caller `uid` needs a user namespace of its own for the stage's other
/// namespaces and mounts (and a network namespace's loopback when `net`): an ordinary
/// user always, root when it lacks what they take in the namespace it is in (root of a
/// container engine's default capabilities has no `CAP_SYS_ADMIN`). In its own user
/// namespace root is mapped to itself alone, and holds every capability there.
pub(super) fn needs_user_namespace(uid: u32, net: bool) -> bool {
    let effective = crate::control::capabilities::effective();
    let wanted = if net {
        SYS_ADMIN | NET_ADMIN
    } else {
        SYS_ADMIN
    };
    uid != 0 || effective & wanted != wanted
}

/// The flags of `unshare` for `spec` (and a network namespace when `net`), with a user
/// namespace when `user` (see [`needs_user_namespace`]).
pub(super) fn namespace_flags(spec: &MountPlan, net: bool, user: bool) -> libc::c_int {
    let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWIPC;
    if user {
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
