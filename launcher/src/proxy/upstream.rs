//! Opening the connection a client asked for: decide on the name, resolve it once,
//! check every address, connect to one that passed.

use super::connection::Shared;
use super::{local, resolver};
use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream};
use stockade_policy::domains::{Host, Refusal};

/// Why no connection was opened.
#[derive(Debug)]
pub enum Failure {
    /// The rules refuse it (recorded).
    Refused(Refusal),
    /// The name has no address (or resolution failed).
    Unresolved(io::Error),
    /// No checked address accepted the connection.
    Unreachable(io::Error),
}

/// Decides on `host:port` and, when allowed, connects. A refusal is recorded here, once
/// per connection, with the reason the rules gave.
pub fn open(shared: &Shared, host: &Host, port: u16) -> Result<TcpStream, Failure> {
    let rules = &shared.config.rules;
    if let Err(why) = rules.decide(host, port) {
        shared.refused(host, port, why);
        return Err(Failure::Refused(why));
    }
    let addrs = addresses(shared, host, port)?;
    // This machine's own addresses, listed now: one a name resolves to is refused as
    // loopback is (see `local`). When they cannot be listed, every address counts as
    // local: refused, never connected to unchecked.
    let own = local::addresses();
    let mut refusal = None;
    let mut allowed = Vec::new();
    for ip in addrs {
        let is_local = own.as_deref().is_none_or(|own| local::is_local(own, ip));
        match rules.check_address(ip, port, is_local) {
            Ok(()) => allowed.push(ip),
            Err(why) => {
                refusal.get_or_insert(why);
            }
        }
    }
    if allowed.is_empty() {
        let why = refusal.unwrap_or(Refusal::NotAllowed);
        shared.refused(host, port, why);
        return Err(Failure::Refused(why));
    }
    // Exactly the addresses checked above: nothing is resolved a second time.
    let mut last = io::Error::from(io::ErrorKind::NotFound);
    for ip in allowed {
        match TcpStream::connect_timeout(
            &SocketAddr::new(ip, port),
            shared.config.limits.connect_time,
        ) {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Err(e) => last = e,
        }
    }
    Err(Failure::Unreachable(last))
}

/// The addresses `host` stands for: itself for an IP literal, its pin, else what
/// [`resolver`] finds for exactly that name (its `/etc/hosts` entries, or the
/// nameservers' answer for `NAME.`: no search domain is appended, so the connection goes
/// to the name the rules decided on). Never the C library's resolver: it loads code.
/// A multicast DNS name only that resolver knows is refused (recorded), with the way out.
fn addresses(shared: &Shared, host: &Host, port: u16) -> Result<Vec<IpAddr>, Failure> {
    let name = match host {
        Host::Ip(ip) => return Ok(vec![*ip]),
        Host::Name(name) => name,
    };
    if let Some(ip) = shared.config.rules.pinned(name) {
        return Ok(vec![ip]);
    }
    match resolver::resolve(name).map_err(Failure::Unresolved)? {
        resolver::Resolved::Addresses(addrs) => Ok(addrs),
        resolver::Resolved::MulticastDns => {
            shared.refused(host, port, Refusal::MulticastDns);
            Err(Failure::Refused(Refusal::MulticastDns))
        }
    }
}
