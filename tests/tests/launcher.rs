//! `stockade confine` and `stockade run` as an executor sees them.

mod support;
use std::process::{Command, Stdio};
use support::*;

#[test]
fn confine_prints_the_contract_and_its_argv_runs_later_in_another_process() {
    let fx = Fixture::new();
    let v = fx.confine(&[
        "--mode",
        "workspace-write",
        "--",
        "sh",
        "-c",
        "echo hi > made; echo done",
    ]);
    assert_eq!(v["mode"], "workspace-write");
    assert_eq!(v["enforcement"], "full"); // --no-stage: metadata held by the supervisor
    assert_eq!(v["denialSignatures"][0], "permission denied");
    assert_eq!(
        v["runnerFailureRules"][0]["allowedExitCodes"],
        serde_json::json!([125])
    );
    let argv = v["argv"].as_array().unwrap();
    assert_eq!(argv.len(), 7);
    assert_eq!(argv[5], "--failure-tag");
    let tag = argv[6].as_str().unwrap();
    assert_eq!(
        v["runnerFailureRules"][0]["fatalSignatures"],
        serde_json::json!([format!("stockade-runner: [{tag}]")])
    );
    assert_eq!(
        argv[0],
        runner_bin().canonicalize().unwrap().to_str().unwrap()
    );
    assert_eq!(argv[1], "--request");
    let request = std::path::PathBuf::from(argv[2].as_str().unwrap());
    // The digest of exactly the bytes written, which the runner checks.
    assert_eq!(argv[3], "--sha256");
    assert_eq!(argv[4], file_sha256(&request).as_str());
    assert!(request.starts_with(fx.runtime.join("stockade")));
    // The request file is private.
    use std::os::unix::fs::MetadataExt;
    assert_eq!(request.metadata().unwrap().mode() & 0o777, 0o600);
    assert_eq!(
        request.parent().unwrap().metadata().unwrap().mode() & 0o777,
        0o700
    );
    // Nothing has run yet.
    assert!(!fx.ws.join("made").exists());
    let out = spawn_argv(&v);
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "done\n");
    assert!(fx.ws.join("made").exists());
    // And it is confined: the same argv shape denies outside writes.
    let target = fx.outside.join("x");
    let v = fx.confine(&["--", "sh", "-c", &format!("echo > {}", target.display())]);
    let out = spawn_argv(&v);
    assert_code(&out, 2);
    assert!(text(&out.stderr).contains("Permission denied"));
    assert!(!target.exists());
}

#[test]
fn danger_full_access_confine_returns_the_raw_command_and_writes_nothing() {
    let fx = Fixture::new();
    let v = fx.confine(&["--mode", "danger-full-access", "--", "echo", "raw"]);
    assert_eq!(v["argv"], serde_json::json!(["echo", "raw"]));
    assert!(v.get("enforcement").is_none());
    assert_eq!(v["denialSignatures"], serde_json::json!([]));
    assert!(fx.leftover_requests().is_empty());
}

#[test]
fn a_missing_workspace_fails_with_125_names_it_and_runs_nothing() {
    let fx = Fixture::new();
    let marker = fx.outside.join("ran");
    let missing = fx.root.join("no-such-ws");
    for sub in ["run", "confine"] {
        let out = fx
            .stockade([sub, "--workspace"])
            .arg(&missing)
            .args(["--", "sh", "-c", &format!("touch {}", marker.display())])
            .output()
            .unwrap();
        assert_code(&out, 125);
        assert!(
            text(&out.stderr).contains("no-such-ws"),
            "{}",
            text(&out.stderr)
        );
        launcher_failure_line(&out);
        assert!(out.stdout.is_empty());
        assert!(!marker.exists());
    }
    assert!(fx.leftover_requests().is_empty());
    // Likewise a --writable root that does not exist.
    let out = fx
        .stockade(["run", "--writable"])
        .arg(fx.root.join("nope"))
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_code(&out, 125);
    assert!(text(&out.stderr).contains("writable root"));
    launcher_failure_line(&out);
}

/// `stockade ARGS` with Landlock masked from the kernel (see `no-landlock`).
fn without_landlock(fx: &Fixture, args: &[&str]) -> std::process::Output {
    fx.stockade_masked(Some("no-landlock"), args)
        .output()
        .unwrap()
}

#[test]
fn without_landlock_confined_modes_are_refused_and_nothing_runs() {
    let fx = Fixture::new();
    let marker = fx.ws.join("ran");
    let touch = format!("touch {}", marker.display());
    // Positive control: with Landlock, the same command runs.
    assert_code(&fx.run_sh("workspace-write", &touch), 0);
    assert!(marker.exists());
    std::fs::remove_file(&marker).unwrap();

    for mode in ["read-only", "workspace-write"] {
        for sub in ["confine", "run"] {
            let out = without_landlock(&fx, &[sub, "--mode", mode, "--", "sh", "-c", &touch]);
            assert_code(&out, 125);
            let err = text(&out.stderr);
            assert!(err.contains("SANDBOX_UNAVAILABLE"), "{err}");
            assert!(err.contains(mode), "{err}");
            launcher_failure_line(&out);
            assert!(out.stdout.is_empty());
            assert!(!marker.exists(), "{sub} {mode} ran unconfined");
        }
    }
    assert!(
        fx.leftover_requests().is_empty(),
        "a refused confine wrote a request"
    );
    // danger-full-access needs no Landlock.
    let out = without_landlock(
        &fx,
        &[
            "run",
            "--mode",
            "danger-full-access",
            "--",
            "sh",
            "-c",
            &touch,
        ],
    );
    assert_code(&out, 0);
    assert!(marker.exists());
}

#[test]
fn the_runner_refuses_a_request_when_the_kernel_cannot_confine() {
    let fx = Fixture::new();
    let marker = fx.outside.join("ran");
    let v = fx.confine(&[
        "--mode",
        "read-only",
        "--",
        "sh",
        "-c",
        &format!("touch {}", marker.display()),
    ]);
    let argv = confined_argv(&v);
    let out = std::process::Command::new(bin("no-landlock"))
        .args(&argv)
        .output()
        .unwrap();
    assert_code(&out, 125);
    let line = runner_failure_line(&out);
    assert!(
        line.contains("unavailable") || line.contains("landlock"),
        "{line}"
    );
    assert!(!marker.exists());
}

#[test]
fn run_exits_with_the_commands_code_or_128_plus_signal() {
    let fx = Fixture::new();
    for mode in ["read-only", "workspace-write", "danger-full-access"] {
        assert_code(&fx.run_sh(mode, "exit 3"), 3);
        assert_code(&fx.run_sh(mode, "kill -TERM $$"), 128 + 15);
        let out = fx
            .stockade(["run", "--mode", mode, "--", "no-such-program-xyz"])
            .output()
            .unwrap();
        assert_code(&out, 127);
    }
    // An ordinary failure is not reported as a denial.
    let out = fx.run_sh("read-only", "ls /no/such/path");
    assert_ne!(out.status.code(), Some(0));
    assert!(!text(&out.stderr).contains("file access denied under"));
}

#[test]
fn run_leaves_no_request_directories_behind() {
    let fx = Fixture::new();
    assert_code(&fx.run_sh("workspace-write", "true"), 0);
    assert_code(&fx.run_sh("read-only", "exit 4"), 4);
    assert!(
        fx.leftover_requests().is_empty(),
        "{:?}",
        fx.leftover_requests()
    );
    // Control: this is where request directories go, so an emptiness above means run
    // removed its own, not that it put them elsewhere. A confine never spawned leaves one.
    fx.confine(&["--", "true"]);
    assert_eq!(
        fx.leftover_requests().len(),
        1,
        "{:?}",
        fx.leftover_requests()
    );
}

/// A launcher replaced at its path after it started (an upgrade, or someone with write
/// access to its directory) reads `/proc/self/exe` as `PATH (deleted)`; a file planted
/// under that very name must not be what the argv starts as the proxy host (outside the
/// sandbox). The launcher refuses, naming what happened, and nothing runs.
#[test]
fn a_launcher_replaced_while_it_runs_refuses_instead_of_starting_a_planted_file() {
    use std::os::unix::process::CommandExt;
    let fx = Fixture::new();
    let dir = fx.outside.join("bin");
    std::fs::create_dir(&dir).unwrap();
    let launcher = dir.join("stockade");
    std::fs::copy(stockade_bin(), &launcher).unwrap();
    let marker = fx.outside.join("planted-ran");
    let start = |launcher: &std::path::Path| {
        let mut cmd = Command::new(launcher);
        cmd.args([
            "run",
            "--no-stage",
            "--allow-domain",
            "example.org",
            "--",
            "true",
        ]);
        fx.environment(&mut cmd)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    };
    // A copy just written may still be open for writing in a child another test thread
    // forked meanwhile (until that child execs): its exec then fails with ETXTBSY for a
    // moment.
    fn retry_busy<T>(mut f: impl FnMut() -> std::io::Result<T>) -> T {
        for _ in 0..100 {
            match f() {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                    std::thread::sleep(std::time::Duration::from_millis(20))
                }
                other => return other.unwrap(),
            }
        }
        panic!("the copied launcher stayed busy");
    }
    // Control: the same copy, left in place, runs the command.
    let out = retry_busy(|| start(&launcher).output());
    assert_code(&out, 0);

    let mut cmd = start(&launcher);
    // SAFETY: ptrace(PTRACE_TRACEME) in the forked child before exec: the child stops
    // with SIGTRAP once its exec has happened, and waits for this test.
    unsafe {
        cmd.pre_exec(|| {
            if libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = retry_busy(|| cmd.spawn());
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: waits for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFSTOPPED(status), "stopped at its exec: {status:#x}");
    // Stopped after its exec: replace the file at its path, and plant one under the name
    // its /proc/self/exe now reads.
    let fresh = dir.join("stockade.new");
    std::fs::copy(stockade_bin(), &fresh).unwrap();
    std::fs::rename(&fresh, &launcher).unwrap();
    let planted = dir.join("stockade (deleted)");
    std::fs::write(
        &planted,
        format!("#!/bin/sh\ntouch '{}'\n", marker.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    assert_eq!(
        exe, planted,
        "the running launcher reads as the planted name"
    );
    // SAFETY: detaches from our own stopped tracee, letting it run on.
    assert_eq!(unsafe { libc::ptrace(libc::PTRACE_DETACH, pid, 0, 0) }, 0);
    let out = child.wait_with_output().unwrap();
    assert!(
        !marker.exists(),
        "the planted file ran: {}",
        text(&out.stderr)
    );
    assert_code(&out, 125);
    assert!(
        text(&out.stderr).contains("no longer the file this launcher was started from"),
        "{}",
        text(&out.stderr)
    );
}
