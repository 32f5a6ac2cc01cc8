//! The kernel against the model: random file trees and random policies over them
//! (`--writable` roots nested anywhere, `--hide`, `--protect` and the default protected
//! names, the three modes, `--tmp private`, with and without the namespace stage); the
//! real launcher confines `model-probe`, which performs every operation on every path
//! inside the sandbox, and each answer the kernel gives is compared with what
//! `stockade_policy::model` says the policy means. A disagreement is shrunk (policy
//! items and tree entries dropped while it persists) and printed with its seed as a
//! reproduction.
//!
//! Budget: `STOCKADE_MODEL_SECONDS` (default 60), at most `STOCKADE_MODEL_CASES` cases;
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
    let seconds = env_u64("STOCKADE_MODEL_SECONDS").unwrap_or(60);
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
