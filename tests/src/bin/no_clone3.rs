//! `no-clone3 CMD ARGS...`: runs CMD where `clone3` fails with ENOSYS, as on kernels
//! before 5.3 and under container seccomp profiles that hide it. Used to prove that the
//! launcher still creates the command inside its cgroup the older way.

fn main() {
    stockade_tests::exec_without("no-clone3", &[libc::SYS_clone3])
}
