//! Starting the target: `execve` with exactly the request's environment, of the file
//! the binding check verified (binding.rs): from its descriptor, or by path when an
//! interpreter must open it by name.

use crate::binding::{Method, Start};
use crate::error::RunnerError;
use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use stockade_policy::LaunchRequest;

/// The interpreter for a file the kernel will not execute itself (`ENOEXEC`).
const SHELL: &str = "/bin/sh";

fn cstring(bytes: &[u8]) -> CString {
    // The request was validated: no NUL bytes anywhere in argv or the environment.
    CString::new(bytes).unwrap_or_default()
}

/// Execs the target. Returns only on failure.
///
/// SIGPIPE is back at the disposition the caller left for the `execve` (an ignored
/// signal stays ignored across `execve`: were the runner's own ignore passed on,
/// `yes | head -1` in the target would see EPIPE instead of dying by SIGPIPE as it does
/// outside the sandbox). It is set just around the attempt, which writes nothing, and
/// ignored again when it failed, so writing the runner's own failure line cannot kill it.
pub fn exec(request: &LaunchRequest, start: Start) -> RunnerError {
    sigpipe(INHERITED_SIGPIPE.load(Ordering::Relaxed));
    let err = start_target(request, start);
    sigpipe(libc::SIG_IGN);
    err
}

/// `execve` of what the binding check found; or the failure it already knew.
fn start_target(request: &LaunchRequest, start: Start) -> RunnerError {
    let program = request.argv[0].as_os_str();
    let target = match start {
        Start::Exec(target) => target,
        Start::NotFound => return failure(program, io::Error::from_raw_os_error(libc::ENOENT)),
        Start::NotExecutable { errno } => {
            return failure(program, io::Error::from_raw_os_error(errno));
        }
    };
    let argv: Vec<CString> = request.argv.iter().map(|a| cstring(a.as_bytes())).collect();
    let envp: Vec<CString> = request
        .env
        .iter()
        .map(|(k, v)| {
            let mut kv = Vec::with_capacity(k.len() + 1 + v.len());
            kv.extend_from_slice(k.as_bytes());
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            cstring(&kv)
        })
        .collect();
    let err = match target.method {
        Method::Descriptor => {
            let empty = c"";
            match nix::unistd::execveat(
                &target.fd,
                empty,
                &argv,
                &envp,
                nix::fcntl::AtFlags::AT_EMPTY_PATH,
            ) {
                Err(e) => io::Error::from(e),
                Ok(never) => match never {},
            }
        }
        Method::Path => exec_or_sh(&cstring(target.path.as_os_str().as_bytes()), &argv, &envp),
    };
    failure(program, err)
}

/// The SIGPIPE disposition the runner was started with (default or ignored: a handler
/// does not survive the `execve` that started it), which the target gets back.
static INHERITED_SIGPIPE: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);

/// Ignores SIGPIPE for the runner's own life, so that writing its failure line to a
/// closed pipe cannot kill it, and remembers the caller's disposition for the target.
/// Called first thing in `main`.
pub fn ignore_sigpipe_for_now() {
    let inherited = sigpipe(libc::SIG_IGN);
    if inherited != libc::SIG_ERR {
        INHERITED_SIGPIPE.store(inherited, Ordering::Relaxed);
    }
}

/// Sets SIGPIPE's disposition, returning the previous one.
fn sigpipe(disposition: libc::sighandler_t) -> libc::sighandler_t {
    // SAFETY: installs the default or ignore disposition for SIGPIPE; no handler code of
    // ours ever runs.
    unsafe { libc::signal(libc::SIGPIPE, disposition) }
}

/// One `execve`, retried as `/bin/sh FILE ARGS` when the kernel does not recognise the
/// file's format. Returns the error that stopped it.
fn exec_or_sh(path: &CString, argv: &[CString], envp: &[CString]) -> io::Error {
    let err = match nix::unistd::execve(path, argv, envp) {
        Err(e) => io::Error::from(e),
        Ok(never) => match never {},
    };
    if err.raw_os_error() != Some(libc::ENOEXEC) {
        return err;
    }
    let mut sh_argv = Vec::with_capacity(argv.len() + 1);
    sh_argv.push(cstring(SHELL.as_bytes()));
    sh_argv.push(path.clone());
    sh_argv.extend(argv.iter().skip(1).cloned());
    match nix::unistd::execve(&sh_argv[0], &sh_argv, envp) {
        Err(e) => io::Error::from(e),
        Ok(never) => match never {},
    }
}

/// The error for `program` that `err` stopped: not found (127) or not executable (126).
fn failure(program: &OsStr, err: io::Error) -> RunnerError {
    let program: OsString = program.to_os_string();
    if err.raw_os_error() == Some(libc::ENOENT) {
        RunnerError::NotFound { program }
    } else {
        RunnerError::CannotExecute {
            program,
            source: err,
        }
    }
}
