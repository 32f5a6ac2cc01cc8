//! Everyday work inside the sandbox, each checked against its unconfined control, with
//! and without the namespace stage (as root here, and as an ordinary user under
//! `tests/unprivileged`), beside the attack test of each relaxation it needs:
//! - a command's own loopback (the stage's network namespace of its own): a server and
//!   a client in one command work; the host's loopback services stay out of reach.

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
