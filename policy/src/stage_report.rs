//! What the namespace stage saw while the command ran, and how it tells the launcher.
//!
//! # Shared writable roots
//!
//! A writable root is granted *beneath* it; the directory itself belongs to everyone
//! who shares it. When the caller owns a shared directory (root and `/tmp`, `/var/tmp`,
//! `/dev/shm`, a `$TMPDIR` there), a command it runs can change that directory's own
//! mode and owner without any capability: `chmod 0777 /tmp` strips the sticky bit
//! machine-wide, `chmod 0700 /tmp` locks every other user out. Landlock governs no
//! metadata, seccomp cannot see which path a `chmod` names, and no mount can tell the
//! directory from the files inside it (both are the caller's; a read-only mount of the
//! directory would refuse creating files in it too). So this is detected and undone, not
//! prevented: the stage snapshots each shared root before the command, puts its mode and
//! owner back within milliseconds of a change (it looks every 20 ms) and once more when the
//! command has ended, and reports each change; `stockade run` checks again after the
//! command settles (the only check where the stage cannot run).
//!
//! # Protected names that appeared
//!
//! A protected name that did not exist when the command started (`.git/commondir`,
//! `.envrc`, ...) has nothing a read-only bind could sit on; the stage checks those names
//! after the command and reports each that appeared.
//!
//! # The report file (format version 1)
//!
//! `stockade confine` creates it empty, 0600, next to the status file, when the stage
//! has something to watch. The stage opens it before the command exists (a descriptor
//! the command never holds, in a directory Landlock keeps it out of) and appends one line
//! per finding, each with one `write(2)`:
//!
//! ```text
//! stockade-stage 1 changed WAS_MODE WAS_UID WAS_GID NOW_MODE NOW_UID NOW_GID PUT PATH\n
//! stockade-stage 1 appeared PATH\n
//! ```
//!
//! Modes are four octal digits; PUT is `put-back` or `left` (it could not be undone);
//! PATH is the rest of the line, with `\`, carriage return and newline escaped as `\\`,
//! `\r`, `\n`. At most [`MAX_RECORDS`] lines are written; anything else is corrupt.

use crate::policy::{Policy, SHARED_TMP};
use crate::stage::TmpMode;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};

/// The first field of every line.
pub const MAGIC: &str = "stockade-stage";
/// The format version this build writes and reads.
pub const VERSION: u32 = 1;
/// The name of the report file inside the private directory.
pub const REPORT_FILE: &str = "stage";
/// The most lines the stage writes: a command that changes a root in a loop gets it put
/// back every time, but the report stays small.
pub const MAX_RECORDS: usize = 32;
/// The most bytes a reader accepts.
pub const MAX_REPORT_BYTES: usize = 64 * 1024;

/// The metadata of a directory the stage puts back: permission bits (with set-uid,
/// set-gid and sticky), owner and group. Times are left alone (they harm nobody), and
/// ACLs and other extended attributes cannot be written by a confined command at all.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirMeta {
    /// `st_mode & 07777`, as four octal digits in JSON (`"1777"`).
    #[serde(serialize_with = "octal", deserialize_with = "from_octal")]
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

fn octal<S: serde::Serializer>(mode: &u32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{mode:04o}"))
}

fn from_octal<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let s = String::deserialize(d)?;
    u32::from_str_radix(&s, 8)
        .ok()
        .filter(|m| *m <= 0o7777)
        .ok_or_else(|| serde::de::Error::custom(format!("not an octal mode: {s:?}")))
}

impl DirMeta {
    pub fn new(st_mode: u32, uid: u32, gid: u32) -> DirMeta {
        DirMeta {
            mode: st_mode & 0o7777,
            uid,
            gid,
        }
    }

    /// Whether everyone may write in it and nothing stops them removing each other's
    /// files (others-writable without the sticky bit). Such a state is never put back: a
    /// snapshot taken while another command had weakened a shared root (`chmod 0777 /tmp`
    /// in a second sandbox) would otherwise be "restored" over the repaired directory, and
    /// two commands together could leave `/tmp` without its sticky bit for good.
    pub fn open_to_everyone(&self) -> bool {
        self.mode & 0o002 != 0 && self.mode & 0o1000 == 0
    }
}

impl fmt::Display for DirMeta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "mode {:04o} owner {}:{}", self.mode, self.uid, self.gid)
    }
}

/// Whether a writable root with `meta` is a shared directory the caller `caller_uid`
/// could change for everyone: one it owns (without a capability, only the owner can
/// change a mode) that others may create files in (sticky or world-writable, as `/tmp`).
/// A directory only the caller uses (a workspace) is its own business: `chmod -R u+w .`
/// there is ordinary work.
pub fn is_shared(meta: &DirMeta, caller_uid: u32) -> bool {
    meta.uid == caller_uid && meta.mode & (0o1000 | 0o002) != 0
}

/// The writable roots of `policy` that are shared directories `caller_uid` owns, with
/// their metadata as `meta` gives it (`None`: gone, or not a directory). A private
/// `/tmp` is a fresh tmpfs, so the machine's is out of the command's reach.
pub fn shared_roots(
    policy: &Policy,
    caller_uid: u32,
    meta: &dyn Fn(&Path) -> Option<DirMeta>,
) -> Vec<(PathBuf, DirMeta)> {
    let mut shared: Vec<(PathBuf, DirMeta)> = Vec::new();
    for root in crate::grants::writable_roots(policy) {
        let private = policy.tmp() == TmpMode::Private && root == Path::new(SHARED_TMP);
        if private || shared.iter().any(|(p, _)| *p == root) {
            continue;
        }
        if let Some(m) = meta(&root)
            && is_shared(&m, caller_uid)
        {
            shared.push((root, m));
        }
    }
    shared
}

/// One shared writable root whose metadata changed while the command ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RootChange {
    pub path: String,
    /// What it was before the command.
    pub was: DirMeta,
    /// What it was found changed to.
    pub found: DirMeta,
    /// Whether it was put back.
    pub put_back: bool,
}

impl fmt::Display for RootChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "shared directory {} changed from {} to {}; {}",
            self.path,
            self.was,
            self.found,
            if self.put_back {
                "put back"
            } else {
                "could NOT be put back"
            }
        )
    }
}

/// One line of the report file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StageRecord {
    Changed(RootChange),
    /// A protected name that did not exist when the command started and does now.
    Appeared(String),
}

/// A report file that is not as the stage writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CorruptReport(pub String);

impl fmt::Display for CorruptReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the stage's report is corrupt: {}", self.0)
    }
}

fn escape(path: &str) -> String {
    path.replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\r', "\\r")
}

fn unescape(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next()? {
            '\\' => '\\',
            'n' => '\n',
            'r' => '\r',
            _ => return None,
        });
    }
    Some(out)
}

impl StageRecord {
    /// The record's line, newline included.
    pub fn encode(&self) -> Vec<u8> {
        let body = match self {
            StageRecord::Changed(c) => format!(
                "changed {:04o} {} {} {:04o} {} {} {} {}",
                c.was.mode,
                c.was.uid,
                c.was.gid,
                c.found.mode,
                c.found.uid,
                c.found.gid,
                if c.put_back { "put-back" } else { "left" },
                escape(&c.path)
            ),
            StageRecord::Appeared(p) => format!("appeared {}", escape(p)),
        };
        format!("{MAGIC} {VERSION} {body}\n").into_bytes()
    }

    fn decode_line(line: &str) -> Result<StageRecord, CorruptReport> {
        let bad = |why: &str| CorruptReport(format!("{why}: {line:?}"));
        let rest = line
            .strip_prefix(&format!("{MAGIC} {VERSION} "))
            .ok_or_else(|| bad("not a version 1 record"))?;
        let (kind, rest) = rest.split_once(' ').ok_or_else(|| bad("no fields"))?;
        match kind {
            "appeared" => Ok(StageRecord::Appeared(
                unescape(rest).ok_or_else(|| bad("bad escape"))?,
            )),
            "changed" => {
                let f: Vec<&str> = rest.splitn(8, ' ').collect();
                let mode = |m: &str| {
                    Some(m)
                        .filter(|m| m.len() == 4)
                        .and_then(|m| u32::from_str_radix(m, 8).ok())
                };
                let id = |n: &str| n.parse::<u32>().ok();
                let [wm, wu, wg, fm, fu, fg, put, path] = f[..] else {
                    return Err(bad("missing fields"));
                };
                let put_back = match put {
                    "put-back" => Some(true),
                    "left" => Some(false),
                    _ => None,
                };
                match (
                    mode(wm),
                    id(wu),
                    id(wg),
                    mode(fm),
                    id(fu),
                    id(fg),
                    put_back,
                    unescape(path),
                ) {
                    (
                        Some(wm),
                        Some(wu),
                        Some(wg),
                        Some(fm),
                        Some(fu),
                        Some(fg),
                        Some(put_back),
                        Some(path),
                    ) => Ok(StageRecord::Changed(RootChange {
                        path,
                        was: DirMeta::new(wm, wu, wg),
                        found: DirMeta::new(fm, fu, fg),
                        put_back,
                    })),
                    _ => Err(bad("bad fields")),
                }
            }
            _ => Err(bad("unknown record kind")),
        }
    }
}

/// What the report file says, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StageReport {
    pub changed: Vec<RootChange>,
    pub appeared: Vec<String>,
}

impl StageReport {
    /// Parses a whole report file: zero or more complete lines, at most [`MAX_RECORDS`].
    pub fn decode(bytes: &[u8]) -> Result<StageReport, CorruptReport> {
        if bytes.len() > MAX_REPORT_BYTES {
            return Err(CorruptReport(format!(
                "larger than {MAX_REPORT_BYTES} bytes"
            )));
        }
        let text = std::str::from_utf8(bytes).map_err(|_| CorruptReport("not UTF-8".into()))?;
        if !text.is_empty() && !text.ends_with('\n') {
            return Err(CorruptReport("a partial line".into()));
        }
        let mut report = StageReport::default();
        let lines: Vec<&str> = text.lines().collect();
        if lines.len() > MAX_RECORDS {
            return Err(CorruptReport(format!("more than {MAX_RECORDS} lines")));
        }
        for line in lines {
            match StageRecord::decode_line(line)? {
                StageRecord::Changed(c) => report.changed.push(c),
                StageRecord::Appeared(p) => report.appeared.push(p),
            }
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_open_to_everyone_is_never_put_back() {
        assert!(DirMeta::new(0o777, 0, 0).open_to_everyone());
        assert!(DirMeta::new(0o40777, 0, 0).open_to_everyone());
        assert!(!DirMeta::new(0o1777, 0, 0).open_to_everyone());
        assert!(!DirMeta::new(0o775, 0, 0).open_to_everyone());
        assert!(!DirMeta::new(0o700, 0, 0).open_to_everyone());
    }

    #[test]
    fn records_round_trip_with_the_documented_bytes() {
        let changed = StageRecord::Changed(RootChange {
            path: "/tmp/a b\n\\c".into(),
            was: DirMeta::new(0o41777, 0, 0),
            found: DirMeta::new(0o777, 0, 5),
            put_back: true,
        });
        assert_eq!(
            changed.encode(),
            b"stockade-stage 1 changed 1777 0 0 0777 0 5 put-back /tmp/a b\\n\\\\c\n"
        );
        let appeared = StageRecord::Appeared("/w/.envrc".into());
        assert_eq!(appeared.encode(), b"stockade-stage 1 appeared /w/.envrc\n");
        let mut bytes = changed.encode();
        bytes.extend(appeared.encode());
        let report = StageReport::decode(&bytes).unwrap();
        let StageRecord::Changed(c) = changed else {
            unreachable!()
        };
        assert_eq!(report.changed, vec![c]);
        assert_eq!(report.appeared, vec!["/w/.envrc".to_string()]);
        assert_eq!(StageReport::decode(b""), Ok(StageReport::default()));
    }

    #[test]
    fn anything_else_is_corrupt() {
        for bad in [
            &b"stockade-stage 1 appeared /x"[..],
            b"stockade-stage 2 appeared /x\n",
            b"stockade-stage 1 escaped /x\n",
            b"stockade-stage 1 changed 1777 0 0 0777 0 0 maybe /tmp\n",
            b"stockade-stage 1 changed 17777 0 0 0777 0 0 left /tmp\n",
            b"stockade-stage 1 changed 1777 0 0 0777 0 left /tmp\n",
            b"stockade-stage 1 appeared /x\\q\n",
            b"\xff\n",
        ] {
            assert!(
                StageReport::decode(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let many = StageRecord::Appeared("/x".into())
            .encode()
            .repeat(MAX_RECORDS + 1);
        assert!(StageReport::decode(&many).is_err());
    }

    #[test]
    fn shared_means_owned_by_the_caller_and_open_to_others() {
        let tmp = DirMeta::new(0o41777, 0, 0);
        assert!(is_shared(&tmp, 0));
        // Another user's /tmp is not theirs to chmod.
        assert!(!is_shared(&tmp, 1000));
        // A workspace is the caller's own.
        assert!(!is_shared(&DirMeta::new(0o40755, 1000, 1000), 1000));
        assert!(is_shared(&DirMeta::new(0o40777, 1000, 1000), 1000));
        assert!(is_shared(&DirMeta::new(0o41770, 1000, 1000), 1000));
    }
}
