//! Everyday work inside the sandbox, each checked against its unconfined control, with
//! and without the namespace stage (as root here, and as an ordinary user under
//! `tests/unprivileged`), beside the attack test of each relaxation it needs:
//! - a command's own loopback (the stage's network namespace of its own): a server and
//!   a client in one command work; the host's loopback services stay out of reach;
//! - a private `/dev/shm`: a `multiprocessing` pool works; the host's shared memory is
//!   out of sight and nothing the command puts there reaches it;
//! - a private devpts instance: `script` and Python's `pty` work; the host's terminals
//!   are not there to open;
//! - System V IPC in the stage's IPC namespace: the command's own queues work; the
//!   host's are out of sight; POSIX message queues stay refused;
//! - git in the workspace: commits (an existing hook runs) and branches work; a write to
//!   the protected `.git/config` is refused and reported as a denial, and works with
//!   `--no-default-protect`; no key and no hook that runs code later can be set;
//! - package managers: `pip install` into a venv and `npm install` from local registries
//!   on loopback, with their names allowed, caches in the workspace (`cargo build` is in
//!   `network_clients.rs`); the user's shared caches stay
//!   unwritable (a poisoned one would run unconfined later).

mod support;
use std::process::{Command, Output, Stdio};
use support::*;

/// Whether the namespace stage can run here (`stockade probe`).
fn stage_available() -> bool {
    let out = Command::new(stockade_bin())
        .args(["probe", "--json"])
        .output()
        .unwrap();
    let p: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    p["kernel"]["namespaces"]["available"] == true
}

/// A staged fixture, or `None` (the test named as skipped) where namespaces cannot be
/// had.
fn staged_or_skip(name: &str) -> Option<Fixture> {
    if stage_available() {
        Some(Fixture::staged())
    } else {
        eprintln!("SKIPPED (no namespaces here): {name} with the stage");
        None
    }
}

/// `stockade run [ARGS] -- python3 -c SCRIPT` in `fx`.
fn python(fx: &Fixture, args: &[&str], script: &str) -> Output {
    fx.stockade(["run"])
        .args(args)
        .args(["--", "python3", "-c", script])
        .output()
        .unwrap()
}

/// The control: `python3 -c SCRIPT` unconfined, in the fixture's workspace and
/// environment.
fn unconfined_python(fx: &Fixture, script: &str) -> Output {
    let mut cmd = Command::new("python3");
    fx.environment(&mut cmd).args(["-c", script]);
    cmd.stdin(Stdio::null()).output().unwrap()
}

#[track_caller]
fn assert_prints(out: &Output, want: &str, what: &str) {
    assert!(
        out.status.success() && text(&out.stdout).contains(want),
        "{what}: expected {want:?} and exit 0, got {:?}\nstdout: {}\nstderr: {}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// A test suite's local server: an HTTP server on the command's own 127.0.0.1 and a
/// client reaching it, in one command.
const LOOPBACK_HTTP: &str = r#"
import http.server, threading, urllib.request
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a): pass
srv = http.server.HTTPServer(("127.0.0.1", 0), Quiet)
threading.Thread(target=srv.serve_forever, daemon=True).start()
r = urllib.request.urlopen("http://127.0.0.1:%d/" % srv.server_port, timeout=30)
print("http", r.status)
"#;

#[test]
fn a_loopback_http_server_and_client_in_one_command_work_under_the_stage() {
    let name = "a_loopback_http_server_and_client_in_one_command_work_under_the_stage";
    let Some(fx) = staged_or_skip(name) else {
        return;
    };
    assert_prints(
        &unconfined_python(&fx, LOOPBACK_HTTP),
        "http 200",
        "control",
    );
    for args in [
        &["--mode", "workspace-write"][..],
        &["--mode", "read-only"],
        // The network by name: clients go to the command's own loopback directly
        // (NO_PROXY), not to the proxy, which refuses loopback as a destination.
        &["--mode", "workspace-write", "--allow-domain", "example.org"],
    ] {
        let out = python(&fx, args, LOOPBACK_HTTP);
        assert_prints(&out, "http 200", &format!("staged {args:?}"));
        assert!(
            !text(&out.stderr).contains("[sandbox:"),
            "{args:?}: a marker on a run that worked: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn without_the_stage_a_loopback_server_is_refused_and_reported() {
    // No namespace of its own: an AF_INET socket would be on the host's network, where
    // neither Landlock (ports, not addresses) nor seccomp can keep it to a loopback of
    // the command's own, so it stays refused, and reported.
    let fx = Fixture::new();
    assert_prints(
        &unconfined_python(&fx, LOOPBACK_HTTP),
        "http 200",
        "control",
    );
    let out = python(&fx, &["--mode", "workspace-write"], LOOPBACK_HTTP);
    let err = text(&out.stderr);
    assert_ne!(
        out.status.code(),
        Some(0),
        "served without the stage: {err}"
    );
    assert!(
        err.contains("Permission denied")
            && err.contains("[sandbox: file access denied under workspace-write mode]"),
        "the refusal is not reported: {err}"
    );
    // Python names no path: the traceback says it was a socket.
    assert!(
        err.contains("[sandbox: socket denied: socket() (allow with --network allow)]"),
        "the refusal is not named: {err}"
    );
}

#[test]
fn a_loopback_allowed_by_rule_is_the_host_s_reached_through_the_proxy() {
    let name = "a_loopback_allowed_by_rule_is_the_host_s_reached_through_the_proxy";
    let Some(fx) = staged_or_skip(name) else {
        return;
    };
    // A service of the host's, on its loopback.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for mut s in listener.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 4\r\n\r\nhost");
        }
    });
    let script = format!(
        r#"
import urllib.request
print(urllib.request.urlopen("http://127.0.0.1:{port}/", timeout=30).read().decode())
"#
    );
    assert_prints(&unconfined_python(&fx, &script), "host", "control");
    let rule = format!("127.0.0.1:{port}");
    let out = python(&fx, &["--allow-domain", &rule], &script);
    assert_prints(&out, "host", "--allow-domain 127.0.0.1:PORT");
    // Without the rule the command's own loopback is the one it reaches: nothing there.
    let out = python(&fx, &["--allow-domain", "example.org"], &script);
    assert_ne!(out.status.code(), Some(0), "reached the host's loopback");
    assert!(
        text(&out.stderr).contains("Connection refused"),
        "{}",
        text(&out.stderr)
    );
}

/// Reaches `127.0.0.1:TCP` and sends one datagram to `127.0.0.1:UDP`, printing what
/// happened to the connection.
fn reach_host_loopback(tcp: u16, udp: u16) -> String {
    format!(
        r#"
import socket
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.sendto(b"from inside", ("127.0.0.1", {udp}))
try:
    socket.create_connection(("127.0.0.1", {tcp}), timeout=30)
    print("reached")
except ConnectionRefusedError:
    print("refused")
names = [l.split(":")[0].strip() for l in open("/proc/self/net/dev").readlines()[2:]]
print("interfaces", sorted(names))
"#
    )
}

#[test]
fn the_host_s_loopback_services_stay_out_of_reach_of_the_command_s_own() {
    let name = "the_host_s_loopback_services_stay_out_of_reach_of_the_command_s_own";
    let Some(fx) = staged_or_skip(name) else {
        return;
    };
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    udp.set_nonblocking(true).unwrap();
    let script = reach_host_loopback(
        tcp.local_addr().unwrap().port(),
        udp.local_addr().unwrap().port(),
    );
    // The control reaches both.
    assert_prints(&unconfined_python(&fx, &script), "reached", "control");
    assert!(tcp.accept().is_ok(), "control: no connection arrived");
    let mut buf = [0u8; 64];
    assert!(udp.recv(&mut buf).is_ok(), "control: no datagram arrived");
    for args in [
        &["--mode", "workspace-write"][..],
        &["--mode", "read-only"],
        &["--mode", "workspace-write", "--allow-domain", "*"],
    ] {
        let out = python(&fx, args, &script);
        assert_prints(&out, "refused", &format!("staged {args:?}"));
        assert!(
            text(&out.stdout).contains("interfaces ['lo']"),
            "{args:?}: {}",
            text(&out.stdout)
        );
        // The command has ended: what it sent was delivered, or never will be.
        assert_eq!(
            tcp.accept().map(drop).map_err(|e| e.kind()),
            Err(std::io::ErrorKind::WouldBlock),
            "{args:?}: the host's TCP listener was reached"
        );
        assert_eq!(
            udp.recv(&mut buf).map(drop).map_err(|e| e.kind()),
            Err(std::io::ErrorKind::WouldBlock),
            "{args:?}: the host's UDP socket got a datagram"
        );
    }
}

/// A `multiprocessing` pool: POSIX semaphores and shared memory in `/dev/shm`.
const POOL: &str = r#"
import multiprocessing
with multiprocessing.Pool(2) as p:
    print("pool", sum(p.map(abs, [-1, -2, -3])))
"#;

#[test]
fn a_multiprocessing_pool_works_under_the_stage() {
    let name = "a_multiprocessing_pool_works_under_the_stage";
    let Some(fx) = staged_or_skip(name) else {
        return;
    };
    assert_prints(&unconfined_python(&fx, POOL), "pool 6", "control");
    for mode in ["workspace-write", "read-only"] {
        assert_prints(&python(&fx, &["--mode", mode], POOL), "pool 6", mode);
    }
}

#[test]
fn without_the_stage_shared_memory_is_refused_and_reported() {
    // Without a tmpfs of its own, /dev/shm is the host's, shared with every process:
    // not granted, and the refusal is reported.
    let fx = Fixture::new();
    assert_prints(&unconfined_python(&fx, POOL), "pool 6", "control");
    let out = python(&fx, &["--mode", "workspace-write"], POOL);
    let err = text(&out.stderr);
    assert_ne!(
        out.status.code(),
        Some(0),
        "a pool without the stage: {err}"
    );
    assert!(
        err.contains("[sandbox: file access denied under workspace-write mode]"),
        "the refusal is not reported: {err}"
    );
    assert!(
        err.contains("[sandbox: device write denied: /dev/shm "),
        "the refusal is not named: {err}"
    );
}

#[test]
fn the_host_s_shared_memory_is_out_of_sight_and_nothing_reaches_it() {
    let name = "the_host_s_shared_memory_is_out_of_sight_and_nothing_reaches_it";
    let Some(fx) = staged_or_skip(name) else {
        return;
    };
    let host = std::path::PathBuf::from(format!("/dev/shm/{}-host", fx.tag));
    let planted = format!("/dev/shm/{}-inside", fx.tag);
    std::fs::write(&host, "another command's").unwrap();
    // Removed however the test ends: /dev/shm is the machine's.
    struct Remove(std::path::PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let _cleanup = (Remove(host.clone()), Remove(planted.clone().into()));
    let script = format!(
        r#"
import os
print("sees host" if os.path.exists("{host}") else "host out of sight")
open("{planted}", "w").write("x")
print("wrote")
"#,
        host = host.display()
    );
    // The control sees it (and its own file is removed again).
    assert_prints(&unconfined_python(&fx, &script), "sees host", "control");
    std::fs::remove_file(&planted).unwrap();
    for mode in ["workspace-write", "read-only"] {
        let out = python(&fx, &["--mode", mode], &script);
        assert_prints(&out, "host out of sight", mode);
        assert!(text(&out.stdout).contains("wrote"), "{mode}");
        assert!(
            !std::path::Path::new(&planted).exists(),
            "{mode}: the command's shared memory reached the host's"
        );
    }
    assert_eq!(std::fs::read_to_string(&host).unwrap(), "another command's");
}

/// Python's `pty`: a child on a terminal of the command's own.
const PTY: &str = r#"
import os, pty
pid, fd = pty.fork()
if pid == 0:
    print("on a terminal", os.isatty(0))
    os._exit(0)
got = b""
while True:
    try:
        chunk = os.read(fd, 100)
    except OSError:
        break
    if not chunk:
        break
    got += chunk
os.waitpid(pid, 0)
print(got.decode().strip())
"#;

#[test]
fn script_and_python_pty_work_under_the_stage() {
    let name = "script_and_python_pty_work_under_the_stage";
    let Some(fx) = staged_or_skip(name) else {
        return;
    };
    let script = |fx: &Fixture, args: &[&str]| {
        fx.stockade(["run"])
            .args(args)
            .args(["--", "script", "-qc", "echo made a terminal", "/dev/null"])
            .output()
            .unwrap()
    };
    let mut control = Command::new("script");
    fx.environment(&mut control)
        .args(["-qc", "echo made a terminal", "/dev/null"]);
    assert_prints(&control.output().unwrap(), "made a terminal", "control");
    assert_prints(
        &unconfined_python(&fx, PTY),
        "on a terminal True",
        "control",
    );
    for mode in ["workspace-write", "read-only"] {
        assert_prints(&script(&fx, &["--mode", mode]), "made a terminal", mode);
        assert_prints(
            &python(&fx, &["--mode", mode], PTY),
            "on a terminal True",
            mode,
        );
    }
    // Without the stage the host's devpts is the only one: no terminal can be made
    // (opening /dev/ptmx is refused and reported).
    let plain = Fixture::new();
    let out = script(&plain, &["--mode", "workspace-write"]);
    assert_ne!(out.status.code(), Some(0), "a terminal without the stage");
    assert!(
        text(&out.stderr).contains(
            "[sandbox: device write denied: /dev/ptmx (allow with the namespace stage, without --no-stage)]\n[sandbox: file access denied under workspace-write mode]"
        ),
        "{}",
        text(&out.stderr)
    );
}

/// A terminal of the host's, as the caller's would be: its master end held here, its
/// name `/dev/pts/N`.
fn host_terminal() -> (std::os::fd::OwnedFd, String) {
    use std::os::fd::FromRawFd;
    // SAFETY: posix_openpt returns a new descriptor or -1; grantpt, unlockpt and ptsname
    // act on that descriptor, and ptsname's static buffer is copied out at once.
    unsafe {
        let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(fd >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
        let master = std::os::fd::OwnedFd::from_raw_fd(fd);
        assert_eq!(libc::grantpt(fd), 0);
        assert_eq!(libc::unlockpt(fd), 0);
        let name = std::ffi::CStr::from_ptr(libc::ptsname(fd));
        (master, name.to_string_lossy().into_owned())
    }
}

#[test]
fn the_host_s_terminals_are_not_there_to_open() {
    let name = "the_host_s_terminals_are_not_there_to_open";
    let Some(fx) = staged_or_skip(name) else {
        return;
    };
    let (_master, slave) = host_terminal();
    let script = format!(
        r#"
import os
try:
    os.close(os.open("{slave}", os.O_RDWR | os.O_NOCTTY))
    print("opened")
except FileNotFoundError:
    print("absent")
"#
    );
    assert_prints(&unconfined_python(&fx, &script), "opened", "control");
    for mode in ["workspace-write", "read-only"] {
        let out = python(&fx, &["--mode", mode], &script);
        assert_prints(&out, "absent", &format!("{mode}: {slave}"));
    }
}

/// `git ARGS` unconfined in `dir`, asserting it worked (the setup and the controls).
fn git(dir: &std::path::Path, args: &[&str]) -> Output {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
    out
}

/// A repository as the workspace, with an identity and a pre-commit hook of its own.
fn repository(fx: &Fixture) {
    git(&fx.ws, &["init", "-q", "-b", "main"]);
    git(&fx.ws, &["config", "user.name", "Tester"]);
    git(&fx.ws, &["config", "user.email", "tester@example.org"]);
    let hook = fx.ws.join(".git/hooks/pre-commit");
    std::fs::write(&hook, "#!/bin/sh\necho ran > hook-ran\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `stockade run --json [ARGS] -- sh -c SCRIPT` in `fx`, parsed.
fn run_json_sh(fx: &Fixture, args: &[&str], script: &str) -> serde_json::Value {
    let mut cmd = fx.stockade(["run", "--json"]);
    cmd.args(args).args(["--", "sh", "-c", script]);
    run_json(&mut cmd).1
}

#[test]
fn git_works_in_the_workspace_and_a_config_write_is_a_reported_denial() {
    let name = "git_works_in_the_workspace_and_a_config_write_is_a_reported_denial";
    let Some(fx) = staged_or_skip(name) else {
        return;
    };
    repository(&fx);
    let ok = |v: &serde_json::Value, what: &str| {
        assert_eq!(v["exitCode"], 0, "{what}: {v}");
        assert_eq!(v["sandbox"]["denied"], false, "{what}: {v}");
    };
    // Ordinary work: a commit (the existing hook runs), a branch.
    let v = run_json_sh(
        &fx,
        &[],
        "echo a > a && git add a && git commit -qm a && git checkout -qb feature && git log --oneline",
    );
    ok(&v, "commit and branch");
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("hook-ran")).unwrap(),
        "ran\n"
    );
    // A config write: refused by the stage's mount and reported as a denial.
    let config = std::fs::read_to_string(fx.ws.join(".git/config")).unwrap();
    for write in [
        "git config user.name Other",
        "git remote add origin https://example.org/r.git",
        "git config core.hooksPath /tmp",
        "git config core.fsmonitor 'touch /tmp/x'",
    ] {
        let v = run_json_sh(&fx, &[], write);
        assert_ne!(v["exitCode"], 0, "{write}: {v}");
        assert_eq!(v["sandbox"]["denied"], true, "{write}: not a denial: {v}");
        let err = v["stderr"]["text"].as_str().unwrap();
        assert!(err.contains("Device or resource busy"), "{write}: {err}");
        // Named: the protected file, and the flag that allows the write.
        let config = fx.ws.join(".git/config");
        let record = &v["denials"][0];
        assert_eq!(record["kind"], "protected-path", "{write}: {v}");
        assert_eq!(record["path"], config.to_str().unwrap(), "{write}: {v}");
        assert_eq!(record["grant"], "--no-default-protect", "{write}: {v}");
    }
    let out = fx
        .stockade(["run", "--", "git", "config", "user.name", "Other"])
        .output()
        .unwrap();
    assert!(
        text(&out.stderr).contains(&format!(
            "[sandbox: protected path write denied: {} (allow with --no-default-protect)]\n[sandbox: file access denied under workspace-write mode]",
            fx.ws.join(".git/config").display()
        )),
        "{}",
        text(&out.stderr)
    );
    // A new hook: refused as well (the hooks directory is read-only).
    let v = run_json_sh(&fx, &[], "printf '#!/bin/sh\n' > .git/hooks/post-checkout");
    assert_eq!(v["sandbox"]["denied"], true, "a new hook: {v}");
    assert!(!fx.ws.join(".git/hooks/post-checkout").exists());
    assert_eq!(
        std::fs::read_to_string(fx.ws.join(".git/config")).unwrap(),
        config,
        "the config changed"
    );
    // Controls: the flag that allows it, and unconfined.
    let v = run_json_sh(&fx, &["--no-default-protect"], "git config user.name Other");
    ok(&v, "--no-default-protect");
    git(
        &fx.ws,
        &["remote", "add", "origin", "https://example.org/r.git"],
    );
    tracking_and_gc(&fx);
    // Without the stage the runner's supervisor holds the config: refused the same
    // way, and named the same way.
    let plain = Fixture::new();
    repository(&plain);
    let v = run_json_sh(&plain, &[], "git config user.name Other");
    assert_ne!(v["exitCode"], 0, "without the stage: {v}");
    assert_eq!(
        v["denials"][0]["kind"], "protected-path",
        "without the stage: {v}"
    );
    // Control: beside it, git works there too.
    ok(
        &run_json_sh(&plain, &[], "echo b > b && git add b && git commit -qm b"),
        "without the stage",
    );
}

/// Branch tracking, `push -u` and `gc` write the config (and `.git/info`) as a side
/// effect and git still exits 0 with a warning: the verdict stays the command's, but
/// each refusal is listed, named and given its grant, and the repository stays sound.
fn tracking_and_gc(fx: &Fixture) {
    let head = git(&fx.ws, &["rev-parse", "HEAD"]);
    let head = text(&head.stdout);
    git(
        &fx.ws,
        &["update-ref", "refs/remotes/origin/main", head.trim()],
    );
    git(&fx.ws, &["init", "-q", "--bare", "up.git"]);
    let setting = |key: &str| {
        let out = Command::new("git")
            .current_dir(&fx.ws)
            .args(["config", key])
            .output()
            .unwrap();
        text(&out.stdout).trim().to_string()
    };
    for (what, script) in [
        ("tracking", "git checkout -qb tracked origin/main"),
        ("push -u", "git push -qu ./up.git tracked"),
        ("gc", "git gc -q"),
    ] {
        let v = run_json_sh(fx, &[], script);
        assert_eq!(v["exitCode"], 0, "{what}: {v}");
        let denials = v["denials"].as_array().unwrap();
        assert!(
            !denials.is_empty(),
            "{what}: the refusal is not listed: {v}"
        );
        for d in denials {
            assert_eq!(d["kind"], "protected-path", "{what}: {v}");
            assert_eq!(d["grant"], "--no-default-protect", "{what}: {v}");
            let path = d["path"].as_str().unwrap();
            assert!(path.contains("/.git/"), "{what}: {path}");
        }
    }
    assert_eq!(setting("branch.tracked.remote"), "", "tracking was saved");
    git(&fx.ws, &["fsck", "--no-dangling"]);
    // Control: with the flag, the same commands save what they set, with nothing refused.
    let v = run_json_sh(
        fx,
        &["--no-default-protect"],
        "git checkout -qb kept origin/main && git push -qu ./up.git kept && git gc -q",
    );
    assert_eq!(v["exitCode"], 0, "control: {v}");
    assert_eq!(v["denials"], serde_json::json!([]), "control: {v}");
    assert_eq!(setting("branch.kept.remote"), "./up.git", "control");
    assert_eq!(setting("branch.kept.merge"), "refs/heads/kept", "control");
}

/// Builds the wheel `stkdemo-0.1.0-py3-none-any.whl` in `dir` (unconfined): its path.
fn wheel(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("stkdemo-0.1.0-py3-none-any.whl");
    let script = format!(
        r#"
import zipfile
files = {{
    "stkdemo/__init__.py": "HI = 'installed from the local index'\n",
    "stkdemo-0.1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: stkdemo\nVersion: 0.1.0\n",
    "stkdemo-0.1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}}
record = "".join(f"{{n}},,\n" for n in files) + "stkdemo-0.1.0.dist-info/RECORD,,\n"
with zipfile.ZipFile("{}", "w") as z:
    for n, t in files.items():
        z.writestr(n, t)
    z.writestr("stkdemo-0.1.0.dist-info/RECORD", record)
"#,
        path.display()
    );
    let out = Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(out.status.success(), "wheel: {}", text(&out.stderr));
    path
}

/// A simple package index on 127.0.0.1 serving `wheel` as `stkdemo`: the port.
fn index(wheel: std::path::PathBuf) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let bytes = std::fs::read(&wheel).unwrap();
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    std::thread::spawn(move || {
        use std::io::{BufRead, BufReader, Write};
        for mut s in listener.incoming().flatten() {
            let mut line = String::new();
            let _ = BufReader::new(&s).read_line(&mut line);
            let path = line.split(' ').nth(1).unwrap_or("").to_string();
            let (kind, body) = if path.starts_with("/simple/stkdemo") {
                let page =
                    format!("<html><body><a href=\"/files/{name}\">{name}</a></body></html>");
                ("text/html", page.into_bytes())
            } else if path == format!("/files/{name}") {
                ("application/octet-stream", bytes.clone())
            } else {
                let _ = s.write_all(b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n");
                continue;
            };
            let head = format!(
                "HTTP/1.0 200 OK\r\nContent-Type: {kind}\r\nCache-Control: max-age=600\r\n\
                 Content-Length: {}\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(&body);
        }
    });
    port
}

#[test]
fn pip_installs_into_a_venv_from_an_allowed_index_with_its_cache_in_the_workspace() {
    for (fx, netns) in domain_fixtures("pip_installs_into_a_venv") {
        let port = index(wheel(&fx.outside));
        // The interpreter itself, not a version manager's shim (pyenv's rehashes its
        // shims after an install, in a directory no confined command may write).
        let py = text(&unconfined_python(&fx, "import sys; print(sys.executable)").stdout)
            .trim()
            .to_string();
        let install = format!(
            "{py} -m venv --without-pip .venv && {py} -m pip --python .venv/bin/python \
             install -q --disable-pip-version-check --trusted-host pypi.test \
             --index-url http://pypi.test:{port}/simple/ stkdemo && \
             .venv/bin/python -c 'import stkdemo; print(stkdemo.HI)' && {py} -m pip cache dir"
        );
        // The name is pinned to the index on loopback, and only it is allowed.
        let rules = [
            "--allow-domain".to_string(),
            format!("pypi.test:{port}"),
            "--allow-domain".into(),
            format!("127.0.0.1:{port}"),
            "--resolve".into(),
            "pypi.test=127.0.0.1".into(),
        ];
        let mut args: Vec<&str> = vec!["--mode", "workspace-write"];
        args.extend(rules.iter().map(String::as_str));
        let v = run_json_sh(&fx, &args, &install);
        assert_eq!(v["exitCode"], 0, "netns {netns}: {v}");
        assert!(
            v["stdout"]["text"]
                .as_str()
                .unwrap()
                .contains("installed from the local index"),
            "netns {netns}: {v}"
        );
        // pip's cache is the workspace's, not the user's.
        let cache = fx.ws.join(".stockade-cache/pip");
        assert!(
            v["stdout"]["text"]
                .as_str()
                .unwrap()
                .contains(&*cache.to_string_lossy()),
            "netns {netns}: pip's cache is not {}: {v}",
            cache.display()
        );
        // Refused without the name: nothing installed, the refusal named.
        std::fs::remove_dir_all(fx.ws.join(".venv")).unwrap();
        let v = run_json_sh(&fx, &["--allow-domain", "example.org"], &install);
        assert_ne!(
            v["exitCode"], 0,
            "netns {netns}: installed without the name: {v}"
        );
        assert!(
            v["network"]["denied"].to_string().contains("pypi.test"),
            "netns {netns}: {v}"
        );
    }
}

#[test]
fn the_user_s_shared_package_caches_cannot_be_poisoned() {
    // A tarball or crate planted in the user's cache would run unconfined at the next
    // unconfined install; inside, those directories are not writable, with or without
    // the stage, whatever the cache variables say.
    let home = std::env::var("HOME").unwrap_or_default();
    if home.is_empty() || !std::path::Path::new(&home).is_dir() {
        eprintln!(
            "SKIPPED (no home directory): the_user_s_shared_package_caches_cannot_be_poisoned"
        );
        return;
    }
    let mut fixtures = vec![Fixture::new()];
    fixtures.extend(staged_or_skip(
        "the_user_s_shared_package_caches_cannot_be_poisoned",
    ));
    for fx in fixtures {
        for cache in [".npm", ".cache/pip", ".cargo/registry"] {
            let dir = std::path::Path::new(&home).join(cache);
            let created = !dir.exists();
            std::fs::create_dir_all(&dir).unwrap();
            let planted = dir.join(format!("{}-planted", fx.tag));
            let script = format!("echo evil > {}", planted.display());
            // Control: unconfined, the user writes there.
            let mut control = Command::new("sh");
            fx.environment(&mut control).args(["-c", &script]);
            assert!(
                control.output().unwrap().status.success(),
                "control {cache}"
            );
            std::fs::remove_file(&planted).unwrap();
            let v = run_json_sh(&fx, &[], &script);
            assert_eq!(
                v["sandbox"]["denied"], true,
                "{cache} (stage {}): {v}",
                fx.stage
            );
            assert!(!planted.exists(), "{cache}: planted in the user's cache");
            if created {
                let _ = std::fs::remove_dir(&dir);
            }
        }
    }
}

/// System V message queues and POSIX message queues through the C library: `own`
/// makes and removes queues of the command's own; `probe KEY NAME` says whether a
/// queue of the host's (System V key KEY, POSIX name NAME) can be opened; `make KEY
/// NAME` and `remove KEY NAME` set such queues up and take them down (the test's own
/// setup, unconfined).
const QUEUES: &str = r#"
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
O_CREAT, O_RDWR, IPC_CREAT, IPC_RMID = 0o100, 2, 0o1000, 0
def sysv(key, flags):
    return libc.msgget(ctypes.c_int(key), ctypes.c_int(flags)), ctypes.get_errno()
def mq(name, flags):
    return libc.mq_open(name.encode(), ctypes.c_int(flags), ctypes.c_uint(0o600), None), ctypes.get_errno()
what = sys.argv[1]
if what == "own":
    q, e = sysv(0, IPC_CREAT | 0o600)
    assert q >= 0, f"msgget: errno {e}"
    assert libc.msgctl(q, IPC_RMID, None) == 0
    print("system v of its own works")
    d, e = mq("/stockade-own", O_CREAT | O_RDWR)
    if d >= 0:
        sent = libc.mq_send(d, b"ping", ctypes.c_size_t(4), ctypes.c_uint(0))
        buf = ctypes.create_string_buffer(65536)
        n = libc.mq_receive(d, buf, ctypes.c_size_t(65536), None)
        e = ctypes.get_errno()
        libc.mq_unlink(b"/stockade-own")
        if sent == 0 and n == 4 and buf.raw[:4] == b"ping":
            print("posix queue works")
        else:
            print(f"posix queue broken: errno {e}")
    else:
        print(f"posix queue refused: errno {e}")
else:
    key, name = int(sys.argv[2]), sys.argv[3]
    if what == "make":
        assert sysv(key, IPC_CREAT | 0o600)[0] >= 0 and mq(name, O_CREAT | O_RDWR)[0] >= 0
    elif what == "remove":
        libc.msgctl(sysv(key, 0)[0], IPC_RMID, None)
        libc.mq_unlink(name.encode())
    else:
        print("system v", "visible" if sysv(key, 0)[0] >= 0 else "absent")
        print("posix", "visible" if mq(name, O_RDWR)[0] >= 0 else "absent")
"#;

/// `python3 -c QUEUES ARGS` unconfined, asserting it worked.
fn queues_unconfined(fx: &Fixture, args: &[&str]) -> Output {
    let mut cmd = Command::new("python3");
    fx.environment(&mut cmd).args(["-c", QUEUES]).args(args);
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    out
}

#[test]
fn system_v_ipc_is_the_command_s_own_under_the_stage() {
    let name = "system_v_ipc_is_the_command_s_own_under_the_stage";
    let Some(fx) = staged_or_skip(name) else {
        return;
    };
    let own = |fx: &Fixture, mode: &str| {
        fx.stockade(["run", "--mode", mode, "--", "python3", "-c", QUEUES, "own"])
            .output()
            .unwrap()
    };
    let control = queues_unconfined(&fx, &["own"]);
    assert_prints(&control, "system v of its own works", "control");
    assert_prints(&control, "posix queue works", "control");
    for mode in ["workspace-write", "read-only"] {
        let out = own(&fx, mode);
        assert_prints(&out, "system v of its own works", mode);
        // POSIX message queues are the command's own where the stage can mount its IPC
        // namespace's queues on /dev/mqueue; elsewhere they stay refused (EPERM: no
        // denial is claimed).
        if has_mqueue_dir() {
            assert_prints(&out, "posix queue works", mode);
        } else {
            eprintln!("{name}: no /dev/mqueue here: POSIX queues checked refused");
            assert_prints(&out, "posix queue refused: errno 1", mode);
        }
    }
    // Without the stage there is no IPC namespace of its own: System V is refused too
    // (EPERM, as the kernel answers an unprivileged process; no denial).
    let out = own(&Fixture::new(), "workspace-write");
    assert_ne!(out.status.code(), Some(0), "System V without the stage");
    assert!(
        text(&out.stderr).contains("msgget: errno 1"),
        "{}",
        text(&out.stderr)
    );
}

/// Whether this machine has `/dev/mqueue` (a directory), where the stage mounts the
/// command's own queues.
fn has_mqueue_dir() -> bool {
    std::path::Path::new("/dev/mqueue")
        .symlink_metadata()
        .is_ok_and(|m| m.is_dir())
}

#[test]
fn another_command_s_message_queue_is_out_of_reach() {
    let name = "another_command_s_message_queue_is_out_of_reach";
    let Some(fx) = staged_or_skip(name) else {
        return;
    };
    if !has_mqueue_dir() {
        eprintln!("SKIPPED (no /dev/mqueue on this machine: POSIX queues are refused): {name}");
        return;
    }
    // The first command makes a queue, says so, and waits (at most 60 s) for the second
    // to have looked; the second looks for it by name and through /dev/mqueue.
    let queue = format!("/{}", fx.tag);
    let (ready, done) = (fx.ws.join("ready"), fx.ws.join("done"));
    let holder = format!(
        "import ctypes, os, time\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         d = libc.mq_open(b'{queue}', ctypes.c_int(0o102), ctypes.c_uint(0o666), None)\n\
         assert d >= 0, ctypes.get_errno()\n\
         open('ready.part', 'w').write(' '.join(os.listdir('/dev/mqueue')))\n\
         os.rename('ready.part', 'ready')\n\
         end = time.time() + 60\n\
         while not os.path.exists('done') and time.time() < end: time.sleep(0.02)\n"
    );
    let mut first = fx
        .stockade(["run", "--", "python3", "-c", &holder])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_file(&ready);
    let listed = std::fs::read_to_string(&ready).unwrap();
    let probe = format!(
        "import ctypes, os\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         d = libc.mq_open(b'{queue}', ctypes.c_int(2), ctypes.c_uint(0), None)\n\
         print('by name', 'visible' if d >= 0 else f'absent errno {{ctypes.get_errno()}}')\n\
         print('listed', sorted(os.listdir('/dev/mqueue')))\n"
    );
    let out = fx
        .stockade(["run", "--", "python3", "-c", &probe])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    std::fs::write(&done, "").unwrap();
    assert!(first.wait().unwrap().success(), "the first command");
    // The control: the first command's queue was there for itself.
    assert_eq!(listed, &queue[1..], "the first command's own /dev/mqueue");
    assert_prints(
        &out,
        "by name absent errno 2\nlisted []",
        "the second command",
    );
}

#[test]
fn the_host_s_message_queues_are_out_of_sight() {
    let name = "the_host_s_message_queues_are_out_of_sight";
    let Some(fx) = staged_or_skip(name) else {
        return;
    };
    let key = (std::process::id() as i32 & 0xffff) | 0x5700_0000;
    let (key, queue) = (key.to_string(), format!("/{}", fx.tag));
    queues_unconfined(&fx, &["make", &key, &queue]);
    let probe = ["probe", key.as_str(), queue.as_str()];
    let seen = queues_unconfined(&fx, &probe);
    let inside = |mode: &str| {
        fx.stockade(["run", "--mode", mode, "--", "python3", "-c", QUEUES])
            .args(probe)
            .output()
            .unwrap()
    };
    let outs: Vec<Output> = ["workspace-write", "read-only"].map(inside).into();
    queues_unconfined(&fx, &["remove", &key, &queue]);
    assert_prints(&seen, "system v visible\nposix visible", "control");
    for out in &outs {
        assert_prints(out, "system v absent\nposix absent", "staged");
    }
}

/// The package `stkdemo` 0.1.0 packed by `npm pack` in `dir` (unconfined): the tarball.
fn npm_package(dir: &std::path::Path) -> std::path::PathBuf {
    let src = dir.join("stkdemo-src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        src.join("package.json"),
        r#"{"name":"stkdemo","version":"0.1.0","main":"index.js"}"#,
    )
    .unwrap();
    std::fs::write(
        src.join("index.js"),
        "module.exports = 'installed from the local registry'\n",
    )
    .unwrap();
    let out = Command::new("npm")
        .args(["pack", "--silent", "--pack-destination"])
        .arg(dir)
        .current_dir(&src)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "npm pack: {}", text(&out.stderr));
    dir.join("stkdemo-0.1.0.tgz")
}

/// An npm registry on 127.0.0.1 serving `tarball` as `stkdemo` 0.1.0, its tarball named
/// `npm.test:PORT`: the port.
fn npm_registry(tarball: std::path::PathBuf) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let bytes = std::fs::read(&tarball).unwrap();
    let packument = format!(
        r#"{{"name":"stkdemo","dist-tags":{{"latest":"0.1.0"}},"versions":{{"0.1.0":{{"name":"stkdemo","version":"0.1.0","dist":{{"tarball":"http://npm.test:{port}/stkdemo/-/stkdemo-0.1.0.tgz"}}}}}}}}"#
    );
    std::thread::spawn(move || {
        use std::io::{BufRead, BufReader, Write};
        for stream in listener.incoming().flatten() {
            let (packument, bytes) = (packument.clone(), bytes.clone());
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                let mut rest = String::new();
                while reader.read_line(&mut rest).unwrap_or(0) > 2 {
                    rest.clear();
                }
                let path = line.split_whitespace().nth(1).unwrap_or("");
                let body = match path {
                    "/stkdemo" => Some(("application/json", packument.into_bytes())),
                    "/stkdemo/-/stkdemo-0.1.0.tgz" => Some(("application/octet-stream", bytes)),
                    _ => None,
                };
                let mut s = stream;
                let _ = match body {
                    Some((kind, b)) => s
                        .write_all(
                            format!(
                                "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                                b.len()
                            )
                            .as_bytes(),
                        )
                        .and_then(|_| s.write_all(&b)),
                    None => s.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    ),
                };
            });
        }
    });
    port
}

#[test]
fn npm_installs_from_an_allowed_registry_with_its_cache_in_the_workspace() {
    for (fx, netns) in domain_fixtures("npm_installs") {
        let port = npm_registry(npm_package(&fx.outside));
        std::fs::write(
            fx.ws.join("package.json"),
            r#"{"name":"app","version":"1.0.0","dependencies":{"stkdemo":"0.1.0"}}"#,
        )
        .unwrap();
        let install = format!(
            "npm install --no-audit --no-fund --registry http://npm.test:{port}/ && \
             node -e \"console.log(require('stkdemo'))\""
        );
        let (tcp, name) = (format!("127.0.0.1:{port}"), format!("npm.test:{port}"));
        let args = [
            "--mode",
            "workspace-write",
            "--allow-domain",
            &tcp,
            "--allow-domain",
            &name,
            "--resolve",
            "npm.test=127.0.0.1",
        ];
        let v = run_json_sh(&fx, &args, &install);
        assert_eq!(v["exitCode"], 0, "netns {netns}: {v}");
        assert!(
            v["stdout"]["text"]
                .as_str()
                .unwrap()
                .contains("installed from the local registry"),
            "netns {netns}: {v}"
        );
        let cache = fx.ws.join(".stockade-cache/npm/_cacache");
        assert!(
            cache.is_dir(),
            "netns {netns}: npm's cache is not in {}",
            cache.display()
        );
    }
}
