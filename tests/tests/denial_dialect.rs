//! The denial dialect names only what the sandbox refused: a file access (EACCES,
//! "Permission denied") is a denial; an EPERM ("Operation not permitted") from a failed
//! `kill` or `chown` is an ordinary failure, whoever answered it, since the same failure
//! happens outside any sandbox and a denial makes an executor offer to escalate.

mod support;
use support::*;

fn run_json_sh(fx: &Fixture, script: &str) -> serde_json::Value {
    let mut cmd = fx.stockade(["run", "--json", "--", "sh", "-c", script]);
    run_json(&mut cmd).1
}

fn assert_failed(v: &serde_json::Value, stderr_has: &str, denied: bool) {
    assert_ne!(v["exitCode"], 0, "{v}");
    let stderr = v["stderr"]["text"].as_str().unwrap();
    assert!(stderr.contains(stderr_has), "{v}");
    assert_eq!(v["sandbox"]["denied"], denied, "{v}");
    assert_eq!(v["sandbox"]["runnerFailed"], false, "{v}");
}

#[test]
fn a_write_outside_is_a_denial() {
    let fx = Fixture::new();
    let target = fx.outside.join("x");
    let v = run_json_sh(&fx, &format!("echo x > {}", target.display()));
    assert_failed(&v, "Permission denied", true);
    assert!(!target.exists());
    // Control: the same write inside the workspace succeeds and is no denial.
    let v = run_json_sh(&fx, "echo x > inside");
    assert_eq!(v["exitCode"], 0, "{v}");
    assert_eq!(v["sandbox"]["denied"], false);
}

#[test]
fn a_failed_chown_is_an_ordinary_failure() {
    let fx = Fixture::new();
    std::fs::write(fx.ws.join("f"), "").unwrap();
    // Inside the sandbox no capability is held, so chown to another owner fails with
    // EPERM, exactly as for any unprivileged user outside one.
    let v = run_json_sh(&fx, "chown 12345 f");
    assert_failed(&v, "Operation not permitted", false);
}

#[test]
fn a_failed_kill_is_an_ordinary_failure() {
    let fx = Fixture::new();
    // PID 1 is outside the sandbox: the signal scope (or, without it, the missing
    // capability for another user's process) refuses with EPERM.
    let v = run_json_sh(&fx, "kill -TERM 1");
    assert_failed(&v, "Operation not permitted", false);
    // Control: a signal the command may send works.
    let v = run_json_sh(&fx, "sleep 5 & kill -TERM $!; wait $!; echo ok");
    assert_eq!(v["exitCode"], 0, "{v}");
}

#[test]
fn under_the_stage_a_write_outside_reads_erofs_and_is_still_a_denial() {
    let fx = Fixture::staged();
    let confined = fx.confine(&["--", "sh", "-c", "true"]);
    let signatures = confined["denialSignatures"].clone();
    if !confined_argv(&confined).iter().any(|a| a == "__stage") {
        // No namespaces here: the stage's answer cannot occur, and is not promised.
        assert_eq!(signatures, serde_json::json!(["permission denied"]));
        eprintln!(
            "SKIPPED (no namespace stage here): under_the_stage_a_write_outside_reads_erofs_and_is_still_a_denial"
        );
        return;
    }
    assert_eq!(
        signatures,
        serde_json::json!([
            "permission denied",
            "read-only file system",
            "device or resource busy"
        ])
    );
    let target = fx.outside.join("x");
    let v = run_json_sh(&fx, &format!("echo x > {}", target.display()));
    assert_failed(&v, "Read-only file system", true);
    assert!(!target.exists());
    // Control: the same write inside the workspace succeeds and is no denial.
    let v = run_json_sh(&fx, "echo x > inside");
    assert_eq!(v["exitCode"], 0, "{v}");
    assert_eq!(v["sandbox"]["denied"], false);
}
