//! `stockade serve`: `confine` answered by one kept process, as a provider uses it. Each
//! answer is what `stockade confine` would have printed (its argv confines for real: a
//! write outside is refused, the same write inside succeeds), a refusal is an error line
//! with `confine`'s exit code and the server goes on, and what it cannot read ends it
//! with one `stockade: ` line and 125, as does its own file replaced under it.

mod support;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use support::*;

struct Server {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Server {
    fn start(mut cmd: Command) -> Server {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap());
        Server {
            child,
            input,
            output,
        }
    }

    /// Writes one line and reads one answer (`None`: the server ended instead).
    fn ask_line(&mut self, line: &[u8]) -> Option<Value> {
        self.input.write_all(line).unwrap();
        self.input.write_all(b"\n").unwrap();
        self.input.flush().unwrap();
        let mut answer = String::new();
        if self.output.read_line(&mut answer).unwrap() == 0 {
            return None;
        }
        assert!(answer.ends_with('\n'), "{answer:?}");
        Some(serde_json::from_str(&answer).unwrap())
    }

    fn ask(&mut self, cwd: &std::path::Path, args: &[&str]) -> Value {
        self.ask_line(&request(cwd, args)).expect("an answer")
    }

    /// Ends stdin and collects how the server ended.
    fn finish(self) -> std::process::Output {
        drop(self.input);
        let mut out = self.child.wait_with_output().unwrap();
        let mut rest = Vec::new();
        let mut output = self.output;
        std::io::Read::read_to_end(&mut output, &mut rest).unwrap();
        out.stdout = rest;
        out
    }
}

/// One request line: `stockade confine ARGS` in `cwd`.
fn request(cwd: &std::path::Path, args: &[&str]) -> Vec<u8> {
    json!({ "cwd": cwd, "args": args }).to_string().into_bytes()
}

fn confined(answer: &Value) -> &Value {
    assert!(answer["error"].is_null(), "an error: {answer}");
    &answer["confined"]
}

#[test]
fn each_answer_confines_as_confine_would_and_a_refusal_keeps_the_server_going() {
    let fx = Fixture::new();
    let mut server = Server::start(fx.stockade(["serve"]));
    let outside = fx.outside.join("from-served");
    let write_outside = format!("echo x > {}", outside.display());
    let ask = |server: &mut Server, script: &str| {
        server.ask(&fx.ws, &["--no-stage", "--", "sh", "-c", script])
    };
    // Denied outside, with the positive control inside, from the same server.
    let out = spawn_argv(confined(&ask(&mut server, &write_outside)));
    assert_ne!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("Permission denied"),
        "{}",
        text(&out.stderr)
    );
    assert!(!outside.exists(), "a served argv wrote outside its roots");
    let out = spawn_argv(confined(&ask(&mut server, "echo x > inside && cat inside")));
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "x\n");
    // The request's directory is the workspace, as confine's cwd would be.
    let elsewhere = fx.root.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let c = server.ask(
        &elsewhere,
        &["--no-stage", "--", "sh", "-c", "touch made-here"],
    );
    assert_code(&spawn_argv(confined(&c)), 0);
    assert!(elsewhere.join("made-here").exists());

    // Refusals: what confine refuses, with its line and code; the server goes on.
    let missing = fx.root.join("missing");
    let refusals: [(Vec<u8>, &str); 7] = [
        (
            request(
                &fx.ws,
                &["--mode", "read-only", "--writable", "/x", "--", "true"],
            ),
            "stockade: --writable has no effect",
        ),
        (request(&fx.ws, &["--bogus", "--", "true"]), "--bogus"),
        (request(&missing, &["--", "true"]), "cannot enter"),
        (
            request(std::path::Path::new("relative"), &["--", "true"]),
            "not an absolute path",
        ),
        (b"{\"cwd\": \"/\"}".to_vec(), "not a serve request"),
        (b"ls /".to_vec(), "not a serve request"),
        (request(&fx.ws, &["--help"]), "not confine requests"),
    ];
    for (line, says) in refusals {
        let bad = server.ask_line(&line).unwrap();
        assert_eq!(bad["exitCode"], 125, "{bad}");
        assert!(bad["error"].as_str().unwrap().contains(says), "{bad}");
    }
    // Nothing was prepared for a refusal; the answered requests are all that is there,
    // and the directory made ahead for the next one.
    let (spares, answered): (Vec<_>, Vec<_>) = fx
        .leftover_requests()
        .into_iter()
        .partition(|d| is_spare(d));
    assert_eq!(answered.len(), 3, "{answered:?}");
    assert!(spares.len() <= 1, "{spares:?}");
    let out = spawn_argv(confined(&ask(&mut server, "echo still")));
    assert_eq!(text(&out.stdout), "still\n");
    // Each request's options are its own: a read-only one refuses the write the requests
    // before it could make, and the next request, without options, may make it again.
    let ro = server.ask(
        &fx.ws,
        &[
            "--mode",
            "read-only",
            "--no-stage",
            "--",
            "sh",
            "-c",
            "echo x > ro",
        ],
    );
    assert_ne!(spawn_argv(confined(&ro)).status.code(), Some(0));
    assert!(!fx.ws.join("ro").exists(), "a read-only request wrote");
    assert_code(&spawn_argv(confined(&ask(&mut server, "echo x > ro"))), 0);
    assert!(fx.ws.join("ro").exists());

    let end = server.finish();
    assert_code(&end, 0);
    assert!(end.stderr.is_empty(), "{}", text(&end.stderr));
    assert!(!fx.leftover_requests().iter().any(|d| is_spare(d)));
}

/// A directory made ahead for the next request: its request file there, empty.
fn is_spare(dir: &Path) -> bool {
    std::fs::metadata(dir.join("request")).is_ok_and(|m| m.len() == 0)
}

/// The private directory an answer's ConfinedArgv uses.
fn dir_of(answer: &Value) -> PathBuf {
    let status = confined(answer)["statusPath"].as_str().unwrap();
    Path::new(status).parent().unwrap().to_path_buf()
}

/// The spare the server makes after it answered (it writes the answer first).
fn spare_after(fx: &Fixture, known: &[&PathBuf]) -> PathBuf {
    for _ in 0..1000 {
        let found = fx
            .leftover_requests()
            .into_iter()
            .find(|d| !known.contains(&d) && is_spare(d));
        if let Some(found) = found {
            return found;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("no directory was made ahead: {:?}", fx.leftover_requests());
}

#[test]
fn the_next_requests_directory_is_made_ahead_and_taken_only_as_it_was_made() {
    let fx = Fixture::new();
    let mut server = Server::start(fx.stockade(["serve"]));
    let script = |s: &str| ["--no-stage", "--", "sh", "-c", s].map(String::from);
    let ask = |server: &mut Server, s: &str| {
        let args = script(s);
        server.ask(&fx.ws, &args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let first = ask(&mut server, "true");
    let d1 = dir_of(&first);
    let s1 = spare_after(&fx, &[&d1]);
    // The next request takes it, and its argv confines: a write outside is refused, the
    // same write inside (from the next spare) succeeds.
    let outside = fx.outside.join("from-a-spare");
    let second = ask(&mut server, &format!("echo x > {}", outside.display()));
    assert_eq!(dir_of(&second), s1);
    let out = spawn_argv(confined(&second));
    assert!(
        text(&out.stderr).contains("Permission denied"),
        "{}",
        text(&out.stderr)
    );
    assert!(!outside.exists(), "a spare's argv wrote outside its roots");
    let s2 = spare_after(&fx, &[&d1, &s1]);
    let third = ask(&mut server, "echo x > inside && cat inside");
    assert_eq!(dir_of(&third), s2);
    let out = spawn_argv(confined(&third));
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "x\n");
    // One changed behind the server's back is not taken (removed; a fresh one is made).
    let s3 = spare_after(&fx, &[&d1, &s1, &s2]);
    std::fs::write(s3.join("request"), "planted").unwrap();
    let fourth = ask(&mut server, "echo y > inside2 && cat inside2");
    assert_ne!(dir_of(&fourth), s3);
    assert!(!s3.exists(), "a changed spare was left");
    let out = spawn_argv(confined(&fourth));
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "y\n");
    // At the end of stdin the spare goes: the answered requests' directories are left.
    assert_code(&server.finish(), 0);
    let left = fx.leftover_requests();
    assert_eq!(left.len(), 4, "{left:?}");
    assert!(!left.iter().any(|d| is_spare(d)), "{left:?}");
}

#[test]
fn a_request_line_too_long_or_cut_short_ends_the_server_with_one_line() {
    let fx = Fixture::new();
    let mut server = Server::start(fx.stockade(["serve"]));
    let long = vec![b'x'; (8 << 20) + 10];
    assert!(server.ask_line(&long).is_none());
    let end = server.finish();
    assert_code(&end, 125);
    assert_eq!(
        launcher_failure_line(&end),
        "stockade: serve: a request line is longer than 8388608 bytes"
    );
    // Control: a request just under the limit is answered (refused as no request).
    let mut server = Server::start(fx.stockade(["serve"]));
    let answer = server.ask_line(&vec![b'x'; (8 << 20) - 10]).unwrap();
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("not a serve request")
    );
    let end = server.finish();
    assert_code(&end, 0);

    // Cut short: stdin ends inside a line.
    let mut server = Server::start(fx.stockade(["serve"]));
    server.input.write_all(b"{\"cwd\":").unwrap();
    let end = server.finish();
    assert_code(&end, 125);
    assert!(end.stdout.is_empty());
    assert_eq!(
        launcher_failure_line(&end),
        "stockade: serve: stdin ended in the middle of a request line"
    );
    assert!(fx.leftover_requests().is_empty());
}

#[test]
fn a_server_whose_file_was_replaced_answers_nothing_more() {
    let fx = Fixture::new();
    let dir = fx.root.join("bin");
    let copy = copy_binary(&stockade_bin(), &dir, "stockade");
    let mut cmd = Command::new(&copy);
    cmd.arg("serve");
    fx.environment(&mut cmd);
    let mut server = Server::start(cmd);
    let c = server.ask(&fx.ws, &["--no-stage", "--", "true"]);
    assert_code(&spawn_argv(confined(&c)), 0);
    // An upgrade puts another file at the path: the server stops rather than hand out
    // argv that would start that file as its own.
    let new = copy_binary(&stockade_bin(), &dir, "stockade.new");
    std::fs::rename(&new, &copy).unwrap();
    assert!(
        server
            .ask_line(
                json!({"cwd": fx.ws, "args": ["--", "true"]})
                    .to_string()
                    .as_bytes()
            )
            .is_none()
    );
    let end = server.finish();
    assert_code(&end, 125);
    assert!(
        launcher_failure_line(&end).contains("replaced while it served"),
        "{}",
        text(&end.stderr)
    );
    assert_eq!(fx.leftover_requests().len(), 1);
}

#[test]
fn a_raw_device_that_appears_while_the_server_lives_is_hidden_from_the_next_command() {
    if !stockade_tests::is_root() {
        // Making a node needs root.
        eprintln!("SKIPPED (needs root to make a device node): a_raw_device_that_appears");
        return;
    }
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    // A new name for an existing raw character device (a virtual console's screen), made
    // while the server runs, after it answered once: nothing the server kept from the
    // first request may let the next command read it (only the standard devices may be
    // read: stockade_policy::devices).
    let Some(model) = std::fs::read_dir("/dev").unwrap().flatten().find(|e| {
        e.file_name().to_string_lossy().starts_with("vcs")
            && e.file_type().is_ok_and(|t| t.is_char_device())
            && std::fs::File::open(e.path()).is_ok()
    }) else {
        eprintln!("SKIPPED (no openable /dev/vcs*): a_raw_device_that_appears");
        return;
    };
    let rdev = model.metadata().unwrap().rdev();
    let fx = Fixture::new();
    let mut server = Server::start(fx.stockade(["serve"]));
    let read = |answer: &Value| spawn_argv(confined(answer));
    let node = std::path::PathBuf::from(format!("/dev/stockade-serve-{}", std::process::id()));
    let script = format!("exec 3< {} && echo opened", node.display());
    let first = server.ask(&fx.ws, &["--no-stage", "--", "sh", "-c", "true"]);
    assert_code(&read(&first), 0);
    let (major, minor) = (
        ((rdev >> 8) & 0xfff) | ((rdev >> 32) & !0xfff),
        (rdev & 0xff) | ((rdev >> 12) & !0xff),
    );
    let made = Command::new("mknod")
        .args(["-m", "0600"])
        .arg(&node)
        .args(["c", &major.to_string(), &minor.to_string()])
        .status()
        .unwrap();
    assert!(made.success());
    struct Remove(std::path::PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let _remove = Remove(node.clone());
    let hidden = read(&server.ask(&fx.ws, &["--no-stage", "--", "sh", "-c", &script]));
    assert_ne!(hidden.status.code(), Some(0));
    assert!(
        text(&hidden.stderr).contains("Permission denied"),
        "{}",
        text(&hidden.stderr)
    );
    // Control: the same open with the default hidden paths off reaches the device.
    let shown = read(&server.ask(
        &fx.ws,
        &["--no-stage", "--no-default-hide", "--", "sh", "-c", &script],
    ));
    assert_code(&shown, 0);
    assert_eq!(text(&shown.stdout), "opened\n");
    server.finish();
}
