//! `stockade confine --inherit-cwd --inherit-env`: the runner takes the working directory
//! and environment it is *spawned* with (as an executor's subprocess layer sets them),
//! while the policy still comes only from the request. Each case has its control: the
//! same confine without the flag uses confine-time values.

mod support;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use support::*;

/// Spawns the ConfinedArgv in `cwd` with exactly `env` (as an executor would).
fn spawn_in(confined: &serde_json::Value, cwd: &Path, env: &[(&str, &str)]) -> Output {
    let argv = confined_argv(confined);
    Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

const SPAWN_ENV: &[(&str, &str)] = &[
    ("PATH", "/usr/bin:/bin"),
    ("TERM", "dumb"),
    ("PER_CALL", "from-spawn"),
    ("GITHUB_TOKEN", "secret-value"),
];

const SHOW: &str = "pwd; echo \"term=$TERM call=$PER_CALL token=$GITHUB_TOKEN\"";

#[test]
fn inherited_cwd_and_env_are_the_spawners_and_the_rule_still_applies() {
    let fx = Fixture::new();
    let sub = fx.ws.join("sub");
    std::fs::create_dir(&sub).unwrap();

    let c = fx.confine(&["--inherit-cwd", "--inherit-env", "--", "sh", "-c", SHOW]);
    let out = spawn_in(&c, &sub, SPAWN_ENV);
    assert_code(&out, 0);
    assert_eq!(
        text(&out.stdout),
        format!("{}\nterm=dumb call=from-spawn token=\n", sub.display())
    );

    // Control: without the flags, confine-time cwd (the workspace) and environment.
    let c = fx.confine(&["--", "sh", "-c", SHOW]);
    let out = spawn_in(&c, &sub, SPAWN_ENV);
    assert_code(&out, 0);
    let shown = text(&out.stdout);
    assert!(
        shown.starts_with(&format!("{}\n", fx.ws.display())) && shown.ends_with(" call= token=\n"),
        "{shown}"
    );
}

#[test]
fn unfiltered_and_kept_names_pass_what_the_rule_would_remove() {
    let fx = Fixture::new();
    let c = fx.confine(&["--inherit-env=unfiltered", "--", "sh", "-c", SHOW]);
    let out = spawn_in(&c, &fx.ws, SPAWN_ENV);
    assert_code(&out, 0);
    assert!(
        text(&out.stdout).ends_with("term=dumb call=from-spawn token=secret-value\n"),
        "{}",
        text(&out.stdout)
    );
    let c = fx.confine(&[
        "--inherit-env",
        "--keep-env",
        "GITHUB_TOKEN",
        "--env",
        "TERM=xterm",
        "--",
        "sh",
        "-c",
        SHOW,
    ]);
    let out = spawn_in(&c, &fx.ws, SPAWN_ENV);
    assert_code(&out, 0);
    assert!(
        text(&out.stdout).ends_with("term=xterm call=from-spawn token=secret-value\n"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn an_inherited_cwd_outside_every_root_runs_but_cannot_be_written() {
    let fx = Fixture::new();
    let script = "pwd; cat seen; echo x > new-file";
    std::fs::write(fx.outside.join("seen"), "readable\n").unwrap();
    let c = fx.confine(&["--inherit-cwd", "--", "sh", "-c", script]);
    let out = spawn_in(&c, &fx.outside, SPAWN_ENV);
    assert_code(&out, 2);
    assert_eq!(
        text(&out.stdout),
        format!("{}\nreadable\n", fx.outside.display())
    );
    assert!(
        text(&out.stderr).contains("Permission denied"),
        "{}",
        text(&out.stderr)
    );
    assert!(!fx.outside.join("new-file").exists());
    // Control: spawned in the workspace, the same write succeeds.
    std::fs::write(fx.ws.join("seen"), "readable\n").unwrap();
    let c = fx.confine(&["--inherit-cwd", "--", "sh", "-c", script]);
    let out = spawn_in(&c, &fx.ws, SPAWN_ENV);
    assert_code(&out, 0);
    assert!(fx.ws.join("new-file").exists());
}

#[test]
fn a_deleted_inherited_cwd_is_a_runner_failure() {
    let fx = Fixture::new();
    let gone = fx.ws.join("gone");
    std::fs::create_dir(&gone).unwrap();
    let c = fx.confine(&["--inherit-cwd", "--", "pwd"]);
    let argv = confined_argv(&c);
    // The spawner enters the directory, which is then removed before the runner starts.
    let script = format!(
        "cd {} && rmdir {} && exec \"$@\"",
        gone.display(),
        gone.display()
    );
    let out = Command::new("sh")
        .args(["-c", &script, "sh"])
        .args(&argv)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_code(&out, 125);
    assert!(
        runner_failure_line(&out).contains("inherits the working directory"),
        "{}",
        text(&out.stderr)
    );
    // Control: the same argv shape in a directory that exists runs.
    let c = fx.confine(&["--inherit-cwd", "--", "pwd"]);
    let out = spawn_in(&c, &fx.ws, SPAWN_ENV);
    assert_code(&out, 0);
}

#[test]
fn explain_says_what_is_inherited() {
    let fx = Fixture::new();
    let c = fx.confine(&["--inherit-cwd", "--inherit-env", "--", "true"]);
    let request = confined_argv(&c)[2].clone();
    let out = Command::new(runner_bin())
        .args(["--explain", &request])
        .current_dir(&fx.outside)
        .output()
        .unwrap();
    assert_code(&out, 0);
    let shown = text(&out.stdout);
    assert!(
        shown.contains("cwd:         inherited") && shown.contains("outside every writable root"),
        "{shown}"
    );
    assert!(shown.contains("env:         inherited") && shown.contains("filtered"));
    // The request is still there (explain consumes nothing) and still private.
    let mode = std::fs::metadata(&request).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0);
}

/// Under the namespace stage, an inherited working directory is re-entered by name once
/// the mounts are set up: relative paths resolve through the sandbox's layout (a
/// writable root writable, a protected path read-only), never through the mount the
/// spawner's directory was on.
#[test]
fn a_staged_inherited_cwd_resolves_through_the_sandboxes_mounts() {
    let fx = Fixture::staged();
    let hooks = fx.ws.join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let c = fx.confine(&["--inherit-cwd", "--", "sh", "-c", "echo x > new-file"]);
    let out = spawn_in(&c, &fx.ws, SPAWN_ENV);
    assert_code(&out, 0);
    assert!(fx.ws.join("new-file").exists(), "{}", text(&out.stderr));

    // A protected path stays read-only when reached relatively, and from inside it.
    let c = fx.confine(&["--inherit-cwd", "--", "sh", "-c", "echo x > .git/hooks/a"]);
    let out = spawn_in(&c, &fx.ws, SPAWN_ENV);
    assert_code(&out, 2);
    assert!(text(&out.stderr).contains("Read-only file system"));
    let c = fx.confine(&["--inherit-cwd", "--", "sh", "-c", "echo x > b"]);
    let out = spawn_in(&c, &hooks, SPAWN_ENV);
    assert_code(&out, 2);
    assert!(text(&out.stderr).contains("Read-only file system"));
    assert!(!hooks.join("a").exists() && !hooks.join("b").exists());
}

/// A private `/tmp` hides the host's: a working directory under the host's `/tmp` has
/// no name in the sandbox, so the stage refuses it rather than run the command there.
#[test]
fn a_staged_inherited_cwd_under_a_private_tmp_is_a_runner_failure() {
    let fx = Fixture::staged();
    let host_tmp = tempfile::Builder::new()
        .prefix("stockade-cwd-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::write(host_tmp.path().join("host-only"), "host\n").unwrap();
    let script = "cat host-only";
    let c = fx.confine(&[
        "--inherit-cwd",
        "--tmp",
        "private",
        "--",
        "sh",
        "-c",
        script,
    ]);
    let out = spawn_in(&c, host_tmp.path(), SPAWN_ENV);
    assert_code(&out, 125);
    assert!(
        runner_failure_line(&out).contains("cannot re-enter the working directory"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(text(&out.stdout), "");
    // Control: with the machine's /tmp, the same directory is there and readable.
    let c = fx.confine(&["--inherit-cwd", "--", "sh", "-c", script]);
    let out = spawn_in(&c, host_tmp.path(), SPAWN_ENV);
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "host\n");
}
