//! `--allow-dns`: name resolution with the network denied, over TCP port 53.
//!
//! The test makes its own resolver: a DNS server on 127.0.0.77:53 (TCP) that answers
//! every A query with 192.0.2.55, and a mount namespace (made with `unshare` around
//! `stockade run`) in which `/etc/resolv.conf` names it. Nothing leaves the machine.
//! Binding port 53 and mounting need root.

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Output};
use support::*;

const SERVER: &str = "127.0.0.77";
const ANSWER: [u8; 4] = [192, 0, 2, 55];

/// Every name the server was asked about, in order.
static QUERIES: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Answers DNS over TCP: A queries with [`ANSWER`], anything else with no answer; each
/// question's name goes to [`QUERIES`]. Started once per test process.
fn dns_server() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(start_dns_server);
}

fn start_dns_server() {
    let listener = TcpListener::bind((SERVER, 53)).expect("bind 127.0.0.77:53");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut s = stream;
                loop {
                    let mut len = [0u8; 2];
                    if s.read_exact(&mut len).is_err() {
                        return;
                    }
                    let mut q = vec![0u8; u16::from_be_bytes(len) as usize];
                    if s.read_exact(&mut q).is_err() || q.len() < 12 {
                        return;
                    }
                    // The question: the name's labels, then type and class.
                    let mut end = 12;
                    while end < q.len() && q[end] != 0 {
                        end += 1 + q[end] as usize;
                    }
                    let question = &q[12..(end + 5).min(q.len())];
                    let mut labels = Vec::new();
                    let mut at = 12;
                    while at < end && at < q.len() {
                        let len = q[at] as usize;
                        let label = q.get(at + 1..at + 1 + len).unwrap_or_default();
                        labels.push(String::from_utf8_lossy(label).into_owned());
                        at += 1 + len;
                    }
                    QUERIES.lock().unwrap().push(labels.join("."));
                    let qtype = u16::from_be_bytes([q[end + 1], q[end + 2]]);
                    let a = qtype == 1;
                    let mut r = vec![q[0], q[1], 0x81, 0x80, 0, 1, 0, a as u8, 0, 0, 0, 0];
                    r.extend_from_slice(question);
                    if a {
                        r.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]);
                        r.extend_from_slice(&ANSWER);
                    }
                    let mut framed = (r.len() as u16).to_be_bytes().to_vec();
                    framed.extend_from_slice(&r);
                    if s.write_all(&framed).is_err() {
                        return;
                    }
                }
            });
        }
    });
}

/// `stockade ARGS` as the fixture would run it, inside a mount namespace whose
/// `/etc/resolv.conf` names the test's server.
fn with_resolver(fx: &Fixture, args: &[&str]) -> Output {
    with_resolv_conf(fx, &format!("nameserver {SERVER}\n"), args)
}

/// `stockade ARGS` inside a mount namespace whose `/etc/resolv.conf` is `conf`.
fn with_resolv_conf(fx: &Fixture, conf: &str, args: &[&str]) -> Output {
    let resolv = fx.outside.join("resolv.conf");
    std::fs::write(&resolv, conf).unwrap();
    let inner = fx.stockade(args);
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg("mount --bind \"$0\" /etc/resolv.conf && exec \"$@\"")
        .arg(&resolv)
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
    cmd.output().unwrap()
}

#[test]
fn allow_dns_resolves_names_over_tcp_and_opens_nothing_else() {
    if !stockade_tests::is_root() {
        eprintln!("SKIPPED (needs root): allow_dns_resolves_names_over_tcp_and_opens_nothing_else");
        return;
    }
    dns_server();
    let fx = Fixture::new();
    let getent = ["--", "getent", "ahostsv4", "pypi.test"];
    // Denied network: the resolver's socket is refused, the name does not resolve.
    let mut args = vec!["run"];
    args.extend(getent);
    let out = with_resolver(&fx, &args);
    assert_code(&out, 2);
    assert!(!text(&out.stdout).contains("192.0.2.55"));
    // --allow-dns: resolved over TCP through the server.
    let mut args = vec!["run", "--allow-dns"];
    args.extend(getent);
    let out = with_resolver(&fx, &args);
    assert_code(&out, 0);
    assert!(
        text(&out.stdout).contains("192.0.2.55"),
        "{}",
        text(&out.stdout)
    );
    // Without RES_OPTIONS=use-vc the same port does not help: glibc asks over UDP, which
    // stays refused. (What --allow-dns adds besides the port.)
    let mut args = vec!["run", "--allow-tcp-connect", "53"];
    args.extend(getent);
    let out = with_resolver(&fx, &args);
    assert_code(&out, 2);
    // Port 53 only: another port stays refused (Landlock answers before any routing).
    let attack = bin("attack");
    let out = fx
        .stockade([
            "run",
            "--allow-dns",
            "--",
            attack.to_str().unwrap(),
            "tcp-connect",
            "54",
        ])
        .output()
        .unwrap();
    assert_eq!(text(&out.stdout).trim(), "errno EACCES");
    let out = fx
        .stockade([
            "run",
            "--allow-dns",
            "--",
            attack.to_str().unwrap(),
            "udp-send",
            "53",
        ])
        .output()
        .unwrap();
    assert_eq!(
        text(&out.stdout).trim(),
        "errno EACCES",
        "UDP stays refused"
    );
}

#[test]
fn allow_dns_sets_the_resolver_option_and_is_refused_where_it_means_nothing() {
    let fx = Fixture::new();
    let out = fx
        .stockade([
            "run",
            "--allow-dns",
            "--env",
            "RES_OPTIONS=ndots:2",
            "--",
            "sh",
            "-c",
            "echo \"$RES_OPTIONS\"",
        ])
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "ndots:2 use-vc\n");
    for (flags, names) in [
        (
            &["--allow-dns", "--network", "allow"][..],
            "--network allow",
        ),
        (
            &["--allow-dns", "--allow-domain", "a.test"],
            "--allow-domain",
        ),
        (
            &["--allow-dns", "--mode", "danger-full-access"],
            "--allow-dns",
        ),
    ] {
        let mut args = vec!["run"];
        args.extend(flags);
        args.extend(["--", "touch", "ran"]);
        let out = fx.stockade(&args).output().unwrap();
        assert_code(&out, 125);
        let err = text(&out.stderr);
        assert!(
            err.contains("--allow-dns") && err.contains(names),
            "{flags:?}: {err}"
        );
        assert!(!fx.ws.join("ran").exists());
    }
}

/// The filtering proxy asks the resolver about exactly the name its rules decided on.
/// The C library appends the host's search domains (`search` in `/etc/resolv.conf`) to a
/// name with few dots, and to any name that does not exist: asked for `secret` under
/// `--allow-domain '*'`, the proxy would have reached `secret.corp.test`, past a
/// `--deny-domain secret.corp.test`. Control: the server was asked about `secret`
/// itself (the proxy did resolve), and the deny rule refuses the full name.
#[test]
fn the_proxy_resolves_only_the_name_it_decided_on_not_the_search_domains() {
    const NAME: &str = "the_proxy_resolves_only_the_name_it_decided_on_not_the_search_domains";
    if !stockade_tests::is_root() {
        eprintln!("SKIPPED (needs root): {NAME}");
        return;
    }
    dns_server();
    let fx = Fixture::new();
    let conf = format!("nameserver {SERVER}\nsearch corp.test\noptions use-vc\n");
    let netclient = bin("netclient");
    let netclient = netclient.to_str().unwrap();
    let script =
        format!("{netclient} connect secret 443 x; {netclient} connect secret.corp.test 443 x");
    QUERIES.lock().unwrap().clear();
    let out = with_resolv_conf(
        &fx,
        &conf,
        &[
            "run",
            "--allow-domain",
            "*",
            "--deny-domain",
            "secret.corp.test",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    // Both refused: the first by the address the server gives every name (192.0.2.55,
    // a documentation range), the second by its rule.
    assert_eq!(text(&out.stdout), "403\n403\n", "{}", text(&out.stderr));
    let asked = QUERIES.lock().unwrap().clone();
    assert!(asked.iter().any(|q| q == "secret"), "{asked:?}");
    assert!(
        !asked.iter().any(|q| q.ends_with("corp.test")),
        "the proxy asked about a name it never decided on: {asked:?}"
    );
}
