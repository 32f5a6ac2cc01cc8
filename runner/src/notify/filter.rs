//! The supervisor's filter: the metadata calls go to the supervisor (user
//! notification); the inode-flag calls it does not emulate are refused; everything else
//! passes on to the runner's main filter, which is installed beside it. The kernel runs
//! both and takes the most severe answer, so the main filter's refusals (set-uid and
//! set-gid modes, foreign architectures, x32) win over a notification: the supervisor
//! never sees those calls.

use crate::seccomp::{MODE_SETTERS, OTHER_METADATA, SETATTR_IOCTLS, SYS_FILE_SETATTR};
use libc::sock_filter;

/// `SECCOMP_RET_USER_NOTIF`: the call waits for the supervisor's answer.
const RET_USER_NOTIF: u32 = 0x7fc0_0000;
const RET_ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const fn ret_errno(errno: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | errno as u32
}

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// The calls that change a file's mode, owner or times: each is answered by the
/// supervisor ([`super::calls`] decodes them). The main filter's lists, so that a call
/// added there is supervised too: its mode setters, and the owner and time setters it
/// refuses in read-only mode (less `file_setattr`, refused here below).
pub fn supervised() -> impl Iterator<Item = i64> {
    MODE_SETTERS.iter().map(|&(nr, _)| nr).chain(
        OTHER_METADATA
            .iter()
            .copied()
            .filter(|&nr| nr != SYS_FILE_SETATTR),
    )
}

/// The calls that can write or replace a name, sent to the supervisor whatever their
/// arguments when it holds the protected paths. (`openat2`, whose flags are in memory,
/// is the main filter's: ENOSYS, and callers fall back to `openat`.)
pub fn name_writers() -> Vec<i64> {
    let mut calls = vec![
        libc::SYS_renameat2,
        libc::SYS_linkat,
        libc::SYS_symlinkat,
        libc::SYS_unlinkat,
        libc::SYS_mkdirat,
        libc::SYS_mknodat,
        libc::SYS_truncate,
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        libc::SYS_creat,
        libc::SYS_rename,
        libc::SYS_renameat,
        libc::SYS_link,
        libc::SYS_symlink,
        libc::SYS_unlink,
        libc::SYS_rmdir,
        libc::SYS_mkdir,
        libc::SYS_mknod,
    ]);
    calls
}

/// The opens with their flags in a register: sent to the supervisor only with a flag
/// that writes (access mode, create, truncate; `O_TMPFILE` needs a writing access
/// mode), so that reading, the most common call of all, never waits for it. The
/// argument that holds the flags.
pub fn flag_opens() -> Vec<(i64, u32)> {
    let mut calls = vec![(libc::SYS_openat, 2)];
    #[cfg(target_arch = "x86_64")]
    calls.push((libc::SYS_open, 1));
    calls
}

/// The open flags that make an open the supervisor's.
pub const WRITING_FLAGS: u32 =
    (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC) as u32;

// The inode-flag setters (`chattr`: `FS_IOC_SETFLAGS` and its 32-bit twin,
// `FS_IOC_FSSETXATTR`; an encryption policy and fs-verity, each set for good), whose
// arguments the supervisor does not emulate, are refused with EOPNOTSUPP, what a
// filesystem without inode flags answers, as is `file_setattr`: the main filter's list
// (`crate::seccomp::SETATTR_IOCTLS`), which read-only mode refuses.

/// Offsets in `struct seccomp_data`.
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
const fn arg_low(i: u32) -> u32 {
    16 + 8 * i
}

const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

fn insn(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// The program: a linear list (a few dozen calls; no search needed). `protect`: the
/// calls that write or replace names too.
pub fn program(protect: bool) -> Vec<sock_filter> {
    let mut p = vec![
        insn(LD_W_ABS, OFFSET_ARCH, 0, 0),
        // A foreign architecture is the main filter's to kill.
        insn(JEQ_K, AUDIT_ARCH, 1, 0),
        insn(RET_K, RET_ALLOW, 0, 0),
        insn(LD_W_ABS, OFFSET_NR, 0, 0),
    ];
    for nr in supervised() {
        p.push(insn(JEQ_K, nr as u32, 0, 1));
        p.push(insn(RET_K, RET_USER_NOTIF, 0, 0));
    }
    if protect {
        for nr in name_writers() {
            p.push(insn(JEQ_K, nr as u32, 0, 1));
            p.push(insn(RET_K, RET_USER_NOTIF, 0, 0));
        }
        // A mismatch skips the load, the test and both answers.
        for (nr, arg) in flag_opens() {
            p.push(insn(JEQ_K, nr as u32, 0, 4));
            p.push(insn(LD_W_ABS, arg_low(arg), 0, 0));
            p.push(insn(JSET_K, WRITING_FLAGS, 0, 1));
            p.push(insn(RET_K, RET_USER_NOTIF, 0, 0));
            p.push(insn(RET_K, RET_ALLOW, 0, 0));
        }
    }
    p.push(insn(JEQ_K, SYS_FILE_SETATTR as u32, 0, 1));
    p.push(insn(RET_K, ret_errno(libc::EOPNOTSUPP), 0, 0));
    // ioctl: the command is an unsigned int, in the low half of the second argument.
    // A mismatch skips the load, the compares and the refusal.
    let skip = (SETATTR_IOCTLS.len() + 2) as u8;
    p.push(insn(JEQ_K, libc::SYS_ioctl as u32, 0, skip));
    p.push(insn(LD_W_ABS, arg_low(1), 0, 0));
    for (i, cmd) in SETATTR_IOCTLS.iter().enumerate() {
        // Each match jumps over the remaining compares to the refusal; the last
        // mismatch over the refusal to the allow.
        let left = (SETATTR_IOCTLS.len() - 1 - i) as u8;
        p.push(insn(JEQ_K, *cmd, left, u8::from(left == 0)));
    }
    p.push(insn(RET_K, ret_errno(libc::EOPNOTSUPP), 0, 0));
    p.push(insn(RET_K, RET_ALLOW, 0, 0));
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn run_program(p: &[sock_filter], nr: i64, arch: u32, args: [u64; 6]) -> u32 {
        run(p, nr, arch, args)
    }

    /// A classic-BPF interpreter for the few instructions this program uses.
    fn run(p: &[sock_filter], nr: i64, arch: u32, args: [u64; 6]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&(nr as i32).to_le_bytes());
        data[4..8].copy_from_slice(&arch.to_le_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let i = p[pc];
            match i.code {
                LD_W_ABS => {
                    let k = i.k as usize;
                    acc = u32::from_le_bytes(data[k..k + 4].try_into().unwrap());
                    pc += 1;
                }
                JEQ_K => pc += 1 + if acc == i.k { i.jt } else { i.jf } as usize,
                JSET_K => pc += 1 + if acc & i.k != 0 { i.jt } else { i.jf } as usize,
                RET_K => return i.k,
                c => panic!("opcode {c}"),
            }
        }
    }

    #[test]
    fn metadata_calls_are_notified_inode_flags_refused_and_the_rest_allowed() {
        let p = program(false);
        let call = |nr: i64, args: [u64; 6]| run(&p, nr, AUDIT_ARCH, args);
        for nr in supervised() {
            assert_eq!(call(nr, [0; 6]), RET_USER_NOTIF, "{nr}");
        }
        let eopnotsupp = ret_errno(libc::EOPNOTSUPP);
        assert_eq!(call(SYS_FILE_SETATTR, [0; 6]), eopnotsupp);
        for cmd in SETATTR_IOCTLS {
            assert_eq!(
                call(libc::SYS_ioctl, [3, cmd as u64, 0, 0, 0, 0]),
                eopnotsupp
            );
        }
        // Other ioctls (a terminal's size), opens, writes: allowed, for the main filter
        // to judge.
        assert_eq!(call(libc::SYS_ioctl, [1, 0x5413, 0, 0, 0, 0]), RET_ALLOW);
        for nr in [libc::SYS_openat, libc::SYS_write, libc::SYS_renameat2] {
            assert_eq!(call(nr, [0; 6]), RET_ALLOW, "{nr}");
        }
        // Another architecture's numbers mean other calls: the main filter kills them.
        assert_eq!(run(&p, libc::SYS_fchmod, 0x4000_0003, [0; 6]), RET_ALLOW);
    }
}

#[cfg(test)]
mod protect_tests {
    use super::*;

    #[test]
    fn with_protected_paths_writing_opens_and_name_changes_are_notified_and_reads_are_not() {
        let p = program(true);
        let call = |nr: i64, args: [u64; 6]| tests_run(&p, nr, args);
        for nr in name_writers().into_iter().chain(supervised()) {
            assert_eq!(call(nr, [0; 6]), RET_USER_NOTIF, "{nr}");
        }
        let at = |flags: i32| [libc::AT_FDCWD as u64, 0x1000, flags as u64, 0o644, 0, 0];
        for flags in [
            libc::O_WRONLY,
            libc::O_RDWR,
            libc::O_RDONLY | libc::O_CREAT,
            libc::O_RDONLY | libc::O_TRUNC,
            libc::O_WRONLY | libc::O_APPEND,
            libc::O_TMPFILE | libc::O_RDWR,
        ] {
            assert_eq!(
                call(libc::SYS_openat, at(flags)),
                RET_USER_NOTIF,
                "{flags:o}"
            );
        }
        for flags in [
            libc::O_RDONLY,
            libc::O_RDONLY | libc::O_CLOEXEC | libc::O_DIRECTORY,
            libc::O_PATH,
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK,
        ] {
            assert_eq!(call(libc::SYS_openat, at(flags)), RET_ALLOW, "{flags:o}");
        }
        // Writes through a descriptor are the descriptor's: never notified.
        for nr in [libc::SYS_write, libc::SYS_ftruncate, libc::SYS_read] {
            assert_eq!(call(nr, [0; 6]), RET_ALLOW, "{nr}");
        }
        // Without protected paths nothing of this reaches the supervisor.
        let plain = program(false);
        assert_eq!(
            tests_run(&plain, libc::SYS_openat, at(libc::O_WRONLY)),
            RET_ALLOW
        );
        assert_eq!(tests_run(&plain, libc::SYS_unlinkat, [0; 6]), RET_ALLOW);
    }

    fn tests_run(p: &[sock_filter], nr: i64, args: [u64; 6]) -> u32 {
        super::tests::run_program(p, nr, AUDIT_ARCH, args)
    }
}
