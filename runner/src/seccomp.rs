//! The seccomp filter: the kernel attack surface and escape hatches Landlock leaves open,
//! closed by system call. Installed last, just before `execve`, after no_new_privs.
//!
//! Three programs are installed; the kernel runs all of them and the most severe answer
//! wins (kill > errno > allow):
//! 1. [`guard`], written by hand: kills anything not of the native architecture (an
//!    x86_64 process can still enter the ia32 table with `int 0x80`), answers ENOSYS for
//!    the x32 range (`nr | 0x40000000`) that a filter matching exact numbers misses, and
//!    ENOSYS for clone3, whose flags live in memory a filter cannot read (libc then
//!    falls back to clone, whose flags it can);
//! 2. the privileged escape hatches, answered EPERM ("operation not permitted");
//! 3. the socket families the policy denies, answered EACCES ("permission denied", which
//!    `socket(2)` documents for a denied family or type).
//!
//! Both errnos appear in the ConfinedArgv `denialSignatures`.

use crate::error::RunnerError;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch, sock_filter,
};
use std::collections::BTreeMap;
use stockade_policy::{Network, Policy};

#[cfg(target_arch = "x86_64")]
mod arch {
    pub const TARGET: seccompiler::TargetArch = seccompiler::TargetArch::x86_64;
    /// `AUDIT_ARCH_X86_64`.
    pub const AUDIT_ARCH: u32 = 0xC000_003E;
    /// Set in the number of every x32 system call (`__X32_SYSCALL_BIT`).
    pub const X32_BIT: Option<u32> = Some(0x4000_0000);
}

#[cfg(target_arch = "aarch64")]
mod arch {
    pub const TARGET: seccompiler::TargetArch = seccompiler::TargetArch::aarch64;
    /// `AUDIT_ARCH_AARCH64`.
    pub const AUDIT_ARCH: u32 = 0xC000_00B7;
    pub const X32_BIT: Option<u32> = None;
}

// Classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
const BPF_LD: u16 = 0x00;
const BPF_W: u16 = 0x00;
const BPF_ABS: u16 = 0x20;
const BPF_JMP: u16 = 0x05;
const BPF_JEQ: u16 = 0x10;
const BPF_JSET: u16 = 0x40;
const BPF_K: u16 = 0x00;
const BPF_RET: u16 = 0x06;
#[allow(clippy::identity_op, clippy::eq_op)] // Spelled as in linux/filter.h.
const BPF_LD_W_ABS: u16 = BPF_LD | BPF_W | BPF_ABS;
#[allow(clippy::identity_op)]
const BPF_JMP_JEQ_K: u16 = BPF_JMP | BPF_JEQ | BPF_K;
#[allow(clippy::identity_op)]
const BPF_JMP_JSET_K: u16 = BPF_JMP | BPF_JSET | BPF_K;
#[allow(clippy::identity_op)]
const BPF_RET_K: u16 = BPF_RET | BPF_K;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_ALLOW: u32 = 0x7fff_0000;
/// Offsets in `struct seccomp_data { int nr; __u32 arch; __u64 ip; __u64 args[6]; }`.
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// The hand-written guard: architecture check, x32 range, clone3.
pub fn guard() -> BpfProgram {
    let mut p = vec![
        stmt(BPF_LD_W_ABS, OFFSET_ARCH),
        // Native: skip the kill.
        jump(BPF_JMP_JEQ_K, arch::AUDIT_ARCH, 1, 0),
        stmt(BPF_RET_K, RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, OFFSET_NR),
    ];
    if let Some(bit) = arch::X32_BIT {
        p.push(jump(BPF_JMP_JSET_K, bit, 0, 1));
        p.push(stmt(BPF_RET_K, RET_ERRNO | libc::ENOSYS as u32));
    }
    p.push(jump(BPF_JMP_JEQ_K, libc::SYS_clone3 as u32, 0, 1));
    p.push(stmt(BPF_RET_K, RET_ERRNO | libc::ENOSYS as u32));
    p.push(stmt(BPF_RET_K, RET_ALLOW));
    p
}

const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541C;
/// `personality(0xffffffff)` only queries the persona.
const PERSONALITY_QUERY: u64 = 0xffff_ffff;
const NAMESPACE_FLAGS: [u64; 7] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWCGROUP as u64,
];

/// System calls refused outright (EPERM) in every confined mode.
const DENIED: &[i64] = &[
    // Reading or steering other processes.
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    // Copying a descriptor out of another process (ptrace access is also checked).
    libc::SYS_pidfd_getfd,
    // Kernel attack surface rarely needed by commands.
    libc::SYS_bpf,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    // io_uring creates sockets and opens files without the system calls filtered here.
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    // The mount family: reshaping the filesystem view.
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    // Namespaces: a user namespace hands out capabilities over a fresh world.
    libc::SYS_unshare,
    libc::SYS_setns,
    // Replacing the kernel or extending it.
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    // Opening files by handle bypasses path-based rules.
    libc::SYS_open_by_handle_at,
];

fn cond(arg: u8, len: Len, op: Op, value: u64) -> Result<SeccompCondition, RunnerError> {
    SeccompCondition::new(arg, len, op, value).map_err(seccomp_error)
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, RunnerError> {
    SeccompRule::new(conditions).map_err(seccomp_error)
}

fn seccomp_error(e: impl std::fmt::Display) -> RunnerError {
    RunnerError::Seccomp(e.to_string())
}

fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    errno: i32,
    target: TargetArch,
) -> Result<BpfProgram, RunnerError> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        target,
    )
    .map_err(seccomp_error)?;
    BpfProgram::try_from(filter).map_err(seccomp_error)
}

/// The EPERM program: [`DENIED`], namespace flags of clone, personality changes,
/// TIOCSTI/TIOCLINUX on any descriptor.
fn privileged() -> Result<BpfProgram, RunnerError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|&nr| (nr, Vec::new())).collect();
    // clone's flags are an unsigned long in the first argument (x86_64 and aarch64).
    let clone = NAMESPACE_FLAGS
        .iter()
        .map(|&flag| rule(vec![cond(0, Len::Qword, Op::MaskedEq(flag), flag)?]))
        .collect::<Result<_, _>>()?;
    rules.insert(libc::SYS_clone, clone);
    // personality takes an unsigned int: compare the low 32 bits, as the kernel reads it.
    rules.insert(
        libc::SYS_personality,
        vec![rule(vec![
            cond(0, Len::Dword, Op::Ne, 0)?,
            cond(0, Len::Dword, Op::Ne, PERSONALITY_QUERY)?,
        ])?],
    );
    // The ioctl command is an unsigned int in the kernel: high bits of the register are
    // ignored there, so they must be ignored here.
    rules.insert(
        libc::SYS_ioctl,
        vec![
            rule(vec![cond(1, Len::Dword, Op::Eq, TIOCSTI)?])?,
            rule(vec![cond(1, Len::Dword, Op::Eq, TIOCLINUX)?])?,
        ],
    );
    compile(rules, libc::EPERM, arch::TARGET)
}

const SOCK_TYPE_MASK: u64 = 0xf;

/// The EACCES program for the socket families `policy` denies; `None` when it denies
/// none.
fn sockets(policy: &Policy) -> Result<Option<BpfProgram>, RunnerError> {
    let unix = libc::AF_UNIX as u64;
    let mut socket: Vec<SeccompRule> = Vec::new();
    let mut socketpair: Vec<SeccompRule> = Vec::new();
    if !policy.allow_unix_sockets {
        socket.push(rule(vec![cond(0, Len::Dword, Op::Eq, unix)?])?);
    }
    if policy.network == Network::Deny {
        // socketpair only ever connects a process to itself: AF_UNIX stays allowed.
        socketpair.push(rule(vec![cond(0, Len::Dword, Op::Ne, unix)?])?);
        if policy.allow_tcp_connect.is_empty() {
            socket.push(rule(vec![cond(0, Len::Dword, Op::Ne, unix)?])?);
        } else {
            // TCP stays creatable so that Landlock can allow the named ports (and deny
            // every other connect and bind); every other family, type and protocol
            // (UDP, raw, MPTCP, ...) is refused here.
            let (inet, inet6) = (libc::AF_INET as u64, libc::AF_INET6 as u64);
            socket.push(rule(vec![
                cond(0, Len::Dword, Op::Ne, unix)?,
                cond(0, Len::Dword, Op::Ne, inet)?,
                cond(0, Len::Dword, Op::Ne, inet6)?,
            ])?);
            for family in [inet, inet6] {
                for ty in (0..=SOCK_TYPE_MASK).filter(|&t| t != libc::SOCK_STREAM as u64) {
                    socket.push(rule(vec![
                        cond(0, Len::Dword, Op::Eq, family)?,
                        cond(1, Len::Dword, Op::MaskedEq(SOCK_TYPE_MASK), ty)?,
                    ])?);
                }
                socket.push(rule(vec![
                    cond(0, Len::Dword, Op::Eq, family)?,
                    cond(2, Len::Dword, Op::Ne, 0)?,
                    cond(2, Len::Dword, Op::Ne, libc::IPPROTO_TCP as u64)?,
                ])?);
            }
        }
    }
    let mut rules = BTreeMap::new();
    if !socket.is_empty() {
        rules.insert(libc::SYS_socket, socket);
    }
    if !socketpair.is_empty() {
        rules.insert(libc::SYS_socketpair, socketpair);
    }
    if rules.is_empty() {
        return Ok(None);
    }
    compile(rules, libc::EACCES, arch::TARGET).map(Some)
}

/// Every program `policy` needs, built before anything is applied so that a filter that
/// cannot be built fails the run before it changes the process.
pub fn programs(policy: &Policy) -> Result<Vec<BpfProgram>, RunnerError> {
    let mut programs = vec![guard(), privileged()?];
    programs.extend(sockets(policy)?);
    Ok(programs)
}

/// Installs `programs` on the calling (single) thread. no_new_privs must be set.
pub fn install(programs: &[BpfProgram]) -> Result<(), RunnerError> {
    for program in programs {
        seccompiler::apply_filter(program).map_err(seccomp_error)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The programs run through a small classic-BPF interpreter, on `seccomp_data` built
    //! by hand: what the kernel would answer for each system call, without installing.
    use super::*;
    use std::path::PathBuf;

    struct Call {
        nr: u32,
        arch: u32,
        args: [u64; 6],
    }

    fn call(nr: i64, args: &[u64]) -> Call {
        let mut a = [0u64; 6];
        a[..args.len()].copy_from_slice(args);
        Call {
            nr: nr as u32,
            arch: arch::AUDIT_ARCH,
            args: a,
        }
    }

    fn load(c: &Call, offset: u32) -> u32 {
        match offset {
            0 => c.nr,
            4 => c.arch,
            8 | 12 => 0,
            o if (16..64).contains(&o) && o % 4 == 0 => {
                let arg = c.args[((o - 16) / 8) as usize];
                if (o - 16) % 8 == 0 {
                    arg as u32
                } else {
                    (arg >> 32) as u32
                }
            }
            o => panic!("load at offset {o}"),
        }
    }

    /// Runs one program (the subset of classic BPF that seccomp filters here use).
    fn run(program: &[sock_filter], c: &Call) -> u32 {
        let (mut a, mut pc) = (0u32, 0usize);
        loop {
            let i = &program[pc];
            pc += 1;
            match i.code {
                0x20 => a = load(c, i.k),   // ld [k]
                0x54 => a &= i.k,           // and #k
                0x05 => pc += i.k as usize, // ja
                0x06 => return i.k,         // ret #k
                code if code & 0x07 == 0x05 => {
                    let taken = match code & 0xf0 {
                        0x10 => a == i.k,
                        0x20 => a > i.k,
                        0x30 => a >= i.k,
                        0x40 => a & i.k != 0,
                        other => panic!("jump op {other:#x}"),
                    };
                    pc += if taken { i.jt } else { i.jf } as usize;
                }
                code => panic!("opcode {code:#x}"),
            }
        }
    }

    /// What the kernel answers with all programs installed: the most severe action.
    fn verdict(programs: &[BpfProgram], c: &Call) -> u32 {
        programs
            .iter()
            .map(|p| run(p, c))
            .min_by_key(|r| (r & 0xffff_0000) as i32)
            .unwrap()
    }

    const EPERM: u32 = RET_ERRNO | libc::EPERM as u32;
    const EACCES: u32 = RET_ERRNO | libc::EACCES as u32;
    const ENOSYS: u32 = RET_ERRNO | libc::ENOSYS as u32;

    fn policy(network: Network, ports: &[u16], unix: bool) -> Policy {
        Policy {
            mode: stockade_policy::Mode::WorkspaceWrite,
            workspace: PathBuf::from("/w"),
            writable_roots: Vec::new(),
            tmpdir: None,
            network,
            allow_tcp_connect: ports.to_vec(),
            allow_unix_sockets: unix,
            keep_fds: Vec::new(),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn x32_numbers_get_enosys_and_foreign_architectures_are_killed() {
        let p = programs(&policy(Network::Allow, &[], true)).unwrap();
        // x32 getpid, and x32 ptrace, which an exact-number filter would let through.
        for nr in [libc::SYS_getpid, libc::SYS_ptrace, 0x3fff_ffff] {
            let c = call(nr | 0x4000_0000, &[]);
            assert_eq!(verdict(&p, &c), ENOSYS, "nr {nr:#x}");
            assert_eq!(run(&guard(), &c), ENOSYS);
        }
        // ia32 (`int 0x80`): AUDIT_ARCH_I386.
        let mut c = call(20, &[]);
        c.arch = 0x4000_0003;
        assert_eq!(verdict(&p, &c), RET_KILL_PROCESS);
        assert_eq!(run(&guard(), &c), RET_KILL_PROCESS);
        // Native calls pass the guard.
        assert_eq!(run(&guard(), &call(libc::SYS_getpid, &[])), RET_ALLOW);
    }

    #[test]
    fn escape_hatches_get_eperm_and_ordinary_calls_pass() {
        let p = programs(&policy(Network::Allow, &[], true)).unwrap();
        for &nr in DENIED {
            assert_eq!(verdict(&p, &call(nr, &[])), EPERM, "nr {nr}");
        }
        for nr in [libc::SYS_read, libc::SYS_openat, libc::SYS_execve] {
            assert_eq!(verdict(&p, &call(nr, &[])), RET_ALLOW);
        }
        assert_eq!(verdict(&p, &call(libc::SYS_clone3, &[])), ENOSYS);
        let user = libc::CLONE_NEWUSER as u64 | libc::SIGCHLD as u64;
        assert_eq!(verdict(&p, &call(libc::SYS_clone, &[user])), EPERM);
        let thread = (libc::CLONE_VM | libc::CLONE_THREAD | libc::CLONE_SIGHAND) as u64;
        assert_eq!(verdict(&p, &call(libc::SYS_clone, &[thread])), RET_ALLOW);
        let pers = libc::SYS_personality;
        assert_eq!(verdict(&p, &call(pers, &[0])), RET_ALLOW);
        assert_eq!(verdict(&p, &call(pers, &[0xffff_ffff])), RET_ALLOW);
        assert_eq!(verdict(&p, &call(pers, &[0x0004_0000])), EPERM);
        // High bits of the ioctl command are dropped by the kernel, so here too.
        for cmd in [TIOCSTI, TIOCLINUX, TIOCSTI | 0x1_0000_0000] {
            assert_eq!(verdict(&p, &call(libc::SYS_ioctl, &[0, cmd])), EPERM);
        }
        assert_eq!(
            verdict(&p, &call(libc::SYS_ioctl, &[0, libc::TIOCGWINSZ])),
            RET_ALLOW
        );
    }

    fn socket(p: &[BpfProgram], family: i32, ty: i32, proto: i32) -> u32 {
        verdict(
            p,
            &call(libc::SYS_socket, &[family as u64, ty as u64, proto as u64]),
        )
    }

    #[test]
    fn socket_families_follow_the_policy() {
        use libc::{AF_INET, AF_INET6, AF_NETLINK, AF_UNIX, SOCK_DGRAM, SOCK_STREAM};
        let mptcp = 262;
        let stream = SOCK_STREAM | libc::SOCK_CLOEXEC;

        let p = programs(&policy(Network::Deny, &[], false)).unwrap();
        for (f, t) in [(AF_INET, stream), (AF_INET6, SOCK_DGRAM), (AF_UNIX, stream)] {
            assert_eq!(socket(&p, f, t, 0), EACCES);
        }
        let pair = |p: &[BpfProgram], f: i32| {
            verdict(
                p,
                &call(libc::SYS_socketpair, &[f as u64, SOCK_STREAM as u64]),
            )
        };
        assert_eq!(pair(&p, AF_UNIX), RET_ALLOW);
        assert_eq!(pair(&p, AF_INET), EACCES);

        let p = programs(&policy(Network::Deny, &[80], true)).unwrap();
        assert_eq!(socket(&p, AF_INET, stream, 0), RET_ALLOW);
        assert_eq!(
            socket(&p, AF_INET6, SOCK_STREAM, libc::IPPROTO_TCP),
            RET_ALLOW
        );
        assert_eq!(socket(&p, AF_UNIX, SOCK_STREAM, 0), RET_ALLOW);
        assert_eq!(socket(&p, AF_INET, SOCK_DGRAM, 0), EACCES);
        assert_eq!(socket(&p, AF_INET, SOCK_STREAM, mptcp), EACCES);
        assert_eq!(socket(&p, AF_NETLINK, libc::SOCK_RAW, 0), EACCES);

        let p = programs(&policy(Network::Allow, &[], false)).unwrap();
        assert_eq!(socket(&p, AF_INET, SOCK_DGRAM, 0), RET_ALLOW);
        assert_eq!(socket(&p, AF_UNIX, SOCK_STREAM, 0), EACCES);

        let p = programs(&policy(Network::Allow, &[], true)).unwrap();
        assert_eq!(p.len(), 2, "no socket program when nothing is denied");
        assert_eq!(socket(&p, AF_INET, SOCK_STREAM, mptcp), RET_ALLOW);
    }
}
