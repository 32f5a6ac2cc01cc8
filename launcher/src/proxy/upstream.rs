//! Opening the connection a client asked for: decide on the name, resolve it once,
//! check every address, connect to one that passed.

use super::connection::Shared;
use super::local;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
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
    let addrs = addresses(shared, host, port).map_err(Failure::Unresolved)?;
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

/// The addresses `host` stands for: itself for an IP literal, its pin, its entries in
/// `/etc/hosts`, or what the system resolver answers (once) for exactly that name.
///
/// Exactly: the resolver is asked for the name as absolute (`NAME.`), which turns off
/// the host's search domains (`search` in `/etc/resolv.conf`). With them, a name with
/// few dots (`secret`) is tried as `secret.corp.example` first, and any name that does
/// not exist is tried with each suffix after: the connection would go to a name the rules
/// never decided on (past a `--deny-domain secret.corp.example`, under `*`). The C
/// library does not match an absolute name against `/etc/hosts`, so those entries are
/// read here first.
fn addresses(shared: &Shared, host: &Host, port: u16) -> io::Result<Vec<IpAddr>> {
    let name = match host {
        Host::Ip(ip) => return Ok(vec![*ip]),
        Host::Name(name) => name,
    };
    if let Some(ip) = shared.config.rules.pinned(name) {
        return Ok(vec![ip]);
    }
    let listed = hosts_entries(
        &std::fs::read_to_string(HOSTS_FILE).unwrap_or_default(),
        name,
    );
    if !listed.is_empty() {
        return Ok(listed);
    }
    let absolute = format!("{}.", name.trim_end_matches('.'));
    let mut addrs: Vec<IpAddr> = (absolute.as_str(), port)
        .to_socket_addrs()?
        .map(|a| a.ip())
        .collect();
    addrs.dedup();
    if addrs.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "the name has no address",
        ));
    }
    Ok(addrs)
}

/// The hosts file the C library reads before DNS.
const HOSTS_FILE: &str = "/etc/hosts";

/// The addresses `hosts` (the text of a hosts file) gives `name` (any case), in order.
fn hosts_entries(hosts: &str, name: &str) -> Vec<IpAddr> {
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
}
