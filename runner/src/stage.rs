//! Whether the launcher's namespace stage really ran before this runner.
//!
//! When `confine` reported the stage's guarantees, its argv starts the stage, which execs
//! this runner. An argv edited to start the runner directly would run the command
//! without them while the report says otherwise, so the runner checks the traces the
//! stage always leaves and counts the stage as achieved only when all are there:
//! - this process is not in the mount namespace `confine` ran in (the request records
//!   it): the stage always makes a new one;
//! - the root of the filesystem is mounted read-only (the stage remounts the whole tree
//!   read-only and binds only the writable roots back);
//! - with a pid namespace, this process is pid 2: the namespace's init (pid 1) starts
//!   exactly one child, the runner. On the host, pid 2 is a kernel thread;
//! - with the network denied (`Policy::own_network`), the network namespace has no
//!   interface but loopback.

use stockade_policy::Policy;
use stockade_policy::stage::PidMode;

/// Whether the stage ran: `Err` names the first of its traces that is missing.
pub fn achieved(policy: &Policy, confined_in: Option<u64>) -> Result<(), &'static str> {
    // The stage always enters a new mount namespace: a runner still in the one `confine`
    // ran in was not started by it, whatever else looks as the stage leaves it. One that
    // cannot tell its own namespace (where `confine` could) counts none of the traces.
    if let Some(outside) = confined_in {
        match mount_namespace() {
            Some(here) if here != outside => {}
            Some(_) => return Err("the runner is still in the mount namespace confine ran in"),
            None => return Err("the runner cannot tell which mount namespace it is in"),
        }
    }
    let mut fs = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: statvfs writes into the buffer and reads a NUL-terminated path literal.
    let ok = unsafe { libc::statvfs(c"/".as_ptr(), fs.as_mut_ptr()) } == 0;
    // SAFETY: initialised by the successful call above.
    if !(ok && unsafe { fs.assume_init() }.f_flag & libc::ST_RDONLY != 0) {
        return Err("/ is not mounted read-only");
    }
    if policy.pids() != PidMode::Share && std::process::id() != 2 {
        return Err("the runner is not pid 2 of a pid namespace");
    }
    if policy.own_network() && !only_loopback() {
        return Err("the network namespace has interfaces besides loopback");
    }
    Ok(())
}

/// The id of the mount namespace this process is in (`None` where the kernel does not
/// tell it, or without `/proc`).
fn mount_namespace() -> Option<u64> {
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

/// Whether this network namespace has no interface but `lo`.
fn only_loopback() -> bool {
    // SAFETY: if_nameindex returns an array ending in a zero entry, or null; it is read
    // up to that entry and freed once.
    unsafe {
        let list = libc::if_nameindex();
        if list.is_null() {
            return false;
        }
        let mut only_lo = true;
        let mut entry = list;
        while (*entry).if_index != 0 {
            let name = std::ffi::CStr::from_ptr((*entry).if_name);
            only_lo &= name.to_bytes() == b"lo";
            entry = entry.add(1);
        }
        libc::if_freenameindex(list);
        only_lo
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stockade_policy::Mode;

    #[test]
    fn a_runner_in_the_mount_namespace_confine_ran_in_was_not_staged() {
        let policy = Policy::for_tests(Mode::ReadOnly, "/");
        // Kernels before 6.11 do not tell the id: nothing to compare there.
        let Some(here) = mount_namespace() else {
            eprintln!("SKIPPED (no NS_GET_MNTNS_ID): a_runner_in_the_mount_namespace");
            return;
        };
        assert_eq!(
            achieved(&policy, Some(here)),
            Err("the runner is still in the mount namespace confine ran in")
        );
        // Another id is not this namespace: the next trace decides (this test process's
        // `/` is writable).
        assert_eq!(
            achieved(&policy, Some(here + 1)),
            Err("/ is not mounted read-only")
        );
    }
}
