//! Metadata through the descriptors a command inherits. Under the namespace stage,
//! everything outside the writable roots is a read-only mount, but stdin, stdout, stderr
//! and `--keep-fd` descriptors were opened by the caller on its own read-write mounts:
//! through them the command could change the mode, owner and times of what they refer
//! to. The stage opens the caller's terminals again through its read-only view of the
//! host's `/dev/pts` (before its own devpts instance covers it), the runner a directory,
//! harmless device, named pipe or file opened only for reading through the read-only
//! mounts (every metadata change is then `EROFS`), and the runner names any other such
//! descriptor (a file open for writing) in its status record: the run is then
//! `partial`, not `full` (`metadataOpen` in `stockade run --json` and `classify`).
//!
//! Safety: every descriptor given to a command here is on a file or terminal this test
//! made itself, never on `/dev/null` or a real terminal with a command that changes it.

mod support;
use serde_json::{Value, json};
use std::os::fd::IntoRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use support::*;

/// `stockade run --json -- sh -c SCRIPT` in `fx` with `stdin`.
fn run_with_stdin(fx: &Fixture, stdin: Stdio, script: &str) -> Value {
    let (out, json) = run_json(
        fx.stockade(["run", "--json", "--", "sh", "-c", script])
            .stdin(stdin),
    );
    assert_code(&out, 0);
    json
}

/// `stockade classify` of a ConfinedArgv whose argv exited 0.
fn classify_ok(fx: &Fixture, confined: &Value) -> Value {
    let file = fx.root.join(format!("confined-{}.json", unique_tag("c")));
    std::fs::write(&file, confined.to_string()).unwrap();
    let out = fx
        .stockade(["classify", "--confined"])
        .arg(&file)
        .args(["--exit-code", "0"])
        .output()
        .unwrap();
    assert_code(&out, 0);
    serde_json::from_slice(&out.stdout).expect("classify prints JSON")
}

/// Spawns a ConfinedArgv as an executor would, with `stdin` and pipes for stdout and
/// stderr; returns its exit code.
fn spawn_with_stdin(confined: &Value, stdin: Stdio) -> Option<i32> {
    let argv = confined_argv(confined);
    Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(stdin)
        .env_remove("TMPDIR")
        .output()
        .unwrap()
        .status
        .code()
}

/// Makes `file` the command's descriptor `fd` (besides stdin, stdout and stderr).
fn with_fd(cmd: &mut Command, file: std::fs::File, fd: i32) {
    // Moved above the low numbers first: another descriptor's dup2 onto `fd` in the
    // child must not close this one before its own turn.
    // SAFETY: F_DUPFD_CLOEXEC makes a new descriptor this test then owns.
    let raw = unsafe { libc::fcntl(file.into_raw_fd(), libc::F_DUPFD_CLOEXEC, 100) };
    assert!(raw >= 100, "F_DUPFD_CLOEXEC");
    // SAFETY: dup2 and fcntl on descriptors are async-signal-safe and touch no memory.
    unsafe {
        cmd.pre_exec(move || {
            let r = if raw == fd {
                libc::fcntl(fd, libc::F_SETFD, 0)
            } else {
                libc::dup2(raw, fd)
            };
            if r < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// A pseudo-terminal pair of this test's own: the controller and the terminal end.
fn private_terminal() -> (std::fs::File, std::fs::File) {
    use std::os::fd::FromRawFd;
    // SAFETY: posix_openpt returns a new descriptor or -1; grantpt/unlockpt/ptsname_r
    // act on it; ptsname_r writes a NUL-terminated name into the buffer given.
    unsafe {
        let controller = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(controller >= 0, "posix_openpt");
        assert_eq!(libc::grantpt(controller), 0);
        assert_eq!(libc::unlockpt(controller), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(
            libc::ptsname_r(controller, name.as_mut_ptr(), name.len()),
            0
        );
        let controller = std::fs::File::from_raw_fd(controller);
        let path = std::ffi::CStr::from_ptr(name.as_ptr()).to_str().unwrap();
        let terminal = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags_noctty()
            .open(path)
            .unwrap();
        (controller, terminal)
    }
}

trait NoCtty {
    fn custom_flags_noctty(&mut self) -> &mut Self;
}

impl NoCtty for std::fs::OpenOptions {
    fn custom_flags_noctty(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(libc::O_NOCTTY)
    }
}

/// A file outside every writable root, opened for reading and writing: no read-only
/// mount lets it be written, so it is never opened again; the supervisor holds it.
fn open_rw(path: &std::path::Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap()
}

/// Every metadata call the attack helper makes through a descriptor or its name in
/// `/proc` and `/dev`, on descriptor `fd`, with `mode` where one is set.
fn fd_attacks(fd: i32, mode: &str) -> Vec<String> {
    let a = bin("attack");
    let a = a.to_str().unwrap();
    let name = format!("/proc/self/fd/{fd}");
    vec![
        format!("{a} fd-metadata {fd} {mode}"),
        format!("{a} chmod {name} {mode}"),
        format!("{a} chmod /dev/fd/{fd} {mode}"),
        format!("{a} chown-self {name}"),
        format!("{a} touch {name}"),
    ]
}

#[test]
fn files_open_for_writing_outside_the_roots_keep_their_metadata_with_and_without_the_stage() {
    // Stage: the supervisor starts beside it for these descriptors. No stage: the
    // supervisor holds metadata anyway. Either way the same answers, and the run full.
    for fx in [Fixture::staged(), Fixture::new()] {
        let input = fx.outside.join("input");
        std::fs::write(&input, "typed\n").unwrap();
        let log = fx.outside.join("log");
        std::fs::write(&log, "").unwrap();
        let inside = fx.ws.join("inside");
        std::fs::write(&inside, "").unwrap();
        let before = [mode_and_mtime(&input), mode_and_mtime(&log)];
        // stdin: the input, read and write; 5: the log, appending; 6: a file inside the
        // workspace (the control: the same calls succeed); 7: a terminal of the test's.
        let mut attacks: Vec<String> = Vec::new();
        attacks.extend(fd_attacks(5, "600"));
        attacks.extend(fd_attacks(0, "600"));
        attacks.push(format!("{} chmod /dev/stdin 600", bin("attack").display()));
        // Extended attributes are refused in every confined mode, through any name.
        attacks.push(format!(
            "{} setxattr /proc/self/fd/5 user.stockade",
            bin("attack").display()
        ));
        // By its path: under the stage the read-only mount's own answer, as without the
        // supervisor beside it.
        attacks.push(format!(
            "{} chmod {} 600",
            bin("attack").display(),
            input.display()
        ));
        attacks.extend(fd_attacks(6, "640"));
        let script = format!(
            "{}; touch -d @1000000000 /proc/self/fd/5 2>/dev/null || echo refused; \
             chmod 640 /proc/self/fd/5 || echo refused; \
             echo written >&5 && head -n 1 && test -f /dev/stdin && stat -L -c %s /proc/self/fd/5 && \
             test -t 7 && stty -echo <&7 && stty echo <&7 && echo tty-ok",
            attacks.join("; ")
        );
        let (_controller, terminal) = private_terminal();
        let mut cmd = fx.stockade([
            "run",
            "--json",
            "--keep-fd",
            "5",
            "--keep-fd",
            "6",
            "--keep-fd",
            "7",
            "--",
            "sh",
            "-c",
            &script,
        ]);
        cmd.stdin(open_rw(&input));
        let appending = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        with_fd(&mut cmd, appending, 5);
        with_fd(&mut cmd, open_rw(&inside), 6);
        with_fd(&mut cmd, terminal, 7);
        let (out, json) = run_json(&mut cmd);
        assert_code(&out, 0);
        let eperm = "errno EPERM\n".repeat(11);
        let by_path = if fx.stage { "EROFS" } else { "EPERM" };
        let want = format!(
            "{eperm}errno EOPNOTSUPP\nerrno {by_path}\n{}refused\nrefused\ntyped\n8\ntty-ok\n",
            "ok\n".repeat(5)
        );
        assert_eq!(json["stdout"]["text"], want, "staged {}: {json}", fx.stage);
        assert_eq!(json["sandbox"]["enforcement"], "full", "{json}");
        assert!(json["sandbox"].get("metadataOpen").is_none(), "{json}");
        // coreutils' chmod says `Operation not permitted`: the supervisor's refusal,
        // named with the object's path (Unix would have let its owner change it).
        let named =
            json["denials"].as_array().unwrap().iter().any(|d| {
                d["kind"] == "metadata" && d["path"].as_str() == Some(log.to_str().unwrap())
            });
        assert!(named, "no metadata denial names the log: {json}");
        assert_eq!(mode_and_mtime(&input), before[0], "the input changed");
        assert_eq!(
            mode_and_mtime(&log).0,
            before[1].0,
            "the log's mode changed"
        );
        assert_ne!(
            mode_and_mtime(&log).1,
            1_000_000_000,
            "the log's time was set"
        );
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "written\n");
        // The control inside the workspace: changed through its descriptor.
        assert_eq!(mode_and_mtime(&inside).0, 0o640);

        // Unconfined (which closes no descriptor), the very same calls change the log.
        let mut cmd = fx.stockade(["run", "--json", "--mode", "danger-full-access", "--"]);
        cmd.arg(bin("attack")).args(["fd-metadata", "5", "600"]);
        let appending = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        with_fd(&mut cmd, appending, 5);
        let (out, json) = run_json(&mut cmd);
        assert_code(&out, 0);
        assert_eq!(json["stdout"]["text"], "ok\n", "{json}");
        assert_eq!(mode_and_mtime(&log).0, 0o600);
    }
}

#[test]
fn stdout_redirected_to_a_log_outside_the_roots_keeps_its_metadata_on_the_confine_path() {
    // An executor that sends the command's output to a log file outside the workspace
    // spawns the argv with stdout on it; classify then reads the record.
    for fx in [Fixture::staged(), Fixture::new()] {
        let log = fx.outside.join("log");
        std::fs::write(&log, "").unwrap();
        std::fs::set_permissions(&log, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .unwrap();
        let a = bin("attack");
        let a = a.to_str().unwrap();
        let script = format!(
            "{a} chmod /dev/stdout 600; {a} fd-metadata 1 600; {a} touch /proc/self/fd/1; \
             chmod 600 /dev/stdout 2>/dev/null || echo refused; \
             touch -d @1000000000 /dev/stdout 2>/dev/null || echo refused; \
             test -f /dev/stdout && echo done"
        );
        let c = fx.confine(&["--", "sh", "-c", &script]);
        assert_eq!(c["enforcement"], "full", "{c}");
        let argv = confined_argv(&c);
        let out = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(std::fs::OpenOptions::new().append(true).open(&log).unwrap())
            .env_remove("TMPDIR")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "errno EPERM\nerrno EPERM\nerrno EPERM\nrefused\nrefused\ndone\n",
            "staged {}",
            fx.stage
        );
        let (mode, mtime) = mode_and_mtime(&log);
        assert_eq!(mode, 0o644, "the log's mode changed");
        assert_ne!(mtime, 1_000_000_000, "the log's time was set");
        let v = classify_ok(&fx, &c);
        assert_eq!(v["enforcement"], "full", "{v}");
        assert!(v.get("metadataOpen").is_none(), "{v}");
    }
}

#[test]
fn where_the_supervisor_cannot_start_beside_the_stage_the_descriptors_are_named_and_partial() {
    // `no-notify --keep-stage`: the stage runs, the listener is refused (as under
    // another supervisor, or before Linux 5.0): metadata through these descriptors can
    // change, and the run says so.
    let fx = Fixture::staged();
    let outside = fx.outside.join("stdin-file");
    std::fs::write(&outside, "x\n").unwrap();
    let log = fx.outside.join("log");
    std::fs::write(&log, "").unwrap();
    let mut cmd = Command::new(bin("no-notify"));
    cmd.arg("--keep-stage").arg(stockade_bin()).args([
        "run",
        "--json",
        "--keep-fd",
        "5",
        "--",
        "true",
    ]);
    fx.environment(&mut cmd);
    cmd.stdin(open_rw(&outside));
    let log_file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    with_fd(&mut cmd, log_file, 5);
    let (out, json) = run_json(&mut cmd);
    assert_code(&out, 0);
    assert_eq!(json["sandbox"]["enforcement"], "partial", "{json}");
    assert_eq!(
        json["sandbox"]["metadataOpen"],
        json!([{"fd": 0, "kind": "file"}, {"fd": 5, "kind": "file"}]),
        "{json}"
    );
    // The same file opened only for reading is opened again read-only: nothing named,
    // nothing to supervise.
    let mut cmd = Command::new(bin("no-notify"));
    cmd.arg("--keep-stage")
        .arg(stockade_bin())
        .args(["run", "--json", "--", "true"]);
    fx.environment(&mut cmd);
    cmd.stdin(std::fs::File::open(&outside).unwrap());
    let (out, json) = run_json(&mut cmd);
    assert_code(&out, 0);
    assert_eq!(json["sandbox"]["enforcement"], "full", "{json}");
    assert!(json["sandbox"].get("metadataOpen").is_none(), "{json}");
}

/// What the command's `attack fd-metadata 0 600` (fchmod, fchown, futimens on stdin)
/// answered under `stockade run` with `flags`, and the run's `sandbox` object.
fn fd_metadata_on(fx: &Fixture, flags: &[&str], stdin: std::fs::File) -> (String, Value) {
    let mut cmd = fx.stockade(["run", "--json"]);
    cmd.args(flags)
        .arg("--")
        .arg(bin("attack"))
        .args(["fd-metadata", "0", "600"])
        .stdin(stdin);
    let (_, json) = run_json(&mut cmd);
    let answer = json["stdout"]["text"].as_str().unwrap().trim().to_string();
    (answer, json["sandbox"].clone())
}

fn mode_and_mtime(p: &std::path::Path) -> (u32, i64) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p).unwrap();
    (m.mode() & 0o7777, m.mtime())
}

/// Objects of this test's own outside the roots that are opened again read-only: a
/// directory, a file opened for reading, a pseudo-terminal (by the stage), a named pipe,
/// and (as root, who may make one) a private device node with `/dev/null`'s numbers.
/// Each with the path whose mode must not change.
fn reopenable_objects(fx: &Fixture) -> Vec<(&'static str, std::path::PathBuf, std::fs::File)> {
    let mut out = Vec::new();
    let file = fx.outside.join("read-only-file");
    std::fs::write(&file, "x\n").unwrap();
    out.push(("file", file.clone(), std::fs::File::open(&file).unwrap()));
    let dir = fx.outside.join("dir");
    std::fs::create_dir(&dir).unwrap();
    out.push(("directory", dir.clone(), std::fs::File::open(&dir).unwrap()));
    let (controller, terminal) = private_terminal();
    let pts = std::fs::read_link(format!("/proc/self/fd/{}", {
        use std::os::fd::AsRawFd;
        terminal.as_raw_fd()
    }))
    .unwrap();
    std::mem::forget(controller); // the terminal end stays usable while the test runs
    out.push(("terminal", pts, terminal));
    let fifo = fx.outside.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    // Read and write: opening does not wait for the other end.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    out.push(("fifo", fifo, f));
    let node = fx.outside.join("null-node");
    let c = std::ffi::CString::new(node.to_str().unwrap()).unwrap();
    // SAFETY: mknod reads a NUL-terminated path; a private node with /dev/null's numbers.
    if unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) } == 0 {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&node)
            .unwrap();
        out.push(("device", node, f));
    }
    out
}

#[test]
fn metadata_through_a_directory_file_device_terminal_or_fifo_outside_the_roots_is_read_only() {
    let fx = Fixture::staged();
    for (what, path, file) in reopenable_objects(&fx) {
        let before = mode_and_mtime(&path);
        let (answer, sandbox) = fd_metadata_on(&fx, &[], file.try_clone().unwrap());
        assert_eq!(answer, "errno EROFS", "{what}: {sandbox}");
        assert_eq!(sandbox["enforcement"], "full", "{what}: {sandbox}");
        assert!(sandbox.get("metadataOpen").is_none(), "{what}: {sandbox}");
        // The same through the descriptor's name in /proc.
        let (out, json) = run_json(
            fx.stockade([
                "run",
                "--json",
                "--",
                "sh",
                "-c",
                "chmod 600 /proc/self/fd/0 || echo refused",
            ])
            .stdin(file.try_clone().unwrap()),
        );
        assert_code(&out, 0);
        assert_eq!(json["stdout"]["text"], "refused\n", "{what}: {json}");
        assert_eq!(mode_and_mtime(&path), before, "{what} changed");
    }
    // A kept `O_PATH` descriptor (no fchmod through it, but a chmod through its name).
    use std::os::unix::fs::OpenOptionsExt;
    let before = mode_and_mtime(&fx.outside);
    let path_only = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(&fx.outside)
        .unwrap();
    let script = "chmod 700 /proc/self/fd/5 || echo refused";
    let mut cmd = fx.stockade(["run", "--json", "--keep-fd", "5", "--", "sh", "-c", script]);
    with_fd(&mut cmd, path_only, 5);
    let (out, json) = run_json(&mut cmd);
    assert_code(&out, 0);
    assert_eq!(json["stdout"]["text"], "refused\n", "{json}");
    assert_eq!(json["sandbox"]["enforcement"], "full", "{json}");
    assert_eq!(
        mode_and_mtime(&fx.outside),
        before,
        "the O_PATH directory changed"
    );
}

#[test]
fn without_the_stage_the_supervisor_refuses_them_and_unconfined_they_change() {
    // Without the stage's read-only mounts the runner's supervisor judges the object a
    // descriptor holds (tests/tests/supervised_metadata.rs): refused outside the roots.
    let fx = Fixture::staged();
    for (what, path, file) in reopenable_objects(&fx) {
        let before = mode_and_mtime(&path);
        let (answer, sandbox) = fd_metadata_on(&fx, &["--no-stage"], file);
        assert_eq!(answer, "errno EPERM", "{what}");
        assert_eq!(mode_and_mtime(&path), before, "{what}");
        assert_eq!(sandbox["enforcement"], "full", "{what}: {sandbox}");
    }
    // The control: unconfined, the very same calls change this test's objects.
    let fx = Fixture::staged();
    for (what, path, file) in reopenable_objects(&fx) {
        let (answer, _) = fd_metadata_on(&fx, &["--mode", "danger-full-access"], file);
        assert_eq!(answer, "ok", "{what}");
        assert_eq!(mode_and_mtime(&path).0, 0o600, "{what}");
    }
}

#[test]
fn a_terminal_opened_again_still_reads_writes_and_takes_modes() {
    use std::io::Write;
    let fx = Fixture::staged();
    let (mut controller, terminal) = private_terminal();
    controller.write_all(b"typed\n").unwrap();
    // stockade run (which captures stdout and stderr): the terminal as stdin and kept
    // descriptor 5. Terminal modes (tcsetattr through stty), isatty, stat, a read, a
    // write: what a command run from a terminal does with it.
    let script = "test -t 0 && test -t 5 && test -c /dev/stdin && stty -echo && stty echo && \
                  head -n 1 && echo written >&5 && echo tty-ok";
    let mut cmd = fx.stockade(["run", "--json", "--keep-fd", "5", "--", "sh", "-c", script]);
    cmd.stdin(terminal.try_clone().unwrap());
    with_fd(&mut cmd, terminal.try_clone().unwrap(), 5);
    let (out, json) = run_json(&mut cmd);
    assert_code(&out, 0);
    assert_eq!(json["stdout"]["text"], "typed\ntty-ok\n", "{json}");
    assert_eq!(json["sandbox"]["enforcement"], "full", "{json}");
    assert!(json["sandbox"].get("metadataOpen").is_none(), "{json}");
    assert!(
        drain(&controller).contains("written"),
        "nothing reached the terminal"
    );

    // The confine path, as an executor started from a terminal spawns it: all three on
    // the terminal; the command's modes and writes work, a chmod through its name fails.
    let pts = std::fs::read_link(format!("/proc/self/fd/{}", {
        use std::os::fd::AsRawFd;
        terminal.as_raw_fd()
    }))
    .unwrap();
    let before = mode_and_mtime(&pts);
    let script = "test -t 0 && test -t 1 && stty sane && echo on-terminal && \
                  ! chmod 600 /proc/self/fd/1 2>/dev/null && ! touch -d @1000000000 /dev/stderr 2>/dev/null";
    let c = fx.confine(&["--", "sh", "-c", script]);
    let argv = confined_argv(&c);
    let status = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(terminal.try_clone().unwrap())
        .stdout(terminal.try_clone().unwrap())
        .stderr(terminal.try_clone().unwrap())
        .env_remove("TMPDIR")
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0), "{}", drain(&controller));
    assert!(drain(&controller).contains("on-terminal"));
    // A write to a terminal moves its modification time on its own (at the kernel's
    // coarse steps), so the attack sets a time of its own that no write could give.
    let (mode, mtime) = mode_and_mtime(&pts);
    assert_eq!(mode, before.0, "the terminal's mode changed");
    assert_ne!(mtime, 1_000_000_000, "the terminal's time was set");
    let v = classify_ok(&fx, &c);
    assert_eq!(v["enforcement"], "full", "{v}");
    assert!(v.get("metadataOpen").is_none(), "{v}");
}

/// Everything the terminal's controller can read now, as text.
fn drain(controller: &std::fs::File) -> String {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    // SAFETY: F_SETFL on a descriptor this test holds.
    unsafe { libc::fcntl(controller.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    let mut reader = controller;
    while let Ok(n) = reader.read(&mut buf) {
        if n == 0 {
            break;
        }
        all.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&all).into_owned()
}

#[test]
fn a_file_opened_again_is_read_from_the_callers_offset_and_can_be_seeked_and_stat() {
    use std::io::{Read, Seek};
    let fx = Fixture::staged();
    let path = fx.outside.join("input");
    std::fs::write(&path, "first\nsecond\nthird\n").unwrap();
    let mut file = std::fs::File::open(&path).unwrap();
    let mut first = [0u8; 6];
    file.read_exact(&mut first).unwrap();
    // The command reads on from where the caller was, seeks back (tail of a seekable
    // input), and sees a regular file of the right size.
    let script = "head -n 1; test -f /dev/stdin && stat -L -c %s /dev/stdin && tail -c 6";
    let json = run_with_stdin(&fx, file.try_clone().unwrap().into(), script);
    assert_eq!(json["stdout"]["text"], "second\n19\nthird\n", "{json}");
    assert_eq!(json["sandbox"]["enforcement"], "full", "{json}");
    assert!(json["sandbox"].get("metadataOpen").is_none(), "{json}");
    // The caller's own offset is its own: the command's reads did not move it.
    assert_eq!(file.stream_position().unwrap(), 6);
}

#[test]
fn pipes_files_in_the_workspace_and_a_null_stdin_keep_metadata_enforced() {
    let fx = Fixture::staged();
    let inside = fx.ws.join("stdin-file");
    std::fs::write(&inside, "x\n").unwrap();
    let inside_dir = std::fs::File::open(&fx.ws).unwrap();
    // stdin: a file beneath the workspace, a pipe, /dev/null (read only: the command
    // given it never changes anything), each with stdout and stderr pipes (--json).
    for (what, stdin) in [
        (
            "file inside",
            Stdio::from(std::fs::File::open(&inside).unwrap()),
        ),
        ("pipe", Stdio::piped()),
        ("null", Stdio::null()),
    ] {
        let mut cmd = fx.stockade(["run", "--json", "--keep-fd", "5", "--", "true"]);
        cmd.stdin(stdin);
        with_fd(&mut cmd, inside_dir.try_clone().unwrap(), 5);
        let (out, json) = run_json(&mut cmd);
        assert_code(&out, 0);
        assert_eq!(json["sandbox"]["enforcement"], "full", "{what}: {json}");
        assert!(
            json["sandbox"].get("metadataOpen").is_none(),
            "{what}: {json}"
        );
    }
    // The confine path with the executor's usual stdin.
    let c = fx.confine(&["--", "true"]);
    assert_eq!(spawn_with_stdin(&c, Stdio::null()), Some(0));
    let v = classify_ok(&fx, &c);
    assert_eq!(v["enforcement"], "full", "{v}");
    assert!(v.get("metadataOpen").is_none(), "{v}");
}

#[test]
fn without_the_stage_nothing_is_named_since_the_supervisor_holds_them() {
    // The runner looks only where the mounts would hold metadata: without the stage the
    // supervisor judges every descriptor's object, and the run is full.
    let fx = Fixture::new();
    let outside = fx.outside.join("stdin-file");
    std::fs::write(&outside, "x\n").unwrap();
    let json = run_with_stdin(&fx, std::fs::File::open(&outside).unwrap().into(), "true");
    assert_eq!(json["sandbox"]["enforcement"], "full", "{json}");
    assert!(json["sandbox"].get("metadataOpen").is_none(), "{json}");
}

#[test]
fn a_null_stdin_still_reads_as_empty_and_output_still_flows() {
    let fx = Fixture::staged();
    // What commands do with their stdio keeps working: read to end of file, write.
    let script = "cat; if read line; then echo got; else echo eof; fi; echo out; echo err >&2";
    let json = run_with_stdin(&fx, Stdio::null(), script);
    assert_eq!(json["stdout"]["text"], "eof\nout\n", "{json}");
    assert_eq!(json["stderr"]["text"], "err\n", "{json}");
    // A workspace file as stdin is read as it is.
    std::fs::write(fx.ws.join("in"), "line\n").unwrap();
    let json = run_with_stdin(
        &fx,
        std::fs::File::open(fx.ws.join("in")).unwrap().into(),
        "cat",
    );
    assert_eq!(json["stdout"]["text"], "line\n", "{json}");
}

#[test]
fn a_device_outside_the_roots_that_is_not_opened_again_keeps_its_metadata() {
    // A device node of the test's own with a serial line's numbers (never opened: a
    // path-only descriptor), kept as descriptor 5. No device but the harmless ones and
    // pseudo-terminals is opened again (opening can have effects of its own), so under
    // the stage the supervisor holds it, and without the stage it always does.
    if !stockade_tests::is_root() {
        eprintln!(
            "SKIPPED (needs root to make a device node): a_device_outside_the_roots_that_is_not_opened_again_keeps_its_metadata"
        );
        return;
    }
    use std::os::unix::fs::OpenOptionsExt;
    for fx in [Fixture::staged(), Fixture::new()] {
        let node = fx.outside.join("serial-node");
        let c = std::ffi::CString::new(node.to_str().unwrap()).unwrap();
        // SAFETY: mknod reads a NUL-terminated path.
        let made = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o620, libc::makedev(4, 64)) };
        assert_eq!(made, 0, "mknod");
        let path_only = || {
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH)
                .open(&node)
                .unwrap()
        };
        let before = mode_and_mtime(&node);
        let a = bin("attack");
        let a = a.to_str().unwrap();
        let script = format!(
            "{a} chmod /proc/self/fd/5 600; {a} chown-self /dev/fd/5; {a} touch /proc/self/fd/5; \
             chmod 600 /proc/self/fd/5 2>/dev/null || echo refused; test -c /proc/self/fd/5 && echo stat-ok"
        );
        let mut cmd = fx.stockade(["run", "--json", "--keep-fd", "5", "--", "sh", "-c", &script]);
        with_fd(&mut cmd, path_only(), 5);
        let (out, json) = run_json(&mut cmd);
        assert_code(&out, 0);
        assert_eq!(
            json["stdout"]["text"], "errno EPERM\nerrno EPERM\nerrno EPERM\nrefused\nstat-ok\n",
            "staged {}: {json}",
            fx.stage
        );
        assert_eq!(json["sandbox"]["enforcement"], "full", "{json}");
        assert!(json["sandbox"].get("metadataOpen").is_none(), "{json}");
        assert_eq!(mode_and_mtime(&node), before, "the device node changed");
        // Unconfined, the same change is made.
        let mut cmd = fx.stockade(["run", "--json", "--mode", "danger-full-access", "--"]);
        cmd.arg(bin("attack"))
            .args(["chmod", "/proc/self/fd/5", "600"]);
        with_fd(&mut cmd, path_only(), 5);
        let (out, json) = run_json(&mut cmd);
        assert_code(&out, 0);
        assert_eq!(json["stdout"]["text"], "ok\n", "{json}");
        assert_eq!(mode_and_mtime(&node).0, 0o600);
    }
}
