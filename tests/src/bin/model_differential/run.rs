//! Running a case: confine `model-probe` with the case's flags, ask the model about the
//! very policy the request carries, spawn the argv and compare the answers.

use super::{Case, Disagreement, Entry, Outcome, Report, Totals};
use crate::{Harness, confined_argv, spawn_argv, text};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use stockade_policy::guarantees::KernelFacts;
use stockade_policy::model::{Answer, Op};
use stockade_policy::{LaunchRequest, Mode, Policy, PolicyRequest};

/// `base` joined with the relative path `rel` ("" is the base).
pub fn abs(base: &Path, rel: &str) -> PathBuf {
    if rel.is_empty() {
        base.to_path_buf()
    } else {
        base.join(rel)
    }
}

impl Case {
    /// Where the case's tree lives: one directory per case, outside every default root.
    pub fn base(fx: &Harness, n: u64) -> PathBuf {
        fx.root.join(format!("t{n}"))
    }

    /// The flags of `stockade confine` for this case.
    pub fn flags(&self, base: &Path) -> Vec<String> {
        let a = |rel: &str| abs(base, rel).display().to_string();
        let mut f = vec!["--mode".to_string(), self.mode.to_string()];
        f.extend(["--workspace".into(), a(&self.workspace)]);
        if !self.stage {
            f.push("--no-stage".into());
        }
        if self.mode != "danger-full-access" {
            f.push("--no-default-hide".into());
        }
        for w in &self.writable {
            f.extend(["--writable".into(), a(w)]);
        }
        for h in &self.hide {
            f.extend(["--hide".into(), a(h)]);
        }
        for p in &self.protect {
            f.extend(["--protect".into(), a(p)]);
        }
        if self.tmp_private {
            f.extend(["--tmp".into(), "private".into()]);
        }
        if self.keep_dac {
            f.extend(["--keep-capability".into(), "CAP_DAC_OVERRIDE".into()]);
        }
        if self.unix_sockets {
            f.push("--allow-unix-sockets".into());
        }
        f
    }

    pub fn run(&self, fx: &Harness, n: u64) -> Outcome {
        let base = Case::base(fx, n);
        self.build(&base);
        let plan = fx.root.join(format!("plan{n}"));
        let mut args = vec!["confine".to_string()];
        args.extend(self.flags(&base));
        args.extend(["--".into(), fx.probe.display().to_string()]);
        args.push(plan.display().to_string());
        let out = fx.stockade(&args).output().unwrap();
        if !out.status.success() {
            assert_eq!(
                out.status.code(),
                Some(125),
                "confine: {}",
                text(&out.stderr)
            );
            return Outcome::Refused {
                predicted: self.refusal_predicted(&base),
                why: text(&out.stderr),
            };
        }
        let confined: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let argv = confined_argv(&confined);
        let staged = argv.iter().any(|a| a == "__stage");
        let request = read_request(&argv, &confined, &base);
        let answers = self.answers(&base, &request, staged, (fx.masks, fx.xattrs));
        let mut lines = String::new();
        for (op, path, _) in &answers {
            let into = match op {
                Op::Rename(d) | Op::Link(d) => format!("\t{}", d.display()),
                _ => String::new(),
            };
            lines.push_str(&format!("{}\t{}{into}\n", op.name(), path.display()));
        }
        std::fs::write(&plan, lines).unwrap();
        let ran = spawn_argv(&confined);
        let kernel = parse(&text(&ran.stdout));
        assert!(
            !kernel.is_empty() || answers.is_empty(),
            "model-probe printed nothing: {}\n{}",
            text(&ran.stderr),
            text(&ran.stdout)
        );
        let outcome = self.compare(&base, &answers, &kernel, &confined);
        // A thousand cases are a lot of small files: each goes when it is done.
        let _ = std::fs::remove_dir_all(&base);
        let _ = std::fs::remove_file(&plan);
        outcome
    }

    /// Compares each answer; a guarantee the model finds missing must be reported so.
    fn compare(
        &self,
        base: &Path,
        answers: &[(Op, PathBuf, Answer)],
        kernel: &HashMap<(String, PathBuf), String>,
        confined: &serde_json::Value,
    ) -> Outcome {
        let mut totals = Totals::default();
        let mut disagreements = Vec::new();
        // What a rename moved for good: nothing there is where the tree says any more.
        let mut gone: Vec<&Path> = Vec::new();
        for (op, path, answer) in answers {
            let into = match op {
                Op::Rename(d) | Op::Link(d) => Some(d.as_path()),
                _ => None,
            };
            if gone
                .iter()
                .any(|g| path.starts_with(g) || into.is_some_and(|d| d.starts_with(g)))
            {
                continue;
            }
            let mut got = kernel
                .get(&(op.name().to_string(), path.clone()))
                .cloned()
                .unwrap_or_else(|| "no answer".into());
            if got.starts_with("ok-unrestored") {
                gone.push(path);
                got = "ok".into();
            }
            let agrees = match (got.as_str(), answer.refusal()) {
                ("ok", None) => answer.allowed(),
                (e, Some(r)) => e
                    .strip_prefix('E')
                    .and_then(|n| n.parse::<i32>().ok())
                    .is_some_and(|n| r.errnos().contains(&n)),
                _ => false,
            };
            // The guarantee shown missing is not reported enforced, and the run as a
            // whole is reported partial.
            let status = answer.missing().map(|g| {
                (
                    g.name(),
                    confined["guarantees"][g.name()]["status"]
                        .as_str()
                        .unwrap_or("absent")
                        .to_string(),
                    confined["enforcement"]
                        .as_str()
                        .unwrap_or("absent")
                        .to_string(),
                )
            });
            let reported = status
                .as_ref()
                .is_none_or(|(_, s, e)| s != "enforced" && e == "partial");
            totals.compared += 1;
            if got == "ok" {
                totals.allowed += 1;
            } else {
                totals.denied += 1;
            }
            if !agrees || !reported {
                disagreements.push(Disagreement {
                    op: op.name().to_string(),
                    path: relative(base, path),
                    into: match op {
                        Op::Rename(d) | Op::Link(d) => Some(relative(base, d)),
                        _ => None,
                    },
                    kernel: got,
                    model: if reported {
                        answer.to_string()
                    } else {
                        let (g, s, e) = status.unwrap_or_default();
                        format!("{answer}, but confine reports {g} {s}, enforcement {e}")
                    },
                });
            }
        }
        Outcome::Ran(Report {
            totals,
            disagreements,
        })
    }

    /// Whether stockade's rules refuse this policy: a hidden path holding the workspace
    /// or a writable root; or, without the namespace stage, one inside a writable root
    /// (only a mount keeps a command from renaming it out of hiding).
    fn refusal_predicted(&self, base: &Path) -> bool {
        let canonical = |rel: &str| abs(base, rel).canonicalize().ok();
        let mut roots: Vec<PathBuf> = vec![abs(base, &self.workspace)];
        roots.extend(self.writable.iter().map(|w| abs(base, w)));
        let hidden: Vec<PathBuf> = self.hide.iter().filter_map(|h| canonical(h)).collect();
        let holds_root = hidden
            .iter()
            .any(|h| roots.iter().any(|r| r.starts_with(h)));
        let in_root_unstaged = self.mode == "workspace-write"
            && !self.stage
            && hidden
                .iter()
                .any(|h| roots.iter().any(|r| h.starts_with(r)));
        holds_root || in_root_unstaged
    }

    /// The case as shell commands and flags, and the disagreement.
    pub fn reproduction(&self, fx: &Harness, d: Option<&Disagreement>) -> String {
        let base = Case::base(fx, 0);
        let mut s = format!("seed {}; in an empty directory B:\n", self.seed);
        for (p, e) in &self.entries {
            let p = if p.is_empty() { ".".into() } else { p.clone() };
            s.push_str(&match e {
                Entry::Dir => format!("  mkdir -p B/{p}\n"),
                Entry::File => {
                    format!("  printf '#!/bin/sh\\nexit 7\\n' > B/{p}; chmod 755 B/{p}\n")
                }
                Entry::Link(to) => format!("  ln -s B/{to} B/{p}\n"),
                Entry::Device => format!("  mknod B/{p} c 1 3\n"),
            });
        }
        let flags = self.flags(&base).join(" ");
        let flags = flags.replace(&base.display().to_string(), "B");
        s.push_str(&format!("  stockade run {flags} -- model-probe PLAN\n"));
        if let Some(d) = d {
            let into = d
                .into
                .as_deref()
                .map(|i| format!(" into B/{i}"))
                .unwrap_or_default();
            s.push_str(&format!(
                "  {} B/{}{into}: the kernel answers {}, the model says {}\n",
                d.op, d.path, d.kernel, d.model
            ));
        }
        s
    }
}

fn relative(base: &Path, p: &Path) -> String {
    p.strip_prefix(base)
        .map(|r| r.display().to_string())
        .unwrap_or_else(|_| p.display().to_string())
}

/// The policy and kernel facts of the launch request a ConfinedArgv names; for
/// danger-full-access, which names none (its policy is made from the mode alone), the
/// mode's policy resolved here and no kernel facts (the model asks none of an unconfined
/// run).
fn read_request(
    argv: &[String],
    confined: &serde_json::Value,
    base: &Path,
) -> (Policy, KernelFacts) {
    match argv.iter().position(|a| a == "--request") {
        Some(at) => {
            let r = LaunchRequest::decode(&std::fs::read(&argv[at + 1]).unwrap()).unwrap();
            (r.policy, r.promised)
        }
        None => {
            assert_eq!(confined["mode"], "danger-full-access", "{confined}");
            let policy = PolicyRequest::new(Mode::DangerFullAccess)
                .resolve(base, None, &Default::default())
                .expect("the unconfined mode's policy resolves");
            let promised = KernelFacts {
                landlock_abi: 0,
                seccomp: false,
                namespaces: false,
                supervisor: false,
                supervisor_writes: false,
            };
            (policy, promised)
        }
    }
}

/// The probe's lines, by (operation, path).
fn parse(out: &str) -> HashMap<(String, PathBuf), String> {
    out.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f.len() == 4).then(|| ((f[0].to_string(), PathBuf::from(f[1])), f[3].to_string()))
        })
        .collect()
}
