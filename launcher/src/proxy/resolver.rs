//! Resolving a name without the C library's resolver.
//!
//! The proxy host runs outside the sandbox with the caller's privileges. glibc's
//! `getaddrinfo`, even linked statically, loads the name-service modules that the `hosts:`
//! line of `nsswitch.conf` names and glibc does not build in (`mdns4_minimal`,
//! `myhostname`, `resolve`), searching `LD_LIBRARY_PATH` first; it also follows
//! `RES_OPTIONS`, `LOCALDOMAIN` and `HOSTALIASES` from the environment. An empty
//! `LD_LIBRARY_PATH` entry is the current directory (the workspace): a confined command
//! that wrote `libnss_mdns4_minimal.so.2` there would have its code run in the proxy host.
//!
//! So the proxy reads the two files that say where names are, itself: `/etc/hosts`, then
//! the `nameserver` lines of `/etc/resolv.conf` (its `timeout:`, `attempts:` and `use-vc`
//! options), asked over UDP and over TCP when an answer is truncated or nothing listens
//! on UDP. It reads no environment variable, loads nothing, and asks for the name as
//! absolute (`NAME.`): no search domain is ever appended, so the connection goes to
//! exactly the name the rules decided on.
//!
//! What only the system resolver knows is out of reach: multicast DNS names (`.local`,
//! answered by Avahi through `mdns4_minimal`) and names a local daemon invents
//! (`systemd-resolved`'s own, `myhostname`'s). A `.local` name is not asked about: the
//! caller refuses it with the way out, a pin (`--resolve NAME=ADDRESS`). A systemd-resolved setup still works
//! through its stub listener, which `resolv.conf` names (`nameserver 127.0.0.53`).

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

/// The hosts file the C library reads before DNS.
pub const HOSTS_FILE: &str = "/etc/hosts";
/// Where the nameservers are listed.
pub const RESOLV_CONF: &str = "/etc/resolv.conf";

/// What a name stands for.
#[derive(Debug, PartialEq, Eq)]
pub enum Resolved {
    /// Its addresses.
    Addresses(Vec<IpAddr>),
    /// A multicast DNS name not in `/etc/hosts`: only the system's resolver knows it.
    MulticastDns,
}

/// The addresses `name` stands for: its `/etc/hosts` entries, else what the nameservers
/// of `/etc/resolv.conf` answer for exactly `NAME.` (IPv4 first).
pub fn resolve(name: &str) -> io::Result<Resolved> {
    let name = name.trim_end_matches('.');
    let listed = hosts_entries(
        &std::fs::read_to_string(HOSTS_FILE).unwrap_or_default(),
        name,
    );
    if !listed.is_empty() {
        return Ok(Resolved::Addresses(listed));
    }
    if is_multicast_dns(name) {
        return Ok(Resolved::MulticastDns);
    }
    let conf = Conf::parse(&std::fs::read_to_string(RESOLV_CONF).unwrap_or_default());
    let question = Question::new(name)?;
    let mut addrs = Vec::new();
    let mut last = None;
    for kind in [Kind::A, Kind::Aaaa] {
        match ask_all(&conf, &question, kind) {
            Ok(found) => addrs.extend(found),
            // A name that does not exist has no record of any type.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                last = Some(e);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    match (addrs.is_empty(), last) {
        (false, _) => Ok(Resolved::Addresses(addrs)),
        (true, Some(e)) => Err(e),
        (true, None) => Err(io::Error::new(
            io::ErrorKind::NotFound,
            "the name has no address",
        )),
    }
}

/// Whether `name` is answered by multicast DNS (RFC 6762: `.local` and its subdomains).
fn is_multicast_dns(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower == "local" || lower.ends_with(".local")
}

/// The addresses `hosts` (the text of a hosts file) gives `name` (any case), in order.
pub fn hosts_entries(hosts: &str, name: &str) -> Vec<IpAddr> {
    let mut found = Vec::new();
    for line in hosts.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut fields = line.split_whitespace();
        let Some(Ok(ip)) = fields.next().map(str::parse::<IpAddr>) else {
            continue;
        };
        if fields.any(|n| n.trim_end_matches('.').eq_ignore_ascii_case(name))
            && !found.contains(&ip)
        {
            found.push(ip);
        }
    }
    found
}

/// What `/etc/resolv.conf` says about asking: the servers and how patiently.
#[derive(Debug, PartialEq, Eq)]
struct Conf {
    servers: Vec<IpAddr>,
    timeout: Duration,
    attempts: u32,
    tcp_only: bool,
}

impl Conf {
    /// As the C library reads it: at most three nameservers (none listed: this
    /// machine's own, `127.0.0.1`), `options timeout:N attempts:N use-vc`.
    fn parse(text: &str) -> Conf {
        let mut conf = Conf {
            servers: Vec::new(),
            timeout: Duration::from_secs(5),
            attempts: 2,
            tcp_only: false,
        };
        for line in text.lines() {
            let mut words = line.split_whitespace();
            match words.next() {
                Some("nameserver") => {
                    if let Some(Ok(ip)) = words.next().map(str::parse::<IpAddr>)
                        && conf.servers.len() < 3
                    {
                        conf.servers.push(ip);
                    }
                }
                Some("options") => words.for_each(|w| conf.option(w)),
                _ => {}
            }
        }
        if conf.servers.is_empty() {
            conf.servers.push(IpAddr::V4(Ipv4Addr::LOCALHOST));
        }
        conf
    }

    fn option(&mut self, word: &str) {
        let number = |v: &str, max: u64| v.parse::<u64>().ok().map(|n| n.clamp(1, max));
        if let Some(n) = word.strip_prefix("timeout:").and_then(|v| number(v, 30)) {
            self.timeout = Duration::from_secs(n);
        } else if let Some(n) = word.strip_prefix("attempts:").and_then(|v| number(v, 5)) {
            self.attempts = n as u32;
        } else if word == "use-vc" || word == "usevc" {
            self.tcp_only = true;
        }
    }
}

/// The record types asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    A = 1,
    Aaaa = 28,
}

/// The name in wire form (labels, then the root).
struct Question {
    wire: Vec<u8>,
}

impl Question {
    fn new(name: &str) -> io::Result<Question> {
        let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidInput, why.to_string());
        if name.is_empty() || name.len() > 253 {
            return Err(bad("the name is empty or longer than 253 bytes"));
        }
        let mut wire = Vec::with_capacity(name.len() + 2);
        for label in name.split('.') {
            if label.is_empty() || label.len() > 63 {
                return Err(bad("the name has an empty label or one over 63 bytes"));
            }
            wire.push(label.len() as u8);
            wire.extend_from_slice(label.as_bytes());
        }
        wire.push(0);
        Ok(Question { wire })
    }

    /// A recursive query for this name and `kind`, with `id`.
    fn query(&self, kind: Kind, id: u16) -> Vec<u8> {
        let mut q = Vec::with_capacity(12 + self.wire.len() + 4);
        q.extend_from_slice(&id.to_be_bytes());
        // Standard query, recursion desired; one question.
        q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
        q.extend_from_slice(&self.wire);
        q.extend_from_slice(&(kind as u16).to_be_bytes());
        q.extend_from_slice(&[0, 1]);
        q
    }
}

/// What one server said.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    /// The addresses of the asked type (maybe none: the name has no such record).
    Found(Vec<IpAddr>),
    /// The name does not exist: no other server is asked.
    NoSuchName,
    /// The answer did not fit in a datagram: ask again over TCP.
    Truncated,
    /// The server failed or refused: ask the next.
    Failed,
}

/// Asks each server in turn, `attempts` rounds, until one answers.
fn ask_all(conf: &Conf, question: &Question, kind: Kind) -> io::Result<Vec<IpAddr>> {
    let mut last = io::Error::other("no nameserver answered");
    for _ in 0..conf.attempts {
        for &server in &conf.servers {
            let server = SocketAddr::new(server, 53);
            match ask_one(conf, server, question, kind) {
                Ok(Answer::Found(addrs)) => return Ok(addrs),
                Ok(Answer::NoSuchName) => {
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        "no such name (the nameserver said so)",
                    ));
                }
                Ok(Answer::Truncated | Answer::Failed) => {
                    last = io::Error::other(format!("the nameserver {server} failed"));
                }
                Err(e) => last = e,
            }
        }
    }
    Err(last)
}

/// One server: over UDP unless `use-vc`, over TCP when the answer was truncated or
/// nothing listens on UDP.
fn ask_one(conf: &Conf, server: SocketAddr, question: &Question, kind: Kind) -> io::Result<Answer> {
    let id = random_id();
    let query = question.query(kind, id);
    if !conf.tcp_only {
        match over_udp(server, &query, conf.timeout) {
            Ok(reply) => match parse(&reply, id, question, kind) {
                Answer::Truncated => {}
                answer => return Ok(answer),
            },
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(e),
        }
    }
    let reply = over_tcp(server, &query, conf.timeout)?;
    Ok(parse(&reply, id, question, kind))
}

/// A query id from the kernel's random pool: an off-path forger must guess it (and the
/// port the kernel picked).
fn random_id() -> u16 {
    let mut bytes = [0u8; 2];
    // SAFETY: getrandom writes at most two bytes into the local array.
    unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    u16::from_ne_bytes(bytes)
}

/// Sends `query` in one datagram on a socket connected to `server` (datagrams from
/// anyone else are not received) and returns the first reply.
fn over_udp(server: SocketAddr, query: &[u8], timeout: Duration) -> io::Result<Vec<u8>> {
    let any: SocketAddr = match server {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = UdpSocket::bind(any)?;
    socket.connect(server)?;
    socket.set_read_timeout(Some(timeout))?;
    socket.send(query)?;
    let mut buf = vec![0u8; 4096];
    let n = socket.recv(&mut buf).map_err(timed_out)?;
    buf.truncate(n);
    Ok(buf)
}

/// The query over TCP: two bytes of length before each message.
fn over_tcp(server: SocketAddr, query: &[u8], timeout: Duration) -> io::Result<Vec<u8>> {
    let mut stream = TcpStream::connect_timeout(&server, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut framed = (query.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(query);
    stream.write_all(&framed)?;
    let mut len = [0u8; 2];
    stream.read_exact(&mut len).map_err(timed_out)?;
    let mut reply = vec![0u8; u16::from_be_bytes(len) as usize];
    stream.read_exact(&mut reply).map_err(timed_out)?;
    Ok(reply)
}

/// A read timeout reads as `WouldBlock`; it is a timeout.
fn timed_out(e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::WouldBlock {
        io::Error::new(
            io::ErrorKind::TimedOut,
            "the nameserver did not answer in time",
        )
    } else {
        e
    }
}

/// Reads a reply to the query `id` about `question`: anything else (another id, another
/// question, not a reply, cut short) counts as a failed server.
fn parse(reply: &[u8], id: u16, question: &Question, kind: Kind) -> Answer {
    parse_checked(reply, id, question, kind).unwrap_or(Answer::Failed)
}

fn parse_checked(reply: &[u8], id: u16, question: &Question, kind: Kind) -> Option<Answer> {
    let u16_at = |at: usize| {
        reply
            .get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
    };
    let flags = u16_at(2)?;
    if u16_at(0)? != id || flags & 0x8000 == 0 {
        return None;
    }
    if flags & 0x0200 != 0 {
        return Some(Answer::Truncated);
    }
    match flags & 0x000f {
        0 => {}
        3 => return Some(Answer::NoSuchName),
        _ => return Some(Answer::Failed),
    }
    let (questions, answers) = (u16_at(4)?, u16_at(6)?);
    // The one question, echoed (names compare without case).
    let end = 12 + question.wire.len();
    if questions != 1
        || !reply.get(12..end)?.eq_ignore_ascii_case(&question.wire)
        || u16_at(end)? != kind as u16
    {
        return None;
    }
    let mut at = end + 4;
    let mut found = Vec::new();
    for _ in 0..answers {
        at = skip_name(reply, at)?;
        let (rtype, class, len) = (u16_at(at)?, u16_at(at + 2)?, u16_at(at + 8)? as usize);
        let data = reply.get(at + 10..at + 10 + len)?;
        at += 10 + len;
        // Only addresses of the asked type; a CNAME before them only names the chain.
        let ip = match (rtype, class, data.len()) {
            (1, 1, 4) if kind == Kind::A => IpAddr::from(<[u8; 4]>::try_from(data).ok()?),
            (28, 1, 16) if kind == Kind::Aaaa => IpAddr::from(<[u8; 16]>::try_from(data).ok()?),
            _ => continue,
        };
        if !found.contains(&ip) {
            found.push(ip);
        }
    }
    Some(Answer::Found(found))
}

/// The offset just past the (maybe compressed) name at `at`.
fn skip_name(msg: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let len = *msg.get(at)?;
        match len {
            0 => return Some(at + 1),
            l if l & 0xc0 == 0xc0 => return Some(at + 2).filter(|&e| e <= msg.len()),
            l if l & 0xc0 == 0 => at += 1 + l as usize,
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_entries_match_a_name_or_alias_in_any_case_and_skip_comments() {
        let hosts = "127.0.0.1 localhost\n# 10.0.0.1 secret\n10.0.0.2 build.corp Build # ci\n::1 localhost ip6-localhost\nnot-an-ip secret\n10.0.0.3 secret.corp\n";
        let ips = |n| hosts_entries(hosts, n);
        assert_eq!(
            ips("localhost"),
            [
                "127.0.0.1".parse::<IpAddr>().unwrap(),
                "::1".parse().unwrap()
            ]
        );
        assert_eq!(ips("build"), ["10.0.0.2".parse::<IpAddr>().unwrap()]);
        assert_eq!(ips("BUILD.CORP"), ["10.0.0.2".parse::<IpAddr>().unwrap()]);
        // Commented out, not an address, or only a longer name: nothing.
        assert!(ips("secret").is_empty());
        assert!(ips("corp").is_empty());
    }

    #[test]
    fn resolv_conf_gives_three_servers_at_most_and_its_options() {
        let conf = Conf::parse(
            "# x\nsearch corp.test\nnameserver 10.0.0.1\nnameserver ::1\nnameserver bad\n\
             nameserver 10.0.0.2\nnameserver 10.0.0.3\noptions ndots:2 timeout:1 attempts:9 use-vc\n",
        );
        assert_eq!(
            conf,
            Conf {
                servers: ["10.0.0.1", "::1", "10.0.0.2"]
                    .iter()
                    .map(|s| s.parse().unwrap())
                    .collect(),
                timeout: Duration::from_secs(1),
                attempts: 5,
                tcp_only: true,
            }
        );
        assert_eq!(Conf::parse("").servers, [IpAddr::V4(Ipv4Addr::LOCALHOST)]);
    }

    #[test]
    fn names_too_long_or_with_empty_labels_are_not_asked_about() {
        assert!(Question::new("a..b").is_err());
        assert!(Question::new(&"a".repeat(64)).is_err());
        assert!(Question::new(&["a"; 128].join(".")).is_err());
        assert_eq!(Question::new("ab.c").unwrap().wire, b"\x02ab\x01c\x00");
    }

    #[test]
    fn multicast_dns_names_are_told_apart() {
        assert!(is_multicast_dns("printer.local"));
        assert!(is_multicast_dns("A.LOCAL"));
        assert!(!is_multicast_dns("local.example.org"));
        assert!(!is_multicast_dns("nolocal"));
    }

    /// A reply to `query` with the given flags and answer records.
    fn reply(query: &[u8], flags: [u8; 2], records: &[(u16, &[u8])]) -> Vec<u8> {
        let mut r = query.to_vec();
        r[2..4].copy_from_slice(&flags);
        r[6..8].copy_from_slice(&(records.len() as u16).to_be_bytes());
        for (rtype, data) in records {
            r.extend_from_slice(&[0xc0, 12]);
            r.extend_from_slice(&rtype.to_be_bytes());
            r.extend_from_slice(&[0, 1, 0, 0, 0, 60]);
            r.extend_from_slice(&(data.len() as u16).to_be_bytes());
            r.extend_from_slice(data);
        }
        r
    }

    #[test]
    fn replies_are_read_only_for_the_question_asked() {
        let q = Question::new("a.test").unwrap();
        let query = q.query(Kind::A, 7);
        let cname: &[u8] = b"\x01b\x04test\x00";
        let ok = reply(
            &query,
            [0x81, 0x80],
            &[(5, cname), (1, &[192, 0, 2, 1]), (28, &[0; 16])],
        );
        assert_eq!(
            parse(&ok, 7, &q, Kind::A),
            Answer::Found(vec!["192.0.2.1".parse().unwrap()])
        );
        // Another id, another question, a query instead of a reply, cut short: failed.
        assert_eq!(parse(&ok, 8, &q, Kind::A), Answer::Failed);
        let other = Question::new("b.test").unwrap();
        assert_eq!(parse(&ok, 7, &other, Kind::A), Answer::Failed);
        assert_eq!(parse(&query, 7, &q, Kind::A), Answer::Failed);
        assert_eq!(parse(&ok[..ok.len() - 2], 7, &q, Kind::A), Answer::Failed);
        assert_eq!(
            parse(&reply(&query, [0x81, 0x83], &[]), 7, &q, Kind::A),
            Answer::NoSuchName
        );
        assert_eq!(
            parse(&reply(&query, [0x83, 0x80], &[]), 7, &q, Kind::A),
            Answer::Truncated
        );
        assert_eq!(
            parse(&reply(&query, [0x81, 0x82], &[]), 7, &q, Kind::A),
            Answer::Failed
        );
    }
}
