//! `no-kill CMD ARGS...`: runs CMD where every way of sending a signal to a process fails
//! with EPERM, the kernel's answer for a process one may not signal (another user's).
//! Used to prove that `stockade run` reports a range it cannot end as an unknown cleanup
//! instead of waiting for ever or calling it clean.

fn main() {
    stockade_tests::exec_refusing(
        "no-kill",
        &[
            libc::SYS_kill,
            libc::SYS_tkill,
            libc::SYS_tgkill,
            libc::SYS_rt_sigqueueinfo,
            libc::SYS_rt_tgsigqueueinfo,
            libc::SYS_pidfd_send_signal,
        ],
        libc::EPERM,
    )
}
