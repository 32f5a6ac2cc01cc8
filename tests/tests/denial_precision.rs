//! The measurement: on 30 commands stockade refuses and 30 it does not (failures among
//! them that print "Permission denied" or fail for Unix's own reasons), how often
//! `sandbox.denied` of `stockade run --json` is right. Precision is the share of
//! `denied: true` that were stockade's refusals, recall the share of stockade's refusals
//! that said `denied: true`, without the namespace stage and with it. Both are printed
//! (`cargo test --test denial_precision -- --nocapture`); both must be 100%, but for
//! `kill 1` as root where Landlock's audit records cannot be read (only they name it: the
//! second test reads them) (bench/denial-precision.md records a run).

mod support;
use support::*;

/// A case: the flags before `--`, the bash script, and whether stockade refuses it.
struct Case {
    flags: Vec<String>,
    script: String,
    refused: bool,
    /// Refused by stockade when run as root only (Unix refuses an ordinary user first).
    root_refused: bool,
    /// Named only by Landlock's audit records (its line says what Unix says too).
    audit_only: bool,
}

fn case(flags: &[&str], script: &str, refused: bool) -> Case {
    Case {
        flags: flags.iter().map(|f| f.to_string()).collect(),
        script: script.to_string(),
        refused,
        root_refused: false,
        audit_only: false,
    }
}

/// A signal to pid 1: Unix refuses an ordinary user (`EPERM` before any sandbox is
/// asked); root it allows, and then Landlock's signal scope refuses it, which only its
/// audit record says (the line's `Operation not permitted` is Unix's word too).
fn signal_refused_as_root(script: &str) -> Case {
    Case {
        audit_only: true,
        ..refused_as_root(script)
    }
}

/// Refused by Unix for an ordinary user, by stockade for root.
fn refused_as_root(script: &str) -> Case {
    Case {
        root_refused: true,
        ..case(&[], script, false)
    }
}

/// 30 commands a policy refuses, each failing because of it (paths the invoking user
/// may write without stockade, so the refusal is the policy's for root and others).
fn refusing(fx: &Fixture, home: &str, staged: bool) -> Vec<Case> {
    let out = fx.outside.display().to_string();
    let ro = ["--mode", "read-only"];
    let mut v = vec![
        case(&[], &format!("touch {out}/a"), true),
        case(&[], &format!("echo x > {out}/b"), true),
        case(&[], &format!("echo x >> {out}/existing"), true),
        case(&[], &format!("mkdir {out}/d"), true),
        case(&[], &format!("mkdir -p {out}/e/f"), true),
        case(&[], &format!("cp /etc/hostname {out}/c"), true),
        case(&[], &format!("ln -s /etc/hostname {out}/l"), true),
        case(&[], &format!("rm {out}/existing"), true),
        case(&[], &format!("mv {out}/existing {out}/moved"), true),
        case(&[], &format!("truncate -s 0 {out}/existing"), true),
        case(&[], &format!("echo x | tee {out}/t"), true),
        case(&[], &format!("python3 -c \"open('{out}/p', 'w')\""), true),
        // The line names `rel` only: the script's `cd` says where it was.
        case(&[], &format!("cd {out} && touch rel"), true),
        case(&[], &format!("echo ok; touch {out}/late"), true),
        case(&ro, "touch ro-a", true),
        case(&ro, "echo x > ro-b", true),
        case(&ro, "mkdir ro-d", true),
        case(&ro, &format!("echo x > {out}/ro-c"), true),
        case(&[], &format!("cat {home}/.ssh/id_test"), true),
        // Without the stage the hidden directory can still be listed: its files not read.
        if staged {
            case(&[], &format!("ls {home}/.ssh"), true)
        } else {
            case(&[], &format!("head -c1 {home}/.ssh/id_test"), true)
        },
        case(&[], &format!("cp {home}/.ssh/id_test key"), true),
        case(&[], "curl -sS --max-time 5 http://example.com/", true),
        case(
            &[],
            "curl -sS --max-time 5 https://registry.npmjs.org/",
            true,
        ),
        // Under the stage the command's loopback is its own: the address outside is
        // unreachable there (without it, Landlock refuses the port).
        if staged {
            case(&[], "echo x > /dev/tcp/192.0.2.1/80", true)
        } else {
            case(&[], "echo x > /dev/tcp/127.0.0.1/9", true)
        },
        case(&[], "curl -sS --max-time 5 http://192.0.2.1:81/", true),
        case(
            &["--allow-domain", "example.org"],
            "curl -sfS --max-time 5 http://example.com/",
            true,
        ),
        case(
            &["--allow-domain", "example.org"],
            "curl -sfS --max-time 5 http://blocked.test:8080/",
            true,
        ),
        case(&[], &format!("echo x > {out}/../outside-sibling"), true),
    ];
    if staged {
        v.push(case(&[], "echo evil >> .envrc", true));
        v.push(case(&[], "echo evil > .git/hooks/pre-commit", true));
    } else {
        // Refusals whose lines name no path: a new terminal, a socket.
        v.push(case(&[], "script -qc true /dev/null", true));
        v.push(case(
            &[],
            "python3 -c 'import socket; socket.socket()'",
            true,
        ));
    }
    v
}

/// 30 commands the policy lets through: successes, and failures that are not its
/// refusals (the harness's signature matches several of them).
fn not_refusing(fx: &Fixture, staged: bool) -> Vec<Case> {
    let ws = fx.ws.display().to_string();
    vec![
        case(&[], "true", false),
        case(&[], "false", false),
        case(&[], "exit 3", false),
        case(&[], "ls", false),
        case(&[], "echo x > inside", false),
        case(&[], "mkdir -p sub/dir && touch sub/dir/f", false),
        case(
            &[],
            "touch /tmp/stockade-precision-$$ && rm /tmp/stockade-precision-$$",
            false,
        ),
        case(&[], "cat /etc/hostname", false),
        case(&[], "echo x > /dev/null", false),
        case(&[], "ls /nonexistent-stockade", false),
        case(&[], "cat missing-file", false),
        signal_refused_as_root("kill -TERM 1"),
        case(&[], "touch owned && chown 12345 owned", false),
        case(&[], "echo 'Permission denied' >&2; exit 1", false),
        case(
            &[],
            "echo 'sh: 1: cannot create inside: Permission denied' >&2; exit 1",
            false,
        ),
        case(
            &[],
            &format!("echo \"bash: {ws}/x: Permission denied\" >&2; exit 2"),
            false,
        ),
        case(
            &[],
            "echo 'cat: /dev/null: Permission denied' >&2; exit 1",
            false,
        ),
        case(
            &[],
            "echo 'touch: cannot touch /tmp/x: Read-only file system' >&2; exit 1",
            false,
        ),
        case(&[], "grep -r needle /nonexistent-stockade", false),
        // Raising a priority: Unix refuses an ordinary user, the sandbox root.
        refused_as_root("nice -n -5 false"),
        case(&[], "no-such-program-stockade", false),
        case(&[], "ls /root >/dev/null 2>&1; true", false),
        case(&["--mode", "read-only"], "cat /etc/hostname", false),
        case(&["--mode", "read-only"], "ls -la", false),
        // A relative write after `cd`: Unix refuses an ordinary user in `/etc` anyway.
        refused_as_root("cd /etc && touch stockade-precision-rel"),
        case(&["--network", "allow"], "echo x > inside2", false),
        // A line naming a relative path the policy allows where the script went.
        case(
            &[],
            "mkdir -p sub && cd sub && echo \"touch: cannot touch 'rel': Read-only file system\" >&2; exit 1",
            false,
        ),
        case(
            &[],
            "echo 'curl: (6) Could not resolve host:' >&2; exit 6",
            false,
        ),
        // The command's own loopback under the stage: nothing listens, its own failure.
        if staged {
            case(&[], "echo x > /dev/tcp/127.0.0.1/9", false)
        } else {
            case(&[], "sleep 0.1; exit 1", false)
        },
        case(&[], "test -e /etc/hostname", false),
    ]
}

#[test]
fn precision_and_recall_of_denied_are_100_percent_but_kill_1_as_root_without_audit() {
    // Audit as the machine has it (held, so the test below does not change it meanwhile).
    let (audit, _lock) = stockade_tests::audit::held().unwrap();
    println!("audit enabled on this machine: {audit:?}");
    // Without the stage and with it (where namespaces can be had: else both are the
    // same, and the line printed says `stage false` twice).
    let wrong: Vec<String> = [Fixture::new(), Fixture::staged()]
        .into_iter()
        .flat_map(|fx| measure(fx, false))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn as_root_with_landlock_s_audit_records_precision_and_recall_are_100_percent() {
    let name = "as_root_with_landlock_s_audit_records_precision_and_recall_are_100_percent";
    if !stockade_tests::is_root() {
        eprintln!(
            "SKIPPED (needs root: CAP_AUDIT_READ, and turning audit on for the test): {name}"
        );
        return;
    }
    let abi = std::process::Command::new(stockade_bin())
        .args(["probe", "--json"])
        .output()
        .ok()
        .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
        .and_then(|v| v["kernel"]["landlockAbi"].as_u64());
    if abi.is_some_and(|a| a < 7) {
        eprintln!("SKIPPED (Landlock ABI below 7 records nothing after execve): {name}");
        return;
    }
    let _on = stockade_tests::audit::on().unwrap();
    // With the stage, its read-only mounts refuse before Landlock is asked: no record
    // names the relative write there; its line and the script's `cd` do.
    let wrong: Vec<String> = [Fixture::new(), Fixture::staged()]
        .into_iter()
        .flat_map(|fx| measure(fx, true))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Runs the 60 cases in `fx`, prints precision and recall: the cases judged wrong. With
/// `audit` (root, audit on), every run must have read its audit records.
fn measure(fx: Fixture, audit: bool) -> Vec<String> {
    let home = fx.root.join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_test"), "key\n").unwrap();
    std::fs::write(fx.outside.join("existing"), "x\n").unwrap();
    std::fs::write(fx.ws.join(".envrc"), "export A=1\n").unwrap();
    std::fs::create_dir_all(fx.ws.join(".git/hooks")).unwrap();
    std::fs::write(fx.ws.join(".git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
    let staged = confined_argv(&fx.confine(&["--", "true"]))
        .iter()
        .any(|a| a == "__stage");
    let home_s = home.display().to_string();
    let mut cases = refusing(&fx, &home_s, staged);
    assert_eq!(cases.len(), 30);
    let others = not_refusing(&fx, staged);
    assert_eq!(others.len(), 30);
    cases.extend(others);

    let (mut tp, mut fp, mut fn_, mut tn) = (0, 0, 0, 0);
    // The harness's own rule on the same runs, for comparison: a failed exit with one of
    // the ConfinedArgv's signatures anywhere in stderr.
    let signatures = fx.confine(&["--", "true"])["denialSignatures"].clone();
    let signatures: Vec<String> = serde_json::from_value(signatures).unwrap();
    let (mut htp, mut hfp) = (0, 0);
    let mut wrong = Vec::new();
    for c in &cases {
        let mut args = vec!["run".to_string(), "--json".to_string()];
        args.extend(c.flags.iter().cloned());
        args.extend(["--", "bash", "-c", &c.script].map(String::from));
        let (_, v) = run_json(fx.stockade(&args).env("HOME", &home));
        let denied = v["sandbox"]["denied"] == true;
        let as_root = c.root_refused && nix_uid() == 0;
        let refused = c.refused || as_root;
        let stderr = v["stderr"]["text"]
            .as_str()
            .unwrap_or_default()
            .to_lowercase();
        let harness = v["exitCode"] != 0 && signatures.iter().any(|s| stderr.contains(s.as_str()));
        match (refused, harness) {
            (true, true) => htp += 1,
            (false, true) => hfp += 1,
            _ => {}
        }
        match (refused, denied) {
            (true, true) => tp += 1,
            (false, false) => tn += 1,
            (false, true) => fp += 1,
            (true, false) => fn_ += 1,
        }
        // `kill 1` as root is named only by the records read, with the stage too
        // (Landlock's scope refuses the stage's init, the runner's parent, and records
        // it).
        let excused = as_root && c.audit_only && !audit;
        if audit && v["attribution"]["evidence"] != "audit" {
            wrong.push(format!(
                "{}: evidence not audit: {}",
                c.script, v["attribution"]
            ));
        }
        if refused != denied && (!excused || denied) {
            wrong.push(format!(
                "{} {:?}: denied {denied}, stderr {:?}, denials {}",
                c.script, c.flags, v["stderr"]["text"], v["denials"]
            ));
        }
    }
    let precision = 100.0 * tp as f64 / (tp + fp).max(1) as f64;
    let recall = 100.0 * tp as f64 / (tp + fn_).max(1) as f64;
    println!(
        "denial precision {precision:.1}% recall {recall:.1}% (tp {tp}, fp {fp}, fn {fn_}, tn {tn}; uid {}, stage {staged}, audit records read {audit})",
        nix_uid()
    );
    println!(
        "harness signature rule on the same runs: precision {:.1}% recall {:.1}% (tp {htp}, fp {hfp})",
        100.0 * htp as f64 / (htp + hfp).max(1) as f64,
        100.0 * htp as f64 / (tp + fn_).max(1) as f64
    );
    wrong
}

fn nix_uid() -> u32 {
    // SAFETY: getuid cannot fail and touches no memory.
    unsafe { libc::getuid() }
}
