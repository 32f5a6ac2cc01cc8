//! End-to-end tests of `stockade` and `stockade-runner` live in `tests/`; helper
//! programs they run live in `src/bin/`.

use seccompiler::{SeccompAction, SeccompFilter, SeccompRule, TargetArch};
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;

/// The body of the kernel-feature masks (`no-landlock`, `no-clone3`): runs the command
/// in this process's arguments under a seccomp filter that makes `syscalls` fail with
/// ENOSYS, exactly what a kernel without them answers, for it and its descendants.
pub fn exec_without(helper: &str, syscalls: &[i64]) -> ! {
    exec_refusing(helper, syscalls, libc::ENOSYS)
}

/// Runs the command in this process's arguments where `syscalls` fail with `errno`, for
/// it and its descendants.
pub fn exec_refusing(helper: &str, syscalls: &[i64], errno: i32) -> ! {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    if args.is_empty() {
        eprintln!("usage: {helper} CMD [ARGS...]");
        std::process::exit(2);
    }
    let rules: BTreeMap<i64, Vec<SeccompRule>> =
        syscalls.iter().map(|&nr| (nr, Vec::new())).collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        TargetArch::x86_64,
    )
    .expect("seccomp filter");
    let program: seccompiler::BpfProgram = filter.try_into().expect("seccomp program");
    seccompiler::apply_filter(&program).expect("apply seccomp filter");
    let err = std::process::Command::new(&args[0]).args(&args[1..]).exec();
    eprintln!("{helper}: cannot exec {:?}: {err}", args[0]);
    std::process::exit(127);
}

pub mod audit;

/// Whether the tests run as root. Tests that need root start with
/// `if !stockade_tests::is_root() { eprintln!("SKIPPED (needs root): NAME"); return; }`,
/// so the unprivileged CI run can count and name what it skipped.
pub fn is_root() -> bool {
    // SAFETY: geteuid(2) takes no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Exit code of a namespace helper (`proc-covered`, `userns-limit`) that cannot set
/// itself up (no user namespaces here at all): the tests read it as "SKIPPED".
pub const UNAVAILABLE: i32 = 77;

/// Makes this process a user namespace of its own (with `also`, e.g. a mount namespace,
/// in the same call), `uid`/`gid` outside mapped to `inside_uid`/`inside_gid`, setgroups
/// denied as an unprivileged mapping requires. Exits with [`UNAVAILABLE`] naming `helper`
/// when the kernel refuses.
pub fn enter_user_namespace(
    helper: &str,
    also: libc::c_int,
    (uid, gid): (u32, u32),
    (inside_uid, inside_gid): (u32, u32),
) {
    // SAFETY: unshare takes flags only; the helpers call this single-threaded.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | also) } != 0 {
        eprintln!(
            "{helper}: cannot create a user namespace: {}",
            std::io::Error::last_os_error()
        );
        std::process::exit(UNAVAILABLE);
    }
    write_or_exit(helper, "/proc/self/setgroups", "deny");
    write_or_exit(
        helper,
        "/proc/self/uid_map",
        &format!("{inside_uid} {uid} 1\n"),
    );
    write_or_exit(
        helper,
        "/proc/self/gid_map",
        &format!("{inside_gid} {gid} 1\n"),
    );
}

/// Writes `text` to a kernel file (`/proc/self/uid_map`, a sysctl); exits with
/// [`UNAVAILABLE`] naming `helper` and the file when it cannot.
pub fn write_or_exit(helper: &str, path: &str, text: &str) {
    use std::io::Write;
    let result = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    if let Err(e) = result {
        eprintln!("{helper}: cannot write {path}: {e}");
        std::process::exit(UNAVAILABLE);
    }
}

/// The `argv` of a ConfinedArgv JSON object, as strings (the end-to-end tests and the
/// model differential's driver both spawn one).
pub fn confined_argv(confined: &serde_json::Value) -> Vec<String> {
    confined["argv"]
        .as_array()
        .expect("argv")
        .iter()
        .map(|v| v.as_str().expect("argv entries are strings").to_string())
        .collect()
}
