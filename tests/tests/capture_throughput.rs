//! `stockade run --json` capturing output much larger than `--max-output`: the tail the
//! document carries and the spill file are exact whatever the cap, across the many
//! compactions of the launcher's tail buffer (it moves the newest bytes to its front
//! once per 256 KiB or more; see launcher/src/supervise/tail.rs). Throughput itself is
//! measured by bench/run, not here (no timing assertions).

mod support;
use support::*;

#[test]
fn tails_and_spill_files_are_exact_for_caps_around_the_buffer_slack() {
    let fx = Fixture::new();
    // 400000 numbered lines on each stream: about 2.7 MB each, so a tail buffer of any
    // of these caps compacts several times.
    let full: String = (1..=400_000).map(|n| format!("{n}\n")).collect();
    for cap in [64_000usize, 262_144, 300_000, 1_000_000] {
        let cap_arg = cap.to_string();
        let (out, json) = run_json(&mut fx.stockade([
            "run",
            "--json",
            "--max-output",
            &cap_arg,
            "--",
            "sh",
            "-c",
            "seq 1 400000; seq 1 400000 >&2",
        ]));
        assert_code(&out, 0);
        for stream in ["stdout", "stderr"] {
            let tail = json[stream]["text"].as_str().unwrap();
            assert_eq!(json[stream]["truncated"], true, "{stream} cap {cap}");
            assert_eq!(tail, &full[full.len() - cap..], "{stream} cap {cap}");
            let spill = json[stream]["spillPath"].as_str().expect("a spill file");
            assert_eq!(
                std::fs::read_to_string(spill).unwrap(),
                full,
                "{stream} cap {cap}"
            );
            std::fs::remove_file(spill).unwrap();
        }
    }

    // Positive control: the same stream within the cap is whole and spills nothing.
    let (out, json) = run_json(&mut fx.stockade([
        "run",
        "--json",
        "--max-output",
        "3000000",
        "--",
        "seq",
        "1",
        "400000",
    ]));
    assert_code(&out, 0);
    assert_eq!(json["stdout"]["truncated"], false);
    assert_eq!(json["stdout"]["spillPath"], serde_json::Value::Null);
    assert_eq!(json["stdout"]["text"].as_str().unwrap(), full);
}
