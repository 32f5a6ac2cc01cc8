//! Receipts: the executable and working directory bound at `confine` time and checked by
//! the runner just before `execve` (each change refused with nothing run, each with the
//! control that the unchanged command runs); the receipt of `stockade run --json` (stream
//! digests equal to the bytes produced; cleanup proven, or unknown when the range cannot
//! be ended, with the exit code and marker saying so).

mod support;
use serde_json::Value;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use support::*;

fn script(path: &Path, body: &str) {
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn status_text(c: &Value) -> String {
    std::fs::read_to_string(c["statusPath"].as_str().unwrap()).unwrap()
}

/// Asserts the spawned argv was refused for a changed binding: exit 125, one runner
/// line containing `says`, the `failed binding-changed` record, and returns the line.
#[track_caller]
fn assert_refused(c: &Value, out: &Output, says: &str) -> String {
    assert_code(out, 125);
    let line = runner_failure_line(out);
    assert!(line.contains(says), "{line}");
    assert!(line.contains("nothing was run"), "{line}");
    let status = status_text(c);
    assert!(
        status.starts_with("stockade-status 1 failed binding-changed "),
        "{status}"
    );
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    line
}

#[test]
fn an_executable_swapped_for_another_file_at_the_same_path_is_refused() {
    let fx = Fixture::new();
    let tool = fx.ws.join("tool");
    // A script (started by path after a last check) and a binary (from the descriptor).
    type Make<'a> = &'a dyn Fn(&Path);
    let cases: [(&str, Make); 2] = [
        ("script", &|p| {
            script(p, "#!/bin/sh\necho \"approved $0\"\n")
        }),
        ("binary", &|p| {
            std::fs::copy("/bin/true", p).unwrap();
        }),
    ];
    for (what, approved) in cases {
        let _ = std::fs::remove_file(&tool);
        approved(&tool);
        let before = std::fs::metadata(&tool).unwrap().ino();
        let c = fx.confine(&["--", "./tool"]);
        assert_eq!(c["binding"]["executable"]["state"], "found", "{c}");
        assert_eq!(c["binding"]["executable"]["inode"], before);
        // An earlier command puts another file under the same name (a new inode).
        let planted = fx.ws.join("planted");
        script(&planted, "#!/bin/sh\necho planted-ran\n");
        std::fs::rename(&planted, &tool).unwrap();
        assert_ne!(std::fs::metadata(&tool).unwrap().ino(), before);
        let out = spawn_argv(&c);
        let line = assert_refused(
            &c,
            &out,
            "the executable changed since the command was confined",
        );
        assert!(line.contains("./tool"), "{what}: {line}");
        // classify says the runner failed, and that the binding did not hold.
        let err = fx.root.join("err");
        std::fs::write(&err, &out.stderr).unwrap();
        let confined = fx.root.join("c.json");
        std::fs::write(&confined, c.to_string()).unwrap();
        let v = Command::new(stockade_bin())
            .args(["classify", "--confined"])
            .arg(&confined)
            .args(["--exit-code", "125", "--stderr"])
            .arg(&err)
            .env("XDG_RUNTIME_DIR", &fx.runtime)
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&v.stdout).unwrap();
        assert_eq!(v["outcome"], "runner-failed", "{v}");
        assert!(
            v["detail"].as_str().unwrap().ends_with("[binding-changed]"),
            "{v}"
        );
        assert_eq!(v["receipt"]["bindingVerified"], false, "{v}");
        // Control: confined again, what is there now was approved, and runs.
        let c = fx.confine(&["--", "./tool"]);
        let out = spawn_argv(&c);
        assert_code(&out, 0);
        assert_eq!(text(&out.stdout), "planted-ran\n", "{what}");
        assert!(status_text(&c).starts_with("stockade-status 1 confined "));
    }
    // The approved script itself runs under its own name ($0), not /dev/fd/N.
    script(&tool, "#!/bin/sh\necho \"approved $0\"\n");
    let out = spawn_argv(&fx.confine(&["--", "./tool"]));
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "approved ./tool\n");
}

#[test]
fn an_executable_rewritten_in_place_with_its_time_set_back_is_refused() {
    let fx = Fixture::new();
    let tool = fx.ws.join("tool");
    script(&tool, "#!/bin/sh\necho approved\n");
    let meta = std::fs::metadata(&tool).unwrap();
    let c = fx.confine(&["--", "./tool"]);
    // Same inode, same size, same modification time: only the content (and with it the
    // status change time, which no call sets back) differs.
    let file = std::fs::OpenOptions::new().write(true).open(&tool).unwrap();
    std::io::Write::write_all(&mut &file, b"#!/bin/sh\necho REWRITE\n").unwrap();
    file.set_modified(meta.modified().unwrap()).unwrap();
    drop(file);
    let now = std::fs::metadata(&tool).unwrap();
    assert_eq!(
        (now.ino(), now.size(), now.mtime(), now.mtime_nsec()),
        (meta.ino(), meta.size(), meta.mtime(), meta.mtime_nsec())
    );
    let out = spawn_argv(&c);
    assert_refused(&c, &out, "its status change time differs");
    // Control: confined again, it runs.
    let out = spawn_argv(&fx.confine(&["--", "./tool"]));
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "REWRITE\n");
}

#[test]
fn with_the_hash_option_the_content_is_bound_and_rewritten_content_refused() {
    let fx = Fixture::new();
    let tool = fx.ws.join("tool");
    script(&tool, "#!/bin/sh\necho approved\n");
    let c = fx.confine(&["--bind-executable-hash", "--", "./tool"]);
    assert_eq!(c["binding"]["executable"]["sha256"], file_sha256(&tool));
    // Without the option no digest is bound.
    let plain = fx.confine(&["--", "./tool"]);
    assert!(plain["binding"]["executable"]["sha256"].is_null());
    // Control: unchanged, it runs.
    let out = spawn_argv(&c);
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "approved\n");

    // Same inode, new content.
    let c = fx.confine(&["--bind-executable-hash", "--", "./tool"]);
    let ino = std::fs::metadata(&tool).unwrap().ino();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&tool)
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"#!/bin/sh\necho CHANGED\n"))
        .unwrap();
    assert_eq!(std::fs::metadata(&tool).unwrap().ino(), ino);
    let out = spawn_argv(&c);
    assert_refused(&c, &out, "changed since the command was confined");
    assert!(spawn_argv(&plain).status.code() == Some(125));

    // The digest layer alone: a request whose identity matches the file as it is, and
    // whose digest is of other content (a rewrite no time recorded), is refused; the
    // same request with the file's own digest runs.
    let mut req = request_for(&fx, "");
    req.argv = vec![tool.clone().into_os_string()];
    rebind(&mut req);
    let stockade_policy::binding::ExecBinding::Found(bound) = &mut req.binding.executable else {
        panic!("{:?}", req.binding)
    };
    bound.sha256 = Some(stockade_policy::digest::sha256(
        b"#!/bin/sh\necho approved\n",
    ));
    let path = write_request_bytes(&fx, "req-other-digest", &req.encode().unwrap());
    let out = run_request(&path);
    assert_code(&out, 125);
    let line = runner_failure_line(&out);
    assert!(line.contains("its content differs"), "{line}");
    assert!(out.stdout.is_empty());
    let stockade_policy::binding::ExecBinding::Found(bound) = &mut req.binding.executable else {
        unreachable!()
    };
    bound.sha256 = Some(stockade_policy::digest::sha256(
        &std::fs::read(&tool).unwrap(),
    ));
    let path = write_request_bytes(&fx, "req-own-digest", &req.encode().unwrap());
    let out = run_request(&path);
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "CHANGED\n");
}

#[test]
fn a_workspace_removed_and_recreated_is_refused() {
    for mode in ["read-only", "workspace-write"] {
        let fx = Fixture::new();
        let c = fx.confine(&["--mode", mode, "--", "sh", "-c", "echo RAN"]);
        assert_eq!(c["binding"]["cwd"]["state"], "bound");
        assert_eq!(
            c["binding"]["cwd"]["inode"],
            std::fs::metadata(&fx.ws).unwrap().ino()
        );
        std::fs::remove_dir(&fx.ws).unwrap();
        std::fs::create_dir(&fx.ws).unwrap();
        let out = spawn_argv(&c);
        assert_refused(&c, &out, "the working directory");
        assert!(runner_failure_line(&out).contains("was replaced"));
        // Control: confined again in the new directory, it runs.
        let out = spawn_argv(&fx.confine(&["--mode", mode, "--", "sh", "-c", "echo RAN"]));
        assert_code(&out, 0);
        assert_eq!(text(&out.stdout), "RAN\n", "{mode}");
    }
}

#[test]
fn a_replaced_path_directory_or_a_program_planted_earlier_on_path_is_refused() {
    let fx = Fixture::new();
    let bin = fx.ws.join("bin");
    std::fs::create_dir(&bin).unwrap();
    script(&bin.join("tool"), "#!/bin/sh\necho approved\n");
    let path = format!("PATH={}:/usr/bin:/bin", bin.display());
    let confine = || fx.confine(&["--env", &path, "--", "tool"]);
    let c = confine();
    assert_eq!(
        c["binding"]["executable"]["path"],
        bin.join("tool").display().to_string()
    );
    // The PATH directory itself is replaced by another holding another `tool`.
    std::fs::rename(&bin, fx.ws.join("bin.old")).unwrap();
    std::fs::create_dir(&bin).unwrap();
    script(&bin.join("tool"), "#!/bin/sh\necho planted\n");
    let out = spawn_argv(&c);
    assert_refused(&c, &out, "tool resolved to");
    let out = spawn_argv(&confine());
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "planted\n");

    // A program of the same name planted in an earlier PATH entry.
    let early = fx.ws.join("early");
    std::fs::create_dir(&early).unwrap();
    let path = format!("PATH={}:{}", early.display(), bin.display());
    let confine = || fx.confine(&["--env", &path, "--", "tool"]);
    let c = confine();
    script(&early.join("tool"), "#!/bin/sh\necho shadow\n");
    let out = spawn_argv(&c);
    let line = assert_refused(&c, &out, "tool resolved to");
    assert!(
        line.contains(&early.join("tool").display().to_string()),
        "{line}"
    );
    let out = spawn_argv(&confine());
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "shadow\n");

    // A name that resolved to nothing must still resolve to nothing.
    let confine = || fx.confine(&["--env", &path, "--", "later"]);
    let c = confine();
    assert_eq!(c["binding"]["executable"]["state"], "not-found");
    let out = spawn_argv(&c);
    assert_code(&out, 127);
    let c = confine();
    script(&early.join("later"), "#!/bin/sh\necho appeared\n");
    let out = spawn_argv(&c);
    assert_refused(&c, &out, "nothing (not found) then");
}

#[test]
fn with_an_inherited_cwd_the_executable_binding_still_holds_from_where_it_is_spawned() {
    let fx = Fixture::new();
    script(&fx.ws.join("tool"), "#!/bin/sh\necho approved\n");
    let elsewhere = fx.ws.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    script(&elsewhere.join("tool"), "#!/bin/sh\necho other\n");
    let c = fx.confine(&["--inherit-cwd", "--", "./tool"]);
    assert_eq!(c["binding"]["cwd"]["state"], "inherited");
    let spawn_in = |dir: &Path| {
        let argv = confined_argv(&c);
        Command::new(&argv[0])
            .args(&argv[1..])
            .current_dir(dir)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = spawn_in(&elsewhere);
    assert_refused(&c, &out, "./tool resolved to");
    // Control: spawned where the name leads to the approved file, it runs.
    let c = fx.confine(&["--inherit-cwd", "--", "./tool"]);
    let argv = confined_argv(&c);
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(&fx.ws)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "approved\n");
}

/// Python printing `AT_EXECFN`, the name the kernel executed: `/dev/fd/N` when the file
/// was executed from a descriptor, its path otherwise.
const EXECFN: &str = "import ctypes; f = ctypes.CDLL(None).getauxval; \
    f.restype = ctypes.c_ulong; f.argtypes = [ctypes.c_ulong]; \
    print(ctypes.string_at(f(31)).decode())";

#[test]
fn a_binary_is_executed_from_the_verified_descriptor() {
    let fx = Fixture::new();
    // The system's python3 (a binary; a version manager's `python3` is a shim script).
    // Control: outside stockade the kernel names the path.
    let out = Command::new("/usr/bin/python3")
        .args(["-c", EXECFN])
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "/usr/bin/python3\n");
    for mode in ["workspace-write", "danger-full-access"] {
        let out = fx
            .stockade([
                "run",
                "--mode",
                mode,
                "--env",
                "PATH=/usr/bin:/bin",
                "--",
                "python3",
                "-c",
                EXECFN,
            ])
            .output()
            .unwrap();
        assert_code(&out, 0);
        assert!(
            text(&out.stdout).starts_with("/dev/fd/"),
            "{mode}: {}",
            text(&out.stdout)
        );
    }
    // A script under danger-full-access keeps its own name too.
    script(&fx.ws.join("tool"), "#!/bin/sh\necho \"$0\"\n");
    let out = fx
        .stockade(["run", "--mode", "danger-full-access", "--", "./tool"])
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "./tool\n");
}

#[test]
fn a_runs_stream_digests_are_those_of_the_bytes_it_produced() {
    let fx = Fixture::new();
    // More than the kept tail and the spill cap: the digest must cover the whole stream.
    let script = "{ head -c 300000 /dev/urandom; echo end; } | tee out.copy; \
                  { head -c 200000 /dev/urandom; echo end; } | tee err.copy >&2";
    for mode in ["workspace-write", "danger-full-access"] {
        let (out, json) = run_json(&mut fx.stockade([
            "run",
            "--json",
            "--mode",
            mode,
            "--max-output",
            "1K",
            "--max-spill",
            "4K",
            "--",
            "sh",
            "-c",
            script,
        ]));
        assert_code(&out, 0);
        let r = &json["receipt"];
        assert_eq!(r["contract"], 2);
        assert_eq!(r["mode"], mode);
        assert_eq!(r["exitCode"], 0);
        assert_eq!(r["timedOut"], false);
        assert_eq!(r["bindingVerified"], true, "{r}");
        assert_eq!(r["cleanup"]["state"], "proven", "{r}");
        for (stream, copy, len) in [
            ("stdout", "out.copy", 300_004),
            ("stderr", "err.copy", 200_004),
        ] {
            let copy = fx.ws.join(copy);
            assert_eq!(std::fs::metadata(&copy).unwrap().len(), len);
            assert_eq!(r[stream]["sha256"], file_sha256(&copy), "{mode} {stream}");
            assert_eq!(r[stream]["bytes"], len);
            assert_eq!(r[stream]["complete"], true);
            // Only a tail was kept and the spill was dropped: the digest is not theirs.
            assert_eq!(json[stream]["truncated"], true);
            assert!(json[stream]["spillPath"].is_null());
        }
        assert_ne!(r["stdout"]["sha256"], r["stderr"]["sha256"]);
        // The binding the run confined with.
        assert_eq!(r["executable"]["program"], "sh");
        assert_eq!(r["cwd"]["path"], fx.ws.display().to_string());
        assert_eq!(r["requestDigest"].as_str().unwrap().len(), 64);
        assert_eq!(
            r["policyDigest"].is_null(),
            mode == "danger-full-access",
            "{r}"
        );
    }
}

#[test]
fn a_range_that_cannot_be_ended_is_an_unknown_cleanup_and_never_a_clean_success() {
    let fx = Fixture::new();
    let tag = unique_tag("unending");
    let run = |mask: Option<&str>, json: bool| {
        let mut args = vec!["run", "--containment", "subreaper", "--grace", "100ms"];
        if json {
            args.push("--json");
        }
        args.extend(["--", "sh", "-c", "sleep 1000 >/dev/null 2>&1 & exit 0"]);
        fx.stockade_masked(mask, args)
            .env("E2E_TAG", &tag)
            .output()
            .unwrap()
    };
    // The kernel refuses every signal the launcher sends (as for another user's process).
    let out = run(Some("no-kill"), true);
    let left = tagged_processes(&tag);
    kill_tagged(&tag);
    assert_code(&out, 125);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["exitCode"], 0, "{json}");
    let cleanup = &json["receipt"]["cleanup"];
    assert_eq!(cleanup["state"], "unknown", "{json}");
    assert_eq!(cleanup["reason"], "could-not-end");
    assert!(
        cleanup["detail"].as_str().unwrap().contains("sleep 1000"),
        "{cleanup}"
    );
    assert!(!left.is_empty(), "the sleep should still have been running");

    // Without --json: the marker, then the command's own code, and exit 125.
    let out = run(Some("no-kill"), false);
    kill_tagged(&tag);
    assert_code(&out, 125);
    let err = text(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines[lines.len() - 2].starts_with("[sandbox: cleanup unknown (could-not-end): "),
        "{err}"
    );
    assert_eq!(lines[lines.len() - 1], "[exit code: 0]", "{err}");

    // Control: a launcher that may signal ends it, proves the range empty, exits 0.
    let out = run(None, true);
    assert_code(&out, 0);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json["receipt"]["cleanup"],
        serde_json::json!({"state": "proven", "by": "subreaper"})
    );
    assert_eq!(tagged_processes(&tag), vec![]);
}

#[test]
fn processes_kept_on_purpose_are_an_unknown_cleanup_that_keeps_the_exit_code() {
    let fx = Fixture::new();
    let tag = unique_tag("kept");
    let out = fx
        .stockade([
            "run",
            "--keep-background",
            "--",
            "sh",
            "-c",
            "sleep 1000 >/dev/null 2>&1 & exit 3",
        ])
        .env("E2E_TAG", &tag)
        .output()
        .unwrap();
    kill_tagged(&tag);
    assert_code(&out, 3);
    let err = text(&out.stderr);
    assert!(
        err.lines()
            .last()
            .is_some_and(|l| l.starts_with("[sandbox: cleanup unknown (kept): ")),
        "{err}"
    );
    let (out, json) = run_json(
        fx.stockade([
            "run",
            "--json",
            "--keep-background",
            "--",
            "sh",
            "-c",
            "sleep 1000 >/dev/null 2>&1 & exit 0",
        ])
        .env("E2E_TAG", &tag),
    );
    kill_tagged(&tag);
    assert_code(&out, 0);
    assert_eq!(json["receipt"]["cleanup"]["reason"], "kept", "{json}");
    // Control: nothing left behind, nothing kept: proven.
    let (out, json) =
        run_json(&mut fx.stockade(["run", "--json", "--keep-background", "--", "true"]));
    assert_code(&out, 0);
    assert_eq!(json["receipt"]["cleanup"]["state"], "proven", "{json}");
}

#[test]
fn the_binding_holds_through_the_namespace_stage_and_explain_shows_it() {
    // The stage's bind mounts keep device and inode: the file confine saw is the one the
    // runner finds inside (where the stage cannot run, the same holds without it).
    let fx = Fixture::staged();
    script(&fx.ws.join("tool"), "#!/bin/sh\necho approved\n");
    let c = fx.confine(&["--", "./tool"]);
    let request = confined_argv(&c)
        .windows(2)
        .find(|w| w[0] == "--request")
        .map(|w| w[1].clone())
        .unwrap();
    let explained = fx.stockade(["explain", &request]).output().unwrap();
    assert_code(&explained, 0);
    let shown = text(&explained.stdout);
    assert!(
        shown.contains(&format!(
            "bound:       argv[0] resolves to {}",
            fx.ws.join("tool").display()
        )) && shown.contains(&format!("bound:       cwd {}", fx.ws.display())),
        "{shown}"
    );
    let out = spawn_argv(&c);
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "approved\n");
    let c = fx.confine(&["--", "./tool"]);
    let planted = fx.ws.join("planted");
    script(&planted, "#!/bin/sh\necho planted\n");
    std::fs::rename(&planted, fx.ws.join("tool")).unwrap();
    let out = spawn_argv(&c);
    assert_refused(
        &c,
        &out,
        "the executable changed since the command was confined",
    );
}

/// The `#!` window: the runner checks a script, then its interpreter opens it again by
/// name. A racer outside (as another command of the same user could be) exchanges the
/// script with another file on its second open event, so the other content runs. The
/// receipt must never say `bindingVerified: true` for such a run: a script is reported
/// `null` with `bindingUnverifiable` `by-name`, on `stockade run` and on the
/// confine/classify path, with and without the namespace stage; 0 false claims in 100
/// (and in 20 more under `danger-full-access`, where the launcher checks the binding).
/// Controls: the racer does win (the other content runs), and a binary, executed from
/// the verified descriptor, is still reported verified.
#[test]
fn a_script_swapped_after_the_check_is_never_reported_as_verified() {
    let mut swapped = 0;
    let mut false_claims = Vec::new();
    let mut not_by_name = Vec::new();
    let runs = [
        (Fixture::new(), "workspace-write", 50),
        (Fixture::staged(), "workspace-write", 50),
        (Fixture::new(), "danger-full-access", 20),
    ];
    for (fx, mode, count) in runs {
        let (file, other) = (fx.ws.join("tool"), fx.ws.join("other"));
        for _ in 0..count {
            script(&file, "#!/bin/sh\necho checked\n");
            script(&other, "#!/bin/sh\necho other\n");
            let mut racer = Command::new(bin("racer"))
                .args([file.as_os_str(), other.as_os_str(), "2".as_ref()])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let mut ready = String::new();
            let mut lines = std::io::BufReader::new(racer.stdout.take().unwrap());
            std::io::BufRead::read_line(&mut lines, &mut ready).unwrap();
            assert_eq!(ready, "ready\n");
            let (out, json) =
                run_json(&mut fx.stockade(["run", "--json", "--mode", mode, "--", "./tool"]));
            let _ = racer.kill();
            let _ = racer.wait();
            assert_code(&out, 0);
            let r = &json["receipt"];
            let ran = json["stdout"]["text"].as_str().unwrap_or_default();
            if ran == "other\n" {
                swapped += 1;
                if r["bindingVerified"] == true {
                    false_claims.push(r.to_string());
                }
            }
            if !r["bindingVerified"].is_null() || r["bindingUnverifiable"]["status"] != "by-name" {
                not_by_name.push(format!("{mode}: {r}"));
            }
        }
    }
    assert_eq!(
        false_claims,
        Vec::<String>::new(),
        "a swapped script was reported verified ({} of {swapped} swaps)",
        false_claims.len()
    );
    assert_eq!(
        not_by_name,
        Vec::<String>::new(),
        "a script's receipt did not say by-name"
    );
    assert!(swapped > 0, "the racer never won: the test shows nothing");

    let fx = Fixture::new();
    script(&fx.ws.join("tool"), "#!/bin/sh\necho checked\n");
    // The harness path: confine, spawn, classify say the same.
    let c = fx.confine(&["--", "./tool"]);
    let out = spawn_argv(&c);
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "checked\n");
    assert!(
        status_text(&c).ends_with("by-name\n"),
        "{}",
        status_text(&c)
    );
    let v = classify_ok(&fx, &c);
    assert!(v["receipt"]["bindingVerified"].is_null(), "{v}");
    assert_eq!(
        v["receipt"]["bindingUnverifiable"]["status"], "by-name",
        "{v}"
    );

    // Control: a binary is executed from the verified descriptor, and verified.
    for mode in ["workspace-write", "danger-full-access"] {
        let (out, json) =
            run_json(&mut fx.stockade(["run", "--json", "--mode", mode, "--", "true"]));
        assert_code(&out, 0);
        assert_eq!(json["receipt"]["bindingVerified"], true, "{mode}: {json}");
        assert!(
            json["receipt"]["bindingUnverifiable"].is_null(),
            "{mode}: {json}"
        );
    }
    let c = fx.confine(&["--", "true"]);
    assert_code(&spawn_argv(&c), 0);
    let v = classify_ok(&fx, &c);
    assert_eq!(v["receipt"]["bindingVerified"], true, "{v}");
    assert!(v["receipt"]["bindingUnverifiable"].is_null(), "{v}");
}

/// `stockade classify` on a run that exited 0.
fn classify_ok(fx: &Fixture, c: &Value) -> Value {
    let file = fx.outside.join("confined.json");
    std::fs::write(&file, c.to_string()).unwrap();
    let (out, v) = run_json(&mut fx.stockade([
        "classify".as_ref(),
        "--confined".as_ref(),
        file.as_os_str(),
        "--exit-code".as_ref(),
        "0".as_ref(),
    ]));
    assert_code(&out, 0);
    v
}
