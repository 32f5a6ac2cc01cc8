//! The record of connections the filtering proxy refused, and how they are reported.
//!
//! The proxy appends one line per distinct refusal (`HOST PORT REASON`) to a file in the
//! command's private control directory, which the command cannot reach (it is hidden by
//! the filesystem rules). The host in a line is always one the proxy parsed and
//! normalised ([`crate::domains::Host`]: lower-case letters, digits, `-`, `_`, `.`, or an
//! IP literal), so a client cannot smuggle a line break, a space or a marker of its own
//! into the record; the reader still checks every field and skips what does not parse.
//! At most [`MAX_RECORDED`] distinct refusals are recorded; after that one
//! [`MORE_LINE`] says that more were refused.
//!
//! `stockade run` reports each as `[sandbox: network access to HOST:PORT denied]` and
//! in `--json` as `network.denied`.

use crate::addresses::AddressClass;
use crate::domains::{Host, Refusal};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// The file's name in the private control directory.
pub const LOG_FILE: &str = "network-denied";

/// The most distinct refusals recorded for one command.
pub const MAX_RECORDED: usize = 64;

/// The line that ends a record that reached [`MAX_RECORDED`].
pub const MORE_LINE: &str = "more";

/// The most bytes of the record a reader looks at (every line is short, and the writer
/// stops after [`MAX_RECORDED`] + 1 lines).
pub const MAX_LOG_BYTES: usize = 64 * 1024;

/// One refused connection; in JSON `{"host", "port", "reason"}`, the reason as its
/// [`reason_token`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NetworkDenial {
    /// The host as the proxy understood it: a name, an IPv4 address, or `[IPv6]`.
    pub host: String,
    pub port: u16,
    #[serde(serialize_with = "ser_reason", deserialize_with = "de_reason")]
    pub reason: Refusal,
}

fn ser_reason<S: Serializer>(reason: &Refusal, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&reason_token(*reason))
}

fn de_reason<'de, D: Deserializer<'de>>(d: D) -> Result<Refusal, D::Error> {
    let token = String::deserialize(d)?;
    parse_reason(&token)
        .ok_or_else(|| serde::de::Error::custom(format!("unknown reason {token:?}")))
}

impl NetworkDenial {
    pub fn new(host: &Host, port: u16, reason: Refusal) -> NetworkDenial {
        NetworkDenial {
            host: host.to_string(),
            port,
            reason,
        }
    }

    /// The record's line, newline included.
    pub fn line(&self) -> String {
        format!(
            "{} {} {}\n",
            self.host,
            self.port,
            reason_token(self.reason)
        )
    }

    /// Parses one line (without its newline); `None` for anything malformed.
    pub fn parse(line: &str) -> Option<NetworkDenial> {
        let mut words = line.split(' ');
        let (host, port, reason) = (words.next()?, words.next()?, words.next()?);
        if words.next().is_some() {
            return None;
        }
        // Only what the proxy itself writes: a host that parses and prints back as is.
        let parsed = Host::parse(host).ok()?;
        if parsed.to_string() != host {
            return None;
        }
        Some(NetworkDenial {
            host: host.to_string(),
            port: port.parse().ok().filter(|&p| p != 0)?,
            reason: parse_reason(reason)?,
        })
    }

    /// `HOST:PORT`, as markers print it.
    pub fn target(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The marker `stockade run` prints after the command's output.
    pub fn marker(&self) -> String {
        format!("[sandbox: network access to {} denied]", self.target())
    }
}

impl fmt::Display for NetworkDenial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.target(), self.reason.describe())
    }
}

/// The stable token of each reason, in the record and in JSON.
pub fn reason_token(reason: Refusal) -> String {
    match reason {
        Refusal::NotAllowed => "not-allowed".into(),
        Refusal::DeniedByRule => "denied".into(),
        Refusal::PortNotAllowed => "port-not-allowed".into(),
        Refusal::IpLiteral => "ip-literal".into(),
        Refusal::NonPublicAddress(class) => format!("{class}-address"),
        Refusal::MulticastDns => "multicast-dns".into(),
    }
}

fn parse_reason(token: &str) -> Option<Refusal> {
    const CLASSES: [AddressClass; 9] = [
        AddressClass::Public,
        AddressClass::Loopback,
        AddressClass::Unspecified,
        AddressClass::Private,
        AddressClass::LinkLocal,
        AddressClass::SharedAddressSpace,
        AddressClass::Multicast,
        AddressClass::Reserved,
        AddressClass::Local,
    ];
    Some(match token {
        "not-allowed" => Refusal::NotAllowed,
        "denied" => Refusal::DeniedByRule,
        "port-not-allowed" => Refusal::PortNotAllowed,
        "ip-literal" => Refusal::IpLiteral,
        "multicast-dns" => Refusal::MulticastDns,
        other => {
            let class = other.strip_suffix("-address")?;
            Refusal::NonPublicAddress(*CLASSES.iter().find(|c| c.as_str() == class)?)
        }
    })
}

/// What a record says: the refusals in the order they happened, and whether more were
/// refused than recorded. In JSON (the `network` object of `stockade run --json` and of
/// the classify verdict): `{"denied": [...], "moreDenied": bool}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DenialLog {
    pub denied: Vec<NetworkDenial>,
    #[serde(rename = "moreDenied")]
    pub more: bool,
}

impl DenialLog {
    /// Nothing was refused.
    pub fn is_empty(&self) -> bool {
        self.denied.is_empty() && !self.more
    }

    /// Reads a record's bytes (at most [`MAX_LOG_BYTES`] of them are looked at).
    pub fn parse(bytes: &[u8]) -> DenialLog {
        let bytes = &bytes[..bytes.len().min(MAX_LOG_BYTES)];
        let text = String::from_utf8_lossy(bytes);
        let mut log = DenialLog::default();
        // A line cut by the size bound (or by the writer being killed mid-write) has no
        // newline and is not read.
        let complete = text.rsplit_once('\n').map_or("", |(whole, _)| whole);
        for line in complete.split('\n') {
            if line == MORE_LINE {
                log.more = true;
            } else if let Some(d) = NetworkDenial::parse(line)
                && log.denied.len() < MAX_RECORDED
                && !log.denied.contains(&d)
            {
                log.denied.push(d);
            }
        }
        log
    }

    /// The markers `stockade run` prints, one per refusal, and one for the rest.
    pub fn markers(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.denied.iter().map(NetworkDenial::marker).collect();
        if self.more {
            lines.push("[sandbox: network access to more hosts denied]".into());
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denial(host: &str, port: u16, reason: Refusal) -> NetworkDenial {
        NetworkDenial::new(&Host::parse(host).unwrap(), port, reason)
    }

    #[test]
    fn lines_round_trip_and_markers_say_network() {
        for d in [
            denial("evil.example", 443, Refusal::NotAllowed),
            denial("a.example.org", 22, Refusal::PortNotAllowed),
            denial("93.184.216.34", 80, Refusal::IpLiteral),
            denial("::1", 443, Refusal::IpLiteral),
            denial(
                "internal.test",
                443,
                Refusal::NonPublicAddress(AddressClass::LinkLocal),
            ),
            denial("x.org", 8080, Refusal::DeniedByRule),
            denial("printer.local", 631, Refusal::MulticastDns),
        ] {
            let line = d.line();
            assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
            assert_eq!(
                NetworkDenial::parse(line.trim_end()),
                Some(d.clone()),
                "{line}"
            );
        }
        let d = denial("::1", 443, Refusal::IpLiteral);
        assert_eq!(d.marker(), "[sandbox: network access to [::1]:443 denied]");
        assert!(!d.marker().contains("file access"));
        assert_eq!(
            reason_token(Refusal::NonPublicAddress(AddressClass::Loopback)),
            "loopback-address"
        );
    }

    #[test]
    fn a_record_is_read_strictly_and_bounded() {
        let good = denial("evil.example", 443, Refusal::NotAllowed);
        let mut bytes = good.line().into_bytes();
        for junk in [
            "EVIL.example 443 not-allowed\n",
            "a\u{1b}[31m 443 not-allowed\n",
            "evil.example 0 not-allowed\n",
            "evil.example 443 made-up\n",
            "evil.example 443 not-allowed extra\n",
            "[sandbox: file access denied]\n",
            "\n",
        ] {
            bytes.extend_from_slice(junk.as_bytes());
        }
        bytes.extend_from_slice(good.line().as_bytes());
        bytes.extend_from_slice(b"cut.example 443 not-al");
        let log = DenialLog::parse(&bytes);
        assert_eq!(log.denied, vec![good.clone()]);
        assert!(!log.more);
        let mut many = Vec::new();
        for i in 0..(MAX_RECORDED + 10) {
            many.extend_from_slice(
                denial(&format!("h{i}.test"), 443, Refusal::NotAllowed)
                    .line()
                    .as_bytes(),
            );
        }
        many.extend_from_slice(format!("{MORE_LINE}\n").as_bytes());
        let log = DenialLog::parse(&many);
        assert_eq!(log.denied.len(), MAX_RECORDED);
        assert!(log.more);
        assert_eq!(
            log.markers().last().unwrap(),
            "[sandbox: network access to more hosts denied]"
        );
        assert_eq!(
            DenialLog::parse(&vec![b'x'; 10 * MAX_LOG_BYTES]),
            DenialLog::default()
        );
    }
}
