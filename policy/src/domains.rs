//! Network by name: the host rules of `--allow-domain` and `--deny-domain`, and the
//! decision the filtering proxy makes on every connection a command asks it for.
//!
//! A rule is `PATTERN[:PORT]`. A pattern is
//! - a host name, `example.org`: that name only;
//! - `*.example.org`: every name *below* `example.org` (`a.example.org`,
//!   `a.b.example.org`), not `example.org` itself (allow both when both are meant);
//! - `*`: every host name (IP literals are not names);
//! - an IP address or range, `192.0.2.7`, `10.0.0.0/8`, `[fd00::1]`, `[fc00::/7]`: the
//!   explicit allow of those addresses, both as literals a client asks for and as what a
//!   name resolves to (see below).
//!
//! Ports: an allow rule without `:PORT` means 80 and 443; a deny rule without one means
//! every port. A port the rule does not name is refused even for an allowed name.
//!
//! The decision, in order (see [`DomainRules::decide`] and
//! [`DomainRules::check_address`]):
//! 1. a deny rule matching the host and port refuses (deny wins over allow);
//! 2. an IP literal is refused unless an address rule allows it on that port;
//! 3. a name is allowed when an allow rule matches it on that port;
//! 4. after resolution, each address is checked again: a deny address rule refuses it,
//!    and one that is not [`AddressClass::Public`] (loopback, private, link-local, ...,
//!    or an address of this machine's own interfaces, public or not) is refused unless
//!    an address rule allows it on that port. The proxy connects to
//!    exactly the address it checked: there is no second resolution a DNS answer could
//!    change in between.
//!
//! `--resolve NAME=ADDR` pins a name to an address instead of asking DNS (tests use it
//! to point names at servers on loopback; callers may pin production names too). A pin
//! never widens anything: the pinned address goes through step 4 like any DNS answer, so
//! pinning a name to `127.0.0.1` reaches nothing unless `127.0.0.1` is allowed
//! explicitly, and [`DomainRules::check`] refuses such a pin up front, as well as a pin
//! for a name no allow rule admits (it could never be used).

use crate::addresses::{AddressClass, AddressRange};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::IpAddr;

/// The longest host name DNS can carry (without the trailing dot).
pub const MAX_NAME_LEN: usize = 253;
const MAX_LABEL_LEN: usize = 63;

/// The ports an allow rule without `:PORT` admits.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// A host as a client names it: a normalised DNS name or an IP literal.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Host {
    /// Lower-case ASCII, no trailing dot, every label valid.
    Name(String),
    Ip(IpAddr),
}

/// Why a host (or a rule's pattern) is not acceptable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostError {
    Empty,
    TooLong,
    /// Not ASCII: international names must be given in their `xn--` form.
    NotAscii,
    BadCharacter(char),
    BadLabel(String),
    /// The last label is numeric: resolvers read such a name as an IPv4 address in one
    /// of the legacy forms (`127.1`, `0x7f.1`, `2130706433`), so it is refused rather
    /// than judged as a name.
    NumericName,
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostError::Empty => f.write_str("empty host name"),
            HostError::TooLong => write!(f, "host name longer than {MAX_NAME_LEN} characters"),
            HostError::NotAscii => f.write_str(
                "host name is not ASCII (write an international name in its xn-- form)",
            ),
            HostError::BadCharacter(c) => write!(f, "host name contains {c:?}"),
            HostError::BadLabel(l) => write!(
                f,
                "host name label {l:?} is empty, longer than {MAX_LABEL_LEN} characters, or starts or ends with '-'"
            ),
            HostError::NumericName => f.write_str(
                "host name ends in a numeric label, which resolvers read as an IPv4 address; write the address itself",
            ),
        }
    }
}

impl Host {
    /// Parses what a client sent as a host: an IPv4 address, an IPv6 address (with or
    /// without brackets), or a host name, which is lower-cased and loses one trailing
    /// dot.
    pub fn parse(text: &str) -> Result<Host, HostError> {
        let inner = text
            .strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .unwrap_or(text);
        if let Ok(ip) = inner.parse::<IpAddr>() {
            return Ok(Host::Ip(ip));
        }
        if inner.len() != text.len() {
            // Brackets hold only IPv6 literals.
            return Err(HostError::BadCharacter('['));
        }
        normalise_name(text).map(Host::Name)
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// A valid host name, lower-cased, without its trailing dot.
fn normalise_name(text: &str) -> Result<String, HostError> {
    if !text.is_ascii() {
        return Err(HostError::NotAscii);
    }
    let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
    if name.is_empty() {
        return Err(HostError::Empty);
    }
    if name.len() > MAX_NAME_LEN {
        return Err(HostError::TooLong);
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(HostError::BadCharacter(c));
    }
    for label in name.split('.') {
        if label.is_empty()
            || label.len() > MAX_LABEL_LEN
            || label.starts_with('-')
            || label.ends_with('-')
        {
            return Err(HostError::BadLabel(label.to_string()));
        }
    }
    let last = name.rsplit('.').next().unwrap_or_default();
    let hex = last
        .strip_prefix("0x")
        .is_some_and(|h| h.chars().all(|c| c.is_ascii_hexdigit()));
    if last.chars().all(|c| c.is_ascii_digit()) || hex {
        return Err(HostError::NumericName);
    }
    Ok(name)
}

/// What a rule's pattern matches.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HostPattern {
    /// `*`: every host name.
    AnyName,
    /// `example.org`: that name.
    Name(String),
    /// `*.example.org`: every name strictly below it (the suffix is stored).
    Below(String),
    /// `10.0.0.0/8`, `192.0.2.7`, `[fc00::/7]`: those addresses.
    Addresses(AddressRange),
}

impl HostPattern {
    fn matches_name(&self, name: &str) -> bool {
        match self {
            HostPattern::AnyName => true,
            HostPattern::Name(n) => n == name,
            HostPattern::Below(suffix) => name
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            HostPattern::Addresses(_) => false,
        }
    }

    fn matches_ip(&self, ip: IpAddr) -> bool {
        matches!(self, HostPattern::Addresses(range) if range.contains(ip))
    }

    fn matches(&self, host: &Host) -> bool {
        match host {
            Host::Name(n) => self.matches_name(n),
            Host::Ip(ip) => self.matches_ip(*ip),
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostPattern::AnyName => f.write_str("*"),
            HostPattern::Name(n) => f.write_str(n),
            HostPattern::Below(s) => write!(f, "*.{s}"),
            HostPattern::Addresses(r) if r.addr.is_ipv6() => write!(f, "[{r}]"),
            HostPattern::Addresses(r) => write!(f, "{r}"),
        }
    }
}

/// The ports a rule applies to.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Ports {
    /// One port, given as `:PORT`.
    One(u16),
    /// 80 and 443: an allow rule without a port.
    Web,
    /// Every port: a deny rule without a port.
    Any,
}

impl Ports {
    pub fn contains(self, port: u16) -> bool {
        match self {
            Ports::One(p) => p == port,
            Ports::Web => DEFAULT_PORTS.contains(&port),
            Ports::Any => true,
        }
    }
}

/// One `--allow-domain` or `--deny-domain` rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HostRule {
    pub pattern: HostPattern,
    pub ports: Ports,
}

/// Which flag a rule came from: it decides the default ports and names the flag in
/// messages.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum RuleKind {
    Allow,
    Deny,
}

impl RuleKind {
    pub fn flag(self) -> &'static str {
        match self {
            RuleKind::Allow => "--allow-domain",
            RuleKind::Deny => "--deny-domain",
        }
    }
}

impl HostRule {
    fn matches(&self, host: &Host, port: u16) -> bool {
        self.ports.contains(port) && self.pattern.matches(host)
    }

    /// Parses `PATTERN[:PORT]` as given to `kind`'s flag. An IPv6 address or range is
    /// written in brackets, so that its colons are not read as a port.
    pub fn parse(text: &str, kind: RuleKind) -> Result<HostRule, String> {
        let flag = kind.flag();
        let bad = |why: String| format!("{flag} {text:?}: {why}");
        let (pattern, port) = split_port(text).map_err(bad)?;
        let ports = match port {
            None => match kind {
                RuleKind::Allow => Ports::Web,
                RuleKind::Deny => Ports::Any,
            },
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n != 0 && !p.starts_with('+') => Ports::One(n),
                _ => return Err(bad(format!("{p:?} is not a port (1 to 65535)"))),
            },
        };
        let pattern = parse_pattern(pattern).map_err(bad)?;
        Ok(HostRule { pattern, ports })
    }
}

impl fmt::Display for HostRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ports {
            Ports::One(p) => write!(f, "{}:{p}", self.pattern),
            Ports::Web | Ports::Any => write!(f, "{}", self.pattern),
        }
    }
}

/// Splits `PATTERN[:PORT]`, the pattern keeping its brackets removed.
fn split_port(text: &str) -> Result<(&str, Option<&str>), String> {
    if let Some(rest) = text.strip_prefix('[') {
        let (inner, after) = rest
            .split_once(']')
            .ok_or_else(|| "an opening [ without its ]".to_string())?;
        return match after {
            "" => Ok((inner, None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((inner, Some(port))),
                None => Err(format!("unexpected {after:?} after ]")),
            },
        };
    }
    match text.matches(':').count() {
        0 => Ok((text, None)),
        1 => {
            let (pattern, port) = text.split_once(':').unwrap_or((text, ""));
            Ok((pattern, Some(port)))
        }
        _ => Err("an IPv6 address is written in brackets: [fd00::1]:443".into()),
    }
}

fn parse_pattern(text: &str) -> Result<HostPattern, String> {
    if text == "*" {
        return Ok(HostPattern::AnyName);
    }
    if let Some(suffix) = text.strip_prefix("*.") {
        return normalise_name(suffix)
            .map(HostPattern::Below)
            .map_err(|e| e.to_string());
    }
    if text.contains('*') {
        return Err("a wildcard is only allowed as the whole first label: *.example.org".into());
    }
    let looks_like_address = text.contains('/') || text.parse::<IpAddr>().is_ok();
    if looks_like_address {
        return AddressRange::parse(text).map(HostPattern::Addresses);
    }
    match normalise_name(text) {
        Ok(name) => Ok(HostPattern::Name(name)),
        // `10.0.0` and the like: neither an address nor a name.
        Err(HostError::NumericName) => {
            Err(format!("{text:?} is neither a host name nor an IP address"))
        }
        Err(e) => Err(e.to_string()),
    }
}

/// `--resolve NAME=ADDR`: a name the proxy resolves to `addr` without asking DNS.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Pin {
    pub name: String,
    pub addr: IpAddr,
}

impl Pin {
    pub fn parse(text: &str) -> Result<Pin, String> {
        let bad = |why: String| format!("--resolve {text:?}: {why}");
        let (name, addr) = text
            .split_once('=')
            .ok_or_else(|| bad("expected NAME=ADDRESS".into()))?;
        let name = normalise_name(name).map_err(|e| bad(e.to_string()))?;
        let addr = addr
            .strip_prefix('[')
            .and_then(|a| a.strip_suffix(']'))
            .unwrap_or(addr);
        let addr = addr
            .parse::<IpAddr>()
            .map_err(|_| bad(format!("{addr:?} is not an IP address")))?;
        Ok(Pin { name, addr })
    }
}

/// Why the proxy refused a connection: the `reason` of a network denial record.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Refusal {
    /// No allow rule names this host.
    NotAllowed,
    /// A deny rule names this host (deny wins over allow).
    DeniedByRule,
    /// The host is allowed, but not on this port.
    PortNotAllowed,
    /// An IP literal no address rule allows.
    IpLiteral,
    /// The name resolved to an address that is not public (loopback, private,
    /// link-local, ...) and no address rule allows it.
    NonPublicAddress(AddressClass),
    /// A multicast DNS name (`.local`), which only the system's own resolver answers;
    /// the proxy does not use it (it loads code a command could plant). Pinned with
    /// `--resolve`, the name is reached.
    MulticastDns,
}

impl Refusal {
    /// Words for people: what a marker or an error response says.
    pub fn describe(self) -> String {
        match self {
            Refusal::NotAllowed => "not in the allowed domains".into(),
            Refusal::DeniedByRule => "denied by --deny-domain".into(),
            Refusal::PortNotAllowed => "port not allowed for this host".into(),
            Refusal::IpLiteral => {
                "IP address given instead of a name (allow it with --allow-domain ADDRESS)".into()
            }
            Refusal::NonPublicAddress(class) => {
                format!("resolves to a {class} address (allow it with --allow-domain ADDRESS)")
            }
            Refusal::MulticastDns => "a multicast DNS (.local) name, which stockade does not \
                 resolve (pin it with --resolve NAME=ADDRESS)"
                .into(),
        }
    }
}

/// A caller's mistake in the rules as a whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RulesError {
    /// `--resolve` for a name no allow rule admits: it could never be used.
    PinNotAllowed { pin: Pin },
    /// `--resolve` to a non-public address that no address rule allows: every
    /// connection to it would be refused.
    PinNotPublic { pin: Pin, class: AddressClass },
    /// A pattern given twice for the same name (as an allow and a deny, say) is fine;
    /// deny-only rules are not: nothing would be allowed.
    DenyWithoutAllow,
}

impl fmt::Display for RulesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RulesError::PinNotAllowed { pin } => write!(
                f,
                "--resolve {}={}: no --allow-domain admits {}, so the pin could never be used; allow the name or drop the pin",
                pin.name, pin.addr, pin.name
            ),
            RulesError::PinNotPublic { pin, class } => write!(
                f,
                "--resolve {}={}: {} is a {class} address, which the proxy refuses unless allowed explicitly; add --allow-domain {} (it then allows that address on the name's ports) or pin a public address",
                pin.name,
                pin.addr,
                pin.addr,
                HostPattern::Addresses(AddressRange::single(pin.addr))
            ),
            RulesError::DenyWithoutAllow => f.write_str(
                "--deny-domain without any --allow-domain allows nothing; add the domains to allow (--allow-domain '*' allows every name)",
            ),
        }
    }
}

/// The allow and deny rules and the pinned names: everything the proxy decides with.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DomainRules {
    pub allow: Vec<HostRule>,
    pub deny: Vec<HostRule>,
    pub pins: Vec<Pin>,
}

impl DomainRules {
    /// Whether any rule was given (the proxy runs only then).
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty() && self.pins.is_empty()
    }

    /// Whether an allow rule names a loopback address (`--allow-domain 127.0.0.1:PORT`):
    /// the caller sends the command to the host's loopback through the proxy on purpose.
    pub fn allows_loopback(&self) -> bool {
        let loopback = [
            IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        ];
        self.allow.iter().any(|r| {
            matches!(&r.pattern, HostPattern::Addresses(range)
                if loopback.iter().any(|&ip| range.contains(ip)))
        })
    }

    /// Refuses rules that cannot mean what the caller wrote (see [`RulesError`]).
    pub fn check(&self) -> Result<(), RulesError> {
        if self.allow.is_empty() && !self.deny.is_empty() {
            return Err(RulesError::DenyWithoutAllow);
        }
        for pin in &self.pins {
            let host = Host::Name(pin.name.clone());
            if !self.allow.iter().any(|r| r.pattern.matches(&host)) {
                return Err(RulesError::PinNotAllowed { pin: pin.clone() });
            }
            let class = AddressClass::of(pin.addr);
            if !class.is_public() && !self.allow.iter().any(|r| r.pattern.matches_ip(pin.addr)) {
                return Err(RulesError::PinNotPublic {
                    pin: pin.clone(),
                    class,
                });
            }
        }
        Ok(())
    }

    /// The decision on what the client asked for, before any resolution.
    pub fn decide(&self, host: &Host, port: u16) -> Result<(), Refusal> {
        if self.deny.iter().any(|r| r.matches(host, port)) {
            return Err(Refusal::DeniedByRule);
        }
        if self.allow.iter().any(|r| r.matches(host, port)) {
            return Ok(());
        }
        let named = self.allow.iter().any(|r| r.pattern.matches(host));
        Err(match (host, named) {
            (_, true) => Refusal::PortNotAllowed,
            (Host::Ip(_), false) => Refusal::IpLiteral,
            (Host::Name(_), false) => Refusal::NotAllowed,
        })
    }

    /// The decision on one address the host resolved to (or is, for an allowed IP
    /// literal), just before connecting to it. `local`: the address is one of this
    /// machine's own (see [`AddressClass::Local`]); a public address of the host itself
    /// is refused like loopback, unless an address rule allows it.
    pub fn check_address(&self, ip: IpAddr, port: u16, local: bool) -> Result<(), Refusal> {
        let as_host = Host::Ip(ip);
        if self.deny.iter().any(|r| r.matches(&as_host, port)) {
            return Err(Refusal::DeniedByRule);
        }
        let class = match AddressClass::of(ip) {
            AddressClass::Public if local => AddressClass::Local,
            class => class,
        };
        if class.is_public() || self.allow.iter().any(|r| r.matches(&as_host, port)) {
            return Ok(());
        }
        Err(Refusal::NonPublicAddress(class))
    }

    /// The pinned address of `name`, if `--resolve` pinned it.
    pub fn pinned(&self, name: &str) -> Option<IpAddr> {
        self.pins.iter().find(|p| p.name == name).map(|p| p.addr)
    }
}

/// The network-by-name part of a resolved policy: the rules, and the loopback port the
/// launcher reserved for the proxy (the port the command's proxy variables name, and
/// the one TCP port it may connect to where no network namespace holds it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DomainPolicy {
    pub(crate) rules: DomainRules,
    pub(crate) proxy_port: u16,
}

impl DomainPolicy {
    pub fn rules(&self) -> &DomainRules {
        &self.rules
    }

    pub fn proxy_port(&self) -> u16 {
        self.proxy_port
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(rules: &[&str]) -> DomainRules {
        DomainRules {
            allow: rules
                .iter()
                .map(|r| HostRule::parse(r, RuleKind::Allow).unwrap())
                .collect(),
            ..DomainRules::default()
        }
    }

    fn host(s: &str) -> Host {
        Host::parse(s).unwrap()
    }

    #[test]
    fn hosts_are_normalised_and_ip_literals_recognised() {
        assert_eq!(host("Example.ORG."), Host::Name("example.org".into()));
        assert_eq!(host("127.0.0.1"), Host::Ip("127.0.0.1".parse().unwrap()));
        assert_eq!(host("[::1]"), Host::Ip("::1".parse().unwrap()));
        assert_eq!(host("::1"), Host::Ip("::1".parse().unwrap()));
        assert_eq!(host("[::1]").to_string(), "[::1]");
        assert_eq!(host("_srv.ex-ample.org").to_string(), "_srv.ex-ample.org");
        for (bad, want) in [
            ("", HostError::Empty),
            (".", HostError::Empty),
            ("a..b", HostError::BadLabel(String::new())),
            ("-a.org", HostError::BadLabel("-a".into())),
            ("a b.org", HostError::BadCharacter(' ')),
            ("a\r\nb", HostError::BadCharacter('\r')),
            ("exämple.org", HostError::NotAscii),
            ("127.1", HostError::NumericName),
            ("0x7f.1", HostError::NumericName),
            ("2130706433", HostError::NumericName),
            ("a.0x7f000001", HostError::NumericName),
            ("[example.org]", HostError::BadCharacter('[')),
            ("a:b", HostError::BadCharacter(':')),
        ] {
            assert_eq!(Host::parse(bad), Err(want), "{bad:?}");
        }
        let long = format!("{}.org", "a".repeat(64));
        assert!(matches!(Host::parse(&long), Err(HostError::BadLabel(_))));
        let longer = vec!["a".repeat(60); 5].join(".");
        assert_eq!(Host::parse(&longer), Err(HostError::TooLong));
    }

    #[test]
    fn rules_parse_with_their_default_ports() {
        let r = HostRule::parse("Example.org", RuleKind::Allow).unwrap();
        assert_eq!(r.pattern, HostPattern::Name("example.org".into()));
        assert_eq!(r.ports, Ports::Web);
        let r = HostRule::parse("example.org", RuleKind::Deny).unwrap();
        assert_eq!(r.ports, Ports::Any);
        let r = HostRule::parse("*.example.org:8443", RuleKind::Allow).unwrap();
        assert_eq!(r.pattern, HostPattern::Below("example.org".into()));
        assert_eq!(r.ports, Ports::One(8443));
        assert_eq!(r.to_string(), "*.example.org:8443");
        let r = HostRule::parse("[fd00::1]:22", RuleKind::Allow).unwrap();
        assert_eq!(r.to_string(), "[fd00::1]:22");
        let r = HostRule::parse("10.0.0.0/8:5432", RuleKind::Allow).unwrap();
        assert_eq!(r.to_string(), "10.0.0.0/8:5432");
        assert_eq!(
            HostRule::parse("*", RuleKind::Allow).unwrap().pattern,
            HostPattern::AnyName
        );
        for bad in [
            "",
            "example.org:0",
            "example.org:65536",
            "example.org:",
            "example.org:+1",
            "example.org:http",
            "fd00::1",
            "[fd00::1",
            "[fd00::1]x",
            "a.*.org",
            "*example.org",
            "*.",
            "**.org",
            "10.1.2.3/8",
            "10.0.0",
            "exa mple.org",
        ] {
            let err = HostRule::parse(bad, RuleKind::Allow).unwrap_err();
            assert!(err.starts_with("--allow-domain"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn wildcards_match_names_strictly_below() {
        let rules = allow(&["*.example.org"]);
        assert!(rules.decide(&host("a.example.org"), 443).is_ok());
        assert!(rules.decide(&host("a.b.example.org"), 80).is_ok());
        assert_eq!(
            rules.decide(&host("example.org"), 443),
            Err(Refusal::NotAllowed)
        );
        assert_eq!(
            rules.decide(&host("badexample.org"), 443),
            Err(Refusal::NotAllowed)
        );
        assert_eq!(
            rules.decide(&host("example.org.evil.com"), 443),
            Err(Refusal::NotAllowed)
        );
        let exact = allow(&["example.org"]);
        assert!(exact.decide(&host("EXAMPLE.org."), 443).is_ok());
        assert_eq!(
            exact.decide(&host("a.example.org"), 443),
            Err(Refusal::NotAllowed)
        );
    }

    #[test]
    fn ports_outside_the_rule_are_refused_for_allowed_names() {
        let rules = allow(&["example.org", "git.example.org:22"]);
        assert!(rules.decide(&host("example.org"), 443).is_ok());
        assert!(rules.decide(&host("example.org"), 80).is_ok());
        assert_eq!(
            rules.decide(&host("example.org"), 22),
            Err(Refusal::PortNotAllowed)
        );
        assert!(rules.decide(&host("git.example.org"), 22).is_ok());
        assert_eq!(
            rules.decide(&host("git.example.org"), 443),
            Err(Refusal::PortNotAllowed)
        );
    }

    #[test]
    fn deny_wins_over_allow() {
        let mut rules = allow(&["*.example.org", "*"]);
        rules.deny = vec![
            HostRule::parse("secret.example.org", RuleKind::Deny).unwrap(),
            HostRule::parse("*.evil.com:443", RuleKind::Deny).unwrap(),
        ];
        assert_eq!(
            rules.decide(&host("secret.example.org"), 443),
            Err(Refusal::DeniedByRule)
        );
        assert_eq!(
            rules.decide(&host("secret.example.org"), 80),
            Err(Refusal::DeniedByRule)
        );
        assert_eq!(
            rules.decide(&host("a.evil.com"), 443),
            Err(Refusal::DeniedByRule)
        );
        // Controls: the deny rule's own port only; other names stay allowed.
        assert!(rules.decide(&host("a.evil.com"), 80).is_ok());
        assert!(rules.decide(&host("open.example.org"), 443).is_ok());
        assert!(rules.decide(&host("anything.net"), 443).is_ok());
    }

    #[test]
    fn ip_literals_need_an_address_rule() {
        let rules = allow(&["*", "example.org"]);
        assert_eq!(
            rules.decide(&host("93.184.216.34"), 443),
            Err(Refusal::IpLiteral)
        );
        assert_eq!(rules.decide(&host("[::1]"), 443), Err(Refusal::IpLiteral));
        let rules = allow(&["192.0.2.0/24:8080", "[fd00::1]"]);
        assert!(rules.decide(&host("192.0.2.9"), 8080).is_ok());
        assert_eq!(
            rules.decide(&host("192.0.2.9"), 443),
            Err(Refusal::PortNotAllowed)
        );
        assert!(rules.decide(&host("fd00::1"), 443).is_ok());
        assert_eq!(
            rules.decide(&host("192.0.3.9"), 8080),
            Err(Refusal::IpLiteral)
        );
        // An address rule is not a name rule.
        assert_eq!(
            rules.decide(&host("example.org"), 443),
            Err(Refusal::NotAllowed)
        );
    }

    #[test]
    fn resolved_addresses_must_be_public_unless_allowed() {
        let rules = allow(&["example.org", "127.0.0.1:8080", "10.0.0.0/8"]);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(rules.check_address(ip("93.184.216.34"), 443, false).is_ok());
        for (addr, class) in [
            ("127.0.0.1", AddressClass::Loopback),
            ("::ffff:127.0.0.1", AddressClass::Loopback),
            ("::1", AddressClass::Loopback),
            ("169.254.169.254", AddressClass::LinkLocal),
            ("fd00::1", AddressClass::Private),
            ("0.0.0.0", AddressClass::Unspecified),
        ] {
            assert_eq!(
                rules.check_address(ip(addr), 443, false),
                Err(Refusal::NonPublicAddress(class)),
                "{addr}"
            );
        }
        // Allowed explicitly, on the rule's ports.
        assert!(rules.check_address(ip("127.0.0.1"), 8080, false).is_ok());
        assert!(
            rules
                .check_address(ip("::ffff:127.0.0.1"), 8080, false)
                .is_ok()
        );
        assert!(rules.check_address(ip("10.9.8.7"), 443, false).is_ok());
        assert_eq!(
            rules.check_address(ip("10.9.8.7"), 22, false),
            Err(Refusal::NonPublicAddress(AddressClass::Private))
        );
        // A public address of this machine itself reaches its own services: refused as
        // loopback is, unless an address rule names it.
        assert_eq!(
            rules.check_address(ip("93.184.216.34"), 443, true),
            Err(Refusal::NonPublicAddress(AddressClass::Local))
        );
        let mut own = rules.clone();
        own.allow
            .push(HostRule::parse("93.184.216.34", RuleKind::Allow).unwrap());
        assert!(own.check_address(ip("93.184.216.34"), 443, true).is_ok());
        let mut denied = rules.clone();
        denied.deny = vec![HostRule::parse("93.184.216.0/24", RuleKind::Deny).unwrap()];
        assert_eq!(
            denied.check_address(ip("93.184.216.34"), 443, false),
            Err(Refusal::DeniedByRule)
        );
        // The IPv6 forms that carry an IPv4 address (IPv4-mapped, NAT64, 6to4) lead to
        // it: a rule denying the IPv4 range denies them too.
        for carried in [
            "::ffff:93.184.216.34",
            "64:ff9b::5db8:d822",
            "2002:5db8:d822::1",
        ] {
            assert_eq!(
                denied.check_address(ip(carried), 443, false),
                Err(Refusal::DeniedByRule),
                "{carried}"
            );
        }
        // Control: the same forms of an address outside the range are not denied.
        assert!(
            denied
                .check_address(ip("64:ff9b::5db9:d822"), 443, false)
                .is_ok()
        );
        assert!(
            denied
                .check_address(ip("2002:5db9:d822::1"), 443, false)
                .is_ok()
        );
    }

    #[test]
    fn pins_are_checked_against_the_rules() {
        let pin = |s: &str| Pin::parse(s).unwrap();
        let mut rules = allow(&["*.test"]);
        rules.pins = vec![pin("a.test=127.0.0.1")];
        let err = rules.check().unwrap_err();
        assert!(matches!(err, RulesError::PinNotPublic { .. }), "{err}");
        assert!(
            err.to_string().contains("--allow-domain 127.0.0.1"),
            "{err}"
        );
        let mut ok = allow(&["*.test", "127.0.0.1:8080"]);
        ok.pins = vec![pin("A.test.=127.0.0.1")];
        assert!(ok.check().is_ok());
        assert_eq!(ok.pinned("a.test"), Some("127.0.0.1".parse().unwrap()));
        assert_eq!(ok.pinned("b.test"), None);
        ok.pins.push(pin("other.org=93.184.216.34"));
        assert!(matches!(ok.check(), Err(RulesError::PinNotAllowed { .. })));
        assert_eq!(pin("six.test=[::1]").addr, "::1".parse::<IpAddr>().unwrap());
        for bad in [
            "a.test",
            "a.test=",
            "a.test=localhost",
            "=1.2.3.4",
            "1.2=1.2.3.4",
        ] {
            assert!(Pin::parse(bad).is_err(), "{bad}");
        }
        let deny_only = DomainRules {
            deny: vec![HostRule::parse("x.org", RuleKind::Deny).unwrap()],
            ..DomainRules::default()
        };
        assert_eq!(deny_only.check(), Err(RulesError::DenyWithoutAllow));
    }
}
