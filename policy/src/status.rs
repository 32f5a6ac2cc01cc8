//! The out-of-band status record: how the runner tells the launcher, on a channel the
//! confined command cannot write, whether confinement was applied.
//!
//! # Why
//!
//! Exit code 125 plus a `stockade-runner: ` stderr line is in-band: any confined command
//! can print that line and exit 125. The status file is written only by the runner, on a
//! descriptor the target never holds (opened close-on-exec), in a directory outside every
//! writable root of the policy (so Landlock denies the target writing it by path). Its
//! content therefore decides runner failure, whatever stderr claims.
//!
//! # Format (version 1)
//!
//! The file starts empty (created 0600 by `stockade confine`) and receives at most one
//! record, written with one `write(2)`: one line of ASCII fields separated by single
//! spaces, ending in `\n`.
//!
//! ```text
//! stockade-status 1 confined ENFORCEMENT\n      ENFORCEMENT: full | partial
//! stockade-status 1 confined ENFORCEMENT by-name\n
//! stockade-status 1 confined partial [by-name] metadata-open FD:KIND,...\n
//! stockade-status 1 confined ENFORCEMENT [by-name] [metadata-open ...] env-removed NAME,...\n
//! stockade-status 1 failed KIND MESSAGE\n       KIND: [a-z0-9-]+, MESSAGE: rest of line
//! ```
//!
//! - `confined`: confinement is applied and the runner is about to `execve` the target;
//!   ENFORCEMENT is what the kernel actually gave. `by-name`: the target is a file an
//!   interpreter opens again by its path after `execve` (a `#!` script, or a file only
//!   `/bin/sh` runs), so what the interpreter reads is not the file the runner verified
//!   but whatever the path leads to then ([`TargetStart::ByName`]). `metadata-open`:
//!   inherited descriptors through which the command can change metadata outside the
//!   writable roots ([`crate::descriptors`]), so `metadata` is not held (ENFORCEMENT is
//!   then `partial`). `env-removed`: the names of the variables the environment rule
//!   withheld from the environment the runner inherited (`--inherit-env`), escaped and
//!   cut to fit ([`crate::environment::withheld`]).
//! - `failed`: the runner failed before the target started; KIND is a stable identifier
//!   ([`FailureKind`]), MESSAGE the same text as its stderr line
//!   without the prefix (carriage returns and newlines escaped as `\r`, `\n`).
//!
//! An empty file means the runner never got as far as confining (it was not started,
//! failed before it could open the file, or was killed). Anything else (two records, a
//! partial line, unknown words, more than [`MAX_RECORD_BYTES`]) is corrupt.

use crate::descriptors::{self, OpenOutside};
use crate::environment::withheld::{self, Withheld};
use crate::guarantees::Enforcement;
use std::fmt;

/// The first field of every record.
pub const MAGIC: &str = "stockade-status";
/// The record format version this build writes and reads.
pub const VERSION: u32 = 1;
/// The largest record written or accepted; longer messages are cut to fit.
pub const MAX_RECORD_BYTES: usize = 4096;
/// The name of the status file inside its private directory.
pub const STATUS_FILE: &str = "status";

/// Why the runner failed: the KIND field of a `failed` record, and the runner's own
/// classification of its errors. Executors may match on the identifiers: one is never
/// renamed or reused (a new failure gets a new variant).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum FailureKind {
    Usage,
    RequestMissing,
    RequestSymlink,
    RequestIo,
    RequestNotRegular,
    RequestForeignOwner,
    RequestTooOpen,
    RequestReplaced,
    RequestDigest,
    RequestUnlink,
    RequestDecode,
    RequestInvalid,
    Unconfined,
    Chdir,
    NoNewPrivs,
    GrantPath,
    GrantNotDirectory,
    /// A writable root's path leads to another directory than the one `confine` saw.
    RootReplaced,
    /// The working directory the runner was spawned in (with `--inherit-cwd`) is gone.
    InheritedCwd,
    SandboxUnavailable,
    LessThanReported,
    /// Written by runners of request format 1; today `less-than-reported` names the
    /// guarantees not given. Kept so that old records still decode to their kind.
    GuaranteeNotAchieved,
    Landlock,
    Seccomp,
    Capabilities,
    Fds,
    KeepFdNotOpen,
    Setsid,
    Status,
    Stdout,
    NotFound,
    CannotExecute,
    /// The executable or working directory is not what `confine` bound (see
    /// [`crate::binding`]): nothing was run.
    BindingChanged,
    /// The bound executable's content could not be read to compare its digest.
    BindingUnverifiable,
}

impl FailureKind {
    /// Every kind, for parsing and tests.
    pub const ALL: [FailureKind; 34] = [
        FailureKind::Usage,
        FailureKind::RequestMissing,
        FailureKind::RequestSymlink,
        FailureKind::RequestIo,
        FailureKind::RequestNotRegular,
        FailureKind::RequestForeignOwner,
        FailureKind::RequestTooOpen,
        FailureKind::RequestReplaced,
        FailureKind::RequestDigest,
        FailureKind::RequestUnlink,
        FailureKind::RequestDecode,
        FailureKind::RequestInvalid,
        FailureKind::Unconfined,
        FailureKind::Chdir,
        FailureKind::NoNewPrivs,
        FailureKind::GrantPath,
        FailureKind::GrantNotDirectory,
        FailureKind::SandboxUnavailable,
        FailureKind::LessThanReported,
        FailureKind::GuaranteeNotAchieved,
        FailureKind::Landlock,
        FailureKind::Seccomp,
        FailureKind::Capabilities,
        FailureKind::Fds,
        FailureKind::KeepFdNotOpen,
        FailureKind::Setsid,
        FailureKind::Status,
        FailureKind::Stdout,
        FailureKind::NotFound,
        FailureKind::CannotExecute,
        FailureKind::RootReplaced,
        FailureKind::InheritedCwd,
        FailureKind::BindingChanged,
        FailureKind::BindingUnverifiable,
    ];

    /// The wire identifier.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Usage => "usage",
            FailureKind::RequestMissing => "request-missing",
            FailureKind::RequestSymlink => "request-symlink",
            FailureKind::RequestIo => "request-io",
            FailureKind::RequestNotRegular => "request-not-regular",
            FailureKind::RequestForeignOwner => "request-foreign-owner",
            FailureKind::RequestTooOpen => "request-too-open",
            FailureKind::RequestReplaced => "request-replaced",
            FailureKind::RequestDigest => "request-digest",
            FailureKind::RequestUnlink => "request-unlink",
            FailureKind::RequestDecode => "request-decode",
            FailureKind::RequestInvalid => "request-invalid",
            FailureKind::Unconfined => "unconfined",
            FailureKind::Chdir => "chdir",
            FailureKind::NoNewPrivs => "no-new-privs",
            FailureKind::GrantPath => "grant-path",
            FailureKind::GrantNotDirectory => "grant-not-directory",
            FailureKind::SandboxUnavailable => "sandbox-unavailable",
            FailureKind::LessThanReported => "less-than-reported",
            FailureKind::GuaranteeNotAchieved => "guarantee-not-achieved",
            FailureKind::Landlock => "landlock",
            FailureKind::Seccomp => "seccomp",
            FailureKind::Capabilities => "capabilities",
            FailureKind::Fds => "fds",
            FailureKind::KeepFdNotOpen => "keep-fd-not-open",
            FailureKind::Setsid => "setsid",
            FailureKind::Status => "status",
            FailureKind::Stdout => "stdout",
            FailureKind::NotFound => "not-found",
            FailureKind::CannotExecute => "cannot-execute",
            FailureKind::RootReplaced => "root-replaced",
            FailureKind::InheritedCwd => "inherited-cwd",
            FailureKind::BindingChanged => "binding-changed",
            FailureKind::BindingUnverifiable => "binding-unverifiable",
        }
    }

    /// The kind with wire identifier `s`.
    pub fn parse(s: &str) -> Option<FailureKind> {
        FailureKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the runner starts the verified target.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TargetStart {
    /// From the verified descriptor: the kernel executes exactly the file checked.
    Descriptor,
    /// By its path, for an interpreter that opens it again by name after `execve`: a
    /// swap of the path between the check and that open is not caught, so the binding
    /// cannot be said to have held.
    ByName,
}

/// One status record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StatusRecord {
    /// Confinement applied; the target is about to be executed, as `start` says.
    Confined {
        enforcement: Enforcement,
        start: TargetStart,
        /// Inherited descriptors reaching metadata outside the writable roots; empty
        /// when there are none (or the mode holds metadata whatever they are).
        metadata_open: Vec<OpenOutside>,
        /// Variables withheld from an inherited environment, by name.
        env_removed: Withheld,
    },
    /// The runner failed before the target started.
    Failed { kind: FailureKind, message: String },
}

/// Why a status file's content is not a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CorruptStatus(pub String);

impl fmt::Display for CorruptStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the status record is corrupt: {}", self.0)
    }
}

impl std::error::Error for CorruptStatus {}

impl StatusRecord {
    /// The record as the bytes the runner writes. A `failed` message is escaped onto one
    /// line and cut (at a character boundary) so the record fits [`MAX_RECORD_BYTES`].
    pub fn encode(&self) -> Vec<u8> {
        let line = match self {
            StatusRecord::Confined {
                enforcement,
                start,
                metadata_open,
                env_removed,
            } => {
                let by_name = match start {
                    TargetStart::Descriptor => "",
                    TargetStart::ByName => " by-name",
                };
                let open = match metadata_open.is_empty() {
                    true => String::new(),
                    false => format!(
                        " {} {}",
                        descriptors::RECORD_WORD,
                        descriptors::encode(metadata_open)
                    ),
                };
                let head = format!(
                    "{MAGIC} {VERSION} confined {}{by_name}{open}",
                    enforcement.as_str()
                );
                // What room the record leaves after the word, its space and the newline.
                let room =
                    MAX_RECORD_BYTES.saturating_sub(head.len() + withheld::RECORD_WORD.len() + 3);
                let names = withheld::encode(env_removed, room);
                match names.is_empty() {
                    true => format!("{head}\n"),
                    false => format!("{head} {} {names}\n", withheld::RECORD_WORD),
                }
            }
            StatusRecord::Failed { kind, message } => {
                let head = format!("{MAGIC} {VERSION} failed {kind} ");
                let mut message = crate::exit::one_line(message);
                // An over-long kind leaves no room for the message rather than underflowing.
                let room = MAX_RECORD_BYTES.saturating_sub(head.len() + 1);
                if message.len() > room {
                    let mut cut = room;
                    while !message.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    message.truncate(cut);
                }
                format!("{head}{message}\n")
            }
        };
        line.into_bytes()
    }

    /// Decodes a status file's whole content: `Ok(None)` for an empty file.
    pub fn decode(bytes: &[u8]) -> Result<Option<StatusRecord>, CorruptStatus> {
        if bytes.is_empty() {
            return Ok(None);
        }
        let bad = |why: &str| Err(CorruptStatus(why.to_string()));
        if bytes.len() > MAX_RECORD_BYTES {
            return bad("it is longer than one record");
        }
        let Ok(text) = std::str::from_utf8(bytes) else {
            return bad("it is not UTF-8");
        };
        let Some(line) = text.strip_suffix('\n') else {
            return bad("the record is incomplete (no final newline)");
        };
        if line.contains('\n') {
            return bad("it holds more than one record");
        }
        let mut fields = line.splitn(4, ' ');
        if fields.next() != Some(MAGIC) {
            return bad("it does not start with the status magic");
        }
        match fields.next() {
            Some(v) if v == VERSION.to_string() => {}
            Some(v) => return Err(CorruptStatus(format!("unsupported record version {v:?}"))),
            None => return bad("the version is missing"),
        }
        match (fields.next(), fields.next()) {
            (Some("confined"), Some(rest)) => decode_confined(rest),
            (Some("failed"), Some(rest)) => {
                let (kind, message) = rest.split_once(' ').unwrap_or((rest, ""));
                let Some(kind) = FailureKind::parse(kind) else {
                    return bad("unknown failure kind");
                };
                Ok(Some(StatusRecord::Failed {
                    kind,
                    message: message.to_string(),
                }))
            }
            _ => bad("unknown record kind"),
        }
    }
}

/// The words after `confined`: `ENFORCEMENT [by-name] [metadata-open LIST]
/// [env-removed LIST]`, each at most once and in that order.
fn decode_confined(rest: &str) -> Result<Option<StatusRecord>, CorruptStatus> {
    let bad = |why: &str| Err(CorruptStatus(why.to_string()));
    let mut words = rest.split(' ');
    let enforcement = match words.next() {
        Some("full") => Enforcement::Full,
        Some("partial") => Enforcement::Partial,
        _ => return bad("unknown enforcement in a confined record"),
    };
    let mut next = words.next();
    let start = match next {
        Some("by-name") => {
            next = words.next();
            TargetStart::ByName
        }
        _ => TargetStart::Descriptor,
    };
    let metadata_open = match next {
        Some(descriptors::RECORD_WORD) => {
            next = words.next();
            match next.and_then(descriptors::decode) {
                // Metadata not held is never a full run.
                Some(list) if enforcement == Enforcement::Partial => {
                    next = words.next();
                    list
                }
                _ => return bad("a malformed list of descriptors in a confined record"),
            }
        }
        _ => Vec::new(),
    };
    let env_removed = match next {
        None => Withheld::default(),
        Some(withheld::RECORD_WORD) => match words.next().and_then(withheld::decode) {
            Some(list) => list,
            None => return bad("a malformed list of withheld variables in a confined record"),
        },
        Some(_) => return bad("an unknown word in a confined record"),
    };
    if words.next().is_some() {
        return bad("an unknown word in a confined record");
    }
    Ok(Some(StatusRecord::Confined {
        enforcement,
        start,
        metadata_open,
        env_removed,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::descriptors::DescriptorKind;

    #[test]
    fn records_round_trip_and_have_the_documented_bytes() {
        let confined = StatusRecord::Confined {
            enforcement: Enforcement::Partial,
            start: TargetStart::Descriptor,
            metadata_open: Vec::new(),
            env_removed: Withheld::default(),
        };
        assert_eq!(confined.encode(), b"stockade-status 1 confined partial\n");
        let by_name = StatusRecord::Confined {
            enforcement: Enforcement::Full,
            start: TargetStart::ByName,
            metadata_open: Vec::new(),
            env_removed: Withheld::default(),
        };
        assert_eq!(
            by_name.encode(),
            b"stockade-status 1 confined full by-name\n"
        );
        let open = StatusRecord::Confined {
            enforcement: Enforcement::Partial,
            start: TargetStart::ByName,
            metadata_open: vec![OpenOutside {
                fd: 0,
                kind: DescriptorKind::Device,
            }],
            env_removed: Withheld::default(),
        };
        assert_eq!(
            open.encode(),
            b"stockade-status 1 confined partial by-name metadata-open 0:device\n"
        );
        let failed = StatusRecord::Failed {
            kind: FailureKind::Chdir,
            message: "cannot enter working directory /w: gone".into(),
        };
        assert_eq!(
            failed.encode(),
            b"stockade-status 1 failed chdir cannot enter working directory /w: gone\n"
        );
        let withheld = StatusRecord::Confined {
            enforcement: Enforcement::Partial,
            start: TargetStart::Descriptor,
            metadata_open: vec![OpenOutside {
                fd: 1,
                kind: DescriptorKind::File,
            }],
            env_removed: Withheld {
                names: vec!["GH_TOKEN".into(), "A B".into()],
                more: 0,
            },
        };
        assert_eq!(
            withheld.encode(),
            b"stockade-status 1 confined partial metadata-open 1:file env-removed GH_TOKEN,A%20B\n"
        );
        for r in [confined, by_name, open, failed, withheld] {
            assert_eq!(StatusRecord::decode(&r.encode()), Ok(Some(r)));
        }
        assert_eq!(StatusRecord::decode(b""), Ok(None));
        for bad in [
            "stockade-status 1 confined full env-removed\n",
            "stockade-status 1 confined full env-removed A,,B\n",
            "stockade-status 1 confined full env-removed A metadata-open 0:file\n",
            "stockade-status 1 confined full metadata-open\n",
        ] {
            assert!(StatusRecord::decode(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_long_list_of_withheld_names_is_cut_to_fit_and_counted() {
        let r = StatusRecord::Confined {
            enforcement: Enforcement::Full,
            start: TargetStart::Descriptor,
            metadata_open: Vec::new(),
            env_removed: Withheld {
                names: (0..2000).map(|i| format!("SECRET_{i}")).collect(),
                more: 0,
            },
        };
        let bytes = r.encode();
        assert!(bytes.len() <= MAX_RECORD_BYTES);
        let Ok(Some(StatusRecord::Confined { env_removed, .. })) = StatusRecord::decode(&bytes)
        else {
            panic!("{}", String::from_utf8_lossy(&bytes))
        };
        assert!(env_removed.names.len() > 100);
        assert_eq!(env_removed.names.len() + env_removed.more, 2000);
    }

    #[test]
    fn messages_stay_on_one_line_and_within_the_cap() {
        let r = StatusRecord::Failed {
            kind: FailureKind::GrantPath,
            message: format!("a\nb\r{}", "é".repeat(MAX_RECORD_BYTES)),
        };
        let bytes = r.encode();
        assert!(bytes.len() <= MAX_RECORD_BYTES);
        let Some(StatusRecord::Failed { message, .. }) = StatusRecord::decode(&bytes).unwrap()
        else {
            panic!()
        };
        assert!(message.starts_with("a\\nb\\r"));
    }

    /// Where each kind sits in [`FailureKind::ALL`]. The match is exhaustive, so a new
    /// kind does not compile until it is given a place here, and the test below then
    /// fails until `ALL` holds it there.
    fn position(kind: FailureKind) -> usize {
        match kind {
            FailureKind::Usage => 0,
            FailureKind::RequestMissing => 1,
            FailureKind::RequestSymlink => 2,
            FailureKind::RequestIo => 3,
            FailureKind::RequestNotRegular => 4,
            FailureKind::RequestForeignOwner => 5,
            FailureKind::RequestTooOpen => 6,
            FailureKind::RequestReplaced => 7,
            FailureKind::RequestDigest => 8,
            FailureKind::RequestUnlink => 9,
            FailureKind::RequestDecode => 10,
            FailureKind::RequestInvalid => 11,
            FailureKind::Unconfined => 12,
            FailureKind::Chdir => 13,
            FailureKind::NoNewPrivs => 14,
            FailureKind::GrantPath => 15,
            FailureKind::GrantNotDirectory => 16,
            FailureKind::SandboxUnavailable => 17,
            FailureKind::LessThanReported => 18,
            FailureKind::GuaranteeNotAchieved => 19,
            FailureKind::Landlock => 20,
            FailureKind::Seccomp => 21,
            FailureKind::Capabilities => 22,
            FailureKind::Fds => 23,
            FailureKind::KeepFdNotOpen => 24,
            FailureKind::Setsid => 25,
            FailureKind::Status => 26,
            FailureKind::Stdout => 27,
            FailureKind::NotFound => 28,
            FailureKind::CannotExecute => 29,
            FailureKind::RootReplaced => 30,
            FailureKind::InheritedCwd => 31,
            FailureKind::BindingChanged => 32,
            FailureKind::BindingUnverifiable => 33,
        }
    }

    #[test]
    fn all_holds_every_kind_once() {
        for (i, kind) in FailureKind::ALL.into_iter().enumerate() {
            assert_eq!(position(kind), i, "{kind}");
        }
    }

    #[test]
    fn failure_kinds_are_distinct_parseable_identifiers() {
        let mut seen = std::collections::BTreeSet::new();
        for kind in FailureKind::ALL {
            let s = kind.as_str();
            assert!(
                !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'),
                "{s}"
            );
            assert!(seen.insert(s), "{s} is used twice");
            assert_eq!(FailureKind::parse(s), Some(kind));
        }
        assert_eq!(FailureKind::parse("unknown"), None);
    }

    #[test]
    fn anything_but_one_complete_record_is_corrupt() {
        for bad in [
            &b"stockade-status 1 confined full"[..],
            b"stockade-status 1 confined full\nstockade-status 1 confined full\n",
            b"stockade-status 1 confined full\nstockade-status 1 failed x y\n",
            b"stockade-status 2 confined full\n",
            b"stockade-status 1 confined total\n",
            b"stockade-status 1 confined by-name\n",
            b"stockade-status 1 confined full by-name by-name\n",
            b"stockade-status 1 confined full by-path\n",
            b"stockade-status 1 confined full metadata-open 0:device\n",
            b"stockade-status 1 confined partial metadata-open\n",
            b"stockade-status 1 confined partial metadata-open 0:pipe\n",
            b"stockade-status 1 confined partial metadata-open 0:file by-name\n",
            b"stockade-status 1 confined partial metadata-open 0:file x\n",
            b"stockade-status 1 escaped\n",
            b"stockade-status 1 failed BAD msg\n",
            b"stockade-status 1 failed no-such-kind msg\n",
            b"stockade-runner: fake\n",
            b"\xff\n",
        ] {
            assert!(
                StatusRecord::decode(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert!(StatusRecord::decode(&vec![b'x'; MAX_RECORD_BYTES + 1]).is_err());
    }
}
