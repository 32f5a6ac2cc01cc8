//! A real client: `examples/node-executor/executor.js` (plain Node.js) uses stockade as
//! its confine provider (confine -> spawn -> collect stderr -> classify), against the
//! real kernel. Skips, saying so, only when `node` is not installed.

mod support;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use support::*;

fn node_available() -> bool {
    let found = Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        eprintln!("SKIPPED: node is not installed, so the Node.js executor example cannot run");
    }
    found
}

fn executor_js() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/node-executor/executor.js")
}

/// Runs the example executor with `args`, from the fixture root (so that deleting the
/// workspace does not pull the executor's own cwd away), and parses its one JSON line.
fn execute(fx: &Fixture, args: &[&str]) -> Value {
    let out = Command::new("node")
        .arg(executor_js())
        .args(args)
        .current_dir(&fx.root)
        .env("STOCKADE", stockade_bin())
        .env("STOCKADE_RUNNER", runner_bin())
        .env("XDG_RUNTIME_DIR", &fx.runtime)
        .env_remove("TMPDIR")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_code(&out, 0);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("executor printed no JSON ({e}): {}", text(&out.stdout)))
}

fn shell(fx: &Fixture, command: &str) -> Value {
    let ws = fx.ws.to_str().unwrap();
    execute(fx, &["--workspace", ws, "--", command])
}

#[test]
fn the_node_executor_gets_the_right_verdict_for_each_kind_of_outcome() {
    if !node_available() {
        return;
    }
    let fx = Fixture::new();

    // Success.
    let r = shell(&fx, "echo hello > made && cat made");
    assert_eq!(r["exitCode"], 0);
    assert_eq!(r["stdout"], "hello\n");
    let v = &r["verdict"];
    assert_eq!(v["outcome"], "ok", "{r}");
    assert_eq!(v["contract"], 2);
    assert_eq!(v["mode"], "workspace-write");
    // Workspace-write holds `metadata` only through the namespace stage, which the
    // executor's default run uses where the machine allows it.
    let staged = stage_available();
    assert_eq!(v["enforcement"], if staged { "full" } else { "partial" });
    assert_eq!(v["evidence"], "status-channel");
    assert!(fx.ws.join("made").exists());

    // A denied write (the write above, inside the workspace, is its positive control).
    let target = fx.outside.join("escape");
    let r = shell(&fx, &format!("echo x > {}", target.display()));
    assert_eq!(r["exitCode"], 1);
    let v = &r["verdict"];
    assert_eq!(v["outcome"], "denied", "{r}");
    assert_eq!(v["denied"], true);
    assert_eq!(v["runnerFailed"], false);
    // The detail is the refusal named (whether the kernel answered EROFS under the
    // namespace stage or Landlock's EACCES without it).
    let detail = v["detail"].as_str().unwrap();
    assert!(
        detail.contains("file write denied") && detail.contains(target.to_str().unwrap()),
        "{detail}"
    );
    assert!(!target.exists());

    // An ordinary failure.
    let r = shell(&fx, "exit 3");
    assert_eq!(r["exitCode"], 3);
    assert_eq!(r["verdict"]["outcome"], "failed", "{r}");
    assert_eq!(r["verdict"]["runnerFailed"], false);
    assert_eq!(r["verdict"]["denied"], false);

    // A forged runner failure after confinement: an ordinary failure.
    let r = shell(
        &fx,
        "echo 'stockade-runner: sandbox unavailable: landlock missing' >&2; exit 125",
    );
    assert_eq!(r["exitCode"], 125);
    assert!(
        r["stderr"]
            .as_str()
            .unwrap()
            .starts_with("stockade-runner: ")
    );
    assert_eq!(r["verdict"]["outcome"], "failed", "{r}");
    assert_eq!(r["verdict"]["runnerFailed"], false);
    assert_eq!(r["verdict"]["evidence"], "status-channel");

    // A missing program: bash's 127, and the runner's own 127 (--argv, no shell).
    let r = shell(&fx, "no-such-program-xyz");
    assert_eq!(r["exitCode"], 127);
    assert_eq!(r["verdict"]["outcome"], "failed", "{r}");
    let ws = fx.ws.to_str().unwrap();
    let r = execute(
        &fx,
        &["--workspace", ws, "--argv", "--", "no-such-program-xyz"],
    );
    assert_eq!(r["exitCode"], 127);
    assert_eq!(
        r["stderr"],
        "stockade-runner: no-such-program-xyz: command not found\n"
    );
    assert_eq!(r["verdict"]["outcome"], "failed", "{r}");
    assert_eq!(r["verdict"]["runnerFailed"], false);

    // Every classification consumed its private directory.
    assert!(
        fx.leftover_requests().is_empty(),
        "{:?}",
        fx.leftover_requests()
    );
}

#[test]
fn the_node_executor_sees_a_real_runner_failure_when_the_workspace_vanishes() {
    if !node_available() {
        return;
    }
    let fx = Fixture::new();
    let ws = fx.root.join("doomed");
    std::fs::create_dir(&ws).unwrap();
    let ws = ws.to_str().unwrap();
    let r = execute(
        &fx,
        &[
            "--workspace",
            ws,
            "--after-confine",
            &format!("rmdir {ws}"),
            "--",
            "echo should-not-run",
        ],
    );
    assert_eq!(r["exitCode"], 125);
    assert_eq!(r["stdout"], "");
    let v = &r["verdict"];
    assert_eq!(v["outcome"], "runner-failed", "{r}");
    assert_eq!(v["runnerFailed"], true);
    assert_eq!(v["enforcement"], Value::Null);
    assert_eq!(v["evidence"], "status-channel");
    let detail = v["detail"].as_str().unwrap();
    assert!(
        detail.starts_with(&format!(
            "stockade-runner: cannot enter working directory {ws}"
        )),
        "{detail}"
    );
    assert!(detail.ends_with("[chdir]"), "{detail}");
    assert!(fx.leftover_requests().is_empty());
}

/// Whether the namespace stage can run here (`stockade probe --json`).
fn stage_available() -> bool {
    let out = std::process::Command::new(stockade_bin())
        .args(["probe", "--json"])
        .output()
        .unwrap();
    let p: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    p["kernel"]["namespaces"]["available"] == true
}
