//! Address classes: which IP addresses a name may lead the filtering proxy to.
//!
//! A domain allow-list decides on names, but a name resolves to whatever its DNS answer
//! says: `internal.example.org` may point at `127.0.0.1`, `10.0.0.5` or the cloud
//! metadata service at `169.254.169.254`. A command allowed to reach that name would
//! then reach the host's own services or the private network behind it. So every
//! address the proxy is about to connect to is classified here, and anything but a
//! [`AddressClass::Public`] address is refused unless the caller allowed that address
//! explicitly (see [`crate::domains`]).
//!
//! IPv6 addresses that carry an IPv4 address (IPv4-mapped `::ffff:a.b.c.d`, the
//! deprecated IPv4-compatible `::a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) are
//! classified by the IPv4 address they lead to: `::ffff:127.0.0.1` on a dual-stack
//! socket *is* `127.0.0.1`.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What kind of destination an address is.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AddressClass {
    /// Routable on the internet: the only class reachable without an explicit allow.
    Public,
    /// This machine: `127.0.0.0/8`, `::1`.
    Loopback,
    /// "Any address": `0.0.0.0/8`, `::` (connecting to it reaches this machine).
    Unspecified,
    /// Private networks: `10/8`, `172.16/12`, `192.168/16`, `fc00::/7` (unique local),
    /// `fec0::/10` (the deprecated site-local).
    Private,
    /// Link-local: `169.254/16` (cloud metadata services live here), `fe80::/10`.
    LinkLocal,
    /// Carrier-grade NAT space, `100.64/10`: the provider's network, not the internet.
    SharedAddressSpace,
    /// Multicast and broadcast: `224/4`, `255.255.255.255`, `ff00::/8`.
    Multicast,
    /// Reserved, documentation and benchmarking ranges, and IPv6 transition forms that
    /// lead nowhere public (`240/4`, `192.0.0/24`, `192.0.2/24`, `198.18/15`,
    /// `198.51.100/24`, `203.0.113/24`, `2001:db8::/32`, Teredo `2001::/32`,
    /// IPv4-compatible `::a.b.c.d`, discard `100::/64`).
    Reserved,
    /// An address of one of this machine's own interfaces, public or not (a server's
    /// public IPv4 address, a global IPv6 address): connecting to it reaches the host's
    /// own services, as loopback does. [`AddressClass::of`] never answers it, since it
    /// is a fact of the host, not of the address: the proxy looks at its interfaces.
    Local,
}

impl AddressClass {
    /// The class of `ip`.
    pub fn of(ip: IpAddr) -> AddressClass {
        match ip {
            IpAddr::V4(v4) => of_v4(v4),
            IpAddr::V6(v6) => of_v6(v6),
        }
    }

    pub fn is_public(self) -> bool {
        self == AddressClass::Public
    }

    /// The stable name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            AddressClass::Public => "public",
            AddressClass::Loopback => "loopback",
            AddressClass::Unspecified => "unspecified",
            AddressClass::Private => "private",
            AddressClass::LinkLocal => "link-local",
            AddressClass::SharedAddressSpace => "shared-address-space",
            AddressClass::Multicast => "multicast",
            AddressClass::Reserved => "reserved",
            AddressClass::Local => "local",
        }
    }
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether `ip` lies in `net/prefix` (both of one family).
fn v4_in(ip: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    };
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn of_v4(ip: Ipv4Addr) -> AddressClass {
    use AddressClass::*;
    const RANGES: &[([u8; 4], u32, AddressClass)] = &[
        ([0, 0, 0, 0], 8, Unspecified),
        ([127, 0, 0, 0], 8, Loopback),
        ([10, 0, 0, 0], 8, Private),
        ([172, 16, 0, 0], 12, Private),
        ([192, 168, 0, 0], 16, Private),
        ([169, 254, 0, 0], 16, LinkLocal),
        ([100, 64, 0, 0], 10, SharedAddressSpace),
        ([224, 0, 0, 0], 4, Multicast),
        ([255, 255, 255, 255], 32, Multicast),
        ([240, 0, 0, 0], 4, Reserved),
        ([192, 0, 0, 0], 24, Reserved),
        ([192, 0, 2, 0], 24, Reserved),
        ([198, 18, 0, 0], 15, Reserved),
        ([198, 51, 100, 0], 24, Reserved),
        ([203, 0, 113, 0], 24, Reserved),
    ];
    RANGES
        .iter()
        .find(|(net, prefix, _)| v4_in(ip, *net, *prefix))
        .map_or(Public, |&(_, _, class)| class)
}

fn of_v6(ip: Ipv6Addr) -> AddressClass {
    use AddressClass::*;
    let s = ip.segments();
    if ip.is_unspecified() {
        return Unspecified;
    }
    if ip.is_loopback() {
        return Loopback;
    }
    // Forms that carry an IPv4 address lead where that address leads.
    if let Some(v4) = carried_v4(ip) {
        return of_v4(v4);
    }
    if s[..6] == [0, 0, 0, 0, 0, 0] {
        // IPv4-compatible (`::a.b.c.d`), deprecated: no stack should route it.
        return Reserved;
    }
    match s[0] {
        x if x & 0xfe00 == 0xfc00 => Private,
        x if x & 0xffc0 == 0xfec0 => Private,
        x if x & 0xffc0 == 0xfe80 => LinkLocal,
        x if x & 0xff00 == 0xff00 => Multicast,
        0x2001 if s[1] == 0x0db8 || s[1] == 0 => Reserved,
        0x0100 if s[1..4] == [0, 0, 0] => Reserved,
        _ => Public,
    }
}

/// The IPv4 address an IPv6 address leads to, for the forms that carry one:
/// IPv4-mapped (`::ffff:a.b.c.d`, the same socket address on a dual-stack socket), NAT64
/// (`64:ff9b::/96`, translated to it by the network's gateway) and 6to4 (`2002::/16`,
/// the network behind that IPv4 router). Classes and address rules both judge such an
/// address by this one, so neither `::ffff:127.0.0.1` passes as public nor
/// `64:ff9b::5db8:d822` slips past a rule denying `93.184.216.0/24`.
pub fn carried_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        return Some(embedded_v4(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return Some(embedded_v4(s[1], s[2]));
    }
    None
}

fn embedded_v4(hi: u16, lo: u16) -> Ipv4Addr {
    Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo))
}

/// An address range: `ADDR/PREFIX`, or one address (the whole prefix).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AddressRange {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl AddressRange {
    /// One address.
    pub fn single(addr: IpAddr) -> AddressRange {
        AddressRange {
            addr,
            prefix: match addr {
                IpAddr::V4(_) => 32,
                IpAddr::V6(_) => 128,
            },
        }
    }

    /// Parses `ADDR` or `ADDR/PREFIX` (no brackets). The address must be the start of
    /// its range (`10.0.0.0/8`, not `10.1.2.3/8`): anything else is a typo that would
    /// allow more than the caller read.
    pub fn parse(text: &str) -> Result<AddressRange, String> {
        let (addr, prefix) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("{addr:?} is not an IP address"))?;
        let max = match addr {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        let prefix = match prefix {
            None => max,
            Some(p) => match p.parse::<u8>() {
                Ok(n) if n <= max && (p == "0" || !p.starts_with('0')) => n,
                _ => return Err(format!("/{p} is not a prefix length (0 to {max})")),
            },
        };
        let range = AddressRange { addr, prefix };
        if range.network() != addr {
            return Err(format!(
                "{addr}/{prefix} has bits set past the prefix; write {}/{prefix}",
                range.network()
            ));
        }
        Ok(range)
    }

    /// The first address of the range.
    fn network(&self) -> IpAddr {
        match self.addr {
            IpAddr::V4(a) => {
                let mask = mask32(self.prefix);
                IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask))
            }
            IpAddr::V6(a) => {
                let mask = mask128(self.prefix);
                IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask))
            }
        }
    }

    /// Whether `ip` is in the range. An IPv6 address that carries an IPv4 address
    /// ([`carried_v4`]) is in an IPv4 range when the address it carries is (it leads
    /// there), and in an IPv6 range as itself.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match (self.addr, ip) {
            (IpAddr::V4(_), IpAddr::V6(v6)) => carried_v4(v6).map_or(ip, IpAddr::V4),
            _ => ip,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = mask32(self.prefix);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = mask128(self.prefix);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

fn mask32(prefix: u8) -> u32 {
    match prefix {
        0 => 0,
        p => u32::MAX << (32 - u32::from(p.min(32))),
    }
}

fn mask128(prefix: u8) -> u128 {
    match prefix {
        0 => 0,
        p => u128::MAX << (128 - u32::from(p.min(128))),
    }
}

impl fmt::Display for AddressRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let full = matches!(
            (self.addr, self.prefix),
            (IpAddr::V4(_), 32) | (IpAddr::V6(_), 128)
        );
        match (self.addr, full) {
            (addr, true) => write!(f, "{addr}"),
            (addr, false) => write!(f, "{addr}/{}", self.prefix),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(s: &str) -> AddressClass {
        AddressClass::of(s.parse().unwrap())
    }

    #[test]
    fn the_host_and_private_networks_are_not_public() {
        use AddressClass::*;
        for (addr, want) in [
            ("127.0.0.1", Loopback),
            ("127.255.1.2", Loopback),
            ("::1", Loopback),
            ("0.0.0.0", Unspecified),
            ("0.1.2.3", Unspecified),
            ("::", Unspecified),
            ("10.1.2.3", Private),
            ("172.16.0.1", Private),
            ("172.31.255.255", Private),
            ("192.168.1.1", Private),
            ("fc00::1", Private),
            ("fd12:3456::1", Private),
            ("fec0::1", Private),
            ("169.254.169.254", LinkLocal),
            ("fe80::1", LinkLocal),
            ("100.64.0.1", SharedAddressSpace),
            ("224.0.0.1", Multicast),
            ("255.255.255.255", Multicast),
            ("ff02::1", Multicast),
            ("240.0.0.1", Reserved),
            ("192.0.2.7", Reserved),
            ("198.18.0.1", Reserved),
            ("2001:db8::1", Reserved),
            ("2001::1", Reserved),
            ("::7f00:1", Reserved),
        ] {
            assert_eq!(class(addr), want, "{addr}");
        }
    }

    #[test]
    fn ipv6_forms_of_ipv4_addresses_are_judged_by_the_ipv4_address() {
        use AddressClass::*;
        assert_eq!(class("::ffff:127.0.0.1"), Loopback);
        assert_eq!(class("::ffff:10.0.0.1"), Private);
        assert_eq!(class("::ffff:169.254.169.254"), LinkLocal);
        assert_eq!(class("64:ff9b::7f00:1"), Loopback);
        assert_eq!(class("64:ff9b::a9fe:a9fe"), LinkLocal);
        assert_eq!(class("2002:7f00:1::"), Loopback);
        assert_eq!(class("2002:c0a8:101::1"), Private);
        // Controls: the same forms around public addresses.
        assert_eq!(class("::ffff:93.184.216.34"), Public);
        assert_eq!(class("64:ff9b::5db8:d822"), Public);
        assert_eq!(class("2002:5db8:d822::1"), Public);
    }

    #[test]
    fn routable_addresses_are_public() {
        for addr in [
            "93.184.216.34",
            "8.8.8.8",
            "172.32.0.1",
            "172.15.255.255",
            "100.128.0.1",
            "169.253.0.1",
            "2606:4700::1111",
            "2a00:1450:4001::1",
        ] {
            assert_eq!(class(addr), AddressClass::Public, "{addr}");
        }
    }

    #[test]
    fn ranges_parse_strictly_and_contain_what_they_say() {
        let r = AddressRange::parse("10.0.0.0/8").unwrap();
        assert!(r.contains("10.200.1.1".parse().unwrap()));
        assert!(r.contains("::ffff:10.0.0.1".parse().unwrap()));
        assert!(r.contains("64:ff9b::a00:1".parse().unwrap()));
        assert!(r.contains("2002:a00:1::5".parse().unwrap()));
        assert!(!r.contains("64:ff9b::b00:1".parse().unwrap()));
        assert!(!r.contains("11.0.0.1".parse().unwrap()));
        assert!(!r.contains("::1".parse().unwrap()));
        assert_eq!(r.to_string(), "10.0.0.0/8");
        let one = AddressRange::parse("127.0.0.1").unwrap();
        assert_eq!(one, AddressRange::single("127.0.0.1".parse().unwrap()));
        assert!(one.contains("127.0.0.1".parse().unwrap()));
        assert!(!one.contains("127.0.0.2".parse().unwrap()));
        assert_eq!(one.to_string(), "127.0.0.1");
        let v6 = AddressRange::parse("fc00::/7").unwrap();
        assert!(v6.contains("fd00::5".parse().unwrap()));
        // An IPv6 range holds IPv6 forms as themselves.
        let nat64 = AddressRange::parse("64:ff9b::/96").unwrap();
        assert!(nat64.contains("64:ff9b::a00:1".parse().unwrap()));
        assert!(!v6.contains("fe00::5".parse().unwrap()));
        let all = AddressRange::parse("0.0.0.0/0").unwrap();
        assert!(all.contains("8.8.8.8".parse().unwrap()));
        for bad in [
            "10.1.2.3/8",
            "10.0.0.0/33",
            "10.0.0.0/08",
            "10.0.0.0/",
            "example.org",
            "::1/129",
            "10.0.0",
        ] {
            assert!(AddressRange::parse(bad).is_err(), "{bad}");
        }
    }
}
