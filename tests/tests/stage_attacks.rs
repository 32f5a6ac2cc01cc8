//! Attacks on the namespace stage found by review, each with its positive control: the
//! stage must neither widen what a command may do (a host read-only mount made writable)
//! nor break what it may do (relative paths in an inherited working directory), and what
//! an earlier command plants must not turn into a runner failure for every later one.

mod support;

use std::process::{Command, Stdio};
use support::*;

fn staged_here(fx: &Fixture) -> bool {
    let out = fx.stockade(["probe", "--json"]).output().unwrap();
    let p: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    p["kernel"]["namespaces"]["available"] == true
}

#[test]
fn an_inherited_working_directory_is_the_one_on_the_new_mounts() {
    let fx = Fixture::staged();
    if !staged_here(&fx) {
        eprintln!("SKIPPED (needs namespaces): an_inherited_working_directory");
        return;
    }
    let c = fx.confine(&["--inherit-cwd", "--", "sh", "-c", "touch rel && echo ok"]);
    assert_eq!(c["argv"][1], "__stage", "{c}");
    let argv = confined_argv(&c);
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(&fx.ws)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "ok\n");
    assert!(fx.ws.join("rel").exists());
}

#[test]
fn a_read_only_mount_inside_a_writable_root_stays_read_only() {
    if !stockade_tests::is_root() {
        eprintln!("SKIPPED (needs root): a_read_only_mount_inside_a_writable_root_stays_read_only");
        return;
    }
    let fx = Fixture::staged();
    if !staged_here(&fx) {
        eprintln!("SKIPPED (needs namespaces): a_read_only_mount_inside_a_writable_root");
        return;
    }
    let src = fx.outside.join("src");
    let ro = fx.ws.join("ro");
    std::fs::create_dir(&src).unwrap();
    std::fs::create_dir(&ro).unwrap();
    let sh = |script: String| {
        let ok = Command::new("sh").arg("-c").arg(&script).status().unwrap();
        assert!(ok.success(), "{script}");
    };
    sh(format!(
        "mount --bind {0} {1} && mount -o remount,bind,ro {1}",
        src.display(),
        ro.display()
    ));
    let out = fx
        .stockade(["run", "--", "sh", "-c"])
        .arg("echo x > ro/file; echo $?; echo y > file && echo wrote")
        .output()
        .unwrap();
    sh(format!("umount {}", ro.display()));
    // The mount the host made read-only stays so; the rest of the workspace is writable.
    assert_eq!(text(&out.stdout), "2\nwrote\n", "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("Read-only file system"));
    assert!(!src.join("file").exists());
    assert!(fx.ws.join("file").exists());
}

#[test]
fn a_planted_link_at_a_protected_name_is_reported_not_a_runner_failure() {
    let fx = Fixture::staged();
    if !staged_here(&fx) {
        eprintln!("SKIPPED (needs namespaces): a_planted_link_at_a_protected_name");
        return;
    }
    let target = fx.ws.join("elsewhere");
    std::fs::write(&target, "x").unwrap();
    std::os::unix::fs::symlink(&target, fx.ws.join(".bashrc")).unwrap();
    let c = fx.confine(&["--", "true"]);
    let not_granted = c["notGranted"].to_string();
    assert!(not_granted.contains(".bashrc"), "{c}");
    let out = spawn_argv(&c);
    assert_code(&out, 0);
    // Control: a real file at that name is protected (the write fails).
    std::fs::remove_file(fx.ws.join(".bashrc")).unwrap();
    std::fs::write(fx.ws.join(".bashrc"), "real").unwrap();
    let out = fx
        .stockade(["run", "--", "sh", "-c", "echo evil > .bashrc"])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(fx.ws.join(".bashrc")).unwrap(),
        "real"
    );
}

#[test]
fn protecting_nothing_and_hiding_roots_under_a_private_tmp_are_refused() {
    let fx = Fixture::staged();
    let out = fx
        .stockade(["run", "--protect", "absent.sh", "--", "touch", "ran"])
        .output()
        .unwrap();
    assert_code(&out, 125);
    assert!(
        text(&out.stderr).contains("absent.sh"),
        "{}",
        text(&out.stderr)
    );
    assert!(!fx.ws.join("ran").exists());
    // Control: an existing path is accepted.
    std::fs::write(fx.ws.join("deploy.sh"), "").unwrap();
    let out = fx
        .stockade(["confine", "--protect", "deploy.sh", "--", "true"])
        .output()
        .unwrap();
    assert_code(&out, 0);

    let in_tmp = tempfile::Builder::new()
        .prefix("stockade-private-tmp-")
        .tempdir_in("/tmp")
        .unwrap();
    let out = fx
        .stockade(["run", "--tmp", "private", "--workspace"])
        .arg(in_tmp.path())
        .args(["--", "touch", "ran"])
        .output()
        .unwrap();
    assert_code(&out, 125);
    assert!(
        text(&out.stderr).contains("--tmp private"),
        "{}",
        text(&out.stderr)
    );
    assert!(!in_tmp.path().join("ran").exists());
}

#[test]
fn a_protected_name_the_command_creates_is_reported() {
    // git reads `.git/commondir` (and the rest of its redirections) only when it exists;
    // a mount needs something to sit on and stockade creates nothing in the user's
    // tree, so a command can create one. `stockade run` says so, in both outputs.
    let fx = Fixture::staged();
    if !staged_here(&fx) {
        eprintln!("SKIPPED (needs namespaces): a_protected_name_the_command_creates");
        return;
    }
    std::fs::create_dir_all(fx.ws.join(".git/hooks")).unwrap();
    let plant = "echo /elsewhere > .git/commondir";
    let out = fx
        .stockade(["run", "--", "sh", "-c", plant])
        .output()
        .unwrap();
    assert_code(&out, 0);
    let commondir = fx.ws.join(".git/commondir");
    assert!(
        text(&out.stderr).contains(&format!(
            "[sandbox: protected path appeared: {}]",
            commondir.display()
        )),
        "{}",
        text(&out.stderr)
    );
    // Now it exists, so the next run protects it, and --json names nothing new.
    let out = fx
        .stockade(["run", "--json", "--", "sh", "-c", "echo x > .git/commondir"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["exitCode"], 2, "{v}");
    assert_eq!(v["sandbox"]["denied"], true, "{v}");
    assert_eq!(v["protectedAppeared"], serde_json::json!([]));
    assert_eq!(std::fs::read_to_string(&commondir).unwrap(), "/elsewhere\n");
    // Control: a name that appears is named in --json too.
    let out = fx
        .stockade(["run", "--json", "--", "sh", "-c", "touch .envrc"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["protectedAppeared"],
        serde_json::json!([fx.ws.join(".envrc").display().to_string()])
    );
}
