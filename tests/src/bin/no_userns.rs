//! `no-userns CMD ARGS...`: runs CMD where `unshare` fails with ENOSYS, as under
//! Docker's default seccomp profile (which refuses it) or where namespaces are otherwise
//! out of reach. The namespace stage and its availability check both create their
//! namespaces with `unshare` (nothing in stockade clones with namespace flags), so
//! masking it alone takes the stage away. Used to prove the fallback: the
//! Landlock+seccomp baseline still runs, reported as partial, and a policy that requires
//! the stage fails closed.

fn main() {
    stockade_tests::exec_without("no-userns", &[libc::SYS_unshare])
}
