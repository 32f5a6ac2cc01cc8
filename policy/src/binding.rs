//! Binding: the executable and the working directory of a command, pinned down when it
//! is confined and checked again just before it starts.
//!
//! An approval is given for an exact command. Between `confine` and the moment the
//! executor spawns the argv, an earlier command (which may write the workspace) can swap
//! the program for another file at the same path, rewrite it in place, plant a program
//! of the same name in an earlier `PATH` directory, or remove the workspace and create a
//! new one under the same name. So `confine` resolves `argv[0]` with the rule below and
//! records what it found ([`Binding`]); the runner resolves it again with the same rule,
//! immediately before it executes, and refuses to run anything when the two differ
//! ([`Drift`]).
//!
//! # The resolution rule
//!
//! [`resolve`] is the one rule both binaries use (each does its own I/O through a probe):
//! a name containing `/` is the only candidate (relative to the working directory);
//! otherwise each entry of the `PATH` the command will get ([`DEFAULT_PATH`] when it has
//! none), an empty entry meaning the working directory, joined with the name. The first
//! candidate that is a regular file with an execute bit (for anyone) is the program.
//! Missing candidates are skipped; candidates that exist but cannot be executed (a
//! directory, a file without execute bits, a directory on the way that cannot be
//! searched) are skipped and remembered, so that "found but not executable" (126) wins
//! over "not found" (127); any other error ends the search, as it ends `execvp`'s.
//!
//! The execute-bit test, rather than `access(X_OK)`, keeps the answer independent of
//! capabilities: the runner drops its capabilities (all but those `--keep-capability`
//! keeps) before it resolves, and root without them may not execute what root with them
//! may. A file the caller may not execute after
//! all is found, bound, and then fails to execute (126), instead of the search moving on
//! to another file nobody approved.
//!
//! # Identity
//!
//! An executable is identified by device, inode, size, modification time and status
//! change time ([`ExecId`]). The status change time catches a file rewritten in place
//! whose owner set the modification time back (`touch -d`): no call sets it but the
//! clock. With `--bind-executable-hash` the SHA-256 of the file's content is bound too
//! (files up to [`MAX_HASHED_BYTES`]). A working directory is identified by device, inode
//! and birth time ([`FileId`], as writable roots are).

use crate::roots::FileId;
use serde::{Deserialize, Serialize};
use std::ffi::OsStr;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The search path when the command's environment has no `PATH`.
pub const DEFAULT_PATH: &str = "/usr/bin:/bin";

/// The flag that binds the executable's content as well as its identity.
pub const HASH_FLAG: &str = "--bind-executable-hash";

/// The largest executable whose content is hashed (256 MiB): larger than any program one
/// runs by name, small enough that hashing it twice costs at most about a second.
pub const MAX_HASHED_BYTES: u64 = 256 << 20;

/// A file time: seconds and nanoseconds since the epoch.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timestamp {
    pub sec: i64,
    pub nsec: u32,
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:09}", self.sec, self.nsec)
    }
}

/// What identifies an executable file.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecId {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    /// Modification time.
    pub modified: Timestamp,
    /// Status change time (any write, chmod, link or rename sets it to now).
    pub changed: Timestamp,
}

/// Which part of an executable's identity differs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Difference {
    /// Another file: its device or inode differs.
    OtherFile,
    Size,
    Modified,
    Changed,
}

impl ExecId {
    /// The first difference between `self` (as bound) and `now`, if any.
    pub fn difference(&self, now: &ExecId) -> Option<Difference> {
        if (self.dev, self.ino) != (now.dev, now.ino) {
            Some(Difference::OtherFile)
        } else if self.size != now.size {
            Some(Difference::Size)
        } else if self.modified != now.modified {
            Some(Difference::Modified)
        } else if self.changed != now.changed {
            Some(Difference::Changed)
        } else {
            None
        }
    }
}

impl fmt::Display for ExecId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "device {} inode {}, {} bytes, modified {}, changed {}",
            self.dev, self.ino, self.size, self.modified, self.changed
        )
    }
}

/// The file `argv[0]` resolved to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Executable {
    /// The candidate that was chosen, made absolute with the working directory `confine`
    /// resolved in (shown in messages and receipts; only the identity is compared).
    #[serde(with = "crate::raw")]
    pub path: PathBuf,
    pub id: ExecId,
    /// The SHA-256 of the content, with `--bind-executable-hash`.
    pub sha256: Option<[u8; 32]>,
}

/// What `argv[0]` resolved to when the command was confined.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExecBinding {
    Found(Executable),
    /// Nothing: the runner reports "command not found" (127), unless something appeared.
    NotFound,
    /// Only candidates that cannot be executed: the runner reports 126, unless an
    /// executable file appeared.
    NotExecutable,
}

/// The working directory the command starts in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CwdBinding {
    /// The request's `cwd`, as the directory it named when confined.
    Bound {
        #[serde(with = "crate::raw")]
        path: PathBuf,
        id: FileId,
    },
    /// Taken from whoever spawns the runner (`--inherit-cwd`): the executor chooses it
    /// when it spawns, after `confine`, so there is nothing to bind. The executable
    /// binding still holds (a relative name must lead to the same file from there).
    Inherited,
}

/// Everything bound when a command is confined.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    pub executable: ExecBinding,
    pub cwd: CwdBinding,
}

/// What a look at one candidate found.
#[derive(Debug)]
pub enum Probe<T> {
    /// Nothing there: look further.
    Missing,
    /// Something that cannot be executed: remember it and look further.
    NotExecutable,
    /// A regular file with an execute bit.
    Found(T),
    /// Any other error (its errno): the search ends here.
    Failed(i32),
}

// The errno values the rule tells apart (asm-generic, shared by x86_64 and aarch64; the
// runner checks them against libc's in a unit test). Kept here so that this crate stays
// free of libc.
pub const ENOENT: i32 = 2;
pub const EACCES: i32 = 13;
pub const ENODEV: i32 = 19;
pub const ENOTDIR: i32 = 20;
pub const ETIMEDOUT: i32 = 110;
pub const ESTALE: i32 = 116;

impl<T> Probe<T> {
    /// What opening a candidate failing with `errno` means for the search: the same
    /// errors `execvp` passes over are missing candidates, EACCES one it remembers.
    pub fn of_open_error(errno: i32) -> Probe<T> {
        match errno {
            ENOENT | ENOTDIR | ESTALE | ENODEV | ETIMEDOUT => Probe::Missing,
            EACCES => Probe::NotExecutable,
            other => Probe::Failed(other),
        }
    }

    /// What an opened candidate with file mode `mode` (`st_mode`) is: found when it is a
    /// regular file with any execute bit.
    pub fn of_mode(mode: u32, file: T) -> Probe<T> {
        const S_IFMT: u32 = 0o170000;
        const S_IFREG: u32 = 0o100000;
        if mode & S_IFMT == S_IFREG && mode & 0o111 != 0 {
            Probe::Found(file)
        } else {
            Probe::NotExecutable
        }
    }
}

/// Where the search for a program ended.
#[derive(Debug)]
pub enum Resolved<T> {
    Found {
        /// The candidate as tried (relative to the working directory when relative).
        path: PathBuf,
        file: T,
    },
    NotFound,
    /// Only candidates that cannot be executed (EACCES), or the error that ended the
    /// search.
    NotExecutable {
        errno: i32,
    },
}

/// The places the runner looks for `program`, in order (see the module docs).
pub fn candidates(program: &OsStr, search_path: Option<&OsStr>) -> Vec<PathBuf> {
    if program.is_empty() {
        return Vec::new();
    }
    if program.as_bytes().contains(&b'/') {
        return vec![PathBuf::from(program)];
    }
    let search = search_path.unwrap_or(OsStr::new(DEFAULT_PATH));
    search
        .as_bytes()
        .split(|&b| b == b':')
        .map(|dir| {
            // An empty entry means the working directory, as for execvp.
            let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
            let mut path = Vec::with_capacity(dir.len() + 1 + program.len());
            path.extend_from_slice(dir);
            path.push(b'/');
            path.extend_from_slice(program.as_bytes());
            PathBuf::from(OsStr::from_bytes(&path))
        })
        .collect()
}

/// The first four bytes of a file the kernel executes itself.
pub const ELF_MAGIC: [u8; 4] = *b"\x7fELF";

/// Whether a found executable whose first four bytes are `header` (`None`: it has fewer)
/// is started by name: anything but an ELF binary goes to an interpreter (the `#!` line's,
/// or `/bin/sh` for a file of no known format), which opens it again by its path after
/// `execve`, whatever descriptor it was checked on. What such an interpreter reads is
/// then not proven to be the file checked (the receipt's `bindingUnverifiable`).
pub fn started_by_name(header: Option<[u8; 4]>) -> bool {
    header != Some(ELF_MAGIC)
}

/// Resolves `program` over `search_path` (the command's `PATH`), looking at each
/// candidate with `probe`.
pub fn resolve<T>(
    program: &OsStr,
    search_path: Option<&OsStr>,
    mut probe: impl FnMut(&Path) -> Probe<T>,
) -> Resolved<T> {
    let mut not_executable = false;
    for path in candidates(program, search_path) {
        match probe(&path) {
            Probe::Missing => {}
            Probe::NotExecutable => not_executable = true,
            Probe::Found(file) => return Resolved::Found { path, file },
            Probe::Failed(errno) => return Resolved::NotExecutable { errno },
        }
    }
    if not_executable {
        Resolved::NotExecutable { errno: EACCES }
    } else {
        Resolved::NotFound
    }
}

/// What the runner (or the launcher) found now, for comparison with the binding.
#[derive(Copy, Clone, Debug)]
pub enum Seen<'a> {
    Found { path: &'a Path, id: &'a ExecId },
    NotFound,
    NotExecutable,
}

impl<T> Resolved<T> {
    /// The facts to compare, with `id` giving the identity of a found file.
    pub fn seen<'a>(&'a self, id: impl FnOnce(&'a T) -> &'a ExecId) -> Seen<'a> {
        match self {
            Resolved::Found { path, file } => Seen::Found { path, id: id(file) },
            Resolved::NotFound => Seen::NotFound,
            Resolved::NotExecutable { .. } => Seen::NotExecutable,
        }
    }
}

/// How what runs would differ from what was bound: the runner's refusal, one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Drift {
    /// `argv[0]` now leads to another file, to a file where there was none, or to none
    /// where there was one.
    Executable {
        program: String,
        then: String,
        now: String,
    },
    /// The same path leads to the same inode, changed: `what` differs.
    ExecutableChanged {
        path: PathBuf,
        what: Difference,
        then: Box<ExecId>,
        now: Box<ExecId>,
    },
    /// Identity unchanged, content not (`--bind-executable-hash`).
    Content {
        path: PathBuf,
        then: [u8; 32],
        now: [u8; 32],
    },
    /// The working directory's path leads to another directory.
    Cwd {
        path: PathBuf,
        then: FileId,
        now: FileId,
    },
}

fn describe_found(path: &Path, id: &ExecId) -> String {
    format!("{} (device {} inode {})", path.display(), id.dev, id.ino)
}

fn describe_dir(id: &FileId) -> String {
    let born = match id.birth {
        Some((sec, nsec)) => format!(", born {sec}.{nsec:09}"),
        None => String::new(),
    };
    format!("device {} inode {}{born}", id.dev, id.ino)
}

impl fmt::Display for Drift {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const AGAIN: &str =
            "nothing was run (confine the command again to approve what is there now)";
        match self {
            Drift::Executable { program, then, now } => write!(
                f,
                "the executable changed since the command was confined: {program} resolved to {then} then and resolves to {now} now; {AGAIN}"
            ),
            Drift::ExecutableChanged {
                path,
                what,
                then,
                now,
            } => {
                let what = match what {
                    Difference::OtherFile => "it is another file",
                    Difference::Size => "its size differs",
                    Difference::Modified => "its modification time differs",
                    Difference::Changed => {
                        "its status change time differs (written, or its mode or links changed)"
                    }
                };
                write!(
                    f,
                    "the executable {} changed since the command was confined: {what} ({then} then; {now} now); {AGAIN}",
                    path.display()
                )
            }
            Drift::Content { path, then, now } => write!(
                f,
                "the executable {} changed since the command was confined: its content differs (SHA-256 {} then, {} now); {AGAIN}",
                path.display(),
                crate::digest::hex(then),
                crate::digest::hex(now)
            ),
            Drift::Cwd { path, then, now } => write!(
                f,
                "the working directory {} was replaced since the command was confined: it leads to another directory ({} then; {} now); {AGAIN}",
                path.display(),
                describe_dir(then),
                describe_dir(now)
            ),
        }
    }
}

impl ExecBinding {
    fn describe(&self) -> String {
        match self {
            ExecBinding::Found(e) => describe_found(&e.path, &e.id),
            ExecBinding::NotFound => "nothing (not found)".into(),
            ExecBinding::NotExecutable => "no file that can be executed".into(),
        }
    }

    /// Compares what `program` resolves to now (`seen`) with the binding. The content
    /// hash, when bound, is compared separately ([`Executable::check_content`]): it needs
    /// the file read, which only a found file allows.
    pub fn check(&self, program: &OsStr, seen: Seen<'_>) -> Result<(), Drift> {
        let drift = |now: String| Drift::Executable {
            program: program.to_string_lossy().into_owned(),
            then: self.describe(),
            now,
        };
        match (self, seen) {
            (ExecBinding::NotFound, Seen::NotFound)
            | (ExecBinding::NotExecutable, Seen::NotExecutable) => Ok(()),
            (ExecBinding::Found(bound), Seen::Found { path, id }) => {
                match bound.id.difference(id) {
                    None => Ok(()),
                    Some(Difference::OtherFile) => Err(drift(describe_found(path, id))),
                    Some(what) => Err(Drift::ExecutableChanged {
                        path: path.to_path_buf(),
                        what,
                        then: Box::new(bound.id),
                        now: Box::new(*id),
                    }),
                }
            }
            (_, Seen::Found { path, id }) => Err(drift(describe_found(path, id))),
            (_, Seen::NotFound) => Err(drift("nothing (not found)".into())),
            (_, Seen::NotExecutable) => Err(drift("no file that can be executed".into())),
        }
    }
}

impl Executable {
    /// Compares the content's digest `now` with the bound one, when one was bound.
    pub fn check_content(&self, path: &Path, now: &[u8; 32]) -> Result<(), Drift> {
        match &self.sha256 {
            Some(then) if !crate::digest::same(then, now) => Err(Drift::Content {
                path: path.to_path_buf(),
                then: *then,
                now: *now,
            }),
            _ => Ok(()),
        }
    }
}

impl CwdBinding {
    /// Compares the directory the command is in now (`now`, with a birth time only when
    /// the filesystem reports one) with the binding.
    pub fn check(&self, now: FileId) -> Result<(), Drift> {
        let CwdBinding::Bound { path, id } = self else {
            return Ok(());
        };
        // A birth time is compared only when one was recorded, as for writable roots.
        let now = FileId {
            birth: id.birth.and(now.birth),
            ..now
        };
        if now == *id {
            return Ok(());
        }
        Err(Drift::Cwd {
            path: path.clone(),
            then: *id,
            now,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ino: u64) -> ExecId {
        ExecId {
            dev: 8,
            ino,
            size: 100,
            modified: Timestamp { sec: 10, nsec: 1 },
            changed: Timestamp { sec: 10, nsec: 2 },
        }
    }

    #[test]
    fn candidates_follow_execvp() {
        let c = |p: &str, path: Option<&str>| {
            candidates(OsStr::new(p), path.map(OsStr::new))
                .into_iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(c("ls", None), ["/usr/bin/ls", "/bin/ls"]);
        assert_eq!(c("ls", Some("/a::b")), ["/a/ls", "./ls", "b/ls"]);
        assert_eq!(c("ls", Some("")), ["./ls"]);
        assert_eq!(c("./x", Some("/a")), ["./x"]);
        assert_eq!(c("/bin/sh", Some("/a")), ["/bin/sh"]);
        assert!(c("", Some("/a")).is_empty());
    }

    #[test]
    fn the_search_skips_missing_remembers_unexecutable_and_stops_on_other_errors() {
        let run = |probes: Vec<Probe<u32>>| {
            let mut probes = probes.into_iter();
            resolve(OsStr::new("p"), Some(OsStr::new("/a:/b:/c")), |_| {
                probes.next().unwrap_or(Probe::Missing)
            })
        };
        let found = run(vec![Probe::Missing, Probe::NotExecutable, Probe::Found(7)]);
        assert!(
            matches!(&found, Resolved::Found { path, file: 7 } if path == Path::new("/c/p")),
            "{found:?}"
        );
        assert!(matches!(
            run(vec![Probe::Missing, Probe::NotExecutable, Probe::Missing]),
            Resolved::NotExecutable { errno: EACCES }
        ));
        assert!(matches!(run(vec![]), Resolved::NotFound));
        assert!(matches!(
            run(vec![Probe::Failed(40), Probe::Found(1)]),
            Resolved::NotExecutable { errno: 40 }
        ));
    }

    #[test]
    fn errors_and_modes_are_read_as_execvp_would() {
        for e in [ENOENT, ENOTDIR, ESTALE, ENODEV, ETIMEDOUT] {
            assert!(matches!(Probe::<()>::of_open_error(e), Probe::Missing));
        }
        assert!(matches!(
            Probe::<()>::of_open_error(EACCES),
            Probe::NotExecutable
        ));
        assert!(matches!(Probe::<()>::of_open_error(40), Probe::Failed(40)));
        assert!(matches!(Probe::of_mode(0o100755, ()), Probe::Found(())));
        // One execute bit for anyone is enough: capabilities decide the rest.
        assert!(matches!(Probe::of_mode(0o100001, ()), Probe::Found(())));
        assert!(matches!(Probe::of_mode(0o100644, ()), Probe::NotExecutable));
        assert!(matches!(Probe::of_mode(0o040755, ()), Probe::NotExecutable));
        assert!(matches!(Probe::of_mode(0o020777, ()), Probe::NotExecutable));
    }

    #[test]
    fn each_drift_names_what_changed() {
        let bound = ExecBinding::Found(Executable {
            path: "/usr/bin/tool".into(),
            id: id(5),
            sha256: Some([1; 32]),
        });
        let p = OsStr::new("tool");
        let here = Path::new("/usr/bin/tool");
        assert_eq!(
            bound.check(
                p,
                Seen::Found {
                    path: here,
                    id: &id(5)
                }
            ),
            Ok(())
        );
        // Found through another path, the same file: fine.
        assert_eq!(
            bound.check(
                p,
                Seen::Found {
                    path: Path::new("/bin/tool"),
                    id: &id(5)
                }
            ),
            Ok(())
        );
        let other = bound
            .check(
                p,
                Seen::Found {
                    path: Path::new("/ws/bin/tool"),
                    id: &id(6),
                },
            )
            .unwrap_err();
        let text = other.to_string();
        assert!(
            text.contains("/usr/bin/tool (device 8 inode 5)")
                && text.contains("/ws/bin/tool (device 8 inode 6)"),
            "{text}"
        );
        let mut touched = id(5);
        touched.changed.sec += 1;
        let e = bound
            .check(
                p,
                Seen::Found {
                    path: here,
                    id: &touched,
                },
            )
            .unwrap_err();
        assert!(e.to_string().contains("status change time"), "{e}");
        let mut grown = id(5);
        grown.size += 1;
        assert!(matches!(
            bound.check(
                p,
                Seen::Found {
                    path: here,
                    id: &grown
                }
            ),
            Err(Drift::ExecutableChanged {
                what: Difference::Size,
                ..
            })
        ));
        let gone = bound.check(p, Seen::NotFound).unwrap_err().to_string();
        assert!(
            gone.contains("resolves to nothing (not found) now"),
            "{gone}"
        );
        let appeared = ExecBinding::NotFound
            .check(
                p,
                Seen::Found {
                    path: here,
                    id: &id(5),
                },
            )
            .unwrap_err()
            .to_string();
        assert!(
            appeared.contains("nothing (not found) then") && appeared.contains("/usr/bin/tool"),
            "{appeared}"
        );
        assert_eq!(ExecBinding::NotFound.check(p, Seen::NotFound), Ok(()));
        assert_eq!(
            ExecBinding::NotExecutable.check(p, Seen::NotExecutable),
            Ok(())
        );
        let ExecBinding::Found(e) = &bound else {
            unreachable!()
        };
        assert_eq!(e.check_content(here, &[1; 32]), Ok(()));
        let changed = e.check_content(here, &[2; 32]).unwrap_err().to_string();
        assert!(changed.contains("content differs"), "{changed}");
    }

    #[test]
    fn a_replaced_directory_is_drift_and_inheritance_binds_none() {
        let then = FileId {
            dev: 8,
            ino: 10,
            birth: Some((100, 5)),
        };
        let bound = CwdBinding::Bound {
            path: "/ws".into(),
            id: then,
        };
        assert_eq!(bound.check(then), Ok(()));
        // The inode number came back, the birth time did not.
        let reborn = FileId {
            birth: Some((200, 0)),
            ..then
        };
        let e = bound.check(reborn).unwrap_err().to_string();
        assert!(
            e.contains("/ws was replaced") && e.contains("born 200."),
            "{e}"
        );
        // No birth time recorded: device and inode decide.
        let no_birth = CwdBinding::Bound {
            path: "/ws".into(),
            id: FileId {
                birth: None,
                ..then
            },
        };
        assert_eq!(no_birth.check(reborn), Ok(()));
        assert!(no_birth.check(FileId { ino: 11, ..then }).is_err());
        assert_eq!(CwdBinding::Inherited.check(reborn), Ok(()));
    }
}
