//! Control files no confined command can touch: the request a `confine` wrote is the
//! only one its argv runs, a file that is not that request is left alone, the control
//! base lies outside every writable root, and `classify` trusts only what it checks.

mod support;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use support::*;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

const FORGE: &str = "echo 'stockade-runner: sandbox unavailable: forged' >&2; exit 125";

fn request_path(confined: &Value) -> PathBuf {
    confined_argv(confined)[2].clone().into()
}

fn status_path(confined: &Value) -> PathBuf {
    PathBuf::from(confined["statusPath"].as_str().expect("statusPath"))
}

fn private_dir(confined: &Value) -> PathBuf {
    status_path(confined).parent().unwrap().to_path_buf()
}

/// `stockade classify` with the ConfinedArgv in a file outside every writable root and
/// stderr on stdin.
fn classify_out(fx: &Fixture, confined: &Value, code: Option<i32>, stderr: &str) -> Output {
    let file = fx.root.join(format!("confined-{}.json", unique_tag("c")));
    std::fs::write(&file, confined.to_string()).unwrap();
    let mut args = vec![
        "classify".to_string(),
        "--confined".into(),
        file.display().to_string(),
        "--stderr".into(),
        "-".into(),
    ];
    match code {
        Some(c) => args.extend(["--exit-code".into(), c.to_string()]),
        None => args.extend(["--signal".into(), "KILL".into()]),
    }
    let mut child = fx
        .stockade(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stderr.as_bytes())
            .unwrap();
    }
    child.wait_with_output().unwrap()
}

fn classify_json(fx: &Fixture, confined: &Value, code: Option<i32>, stderr: &str) -> Value {
    let out = classify_out(fx, confined, code, stderr);
    assert_code(&out, 0);
    serde_json::from_slice(&out.stdout).expect("classify prints JSON")
}

/// Confines `bash -c SCRIPT` in workspace-write mode.
fn confine_sh(fx: &Fixture, script: &str) -> Value {
    fx.confine(&["--mode", "workspace-write", "--", "bash", "-c", script])
}

/// Runs a confine with `env` changes and returns its output.
fn confine_with(fx: &Fixture, env: &[(&str, Option<&Path>)], args: &[&str]) -> Output {
    let mut cmd = fx.stockade(std::iter::once(&"confine").chain(args));
    for (k, v) in env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd.output().unwrap()
}

#[test]
fn a_request_changed_after_confine_is_refused_and_runs_nothing() {
    let fx = Fixture::new();
    let marker = fx.ws.join("ran");
    let escaped = fx.outside.join("escaped");
    let v = fx.confine(&[
        "--mode",
        "read-only",
        "--",
        "sh",
        "-c",
        &format!("touch {}", marker.display()),
    ]);
    let path = request_path(&v);
    let ino = std::fs::metadata(&path).unwrap().ino();
    // Rewritten in place (same inode, same owner and mode) into a request that would
    // write outside the workspace: what a command that could reach the file would do.
    let mut forged = request_for(&fx, &format!("touch {}", escaped.display()));
    forged.policy = forged.policy.with_writable_roots(vec![fx.outside.clone()]);
    std::fs::write(&path, forged.encode().unwrap()).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().ino(), ino);
    let out = spawn_argv(&v);
    assert_code(&out, 125);
    let line = runner_failure_line(&out);
    assert!(
        line.contains("--sha256") && line.contains("left untouched"),
        "{line}"
    );
    assert!(!escaped.exists() && !marker.exists());
    // The verdict: the runner failed (no record of confinement), never a clean run.
    let verdict = classify_json(&fx, &v, Some(125), &text(&out.stderr));
    assert_eq!(verdict["outcome"], "runner-failed", "{verdict}");

    // Positive control: the request as written runs.
    let v = fx.confine(&[
        "--mode",
        "read-only",
        "--",
        "sh",
        "-c",
        &format!("echo > /dev/null; exit 0; {}", marker.display()),
    ]);
    let out = spawn_argv(&v);
    assert_code(&out, 0);
    assert!(!request_path(&v).exists(), "a matching request is consumed");
}

#[test]
fn a_private_file_that_is_not_the_request_is_left_untouched() {
    let fx = Fixture::new();
    // An SSH key: 0600, ours, a regular file. Whatever digest the caller passes, the
    // runner must not consume it.
    let key = fx.outside.join("id_ed25519");
    let secret = b"-----BEGIN OPENSSH PRIVATE KEY-----\nnot really\n";
    std::fs::write(&key, secret).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    for digest in [
        "0".repeat(64),
        stockade_policy::digest::sha256_hex(b"something else"),
    ] {
        let out = std::process::Command::new(runner_bin())
            .args(["--request".as_ref(), key.as_os_str()])
            .args(["--sha256", &digest])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_code(&out, 125);
        assert!(runner_failure_line(&out).contains("not a request"));
        assert_eq!(std::fs::read(&key).unwrap(), secret);
    }
    // Without a digest the runner takes nothing at all.
    let out = std::process::Command::new(runner_bin())
        .args(["--request".as_ref(), key.as_os_str()])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_code(&out, 125);
    assert!(runner_failure_line(&out).contains("--sha256"));
    assert_eq!(std::fs::read(&key).unwrap(), secret);
    // Positive control: a real request with its digest is consumed.
    let req = write_request_bytes(&fx, "real", &request_for(&fx, "true").encode().unwrap());
    let out = run_request(&req);
    assert_code(&out, 0);
    assert!(!req.exists());
}

#[test]
fn without_xdg_runtime_dir_the_control_base_is_never_under_a_temp_dir() {
    let fx = Fixture::new();
    let home = fx.root.join("home");
    std::fs::create_dir(&home).unwrap();
    let out = confine_with(
        &fx,
        &[("XDG_RUNTIME_DIR", None), ("HOME", Some(&home))],
        &["--", "true"],
    );
    assert_code(&out, 0);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let status = status_path(&v);
    for temp in ["/tmp", "/var/tmp", "/dev/shm"] {
        assert!(!status.starts_with(temp), "{}", status.display());
    }
    assert!(!status.starts_with(&fx.ws));
    // Root has /run; an ordinary user without /run/user/UID gets ~/.local/state.
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    let expected = if Path::new(&format!("/run/user/{uid}")).is_dir() {
        PathBuf::from(format!("/run/user/{uid}/stockade"))
    } else if uid == 0 {
        PathBuf::from("/run/stockade-0")
    } else {
        home.join(".local/state/stockade")
    };
    assert!(status.starts_with(&expected), "{}", status.display());
    let run = spawn_argv(&v);
    assert_code(&run, 0);
    let verdict = classify_out_env(&fx, &v, &[("XDG_RUNTIME_DIR", None), ("HOME", Some(&home))]);
    assert_eq!(verdict["outcome"], "ok", "{verdict}");
    assert!(!private_dir(&v).exists());
}

/// Whether this user's control base is the home fallback (an ordinary user without
/// `/run/user/UID`); when not, says that test `name` is skipped, and why.
fn home_fallback_is_the_base(name: &str) -> bool {
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    let fallback = uid != 0 && !Path::new(&format!("/run/user/{uid}")).is_dir();
    if !fallback {
        eprintln!(
            "SKIPPED (needs an ordinary user without /run/user/UID, whose base is the home fallback): {name}"
        );
    }
    fallback
}

#[test]
fn the_home_fallback_refuses_a_linked_local_state() {
    if !home_fallback_is_the_base("the_home_fallback_refuses_a_linked_local_state") {
        return;
    }
    let fx = Fixture::new();
    let home = fx.root.join("home");
    std::fs::create_dir_all(home.join(".local")).unwrap();
    // `~/.local/state` pointed into the workspace, as a command granted `~/.local` could.
    std::fs::create_dir(fx.ws.join("state")).unwrap();
    std::os::unix::fs::symlink(fx.ws.join("state"), home.join(".local/state")).unwrap();
    let env = [("XDG_RUNTIME_DIR", None), ("HOME", Some(home.as_path()))];
    let out = confine_with(&fx, &env, &["--mode", "read-only", "--", "true"]);
    assert_code(&out, 125);
    let err = text(&out.stderr);
    assert!(err.contains("is a symbolic link"), "{err}");
    assert!(
        std::fs::read_dir(fx.ws.join("state"))
            .unwrap()
            .next()
            .is_none(),
        "nothing was put in the workspace"
    );
    // Control: the same home with a real `~/.local/state` is used.
    std::fs::remove_file(home.join(".local/state")).unwrap();
    let out = confine_with(&fx, &env, &["--mode", "read-only", "--", "true"]);
    assert_code(&out, 0);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(status_path(&v).starts_with(home.join(".local/state/stockade")));
    assert_code(&spawn_argv(&v), 0);
}

#[test]
fn a_user_s_first_command_cannot_read_the_control_base_made_for_it() {
    if !home_fallback_is_the_base("a_user_s_first_command_cannot_read_the_control_base_made_for_it")
    {
        return;
    }
    // Through Landlock alone, and through the namespace stage.
    for fx in [Fixture::new(), Fixture::staged()] {
        let layer = if fx.stage { "stage" } else { "no-stage" };
        // A home without `.local`: this `confine` makes `.local/state/stockade`.
        let home = fx.root.join(format!("first-home-{layer}"));
        std::fs::create_dir(&home).unwrap();
        let state = home.join(".local/state");
        let (peek, beside) = (state.join("stockade/peek"), state.join("beside"));
        let env = [("XDG_RUNTIME_DIR", None), ("HOME", Some(home.as_path()))];
        let script = r#"cat "$1"; cat "$2""#;
        let (peek_arg, beside_arg) = (peek.to_str().unwrap(), beside.to_str().unwrap());
        let args = [
            "--mode",
            "read-only",
            "--",
            "sh",
            "-c",
            script,
            "sh",
            peek_arg,
            beside_arg,
        ];
        let out = confine_with(&fx, &env, &args);
        assert_code(&out, 0);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(status_path(&v).starts_with(state.join("stockade")));
        // Another command's request as it would lie in the base, and a file beside the
        // base (the control: the same read, where nothing is hidden).
        std::fs::write(&peek, b"another command's request").unwrap();
        std::fs::write(&beside, b"beside").unwrap();
        let run = spawn_argv(&v);
        assert_eq!(
            text(&run.stdout),
            "beside",
            "{layer}: {}",
            text(&run.stderr)
        );
        let err = text(&run.stderr);
        assert!(
            err.contains(peek.to_str().unwrap()) && err.contains("Permission denied"),
            "{layer}: {err}"
        );
    }
}

fn classify_out_env(fx: &Fixture, v: &Value, env: &[(&str, Option<&Path>)]) -> Value {
    let file = fx.root.join(format!("c-{}.json", unique_tag("e")));
    std::fs::write(&file, v.to_string()).unwrap();
    let mut cmd = fx.stockade([
        "classify".as_ref(),
        "--confined".as_ref(),
        file.as_os_str(),
        "--exit-code".as_ref(),
        "0".as_ref(),
    ]);
    for (k, val) in env {
        match val {
            Some(val) => cmd.env(k, val),
            None => cmd.env_remove(k),
        };
    }
    let out = cmd.output().unwrap();
    assert_code(&out, 0);
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_control_base_in_a_temp_dir_or_a_writable_root_is_refused_and_never_replaced() {
    let fx = Fixture::new();
    let marker = fx.ws.join("ran");
    let touch = format!("touch {}", marker.display());
    let args = ["--", "sh", "-c", touch.as_str()];
    // An XDG_RUNTIME_DIR in /tmp.
    let tmp = tempfile::Builder::new()
        .prefix("xdg-")
        .tempdir_in("/tmp")
        .unwrap();
    let out = confine_with(&fx, &[("XDG_RUNTIME_DIR", Some(tmp.path()))], &args);
    assert_code(&out, 125);
    let line = launcher_failure_line(&out);
    assert!(
        line.contains("beneath /tmp") && line.contains("STOCKADE_CONTROL_DIR"),
        "{line}"
    );
    assert!(
        !tmp.path().join("stockade").exists(),
        "nothing is created there"
    );

    // An XDG_RUNTIME_DIR that is a link into the workspace (a writable root).
    let in_ws = fx.ws.join("rt");
    std::fs::create_dir(&in_ws).unwrap();
    let link = fx.outside.join("rt-link");
    std::os::unix::fs::symlink(&in_ws, &link).unwrap();
    let out = confine_with(&fx, &[("XDG_RUNTIME_DIR", Some(&link))], &args);
    assert_code(&out, 125);
    let line = launcher_failure_line(&out);
    assert!(line.contains("contains the control directory"), "{line}");
    assert!(line.contains(&in_ws.display().to_string()), "{line}");
    // Nothing of the refused request exists.
    assert!(
        std::fs::read_dir(in_ws.join("stockade"))
            .map(|d| d.count() == 0)
            .unwrap_or(true)
    );

    // A --writable root that contains the base.
    let out = fx
        .stockade([
            "confine",
            "--writable",
            fx.runtime.to_str().unwrap(),
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_code(&out, 125);
    assert!(launcher_failure_line(&out).contains("contains the control directory"));
    let out = fx
        .stockade(["confine", "--writable", "/", "--", "true"])
        .output()
        .unwrap();
    assert_code(&out, 125);

    // STOCKADE_CONTROL_DIR: relative is refused; one in the workspace is refused.
    let out = confine_with(
        &fx,
        &[("STOCKADE_CONTROL_DIR", Some(Path::new("rel")))],
        &args,
    );
    assert_code(&out, 125);
    assert!(launcher_failure_line(&out).contains("absolute"));
    let out = confine_with(
        &fx,
        &[("STOCKADE_CONTROL_DIR", Some(&fx.ws.join("ctl")))],
        &args,
    );
    assert_code(&out, 125);
    assert!(launcher_failure_line(&out).contains("contains the control directory"));

    // Positive controls: a link the user made to a private place outside every root, a
    // named control directory, and a --writable root beside the base, all work.
    let private = fx.outside.join("rt");
    std::fs::create_dir(&private).unwrap();
    let good_link = fx.outside.join("good-link");
    std::os::unix::fs::symlink(&private, &good_link).unwrap();
    let out = confine_with(&fx, &[("XDG_RUNTIME_DIR", Some(&good_link))], &args);
    assert_code(&out, 0);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(status_path(&v).starts_with(private.join("stockade")), "{v}");
    assert_code(&spawn_argv(&v), 0);
    assert!(marker.exists());
    let named = fx.outside.join("ctl");
    let out = confine_with(
        &fx,
        &[("STOCKADE_CONTROL_DIR", Some(&named))],
        &["--", "true"],
    );
    assert_code(&out, 0);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(status_path(&v).starts_with(&named), "{v}");
    let v = fx.confine(&["--writable", fx.outside.to_str().unwrap(), "--", "true"]);
    assert_code(&spawn_argv(&v), 0);
}

#[test]
fn a_tmpdir_no_command_is_granted_does_not_refuse_the_control_base() {
    let fx = Fixture::new();
    let marker = fx.ws.join("ran");
    let touch = format!("touch {}", marker.display());
    let args = [
        "--mode",
        "workspace-write",
        "--",
        "sh",
        "-c",
        touch.as_str(),
    ];
    // An empty `$TMPDIR` (the default temp dir) and `/` (never granted: too broad) are no
    // place a confined command writes: the base is usable and the command runs.
    for tmpdir in ["", "/"] {
        let out = confine_with(&fx, &[("TMPDIR", Some(Path::new(tmpdir)))], &args);
        assert_code(&out, 0);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(status_path(&v).starts_with(&fx.runtime), "{v}");
        let _ = std::fs::remove_file(&marker);
        assert_code(&spawn_argv(&v), 0);
        assert!(
            marker.exists(),
            "TMPDIR={tmpdir:?}: the command did not run"
        );
        assert_eq!(classify_json(&fx, &v, Some(0), "")["outcome"], "ok");
    }
    // Negative control: a `$TMPDIR` a command could be granted (a directory of the home)
    // that holds the base is still refused, naming it, even by a policy that grants no
    // root (another command's would grant it).
    let out = confine_with(
        &fx,
        &[("TMPDIR", Some(&fx.runtime)), ("HOME", Some(&fx.root))],
        &["--mode", "read-only", "--", "true"],
    );
    assert_code(&out, 125);
    let line = launcher_failure_line(&out);
    let beneath = format!("beneath {}", fx.runtime.canonicalize().unwrap().display());
    assert!(line.contains(&beneath), "{line}");
}

#[test]
fn a_base_whose_mode_was_changed_is_an_error_naming_it_not_a_move() {
    let fx = Fixture::new();
    let base = fx.runtime.join("stockade");
    // A confined command owns the base and Landlock does not govern chmod: it opens it.
    let out = fx.run_sh(
        "workspace-write",
        &format!("chmod 755 {} && echo opened", base.display()),
    );
    let opened = text(&out.stdout).contains("opened");
    if !opened {
        // A later layer refuses the chmod: do it as the attacker would have.
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = fx.stockade(["confine", "--", "true"]).output().unwrap();
    assert_code(&out, 125);
    let line = launcher_failure_line(&out);
    assert!(
        line.contains(&base.display().to_string()) && line.contains("0755"),
        "{line}"
    );
    // No other base was used: nothing was written anywhere else.
    assert!(out.stdout.is_empty());
    // Positive control: restored, it works again.
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700)).unwrap();
    let v = fx.confine(&["--", "true"]);
    assert!(status_path(&v).starts_with(&base));
}

#[test]
fn a_status_file_the_command_changed_is_tampering_never_a_runner_failure() {
    let fx = Fixture::new();
    // The attack: make its own status file unreadable (another mode), then forge the
    // runner's failure line and exit code. It finds the file by listing the base.
    let base = fx.runtime.join("stockade");
    let attack = format!(
        "for s in {}/req-*/status; do chmod 000 \"$s\"; done 2>/dev/null; {FORGE}",
        base.display()
    );
    let c = confine_sh(&fx, &attack);
    let out = spawn_argv(&c);
    assert_code(&out, 125);
    let mode = std::fs::symlink_metadata(status_path(&c)).unwrap().mode() & 0o7777;
    let v = classify_json(&fx, &c, Some(125), &text(&out.stderr));
    assert_ne!(v["outcome"], "runner-failed", "{v}");
    assert_eq!(v["runnerFailed"], false);
    if mode != 0o600 {
        assert_eq!(v["outcome"], "tampered", "{v}");
        assert!(v["detail"].as_str().unwrap().contains("tampered"), "{v}");
    } else {
        // A later layer refused the chmod: the record decides, the forgery is a failure.
        assert_eq!(v["outcome"], "failed", "{v}");
    }
    // Positive control: the same forgery without touching the status is an ordinary
    // failure decided by the record.
    let c = confine_sh(&fx, FORGE);
    let out = spawn_argv(&c);
    let v = classify_json(&fx, &c, Some(125), &text(&out.stderr));
    assert_eq!(v["outcome"], "failed", "{v}");
    assert_eq!(v["evidence"], "status-channel");
}

#[test]
fn a_back_dated_private_directory_survives_the_sweep_and_keeps_its_record() {
    let fx = Fixture::new();
    let base = fx.runtime.join("stockade");
    // The attack: back-date the private directory (and the sweep stamp, so the next
    // confine sweeps), then forge a runner failure. The command itself cannot change
    // those times (metadata outside the writable roots is held: by the stage's mounts,
    // or here by the runner's supervisor), so another process of the user does it.
    let c = confine_sh(&fx, FORGE);
    let epoch = std::time::UNIX_EPOCH;
    for p in [private_dir(&c), status_path(&c)] {
        std::fs::File::open(&p)
            .unwrap()
            .set_modified(epoch)
            .unwrap();
    }
    std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(base.join(".swept"))
        .unwrap()
        .set_modified(epoch)
        .unwrap();
    let out = spawn_argv(&c);
    assert_code(&out, 125);
    // A concurrent confine sweeps: ages come from names, so the directory stays.
    fx.confine(&["--", "true"]);
    assert!(private_dir(&c).exists(), "a back-dated directory was swept");
    let v = classify_json(&fx, &c, Some(125), &text(&out.stderr));
    assert_eq!(v["outcome"], "failed", "{v}");
    assert_eq!(v["evidence"], "status-channel");
}

#[test]
fn the_sweep_removes_old_private_directories_by_name_at_most_every_few_minutes() {
    let fx = Fixture::new();
    fx.confine(&["--", "true"]); // creates the base and the sweep stamp
    let base = fx.runtime.join("stockade");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let old = now - 2 * 24 * 3600;
    let make = |name: &str, files: &[&str]| {
        let d = base.join(name);
        std::fs::create_dir(&d).unwrap();
        for file in files {
            std::fs::write(d.join(file), "").unwrap();
        }
        d
    };
    let stale = make(&format!("req-{old}-abcDEF012345"), &["status"]);
    let stale_spill = make(&format!("out-{old}-abcDEF012345"), &["stdout", "stderr"]);
    let fresh = make(&format!("req-{now}-abcDEF012345"), &["status"]);
    let foreign = make(&format!("keep-{old}-abc"), &["status"]);
    // A base named by STOCKADE_CONTROL_DIR may be a directory the user keeps things in.
    // Named almost like a spill directory: not ours, untouched.
    let lookalike = make(&format!("out-{old}-backups"), &["stdout", "stderr"]);
    // Named exactly like one, but holding what no spill holds: not ours either, and
    // nothing in it is removed (its `stdout` neither).
    let holder = make(&format!("out-{old}-abcDEF012346"), &["stdout", "photo.jpg"]);
    std::fs::create_dir(holder.join("stderr")).unwrap();
    std::fs::write(holder.join("stderr/kept"), "kept").unwrap();
    // Swept recently: the next confine does not even look.
    fx.confine(&["--", "true"]);
    assert!(stale.exists(), "swept although the last sweep was just now");
    // Once the stamp is due, the old ones (requests and spills) go, the rest stays.
    std::fs::File::options()
        .write(true)
        .open(base.join(".swept"))
        .unwrap()
        .set_modified(std::time::UNIX_EPOCH)
        .unwrap();
    fx.confine(&["--", "true"]);
    assert!(
        !stale.exists() && !stale_spill.exists(),
        "old directories survived"
    );
    assert!(fresh.exists(), "a fresh directory was removed");
    assert!(
        foreign.exists(),
        "a directory not named by stockade was removed"
    );
    assert!(
        lookalike.join("stdout").exists() && lookalike.join("stderr").exists(),
        "the sweep emptied a directory only named like a spill"
    );
    assert!(
        holder.join("stdout").exists()
            && holder.join("photo.jpg").exists()
            && holder.join("stderr/kept").exists(),
        "the sweep removed files from a directory holding what no spill holds"
    );
}

#[test]
fn classify_trusts_no_status_path_or_channel_from_its_input() {
    let fx = Fixture::new();
    let base = fx.runtime.join("stockade");
    // A pending command whose directory a forged statusPath would name elsewhere.
    let victim = confine_sh(&fx, "true");
    let c = confine_sh(&fx, FORGE);
    let out = spawn_argv(&c);
    assert_code(&out, 125);
    let name = private_dir(&c).file_name().unwrap().to_owned();
    // Paths outside the base, through a link to it, with `..`, or not a status file.
    let link = fx.outside.join("base-link");
    std::os::unix::fs::symlink(&base, &link).unwrap();
    let elsewhere = fx.outside.join(&name);
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("status"), "").unwrap();
    let forged_paths = [
        elsewhere.join("status"),
        link.join(&name).join("status"),
        base.join(&name).join("..").join(&name).join("status"),
        base.join(&name).join("request"),
        base.join("not-ours").join("status"),
    ];
    for forged in forged_paths {
        let mut bad = c.clone();
        bad["statusPath"] = forged.display().to_string().into();
        let res = classify_out(&fx, &bad, Some(125), &text(&out.stderr));
        assert_code(&res, 125);
        assert!(
            launcher_failure_line(&res).contains("statusPath"),
            "{}",
            forged.display()
        );
    }
    assert!(
        elsewhere.join("status").exists(),
        "classify removed what it did not verify"
    );
    assert!(private_dir(&c).exists() && private_dir(&victim).exists());
    // The channel is derived, not read: "in-band" in the JSON does not let the forged
    // line through.
    let mut in_band = c.clone();
    in_band["statusChannel"] = "in-band".into();
    let v = classify_json(&fx, &in_band, Some(125), &text(&out.stderr));
    assert_eq!(v["outcome"], "failed", "{v}");
    assert_eq!(v["evidence"], "status-channel");
    assert!(
        !private_dir(&c).exists(),
        "the verified directory is consumed"
    );
    assert!(private_dir(&victim).exists());
}

#[test]
fn classify_refuses_a_fifo_input_without_blocking_and_reads_either_input_from_stdin() {
    let fx = Fixture::new();
    let c = confine_sh(&fx, "echo oops >&2; exit 3");
    let out = spawn_argv(&c);
    assert_code(&out, 3);
    let fifo = fx.root.join("stderr.fifo");
    let c_fifo = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo only creates a file.
    assert_eq!(unsafe { libc::mkfifo(c_fifo.as_ptr(), 0o600) }, 0);
    let json = fx.root.join("c.json");
    std::fs::write(&json, c.to_string()).unwrap();
    for args in [
        [
            "--confined",
            json.to_str().unwrap(),
            "--stderr",
            fifo.to_str().unwrap(),
        ],
        [
            "--confined",
            fifo.to_str().unwrap(),
            "--stderr",
            json.to_str().unwrap(),
        ],
    ] {
        // A FIFO nobody writes would block a reader for ever; classify must refuse it.
        let mut child = fx
            .stockade(["classify", "--exit-code", "3"].iter().chain(args.iter()))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("classify blocked on a FIFO");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let res = child.wait_with_output().unwrap();
        assert_eq!(status.code(), Some(125), "{res:?}");
        assert!(launcher_failure_line(&res).contains("not a regular file"));
    }
    assert!(private_dir(&c).exists(), "refused input consumed nothing");
    // Positive controls: the ConfinedArgv from stdin with stderr from a file.
    let err = fx.root.join("stderr.txt");
    std::fs::write(&err, &out.stderr).unwrap();
    let mut child = fx
        .stockade([
            "classify",
            "--confined",
            "-",
            "--stderr",
            err.to_str().unwrap(),
            "--exit-code",
            "3",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(c.to_string().as_bytes())
            .unwrap();
    }
    let res = child.wait_with_output().unwrap();
    assert_code(&res, 0);
    let v: Value = serde_json::from_slice(&res.stdout).unwrap();
    assert_eq!(v["outcome"], "failed", "{v}");
}

/// `classify` reads its inputs only from regular files of storage, like the runner and
/// `explain`: a file of the kernel's own filesystems is refused before it is read (as
/// root, `/proc/kmsg` passes every other check, and reading it consumes the kernel log;
/// `/proc/self/environ` is readable by any user), and nothing is consumed.
#[test]
fn classify_reads_no_input_from_the_kernels_own_filesystems() {
    let fx = Fixture::new();
    let c = confine_sh(&fx, "echo oops >&2; exit 3");
    let out = spawn_argv(&c);
    assert_code(&out, 3);
    let json = fx.root.join("c.json");
    std::fs::write(&json, c.to_string()).unwrap();
    let mut kernel = vec!["/proc/self/environ"];
    if stockade_tests::is_root() {
        kernel.push("/proc/kmsg");
    } else {
        eprintln!(
            "SKIPPED (needs root): classify_reads_no_input_from_the_kernels_own_filesystems (/proc/kmsg)"
        );
    }
    let classify = |stderr: &str| {
        fx.stockade([
            "classify",
            "--exit-code",
            "3",
            "--confined",
            json.to_str().unwrap(),
            "--stderr",
            stderr,
        ])
        .output()
        .unwrap()
    };
    for path in kernel {
        let res = classify(path);
        assert_code(&res, 125);
        let line = launcher_failure_line(&res);
        assert!(
            line.contains("the kernel's proc filesystem"),
            "{path}: {line}"
        );
        assert!(res.stdout.is_empty());
    }
    assert!(private_dir(&c).exists(), "refused input consumed nothing");
    // Positive control: the same stderr from a regular file is read.
    let err = fx.root.join("stderr.txt");
    std::fs::write(&err, &out.stderr).unwrap();
    let res = classify(err.to_str().unwrap());
    assert_code(&res, 0);
    let v: Value = serde_json::from_slice(&res.stdout).unwrap();
    assert_eq!(v["outcome"], "failed", "{v}");
}

#[test]
fn a_replaced_status_file_is_tampering_even_with_a_well_formed_record() {
    let fx = Fixture::new();
    let c = confine_sh(&fx, "exit 3");
    let out = spawn_argv(&c);
    assert_code(&out, 3);
    // Replaced by a process outside the sandbox (no confined command can: the private
    // directory is outside every writable root): same name, owner and mode, a
    // well-formed `failed` record.
    // The new file is made before the old one goes (renamed over it), so it cannot
    // reuse the freed inode number.
    let status = status_path(&c);
    let forged = private_dir(&c).join("forged");
    std::fs::write(&forged, "stockade-status 1 failed chdir forged\n").unwrap();
    std::fs::set_permissions(&forged, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::rename(&forged, &status).unwrap();
    let v = classify_json(&fx, &c, Some(3), "");
    assert_eq!(v["outcome"], "tampered", "{v}");
    assert!(v["detail"].as_str().unwrap().contains("inode"), "{v}");
    // Positive control: the file confine created, with the runner's record.
    let c = confine_sh(&fx, "exit 3");
    let out = spawn_argv(&c);
    let v = classify_json(&fx, &c, Some(3), &text(&out.stderr));
    assert_eq!(v["outcome"], "failed", "{v}");
}

/// A status file whose owner is no longer this user is not trusted, even with its mode
/// and inode as `confine` left them: only the owner rule (the file trust rule's first
/// half) tells, so this proves that rule in classify on its own.
#[test]
fn a_status_file_given_to_another_owner_is_tampering() {
    if !stockade_tests::is_root() {
        eprintln!("SKIPPED (needs root): a_status_file_given_to_another_owner_is_tampering");
        return;
    }
    let fx = Fixture::new();
    // Control: untouched, the record decides (classify then removes the directory, so
    // the attack below gets a command of its own).
    let c = confine_sh(&fx, "exit 0");
    assert_code(&spawn_argv(&c), 0);
    let v = classify_json(&fx, &c, Some(0), "");
    assert_eq!(v["outcome"], "ok", "{v}");
    // Given away by someone outside the sandbox (root, here), mode still 0600.
    let c = confine_sh(&fx, "exit 0");
    assert_code(&spawn_argv(&c), 0);
    let status = status_path(&c);
    std::os::unix::fs::chown(&status, Some(65534), Some(65534)).unwrap();
    assert_eq!(
        std::fs::symlink_metadata(&status).unwrap().mode() & 0o7777,
        0o600
    );
    let v = classify_json(&fx, &c, Some(0), "");
    assert_eq!(v["outcome"], "tampered", "{v}");
    assert_eq!(v["runnerFailed"], false, "{v}");
}

#[test]
fn a_root_or_workspace_inside_the_control_directory_is_refused_and_runs_nothing() {
    // A directory inside the control base (here another command's private directory)
    // granted as a root, or worked in: the base could not be hidden from the command,
    // which would read every pending request there (their kept secrets) and rewrite
    // other commands' status files.
    let fx = Fixture::new();
    // A pending command holding a kept secret, and a script that tries to take it.
    let pending = || {
        fx.confine(&[
            "--mode",
            "read-only",
            "--env",
            "VICTIM_TOKEN=hunter2",
            "--keep-env",
            "VICTIM_TOKEN",
            "--",
            "true",
        ])
    };
    let marker = fx.outside.join("ran");
    let steal = |request: &std::path::Path| {
        format!(
            "touch {}; cat {} > {}",
            marker.display(),
            request.display(),
            fx.outside.join("stolen").display()
        )
    };
    let victim = pending();
    let their_dir = private_dir(&victim);
    let script = steal(&request_path(&victim));
    let granted = fx
        .stockade([
            "run",
            "--writable",
            their_dir.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    let worked_in = fx
        .stockade([
            "run",
            "--mode",
            "read-only",
            "--workspace",
            their_dir.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    for out in [&granted, &worked_in] {
        assert_code(out, 125);
        let line = launcher_failure_line(out);
        assert!(
            line.contains(&their_dir.display().to_string())
                && line.contains("requests and status files"),
            "{line}"
        );
    }
    assert!(!marker.exists(), "a refused policy ran its command");
    assert!(!fx.outside.join("stolen").exists());
    // The victim's request is untouched and still runs.
    assert_code(&spawn_argv(&victim), 0);

    // Positive control: a root beside the control base works, and the pending requests
    // stay out of reach there.
    let other = pending();
    let beside = fx.outside.join("beside");
    std::fs::create_dir(&beside).unwrap();
    let script = steal(&request_path(&other));
    let out = fx
        .stockade([
            "run",
            "--writable",
            beside.to_str().unwrap(),
            "--writable",
            fx.outside.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    assert!(marker.exists(), "{}", text(&out.stderr));
    let stolen = std::fs::read(fx.outside.join("stolen")).unwrap_or_default();
    assert!(
        !String::from_utf8_lossy(&stolen).contains("hunter2"),
        "a pending request was read from beside the control directory"
    );
    assert_code(&spawn_argv(&other), 0);
}
