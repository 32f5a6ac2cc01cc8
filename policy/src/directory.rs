//! Directory listings, read with `getdents64(2)` from a descriptor the caller holds.
//!
//! Both binaries list directories on a command's path: the runner every ancestor of a
//! hidden path (`/`, `/etc`, the home...), whose entries its carve-out grants, and the
//! launcher a directory holding several of the default hidden names. Through the C
//! library that costs more than the listing itself under musl: `opendir` takes its
//! 2 KiB buffer from musl's own allocator, which maps fresh pages for it and unmaps them
//! at `closedir` (two page faults a directory), and reads 2 KiB a call (four calls for
//! a `/etc` of 150 entries); nix's `Dir` also duplicates the descriptor first. Here the
//! entries are read straight into one 16 KiB buffer on the stack.
//!
//! Only the parsing of the kernel's records is ours; it is checked against `ls -f`.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStringExt;

/// What a directory entry is, as the filesystem's listing says (`d_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryType {
    Directory,
    Symlink,
    BlockDevice,
    CharDevice,
    Regular,
    Fifo,
    Socket,
    /// The filesystem does not say (`DT_UNKNOWN`): ask with `fstatat` if it matters.
    Unknown,
}

impl EntryType {
    fn of(d_type: u8) -> EntryType {
        match d_type {
            libc::DT_DIR => EntryType::Directory,
            libc::DT_LNK => EntryType::Symlink,
            libc::DT_BLK => EntryType::BlockDevice,
            libc::DT_CHR => EntryType::CharDevice,
            libc::DT_REG => EntryType::Regular,
            libc::DT_FIFO => EntryType::Fifo,
            libc::DT_SOCK => EntryType::Socket,
            _ => EntryType::Unknown,
        }
    }
}

/// One entry: its name (never `.` or `..`, never containing `/` or NUL) and type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub name: OsString,
    pub entry_type: EntryType,
}

/// The kernel's records are 8-byte aligned within the buffer it fills.
#[repr(C, align(8))]
struct Buffer([u8; 16 * 1024]);

/// Where a `linux_dirent64` keeps its fields: inode (8 bytes), offset (8), record
/// length (2), type (1), then the NUL-terminated name.
const RECLEN_AT: usize = 16;
const TYPE_AT: usize = 18;
const NAME_AT: usize = 19;

/// Every entry of the directory open (for reading) at `dir`, from its start, but `.`
/// and `..`. The descriptor's position is rewound first, so a directory can be listed
/// again from the same descriptor; it is left at the end.
pub fn entries(dir: BorrowedFd<'_>) -> io::Result<Vec<DirEntry>> {
    rewind(dir)?;
    let mut buffer = Buffer([0; 16 * 1024]);
    let mut out = Vec::new();
    loop {
        let filled = getdents64(dir, &mut buffer.0)?;
        if filled == 0 {
            return Ok(out);
        }
        parse(&buffer.0[..filled], &mut out)?;
    }
}

fn rewind(dir: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: lseek takes a descriptor and two integers and touches no memory of ours.
    if unsafe { libc::lseek(dir.as_raw_fd(), 0, libc::SEEK_SET) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One `getdents64` call: how many bytes of records the kernel wrote into `buffer`.
fn getdents64(dir: BorrowedFd<'_>, buffer: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: the kernel writes at most `buffer.len()` bytes at `buffer`, which is
        // ours to overwrite for the length of the call.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                dir.as_raw_fd(),
                buffer.as_mut_ptr(),
                buffer.len(),
            )
        };
        if rc >= 0 {
            return Ok(rc as usize);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// The records in `bytes`, appended to `out`. A record that does not fit its own
/// length, or a name without its terminating NUL, is an error rather than a guess.
fn parse(mut bytes: &[u8], out: &mut Vec<DirEntry>) -> io::Result<()> {
    let malformed = || io::Error::new(io::ErrorKind::InvalidData, "malformed directory record");
    while !bytes.is_empty() {
        let reclen = match bytes.get(RECLEN_AT..RECLEN_AT + 2) {
            Some(b) => u16::from_ne_bytes([b[0], b[1]]) as usize,
            None => return Err(malformed()),
        };
        if reclen <= NAME_AT || reclen > bytes.len() {
            return Err(malformed());
        }
        let (record, rest) = bytes.split_at(reclen);
        let name_field = &record[NAME_AT..];
        let len = name_field
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(malformed)?;
        let name = &name_field[..len];
        if !name.is_empty() && name != b"." && name != b".." {
            out.push(DirEntry {
                name: OsString::from_vec(name.to_vec()),
                entry_type: EntryType::of(record[TYPE_AT]),
            });
        }
        bytes = rest;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::ffi::OsStrExt;

    fn tempdir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("stockade-dir-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn sorted_names(list: &[DirEntry]) -> Vec<Vec<u8>> {
        let mut names: Vec<Vec<u8>> = list.iter().map(|e| e.name.as_bytes().to_vec()).collect();
        names.sort();
        names
    }

    /// Thousands of entries with long and non-UTF-8 names (several buffers' worth), each
    /// listed once, against the names `ls -f` prints (an independent reader).
    #[test]
    fn lists_every_entry_once_as_ls_does() {
        let d = tempdir("many");
        let mut made: Vec<Vec<u8>> = Vec::new();
        for i in 0..1500 {
            let mut name = format!("entry-{i:04}-{}", "x".repeat(i % 200)).into_bytes();
            if i % 7 == 0 {
                name.push(0xff); // not UTF-8
            }
            std::fs::write(d.join(std::ffi::OsStr::from_bytes(&name)), b"").unwrap();
            made.push(name);
        }
        made.sort();
        let dir = std::fs::File::open(&d).unwrap();
        let list = entries(dir.as_fd()).unwrap();
        assert_eq!(sorted_names(&list), made);

        let ls = std::process::Command::new("ls")
            .args(["-f", "-1", "-A"])
            .arg(&d)
            .env("LC_ALL", "C")
            .output()
            .unwrap();
        let mut by_ls: Vec<Vec<u8>> = ls
            .stdout
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty() && *l != b"." && *l != b"..")
            .map(<[u8]>::to_vec)
            .collect();
        by_ls.sort();
        assert_eq!(by_ls, made);
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// Types come from the listing; `.` and `..` are left out; listing again from the
    /// same descriptor starts over.
    #[test]
    fn types_are_read_and_a_second_listing_starts_over() {
        let d = tempdir("types");
        std::fs::create_dir(d.join("dir")).unwrap();
        std::fs::write(d.join("file"), b"f").unwrap();
        std::os::unix::fs::symlink("dir", d.join("link")).unwrap();
        make_fifo(&d.join("fifo"));
        let dir = std::fs::File::open(&d).unwrap();
        for _ in 0..2 {
            let mut list = entries(dir.as_fd()).unwrap();
            list.sort_by(|a, b| a.name.cmp(&b.name));
            let got: Vec<(&str, EntryType)> = list
                .iter()
                .map(|e| (e.name.to_str().unwrap(), e.entry_type))
                .collect();
            // tmpfs and ext4 both report types; a filesystem that does not would say
            // Unknown, which callers resolve with fstatat.
            assert_eq!(
                got,
                vec![
                    ("dir", EntryType::Directory),
                    ("fifo", EntryType::Fifo),
                    ("file", EntryType::Regular),
                    ("link", EntryType::Symlink),
                ]
            );
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    fn make_fifo(path: &std::path::Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo reads the NUL-terminated path, which lives across the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    /// A descriptor that is not a readable directory is an error, not an empty listing.
    #[test]
    fn a_file_or_a_path_only_descriptor_is_an_error() {
        let d = tempdir("err");
        std::fs::write(d.join("file"), b"f").unwrap();
        let file = std::fs::File::open(d.join("file")).unwrap();
        assert!(entries(file.as_fd()).is_err());
        let c = std::ffi::CString::new(d.as_os_str().as_bytes()).unwrap();
        // SAFETY: open reads the NUL-terminated path; the descriptor is owned below.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        assert!(fd >= 0);
        // SAFETY: `fd` was just opened and is owned by nothing else.
        let path_only =
            unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        assert!(entries(path_only.as_fd()).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// Records that run past their buffer or lack a name's NUL are refused.
    #[test]
    fn malformed_records_are_refused() {
        let mut out = Vec::new();
        let mut record = vec![0u8; 24];
        record[RECLEN_AT..RECLEN_AT + 2].copy_from_slice(&24u16.to_ne_bytes());
        record[NAME_AT..NAME_AT + 3].copy_from_slice(b"abc");
        parse(&record, &mut out).unwrap();
        assert_eq!(out[0].name, "abc");
        // The record claims more than there is.
        record[RECLEN_AT..RECLEN_AT + 2].copy_from_slice(&32u16.to_ne_bytes());
        assert!(parse(&record, &mut out).is_err());
        // A record too short to hold a name.
        record[RECLEN_AT..RECLEN_AT + 2].copy_from_slice(&8u16.to_ne_bytes());
        assert!(parse(&record, &mut out).is_err());
        // No NUL within the record.
        let mut unterminated = vec![b'a'; 24];
        unterminated[RECLEN_AT..RECLEN_AT + 2].copy_from_slice(&24u16.to_ne_bytes());
        assert!(parse(&unterminated, &mut out).is_err());
    }
}
