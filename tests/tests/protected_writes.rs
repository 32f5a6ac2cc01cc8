//! Workspace-write's protected paths without the namespace stage: with `--no-stage` and
//! in a container whose seccomp profile refuses `unshare` (the `no-userns` helper plays
//! one), the runner's supervisor performs every call that writes or replaces a name and
//! refuses those that would change a protected path with the stage's answers (EROFS on
//! and beneath one, EBUSY for removing or replacing one or a directory that holds one,
//! EXDEV for a hard link to one). Each attack has its controls: the same call on a
//! neighbour in the same directory succeeds, and the same call unconfined succeeds on
//! the protected path itself. Everyday work (git, editors' atomic saves, trees made and
//! removed, many small files, redirections, /tmp and /dev/null) goes on as before.
//!
//! These run as root and, through `tests/unprivileged`, as an ordinary user.

mod support;
use std::path::Path;
use std::process::Output;
use support::*;

const WS: &str = "workspace-write";
const DANGER: &str = "danger-full-access";
/// The stand-in for a container's default seccomp profile.
const CONTAINER: Option<&str> = Some("no-userns");

/// The two ways to be without the stage: `--no-stage`, and a container refusing it.
fn without_stage() -> Vec<(Fixture, Option<&'static str>)> {
    vec![(Fixture::new(), None), (Fixture::staged(), CONTAINER)]
}

/// A repository in the workspace, made unconfined: a commit, git's sample hooks, a
/// `.envrc`, and a plain file beside them.
fn repo(fx: &Fixture) {
    let script = "set -e
        git init -q .
        git config user.email t@example.com
        git config user.name t
        echo one > plain
        git add plain
        git commit -qm one
        echo 'export A=1' > .envrc
        mkdir -p .git/hooks
        echo '#!/bin/sh' > .git/hooks/pre-push";
    let out = std::process::Command::new("sh")
        .args(["-c", script])
        .current_dir(&fx.ws)
        .env("HOME", &fx.root)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert_code(&out, 0);
}

/// `attack ARGS` in the workspace under `stockade run --mode MODE`: its one-line answer.
#[track_caller]
fn attack(fx: &Fixture, mask: Option<&str>, mode: &str, args: &[&str]) -> String {
    let mut cmd = fx.stockade_masked(mask, ["run", "--mode", mode, "--"]);
    cmd.arg(bin("attack")).args(args);
    let out = cmd.output().unwrap();
    let stdout = text(&out.stdout);
    let line = stdout.lines().next().unwrap_or("").to_string();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{args:?}: {line:?}\nstderr: {}",
        text(&out.stderr)
    );
    line
}

/// `sh -c SCRIPT` in the workspace under workspace-write.
fn sh(fx: &Fixture, mask: Option<&str>, script: &str) -> Output {
    fx.stockade_masked(mask, ["run", "--mode", WS, "--", "sh", "-c", script])
        .env("HOME", &fx.root)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap()
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_default()
}

/// The protected files' contents and the hooks directory's listing.
fn snapshot(fx: &Fixture) -> (Vec<u8>, Vec<u8>, Vec<String>) {
    let mut hooks: Vec<String> = std::fs::read_dir(fx.ws.join(".git/hooks"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    hooks.sort();
    (
        read(&fx.ws.join(".git/config")),
        read(&fx.ws.join(".envrc")),
        hooks,
    )
}

#[test]
fn protected_paths_cannot_be_written_or_replaced_without_the_stage_and_neighbours_can() {
    for (fx, mask) in without_stage() {
        repo(&fx);
        // Made before the run: a second name for .git/config, and links to it.
        std::fs::hard_link(fx.ws.join(".git/config"), fx.ws.join("cfg-hardlink")).unwrap();
        std::fs::hard_link(fx.ws.join("plain"), fx.ws.join("plain-hardlink")).unwrap();
        std::fs::create_dir(fx.ws.join("dir")).unwrap();
        std::fs::write(fx.ws.join("spare"), "").unwrap();
        let before = snapshot(&fx);
        // Each attack, its answer, and the same call on a neighbour that succeeds.
        let cases: &[(&[&str], &str, &[&str])] = &[
            (
                &["write", ".git/config"],
                "EROFS",
                &["write", ".git/config2"],
            ),
            (
                &["truncate", ".git/config"],
                "EROFS",
                &["truncate", ".git/description"],
            ),
            (
                &["write", ".git/hooks/pre-commit"],
                "EROFS",
                &["write", ".git/pre-commit"],
            ),
            (
                &["write", ".git/hooks/pre-push"],
                "EROFS",
                &["write", ".git/HEAD.new"],
            ),
            (&["write", ".envrc"], "EROFS", &["write", ".envrc2"]),
            (
                &["write", "cfg-hardlink"],
                "EROFS",
                &["write", "plain-hardlink"],
            ),
            (
                &["symlink-write", ".git/config", "sl"],
                "EROFS",
                &["symlink-write", "plain", "sl2"],
            ),
            (
                &["opath-reopen-write", ".git/config"],
                "EROFS",
                &["opath-reopen-write", "plain"],
            ),
            (
                &["rename", "plain", ".git/config"],
                "EBUSY",
                &["rename", "spare", ".git/config.lock"],
            ),
            (
                &["rename", ".git/hooks", ".git/h2"],
                "EBUSY",
                &["rename", "dir", ".git/dir2"],
            ),
            (
                &["rename", ".git", "g2"],
                "EBUSY",
                &["rename", ".git/dir2", "dir"],
            ),
            (
                &["rename", ".envrc", "e2"],
                "EBUSY",
                &["rename", ".envrc2", "e3"],
            ),
            (
                &["link", ".git/config", "cfg2"],
                "EXDEV",
                &["link", "plain", "plain2"],
            ),
            (
                &["link", "plain", ".git/hooks/post-checkout"],
                "EROFS",
                &["link", "plain", ".git/plain3"],
            ),
            (
                &["tmpfile-link", ".git/hooks", "tmp1"],
                "EROFS",
                &["tmpfile-link", ".git", "tmp2"],
            ),
            (
                &["tmpfile-link", ".", ".git/hooks/pre-commit"],
                "EROFS",
                &["tmpfile-link", ".", "tmp3"],
            ),
        ];
        for (args, errno, control) in cases {
            assert_eq!(
                attack(&fx, mask, WS, args),
                format!("errno {errno}"),
                "{args:?} ({mask:?})"
            );
            assert_eq!(
                attack(&fx, mask, WS, control),
                "ok",
                "{control:?} ({mask:?})"
            );
            assert_eq!(snapshot(&fx), before, "{args:?} ({mask:?})");
        }
        // The supervisor performs the writes on a thread restricted with the command's
        // Landlock ruleset: outside the writable roots they are refused as ever.
        let existing = fx.outside.join("existing");
        std::fs::write(&existing, "kept").unwrap();
        let existing = existing.to_str().unwrap();
        let new = fx.outside.join("made-by-supervisor");
        let new = new.to_str().unwrap();
        for args in [["write", new], ["write", existing], ["truncate", existing]] {
            assert_eq!(attack(&fx, mask, WS, &args), "errno EACCES", "{args:?}");
        }
        assert!(!Path::new(new).exists());
        assert_eq!(std::fs::read_to_string(existing).unwrap(), "kept");
        assert_eq!(attack(&fx, None, DANGER, &["write", new]), "ok");
        assert_eq!(attack(&fx, None, DANGER, &["truncate", existing]), "ok");
        // openat2 carries its flags in memory: refused for every path before the
        // supervisor (callers fall back to openat, judged above).
        assert_eq!(
            attack(&fx, mask, WS, &["openat2-write", ".git/config"]),
            "errno ENOSYS"
        );
        assert_eq!(attack(&fx, None, DANGER, &["openat2-write", "plain"]), "ok");
        // Removing one, or what holds one, with the tools: refused, nothing gone.
        let out = sh(
            &fx,
            mask,
            "rm -f .git/config; rm -rf .git/hooks; rmdir .git; mkdir .git/hooks/x; rmdir .git/hooks; echo $?",
        );
        assert_eq!(text(&out.stdout).trim(), "1", "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("Device or resource busy"),
            "{}",
            text(&out.stderr)
        );
        assert_eq!(snapshot(&fx), before, "rm ({mask:?})");
        assert!(fx.ws.join(".git/HEAD").exists() && fx.ws.join("plain").exists());
        // Control: unconfined, the same calls change the protected paths.
        assert_eq!(attack(&fx, None, DANGER, &["write", ".git/config"]), "ok");
        assert_eq!(
            attack(&fx, None, DANGER, &["write", ".git/hooks/pre-commit"]),
            "ok"
        );
        assert_ne!(snapshot(&fx), before);
    }
}

#[test]
fn the_guarantee_is_reported_enforced_and_full_without_the_stage() {
    for (fx, mask) in without_stage() {
        repo(&fx);
        let out = fx
            .stockade_masked(mask, ["confine", "--", "true"])
            .output()
            .unwrap();
        assert_code(&out, 0);
        let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let g = &c["guarantees"]["protectedPaths"];
        assert_eq!(g["status"], "enforced", "{c}");
        assert_eq!(g["needs"], "namespace-stage or seccomp-notify-addfd", "{c}");
        assert_eq!(c["enforcement"], "full", "{c}");
    }
}

#[test]
fn a_thread_swapping_the_path_during_the_open_never_reaches_the_protected_file() {
    let fx = Fixture::new();
    repo(&fx);
    // Same length as ".git/config".
    std::fs::write(fx.ws.join("plain-00000"), "").unwrap();
    let before = snapshot(&fx);
    let got = attack(
        &fx,
        None,
        WS,
        &["swap-write", "plain-00000", ".git/config", "3000"],
    );
    let opened: usize = got
        .strip_prefix("opened ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{got}"));
    assert_eq!(snapshot(&fx), before);
    // Control: the opens that found the plain file wrote it.
    assert!(opened > 0, "{got}");
    assert_eq!(read(&fx.ws.join("plain-00000")).len(), opened * 8);
}

#[test]
fn everyday_work_goes_on_without_the_stage() {
    for (fx, mask) in without_stage() {
        repo(&fx);
        let script = r#"set -e
            # git: add, commit, branch, checkout, gc, status, log
            echo two >> plain; git add plain; git commit -qm two
            git branch topic; git checkout -q topic; echo three > new; git add new
            git commit -qm three; git checkout -q -; git merge -q topic
            git gc -q; git status --short; git log --oneline | wc -l
            # an editor's atomic save: a temporary file renamed over the file
            printf 'saved\n' > .plain.swp; mv -f .plain.swp plain; cat plain
            # trees made and removed
            mkdir -p a/b/c/d; for i in 1 2 3; do echo $i > a/b/c/d/f$i; done
            cp -r a a2; rm -rf a a2; test ! -e a
            # many small writes
            mkdir out; i=0; while [ $i -lt 300 ]; do echo $i > out/$i.o; i=$((i+1)); done
            ls out | wc -l
            # redirections, appends, /dev/null, /tmp, hard links, symlinks
            echo x > r; echo y >> r; cat r > r2; : > r; echo q > /dev/null
            t=$(mktemp); echo tmp > "$t"; cat "$t"; rm "$t"
            ln r2 r3; ln -s r2 r4; cat r4
            echo done"#;
        let out = sh(&fx, mask, script);
        assert_code(&out, 0);
        let stdout = text(&out.stdout);
        assert!(
            stdout.ends_with("done\n"),
            "{stdout}\n{}",
            text(&out.stderr)
        );
        for want in ["saved\n", "300\n", "tmp\n", "x\ny\n", "3\n"] {
            assert!(stdout.contains(want), "{want:?} in {stdout}");
        }
        // git's own config writes are refused, as under the stage (its lock file is
        // made, the rename over the protected file is not).
        let out = sh(&fx, mask, "git config core.fsmonitor 'touch /tmp/owned'");
        assert_ne!(out.status.code(), Some(0));
        assert!(
            text(&out.stderr).contains("Device or resource busy"),
            "{}",
            text(&out.stderr)
        );
        assert!(!text(&read(&fx.ws.join(".git/config"))).contains("fsmonitor"));
        assert!(!fx.ws.join(".git/config.lock").exists());
    }
}
