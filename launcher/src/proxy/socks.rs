//! SOCKS5 (RFC 1928), `CONNECT` only, no authentication. A client that sends a host
//! name (`socks5h://`, address type 3) gets the same decision as an HTTP client; one that
//! resolved the name itself sends an IP literal, which is refused unless allowed
//! explicitly. `BIND` and `UDP ASSOCIATE` are refused: a confined command may not accept
//! connections or send datagrams through the proxy.

use super::connection::{Shared, answer, read_exact_before};
use super::relay;
use super::upstream::{self, Failure};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, TcpStream};
use std::time::Instant;
use stockade_policy::domains::Host;

pub const VERSION_5: u8 = 0x05;
pub const VERSION_4: u8 = 0x04;

const NO_AUTHENTICATION: u8 = 0x00;
const NO_ACCEPTABLE_METHOD: u8 = 0xff;
const CMD_CONNECT: u8 = 0x01;
const ATYP_IPV4: u8 = 0x01;
const ATYP_NAME: u8 = 0x03;
const ATYP_IPV6: u8 = 0x04;

/// Reply codes.
const SUCCEEDED: u8 = 0x00;
const GENERAL_FAILURE: u8 = 0x01;
const NOT_ALLOWED: u8 = 0x02;
const HOST_UNREACHABLE: u8 = 0x04;
const CONNECTION_REFUSED: u8 = 0x05;
const TTL_EXPIRED: u8 = 0x06;
const COMMAND_NOT_SUPPORTED: u8 = 0x07;
const ADDRESS_TYPE_NOT_SUPPORTED: u8 = 0x08;

/// A reply with an all-zero bound address: the proxy's own addresses are nobody's
/// business.
fn reply(code: u8) -> [u8; 10] {
    [VERSION_5, code, 0, ATYP_IPV4, 0, 0, 0, 0, 0, 0]
}

/// SOCKS4 carries no host name in its common form: answered "rejected".
pub fn refuse_v4(stream: &TcpStream, deadline: Instant) {
    let limit = deadline.saturating_duration_since(Instant::now());
    let _ = answer(stream, &[0x00, 0x5b, 0, 0, 0, 0, 0, 0], limit.max(SHORT));
}

/// The least time given to a final answer.
const SHORT: std::time::Duration = std::time::Duration::from_secs(1);

/// The request, once the version byte was read.
fn handshake(stream: &TcpStream, deadline: Instant) -> io::Result<Result<(Host, u16), u8>> {
    let mut n = [0u8; 1];
    read_exact_before(stream, &mut n, deadline)?;
    let mut methods = vec![0u8; usize::from(n[0])];
    read_exact_before(stream, &mut methods, deadline)?;
    let limit = deadline
        .saturating_duration_since(Instant::now())
        .max(SHORT);
    if !methods.contains(&NO_AUTHENTICATION) {
        answer(stream, &[VERSION_5, NO_ACCEPTABLE_METHOD], limit)?;
        return Err(io::ErrorKind::PermissionDenied.into());
    }
    answer(stream, &[VERSION_5, NO_AUTHENTICATION], limit)?;
    let mut head = [0u8; 4];
    read_exact_before(stream, &mut head, deadline)?;
    let [version, command, _reserved, atyp] = head;
    if version != VERSION_5 {
        return Ok(Err(GENERAL_FAILURE));
    }
    let host = match atyp {
        ATYP_IPV4 => {
            let mut a = [0u8; 4];
            read_exact_before(stream, &mut a, deadline)?;
            Some(Host::Ip(IpAddr::V4(Ipv4Addr::from(a))))
        }
        ATYP_IPV6 => {
            let mut a = [0u8; 16];
            read_exact_before(stream, &mut a, deadline)?;
            Some(Host::Ip(IpAddr::V6(Ipv6Addr::from(a))))
        }
        ATYP_NAME => {
            let mut len = [0u8; 1];
            read_exact_before(stream, &mut len, deadline)?;
            let mut name = vec![0u8; usize::from(len[0])];
            read_exact_before(stream, &mut name, deadline)?;
            // A name that is not a valid host (or is an IP literal in name form, which
            // Host::parse reads as the address it is) is judged as what it parses to.
            std::str::from_utf8(&name)
                .ok()
                .and_then(|n| Host::parse(n).ok())
        }
        _ => return Ok(Err(ADDRESS_TYPE_NOT_SUPPORTED)),
    };
    let mut port = [0u8; 2];
    read_exact_before(stream, &mut port, deadline)?;
    let port = u16::from_be_bytes(port);
    if command != CMD_CONNECT {
        return Ok(Err(COMMAND_NOT_SUPPORTED));
    }
    match (host, port) {
        (Some(host), p) if p != 0 => Ok(Ok((host, p))),
        _ => Ok(Err(HOST_UNREACHABLE)),
    }
}

/// Serves one SOCKS5 connection (its version byte already read).
pub fn serve(stream: TcpStream, shared: &Shared, deadline: Instant) {
    let limits = shared.config.limits;
    let say = |code: u8| {
        let _ = answer(&stream, &reply(code), limits.head_time);
    };
    let (host, port) = match handshake(&stream, deadline) {
        Ok(Ok(target)) => target,
        Ok(Err(code)) => return say(code),
        Err(_) => return,
    };
    let server = match upstream::open(shared, &host, port) {
        Ok(s) => s,
        Err(Failure::Refused(_)) => return say(NOT_ALLOWED),
        Err(Failure::Unresolved(_)) => return say(HOST_UNREACHABLE),
        Err(Failure::Unreachable(e)) => {
            return say(match e.kind() {
                io::ErrorKind::ConnectionRefused => CONNECTION_REFUSED,
                io::ErrorKind::TimedOut => TTL_EXPIRED,
                _ => HOST_UNREACHABLE,
            });
        }
    };
    if answer(&stream, &reply(SUCCEEDED), limits.head_time).is_err() {
        return;
    }
    relay::relay(&stream, &server, Vec::new(), limits.idle_time);
}
