//! `model-differential`: the kernel against the model. Random file trees and random
//! policies over them (`--writable` roots nested anywhere, `--hide`, `--protect` and the
//! default protected names, the three modes, `--tmp private`, with and without the
//! namespace stage); the real launcher confines `model-probe`, which performs every
//! operation on every path inside the sandbox, and each answer the kernel gives is
//! compared with what `stockade_policy::model` says the policy means on this kernel's
//! Landlock ABI, as is the guarantees table (a guarantee the model finds missing must not
//! be reported enforced, and the run must say `partial`). A disagreement is shrunk
//! (policy items and tree entries dropped while it persists) and printed with its seed
//! as a reproduction.
//!
//! A program of its own, not a test function, so that the kernel matrix's guests (a
//! busybox initramfs with static binaries, `tests/kernels/run`) run the same driver as
//! the host's `cargo test` (`tests/tests/model_differential.rs`).
//!
//! usage: `model-differential --stockade PATH --probe PATH --scratch DIR`
//!
//! The launcher is started with this program's environment, `$TMPDIR` removed (name the
//! runner with `STOCKADE_RUNNER` where it is not beside the launcher). Trees are built
//! beneath `DIR`, which must lie outside every root workspace-write grants (`/tmp`).
//! Budget: `STOCKADE_MODEL_SECONDS` (default 60), at most `STOCKADE_MODEL_CASES` cases,
//! a shrink at most `STOCKADE_MODEL_SHRINK_SECONDS` (default 120); seeds start at
//! `STOCKADE_MODEL_SEED` (default 1; `clock` picks one from the clock) and the range run is printed.
//! Reproduce one with `STOCKADE_MODEL_SEED=N STOCKADE_MODEL_CASES=1`.
//!
//! Exit status: 0 when the kernel and the model agree on every answer compared, 1 when
//! they disagree (the shrunk reproduction on stderr), 2 when it cannot run (usage).

mod case;

use case::{Case, Outcome};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Where the driver finds the binaries it runs and where it builds its trees.
pub struct Harness {
    pub stockade: PathBuf,
    pub probe: PathBuf,
    pub root: PathBuf,
    /// How long a shrink may take before it settles for what it has.
    pub shrink_seconds: u64,
    /// Whether the stage covers hidden paths with its empty mounts on this kernel.
    pub masks: bool,
    /// Whether the scratch filesystem takes `user.` extended attributes (tmpfs before
    /// Linux 6.6 does not: the 6.1 guest's root): without them the xattr operation is
    /// not compared, as the filesystem refuses it with the seccomp filter's own errno.
    pub xattrs: bool,
}

impl Harness {
    /// `stockade ARGS`, with this program's environment but no `$TMPDIR` (which would be
    /// a writable root the model is not told about), stdin from /dev/null.
    pub fn stockade<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut cmd = Command::new(&self.stockade);
        cmd.args(args).env_remove("TMPDIR").stdin(Stdio::null());
        cmd
    }
}

pub use stockade_tests::confined_argv;

/// Spawns a ConfinedArgv the way an executor would, as a separate process.
pub fn spawn_argv(confined: &serde_json::Value) -> Output {
    let argv = confined_argv(confined);
    Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .env_remove("TMPDIR")
        .output()
        .expect("spawn the confined argv")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

const USAGE: &str = "usage: model-differential --stockade PATH --probe PATH --scratch DIR";

fn main() {
    let mut harness = match parse_args() {
        Ok(h) => h,
        Err(why) => {
            eprintln!("model-differential: {why}\n{USAGE}");
            std::process::exit(2);
        }
    };
    harness.masks = masks_made(&harness);
    harness.xattrs = xattrs_supported(&harness.root);
    std::process::exit(drive(&harness));
}

/// The three paths, each required, each absolute (the launcher is started elsewhere).
fn parse_args() -> Result<Harness, String> {
    let mut args = std::env::args_os().skip(1);
    let (mut stockade, mut probe, mut root) = (None, None, None);
    while let Some(flag) = args.next() {
        let slot = match flag.to_str() {
            Some("--stockade") => &mut stockade,
            Some("--probe") => &mut probe,
            Some("--scratch") => &mut root,
            _ => return Err(format!("unknown argument {}", flag.to_string_lossy())),
        };
        let value = args
            .next()
            .ok_or_else(|| format!("{} needs a path", flag.to_string_lossy()))?;
        *slot = Some(PathBuf::from(value));
    }
    let need = |p: Option<PathBuf>, what: &str| -> Result<PathBuf, String> {
        let p = p.ok_or_else(|| format!("--{what} is required"))?;
        let p = p
            .canonicalize()
            .map_err(|e| format!("--{what} {}: {e}", p.display()))?;
        Ok(p)
    };
    Ok(Harness {
        stockade: need(stockade, "stockade")?,
        probe: need(probe, "probe")?,
        root: need(root, "scratch")?,
        shrink_seconds: env_u64("STOCKADE_MODEL_SHRINK_SECONDS").unwrap_or(120),
        masks: false,
        xattrs: false,
    })
}

/// Whether the filesystem of `dir` takes a `user.` extended attribute, tried outside
/// the sandbox.
fn xattrs_supported(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    let name = c"user.stockade_model";
    // SAFETY: NUL-terminated path and name, a one-byte value.
    let set = unsafe { libc::setxattr(path.as_ptr(), name.as_ptr(), b"1".as_ptr().cast(), 1, 0) };
    // SAFETY: as above.
    unsafe { libc::removexattr(path.as_ptr(), name.as_ptr()) };
    set == 0
}

/// Whether the namespace stage covers a hidden directory with its empty mount here: the
/// model cannot know it (a kernel without the new mount calls gets none, and the
/// carve-out hides every path), so it is asked once, of a staged run reading its own
/// mount table.
fn masks_made(fx: &Harness) -> bool {
    let dir = fx.root.join("masks");
    let hidden = dir.join("h");
    std::fs::create_dir_all(&hidden).expect("make the masks' trial directory");
    let out = fx
        .stockade(["run", "--mode", "read-only", "--no-default-hide"])
        .arg("--workspace")
        .arg(&dir)
        .arg("--hide")
        .arg(&hidden)
        .args(["--", "cat", "/proc/self/mountinfo"])
        .output()
        .expect("run stockade");
    let _ = std::fs::remove_dir_all(&dir);
    let at = hidden.display().to_string();
    // Fields: id, parent, device, root, mount point, ...; after " - ": the type.
    text(&out.stdout).lines().any(|l| {
        l.split(' ').nth(4) == Some(at.as_str())
            && l.split(" - ")
                .nth(1)
                .is_some_and(|t| t.starts_with("tmpfs "))
    })
}

/// Runs cases from the first seed until the budget is spent or one disagrees; the exit
/// status.
fn drive(fx: &Harness) -> i32 {
    let seconds = env_u64("STOCKADE_MODEL_SECONDS").unwrap_or(60);
    let max_cases = env_u64("STOCKADE_MODEL_CASES").unwrap_or(u64::MAX);
    // A fixed first seed by default, so the suite CI runs answers the same each time;
    // `STOCKADE_MODEL_SEED=clock` explores from the clock (by hand, with a longer budget).
    let start = match std::env::var("STOCKADE_MODEL_SEED").as_deref() {
        Ok("clock") => {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            now.map(|d| d.as_secs() % 1_000_000).unwrap_or(1)
        }
        _ => env_u64("STOCKADE_MODEL_SEED").unwrap_or(1),
    };
    let devices = is_root();
    let setting = format!(
        "the stage's masks {}{}",
        if fx.masks {
            "made"
        } else {
            "not made (hidden paths carved out under the stage too)"
        },
        if fx.xattrs {
            ""
        } else {
            "; xattr not compared (the scratch filesystem has no user xattrs)"
        }
    );
    eprintln!("model differential: from seed {start}, {seconds} s; {setting}");
    let began = std::time::Instant::now();
    let (mut cases, mut refused, mut totals) = (0u64, 0u64, case::Totals::default());
    let mut failure = None;
    let mut seed = start;
    while cases < max_cases && (cases == 0 || began.elapsed().as_secs() < seconds) {
        let c = Case::generate(seed, devices);
        match c.run(fx, cases) {
            Outcome::Refused {
                predicted: true, ..
            } => refused += 1,
            Outcome::Refused {
                predicted: false,
                why,
            } => {
                failure = Some(format!(
                    "seed {seed}: confine refused a policy the model takes as valid: {why}\n{}",
                    c.reproduction(fx, None)
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
                    let small = c.shrink(fx, first);
                    failure = Some(format!(
                        "seed {seed}: {} disagreement(s); the first, shrunk:\n{}",
                        report.disagreements.len(),
                        small.reproduction(fx, Some(first))
                    ));
                    break;
                }
            }
        }
        cases += 1;
        seed += 1;
    }
    println!(
        "model differential: seeds {start}..{seed} ({cases} cases, {refused} refused as predicted), {} answers compared ({} allowed, {} denied); {setting}{}",
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
        eprintln!("the kernel and the model disagree:\n{f}");
        return 1;
    }
    // The comparison means something only where both answers came up.
    if totals.allowed == 0 || totals.denied == 0 {
        eprintln!("too few answers to mean anything (raise STOCKADE_MODEL_SECONDS): {totals:?}");
        return 1;
    }
    0
}
