//! The network by name end to end: `--allow-domain` through the filtering proxy, with
//! the namespace stage (the command's network namespace has only loopback) and without
//! it (Landlock allows the proxy's port only).
//!
//! Everything stays on this machine: the test's servers listen on 127.0.0.1, names are
//! pinned to them with `--resolve` (loopback allowed explicitly on their port), and the
//! client inside the sandbox is the `netclient` helper, which finds the proxy through the
//! same variables real clients read.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Command, Output};
use support::*;

/// An echo server on loopback: each connection gets back what it sends.
fn echo_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut s = stream;
                let mut buf = [0u8; 16 * 1024];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || s.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = s.shutdown(Shutdown::Write);
            });
        }
    });
    port
}

/// An HTTP server on loopback: `/redirect` answers 302 to `http://denied.test:PORT/`,
/// everything else 200.
fn http_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                let mut rest = String::new();
                while reader.read_line(&mut rest).unwrap_or(0) > 2 {
                    rest.clear();
                }
                let mut s = stream;
                let answer = if line.contains("/redirect") {
                    format!(
                        "HTTP/1.1 302 Found\r\nLocation: http://denied.test:{port}/\r\nContent-Length: 0\r\n\r\n"
                    )
                } else {
                    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi".to_string()
                };
                let _ = s.write_all(answer.as_bytes());
            });
        }
    });
    port
}

/// The flags that allow `allowed.test` on `port`, pinned to loopback (allowed
/// explicitly on that port, as a pin to a non-public address must be).
fn allow(port: u16) -> Vec<String> {
    vec![
        "--allow-domain".into(),
        format!("allowed.test:{port}"),
        "--allow-domain".into(),
        format!("127.0.0.1:{port}"),
        "--resolve".into(),
        "allowed.test=127.0.0.1".into(),
    ]
}

/// `stockade run FLAGS -- netclient ARGS`, or with `--json`.
fn client(fx: &Fixture, flags: &[String], json: bool, args: &[&str]) -> Command {
    let mut all: Vec<String> = vec!["run".into()];
    if json {
        all.push("--json".into());
    }
    all.extend(flags.iter().cloned());
    all.push("--".into());
    all.push(bin("netclient").to_string_lossy().into_owned());
    all.extend(args.iter().map(|a| a.to_string()));
    fx.stockade(all)
}

fn lines(out: &Output) -> Vec<String> {
    text(&out.stdout).lines().map(str::to_string).collect()
}

#[test]
fn an_allowed_name_is_reached_over_connect_and_socks5_and_a_denied_one_is_refused_and_reported() {
    let port = echo_server();
    let p = port.to_string();
    for (fx, netns) in domain_fixtures("connect_and_socks5") {
        let script = format!(
            "{nc} connect allowed.test {p} hello; {nc} socks allowed.test {p} hi; \
             {nc} connect denied.test {p} x; {nc} socks other.test {p} x; exit 3",
            nc = bin("netclient").display()
        );
        let mut flags = allow(port);
        flags.extend(["--".into(), "sh".into(), "-c".into(), script]);
        let mut all = vec!["run".to_string()];
        all.extend(flags);
        let out = fx.stockade(&all).output().unwrap();
        assert_code(&out, 3);
        assert_eq!(
            lines(&out),
            ["200 echo hello", "0 echo hi", "403", "2"],
            "netns {netns}: {}",
            text(&out.stderr)
        );
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!(
                "[sandbox: network access to denied.test:{p} denied]"
            )) && err.contains(&format!(
                "[sandbox: network access to other.test:{p} denied]"
            )),
            "{err}"
        );
        assert!(!err.contains("file access denied"), "{err}");
        assert!(
            !err.contains("allowed.test:"),
            "an allowed host is not reported: {err}"
        );

        // The same in --json: network.denied, and no file denial.
        let (out, json) = run_json(&mut client(
            &fx,
            &allow(port),
            true,
            &["connect", "denied.test", &p, "x"],
        ));
        assert_code(&out, 0);
        assert_eq!(
            json["network"]["denied"],
            serde_json::json!([{"host": "denied.test", "port": port, "reason": "not-allowed"}]),
            "{json}"
        );
        assert_eq!(json["network"]["moreDenied"], false);
        assert_eq!(json["sandbox"]["denied"], false);
        // The same refusal as a denial record, with the grant that allows it (the
        // allowed name above is that grant applied).
        assert_eq!(
            json["denials"],
            serde_json::json!([{
                "kind": "network-name",
                "host": "denied.test",
                "port": port,
                "rule": "network by name: not in the allowed domains (not-allowed)",
                "grant": "--allow-domain denied.test",
                "alternative": "--network allow",
                "evidence": "proxy"
            }]),
            "{json}"
        );
    }
}

#[test]
fn ip_literals_and_names_that_resolve_to_loopback_are_refused_unless_allowed() {
    let port = echo_server();
    let p = port.to_string();
    let fx = Fixture::new();
    // No address rule: the literal is refused, and `localhost` (which the proxy resolves
    // from the hosts file, to loopback) too.
    let flags: Vec<String> = ["--allow-domain", &format!("localhost:{p}")]
        .map(String::from)
        .to_vec();
    let (_, json) = run_json(&mut client(
        &fx,
        &flags,
        true,
        &["connect", "127.0.0.1", &p, "x"],
    ));
    assert_eq!(json["stdout"]["text"], "403\n", "{json}");
    assert_eq!(
        json["network"]["denied"][0]["reason"], "ip-literal",
        "{json}"
    );
    let (_, json) = run_json(&mut client(
        &fx,
        &flags,
        true,
        &["connect", "localhost", &p, "x"],
    ));
    assert_eq!(json["stdout"]["text"], "403\n", "{json}");
    assert_eq!(
        json["network"]["denied"][0]["reason"], "loopback-address",
        "{json}"
    );
    // Controls: loopback allowed explicitly on that port.
    let mut flags = flags;
    flags.extend(["--allow-domain".into(), format!("127.0.0.0/8:{p}")]);
    for host in ["127.0.0.1", "localhost"] {
        let (_, json) = run_json(&mut client(&fx, &flags, true, &["connect", host, &p, "ok"]));
        assert_eq!(json["stdout"]["text"], "200 echo ok\n", "{host}: {json}");
        assert_eq!(json["network"]["denied"], serde_json::json!([]));
    }
}

#[test]
fn a_redirect_to_a_denied_name_is_refused() {
    let port = http_server();
    let url = format!("http://allowed.test:{port}/");
    let fx = Fixture::new();
    let out = client(&fx, &allow(port), false, &["get", &url])
        .output()
        .unwrap();
    assert_eq!(lines(&out), ["200"], "{}", text(&out.stderr));
    let redirect = format!("http://allowed.test:{port}/redirect");
    let out = client(&fx, &allow(port), false, &["get", &redirect, "follow"])
        .output()
        .unwrap();
    assert_eq!(lines(&out), ["302", "403"], "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(&format!(
            "[sandbox: network access to denied.test:{port} denied]"
        )),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_direct_connection_around_the_proxy_is_refused() {
    let port = echo_server();
    let p = port.to_string();
    for (fx, netns) in domain_fixtures("around_the_proxy") {
        let out = client(&fx, &allow(port), false, &["direct", &p])
            .output()
            .unwrap();
        // Without the namespace Landlock refuses every port but the proxy's; in the
        // namespace, its loopback has nothing on that port (the server is on the host's).
        let want = if netns {
            "errno ECONNREFUSED"
        } else {
            "errno EACCES"
        };
        assert_eq!(lines(&out), [want], "netns {netns}: {}", text(&out.stderr));
        // Control: the same server through the proxy.
        let out = client(
            &fx,
            &allow(port),
            false,
            &["connect", "allowed.test", &p, "x"],
        )
        .output()
        .unwrap();
        assert_eq!(lines(&out), ["200 echo x"], "netns {netns}");
    }
    // Control: with the network allowed the direct connection works.
    let fx = Fixture::new();
    let flags = ["--network".to_string(), "allow".to_string()];
    let out = client(&fx, &flags, false, &["direct", &p])
        .output()
        .unwrap();
    assert_eq!(lines(&out), ["ok"]);
}

#[test]
fn many_parallel_connections_each_get_their_own_bytes() {
    let port = echo_server();
    for (fx, netns) in domain_fixtures("parallel") {
        let out = client(
            &fx,
            &allow(port),
            false,
            &["parallel", "64", "allowed.test", &port.to_string()],
        )
        .output()
        .unwrap();
        assert_eq!(
            lines(&out),
            ["ok 64"],
            "netns {netns}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn bad_input_to_the_proxy_is_answered_without_affecting_other_connections() {
    let port = echo_server();
    for (fx, netns) in domain_fixtures("bad_input") {
        let out = client(
            &fx,
            &allow(port),
            false,
            &["abuse", "allowed.test", &port.to_string()],
        )
        .output()
        .unwrap();
        assert_eq!(
            lines(&out),
            ["garbage 400", "oversized 431", "good 200 echo still served"],
            "netns {netns}: {}",
            text(&out.stderr)
        );
        assert!(
            !text(&out.stderr).contains("[sandbox: network access"),
            "malformed requests are not recorded: {}",
            text(&out.stderr)
        );
    }
}

/// The proxy's port, from the `HTTP_PROXY` a command printed.
fn proxy_port(printed: &str) -> u16 {
    printed
        .lines()
        .find_map(|l| l.strip_prefix("HTTP_PROXY=http://127.0.0.1:"))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no HTTP_PROXY in {printed:?}"))
}

#[test]
fn the_command_gets_the_proxy_variables_and_the_proxy_is_gone_when_it_ends() {
    let fx = Fixture::new();
    let out = fx
        .stockade(["run", "--allow-domain", "example.org", "--", "env"])
        .output()
        .unwrap();
    assert_code(&out, 0);
    let env = text(&out.stdout);
    let port = proxy_port(&env);
    for var in [
        format!("http_proxy=http://127.0.0.1:{port}"),
        format!("HTTPS_PROXY=http://127.0.0.1:{port}"),
        format!("https_proxy=http://127.0.0.1:{port}"),
        format!("ALL_PROXY=socks5h://127.0.0.1:{port}"),
        "NO_PROXY=".into(),
        "no_proxy=".into(),
    ] {
        assert!(env.lines().any(|l| l == var), "{var} missing from {env}");
    }
    // The proxy lived on the host's loopback for the command (no namespace here), and
    // nothing listens there any more.
    let gone = TcpStream::connect(("127.0.0.1", port));
    assert_eq!(
        gone.map(drop).map_err(|e| e.kind()),
        Err(std::io::ErrorKind::ConnectionRefused)
    );
    assert!(fixture_processes(&fx.tag).is_empty());
    // Control: while the command runs, the proxy does listen there.
    let script = "env; sleep 0.2; echo done";
    let mut child = fx
        .stockade([
            "run",
            "--allow-domain",
            "example.org",
            "--",
            "sh",
            "-c",
            script,
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut printed = String::new();
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap() > 0 && !line.starts_with("HTTP_PROXY=") {
        line.clear();
    }
    printed.push_str(&line);
    let port = proxy_port(&printed);
    assert!(TcpStream::connect(("127.0.0.1", port)).is_ok());
    let mut rest = String::new();
    reader.read_to_string(&mut rest).unwrap();
    assert!(rest.contains("done"));
    assert!(child.wait().unwrap().success());
}

#[test]
fn on_the_confine_path_the_proxy_lives_and_dies_with_the_spawned_argv() {
    let port = echo_server();
    let p = port.to_string();
    for (fx, netns) in domain_fixtures("confine_path") {
        let mut args: Vec<String> = allow(port);
        args.extend([
            "--".into(),
            bin("netclient").to_string_lossy().into_owned(),
            "connect".into(),
            "denied.test".into(),
            p.clone(),
            "x".into(),
        ]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let c = fx.confine(&args);
        let argv = confined_argv(&c);
        assert!(argv[1] == "__proxy", "{argv:?}");
        let report = &c["guarantees"]["domainFilter"];
        if netns {
            assert_eq!(report["status"], "enforced", "{c}");
        } else {
            assert_eq!(report["status"], "unavailable", "{c}");
            assert!(report["note"].as_str().unwrap().contains("any host"), "{c}");
            assert_eq!(c["guarantees"]["network"]["status"], "enforced");
        }
        let out = spawn_argv(&c);
        assert_code(&out, 0);
        assert_eq!(lines(&out), ["403"], "{}", text(&out.stderr));
        // classify reads the proxy's record, and the outcome stays the command's.
        let dir = fx.outside.join("c.json");
        std::fs::write(&dir, c.to_string()).unwrap();
        let verdict = fx
            .stockade([
                "classify",
                "--confined",
                dir.to_str().unwrap(),
                "--exit-code",
                "0",
            ])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&verdict.stdout).unwrap();
        assert_eq!(v["outcome"], "ok", "{v}");
        assert_eq!(v["network"]["denied"][0]["host"], "denied.test", "{v}");
        let private = std::path::Path::new(c["statusPath"].as_str().unwrap())
            .parent()
            .unwrap();
        assert!(
            !private.exists(),
            "classify removes the private directory, record included: {:?}",
            std::fs::read_dir(private)
                .map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
        );
    }
}

#[test]
fn an_inherited_environment_gets_the_proxy_variables_over_the_spawners() {
    let fx = Fixture::new();
    let c = fx.confine(&[
        "--inherit-env",
        "--allow-domain",
        "example.org",
        "--",
        "sh",
        "-c",
        "echo \"$HTTPS_PROXY $no_proxy|\"",
    ]);
    let argv = confined_argv(&c);
    // The executor's own proxy settings would lead around the sandbox's proxy.
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .env("HTTPS_PROXY", "http://proxy.corp.example:3128")
        .env("no_proxy", "*")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_code(&out, 0);
    let printed = text(&out.stdout);
    assert!(
        printed.starts_with("http://127.0.0.1:") && printed.ends_with(" |\n"),
        "{printed:?}"
    );
}

#[test]
fn a_proxy_port_taken_since_confine_is_a_runner_failure_and_nothing_runs() {
    let fx = Fixture::new();
    let c = fx.confine(&["--allow-domain", "example.org", "--", "touch", "ran"]);
    let argv = confined_argv(&c);
    let port = argv
        .iter()
        .position(|a| a == "--listen")
        .map(|i| argv[i + 1].clone())
        .expect("the fallback's proxy host listens on the host's loopback");
    // Someone else listens there now.
    let _squatter = TcpListener::bind(format!("127.0.0.1:{port}")).unwrap();
    let out = spawn_argv(&c);
    assert_code(&out, 125);
    let line = runner_failure_line(&out);
    let tag = c["runnerFailureRules"][0]["fatalSignatures"][0]
        .as_str()
        .unwrap()
        .to_string();
    assert!(line.starts_with(&tag), "tagged like the runner's: {line}");
    assert!(line.contains(&format!("127.0.0.1:{port}")), "{line}");
    assert!(!fx.ws.join("ran").exists());
}

#[test]
fn killing_the_proxy_host_ends_the_command() {
    let fx = Fixture::new();
    let tag = unique_tag("killed-host");
    let c = fx.confine(&[
        "--allow-domain",
        "example.org",
        "--env",
        &format!("KILLED_HOST={tag}"),
        "--",
        "sleep",
        "600",
    ]);
    let argv = confined_argv(&c);
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the command itself runs (it carries the tag in its environment).
    for _ in 0..6000 {
        if tagged_processes(&tag)
            .iter()
            .any(|(_, cmd)| cmd.starts_with("sleep"))
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    for _ in 0..6000 {
        if tagged_processes(&tag).is_empty() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!(
        "the command outlived its proxy host: {:?}",
        tagged_processes(&tag)
    );
}

#[test]
fn bad_network_flags_are_refused_naming_them_and_nothing_runs() {
    let fx = Fixture::new();
    for (flags, names) in [
        (&["--allow-domain", "a.*.org"][..], "--allow-domain"),
        (&["--allow-domain", "example.org:0"], "--allow-domain"),
        (&["--deny-domain", "[fd00::1"], "--deny-domain"),
        (&["--resolve", "a.test"], "--resolve"),
        (
            &["--allow-domain", "a.test", "--resolve", "a.test=127.0.0.1"],
            "--allow-domain 127.0.0.1",
        ),
        (
            &["--allow-domain", "a.test", "--resolve", "b.test=192.0.2.1"],
            "--resolve b.test",
        ),
        (&["--deny-domain", "a.test"], "--deny-domain"),
        (
            &["--allow-domain", "a.test", "--allow-tcp-connect", "22"],
            "--allow-tcp-connect",
        ),
        (
            &["--allow-domain", "a.test", "--network", "allow"],
            "--network allow",
        ),
        (
            &["--mode", "danger-full-access", "--allow-domain", "a.test"],
            "--allow-domain",
        ),
    ] {
        let mut args = vec!["run"];
        args.extend(flags);
        args.extend(["--", "touch", "ran"]);
        let out = fx.stockade(&args).output().unwrap();
        assert_code(&out, 125);
        let err = text(&out.stderr);
        assert!(
            err.starts_with("stockade: ") && err.contains(names),
            "{flags:?}: {err}"
        );
        assert!(!fx.ws.join("ran").exists(), "{flags:?} ran the command");
    }
}

/// The proxy host raises its own soft open-file limit to the hard one (each tunnel takes
/// six descriptors) once its child has started with the limit the caller gave: the
/// command keeps that one.
#[test]
fn the_proxy_host_has_room_for_its_tunnels_and_the_command_keeps_its_own_limit() {
    use std::os::unix::process::CommandExt;
    let fx = Fixture::new();
    let mut now = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limits into `now`.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut now) }, 0);
    let hard = now.rlim_max;
    if hard <= 512 {
        eprintln!("SKIPPED (hard open-file limit {hard}, no room below it): proxy_host_room");
        return;
    }
    // Without the stage the command's parent is the proxy host.
    let mut cmd = fx.stockade([
        "run",
        "--allow-domain",
        "example.org",
        "--",
        "sh",
        "-c",
        // The runner's supervisor, where it runs, comes between.
        "l=$PPID; [ \"$(cat /proc/$l/comm)\" = stockade-runner ] && l=$(cut -d' ' -f4 /proc/$l/stat); ulimit -Sn; grep 'Max open files' /proc/$l/limits | awk '{print $4}'",
    ]);
    // SAFETY: setrlimit in the forked child before exec, on its own limits.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: 512,
                rlim_max: hard,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    assert_code(&out, 0);
    assert_eq!(
        lines(&out),
        ["512".to_string(), hard.to_string()],
        "{}",
        text(&out.stderr)
    );
}

/// A public address is reachable by name, but not when it is one of this machine's own:
/// a server's public IPv4 address or a global IPv6 address reaches every service the host
/// listens with on all addresses, as loopback would, and a wildcard DNS service
/// (`1-2-3-4.sslip.io`) lets a command with `--allow-domain '*'` name any address it
/// likes. Played in a network namespace of the test's own where a public address sits
/// on loopback (the proxy runs there, as it runs on the host), so nothing leaves the
/// machine and the machine's own addresses are untouched.
#[test]
fn a_name_resolving_to_one_of_the_hosts_own_public_addresses_is_refused_unless_allowed() {
    if !stockade_tests::is_root() {
        eprintln!(
            "SKIPPED (needs root): a_name_resolving_to_one_of_the_hosts_own_public_addresses"
        );
        return;
    }
    if Command::new("ip").arg("-V").output().is_err() {
        eprintln!(
            "SKIPPED (no ip command): a_name_resolving_to_one_of_the_hosts_own_public_addresses"
        );
        return;
    }
    // A thread of its own: a namespace entered with unshare is the calling thread's, and
    // the test harness may run other tests on the thread that runs this one.
    std::thread::spawn(|| {
        // SAFETY: unshare changes only this thread's network namespace.
        assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0, "unshare");
        // Any public address will do: in this namespace it leads nowhere but here.
        const OWN: &str = "8.8.8.8";
        for args in [
            &["link", "set", "lo", "up"][..],
            &["addr", "add", &format!("{OWN}/32"), "dev", "lo"],
        ] {
            let st = Command::new("ip").args(args).status().unwrap();
            assert!(st.success(), "ip {args:?}");
        }
        // A service of "the host", listening on every address.
        let listener = TcpListener::bind("0.0.0.0:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for mut s in listener.incoming().flatten() {
                let mut buf = [0u8; 1024];
                let n = s.read(&mut buf).unwrap_or(0);
                let _ = s.write_all(&buf[..n]);
            }
        });
        let p = port.to_string();
        let named = |extra: &[String]| {
            let mut flags: Vec<String> = [
                "--allow-domain".into(),
                format!("own.test:{p}"),
                "--resolve".into(),
                format!("own.test={OWN}"),
            ]
            .to_vec();
            flags.extend(extra.iter().cloned());
            flags
        };
        for (fx, netns) in domain_fixtures("own public address") {
            let (_, json) = run_json(&mut client(
                &fx,
                &named(&[]),
                true,
                &["connect", "own.test", &p, "x"],
            ));
            assert_eq!(json["stdout"]["text"], "403\n", "netns {netns}: {json}");
            assert_eq!(
                json["network"]["denied"][0]["reason"], "local-address",
                "netns {netns}: {json}"
            );
            // Control: the same address allowed explicitly is reached.
            let allowed = named(&["--allow-domain".into(), format!("{OWN}:{p}")]);
            let (_, json) = run_json(&mut client(
                &fx,
                &allowed,
                true,
                &["connect", "own.test", &p, "ok"],
            ));
            assert_eq!(
                json["stdout"]["text"], "200 echo ok\n",
                "netns {netns}: {json}"
            );
            assert_eq!(json["network"]["denied"], serde_json::json!([]), "{json}");
        }
    })
    .join()
    .unwrap();
}

/// Without a network namespace, Landlock lets the command connect to the proxy's port
/// number on any address (its rules name ports, not addresses), so that number must not
/// be one a service of this machine already listens on at another of its addresses
/// (`[::1]`, `127.0.0.2`, a LAN address): the command would reach it around the proxy.
/// A port picked free on `127.0.0.1` alone can be such a one. Played in a network
/// namespace of the test's own whose ephemeral range (where the kernel picks the port)
/// is 20 ports, 18 of them taken by a service on `[::1]`: each run's port must be one of
/// the other two, where nothing answers.
#[test]
fn the_proxy_port_is_not_one_a_local_service_listens_on_at_another_address() {
    const NAME: &str = "the_proxy_port_is_not_one_a_local_service_listens_on";
    if !stockade_tests::is_root() {
        eprintln!("SKIPPED (needs root): {NAME}");
        return;
    }
    if Command::new("ip").arg("-V").output().is_err() {
        eprintln!("SKIPPED (no ip command): {NAME}");
        return;
    }
    // A thread of its own: a namespace entered with unshare is the calling thread's.
    std::thread::spawn(|| {
        // SAFETY: unshare changes only this thread's network namespace.
        assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0, "unshare");
        let st = Command::new("ip")
            .args(["link", "set", "lo", "up"])
            .status()
            .unwrap();
        assert!(st.success());
        // This namespace's own setting (the machine's is untouched).
        std::fs::write("/proc/sys/net/ipv4/ip_local_port_range", "40000 40019").unwrap();
        let (first, taken) = (40000u16, 18u16);
        for port in first..first + taken {
            let listener = TcpListener::bind(("::1", port)).unwrap();
            std::thread::spawn(move || {
                for mut s in listener.incoming().flatten() {
                    let _ = s.write_all(b"a local service\n");
                }
            });
        }
        let script = format!(
            "echo HTTP_PROXY=\"$HTTP_PROXY\"; {} around ::1",
            bin("netclient").display()
        );
        let fx = Fixture::new();
        for _ in 0..3 {
            let out = fx
                .stockade([
                    "run",
                    "--allow-domain",
                    "example.org",
                    "--",
                    "sh",
                    "-c",
                    &script,
                ])
                .output()
                .unwrap();
            let printed = text(&out.stdout);
            let port = proxy_port(&printed);
            assert!(
                (first..first + 20).contains(&port),
                "the namespace's range was not used: {printed}"
            );
            assert!(
                printed.ends_with("errno ECONNREFUSED\n"),
                "port {port}: {printed}{}",
                text(&out.stderr)
            );
        }
        // Control: the service on [::1] is reachable from a sandbox the network is
        // allowed to.
        let out = fx
            .stockade([
                "run",
                "--network",
                "allow",
                "--env",
                &format!("HTTP_PROXY=http://127.0.0.1:{first}"),
                "--",
                &bin("netclient").to_string_lossy(),
                "around",
                "::1",
            ])
            .output()
            .unwrap();
        assert_eq!(lines(&out), ["ok"], "{}", text(&out.stderr));
    })
    .join()
    .unwrap();
}

/// A `.local` name is answered by multicast DNS, which only the system's resolver (its
/// `mdns4_minimal` module) asks, and the proxy uses none (it would load code a command
/// could plant). Such a name is refused, recorded as `multicast-dns`, and answered with
/// the way out; pinned with `--resolve`, it is reached (control: the same connection,
/// the same rules).
#[test]
fn a_multicast_dns_name_is_answered_with_the_way_out_and_reached_when_pinned() {
    let port = echo_server();
    let p = port.to_string();
    for (fx, netns) in domain_fixtures("multicast_dns") {
        let rules = vec![
            "--allow-domain".to_string(),
            format!("printer.local:{port}"),
            "--allow-domain".into(),
            format!("127.0.0.1:{port}"),
        ];
        let (out, json) = run_json(&mut client(
            &fx,
            &rules,
            true,
            &["why", "printer.local", &p],
        ));
        assert_code(&out, 0);
        let said = json["stdout"]["text"].as_str().unwrap();
        assert!(
            said.starts_with("403 ")
                && said.contains("multicast DNS")
                && said.contains("--resolve NAME=ADDRESS"),
            "netns {netns}: {said:?}"
        );
        assert_eq!(
            json["network"]["denied"],
            serde_json::json!([{"host": "printer.local", "port": port, "reason": "multicast-dns"}]),
            "netns {netns}: {json}"
        );
        let mut pinned = rules.clone();
        pinned.extend(["--resolve".into(), "printer.local=127.0.0.1".into()]);
        let out = client(&fx, &pinned, false, &["connect", "printer.local", &p, "hi"])
            .output()
            .unwrap();
        assert_code(&out, 0);
        assert_eq!(
            lines(&out),
            ["200 echo hi"],
            "netns {netns}: {}",
            text(&out.stderr)
        );
    }
}
