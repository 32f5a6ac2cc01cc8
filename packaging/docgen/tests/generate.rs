//! The generator writes every page and completion file. Being an integration test, it
//! also makes `cargo test --workspace` build the `stockade-docgen` binary that the
//! end-to-end packaging tests (`tests/tests/packaging.rs`) run.

#[test]
fn every_page_and_completion_is_written() {
    let out = std::env::temp_dir().join(format!("stockade-docgen-{}", std::process::id()));
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_stockade-docgen"))
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    for file in [
        "man/stockade.1",
        "man/stockade-run.1",
        "man/stockade-confine.1",
        "completions/stockade.bash",
        "completions/stockade.fish",
        "completions/_stockade",
    ] {
        let text = std::fs::read_to_string(out.join(file)).unwrap();
        assert!(!text.is_empty(), "{file}");
    }
    std::fs::remove_dir_all(&out).unwrap();
}
