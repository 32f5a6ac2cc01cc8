//! `stockade run` output: the `--json` document, bounded tails, spill files and their
//! caps, and live pass-through without `--json`.

mod support;
use std::os::unix::fs::PermissionsExt;
use support::*;

#[test]
fn the_json_document_parses_and_carries_every_field() {
    let fx = Fixture::new();
    let (out, json) = run_json(
        fx.stockade([
            "run",
            "--json",
            "--mode",
            "read-only",
            "--timeout",
            "2m",
            "--",
            "sh",
            "-c",
            // A write in the workspace, which read-only mode refuses: the policy's
            // refusal as root and as an ordinary user (a user's write to /etc is
            // refused by Unix anyway, no denial).
            "printf out; printf 'err\\n' >&2; echo x > refused-e2e; exit 3",
        ])
        .env("E2E_API_TOKEN", "hunter2"),
    );
    assert_code(&out, 3);
    // Nothing but the document on stdout; stockade adds no marker on stderr either.
    assert_eq!(text(&out.stderr), "");
    assert_eq!(json["exitCode"], 3);
    assert_eq!(json["signal"], serde_json::Value::Null);
    assert_eq!(json["timedOut"], false);
    assert_eq!(json["aborted"], serde_json::Value::Null);
    assert!(json["durationMs"].is_u64());
    assert_eq!(json["timeoutMs"], 120_000);
    assert_eq!(json["stdout"]["text"], "out");
    assert_eq!(json["stdout"]["truncated"], false);
    assert_eq!(json["stdout"]["spillPath"], serde_json::Value::Null);
    let err = json["stderr"]["text"].as_str().unwrap();
    assert!(
        err.starts_with("err\n") && err.contains("Permission denied"),
        "{err}"
    );
    assert_eq!(json["sandbox"]["mode"], "read-only");
    assert_eq!(json["sandbox"]["denied"], true);
    assert_eq!(json["sandbox"]["enforcement"], "full");
    assert_eq!(json["sandbox"]["runnerFailed"], false);
    assert!(["cgroup", "subreaper"].contains(&json["containment"].as_str().unwrap()));
    let removed = json["envRemoved"].as_array().unwrap();
    assert!(removed.contains(&"E2E_API_TOKEN".into()));
    assert!(!text(&out.stdout).contains("hunter2"));
    assert_eq!(json["leftBehind"], serde_json::json!([]));

    // Positive control for `denied`: the same write where the mode allows it.
    let (out, json) =
        run_json(&mut fx.stockade(["run", "--json", "--", "sh", "-c", "echo x > inside; exit 3"]));
    assert_code(&out, 3);
    assert_eq!(json["sandbox"]["denied"], false);
    assert_eq!(json["timeoutMs"], serde_json::Value::Null);
}

fn spill_of(json: &serde_json::Value, stream: &str) -> Option<std::path::PathBuf> {
    json[stream]["spillPath"].as_str().map(Into::into)
}

#[test]
fn output_past_max_output_is_cut_to_its_tail_with_a_complete_private_spill_file() {
    let fx = Fixture::new();
    // 100000 numbered lines on each stream: about 590 kB each.
    let (out, json) = run_json(&mut fx.stockade([
        "run",
        "--json",
        "--max-output",
        "1000",
        "--",
        "sh",
        "-c",
        "seq 1 100000; seq 1 100000 >&2",
    ]));
    assert_code(&out, 0);
    let full: String = (1..=100_000).map(|n| format!("{n}\n")).collect();
    for stream in ["stdout", "stderr"] {
        let tail = json[stream]["text"].as_str().unwrap();
        assert_eq!(json[stream]["truncated"], true);
        assert_eq!(tail.len(), 1000);
        assert!(full.ends_with(tail) && tail.ends_with("99999\n100000\n"));
        let spill = spill_of(&json, stream).expect("a spill file");
        assert_eq!(std::fs::read_to_string(&spill).unwrap(), full, "{stream}");
        // Its size is in the result.
        assert_eq!(json[stream]["spillBytes"], full.len(), "{stream}");
        let mode = std::fs::metadata(&spill).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir = spill.parent().unwrap();
        let mode = std::fs::metadata(dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        // Spill files live in the private runtime area, not in the workspace.
        assert!(spill.starts_with(&fx.runtime), "{}", spill.display());
    }

    // Positive control: output within the limit is whole and spills nothing.
    let (_, json) = run_json(&mut fx.stockade([
        "run",
        "--json",
        "--max-output",
        "1000",
        "--",
        "seq",
        "1",
        "10",
    ]));
    assert_eq!(json["stdout"]["truncated"], false);
    assert_eq!(spill_of(&json, "stdout"), None);
    assert_eq!(json["stdout"]["spillBytes"], serde_json::Value::Null);
    assert_eq!(json["stdout"]["text"], "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n");
}

#[test]
fn output_past_max_spill_keeps_only_the_tail_and_no_file() {
    let fx = Fixture::new();
    let (out, json) = run_json(&mut fx.stockade([
        "run",
        "--json",
        "--max-output",
        "100",
        "--max-spill",
        "10000",
        "--",
        "sh",
        "-c",
        "seq 1 100000; seq 1 10 >&2",
    ]));
    assert_code(&out, 0);
    assert_eq!(json["stdout"]["truncated"], true);
    assert_eq!(spill_of(&json, "stdout"), None);
    assert_eq!(json["stdout"]["spillBytes"], serde_json::Value::Null);
    assert!(
        json["stdout"]["text"]
            .as_str()
            .unwrap()
            .ends_with("100000\n")
    );
    // The other stream, under both limits, is unaffected.
    assert_eq!(json["stderr"]["truncated"], false);
    assert_eq!(spill_of(&json, "stderr"), None);
    // The dropped file and its directory are gone.
    assert_eq!(fx.leftover_requests(), Vec::<std::path::PathBuf>::new());
}

#[test]
fn memory_stays_bounded_whatever_the_command_prints() {
    let fx = Fixture::new();
    // 256 MiB on stdout (past the 64 MiB default spill cap) and 16 MiB on stderr.
    let (out, rss) = output_with_rusage(&mut fx.stockade([
        "run",
        "--json",
        "--",
        "sh",
        "-c",
        "head -c 268435456 /dev/zero; head -c 16777216 /dev/zero >&2; echo end",
    ]));
    assert_code(&out, 0);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["stdout"]["truncated"], true);
    assert_eq!(spill_of(&json, "stdout"), None, "past --max-spill");
    let tail = json["stdout"]["text"].as_str().unwrap();
    assert_eq!(tail.len(), 64_000);
    assert!(tail.ends_with("\0end\n"));
    let spill = spill_of(&json, "stderr").expect("stderr spilled");
    assert_eq!(std::fs::metadata(&spill).unwrap().len(), 16 * 1024 * 1024);
    // The launcher (and what it waited for) stayed far below what the command printed:
    // measured for that one process, whatever other tests in this file do.
    assert!(rss < 32 * 1024, "stockade run grew to {rss} KiB");
}

#[test]
fn text_is_utf8_cut_on_a_character_boundary_with_invalid_bytes_replaced() {
    let fx = Fixture::new();
    // "é" is two bytes: a 7-byte tail of "ééééé" starts in the middle of one.
    let (_, json) = run_json(&mut fx.stockade([
        "run",
        "--json",
        "--max-output",
        "7",
        "--",
        "sh",
        "-c",
        "printf 'ééééé'; printf 'a\\377b' >&2",
    ]));
    assert_eq!(json["stdout"]["text"], "ééé");
    assert_eq!(json["stdout"]["truncated"], true);
    assert_eq!(json["stderr"]["text"], "a\u{fffd}b");
}

#[test]
fn without_json_both_streams_pass_through_whole() {
    let fx = Fixture::new();
    // Far past the kept stderr tail: pass-through is not bounded by it.
    let out = fx.run_sh(
        "workspace-write",
        "seq 1 200000; seq 1 200000 >&2; echo denied-not >&2",
    );
    assert_code(&out, 0);
    let full: String = (1..=200_000).map(|n| format!("{n}\n")).collect();
    assert_eq!(text(&out.stdout), full);
    assert_eq!(text(&out.stderr), format!("{full}denied-not\n"));
}

/// A spill file that cannot be written (here a file-size limit on the launcher, as a
/// full disk would do it) is reported: `spillError` on the stream and an `[output not
/// kept: ...]` line on stderr, while the receipt's digest still covers every byte the
/// command wrote. Control: the same run without the limit keeps the spill file and says
/// nothing. The command lifts the limit for itself (only the launcher's writes fail).
#[test]
fn a_spill_that_cannot_be_written_is_reported_and_the_receipt_still_covers_every_byte() {
    let fx = Fixture::new();
    let all: String = (1..=150_000).map(|n| format!("{n}\n")).collect();
    for limited in [true, false] {
        let inner = fx.stockade([
            "run",
            "--json",
            "--max-output",
            "1000",
            "--",
            "sh",
            "-c",
            "ulimit -S -f unlimited; seq 1 150000",
        ]);
        let limit = if limited { "64" } else { "unlimited" };
        let mut cmd = std::process::Command::new("bash");
        cmd.args(["-c", &format!("ulimit -S -f {limit}; exec \"$@\""), "bash"])
            .arg(inner.get_program())
            .args(inner.get_args())
            .current_dir(&fx.ws)
            .stdin(std::process::Stdio::null());
        for (k, v) in inner.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        let (out, json) = run_json(&mut cmd);
        assert_code(&out, 0);
        let stdout = &json["stdout"];
        assert_eq!(stdout["truncated"], true);
        assert!(all.ends_with(stdout["text"].as_str().unwrap()));
        let receipt = &json["receipt"]["stdout"];
        assert_eq!(receipt["bytes"], all.len() as u64, "{json}");
        assert_eq!(
            receipt["sha256"],
            stockade_policy::digest::sha256_hex(all.as_bytes())
        );
        assert_eq!(receipt["complete"], true);
        let err = text(&out.stderr);
        if limited {
            assert_eq!(stdout["spillPath"], serde_json::Value::Null);
            let why = stdout["spillError"].as_str().expect("spillError");
            assert!(why.contains("File too large"), "{why}");
            assert_eq!(err, format!("[output not kept: stdout: {why}]\n"));
        } else {
            assert_eq!(stdout["spillError"], serde_json::Value::Null);
            let spill = spill_of(&json, "stdout").expect("a spill file");
            assert_eq!(std::fs::read_to_string(&spill).unwrap(), all);
            assert_eq!(err, "");
        }
        assert_eq!(json["stderr"]["spillError"], serde_json::Value::Null);
    }
    // As root, the issue's own case: the control directory's file system full (a small
    // tmpfs mounted over it, in a mount namespace of the test's own).
    if !stockade_tests::is_root() {
        eprintln!("SKIPPED (needs root): the spill on a full file system");
        return;
    }
    let inner = fx.stockade([
        "run",
        "--json",
        "--max-output",
        "1000",
        "--",
        "seq",
        "1",
        "150000",
    ]);
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg("mount -t tmpfs -o size=128k,mode=0700 tmpfs \"$0\" && exec \"$@\"")
        .arg(&fx.runtime)
        .arg(inner.get_program())
        .args(inner.get_args())
        .current_dir(&fx.ws)
        .stdin(std::process::Stdio::null());
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let (out, json) = run_json(&mut cmd);
    assert_code(&out, 0);
    let why = json["stdout"]["spillError"].as_str().expect("spillError");
    assert!(why.contains("No space left on device"), "{why}");
    assert_eq!(json["stdout"]["spillPath"], serde_json::Value::Null);
    assert_eq!(json["receipt"]["stdout"]["bytes"], all.len() as u64);
    assert_eq!(
        json["receipt"]["stdout"]["sha256"],
        stockade_policy::digest::sha256_hex(all.as_bytes())
    );
    assert_eq!(
        text(&out.stderr),
        format!("[output not kept: stdout: {why}]\n")
    );
}
