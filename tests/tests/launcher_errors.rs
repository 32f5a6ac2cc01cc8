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

/// Runs `args` and returns the one `stockade: ` line, after checking that nothing ran
/// (the command would create `ran` in the workspace) and nothing was printed on stdout.
#[track_caller]
fn refused(fx: &Fixture, args: &[&str]) -> String {
    let out = fx.stockade(args).output().unwrap();
    assert_code(&out, 125);
    assert!(out.stdout.is_empty(), "{args:?}");
    assert!(!fx.ws.join("ran").exists(), "{args:?} ran the command");
    launcher_failure_line(&out)
}

/// Runs `args` and checks that the command ran (it creates `ran`), then removes it.
#[track_caller]
fn runs(fx: &Fixture, args: &[&str]) {
    let out = fx.stockade(args).output().unwrap();
    assert_code(&out, 0);
    assert!(
        fx.ws.join("ran").exists(),
        "{args:?} did not run the command"
    );
    std::fs::remove_file(fx.ws.join("ran")).unwrap();
}

#[test]
fn a_command_without_dashes_is_told_where_it_belongs() {
    let fx = Fixture::new();
    runs(&fx, &["run", "--", "touch", "ran"]);
    for sub in ["run", "confine"] {
        let line = refused(&fx, &[sub, "touch", "ran"]);
        assert!(
            line.contains("put the command after --")
                && line.contains(&format!("stockade {sub} [OPTIONS] -- touch")),
            "{line}"
        );
        let line = refused(&fx, &[sub, "--mode", "read-only", "touch", "ran"]);
        assert!(line.contains("after --"), "{line}");
        // A word that is not UTF-8 gets the same answer, not a panic.
        use std::os::unix::ffi::OsStrExt;
        let word = std::ffi::OsStr::from_bytes(b"\xfftouch");
        let out = fx
            .stockade([std::ffi::OsStr::new(sub), word])
            .output()
            .unwrap();
        assert_code(&out, 125);
        assert!(launcher_failure_line(&out).contains("after --"));
    }
    assert_eq!(fx.leftover_requests(), Vec::<std::path::PathBuf>::new());
}

#[test]
fn durations_take_hours_and_refuse_zero_and_negative_values() {
    let fx = Fixture::new();
    for ok in ["1h", "500ms", "2m"] {
        runs(&fx, &["run", "--timeout", ok, "--", "touch", "ran"]);
    }
    runs(&fx, &["run", "--grace", "1ms", "--", "touch", "ran"]);
    for (args, want) in [
        (&["--timeout", "0s"][..], "is zero"),
        (&["--timeout", "0ms"], "is zero"),
        (&["--grace", "0s"], "is zero"),
        (&["--timeout", "-5s"], "is negative"),
        (&["--grace", "-1m"], "is negative"),
        (&["--timeout", "5"], "no unit"),
        (&["--timeout", "1d"], "use ms, s, m or h"),
    ] {
        let argv = [&["run"][..], args, &["--", "touch", "ran"]].concat();
        let line = refused(&fx, &argv);
        assert!(
            line.contains(args[0]) && line.contains(want),
            "{args:?}: {line}"
        );
    }
}

#[test]
fn sizes_take_binary_units() {
    let fx = Fixture::new();
    // 64 KiB of output: with --max-output 1K the tail is exactly 1024 bytes, and with
    // --max-spill 64M the whole stream is kept in the spill file.
    let script = "head -c 65536 /dev/zero | tr '\\0' x; touch ran";
    let argv = ["run", "--json", "--max-output", "1K", "--max-spill", "64M"];
    let (out, json) = run_json(fx.stockade(argv).args(["--", "sh", "-c", script]));
    assert_code(&out, 0);
    assert_eq!(json["contract"], 2, "{json}");
    assert_eq!(json["stdout"]["text"].as_str().unwrap().len(), 1024);
    let spill = json["stdout"]["spillPath"].as_str().unwrap();
    assert_eq!(std::fs::metadata(spill).unwrap().len(), 65536);
    std::fs::remove_dir_all(std::path::Path::new(spill).parent().unwrap()).unwrap();
    std::fs::remove_file(fx.ws.join("ran")).unwrap();
    // 64 KiB is past --max-spill 16KiB: no spill file is left.
    let argv = [
        "run",
        "--json",
        "--max-output",
        "1KiB",
        "--max-spill",
        "16KiB",
    ];
    let (_, json) = run_json(fx.stockade(argv).args(["--", "sh", "-c", script]));
    assert_eq!(
        json["stdout"]["spillPath"],
        serde_json::Value::Null,
        "{json}"
    );
    std::fs::remove_file(fx.ws.join("ran")).unwrap();
    for (args, want) in [
        (&["--json", "--max-spill", "64MB"][..], "64M or 64MiB"),
        (&["--json", "--max-output", "1T"], "unknown unit"),
        (&["--json", "--max-output", "-1K"], "is negative"),
        // Sizes apply to captured output only: without --json they mean nothing.
        (&["--max-spill", "64M"], "--json"),
    ] {
        let argv = [&["run"][..], args, &["--", "touch", "ran"]].concat();
        let line = refused(&fx, &argv);
        assert!(line.contains(want), "{args:?}: {line}");
    }
}

#[test]
fn an_empty_program_name_is_refused_by_run_and_confine() {
    let fx = Fixture::new();
    runs(&fx, &["run", "--", "touch", "ran"]);
    for sub in ["run", "confine"] {
        let line = refused(&fx, &[sub, "--", "", "ran"]);
        assert!(
            line.contains("program name") && line.contains("empty"),
            "{line}"
        );
    }
    assert_eq!(fx.leftover_requests(), Vec::<std::path::PathBuf>::new());
}

#[test]
fn flags_that_mean_nothing_in_the_mode_are_refused() {
    let fx = Fixture::new();
    let outside = fx.outside.to_str().unwrap();
    // Controls: each flag is accepted where it means something.
    runs(&fx, &["run", "--writable", outside, "--", "touch", "ran"]);
    runs(
        &fx,
        &["run", "--allow-tcp-connect", "80", "--", "touch", "ran"],
    );
    // --keep-fd needs the descriptor open: a shell opens fd 9 and execs stockade.
    let out = std::process::Command::new("sh")
        .args([
            "-c",
            "exec 9</dev/null; exec \"$0\" run --keep-fd 9 -- touch ran",
        ])
        .arg(stockade_bin())
        .current_dir(&fx.ws)
        .env("XDG_RUNTIME_DIR", &fx.runtime)
        .env("STOCKADE_RUNNER", runner_bin())
        .env_remove("TMPDIR")
        .output()
        .unwrap();
    assert_code(&out, 0);
    std::fs::remove_file(fx.ws.join("ran")).unwrap();
    runs(
        &fx,
        &["run", "--mode", "danger-full-access", "--", "touch", "ran"],
    );
    let line = refused(
        &fx,
        &[
            "run",
            "--mode",
            "read-only",
            "--writable",
            outside,
            "--",
            "touch",
            "ran",
        ],
    );
    assert!(
        line.contains("--writable") && line.contains("read-only"),
        "{line}"
    );
    for flag in [
        &["--allow-tcp-connect", "80"][..],
        &["--writable", outside],
        &["--network", "deny"],
        &["--allow-unix-sockets"],
        &["--keep-fd", "9"],
    ] {
        for sub in ["run", "confine"] {
            let argv = [
                &[sub, "--mode", "danger-full-access"][..],
                flag,
                &["--", "touch", "ran"],
            ]
            .concat();
            let line = refused(&fx, &argv);
            assert!(
                line.contains(flag[0]) && line.contains("danger-full-access"),
                "{flag:?}: {line}"
            );
        }
    }
    let line = refused(
        &fx,
        &[
            "run",
            "--network",
            "allow",
            "--allow-tcp-connect",
            "80",
            "--",
            "touch",
            "ran",
        ],
    );
    assert!(line.contains("--network allow"), "{line}");
    assert_eq!(fx.leftover_requests(), Vec::<std::path::PathBuf>::new());
}

#[test]
fn help_texts_carry_examples_and_no_stale_claims() {
    let fx = Fixture::new();
    for sub in ["run", "confine", "classify", "probe", "explain"] {
        let out = fx.stockade([sub, "--help"]).output().unwrap();
        assert_code(&out, 0);
        let help = text(&out.stdout);
        let examples = help.split("Examples:").nth(1).unwrap_or("");
        let n = examples
            .lines()
            .filter(|l| l.trim_start().starts_with("stockade"))
            .count();
        assert!(n >= 2, "{sub}: {n} examples\n{help}");
    }
    let out = fx.stockade(["run", "--help"]).output().unwrap();
    let help = text(&out.stdout);
    assert!(!help.contains("ignored with --network allow"), "{help}");
    assert!(help.contains("refused with --network allow"), "{help}");
    let out = std::process::Command::new(runner_bin())
        .arg("--help")
        .output()
        .unwrap();
    assert_code(&out, 0);
    let help = text(&out.stdout);
    assert!(help.contains("normally started by `stockade`"), "{help}");
    assert!(help.contains("Examples:"), "{help}");
}

#[test]
fn explain_shows_a_request_without_consuming_it() {
    let fx = Fixture::new();
    let confined = fx.confine(&["--mode", "read-only", "--", "touch", "ran"]);
    let request = confined["argv"][2].as_str().unwrap().to_string();
    let out = fx.stockade(["explain", &request]).output().unwrap();
    assert_code(&out, 0);
    let shown = text(&out.stdout);
    assert!(
        shown.contains("read-only") && shown.contains("touch"),
        "{shown}"
    );
    // The same text as the runner's own --explain, and the request is still there.
    let direct = std::process::Command::new(runner_bin())
        .args(["--explain", &request])
        .output()
        .unwrap();
    assert_eq!(text(&direct.stdout), shown);
    assert!(std::path::Path::new(&request).exists());
    // A file that is not there: the runner's one line and exit 125.
    let out = fx
        .stockade(["explain", fx.outside.join("nope").to_str().unwrap()])
        .output()
        .unwrap();
    assert_code(&out, 125);
    assert!(runner_failure_line(&out).contains("does not exist"));
    // The request is still usable afterwards: spawning it runs the command (read-only:
    // touch is denied, which proves it ran confined).
    let out = spawn_argv(&confined);
    assert_code(&out, 1);
    assert!(!std::path::Path::new(&request).exists());
}

#[test]
fn every_subcommand_refuses_unknown_flags_and_bad_values_and_runs_nothing() {
    let fx = Fixture::new();
    runs(&fx, &["run", "--", "touch", "ran"]);
    let missing = fx.root.join("missing");
    let missing = missing.to_str().unwrap();
    // Subcommands that run nothing anyway: an unknown flag or an extra word is refused,
    // not ignored.
    let plain: &[(&[&str], &str)] = &[
        (&["bogus"], "'bogus'"),
        (&["probe", "--bogus"], "'--bogus'"),
        (&["probe", "extra"], "'extra'"),
        (&["explain"], "<FILE>"),
        (&["explain", "--bogus"], "'--bogus'"),
        (&["explain", "a", "b"], "'b'"),
        (&["classify", "--bogus"], "'--bogus'"),
        (
            &["classify", "--confined", missing, "--exit-code", "x"],
            "'x' for '--exit-code",
        ),
    ];
    for (args, want) in plain {
        let line = refused(&fx, args);
        assert!(line.contains(want), "{args:?}: {line}");
    }
    // `run` and `confine`: the value named, nothing run, no request left behind.
    let both: &[(&[&str], &str)] = &[
        (&["--workspace", missing], "workspace root"),
        (&["--writable", missing], "writable root"),
        (&["--network", "maybe"], "'maybe'"),
        (&["--tmp", "bogus"], "'bogus'"),
        (&["--allow-tcp-connect", "70000"], "'70000'"),
        (&["--allow-tcp-connect", "0"], "port 0"),
        (&["--keep-fd", "x"], "'x' for '--keep-fd"),
        (&["--keep-capability", "sys_admin"], "CAP_SYS_ADMIN"),
        (&["--allow-domain", ""], "--allow-domain"),
        (&["--resolve", "bad"], "NAME=ADDRESS"),
        (&["--env", "NOEQUALS"], "NAME=VALUE"),
    ];
    for sub in ["run", "confine"] {
        for (flags, want) in both {
            let args: Vec<&str> = [sub]
                .iter()
                .chain(flags.iter())
                .chain(["--", "touch", "ran"].iter())
                .copied()
                .collect();
            let line = refused(&fx, &args);
            assert!(line.contains(want), "{args:?}: {line}");
            if flags[0] == "--workspace" || flags[0] == "--writable" {
                assert!(line.contains(missing), "{args:?}: {line}");
            }
        }
    }
    for (flags, want) in [
        (&["run", "--containment", "bogus"][..], "'bogus'"),
        (&["run", "--max-output", "x"], "'x' for '--max-output"),
        (&["run", "--max-spill", "x"], "'x' for '--max-spill"),
        (&["run", "--grace", "x"], "'x' for '--grace"),
        (&["confine", "--inherit-env=bogus"], "'bogus'"),
    ] {
        let args: Vec<&str> = flags
            .iter()
            .chain(&["--", "touch", "ran"])
            .copied()
            .collect();
        let line = refused(&fx, &args);
        assert!(line.contains(want), "{args:?}: {line}");
    }
    assert_eq!(fx.leftover_requests(), Vec::<std::path::PathBuf>::new());
}

/// `--allow-device` grants one device file beneath `/dev`, read and write: anything else
/// (a file elsewhere, `/dev` itself or a directory in it, a link that leads out of
/// `/dev`, a path that is not there) is refused with the path named, and nothing runs.
/// Control: a standard device named (`/dev/zero`, which the policy lets it read anyway)
/// is accepted and the command runs.
#[test]
fn allow_device_names_a_device_file_beneath_dev_or_nothing_runs() {
    let fx = Fixture::new();
    let touch = ["--", "touch", "ran"];
    runs(
        &fx,
        &[&["run", "--allow-device", "/dev/zero"][..], &touch].concat(),
    );
    std::fs::write(fx.outside.join("file"), "x").unwrap();
    let file = fx.outside.join("file");
    let file = file.to_str().unwrap();
    let link = fx.outside.join("link");
    std::os::unix::fs::symlink("/etc/hostname", &link).unwrap();
    for (path, why) in [
        (
            link.to_str().unwrap(),
            "it is /etc/hostname, not beneath /dev",
        ),
        ("/etc/hostname", "not beneath /dev"),
        (file, "not beneath /dev"),
        ("/dev", "not beneath /dev"),
        ("/dev/shm", "not a device file"),
        ("/dev/stockade-no-such-device", "cannot be resolved"),
    ] {
        for verb in ["run", "confine"] {
            let line = refused(&fx, &[&[verb, "--allow-device", path][..], &touch].concat());
            assert!(line.contains("--allow-device"), "{path}: {line}");
            assert!(line.contains(why), "{path}: {line}");
        }
    }
    // Meaningless where nothing is confined.
    let line = refused(
        &fx,
        &[
            &[
                "run",
                "--mode",
                "danger-full-access",
                "--allow-device",
                "/dev/zero",
            ][..],
            &touch,
        ]
        .concat(),
    );
    assert!(line.contains("--allow-device"), "{line}");
}
