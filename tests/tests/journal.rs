//! The journal: `stockade outcome KEY` after `run --journal KEY` or `confine --journal
//! KEY` answers `not-started` only when nothing ran, `finished` with the receipt (`run`'s
//! result, or `classify`'s verdict on a spawned ConfinedArgv), and `unknown` otherwise,
//! wherever `run` was killed; no confined command can write it.

mod support;
use std::process::{Output, Stdio};
use support::*;

/// `stockade outcome KEY`, parsed (`None`: no record under KEY).
fn outcome(fx: &Fixture, key: &str) -> Option<serde_json::Value> {
    let out = fx.stockade(["outcome", key]).output().unwrap();
    if !out.status.success() {
        assert_code(&out, 125);
        assert!(
            text(&out.stderr).contains("no request"),
            "{}",
            text(&out.stderr)
        );
        return None;
    }
    Some(serde_json::from_slice(&out.stdout).expect("outcome prints JSON"))
}

fn state(fx: &Fixture, key: &str) -> String {
    outcome(fx, key)
        .map(|v| v["state"].as_str().unwrap().to_string())
        .unwrap_or_else(|| "no-record".into())
}

#[test]
fn a_finished_run_answers_with_its_receipt() {
    let fx = Fixture::new();
    let out = fx
        .stockade([
            "run",
            "--journal",
            "done-1",
            "--",
            "sh",
            "-c",
            "echo hi; exit 3",
        ])
        .output()
        .unwrap();
    assert_code(&out, 3);
    let answer = outcome(&fx, "done-1").unwrap();
    assert_eq!(answer["state"], "finished", "{answer}");
    assert_eq!(answer["result"]["stockadeExitCode"], 3);
    assert_eq!(answer["result"]["receipt"]["exitCode"], 3);
    assert_eq!(answer["result"]["receipt"]["bindingVerified"], true);
    assert_eq!(answer["requested"]["argv"][2], "echo hi; exit 3");
}

#[test]
fn an_unconsumed_request_is_not_started_and_is_withdrawn_so_it_stays_so() {
    let fx = Fixture::new();
    let confined = fx.confine(&["--journal", "never", "--", "touch", "ran"]);
    assert_eq!(state(&fx, "never"), "not-started");
    // Spawned after the answer: the runner finds no request, and nothing runs.
    let out = spawn_argv(&confined);
    assert_code(&out, 125);
    assert!(!fx.ws.join("ran").exists(), "a withdrawn request ran");
    assert_eq!(state(&fx, "never"), "not-started");

    // The positive control: spawned before anyone asks, it runs, and then it is not
    // "not-started" (an executor's ConfinedArgv records no result: unknown).
    let confined = fx.confine(&["--journal", "spawned", "--", "touch", "ran"]);
    let out = spawn_argv(&confined);
    assert_code(&out, 0);
    assert!(fx.ws.join("ran").exists());
    assert_eq!(state(&fx, "spawned"), "unknown");
}

#[test]
fn a_runner_that_refused_is_not_started() {
    let fx = Fixture::new();
    // The program changes between confine and spawn: the runner refuses (binding).
    let program = fx.ws.join("prog");
    std::fs::write(&program, "#!/bin/sh\ntouch ran\n").unwrap();
    make_executable(&program);
    let confined = fx.confine(&["--journal", "refused", "--", "./prog"]);
    std::fs::remove_file(&program).unwrap();
    std::fs::write(&program, "#!/bin/sh\ntouch ran\n").unwrap();
    make_executable(&program);
    let out = spawn_argv(&confined);
    assert_code(&out, 125);
    assert!(!fx.ws.join("ran").exists());
    let answer = outcome(&fx, "refused").unwrap();
    assert_eq!(answer["state"], "not-started", "{answer}");
    assert!(
        answer["reason"].as_str().unwrap().contains("refused"),
        "{answer}"
    );
}

fn make_executable(path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Kills `stockade run --journal KEY` after `delay_ms` (0: at once) while its command
/// records that it ran and then runs on; returns the journal's state and whether the
/// command ran.
fn kill_run_after(fx: &Fixture, key: &str, args: &[&str], delay_ms: u64) -> (String, bool) {
    let marker = format!("ran-{key}");
    let mut cmd = fx.stockade(["run", "--journal", key]);
    cmd.args(args)
        .args(["--", "sh", "-c", &format!("touch {marker}; sleep 1000")])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(delay_ms));
    let _ = child.kill();
    let _: std::process::ExitStatus = child.wait().unwrap();
    let state = state(fx, key);
    (state, fx.ws.join(&marker).exists())
}

#[test]
fn run_killed_at_any_point_is_never_not_started_when_the_command_ran() {
    // Points spread over the whole run: before the request is recorded, before the
    // runner, during it, while the command runs. Whatever each lands on, the answer is
    // one of the three (or no record yet), and never "not-started" for a command that
    // ran, nor "finished" for a run that was killed.
    let fx = Fixture::new();
    let mut seen = std::collections::BTreeSet::new();
    for (i, delay) in [0u64, 1, 2, 4, 8, 15, 25, 40, 60, 100, 200, 400]
        .into_iter()
        .enumerate()
    {
        for (mode, args) in [
            ("confined", &["--containment", "subreaper"][..]),
            ("unconfined", &["--mode", "danger-full-access"][..]),
        ] {
            let key = format!("kill-{mode}-{i}");
            let (state, ran) = kill_run_after(&fx, &key, args, delay);
            // Settled since: a command that had not run by now never will (the request
            // is withdrawn or its runner died with the launcher).
            std::thread::sleep(std::time::Duration::from_millis(100));
            let ran_later = fx.ws.join(format!("ran-{key}")).exists();
            match state.as_str() {
                "not-started" | "no-record" => {
                    assert!(!ran && !ran_later, "{key} ran but the journal says {state}")
                }
                "unknown" => {}
                other => panic!("{key}: a killed run answered {other}"),
            }
            seen.insert(state);
        }
    }
    eprintln!("states seen: {seen:?}");
    // The sweep covered both ends: a run killed before it started anything and one
    // killed while its command ran.
    assert!(seen.contains("unknown"), "{seen:?}");
}

#[test]
fn run_killed_while_its_command_runs_is_unknown_with_and_without_the_stage() {
    for staged in [false, true] {
        let fx = if staged {
            Fixture::staged()
        } else {
            Fixture::new()
        };
        let key = format!("running-{staged}");
        let mut child = fx
            .stockade([
                "run",
                "--journal",
                &key,
                "--",
                "sh",
                "-c",
                "touch ready; sleep 1000",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for_file(&fx.ws.join("ready"));
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(state(&fx, &key), "unknown", "staged: {staged}");
    }
}

#[test]
fn a_confined_command_cannot_write_the_journal() {
    let fx = Fixture::new();
    let out = fx
        .stockade(["run", "--journal", "first", "--", "true"])
        .output()
        .unwrap();
    assert_code(&out, 0);
    let journal = fx.runtime.join("stockade/journal");
    assert!(journal.join("first.finished").exists());
    // Forge a result for another key, rewrite this one's, remove it: each refused.
    let script = format!(
        "echo '{{}}' > {j}/forged.finished; echo '{{}}' > {j}/first.finished; rm -f {j}/first.finished; echo '{{}}' > ws-file",
        j = journal.display()
    );
    let out: Output = fx.run_sh("workspace-write", &script);
    assert!(
        text(&out.stderr).contains("journal"),
        "{}",
        text(&out.stderr)
    );
    assert!(!journal.join("forged.finished").exists());
    assert_eq!(state(&fx, "first"), "finished");
    // The positive control: the same write lands where the policy allows it.
    assert!(fx.ws.join("ws-file").exists());
}

#[test]
fn bad_and_reused_keys_are_refused_and_run_nothing() {
    let fx = Fixture::new();
    for key in ["../x", "a/b", "", "a.finished"] {
        let out = fx
            .stockade(["run", "--journal", key, "--", "touch", "ran"])
            .output()
            .unwrap();
        assert_code(&out, 125);
        assert!(
            text(&out.stderr).contains("journal key"),
            "{}",
            text(&out.stderr)
        );
    }
    let out = fx
        .stockade(["run", "--journal", "once", "--", "true"])
        .output()
        .unwrap();
    assert_code(&out, 0);
    let out = fx
        .stockade(["run", "--journal", "once", "--", "touch", "ran"])
        .output()
        .unwrap();
    assert_code(&out, 125);
    assert!(text(&out.stderr).contains("already in the journal"));
    assert!(!fx.ws.join("ran").exists());
    assert_eq!(
        fx.leftover_requests().len(),
        1,
        "{:?}",
        fx.leftover_requests()
    );
}

/// `stockade classify` of `confined` (written outside every writable root) with this
/// exit code.
fn classify(fx: &Fixture, confined: &serde_json::Value, code: i32) -> Output {
    let file = fx.root.join(format!("confined-{}.json", unique_tag("c")));
    std::fs::write(&file, confined.to_string()).unwrap();
    let file = file.display().to_string();
    let code = code.to_string();
    fx.stockade(["classify", "--confined", &file, "--exit-code", &code])
        .output()
        .unwrap()
}

#[test]
fn a_classified_confined_argv_is_finished_with_the_verdict_and_its_receipt() {
    let fx = Fixture::new();
    let confined = fx.confine(&["--journal", "cls-1", "--", "sh", "-c", "touch ran; exit 4"]);
    assert_eq!(confined["journal"], "cls-1");
    let out = spawn_argv(&confined);
    assert_code(&out, 4);
    // Spawned, not classified yet: the command ran and nothing knows how it ended.
    assert_eq!(state(&fx, "cls-1"), "unknown");
    let out = classify(&fx, &confined, 4);
    assert_code(&out, 0);
    let verdict: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let answer = outcome(&fx, "cls-1").unwrap();
    assert_eq!(answer["state"], "finished", "{answer}");
    assert!(
        answer["reason"].as_str().unwrap().contains("classify"),
        "{answer}"
    );
    assert_eq!(
        answer["result"], verdict,
        "the journal holds the verdict given"
    );
    assert_eq!(answer["result"]["receipt"]["exitCode"], 4);
    assert_eq!(answer["result"]["receipt"]["bindingVerified"], true);

    // A second classify (the private directory is consumed: tampering) replaces nothing.
    let out = classify(&fx, &confined, 0);
    assert_code(&out, 0);
    assert!(
        text(&out.stderr).contains("already recorded"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(outcome(&fx, "cls-1").unwrap()["result"], verdict);
}

#[test]
fn a_confined_argv_never_spawned_or_refused_then_classified_says_so() {
    let fx = Fixture::new();
    // Never spawned: not-started (and withdrawn), whatever an executor calls after.
    let confined = fx.confine(&["--journal", "cls-never", "--", "touch", "ran"]);
    assert_eq!(state(&fx, "cls-never"), "not-started");
    // Spawned after the withdrawal: the runner refuses; classify records that verdict.
    let out = spawn_argv(&confined);
    assert_code(&out, 125);
    let out = classify(&fx, &confined, 125);
    assert_code(&out, 0);
    let answer = outcome(&fx, "cls-never").unwrap();
    assert_eq!(answer["state"], "finished", "{answer}");
    assert_eq!(answer["result"]["runnerFailed"], true, "{answer}");
    assert!(!fx.ws.join("ran").exists());
}

#[test]
fn classify_refuses_a_key_changed_in_the_confined_argv() {
    let fx = Fixture::new();
    let first = fx.confine(&["--journal", "cls-a", "--", "true"]);
    let mut second = fx.confine(&["--journal", "cls-b", "--", "true"]);
    assert_code(&spawn_argv(&first), 0);
    assert_code(&spawn_argv(&second), 0);
    // The second request's verdict under the first one's key: refused, nothing recorded.
    second["journal"] = "cls-a".into();
    let out = classify(&fx, &second, 0);
    assert_code(&out, 125);
    assert!(
        text(&out.stderr).contains("names another request"),
        "{}",
        text(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    assert_eq!(state(&fx, "cls-a"), "unknown");
    // A key that is no key at all is refused too.
    second["journal"] = "../cls-a".into();
    let out = classify(&fx, &second, 0);
    assert_code(&out, 125);
    assert!(text(&out.stderr).contains("journal key"));
    // The positive control: the unchanged ConfinedArgv records under its own key.
    second["journal"] = "cls-b".into();
    assert_code(&classify(&fx, &second, 0), 0);
    assert_eq!(state(&fx, "cls-b"), "finished");
}

#[test]
fn a_confined_command_cannot_record_a_verdict_through_classify() {
    let fx = Fixture::new();
    let target = fx.confine(&["--journal", "cls-forged", "--", "true"]);
    assert_code(&spawn_argv(&target), 0);
    // The command hands the ConfinedArgv to `stockade classify` itself, from inside.
    let json = fx.ws.join("target.json");
    std::fs::write(&json, target.to_string()).unwrap();
    let script = format!(
        "{} classify --confined {} --exit-code 0",
        stockade_bin().display(),
        json.display()
    );
    let out = fx.run_sh("workspace-write", &script);
    assert!(
        text(&out.stderr).contains("not recorded in the journal"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(state(&fx, "cls-forged"), "unknown");
    // The positive control: the same classify from outside the sandbox records it.
    assert_code(&classify(&fx, &target, 0), 0);
    assert_eq!(state(&fx, "cls-forged"), "finished");
}
