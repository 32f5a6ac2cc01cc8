//! `no-landlock CMD ARGS...`: runs CMD on a kernel that, for CMD and its descendants, has
//! no Landlock: the three Landlock syscalls fail with ENOSYS, exactly what a kernel built
//! without Landlock answers. Used to prove that stockade refuses to run unconfined when
//! it cannot confine.

fn main() {
    stockade_tests::exec_without(
        "no-landlock",
        &[
            libc::SYS_landlock_create_ruleset,
            libc::SYS_landlock_add_rule,
            libc::SYS_landlock_restrict_self,
        ],
    )
}
