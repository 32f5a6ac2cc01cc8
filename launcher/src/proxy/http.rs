//! HTTP: `CONNECT host:port` tunnels and plain requests in absolute form.
//!
//! The request head is read whole (bounded in size and time), parsed strictly, and
//! decided on the host it names. A tunnel is answered `200` and then carries bytes both
//! ways untouched (TLS is never decrypted). A plain request is forwarded with its target
//! in origin form, its `Host` header set to the host that was decided on (so the
//! destination cannot be told a different one), hop-by-hop headers removed and
//! `Connection: close` added. Only the first request's head is parsed and decided on:
//! whatever the client sends after it (a body, or a second pipelined request with a
//! `Host` of its own) goes unparsed to the same decided host and port, exactly what a
//! `CONNECT` tunnel to them would carry, so it reaches nothing the decision did not allow.

use super::connection::{Shared, answer, read_before};
use super::relay;
use super::upstream::{self, Failure};
use std::io;
use std::net::TcpStream;
use std::time::Instant;
use stockade_policy::domains::{Host, Refusal};

/// Why a request head could not be used.
#[derive(Debug, PartialEq, Eq)]
pub enum BadRequest {
    TooLarge,
    Malformed(&'static str),
}

/// What the request asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Target {
    /// `CONNECT host:port`.
    Tunnel { host: Host, port: u16 },
    /// `METHOD http://authority/path`: the head to send upstream is built from it.
    Forward {
        host: Host,
        port: u16,
        head: Vec<u8>,
    },
}

/// Reads a request head that starts with `first`, before `deadline`, at most `max`
/// bytes. Returns the head (through its blank line) and whatever came after it.
fn read_head(
    stream: &TcpStream,
    first: u8,
    max: usize,
    deadline: Instant,
) -> Result<(Vec<u8>, Vec<u8>), io::Result<BadRequest>> {
    let mut data = vec![first];
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = head_end(&data) {
            if end > max {
                return Err(Ok(BadRequest::TooLarge));
            }
            let rest = data.split_off(end);
            return Ok((data, rest));
        }
        if data.len() > max {
            return Err(Ok(BadRequest::TooLarge));
        }
        match read_before(stream, &mut chunk, deadline) {
            Ok(0) => return Err(Err(io::ErrorKind::UnexpectedEof.into())),
            Ok(n) => data.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(Err(e)),
        }
    }
}

/// Where the blank line that ends a head ends (`\r\n\r\n`, or bare `\n\n`).
fn head_end(data: &[u8]) -> Option<usize> {
    let crlf = data
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4);
    let lf = data.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A token character (RFC 9110): method and header names.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Headers not forwarded: they concern this hop, not the destination. `Host` is
/// replaced, `Connection` rewritten.
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
    "host",
];

/// Parses a request head (through its blank line).
pub fn parse(head: &[u8]) -> Result<Target, BadRequest> {
    let bad = BadRequest::Malformed;
    let text = head
        .strip_suffix(b"\r\n\r\n")
        .or_else(|| head.strip_suffix(b"\n\n"))
        .ok_or(bad("no blank line after the head"))?;
    let mut lines = text
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let request_line = lines.next().ok_or(bad("empty request"))?;
    let request_line =
        std::str::from_utf8(request_line).map_err(|_| bad("request line is not ASCII"))?;
    let mut parts = request_line.split(' ');
    let (method, target, version) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(t), Some(v), None) => (m, t, v),
        _ => return Err(bad("request line is not METHOD TARGET VERSION")),
    };
    if method.is_empty() || !method.bytes().all(is_tchar) {
        return Err(bad("bad method"));
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(bad("only HTTP/1.0 and HTTP/1.1 are spoken"));
    }
    let mut headers: Vec<(&[u8], &[u8])> = Vec::new();
    for line in lines {
        if line.first().is_some_and(|&b| b == b' ' || b == b'\t') {
            return Err(bad("folded header lines are not accepted"));
        }
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .ok_or(bad("header line without a colon"))?;
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
            return Err(bad("bad header name"));
        }
        if value.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
            return Err(bad("control character in a header value"));
        }
        headers.push((name, value));
    }
    if method == "CONNECT" {
        let (host, port) = authority(target, None)?;
        return Ok(Target::Tunnel { host, port });
    }
    let rest = strip_prefix_ignore_case(target, "http://").ok_or(bad(
        "only http:// targets in absolute form are forwarded (use CONNECT for https)",
    ))?;
    let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (auth, path) = rest.split_at(split);
    let (host, port) = authority(auth, Some(80))?;
    let path = match path.split('#').next().unwrap_or("") {
        "" => "/".to_string(),
        p if p.starts_with('?') => format!("/{p}"),
        p => p.to_string(),
    };
    // Forwarded: the request line in origin form, the decided host, the end-to-end
    // headers as they came, one request only.
    let mut out = format!(
        "{method} {path} {version}\r\nHost: {}\r\n",
        host_header(&host, port)
    )
    .into_bytes();
    let listed = connection_tokens(&headers);
    for (name, value) in &headers {
        let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
        if HOP_BY_HOP.contains(&lower.as_str()) || listed.contains(&lower) {
            continue;
        }
        out.extend_from_slice(name);
        out.push(b':');
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Target::Forward {
        host,
        port,
        head: out,
    })
}

/// The header names a `Connection` header lists (hop-by-hop as well), lower-case.
fn connection_tokens(headers: &[(&[u8], &[u8])]) -> Vec<String> {
    headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(b"connection"))
        .flat_map(|(_, v)| {
            String::from_utf8_lossy(v)
                .split(',')
                .map(|t| t.trim().to_ascii_lowercase())
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// `Host` as sent upstream: the port only when it is not HTTP's default.
fn host_header(host: &Host, port: u16) -> String {
    match port {
        80 => host.to_string(),
        p => format!("{host}:{p}"),
    }
}

/// Parses `host[:port]` (`[v6]:port`); `default` is the port when none is given (a
/// tunnel must name one). User information (`user@host`) is refused: it makes the host
/// ambiguous to readers that disagree on it.
fn authority(text: &str, default: Option<u16>) -> Result<(Host, u16), BadRequest> {
    let bad = BadRequest::Malformed;
    if text.contains('@') {
        return Err(bad("user information in the target is not accepted"));
    }
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (inner, after) = rest.split_once(']').ok_or(bad("unclosed ["))?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or(bad("junk after ]"))?),
        };
        (&text[..inner.len() + 2], port)
    } else {
        match text.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (text, None),
        }
    };
    let port = match port {
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => p
            .parse::<u16>()
            .ok()
            .filter(|&n| n != 0)
            .ok_or(bad("bad port"))?,
        Some(_) => return Err(bad("bad port")),
        None => default.ok_or(bad("CONNECT needs host:port"))?,
    };
    let host = Host::parse(host).map_err(|_| bad("bad host name"))?;
    Ok((host, port))
}

/// A complete short response that closes the connection.
fn response(status: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The response to a refusal. It names the host and the reason, never an errno text a
/// denial scanner could take for a refused file access.
fn refused(host: &Host, port: u16, why: Refusal) -> Vec<u8> {
    response(
        "403 Forbidden",
        &format!(
            "stockade: network access to {host}:{port} denied: {}\n",
            why.describe()
        ),
    )
}

/// Serves one HTTP connection whose first byte was `first`.
pub fn serve(stream: TcpStream, first: u8, shared: &Shared, deadline: Instant) {
    let limits = shared.config.limits;
    let say = |bytes: Vec<u8>| {
        let _ = answer(&stream, &bytes, limits.head_time);
    };
    let (head, rest) = match read_head(&stream, first, limits.max_head, deadline) {
        Ok(parts) => parts,
        Err(Ok(BadRequest::TooLarge)) => {
            return say(response(
                "431 Request Header Fields Too Large",
                "stockade: request head too large\n",
            ));
        }
        Err(Ok(BadRequest::Malformed(_))) => return,
        Err(Err(e)) if e.kind() == io::ErrorKind::TimedOut => {
            return say(response(
                "408 Request Timeout",
                "stockade: request head not received in time\n",
            ));
        }
        Err(Err(_)) => return,
    };
    let target = match parse(&head) {
        Ok(t) => t,
        Err(BadRequest::Malformed(why)) => {
            return say(response("400 Bad Request", &format!("stockade: {why}\n")));
        }
        Err(BadRequest::TooLarge) => return,
    };
    let (host, port, to_server, tunnel) = match target {
        Target::Tunnel { host, port } => (host, port, rest, true),
        Target::Forward {
            host,
            port,
            mut head,
        } => {
            head.extend_from_slice(&rest);
            (host, port, head, false)
        }
    };
    let server = match upstream::open(shared, &host, port) {
        Ok(s) => s,
        Err(Failure::Refused(why)) => return say(refused(&host, port, why)),
        Err(Failure::Unresolved(e)) => {
            return say(response(
                "502 Bad Gateway",
                &format!("stockade: cannot resolve {host}: {e}\n"),
            ));
        }
        Err(Failure::Unreachable(e)) => {
            let status = if e.kind() == io::ErrorKind::TimedOut {
                "504 Gateway Timeout"
            } else {
                "502 Bad Gateway"
            };
            return say(response(
                status,
                &format!("stockade: cannot connect to {host}:{port}: {e}\n"),
            ));
        }
    };
    if tunnel
        && answer(
            &stream,
            b"HTTP/1.1 200 Connection established\r\n\r\n",
            limits.head_time,
        )
        .is_err()
    {
        return;
    }
    relay::relay(&stream, &server, to_server, limits.idle_time);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forward(head: &str) -> (Host, u16, String) {
        match parse(head.as_bytes()).unwrap() {
            Target::Forward { host, port, head } => (host, port, String::from_utf8(head).unwrap()),
            t => panic!("{t:?}"),
        }
    }

    #[test]
    fn connect_targets_name_host_and_port() {
        let t = parse(b"CONNECT Example.org:443 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_eq!(
            t,
            Target::Tunnel {
                host: Host::Name("example.org".into()),
                port: 443
            }
        );
        let t = parse(b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(
            t,
            Target::Tunnel {
                host: Host::Ip("::1".parse().unwrap()),
                port: 8443
            }
        );
        for bad in [
            "CONNECT example.org HTTP/1.1\r\n\r\n",
            "CONNECT example.org:0 HTTP/1.1\r\n\r\n",
            "CONNECT example.org:99999 HTTP/1.1\r\n\r\n",
            "CONNECT example.org:+443 HTTP/1.1\r\n\r\n",
            "CONNECT user@example.org:443 HTTP/1.1\r\n\r\n",
            "CONNECT exa mple.org:443 HTTP/1.1\r\n\r\n",
            "CONNECT 127.1:443 HTTP/1.1\r\n\r\n",
            "CONNECT example.org:443 HTTP/2\r\n\r\n",
            "CONNECT  example.org:443 HTTP/1.1\r\n\r\n",
            "CONNECT example.org:443 HTTP/1.1\r\n folded\r\n\r\n",
            "CONNECT example.org:443 HTTP/1.1\r\nBad Name: x\r\n\r\n",
            "CONNECT example.org:443 HTTP/1.1\r\nX: a\u{1}b\r\n\r\n",
        ] {
            assert!(
                matches!(parse(bad.as_bytes()), Err(BadRequest::Malformed(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn forwarded_requests_get_the_decided_host_and_close() {
        let (host, port, head) = forward(
            "GET http://Example.org/a?b=1 HTTP/1.1\r\nHost: evil.example\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive, X-Secret\r\nX-Secret: 1\r\nProxy-Authorization: Basic eA==\r\nAccept: */*\r\n\r\n",
        );
        assert_eq!(host, Host::Name("example.org".into()));
        assert_eq!(port, 80);
        assert_eq!(
            head,
            "GET /a?b=1 HTTP/1.1\r\nHost: example.org\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        let (_, port, head) = forward("POST http://example.org:8080?q HTTP/1.0\n\n");
        assert_eq!(port, 8080);
        assert!(
            head.starts_with("POST /?q HTTP/1.0\r\nHost: example.org:8080\r\n"),
            "{head}"
        );
        let (_, _, head) = forward("GET HTTP://example.org HTTP/1.1\r\n\r\n");
        assert!(head.starts_with("GET / HTTP/1.1\r\n"), "{head}");
        for bad in [
            "GET / HTTP/1.1\r\nHost: example.org\r\n\r\n",
            "GET https://example.org/ HTTP/1.1\r\n\r\n",
            "GET http://user:pw@example.org/ HTTP/1.1\r\n\r\n",
            "GET http://example.org:/ HTTP/1.1\r\n\r\n",
            "G\u{1}T http://example.org/ HTTP/1.1\r\n\r\n",
        ] {
            assert!(
                matches!(parse(bad.as_bytes()), Err(BadRequest::Malformed(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn the_head_ends_at_the_first_blank_line() {
        assert_eq!(head_end(b"A\r\n\r\nbody"), Some(5));
        assert_eq!(head_end(b"A\n\nbody\r\n\r\n"), Some(3));
        assert_eq!(head_end(b"A\r\nB: c\r\n"), None);
    }
}
