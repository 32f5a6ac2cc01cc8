//! Failures of stockade itself go through one error path: exactly one `stockade: ` line
//! on stderr and exit 125, even when the failure is stockade's own stdout.

mod support;
use std::process::Stdio;
use support::*;

fn full() -> std::fs::File {
    std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap()
}

#[test]
fn a_stdout_that_cannot_be_written_is_one_line_and_exit_125() {
    let fx = Fixture::new();
    let confine = ["confine", "--mode", "read-only", "--", "true"];
    for args in [&["probe", "--json"][..], &["probe"], &confine] {
        // Control: with a working stdout the same command succeeds and prints.
        let ok = fx.stockade(args).output().unwrap();
        assert_code(&ok, 0);
        assert!(!ok.stdout.is_empty(), "{args:?}");
        assert!(ok.stderr.is_empty(), "{args:?}: {}", text(&ok.stderr));
        // /dev/full refuses every write with ENOSPC.
        let out = fx
            .stockade(args)
            .stdout(Stdio::from(full()))
            .output()
            .unwrap();
        assert_code(&out, 125);
        let line = launcher_failure_line(&out);
        assert!(line.contains("cannot write to stdout"), "{args:?}: {line}");
    }
    // The control's confine left its request for a spawn that never comes; the refused
    // one removed its own.
    assert_eq!(
        fx.leftover_requests().len(),
        1,
        "{:?}",
        fx.leftover_requests()
    );
}

#[test]
fn usage_errors_are_one_line_and_exit_125_and_run_nothing() {
    let fx = Fixture::new();
    let marker = fx.ws.join("ran");
    let touch = ["--", "touch", "ran"];
    // Control: the same command with well-formed flags runs.
    let ok = fx
        .stockade(["run", "--timeout", "1m"])
        .args(touch)
        .output()
        .unwrap();
    assert_code(&ok, 0);
    assert!(marker.exists());
    std::fs::remove_file(&marker).unwrap();
    for (args, want) in [
        (&["run", "--timeout", "10"][..], "--timeout"),
        (&["run", "--mode", "bogus"], "bogus"),
        (&["run", "--env", "=x"], "NAME=VALUE"),
        (&["run", "--no-such-flag"], "--no-such-flag"),
        (&["confine", "--keep-fd", "1"], "--keep-fd"),
    ] {
        let out = fx.stockade(args).args(touch).output().unwrap();
        assert_code(&out, 125);
        let line = launcher_failure_line(&out);
        assert!(line.contains(want), "{args:?}: {line}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(!marker.exists(), "{args:?} ran the command");
    }
    // A usage error without a command to run is one line too.
    let out = fx.stockade(["run"]).output().unwrap();
    assert_code(&out, 125);
    assert!(launcher_failure_line(&out).contains("usage: stockade run"));
}
