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
//!    hatches are answered EPERM ("operation not permitted"), and so are signals to
//!    the processes outside the command that [`Outside`] names; `socket` and
//!    `socketpair` of a family the policy denies, and unix datagram pairs unless unix
//!    sockets are allowed, EACCES ("permission denied", which `socket(2)` documents
//!    for a denied family or type);
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
mod signals;
#[cfg(test)]
mod tests;

use crate::error::RunnerError;
use bpf::{
    AND_K, Code, JEQ_K, JSET_K, LD_W_ABS, OFFSET_ARCH, OFFSET_NR, RET_ALLOW, RET_KILL_PROCESS, To,
    load_arg, ret, ret_errno,
};
use seccompiler::BpfProgram;
use stockade_policy::{Mode, Network, Policy};

pub use signals::Outside;

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
    Eopnotsupp,
    Enosys,
    /// The argument checks of one system call.
    Clone,
    Personality,
    Ioctl,
    Socket,
    Socketpair,
    /// `socket(AF_INET/AF_INET6, ...)` with allowed TCP ports: type and protocol.
    InetSocket,
    /// EPERM when the mode in this argument has the set-uid or set-gid bit.
    SetidMode(u32),
    /// `open`/`openat`: the mode (the argument after these flags) counts only when the
    /// flags create a file; otherwise it is whatever the register held.
    SetidOnCreate(u32),
    /// EPERM unless the pid in the first argument is 0 (the caller itself).
    SelfPid,
    /// EPERM unless `(which, who)` is `(PRIO_PROCESS, 0)`.
    SetpriorityOfSelf,
    /// EPERM unless `(which, who)` is `(IOPRIO_WHO_PROCESS, 0)`.
    IoprioOfSelf,
    /// EPERM when the flags in this argument ask for TCP Fast Open.
    FastOpen(u32),
    /// EPERM when the pid in the first argument names a process outside (see
    /// [`Outside`]): the signal calls. Loads it for [`Label::SignalTargets`].
    SignalTarget,
    /// EPERM when the accumulator holds a pid the signal calls may not name
    /// ([`Outside::signal_targets`]), allow otherwise.
    SignalTargets,
    /// EPERM when the accumulator holds a pid outside, allow otherwise (`F_SETOWN`).
    Targets,
    /// `fcntl(F_SETOWN)` to a process outside, or `F_SETOWN_EX` (whose pid is in memory):
    /// the owner of a descriptor is sent SIGIO, or the signal F_SETSIG names, on I/O.
    Fcntl,
    /// `setpgid` into the parent's process group or a named ancestor's, where
    /// `kill(0, ...)` would reach it.
    Setpgid,
    /// `setsockopt(IPPROTO_TCP, TCP_FASTOPEN or TCP_FASTOPEN_CONNECT)`.
    Setsockopt,
}
use Label::*;

type Asm = Code<Label>;
const ALLOW: To<Label> = To::Label(Allow);
const EPERM: To<Label> = To::Label(Eperm);
const EACCES: To<Label> = To::Label(Eacces);
const EOPNOTSUPP: To<Label> = To::Label(Eopnotsupp);
const ENOSYS: To<Label> = To::Label(Enosys);

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
/// The socket ioctls that set a descriptor's owner (as `F_SETOWN` does), from a pid in
/// memory the filter cannot read: refused.
const FIOSETOWN: u32 = 0x8901;
const SIOCSPGRP: u32 = 0x8902;
/// `personality(0xffffffff)` only queries the persona.
const PERSONALITY_QUERY: u32 = 0xffff_ffff;
/// `CLONE_NEWTIME` (0x80) is not among them: in `clone`'s flags that bit belongs to the
/// exit signal (the low byte); a time namespace is made only by `unshare` (refused
/// whole) or `clone3` (refused whole: `ENOSYS`).
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
    SYS_OPEN_TREE_ATTR,
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

/// Calls numbered alike on every architecture (the unified table) that libc does not
/// name on all of them.
pub(crate) const SYS_FCHMODAT2: i64 = 452;
const SYS_SETXATTRAT: i64 = 463;
const SYS_REMOVEXATTRAT: i64 = 466;
const SYS_OPEN_TREE_ATTR: i64 = 467;
pub(crate) const SYS_FILE_SETATTR: i64 = 469;

/// The set-uid and set-gid bits of a mode.
const SETID_BITS: u32 = libc::S_ISUID | libc::S_ISGID;

/// Extended attribute writes, refused in every confined mode. Landlock governs none of
/// them, and their names (`security.capability`, `system.posix_acl_access`, `trusted.*`)
/// live in memory a filter cannot read: a file capability or an ACL granting others
/// write access must not be settable on anything the command owns. The answer is
/// EOPNOTSUPP, what a filesystem without extended attributes gives: `cp -p`, `tar`
/// and the like then fall back to plain mode bits (which the filter does read) instead
/// of failing, as they would on EPERM (`cp -p` sets modes as an ACL).
const XATTR_WRITES: &[i64] = &[
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_fsetxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    libc::SYS_fremovexattr,
    SYS_SETXATTRAT,
    SYS_REMOVEXATTRAT,
];

/// Where the mode is among each call's arguments, for the calls that set mode bits:
/// in every confined mode none may set the set-uid or set-gid bit (Landlock governs no
/// metadata, so a command could otherwise make any file it owns set-uid, outside the
/// writable roots too; as root, a set-uid-root file). Creating a file with those bits
/// is the same, so `open`, `creat` and `mknod` are checked as well.
pub(crate) const MODE_SETTERS: &[(i64, u32)] = &[
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_chmod, 1),
    (libc::SYS_fchmod, 1),
    (libc::SYS_fchmodat, 2),
    (SYS_FCHMODAT2, 2),
];
const MODE_CREATORS: &[(i64, u32)] = &[
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_creat, 1),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_mknod, 1),
    (libc::SYS_mknodat, 2),
];
/// The open calls and where their flags are (the mode follows them): the kernel reads
/// the mode only with O_CREAT or O_TMPFILE, and callers that pass neither leave garbage
/// there, which must not be refused.
const OPENERS: &[(i64, u32)] = &[
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_open, 1),
    (libc::SYS_openat, 2),
];
/// The flags with which open creates a file: O_CREAT, and O_TMPFILE's own bit.
const CREATING: u32 = (libc::O_CREAT | (libc::O_TMPFILE & !libc::O_DIRECTORY)) as u32;

/// Every other metadata change, refused outright in read-only mode (where nothing may
/// change): owners and times. The mode setters are refused there too. With the mode
/// setters, less `file_setattr`, these are also the calls the metadata supervisor
/// answers (`crate::notify`): one list for both.
pub(crate) const OTHER_METADATA: &[i64] = &[
    #[cfg(target_arch = "x86_64")]
    libc::SYS_chown,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_lchown,
    libc::SYS_fchown,
    libc::SYS_fchownat,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_utime,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_utimes,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_futimesat,
    libc::SYS_utimensat,
    // Inode flags and the extended `fsxattr` (project, extent size, no-dump, ...).
    SYS_FILE_SETATTR,
];

/// The ioctl commands that set inode flags (`chattr`), refused in read-only mode with
/// the other metadata calls: `FS_IOC_SETFLAGS` (and its 32-bit twin, the same command
/// with a 4-byte size), `FS_IOC_FSSETXATTR`, and the two that set a flag for good on
/// a file or empty directory its owner may only read: `FS_IOC_SET_ENCRYPTION_POLICY`
/// (no file can be created in the directory without the key any more) and
/// `FS_IOC_ENABLE_VERITY` (the file can no longer be written); `FS_IOC_SETVERSION`
/// (and its 32-bit twin: the inode's generation, which NFS file handles carry) and
/// btrfs's `BTRFS_IOC_SUBVOL_SETFLAGS` (a subvolume made read-only for good, by its
/// owner). Landlock governs no ioctl on a file that is not a device, and a read-only
/// descriptor is all they need.
pub(crate) const SETATTR_IOCTLS: [u32; 8] = [
    0x4008_6602,
    0x4004_6602,
    0x401c_5820,
    0x800c_6613,
    0x4080_6685,
    0x4008_7602,
    0x4004_7602,
    0x4008_941a,
];

/// `FS_IOC_REMOVE_ENCRYPTION_KEY` and its `_ALL_USERS` form: they act on the whole
/// filesystem the descriptor is on, whatever file it names, so a descriptor inside the
/// workspace would lock the user's encrypted directories elsewhere. Refused in every
/// confined mode.
pub(crate) const FILESYSTEM_IOCTLS: [u32; 2] = [0xc040_6618, 0xc040_6619];

/// Calls addressed by a pid that change another process (its limits, scheduling,
/// memory placement) or read its state: allowed only on the caller itself (pid 0).
/// Landlock's signal scope covers signals, not these. A thread's own tid is a pid here
/// too, so `pthread_setaffinity_np` on another thread is refused: the filter cannot tell
/// the caller's threads from other processes.
const SELF_PID_ONLY: &[i64] = &[
    libc::SYS_prlimit64,
    libc::SYS_sched_setaffinity,
    libc::SYS_sched_setscheduler,
    libc::SYS_sched_setparam,
    libc::SYS_sched_setattr,
    libc::SYS_migrate_pages,
    libc::SYS_move_pages,
    libc::SYS_get_robust_list,
];

/// Calls on other processes that name them by a descriptor or by two pids, which a
/// filter cannot relate to the caller: refused (EPERM).
const OTHER_PROCESSES: &[i64] = &[
    libc::SYS_process_madvise,
    libc::SYS_process_mrelease,
    libc::SYS_kcmp,
];

/// System V IPC, refused (EPERM) unless the command has an IPC namespace of its own
/// (the stage's, [`Own::ipc`]). Without one its objects are shared with every process of
/// the host, outside ones included, and outlive the run; in its own they are the
/// command's, out of every other process's sight, and go with the namespace. POSIX
/// shared memory and semaphores are files in `/dev/shm`, which the filesystem rules
/// govern (the stage gives a tmpfs of the command's own there).
const SYSTEM_V: &[i64] = &[
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmctl,
    libc::SYS_shmdt,
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_semctl,
];

/// POSIX message queues, refused (EPERM) but in an IPC namespace of the command's own
/// whose mqueue filesystem the stage mounted on `/dev/mqueue` (see `crate::queues`):
/// without the namespace they are the host's; in one of the command's own they are files
/// of its mqueue filesystem, which Landlock governs, so where the machine has no
/// `/dev/mqueue` to mount it on (and grant) an open would read as a denied file access
/// rather than as the refusal it is.
const MESSAGE_QUEUES: &[i64] = &[
    libc::SYS_mq_open,
    libc::SYS_mq_unlink,
    libc::SYS_mq_timedsend,
    libc::SYS_mq_timedreceive,
    libc::SYS_mq_notify,
    libc::SYS_mq_getsetattr,
];

/// `IOPRIO_WHO_PROCESS` (linux/ioprio.h).
const IOPRIO_WHO_PROCESS: u32 = 1;

/// The namespaces of the command's own the stage made (the runner checked it ran), which
/// make some of the filter's refusals needless.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Own {
    /// A network namespace with nothing but its loopback (`Policy::own_network`): TCP
    /// and UDP sockets reach nothing but the command's own servers there.
    pub network: bool,
    /// An IPC namespace: System V IPC objects are the command's own.
    pub ipc: bool,
    /// That namespace's message queues mounted and granted on `/dev/mqueue`.
    pub message_queues: bool,
}

/// Which system calls have a rule under `policy`, and where each one goes.
fn rules(policy: &Policy, outside: &Outside, own: Own) -> Vec<(i64, To<Label>)> {
    let netns = own.network;
    let eperm = |list: &[i64]| list.iter().map(|&nr| (nr, EPERM)).collect::<Vec<_>>();
    let mut rules: Vec<(i64, To<Label>)> = eperm(DENIED);
    rules.extend([
        (libc::SYS_clone, To::Label(Clone)),
        (libc::SYS_personality, To::Label(Personality)),
        (libc::SYS_ioctl, To::Label(Ioctl)),
        // open_how, with the mode, is in memory: ENOSYS, as on kernels before 5.6, makes
        // callers fall back to openat, whose mode the filter reads.
        (libc::SYS_openat2, ENOSYS),
    ]);
    rules.extend(XATTR_WRITES.iter().map(|&nr| (nr, EOPNOTSUPP)));
    let setid = |&(nr, arg): &(i64, u32)| (nr, To::Label(SetidMode(arg)));
    if policy.mode() == Mode::ReadOnly {
        rules.extend(MODE_SETTERS.iter().map(|&(nr, _)| (nr, EPERM)));
        rules.extend(eperm(OTHER_METADATA));
    } else {
        rules.extend(MODE_SETTERS.iter().map(setid));
    }
    rules.extend(MODE_CREATORS.iter().map(setid));
    rules.extend(
        OPENERS
            .iter()
            .map(|&(nr, flags)| (nr, To::Label(SetidOnCreate(flags)))),
    );
    rules.extend(SELF_PID_ONLY.iter().map(|&nr| (nr, To::Label(SelfPid))));
    rules.extend([
        (libc::SYS_setpriority, To::Label(SetpriorityOfSelf)),
        (libc::SYS_ioprio_set, To::Label(IoprioOfSelf)),
    ]);
    rules.extend(eperm(OTHER_PROCESSES));
    if !own.ipc {
        rules.extend(eperm(SYSTEM_V));
    }
    if !own.message_queues {
        rules.extend(eperm(MESSAGE_QUEUES));
    }
    rules.extend(signals::rules(outside));
    if policy.network() == Network::Deny || !policy.allow_unix_sockets() {
        rules.push((libc::SYS_socket, To::Label(Socket)));
        rules.push((libc::SYS_socketpair, To::Label(Socketpair)));
    }
    if policy.network() == Network::Deny {
        // TCP Fast Open connects (sends a SYN with data) from `sendto`/`sendmsg`
        // without passing the connect hook Landlock's port rules sit on.
        rules.extend([
            (libc::SYS_sendto, To::Label(FastOpen(3))),
            (libc::SYS_sendmsg, To::Label(FastOpen(2))),
            (libc::SYS_sendmmsg, To::Label(FastOpen(3))),
            (libc::SYS_setsockopt, To::Label(Setsockopt)),
        ]);
        if policy.tcp_sockets() && !netns {
            // listen() on an unbound TCP socket binds it to a free port without the bind
            // hook Landlock's rules sit on, and then accepts connections. listen cannot
            // tell a TCP socket from a unix one, so with TCP sockets creatable it is
            // refused for every socket. In a network namespace of the command's own
            // there is nothing but its loopback to listen on, and its servers work.
            rules.push((libc::SYS_listen, EPERM));
        }
    }
    rules
}

/// `socketpair(family, type, ...)`. A pair only connects a process to itself, so unix
/// stream and seqpacket pairs stay allowed (commands use them among their own
/// processes). A unix *datagram* socket is another matter, whoever made it: `sendto`
/// and `sendmsg` take a destination address with every message, and `connect` names
/// one, so a datagram socket from a pair reaches any pathname socket outside
/// (`/dev/log`, journald, systemd's notify socket, root-only control sockets) and can
/// pass descriptors there. Unless unix sockets are allowed, every type but stream and
/// seqpacket is refused (the kernel turns `SOCK_RAW` into a datagram socket). Other
/// families: refused when the network is denied.
fn socketpair(policy: &Policy) -> Vec<bpf::Insn<Label>> {
    let unix = libc::AF_UNIX as u32;
    let other = if policy.network() == Network::Deny {
        EACCES
    } else {
        ALLOW
    };
    if policy.allow_unix_sockets() {
        return vec![load_arg(0), (JEQ_K, unix, ALLOW, other)];
    }
    vec![
        load_arg(0),
        (JEQ_K, unix, To::Next, other),
        load_arg(1),
        (AND_K, SOCK_TYPE_MASK, To::Next, To::Next),
        (JEQ_K, libc::SOCK_STREAM as u32, ALLOW, To::Next),
        (JEQ_K, libc::SOCK_SEQPACKET as u32, ALLOW, EACCES),
    ]
}

/// The argument checks of the calls [`rules`] sends to a block, each ending in an answer.
/// Only the blocks something jumps to are laid out (`used` starts with the targets of the
/// decision tree; a block only jumps to blocks after it).
fn blocks(
    policy: &Policy,
    outside: &Outside,
    own: Own,
    code: &mut Asm,
    labels: &mut Vec<(Label, usize)>,
    used: &mut Vec<Label>,
) {
    let mut block = |label: Label, insns: &[bpf::Insn<Label>]| {
        if !used.contains(&label) {
            return;
        }
        labels.push((label, code.len()));
        for &(_, _, jt, jf) in insns {
            for to in [jt, jf] {
                if let To::Label(l) = to {
                    used.push(l);
                }
            }
        }
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
    block(Ioctl, &ioctl_checks(policy));
    let netns = own.network;
    let socket = socket_checks(policy, netns);
    let deny = policy.network() == Network::Deny;
    if deny || !policy.allow_unix_sockets() {
        block(Socket, &socket);
    }
    if let Some(inet) = inet_socket_checks(policy, netns) {
        block(InetSocket, &inet);
    }
    if deny || !policy.allow_unix_sockets() {
        block(Socketpair, &socketpair(policy));
    }
    // Modes are a umode_t, flags an unsigned int, pids and `which` an int: the low half
    // of each argument is all the kernel reads.
    for arg in [1, 2, 3] {
        block(
            SetidMode(arg),
            &[load_arg(arg), (JSET_K, SETID_BITS, EPERM, ALLOW)],
        );
    }
    for flags in [1, 2] {
        block(
            SetidOnCreate(flags),
            &[
                load_arg(flags),
                (JSET_K, CREATING, To::Next, ALLOW),
                load_arg(flags + 1),
                (JSET_K, SETID_BITS, EPERM, ALLOW),
            ],
        );
    }
    block(SelfPid, &[load_arg(0), (JEQ_K, 0, ALLOW, EPERM)]);
    let of_self = |which: u32| {
        [
            load_arg(0),
            (JEQ_K, which, To::Next, EPERM),
            load_arg(1),
            (JEQ_K, 0, ALLOW, EPERM),
        ]
    };
    // `PRIO_PROCESS` is signed with glibc, unsigned with musl; its value is 0.
    #[allow(clippy::unnecessary_cast)]
    block(SetpriorityOfSelf, &of_self(libc::PRIO_PROCESS as u32));
    block(IoprioOfSelf, &of_self(IOPRIO_WHO_PROCESS));
    if deny {
        for arg in [2, 3] {
            block(
                FastOpen(arg),
                &[
                    load_arg(arg),
                    (JSET_K, libc::MSG_FASTOPEN as u32, EPERM, ALLOW),
                ],
            );
        }
        block(Setsockopt, &setsockopt_checks());
    }
    let groups = outside.groups();
    if !groups.is_empty() {
        block(Setpgid, &signals::setpgid(&groups));
    }
    // fcntl checks its owner argument with the compares the signal calls use, which
    // come after both.
    block(Fcntl, &signals::fcntl());
    block(SignalTarget, &signals::signal_target());
    block(SignalTargets, &signals::targets(&outside.signal_targets()));
    block(Targets, &signals::targets(&outside.targets()));
    // Last: classic BPF only jumps forwards.
    block(Allow, &[ret(RET_ALLOW)]);
    block(Eperm, &[ret(ret_errno(libc::EPERM))]);
    block(Eacces, &[ret(ret_errno(libc::EACCES))]);
    block(Eopnotsupp, &[ret(ret_errno(libc::EOPNOTSUPP))]);
    block(Enosys, &[ret(ret_errno(libc::ENOSYS))]);
}

/// The block for `AF_INET`/`AF_INET6` sockets when the network is denied, if any. In the
/// command's own network namespace (`netns`), which holds nothing but its loopback, TCP
/// and UDP are its own business (a test suite's server and client, a logging test's
/// datagrams); raw, packet, MPTCP and every other protocol stay refused, as kernel surface
/// no local server needs. Otherwise only TCP, for Landlock to judge by port.
fn inet_socket_checks(policy: &Policy, netns: bool) -> Option<Vec<bpf::Insn<Label>>> {
    if policy.network() != Network::Deny {
        return None;
    }
    if netns {
        return Some(vec![
            load_arg(1),
            (AND_K, SOCK_TYPE_MASK, To::Next, To::Next),
            (JEQ_K, libc::SOCK_STREAM as u32, To::Skip(4), To::Next),
            (JEQ_K, libc::SOCK_DGRAM as u32, To::Next, EACCES),
            load_arg(2),
            (JEQ_K, 0, ALLOW, To::Next),
            (JEQ_K, libc::IPPROTO_UDP as u32, ALLOW, EACCES),
            load_arg(2),
            (JEQ_K, 0, ALLOW, To::Next),
            (JEQ_K, libc::IPPROTO_TCP as u32, ALLOW, EACCES),
        ]);
    }
    policy.tcp_sockets().then(|| {
        vec![
            load_arg(1),
            (AND_K, SOCK_TYPE_MASK, To::Next, To::Next),
            (JEQ_K, libc::SOCK_STREAM as u32, To::Next, EACCES),
            load_arg(2),
            (JEQ_K, 0, ALLOW, To::Next),
            (JEQ_K, libc::IPPROTO_TCP as u32, ALLOW, EACCES),
        ]
    })
}

/// The ioctl block: TIOCSTI, the filesystem-wide key removal, owner and process-group
/// changes, the console's ioctl, and in read-only mode the attribute-setting ioctls.
fn ioctl_checks(policy: &Policy) -> Vec<bpf::Insn<Label>> {
    // The ioctl command is an unsigned int in the kernel.
    let mut ioctl = vec![load_arg(1), (JEQ_K, TIOCSTI, EPERM, To::Next)];
    ioctl.extend(FILESYSTEM_IOCTLS.map(|cmd| (JEQ_K, cmd, EPERM, To::Next)));
    if policy.mode() == Mode::ReadOnly {
        ioctl.extend(SETATTR_IOCTLS.map(|cmd| (JEQ_K, cmd, EPERM, To::Next)));
    }
    ioctl.extend([
        (JEQ_K, FIOSETOWN, EPERM, To::Next),
        (JEQ_K, SIOCSPGRP, EPERM, To::Next),
        (JEQ_K, TIOCLINUX, EPERM, ALLOW),
    ]);
    ioctl
}

/// The socket block: the families and, with the network denied, the TCP sockets
/// Landlock then judges by port.
fn socket_checks(policy: &Policy, netns: bool) -> Vec<bpf::Insn<Label>> {
    let unix = libc::AF_UNIX as u32;
    // socket(family, type, protocol): the family is an int.
    let mut socket = vec![load_arg(0)];
    if !policy.allow_unix_sockets() {
        socket.push((JEQ_K, unix, EACCES, To::Next));
    }
    match policy.network() {
        Network::Allow => socket.push(ret(RET_ALLOW)),
        Network::Deny if !(policy.tcp_sockets() || netns) => {
            socket.push((JEQ_K, unix, ALLOW, EACCES));
        }
        Network::Deny => {
            // TCP stays creatable so that Landlock can allow the named ports (and deny
            // every other connect and bind), or, in a network namespace of the
            // command's own, TCP and UDP (see the InetSocket block); every other family,
            // type and protocol (raw, MPTCP, ...) is refused here.
            let inet = To::Label(InetSocket);
            socket.extend([
                (JEQ_K, unix, ALLOW, To::Next),
                (JEQ_K, libc::AF_INET as u32, inet, To::Next),
                (JEQ_K, libc::AF_INET6 as u32, inet, EACCES),
            ]);
        }
    }
    socket
}

/// The setsockopt block: TCP Fast Open (data sent with the connect) refused.
fn setsockopt_checks() -> [bpf::Insn<Label>; 5] {
    [
        load_arg(1),
        (JEQ_K, libc::IPPROTO_TCP as u32, To::Next, ALLOW),
        load_arg(2),
        (JEQ_K, libc::TCP_FASTOPEN as u32, EPERM, To::Next),
        (JEQ_K, libc::TCP_FASTOPEN_CONNECT as u32, EPERM, ALLOW),
    ]
}

/// The one filter `policy` needs, keeping signals from the processes `outside` names;
/// built before anything is applied so that a filter that cannot be built fails the run
/// before it changes the process.
///
/// `own`: the namespaces of the command's own the stage made (see [`Own`]).
pub fn program(policy: &Policy, outside: &Outside, own: Own) -> Result<BpfProgram, RunnerError> {
    let mut keys: Vec<(u32, To<Label>)> = rules(policy, outside, own)
        .into_iter()
        .map(|(nr, to)| (nr as u32, to))
        .collect();
    keys.sort_unstable_by_key(|&(nr, _)| nr);
    if keys.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(RunnerError::Seccomp(SeccompError::Duplicate));
    }
    let mut code = Asm::new();
    guard(&mut code);
    bpf::search(&bpf::ranges(&keys), ALLOW, &mut code);
    let mut used: Vec<Label> = code
        .iter()
        .flat_map(|&(_, _, jt, jf)| [jt, jf])
        .filter_map(|to| match to {
            To::Label(l) => Some(l),
            _ => None,
        })
        .collect();
    let mut labels = Vec::new();
    blocks(policy, outside, own, &mut code, &mut labels, &mut used);
    bpf::assemble(&code, &labels).ok_or(RunnerError::Seccomp(SeccompError::JumpTooFar))
}

/// Why the seccomp filter could not be built or installed.
#[derive(Debug)]
pub enum SeccompError {
    /// The policy's rules name a system call twice (a bug in [`rules`]).
    Duplicate,
    /// A jump in the assembled program is longer than BPF can encode.
    JumpTooFar,
    /// The kernel refused the program.
    Install(seccompiler::Error),
}

impl std::fmt::Display for SeccompError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SeccompError::Duplicate => f.write_str("a system call is listed twice in the filter"),
            SeccompError::JumpTooFar => f.write_str("the filter's jumps do not fit"),
            SeccompError::Install(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for SeccompError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SeccompError::Install(e) => Some(e),
            _ => None,
        }
    }
}

/// Installs `program` on the calling (single) thread. no_new_privs must be set.
pub fn install(program: &BpfProgram) -> Result<(), RunnerError> {
    seccompiler::apply_filter(program).map_err(|e| RunnerError::Seccomp(SeccompError::Install(e)))
}
