//! The proxy against real sockets on loopback: test servers, clients and the proxy all
//! listen on 127.0.0.1, and names are pinned to them (nothing is resolved through DNS,
//! nothing leaves the machine).

use super::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use stockade_policy::addresses::AddressClass;
use stockade_policy::domains::{DomainRules, Host, HostRule, Pin, Refusal, RuleKind};
use stockade_policy::network_denials::{MAX_RECORDED, NetworkDenial};

/// An echo server: every connection gets back what it sends; an end of file is passed
/// back as one.
fn echo_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut s = stream;
                let mut buf = [0u8; 16 * 1024];
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).is_err() {
                                return;
                            }
                        }
                    }
                }
                let _ = s.shutdown(Shutdown::Write);
            });
        }
    });
    port
}

/// An HTTP server that answers every request with the request head it received (in the
/// body), and closes.
fn head_echo_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    head.push_str(&line);
                }
                let mut s = stream;
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{head}",
                    head.len()
                );
            });
        }
    });
    port
}

struct Running {
    addr: SocketAddr,
    record: Arc<Record>,
}

/// A proxy on a free loopback port with `allow`/`deny` rules and `pins`.
fn proxy(allow: &[String], deny: &[&str], pins: &[&str], limits: Limits) -> Running {
    let rules = DomainRules {
        allow: allow
            .iter()
            .map(|r| HostRule::parse(r, RuleKind::Allow).unwrap())
            .collect(),
        deny: deny
            .iter()
            .map(|r| HostRule::parse(r, RuleKind::Deny).unwrap())
            .collect(),
        pins: pins.iter().map(|p| Pin::parse(p).unwrap()).collect(),
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let record = Arc::new(Record::in_memory());
    let config = Config {
        rules,
        record: Arc::clone(&record),
        limits,
    };
    serve(listener, config).unwrap();
    Running { addr, record }
}

fn quick() -> Limits {
    Limits {
        head_time: Duration::from_millis(500),
        ..Limits::default()
    }
}

/// The echo server's port, a proxy that allows `allowed.test` on it (pinned to
/// loopback, which is allowed explicitly on that port), and the proxy's address.
fn setup() -> (u16, Running) {
    let port = echo_server();
    let p = proxy(
        &[
            format!("allowed.test:{port}"),
            format!("*.wild.test:{port}"),
            format!("127.0.0.1:{port}"),
        ],
        &["blocked.wild.test"],
        &[
            "allowed.test=127.0.0.1",
            "a.wild.test=127.0.0.1",
            "blocked.wild.test=127.0.0.1",
        ],
        quick(),
    );
    (port, p)
}

/// A connection to the proxy whose reads fail after a while instead of hanging the test
/// when the proxy holds it open.
fn client(proxy: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// Sends `CONNECT target` and returns the stream and the status line.
fn connect(proxy: SocketAddr, target: &str) -> (TcpStream, String) {
    let mut s = client(proxy);
    write!(s, "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").unwrap();
    let status = read_head(&mut s);
    (s, status)
}

/// Reads a response head byte by byte (so nothing after it is consumed); returns it.
fn read_head(s: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

fn echo_through(s: &mut TcpStream, msg: &[u8]) -> Vec<u8> {
    s.write_all(msg).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut back = Vec::new();
    s.read_to_end(&mut back).unwrap();
    back
}

fn refusals(p: &Running) -> Vec<(String, u16, Refusal)> {
    p.record
        .snapshot()
        .0
        .into_iter()
        .map(|d| (d.host, d.port, d.reason))
        .collect()
}

#[test]
fn an_allowed_name_is_tunnelled_and_a_denied_one_refused_and_recorded() {
    let (port, p) = setup();
    let (mut s, status) = connect(p.addr, &format!("allowed.test:{port}"));
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert_eq!(echo_through(&mut s, b"hello"), b"hello");
    assert!(refusals(&p).is_empty());

    let (mut s, status) = connect(p.addr, &format!("denied.test:{port}"));
    assert!(status.starts_with("HTTP/1.1 403"), "{status}");
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    assert!(
        body.contains(&format!("network access to denied.test:{port} denied")),
        "{body}"
    );
    assert!(!body.to_lowercase().contains("permission denied"), "{body}");
    assert_eq!(
        refusals(&p),
        vec![("denied.test".to_string(), port, Refusal::NotAllowed)]
    );
}

#[test]
fn wildcards_deny_rules_and_ports_are_honoured() {
    let (port, p) = setup();
    let (mut s, status) = connect(p.addr, &format!("A.Wild.Test:{port}"));
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert_eq!(echo_through(&mut s, b"w"), b"w");
    let (_, status) = connect(p.addr, &format!("blocked.wild.test:{port}"));
    assert!(status.starts_with("HTTP/1.1 403"), "{status}");
    // An allowed name on a port its rule does not name.
    let other = echo_server();
    let (_, status) = connect(p.addr, &format!("allowed.test:{other}"));
    assert!(status.starts_with("HTTP/1.1 403"), "{status}");
    assert_eq!(
        refusals(&p),
        vec![
            ("blocked.wild.test".to_string(), port, Refusal::DeniedByRule),
            ("allowed.test".to_string(), other, Refusal::PortNotAllowed),
        ]
    );
}

#[test]
fn ip_literals_are_refused_unless_an_address_rule_allows_them() {
    let port = echo_server();
    let p = proxy(&["*".into()], &[], &[], quick());
    let (_, status) = connect(p.addr, &format!("127.0.0.1:{port}"));
    assert!(status.starts_with("HTTP/1.1 403"), "{status}");
    let (_, status) = connect(p.addr, &format!("[::ffff:127.0.0.1]:{port}"));
    assert!(status.starts_with("HTTP/1.1 403"), "{status}");
    assert_eq!(
        refusals(&p),
        vec![
            ("127.0.0.1".to_string(), port, Refusal::IpLiteral),
            ("[::ffff:127.0.0.1]".to_string(), port, Refusal::IpLiteral),
        ]
    );
    // Control: the same literal allowed explicitly.
    let p = proxy(&[format!("127.0.0.1:{port}")], &[], &[], quick());
    let (mut s, status) = connect(p.addr, &format!("127.0.0.1:{port}"));
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert_eq!(echo_through(&mut s, b"ip"), b"ip");
}

#[test]
fn a_name_that_resolves_to_loopback_is_refused_after_resolution() {
    let port = echo_server();
    // Pinned to loopback without the address allowed; and `localhost`, which the system
    // resolver answers from the hosts file.
    let p = proxy(
        &[format!("pinned.test:{port}"), format!("localhost:{port}")],
        &[],
        &["pinned.test=127.0.0.1"],
        quick(),
    );
    let (_, status) = connect(p.addr, &format!("pinned.test:{port}"));
    assert!(status.starts_with("HTTP/1.1 403"), "{status}");
    let (_, status) = connect(p.addr, &format!("localhost:{port}"));
    assert!(status.starts_with("HTTP/1.1 403"), "{status}");
    assert_eq!(
        refusals(&p),
        vec![
            (
                "pinned.test".to_string(),
                port,
                Refusal::NonPublicAddress(AddressClass::Loopback)
            ),
            (
                "localhost".to_string(),
                port,
                Refusal::NonPublicAddress(AddressClass::Loopback)
            ),
        ]
    );
    // Control: loopback allowed explicitly on that port.
    let p = proxy(
        &[format!("localhost:{port}"), format!("127.0.0.0/8:{port}")],
        &[],
        &[],
        quick(),
    );
    let (mut s, status) = connect(p.addr, &format!("localhost:{port}"));
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert_eq!(echo_through(&mut s, b"lo"), b"lo");
}

/// A SOCKS5 CONNECT to `host` (a name) and `port`; returns the stream and the reply code.
fn socks_connect(proxy: SocketAddr, host: &[u8], port: u16, command: u8) -> (TcpStream, u8) {
    let mut s = client(proxy);
    s.write_all(&[5, 1, 0]).unwrap();
    let mut choice = [0u8; 2];
    s.read_exact(&mut choice).unwrap();
    assert_eq!(choice, [5, 0]);
    let mut req = vec![5, command, 0, 3, host.len() as u8];
    req.extend_from_slice(host);
    req.extend_from_slice(&port.to_be_bytes());
    s.write_all(&req).unwrap();
    let mut reply = [0u8; 10];
    s.read_exact(&mut reply).unwrap();
    (s, reply[1])
}

#[test]
fn socks5_with_names_is_decided_like_http() {
    let (port, p) = setup();
    let (mut s, code) = socks_connect(p.addr, b"allowed.test", port, 1);
    assert_eq!(code, 0);
    assert_eq!(echo_through(&mut s, b"socks"), b"socks");
    let (_, code) = socks_connect(p.addr, b"denied.test", port, 1);
    assert_eq!(code, 2);
    // An IP literal sent as a name, and as an address of type IPv4.
    let p2 = proxy(&["*".into()], &[], &[], quick());
    let (_, code) = socks_connect(p2.addr, b"127.0.0.1", port, 1);
    assert_eq!(code, 2);
    let mut s = client(p2.addr);
    s.write_all(&[5, 1, 0]).unwrap();
    let mut choice = [0u8; 2];
    s.read_exact(&mut choice).unwrap();
    let mut req = vec![5, 1, 0, 1, 127, 0, 0, 1];
    req.extend_from_slice(&port.to_be_bytes());
    s.write_all(&req).unwrap();
    let mut reply = [0u8; 10];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(reply[1], 2);
    // BIND is not offered.
    let (_, code) = socks_connect(p.addr, b"allowed.test", port, 2);
    assert_eq!(code, 7);
    assert_eq!(
        refusals(&p),
        vec![("denied.test".to_string(), port, Refusal::NotAllowed)]
    );
    assert_eq!(refusals(&p2).len(), 1, "one record per distinct refusal");
}

#[test]
fn plain_http_is_forwarded_with_the_decided_host() {
    let port = head_echo_server();
    let p = proxy(
        &[format!("web.test:{port}"), format!("127.0.0.1:{port}")],
        &[],
        &["web.test=127.0.0.1"],
        quick(),
    );
    let mut s = client(p.addr);
    write!(
        s,
        "GET http://web.test:{port}/path?q=1 HTTP/1.1\r\nHost: other.test\r\nProxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(
        response.contains(&format!("GET /path?q=1 HTTP/1.1\r\nHost: web.test:{port}\r\nAccept: */*\r\nConnection: close\r\n")),
        "{response}"
    );
    assert!(!response.contains("other.test") && !response.contains("Proxy-Connection"));
    // A redirect's target is a new request, decided on its own.
    let mut s = client(p.addr);
    write!(s, "GET http://elsewhere.test/ HTTP/1.1\r\n\r\n").unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 403"), "{response}");
}

#[test]
fn garbage_oversized_and_slow_clients_do_not_affect_other_connections() {
    let (port, p) = setup();
    // A slow client: half a request head, then nothing.
    let mut slow = client(p.addr);
    slow.write_all(b"CONNECT allowed.test:").unwrap();
    // Garbage.
    let mut garbage = client(p.addr);
    garbage.write_all(b"\x00\x01\x02 nonsense\r\n\r\n").unwrap();
    let mut answer = String::new();
    garbage.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    // Oversized: more head than the limit, never ending.
    let mut big = client(p.addr);
    let line = format!("X-Filler: {}\r\n", "a".repeat(1000));
    let mut sent = b"CONNECT allowed.test:1 HTTP/1.1\r\n".to_vec();
    while sent.len() <= Limits::default().max_head + 4096 {
        sent.extend_from_slice(line.as_bytes());
    }
    // The proxy may answer and close before everything is written.
    let _ = big.write_all(&sent);
    let answer = read_head(&mut big);
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    // Meanwhile a well-behaved client is served.
    let (mut s, status) = connect(p.addr, &format!("allowed.test:{port}"));
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert_eq!(echo_through(&mut s, b"still fine"), b"still fine");
    // The slow client is answered once its time is up, and closed.
    let answer = read_head(&mut slow);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    // SOCKS4 and a SOCKS5 client offering only authentication are refused.
    let mut v4 = client(p.addr);
    v4.write_all(&[4, 1, 0, 80, 127, 0, 0, 1, 0]).unwrap();
    let mut r = [0u8; 8];
    v4.read_exact(&mut r).unwrap();
    assert_eq!(r[1], 0x5b);
    let mut auth = client(p.addr);
    auth.write_all(&[5, 1, 2]).unwrap();
    let mut r = [0u8; 2];
    auth.read_exact(&mut r).unwrap();
    assert_eq!(r, [5, 0xff]);
    assert!(
        refusals(&p).is_empty(),
        "malformed requests are not recorded"
    );
}

#[test]
fn many_parallel_tunnels_each_get_their_own_bytes() {
    let (port, p) = setup();
    let clients: Vec<_> = (0..64)
        .map(|i| {
            let addr = p.addr;
            std::thread::spawn(move || {
                let (mut s, status) = connect(addr, &format!("allowed.test:{port}"));
                assert!(status.starts_with("HTTP/1.1 200"), "{status}");
                let msg = format!("client {i} ").repeat(2000).into_bytes();
                assert_eq!(echo_through(&mut s, &msg), msg);
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
}

#[test]
fn connections_past_the_limit_are_closed_and_the_slots_come_back() {
    let port = echo_server();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let config = Config {
        rules: DomainRules {
            allow: vec![HostRule::parse(&format!("127.0.0.1:{port}"), RuleKind::Allow).unwrap()],
            ..DomainRules::default()
        },
        record: Arc::new(Record::in_memory()),
        limits: Limits {
            max_connections: 2,
            ..quick()
        },
    };
    serve(listener, config).unwrap();
    let (mut a, status) = connect(addr, &format!("127.0.0.1:{port}"));
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    let (mut b, status) = connect(addr, &format!("127.0.0.1:{port}"));
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    // Both slots are held by open tunnels: a third connection is closed unanswered.
    let mut c = client(addr);
    let _ = write!(c, "CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n");
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    let closed = c.read_to_end(&mut got);
    assert!(
        closed.is_ok() || closed.unwrap_err().kind() == io::ErrorKind::ConnectionReset,
        "the third connection was held open"
    );
    assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
    // Ending one tunnel frees its slot.
    assert_eq!(echo_through(&mut a, b"a"), b"a");
    let mut tries = 0;
    loop {
        let mut d = client(addr);
        let _ = write!(d, "CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n");
        if read_head(&mut d).starts_with("HTTP/1.1 200") {
            assert_eq!(echo_through(&mut d, b"d"), b"d");
            break;
        }
        tries += 1;
        assert!(tries < 200, "the slot never came back");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(echo_through(&mut b, b"b"), b"b");
}

#[test]
fn the_record_keeps_distinct_refusals_up_to_its_bound() {
    let port = echo_server();
    let p = proxy(&[format!("x.test:{port}")], &[], &[], quick());
    for i in 0..(MAX_RECORDED + 5) {
        let (_, status) = connect(p.addr, &format!("h{i}.test:{port}"));
        assert!(status.starts_with("HTTP/1.1 403"), "{status}");
    }
    let (_, status) = connect(p.addr, &format!("h0.test:{port}"));
    assert!(status.starts_with("HTTP/1.1 403"), "{status}");
    let (seen, more) = p.record.snapshot();
    assert_eq!(seen.len(), MAX_RECORDED);
    assert!(more);
}

#[test]
fn a_record_file_holds_one_parsable_line_per_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(stockade_policy::network_denials::LOG_FILE);
    let record = Record::create(&path).unwrap();
    let host = Host::parse("denied.test").unwrap();
    record.refused(NetworkDenial::new(&host, 443, Refusal::NotAllowed));
    record.refused(NetworkDenial::new(&host, 443, Refusal::NotAllowed));
    record.refused(NetworkDenial::new(&host, 80, Refusal::NotAllowed));
    let log = stockade_policy::network_denials::DenialLog::parse(&std::fs::read(&path).unwrap());
    assert_eq!(log.denied.len(), 2);
    assert_eq!(
        log.markers(),
        vec![
            "[sandbox: network access to denied.test:443 denied]",
            "[sandbox: network access to denied.test:80 denied]"
        ]
    );
    // A planted file is not written through.
    assert!(Record::create(&path).is_err());
}
