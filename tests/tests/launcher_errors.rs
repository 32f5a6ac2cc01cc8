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
