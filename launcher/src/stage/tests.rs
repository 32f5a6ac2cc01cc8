//! The stage's unit tests: its command line read back byte for byte, the mount plan
//! and the reports, without creating namespaces.

use super::args::{NetProxy, Watch, argv, parse};
use super::init::parent_gone;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use stockade_policy::capability::{Capability, CapabilitySet};
use stockade_policy::stage::MountPlan;

#[test]
fn every_path_comes_back_from_the_argv_byte_for_byte() {
    let odd = PathBuf::from(OsString::from_vec(b"/w/sec\xff/.env".to_vec()));
    let plan = MountPlan {
        rw: vec!["/w".into(), odd.clone()],
        ro: vec![odd.join("x")],
        mask: vec![PathBuf::from("/hex:/x")],
        ..MountPlan::default()
    };
    let watch = Watch {
        missing: vec![odd.join(".envrc")],
        report: Some(odd.join("report")),
        ..Watch::default()
    };
    let argv = argv(
        &plan,
        &watch,
        None,
        "/bin/stockade",
        &["/bin/runner".into()],
    );
    assert!(
        argv.iter().any(|a| a == "hex:2f772f736563ff2f2e656e76"),
        "{argv:?}"
    );
    let args: Vec<OsString> = argv[2..].iter().map(OsString::from).collect();
    let (parsed, parsed_watch, _, runner) = parse(&args).unwrap();
    assert_eq!(parsed, plan);
    assert_eq!(parsed_watch.missing, watch.missing);
    assert_eq!(parsed_watch.report, watch.report);
    assert_eq!(runner, [OsString::from("/bin/runner")]);
    for bad in ["hex:2f7", "hex:zz"] {
        let args = [OsString::from("--rw"), bad.into(), "--".into(), "r".into()];
        assert!(parse(&args).is_err(), "{bad}");
    }
}

/// The check init makes right after asking for SIGKILL on its parent's death: if the
/// parent died before that, no signal will ever come, and the pipe whose read end
/// only the parent held is what says so. The kernel's answer for a real pipe.
#[test]
fn a_pipe_whose_reader_is_gone_says_the_parent_is_gone() {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let (read_end, write_end) = (fds[0], fds[1]);
    assert!(!parent_gone(write_end), "the reader is still there");
    // SAFETY: closing a descriptor this test owns.
    unsafe { libc::close(read_end) };
    assert!(parent_gone(write_end), "the reader is gone");
    // SAFETY: as above.
    unsafe { libc::close(write_end) };
}

/// Runs init's start-up check in a grandchild whose parent dies before it (when
/// `parent_dies_first`) or lives on, and returns the grandchild's exit code: 7 when
/// it found its parent gone, 8 when not. Everything happens in a forked process
/// that is its own child reaper, so the orphan comes back to be waited for; the
/// order is forced by a pipe, not by time.
fn init_check_with_parent(parent_dies_first: bool) -> i32 {
    // SAFETY: the forked processes only call async-signal-safe functions (fork,
    // pipe, prctl, read, close, poll, waitpid) and _exit.
    unsafe {
        let x = libc::fork();
        assert!(x >= 0);
        if x != 0 {
            let mut status = 0;
            assert_eq!(libc::waitpid(x, &mut status, 0), x);
            return libc::WEXITSTATUS(status);
        }
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
        let (mut fds, mut go) = ([0; 2], [0; 2]);
        libc::pipe(fds.as_mut_ptr());
        libc::pipe(go.as_mut_ptr());
        let (read_end, write_end) = (fds[0], fds[1]);
        let outer = libc::fork();
        if outer == 0 {
            let init = libc::fork();
            if init == 0 {
                libc::close(read_end);
                libc::close(go[1]);
                // Wait for the go-ahead (EOF: every writer closed).
                let mut b = 0u8;
                while libc::read(go[0], (&mut b as *mut u8).cast(), 1) > 0 {}
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                libc::_exit(if parent_gone(write_end) { 7 } else { 8 });
            }
            libc::close(write_end);
            libc::close(go[0]);
            libc::close(go[1]);
            if !parent_dies_first {
                // Stay, holding the read end, until init has answered.
                let mut status = 0;
                libc::waitpid(init, &mut status, 0);
                libc::_exit(libc::WEXITSTATUS(status));
            }
            libc::_exit(0);
        }
        libc::close(read_end);
        libc::close(write_end);
        libc::close(go[0]);
        let mut status = 0;
        if parent_dies_first {
            // The parent is gone and reaped before init asks.
            libc::waitpid(outer, &mut status, 0);
            libc::close(go[1]);
            // Init, an orphan now, comes back to this reaper.
            libc::waitpid(-1, &mut status, 0);
        } else {
            libc::close(go[1]);
            libc::waitpid(outer, &mut status, 0);
        }
        libc::_exit(libc::WEXITSTATUS(status));
    }
}

#[test]
fn kept_capabilities_reach_the_watcher_through_the_stage_argv() {
    let watch = Watch {
        shared: vec!["/tmp".into()],
        report: Some("/run/x/stage".into()),
        keep_capabilities: CapabilitySet::of(&[Capability::Fowner, Capability::Chown]),
        ..Watch::default()
    };
    let net = NetProxy {
        channel: 3,
        port: 40000,
    };
    let argv = argv(
        &MountPlan::default(),
        &watch,
        Some(net),
        "/l",
        &["/r".into()],
    );
    let args: Vec<OsString> = argv[2..].iter().map(OsString::from).collect();
    let (_, parsed, parsed_net, runner) = parse(&args).unwrap();
    assert_eq!(parsed, watch);
    assert_eq!(
        parsed_net,
        Some(net),
        "the network namespace's proxy round trips too"
    );
    assert_eq!(runner, [OsString::from("/r")]);
    // Only names of the allow-list: anything else is refused, not dropped.
    let bad: Vec<OsString> = ["--keep-capability", "CAP_SYS_ADMIN", "--", "/r"]
        .iter()
        .map(OsString::from)
        .collect();
    let err = parse(&bad).unwrap_err();
    assert!(err.contains("CAP_SYS_ADMIN cannot be kept"), "{err}");
}

#[test]
fn init_leaves_when_its_parent_died_before_the_death_signal_was_set() {
    assert_eq!(init_check_with_parent(true), 7);
    // Control: with the parent alive, init carries on.
    assert_eq!(init_check_with_parent(false), 8);
}
