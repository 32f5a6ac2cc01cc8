//! Landlock's audit records (Linux 6.15, Landlock ABI 7), and which of them are one
//! command's.
//!
//! When audit is enabled, the kernel records each access Landlock refuses
//! (`LANDLOCK_ACCESS`: the domain, the blockers, the path or address) and, with the first
//! one of a domain, the domain itself (`LANDLOCK_DOMAIN status=allocated`: the pid, exe
//! and comm of the process that restricted itself, at that moment); when the domain is
//! freed, `status=deallocated` with the number of refusals. The launcher reads them from
//! the audit netlink socket; this module decides which are its command's.
//!
//! The matching rule: the runner restricts itself under a comm of its own, a tag the
//! launcher chose at random for this command ([`valid_tag`]), and at once makes one
//! refusal (a signal probe to its parent, which is outside the domain), so its domain's
//! allocation record is the first of any domain created under that tag. That record
//! gives the domain id and the runner's pid; every other record counts only when it
//! names that domain. A domain the command creates itself (a sandbox of its own) has
//! another id, whatever its pid; records of other processes name other domains.
//! Nothing the command does can write a record: they come from the kernel.

use serde::{Deserialize, Serialize};

/// `AUDIT_LANDLOCK_ACCESS` (linux/audit.h).
pub const LANDLOCK_ACCESS: u16 = 1423;
/// `AUDIT_LANDLOCK_DOMAIN` (linux/audit.h).
pub const LANDLOCK_DOMAIN: u16 = 1424;

/// The tag's fixed start; the rest is hexadecimal, up to the 15 characters a comm holds.
pub const TAG_PREFIX: &str = "stk-";
/// The tag's length: a full comm.
pub const TAG_LEN: usize = 15;

/// Whether `tag` is a tag the runner accepts: `stk-` and 11 lower-case hex digits (no
/// character the audit log would write as hex, so it compares as written).
pub fn valid_tag(tag: &str) -> bool {
    tag.len() == TAG_LEN
        && tag.starts_with(TAG_PREFIX)
        && tag[TAG_PREFIX.len()..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A tag from 44 random bits.
pub fn tag_from(random: u64) -> String {
    format!("{TAG_PREFIX}{:011x}", random & ((1 << 44) - 1))
}

/// The most distinct refusals kept from one command; the rest are counted.
pub const MAX_KEPT: usize = 64;

/// One refusal as the kernel recorded it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Refused {
    /// `fs.write_file`, `net.connect_tcp`, `scope.signal`, ... (several for one access).
    pub blockers: Vec<String>,
    /// The path refused (a file, or the directory a name was to be made or removed in).
    pub path: Option<String>,
    /// The address and port of a refused connection or bind.
    pub addr: Option<String>,
    pub port: Option<u16>,
    /// The process a refused signal or trace was for.
    pub opid: Option<u32>,
}

/// What was read of one command's records.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Collected {
    /// The command's domain, once its allocation record arrived.
    pub domain: Option<u64>,
    /// The runner's pid (the process that restricted itself).
    pub pid: Option<u32>,
    /// The distinct refusals, in the order they came, at most [`MAX_KEPT`].
    pub refused: Vec<Refused>,
    /// Refusals of the domain beyond those kept (repeats and past the cap).
    pub more: u64,
    /// The domain's own count of refusals when it was freed (the probe left out): from
    /// then on nothing more can come.
    pub freed_with: Option<u64>,
    /// Whether the socket dropped records (its buffer overflowed).
    pub lost: bool,
}

/// Reads records and keeps those of the domain created under `tag`.
#[derive(Debug)]
pub struct Collector {
    tag: String,
    /// Refusals of the event being read, before its domain record said whose it is.
    pending: Vec<(u64, u64, Refused)>,
    /// Later domains created under the same tag: the runner's supervisor performing
    /// the command's writes (without the stage, where it holds protected paths)
    /// restricts a thread of its own with the command's ruleset, under the tag, and
    /// what that thread is refused is the command's refusal.
    helpers: Vec<u64>,
    pub collected: Collected,
}

/// The most records of one event held while its domain record is awaited.
const MAX_PENDING: usize = 8;

impl Collector {
    pub fn new(tag: &str) -> Collector {
        Collector {
            tag: tag.to_string(),
            pending: Vec::new(),
            helpers: Vec::new(),
            collected: Collected::default(),
        }
    }

    /// The tag the domain is created under.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// Whether the domain was freed: nothing more of it can come.
    pub fn finished(&self) -> bool {
        self.collected.freed_with.is_some()
    }

    /// Takes one record (netlink message type and text). Anything else is ignored.
    pub fn feed(&mut self, kind: u16, text: &str) {
        let Some((serial, fields)) = parse(text) else {
            return;
        };
        let field = |k: &str| fields.iter().find(|(n, _)| *n == k).map(|(_, v)| v);
        let Some(domain) = field("domain").and_then(|d| u64::from_str_radix(d, 16).ok()) else {
            return;
        };
        match kind {
            LANDLOCK_ACCESS => {
                let refused = refused_of(&fields);
                match self.collected.domain {
                    Some(ours) if ours == domain || self.helpers.contains(&domain) => {
                        self.keep(refused)
                    }
                    _ => {
                        self.pending.retain(|(s, _, _)| *s == serial);
                        if self.pending.len() < MAX_PENDING {
                            self.pending.push((serial, domain, refused));
                        }
                    }
                }
            }
            LANDLOCK_DOMAIN => {
                let ours = self.collected.domain == Some(domain);
                // The first domain created under our tag is the runner's (see above).
                let under_tag = field("comm").map(String::as_str) == Some(self.tag.as_str());
                let tagged = self.collected.domain.is_none() && under_tag;
                match field("status").map(String::as_str) {
                    Some("allocated") if tagged => {
                        self.collected.domain = Some(domain);
                        self.collected.pid = field("pid").and_then(|p| p.parse().ok());
                        self.adopt_pending(serial, domain);
                    }
                    // A helper's domain (see `helpers`): its first refusal came with it.
                    Some("allocated") if under_tag && !ours && !self.helpers.contains(&domain) => {
                        self.helpers.push(domain);
                        self.adopt_pending(serial, domain);
                    }
                    Some("deallocated") if ours => {
                        let n: u64 = field("denials").and_then(|d| d.parse().ok()).unwrap_or(0);
                        // The runner's probe is one of them.
                        self.collected.freed_with = Some(n.saturating_sub(1));
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// The refusals of the event that allocated our domain: the first is the runner's
    /// probe (a signal to its parent), not the command's.
    fn adopt_pending(&mut self, serial: u64, domain: u64) {
        let pending = std::mem::take(&mut self.pending);
        let mut ours = pending
            .into_iter()
            .filter(|(s, d, _)| *s == serial && *d == domain)
            .map(|(_, _, r)| r);
        if let Some(first) = ours.next()
            && !first.blockers.iter().any(|b| b == "scope.signal")
        {
            self.keep(first);
        }
        for r in ours {
            self.keep(r);
        }
    }

    fn keep(&mut self, refused: Refused) {
        if self.collected.refused.len() >= MAX_KEPT || self.collected.refused.contains(&refused) {
            self.collected.more += 1;
        } else {
            self.collected.refused.push(refused);
        }
    }
}

/// The refusal a `LANDLOCK_ACCESS` record's fields describe.
fn refused_of(fields: &[(&str, String)]) -> Refused {
    let field = |k: &str| fields.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
    Refused {
        blockers: field("blockers")
            .map(|b| b.split(',').map(str::to_string).collect())
            .unwrap_or_default(),
        path: field("path").or_else(|| field("name")),
        addr: field("daddr").or_else(|| field("saddr")),
        port: field("dest")
            .or_else(|| field("src"))
            .and_then(|p| p.parse().ok()),
        opid: field("opid").and_then(|p| p.parse().ok()),
    }
}

/// A record's serial number and its `key=value` fields, values unquoted (a quoted value
/// as written; an unquoted one that is all hex digits of even length, the way audit
/// writes a value with spaces, quotes or bytes outside ASCII, decoded when the key is a
/// name). `None` for text that is not `audit(SECONDS:SERIAL): ...`.
pub fn parse(text: &str) -> Option<(u64, Vec<(&str, String)>)> {
    let rest = text.strip_prefix("audit(")?;
    let (stamp, body) = rest.split_once("): ")?;
    let serial: u64 = stamp.split_once(':')?.1.parse().ok()?;
    let mut fields = Vec::new();
    let mut at = body.trim_end_matches('\0').trim();
    while !at.is_empty() {
        let (key, after) = at.split_once('=')?;
        let key = key.trim();
        let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
            let end = quoted.find('"')?;
            (quoted[..end].to_string(), &quoted[end + 1..])
        } else {
            let end = after.find(' ').unwrap_or(after.len());
            let raw = &after[..end];
            let value = match NAME_KEYS.contains(&key) {
                true => unhex(raw).unwrap_or_else(|| raw.to_string()),
                false => raw.to_string(),
            };
            (value, &after[end..])
        };
        fields.push((key, value));
        at = next.trim_start();
    }
    Some((serial, fields))
}

/// Keys whose values audit writes as hex when they hold special characters.
const NAME_KEYS: [&str; 5] = ["path", "name", "comm", "exe", "ocomm"];

fn unhex(raw: &str) -> Option<String> {
    if raw.is_empty() || raw.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..raw.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(raw.get(i..i + 2)?, 16).ok())
        .collect();
    Some(String::from_utf8_lossy(&bytes?).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAG: &str = "stk-0123456789a";

    fn probe_event(c: &mut Collector, serial: u32, domain: &str, comm: &str, pid: u32) {
        c.feed(
            LANDLOCK_ACCESS,
            &format!(
                "audit(1.2:{serial}): domain={domain} blockers=scope.signal opid=7 ocomm=\"bash\""
            ),
        );
        c.feed(
            LANDLOCK_DOMAIN,
            &format!("audit(1.2:{serial}): domain={domain} status=allocated mode=enforcing pid={pid} uid=0 exe=\"/x/stockade-runner\" comm=\"{comm}\""),
        );
    }

    #[test]
    fn tags_are_a_full_comm_of_hex() {
        assert!(valid_tag(&tag_from(u64::MAX)));
        assert!(valid_tag(TAG));
        assert!(!valid_tag("stk-0123456789"));
        assert!(!valid_tag("stk-0123456789A"));
        assert!(!valid_tag("abc-0123456789a"));
    }

    #[test]
    fn a_later_domain_under_the_tag_is_the_supervisor_s_worker_and_its_refusals_count() {
        let mut c = Collector::new(TAG);
        probe_event(&mut c, 1, "bb", TAG, 60);
        // The worker's first refusal, then its domain's record under the same tag.
        c.feed(
            LANDLOCK_ACCESS,
            "audit(1.4:2): domain=dd blockers=fs.make_reg path=\"/etc\" dev=\"vda\" ino=2",
        );
        c.feed(LANDLOCK_DOMAIN, &format!("audit(1.4:2): domain=dd status=allocated mode=enforcing pid=59 uid=0 exe=\"/r\" comm=\"{TAG}\""));
        c.feed(
            LANDLOCK_ACCESS,
            "audit(1.4:3): domain=dd blockers=fs.write_file path=\"/etc/x\" dev=\"vda\" ino=3",
        );
        // Another domain under another name: not ours.
        c.feed(
            LANDLOCK_ACCESS,
            "audit(1.4:4): domain=ee blockers=fs.write_file path=\"/etc/y\" dev=\"vda\" ino=4",
        );
        c.feed(LANDLOCK_DOMAIN, "audit(1.4:4): domain=ee status=allocated mode=enforcing pid=70 uid=0 exe=\"/x\" comm=\"x\"");
        let paths: Vec<_> = c.collected.refused.iter().map(|r| r.path.clone()).collect();
        assert_eq!(
            paths,
            [Some("/etc".to_string()), Some("/etc/x".to_string())]
        );
        assert_eq!(c.collected.domain, Some(0xbb));
    }

    #[test]
    fn only_the_tagged_domain_s_records_are_kept_and_the_probe_is_not() {
        let mut c = Collector::new(TAG);
        // Another process's domain, before and after ours.
        probe_event(&mut c, 1, "aa", "stk-fffffffffff", 50);
        c.feed(
            LANDLOCK_ACCESS,
            "audit(1.3:2): domain=aa blockers=fs.write_file path=\"/etc/a\" dev=\"vda\" ino=1",
        );
        probe_event(&mut c, 3, "bb", TAG, 60);
        c.feed(
            LANDLOCK_ACCESS,
            "audit(1.3:4): domain=bb blockers=fs.make_reg path=\"/etc\" dev=\"vda\" ino=2",
        );
        c.feed(
            LANDLOCK_ACCESS,
            "audit(1.3:5): domain=aa blockers=fs.write_file path=\"/etc/a\" dev=\"vda\" ino=1",
        );
        // A domain the command made itself under the same pid: not ours.
        c.feed(LANDLOCK_DOMAIN, "audit(1.3:6): domain=cc status=allocated mode=enforcing pid=60 uid=0 exe=\"/bin/x\" comm=\"x\"");
        c.feed(
            LANDLOCK_ACCESS,
            "audit(1.3:6): domain=cc blockers=fs.read_file path=\"/usr/x\" dev=\"vda\" ino=3",
        );
        c.feed(
            LANDLOCK_ACCESS,
            "audit(1.3:7): domain=bb blockers=fs.make_reg path=\"/etc\" dev=\"vda\" ino=2",
        );
        c.feed(
            LANDLOCK_DOMAIN,
            "audit(1.3:8): domain=bb status=deallocated denials=3",
        );
        let got = &c.collected;
        assert_eq!((got.domain, got.pid), (Some(0xbb), Some(60)));
        assert_eq!(got.refused.len(), 1);
        assert_eq!(got.refused[0].path.as_deref(), Some("/etc"));
        assert_eq!(got.refused[0].blockers, ["fs.make_reg"]);
        assert_eq!((got.more, got.freed_with), (1, Some(2)));
        assert!(c.finished());
    }

    #[test]
    fn a_second_refusal_in_the_allocating_event_is_kept() {
        let mut c = Collector::new(TAG);
        c.feed(
            LANDLOCK_ACCESS,
            "audit(1.2:9): domain=bb blockers=fs.read_file path=2F746D702F612062 dev=\"vda\" ino=1",
        );
        c.feed(LANDLOCK_DOMAIN, &format!("audit(1.2:9): domain=bb status=allocated mode=enforcing pid=1 uid=0 exe=\"/r\" comm=\"{TAG}\""));
        assert_eq!(c.collected.refused[0].path.as_deref(), Some("/tmp/a b"));
    }

    #[test]
    fn memory_is_bounded_by_the_cap() {
        let mut c = Collector::new(TAG);
        probe_event(&mut c, 1, "bb", TAG, 60);
        for i in 0..10_000 {
            c.feed(LANDLOCK_ACCESS, &format!("audit(1.3:{}): domain=bb blockers=fs.write_file path=\"/etc/{i}\" dev=\"vda\" ino=1", i + 2));
        }
        assert_eq!(c.collected.refused.len(), MAX_KEPT);
        assert_eq!(c.collected.more, 10_000 - MAX_KEPT as u64);
    }

    #[test]
    fn network_records_give_address_and_port() {
        let (_, f) =
            parse("audit(1.2:3): domain=bb blockers=net.connect_tcp daddr=127.0.0.1 dest=9")
                .unwrap();
        let r = refused_of(&f);
        assert_eq!((r.addr.as_deref(), r.port), (Some("127.0.0.1"), Some(9)));
        assert!(parse("garbage").is_none());
    }
}
