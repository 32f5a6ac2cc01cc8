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

/// Answers DNS over TCP: A queries with [`ANSWER`], anything else with no answer.
fn dns_server() {
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
    let resolv = fx.outside.join("resolv.conf");
    std::fs::write(&resolv, format!("nameserver {SERVER}\n")).unwrap();
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
