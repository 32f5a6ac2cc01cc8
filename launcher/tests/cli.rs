//! The launcher's own command line. (Also makes `cargo test --workspace` build the
//! `stockade` binary that the end-to-end tests in `tests/` run.)

use std::process::Command;

fn stockade() -> Command {
    Command::new(env!("CARGO_BIN_EXE_stockade"))
}

#[test]
fn version_and_help_exit_zero() {
    for flag in ["--version", "--help"] {
        let out = stockade().arg(flag).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{flag}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("stockade"));
    }
}

#[test]
fn unknown_flags_and_modes_are_named_and_exit_125_running_nothing() {
    let marker = std::env::temp_dir().join(format!("stockade-cli-marker-{}", std::process::id()));
    let touch = format!("touch {}", marker.display());
    let cases: [&[&str]; 4] = [
        &["run", "--bogus", "--", "sh", "-c", &touch],
        &["run", "--mode", "readonly", "--", "sh", "-c", &touch],
        &["confine", "--mode", "", "--", "sh", "-c", &touch],
        &["frobnicate"],
    ];
    for args in cases {
        let out = stockade().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(125), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        let named = ["--bogus", "readonly", "--mode", "frobnicate"];
        assert!(named.iter().any(|n| err.contains(n)), "{err}");
        assert!(out.stdout.is_empty());
    }
    assert!(!marker.exists(), "a refused invocation ran its command");
}
