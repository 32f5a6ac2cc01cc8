//! Exact attribution from Landlock's audit records (ABI 7, root with `CAP_AUDIT_READ`,
//! audit on): `stockade run` names each refusal of its command's domain with
//! `evidence: audit`, those its lines never mention included, and never another
//! process's; where the records cannot be read it says why and names refusals from the
//! lines (`policy-check`). Audit is turned on for these tests (and put back after) by
//! the test itself: stockade never turns it on.

mod support;
use std::process::{Command, Stdio};
use support::*;

/// Why records cannot be read here, or `None` (root, Landlock ABI 7).
fn unavailable() -> Option<&'static str> {
    if !stockade_tests::is_root() {
        return Some("needs root (CAP_AUDIT_READ, and turning audit on for the test)");
    }
    let abi = Command::new(stockade_bin())
        .args(["probe", "--json"])
        .output()
        .ok()
        .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
        .and_then(|v| v["kernel"]["landlockAbi"].as_u64());
    match abi {
        Some(a) if a < 7 => Some("Landlock ABI below 7 records nothing after execve"),
        _ => None,
    }
}

macro_rules! needs_audit {
    ($name:expr) => {
        if let Some(why) = unavailable() {
            eprintln!("SKIPPED ({why}): {}", $name);
            return;
        }
    };
}

/// `stockade run --json ARGS -- bash -c SCRIPT` in `fx` (no stage), `HOME` in the fixture.
fn run(fx: &Fixture, args: &[&str], script: &str) -> serde_json::Value {
    let mut all = vec!["run", "--json"];
    all.extend(args);
    all.extend(["--", "bash", "-c", script]);
    run_json(fx.stockade(all).env("HOME", fx.root.join("home"))).1
}

fn audit_records(v: &serde_json::Value) -> Vec<&serde_json::Value> {
    v["denials"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["evidence"] == "audit")
        .collect()
}

#[test]
fn a_write_a_hidden_read_and_a_connection_are_named_from_the_kernel_s_records() {
    needs_audit!("a_write_a_hidden_read_and_a_connection_are_named_from_the_kernel_s_records");
    let _on = stockade_tests::audit::on().unwrap();
    let fx = Fixture::new();
    let home = fx.root.join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id"), "key\n").unwrap();
    std::fs::write(fx.outside.join("f"), "old\n").unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let outside = fx.outside.to_str().unwrap();
    let cases: [(&str, String, &str, String, Vec<String>); 3] = [
        (
            "write",
            format!("echo x > {outside}/f"),
            "file-write",
            format!("{outside}/f"),
            vec!["--writable".into(), outside.into()],
        ),
        (
            "hidden read",
            format!("cat {}/.ssh/id", home.display()),
            "hidden-path",
            format!("{}/.ssh/id", home.display()),
            vec!["--no-default-hide".into()],
        ),
        (
            "connect",
            format!("echo hi > /dev/tcp/127.0.0.1/{port}"),
            "network-address",
            format!("127.0.0.1:{port}"),
            vec!["--allow-tcp-connect".into(), port.to_string()],
        ),
    ];
    for (what, script, kind, target, grant) in cases {
        // A port allowed (not this one) lets the socket filter pass internet sockets, so
        // Landlock's network rule is what refuses the connection.
        let base: &[&str] = match what {
            "connect" => &["--allow-tcp-connect", "1"],
            _ => &[],
        };
        let v = run(&fx, base, &script);
        assert_eq!(v["attribution"]["evidence"], "audit", "{what}: {v}");
        assert_eq!(v["sandbox"]["denied"], true, "{what}: {v}");
        let records = audit_records(&v);
        let r = records
            .iter()
            .find(|r| r["kind"] == kind)
            .unwrap_or_else(|| panic!("{what}: no audit record of kind {kind}: {v}"));
        let named = match (&r["path"], &r["host"]) {
            (serde_json::Value::String(p), _) => p.clone(),
            (_, h) => format!("{}:{}", h.as_str().unwrap(), r["port"]),
        };
        assert_eq!(named, target, "{what}: {v}");
        if kind != "hidden-path" {
            assert_eq!(r["grant"], grant.join(" "), "{what}: {v}");
        }
        // Control: the grant the record names lets the same command through.
        let args: Vec<&str> = grant.iter().map(String::as_str).collect();
        let v = run(&fx, &args, &script);
        assert_eq!(v["exitCode"], 0, "{what} with {grant:?}: {v}");
        assert_eq!(
            v["denials"],
            serde_json::json!([]),
            "{what} with {grant:?}: {v}"
        );
    }
}

#[test]
fn a_relative_write_after_cd_and_a_refusal_the_command_hides_are_named_exactly() {
    needs_audit!("a_relative_write_after_cd_and_a_refusal_the_command_hides_are_named_exactly");
    let _on = stockade_tests::audit::on().unwrap();
    let fx = Fixture::new();
    let outside = fx.outside.to_str().unwrap();
    // The line says only `rel`, which from the starting directory is writable: the
    // kernel's record names the directory it was refused in.
    let script = format!("cd {outside} && touch rel");
    let v = run(&fx, &[], &script);
    assert_eq!(v["sandbox"]["denied"], true, "{v}");
    let records = audit_records(&v);
    assert_eq!(records.len(), 1, "{v}");
    assert_eq!(records[0]["kind"], "file-write", "{v}");
    assert_eq!(records[0]["path"], outside, "{v}");
    assert_eq!(records[0]["grant"], format!("--writable {outside}"), "{v}");
    let v = run(&fx, &["--writable", outside], &script);
    assert_eq!(
        (
            v["exitCode"].as_i64(),
            v["denials"].as_array().map(Vec::len)
        ),
        (Some(0), Some(0)),
        "{v}"
    );
    // Exit 0, nothing on stderr: still reported, not denied.
    std::fs::create_dir(fx.outside.join("quiet")).unwrap();
    let script = format!("touch {outside}/quiet/q 2>/dev/null; true");
    let v = run(&fx, &[], &script);
    assert_eq!(
        (v["exitCode"].as_i64(), &v["sandbox"]["denied"]),
        (Some(0), &serde_json::json!(false)),
        "{v}"
    );
    let records = audit_records(&v);
    assert_eq!(records.len(), 1, "{v}");
    assert_eq!(records[0]["path"], format!("{outside}/quiet"), "{v}");
}

#[test]
fn another_sandboxed_process_s_refusals_are_never_the_command_s() {
    needs_audit!("another_sandboxed_process_s_refusals_are_never_the_command_s");
    let _on = stockade_tests::audit::on().unwrap();
    let fx = Fixture::new();
    let theirs = fx.outside.join("theirs");
    let ours = fx.outside.join("ours");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::create_dir(&ours).unwrap();
    let tick = fx.ws.join("tick");
    let stop = fx.ws.join("stop");
    // Another stockade run (its own reader, its own domain), refused over and over
    // while ours runs.
    let mut other = fx
        .stockade([
            "run",
            "--json",
            "--",
            "bash",
            "-c",
            &format!(
                "i=0; while [ ! -e {stop} ]; do touch {t}/x 2>/dev/null; i=$((i+1)); echo $i > {tick}; sleep 0.01; done",
                stop = stop.display(),
                t = theirs.display(),
                tick = tick.display()
            ),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Ours waits until the other was refused a few times after ours started.
    let script = format!(
        "until [ -s {tick} ]; do sleep 0.01; done; a=$(cat {tick}); until [ \"$(cat {tick})\" -gt $((a+3)) ]; do sleep 0.01; done; touch {o}/y",
        tick = tick.display(),
        o = ours.display()
    );
    let v = run(&fx, &[], &script);
    std::fs::write(&stop, "").unwrap();
    other.wait().unwrap();
    assert_eq!(v["attribution"]["evidence"], "audit", "{v}");
    let paths: Vec<&str> = v["denials"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["path"].as_str())
        .collect();
    assert_eq!(paths, [ours.to_str().unwrap()], "{v}");
}

#[test]
fn where_the_records_cannot_be_read_evidence_is_policy_check_and_says_why() {
    let fx = Fixture::new();
    if !stockade_tests::is_root() {
        // As the ordinary user running the tests: the records cannot be read.
        let v = run(&fx, &[], &format!("touch {}/x", fx.outside.display()));
        assert_eq!(v["attribution"]["evidence"], "policy-check", "{v}");
        let reason = v["attribution"]["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("CAP_AUDIT_READ"), "{v}");
        return;
    }
    let outside = fx.outside.to_str().unwrap();
    let script = format!("touch {outside}/x");
    let check = |v: &serde_json::Value, why: &str, what: &str| {
        assert_eq!(v["attribution"]["evidence"], "policy-check", "{what}: {v}");
        let reason = v["attribution"]["reason"].as_str().unwrap_or_default();
        assert!(reason.contains(why), "{what}: {reason}: {v}");
        // The line still names it.
        let r = &v["denials"][0];
        assert_eq!(
            (r["evidence"].as_str(), r["path"].as_str()),
            (Some("policy-check"), Some(format!("{outside}/x").as_str())),
            "{what}: {v}"
        );
    };
    // Audit off (as this machine has it by default): never turned on by stockade.
    let (enabled, lock) = stockade_tests::audit::held().unwrap();
    if enabled == Some(false) {
        let v = run(&fx, &[], &script);
        check(&v, "audit is off", "audit off");
        assert_eq!(stockade_tests::audit::enabled(), Some(false));
    } else {
        eprintln!(
            "SKIPPED (audit is on on this machine; the test does not turn it off): the audit-off case"
        );
    }
    drop(lock);
    {
        let _on = stockade_tests::audit::on().unwrap();
        // Root without CAP_AUDIT_READ.
        let mut cmd = Command::new("setpriv");
        cmd.args([
            "--bounding-set",
            "-audit_read",
            "--inh-caps",
            "-audit_read",
            "--",
        ])
        .arg(stockade_bin())
        .args(["run", "--no-stage", "--json", "--", "bash", "-c", &script])
        .current_dir(&fx.ws)
        .env("STOCKADE_RUNNER", runner_bin())
        .env("XDG_RUNTIME_DIR", &fx.runtime)
        .env_remove("TMPDIR");
        let (_, v) = run_json(&mut cmd);
        check(&v, "CAP_AUDIT_READ", "root without CAP_AUDIT_READ");
        // An ordinary user, owning the fixture (as `tests/unprivileged` runs).
        match unreachable_by(
            65534,
            &[&stockade_bin(), &runner_bin(), fx.root.parent().unwrap()],
        ) {
            None => {
                std::fs::create_dir_all(fx.root.join("home")).unwrap();
                let chown = Command::new("chown")
                    .args(["-R", "65534:65534"])
                    .arg(&fx.root)
                    .status();
                assert!(chown.unwrap().success());
                let mut cmd = Command::new("setpriv");
                cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                    .arg(stockade_bin())
                    .args(["run", "--no-stage", "--json", "--", "bash", "-c", &script])
                    .current_dir(&fx.ws)
                    .env("STOCKADE_RUNNER", runner_bin())
                    .env("XDG_RUNTIME_DIR", &fx.runtime)
                    .env("HOME", fx.root.join("home"))
                    .env_remove("TMPDIR");
                let (_, v) = run_json(&mut cmd);
                check(&v, "CAP_AUDIT_READ", "an ordinary user");
            }
            Some(why) => eprintln!("SKIPPED ({why}): the ordinary user's case"),
        }
    }
}

#[test]
fn thousands_of_refusals_keep_a_bounded_list_and_are_counted() {
    needs_audit!("thousands_of_refusals_keep_a_bounded_list_and_are_counted");
    let _on = stockade_tests::audit::on().unwrap();
    let fx = Fixture::new();
    for d in 0..100 {
        std::fs::create_dir(fx.outside.join(format!("d{d}"))).unwrap();
    }
    // 3000 refusals in 100 directories: more distinct refusals than are kept.
    let script = format!(
        "for i in $(seq 3000); do : > {}/d$((i % 100))/f 2>/dev/null; done; true",
        fx.outside.display()
    );
    let v = run(&fx, &[], &script);
    assert_eq!(v["attribution"]["evidence"], "audit", "{v}");
    let listed = audit_records(&v).len();
    assert!((60..=64).contains(&listed), "{listed} listed: {v}");
    let more = v["attribution"]["more"].as_u64().unwrap_or(0);
    assert!(
        more + listed as u64 >= 3000,
        "{more} more, {listed} listed: {v}"
    );
}
