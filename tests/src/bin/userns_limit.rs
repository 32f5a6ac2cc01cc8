//! `userns-limit CMD ARGS...`: runs CMD as an ordinary user in a user namespace of its
//! own whose `user.max_user_namespaces` is 0, so that CMD cannot create a user namespace
//! (`unshare` fails with ENOSPC), as on a machine with `sysctl user.max_user_namespaces=0`.
//! The limit is per user namespace and holds for everything created inside it, so the
//! machine's own sysctl is never touched. The uid and gid inside are the caller's own, or
//! 1000 for root: root needs no user namespace for the stage, so the limit would not
//! reach it. Used to prove the fallback for the reason distributions set that sysctl.

use std::os::unix::process::CommandExt;
use stockade_tests::{enter_user_namespace, write_or_exit};

fn main() {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    if args.is_empty() {
        eprintln!("usage: userns-limit CMD [ARGS...]");
        std::process::exit(2);
    }
    // SAFETY: geteuid/getegid take no arguments and cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let inside = |id: u32| if id == 0 { 1000 } else { id };
    enter_user_namespace("userns-limit", 0, (uid, gid), (inside(uid), inside(gid)));
    // This process still holds every capability in its new namespace (until it execs
    // as a uid other than 0 there), so it may set the namespace's own limit.
    write_or_exit("userns-limit", "/proc/sys/user/max_user_namespaces", "0");
    let err = std::process::Command::new(&args[0]).args(&args[1..]).exec();
    eprintln!("userns-limit: cannot exec {:?}: {err}", args[0]);
    std::process::exit(127);
}
