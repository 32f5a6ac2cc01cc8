//! The filter runs through a small classic-BPF interpreter, on `seccomp_data` built by
//! hand: what the kernel would answer for each system call, without installing. The
//! reference it is compared with is seccompiler's programs for the same rules, as the
//! filter was once built, combined by the kernel's rule (the most severe answer wins).

use super::bpf::{
    JEQ_K as BPF_JMP_JEQ_K, JSET_K as BPF_JMP_JSET_K, LD_W_ABS, OFFSET_ARCH, OFFSET_NR, RET_ALLOW,
    RET_K, RET_KILL_PROCESS,
};
use super::*;
use seccompiler::{
    SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};
use std::collections::BTreeMap;

#[cfg(target_arch = "x86_64")]
const TARGET: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const TARGET: TargetArch = TargetArch::aarch64;
const BPF_LD_W_ABS: u16 = LD_W_ABS;
const TIOCSTI: u64 = super::TIOCSTI as u64;
const TIOCLINUX: u64 = super::TIOCLINUX as u64;
const PERSONALITY_QUERY: u64 = super::PERSONALITY_QUERY as u64;
/// An ioctl nobody refuses (the window size); glibc's and musl's `libc` type it apart.
const TIOCGWINSZ: u64 = 0x5413;
const FIOSETOWN: u64 = super::FIOSETOWN as u64;
const SIOCSPGRP: u64 = super::SIOCSPGRP as u64;

/// The parent and its group the filters of these tests protect (pids that need not
/// exist: the filter compares numbers).
const PARENT: i32 = 4321;
const PARENT_GROUP: i32 = 4300;
const OUTSIDE: Outside = Outside {
    parent: Some(PARENT),
    parent_group: Some(PARENT_GROUP),
    shares_group: false,
    ancestors: Vec::new(),
    supervisor: None,
    scoped: false,
    supervisor_group: false,
};

/// A pid as the register holds it when a caller passes the `int` (sign-extended).
const fn pid(p: i32) -> u64 {
    p as i64 as u64
}

/// seccompiler's rules for the signal calls under `outside`, refused with EPERM.
fn signal_rules(outside: &Outside) -> Result<Rules, RunnerError> {
    let targets = outside.targets();
    let signalled = outside.signal_targets();
    let by_arg = |arg: u8| -> Result<Vec<SeccompRule>, RunnerError> {
        signalled
            .iter()
            .map(|&t| rule(vec![cond(arg, Len::Dword, Op::Eq, t as u64)?]))
            .collect()
    };
    let mut rules = Rules::new();
    for nr in [
        libc::SYS_kill,
        libc::SYS_tkill,
        libc::SYS_tgkill,
        libc::SYS_rt_sigqueueinfo,
        libc::SYS_rt_tgsigqueueinfo,
    ] {
        rules.insert(nr, by_arg(0)?);
    }
    let mut fcntl = vec![
        rule(vec![cond(1, Len::Dword, Op::Eq, 15)?])?,
        rule(vec![cond(1, Len::Dword, Op::Eq, 1024)?])?,
    ];
    for &t in &targets {
        fcntl.push(rule(vec![
            cond(1, Len::Dword, Op::Eq, libc::F_SETOWN as u64)?,
            cond(2, Len::Dword, Op::Eq, t as u64)?,
        ])?);
    }
    rules.insert(libc::SYS_fcntl, fcntl);
    let groups = outside
        .groups()
        .into_iter()
        .map(|g| rule(vec![cond(1, Len::Dword, Op::Eq, u64::from(g))?]))
        .collect::<Result<Vec<_>, _>>()?;
    if !groups.is_empty() {
        rules.insert(libc::SYS_setpgid, groups);
    }
    Ok(rules)
}
const BPF_RET_K: u16 = RET_K;
const RET_ERRNO: u32 = libc::SECCOMP_RET_ERRNO;

/// seccompiler's refusal to build the reference program, as a runner error.
fn seccomp_error(e: impl Into<seccompiler::Error>) -> RunnerError {
    RunnerError::Seccomp(SeccompError::Install(e.into()))
}

fn cond(arg: u8, len: Len, op: Op, value: u64) -> Result<SeccompCondition, RunnerError> {
    SeccompCondition::new(arg, len, op, value).map_err(seccomp_error)
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, RunnerError> {
    SeccompRule::new(conditions).map_err(seccomp_error)
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

/// seccompiler's rules for what [`filter`] refuses with EPERM: the reference its answers are
/// checked against.
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
            rule(vec![cond(1, Len::Dword, Op::Eq, FIOSETOWN)?])?,
            rule(vec![cond(1, Len::Dword, Op::Eq, SIOCSPGRP)?])?,
            rule(vec![cond(1, Len::Dword, Op::Eq, 0xc040_6618)?])?,
            rule(vec![cond(1, Len::Dword, Op::Eq, 0xc040_6619)?])?,
        ],
    );
    Ok(rules)
}

/// The ioctl rules of read-only mode: the terminal ones and inode flags.
fn read_only_ioctl_rules() -> Result<Vec<SeccompRule>, RunnerError> {
    let mut rules = vec![
        rule(vec![cond(1, Len::Dword, Op::Eq, TIOCSTI)?])?,
        rule(vec![cond(1, Len::Dword, Op::Eq, TIOCLINUX)?])?,
        rule(vec![cond(1, Len::Dword, Op::Eq, FIOSETOWN)?])?,
        rule(vec![cond(1, Len::Dword, Op::Eq, SIOCSPGRP)?])?,
        rule(vec![cond(1, Len::Dword, Op::Eq, 0xc040_6618)?])?,
        rule(vec![cond(1, Len::Dword, Op::Eq, 0xc040_6619)?])?,
    ];
    for cmd in SETATTR_IOCTLS {
        rules.push(rule(vec![cond(1, Len::Dword, Op::Eq, cmd as u64)?])?);
    }
    Ok(rules)
}

const SOCK_TYPE_MASK: u64 = 0xf;

/// The socket families `policy` denies (EACCES), as seccompiler rules; empty when it
/// denies none.
fn socket_rules(policy: &Policy) -> Result<Rules, RunnerError> {
    let unix = libc::AF_UNIX as u64;
    let mut socket: Vec<SeccompRule> = Vec::new();
    let mut socketpair: Vec<SeccompRule> = Vec::new();
    if !policy.allow_unix_sockets() {
        socket.push(rule(vec![cond(0, Len::Dword, Op::Eq, unix)?])?);
        // Unix pairs: stream and seqpacket only, no datagram socket that can address
        // a pathname socket outside.
        let kept = [libc::SOCK_STREAM as u64, libc::SOCK_SEQPACKET as u64];
        for ty in (0..=SOCK_TYPE_MASK).filter(|t| !kept.contains(t)) {
            socketpair.push(rule(vec![
                cond(0, Len::Dword, Op::Eq, unix)?,
                cond(1, Len::Dword, Op::MaskedEq(SOCK_TYPE_MASK), ty)?,
            ])?);
        }
    }
    if policy.network() == Network::Deny {
        socketpair.push(rule(vec![cond(0, Len::Dword, Op::Ne, unix)?])?);
        if !policy.tcp_sockets() {
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
    Ok(vec![program(policy, &OUTSIDE, Own::default())?])
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
    Policy::for_tests(stockade_policy::Mode::WorkspaceWrite, "/w")
        .with_network(network)
        .with_allow_tcp_connect(ports.to_vec())
        .with_allow_unix_sockets(unix)
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
        verdict(&p, &call(libc::SYS_ioctl, &[0, TIOCGWINSZ])),
        RET_ALLOW
    );
}

/// The filter of a policy that denies no socket family.
fn privileged() -> BpfProgram {
    program(&policy(Network::Allow, &[], true), &OUTSIDE, Own::default()).unwrap()
}

/// seccompiler's rules for the sealing rules under `policy` (metadata, other processes,
/// IPC, TCP Fast Open and listen), refused with EPERM.
fn sealing_rules(policy: &Policy) -> Result<Rules, RunnerError> {
    let mut rules = Rules::new();
    let always = |rules: &mut Rules, list: &[i64]| {
        for &nr in list {
            rules.insert(nr, Vec::new());
        }
    };
    always(&mut rules, OTHER_PROCESSES);
    always(&mut rules, SYSTEM_V);
    always(&mut rules, MESSAGE_QUEUES);
    let setid = |arg: u32| -> Result<Vec<SeccompRule>, RunnerError> {
        [libc::S_ISUID as u64, libc::S_ISGID as u64]
            .into_iter()
            .map(|bit| rule(vec![cond(arg as u8, Len::Dword, Op::MaskedEq(bit), bit)?]))
            .collect()
    };
    if policy.mode() == Mode::ReadOnly {
        for &(nr, _) in MODE_SETTERS {
            rules.insert(nr, Vec::new());
        }
        always(&mut rules, OTHER_METADATA);
        rules.insert(libc::SYS_ioctl, read_only_ioctl_rules()?);
    } else {
        for &(nr, arg) in MODE_SETTERS {
            rules.insert(nr, setid(arg)?);
        }
    }
    for &(nr, arg) in MODE_CREATORS {
        rules.insert(nr, setid(arg)?);
    }
    for &(nr, flags) in OPENERS {
        let mut on_create = Vec::new();
        for flag in [libc::O_CREAT as u64, 0o2000_0000] {
            for bit in [libc::S_ISUID as u64, libc::S_ISGID as u64] {
                on_create.push(rule(vec![
                    cond(flags as u8, Len::Dword, Op::MaskedEq(flag), flag)?,
                    cond(flags as u8 + 1, Len::Dword, Op::MaskedEq(bit), bit)?,
                ])?);
            }
        }
        rules.insert(nr, on_create);
    }
    for &nr in SELF_PID_ONLY {
        rules.insert(nr, vec![rule(vec![cond(0, Len::Dword, Op::Ne, 0)?])?]);
    }
    for (nr, which) in [
        (libc::SYS_setpriority, libc::PRIO_PROCESS as u64),
        (libc::SYS_ioprio_set, 1),
    ] {
        let which = rule(vec![cond(0, Len::Dword, Op::Ne, which)?])?;
        let who = rule(vec![cond(1, Len::Dword, Op::Ne, 0)?])?;
        rules.insert(nr, vec![which, who]);
    }
    if policy.network() == Network::Deny {
        let fastopen = libc::MSG_FASTOPEN as u64;
        let fast = |arg: u8| -> Result<Vec<SeccompRule>, RunnerError> {
            Ok(vec![rule(vec![cond(
                arg,
                Len::Dword,
                Op::MaskedEq(fastopen),
                fastopen,
            )?])?])
        };
        rules.insert(libc::SYS_sendto, fast(3)?);
        rules.insert(libc::SYS_sendmsg, fast(2)?);
        rules.insert(libc::SYS_sendmmsg, fast(3)?);
        let tcp = libc::IPPROTO_TCP as u64;
        let opt = |name: i32| -> Result<SeccompRule, RunnerError> {
            rule(vec![
                cond(1, Len::Dword, Op::Eq, tcp)?,
                cond(2, Len::Dword, Op::Eq, name as u64)?,
            ])
        };
        rules.insert(
            libc::SYS_setsockopt,
            vec![opt(libc::TCP_FASTOPEN)?, opt(libc::TCP_FASTOPEN_CONNECT)?],
        );
        if policy.tcp_sockets() {
            rules.insert(libc::SYS_listen, Vec::new());
        }
    }
    Ok(rules)
}

/// What the programs as they were answer: the separate guard, seccompiler's programs for
/// the EPERM, ENOSYS and socket rules, combined by the kernel's severity rule.
fn reference(policy: &Policy) -> Vec<BpfProgram> {
    let mut eperm = privileged_rules().unwrap();
    eperm.extend(sealing_rules(policy).unwrap());
    eperm.extend(signal_rules(&OUTSIDE).unwrap());
    let enosys: Rules = [
        (libc::SYS_openat2, Vec::new()),
        (libc::SYS_pidfd_send_signal, Vec::new()),
    ]
    .into_iter()
    .collect();
    let xattrs: Rules = XATTR_WRITES.iter().map(|&nr| (nr, Vec::new())).collect();
    let mut reference = vec![
        reference_guard(),
        compile_chain(eperm, libc::EPERM, TARGET).unwrap(),
        compile_chain(enosys, libc::ENOSYS, TARGET).unwrap(),
        compile_chain(xattrs, libc::EOPNOTSUPP, TARGET).unwrap(),
    ];
    let socket_rules = socket_rules(policy).unwrap();
    if !socket_rules.is_empty() {
        reference.push(compile_chain(socket_rules, libc::EACCES, TARGET).unwrap());
    }
    reference
}

#[test]
fn the_one_filter_answers_as_the_separate_programs_did_for_every_policy() {
    // Arguments that hit and miss every rule: flags, commands, families.
    let fastopen = libc::MSG_FASTOPEN as u64;
    let (tcp, setid) = (
        libc::IPPROTO_TCP as u64,
        (libc::S_ISUID | libc::S_ISGID) as u64,
    );
    let args: Vec<[u64; 4]> = vec![
        [0, 0, 0, 0],
        // Modes with and without the set-id bits, in each position.
        [0, 0o4755, 0, 0],
        [0, 0, 0o2755, 0],
        [0, 0, 0, 0o6000],
        [0o7777, 0o755, 0o1777, 0o644],
        [0, 0o100, 0o4755, 0],
        [0, 0o2000_0000, 0o2755, 0],
        [0, 0, 0o100, 0o6000],
        [0, 0, 0o2020_0002, 0o4000],
        [0, 0, 0o2, 0o6000],
        [0, 0x1_0000_0000 | setid, 0xffff_0000_0000_0000, !setid],
        // Pids, `which` and `who`.
        [5, 0, 0, 0],
        [0, 5, 0, 0],
        [1, 0, 0, 0],
        [2, 0, 0, 0],
        [0x1_0000_0000, 0, 0, 0],
        [u64::MAX, u64::MAX, 0, 0],
        // Signal targets: the parent and its group, as processes and groups, -1, others;
        // `fcntl` owners and `setpgid` groups in the next arguments.
        [pid(PARENT), 9, 0, 0],
        [pid(-PARENT), 9, 0, 0],
        [pid(PARENT_GROUP), 19, 0, 0],
        [pid(-PARENT_GROUP) & 0xffff_ffff, 19, 0, 0],
        [pid(-1), 9, 0, 0],
        [pid(-1234), 9, 0, 0],
        [pid(PARENT) | 0x7_0000_0000, 9, 0, 0],
        [3, libc::F_SETOWN as u64, pid(PARENT), 0],
        [3, libc::F_SETOWN as u64, pid(-PARENT_GROUP), 0],
        [3, libc::F_SETOWN as u64, 1234, 0],
        [3, 15, 0, 0],
        [3, libc::F_GETOWN as u64, pid(PARENT), 0],
        [0, pid(PARENT_GROUP), 0, 0],
        [0, pid(PARENT_GROUP) | 0x1_0000_0000, 0, 0],
        [3, FIOSETOWN, 0, 0],
        [3, SIOCSPGRP | 0x1_0000_0000, 0, 0],
        // MSG_FASTOPEN and the TCP options.
        [3, 0, fastopen, 0],
        [3, 0, 0, fastopen | libc::MSG_NOSIGNAL as u64],
        [3, tcp, libc::TCP_FASTOPEN as u64, 0],
        [3, tcp, libc::TCP_FASTOPEN_CONNECT as u64, 0],
        [3, tcp | 0x1_0000_0000, libc::TCP_FASTOPEN_CONNECT as u64, 0],
        [3, libc::SOL_SOCKET as u64, libc::TCP_FASTOPEN as u64, 0],
        [3, tcp, libc::TCP_NODELAY as u64, 0],
    ];
    let args3: Vec<[u64; 3]> = vec![
        [libc::CLONE_NEWUSER as u64 | libc::SIGCHLD as u64, 0, 0],
        [libc::CLONE_NEWNET as u64, 0, 0],
        [0x0004_0000, 0, 0],
        [0xffff_ffff, 0, 0],
        [0, TIOCSTI, 0],
        [0, TIOCLINUX | 0x1_0000_0000, 0],
        [3, 0x4008_6602, 0],
        [3, 0x4004_6602 | 0x1_0000_0000, 0],
        [3, 0x401c_5820, 0],
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
    let args: Vec<[u64; 4]> = args
        .into_iter()
        .chain(args3.into_iter().map(|a| [a[0], a[1], a[2], 0]))
        .collect();
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
    for (mode, network, ports, unix) in
        [Mode::WorkspaceWrite, Mode::ReadOnly]
            .into_iter()
            .flat_map(|mode| {
                [
                    (mode, Network::Deny, &[][..], false),
                    (mode, Network::Deny, &[][..], true),
                    (mode, Network::Deny, &[80, 443][..], true),
                    (mode, Network::Deny, &[80][..], false),
                    (mode, Network::Allow, &[][..], false),
                    (mode, Network::Allow, &[][..], true),
                ]
            })
    {
        let policy = policy(network, ports, unix).with_mode(mode);
        let reference = reference(&policy);
        let program = program(&policy, &OUTSIDE, Own::default()).unwrap();
        let mut check = |c: &Call| {
            assert_eq!(
                run(&program, c),
                verdict(&reference, c),
                "{mode:?} {network:?} {ports:?} {unix} nr {:#x} {:x?}",
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
    let reference = reference(&policy(Network::Allow, &[], true));
    let program = privileged();
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
        TIOCGWINSZ,
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
    let dgram_pair = |p: &[BpfProgram]| {
        verdict(
            p,
            &call(libc::SYS_socketpair, &[AF_UNIX as u64, SOCK_DGRAM as u64]),
        )
    };
    assert_eq!(dgram_pair(&p), EACCES);
    assert_eq!(
        dgram_pair(&programs(&policy(Network::Allow, &[], false)).unwrap()),
        EACCES
    );
    assert_eq!(
        dgram_pair(&programs(&policy(Network::Allow, &[], true)).unwrap()),
        RET_ALLOW
    );

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

    // The network by name: TCP creatable to reach the proxy, exactly as with an allowed
    // port (which port is Landlock's business, or the network namespace's).
    let rules = stockade_policy::domains::DomainRules {
        allow: vec![
            stockade_policy::domains::HostRule::parse(
                "example.org",
                stockade_policy::domains::RuleKind::Allow,
            )
            .unwrap(),
        ],
        ..Default::default()
    };
    let by_name = policy(Network::Deny, &[], true).with_domains(rules, 40000);
    assert_eq!(programs(&by_name).unwrap(), p);
    assert_eq!(socket(&p, AF_INET, SOCK_DGRAM, 0), EACCES);

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

#[test]
fn every_policy_s_filter_stays_short() {
    // Attaching costs the kernel time in proportion to the length: allowed TCP ports
    // are a masked compare, not a rule per socket type (seccompiler's 350 instructions),
    // and runs of consecutive numbers (System V IPC, the mount family) two compares.
    // The signal rules (one compare per protected pid, in three blocks: the signal
    // calls' and F_SETOWN's lists differ where Landlock scopes signals) cost about 35.
    let outside = Outside {
        shares_group: true,
        ..OUTSIDE
    };
    for (network, ports, unix) in [
        (Network::Deny, &[][..], false),
        (Network::Deny, &[443][..], false),
        (Network::Deny, &[80, 443][..], true),
        (Network::Allow, &[][..], false),
        (Network::Allow, &[][..], true),
    ] {
        let len = program(&policy(network, ports, unix), &outside, Own::default())
            .unwrap()
            .len();
        eprintln!("{network:?} {ports:?} {unix}: {len} instructions");
        assert!(
            len < 190,
            "{network:?} {ports:?} {unix}: {len} instructions"
        );
    }
}

/// The answers the filter must give, written by hand from the system call table
/// (x86_64 numbers as literals, not from libc or from the lists the filter is built
/// from), for the default policy and its variants. Removing a rule from the filter, or
/// a call from one of its lists, fails this test.
#[cfg(target_arch = "x86_64")]
mod table {
    use super::*;

    /// The answer under each policy: default (workspace-write, network denied), read-only,
    /// `--allow-tcp-connect 443`, `--allow-unix-sockets`, `--network allow`.
    type Answers = [u32; 5];
    const A: u32 = RET_ALLOW;
    const P: u32 = EPERM;
    const C: u32 = EACCES;
    const N: u32 = ENOSYS;
    const K: u32 = RET_KILL_PROCESS;
    const O: u32 = RET_ERRNO | libc::EOPNOTSUPP as u32;
    const ALL_O: Answers = [O; 5];
    const ALL_A: Answers = [A; 5];
    const ALL_P: Answers = [P; 5];
    /// Refused only when the network is denied.
    const DENY_P: Answers = [P, P, P, P, A];
    /// Refused only in read-only mode.
    const RO_P: Answers = [A, P, A, A, A];

    fn policies() -> [Policy; 5] {
        [
            policy(Network::Deny, &[], false),
            policy(Network::Deny, &[], false).with_mode(Mode::ReadOnly),
            policy(Network::Deny, &[443], false),
            policy(Network::Deny, &[], true),
            policy(Network::Allow, &[], false),
        ]
    }

    const FASTOPEN: u64 = 0x2000_0000;
    const TIOCSTI: u64 = 0x5412;

    /// (name, number, arguments, answers).
    #[rustfmt::skip]
    const TABLE: &[(&str, u32, [u64; 4], Answers)] = &[
        // Ordinary calls pass.
        ("read", 0, [0, 0, 0, 0], ALL_A),
        ("write", 1, [1, 0, 0, 0], ALL_A),
        ("getpid", 39, [0; 4], ALL_A),
        ("execve", 59, [0; 4], ALL_A),
        ("setrlimit", 160, [7, 0, 0, 0], ALL_A),
        ("getxattr", 191, [0; 4], ALL_A),
        ("listxattr", 194, [0; 4], ALL_A),
        ("getpriority", 140, [0, 1234, 0, 0], ALL_A),
        ("sched_getaffinity", 204, [1234, 0, 0, 0], ALL_A),
        ("ioprio_get", 252, [1, 1234, 0, 0], ALL_A),
        ("set_robust_list", 273, [0; 4], ALL_A),
        // The guard: clone3 and openat2 carry their flags in memory.
        ("clone3", 435, [0; 4], [N; 5]),
        ("openat2", 437, [0; 4], [N; 5]),
        // Escape hatches.
        ("ptrace", 101, [16, 1, 0, 0], ALL_P),
        ("process_vm_readv", 310, [1, 0, 0, 0], ALL_P),
        ("process_vm_writev", 311, [1, 0, 0, 0], ALL_P),
        ("pidfd_getfd", 438, [3, 3, 0, 0], ALL_P),
        ("bpf", 321, [0; 4], ALL_P),
        ("keyctl", 250, [0; 4], ALL_P),
        ("add_key", 248, [0; 4], ALL_P),
        ("request_key", 249, [0; 4], ALL_P),
        ("perf_event_open", 298, [0; 4], ALL_P),
        ("userfaultfd", 323, [0; 4], ALL_P),
        ("io_uring_setup", 425, [0; 4], ALL_P),
        ("io_uring_enter", 426, [0; 4], ALL_P),
        ("io_uring_register", 427, [0; 4], ALL_P),
        ("mount", 165, [0; 4], ALL_P),
        ("umount2", 166, [0; 4], ALL_P),
        ("pivot_root", 155, [0; 4], ALL_P),
        ("open_tree", 428, [0; 4], ALL_P),
        ("move_mount", 429, [0; 4], ALL_P),
        ("fsopen", 430, [0; 4], ALL_P),
        ("fsconfig", 431, [0; 4], ALL_P),
        ("fsmount", 432, [0; 4], ALL_P),
        ("fspick", 433, [0; 4], ALL_P),
        ("mount_setattr", 442, [0; 4], ALL_P),
        ("open_tree_attr", 467, [0; 4], ALL_P),
        ("unshare", 272, [0; 4], ALL_P),
        ("setns", 308, [3, 0, 0, 0], ALL_P),
        ("kexec_load", 246, [0; 4], ALL_P),
        ("kexec_file_load", 320, [0; 4], ALL_P),
        ("init_module", 175, [0; 4], ALL_P),
        ("finit_module", 313, [0; 4], ALL_P),
        ("delete_module", 176, [0; 4], ALL_P),
        ("open_by_handle_at", 304, [0; 4], ALL_P),
        // clone: namespace flags only.
        ("clone newuser", 56, [0x1000_0000 | 17, 0, 0, 0], ALL_P),
        ("clone newns", 56, [0x0002_0000, 0, 0, 0], ALL_P),
        ("clone newnet", 56, [0x4000_0000, 0, 0, 0], ALL_P),
        ("clone fork", 56, [17, 0, 0, 0], ALL_A),
        ("clone thread", 56, [0x003d_0f00, 0, 0, 0], ALL_A),
        ("personality set", 135, [0x0040_0000, 0, 0, 0], ALL_P),
        ("personality none", 135, [0, 0, 0, 0], ALL_A),
        ("personality query", 135, [0xffff_ffff, 0, 0, 0], ALL_A),
        ("ioctl TIOCSTI", 16, [0, TIOCSTI, 0, 0], ALL_P),
        ("ioctl TIOCSTI high bits", 16, [0, TIOCSTI | 1 << 32, 0, 0], ALL_P),
        ("ioctl TIOCLINUX", 16, [0, 0x541c, 0, 0], ALL_P),
        ("ioctl TIOCGWINSZ", 16, [0, 0x5413, 0, 0], ALL_A),
        // Set-id bits, by chmod and on creation.
        ("chmod +x", 90, [0, 0o755, 0, 0], RO_P),
        ("chmod u+s", 90, [0, 0o4755, 0, 0], ALL_P),
        ("fchmod", 91, [3, 0o644, 0, 0], RO_P),
        ("fchmod g+s", 91, [3, 0o2755, 0, 0], ALL_P),
        ("fchmodat", 268, [0, 0, 0o755, 0], RO_P),
        ("fchmodat u+s", 268, [0, 0, 0o4700, 0], ALL_P),
        ("fchmodat2", 452, [0, 0, 0o700, 0], RO_P),
        ("fchmodat2 g+s", 452, [0, 0, 0o2700, 0], ALL_P),
        ("open", 2, [0, 0o101, 0o644, 0], ALL_A),
        ("open u+s", 2, [0, 0o101, 0o4755, 0], ALL_P),
        ("open without O_CREAT, garbage mode", 2, [0, 0, 0o6755, 0], ALL_A),
        ("open O_TMPFILE g+s", 2, [0, 0o20200002, 0o2755, 0], ALL_P),
        ("creat", 85, [0, 0o644, 0, 0], ALL_A),
        ("creat g+s", 85, [0, 0o2755, 0, 0], ALL_P),
        ("openat", 257, [0, 0, 0o101, 0o666], ALL_A),
        ("openat u+s", 257, [0, 0, 0o101, 0o6755], ALL_P),
        ("openat without O_CREAT, garbage mode", 257, [0, 0, 0o2, 0o7777], ALL_A),
        ("openat O_TMPFILE u+s", 257, [0, 0, 0o20200002, 0o4700], ALL_P),
        ("mknod", 133, [0, 0o100644, 0, 0], ALL_A),
        ("mknod u+s", 133, [0, 0o104755, 0, 0], ALL_P),
        ("mknodat", 259, [0, 0, 0o100644, 0], ALL_A),
        ("mknodat g+s", 259, [0, 0, 0o102755, 0], ALL_P),
        // Owners and times: read-only only.
        ("chown", 92, [0; 4], RO_P),
        ("fchown", 93, [0; 4], RO_P),
        ("lchown", 94, [0; 4], RO_P),
        ("fchownat", 260, [0; 4], RO_P),
        ("utime", 132, [0; 4], RO_P),
        ("utimes", 235, [0; 4], RO_P),
        ("futimesat", 261, [0; 4], RO_P),
        ("utimensat", 280, [0; 4], RO_P),
        ("file_setattr", 469, [0; 4], RO_P),
        ("file_getattr", 468, [0; 4], ALL_A),
        ("ioctl FS_IOC_SETFLAGS", 16, [3, 0x4008_6602, 0, 0], RO_P),
        ("ioctl FS_IOC32_SETFLAGS", 16, [3, 0x4004_6602, 0, 0], RO_P),
        ("ioctl FS_IOC_FSSETXATTR", 16, [3, 0x401c_5820, 0, 0], RO_P),
        ("ioctl FS_IOC_GETFLAGS", 16, [3, 0x8008_6601, 0, 0], ALL_A),
        ("ioctl FS_IOC_SETVERSION", 16, [3, 0x4008_7602, 0, 0], RO_P),
        ("ioctl FS_IOC32_SETVERSION", 16, [3, 0x4004_7602, 0, 0], RO_P),
        ("ioctl FS_IOC_GETVERSION", 16, [3, 0x8008_7601, 0, 0], ALL_A),
        ("ioctl BTRFS_IOC_SUBVOL_SETFLAGS", 16, [3, 0x4008_941a, 0, 0], RO_P),
        ("ioctl BTRFS_IOC_SUBVOL_GETFLAGS", 16, [3, 0x8008_9419, 0, 0], ALL_A),
        ("ioctl FS_IOC_REMOVE_ENCRYPTION_KEY", 16, [3, 0xc040_6618, 0, 0], ALL_P),
        ("ioctl FS_IOC_REMOVE_ENCRYPTION_KEY_ALL_USERS", 16, [3, 0xc040_6619, 0, 0], ALL_P),
        ("ioctl FS_IOC_ADD_ENCRYPTION_KEY", 16, [3, 0xc050_6617, 0, 0], ALL_A),
        // Extended attributes and ACLs: never written ("not supported").
        ("setxattr", 188, [0; 4], ALL_O),
        ("lsetxattr", 189, [0; 4], ALL_O),
        ("fsetxattr", 190, [0; 4], ALL_O),
        ("removexattr", 197, [0; 4], ALL_O),
        ("lremovexattr", 198, [0; 4], ALL_O),
        ("fremovexattr", 199, [0; 4], ALL_O),
        ("setxattrat", 463, [0; 4], ALL_O),
        ("removexattrat", 466, [0; 4], ALL_O),
        // Other processes: only the caller itself.
        ("prlimit64 self", 302, [0, 7, 1, 0], ALL_A),
        ("prlimit64 other", 302, [1234, 7, 1, 0], ALL_P),
        ("setpriority self", 141, [0, 0, 5, 0], ALL_A),
        ("setpriority other", 141, [0, 1234, 5, 0], ALL_P),
        ("setpriority pgrp", 141, [1, 0, 5, 0], ALL_P),
        ("setpriority user", 141, [2, 0, 5, 0], ALL_P),
        ("sched_setaffinity self", 203, [0, 8, 1, 0], ALL_A),
        ("sched_setaffinity other", 203, [1234, 8, 1, 0], ALL_P),
        ("sched_setscheduler other", 144, [1234, 0, 1, 0], ALL_P),
        ("sched_setscheduler self", 144, [0, 0, 1, 0], ALL_A),
        ("sched_setparam other", 142, [1234, 1, 0, 0], ALL_P),
        ("sched_setattr other", 314, [1234, 1, 0, 0], ALL_P),
        ("sched_setattr self", 314, [0, 1, 0, 0], ALL_A),
        ("ioprio_set self", 251, [1, 0, 0x6000, 0], ALL_A),
        ("ioprio_set other", 251, [1, 1234, 0x6000, 0], ALL_P),
        ("ioprio_set pgrp", 251, [2, 0, 0x6000, 0], ALL_P),
        ("ioprio_set user", 251, [3, 0, 0x6000, 0], ALL_P),
        ("migrate_pages other", 256, [1234, 0, 0, 0], ALL_P),
        ("move_pages self", 279, [0, 1, 0, 0], ALL_A),
        ("move_pages other", 279, [1234, 1, 0, 0], ALL_P),
        ("get_robust_list other", 274, [1234, 0, 0, 0], ALL_P),
        ("get_robust_list self", 274, [0, 0, 0, 0], ALL_A),
        ("process_madvise", 440, [3, 0, 1, 0], ALL_P),
        ("process_mrelease", 448, [3, 0, 0, 0], ALL_P),
        ("kcmp", 312, [0; 4], ALL_P),
        // Signals: not to -1, the parent (4321) or its group (4300), as a process or a
        // group; the caller's own group (0) only when it is not the parent's.
        ("kill parent", 62, [4321, 19, 0, 0], ALL_P),
        ("kill parent high bits", 62, [0x7_0000_10e1, 19, 0, 0], ALL_P),
        ("kill -parent", 62, [0xffff_ffff_ffff_ef1f, 19, 0, 0], ALL_P),
        ("kill parent group", 62, [4300, 9, 0, 0], ALL_P),
        ("kill -parent group", 62, [0xffff_ffff_ffff_ef34, 9, 0, 0], ALL_P),
        ("kill -parent group zero-extended", 62, [0xffff_ef34, 9, 0, 0], ALL_P),
        ("kill -1", 62, [0xffff_ffff_ffff_ffff, 9, 0, 0], ALL_P),
        ("kill -1 zero-extended", 62, [0xffff_ffff, 9, 0, 0], ALL_P),
        ("kill own group", 62, [0, 15, 0, 0], ALL_A),
        ("kill another pid", 62, [1234, 15, 0, 0], ALL_A),
        ("kill another group", 62, [0xffff_ffff_ffff_fb2e, 15, 0, 0], ALL_A),
        ("kill -2", 62, [0xffff_ffff_ffff_fffe, 15, 0, 0], ALL_A),
        ("tkill parent", 200, [4321, 19, 0, 0], ALL_P),
        ("tkill another", 200, [1234, 19, 0, 0], ALL_A),
        ("tgkill parent", 234, [4321, 4321, 19, 0], ALL_P),
        ("tgkill parent group leader", 234, [4300, 4300, 19, 0], ALL_P),
        ("tgkill another", 234, [1234, 4321, 19, 0], ALL_A),
        ("rt_sigqueueinfo parent", 129, [4321, 19, 0, 0], ALL_P),
        ("rt_sigqueueinfo -1", 129, [0xffff_ffff, 19, 0, 0], ALL_P),
        ("rt_sigqueueinfo another", 129, [1234, 19, 0, 0], ALL_A),
        ("rt_tgsigqueueinfo parent", 297, [4321, 4321, 19, 0], ALL_P),
        ("rt_tgsigqueueinfo another", 297, [1234, 1234, 19, 0], ALL_A),
        ("pidfd_send_signal", 424, [3, 9, 0, 0], [N; 5]),
        ("pidfd_open parent", 434, [4321, 0, 0, 0], ALL_A),
        ("fcntl F_SETOWN parent", 72, [3, 8, 4321, 0], ALL_P),
        ("fcntl F_SETOWN -parent group", 72, [3, 8, 0xffff_ffff_ffff_ef34, 0], ALL_P),
        ("fcntl F_SETOWN -1", 72, [3, 8, 0xffff_ffff, 0], ALL_P),
        ("fcntl F_SETOWN another", 72, [3, 8, 1234, 0], ALL_A),
        ("fcntl F_SETOWN_EX", 72, [3, 15, 0x7ffd_0000, 0], ALL_P),
        ("fcntl F_GETOWN", 72, [3, 9, 4321, 0], ALL_A),
        ("fcntl F_SETLEASE", 72, [3, 1024, 0, 0], ALL_P),
        ("fcntl F_SETLEASE high bits", 72, [3, 0x1_0000_0400, 1, 0], ALL_P),
        ("fcntl F_GETLEASE", 72, [3, 1025, 0, 0], ALL_A),
        ("fcntl F_SETSIG", 72, [3, 10, 9, 0], ALL_A),
        ("fcntl F_SETFL", 72, [3, 4, 4321, 0], ALL_A),
        ("fcntl F_DUPFD 4321", 72, [3, 0, 4321, 0], ALL_A),
        ("setpgid parent group", 109, [0, 4300, 0, 0], ALL_P),
        ("setpgid own", 109, [0, 0, 0, 0], ALL_A),
        ("setpgid another", 109, [5, 5, 0, 0], ALL_A),
        ("ioctl FIOSETOWN", 16, [3, 0x8901, 0, 0], ALL_P),
        ("ioctl SIOCSPGRP", 16, [3, 0x8902, 0, 0], ALL_P),
        ("ioctl SIOCGPGRP", 16, [3, 0x8904, 0, 0], ALL_A),
        // System V IPC and POSIX message queues.
        ("shmget", 29, [0, 4096, 0o600, 0], ALL_P),
        ("shmat", 30, [0; 4], ALL_P),
        ("shmctl", 31, [0; 4], ALL_P),
        ("shmdt", 67, [0; 4], ALL_P),
        ("semget", 64, [0; 4], ALL_P),
        ("semop", 65, [0; 4], ALL_P),
        ("semctl", 66, [0; 4], ALL_P),
        ("semtimedop", 220, [0; 4], ALL_P),
        ("msgget", 68, [0; 4], ALL_P),
        ("msgsnd", 69, [0; 4], ALL_P),
        ("msgrcv", 70, [0; 4], ALL_P),
        ("msgctl", 71, [0; 4], ALL_P),
        ("mq_open", 240, [0; 4], ALL_P),
        ("mq_unlink", 241, [0; 4], ALL_P),
        ("mq_timedsend", 242, [0; 4], ALL_P),
        ("mq_timedreceive", 243, [0; 4], ALL_P),
        ("mq_notify", 244, [0; 4], ALL_P),
        ("mq_getsetattr", 245, [0; 4], ALL_P),
        // Sockets.
        ("socket inet stream", 41, [2, 1, 0, 0], [C, C, A, C, A]),
        ("socket inet stream tcp", 41, [2, 0x80001, 6, 0], [C, C, A, C, A]),
        ("socket inet6 stream mptcp", 41, [10, 1, 262, 0], [C, C, C, C, A]),
        ("socket inet dgram", 41, [2, 2, 0, 0], [C, C, C, C, A]),
        ("socket inet raw", 41, [2, 3, 1, 0], [C, C, C, C, A]),
        ("socket netlink", 41, [16, 3, 0, 0], [C, C, C, C, A]),
        ("socket unix", 41, [1, 1, 0, 0], [C, C, C, A, C]),
        ("socketpair unix", 53, [1, 1, 0, 0], ALL_A),
        ("socketpair unix stream cloexec", 53, [1, 0x80001, 0, 0], ALL_A),
        ("socketpair unix seqpacket", 53, [1, 5, 0, 0], ALL_A),
        ("socketpair unix dgram", 53, [1, 2, 0, 0], [C, C, C, A, C]),
        ("socketpair unix dgram nonblock", 53, [1, 0x802, 0, 0], [C, C, C, A, C]),
        ("socketpair unix raw (a datagram socket)", 53, [1, 3, 0, 0], [C, C, C, A, C]),
        ("socketpair inet", 53, [2, 1, 0, 0], [C, C, C, C, A]),
        // What Landlock's TCP port rules do not see.
        ("sendto fastopen", 44, [3, 0, 1, FASTOPEN], DENY_P),
        ("sendto", 44, [3, 0, 1, 0x4000], ALL_A),
        ("sendmsg fastopen", 46, [3, 0, FASTOPEN, 0], DENY_P),
        ("sendmsg", 46, [3, 0, 0x4000, 0], ALL_A),
        ("sendmmsg fastopen", 307, [3, 0, 1, FASTOPEN], DENY_P),
        ("sendmmsg", 307, [3, 0, 1, 0], ALL_A),
        ("setsockopt TCP_FASTOPEN_CONNECT", 54, [3, 6, 30, 0], DENY_P),
        ("setsockopt TCP_FASTOPEN", 54, [3, 6, 23, 0], DENY_P),
        ("setsockopt TCP_NODELAY", 54, [3, 6, 1, 0], ALL_A),
        ("setsockopt SOL_SOCKET 23", 54, [3, 1, 23, 0], ALL_A),
        ("listen", 50, [3, 1, 0, 0], [A, A, P, A, A]),
        ("connect", 42, [3, 0, 16, 0], ALL_A),
        ("bind", 49, [3, 0, 16, 0], ALL_A),
        // The x32 table: ENOSYS whatever the number.
        ("x32 getpid", 0x4000_0000 | 39, [0; 4], [N; 5]),
        ("x32 ptrace", 0x4000_0000 | 101, [0; 4], [N; 5]),
        ("x32 shmget", 0x4000_0000 | 29, [0; 4], [N; 5]),
    ];

    /// The command's own network namespace (`Policy::own_network` under the stage):
    /// TCP and UDP sockets and `listen` work there, for its own loopback servers, with
    /// unix sockets as the policy says and every other family, type and protocol still
    /// refused. Without the namespace the same policies refuse them (the control).
    #[test]
    fn in_a_network_namespace_of_its_own_tcp_and_udp_are_the_command_s_and_nothing_else() {
        #[rustfmt::skip]
        let table: &[(&str, u32, [u64; 4], u32, u32)] = &[
            // (name, number, arguments, without the namespace, with it)
            ("socket inet stream", 41, [2, 1, 0, 0], C, A),
            ("socket inet stream tcp nonblock", 41, [2, 0x801, 6, 0], C, A),
            ("socket inet6 stream tcp", 41, [10, 1, 6, 0], C, A),
            ("socket inet dgram", 41, [2, 2, 0, 0], C, A),
            ("socket inet6 dgram udp", 41, [10, 2, 17, 0], C, A),
            ("socket inet dgram icmp", 41, [2, 2, 1, 0], C, C),
            ("socket inet stream udp", 41, [2, 1, 17, 0], C, C),
            ("socket inet dgram tcp", 41, [2, 2, 6, 0], C, C),
            ("socket inet6 stream mptcp", 41, [10, 1, 262, 0], C, C),
            ("socket inet raw", 41, [2, 3, 1, 0], C, C),
            ("socket inet seqpacket", 41, [2, 5, 0, 0], C, C),
            ("socket packet", 41, [17, 3, 0, 0], C, C),
            ("socket netlink", 41, [16, 3, 0, 0], C, C),
            ("socket unix", 41, [1, 1, 0, 0], C, C),
            ("socketpair inet", 53, [2, 1, 0, 0], C, C),
            ("sendto fastopen", 44, [3, 0, 1, FASTOPEN], P, P),
            ("connect", 42, [3, 0, 16, 0], A, A),
            ("bind", 49, [3, 0, 16, 0], A, A),
        ];
        let p = policy(Network::Deny, &[], false);
        let (shared, own) = (
            program(&p, &OUTSIDE, Own::default()).unwrap(),
            program(
                &p,
                &OUTSIDE,
                Own {
                    network: true,
                    ..Own::default()
                },
            )
            .unwrap(),
        );
        let mut wrong = Vec::new();
        for &(name, nr, args, without, with) in table {
            let mut c = call(0, &args);
            c.nr = nr;
            for (program, want, label) in [(&shared, without, "without"), (&own, with, "with")] {
                let got = run(program, &c);
                if got != want {
                    wrong.push(format!(
                        "{name} {label} the namespace: {got:#x}, want {want:#x}"
                    ));
                }
            }
        }
        // listen: refused wherever TCP sockets reach the host's network (its unbound
        // bind goes around Landlock's rules), allowed in the namespace of its own.
        let listen = call(50, &[3, 1]);
        let ports = policy(Network::Deny, &[443], false);
        assert_eq!(
            run(&program(&ports, &OUTSIDE, Own::default()).unwrap(), &listen),
            P
        );
        assert_eq!(run(&own, &listen), A);
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    /// The command's own IPC namespace (the stage's): System V IPC is its own there;
    /// without it it stays refused (the control). POSIX message queues stay refused.
    #[test]
    fn in_an_ipc_namespace_of_its_own_system_v_ipc_is_the_command_s() {
        let p = policy(Network::Deny, &[], false);
        let shared = program(&p, &OUTSIDE, Own::default()).unwrap();
        let own = Own {
            ipc: true,
            ..Own::default()
        };
        let own = program(&p, &OUTSIDE, own).unwrap();
        for (name, nr) in [
            ("shmget", 29),
            ("msgget", 68),
            ("semget", 64),
            ("semop", 65),
        ] {
            let c = call(nr, &[0, 0, 0o600]);
            assert_eq!(run(&shared, &c), P, "{name} without the namespace");
            assert_eq!(run(&own, &c), A, "{name} in the command's own");
        }
        // POSIX message queues stay refused: their files are Landlock's to govern, and
        // only the namespace's own mqueue filesystem, once granted, lets them through.
        let queues = Own {
            ipc: true,
            message_queues: true,
            ..Own::default()
        };
        let queues = program(&p, &OUTSIDE, queues).unwrap();
        for (name, nr) in [
            ("mq_open", 240),
            ("mq_unlink", 241),
            ("mq_timedsend", 242),
            ("mq_timedreceive", 243),
            ("mq_notify", 244),
            ("mq_getsetattr", 245),
        ] {
            let c = call(nr, &[0, 0, 0o600]);
            assert_eq!(run(&shared, &c), P, "{name} without the namespace");
            assert_eq!(run(&own, &c), P, "{name} in the command's own");
            assert_eq!(run(&queues, &c), A, "{name} with its queues granted");
        }
    }

    #[test]
    fn every_call_gets_the_answer_written_down_for_every_policy() {
        let programs: Vec<BpfProgram> = policies()
            .iter()
            .map(|p| program(p, &OUTSIDE, Own::default()).unwrap())
            .collect();
        let mut wrong = Vec::new();
        for &(name, nr, args, answers) in TABLE {
            for (i, p) in programs.iter().enumerate() {
                let mut c = call(0, &args);
                c.nr = nr;
                let got = run(p, &c);
                if got != answers[i] {
                    wrong.push(format!(
                        "{name} (policy {i}): {got:#x}, want {:#x}",
                        answers[i]
                    ));
                }
            }
        }
        // ia32 (`int 0x80`), AUDIT_ARCH_I386: killed, for every number.
        for p in &programs {
            for nr in [20, 26, 0] {
                let mut c = call(0, &[]);
                (c.nr, c.arch) = (nr, 0x4000_0003);
                if run(p, &c) != K {
                    wrong.push(format!("ia32 {nr}: not killed"));
                }
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn kill_0_is_refused_only_in_the_parent_s_group_and_minus_1_always() {
        let p = policy(Network::Deny, &[], false);
        let kill = |outside: &Outside, pid: u64| {
            let mut c = call(0, &[pid, 9]);
            c.nr = 62;
            run(&program(&p, outside, Own::default()).unwrap(), &c)
        };
        let shared = Outside {
            shares_group: true,
            ..OUTSIDE
        };
        assert_eq!(kill(&shared, 0), P);
        assert_eq!(kill(&OUTSIDE, 0), A);
        // A parent outside the pid namespace has no number here: -1 stays refused, and
        // setpgid has no rule.
        let none = Outside::default();
        assert_eq!(kill(&none, 0xffff_ffff), P);
        assert_eq!(kill(&none, 0), A);
        assert_eq!(kill(&none, 4321), A);
        let mut c = call(0, &[0, 4300]);
        c.nr = 109;
        assert_eq!(run(&program(&p, &none, Own::default()).unwrap(), &c), A);
    }

    #[test]
    fn with_landlock_s_scope_the_parent_as_a_process_is_left_to_it_and_the_rest_stays() {
        // Landlock's scope refuses a signal to the parent and records it; the filter
        // keeps what the scope lets through or judges later. The expected answers are
        // written out here, not derived from `Outside`.
        let p = policy(Network::Deny, &[], false);
        const SUPERVISOR: i32 = 777;
        let scoped = Outside {
            scoped: true,
            shares_group: true,
            supervisor: Some(SUPERVISOR),
            ..OUTSIDE
        };
        let unscoped = Outside {
            scoped: false,
            ..scoped.clone()
        };
        let answer = |outside: &Outside, nr: i64, args: &[u64]| {
            let mut c = call(0, args);
            c.nr = nr as u32;
            run(&program(&p, outside, Own::default()).unwrap(), &c)
        };
        let (kill, tkill, tgkill, fcntl) = (62, 200, 234, 72);
        let setown = libc::F_SETOWN as u64;
        let cases: [(&str, i64, [u64; 3], u32); 11] = [
            ("kill parent", kill, [pid(PARENT), 15, 0], A),
            (
                "kill the parent group's leader",
                kill,
                [pid(PARENT_GROUP), 15, 0],
                A,
            ),
            ("tkill parent", tkill, [pid(PARENT), 15, 0], A),
            ("tgkill parent", tgkill, [pid(PARENT), pid(PARENT), 15], A),
            ("kill -parent group", kill, [pid(-PARENT_GROUP), 15, 0], P),
            ("kill -parent", kill, [pid(-PARENT), 15, 0], P),
            ("kill -1", kill, [pid(-1), 9, 0], P),
            ("kill 0 in the parent's group", kill, [0, 15, 0], P),
            ("kill the supervisor", kill, [pid(SUPERVISOR), 19, 0], P),
            ("F_SETOWN parent", fcntl, [3, setown, pid(PARENT)], P),
            (
                "F_SETOWN the group's leader",
                fcntl,
                [3, setown, pid(PARENT_GROUP)],
                P,
            ),
        ];
        for (what, nr, args, want) in cases {
            assert_eq!(answer(&scoped, nr, &args), want, "scoped: {what}");
            // Control: without the scope the filter refuses every one of them.
            assert_eq!(answer(&unscoped, nr, &args), P, "unscoped: {what}");
        }
        // Control: another process, either way.
        assert_eq!(answer(&scoped, kill, &[1234, 15]), A);
    }

    #[test]
    fn ancestors_are_refused_as_processes_and_as_groups_when_named() {
        let p = policy(Network::Deny, &[], false);
        let kill = |outside: &Outside, pid: i32| {
            let mut c = call(0, &[pid as i64 as u64, 19]);
            c.nr = 62;
            run(&program(&p, outside, Own::default()).unwrap(), &c)
        };
        let named = Outside {
            ancestors: vec![5000, 4900, 77],
            ..OUTSIDE
        };
        for pid in [5000, -5000, 4900, -4900, 77, -77] {
            assert_eq!(kill(&named, pid), P, "{pid}");
        }
        // Control: another pid, and the same ancestors where none are named (a kernel
        // whose Landlock scopes signals).
        assert_eq!(kill(&named, 5001), A);
        assert_eq!(kill(&OUTSIDE, 5000), A);
        assert_eq!(kill(&OUTSIDE, -4900), A);
    }

    #[test]
    fn joining_an_ancestor_s_group_is_refused_when_named() {
        // From inside a group, kill(0) signals it whole: joining is as good as naming it.
        let p = policy(Network::Deny, &[], false);
        let setpgid = |outside: &Outside, group: i32| {
            let mut c = call(0, &[0, group as i64 as u64]);
            c.nr = 109;
            run(&program(&p, outside, Own::default()).unwrap(), &c)
        };
        let named = Outside {
            ancestors: vec![5000, 4900],
            ..OUTSIDE
        };
        for group in [PARENT_GROUP, 5000, 4900] {
            assert_eq!(setpgid(&named, group), P, "{group}");
        }
        // Control: a group of its own, another group, and the ancestors' where none are
        // named (Landlock's scope keeps their members out of reach from any group).
        assert_eq!(setpgid(&named, 0), A);
        assert_eq!(setpgid(&named, 5001), A);
        assert_eq!(setpgid(&OUTSIDE, 4900), A);
        // No parent group here (outside this pid namespace), but named ancestors: the
        // rule stays.
        let only_ancestors = Outside {
            ancestors: vec![4900],
            ..Outside::default()
        };
        assert_eq!(setpgid(&only_ancestors, 4900), P);
    }
}

/// The filter alone, in a child that keeps every capability (the test runs as root):
/// the kernel's own EPERM for a process without capabilities cannot stand in for the
/// filter's here. A control child without the filter makes the same calls and must get
/// another answer, so each EPERM is the filter's.
#[cfg(target_arch = "x86_64")]
mod alone {
    #![allow(clippy::undocumented_unsafe_blocks)] // Raw system calls with harmless arguments.
    use super::*;

    const NOWHERE: &[u8] = b"/nonexistent-stockade-seccomp-test/x\0";
    /// Above the largest pid_max: no such process.
    const NO_PID: i64 = 0x3fff_ffff;

    /// Each call with arguments that do nothing even when allowed (a missing path, a
    /// bad descriptor, a pid that cannot exist), and what it is.
    type Calls = Vec<(&'static str, Box<dyn Fn() -> i64>)>;

    fn calls() -> Calls {
        let p = NOWHERE.as_ptr();
        use libc::syscall as s;
        vec![
            (
                "ptrace",
                Box::new(|| unsafe { s(libc::SYS_ptrace, 16, NO_PID, 0, 0) }),
            ),
            (
                "mount",
                Box::new(move || unsafe { s(libc::SYS_mount, p, p, p, 0, 0) }),
            ),
            (
                "umount2",
                Box::new(move || unsafe { s(libc::SYS_umount2, p, 0) }),
            ),
            (
                "fsopen",
                Box::new(move || unsafe { s(libc::SYS_fsopen, p, 0xffff) }),
            ),
            (
                "bpf",
                Box::new(|| unsafe { s(libc::SYS_bpf, 0xffff, 0, 0) }),
            ),
            ("setns", Box::new(|| unsafe { s(libc::SYS_setns, -1, 0) })),
            ("unshare", Box::new(|| unsafe { s(libc::SYS_unshare, 0) })),
            (
                "ioctl TIOCSTI",
                Box::new(move || unsafe { s(libc::SYS_ioctl, -1, 0x5412, p) }),
            ),
            (
                "userfaultfd",
                Box::new(|| unsafe { s(libc::SYS_userfaultfd, 0xffff_0000u32) }),
            ),
            (
                "open_by_handle_at",
                Box::new(|| unsafe { s(libc::SYS_open_by_handle_at, -1, 0, 0) }),
            ),
            (
                "kexec_load",
                Box::new(|| unsafe { s(libc::SYS_kexec_load, 0, 0, 0, 0xffff_0000u32) }),
            ),
            (
                "init_module",
                Box::new(|| unsafe { s(libc::SYS_init_module, 0, 0, 0) }),
            ),
            (
                "finit_module",
                Box::new(move || unsafe { s(libc::SYS_finit_module, -1, p, 0) }),
            ),
            (
                "perf_event_open",
                Box::new(|| unsafe { s(libc::SYS_perf_event_open, 0, 0, -1, -1, 0) }),
            ),
            (
                "io_uring_setup",
                Box::new(|| unsafe { s(libc::SYS_io_uring_setup, 0, 0) }),
            ),
            (
                "process_vm_readv",
                Box::new(|| unsafe { s(libc::SYS_process_vm_readv, NO_PID, 0, 0, 0, 0, 0) }),
            ),
            (
                "pidfd_getfd",
                Box::new(|| unsafe { s(libc::SYS_pidfd_getfd, -1, 0, 0) }),
            ),
            (
                "prlimit64 of pid 1",
                Box::new(|| {
                    let mut old = libc::rlimit64 {
                        rlim_cur: 0,
                        rlim_max: 0,
                    };
                    unsafe { s(libc::SYS_prlimit64, 1, libc::RLIMIT_NOFILE, 0, &mut old) }
                }),
            ),
            (
                "setpriority",
                Box::new(|| unsafe { s(libc::SYS_setpriority, 0, NO_PID, 0) }),
            ),
            (
                "sched_setaffinity",
                Box::new(|| {
                    let mask = [u64::MAX; 16];
                    unsafe { s(libc::SYS_sched_setaffinity, NO_PID, 128, mask.as_ptr()) }
                }),
            ),
            (
                "ioprio_set",
                Box::new(|| unsafe { s(libc::SYS_ioprio_set, 1, NO_PID, 0) }),
            ),
            (
                "shmctl",
                Box::new(|| unsafe { s(libc::SYS_shmctl, -1, libc::IPC_STAT, 0) }),
            ),
            (
                "msgctl",
                Box::new(|| unsafe { s(libc::SYS_msgctl, -1, libc::IPC_STAT, 0) }),
            ),
            (
                "semctl",
                Box::new(|| unsafe { s(libc::SYS_semctl, -1, 0, libc::IPC_STAT, 0) }),
            ),
            (
                "fsetxattr",
                Box::new(move || unsafe { s(libc::SYS_fsetxattr, -1, p, p, 0, 0) }),
            ),
            (
                "fchmod u+s",
                Box::new(|| unsafe { s(libc::SYS_fchmod, -1, 0o4755) }),
            ),
            (
                "openat u+s",
                Box::new(move || unsafe {
                    s(
                        libc::SYS_openat,
                        libc::AT_FDCWD,
                        p,
                        libc::O_CREAT | libc::O_WRONLY,
                        0o4755,
                    )
                }),
            ),
            (
                "sendto MSG_FASTOPEN",
                Box::new(|| unsafe { s(libc::SYS_sendto, -1, 0, 0, libc::MSG_FASTOPEN, 0, 0) }),
            ),
            (
                "setsockopt TCP_FASTOPEN_CONNECT",
                Box::new(|| {
                    let one = 1i32;
                    unsafe { s(libc::SYS_setsockopt, -1, 6, 30, &one, 4) }
                }),
            ),
        ]
    }

    /// Runs every call in a forked child, with `program` installed first when given;
    /// the errno of each (0 when it succeeded), and how the child ended.
    fn in_child(calls: &Calls, program: Option<&BpfProgram>, ia32: bool) -> (Vec<i32>, i32) {
        let mut fds = [0; 2];
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let mut results = vec![0i32; calls.len()];
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            // The child: raw system calls only, then _exit.
            if let Some(program) = program {
                if install(program).is_err() {
                    unsafe { libc::_exit(3) };
                }
            }
            for (slot, (_, call)) in results.iter_mut().zip(calls) {
                *slot = if call() < 0 {
                    std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
                } else {
                    0
                };
            }
            let bytes = results.len() * 4;
            unsafe { libc::write(fds[1], results.as_ptr().cast(), bytes) };
            if ia32 {
                // getpid through the ia32 table.
                let mut nr: i32 = 20;
                unsafe {
                    std::arch::asm!(
                        "int 0x80",
                        inlateout("eax") nr,
                        out("r8") _, out("r9") _, out("r10") _, out("r11") _,
                        options(nostack)
                    )
                };
                let _ = nr;
            }
            unsafe { libc::_exit(0) };
        }
        unsafe { libc::close(fds[1]) };
        let mut buf = vec![0u8; results.len() * 4];
        let mut got = 0;
        while got < buf.len() {
            let n = unsafe { libc::read(fds[0], buf[got..].as_mut_ptr().cast(), buf.len() - got) };
            if n <= 0 {
                break;
            }
            got += n as usize;
        }
        unsafe { libc::close(fds[0]) };
        let mut status = 0;
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert_eq!(
            got,
            buf.len(),
            "the child reported {got} bytes, status {status:#x}"
        );
        for (r, b) in results.iter_mut().zip(buf.chunks(4)) {
            *r = i32::from_ne_bytes(b.try_into().unwrap());
        }
        (results, status)
    }

    #[test]
    fn a_child_with_every_capability_is_refused_by_the_filter_alone() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!(
                "SKIPPED (needs root): a_child_with_every_capability_is_refused_by_the_filter_alone"
            );
            return;
        }
        let calls = calls();
        let names: Vec<_> = calls.iter().map(|(n, _)| *n).collect();
        let filter = program(&policy(Network::Deny, &[], false), &OUTSIDE, Own::default()).unwrap();
        let (control, status) = in_child(&calls, None, true);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the control child ended with {status:#x}"
        );
        let (filtered, status) = in_child(&calls, Some(&filter), true);
        // The ia32 call ends the filtered child, after it reported.
        assert!(
            libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGSYS,
            "the filtered child ended with {status:#x}, not SIGSYS"
        );
        let mut wrong = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let want = if name.contains("xattr") {
                libc::EOPNOTSUPP
            } else {
                libc::EPERM
            };
            if filtered[i] != want {
                wrong.push(format!("{name}: errno {} under the filter", filtered[i]));
            }
            if control[i] == want {
                // The kernel (or a container's own filter) refuses it anyway here:
                // this machine cannot show that the EPERM is the filter's.
                eprintln!("{name}: EPERM without the filter too; not proven here");
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        let proven = control
            .iter()
            .filter(|&&e| e != libc::EPERM && e != libc::EOPNOTSUPP)
            .count();
        assert!(proven * 2 > names.len(), "control answers {control:?}");
    }

    /// Signal 0 checks whether a signal would be allowed and sends nothing.
    const PROBE: i64 = 0;

    /// One raw system call (or a few), returning what the last one returned.
    type Syscall = Box<dyn Fn() -> i64>;

    /// Signal calls from a forked child at its parent (this test process) and the
    /// group they share, each with the errno the filter must give (0: allowed), and
    /// calls on the child's own processes that must stay allowed. The kernel lets a
    /// process signal any other of its user, so without the filter every call succeeds.
    fn signal_calls() -> (Calls, Vec<i32>) {
        // SAFETY (every closure): raw system calls on the child's own descriptors and
        // memory, or signal 0, which sends nothing.
        let parent = || unsafe { libc::getppid() } as i64;
        let parent_group = move || unsafe { libc::getpgid(parent() as i32) } as i64;
        // The test process's own parent, the child's grandparent (a process outside,
        // not pid 1, for the test to mean anything).
        let grandparent = i64::from(unsafe { libc::getppid() });
        assert!(
            grandparent > 1,
            "the test process's parent is pid {grandparent}"
        );
        let pipe_owner = |cmd: i32, arg: i64| -> i64 {
            let mut fds = [0; 2];
            if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
                return -1;
            }
            let r = unsafe { s(libc::SYS_fcntl, fds[0], cmd, arg) };
            unsafe { libc::close(fds[0]) };
            unsafe { libc::close(fds[1]) };
            r
        };
        use libc::syscall as s;
        let calls: Vec<(&'static str, Syscall, i32)> = vec![
            (
                "kill the parent",
                Box::new(move || unsafe { s(libc::SYS_kill, parent(), PROBE) }),
                libc::EPERM,
            ),
            (
                "kill the parent's group",
                Box::new(move || unsafe { s(libc::SYS_kill, -parent_group(), PROBE) }),
                libc::EPERM,
            ),
            (
                "kill -1",
                Box::new(|| unsafe { s(libc::SYS_kill, -1, PROBE) }),
                libc::EPERM,
            ),
            (
                "kill the grandparent (the test harness's parent)",
                Box::new(move || unsafe { s(libc::SYS_kill, grandparent, PROBE) }),
                libc::EPERM,
            ),
            (
                "kill 0 (the group shared with the parent)",
                Box::new(|| unsafe { s(libc::SYS_kill, 0, PROBE) }),
                libc::EPERM,
            ),
            (
                "tgkill the parent",
                Box::new(move || unsafe { s(libc::SYS_tgkill, parent(), parent(), PROBE) }),
                libc::EPERM,
            ),
            (
                "tkill the parent",
                Box::new(move || unsafe { s(libc::SYS_tkill, parent(), PROBE) }),
                libc::EPERM,
            ),
            (
                "rt_sigqueueinfo the parent",
                Box::new(move || {
                    // si_signo, si_errno, si_code = SI_QUEUE: what sigqueue(3) sends.
                    let mut info = [0i32; 32];
                    info[2] = -1;
                    unsafe { s(libc::SYS_rt_sigqueueinfo, parent(), PROBE, info.as_ptr()) }
                }),
                libc::EPERM,
            ),
            (
                "fcntl F_SETOWN the parent",
                Box::new(move || pipe_owner(libc::F_SETOWN, parent())),
                libc::EPERM,
            ),
            (
                "fcntl F_SETOWN the parent's group",
                Box::new(move || pipe_owner(libc::F_SETOWN, -parent_group())),
                libc::EPERM,
            ),
            (
                "fcntl F_SETOWN_EX the parent",
                Box::new(move || {
                    // struct f_owner_ex { F_OWNER_PID, pid }
                    let owner = [1i32, parent() as i32];
                    pipe_owner(15, owner.as_ptr() as i64)
                }),
                libc::EPERM,
            ),
            (
                "ioctl FIOSETOWN the parent",
                Box::new(move || {
                    let mut fds = [0; 2];
                    let unix = libc::AF_UNIX;
                    if unsafe { libc::socketpair(unix, libc::SOCK_STREAM, 0, fds.as_mut_ptr()) }
                        != 0
                    {
                        return -1;
                    }
                    let owner = parent() as i32;
                    let r = unsafe { s(libc::SYS_ioctl, fds[0], 0x8901, &owner) };
                    unsafe { libc::close(fds[0]) };
                    unsafe { libc::close(fds[1]) };
                    r
                }),
                libc::EPERM,
            ),
            (
                "pidfd_send_signal through pidfd_open of the parent",
                Box::new(move || {
                    let fd = unsafe { s(libc::SYS_pidfd_open, parent(), 0) };
                    if fd < 0 {
                        return fd;
                    }
                    let r = unsafe { s(libc::SYS_pidfd_send_signal, fd, PROBE, 0, 0) };
                    unsafe { libc::close(fd as i32) };
                    r
                }),
                libc::ENOSYS,
            ),
            // Controls: the child's own processes stay reachable.
            (
                "kill itself",
                Box::new(|| unsafe { s(libc::SYS_kill, libc::getpid(), PROBE) }),
                0,
            ),
            (
                "SIGKILL its own child",
                Box::new(|| {
                    let child = unsafe { libc::fork() };
                    if child == 0 {
                        unsafe { libc::pause() };
                        unsafe { libc::_exit(0) };
                    }
                    let r = unsafe { s(libc::SYS_kill, child, libc::SIGKILL) };
                    let mut status = 0;
                    unsafe { libc::waitpid(child, &mut status, 0) };
                    if r == 0 && !(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == 9) {
                        return -1;
                    }
                    r
                }),
                0,
            ),
            (
                "fcntl F_SETOWN itself",
                Box::new(move || pipe_owner(libc::F_SETOWN, unsafe { libc::getpid() } as i64)),
                0,
            ),
            // Last: it leaves the parent's group.
            (
                "setpgid into the parent's group (after leaving it)",
                Box::new(move || {
                    let group = parent_group();
                    if unsafe { libc::setpgid(0, 0) } != 0 {
                        return -1;
                    }
                    unsafe { s(libc::SYS_setpgid, 0, group) }
                }),
                libc::EPERM,
            ),
        ];
        let wants = calls.iter().map(|c| c.2).collect();
        let calls = calls.into_iter().map(|(n, f, _)| (n, f)).collect();
        (calls, wants)
    }

    #[test]
    fn joining_an_ancestor_s_group_is_refused_by_the_filter_alone() {
        // This process's group, named as an ancestor's group (not the parent's): the
        // child leaves it for one of its own, as `stockade run` starts the runner, and
        // tries to join it again, from where kill(0) would signal every member.
        let group = unsafe { libc::getpgrp() };
        let outside = Outside {
            ancestors: vec![group],
            ..Outside::default()
        };
        let rejoin: Calls = vec![(
            "setpgid into an ancestor's group (after leaving it)",
            Box::new(move || {
                if unsafe { libc::setpgid(0, 0) } != 0 {
                    return -1;
                }
                unsafe { libc::syscall(libc::SYS_setpgid, 0, group) }
            }),
        )];
        let filter = program(&policy(Network::Deny, &[], false), &outside, Own::default()).unwrap();
        let (control, _) = in_child(&rejoin, None, false);
        assert_eq!(control, [0], "without the filter");
        let (filtered, _) = in_child(&rejoin, Some(&filter), false);
        assert_eq!(filtered, [libc::EPERM], "under the filter");
    }

    /// A process leading a group of its own, as the metadata supervisor does once it
    /// has left the executor's group (`notify::split`): it pauses until killed.
    fn group_leader() -> i32 {
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            unsafe { libc::setpgid(0, 0) };
            loop {
                unsafe { libc::pause() };
            }
        }
        // From both sides, so the group exists whichever runs first.
        unsafe { libc::setpgid(pid, pid) };
        pid
    }

    #[test]
    fn the_supervisor_s_own_group_is_refused_by_the_filter_alone() {
        // Without Landlock's signal scope (kernels before 6.12), `kill -STOP -$PPID`
        // from a command stopped its supervisor once it led a group of its own, and
        // `setpgid` into that group made `kill(0, ...)` reach it.
        let supervisor = group_leader();
        let calls: Calls = vec![
            (
                "kill the supervisor",
                Box::new(move || unsafe { libc::syscall(libc::SYS_kill, supervisor, 0) }),
            ),
            (
                "kill the supervisor's group",
                Box::new(move || unsafe { libc::syscall(libc::SYS_kill, -supervisor, 0) }),
            ),
            (
                "kill itself",
                Box::new(|| unsafe { libc::syscall(libc::SYS_kill, libc::getpid(), 0) }),
            ),
            // Last: it leaves the test's group.
            (
                "setpgid into the supervisor's group",
                Box::new(move || unsafe { libc::syscall(libc::SYS_setpgid, 0, supervisor) }),
            ),
        ];
        let with = |supervisor_group| {
            let outside = Outside {
                supervisor: Some(supervisor),
                supervisor_group,
                ..Outside::default()
            };
            program(&policy(Network::Deny, &[], false), &outside, Own::default()).unwrap()
        };
        let (control, _) = in_child(&calls, None, false);
        let (apart, _) = in_child(&calls, Some(&with(true)), false);
        // Control: where the command shares the supervisor's group, that group is its
        // own and stays reachable; the supervisor itself does not.
        let (shared, _) = in_child(&calls, Some(&with(false)), false);
        unsafe { libc::kill(supervisor, libc::SIGKILL) };
        unsafe { libc::waitpid(supervisor, std::ptr::null_mut(), 0) };
        assert_eq!(control, [0, 0, 0, 0], "without the filter");
        let eperm = libc::EPERM;
        assert_eq!(apart, [eperm, eperm, 0, eperm], "a group of its own");
        assert_eq!(shared, [eperm, 0, 0, 0], "the command's group");
    }

    #[test]
    fn signals_to_the_parent_and_its_group_are_refused_by_the_filter_alone() {
        // Landlock's signal scope is not applied here: what the child gets is the
        // filter's answer alone (this machine's Landlock would hide a missing rule).
        let (calls, wants) = signal_calls();
        // What the child computes with `Outside::of_parent(false)`: its parent is this
        // process, whose group it shares after fork.
        let outside = Outside {
            parent: Some(std::process::id() as i32),
            parent_group: Some(unsafe { libc::getpgrp() }),
            shares_group: true,
            // As `Outside::of_parent(false, false)` would find them in the child (no scope).
            ancestors: super::super::signals::ancestors_of(std::process::id() as i32),
            supervisor: None,
            scoped: false,
            supervisor_group: false,
        };
        let filter = program(&policy(Network::Deny, &[], false), &outside, Own::default()).unwrap();
        let (control, status) = in_child(&calls, None, false);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "control child: {status:#x}"
        );
        let (filtered, status) = in_child(&calls, Some(&filter), false);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "filtered child: {status:#x}"
        );
        let mut wrong = Vec::new();
        for (i, (name, _)) in calls.iter().enumerate() {
            if control[i] != 0 {
                wrong.push(format!("{name}: errno {} without the filter", control[i]));
            }
            if filtered[i] != wants[i] {
                wrong.push(format!(
                    "{name}: errno {} under the filter, want {}",
                    filtered[i], wants[i]
                ));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }
}

#[test]
fn the_parent_is_read_after_a_command_name_with_spaces_and_parentheses() {
    let mut fds = [0; 2];
    // SAFETY: a pipe into a local array; a fork whose child only renames itself, writes
    // one byte and exits (`_exit`, no destructors of the parent's state).
    unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        let child = libc::fork();
        assert!(child >= 0);
        if child == 0 {
            libc::prctl(libc::PR_SET_NAME, c") 1 2 (x".as_ptr());
            libc::write(fds[1], [0u8].as_ptr().cast(), 1);
            libc::pause();
            libc::_exit(0);
        }
        let mut b = [0u8; 1];
        assert_eq!(libc::read(fds[0], b.as_mut_ptr().cast(), 1), 1);
        let comm = std::fs::read_to_string(format!("/proc/{child}/comm")).unwrap();
        let parent = super::signals::parent_of(child);
        libc::kill(child, libc::SIGKILL);
        libc::waitpid(child, std::ptr::null_mut(), 0);
        libc::close(fds[0]);
        libc::close(fds[1]);
        assert_eq!(comm.trim_end(), ") 1 2 (x");
        assert_eq!(parent, Some(std::process::id() as i32));
    }
    // The chain from here: this process's parent first, never pid 1 or this process.
    let chain = super::signals::ancestors_of(std::process::id() as i32);
    // SAFETY: getppid cannot fail.
    let parent = unsafe { libc::getppid() };
    if parent > 1 {
        assert_eq!(chain.first(), Some(&parent), "{chain:?}");
    }
    assert!(
        chain
            .iter()
            .all(|&p| p > 1 && p != std::process::id() as i32)
    );
}
