//! `proc-covered [--bare] CMD ARGS...`: runs CMD where part of `/proc` is covered the way
//! container engines cover it (a file bound over `/proc/kcore` or another entry), and
//! the cover is locked: CMD runs in a user namespace below the one that mounted it, as
//! a command in a container runs below the engine. There the kernel refuses a fresh
//! procfs to anything but the first user namespace (a new `/proc` would reveal what the
//! cover hides), which is what broke the namespace stage under Podman's defaults.
//! `--bare` makes the same namespaces without the cover: the control.
//!
//! The uid and gid are the caller's own at every level (root stays root, with every
//! capability in the innermost namespace; an ordinary user's are dropped at exec).

use std::os::unix::process::CommandExt;
use stockade_tests::{UNAVAILABLE, enter_user_namespace};

/// The `/proc` entries a container engine covers, any of which this kernel has.
const COVERED: [&str; 4] = [
    "/proc/kcore",
    "/proc/timer_list",
    "/proc/keys",
    "/proc/sched_debug",
];

fn fail(what: &str) -> ! {
    eprintln!("proc-covered: {what}: {}", std::io::Error::last_os_error());
    std::process::exit(UNAVAILABLE);
}

/// A user namespace and a mount namespace of this process's own, the caller mapped to
/// itself.
fn enter(uid: u32, gid: u32) {
    enter_user_namespace("proc-covered", libc::CLONE_NEWNS, (uid, gid), (uid, gid));
}

fn mount(source: &std::ffi::CStr, target: &std::ffi::CStr, flags: libc::c_ulong) -> bool {
    // SAFETY: NUL-terminated strings that outlive the call; no data.
    unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        ) == 0
    }
}

fn main() {
    let mut args: Vec<_> = std::env::args_os().skip(1).collect();
    let bare = args.first().is_some_and(|a| a == "--bare");
    if bare {
        args.remove(0);
    }
    if args.is_empty() {
        eprintln!("usage: proc-covered [--bare] CMD [ARGS...]");
        std::process::exit(2);
    }
    // SAFETY: geteuid/getegid take no arguments and cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    enter(uid, gid);
    if !mount(c"none", c"/", libc::MS_REC | libc::MS_PRIVATE) {
        fail("cannot make the mounts private");
    }
    if !bare {
        let Some(entry) = COVERED.iter().find(|p| std::path::Path::new(p).exists()) else {
            eprintln!("proc-covered: none of {COVERED:?} exists here");
            std::process::exit(UNAVAILABLE);
        };
        let target = std::ffi::CString::new(*entry).unwrap();
        if !mount(c"/dev/null", &target, libc::MS_BIND) {
            fail(&format!("cannot cover {entry}"));
        }
    }
    // Below the namespace that covered it, the cover is locked in place.
    enter(uid, gid);
    let err = std::process::Command::new(&args[0]).args(&args[1..]).exec();
    eprintln!("proc-covered: cannot exec {:?}: {err}", args[0]);
    std::process::exit(127);
}
