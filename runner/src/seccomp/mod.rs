//! The seccomp filter: the kernel attack surface and escape hatches Landlock leaves open,
//! closed by system call. Installed last, just before `execve`, after no_new_privs.
//!
//! This module is the policy a reviewer reads: which system call gets which answer, and
//! why. [`bpf`] assembles it; the tests run it through a classic-BPF interpreter.
//!
//! One filter, built by [`program`] for a policy, answers in this order:
//! 1. the guard ([`guard`]): it kills anything not of the native architecture (an x86_64
//!    process can still enter the ia32 table with `int 0x80`), answers ENOSYS for the
//!    x32 range (`nr | 0x40000000`) that a filter matching exact numbers misses, and
//!    ENOSYS for clone3, whose flags live in memory a filter cannot read (libc then falls
//!    back to clone, whose flags it can);
//! 2. a binary search over the system call numbers that have a rule, each leading to an
//!    answer or to a short block that checks its arguments: the privileged escape
//!    hatches are answered EPERM ("operation not permitted"); `socket` and `socketpair`
//!    of a family the policy denies EACCES ("permission denied", which `socket(2)`
//!    documents for a denied family or type);
//! 3. allow, for every other call.
//!
//! Both errnos appear in the ConfinedArgv `denialSignatures`.
//!
//! Why one filter, written by hand: attaching a filter costs the kernel time in
//! proportion to its length (it converts the program to eBPF and JIT-compiles it, in
//! several passes), and every filter has a fixed cost on top. These were three filters
//! (one of them seccompiler's per-rule program, 350 instructions with allowed TCP ports);
//! now one, whose length the unit tests bound for every policy. Its answers are the ones
//! the separate programs gave under the kernel's rule (the most severe wins), checked call
//! by call in the unit tests.

mod bpf;
#[cfg(test)]
mod tests;

use crate::error::RunnerError;
use bpf::{
    AND_K, Code, JEQ_K, JSET_K, LD_W_ABS, OFFSET_ARCH, OFFSET_NR, RET_ALLOW, RET_KILL_PROCESS, To,
    load_arg, ret, ret_errno,
};
use seccompiler::BpfProgram;
use stockade_policy::{Network, Policy};

#[cfg(target_arch = "x86_64")]
mod arch {
    /// `AUDIT_ARCH_X86_64`.
    pub const AUDIT_ARCH: u32 = 0xC000_003E;
    /// Set in the number of every x32 system call (`__X32_SYSCALL_BIT`).
    pub const X32_BIT: Option<u32> = Some(0x4000_0000);
}

#[cfg(target_arch = "aarch64")]
mod arch {
    /// `AUDIT_ARCH_AARCH64`.
    pub const AUDIT_ARCH: u32 = 0xC000_00B7;
    pub const X32_BIT: Option<u32> = None;
}

/// The blocks a decision tree jumps to, laid out after it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Label {
    Allow,
    Eperm,
    Eacces,
    Enosys,
    /// The argument checks of one system call.
    Clone,
    Personality,
    Ioctl,
    Socket,
    Socketpair,
    /// `socket(AF_INET/AF_INET6, ...)` with allowed TCP ports: type and protocol.
    InetSocket,
}
use Label::*;

type Asm = Code<Label>;
const ALLOW: To<Label> = To::Label(Allow);
const EPERM: To<Label> = To::Label(Eperm);
const EACCES: To<Label> = To::Label(Eacces);

/// The guard, the start of the filter: architecture check, x32 range, clone3. Leaves the
/// system call number in the accumulator.
fn guard(code: &mut Asm) {
    code.extend([
        (LD_W_ABS, OFFSET_ARCH, To::Next, To::Next),
        // Native: skip the kill.
        (JEQ_K, arch::AUDIT_ARCH, To::Skip(1), To::Next),
        ret(RET_KILL_PROCESS),
        (LD_W_ABS, OFFSET_NR, To::Next, To::Next),
    ]);
    if let Some(bit) = arch::X32_BIT {
        code.push((JSET_K, bit, To::Label(Enosys), To::Next));
    }
    let clone3 = libc::SYS_clone3 as u32;
    code.push((JEQ_K, clone3, To::Label(Enosys), To::Next));
}

const TIOCSTI: u32 = 0x5412;
const TIOCLINUX: u32 = 0x541C;
/// `personality(0xffffffff)` only queries the persona.
const PERSONALITY_QUERY: u32 = 0xffff_ffff;
const NAMESPACE_FLAGS: [u64; 7] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWCGROUP as u64,
];
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
/// The bits of `socket`'s type argument that hold the type (the rest are flags such as
/// SOCK_CLOEXEC).
const SOCK_TYPE_MASK: u32 = 0xf;

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

/// Which system calls have a rule under `policy`, and where each one goes.
fn rules(policy: &Policy) -> Vec<(i64, To<Label>)> {
    let mut rules: Vec<(i64, To<Label>)> = DENIED.iter().map(|&nr| (nr, EPERM)).collect();
    rules.extend([
        (libc::SYS_clone, To::Label(Clone)),
        (libc::SYS_personality, To::Label(Personality)),
        (libc::SYS_ioctl, To::Label(Ioctl)),
    ]);
    if policy.network == Network::Deny || !policy.allow_unix_sockets {
        rules.push((libc::SYS_socket, To::Label(Socket)));
    }
    if policy.network == Network::Deny {
        rules.push((libc::SYS_socketpair, To::Label(Socketpair)));
    }
    rules
}

/// The argument checks of the calls [`rules`] sends to a block, each ending in an answer.
fn blocks(policy: &Policy, code: &mut Asm, labels: &mut Vec<(Label, usize)>) {
    let mut block = |label: Label, insns: &[bpf::Insn<Label>]| {
        labels.push((label, code.len()));
        code.extend_from_slice(insns);
    };
    // clone's flags are an unsigned long in the first argument (x86_64 and aarch64);
    // any namespace flag is refused.
    block(
        Clone,
        &[load_arg(0), (JSET_K, NAMESPACE_MASK, EPERM, ALLOW)],
    );
    // personality takes an unsigned int: 0 and the query leave the persona as it is.
    block(
        Personality,
        &[
            load_arg(0),
            (JEQ_K, 0, ALLOW, To::Next),
            (JEQ_K, PERSONALITY_QUERY, ALLOW, EPERM),
        ],
    );
    // The ioctl command is an unsigned int in the kernel.
    block(
        Ioctl,
        &[
            load_arg(1),
            (JEQ_K, TIOCSTI, EPERM, To::Next),
            (JEQ_K, TIOCLINUX, EPERM, ALLOW),
        ],
    );
    let unix = libc::AF_UNIX as u32;
    // socket(family, type, protocol): the family is an int.
    let mut socket = vec![load_arg(0)];
    if !policy.allow_unix_sockets {
        socket.push((JEQ_K, unix, EACCES, To::Next));
    }
    match policy.network {
        Network::Allow => socket.push(ret(RET_ALLOW)),
        Network::Deny if policy.allow_tcp_connect.is_empty() => {
            socket.push((JEQ_K, unix, ALLOW, EACCES));
        }
        Network::Deny => {
            // TCP stays creatable so that Landlock can allow the named ports (and deny
            // every other connect and bind); every other family, type and protocol (UDP,
            // raw, MPTCP, ...) is refused here.
            let inet = To::Label(InetSocket);
            socket.extend([
                (JEQ_K, unix, ALLOW, To::Next),
                (JEQ_K, libc::AF_INET as u32, inet, To::Next),
                (JEQ_K, libc::AF_INET6 as u32, inet, EACCES),
            ]);
        }
    }
    let deny = policy.network == Network::Deny;
    if deny || !policy.allow_unix_sockets {
        block(Socket, &socket);
    }
    if deny && !policy.allow_tcp_connect.is_empty() {
        block(
            InetSocket,
            &[
                load_arg(1),
                (AND_K, SOCK_TYPE_MASK, To::Next, To::Next),
                (JEQ_K, libc::SOCK_STREAM as u32, To::Next, EACCES),
                load_arg(2),
                (JEQ_K, 0, ALLOW, To::Next),
                (JEQ_K, libc::IPPROTO_TCP as u32, ALLOW, EACCES),
            ],
        );
    }
    if deny {
        // socketpair only ever connects a process to itself: AF_UNIX stays allowed.
        block(Socketpair, &[load_arg(0), (JEQ_K, unix, ALLOW, EACCES)]);
    }
    // Last: classic BPF only jumps forwards.
    block(Allow, &[ret(RET_ALLOW)]);
    block(Eperm, &[ret(ret_errno(libc::EPERM))]);
    block(Eacces, &[ret(ret_errno(libc::EACCES))]);
    block(Enosys, &[ret(ret_errno(libc::ENOSYS))]);
}

/// The one filter `policy` needs, built before anything is applied so that a filter
/// that cannot be built fails the run before it changes the process.
pub fn program(policy: &Policy) -> Result<BpfProgram, RunnerError> {
    let mut keys: Vec<(u32, To<Label>)> = rules(policy)
        .into_iter()
        .map(|(nr, to)| (nr as u32, to))
        .collect();
    keys.sort_unstable_by_key(|&(nr, _)| nr);
    if keys.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(seccomp_error("a system call is listed twice in the filter"));
    }
    let mut code = Asm::new();
    guard(&mut code);
    bpf::search(&keys, ALLOW, &mut code);
    let mut labels = Vec::new();
    blocks(policy, &mut code, &mut labels);
    bpf::assemble(&code, &labels).ok_or_else(|| seccomp_error("the filter's jumps do not fit"))
}

fn seccomp_error(e: impl std::fmt::Display) -> RunnerError {
    RunnerError::Seccomp(e.to_string())
}

/// Installs `program` on the calling (single) thread. no_new_privs must be set.
pub fn install(program: &BpfProgram) -> Result<(), RunnerError> {
    seccompiler::apply_filter(program).map_err(seccomp_error)
}
