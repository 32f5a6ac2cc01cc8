//! The namespace stage: the privileged setup that runs between the executor and the
//! runner when the policy asks for what only mounts and namespaces can hold.
//!
//! ConfinedArgv then starts `stockade __stage [STAGE FLAGS] -- RUNNER ARGS...` instead of
//! the runner. This process:
//! 1. creates the namespaces: user (when not root, the caller's uid and gid mapped to
//!    themselves), mount, IPC, pid when asked, and network when the network is denied
//!    (`stockade_policy::Policy::own_network`): it brings the namespace's loopback up,
//!    the command's own for the servers it starts; for the network by name it also
//!    listens on the proxy's port there and sends that socket to the proxy host outside
//!    (see `crate::proxy::host`), so the only way out of the namespace is the proxy;
//! 2. makes every mount private and read-only, then binds each writable root back
//!    read-write and each protected path read-only again on top of that (so a protected
//!    path inside a writable root stays read-only), mounts a fresh tmpfs on `/tmp` when it
//!    is private, and a fresh `/proc` for the pid namespace;
//! 3. with a pid namespace, forks: the child is the namespace's init (it reaps, forwards
//!    signals, and reports the command's wait status to the outer process through a
//!    pipe), the outer process replays that status (exit code, or the same signal), so
//!    supervision and the exit-code contract are unchanged;
//! 4. drops every capability it holds and `execve`s the runner, which applies Landlock
//!    and seccomp as without the stage (the process that stays to watch keeps the
//!    capabilities the command keeps, and no other: see 5);
//! 5. while the command runs, looks at the shared writable roots the caller owns (`/tmp`
//!    as root) every few milliseconds and puts their mode and owner back when they
//!    changed; once it has ended, checks the protected names that did not exist; and
//!    appends what it found to the report file (`stockade_policy::stage_report`). A
//!    command keeping `CAP_CHOWN` can give such a root to another user, after which its
//!    owner (root, without capabilities) could not take it back: so the watcher keeps
//!    what the command keeps, whatever the command can change it can put back.
//!    Without a pid namespace it forks for this only when there is something to watch,
//!    and waits for the runner as its parent.
//!
//! Every failure prints one `stockade-runner: namespace stage: ...` line and exits 125:
//! to the executor the stage is part of the runner, and nothing runs unconfined.
//!
//! Landlock and seccomp still do the fine-grained work; the stage adds what they cannot
//! express: mode and time changes outside the writable roots fail with `EROFS`,
//! repository start-up files cannot be rewritten, `/tmp` can be private, and other
//! processes (their `/proc/PID/cmdline`, System V IPC objects) are out of sight.
//!
//! This file is the stage's flow (`main`, `enter`); each step lives in the file named
//! for it: `args` (the command line `confine` writes), `namespaces` (step 1, and `trial`,
//! whether the machine allows it), `mounts` (2), `init` (3, and the parent that waits without a pid namespace), `exec` (4),
//! `watch` (5), `error` (the one failure line).

mod args;
mod error;
mod exec;
mod init;
mod mounts;
mod namespaces;
mod terminals;
mod trial;
mod watch;

use args::parse;
pub(crate) use args::{NetProxy, SUBCOMMAND, Watch, argv, own_args};
pub(crate) use error::StageError;
use error::{TAG, check, fail, report};
use exec::{RUNNER_ENV, close_exec_descriptors, exec_runner};
pub(crate) use init::{forward_signals_to, replay, wait_for};
use init::{outer, parent_of_runner};
use mounts::mounts;
pub(crate) use namespaces::mount_namespace;
use namespaces::{map_ids, namespace_flags, needs_user_namespace};
use std::ffi::OsString;
use stockade_policy::exit;
use stockade_policy::failure_tag;
use stockade_policy::stage::MountPlan;
pub(crate) use trial::{available, available_remembered};
use watch::Watcher;
pub(crate) use watch::{check_shared, open_dir_no_symlinks};

/// `stockade __stage ...`: never returns on success (the runner replaces it, or the
/// outer process replays the command's wait status).
pub fn main(args: &[OsString]) -> i32 {
    let err = match parse(args) {
        Ok((spec, watch, net, runner)) => {
            // Failure lines carry the runner's failure tag, as the runner's own do: to
            // the executor the stage is part of the runner.
            let tag = runner
                .iter()
                .position(|a| a == failure_tag::FLAG)
                .and_then(|i| runner.get(i + 1))
                .and_then(|t| t.to_str())
                .filter(|t| failure_tag::is_valid(t))
                .map(str::to_string);
            let _ = TAG.set(tag);
            match enter(&spec, &watch, net, &runner) {
                Ok(code) => return code,
                Err(e) => e,
            }
        }
        Err(e) => fail(e),
    };
    report(&err);
    exit::RUNNER_FAILURE
}

/// The stage run in the child `stockade run` forks for the command, instead of executing
/// `stockade __stage` there: the same code on the same arguments, without a second start
/// of this binary (one `execve` and the C library's start-up, on the path of every
/// command: bench/results.md). A stage started by a ConfinedArgv's executor is executed
/// as before. What an `execve` would have done for the stage is done here first: every
/// close-on-exec descriptor of the launcher is closed (none stays open in the processes
/// that outlive the command), SIGPIPE is ignored as the stage's `main` would, and the
/// runner is executed with `env` (the command's environment, which `execve` would have
/// given the stage), not the launcher's. Never returns.
///
/// # Safety
/// Only in a child forked from the single-threaded launcher (or proxy host), before
/// anything else runs there.
pub unsafe fn run_in_child(args: &[OsString], env: Vec<(OsString, OsString)>) -> ! {
    close_exec_descriptors();
    // SAFETY: setting a disposition to "ignore" in this single-threaded child.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let _ = RUNNER_ENV.set(env);
    let code = main(args);
    // SAFETY: ends the child without running the launcher's exit code (its stdout
    // buffer, its destructors): that is the launcher's, not the stage's.
    unsafe { libc::_exit(code) }
}

pub(super) fn enter(
    spec: &MountPlan,
    watch: &Watch,
    net: Option<NetProxy>,
    runner: &[OsString],
) -> Result<i32, StageError> {
    // SAFETY: getuid/getgid cannot fail and touch no memory.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    // Before anything else: the snapshot of each shared root is taken before the
    // command exists, and the report file is opened while it is still ours alone.
    let watcher = Watcher::open(watch)?;
    let own_net = spec.network || net.is_some();
    let flags = namespace_flags(spec, own_net, needs_user_namespace(uid, own_net));
    // SAFETY: unshare takes flags only; on success this (single-threaded) process is in
    // the new namespaces (the pid namespace applies to its children).
    let r = unsafe { libc::unshare(flags) };
    check(r as libc::c_long, || {
        "cannot create namespaces (unshare)".into()
    })?;
    if flags & libc::CLONE_NEWUSER != 0 {
        map_ids(uid, gid)?;
    }
    if let Some(net) = net {
        crate::proxy::netns::hand_over_listener(net.channel, net.port)
            .map_err(|(what, source)| StageError { what, source })?;
    } else if spec.network {
        // The command's own loopback, for the servers it starts and reaches itself.
        crate::proxy::netns::loopback_up().map_err(|(what, source)| StageError { what, source })?;
    }
    if spec.pids {
        return outer(spec, runner, watcher);
    }
    mounts(spec, runner)?;
    if watcher.is_idle() {
        return exec_runner(runner);
    }
    parent_of_runner(runner, watcher)
}

#[cfg(test)]
mod tests;
