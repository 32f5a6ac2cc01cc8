//! The kernel against the model: random file trees and random policies over them
//! (`--writable` roots nested anywhere, `--hide`, `--protect` and the default protected
//! names, the three modes, `--tmp private`, with and without the namespace stage); the
//! real launcher confines `model-probe`, which performs every operation on every path
//! inside the sandbox, and each answer the kernel gives is compared with what
//! `stockade_policy::model` says the policy means. A disagreement is shrunk (policy
//! items and tree entries dropped while it persists) and printed with its seed as a
//! reproduction.
//!
//! Budget: `STOCKADE_MODEL_SECONDS` (default 60, and 20 s short of the test deadline,
//! `STOCKADE_TEST_DEADLINE`), at most `STOCKADE_MODEL_CASES` cases;
//! seeds start at `STOCKADE_MODEL_SEED` (default: from the clock), and the range run is
//! printed. Reproduce one with `STOCKADE_MODEL_SEED=N STOCKADE_MODEL_CASES=1`.

#[path = "model_differential/case.rs"]
mod case;
mod support;

use case::{Case, Outcome};
use support::*;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn the_kernel_answers_every_operation_on_random_trees_as_the_model_says() {
    let fx = Fixture::staged();
    // Well inside the fixture's deadline, which would end the run as a failure.
    let seconds = env_u64("STOCKADE_MODEL_SECONDS")
        .unwrap_or(60)
        .min(test_deadline().as_secs().saturating_sub(20));
    let max_cases = env_u64("STOCKADE_MODEL_CASES").unwrap_or(u64::MAX);
    let start = env_u64("STOCKADE_MODEL_SEED").unwrap_or_else(|| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        now.map(|d| d.as_secs() % 1_000_000).unwrap_or(1)
    });
    let devices = nix_is_root();
    let began = std::time::Instant::now();
    let (mut cases, mut refused, mut totals) = (0u64, 0u64, case::Totals::default());
    let mut failure = None;
    let mut seed = start;
    while cases < max_cases && (cases == 0 || began.elapsed().as_secs() < seconds) {
        let c = Case::generate(seed, devices);
        match c.run(&fx, cases) {
            Outcome::Refused {
                predicted: true, ..
            } => refused += 1,
            Outcome::Refused {
                predicted: false,
                why,
            } => {
                failure = Some(format!(
                    "seed {seed}: confine refused a policy the model takes as valid: {why}\n{}",
                    c.reproduction(&fx, None)
                ));
                break;
            }
            Outcome::Ran(report) => {
                totals.add(&report.totals);
                if std::env::var_os("STOCKADE_MODEL_ALL").is_some() {
                    for d in &report.disagreements {
                        eprintln!("seed {seed}: {d:?}");
                    }
                }
                if let Some(first) = report.disagreements.first() {
                    let small = c.shrink(&fx, first);
                    failure = Some(format!(
                        "seed {seed}: {} disagreement(s); the first, shrunk:\n{}",
                        report.disagreements.len(),
                        small.reproduction(&fx, Some(first))
                    ));
                    break;
                }
            }
        }
        cases += 1;
        seed += 1;
    }
    eprintln!(
        "model differential: seeds {start}..{seed} ({cases} cases, {refused} refused as predicted), {} answers compared ({} allowed, {} denied){}",
        totals.compared,
        totals.allowed,
        totals.denied,
        if devices {
            ""
        } else {
            "; no device nodes (not root)"
        }
    );
    if let Some(f) = failure {
        panic!("the kernel and the model disagree:\n{f}");
    }
    // The comparison means something only where both answers came up.
    assert!(totals.allowed > 0 && totals.denied > 0, "{totals:?}");
}

fn nix_is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// `stockade explain FILE --path` answers from the model, and what it answers is what
/// the command then meets: a write in the workspace allowed, one outside denied, a
/// hidden file's read denied (the same request run, each answer checked).
#[test]
fn explain_answers_per_path_questions_as_the_command_then_finds() {
    let fx = Fixture::new();
    let inside = fx.ws.join("notes.txt");
    let outside = fx.outside.join("plain.txt");
    let secret = fx.outside.join("secret.txt");
    for f in [&inside, &outside, &secret] {
        std::fs::write(f, b"x").unwrap();
    }
    let script = format!(
        "echo y >> {}; echo w=$?; echo y >> {}; echo o=$?; cat {} >/dev/null; echo s=$?",
        inside.display(),
        outside.display(),
        secret.display()
    );
    let hide = secret.display().to_string();
    let confined = fx.confine(&["--hide", &hide, "--", "sh", "-c", &script]);
    let argv = confined_argv(&confined);
    let request = &argv[argv.iter().position(|a| a == "--request").unwrap() + 1];
    let out = fx
        .stockade(["explain", request.as_str()])
        .args(["--path", inside.to_str().unwrap()])
        .args(["--path", outside.to_str().unwrap()])
        .args(["--path", secret.to_str().unwrap()])
        .args(["--path", fx.ws.join("new").to_str().unwrap()])
        .output()
        .unwrap();
    assert_code(&out, 0);
    let said = text(&out.stdout);
    let answer = |path: &Path, op: &str| -> String {
        let at = said
            .find(&format!("{} (", path.display()))
            .expect("path shown");
        let line = said[at..]
            .lines()
            .find(|l| l.trim_start().starts_with(op))
            .unwrap_or_else(|| panic!("no {op} for {}: {said}", path.display()));
        line.to_string()
    };
    assert!(answer(&inside, "write").contains("allowed"), "{said}");
    assert!(
        answer(&outside, "write").contains("denied: Landlock"),
        "{said}"
    );
    assert!(answer(&outside, "read").contains("allowed"), "{said}");
    assert!(answer(&secret, "read").contains("denied"), "{said}");
    assert!(
        said.contains("new (does not exist): create it: allowed"),
        "{said}"
    );
    // The command meets exactly that.
    let ran = spawn_argv(&confined);
    let seen = text(&ran.stdout);
    assert!(seen.contains("w=0"), "{seen}");
    assert!(!seen.contains("o=0") && !seen.contains("s=0"), "{seen}");
}

use std::path::Path;

/// Found by the differential test: under the stage, a command keeping
/// `CAP_DAC_OVERRIDE` read past the stage's mask over a hidden directory and was told a
/// file beneath it did not exist (no denial, no cue to ask). Now nothing is masked for
/// it and the carve-out denies; the control: the same read without `--hide` succeeds.
#[test]
fn a_command_reading_past_file_modes_is_denied_beneath_a_hidden_directory() {
    if !nix_is_root() {
        println!("SKIPPED (needs root): only root holds CAP_DAC_OVERRIDE to keep");
        return;
    }
    let fx = Fixture::staged();
    let dir = fx.outside.join("store");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("key"), b"secret").unwrap();
    let script = format!("cat {}/key", dir.display());
    let keep = ["--keep-capability", "CAP_DAC_OVERRIDE"];
    let hide = dir.display().to_string();
    let hidden = fx
        .stockade(
            ["run"]
                .iter()
                .chain(&keep)
                .chain(&["--hide", &hide, "--", "sh", "-c", &script]),
        )
        .output()
        .unwrap();
    assert_ne!(hidden.status.code(), Some(0));
    assert!(
        text(&hidden.stderr).contains("Permission denied"),
        "{}",
        text(&hidden.stderr)
    );
    assert!(!text(&hidden.stdout).contains("secret"));
    let control = fx
        .stockade(
            ["run"]
                .iter()
                .chain(&keep)
                .chain(&["--", "sh", "-c", &script]),
        )
        .output()
        .unwrap();
    assert_code(&control, 0);
    assert_eq!(text(&control.stdout), "secret");
}
