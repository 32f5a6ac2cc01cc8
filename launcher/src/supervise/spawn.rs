//! Starting the command: a child process created straight into its cgroup, that either
//! executes or reports why it could not.
//!
//! With a cgroup the child is created by `clone3(CLONE_INTO_CGROUP)`, so it is a member
//! from its first instruction. The other way in, writing a pid to `cgroup.procs`,
//! migrates a running task: the kernel takes the cgroup threadgroup lock for writing,
//! which waits for an RCU grace period, measured here at 0.1-0.4 ms per command and
//! several ms under load, on the path of every command. Creating the child in place
//! takes that lock only for reading.
//!
//! Kernels without `clone3` or `CLONE_INTO_CGROUP` (before 5.7), and seccomp profiles
//! that hide `clone3` (container runtimes answer ENOSYS so that libc falls back to
//! `clone`), get the old way: a plain fork whose child writes itself into
//! `cgroup.procs` before it executes. Either way the command never runs outside its
//! group.
//!
//! The child runs `Command::exec` (std sets up stdio, the process group and the
//! pre-exec hook, then executes). If that fails, the child sends the errno back over a
//! close-on-exec pipe and exits, as `Command::spawn` does, so a command that could not
//! start is an error here and not an exit status.

use crate::control::binding::{ChildExec, Verified};
use crate::supervise::containment::Cgroup;
use nix::fcntl::OFlag;
use nix::unistd::Pid;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// A started command and the read ends of its output pipes.
#[derive(Debug)]
pub struct Spawned {
    pub pid: Pid,
    /// `None` when stdout is inherited.
    pub stdout: Option<File>,
    pub stderr: File,
}

/// Where the command's stdout goes (its stderr is always a pipe to the launcher).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stdout {
    Inherit,
    Pipe,
}

/// `clone3`'s argument block (`struct clone_args`, linux/sched.h), up to the `cgroup`
/// field that `CLONE_INTO_CGROUP` reads (CLONE_ARGS_SIZE_VER2).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// linux/sched.h; libc's constant is typed too narrow to hold it.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// Why the command did not start.
#[derive(Debug)]
pub enum SpawnError {
    /// The child could not be created in, or join, its cgroup: nothing was executed, and
    /// starting without the cgroup may work.
    Join(io::Error),
    /// Anything else: creating the process, setting it up, or executing the program.
    Start(io::Error),
    /// The verified executable was not the file at its path any more when the child
    /// was about to execute it: nothing was executed.
    Changed,
}

/// What the child reports before it exits without executing: which step failed.
const JOIN_FAILED: u8 = 1;
const START_FAILED: u8 = 0;
const CHANGED: u8 = 2;

/// Starts `cmd` (stdin as it is set; stdout and stderr as given here), inside `cgroup`
/// if there is one. With `verified`, the child checks the file once more as its last
/// step and executes it from that descriptor (see `binding::Verified`). Returns once the
/// child has executed, or with the reason it could not. The launcher must be
/// single-threaded (see `fork_child`).
pub fn spawn(
    mut cmd: Command,
    stdout: Stdout,
    cgroup: Option<&Cgroup>,
    verified: Option<&Verified>,
) -> Result<Spawned, SpawnError> {
    let start = SpawnError::Start;
    let (err_read, err_write) = pipe().map_err(start)?;
    cmd.stderr(Stdio::from(err_write));
    let out_read = match stdout {
        Stdout::Inherit => {
            cmd.stdout(Stdio::inherit());
            None
        }
        Stdout::Pipe => {
            let (read, write) = pipe().map_err(start)?;
            cmd.stdout(Stdio::from(write));
            Some(read)
        }
    };
    let (report_read, report_write) = pipe().map_err(start)?;
    let report_fd = report_write.as_raw_fd();
    // The fallback's `cgroup.procs`: open until the child has written itself into it.
    let mut procs: Option<File> = None;

    let child = match cgroup {
        None => fork_child(None).map_err(start)?,
        Some(cg) => match fork_child(Some(cg.dir_fd())) {
            Err(e) if clone3_unsupported(&e) => {
                let fd = procs
                    .insert(cg.open_procs().map_err(SpawnError::Join)?)
                    .as_raw_fd();
                // SAFETY: the hook runs in the forked child before exec and makes only
                // async-signal-safe calls (write, _exit) from buffers it does not
                // allocate, on descriptors opened before the fork.
                unsafe {
                    cmd.pre_exec(move || {
                        // Writing "0" moves the writer itself into the group, before it
                        // can fork.
                        if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                            report_and_exit(report_fd, JOIN_FAILED, &io::Error::last_os_error());
                        }
                        Ok(())
                    });
                }
                fork_child(None).map_err(start)?
            }
            Err(e) => return Err(SpawnError::Join(e)),
            Ok(child) => child,
        },
    };
    let Some(pid) = child else {
        // The child: execute, or report why not. It never returns into the launcher.
        if let Some(verified) = verified.cloned() {
            // SAFETY: the hook runs in the forked child before exec, after every other
            // hook (the group is joined by then); the launcher has one thread, so it may
            // allocate. It returns only to let `exec` start the file by name.
            unsafe {
                cmd.pre_exec(move || match verified.exec_in_child() {
                    Ok(()) => Ok(()),
                    Err(ChildExec::Changed) => {
                        report_and_exit(report_fd, CHANGED, &io::Error::from_raw_os_error(0))
                    }
                    Err(ChildExec::Failed(e)) => Err(e),
                });
            }
        }
        let err = cmd.exec();
        report_and_exit(report_fd, START_FAILED, &err);
    };

    // The parent: the child's ends of the pipes live in `cmd` and `report_write`.
    drop(report_write);
    drop(cmd);
    let mut report = [0u8; 5];
    match read_full(File::from(report_read), &mut report).map_err(start)? {
        0 => Ok(Spawned {
            pid,
            stdout: out_read.map(File::from),
            stderr: File::from(err_read),
        }),
        _ => {
            // It wrote why it could not execute, and exits at once: collect it.
            let _ = nix::sys::wait::waitpid(pid, None);
            let code = i32::from_ne_bytes([report[1], report[2], report[3], report[4]]);
            let err = io::Error::from_raw_os_error(code);
            Err(match report[0] {
                JOIN_FAILED => SpawnError::Join(err),
                CHANGED => SpawnError::Changed,
                _ => SpawnError::Start(err),
            })
        }
    }
}

/// In the child, before or instead of executing: tells the parent which step failed and
/// why, then exits without running the launcher's destructors or atexit handlers.
fn report_and_exit(fd: RawFd, step: u8, err: &io::Error) -> ! {
    let code = err.raw_os_error().unwrap_or(libc::EINVAL).to_ne_bytes();
    let report = [step, code[0], code[1], code[2], code[3]];
    // SAFETY: write(2) from a local buffer on a descriptor this process owns, then _exit.
    unsafe {
        libc::write(fd, report.as_ptr().cast(), report.len());
        libc::_exit(127)
    }
}

/// Creates the child process, in the cgroup whose directory `cgroup` is, if given.
/// Returns `None` in the child and its pid in the parent.
fn fork_child(cgroup: Option<RawFd>) -> io::Result<Option<Pid>> {
    let pid = match cgroup {
        Some(fd) => {
            let args = CloneArgs {
                flags: CLONE_INTO_CGROUP,
                exit_signal: libc::SIGCHLD as u64,
                cgroup: fd as u64,
                ..CloneArgs::default()
            };
            // SAFETY: clone3 without CLONE_VM and without a stack behaves as fork: the
            // child continues here on a copy of this address space. The launcher has one
            // thread (supervise/mod.rs), so no lock can be held by a thread that does not
            // exist in the child, and the child may allocate before it executes. `args`
            // lives across the call and its size is passed with it.
            unsafe {
                libc::syscall(
                    libc::SYS_clone3,
                    &args as *const CloneArgs,
                    std::mem::size_of::<CloneArgs>(),
                )
            }
        }
        // SAFETY: as above: fork in a single-threaded process.
        None => unsafe { libc::fork() as libc::c_long },
    };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(None),
        pid => Ok(Some(Pid::from_raw(pid as i32))),
    }
}

/// Whether `clone3` failed because this kernel (or a seccomp profile over it) does not
/// offer it or its `CLONE_INTO_CGROUP`, rather than because the group refused us.
fn clone3_unsupported(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::ENOSYS | libc::E2BIG | libc::EINVAL)
    )
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(io::Error::from)
}

/// Reads until `buf` is full or end of file; returns how many bytes came.
fn read_full(mut file: File, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}
