//! What the runner's lean start-up (a C entry point instead of std's runtime set-up, see
//! runner/src/main.rs) must keep true: the target inherits the caller's signal
//! dispositions unchanged, and output the runner itself prints is complete. Timing is
//! measured by bench/run, never asserted here.

mod support;
use std::process::{Command, Stdio};
use support::*;

/// SIGPIPE's bit in the `SigIgn` mask of /proc/PID/status (signal 13 on Linux; bit N-1).
const SIGPIPE_BIT: u64 = 1 << (13 - 1);

/// Spawns the ConfinedArgv through `sh`, after running `setup` in that shell (e.g. a
/// `trap`), so the runner starts with the dispositions the shell leaves.
fn spawn_via_sh(confined: &serde_json::Value, setup: &str) -> std::process::Output {
    let argv = confined_argv(confined);
    Command::new("sh")
        .arg("-c")
        .arg(format!("{setup}\nexec \"$@\""))
        .arg("sh")
        .args(&argv)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn ignored_mask(stdout: &[u8]) -> u64 {
    let out = text(stdout);
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .unwrap_or_else(|| panic!("no SigIgn line in {out:?}"));
    u64::from_str_radix(line.trim(), 16).unwrap()
}

#[test]
fn the_target_inherits_sigpipe_as_the_caller_left_it() {
    let fx = Fixture::new();
    for mode in ["read-only", "workspace-write"] {
        // Default in the caller: default in the target (the runner must not ignore it).
        let confined = fx.confine(&["--mode", mode, "--", "grep", "SigIgn", "/proc/self/status"]);
        let out = spawn_via_sh(&confined, "trap - PIPE");
        assert_code(&out, 0);
        assert_eq!(ignored_mask(&out.stdout) & SIGPIPE_BIT, 0, "{mode}");

        // Control: ignored in the caller stays ignored, so the check above can see it.
        let confined = fx.confine(&["--mode", mode, "--", "grep", "SigIgn", "/proc/self/status"]);
        let out = spawn_via_sh(&confined, "trap '' PIPE");
        assert_code(&out, 0);
        assert_ne!(ignored_mask(&out.stdout) & SIGPIPE_BIT, 0, "{mode}");
    }
}

#[test]
fn a_writer_to_a_closed_pipe_ends_by_sigpipe_under_stockade_run() {
    let fx = Fixture::new();
    // `yes` is killed by SIGPIPE (status 141 in the shell) once `head` has gone, and
    // prints nothing; with SIGPIPE ignored it would fail with EPIPE and complain.
    let script = "yes | head -n 1 >/dev/null; echo \"status ${PIPESTATUS[0]}\"";
    for mode in ["read-only", "workspace-write"] {
        let out = fx
            .stockade(["run", "--mode", mode, "--", "bash", "-c", script])
            .output()
            .unwrap();
        assert_code(&out, 0);
        assert_eq!(text(&out.stdout), "status 141\n", "{mode}");
        assert!(!text(&out.stderr).contains("Broken pipe"), "{mode}");
    }
    // Control: the same pipeline with SIGPIPE ignored does show the EPIPE failure.
    let out = fx
        .stockade([
            "run",
            "--",
            "bash",
            "-c",
            &format!("trap '' PIPE; {script}"),
        ])
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "status 1\n");
    assert!(text(&out.stderr).contains("Broken pipe"));
}

#[test]
fn explain_and_version_output_reaches_a_pipe_complete() {
    let fx = Fixture::new();
    let confined = fx.confine(&["--mode", "read-only", "--", "ls", "/"]);
    let request = confined["argv"][2].as_str().unwrap();
    let out = Command::new(runner_bin())
        .args(["--explain", request])
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    assert_code(&out, 0);
    let shown = text(&out.stdout);
    assert!(shown.contains("\"ls\""), "{shown}");
    assert!(shown.ends_with('\n'), "{shown:?}");
    // --explain consumes nothing: the request still runs afterwards.
    let out = spawn_argv(&confined);
    assert_code(&out, 0);
    assert!(text(&out.stdout).contains("etc"));

    let out = Command::new(runner_bin())
        .arg("--version")
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert_eq!(
        text(&out.stdout),
        format!("stockade-runner {}\n", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn a_runner_failure_on_a_closed_stderr_is_still_exit_125_not_sigpipe() {
    use std::os::fd::FromRawFd;
    let fx = Fixture::new();
    let missing = fx.root.join("no-such-request");
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both descriptors were just created by pipe(2) and are owned here alone.
    let (reader, writer) = unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    };
    // Nobody will ever read: the runner's failure line meets EPIPE.
    drop(reader);
    for caller_sigpipe in ["trap - PIPE", "trap '' PIPE"] {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("{caller_sigpipe}\nexec \"$@\""))
            .arg("sh")
            .arg(runner_bin())
            .arg("--request")
            .arg(&missing)
            .arg("--sha256")
            .arg(file_sha256(&missing))
            .stdin(Stdio::null())
            .stderr(writer.try_clone().unwrap())
            .output()
            .unwrap();
        assert_code(&out, 125);
    }
    // Control: with a reader, the same failure is the documented one line.
    let out = Command::new(runner_bin())
        .arg("--request")
        .arg(&missing)
        .arg("--sha256")
        .arg(file_sha256(&missing))
        .output()
        .unwrap();
    assert_code(&out, 125);
    assert!(runner_failure_line(&out).contains("does not exist"));
}

#[test]
fn the_runners_own_output_to_a_closed_stdout_is_a_runner_failure() {
    // Without std's start-up nothing reopens a closed stdout on /dev/null, and std's
    // handle takes a closed one as a sink: `--explain` and `--version` printed nothing
    // and exited 0, as if they had been read.
    let fx = Fixture::new();
    let confined = fx.confine(&["--mode", "read-only", "--", "ls", "/"]);
    let request = confined["argv"][2].as_str().unwrap();
    for (args, closed) in [
        (vec!["--version"], true),
        (vec!["--explain", request], true),
        // Control: the same commands with stdout open print and exit 0.
        (vec!["--version"], false),
        (vec!["--explain", request], false),
    ] {
        let out = Command::new("sh")
            .arg("-c")
            .arg(if closed {
                "exec \"$@\" >&-"
            } else {
                "exec \"$@\""
            })
            .arg("sh")
            .arg(runner_bin())
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        if closed {
            assert_code(&out, 125);
            let line = runner_failure_line(&out);
            assert!(line.contains("cannot write to standard output"), "{line}");
        } else {
            assert_code(&out, 0);
            assert!(!out.stdout.is_empty(), "{args:?}");
        }
    }
    // --explain consumed nothing either way: the request still runs.
    assert_code(&spawn_argv(&confined), 0);
}
