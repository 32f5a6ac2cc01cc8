//! Descriptors the command inherits whose metadata lies outside the writable roots.
//!
//! The namespace stage holds `metadata` in workspace-write by mounting everything outside
//! the writable roots read-only. A descriptor the caller opened before the stage ran
//! (stdin, stdout, stderr, `--keep-fd`) is on the caller's own read-write mount: through
//! it (`fchmod`, `fchown`, `futimens`, `chmod /proc/self/fd/N`) the command changes the
//! real file, device or terminal whatever the mounts say. So such a descriptor is put
//! back as the same object opened again through the stage's read-only mounts, where
//! every metadata change is `EROFS`: the stage does it for the caller's pseudo-terminals
//! (before the command's own devpts instance covers their names), the runner, before it
//! applies Landlock, for a directory, a named pipe, a harmless device (`/dev/null`) and a
//! regular file opened only for reading. Any other whose object is not beneath a
//! writable root nor on a read-only mount is named in the status record, and the run is
//! then `partial`: a regular file open for writing (a log the caller redirected output
//! to: no read-only mount lets it be written), a device whose opening has effects of its
//! own, a terminal that could not be opened again.
//!
//! Pipes, sockets and anonymous inodes are not named: their inode belongs to no file
//! anyone else opens by path, so changing its mode changes nothing outside.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What an inherited descriptor refers to, as far as the report is concerned.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DescriptorKind {
    /// A regular file (or anything the other kinds do not cover).
    File,
    Directory,
    /// A character or block device that is not a terminal (`/dev/null` among them).
    Device,
    Terminal,
    /// A named pipe (a FIFO with a path; an anonymous pipe is never named).
    Fifo,
}

impl DescriptorKind {
    const ALL: [DescriptorKind; 5] = [
        DescriptorKind::File,
        DescriptorKind::Directory,
        DescriptorKind::Device,
        DescriptorKind::Terminal,
        DescriptorKind::Fifo,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DescriptorKind::File => "file",
            DescriptorKind::Directory => "directory",
            DescriptorKind::Device => "device",
            DescriptorKind::Terminal => "terminal",
            DescriptorKind::Fifo => "fifo",
        }
    }

    fn parse(s: &str) -> Option<DescriptorKind> {
        DescriptorKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// One inherited descriptor through which metadata outside the writable roots can change.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenOutside {
    pub fd: i32,
    pub kind: DescriptorKind,
}

impl fmt::Display for OpenOutside {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.fd, self.kind.as_str())
    }
}

/// The status record's word before the list (see [`crate::status`]).
pub const RECORD_WORD: &str = "metadata-open";

/// The list as the status record carries it: `0:device,2:terminal`.
pub fn encode(list: &[OpenOutside]) -> String {
    let items: Vec<String> = list.iter().map(ToString::to_string).collect();
    items.join(",")
}

/// The list from its record form; `None` when any item is malformed, a descriptor is
/// negative or repeated, or the list is empty (the word is then absent).
pub fn decode(text: &str) -> Option<Vec<OpenOutside>> {
    let mut out: Vec<OpenOutside> = Vec::new();
    for item in text.split(',') {
        let (fd, kind) = item.split_once(':')?;
        if fd.is_empty() || !fd.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let fd: i32 = fd.parse().ok()?;
        if out.iter().any(|o| o.fd == fd) {
            return None;
        }
        out.push(OpenOutside {
            fd,
            kind: DescriptorKind::parse(kind)?,
        });
    }
    (!out.is_empty()).then_some(out)
}

/// One sentence naming the descriptors, for notes and messages.
pub fn describe(list: &[OpenOutside]) -> String {
    let items: Vec<String> = list
        .iter()
        .map(|o| format!("{} (a {})", o.fd, o.kind.as_str()))
        .collect();
    format!(
        "inherited descriptor{} {} refer{} to objects outside the writable roots, opened by the caller on its own mounts: the command can change their mode, owner and times through them",
        if list.len() == 1 { "" } else { "s" },
        items.join(", "),
        if list.len() == 1 { "s" } else { "" },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_round_trip_and_malformed_ones_are_refused() {
        let list = vec![
            OpenOutside {
                fd: 0,
                kind: DescriptorKind::Device,
            },
            OpenOutside {
                fd: 2,
                kind: DescriptorKind::Terminal,
            },
        ];
        assert_eq!(encode(&list), "0:device,2:terminal");
        assert_eq!(decode("0:device,2:terminal"), Some(list));
        for bad in [
            "",
            "0",
            "0:",
            ":file",
            "-1:file",
            "0:pipe",
            "0:file,0:file",
            "0:file,",
            " 0:file",
        ] {
            assert_eq!(decode(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_description_names_each_descriptor() {
        let one = describe(&[OpenOutside {
            fd: 0,
            kind: DescriptorKind::Device,
        }]);
        assert!(
            one.starts_with("inherited descriptor 0 (a device) refers"),
            "{one}"
        );
    }
}
