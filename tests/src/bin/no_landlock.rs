//! `no-landlock CMD ARGS...`: runs CMD on a kernel that, for CMD and its descendants, has
//! no Landlock: a seccomp filter makes the three Landlock syscalls fail with ENOSYS,
//! exactly what a kernel built without Landlock answers. Used to prove that stockade
//! refuses to run unconfined when it cannot confine.

use seccompiler::{SeccompAction, SeccompFilter, SeccompRule, TargetArch};
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;

fn main() {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    if args.is_empty() {
        eprintln!("usage: no-landlock CMD [ARGS...]");
        std::process::exit(2);
    }
    let rules: BTreeMap<i64, Vec<SeccompRule>> = [
        libc::SYS_landlock_create_ruleset,
        libc::SYS_landlock_add_rule,
        libc::SYS_landlock_restrict_self,
    ]
    .into_iter()
    .map(|nr| (nr, Vec::new()))
    .collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        TargetArch::x86_64,
    )
    .expect("seccomp filter");
    let program: seccompiler::BpfProgram = filter.try_into().expect("seccomp program");
    seccompiler::apply_filter(&program).expect("apply seccomp filter");
    let err = std::process::Command::new(&args[0]).args(&args[1..]).exec();
    eprintln!("no-landlock: cannot exec {:?}: {err}", args[0]);
    std::process::exit(127);
}
