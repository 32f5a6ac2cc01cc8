//! Every refusal stockade caused is named (kind, path or host, rule, narrowest grant,
//! evidence), and nothing else is called one: an error Unix permissions give the invoking
//! user anyway is no denial. Each named refusal has its control: the same command with
//! the grant the record names succeeds.

mod support;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use support::*;

const NOBODY: u32 = 65534;

/// `stockade ARGS` in `fx` as uid/gid 65534 with no supplementary groups; `--no-stage`
/// first unless `stage`.
fn as_nobody(fx: &Fixture, stage: bool, args: &[&str]) -> Output {
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(stockade_bin())
        .arg(args[0]);
    if !stage {
        cmd.arg("--no-stage");
    }
    cmd.args(&args[1..])
        .current_dir(&fx.ws)
        .env("STOCKADE_RUNNER", runner_bin())
        .env("XDG_RUNTIME_DIR", &fx.runtime)
        .env("HOME", fx.root.join("home"))
        .env_remove("TMPDIR")
        .stdin(Stdio::null());
    cmd.output().unwrap()
}

fn json_of(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {} {}",
            text(&out.stdout),
            text(&out.stderr)
        )
    })
}

fn chown_tree(p: &Path) {
    let out = Command::new("chown")
        .args(["-R", &format!("{NOBODY}:{NOBODY}")])
        .arg(p)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// A failed command that is not a denial: no record, no marker.
fn assert_not_denied(v: &serde_json::Value, what: &str) {
    assert_ne!(v["exitCode"], 0, "{what}: {v}");
    assert_eq!(v["sandbox"]["denied"], false, "{what}: {v}");
    assert_eq!(v["denials"], serde_json::json!([]), "{what}: {v}");
}

/// The one record of a denial.
fn the_record(v: &serde_json::Value) -> &serde_json::Value {
    let records = v["denials"].as_array().unwrap();
    assert_eq!(records.len(), 1, "{v}");
    &records[0]
}

#[test]
fn as_an_ordinary_user_unix_refusals_are_not_denials_and_policy_refusals_are() {
    if !stockade_tests::is_root() {
        eprintln!(
            "SKIPPED (needs root): as_an_ordinary_user_unix_refusals_are_not_denials_and_policy_refusals_are"
        );
        return;
    }
    let fx = Fixture::new();
    // A checkout beneath /root (mode 0700) keeps the binaries and the fixture out of the
    // user's reach: nothing to learn there.
    if let Some(why) = unreachable_by(
        NOBODY,
        &[&stockade_bin(), &runner_bin(), fx.root.parent().unwrap()],
    ) {
        eprintln!(
            "SKIPPED ({why}): as_an_ordinary_user_unix_refusals_are_not_denials_and_policy_refusals_are"
        );
        return;
    }
    std::fs::create_dir(fx.root.join("home")).unwrap();
    chown_tree(&fx.root);
    // A file the user does not own (root's), where the user may otherwise reach it.
    let foreign = fx.ws.join("roots-file");
    std::fs::write(&foreign, "x").unwrap();
    let foreign = foreign.to_str().unwrap().to_string();

    for stage in [false, true] {
        let json = |mode: &str, script: &str| {
            json_of(&as_nobody(
                &fx,
                stage,
                &["run", "--json", "--mode", mode, "--", "sh", "-c", script],
            ))
        };
        // The man page's example: /root is not the user's, with or without stockade.
        let out = as_nobody(
            &fx,
            stage,
            &["run", "--mode", "read-only", "--", "ls", "/root"],
        );
        assert_ne!(out.status.code(), Some(0));
        assert!(text(&out.stderr).contains("Permission denied"), "{out:?}");
        assert!(
            !text(&out.stderr).contains("[sandbox:"),
            "stage {stage}: {out:?}"
        );
        assert_not_denied(&json("read-only", "ls /root"), "ls /root");
        assert_not_denied(&json("workspace-write", "kill -TERM 1"), "kill 1");
        assert_not_denied(
            &json("workspace-write", &format!("chown {NOBODY} {foreign}")),
            "chown",
        );
        // /etc is not the user's to write either.
        assert_not_denied(
            &json("workspace-write", "touch /etc/stockade-attr"),
            "touch /etc",
        );

        // Positive control: a directory the user owns, outside the roots, is refused by
        // the policy alone; named, with the grant that allows it.
        let target = fx.outside.join(format!("w{stage}"));
        let script = format!("echo x > {}", target.display());
        let v = json("workspace-write", &script);
        assert_eq!(v["sandbox"]["denied"], true, "stage {stage}: {v}");
        let r = the_record(&v);
        assert_eq!(r["kind"], "file-write", "{v}");
        assert_eq!(r["path"], target.to_str().unwrap(), "{v}");
        let grant = format!("--writable {}", fx.outside.display());
        assert_eq!(r["grant"], grant.as_str(), "{v}");
        assert_eq!(r["evidence"], "policy-check", "{v}");
        assert!(!target.exists());
        let out = as_nobody(
            &fx,
            stage,
            &[
                "run",
                "--writable",
                fx.outside.to_str().unwrap(),
                "--",
                "sh",
                "-c",
                &script,
            ],
        );
        assert_code(&out, 0);
        assert!(target.exists(), "stage {stage}");
    }
}

/// `stockade run --json ARGS -- bash -c SCRIPT` in `fx`, with `HOME` at `home`.
fn run_json_in(fx: &Fixture, home: &Path, args: &[&str], script: &str) -> serde_json::Value {
    let mut all = vec!["run", "--json"];
    all.extend(args);
    all.extend(["--", "bash", "-c", script]);
    run_json(fx.stockade(all).env("HOME", home)).1
}

/// Control: `script` with `--writable OUTSIDE` succeeds, no record made.
fn writable_outside_allows(fx: &Fixture, home: &Path, script: &str) {
    let v = run_json_in(
        fx,
        home,
        &["--writable", fx.outside.to_str().unwrap()],
        script,
    );
    assert_eq!(v["exitCode"], 0, "{v}");
    assert_eq!(v["denials"], serde_json::json!([]), "{v}");
}

#[test]
fn a_write_outside_the_roots_is_named_with_writable_and_the_grant_allows_it() {
    for fx in [Fixture::new(), Fixture::staged()] {
        let home = fx.root.join("home");
        let target = fx.outside.join("sub").join("f");
        let script = format!(
            "mkdir -p {0} && echo x > {0}/f",
            target.parent().unwrap().display()
        );
        let v = run_json_in(&fx, &home, &[], &script);
        assert_eq!(v["sandbox"]["denied"], true, "{v}");
        let r = the_record(&v);
        assert_eq!(r["kind"], "file-write", "{v}");
        assert_eq!(r["path"], fx.outside.join("sub").to_str().unwrap(), "{v}");
        let grant = format!("--writable {}", fx.outside.display());
        assert_eq!(r["grant"], grant.as_str(), "{v}");
        // The marker names it too, before the marker agents know.
        let out = fx
            .stockade(["run", "--", "sh", "-c", &script])
            .env("HOME", &home)
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert!(
            err.ends_with(&format!(
                "[sandbox: file write denied: {} (allow with {grant})]\n[sandbox: file access denied under workspace-write mode]\n",
                fx.outside.join("sub").display()
            )),
            "{err}"
        );
        // Control: the grant the record names allows it.
        writable_outside_allows(&fx, &home, &script);
        assert!(target.exists());
    }
}

#[test]
fn a_relative_write_after_the_script_s_cd_is_named_where_it_went_and_the_grant_allows_it() {
    // Without the stage Landlock refuses it (`Permission denied`), with it the stage's
    // read-only mount (`Read-only file system`): either way the line says only `rel`.
    for fx in [Fixture::new(), Fixture::staged()] {
        let home = fx.root.join("home");
        let script = format!("cd {} && touch rel", fx.outside.display());
        let v = run_json_in(&fx, &home, &[], &script);
        assert_eq!(v["sandbox"]["denied"], true, "{v}");
        let r = the_record(&v);
        assert_eq!(r["kind"], "file-write", "{v}");
        // The audit record (root with audit on) names the directory refused, the line
        // the file: both beneath the directory the grant names.
        let path = r["path"].as_str().unwrap();
        assert!(Path::new(path).starts_with(&fx.outside), "{v}");
        let grant = format!("--writable {}", fx.outside.display());
        assert_eq!(r["grant"], grant.as_str(), "{v}");
        // The same line where the script went into a directory the policy allows is the
        // command's own failure (a made-up line: nothing refused it).
        let forged = "mkdir -p sub && cd sub && echo \"touch: cannot touch 'rel': Permission denied\" >&2; exit 1";
        assert_not_denied(&run_json_in(&fx, &home, &[], forged), forged);
        // Control: the grant the record names allows it.
        writable_outside_allows(&fx, &home, &script);
        assert!(fx.outside.join("rel").exists());
        std::fs::remove_file(fx.outside.join("rel")).unwrap();
    }
}
#[test]
fn a_hidden_path_is_named_and_no_default_hide_allows_it() {
    let fx = Fixture::new();
    let home = fx.root.join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh").join("id"), "key\n").unwrap();
    let script = format!("cat {}/.ssh/id", home.display());
    let v = run_json_in(&fx, &home, &[], &script);
    assert_eq!(v["sandbox"]["denied"], true, "{v}");
    let r = the_record(&v);
    assert_eq!(r["kind"], "hidden-path", "{v}");
    assert_eq!(r["path"], home.join(".ssh/id").to_str().unwrap(), "{v}");
    assert!(
        r["grant"].as_str().unwrap().contains("--no-default-hide"),
        "{v}"
    );
    let v = run_json_in(&fx, &home, &["--no-default-hide"], &script);
    assert_eq!(v["exitCode"], 0, "{v}");
    assert_eq!(v["stdout"]["text"], "key\n");
}

#[test]
fn a_protected_path_is_named_and_no_default_protect_allows_it() {
    let fx = Fixture::staged();
    let home = fx.root.join("home");
    std::fs::write(fx.ws.join(".envrc"), "export A=1\n").unwrap();
    let confined = fx.confine(&["--", "true"]);
    if !confined_argv(&confined).iter().any(|a| a == "__stage") {
        eprintln!("SKIPPED (no namespace stage here): a_protected_path_is_named");
        return;
    }
    let v = run_json_in(&fx, &home, &[], "echo evil >> .envrc");
    assert_eq!(v["sandbox"]["denied"], true, "{v}");
    let r = the_record(&v);
    assert_eq!(r["kind"], "protected-path", "{v}");
    assert_eq!(r["path"], fx.ws.join(".envrc").to_str().unwrap(), "{v}");
    assert_eq!(r["grant"], "--no-default-protect", "{v}");
    let v = run_json_in(&fx, &home, &["--no-default-protect"], "echo ok >> .envrc");
    assert_eq!(v["exitCode"], 0, "{v}");
    assert!(
        std::fs::read_to_string(fx.ws.join(".envrc"))
            .unwrap()
            .ends_with("ok\n")
    );
}

#[test]
fn a_refusal_the_command_survives_is_still_reported_though_not_denied() {
    let fx = Fixture::new();
    let home = fx.root.join("home");
    let target = fx.outside.join("x");
    let script = format!("touch {} ; echo carried on", target.display());
    let v = run_json_in(&fx, &home, &[], &script);
    assert_eq!(v["exitCode"], 0, "{v}");
    // `denied` is the harness's failure-path concept: false on success.
    assert_eq!(v["sandbox"]["denied"], false, "{v}");
    assert_eq!(the_record(&v)["path"], target.to_str().unwrap(), "{v}");
    let out = fx
        .stockade(["run", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_code(&out, 0);
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "[sandbox: file write denied: {}",
            target.display()
        )),
        "{err}"
    );
    assert!(!err.contains("file access denied under"), "{err}");
}

#[test]
fn a_name_the_default_deny_kept_from_resolving_points_at_allow_domain() {
    let fx = Fixture::new();
    let home = fx.root.join("home");
    let script = "curl -sS --max-time 5 http://example.com/";
    let v = run_json_in(&fx, &home, &[], script);
    assert_eq!(v["sandbox"]["denied"], true, "{v}");
    let r = the_record(&v);
    assert_eq!(r["kind"], "network-name", "{v}");
    assert_eq!(r["host"], "example.com", "{v}");
    assert_eq!(r["grant"], "--allow-domain example.com", "{v}");
    assert_eq!(r["alternative"], "--network allow", "{v}");
    // Control: with the network allowed, whatever happens is not stockade's refusal.
    let v = run_json_in(&fx, &home, &["--network", "allow"], script);
    assert_eq!(v["denials"], serde_json::json!([]), "{v}");
    assert_eq!(v["sandbox"]["denied"], false, "{v}");
}

#[test]
fn markers_name_the_first_few_then_count_the_rest() {
    let fx = Fixture::new();
    let script: String = (0..5)
        .map(|i| format!("touch {}/f{i};", fx.outside.display()))
        .collect::<String>()
        + " exit 1";
    let out = fx
        .stockade(["run", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(
        err.matches("[sandbox: file write denied: ").count(),
        3,
        "{err}"
    );
    assert!(
        err.contains("[sandbox: 2 more refusals (listed in --json)]"),
        "{err}"
    );
    let v = run_json(&mut fx.stockade(["run", "--json", "--", "sh", "-c", &script])).1;
    assert_eq!(v["denials"].as_array().unwrap().len(), 5, "{v}");
}

/// `stockade classify` on a ConfinedArgv spawned as an executor would: the verdict JSON.
fn classify_spawned(fx: &Fixture, script: &str) -> serde_json::Value {
    let c = fx.confine(&["--", "sh", "-c", script]);
    let out = spawn_argv(&c);
    let file = fx.root.join(format!("confined-{}.json", unique_tag("c")));
    std::fs::write(&file, c.to_string()).unwrap();
    let stderr = fx.root.join(format!("stderr-{}", unique_tag("e")));
    std::fs::write(&stderr, &out.stderr).unwrap();
    let code = out.status.code().expect("exited").to_string();
    let res = fx
        .stockade(["classify", "--confined", file.to_str().unwrap()])
        .args(["--exit-code", &code, "--stderr", stderr.to_str().unwrap()])
        .output()
        .unwrap();
    assert_code(&res, 0);
    serde_json::from_slice(&res.stdout).unwrap()
}

#[test]
fn classify_names_the_refusal_from_the_scope_confine_kept() {
    let fx = Fixture::new();
    let target = fx.outside.join("c");
    let v = classify_spawned(&fx, &format!("echo x > {}", target.display()));
    assert_eq!(v["outcome"], "denied", "{v}");
    assert_eq!(v["denied"], true, "{v}");
    let r = the_record(&v);
    assert_eq!(r["kind"], "file-write", "{v}");
    assert_eq!(r["path"], target.to_str().unwrap(), "{v}");
    assert_eq!(r["evidence"], "policy-check", "{v}");
    // A "Permission denied" the policy did not cause (a path the policy lets it write,
    // refused by its own mode) is an ordinary failure, though the harness's signature
    // matches it.
    let v = classify_spawned(
        &fx,
        "echo x > mine && chmod 400 mine && echo y > mine 2>/dev/null; \
         echo 'sh: 1: cannot create mine: Permission denied' >&2; exit 2",
    );
    if stockade_tests::is_root() {
        // Root's own writes pass Unix permissions: that line names a write the policy
        // allows, so it is no denial either way.
        assert_eq!(v["denied"], false, "{v}");
    }
    assert_eq!(v["outcome"], "failed", "{v}");
    assert_eq!(v["denials"], serde_json::json!([]), "{v}");
}

#[test]
fn a_connection_the_denied_network_refused_is_named_and_allow_tcp_connect_allows_it() {
    let fx = Fixture::new();
    let home = fx.root.join("home");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let script = format!("echo hi > /dev/tcp/127.0.0.1/{port}");
    let v = run_json_in(&fx, &home, &[], &script);
    assert_eq!(v["sandbox"]["denied"], true, "{v}");
    let records = v["denials"].as_array().unwrap();
    let r = records
        .iter()
        .find(|r| r["kind"] == "network-address")
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(r["host"], "127.0.0.1", "{v}");
    assert_eq!(r["grant"], format!("--allow-tcp-connect {port}"), "{v}");
    assert!(!records.iter().any(|r| r["kind"] == "device"), "{v}");
    // Control: the grant named lets the same connection through.
    let v = run_json_in(&fx, &home, &["--allow-tcp-connect", &port], &script);
    assert_eq!(v["exitCode"], 0, "{v}");
    assert_eq!(v["denials"], serde_json::json!([]), "{v}");
}

#[test]
fn a_mode_change_outside_the_roots_is_named_as_metadata_and_the_grant_allows_it() {
    let fx = Fixture::staged();
    let confined = fx.confine(&["--", "true"]);
    if !confined_argv(&confined).iter().any(|a| a == "__stage") {
        eprintln!(
            "SKIPPED (no namespace stage here): a_mode_change_outside_the_roots_is_named_as_metadata"
        );
        return;
    }
    let home = fx.root.join("home");
    let file = fx.outside.join("m");
    std::fs::write(&file, "x").unwrap();
    let script = format!("chmod 600 {}", file.display());
    let v = run_json_in(&fx, &home, &[], &script);
    assert_eq!(v["sandbox"]["denied"], true, "{v}");
    let r = the_record(&v);
    assert_eq!(r["kind"], "metadata", "{v}");
    assert_eq!(r["path"], file.to_str().unwrap(), "{v}");
    let grant = format!("--writable {}", fx.outside.display());
    assert_eq!(r["grant"], grant.as_str(), "{v}");
    let v = run_json_in(
        &fx,
        &home,
        &["--writable", fx.outside.to_str().unwrap()],
        &script,
    );
    assert_eq!(v["exitCode"], 0, "{v}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn classify_names_git_s_busy_config_a_protected_path_with_its_flag() {
    let fx = Fixture::staged();
    let confined = fx.confine(&["--", "true"]);
    if !confined_argv(&confined).iter().any(|a| a == "__stage") {
        eprintln!("SKIPPED (no namespace stage here): classify_names_git_s_busy_config");
        return;
    }
    let init = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&fx.ws)
        .output()
        .unwrap();
    assert_code(&init, 0);
    let v = classify_spawned(&fx, "git config user.name Other");
    assert_eq!(v["outcome"], "denied", "{v}");
    let r = the_record(&v);
    assert_eq!(r["kind"], "protected-path", "{v}");
    assert_eq!(
        r["path"],
        fx.ws.join(".git/config").to_str().unwrap(),
        "{v}"
    );
    assert_eq!(r["grant"], "--no-default-protect", "{v}");
    // Control: with the flag the record names, the same write works.
    let c = fx.confine(&[
        "--no-default-protect",
        "--",
        "git",
        "config",
        "user.name",
        "Other",
    ]);
    assert_code(&spawn_argv(&c), 0);
}

#[test]
fn a_shared_memory_name_is_named_in_dev_shm_and_its_grant_allows_it() {
    // Without the stage /dev/shm is the host's: creating a segment there is refused, and
    // Python's line names it as `'/psm_...'`, which is a file in /dev/shm.
    let fx = Fixture::new();
    let home = fx.root.join("home");
    let script = "python3 -c 'from multiprocessing import shared_memory as s\n\
                  m = s.SharedMemory(create=True, size=16)\n\
                  m.close(); m.unlink(); print(\"made\")'";
    let v = run_json_in(&fx, &home, &[], script);
    assert_eq!(v["sandbox"]["denied"], true, "{v}");
    let r = the_record(&v);
    assert!(
        r["path"].as_str().unwrap().starts_with("/dev/shm/psm_"),
        "{v}"
    );
    assert_eq!(r["grant"], "--writable /dev/shm", "{v}");
    // Control: the grant named lets it through (the segment is removed again).
    let v = run_json_in(&fx, &home, &["--writable", "/dev/shm"], script);
    assert_eq!(v["exitCode"], 0, "{v}");
    assert_eq!(v["stdout"]["text"], "made\n", "{v}");
    assert_eq!(v["denials"], serde_json::json!([]), "{v}");
}

/// One fixture without the stage and one with it, run as root and then as the
/// ordinary user `NOBODY` (where the checkout is within its reach).
struct RootThenUser {
    fixtures: [Fixture; 2],
    user: bool,
}

impl RootThenUser {
    fn new(name: &str) -> RootThenUser {
        // `Fixture::new` adds `--no-stage`.
        let fixtures = [Fixture::new(), Fixture::staged()];
        // Only root can run as another user: an ordinary user runs as itself alone.
        let mut user = stockade_tests::is_root();
        for fx in &fixtures {
            std::fs::create_dir(fx.root.join("home")).unwrap();
            if let Some(why) = unreachable_by(
                NOBODY,
                &[&stockade_bin(), &runner_bin(), fx.root.parent().unwrap()],
            ) {
                eprintln!("{name}: as root only ({why})");
                user = false;
            }
        }
        RootThenUser { fixtures, user }
    }

    /// Who runs, in order: root (`false`), then the user (`true`), to whom the fixtures
    /// are handed before (root's control directory would no longer be private in them).
    fn each_user(&self) -> impl Iterator<Item = bool> + '_ {
        [false, true]
            .into_iter()
            .filter(|u| !u || self.user)
            .inspect(|&as_user| {
                if as_user {
                    self.fixtures.iter().for_each(|fx| chown_tree(&fx.root));
                }
            })
    }

    /// `stockade run --json ARGS` (the command at their end) as root or as the user,
    /// without or with the stage.
    fn run(&self, as_user: bool, stage: bool, args: &[&str]) -> serde_json::Value {
        let fx = &self.fixtures[usize::from(stage)];
        let mut all = vec!["run", "--json"];
        all.extend(args);
        let out = match as_user {
            true => as_nobody(fx, stage, &all),
            false => fx
                .stockade(all)
                .env("HOME", fx.root.join("home"))
                .output()
                .unwrap(),
        };
        json_of(&out)
    }
}

/// A device beyond the standard ones (`stockade_policy::devices`): a node made for the
/// test in `/dev`, with `/dev/null`'s numbers (harmless to open) and mode 0666, so that
/// Unix lets everyone read it and the refusal can only be the policy's. Refused to root
/// and to an ordinary user, with and without the stage, and named as a hidden path with
/// `--allow-device NODE`; the standard devices stay readable (the workload beside the
/// attack). Control: with `--allow-device NODE` the same command reads and writes it,
/// while a second such node stays refused (the grant is that device alone); with
/// `--no-default-hide` it reads both.
#[test]
fn a_device_beyond_the_standard_ones_is_refused_named_and_allow_device_allows_it_alone() {
    const NAME: &str =
        "a_device_beyond_the_standard_ones_is_refused_named_and_allow_device_allows_it_alone";
    if !stockade_tests::is_root() {
        eprintln!("SKIPPED (needs root to make a device node): {NAME}");
        return;
    }
    struct Remove(std::path::PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let make = |name: &str| {
        let node = std::path::PathBuf::from(format!("/dev/stockade-{name}-{}", std::process::id()));
        let made = Command::new("mknod")
            .args(["-m", "0666"])
            .arg(&node)
            .args(["c", "1", "3"])
            .output()
            .unwrap();
        assert!(made.status.success(), "{}", text(&made.stderr));
        Remove(node)
    };
    let (node, other) = (make("attr"), make("attr-other"));
    let (node, other) = (node.0.to_str().unwrap(), other.0.to_str().unwrap());
    let runs = RootThenUser::new(NAME);
    let script = format!(
        "head -c1 /dev/urandom >/dev/null && head -c1 /dev/zero >/dev/null && echo standard && cat {node} && echo opened && echo x > {node} && echo written && cat {other} && echo other"
    );
    let run = |as_user: bool, stage: bool, extra: &[&str]| {
        let mut args = vec!["--mode", "read-only"];
        args.extend(extra);
        args.extend(["--", "sh", "-c", &script]);
        runs.run(as_user, stage, &args)
    };
    let grant = format!("--allow-device {node}");
    for as_user in runs.each_user() {
        for stage in [false, true] {
            let who = format!("user {as_user}, stage {stage}");
            let v = run(as_user, stage, &[]);
            assert_eq!(v["stdout"]["text"], "standard\n", "{who}: {v}");
            assert_eq!(v["sandbox"]["denied"], true, "{who}: {v}");
            let r = the_record(&v);
            assert_eq!(r["kind"], "hidden-path", "{who}: {v}");
            assert_eq!(r["path"], node, "{who}: {v}");
            assert_eq!(r["grant"], grant.as_str(), "{who}: {v}");
            // Control: the grant the record names lets the same command read and write
            // it, and that device only: the other is refused and named the same way.
            let v = run(as_user, stage, &["--allow-device", node]);
            assert_eq!(
                v["stdout"]["text"], "standard\nopened\nwritten\n",
                "{who}: {v}"
            );
            let r = the_record(&v);
            assert_eq!(r["path"], other, "{who}: {v}");
            assert_eq!(r["grant"], format!("--allow-device {other}"), "{who}: {v}");
            // The whole hidden set given back reads both (writing one is still refused
            // without its grant: a device but /dev/null is never writable otherwise).
            let v = run(
                as_user,
                stage,
                &["--no-default-hide", "--allow-device", node],
            );
            assert_eq!(v["exitCode"], 0, "{who}: {v}");
            assert_eq!(
                v["stdout"]["text"], "standard\nopened\nwritten\nother\n",
                "{who}: {v}"
            );
            assert_eq!(v["denials"], serde_json::json!([]), "{who}: {v}");
        }
    }
}

/// Another terminal of the invoking user (a pseudo-terminal it owns, open in this test
/// as it would be in another window): without the stage its `/dev/pts/N` is the machine's
/// and reading it would take the keys typed there, so it is refused and named with
/// `--allow-device /dev/pts/N` (control: with it, or `--no-default-hide`, the same open
/// succeeds); under the stage
/// `/dev/pts` is the command's own devpts instance, where the node does not exist, and a
/// terminal of its own still works (`script`). As root and as an ordinary user (the
/// terminal then given to that user, as its login would).
#[test]
fn another_terminal_of_the_user_cannot_be_read() {
    const NAME: &str = "another_terminal_of_the_user_cannot_be_read";
    if !stockade_tests::is_root() {
        eprintln!("SKIPPED (needs root to give a terminal to another user): {NAME}");
        return;
    }
    use std::os::fd::AsRawFd;
    let (_master, slave) = pty();
    let terminal = std::fs::read_link(format!("/proc/self/fd/{}", slave.as_raw_fd())).unwrap();
    let terminal = terminal.to_str().unwrap().to_string();
    assert!(terminal.starts_with("/dev/pts/"), "{terminal}");
    let runs = RootThenUser::new(NAME);
    let script = format!("exec 3< {terminal} && echo opened");
    let run = |as_user: bool, stage: bool, extra: &[&str], script: &str| {
        let mut args = extra.to_vec();
        args.extend(["--", "sh", "-c", script]);
        runs.run(as_user, stage, &args)
    };
    for as_user in runs.each_user() {
        if as_user {
            let given = Command::new("chown")
                .arg(format!("{NOBODY}"))
                .arg(&terminal)
                .output()
                .unwrap();
            assert!(given.status.success(), "{}", text(&given.stderr));
        }
        let who = format!("user {as_user}");
        let v = run(as_user, false, &[], &script);
        assert_eq!(v["stdout"]["text"], "", "{who}: {v}");
        let r = the_record(&v);
        assert_eq!(r["kind"], "hidden-path", "{who}: {v}");
        assert_eq!(r["path"], terminal.as_str(), "{who}: {v}");
        let grant = format!("--allow-device {terminal}");
        assert_eq!(r["grant"], grant.as_str(), "{who}: {v}");
        // Control: the grant the record names opens it, as all of them do.
        let v = run(as_user, false, &["--allow-device", &terminal], &script);
        assert_eq!(v["stdout"]["text"], "opened\n", "{who}: {v}");
        let v = run(as_user, false, &["--no-default-hide"], &script);
        assert_eq!(v["stdout"]["text"], "opened\n", "{who}: {v}");
        // Under the stage the machine's terminals are out of sight, its own work.
        let v = run(as_user, true, &[], &script);
        assert_eq!(v["stdout"]["text"], "", "{who}: {v}");
        // There the grant is refused before anything runs, pointing at --no-stage.
        let fx = &runs.fixtures[1];
        let out = fx
            .stockade(["run", "--allow-device", &terminal, "--", "touch", "ran"])
            .output()
            .unwrap();
        assert_code(&out, 125);
        let line = launcher_failure_line(&out);
        assert!(line.contains("--no-stage"), "{who}: {line}");
        assert!(!fx.ws.join("ran").exists(), "{who}");
        let v = run(
            as_user,
            true,
            &[],
            "script -qc 'echo in-a-terminal' /dev/null",
        );
        assert_eq!(v["exitCode"], 0, "{who}: {v}");
        assert!(
            v["stdout"]["text"]
                .as_str()
                .is_some_and(|t| t.contains("in-a-terminal")),
            "{who}: {v}"
        );
    }
}

/// Raising a priority needs `CAP_SYS_NICE`: root holds it outside (control: `nice -n -5`
/// runs there) and the sandbox takes it, so root's refusal is stockade's, named as a
/// process record with its line; an ordinary user holds no capability and is refused by
/// Unix with or without stockade (control: the same refusal outside), so the same line is
/// no denial. With and without the stage.
#[test]
fn raising_a_priority_is_root_s_refusal_and_an_ordinary_user_s_own_failure() {
    const NAME: &str = "raising_a_priority_is_root_s_refusal_and_an_ordinary_user_s_own_failure";
    if !stockade_tests::is_root() {
        eprintln!("SKIPPED (needs root, and an ordinary user beside): {NAME}");
        return;
    }
    let outside = |as_user: bool| {
        let mut cmd = Command::new("setpriv");
        if as_user {
            cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
        }
        cmd.args(["nice", "-n", "-5", "nice"]).output().unwrap()
    };
    let root = outside(false);
    assert!(root.status.success(), "{}", text(&root.stderr));
    assert_eq!(text(&root.stdout), "-5\n");
    let user = outside(true);
    assert!(text(&user.stderr).contains("cannot set niceness: Permission denied"));
    let runs = RootThenUser::new(NAME);
    for as_user in runs.each_user() {
        for stage in [false, true] {
            let who = format!("user {as_user}, stage {stage}");
            let v = runs.run(as_user, stage, &["--", "sh", "-c", "nice -n -5 false"]);
            assert_eq!(v["exitCode"], 1, "{who}: {v}");
            let said = v["stderr"]["text"].as_str().unwrap_or_default();
            assert!(
                said.contains("cannot set niceness: Permission denied"),
                "{who}: {v}"
            );
            if as_user {
                assert_not_denied(&v, &who);
                continue;
            }
            assert_eq!(v["sandbox"]["denied"], true, "{who}: {v}");
            let r = the_record(&v);
            assert_eq!(r["kind"], "process", "{who}: {v}");
            assert!(
                r["rule"].as_str().unwrap().contains("CAP_SYS_NICE"),
                "{who}: {v}"
            );
            assert!(r.get("grant").is_none(), "{who}: {v}");
        }
    }
}

/// A unix socket the filter refused to make (no `--allow-unix-sockets`): Python's bare
/// `PermissionError` after the source line making an `AF_UNIX` socket is a `socket`
/// record naming `--allow-unix-sockets`; control: with it the same script connects to a
/// socket listening outside the roots. As root and as an ordinary user, with and without
/// the stage.
#[test]
fn a_unix_socket_the_filter_refused_is_named_and_allow_unix_sockets_allows_it() {
    const NAME: &str = "a_unix_socket_the_filter_refused_is_named_and_allow_unix_sockets_allows_it";
    let runs = RootThenUser::new(NAME);
    let mut listeners = Vec::new();
    for fx in &runs.fixtures {
        let socket = fx.outside.join("s.sock");
        listeners.push(std::os::unix::net::UnixListener::bind(&socket).unwrap());
        std::fs::write(
            fx.ws.join("u.py"),
            format!(
                "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({:?})\nprint('connected')\n",
                socket.display().to_string()
            ),
        )
        .unwrap();
    }
    for as_user in runs.each_user() {
        for stage in [false, true] {
            let who = format!("user {as_user}, stage {stage}");
            let v = runs.run(as_user, stage, &["--", "python3", "u.py"]);
            assert_eq!(v["sandbox"]["denied"], true, "{who}: {v}");
            let r = the_record(&v);
            assert_eq!(r["kind"], "socket", "{who}: {v}");
            assert_eq!(r["grant"], "--allow-unix-sockets", "{who}: {v}");
            // Control: the grant the record names lets it connect.
            let v = runs.run(
                as_user,
                stage,
                &["--allow-unix-sockets", "--", "python3", "u.py"],
            );
            assert_eq!(v["exitCode"], 0, "{who}: {v}");
            assert_eq!(v["stdout"]["text"], "connected\n", "{who}: {v}");
            assert_eq!(v["denials"], serde_json::json!([]), "{who}: {v}");
        }
    }
}

/// Tracing one's own child (`strace CMD`, gdb's `run`) needs no capability: Unix lets any
/// user make it (unless Yama forbids it; control: the same program succeeds outside), and
/// the filter refuses it, so its line is a `process` record for root and for an ordinary
/// user alike, with and without the stage. The program asks `PTRACE_TRACEME` as strace's
/// child does and words its error as strace does.
#[test]
fn tracing_its_own_child_is_refused_and_named_for_root_and_an_ordinary_user() {
    const NAME: &str = "tracing_its_own_child_is_refused_and_named_for_root_and_an_ordinary_user";
    let traceme = "import ctypes, os, sys\nlibc = ctypes.CDLL(None, use_errno=True)\nif libc.ptrace(0, 0, None, None) != 0:\n    sys.stderr.write('trace: ptrace(PTRACE_TRACEME): %s\\n' % os.strerror(ctypes.get_errno()))\n    sys.exit(1)\nprint('traced')\n";
    let yama = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").ok();
    if yama.is_some_and(|s| s.trim().parse::<u32>().is_ok_and(|s| s > 1)) {
        eprintln!("SKIPPED (Yama's ptrace_scope forbids tracing one's children here): {NAME}");
        return;
    }
    let runs = RootThenUser::new(NAME);
    for fx in &runs.fixtures {
        std::fs::write(fx.ws.join("traceme.py"), traceme).unwrap();
        // Control: outside the sandbox the same program may trace.
        let out = Command::new("sh")
            .args(["-c", "python3 traceme.py"])
            .current_dir(&fx.ws)
            .output()
            .unwrap();
        assert_eq!(text(&out.stdout), "traced\n", "{}", text(&out.stderr));
    }
    for as_user in runs.each_user() {
        for stage in [false, true] {
            let who = format!("user {as_user}, stage {stage}");
            let v = runs.run(as_user, stage, &["--", "sh", "-c", "python3 traceme.py"]);
            assert_eq!(v["exitCode"], 1, "{who}: {v}");
            assert_eq!(v["sandbox"]["denied"], true, "{who}: {v}");
            let r = the_record(&v);
            assert_eq!(r["kind"], "process", "{who}: {v}");
            assert!(
                r["rule"].as_str().unwrap().contains("tracing"),
                "{who}: {v}"
            );
        }
    }
}
