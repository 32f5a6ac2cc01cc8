//! The stage's last steps before the runner: descriptors and capabilities it must not
//! pass on, and the `execve` of the runner itself.

use super::error::StageError;
use std::ffi::OsString;
use stockade_policy::capability::CapabilitySet;

/// The runner's environment when the stage runs in the launcher's child (see
/// [`run_in_child`]); unset in a stage started by `execve`, whose environment is its own.
pub(super) static RUNNER_ENV: std::sync::OnceLock<Vec<(OsString, OsString)>> =
    std::sync::OnceLock::new();

/// Closes every descriptor marked close-on-exec, as `execve` would.
pub(super) fn close_exec_descriptors() {
    let close_if_cloexec = |fd: libc::c_int| {
        // SAFETY: fcntl queries a descriptor number; close ends this process's copy of a
        // descriptor that an `execve` would have closed, and nothing here holds it.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC != 0 {
                libc::close(fd);
            }
        }
    };
    match std::fs::read_dir("/proc/self/fd") {
        Ok(dir) => {
            // Collected first (the listing and its descriptor end with this statement):
            // that descriptor is close-on-exec too.
            let fds: Vec<libc::c_int> = dir
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .filter(|&fd| fd > 2)
                .collect();
            fds.into_iter().for_each(close_if_cloexec);
        }
        // No /proc: every descriptor up to the open-file limit.
        Err(_) => {
            // SAFETY: sysconf only reads a limit.
            let max = unsafe { libc::sysconf(libc::_SC_OPEN_MAX) }.clamp(1024, 65_536);
            (3..max as libc::c_int).for_each(close_if_cloexec);
        }
    }
}

/// Clears every capability set this process holds but `keep` (the runner clears them
/// again, and its bounding set): the watcher keeps what the command keeps, nothing else.
pub(super) fn drop_capabilities(keep: CapabilitySet) -> Result<(), StageError> {
    // Kept capabilities are all below 32: the first half holds them.
    crate::control::capabilities::restrict_to(keep.mask() as u32).map_err(|e| StageError {
        what: "cannot drop capabilities".into(),
        source: Some(e),
    })
}

pub(super) fn exec_runner(runner: &[OsString]) -> Result<i32, StageError> {
    let mut cmd = std::process::Command::new(&runner[0]);
    cmd.args(&runner[1..]);
    if let Some(env) = RUNNER_ENV.get() {
        cmd.env_clear().envs(env.iter().map(|(k, v)| (k, v)));
    }
    let err = std::os::unix::process::CommandExt::exec(&mut cmd);
    Err(StageError {
        what: format!("cannot execute the runner {}", runner[0].to_string_lossy()),
        source: Some(err),
    })
}

/// Points init's standard descriptors at `/dev/null` once the runner has its own copies.
/// Init outlives the command while anything it left behind runs (`--keep-background`):
/// holding the command's stdout and stderr open would keep every reader of them (the
/// executor, `stockade run`'s capture) waiting for an end of file that never comes, where
/// without the stage a background process that redirected its output releases them.
pub(super) fn release_stdio() {
    // SAFETY: open of a NUL-terminated literal; dup2 and close on descriptors this
    // process owns.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        for fd in 0..3 {
            if null >= 0 {
                libc::dup2(null, fd);
            } else {
                libc::close(fd);
            }
        }
        if null > 2 {
            libc::close(null);
        }
    }
}
