//! The one rule for files and directories stockade trusts because of who can reach
//! them (request files, status files, private directories and their base): the right
//! kind of object, owned by the effective uid of the process that checks, and closed to
//! group and others. This module decides on facts the binaries read (they do the I/O,
//! on an open descriptor where they can).

use std::fmt;

/// What kind of object a path names.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FileKind {
    Regular,
    Directory,
    /// A symbolic link, FIFO, socket or device.
    Other,
}

impl FileKind {
    fn noun(self) -> &'static str {
        match self {
            FileKind::Regular => "a regular file",
            FileKind::Directory => "a directory",
            FileKind::Other => "something else",
        }
    }
}

/// The facts the rule looks at, as `fstat`/`lstat` give them.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FileFacts {
    pub kind: FileKind,
    pub owner: u32,
    /// The full mode word or just its permission bits: only the low 12 bits are read.
    pub mode: u32,
}

impl FileFacts {
    /// The facts in metadata `lstat` or `fstat` gave (no system call here).
    pub fn of(meta: &std::fs::Metadata) -> FileFacts {
        use std::os::unix::fs::MetadataExt;
        let kind = if meta.file_type().is_file() {
            FileKind::Regular
        } else if meta.file_type().is_dir() {
            FileKind::Directory
        } else {
            FileKind::Other
        };
        FileFacts {
            kind,
            owner: meta.uid(),
            mode: meta.mode(),
        }
    }
}

/// Why an object is not trusted.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Untrusted {
    /// Not the kind of object expected (a symbolic link is never followed, so it is
    /// `Other`).
    WrongKind {
        expected: FileKind,
    },
    ForeignOwner {
        owner: u32,
        euid: u32,
    },
    /// Readable, writable or searchable by group or others; `mode` is the permission bits.
    TooOpen {
        mode: u32,
    },
}

/// Whether `facts` describe an `expected` object that only `euid` can reach.
pub fn judge(facts: &FileFacts, expected: FileKind, euid: u32) -> Result<(), Untrusted> {
    if facts.kind != expected {
        return Err(Untrusted::WrongKind { expected });
    }
    if facts.owner != euid {
        return Err(Untrusted::ForeignOwner {
            owner: facts.owner,
            euid,
        });
    }
    let mode = facts.mode & 0o7777;
    if mode & 0o077 != 0 {
        return Err(Untrusted::TooOpen { mode });
    }
    Ok(())
}

impl fmt::Display for Untrusted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Untrusted::WrongKind { expected } => write!(
                f,
                "it is not {} (a symbolic link is never followed)",
                expected.noun()
            ),
            Untrusted::ForeignOwner { owner, euid } => {
                write!(f, "it is owned by uid {owner}, not by uid {euid}")
            }
            Untrusted::TooOpen { mode } => write!(
                f,
                "it has mode {mode:04o}; group and others must have no access"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(kind: FileKind, owner: u32, mode: u32) -> FileFacts {
        FileFacts { kind, owner, mode }
    }

    #[test]
    fn only_the_expected_kind_owned_by_us_and_closed_to_others_is_trusted() {
        use FileKind::*;
        assert_eq!(judge(&facts(Regular, 7, 0o100600), Regular, 7), Ok(()));
        assert_eq!(judge(&facts(Directory, 7, 0o40700), Directory, 7), Ok(()));
        assert_eq!(
            judge(&facts(Other, 7, 0o600), Regular, 7),
            Err(Untrusted::WrongKind { expected: Regular })
        );
        assert_eq!(
            judge(&facts(Regular, 7, 0o600), Directory, 7),
            Err(Untrusted::WrongKind {
                expected: Directory
            })
        );
        assert_eq!(
            judge(&facts(Regular, 8, 0o600), Regular, 7),
            Err(Untrusted::ForeignOwner { owner: 8, euid: 7 })
        );
        for open in [0o640, 0o604, 0o610, 0o601, 0o660] {
            assert_eq!(
                judge(&facts(Regular, 7, open), Regular, 7),
                Err(Untrusted::TooOpen { mode: open })
            );
        }
        // Bits above the permission bits are not "open" (set-uid on a 0700 dir is ours).
        assert_eq!(judge(&facts(Regular, 7, 0o4700), Regular, 7), Ok(()));
    }
}
