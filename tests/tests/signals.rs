//! Signals from a confined command to the processes outside it: the launcher, the
//! executor that spawned a confined argv, their process groups, and everyone (`-1`).
//!
//! Two layers refuse them: Landlock's signal scope (ABI 6) and the seccomp filter, which
//! refuses by pid the ones it can name (the runner's parent and its group, -1, and the
//! caller's own group when it is the parent's). This machine has the scope, so most
//! attacks here are refused by both; the tests marked "the filter alone" are ones the
//! scope lets through (it judges each process, and reports success when any process of
//! the group or of `-1` was the command's own, or, for `-1`, whenever none was refused
//! with anything but EPERM), or never sees (`F_SETOWN` is checked when the signal is
//! sent, not when the owner is set). The kernel matrix's 6.1 guest (Landlock ABI 2)
//! runs the rest with the filter alone (`tests/kernels/check.sh`); the runner's unit
//! tests do too, in a forked child (`seccomp::tests::alone`).
//!
//! Each refusal is paired with a control: the same call under danger-full-access, or
//! on the command's own processes, succeeds.

mod support;
use support::*;

const DANGER: &str = "danger-full-access";
const WS: &str = "workspace-write";
const RO: &str = "read-only";

/// `stockade run --mode MODE -- attack ARGS`: its one-line answer.
#[track_caller]
fn attack(fx: &Fixture, mode: &str, args: &[&str]) -> String {
    let out = fx
        .stockade(["run", "--mode", mode, "--"])
        .arg(bin("attack"))
        .args(args)
        .output()
        .unwrap();
    let line = text(&out.stdout).lines().next().unwrap_or("").to_string();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{args:?}: {:?} {line:?} {}",
        out.status,
        text(&out.stderr)
    );
    line
}

/// The value after `name=` on its own line of `out`'s stdout.
#[track_caller]
fn field(out: &std::process::Output, name: &str) -> String {
    let stdout = text(&out.stdout);
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name}= in {stdout:?}; stderr {}", text(&out.stderr)))
        .to_string()
}

#[test]
fn signal_0_to_every_process_is_refused_by_the_filter_alone() {
    // Landlock answers `kill(-1)` with success when every process refused it with EPERM
    // (the kernel counts only other errors), so `ok` here would be Landlock alone.
    let fx = Fixture::new();
    for mode in [RO, WS] {
        assert_eq!(attack(&fx, mode, &["kill-all"]), "errno EPERM", "{mode}");
    }
    assert_eq!(attack(&fx, DANGER, &["kill-all"]), "ok");
}

#[test]
fn the_parent_as_owner_of_a_descriptor_is_refused_by_the_filter_alone() {
    // I/O on a descriptor whose owner is the parent would send it SIGIO (or SIGKILL,
    // with F_SETSIG). Landlock checks that when the signal is sent; the filter refuses
    // naming the parent as owner at all.
    let fx = Fixture::new();
    for mode in [RO, WS] {
        assert_eq!(
            attack(&fx, mode, &["setown-parent"]),
            "errno EPERM",
            "{mode}"
        );
    }
    assert_eq!(attack(&fx, DANGER, &["setown-parent"]), "ok");
}

#[test]
fn pidfd_send_signal_is_not_implemented_in_the_sandbox() {
    // ENOSYS is the filter's answer (Landlock's would be EPERM): a pidfd can come from
    // opening /proc/PID, so whose it is cannot be checked; callers fall back to kill.
    let fx = Fixture::new();
    for mode in [RO, WS] {
        assert_eq!(
            attack(&fx, mode, &["pidfd-signal-parent"]),
            "errno ENOSYS",
            "{mode}"
        );
    }
    assert_eq!(attack(&fx, DANGER, &["pidfd-signal-parent"]), "ok");
}

/// Stops the launcher, probes its group and everyone, then sleeps past the timeout.
/// `$SIG` is the signal for the launcher: STOP when confined, 0 in the control (a real
/// stop there would stop the test's own launcher).
/// Without the stage in workspace-write the command's parent is the runner's own
/// supervisor: the launcher is the one above it.
const AT_THE_LAUNCHER: &str = r#"
l=$PPID; [ "$(cat /proc/$l/comm)" = stockade-runner ] && l=$(cut -d' ' -f4 /proc/$l/stat)
kill -$SIG $l; echo stop=$?
pg=$(cut -d' ' -f5 /proc/$l/stat)
kill -0 -$pg; echo group=$?
sleep 1000 & kill -0 -1; echo all=$?
sleep 1001
"#;

#[test]
fn a_command_cannot_stop_its_launcher_and_the_timeout_still_ends_it() {
    let fx = Fixture::new();
    for mode in [RO, WS] {
        let out = fx
            .stockade([
                "run",
                "--mode",
                mode,
                "--timeout",
                "2s",
                "--grace",
                "500ms",
                "--",
                "sh",
                "-c",
                AT_THE_LAUNCHER,
            ])
            .env("SIG", "STOP")
            .output()
            .unwrap();
        // The launcher was not stopped: its timeout ended the command.
        assert_code(&out, 124);
        assert_eq!(field(&out, "stop"), "1", "{mode}");
        assert_eq!(field(&out, "group"), "1", "{mode}");
        // With a process of its own to signal, Landlock alone would answer 0 here.
        assert_eq!(field(&out, "all"), "1", "{mode}");
        assert!(
            tagged_processes(&fx.tag)
                .iter()
                .all(|(_, cmd)| !cmd.starts_with("sleep 100")),
            "{mode}: {:?}",
            tagged_processes(&fx.tag)
        );
    }
    // Control: unconfined, the launcher and its group can be signalled.
    let out = fx
        .stockade([
            "run",
            "--mode",
            DANGER,
            "--timeout",
            "2s",
            "--",
            "sh",
            "-c",
            AT_THE_LAUNCHER,
        ])
        .env("SIG", "0")
        .output()
        .unwrap();
    assert_code(&out, 124);
    assert_eq!(field(&out, "stop"), "0");
    assert_eq!(field(&out, "group"), "0");
    assert_eq!(field(&out, "all"), "0");
}

/// Signals within the command's own tree: a background child killed, its own process
/// group probed (`kill 0`), and `timeout`, which signals its child and its own group.
const OWN_TREE: &str = r#"
sleep 1002 & kill $!; wait $!; echo child=$?
kill -0 0; echo group=$?
timeout 1 sleep 1003; echo timeout=$?
"#;

#[test]
fn signals_within_the_command_s_own_tree_still_work() {
    for fx in [Fixture::new(), Fixture::staged()] {
        for mode in [RO, WS, DANGER] {
            let out = fx.run_sh(mode, OWN_TREE);
            assert_code(&out, 0);
            let what = format!("{mode}, stage {}", fx.stage);
            assert_eq!(field(&out, "child"), "143", "{what}");
            assert_eq!(field(&out, "group"), "0", "{what}");
            assert_eq!(field(&out, "timeout"), "124", "{what}");
        }
    }
}

/// What a confined argv sees when its executor spawns it into the executor's own
/// process group: `kill 0` would signal the executor.
const IN_THE_EXECUTOR_S_GROUP: &str = r#"
kill -0 0; echo group=$?
kill -0 $PPID; echo parent=$?
kill -0 -$PPID; echo parent_group=$?
sleep 1004 & kill $!; wait $!; echo child=$?
"#;

#[test]
fn a_command_in_its_executor_s_process_group_cannot_signal_that_group() {
    // spawn_argv starts the argv in this test's process group, as an executor that
    // does not give it a group of its own would. Landlock alone lets `kill -0 0`
    // succeed (the command's own shell is in the group): the filter refuses it.
    let fx = Fixture::new();
    for mode in [RO, WS] {
        let c = fx.confine(&["--mode", mode, "--", "sh", "-c", IN_THE_EXECUTOR_S_GROUP]);
        let out = spawn_argv(&c);
        assert_code(&out, 0);
        assert_eq!(field(&out, "group"), "1", "{mode}");
        assert_eq!(field(&out, "parent"), "1", "{mode}");
        // In workspace-write the parent is the metadata supervisor, which left this
        // group for one of its own (read-only: no such group). Landlock's scope refuses
        // it too on this kernel; the 6.1 guest shows the filter's refusal alone.
        assert_eq!(field(&out, "parent_group"), "1", "{mode}");
        assert_eq!(field(&out, "child"), "143", "{mode}");
    }
    let c = fx.confine(&["--mode", DANGER, "--", "sh", "-c", IN_THE_EXECUTOR_S_GROUP]);
    let out = spawn_argv(&c);
    assert_code(&out, 0);
    assert_eq!(field(&out, "group"), "0");
    assert_eq!(field(&out, "parent"), "0");
}
