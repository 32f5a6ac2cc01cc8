//! `attack NAME [ARGS...]`: one escape attempt, made with raw system calls so that the
//! kernel's own answer is what the tests see.
//!
//! Prints one line: `ok` (the operation succeeded; exit 0) or `errno NAME` (it failed;
//! exit 1). Usage errors exit 2. An attempt the kernel answers by killing the process
//! (seccomp's architecture check) shows as a signal in the exit status.
#![allow(clippy::undocumented_unsafe_blocks)] // A test helper made of raw system calls.

use std::ffi::CString;
use std::io::Error;
use std::process::exit;

fn errno_name(e: i32) -> String {
    let name = match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EBADF => "EBADF",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EXDEV => "EXDEV",
        libc::EINVAL => "EINVAL",
        libc::ENOTTY => "ENOTTY",
        libc::ENOSYS => "ENOSYS",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EIO => "EIO",
        libc::EROFS => "EROFS",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ELOOP => "ELOOP",
        _ => return format!("E{e}"),
    };
    name.to_string()
}

/// Reports the result of a system call returning -1 on failure and exits.
fn report(ret: i64) -> ! {
    if ret < 0 {
        fail()
    }
    println!("ok");
    exit(0)
}

fn fail() -> ! {
    let e = Error::last_os_error().raw_os_error().unwrap_or(0);
    println!("errno {}", errno_name(e));
    exit(1)
}

/// Fails (reporting errno) unless `ret` is non-negative; returns it.
fn must(ret: i64) -> i64 {
    if ret < 0 {
        fail()
    }
    ret
}

fn c(s: &str) -> CString {
    CString::new(s).expect("no NUL")
}

fn arg(args: &[String], i: usize) -> &str {
    args.get(i).map(String::as_str).unwrap_or_else(|| {
        eprintln!("attack: missing argument {i}");
        exit(2)
    })
}

fn num<T: std::str::FromStr>(args: &[String], i: usize) -> T {
    arg(args, i).parse().unwrap_or_else(|_| {
        eprintln!("attack: argument {i} is not a number");
        exit(2)
    })
}

fn sockaddr_in(port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be(),
        },
        sin_zero: [0; 8],
    }
}

fn socket(family: i32, ty: i32, proto: i32) -> i32 {
    must(unsafe { libc::socket(family, ty | libc::SOCK_CLOEXEC, proto) } as i64) as i32
}

/// A unix address: a path, or an abstract name when `name` starts with `@`.
fn sockaddr_un(name: &str) -> (libc::sockaddr_un, libc::socklen_t) {
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = name.as_bytes();
    let (start, body) = match bytes.first() {
        Some(b'@') => (1, &bytes[1..]),
        _ => (0, bytes),
    };
    for (i, b) in body.iter().enumerate() {
        addr.sun_path[start + i] = *b as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + start + body.len();
    (addr, len as libc::socklen_t)
}

fn unix_connect(name: &str) -> ! {
    let fd = socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
    let (addr, len) = sockaddr_un(name);
    report(unsafe { libc::connect(fd, &addr as *const _ as *const libc::sockaddr, len) } as i64)
}

/// The socket type a pair is asked for by name.
fn pair_type(name: &str) -> i32 {
    match name {
        "stream" => libc::SOCK_STREAM,
        "seqpacket" => libc::SOCK_SEQPACKET,
        "dgram" => libc::SOCK_DGRAM,
        "raw" => libc::SOCK_RAW,
        other => {
            eprintln!("attack: unknown pair type {other}");
            exit(2)
        }
    }
}

/// A unix socketpair of `ty`, or the errno line.
fn unix_pair(ty: i32) -> [i32; 2] {
    let mut fds = [0i32; 2];
    must(unsafe { libc::socketpair(libc::AF_UNIX, ty, 0, fds.as_mut_ptr()) } as i64);
    fds
}

/// A datagram socket from a pair sends to the pathname socket `name`: the address
/// comes with the message, not from the pair.
fn dgram_pair_send(name: &str) -> ! {
    let fds = unix_pair(pair_type("dgram"));
    let (addr, len) = sockaddr_un(name);
    let msg = b"escape";
    report(unsafe {
        libc::sendto(
            fds[0],
            msg.as_ptr().cast(),
            msg.len(),
            0,
            &addr as *const _ as *const libc::sockaddr,
            len,
        )
    } as i64)
}

/// What commands do with a pair: a child process writes on one end, the parent reads
/// it on the other.
fn pair_talk(ty: &str) -> ! {
    let fds = unix_pair(pair_type(ty));
    let pid = must(unsafe { libc::fork() } as i64);
    if pid == 0 {
        let msg = b"hello";
        let n = unsafe { libc::write(fds[1], msg.as_ptr().cast(), msg.len()) };
        unsafe { libc::_exit(if n == msg.len() as isize { 0 } else { 1 }) }
    }
    let mut buf = [0u8; 16];
    let n = must(unsafe { libc::read(fds[0], buf.as_mut_ptr().cast(), buf.len()) } as i64);
    let mut status = 0;
    unsafe { libc::waitpid(pid as i32, &mut status, 0) };
    if &buf[..n as usize] != b"hello" || status != 0 {
        println!("wrong message {:?}", &buf[..n as usize]);
        exit(3)
    }
    report(0)
}

fn tcp_connect(port: u16) -> ! {
    let fd = socket(libc::AF_INET, libc::SOCK_STREAM, 0);
    let addr = sockaddr_in(port);
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    report(unsafe { libc::connect(fd, &addr as *const _ as *const libc::sockaddr, len) } as i64)
}

fn tcp_bind() -> ! {
    let fd = socket(libc::AF_INET, libc::SOCK_STREAM, 0);
    let addr = sockaddr_in(0);
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    report(unsafe { libc::bind(fd, &addr as *const _ as *const libc::sockaddr, len) } as i64)
}

fn udp_send(port: u16) -> ! {
    let fd = socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
    let addr = sockaddr_in(port);
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    let msg = b"escape";
    report(unsafe {
        libc::sendto(
            fd,
            msg.as_ptr().cast(),
            msg.len(),
            0,
            &addr as *const _ as *const libc::sockaddr,
            len,
        )
    } as i64)
}

/// Binds an abstract name inside the sandbox and connects to it: same domain, allowed.
fn abstract_self(name: &str) -> ! {
    let server = socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
    let (addr, len) = sockaddr_un(name);
    let sa = &addr as *const _ as *const libc::sockaddr;
    must(unsafe { libc::bind(server, sa, len) } as i64);
    must(unsafe { libc::listen(server, 1) } as i64);
    let client = socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
    report(unsafe { libc::connect(client, sa, len) } as i64)
}

/// Listens on a unix socket NAME (`@NAME`: abstract), prints `listening`, and accepts
/// until killed: the server outside the sandbox that `unix-connect` tries to reach.
fn abstract_listen(name: &str) -> ! {
    let server = socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
    let (addr, len) = sockaddr_un(name);
    let sa = &addr as *const _ as *const libc::sockaddr;
    must(unsafe { libc::bind(server, sa, len) } as i64);
    serve(server)
}

/// Listens on 127.0.0.1:PORT like [`abstract_listen`]: what `tcp-connect` tries to reach.
fn tcp_serve(port: u16) -> ! {
    let server = socket(libc::AF_INET, libc::SOCK_STREAM, 0);
    let one: libc::c_int = 1;
    let size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    let opt = &one as *const libc::c_int as *const libc::c_void;
    must(
        unsafe { libc::setsockopt(server, libc::SOL_SOCKET, libc::SO_REUSEADDR, opt, size) } as i64,
    );
    let addr = sockaddr_in(port);
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    must(unsafe { libc::bind(server, &addr as *const _ as *const libc::sockaddr, len) } as i64);
    serve(server)
}

/// Listens on the bound `server`, prints `listening`, and accepts until killed.
fn serve(server: i32) -> ! {
    must(unsafe { libc::listen(server, 8) } as i64);
    println!("listening");
    loop {
        let client = unsafe { libc::accept(server, std::ptr::null_mut(), std::ptr::null_mut()) };
        if client >= 0 {
            unsafe { libc::close(client) };
        }
    }
}

fn open_flags(path: &str, flags: i32) -> i64 {
    unsafe { libc::open(c(path).as_ptr(), flags | libc::O_CLOEXEC, 0o644) as i64 }
}

fn write_path(path: &str) -> ! {
    let fd = must(open_flags(
        path,
        libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND,
    ));
    report(unsafe { libc::write(fd as i32, b"escaped\n".as_ptr().cast(), 8) } as i64)
}

fn read_path(path: &str) -> ! {
    let fd = must(open_flags(path, libc::O_RDONLY));
    let mut buf = [0u8; 64];
    report(unsafe { libc::read(fd as i32, buf.as_mut_ptr().cast(), buf.len()) } as i64)
}

/// ptrace-style access to another process's memory through /proc.
fn proc_mem(pid: i32) -> ! {
    report(open_flags(&format!("/proc/{pid}/mem"), libc::O_RDONLY))
}

fn raw_clone(flags: u64) -> ! {
    let pid =
        must(unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) });
    if pid == 0 {
        unsafe { libc::_exit(0) }
    }
    let mut status = 0;
    unsafe { libc::waitpid(pid as i32, &mut status, 0) };
    report(0)
}

fn mount_tmpfs(dir: &str) -> ! {
    // Outside the sandbox, work in a private mount namespace so the host is untouched;
    // inside, unshare is refused as well and the mount is tried as is.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } == 0 {
        let root = c("/");
        let none = c("none");
        must(unsafe {
            libc::mount(
                none.as_ptr(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
        } as i64);
    }
    let (src, target, fstype) = (c("tmpfs"), c(dir), c("tmpfs"));
    report(unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    } as i64)
}

fn bpf_map() -> ! {
    // union bpf_attr for BPF_MAP_CREATE: map_type, key_size, value_size, max_entries.
    let mut attr = [0u32; 32];
    attr[0] = 2; // BPF_MAP_TYPE_ARRAY
    attr[1] = 4;
    attr[2] = 4;
    attr[3] = 1;
    report(unsafe {
        libc::syscall(
            libc::SYS_bpf,
            0, // BPF_MAP_CREATE
            attr.as_ptr(),
            std::mem::size_of_val(&attr),
        )
    })
}

fn perf_event() -> ! {
    // struct perf_event_attr: type (u32), size (u32), config (u64), ..., flags at 40.
    let mut attr = [0u8; 128];
    attr[0..4].copy_from_slice(&1u32.to_ne_bytes()); // PERF_TYPE_SOFTWARE
    attr[4..8].copy_from_slice(&128u32.to_ne_bytes());
    // config 0: PERF_COUNT_SW_CPU_CLOCK; flags: disabled | exclude_kernel | exclude_hv.
    let flags: u64 = 1 | (1 << 5) | (1 << 6);
    attr[40..48].copy_from_slice(&flags.to_ne_bytes());
    report(unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.as_ptr(),
            0,
            -1,
            -1,
            8u64, // PERF_FLAG_FD_CLOEXEC
        )
    })
}

fn io_uring() -> ! {
    // struct io_uring_params is 120 bytes; all zero asks for defaults.
    let mut params = [0u8; 120];
    report(unsafe { libc::syscall(libc::SYS_io_uring_setup, 1u32, params.as_mut_ptr()) })
}

fn open_by_handle(path: &str) -> ! {
    // struct file_handle { u32 handle_bytes; i32 handle_type; u8 f_handle[]; }
    let mut handle = [0u32; 34];
    handle[0] = 128;
    let mut mount_id = 0i32;
    must(unsafe {
        libc::syscall(
            libc::SYS_name_to_handle_at,
            libc::AT_FDCWD,
            c(path).as_ptr(),
            handle.as_mut_ptr(),
            &mut mount_id,
            0,
        )
    });
    let dir = must(open_flags("/", libc::O_RDONLY | libc::O_DIRECTORY));
    report(unsafe {
        libc::syscall(
            libc::SYS_open_by_handle_at,
            dir,
            handle.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    })
}

#[cfg(target_arch = "x86_64")]
fn int80_getpid() -> ! {
    // The ia32 entry point: eax 20 is getpid in the i386 table.
    let mut ret: i32 = 20;
    unsafe {
        std::arch::asm!("int 0x80", inout("eax") ret, options(nostack));
    }
    if ret < 0 {
        println!("errno {}", errno_name(-ret));
        exit(1)
    }
    println!("ok");
    exit(0)
}

#[cfg(target_arch = "x86_64")]
fn int80_dgram_pair() -> ! {
    // The ia32 table's own socketpair (360), with the result array below 4 GiB where a
    // 32-bit pointer reaches it.
    let page = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_32BIT,
            -1,
            0,
        )
    };
    if page == libc::MAP_FAILED {
        fail()
    }
    let mut ret: i32 = 360;
    unsafe {
        // rbx belongs to LLVM: the family goes in through another register.
        std::arch::asm!(
            "xchg {family:e}, ebx",
            "int 0x80",
            "xchg {family:e}, ebx",
            family = inout(reg) libc::AF_UNIX => _,
            inout("eax") ret,
            in("ecx") libc::SOCK_DGRAM,
            in("edx") 0,
            in("esi") page as usize as u32,
            options(nostack),
        );
    }
    if ret < 0 {
        println!("errno {}", errno_name(-ret));
        exit(1)
    }
    println!("ok");
    exit(0)
}

#[cfg(not(target_arch = "x86_64"))]
fn int80_dgram_pair() -> ! {
    eprintln!("attack: int80 exists only on x86_64");
    exit(2)
}

#[cfg(not(target_arch = "x86_64"))]
fn int80_getpid() -> ! {
    eprintln!("attack: int80 exists only on x86_64");
    exit(2)
}

/// The capability, no_new_privs and seccomp lines of /proc/self/status.
fn status() -> ! {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    for line in text.lines() {
        if line.starts_with("Cap") || line.starts_with("NoNewPrivs") || line.starts_with("Seccomp:")
        {
            println!("{line}");
        }
    }
    exit(0)
}

/// Which descriptors above 2 are open.
fn fds() -> ! {
    let mut open: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    open.sort();
    // The directory listing itself was the highest descriptor, and is closed by now.
    let open: Vec<String> = open
        .into_iter()
        .filter(|&fd| fd > 2 && unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0)
        .map(|fd| fd.to_string())
        .collect();
    println!("fds [{}]", open.join(","));
    exit(0)
}

/// A mode written in octal.
fn octal(args: &[String], i: usize) -> u32 {
    u32::from_str_radix(arg(args, i), 8).unwrap_or_else(|_| {
        eprintln!("attack: argument {i} is not an octal mode");
        exit(2)
    })
}

// Metadata: each by path and by descriptor, as the kernel's raw calls.

fn chmod_path(path: &str, mode: u32) -> ! {
    let p = c(path);
    report(unsafe { libc::syscall(libc::SYS_fchmodat, libc::AT_FDCWD, p.as_ptr(), mode) })
}

/// `fchmod` on a descriptor opened read-only: no write access is needed.
fn fchmod_path(path: &str, mode: u32) -> ! {
    let p = c(path);
    let fd = must(unsafe { libc::open(p.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) } as i64);
    report(unsafe { libc::syscall(libc::SYS_fchmod, fd, mode) })
}

/// Through the inherited descriptor `fd` itself: `fchmod` to `mode`, `fchown` to the
/// caller's own uid and gid, `futimens` to now; the first failure is reported.
fn fd_metadata(fd: i32, mode: u32) -> ! {
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    must(unsafe { libc::syscall(libc::SYS_fchmod, fd, mode) });
    must(unsafe { libc::syscall(libc::SYS_fchown, fd, uid, gid) });
    report(unsafe {
        libc::syscall(
            libc::SYS_utimensat,
            fd,
            std::ptr::null::<u8>(),
            std::ptr::null::<u8>(),
            0,
        )
    })
}

/// `futimesat(fd, NULL, NULL)`: the descriptor's own file, times to now (the old call
/// with a null name, as `utimensat` takes one; x86_64 has it).
fn futimesat_fd(fd: i32) -> ! {
    #[cfg(target_arch = "x86_64")]
    report(unsafe {
        libc::syscall(
            libc::SYS_futimesat,
            fd,
            std::ptr::null::<u8>(),
            std::ptr::null::<u8>(),
        )
    });
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = fd;
        report(0)
    }
}

/// A read lease on `path` (opened for reading): while it is held, whoever opens the
/// file for writing waits for the lease-break time.
fn setlease(path: &str) -> ! {
    let fd = must(open_flags(path, libc::O_RDONLY));
    report(unsafe { libc::fcntl(fd as i32, libc::F_SETLEASE, libc::F_RDLCK) } as i64)
}

/// `FS_IOC_REMOVE_ENCRYPTION_KEY` through `path` (opened for reading) with an all-zero
/// argument: a filesystem-wide call, whatever file the descriptor names.
fn remove_encryption_key(path: &str) -> ! {
    let fd = must(open_flags(path, libc::O_RDONLY));
    let mut arg = [0u8; 64];
    report(unsafe { libc::ioctl(fd as i32, 0xc040_6618_u32 as _, arg.as_mut_ptr()) } as i64)
}

/// Changes the owner to the caller's own uid and gid (allowed to any owner).
fn chown_self(path: &str) -> ! {
    let p = c(path);
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    report(unsafe { libc::syscall(libc::SYS_fchownat, libc::AT_FDCWD, p.as_ptr(), uid, gid, 0) })
}

/// Sets the access and modification times to now (`touch`).
fn touch(path: &str) -> ! {
    let p = c(path);
    report(unsafe {
        libc::syscall(
            libc::SYS_utimensat,
            libc::AT_FDCWD,
            p.as_ptr(),
            std::ptr::null::<u8>(),
            0,
        )
    })
}

/// `FS_IOC_SET_ENCRYPTION_POLICY` with a version 1 policy (AES-256-XTS contents,
/// AES-256-CTS names, a made-up key descriptor, which version 1 does not check) on the
/// empty directory `path`, opened for reading only: once set, nothing can be created in
/// it without that key.
fn encrypt_dir(path: &str) -> ! {
    let fd = must(open_flags(path, libc::O_RDONLY | libc::O_DIRECTORY));
    let policy: [u8; 12] = [0, 1, 4, 0, 1, 1, 1, 1, 1, 1, 1, 1];
    // SAFETY: the ioctl reads 12 bytes from a local array that outlives it.
    report(unsafe { libc::ioctl(fd as i32, 0x800c_6613_u32 as _, policy.as_ptr()) } as i64)
}

fn setxattr(path: &str, name: &str) -> ! {
    let (p, n) = (c(path), c(name));
    let value = b"stockade";
    report(unsafe {
        libc::syscall(
            libc::SYS_setxattr,
            p.as_ptr(),
            n.as_ptr(),
            value.as_ptr(),
            value.len(),
            0,
        )
    })
}

fn removexattr(path: &str, name: &str) -> ! {
    let (p, n) = (c(path), c(name));
    report(unsafe { libc::syscall(libc::SYS_removexattr, p.as_ptr(), n.as_ptr()) })
}

/// Creates `path` with `mode` (set-uid bits included) in one `openat`.
fn create_with_mode(path: &str, mode: u32) -> ! {
    let p = c(path);
    let flags = libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC;
    report(unsafe { libc::syscall(libc::SYS_openat, libc::AT_FDCWD, p.as_ptr(), flags, mode) })
}

// Other processes: each reads the current setting and writes it back unchanged, so a
// success changes nothing but proves the write was allowed.

fn prlimit(pid: i32) -> ! {
    let mut old = libc::rlimit64 {
        rlim_cur: 0,
        rlim_max: 0,
    };
    let none = std::ptr::null::<libc::rlimit64>();
    must(unsafe { libc::syscall(libc::SYS_prlimit64, pid, libc::RLIMIT_CORE, none, &mut old) });
    let out = std::ptr::null_mut::<libc::rlimit64>();
    report(unsafe { libc::syscall(libc::SYS_prlimit64, pid, libc::RLIMIT_CORE, &old, out) })
}

fn setpriority(pid: i32) -> ! {
    // getpriority's raw call returns 20 - nice, never negative.
    let raw = must(unsafe { libc::syscall(libc::SYS_getpriority, libc::PRIO_PROCESS, pid) });
    report(unsafe { libc::syscall(libc::SYS_setpriority, libc::PRIO_PROCESS, pid, 20 - raw) })
}

fn affinity(pid: i32) -> ! {
    let mut mask = [0u64; 16];
    let size = std::mem::size_of_val(&mask);
    let got =
        must(unsafe { libc::syscall(libc::SYS_sched_getaffinity, pid, size, mask.as_mut_ptr()) });
    report(unsafe { libc::syscall(libc::SYS_sched_setaffinity, pid, got, mask.as_ptr()) })
}

fn ioprio(pid: i32) -> ! {
    const WHO_PROCESS: i32 = 1;
    let prio = must(unsafe { libc::syscall(libc::SYS_ioprio_get, WHO_PROCESS, pid) });
    report(unsafe { libc::syscall(libc::SYS_ioprio_set, WHO_PROCESS, pid, prio) })
}

fn scheduler(pid: i32) -> ! {
    let policy = must(unsafe { libc::syscall(libc::SYS_sched_getscheduler, pid) });
    // The kernel's sched_param is one int, the priority (musl's libc adds fields).
    let priority: libc::c_int = 0;
    report(unsafe { libc::syscall(libc::SYS_sched_setscheduler, pid, policy, &priority) })
}

// System V IPC and POSIX message queues.

/// Attaches the shared memory segment `id` (created outside) and reads its first byte.
fn shm_read(id: i32) -> ! {
    let addr = unsafe { libc::shmat(id, std::ptr::null(), libc::SHM_RDONLY) };
    if addr as isize == -1 {
        fail()
    }
    let first = unsafe { *(addr as *const u8) };
    println!("ok {first}");
    exit(0)
}

/// Creates a private segment and removes it at once (so a success leaves nothing).
fn shm_create() -> ! {
    let id = must(unsafe { libc::shmget(libc::IPC_PRIVATE, 4096, 0o600) } as i64) as i32;
    unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
    report(0)
}

fn msg_create() -> ! {
    let id = must(unsafe { libc::msgget(libc::IPC_PRIVATE, 0o600) } as i64) as i32;
    unsafe { libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
    report(0)
}

fn sem_create() -> ! {
    let id = must(unsafe { libc::semget(libc::IPC_PRIVATE, 1, 0o600) } as i64) as i32;
    unsafe { libc::semctl(id, 0, libc::IPC_RMID) };
    report(0)
}

/// Opens (creating) the POSIX message queue `/NAME` and unlinks it again.
fn mq_create(name: &str) -> ! {
    // The system call takes the name without the leading slash libc strips.
    let n = c(name);
    let flags = libc::O_CREAT | libc::O_RDWR | libc::O_CLOEXEC;
    let fd = must(unsafe {
        libc::syscall(
            libc::SYS_mq_open,
            n.as_ptr(),
            flags,
            0o600,
            std::ptr::null::<u8>(),
        )
    });
    unsafe {
        libc::close(fd as i32);
        libc::syscall(libc::SYS_mq_unlink, n.as_ptr());
    }
    report(0)
}

// TCP rules Landlock's port hooks do not see.

/// Connects to `port` on loopback by TCP Fast Open (`sendto` with MSG_FASTOPEN: no
/// `connect`), sending data; then waits for the handshake to complete.
fn tfo_sendto(port: u16) -> ! {
    let fd = socket(libc::AF_INET, libc::SOCK_STREAM, 0);
    let addr = sockaddr_in(port);
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    let msg = b"escape";
    report(unsafe {
        libc::sendto(
            fd,
            msg.as_ptr().cast(),
            msg.len(),
            libc::MSG_FASTOPEN,
            &addr as *const _ as *const libc::sockaddr,
            len,
        )
    } as i64)
}

/// Asks for Fast Open on `connect` (`TCP_FASTOPEN_CONNECT`), then connects to `port`.
fn tfo_connect(port: u16) -> ! {
    let fd = socket(libc::AF_INET, libc::SOCK_STREAM, 0);
    let one: libc::c_int = 1;
    let size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    must(unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_FASTOPEN_CONNECT,
            &one as *const _ as *const libc::c_void,
            size,
        )
    } as i64);
    let addr = sockaddr_in(port);
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    report(unsafe { libc::connect(fd, &addr as *const _ as *const libc::sockaddr, len) } as i64)
}

/// `listen` on an unbound TCP socket: the kernel binds it to a free port itself.
fn tcp_listen() -> ! {
    let fd = socket(libc::AF_INET, libc::SOCK_STREAM, 0);
    report(unsafe { libc::listen(fd, 1) } as i64)
}

/// An iovec of the one byte in `byte`.
fn one_byte(byte: &mut [u8; 1]) -> libc::iovec {
    libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    }
}

/// Room for one descriptor in a control message.
fn fd_control() -> Vec<u8> {
    vec![0u8; unsafe { libc::CMSG_SPACE(std::mem::size_of::<i32>() as u32) } as usize]
}

/// A message of `iov` with `control` as its control buffer.
fn message(iov: &mut libc::iovec, control: &mut [u8]) -> libc::msghdr {
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = control.len() as _;
    msg
}

/// Outside the sandbox: listens on the unix socket path `sock`, and sends the first
/// client a descriptor of the directory `dir` (`SCM_RIGHTS`), opened here, in the
/// caller's mount namespace.
fn send_dir(sock: &str, dir: &str) -> ! {
    let _ = std::fs::remove_file(sock);
    let fd = socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
    let (addr, len) = sockaddr_un(sock);
    must(unsafe { libc::bind(fd, &addr as *const _ as *const libc::sockaddr, len) } as i64);
    must(unsafe { libc::listen(fd, 1) } as i64);
    let conn =
        must(unsafe { libc::accept(fd, std::ptr::null_mut(), std::ptr::null_mut()) } as i64) as i32;
    let d = must(unsafe { libc::open(c(dir).as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY) } as i64)
        as i32;
    let mut byte = [b'd'];
    let mut iov = one_byte(&mut byte);
    let mut control = fd_control();
    let msg = message(&mut iov, &mut control);
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<i32>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<i32>(), d);
    }
    report(unsafe { libc::sendmsg(conn, &msg, 0) } as i64)
}

/// Inside: connects to `sock`, receives one directory descriptor from it and opens
/// `name` beneath it for reading (a lookup that starts in the sender's mount namespace).
fn recv_dir_read(sock: &str, name: &str) -> ! {
    let fd = socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
    let (addr, len) = sockaddr_un(sock);
    must(unsafe { libc::connect(fd, &addr as *const _ as *const libc::sockaddr, len) } as i64);
    let mut byte = [0u8];
    let mut iov = one_byte(&mut byte);
    let mut control = fd_control();
    let mut msg = message(&mut iov, &mut control);
    must(unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_CMSG_CLOEXEC) } as i64);
    let cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    if cmsg.is_null() {
        println!("no descriptor received");
        exit(2);
    }
    let dir = unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<i32>()) };
    report(unsafe { libc::openat(dir, c(name).as_ptr(), libc::O_RDONLY) } as i64)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let name = arg(&args, 0);
    match name {
        // Filesystem.
        "write" => write_path(arg(&args, 1)),
        "read" => read_path(arg(&args, 1)),
        "symlink-write" => {
            let (target, link) = (c(arg(&args, 1)), c(arg(&args, 2)));
            must(unsafe { libc::symlink(target.as_ptr(), link.as_ptr()) } as i64);
            write_path(arg(&args, 2))
        }
        "link" => {
            let (from, to) = (c(arg(&args, 1)), c(arg(&args, 2)));
            report(unsafe { libc::link(from.as_ptr(), to.as_ptr()) } as i64)
        }
        "rename" => {
            let (from, to) = (c(arg(&args, 1)), c(arg(&args, 2)));
            report(unsafe { libc::rename(from.as_ptr(), to.as_ptr()) } as i64)
        }
        "truncate" => {
            let path = c(arg(&args, 1));
            report(unsafe { libc::truncate(path.as_ptr(), 0) } as i64)
        }
        // An ioctl on a device opened here (TCGETS: a terminal's; on /dev/zero the
        // driver answers ENOTTY, Landlock's IOCTL_DEV right EACCES before it).
        "ioctl-dev" => {
            let fd = must(open_flags(arg(&args, 1), libc::O_RDONLY | libc::O_NONBLOCK));
            let mut termios: libc::termios = unsafe { std::mem::zeroed() };
            report(unsafe { libc::ioctl(fd as i32, libc::TCGETS, &mut termios) } as i64)
        }
        // Protected paths without the stage: the ways around a name.
        "opath-reopen-write" => {
            let fd = must(open_flags(arg(&args, 1), libc::O_PATH));
            write_path(&format!("/proc/self/fd/{fd}"))
        }
        "openat2-write" => openat2_write(arg(&args, 1)),
        "tmpfile-link" => tmpfile_link(arg(&args, 1), arg(&args, 2)),
        "swap-write" => swap_write(arg(&args, 1), arg(&args, 2), num(&args, 3)),
        "fd-write" => {
            let fd: i32 = num(&args, 1);
            report(unsafe { libc::write(fd, b"escaped\n".as_ptr().cast(), 8) } as i64)
        }
        "fds" => fds(),
        // Network.
        "tcp-connect" => tcp_connect(num(&args, 1)),
        "tcp-bind" => tcp_bind(),
        "udp-send" => udp_send(num(&args, 1)),
        "udp-socket" => report(socket(libc::AF_INET, libc::SOCK_DGRAM, 0) as i64),
        "mptcp-socket" => report(socket(libc::AF_INET, libc::SOCK_STREAM, 262) as i64),
        "tcp6-socket" => report(socket(libc::AF_INET6, libc::SOCK_STREAM, 0) as i64),
        "netlink-socket" => report(socket(libc::AF_NETLINK, libc::SOCK_RAW, 0) as i64),
        "unix-connect" => unix_connect(arg(&args, 1)),
        "send-dir" => send_dir(arg(&args, 1), arg(&args, 2)),
        "recv-dir-read" => recv_dir_read(arg(&args, 1), arg(&args, 2)),
        "abstract-self" => abstract_self(arg(&args, 1)),
        "abstract-listen" => abstract_listen(arg(&args, 1)),
        "tcp-serve" => tcp_serve(num(&args, 1)),
        "socketpair" => {
            let mut fds = [0i32; 2];
            report(unsafe {
                libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, fds.as_mut_ptr())
            } as i64)
        }
        "pair" => {
            unix_pair(pair_type(arg(&args, 1)));
            report(0)
        }
        "pair-talk" => pair_talk(arg(&args, 1)),
        "dgram-pair-send" => dgram_pair_send(arg(&args, 1)),
        "int80-dgram-pair" => int80_dgram_pair(),
        // Other processes.
        "kill" => {
            let (pid, sig): (i32, i32) = (num(&args, 1), num(&args, 2));
            report(unsafe { libc::kill(pid, sig) } as i64)
        }
        "kill-parent" => report(unsafe { libc::kill(libc::getppid(), 0) } as i64),
        // Join process group GROUP (it must be in the caller's session), then signal the
        // caller's own group: `kill(0, SIG)` reaches GROUP's other members from there.
        "setpgid-kill" => {
            let (group, sig): (i32, i32) = (num(&args, 1), num(&args, 2));
            must(unsafe { libc::setpgid(0, group) } as i64);
            report(unsafe { libc::kill(0, sig) } as i64)
        }
        // Signal 0 to every process this one may signal (`kill -9 -1` without the 9).
        "kill-all" => report(unsafe { libc::kill(-1, 0) } as i64),
        // The parent as the owner of a pipe: I/O on it would signal the parent.
        "setown-parent" => {
            let mut fds = [0i32; 2];
            must(unsafe { libc::pipe(fds.as_mut_ptr()) } as i64);
            report(unsafe { libc::fcntl(fds[0], libc::F_SETOWN, libc::getppid()) } as i64)
        }
        // A pidfd of the parent, then signal 0 through it.
        "pidfd-signal-parent" => {
            let fd = must(unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getppid(), 0) });
            report(unsafe { libc::syscall(libc::SYS_pidfd_send_signal, fd, 0, 0, 0) })
        }
        "ptrace" => {
            let pid: i32 = num(&args, 1);
            report(unsafe { libc::ptrace(libc::PTRACE_SEIZE, pid, 0usize, 0usize) } as i64)
        }
        "proc-mem-parent" => proc_mem(unsafe { libc::getppid() }),
        "proc-mem" => proc_mem(num(&args, 1)),
        "proc-environ" => read_path(&format!("/proc/{}/environ", arg(&args, 1))),
        "process-vm-readv" => {
            // Our own memory: whether the call is allowed at all is the question.
            let pid = unsafe { libc::getpid() };
            let mut buf = [0u8; 8];
            let src = 0u64;
            let local = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            let remote = libc::iovec {
                iov_base: &src as *const u64 as *mut libc::c_void,
                iov_len: 8,
            };
            report(unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) } as i64)
        }
        // Terminal.
        "tiocsti" => {
            let ch = b'#';
            report(unsafe { libc::ioctl(0, libc::TIOCSTI, &ch) } as i64)
        }
        "tioclinux" => {
            let sub = 7u8; // TIOCL_GETSHIFTSTATE-like read-only subcode
            report(unsafe { libc::ioctl(0, libc::TIOCLINUX, &sub) } as i64)
        }
        // Makes its own group the foreground of the terminal on stdout (SIGTTOU ignored,
        // as a background group must), turns on TOSTOP so that any other group writing
        // to it is stopped, prints the result, then waits to be ended (or, with
        // `then-exit`, exits).
        "take-terminal" => {
            let taken = unsafe {
                libc::signal(libc::SIGTTOU, libc::SIG_IGN);
                let mut t: libc::termios = std::mem::zeroed();
                if libc::tcsetpgrp(1, libc::getpgrp()) == 0 && libc::tcgetattr(1, &mut t) == 0 {
                    t.c_lflag |= libc::TOSTOP;
                    libc::tcsetattr(1, libc::TCSANOW, &t)
                } else {
                    -1
                }
            };
            if taken < 0 {
                println!(
                    "errno {}",
                    errno_name(Error::last_os_error().raw_os_error().unwrap_or(0))
                );
            } else {
                println!("ok");
            }
            if args.get(1).map(String::as_str) != Some("then-exit") {
                std::thread::sleep(std::time::Duration::from_secs(600));
            }
            exit(0)
        }
        "session" => {
            let (sid, pid) = unsafe { (libc::getsid(0), libc::getpid()) };
            println!("{}", if sid == pid { "leader" } else { "member" });
            exit(0)
        }
        // Kernel surface.
        "io-uring" => io_uring(),
        "unshare-user" => report(unsafe { libc::unshare(libc::CLONE_NEWUSER) } as i64),
        "clone-newuser" => raw_clone(libc::CLONE_NEWUSER as u64 | libc::SIGCHLD as u64),
        "setns-uts" => {
            let fd = must(open_flags("/proc/self/ns/uts", libc::O_RDONLY));
            report(unsafe { libc::setns(fd as i32, libc::CLONE_NEWUTS) } as i64)
        }
        "mount" => mount_tmpfs(arg(&args, 1)),
        "keyctl" => report(unsafe {
            // KEYCTL_GET_KEYRING_ID of this process's own keyring, creating it.
            libc::syscall(libc::SYS_keyctl, 0, -2i32, 1)
        }),
        "bpf" => bpf_map(),
        "perf" => perf_event(),
        "userfaultfd" => report(unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC) }),
        "personality" => report(unsafe { libc::personality(0x0004_0000) } as i64),
        "personality-query" => report(unsafe { libc::personality(0xffff_ffff) } as i64),
        "clone3" => report(unsafe {
            // A null, zero-sized clone_args: EINVAL where clone3 exists.
            libc::syscall(libc::SYS_clone3, std::ptr::null::<u8>(), 0usize)
        }),
        "fork" => raw_clone(libc::SIGCHLD as u64),
        "open-by-handle" => open_by_handle(arg(&args, 1)),
        "x32-getpid" => report(unsafe { libc::syscall(libc::SYS_getpid | 0x4000_0000) }),
        "int80" => int80_getpid(),
        "status" => status(),
        // Metadata.
        "chmod" => chmod_path(arg(&args, 1), octal(&args, 2)),
        "fchmod" => fchmod_path(arg(&args, 1), octal(&args, 2)),
        "fd-metadata" => fd_metadata(num(&args, 1), octal(&args, 2)),
        "futimesat-fd" => futimesat_fd(num(&args, 1)),
        "setlease" => setlease(arg(&args, 1)),
        "remove-encryption-key" => remove_encryption_key(arg(&args, 1)),
        "chown-self" => chown_self(arg(&args, 1)),
        "touch" => touch(arg(&args, 1)),
        "setxattr" => setxattr(arg(&args, 1), arg(&args, 2)),
        "encrypt-dir" => encrypt_dir(arg(&args, 1)),
        "removexattr" => removexattr(arg(&args, 1), arg(&args, 2)),
        "create-mode" => create_with_mode(arg(&args, 1), octal(&args, 2)),
        // Other processes (pid 0: the caller itself).
        "prlimit" => prlimit(num(&args, 1)),
        "setpriority" => setpriority(num(&args, 1)),
        "affinity" => affinity(num(&args, 1)),
        "ioprio" => ioprio(num(&args, 1)),
        "scheduler" => scheduler(num(&args, 1)),
        // IPC.
        "shm-read" => shm_read(num(&args, 1)),
        "shm-create" => shm_create(),
        "msg-create" => msg_create(),
        "sem-create" => sem_create(),
        "mq-create" => mq_create(arg(&args, 1)),
        // TCP.
        "tfo-sendto" => tfo_sendto(num(&args, 1)),
        "tfo-connect" => tfo_connect(num(&args, 1)),
        "tcp-listen" => tcp_listen(),
        _ => {
            eprintln!("attack: unknown attack {name:?}");
            exit(2)
        }
    }
}

/// `openat2(path, O_WRONLY|O_APPEND)`, then a write.
fn openat2_write(path: &str) -> ! {
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let how = OpenHow {
        flags: (libc::O_WRONLY | libc::O_APPEND | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: 0,
    };
    let p = c(path);
    // SAFETY: a NUL-terminated path and a struct that live across the call.
    let fd = must(unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            p.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    });
    report(unsafe { libc::write(fd as i32, b"escaped\n".as_ptr().cast(), 8) } as i64)
}

/// An unnamed file in DIR, written, then given the name NEW (`linkat` through its
/// `/proc/self/fd` name, as glibc's documentation shows).
fn tmpfile_link(dir: &str, new: &str) -> ! {
    let fd = must(open_flags(dir, libc::O_TMPFILE | libc::O_WRONLY));
    must(unsafe { libc::write(fd as i32, b"unnamed\n".as_ptr().cast(), 8) } as i64);
    let (from, to) = (c(&format!("/proc/self/fd/{fd}")), c(new));
    // SAFETY: NUL-terminated paths.
    report(unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    } as i64)
}

/// A thread rewrites one path buffer between GOOD and BAD (same length) while this
/// one opens it for appending ROUNDS times, writing through each descriptor: a checker
/// that read the path and let the kernel read it again would sometimes write BAD.
/// Prints how many opens succeeded (`opened N`); exits 0.
fn swap_write(good: &str, bad: &str, rounds: usize) -> ! {
    assert_eq!(good.len(), bad.len(), "swap-write: same-length paths");
    let len = good.len();
    let buf: &'static mut [u8] = Box::leak(vec![0u8; len + 1].into_boxed_slice());
    buf[..len].copy_from_slice(good.as_bytes());
    let addr = buf.as_mut_ptr() as usize;
    let (good, bad) = (good.as_bytes().to_vec(), bad.as_bytes().to_vec());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let flipper = std::thread::spawn(move || {
        let mut which = false;
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
            let src = if which { &good } else { &bad };
            for (i, b) in src.iter().enumerate() {
                // SAFETY: the buffer is leaked (lives for ever) and `len` long; the
                // race on its bytes is the point of this helper.
                unsafe { std::ptr::write_volatile((addr as *mut u8).add(i), *b) };
            }
            which = !which;
        }
    });
    let mut opened = 0;
    for _ in 0..rounds {
        // SAFETY: the buffer is NUL-terminated (its last byte is never written).
        let fd = unsafe {
            libc::open(
                addr as *const libc::c_char,
                libc::O_WRONLY | libc::O_APPEND | libc::O_CLOEXEC,
            )
        };
        if fd >= 0 {
            opened += 1;
            unsafe { libc::write(fd, b"swapped\n".as_ptr().cast(), 8) };
            unsafe { libc::close(fd) };
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = flipper.join();
    println!("opened {opened}");
    exit(0)
}
