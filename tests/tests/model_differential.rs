//! The kernel against the model on the host's kernel: runs the `model-differential`
//! driver (`tests/src/bin/model_differential/`, which says what it generates, runs,
//! compares and shrinks) against the binaries under test; the kernel matrix's guests
//! (`tests/kernels/run`) run the same driver on older Landlock ABIs.
//!
//! Budget: `STOCKADE_MODEL_SECONDS` (default 60, and 20 s short of the test deadline,
//! `STOCKADE_TEST_DEADLINE`), at most `STOCKADE_MODEL_CASES` cases;
//! seeds start at `STOCKADE_MODEL_SEED` (default 1; `clock` picks one from the clock), and the range run is
//! printed. Reproduce one with `STOCKADE_MODEL_SEED=N STOCKADE_MODEL_CASES=1`.

mod support;

use support::*;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn the_kernel_answers_every_operation_on_random_trees_as_the_model_says() {
    let fx = Fixture::staged();
    // Well inside the fixture's deadline, which would end the run as a failure; a
    // shrink gets what is left of it.
    let deadline = test_deadline().as_secs();
    let seconds = env_u64("STOCKADE_MODEL_SECONDS")
        .unwrap_or(60)
        .min(deadline.saturating_sub(20));
    let shrink = deadline.saturating_sub(seconds + 40).max(10);
    let mut driver = std::process::Command::new(bin("model-differential"));
    driver
        .arg("--stockade")
        .arg(stockade_bin())
        .arg("--probe")
        .arg(bin("model-probe"))
        .arg("--scratch")
        .arg(&fx.root)
        .env("STOCKADE_MODEL_SECONDS", seconds.to_string())
        .env("STOCKADE_MODEL_SHRINK_SECONDS", shrink.to_string());
    // Its launcher gets the fixture's environment: the runner under test, request files
    // under the fixture, the tag a deadline ends it by.
    let out = fx.environment(&mut driver).output().unwrap();
    let said = text(&out.stdout);
    eprintln!("{said}{}", text(&out.stderr));
    assert_code(&out, 0);
    assert!(said.contains("answers compared"), "{said}");
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
