//! `no-notify CMD ARGS...`: runs CMD where a seccomp filter with a user-notification
//! listener cannot be installed (`EBUSY`), as under another supervisor that already
//! holds one (the kernel allows one listener per filter chain), or on a kernel without
//! user notification. The namespace stage is also taken away (`unshare` fails, as under
//! Docker's default profile): workspace-write then runs with neither the stage nor the
//! runner's metadata supervisor, reported `partial`, which the tests of what stockade
//! detects afterwards (tampered records, shared roots put back) rely on.
//!
//! `no-notify --keep-stage CMD ARGS...` takes away only the listener: the stage runs,
//! and the runner cannot start the supervisor it would start beside the stage for an
//! inherited descriptor the stage's mounts do not hold.
#![allow(clippy::undocumented_unsafe_blocks)] // A test helper made of raw system calls.

use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch,
};
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;

/// `SECCOMP_FILTER_FLAG_NEW_LISTENER`.
const NEW_LISTENER: u64 = 1 << 3;

fn main() {
    let mut args: Vec<_> = std::env::args_os().skip(1).collect();
    let keep_stage = args.first().is_some_and(|a| a == "--keep-stage");
    if keep_stage {
        args.remove(0);
    }
    if args.is_empty() {
        eprintln!("usage: no-notify [--keep-stage] CMD [ARGS...]");
        std::process::exit(2);
    }
    let listener = SeccompCondition::new(
        1,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::MaskedEq(NEW_LISTENER),
        NEW_LISTENER,
    )
    .expect("condition");
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(
        libc::SYS_seccomp,
        vec![SeccompRule::new(vec![listener]).expect("rule")],
    );
    if !keep_stage {
        rules.insert(libc::SYS_unshare, Vec::new());
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EBUSY as u32),
        TargetArch::x86_64,
    )
    .expect("seccomp filter");
    let program: seccompiler::BpfProgram = filter.try_into().expect("seccomp program");
    seccompiler::apply_filter(&program).expect("apply seccomp filter");
    let err = std::process::Command::new(&args[0]).args(&args[1..]).exec();
    eprintln!("no-notify: cannot exec {:?}: {err}", args[0]);
    std::process::exit(127);
}
