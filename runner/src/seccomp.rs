//! The seccomp filter: the kernel attack surface and escape hatches Landlock leaves open,
//! closed by system call. Installed last, just before `execve`, after no_new_privs.
//!
//! One filter, [`filter`], answers in this order:
//! 1. the guard ([`guard`]): it kills anything not of the native architecture (an x86_64
//!    process can still enter the ia32 table with `int 0x80`), answers ENOSYS for the
//!    x32 range (`nr | 0x40000000`) that a filter matching exact numbers misses, and
//!    ENOSYS for clone3, whose flags live in memory a filter cannot read (libc then falls
//!    back to clone, whose flags it can);
//! 2. the privileged escape hatches, answered EPERM ("operation not permitted");
//! 3. for `socket` and `socketpair` only, the socket families the policy denies,
//!    answered EACCES ("permission denied", which `socket(2)` documents for a denied
//!    family or type): seccompiler's program for those rules, appended.
//!
//! Both errnos appear in the ConfinedArgv `denialSignatures`.
//!
//! Why one filter, mostly by hand: attaching a filter costs the kernel time in proportion
//! to its length (it converts the program to eBPF and JIT-compiles it, in several
//! passes), and every filter has a fixed cost on top. These were three filters of 9, 294
//! (seccompiler's EPERM rules behind a binary-search prefix) and 31 instructions; now
//! one of 88 (60 when no socket family is denied). The answers are the ones the three
//! separate programs gave under the kernel's rule (the most severe wins), checked call
//! by call in the unit tests (`the_one_filter_answers_as_the_separate_programs_did_for_every_policy`,
//! `the_hand_written_program_answers_as_seccompiler_did`).

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
const BPF_JGE: u16 = 0x30;
const BPF_JSET: u16 = 0x40;
const BPF_K: u16 = 0x00;
const BPF_RET: u16 = 0x06;
#[allow(clippy::identity_op, clippy::eq_op)] // Spelled as in linux/filter.h.
const BPF_LD_W_ABS: u16 = BPF_LD | BPF_W | BPF_ABS;
#[allow(clippy::identity_op)]
const BPF_JMP_JEQ_K: u16 = BPF_JMP | BPF_JEQ | BPF_K;
#[allow(clippy::identity_op)]
const BPF_JMP_JGE_K: u16 = BPF_JMP | BPF_JGE | BPF_K;
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

/// The guard, the start of [`filter`]: architecture check, x32 range, clone3. Leaves
/// the system call number in the accumulator.
fn guard(code: &mut Code) {
    code.extend([
        (BPF_LD_W_ABS, OFFSET_ARCH, To::Next, To::Next),
        // Native: skip the kill.
        (BPF_JMP_JEQ_K, arch::AUDIT_ARCH, To::Skip(1), To::Next),
        (BPF_RET_K, RET_KILL_PROCESS, To::Next, To::Next),
    ]);
    code.push((BPF_LD_W_ABS, OFFSET_NR, To::Next, To::Next));
    if let Some(bit) = arch::X32_BIT {
        code.push((BPF_JMP_JSET_K, bit, To::Label(Label::Enosys), To::Next));
    }
    let clone3 = libc::SYS_clone3 as u32;
    code.push((BPF_JMP_JEQ_K, clone3, To::Label(Label::Enosys), To::Next));
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

type Rules = BTreeMap<i64, Vec<SeccompRule>>;

/// seccompiler's program for `rules`: `errno` when a rule matches, allow otherwise
/// (also for every system call `rules` does not name).
fn compile_chain(rules: Rules, errno: i32, target: TargetArch) -> Result<BpfProgram, RunnerError> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        target,
    )
    .map_err(seccomp_error)?;
    BpfProgram::try_from(filter).map_err(seccomp_error)
}

/// Where a jump goes; resolved once the program is laid out.
#[derive(Clone, Copy)]
enum To {
    Next,
    /// Over the next `n` instructions.
    Skip(usize),
    At(usize),
    Label(Label),
}

/// The blocks a decision tree jumps to, laid out after it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Label {
    /// Into seccompiler's socket program, appended last: it has rules for this number.
    Sockets,
    Allow,
    Eperm,
    Enosys,
    /// The argument checks of one system call.
    Clone,
    Personality,
    Ioctl,
}

/// Instructions with symbolic jumps: (code, k, jump if true, jump if false).
type Code = Vec<(u16, u32, To, To)>;

/// Resolves the jumps of `code`, given where each label was laid out. `None` when a
/// label is missing or a jump does not fit classic BPF's 8-bit offsets.
fn assemble(code: &Code, labels: &[(Label, usize)]) -> Option<Vec<sock_filter>> {
    let offset = |from: usize, to: To| -> Option<u8> {
        let target = match to {
            To::Next => from + 1,
            To::Skip(n) => from + 1 + n,
            To::At(i) => i,
            To::Label(l) => labels.iter().find(|&&(m, _)| m == l)?.1,
        };
        u8::try_from(target.checked_sub(from + 1)?).ok()
    };
    code.iter()
        .enumerate()
        .map(|(i, &(code, k, jt, jf))| {
            Some(sock_filter {
                code,
                jt: offset(i, jt)?,
                jf: offset(i, jf)?,
                k,
            })
        })
        .collect()
}

/// Emits a decision tree on the accumulator (the system call number): to the target
/// paired with it when it is one of `keys` (sorted by number, distinct), else to `miss`.
fn search(keys: &[(u32, To)], miss: To, code: &mut Code) {
    if keys.len() <= 4 {
        for (i, &(k, hit)) in keys.iter().enumerate() {
            let next = if i + 1 == keys.len() { miss } else { To::Next };
            code.push((BPF_JMP_JEQ_K, k, hit, next));
        }
        return;
    }
    let mid = keys.len() / 2;
    let split = code.len();
    // A >= keys[mid]: the upper half, whose start is known once the lower is laid out.
    code.push((BPF_JMP_JGE_K, keys[mid].0, To::Next, To::Next));
    search(&keys[..mid], miss, code);
    code[split].2 = To::At(code.len());
    search(&keys[mid..], miss, code);
}

/// Offset of the low 32 bits of argument `i` in `seccomp_data`: the first half, on the
/// little-endian architectures this filter is built for. The kernel reads an `int` or
/// `unsigned int` argument from these bits only, so the high half is ignored here too.
const fn arg_low(i: u32) -> u32 {
    16 + 8 * i
}
#[cfg(not(target_endian = "little"))]
compile_error!("the seccomp filter reads argument halves as laid out on little-endian");

/// Every namespace flag of clone, or-ed: all of them are in the low 32 bits.
const NAMESPACE_MASK: u32 = {
    let mut mask = 0u64;
    let mut i = 0;
    while i < NAMESPACE_FLAGS.len() {
        mask |= NAMESPACE_FLAGS[i];
        i += 1;
    }
    assert!(mask <= u32::MAX as u64);
    mask as u32
};

/// The whole filter: the [`guard`], then a binary search over the system call numbers
/// with rules, then one block per answer. EPERM for [`DENIED`], namespace flags of
/// clone, personality changes, TIOCSTI/TIOCLINUX on any descriptor. The socket and
/// socketpair calls `socket_rules` names (if any) jump into seccompiler's program for
/// those rules, appended at the end and reached by nothing else: it answers them as it
/// would as a filter of its own.
fn filter(socket_rules: Rules) -> Result<BpfProgram, RunnerError> {
    use Label::*;
    let sockets = if socket_rules.is_empty() {
        None
    } else {
        let nrs: Vec<u32> = socket_rules.keys().map(|&nr| nr as u32).collect();
        let program = compile_chain(socket_rules, libc::EACCES, arch::TARGET)?;
        Some((nrs, program))
    };
    let mut keys: Vec<(u32, To)> = DENIED
        .iter()
        .map(|&nr| (nr as u32, To::Label(Eperm)))
        .collect();
    keys.extend([
        (libc::SYS_clone as u32, To::Label(Clone)),
        (libc::SYS_personality as u32, To::Label(Personality)),
        (libc::SYS_ioctl as u32, To::Label(Ioctl)),
    ]);
    if let Some((nrs, _)) = &sockets {
        keys.extend(nrs.iter().map(|&nr| (nr, To::Label(Sockets))));
    }
    keys.sort_unstable_by_key(|&(nr, _)| nr);
    if keys.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(seccomp_error("a system call is listed twice in the filter"));
    }
    let mut code = Code::new();
    guard(&mut code);
    search(&keys, To::Label(Allow), &mut code);
    let mut labels = Vec::new();
    let mut block = |label: Label, code: &mut Code, insns: &[(u16, u32, To, To)]| {
        labels.push((label, code.len()));
        code.extend_from_slice(insns);
    };
    let ret = |k: u32| (BPF_RET_K, k, To::Next, To::Next);
    let load = |arg: u32| (BPF_LD_W_ABS, arg_low(arg), To::Next, To::Next);
    let (allow, eperm) = (To::Label(Allow), To::Label(Eperm));
    // clone's flags are an unsigned long in the first argument (x86_64 and aarch64);
    // any namespace flag is refused.
    block(
        Clone,
        &mut code,
        &[load(0), (BPF_JMP_JSET_K, NAMESPACE_MASK, eperm, allow)],
    );
    // personality takes an unsigned int: 0 and the query leave the persona as it is.
    block(
        Personality,
        &mut code,
        &[
            load(0),
            (BPF_JMP_JEQ_K, 0, allow, To::Next),
            (BPF_JMP_JEQ_K, PERSONALITY_QUERY as u32, allow, eperm),
        ],
    );
    // The ioctl command is an unsigned int in the kernel.
    block(
        Ioctl,
        &mut code,
        &[
            load(1),
            (BPF_JMP_JEQ_K, TIOCSTI as u32, eperm, To::Next),
            (BPF_JMP_JEQ_K, TIOCLINUX as u32, eperm, allow),
        ],
    );
    // Last: classic BPF only jumps forwards.
    block(Allow, &mut code, &[ret(RET_ALLOW)]);
    block(Eperm, &mut code, &[ret(RET_ERRNO | libc::EPERM as u32)]);
    block(Enosys, &mut code, &[ret(RET_ERRNO | libc::ENOSYS as u32)]);
    labels.push((Sockets, code.len()));
    let mut program =
        assemble(&code, &labels).ok_or_else(|| seccomp_error("the filter's jumps do not fit"))?;
    if let Some((_, sockets)) = sockets {
        program.extend(sockets);
    }
    Ok(program)
}

/// seccompiler's rules for what [`filter`] refuses with EPERM: the reference its answers are
/// checked against.
#[cfg(test)]
fn privileged_rules() -> Result<Rules, RunnerError> {
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
    Ok(rules)
}

const SOCK_TYPE_MASK: u64 = 0xf;

/// The socket families `policy` denies (EACCES), as seccompiler rules; empty when it
/// denies none.
fn socket_rules(policy: &Policy) -> Result<Rules, RunnerError> {
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
    Ok(rules)
}

/// The one filter `policy` needs, built before anything is applied so that a filter
/// that cannot be built fails the run before it changes the process.
pub fn program(policy: &Policy) -> Result<BpfProgram, RunnerError> {
    filter(socket_rules(policy)?)
}

/// Installs `program` on the calling (single) thread. no_new_privs must be set.
pub fn install(program: &BpfProgram) -> Result<(), RunnerError> {
    seccompiler::apply_filter(program).map_err(seccomp_error)
}

#[cfg(test)]
mod tests {
    //! The programs run through a small classic-BPF interpreter, on `seccomp_data` built
    //! by hand: what the kernel would answer for each system call, without installing.
    use super::*;
    use std::path::PathBuf;

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

    /// The guard as it was a filter of its own, before [`filter`] took it in: the
    /// reference for its answers.
    fn reference_guard() -> BpfProgram {
        let mut p = vec![
            stmt(BPF_LD_W_ABS, OFFSET_ARCH),
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

    /// What [`program`] installs for `policy`, as a list [`verdict`] takes.
    fn programs(policy: &Policy) -> Result<Vec<BpfProgram>, RunnerError> {
        Ok(vec![program(policy)?])
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
            protected: Vec::new(),
            protect_explicit: false,
            default_protect: false,
            tmp: Default::default(),
            pids: stockade_policy::stage::PidMode::Share,
            stage: false,
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
            assert_eq!(run(&privileged(), &c), ENOSYS);
        }
        // ia32 (`int 0x80`): AUDIT_ARCH_I386.
        let mut c = call(20, &[]);
        c.arch = 0x4000_0003;
        assert_eq!(verdict(&p, &c), RET_KILL_PROCESS);
        assert_eq!(run(&privileged(), &c), RET_KILL_PROCESS);
        // Native calls pass the guard.
        let getpid = call(libc::SYS_getpid, &[]);
        assert_eq!(run(&privileged(), &getpid), RET_ALLOW);
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

    /// The filter of a policy that denies no socket family.
    fn privileged() -> BpfProgram {
        filter(Rules::new()).unwrap()
    }

    /// What the programs as they were answer: the separate guard, seccompiler's
    /// programs for the EPERM and the socket rules, combined by the kernel's severity
    /// rule.
    fn reference(socket_rules: Rules) -> Vec<BpfProgram> {
        let mut reference = vec![
            reference_guard(),
            compile_chain(privileged_rules().unwrap(), libc::EPERM, arch::TARGET).unwrap(),
        ];
        if !socket_rules.is_empty() {
            reference.push(compile_chain(socket_rules, libc::EACCES, arch::TARGET).unwrap());
        }
        reference
    }

    #[test]
    fn the_one_filter_answers_as_the_separate_programs_did_for_every_policy() {
        // Arguments that hit and miss every rule: flags, commands, families.
        let args: Vec<[u64; 3]> = vec![
            [0, 0, 0],
            [libc::CLONE_NEWUSER as u64 | libc::SIGCHLD as u64, 0, 0],
            [libc::CLONE_NEWNET as u64, 0, 0],
            [0x0004_0000, 0, 0],
            [0xffff_ffff, 0, 0],
            [0, TIOCSTI, 0],
            [0, TIOCLINUX | 0x1_0000_0000, 0],
            [libc::AF_UNIX as u64, libc::SOCK_STREAM as u64, 0],
            [libc::AF_INET as u64, libc::SOCK_DGRAM as u64, 0],
            [libc::AF_INET6 as u64, libc::SOCK_STREAM as u64, 262],
            [
                libc::AF_INET as u64,
                libc::SOCK_STREAM as u64,
                libc::IPPROTO_TCP as u64,
            ],
            [libc::AF_NETLINK as u64, libc::SOCK_RAW as u64, 0],
        ];
        // Every combination of family, type and protocol for the socket calls.
        let families = [
            0,
            libc::AF_UNIX as u64,
            libc::AF_INET as u64,
            libc::AF_INET6 as u64,
            libc::AF_NETLINK as u64,
            libc::AF_PACKET as u64,
            libc::AF_UNIX as u64 | 0x1_0000_0000,
            libc::AF_INET as u64 | 0xffff_ffff_0000_0000,
        ];
        let types = (0..=SOCK_TYPE_MASK).flat_map(|t| {
            [
                t,
                t | (libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK) as u64,
                t | 0x1_0000_0000,
            ]
        });
        let types: Vec<u64> = types.collect();
        let protocols = [0, libc::IPPROTO_TCP as u64, libc::IPPROTO_UDP as u64, 262];
        let mut checked = 0;
        for (network, ports, unix) in [
            (Network::Deny, &[][..], false),
            (Network::Deny, &[][..], true),
            (Network::Deny, &[80, 443][..], true),
            (Network::Deny, &[80][..], false),
            (Network::Allow, &[][..], false),
            (Network::Allow, &[][..], true),
        ] {
            let rules = socket_rules(&policy(network, ports, unix)).unwrap();
            let reference = reference(rules.clone());
            let program = filter(rules).unwrap();
            assert_eq!(
                programs(&policy(network, ports, unix)).unwrap(),
                vec![program.clone()]
            );
            let mut check = |c: &Call| {
                assert_eq!(
                    run(&program, c),
                    verdict(&reference, c),
                    "{network:?} {ports:?} {unix} nr {:#x} {:x?}",
                    c.nr,
                    c.args
                );
                checked += 1;
            };
            for nr in (0..600).chain([0x3fff_ffff, 0x7fff_ffff, 0xffff_ffff]) {
                for x32 in [0, 0x4000_0000] {
                    for foreign in [false, true] {
                        for a in &args {
                            let mut c = call(0, a);
                            c.nr = nr | x32;
                            if foreign {
                                c.arch = 0x4000_0003;
                            }
                            check(&c);
                        }
                    }
                }
            }
            for nr in [libc::SYS_socket, libc::SYS_socketpair] {
                for &f in &families {
                    for &t in &types {
                        for &p in &protocols {
                            check(&call(nr, &[f, t, p]));
                        }
                    }
                }
            }
        }
        assert!(checked > 100_000);
    }

    #[test]
    fn the_hand_written_program_answers_as_seccompiler_did() {
        let reference = reference(Rules::new());
        let program = privileged();
        assert!(program.len() < 80, "{} instructions", program.len());
        // Every namespace flag alone, all of them, with and without other flags and high
        // bits; personalities; ioctl commands with and without high bits.
        let mut values: Vec<u64> = vec![0, 1, 0xffff_ffff, 0x1_0000_0000, u64::MAX];
        for &flag in &NAMESPACE_FLAGS {
            values.extend([
                flag,
                flag | libc::SIGCHLD as u64,
                flag | 0xff_0000_0000,
                !flag,
            ]);
        }
        values.extend([
            NAMESPACE_MASK as u64,
            (libc::CLONE_VM | libc::CLONE_THREAD | libc::CLONE_SIGHAND) as u64,
            libc::SIGCHLD as u64,
            0x0004_0000,
            0x1_ffff_ffff,
            0xffff_fffe,
            TIOCSTI,
            TIOCLINUX,
            TIOCSTI | 0x1_0000_0000,
            TIOCLINUX | 0xffff_ffff_0000_0000,
            TIOCSTI + 1,
            libc::TIOCGWINSZ,
        ]);
        let mut checked = 0;
        for nr in (0..600).chain([0x3fff_ffff, 0x7fff_ffff, 0xffff_ffff]) {
            for x32 in [0, 0x4000_0000] {
                for foreign in [false, true] {
                    for &a0 in &values {
                        for a1 in [0, a0, TIOCSTI, TIOCLINUX | 0x1_0000_0000] {
                            let mut c = call(0, &[a0, a1, a0]);
                            c.nr = nr | x32;
                            if foreign {
                                c.arch = 0x4000_0003;
                            }
                            let want = verdict(&reference, &c);
                            assert_eq!(run(&program, &c), want, "nr {:#x} {a0:#x} {a1:#x}", c.nr);
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 100_000);
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
        assert_eq!(
            p,
            vec![privileged()],
            "no socket part when nothing is denied"
        );
        assert_eq!(socket(&p, AF_INET, SOCK_STREAM, mptcp), RET_ALLOW);
    }
}
