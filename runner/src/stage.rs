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
//! - with the network by name, the network namespace has no interface but loopback.

use stockade_policy::Policy;
use stockade_policy::request::NamespaceId;
use stockade_policy::stage::PidMode;

pub fn achieved(policy: &Policy, confined_in: Option<NamespaceId>) -> bool {
    // The stage always enters a new mount namespace: a runner still in the one `confine`
    // ran in was not started by it, whatever else looks as the stage leaves it. One that
    // cannot tell its own namespace counts none of the traces.
    if let Some(outside) = confined_in {
        match mount_namespace() {
            Some(here) if here != outside => {}
            _ => return false,
        }
    }
    let mut fs = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: statvfs writes into the buffer and reads a NUL-terminated path literal.
    let ok = unsafe { libc::statvfs(c"/".as_ptr(), fs.as_mut_ptr()) } == 0;
    // SAFETY: initialised by the successful call above.
    let root_read_only = ok && unsafe { fs.assume_init() }.f_flag & libc::ST_RDONLY != 0;
    let pids_ok = policy.pids() == PidMode::Share || std::process::id() == 2;
    let net_ok = policy.domains().is_none() || only_loopback();
    root_read_only && pids_ok && net_ok
}

/// The mount namespace this process is in (`None` without `/proc`).
fn mount_namespace() -> Option<NamespaceId> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata("/proc/self/ns/mnt").ok()?;
    Some(NamespaceId {
        dev: meta.dev(),
        ino: meta.ino(),
    })
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
        let here = mount_namespace().expect("/proc is mounted");
        assert!(!achieved(&policy, Some(here)));
        // The namespace is told by device and inode both.
        let other = NamespaceId {
            dev: here.dev,
            ino: here.ino ^ 1,
        };
        assert_ne!(mount_namespace(), Some(other));
    }
}
