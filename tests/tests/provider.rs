//! The provider contract: the runner's out-of-band status channel and `stockade classify`,
//! against real confined processes. The central claim: a command can forge the in-band
//! runner failure (exit 125 + a `stockade-runner: ` line) but not the status record,
//! which the command can neither write by path (Landlock) nor through a descriptor (it
//! never holds one). Each denial has its positive control.

mod support;
use serde_json::Value;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::SystemTime;
use support::*;

const FORGE: &str = "echo 'stockade-runner: sandbox unavailable: forged' >&2; exit 125";

fn str_field(v: &Value, field: &str) -> String {
    v[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} in {v}"))
        .to_string()
}

fn status_path(confined: &Value) -> PathBuf {
    PathBuf::from(str_field(confined, "statusPath"))
}

fn private_dir(confined: &Value) -> PathBuf {
    status_path(confined).parent().unwrap().to_path_buf()
}

fn status_text(confined: &Value) -> String {
    std::fs::read_to_string(status_path(confined)).unwrap()
}

/// `stockade classify` with the ConfinedArgv in a file and stderr given or not.
fn classify_out(fx: &Fixture, confined: &Value, facts: &[&str], stderr: Option<&[u8]>) -> Output {
    let file = tempfile::NamedTempFile::new_in(&fx.root).unwrap();
    std::fs::write(file.path(), confined.to_string()).unwrap();
    let mut args: Vec<String> = vec![
        "classify".into(),
        "--confined".into(),
        file.path().display().to_string(),
    ];
    args.extend(facts.iter().map(|s| s.to_string()));
    if stderr.is_some() {
        args.extend(["--stderr".into(), "-".into()]);
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
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(stderr.unwrap_or_default()).unwrap();
    }
    child.wait_with_output().unwrap()
}

/// Classifies a process spawned from `confined` that settled as `out`.
fn classify(fx: &Fixture, confined: &Value, out: &Output) -> Value {
    let code = out.status.code().expect("exited").to_string();
    let res = classify_out(fx, confined, &["--exit-code", &code], Some(&out.stderr));
    assert_code(&res, 0);
    serde_json::from_slice(&res.stdout).expect("classify prints JSON")
}

fn sh(script: &str) -> Vec<String> {
    vec!["--".into(), "bash".into(), "-c".into(), script.into()]
}

fn confine(fx: &Fixture, pre: &[&str], script: &str) -> Value {
    let mut args: Vec<String> = pre.iter().map(|s| s.to_string()).collect();
    args.extend(sh(script));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    fx.confine(&refs)
}

#[test]
fn confine_creates_an_empty_private_status_file_outside_every_writable_root() {
    let fx = Fixture::new();
    for mode in ["read-only", "workspace-write"] {
        let c = confine(&fx, &["--mode", mode], "true");
        assert_eq!(c["contract"], 2);
        assert_eq!(c["statusChannel"], "out-of-band", "{c}");
        let status = status_path(&c);
        let meta = std::fs::symlink_metadata(&status).unwrap();
        assert!(meta.file_type().is_file());
        assert_eq!(meta.len(), 0);
        assert_eq!(meta.mode() & 0o777, 0o600);
        // Same private directory as the request, 0700, under the runtime dir.
        let dir = private_dir(&c);
        assert_eq!(
            Path::new(c["argv"][2].as_str().unwrap()).parent(),
            Some(dir.as_path())
        );
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        assert!(dir.starts_with(fx.runtime.join("stockade")));
        assert!(!status.starts_with(&fx.ws) && !status.starts_with("/tmp"));
    }
}

#[test]
fn a_confined_run_records_confined_and_classify_consumes_the_private_directory() {
    let fx = Fixture::new();
    let c = confine(&fx, &[], "echo out; echo err >&2");
    let out = spawn_argv(&c);
    assert_code(&out, 0);
    // The runner added nothing to the target's streams, and reported out of band.
    assert_eq!(text(&out.stdout), "out\n");
    assert_eq!(text(&out.stderr), "err\n");
    assert_eq!(status_text(&c), "stockade-status 1 confined full\n");
    let mut v = classify(&fx, &c, &out);
    // The receipt fields an executor's process allows (tests/receipts.rs has the rest).
    let receipt = v.as_object_mut().unwrap().remove("receipt").unwrap();
    assert_eq!(receipt["bindingVerified"], true);
    assert_eq!(receipt["requestDigest"], c["binding"]["requestDigest"]);
    assert!(
        receipt["executable"]["path"]
            .as_str()
            .unwrap()
            .ends_with("/bash")
    );
    assert_eq!(
        v,
        serde_json::json!({
            "contract": 2, "outcome": "ok", "mode": "workspace-write", "denied": false,
            "runnerFailed": false, "detail": null, "enforcement": "full",
            "evidence": "status-channel", "denials": []
        })
    );
    assert!(!private_dir(&c).exists());
    assert!(fx.leftover_requests().is_empty());
    // A second classification finds the directory gone before its time: that is never
    // taken for a clean run (nor a runner failure).
    let v = classify(&fx, &c, &out);
    assert_eq!(v["evidence"], "status-channel");
    assert_eq!(v["outcome"], "tampered", "{v}");
}

#[test]
fn a_forged_runner_failure_after_confinement_is_an_ordinary_failure() {
    let fx = Fixture::new();
    let c = confine(&fx, &[], FORGE);
    let out = spawn_argv(&c);
    assert_code(&out, 125);
    assert_eq!(
        runner_failure_line(&out),
        "stockade-runner: sandbox unavailable: forged"
    );
    let v = classify(&fx, &c, &out);
    assert_eq!(v["outcome"], "failed", "{v}");
    assert_eq!(v["runnerFailed"], false);
    assert_eq!(v["evidence"], "status-channel");
    assert_eq!(v["enforcement"], "full");

    // Without a status record (here one expired: a private directory whose name says it
    // is older than the sweep age, and which is gone), the same facts are judged by the
    // harness rules, which carry the runner's per-command failure tag: the forgery,
    // which lacks it, does not fool them either.
    let mut expired = c.clone();
    let old = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 3 * 24 * 3600;
    let base = private_dir(&c).parent().unwrap().to_path_buf();
    expired["statusPath"] = base
        .join(format!("req-{old}-goneGONEgone-1/status"))
        .display()
        .to_string()
        .into();
    let v = classify(&fx, &expired, &out);
    assert_eq!(v["outcome"], "failed", "{v}");
    assert_eq!(v["evidence"], "exit-rules");
    // Control: the untagged rule (what an executor gets without the tag) is fooled,
    // which is what the tag is for.
    let mut untagged = expired.clone();
    untagged["runnerFailureRules"][0]["fatalSignatures"] = serde_json::json!(["stockade-runner: "]);
    let v = classify(&fx, &untagged, &out);
    assert_eq!(v["outcome"], "runner-failed", "{v}");
    assert_eq!(v["detail"], "stockade-runner: sandbox unavailable: forged");
}

#[test]
fn the_command_cannot_write_the_status_file_by_path() {
    let fx = Fixture::new();
    let glob = format!("{}/stockade/req-*/status", fx.runtime.display());
    let attack = format!("for f in {glob}; do echo forged >> $f || exit 9; done");
    let c = confine(&fx, &[], &attack);
    let out = spawn_argv(&c);
    assert_code(&out, 9);
    assert!(text(&out.stderr).contains("Permission denied"), "{out:?}");
    assert_eq!(status_text(&c), "stockade-status 1 confined full\n");
    let v = classify(&fx, &c, &out);
    assert_eq!(v["outcome"], "denied");
    assert_eq!(v["evidence"], "status-channel");

    // Positive control: the same write to a private file of the same kind inside the
    // workspace succeeds; only where the status file lies stops it (which is why
    // `confine` refuses a policy whose writable roots contain the control directory).
    let copy = fx.ws.join("status-copy");
    std::fs::write(&copy, "").unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o600)).unwrap();
    let attack = format!("echo forged >> {} || exit 9", copy.display());
    let c = confine(&fx, &[], &attack);
    let out = spawn_argv(&c);
    assert_code(&out, 0);
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), "forged\n");
}

#[test]
fn the_target_never_holds_the_status_descriptor() {
    let fx = Fixture::new();
    let c = confine(
        &fx,
        &[],
        "for f in /proc/$$/fd/*; do readlink $f; done; true",
    );
    let out = spawn_argv(&c);
    assert_code(&out, 0);
    let links = text(&out.stdout);
    // Control: the listing shows the shell's own descriptors (stdout is a pipe).
    assert!(links.contains("pipe:"), "{links}");
    assert!(!links.contains("/status"), "{links}");
    assert!(
        !links.contains(&fx.runtime.display().to_string()),
        "{links}"
    );
}

#[test]
fn a_runner_failure_is_recorded_and_decided_by_the_record_not_by_stderr() {
    let fx = Fixture::new();
    // The workspace disappears between confine and spawn: the runner cannot enter it.
    let ws = fx.root.join("doomed");
    std::fs::create_dir(&ws).unwrap();
    let c = confine(&fx, &["--workspace", ws.to_str().unwrap()], "true");
    std::fs::remove_dir(&ws).unwrap();
    let out = spawn_argv(&c);
    assert_code(&out, 125);
    let line = runner_failure_line(&out);
    // The record carries a stable kind and the same message as the stderr line.
    // After the prefix and the failure tag.
    let message = line.split_once("] ").unwrap().1;
    assert!(message.starts_with("workspace root "), "{line}");
    assert_eq!(
        status_text(&c),
        format!("stockade-status 1 failed grant-path {message}\n")
    );
    // The executor lost stderr entirely: the record still says runner failure.
    let res = classify_out(&fx, &c, &["--exit-code", "125"], None);
    assert_code(&res, 0);
    let v: Value = serde_json::from_slice(&res.stdout).unwrap();
    assert_eq!(v["outcome"], "runner-failed", "{v}");
    assert_eq!(v["runnerFailed"], true);
    assert_eq!(v["enforcement"], Value::Null);
    assert_eq!(v["evidence"], "status-channel");
    let detail = str_field(&v, "detail");
    assert!(detail.starts_with("stockade-runner: "), "{detail}");
    assert!(detail.contains(message), "{detail}");
    assert!(detail.ends_with("[grant-path]"), "{detail}");
    assert!(!private_dir(&c).exists());
}

#[test]
fn a_runner_that_never_got_to_confine_is_a_runner_failure() {
    let fx = Fixture::new();
    let c = confine(&fx, &[], "true");
    // The request is gone (consumed elsewhere): the runner fails before it can open the
    // status file, so the file stays empty.
    std::fs::remove_file(c["argv"][2].as_str().unwrap()).unwrap();
    let out = spawn_argv(&c);
    assert_code(&out, 125);
    let line = runner_failure_line(&out);
    assert_eq!(status_text(&c), "");
    let v = classify(&fx, &c, &out);
    assert_eq!(v["outcome"], "runner-failed", "{v}");
    assert_eq!(v["detail"], line.as_str());
    assert_eq!(v["evidence"], "status-channel");
}

#[test]
fn exit_126_and_127_after_confinement_are_the_commands_failures() {
    let fx = Fixture::new();
    std::fs::write(fx.ws.join("noexec"), "#!/bin/sh\n").unwrap();
    for (argv, code) in [
        (&["no-such-program-xyz"][..], 127),
        (&["./noexec"][..], 126),
    ] {
        let mut args = vec!["--"];
        args.extend(argv);
        let c = fx.confine(&args);
        let out = spawn_argv(&c);
        assert_code(&out, code);
        runner_failure_line(&out);
        assert_eq!(status_text(&c), "stockade-status 1 confined full\n");
        let v = classify(&fx, &c, &out);
        assert_eq!(v["outcome"], "failed", "{v}");
        assert_eq!(v["runnerFailed"], false);
        assert_eq!(v["denied"], false);
    }
}

#[test]
fn signals_and_denials_are_classified() {
    let fx = Fixture::new();
    let c = confine(&fx, &[], "kill -KILL $$");
    let out = spawn_argv(&c);
    assert_eq!(out.status.code(), None);
    let res = classify_out(&fx, &c, &["--signal", "KILL"], Some(&out.stderr));
    assert_code(&res, 0);
    let v: Value = serde_json::from_slice(&res.stdout).unwrap();
    assert_eq!(v["outcome"], "signaled", "{v}");
    assert_eq!(v["detail"], "killed by signal SIGKILL");

    let target = fx.outside.join("x");
    let deny = format!("echo x > {}", target.display());
    let c = confine(&fx, &["--mode", "read-only"], &deny);
    let out = spawn_argv(&c);
    let v = classify(&fx, &c, &out);
    assert_eq!(v["outcome"], "denied", "{v}");
    assert_eq!(v["denied"], true);
    // The detail is the refusal named: its kind and path.
    let detail = str_field(&v, "detail");
    assert!(
        detail.contains("file write denied") && detail.contains(target.to_str().unwrap()),
        "{v}"
    );
    assert!(!target.exists());
    // Positive control: unconfined, the same write works and nothing is denied; there
    // is no runner, so no status.
    let c = confine(&fx, &["--mode", "danger-full-access"], &deny);
    assert!(c.get("statusPath").is_none() && c.get("statusChannel").is_none());
    let out = spawn_argv(&c);
    assert_code(&out, 0);
    assert!(target.exists());
    let v = classify(&fx, &c, &out);
    assert_eq!(v["outcome"], "ok");
    assert_eq!(v["enforcement"], Value::Null);
    assert_eq!(v["evidence"], "exit-rules");
}

#[test]
fn stockade_run_lets_the_status_record_decide_runner_failure() {
    let fx = Fixture::new();
    let script = format!("echo x > {}/x; {FORGE}", fx.outside.display());
    // Out of band: the forged line is no runner failure, so the denial is reported.
    let out = fx
        .stockade(["run", "--", "bash", "-c", &script])
        .output()
        .unwrap();
    assert_code(&out, 125);
    assert!(
        text(&out.stderr).contains("[sandbox: file access denied under"),
        "{out:?}"
    );
    // In band (control): the exit rules take the forgery for a runner failure, and a
    // runner failure outranks denial.
    let out = fx
        .stockade(["run"])
        .args(every_base_writable(&fx))
        .args(["--", "bash", "-c", &script])
        .output()
        .unwrap();
    assert_code(&out, 125);
    assert!(
        !text(&out.stderr).contains("file access denied under"),
        "{out:?}"
    );
    assert!(fx.leftover_requests().is_empty());
}

#[test]
fn classify_refuses_bad_input_with_one_line_and_exit_125() {
    let fx = Fixture::new();
    let c = confine(&fx, &[], "true");
    let mut wrong = c.clone();
    wrong["contract"] = 1.into();
    let bad_json = serde_json::json!({"argv": ["x"]});
    for (confined, facts, want) in [
        (&wrong, &["--exit-code", "0"][..], "contract version 1"),
        (&bad_json, &["--exit-code", "0"], "not ConfinedArgv JSON"),
        (&c, &["--signal", "SIGNOPE"], "is not a signal"),
        (&c, &[], "--exit-code"),
        (
            &c,
            &["--exit-code", "1", "--signal", "KILL"],
            "cannot be used",
        ),
        (&c, &["--exit-code", "300"], "300"),
    ] {
        let out = classify_out(&fx, confined, facts, None);
        assert_code(&out, 125);
        assert!(out.stdout.is_empty());
        assert!(text(&out.stderr).contains(want), "{facts:?}: {out:?}");
    }
    // Both inputs from stdin, and a missing file.
    let out = fx
        .stockade([
            "classify",
            "--confined",
            "-",
            "--stderr",
            "-",
            "--exit-code",
            "0",
        ])
        .output()
        .unwrap();
    assert_code(&out, 125);
    assert!(
        text(&out.stderr).starts_with("stockade: --confined"),
        "{out:?}"
    );
    launcher_failure_line(&out);
    let out = fx
        .stockade([
            "classify",
            "--confined",
            "/nonexistent/c.json",
            "--exit-code",
            "0",
        ])
        .output()
        .unwrap();
    assert_code(&out, 125);
    assert_eq!(text(&out.stderr).lines().count(), 1, "{out:?}");
    // Refused input consumes nothing.
    assert!(private_dir(&c).exists());
    assert_eq!(
        std::fs::metadata(private_dir(&c))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o700
    );
}

#[test]
fn the_runner_opens_only_an_empty_private_regular_status_file_and_never_follows_links() {
    use std::os::unix::fs::OpenOptionsExt;
    let fx = Fixture::new();
    let marker = fx.ws.join("ran");
    let script = format!("touch {}", marker.display());
    let new_file = |path: &Path, mode: u32, content: &str| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(path)
            .unwrap();
        f.write_all(content.as_bytes()).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    let victim = fx.outside.join("victim");
    new_file(&victim, 0o600, "");
    let link = fx.runtime.join("link");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let used = fx.runtime.join("used");
    new_file(&used, 0o600, "stockade-status 1 confined full\n");
    let open = fx.runtime.join("open");
    new_file(&open, 0o644, "");
    let dir = fx.runtime.join("dir");
    std::fs::create_dir(&dir).unwrap();
    let cases: [(&Path, &str); 5] = [
        (&link, "symbolic link"),
        (&used, "not empty"),
        (&open, "mode 0644"),
        (&dir, "not a regular file"),
        (&fx.runtime.join("missing"), "No such file"),
    ];
    for (i, (status, want)) in cases.into_iter().enumerate() {
        let mut req = request_for(&fx, &script);
        req.status_path = Some(status.to_path_buf());
        let path = write_request_bytes(&fx, &format!("req-{i}"), &req.encode().unwrap());
        let out = run_request(&path);
        assert_code(&out, 125);
        let line = runner_failure_line(&out);
        assert!(
            line.contains("status file") && line.contains(want),
            "{line}"
        );
        assert!(!marker.exists(), "the target ran despite {line}");
    }
    // Nothing was written through the link.
    assert_eq!(std::fs::read(&victim).unwrap(), b"");

    // Positive control: an empty private regular file is accepted and gets the record.
    let good = fx.runtime.join("good");
    new_file(&good, 0o600, "");
    let mut req = request_for(&fx, &script);
    req.status_path = Some(good.clone());
    let path = write_request_bytes(&fx, "req-good", &req.encode().unwrap());
    let out = run_request(&path);
    assert_code(&out, 0);
    assert!(marker.exists());
    assert_eq!(
        std::fs::read_to_string(&good).unwrap(),
        "stockade-status 1 confined partial\n"
    );
}

#[test]
fn classify_refuses_an_oversized_input_and_classifies_the_same_facts_with_a_normal_one() {
    let fx = Fixture::new();
    let v = fx.confine(&["--", "bash", "-c", "echo hi >&2; exit 3"]);
    let out = spawn_argv(&v);
    assert_code(&out, 3);
    let confined = fx.root.join("confined.json");
    std::fs::write(&confined, v.to_string()).unwrap();
    // A sparse file one byte over the cap: cheap to make, refused without a verdict.
    let big = fx.root.join("big-stderr");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len((64 << 20) + 1).unwrap();
    let run = |stderr: &std::path::Path| {
        fx.stockade(["classify", "--exit-code", "3", "--confined"])
            .arg(&confined)
            .arg("--stderr")
            .arg(stderr)
            .output()
            .unwrap()
    };
    let res = run(&big);
    assert_code(&res, 125);
    let line = launcher_failure_line(&res);
    assert!(line.contains("larger than"), "{line}");
    assert!(res.stdout.is_empty());
    // Control: the real stderr classifies as an ordinary failure.
    let small = fx.root.join("stderr");
    std::fs::write(&small, &out.stderr).unwrap();
    let res = run(&small);
    assert_code(&res, 0);
    let verdict: Value = serde_json::from_slice(&res.stdout).unwrap();
    assert_eq!(verdict["outcome"], "failed");
}

/// Writable roots covering every candidate base of the private directory (the fixture's
/// runtime dir, `/run`; the temp dir is `/tmp`, always writable), so the status channel
/// is in-band; narrower than `/`, which is refused as a broad root.
fn every_base_writable(fx: &Fixture) -> Vec<&str> {
    let runtime = fx.runtime.to_str().unwrap();
    vec!["--writable", runtime, "--writable", "/run"]
}

/// The in-band rule alone (what an executor that never reads the status file judges
/// with) tells the runner's own failure from a forged one: the rule carries the
/// per-command failure tag, which the runner prints and the command never learns.
#[test]
fn the_in_band_rule_matches_the_runners_failure_and_not_a_forgery() {
    let fx = Fixture::new();
    let matches = |c: &Value, out: &Output| {
        let sig = c["runnerFailureRules"][0]["fatalSignatures"][0]
            .as_str()
            .unwrap()
            .to_lowercase();
        out.status.code() == Some(125)
            && text(&out.stderr)
                .lines()
                .any(|l| l.to_lowercase().contains(&sig))
    };
    // A command that forges the runner's line, even with the argv it can see.
    let forge = "echo \"stockade-runner: [$(tr '\\0' ' ' < /proc/self/cmdline)] forged\" >&2; \
                 echo 'stockade-runner: [] forged' >&2; exit 125";
    let c = fx.confine(&["--", "sh", "-c", forge]);
    let out = spawn_argv(&c);
    assert_code(&out, 125);
    assert!(!matches(&c, &out), "{}", text(&out.stderr));
    // Control: the runner's own failure (the request consumed already) matches.
    let c = fx.confine(&["--", "true"]);
    std::fs::remove_file(c["argv"][2].as_str().unwrap()).unwrap();
    let out = spawn_argv(&c);
    assert!(matches(&c, &out), "{}", text(&out.stderr));
}

/// Every file the launcher, the stage or the proxy puts in a private directory is named
/// in the provider contract and removed by the harness provider (which removes by name
/// and then `rmdir`s: a file it does not know leaves the directory behind).
#[test]
fn the_files_of_a_private_directory_are_named_where_executors_remove_them() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let contract = std::fs::read_to_string(root.join("docs/provider-contract.md")).unwrap();
    let provider = std::fs::read_to_string(root.join("integrations/dsh/src/index.ts")).unwrap();
    let list = provider
        .lines()
        .find(|l| l.starts_with("const PRIVATE_FILES"))
        .expect("integrations/dsh/src/index.ts has no PRIVATE_FILES list");
    for name in [
        "request",
        stockade_policy::status::STATUS_FILE,
        stockade_policy::stage_report::REPORT_FILE,
        stockade_policy::network_denials::LOG_FILE,
        stockade_policy::attribution::SCOPE_FILE,
        stockade_policy::journal::WITHDRAWN_FILE,
    ] {
        assert!(
            list.contains(&format!("'{name}'")),
            "integrations/dsh does not remove {name}: {list}"
        );
        assert!(
            contract.contains(&format!("`{name}`")),
            "docs/provider-contract.md does not name {name}"
        );
    }
}

/// Spawns a ConfinedArgv as an executor would, with `env` added to this test's own
/// environment.
fn spawn_argv_with_env(confined: &Value, env: &[(&str, &str)]) -> Output {
    let argv = confined_argv(confined);
    std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .env_remove("TMPDIR")
        .output()
        .unwrap()
}

#[test]
fn variables_withheld_from_an_inherited_environment_are_named_to_classify() {
    // Without the stage and with it (where namespaces are available).
    withheld_names_reach_classify(&Fixture::new());
    if stage_available() {
        withheld_names_reach_classify(&Fixture::staged());
    } else {
        eprintln!(
            "SKIPPED (no namespaces here): variables_withheld_from_an_inherited_environment_are_named_to_classify with the stage"
        );
    }
}

/// Whether the namespace stage can run here (`stockade probe`).
fn stage_available() -> bool {
    let out = std::process::Command::new(stockade_bin())
        .args(["probe", "--json"])
        .output()
        .unwrap();
    let p: Value = serde_json::from_slice(&out.stdout).unwrap();
    p["kernel"]["namespaces"]["available"] == true
}

fn withheld_names_reach_classify(fx: &Fixture) {
    let env = [
        ("GH_TOKEN", "forwarded-on-purpose"),
        ("STOCKADE_TEST_PASSWORD", "hunter2"),
        ("STOCKADE_TEST_PLAIN", "kept"),
    ];
    let script =
        "echo \"${GH_TOKEN-unset} ${STOCKADE_TEST_PASSWORD-unset} ${STOCKADE_TEST_PLAIN-unset}\"";
    // The executor's environment, through the rule: the two secrets never arrive, and
    // classify names them (never their values) from the runner's record.
    let c = confine(fx, &["--inherit-env"], script);
    let out = spawn_argv_with_env(&c, &env);
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "unset unset kept\n");
    let record = status_text(&c);
    assert!(
        record.contains(" env-removed ") && !record.contains("hunter2"),
        "{record}"
    );
    let v = classify(fx, &c, &out);
    assert_eq!(v["outcome"], "ok", "{v}");
    let named: Vec<&str> = v["envRemoved"]
        .as_array()
        .unwrap_or_else(|| panic!("no envRemoved: {v}"))
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(named.contains(&"GH_TOKEN"), "{v}");
    assert!(named.contains(&"STOCKADE_TEST_PASSWORD"), "{v}");
    assert!(!named.contains(&"STOCKADE_TEST_PLAIN"), "{v}");
    assert!(!v.to_string().contains("hunter2"), "{v}");

    // The control: kept on purpose, it arrives and is not named.
    let c = confine(fx, &["--inherit-env", "--keep-env", "GH_TOKEN"], script);
    let out = spawn_argv_with_env(&c, &env);
    assert_eq!(text(&out.stdout), "forwarded-on-purpose unset kept\n");
    let v = classify(fx, &c, &out);
    let named = v["envRemoved"].to_string();
    assert!(
        !named.contains("GH_TOKEN") && named.contains("STOCKADE_TEST_PASSWORD"),
        "{v}"
    );
    // Unfiltered: nothing is withheld, nothing named.
    let c = confine(fx, &["--inherit-env=unfiltered"], script);
    let out = spawn_argv_with_env(&c, &env);
    assert_eq!(text(&out.stdout), "forwarded-on-purpose hunter2 kept\n");
    let v = classify(fx, &c, &out);
    assert!(v.get("envRemoved").is_none(), "{v}");
}
