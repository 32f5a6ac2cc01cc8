//! Resource limits on `stockade run` (`--max-cpu-time`, `--max-file-size`,
//! `--max-memory`, `--max-processes`): each holds, the one hit is named where it can be
//! told, and the same command within the limit runs. Limits are far below the machine's.

mod support;
use support::*;

fn run_json_args(
    fx: &Fixture,
    args: &[&str],
    script: &str,
) -> (std::process::Output, serde_json::Value) {
    let mut cmd = fx.stockade(["run", "--json"]);
    cmd.args(args).args(["--", "sh", "-c", script]);
    run_json(&mut cmd)
}

#[test]
fn a_cpu_hog_ends_with_its_verdict_with_and_without_the_stage() {
    for staged in [false, true] {
        let fx = if staged {
            Fixture::staged()
        } else {
            Fixture::new()
        };
        let (_, json) = run_json_args(
            &fx,
            &["--max-cpu-time", "1s"],
            "exec sh -c 'while :; do :; done'",
        );
        assert_eq!(json["signal"], "SIGXCPU", "staged {staged}: {json}");
        assert_eq!(json["limits"]["exceeded"], "cpu-time");
        assert_eq!(json["limits"]["held"][0]["by"], "rlimit-cpu");
        // Within the limit: the same kind of loop, bounded, runs to its end.
        let (out, json) = run_json_args(
            &fx,
            &["--max-cpu-time", "30s"],
            "i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done",
        );
        assert_code(&out, 0);
        assert_eq!(json["limits"]["exceeded"], serde_json::Value::Null);
    }
}

#[test]
fn a_file_past_the_size_limit_is_cut_and_named() {
    let fx = Fixture::new();
    let (_, json) = run_json_args(
        &fx,
        &["--max-file-size", "1M"],
        "exec head -c 2M /dev/zero > big",
    );
    assert_eq!(json["signal"], "SIGXFSZ", "{json}");
    assert_eq!(json["limits"]["exceeded"], "file-size");
    assert_eq!(std::fs::metadata(fx.ws.join("big")).unwrap().len(), 1 << 20);
    let (out, json) = run_json_args(
        &fx,
        &["--max-file-size", "1M"],
        "exec head -c 512K /dev/zero > small",
    );
    assert_code(&out, 0);
    assert_eq!(json["limits"]["exceeded"], serde_json::Value::Null);
    assert_eq!(
        std::fs::metadata(fx.ws.join("small")).unwrap().len(),
        512 << 10
    );
}

#[test]
fn a_memory_hog_fails_while_a_modest_allocation_runs() {
    let fx = Fixture::new();
    let hog = "exec perl -e '$x = q(a) x (1024 * 1024 * 1024); print length($x)'";
    let (out, json) = run_json_args(&fx, &["--max-memory", "256M"], hog);
    assert_ne!(out.status.code(), Some(0), "{json}");
    let by = json["limits"]["held"][0]["by"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(by == "cgroup-memory" || by == "rlimit-as", "{by}");
    if by == "cgroup-memory" {
        assert_eq!(json["limits"]["exceeded"], "memory");
    }
    let modest = "exec perl -e '$x = q(a) x (16 * 1024 * 1024); print length($x)'";
    let (out, json) = run_json_args(&fx, &["--max-memory", "256M"], modest);
    assert_code(&out, 0);
    assert_eq!(json["stdout"]["text"], "16777216");
}

#[test]
fn a_fork_bomb_is_held_or_the_limit_is_refused_before_anything_runs() {
    let fx = Fixture::new();
    // Forks until refused (at most 300), prints how many it got, leaves them sleeping
    // (stockade ends them).
    let bomb = "exec perl -e 'my $n = 0; for (1..300) { my $p = fork; last unless defined $p; if (!$p) { sleep 60; exit } $n++ } print $n'";
    let mut cmd = fx.stockade([
        "run",
        "--json",
        "--max-processes",
        "64",
        "--",
        "sh",
        "-c",
        bomb,
    ]);
    let out = cmd.output().unwrap();
    let held_by_cgroup = out.status.success();
    if !held_by_cgroup && stockade_tests::is_root() {
        // Root without a pids controller: RLIMIT_NPROC does not bind root, so nothing
        // can hold the limit, and nothing runs.
        assert_code(&out, 125);
        assert!(
            text(&out.stderr).contains("--max-processes cannot be held here"),
            "{}",
            text(&out.stderr)
        );
        return;
    }
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let forked: u32 = json["stdout"]["text"]
        .as_str()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(forked < 300 && forked > 0, "{forked} forks");
    let held = json["limits"]["held"].as_array().unwrap();
    let processes = held.iter().find(|h| h["kind"] == "processes").unwrap();
    let by = processes["by"].as_str().unwrap();
    assert!(by == "cgroup-pids" || by == "rlimit-nproc", "{by}");
    assert_eq!(processes["default"], false);
    // The control: without the limit the same loop gets every fork it asks for.
    let control = bomb.replace("300", "40");
    let (out, json) = run_json_args(&fx, &[], &control);
    assert_code(&out, 0);
    assert_eq!(json["stdout"]["text"], "40");
}

#[test]
fn limits_too_small_for_the_sandbox_are_refused_and_run_nothing() {
    let fx = Fixture::new();
    for args in [
        &["--max-memory", "1M"][..],
        &["--max-file-size", "4K"][..],
        &["--max-cpu-time", "0s"][..],
        &["--max-processes", "0"][..],
    ] {
        let out = fx
            .stockade(["run"])
            .args(args)
            .args(["--", "touch", "ran"])
            .output()
            .unwrap();
        assert_code(&out, 125);
        assert!(
            text(&out.stderr).contains(args[0]),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(!fx.ws.join("ran").exists());
    }
}

#[test]
fn confine_takes_no_limits_and_run_reports_the_layer_holding_each() {
    // An executor's ConfinedArgv is not supervised by stockade: confine refuses the
    // flags rather than report limits nothing would hold (README, "Resource limits:
    // where they are reported").
    let fx = Fixture::new();
    let out = fx
        .stockade(["confine", "--max-memory", "1G", "--", "touch", "ran"])
        .output()
        .unwrap();
    assert_code(&out, 125);
    assert!(
        text(&out.stderr).contains("--max-memory"),
        "{}",
        text(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    assert!(fx.leftover_requests().is_empty());
    // The positive control: run takes them and says which layer held each, as applied.
    let (out, json) = run_json_args(
        &fx,
        &[
            "--max-memory",
            "1G",
            "--max-cpu-time",
            "60s",
            "--max-file-size",
            "1M",
        ],
        "true",
    );
    assert_code(&out, 0);
    let held = json["limits"]["held"].as_array().unwrap();
    let by = |kind: &str| {
        held.iter()
            .find(|h| h["kind"] == kind)
            .map(|h| h["by"].as_str().unwrap().to_string())
            .unwrap_or_else(|| panic!("{kind} not reported: {held:?}"))
    };
    assert!(
        ["cgroup-memory", "rlimit-as"].contains(&by("memory").as_str()),
        "{held:?}"
    );
    assert_eq!(by("cpu-time"), "rlimit-cpu");
    assert_eq!(by("file-size"), "rlimit-fsize");
    assert_eq!(json["limits"]["exceeded"], serde_json::Value::Null);
}

/// The defaults this machine gets (policy/src/limits.rs `Defaults::for_machine`),
/// computed here independently: 3/4 of `MemTotal`, and 4096 processes or 128 per CPU.
fn expected_defaults() -> (u64, u64) {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    let cpus = std::thread::available_parallelism().unwrap().get() as u64;
    (kib * 1024 / 4 * 3, 4096.max(128 * cpus))
}

#[test]
fn default_limits_are_held_by_the_cgroup_or_reported_unheld_and_can_be_turned_off() {
    let fx = Fixture::new();
    let (memory, processes) = expected_defaults();
    let (out, json) = run_json_args(&fx, &[], "echo ran");
    assert_code(&out, 0);
    assert_eq!(json["stdout"]["text"], "ran\n");
    let limits = &json["limits"];
    let unheld = limits["defaultsUnheld"].as_array().unwrap();
    let held = limits["held"].as_array().unwrap();
    for (kind, value, by) in [
        ("memory", memory, "cgroup-memory"),
        ("processes", processes, "cgroup-pids"),
    ] {
        // Each default is either held through the group, with its value, or said to
        // be unheld: never a per-process fallback, never silently missing.
        match held.iter().find(|h| h["kind"] == kind) {
            Some(h) => {
                assert_eq!(h["by"], by, "{kind}: {limits}");
                assert_eq!(h["value"], value, "{kind}: {limits}");
                assert_eq!(h["default"], true, "{kind}: {limits}");
                assert!(!unheld.contains(&kind.into()), "{kind}: {limits}");
                assert_eq!(json["containment"], "cgroup", "{limits}");
            }
            None => assert!(unheld.contains(&kind.into()), "{kind}: {limits}"),
        }
    }
    // Asked for: the asked limit replaces the default of its kind.
    let (out, json) = run_json_args(&fx, &["--max-memory", "2G"], "true");
    assert_code(&out, 0);
    let limits = &json["limits"];
    let memory: Vec<_> = limits["held"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["kind"] == "memory")
        .collect();
    assert_eq!(memory.len(), 1, "{limits}");
    assert_eq!(memory[0]["value"], 2u64 << 30, "{limits}");
    assert_eq!(memory[0]["default"], false, "{limits}");
    assert!(
        !limits["defaultsUnheld"]
            .as_array()
            .unwrap()
            .contains(&"memory".into()),
        "{limits}"
    );
    // Turned off: no default held, none reported missing.
    let (out, json) = run_json_args(&fx, &["--no-default-limits"], "echo ran");
    assert_code(&out, 0);
    assert_eq!(json["limits"]["held"], serde_json::json!([]));
    assert_eq!(json["limits"]["defaultsUnheld"], serde_json::json!([]));
}
