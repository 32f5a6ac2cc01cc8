//! The filesystem shape of each mode, enforced by the real kernel. Every denial is
//! paired with a positive control: the same action succeeding where the policy allows it.

mod support;
use support::*;

const CONFINED: [&str; 2] = ["read-only", "workspace-write"];
const ALL: [&str; 3] = ["read-only", "workspace-write", "danger-full-access"];

#[test]
fn write_inside_workspace_is_allowed_only_in_workspace_write_and_danger() {
    let fx = Fixture::new();
    let out = fx.run_sh("read-only", "echo x > in-ws");
    assert_code(&out, 2);
    assert!(text(&out.stderr).contains("Permission denied"));
    assert!(text(&out.stderr).contains("[sandbox: file access denied under read-only mode]"));
    assert!(!fx.ws.join("in-ws").exists());

    for mode in ["workspace-write", "danger-full-access"] {
        let out = fx.run_sh(mode, &format!("echo {mode} > in-ws-{mode}"));
        assert_code(&out, 0);
        assert_eq!(
            std::fs::read_to_string(fx.ws.join(format!("in-ws-{mode}"))).unwrap(),
            format!("{mode}\n")
        );
    }
}

#[test]
fn write_outside_every_writable_root_is_denied_and_leaves_nothing() {
    let fx = Fixture::new();
    let target = fx.outside.join("escape");
    for mode in CONFINED {
        let out = fx.run_sh(mode, &format!("echo x > {}", target.display()));
        assert_code(&out, 2);
        assert!(text(&out.stderr).contains("Permission denied"), "{mode}");
        assert!(!target.exists(), "{mode} wrote outside");
    }
    // Positive control: the same write, unconfined, works.
    let out = fx.run_sh(
        "danger-full-access",
        &format!("echo x > {}", target.display()),
    );
    assert_code(&out, 0);
    assert!(target.exists());
    assert!(!text(&out.stderr).contains("file access denied under"));
}

#[test]
fn reading_etc_and_writing_dev_null_are_allowed_in_every_mode() {
    let fx = Fixture::new();
    for mode in ALL {
        let out = fx.run_sh(
            mode,
            "cat /etc/passwd >/dev/null && echo ok > /dev/null && head -c1 /etc/passwd",
        );
        assert_code(&out, 0);
        assert_eq!(text(&out.stdout), "r", "{mode}");
    }
}

#[test]
fn dev_shm_is_not_writable_in_confined_modes() {
    let fx = Fixture::new();
    let name = format!("/dev/shm/stockade-test-{}", std::process::id());
    for mode in CONFINED {
        let out = fx.run_sh(mode, &format!("echo x > {name}"));
        assert_code(&out, 2);
        assert!(!std::path::Path::new(&name).exists(), "{mode}");
    }
    let out = fx.run_sh(
        "danger-full-access",
        &format!("echo x > {name} && rm {name}"),
    );
    assert_code(&out, 0);
}

#[test]
fn tmp_is_writable_only_in_workspace_write() {
    let fx = Fixture::new();
    let name = format!(
        "/tmp/stockade-test-{}-{}",
        std::process::id(),
        fx.root.file_name().unwrap().to_string_lossy()
    );
    let out = fx.run_sh("read-only", &format!("echo x > {name}"));
    assert_code(&out, 2);
    assert!(!std::path::Path::new(&name).exists());
    let out = fx.run_sh(
        "workspace-write",
        &format!("echo x > {name} && mkdir {name}.d && rm -r {name} {name}.d"),
    );
    assert_code(&out, 0);
}

#[test]
fn tmpdir_and_extra_writable_roots_are_granted_in_workspace_write() {
    let fx = Fixture::new();
    // An implicit $TMPDIR is granted only where temporary directories live.
    let tmpdir_holder = tempfile::tempdir_in("/var/tmp").unwrap();
    let tmpdir = tmpdir_holder.path().canonicalize().unwrap();
    let extra = fx.root.join("extra");
    std::fs::create_dir(&extra).unwrap();
    let script = format!(
        "echo a > {}/f && echo b > {}/f",
        tmpdir.display(),
        extra.display()
    );
    // Without the grants: denied.
    let out = fx.run_sh("workspace-write", &script);
    assert_code(&out, 2);
    assert!(!tmpdir.join("f").exists());
    // With $TMPDIR set and --writable: allowed.
    let out = fx
        .stockade(["run", "--writable"])
        .arg(&extra)
        .args(["--", "sh", "-c", &script])
        .env("TMPDIR", &tmpdir)
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert!(tmpdir.join("f").exists() && extra.join("f").exists());
    // read-only ignores $TMPDIR and refuses --writable, which would mean nothing there.
    let script = format!("echo c > {}/g", tmpdir.display());
    let out = fx
        .stockade(["run", "--mode", "read-only", "--", "sh", "-c", &script])
        .env("TMPDIR", &tmpdir)
        .output()
        .unwrap();
    assert_code(&out, 2);
    assert!(!tmpdir.join("g").exists());
    let out = fx
        .stockade(["run", "--mode", "read-only", "--writable"])
        .arg(&extra)
        .args(["--", "sh", "-c", &format!("echo c > {}/g", extra.display())])
        .output()
        .unwrap();
    assert_code(&out, 125);
    assert!(launcher_failure_line(&out).contains("--writable"));
    assert!(!extra.join("g").exists());
}

#[test]
fn confinement_survives_nested_shells_and_exec() {
    let fx = Fixture::new();
    let target = fx.outside.join("nested");
    let nested = |dest: &std::path::Path| {
        format!(
            "sh -c 'exec sh -c \"exec bash -c \\\"echo x > {}\\\"\"'",
            dest.display()
        )
    };
    let out = fx.run_sh("workspace-write", &nested(&target));
    assert_code(&out, 1);
    assert!(text(&out.stderr).contains("Permission denied"));
    assert!(!target.exists());
    // Positive control: the same nesting writing inside the workspace works.
    let inside = fx.ws.join("nested");
    let out = fx.run_sh("workspace-write", &nested(&inside));
    assert_code(&out, 0);
    assert!(inside.exists());
}

#[test]
fn the_runner_adds_no_byte_to_the_targets_output() {
    let fx = Fixture::new();
    for mode in ALL {
        let out = fx.run_sh(mode, "printf out; printf err >&2");
        assert_code(&out, 0);
        assert_eq!(text(&out.stdout), "out");
        assert_eq!(text(&out.stderr), "err");
    }
}
