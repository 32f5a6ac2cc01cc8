//! The examples users copy: those of `stockade confine --help`, `stockade explain
//! --help` and `stockade-runner --help`, the walkthrough at the top of `man stockade`
//! and the examples of `man stockade-runner`, run as written (with
//! `stockade` on `PATH`) in a fixture with stockade's defaults, namespace stage included.
//! An example that no longer matches the ConfinedArgv's shape (it once took `argv[0]`
//! and `argv[2]`, which under the stage are the launcher and `--rw`) fails here.

mod support;
use std::path::Path;
use std::process::{Command, Output};
use support::*;

/// `bash -c SCRIPT` in the fixture's workspace and environment, built binaries first on
/// `PATH`.
fn bash(fx: &Fixture, script: &str) -> Output {
    let path = format!(
        "{}:{}",
        stockade_bin().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("bash");
    fx.environment(&mut cmd);
    cmd.env("PATH", path)
        .arg("-c")
        .arg(script)
        .output()
        .unwrap()
}

fn have_jq() -> bool {
    Command::new("jq")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The example lines of a subcommand's help (the indented lines after `Examples:`).
fn help_examples(fx: &Fixture, sub: &str) -> String {
    let out = fx.stockade([sub, "--help"]).output().unwrap();
    assert_code(&out, 0);
    examples_of(&text(&out.stdout))
}

/// The indented lines after `Examples:` in a help text.
fn examples_of(help: &str) -> String {
    let examples = help
        .split("Examples:")
        .nth(1)
        .expect("an Examples: section");
    examples
        .lines()
        .take_while(|l| !l.trim().is_empty() || l.is_empty())
        .filter(|l| l.starts_with("  "))
        .map(str::trim)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The walkthrough's example blocks of `stockade.1`, as `stockade-docgen` renders them,
/// with the roff escapes it uses undone.
fn walkthrough_blocks(fx: &Fixture) -> Vec<Vec<String>> {
    let out = fx.outside.join("generated");
    let status = Command::new(bin("stockade-docgen"))
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let page = std::fs::read_to_string(out.join("man/stockade.1")).unwrap();
    let section = page
        .split(".SH WALKTHROUGH")
        .nth(1)
        .expect("a WALKTHROUGH section")
        .split("\n.SH ")
        .next()
        .unwrap();
    let mut blocks = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in section.lines() {
        match line {
            ".nf" => current = Some(Vec::new()),
            ".fi" => blocks.extend(current.take()),
            _ => {
                if let Some(block) = current.as_mut() {
                    block.push(line.replace("\\-", "-").replace("\\*(Aq", "'"));
                }
            }
        }
    }
    blocks
}

/// The provider examples end with `stockade classify`'s verdict: the command ran
/// confined (the runner's record says so) and `note.txt`'s write was a denial.
#[track_caller]
fn assert_confined_and_classified(out: &Output, outcome: &[&str]) {
    assert_code(out, 0);
    let stdout = text(&out.stdout);
    let verdict: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", text(&out.stderr)));
    assert_eq!(verdict["runnerFailed"], false, "{verdict}");
    assert_eq!(verdict["evidence"], "status-channel", "{verdict}");
    assert_eq!(verdict["receipt"]["bindingVerified"], true, "{verdict}");
    assert!(
        outcome.contains(&verdict["outcome"].as_str().unwrap_or("")),
        "{verdict}"
    );
}

/// That `out` (an explain example's) says the runner would accept the request;
/// `context` names the example in the message.
fn assert_explained_as_accepted(out: &std::process::Output, context: &str) {
    assert!(
        text(&out.stdout).contains("the runner would accept this request"),
        "{context}: {}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

#[test]
fn the_confine_and_explain_help_examples_run_as_written() {
    if !have_jq() {
        eprintln!("SKIPPED (no jq): the_confine_and_explain_help_examples_run_as_written");
        return;
    }
    let fx = Fixture::staged();
    let confine = help_examples(&fx, "confine");
    assert!(confine.contains("stockade classify"), "{confine}");
    // `ls /root` lists as root; an ordinary user's `ls` is refused by the directory's
    // own mode, with or without stockade: an ordinary failure, never a denial.
    let out = bash(&fx, &confine);
    let outcome: &[&str] = if stockade_tests::is_root() {
        &["ok"]
    } else {
        &["ok", "failed"]
    };
    assert_confined_and_classified(&out, outcome);

    let explain = help_examples(&fx, "explain");
    let out = bash(&fx, &explain);
    assert_code(&out, 0);
    assert_explained_as_accepted(&out, "");
}

#[test]
fn the_man_page_walkthrough_runs_as_written() {
    if !have_jq() {
        eprintln!("SKIPPED (no jq): the_man_page_walkthrough_runs_as_written");
        return;
    }
    let fx = Fixture::staged();
    let blocks = walkthrough_blocks(&fx);
    assert!(blocks.len() >= 4, "{blocks:?}");

    // The first block is a command and what it prints.
    let (command, shown) = blocks[0].split_first().unwrap();
    let out = bash(&fx, command);
    assert_code(&out, 1);
    let printed = format!("{}{}", text(&out.stdout), text(&out.stderr));
    let printed: Vec<&str> = printed.lines().collect();
    // Where no namespace stage can run, Landlock's answer stands in the kernel's line.
    let landlock: Vec<String> = shown
        .iter()
        .map(|l| l.replace("Read-only file system", "Permission denied"))
        .collect();
    // An ordinary user may not write /etc with or without stockade: the same lines,
    // but no refusal of stockade's is named (Unix's own is never called a denial).
    let ours = |l: &String| !l.starts_with("[sandbox:");
    let user: Vec<Vec<String>> = [
        shown.iter().map(|l| l.to_string()).collect(),
        landlock.clone(),
    ]
    .into_iter()
    .map(|lines: Vec<String>| lines.into_iter().filter(ours).collect())
    .collect();
    let as_user = !stockade_tests::is_root() && user.iter().any(|u| printed == *u);
    assert!(
        printed == *shown || printed == landlock || as_user,
        "printed {printed:?}, the page shows {shown:?}"
    );
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("hello.txt")).unwrap(),
        "hello\n"
    );

    let provider = blocks
        .iter()
        .find(|b| b.iter().any(|l| l.starts_with("stockade classify")))
        .expect("a confine/classify example");
    let out = bash(&fx, &provider.join("\n"));
    assert_confined_and_classified(&out, &["denied"]);
    assert!(!fx.ws.join("note.txt").exists());

    let explain = blocks
        .iter()
        .find(|b| b.iter().any(|l| l.starts_with("stockade explain")))
        .expect("an explain example");
    let out = bash(&fx, &explain.join("\n"));
    assert_code(&out, 0);
    assert_explained_as_accepted(&out, "");
}

/// The runner's examples (of its `--help` and of its man page, which is hand-written)
/// explain the request and then spawn the argv by hand, as developers debugging stockade
/// do. They once took `argv[0]` and `argv[2]` and left out `--sha256`: under the stage
/// that explained `--rw` and started the launcher with `--request`, and even without the
/// stage the runner refuses a request without its digest.
#[test]
fn the_runners_help_and_man_page_examples_run_as_written() {
    if !have_jq() {
        eprintln!("SKIPPED (no jq): the_runners_help_and_man_page_examples_run_as_written");
        return;
    }
    let out = Command::new(runner_bin()).arg("--help").output().unwrap();
    assert_code(&out, 0);
    // The runner is not on PATH once installed: the example names its installed path,
    // which here is the one just built.
    const INSTALLED: &str = "/usr/libexec/stockade/stockade-runner";
    let help = examples_of(&text(&out.stdout));
    assert!(
        help.lines()
            .filter(|l| l.contains("stockade-runner"))
            .all(|l| l.contains(&format!("{INSTALLED} "))),
        "{help}"
    );
    let help = help.replace(INSTALLED, runner_bin().to_str().unwrap());
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/man/stockade-runner.1");
    let page = std::fs::read_to_string(page).unwrap();
    let man = page
        .split(".SH EXAMPLES")
        .nth(1)
        .expect("an EXAMPLES section")
        .lines()
        .skip_while(|l| *l != ".RS 4")
        .skip(1)
        .take_while(|l| *l != ".RE")
        .map(|l| l.replace("\\-", "-"))
        .collect::<Vec<_>>()
        .join("\n");
    for (name, script) in [("--help", help), ("stockade-runner.1", man)] {
        assert!(
            script.contains("--explain") || script.contains("explain"),
            "{name}: {script}"
        );
        let fx = Fixture::staged();
        let out = bash(&fx, &script);
        let stderr = text(&out.stderr);
        assert_explained_as_accepted(&out, name);
        assert!(!stderr.contains("stockade-runner:"), "{name}: {stderr}");
        assert!(!stderr.contains("stockade:"), "{name}: {stderr}");
        // The spawned argv listed /root (an ordinary user is refused by its mode: 2).
        if stockade_tests::is_root() {
            assert_code(&out, 0);
        } else {
            assert!(matches!(out.status.code(), Some(0 | 2)), "{name}: {stderr}");
        }
        // The request was consumed by that run.
        let confined: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(fx.ws.join("c.json")).unwrap()).unwrap();
        let request = confined_argv(&confined)
            .into_iter()
            .find(|a| a.ends_with("/request"))
            .unwrap();
        assert!(
            !Path::new(&request).exists(),
            "{name}: the example did not run the request"
        );
    }
}

#[test]
fn the_serve_help_example_runs_as_written() {
    let fx = Fixture::new();
    let serve = help_examples(&fx, "serve");
    assert!(serve.contains("stockade serve"), "{serve}");
    let out = bash(&fx, &serve);
    assert_code(&out, 0);
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The argv it answered lists the workspace when spawned.
    std::fs::write(fx.ws.join("listed"), b"").unwrap();
    let ran = spawn_argv(&answer["confined"]);
    assert_code(&ran, 0);
    assert!(
        text(&ran.stdout).contains("listed"),
        "{}",
        text(&ran.stdout)
    );
}
