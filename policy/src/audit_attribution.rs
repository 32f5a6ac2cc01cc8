//! Naming the refusals Landlock's audit records give (`audit` evidence), and merging
//! them with those named from the command's error lines.
//!
//! A record is the kernel's own word that this command's domain refused this access to
//! this path (see [`crate::landlock_audit`] for which records are the command's): no
//! guess, and no Unix-permission question (Landlock is asked only once they allowed the
//! access). The kind, rule and grant come from the policy as for `policy-check`; where
//! the policy's model does not say why (the kernel refused something the model allows),
//! the record still stands, with the blockers as its rule and no grant.

use crate::attribution::{Access, Scope, refused};
use crate::denial_record::{DenialRecord, Kind, Source};
use crate::landlock_audit::{Collected, Refused};
use std::path::Path;

/// How the refusals were named for one run: from the kernel's records, or (and why) from
/// the command's lines only. In `stockade run --json` as `attribution`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attribution {
    /// `audit` when Landlock's records for this command were read, else `policy-check`.
    pub evidence: Source,
    /// Why the records were not read or are incomplete (audit off, no `CAP_AUDIT_READ`,
    /// an older kernel, records lost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Refusals the kernel recorded beyond the distinct ones listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The denial records for the refusals `collected` holds.
pub fn from_audit(scope: &Scope, collected: &Collected) -> Vec<DenialRecord> {
    let mut out: Vec<DenialRecord> = Vec::new();
    for r in &collected.refused {
        let record = record_of(scope, r);
        if !out
            .iter()
            .any(|o| o.kind == record.kind && o.target() == record.target())
        {
            out.push(record);
        }
    }
    out
}

/// Blockers that are about writing (making, changing, removing, renaming).
const WRITE_BLOCKERS: [&str; 14] = [
    "fs.write_file",
    "fs.remove_dir",
    "fs.remove_file",
    "fs.make_char",
    "fs.make_dir",
    "fs.make_reg",
    "fs.make_sock",
    "fs.make_fifo",
    "fs.make_block",
    "fs.make_sym",
    "fs.refer",
    "fs.truncate",
    "fs.ioctl_dev",
    "fs.change_topology",
];

fn record_of(scope: &Scope, r: &Refused) -> DenialRecord {
    let blockers = r.blockers.join(",");
    let has = |b: &str| r.blockers.iter().any(|x| x == b);
    let base = DenialRecord {
        kind: Kind::Unattributed,
        path: None,
        host: None,
        port: None,
        rule: format!("{} mode: Landlock refused {blockers}", scope.mode),
        grant: None,
        alternative: None,
        line: None,
        evidence: Source::Audit,
    };
    if has("net.connect_tcp") || has("net.bind_tcp") {
        let connect = has("net.connect_tcp");
        return DenialRecord {
            kind: if connect {
                Kind::NetworkAddress
            } else {
                Kind::Socket
            },
            host: r.addr.clone(),
            port: r.port,
            rule: format!("{} mode: the network is denied ({blockers})", scope.mode),
            grant: match (connect, r.port) {
                (true, Some(p)) => Some(format!("--allow-tcp-connect {p}")),
                _ => Some("--network allow".into()),
            },
            alternative: connect.then(|| "--network allow".to_string()),
            ..base
        };
    }
    if has("scope.abstract_unix_socket") {
        return DenialRecord {
            kind: Kind::Socket,
            path: r.path.clone(),
            rule: format!(
                "{} mode: abstract unix sockets outside the sandbox are refused",
                scope.mode
            ),
            grant: Some("--allow-unix-sockets".into()),
            ..base
        };
    }
    if has("scope.signal") || has("ptrace") {
        let kind = if has("ptrace") {
            Kind::Process
        } else {
            Kind::Signal
        };
        return DenialRecord {
            kind,
            path: r.opid.map(|p| format!("/proc/{p}")),
            rule: format!(
                "{} mode: process {} is outside the sandbox",
                scope.mode,
                r.opid.map(|p| p.to_string()).unwrap_or_default()
            ),
            ..base
        };
    }
    let Some(path) = &r.path else {
        return base;
    };
    let access = if r
        .blockers
        .iter()
        .any(|b| WRITE_BLOCKERS.contains(&b.as_str()))
    {
        Access::Write
    } else {
        Access::Read
    };
    match refused(scope, Path::new(path), access) {
        Some((kind, rule, grant)) => DenialRecord {
            kind,
            path: Some(path.clone()),
            rule: format!("{rule} ({blockers})"),
            grant,
            ..base
        },
        None => DenialRecord {
            kind: match (access, path.starts_with("/dev/")) {
                (Access::Read, _) => Kind::FileRead,
                (_, true) => Kind::Device,
                _ => Kind::FileWrite,
            },
            path: Some(path.clone()),
            ..base
        },
    }
}

/// The records of one run: the kernel's where it recorded the refusal, the lines'
/// (`policy-check`) for what it did not (the seccomp filter's, the stage's read-only
/// mounts, names the resolver could not look up), the proxy's as they are. A line's
/// record is the same refusal as a kernel record when both name the same path, or the
/// line names a file in the directory the kernel refused making or removing it in, or
/// both name the same address and port.
pub fn merge(audit: Vec<DenialRecord>, lines: Vec<DenialRecord>) -> Vec<DenialRecord> {
    let same = |a: &DenialRecord, l: &DenialRecord| match (&a.path, &l.path) {
        (Some(ap), Some(lp)) => {
            ap == lp || Path::new(lp).parent().is_some_and(|d| d == Path::new(ap))
        }
        _ => a.host.is_some() && a.host == l.host && a.port == l.port,
    };
    let mut out = audit.clone();
    out.extend(
        lines
            .into_iter()
            .filter(|l| l.evidence == Source::Proxy || !audit.iter().any(|a| same(a, l))),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode::Mode;
    use crate::policy::Network;
    use std::path::PathBuf;

    fn scope() -> Scope {
        Scope {
            mode: Mode::WorkspaceWrite,
            cwd: "/work".into(),
            script_dirs: Vec::new(),
            workspace: "/work".into(),
            writable: vec!["/work".into(), "/tmp".into()],
            writable_files: vec!["/dev/null".into()],
            hidden: vec![PathBuf::from("/root/.ssh")],
            devices_hidden: true,
            devices_allowed: Vec::new(),
            homes: vec!["/home/u".into()],
            protected: Vec::new(),
            protect_explicit: false,
            network: Network::Deny,
            tcp_connect: Vec::new(),
            unix_sockets: false,
            by_name: false,
            staged: false,
            supervised: false,
            protect_held: false,
            own_network: false,
        }
    }

    fn refused_at(blocker: &str, path: &str) -> Refused {
        Refused {
            blockers: vec![blocker.into()],
            path: Some(path.into()),
            addr: None,
            port: None,
            opid: None,
        }
    }

    #[test]
    fn kinds_and_grants_come_from_the_blockers_and_the_policy() {
        let collected = Collected {
            refused: vec![
                refused_at("fs.make_reg", "/etc"),
                refused_at("fs.read_file", "/root/.ssh/id"),
                Refused {
                    blockers: vec!["net.connect_tcp".into()],
                    path: None,
                    addr: Some("127.0.0.1".into()),
                    port: Some(9),
                    opid: None,
                },
            ],
            ..Collected::default()
        };
        let r = from_audit(&scope(), &collected);
        assert_eq!(r[0].kind, Kind::FileWrite);
        assert_eq!(r[0].grant.as_deref(), Some("--writable /etc"));
        assert_eq!(r[0].evidence, Source::Audit);
        assert_eq!(r[1].kind, Kind::HiddenPath);
        assert_eq!(r[2].kind, Kind::NetworkAddress);
        assert_eq!(r[2].target(), "127.0.0.1:9");
    }

    #[test]
    fn a_kernel_record_replaces_the_line_s_guess_and_adds_what_no_line_said() {
        let audit = from_audit(
            &scope(),
            &Collected {
                refused: vec![
                    refused_at("fs.make_reg", "/etc"),
                    refused_at("fs.make_reg", "/opt"),
                ],
                ..Collected::default()
            },
        );
        let mut line = audit[0].clone();
        line.path = Some("/etc/x".into());
        line.evidence = Source::PolicyCheck;
        let mut other = line.clone();
        other.path = Some("/var/y".into());
        let merged = merge(audit, vec![line, other]);
        let paths: Vec<_> = merged.iter().map(|r| r.path.clone().unwrap()).collect();
        assert_eq!(paths, ["/etc", "/opt", "/var/y"]);
    }
}
