//! `stockade probe` and the `guarantees` object of ConfinedArgv: the kernel facts, and
//! per mode and policy which guarantees are enforced, checked against this machine
//! (Landlock ABI 7, seccomp) and against the same machine with Landlock masked.

mod support;
use serde_json::Value;
use std::process::{Command, Stdio};
use support::*;

const GUARANTEES: [&str; 14] = [
    "filesystemWrites",
    "refer",
    "truncate",
    "deviceIoctl",
    "network",
    "unixSockets",
    "signals",
    "abstractSockets",
    "setidAndXattrs",
    "processes",
    "ipc",
    "syscallFilter",
    "capabilities",
    "fds",
];

fn probe_json(cmd: &mut Command) -> Value {
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    assert_code(&out, 0);
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("probe --json prints JSON")
}

#[test]
fn probe_json_reports_this_kernel_and_full_enforcement() {
    let p = probe_json(Command::new(stockade_bin()).args(["probe", "--json"]));
    let k = &p["kernel"];
    assert!(k["landlockAbi"].as_u64().unwrap() >= 6, "{k}");
    assert_eq!(k["seccomp"], true);
    assert_eq!(k["architecture"], std::env::consts::ARCH);
    assert!(k["userNamespaces"].is_boolean());
    let tiocsti = std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti")
        .map(|s| Value::Bool(s.trim() != "0"))
        .unwrap_or(Value::Null);
    assert_eq!(k["legacyTiocsti"], tiocsti);
    assert!(!k["release"].as_str().unwrap().is_empty());
    assert_eq!(p["testedLandlockAbi"], 7);
    // Workspace-write holds metadata outside the writable roots with the namespace stage
    // or, where it cannot run, the runner's supervisor: full where the stage can run
    // (this machine), partial where it cannot (protected paths need it).
    let ww = &p["modes"]["workspace-write"];
    let staged = k["namespaces"]["available"] == true;
    assert_eq!(ww["verdict"], if staged { "full" } else { "partial" });
    let held = staged || k["seccompNotify"] == true;
    assert_eq!(
        ww["guarantees"]["metadata"]["status"],
        if held { "enforced" } else { "unavailable" }
    );
    assert_eq!(
        ww["guarantees"]["metadata"]["needs"],
        "namespace-stage or seccomp-notify"
    );
    assert_eq!(ww["guarantees"]["metadata"]["required"], false);
    let ro = &p["modes"]["read-only"];
    assert_eq!(ro["verdict"], "full");
    assert_eq!(ro["guarantees"]["metadata"]["status"], "enforced");
    for mode in ["read-only", "workspace-write"] {
        let m = &p["modes"][mode];
        for g in GUARANTEES {
            assert_eq!(m["guarantees"][g]["status"], "enforced", "{mode} {g}");
        }
        assert_eq!(m["guarantees"]["network"]["needs"], "seccomp");
        assert_eq!(m["guarantees"]["signals"]["needs"], "landlock-abi-6");
        assert_eq!(m["guarantees"]["signals"]["required"], false);
        assert_eq!(m["guarantees"]["network"]["required"], true);
    }
    assert_eq!(p["modes"]["danger-full-access"]["verdict"], "unconfined");
}

#[test]
fn probe_without_landlock_says_the_confined_modes_are_unavailable() {
    let p = probe_json(
        Command::new(bin("no-landlock"))
            .arg(stockade_bin())
            .args(["probe", "--json"]),
    );
    assert_eq!(p["kernel"]["landlockAbi"], 0);
    for mode in ["read-only", "workspace-write"] {
        let m = &p["modes"][mode];
        assert_eq!(m["verdict"], "unavailable");
        assert_eq!(m["guarantees"]["filesystemWrites"]["status"], "unavailable");
        // What needs only seccomp is still there.
        assert_eq!(m["guarantees"]["syscallFilter"]["status"], "enforced");
    }
    assert_eq!(p["modes"]["danger-full-access"]["verdict"], "unconfined");
}

#[test]
fn probe_table_names_every_guarantee() {
    let out = Command::new(stockade_bin())
        .arg("probe")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_code(&out, 0);
    let t = text(&out.stdout);
    assert!(t.contains("landlock ABI"), "{t}");
    assert!(t.contains("legacy TIOCSTI"), "{t}");
    for g in GUARANTEES {
        let row = t
            .lines()
            .find(|l| l.starts_with(g))
            .unwrap_or_else(|| panic!("{g}: {t}"));
        assert_eq!(row.matches("enforced").count(), 2, "{row}");
    }
    assert!(
        t.lines()
            .any(|l| l.starts_with("enforcement") && l.contains("full"))
    );
}

#[test]
fn confined_argv_names_each_guarantee_and_both_denial_dialects() {
    let fx = Fixture::new();
    let c = fx.confine(&["--mode", "read-only", "--", "true"]);
    assert_eq!(c["enforcement"], "full");
    assert_eq!(
        c["denialSignatures"],
        serde_json::json!(["permission denied"])
    );
    for g in GUARANTEES {
        assert_eq!(c["guarantees"][g]["status"], "enforced", "{g}");
        assert!(c["guarantees"][g]["needs"].is_string());
    }
    // Flags that lift a restriction turn its guarantee into not-requested.
    let c = fx.confine(&["--network", "allow", "--allow-unix-sockets", "--", "true"]);
    assert_eq!(c["guarantees"]["network"]["status"], "not-requested");
    assert_eq!(c["guarantees"]["unixSockets"]["status"], "not-requested");
    assert_eq!(c["guarantees"]["syscallFilter"]["status"], "enforced");
    assert_eq!(c["enforcement"], "full"); // --no-stage: metadata held by the supervisor
    // TCP port rules need Landlock ABI 4.
    let c = fx.confine(&["--allow-tcp-connect", "443", "--", "true"]);
    assert_eq!(c["guarantees"]["network"]["needs"], "landlock-abi-4");
    assert_eq!(c["guarantees"]["network"]["status"], "enforced");
    // danger-full-access has none.
    let c = fx.confine(&["--mode", "danger-full-access", "--", "true"]);
    assert!(c.get("guarantees").is_none(), "{c}");
    for dir in fx.leftover_requests() {
        std::fs::remove_dir_all(dir).unwrap();
    }
}

#[test]
fn a_request_spawned_where_the_kernel_gives_less_is_refused() {
    // Confined on the real kernel, then spawned where Landlock is missing: the runner
    // judges what it achieved and refuses; the command never runs.
    let fx = Fixture::new();
    let marker = fx.outside.join("ran");
    let c = fx.confine(&["--", "sh", "-c", &format!("touch {}", marker.display())]);
    let argv = confined_argv(&c);
    let out = Command::new(bin("no-landlock"))
        .args(&argv)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_code(&out, 125);
    let line = runner_failure_line(&out);
    assert!(line.contains("landlock"), "{line}");
    assert!(!marker.exists());
}

#[test]
fn bad_hardening_flags_are_refused_and_run_nothing() {
    let fx = Fixture::new();
    let marker = fx.outside.join("ran");
    let touch = format!("touch {}", marker.display());
    for flags in [
        &["--network", "sometimes"][..],
        &["--allow-tcp-connect", "http"],
        &["--allow-tcp-connect", "0"],
        &["--allow-tcp-connect", "70000"],
        // Contradictory: with the network allowed every port is reachable already.
        &["--allow-tcp-connect", "443", "--network", "allow"],
        &["--keep-fd", "1"],
        &["--keep-fd", "-3"],
    ] {
        let out = fx
            .stockade(["run"])
            .args(flags)
            .args(["--", "sh", "-c", &touch])
            .output()
            .unwrap();
        assert_code(&out, 125);
        let err = text(&out.stderr);
        assert!(
            err.contains(flags[0]) || err.contains(flags[1]),
            "{flags:?}: {err}"
        );
    }
    assert!(!marker.exists());
}
