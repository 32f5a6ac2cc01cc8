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

/// The kernel's own filesystems, by the `f_type` magic `statfs` gives, and their names.
/// A "regular file" there is an interface to the kernel, not stored bytes: reading
/// `/proc/kmsg` consumes the kernel log, reading a tracing or debug file can block or
/// change state. No request or control file lives there, so a file on one of them is
/// refused before a byte is read, whoever owns it and whatever its mode says.
const KERNEL_FILESYSTEMS: [(u64, &str); 16] = [
    (0x9fa0, "proc"),
    (0x6265_6572, "sysfs"),
    (0x6462_6720, "debugfs"),
    (0x7472_6163, "tracefs"),
    (0x7363_6673, "securityfs"),
    (0x0027_e0eb, "cgroup"),
    (0x6367_7270, "cgroup2"),
    (0xcafe_4a11, "bpf"),
    (0x6265_6570, "configfs"),
    (0x6165_676c, "pstore"),
    (0xde5e_81e4, "efivarfs"),
    (0xf97c_ff8c, "selinuxfs"),
    (0x4341_5d53, "smackfs"),
    (0x4249_4e4d, "binfmt_misc"),
    (0x6573_5543, "fusectl"),
    (0x1cd1, "devpts"),
];

/// The name of the kernel filesystem whose `statfs` magic is `magic`, `None` for a
/// filesystem that stores files (see [`KERNEL_FILESYSTEMS`]).
pub fn kernel_filesystem(magic: u64) -> Option<&'static str> {
    KERNEL_FILESYSTEMS
        .iter()
        .find(|(m, _)| *m == magic)
        .map(|(_, name)| *name)
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

    #[test]
    fn files_of_the_kernels_own_filesystems_are_named_and_stored_files_are_not() {
        assert_eq!(kernel_filesystem(0x9fa0), Some("proc"));
        assert_eq!(kernel_filesystem(0x6265_6572), Some("sysfs"));
        assert_eq!(kernel_filesystem(0x7472_6163), Some("tracefs"));
        // ext4, tmpfs, xfs, btrfs, overlayfs: files there are stored bytes.
        for stored in [0xef53, 0x0102_1994, 0x5846_5342, 0x9123_683e, 0x794c_7630] {
            assert_eq!(kernel_filesystem(stored), None, "{stored:#x}");
        }
    }
}
