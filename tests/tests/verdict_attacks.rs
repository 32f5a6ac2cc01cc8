//! Attacks on what stockade tells its caller afterwards (found by review): inputs the
//! command controls (its stderr, its processes' command lines, the filesystem it shares
//! with the control directory) must not make `classify` or `stockade run` exhaust
//! memory, print what the command wrote into stockade's own marker lines, or lose a
//! record.

mod support;
use support::*;

use std::os::unix::process::CommandExt;

/// Limits the address space of the process `cmd` starts to `bytes`.
fn with_address_space(cmd: &mut std::process::Command, bytes: u64) -> &mut std::process::Command {
    // SAFETY: the hook runs in the forked child before exec and only calls setrlimit on
    // a local struct, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

/// `stockade classify` on a stderr of 16 MiB of line breaks ending in a denial: what a
/// command that prints them costs `classify` is what it reads, not 16 bytes per line
/// (the list of its lines alone took 256 MiB, and an executor passing the 64 MiB
/// `classify` accepts made it hold more than 1 GiB). Judged under an address-space
/// limit of 192 MiB.
#[test]
fn classify_reads_a_stderr_of_line_breaks_in_bounded_memory() {
    let fx = Fixture::new();
    let mut stderr = vec![b'\n'; 16 << 20];
    // A refusal the policy makes (a write outside the roots, to a directory the invoking
    // user may write): the line is named as a denial.
    let refused = fx.outside.join("x");
    stderr.extend_from_slice(
        format!(
            "touch: cannot touch '{}': Permission denied\n",
            refused.display()
        )
        .as_bytes(),
    );
    let err = fx.root.join("stderr");
    std::fs::write(&err, &stderr).unwrap();
    // Spawns a ConfinedArgv, then classifies it as failed with that stderr.
    let classify = |c: &serde_json::Value, limit: Option<u64>| {
        assert_code(&spawn_argv(c), 0);
        let confined = fx.root.join(format!("confined-{}.json", unique_tag("c")));
        std::fs::write(&confined, c.to_string()).unwrap();
        let mut cmd = fx.stockade([
            "classify",
            "--confined",
            confined.to_str().unwrap(),
            "--exit-code",
            "1",
            "--stderr",
            err.to_str().unwrap(),
        ]);
        if let Some(bytes) = limit {
            with_address_space(&mut cmd, bytes);
        }
        let out = cmd.output().unwrap();
        assert_code(&out, 0);
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let limited = classify(
        &fx.confine(&["--mode", "read-only", "--", "true"]),
        Some(192 << 20),
    );
    assert_eq!(limited["outcome"], "denied", "{limited}");
    assert_eq!(
        limited["denials"][0]["path"],
        refused.to_str().unwrap(),
        "{limited}"
    );
    // The same verdict without the limit: it bounds memory, it does not change answers.
    let free = classify(&fx.confine(&["--mode", "read-only", "--", "true"]), None);
    assert_eq!(free["outcome"], limited["outcome"]);
    assert_eq!(free["detail"], limited["detail"]);
}

/// A background process's command line, which the command chooses, is what `stockade
/// run` reports it by (`leftBehind`, and the `[sandbox: cleanup unknown ...]` marker):
/// reported cut short and with control characters escaped. Before, each was read whole
/// (a 128 KiB argument, or megabytes of them, per process: memory the launcher spent for
/// every process listed) and printed as is, so a terminal escape in it could rewrite the
/// marker lines above it on the caller's terminal.
#[test]
fn a_background_command_line_is_reported_bounded_and_printable() {
    let fx = Fixture::new();
    let long = "x".repeat(100_000);
    let script = format!(
        "(exec -a \"$(printf '\\033[1A\\033[2K')hidden{long}\" sleep 30 >/dev/null 2>&1 </dev/null) & sleep 0.5; exit 0"
    );
    // --json: the process is left behind, ended, and listed.
    let (out, json) = run_json(&mut fx.stockade([
        "run",
        "--json",
        "--mode",
        "read-only",
        "--",
        "bash",
        "-c",
        &script,
    ]));
    assert_code(&out, 0);
    let listed: Vec<String> = json["leftBehind"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["command"].as_str().unwrap().to_string())
        .filter(|c| c.contains("hidden"))
        .collect();
    assert_eq!(listed.len(), 1, "{}", json["leftBehind"]);
    assert!(
        listed[0].starts_with("\\u{1b}[1A\\u{1b}[2Khidden") && listed[0].ends_with("..."),
        "{:?}",
        &listed[0][..listed[0].len().min(200)]
    );
    assert!(listed[0].len() < 1024, "{} bytes", listed[0].len());

    // Kept running: the marker names it, on one printable line.
    let out = fx
        .stockade([
            "run",
            "--keep-background",
            "--mode",
            "read-only",
            "--",
            "bash",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    assert_code(&out, 0);
    let err = text(&out.stderr);
    let marker = err
        .lines()
        .find(|l| l.starts_with("[sandbox: cleanup unknown (kept)"))
        .unwrap_or_else(|| panic!("no cleanup marker: {err:?}"));
    assert!(marker.contains("\\u{1b}[1A\\u{1b}[2Khidden"), "{marker:?}");
    assert!(!err.contains('\u{1b}'), "a raw escape reached stderr");
    assert!(marker.len() < 8192, "{} bytes", marker.len());
}

/// A command that fills the filesystem its control directory lies on (an ordinary
/// user's `~/.local/state/stockade` beside a workspace in the home) still has its refused
/// connections reported: the proxy's record reserves its room when it is created, so its
/// appends cannot fail for want of space. Before, the refusal was answered (403) and lost
/// from the verdict. Here the workspace and the control directory share a 1 MiB tmpfs,
/// in a mount namespace of the test's own.
#[test]
fn a_full_filesystem_does_not_hide_a_refused_connection() {
    if !stockade_tests::is_root() {
        eprintln!("SKIPPED (needs root): a_full_filesystem_does_not_hide_a_refused_connection");
        return;
    }
    for (fx, netns) in domain_fixtures("a_full_filesystem_does_not_hide_a_refused_connection") {
        let small = fx.root.join("small");
        std::fs::create_dir(&small).unwrap();
        // `$0` the mount point; then the launcher and its arguments.
        let setup = "mount -t tmpfs -o size=1m,mode=0755 tmpfs \"$0\" \
                     && mkdir -m 700 \"$0/ctl\" \"$0/ws\" && cd \"$0/ws\" \
                     && STOCKADE_CONTROL_DIR=\"$0/ctl\" exec \"$@\"";
        let inner = format!(
            "dd if=/dev/zero of=fill bs=1k; {} connect denied.test 443 x",
            bin("netclient").display()
        );
        let mut cmd = std::process::Command::new("unshare");
        cmd.args(["-m", "--propagation", "private", "sh", "-c", setup])
            .arg(&small)
            .arg(stockade_bin())
            .arg("run");
        if !netns {
            cmd.arg("--no-stage");
        }
        cmd.args(["--allow-domain", "allowed.test", "--workspace"])
            .arg(small.join("ws"))
            .args(["--", "sh", "-c", &inner]);
        fx.environment(&mut cmd);
        let out = cmd.output().unwrap();
        let err = text(&out.stderr);
        assert_code(&out, 0);
        // The filesystem was full, and the proxy refused the connection.
        assert!(
            err.contains("No space left on device"),
            "netns {netns}: {err}"
        );
        assert_eq!(text(&out.stdout).trim(), "403", "netns {netns}: {err}");
        assert!(
            err.contains("[sandbox: network access to denied.test:443 denied]"),
            "netns {netns}: the refusal is not reported: {err}"
        );
    }
}

/// `stockade run`'s markers each start a line of their own, also after a command whose
/// stderr ends within a line. Appended to that line, `[exit code: 124]` was no longer the
/// last line of stderr: a command printing a lookalike timeout marker, then text without
/// a line break, and exiting 124 read as a real timeout to a caller that matches lines.
#[test]
fn markers_after_stderr_that_ends_within_a_line_start_a_line_of_their_own() {
    let fx = Fixture::new();
    // The command's own 124 after a lookalike: the real marker is the last line.
    let out = fx.run_sh(
        "workspace-write",
        "printf '[timed out after 300ms]\\nno line break' >&2; exit 124",
    );
    assert_code(&out, 124);
    assert_eq!(
        text(&out.stderr),
        "[timed out after 300ms]\nno line break\n[exit code: 124]\n"
    );
    // A real timeout after a partial line: its markers are lines of their own too.
    let out = fx
        .stockade([
            "run",
            "--timeout",
            "300ms",
            "--",
            "sh",
            "-c",
            "printf partial >&2; sleep 1000",
        ])
        .output()
        .unwrap();
    assert_code(&out, 124);
    assert_eq!(
        text(&out.stderr),
        "partial\n[timed out after 300ms]\n[killed by signal: SIGTERM]\n"
    );
    // Control: a stderr that ends with a line break gets no empty line before them.
    let out = fx.run_sh("workspace-write", "printf 'whole line\\n' >&2; exit 124");
    assert_code(&out, 124);
    assert_eq!(text(&out.stderr), "whole line\n[exit code: 124]\n");
    // And nothing is added when there is no marker to print.
    let out = fx.run_sh("workspace-write", "printf partial >&2; exit 3");
    assert_code(&out, 3);
    assert_eq!(text(&out.stderr), "partial");
}

/// `stockade classify` of the ConfinedArgv `confined`, saved to a file of the fixture,
/// with the exit facts `facts`.
fn classify_saved(
    fx: &Fixture,
    confined: &serde_json::Value,
    facts: &[&str],
) -> std::process::Output {
    let file = fx.root.join(format!("confined-{}.json", unique_tag("c")));
    std::fs::write(&file, confined.to_string()).unwrap();
    fx.stockade(["classify", "--confined", file.to_str().unwrap()])
        .args(facts)
        .output()
        .unwrap()
}

/// A write outside the writable roots to a directory the invoking user owns: refused by
/// the policy alone in every configuration these tests run in (Landlock without the
/// stage), as root and as an ordinary user (`/etc` is refused to a user by Unix
/// anyway, which is no denial), read as a denial.
fn denied_write(fx: &Fixture) -> String {
    format!("touch {}/verdict-attack", fx.outside.display())
}

/// Without the namespace stage the control directory is reachable by path (hidden from
/// reads, but Landlock does not govern `chmod`), and workspace-write leaves mode changes
/// to the command: it can change its own status file's mode. That makes the verdict
/// `tampered`, which withholds `denied`; `stockade run` without `--json` then printed no
/// marker at all, so a command that changed the mode before a denied access hid the
/// denial from a caller reading the markers. The tampering is a marker of its own now.
#[test]
fn a_status_record_the_command_changed_is_a_marker_not_a_silent_run() {
    let fx = Fixture::new();
    // Control: the denial is marked.
    let out = fx.run_sh("workspace-write", &denied_write(&fx));
    assert_code(&out, 1);
    let err = text(&out.stderr);
    assert!(
        err.ends_with("[sandbox: file access denied under workspace-write mode]\n"),
        "{err}"
    );
    // The attack: the same denial after making its own status record unreadable. The
    // runner's supervisor refuses that chmod without the stage; taken away (`no-notify`,
    // as under another supervisor) the change goes through and must be marked.
    let base = fx.runtime.join("stockade");
    let script = format!(
        "chmod 000 {}/req-*/status && echo changed; {}",
        base.display(),
        denied_write(&fx)
    );
    let out = fx
        .stockade_masked(
            Some("no-notify"),
            [
                "run",
                "--mode",
                "workspace-write",
                "--",
                "sh",
                "-c",
                &script,
            ],
        )
        .output()
        .unwrap();
    assert_code(&out, 1);
    assert_eq!(text(&out.stdout), "changed\n", "the chmod was refused");
    let err = text(&out.stderr);
    let last = err.lines().last().unwrap_or_default();
    assert!(
        // Root opens it and finds the mode changed; an ordinary user cannot open it.
        last.starts_with("[sandbox: the status record was tampered with: ")
            && (last.contains("its mode is 0000") || last.contains("cannot open it")),
        "no tampering marker: {err}"
    );
    // As `classify` and `--json` say it: tampered, not denied.
    assert!(!err.contains("file access denied"), "{err}");
}

/// The filtering proxy's record of refused connections lies in the command's private
/// directory too. A command that changed its mode (without the stage, as above) made it
/// unreadable to an ordinary user's launcher, which then reported no refusal at all:
/// the connections the proxy refused vanished from the markers, `network.denied` and
/// `classify`. A record not as the proxy made it is tampering now, as the status file is
/// (also for root, who could still read it).
#[test]
fn a_network_record_the_command_changed_is_tampering_not_no_refusal() {
    let fx = Fixture::new();
    let refuse = format!("{} connect denied.test 443 x", bin("netclient").display());
    let attack = format!(
        "chmod 000 {}/req-*/network-denied && echo changed; {refuse}",
        fx.runtime.join("stockade").display()
    );
    let run = |script: &str, json: bool| {
        let mut args = vec!["run"];
        if json {
            args.push("--json");
        }
        args.extend(["--allow-domain", "allowed.test", "--", "sh", "-c", script]);
        // Without the supervisor (`no-notify`), which would refuse the chmod.
        fx.stockade_masked(Some("no-notify"), args)
            .output()
            .unwrap()
    };
    let refused = "[sandbox: network access to denied.test:443 denied]";
    // Control: the refusal is reported.
    let out = run(&refuse, false);
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout).trim(), "403");
    assert!(text(&out.stderr).contains(refused), "{}", text(&out.stderr));
    // The attack, with markers: a tampering marker instead of silence.
    let out = run(&attack, false);
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "changed\n403\n", "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(!err.contains(refused), "{err}");
    assert!(
        err.lines().any(|l| l.starts_with(
            "[sandbox: the proxy's record of refused connections was tampered with: "
        )),
        "the hidden refusal is not reported: {err}"
    );
    // With --json.
    let out = run(&attack, true);
    assert_code(&out, 0);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["sandbox"]["tampered"], true, "{json}");
    // On the confine path: classify says tampered; its control names the refusal.
    let classify = |script: &str| {
        let out = fx
            .stockade_masked(
                Some("no-notify"),
                [
                    "confine",
                    "--allow-domain",
                    "allowed.test",
                    "--",
                    "sh",
                    "-c",
                    script,
                ],
            )
            .output()
            .unwrap();
        assert_code(&out, 0);
        let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let out = spawn_argv(&c);
        assert_code(&out, 0);
        let out = classify_saved(&fx, &c, &["--exit-code", "0"]);
        assert_code(&out, 0);
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let v = classify(&refuse);
    assert_eq!(v["outcome"], "ok", "{v}");
    assert_eq!(v["network"]["denied"][0]["host"], "denied.test", "{v}");
    let v = classify(&attack);
    assert_eq!(v["outcome"], "tampered", "{v}");
    assert!(
        v["detail"]
            .as_str()
            .unwrap()
            .contains("record of refused connections was tampered with"),
        "{v}"
    );
}

/// A command killed by a real-time signal (`kill -RTMIN+5 $$`, `kill -64 $$`) is
/// reported as killed by it, with and without the stage. `stockade run` reaped its child
/// through a wrapper that has no name for those signals and returned an error instead of
/// the status the kernel had already consumed: the end was lost and the launcher waited
/// for it for ever, through its `--timeout` and SIGTERM. (Were it broken again, this test
/// ends at the fixture's deadline.) `classify` takes such a signal by number too.
#[test]
fn a_command_killed_by_a_real_time_signal_is_reported_not_waited_for() {
    for fx in [Fixture::new(), Fixture::staged()] {
        // Control first (a signal with a name), then the real-time ones, by number from
        // the kernel's range (SIGRTMIN is 32 to the kernel; 34 and up are free in glibc).
        for sig in [15, 40, 64] {
            let script = format!("kill -{sig} $$");
            let (out, json) = run_json(&mut fx.stockade([
                "run",
                "--json",
                "--timeout",
                "5m",
                "--mode",
                "read-only",
                "--",
                "bash",
                "-c",
                &script,
            ]));
            assert_code(&out, 128 + sig);
            assert_eq!(json["exitCode"], serde_json::Value::Null, "{json}");
            assert_eq!(json["timedOut"], false, "{json}");
            let name = json["signal"].as_str().unwrap_or_default().to_string();
            if sig == 15 {
                assert_eq!(name, "SIGTERM", "{json}");
            } else {
                assert_eq!(name, format!("SIG{sig}"), "{json}");
            }
            // Pass-through: the marker names it.
            let out = fx
                .stockade(["run", "--mode", "read-only", "--", "bash", "-c", &script])
                .output()
                .unwrap();
            assert_code(&out, 128 + sig);
            assert_eq!(
                text(&out.stderr),
                format!("[killed by signal: {name}]\n"),
                "stage {}",
                fx.stage
            );
            // On the confine path, `classify` takes the executor's signal by number
            // (it refused a real-time one: no verdict at all).
            let c = fx.confine(&["--mode", "read-only", "--", "bash", "-c", &script]);
            let out = spawn_argv(&c);
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(out.status.signal(), Some(sig), "{}", text(&out.stderr));
            let out = classify_saved(&fx, &c, &["--signal", &sig.to_string()]);
            assert_code(&out, 0);
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["outcome"], "signaled", "{v}");
            assert_eq!(v["detail"], format!("killed by signal {name}"), "{v}");
        }
    }
}
