//! The runner's own command line. (Also makes `cargo test --workspace` build the runner
//! binary that the end-to-end tests in `tests/` run.)

use std::process::Command;

fn runner() -> Command {
    Command::new(env!("CARGO_BIN_EXE_stockade-runner"))
}

#[test]
fn version_prints_and_exits_zero() {
    let out = runner().arg("--version").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("stockade-runner "));
    assert!(out.stderr.is_empty());
}

#[test]
fn malformed_invocations_are_runner_failures_with_a_usage_line() {
    for args in [
        &[][..],
        &["--bogus"],
        &["--request"],
        &["--request", "a", "b"],
        &["run"],
    ] {
        let out = runner().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(125), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("stockade-runner: "), "{err}");
        assert!(
            err.contains("usage: stockade-runner --request FILE"),
            "{err}"
        );
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn a_failed_write_to_stdout_is_a_runner_failure_with_one_line() {
    // Control: the same command with a working stdout.
    let out = runner().arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stderr.is_empty());
    for args in [&["--version"][..], &["--help"]] {
        let full = std::fs::File::create("/dev/full").unwrap();
        let out = runner().args(args).stdout(full).output().unwrap();
        assert_eq!(out.status.code(), Some(125), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("stockade-runner: cannot write to standard output: "),
            "{err}"
        );
    }
}
