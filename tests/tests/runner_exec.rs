//! How the runner starts the target: `execvp`-like resolution over the request's own
//! PATH (the binding's rule: each request here is bound as `confine` would bind it),
//! ENOEXEC through /bin/sh, exactly the request's environment, and the 126/127
//! conventions.

mod support;
use std::os::unix::fs::PermissionsExt;
use support::*;

fn script(path: &std::path::Path, body: &str, mode: u32) {
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn run(fx: &Fixture, argv: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut req = request_for(fx, "");
    req.argv = argv.iter().map(|a| (*a).into()).collect();
    req.env = env
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect();
    rebind(&mut req);
    let path = write_request_bytes(fx, "req", &req.encode().unwrap());
    run_request(&path)
}

#[test]
fn bare_names_resolve_over_the_requests_path_skipping_non_executables() {
    let fx = Fixture::new();
    let a = fx.root.join("a");
    let b = fx.root.join("b");
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    // In a: present but not executable (EACCES: remembered, search goes on).
    script(&a.join("tool"), "#!/bin/sh\necho from-a\n", 0o644);
    script(&b.join("tool"), "#!/bin/sh\necho from-b \"$@\"\n", 0o755);
    let path = format!("{}:{}", a.display(), b.display());
    let out = run(&fx, &["tool", "x"], &[("PATH", &path)]);
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "from-b x\n");

    // Only the non-executable one: 126, named, without the denial dialect.
    let out = run(&fx, &["tool"], &[("PATH", &a.display().to_string())]);
    assert_code(&out, 126);
    let line = runner_failure_line(&out);
    assert!(line.contains("cannot execute tool"), "{line}");
    assert!(!line.to_lowercase().contains("permission denied"), "{line}");

    // Not on the request's PATH at all (it is on the runner's own): 127.
    let out = run(
        &fx,
        &["sh", "-c", "true"],
        &[("PATH", &b.display().to_string())],
    );
    assert_code(&out, 127);
    assert!(runner_failure_line(&out).contains("sh: command not found"));
}

#[test]
fn without_path_the_default_search_path_is_used() {
    let fx = Fixture::new();
    let out = run(&fx, &["sh", "-c", "echo ok"], &[]);
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "ok\n");
}

#[test]
fn a_file_without_a_shebang_runs_through_bin_sh() {
    let fx = Fixture::new();
    let s = fx.ws.join("plain");
    script(&s, "echo plain \"$1\"\n", 0o755);
    let out = run(&fx, &[s.to_str().unwrap(), "arg"], &[]);
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "plain arg\n");
}

#[test]
fn explicit_paths_report_127_and_126() {
    let fx = Fixture::new();
    let missing = fx.ws.join("missing");
    let out = run(&fx, &[missing.to_str().unwrap()], &[]);
    assert_code(&out, 127);
    assert!(runner_failure_line(&out).contains("missing"));
    let noexec = fx.ws.join("noexec");
    script(&noexec, "#!/bin/sh\n", 0o644);
    let out = run(&fx, &[noexec.to_str().unwrap()], &[]);
    assert_code(&out, 126);
    assert!(runner_failure_line(&out).contains("noexec"));
}

#[test]
fn the_target_gets_exactly_the_requests_environment() {
    let fx = Fixture::new();
    let out = run(
        &fx,
        &["/usr/bin/env"],
        &[("ONLY", "this"), ("PATH", "/nowhere"), ("EMPTY", "")],
    );
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "ONLY=this\nPATH=/nowhere\nEMPTY=\n");
}

#[test]
fn the_target_starts_in_the_requests_cwd_and_a_missing_cwd_fails_closed() {
    let fx = Fixture::new();
    let out = run(&fx, &["/bin/pwd"], &[]);
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), format!("{}\n", fx.ws.display()));

    let mut req = request_for(&fx, "touch ran");
    req.cwd = fx.root.join("gone");
    rebind(&mut req);
    let path = write_request_bytes(&fx, "req2", &req.encode().unwrap());
    let out = run_request(&path);
    assert_code(&out, 125);
    assert!(runner_failure_line(&out).contains("cannot enter working directory"));
}

#[test]
fn danger_full_access_requests_are_refused_by_the_runner() {
    let fx = Fixture::new();
    let marker = fx.outside.join("unconfined");
    let mut req = request_for(&fx, &format!("touch {}", marker.display()));
    req.policy = req
        .policy
        .with_mode(stockade_policy::Mode::DangerFullAccess);
    let path = write_request_bytes(&fx, "req", &req.encode().unwrap());
    let out = run_request(&path);
    assert_code(&out, 125);
    assert!(runner_failure_line(&out).contains("only runs confined modes"));
    assert!(!marker.exists());
}

#[test]
fn a_workspace_deleted_before_the_run_is_a_runner_failure() {
    let fx = Fixture::new();
    let ws = fx.root.join("doomed");
    std::fs::create_dir(&ws).unwrap();
    let marker = fx.outside.join("ran");
    let mut req = request_for(&fx, &format!("touch {}", marker.display()));
    let mut ids = req.policy.root_ids().to_vec();
    ids[0] = stockade_policy::roots::RootId::of(&ws).unwrap();
    req.policy = req.policy.with_workspace(ws.clone()).with_root_ids(ids);
    std::fs::remove_dir(&ws).unwrap();
    let path = write_request_bytes(&fx, "req", &req.encode().unwrap());
    let out = run_request(&path);
    assert_code(&out, 125);
    let line = runner_failure_line(&out);
    assert!(
        line.contains("workspace root") && line.contains("doomed"),
        "{line}"
    );
    assert!(!marker.exists());
}
