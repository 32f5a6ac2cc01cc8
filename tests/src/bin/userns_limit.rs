//! `userns-limit CMD ARGS...`: runs CMD as an ordinary user in a user namespace of its
//! own whose `user.max_user_namespaces` is 0, so that CMD cannot create a user namespace
//! (`unshare` fails with ENOSPC), as on a machine with `sysctl user.max_user_namespaces=0`.
//! The limit is per user namespace and holds for everything created inside it, so the
//! machine's own sysctl is never touched. The uid and gid inside are the caller's own, or
//! 1000 for root: root needs no user namespace for the stage, so the limit would not
//! reach it. Used to prove the fallback for the reason distributions set that sysctl.

use std::io::Write;
use std::os::unix::process::CommandExt;

fn write(path: &str, text: &str) {
    let result = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    if let Err(e) = result {
        eprintln!("userns-limit: cannot write {path}: {e}");
        std::process::exit(UNAVAILABLE);
    }
}

/// Exit code when the helper itself cannot set up (no user namespaces here at all).
const UNAVAILABLE: i32 = 77;

fn main() {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    if args.is_empty() {
        eprintln!("usage: userns-limit CMD [ARGS...]");
        std::process::exit(2);
    }
    // SAFETY: geteuid/getegid take no arguments and cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let inside = |id: u32| if id == 0 { 1000 } else { id };
    // SAFETY: unshare takes flags only; this process is single-threaded.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER) } != 0 {
        eprintln!(
            "userns-limit: cannot create a user namespace: {}",
            std::io::Error::last_os_error()
        );
        std::process::exit(UNAVAILABLE);
    }
    write("/proc/self/setgroups", "deny");
    write("/proc/self/uid_map", &format!("{} {uid} 1\n", inside(uid)));
    write("/proc/self/gid_map", &format!("{} {gid} 1\n", inside(gid)));
    // This process still holds every capability in its new namespace (until it execs
    // as a uid other than 0 there), so it may set the namespace's own limit.
    write("/proc/sys/user/max_user_namespaces", "0");
    let err = std::process::Command::new(&args[0]).args(&args[1..]).exec();
    eprintln!("userns-limit: cannot exec {:?}: {err}", args[0]);
    std::process::exit(127);
}
