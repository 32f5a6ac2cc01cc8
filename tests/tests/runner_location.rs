//! Where the launcher looks for its runner, and what it says when the runner is there
//! but out of the user's reach: `$STOCKADE_RUNNER`, then next to the launcher, then
//! `../libexec/stockade/` beside the launcher's `bin` directory (an install tree moved as
//! a whole), then `/usr/libexec/stockade/stockade-runner`.

mod support;

use std::path::Path;
use std::process::{Command, Output};
use support::*;

/// `LAUNCHER confine -- true` in the fixture's environment, without `$STOCKADE_RUNNER`.
fn confine_with(fx: &Fixture, launcher: &Path) -> Output {
    let mut cmd = Command::new(launcher);
    fx.environment(&mut cmd)
        .env_remove("STOCKADE_RUNNER")
        .args(["confine", "--no-stage", "--", "true"]);
    cmd.output().unwrap()
}

#[test]
fn a_moved_install_tree_finds_the_runner_in_its_own_libexec() {
    let fx = Fixture::new();
    let prefix = fx.root.join("opt/stockade/usr");
    let launcher = copy_binary(&stockade_bin(), &prefix.join("bin"), "stockade");
    let runner = copy_binary(
        &runner_bin(),
        &prefix.join("libexec/stockade"),
        "stockade-runner",
    );
    let out = confine_with(&fx, &launcher);
    assert_code(&out, 0);
    let confined: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let argv = confined_argv(&confined);
    assert_eq!(
        Path::new(&argv[0]),
        runner.canonicalize().unwrap(),
        "{argv:?}"
    );

    // Without the prefix's runner, that place is not what is used, and when the system
    // has none either the refusal names every place looked at.
    std::fs::remove_file(&runner).unwrap();
    let out = confine_with(&fx, &launcher);
    let err = text(&out.stderr);
    if Path::new("/usr/libexec/stockade/stockade-runner").exists() {
        assert_code(&out, 0);
        assert!(!text(&out.stdout).contains(&*prefix.to_string_lossy()));
    } else {
        assert_code(&out, 125);
        for place in [
            "/usr/libexec/stockade/stockade-runner".to_string(),
            prefix.join("bin/stockade-runner").display().to_string(),
            prefix
                .join("libexec/stockade/stockade-runner")
                .display()
                .to_string(),
        ] {
            assert!(err.contains(&place), "{place} not named: {err}");
        }
    }
}

/// As root, the user is uid 65534 and the runner's directory is root's, mode 0700; as an
/// ordinary user, the directory is the user's own with mode 0000, which stops its owner
/// too.
#[test]
fn a_runner_the_user_cannot_reach_is_named_with_the_directory_that_stops_them() {
    const NAME: &str = "a_runner_the_user_cannot_reach_is_named_with_the_directory_that_stops_them";
    const NOBODY: u32 = 65534;
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::new();
    let root = stockade_tests::is_root();
    let launcher = copy_binary(&stockade_bin(), &fx.root.join("bin"), "stockade");
    let reachable = copy_binary(&runner_bin(), &fx.root.join("bin"), "stockade-runner");
    let private = fx.root.join("private");
    let hidden = copy_binary(&runner_bin(), &private, "stockade-runner");
    let mode = |p: &Path, m: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    };
    if root {
        mode(&fx.root, 0o755);
        mode(&private, 0o700);
        for d in [&fx.ws, &fx.runtime] {
            std::os::unix::fs::chown(d, Some(NOBODY), Some(NOBODY)).unwrap();
        }
        if let Some(why) = unreachable_by(NOBODY, &[&launcher, &reachable, &fx.ws]) {
            eprintln!("SKIPPED ({why}): {NAME}");
            return;
        }
    } else {
        mode(&private, 0o000);
    }
    let (uid, blocked_mode) = if root {
        (NOBODY, "mode 0700, owner uid 0")
    } else {
        // SAFETY: getuid takes no arguments and cannot fail.
        (unsafe { libc::getuid() }, "mode 0000")
    };
    let confine = |runner: &Path| {
        let mut cmd = if root {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(&launcher);
            c
        } else {
            Command::new(&launcher)
        };
        fx.environment(&mut cmd)
            .env("STOCKADE_RUNNER", runner)
            .args(["confine", "--no-stage", "--", "true"]);
        cmd.output().unwrap()
    };
    let out = confine(&hidden);
    mode(&private, 0o755);
    assert_code(&out, 125);
    let err = text(&out.stderr);
    for said in [
        format!("{} cannot be reached by uid {uid}", hidden.display()),
        format!("{} does not let uid {uid} through", private.display()),
        blocked_mode.to_string(),
        "$STOCKADE_RUNNER".to_string(),
    ] {
        assert!(err.contains(&said), "{said:?} not said: {err}");
    }
    assert!(!err.contains("not found"), "{err}");
    assert!(fx.leftover_requests().is_empty());
    // Control: a runner the same user can reach is used.
    let out = confine(&reachable);
    assert_code(&out, 0);
}

/// Started in a directory beneath one the user cannot pass (a checkout beneath /root run
/// by another user), stockade says so and what to do, and runs nothing. As root the user
/// is uid 65534 and the closed directory root's, mode 0700; as an ordinary user, the
/// user's own with mode 0000.
#[test]
fn a_current_directory_the_user_cannot_reach_is_refused_saying_what_to_do() {
    const NAME: &str = "a_current_directory_the_user_cannot_reach_is_refused_saying_what_to_do";
    const NOBODY: u32 = 65534;
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::new();
    let root = stockade_tests::is_root();
    let launcher = copy_binary(&stockade_bin(), &fx.root.join("bin"), "stockade");
    let runner = copy_binary(&runner_bin(), &fx.root.join("bin"), "stockade-runner");
    let closed = fx.root.join("closed");
    let inside = closed.join("ws");
    std::fs::create_dir_all(&inside).unwrap();
    let marker = fx.root.join("ran");
    let mode = |p: &Path, m: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    };
    if root {
        mode(&fx.root, 0o755);
        std::os::unix::fs::chown(&fx.runtime, Some(NOBODY), Some(NOBODY)).unwrap();
        if let Some(why) = unreachable_by(NOBODY, &[&launcher, &runner, &fx.runtime]) {
            mode(&fx.root, 0o700);
            eprintln!("SKIPPED ({why}): {NAME}");
            return;
        }
    }
    let start = |dir: &Path, close: bool| {
        let switch = if root {
            "setpriv --reuid=65534 --regid=65534 --clear-groups"
        } else {
            ""
        };
        let closing = if close && !root {
            format!("chmod 000 '{}' && ", closed.display())
        } else if close {
            format!("chmod 700 '{}' && ", closed.display())
        } else {
            String::new()
        };
        let mut cmd = Command::new("sh");
        fx.environment(&mut cmd).env("STOCKADE_RUNNER", &runner).args([
            "-c",
            &format!(
                "cd '{}' && {closing}exec {switch} \"$0\" run --no-stage --mode read-only -- touch '{}'",
                dir.display(),
                marker.display()
            ),
        ]);
        cmd.arg(&launcher);
        let out = cmd.output().unwrap();
        mode(&closed, 0o755);
        out
    };
    let out = start(&inside, true);
    mode(&fx.root, 0o700);
    assert_code(&out, 125);
    let err = text(&out.stderr);
    let uid = if root {
        NOBODY
    } else {
        // SAFETY: getuid takes no arguments and cannot fail.
        unsafe { libc::getuid() }
    };
    assert!(
        err.contains("cannot determine the current directory")
            && err.contains(&format!("closed to uid {uid}"))
            && err.contains("run stockade from a directory this user can reach"),
        "{err}"
    );
    assert!(!marker.exists());
    // Control: from a directory the user can reach, it runs (read-only: the touch is
    // refused, but the command ran and said so).
    mode(&fx.root, 0o755);
    let out = start(&fx.ws, false);
    mode(&fx.root, 0o700);
    assert!(
        text(&out.stderr).contains("touch: cannot touch"),
        "{}",
        text(&out.stderr)
    );
}
