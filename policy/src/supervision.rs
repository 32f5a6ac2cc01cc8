//! The decisions of the runner's metadata supervisor: where the namespace stage cannot
//! run (a container's default seccomp profile refuses `unshare`; `--no-stage`), the
//! runner's filter hands every mode, owner and time change to a supervisor process,
//! which finds the object the command's call would reach and asks here whether it may
//! change. Under the stage the runner starts it too when an inherited descriptor
//! reaches an object outside the roots that the stage's read-only mounts do not hold
//! (a file open for writing). Pure logic: the runner does the finding and the changing.
//!
//! The rule is the stage's: inside a writable root a command changes what it likes,
//! outside every one nothing, and on a protected path nothing either. Two differences,
//! both stricter: a writable root's own directory is the command's only when it is the
//! workspace (a shared root such as `/tmp` keeps its mode and owner, which the stage
//! could only put back afterwards), and a path beneath a protected directory is
//! protected too (the stage's read-only bind covers it the same way).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Where an object's path lies, for a metadata change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    /// Beneath the writable root at this index of the list given, by this relative path
    /// (empty for the root itself): the change may be made, once the supervisor has
    /// checked that the object found there without following links is the same.
    Inside { root: usize, beneath: PathBuf },
    /// On or beneath this protected path: refused.
    Protected(PathBuf),
    /// Outside every writable root (or a shared root's own directory): refused.
    Outside,
}

/// Where `path` (absolute, as the kernel names the object now) lies among `roots` (the
/// writable roots, canonical) and `protected` (canonical, each inside a root).
/// `workspace` is the one root whose own directory's metadata the command may change.
pub fn place(path: &Path, roots: &[PathBuf], workspace: &Path, protected: &[PathBuf]) -> Place {
    if let Some(p) = protected.iter().find(|p| path.starts_with(p)) {
        return Place::Protected(p.clone());
    }
    // The deepest root that holds it: a root nested in another is judged as itself.
    let holder = roots
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some((i, path.strip_prefix(r).ok()?)))
        .max_by_key(|(i, _)| roots[*i].components().count());
    match holder {
        Some((i, beneath)) if !beneath.as_os_str().is_empty() || roots[i] == workspace => {
            Place::Inside {
                root: i,
                beneath: beneath.to_path_buf(),
            }
        }
        _ => Place::Outside,
    }
}

/// What a supervised call does to a name, for the protected paths' rule without the
/// stage (the runner's supervisor receives every call that can write or replace a name
/// when the policy has protected paths and the stage does not run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameUse {
    /// Opening an existing object for writing or truncating it (`open`, `truncate`).
    Write,
    /// Making a new name (`mkdir`, `mknod`, `symlink`, the new name of `link`, a created
    /// file).
    Create,
    /// Taking a name away (`unlink`, `rmdir`, the old name of `rename`).
    Remove,
    /// The new name of `rename`, which replaces what is there.
    Replace,
    /// The object a hard link is made to.
    LinkFrom,
}

/// How the supervisor refuses a call on a protected name: the answers the stage's
/// mounts give the same call, so that a command sees one behaviour and the attribution
/// one set of words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `EROFS`: a write on or beneath a protected path (a read-only bind).
    ReadOnly,
    /// `EBUSY`: removing or replacing a protected path or a directory that holds one
    /// (the stage's bind and the pinned directories above it are mount points).
    Busy,
    /// `EEXIST`: making a name where a protected path is (it exists, and cannot stop
    /// existing while the command runs).
    Exists,
    /// `EXDEV`: a hard link to a protected file (another mount under the stage).
    CrossDevice,
}

/// Whether a call that does `how` to `path` (absolute, as the kernel names the
/// directory now, joined with the last component) is refused because of `protected`.
/// A directory between a writable root and a protected path is pinned: it can be
/// written in but not removed or replaced, as the stage pins it.
pub fn name_refusal(path: &Path, how: NameUse, protected: &[PathBuf]) -> Option<Refusal> {
    // A path that is itself protected answers as one even when it lies beneath another
    // (a default name in a root that is itself inside a protected directory): the stage's
    // mount on it is the topmost, whatever order the list has.
    if protected.iter().any(|p| path == p) {
        return Some(match how {
            NameUse::Write => Refusal::ReadOnly,
            NameUse::Create => Refusal::Exists,
            NameUse::Remove | NameUse::Replace => Refusal::Busy,
            NameUse::LinkFrom => Refusal::CrossDevice,
        });
    }
    if protected.iter().any(|p| path.starts_with(p)) {
        return Some(match how {
            NameUse::LinkFrom => Refusal::CrossDevice,
            _ => Refusal::ReadOnly,
        });
    }
    let pinned = protected.iter().any(|p| p.starts_with(path));
    match how {
        NameUse::Remove | NameUse::Replace if pinned => Some(Refusal::Busy),
        _ => None,
    }
}

/// The descriptor a path names through `/proc` or `/dev/fd` (`/proc/self/fd/3`,
/// `/proc/thread-self/fd/3`, `/proc/PID/fd/3` of the caller itself, `/dev/fd/3`,
/// `/dev/stdin`...): such a path reaches the object the descriptor holds, whatever its
/// name, and the supervisor's own `/proc/self` is not the command's. `pid` is the
/// calling process's (thread group's) id, `tid` its thread's.
pub fn descriptor_path(path: &[u8], pid: u32, tid: u32) -> Option<i32> {
    let text = std::str::from_utf8(path).ok()?;
    match text {
        "/dev/stdin" => return Some(0),
        "/dev/stdout" => return Some(1),
        "/dev/stderr" => return Some(2),
        _ => {}
    }
    let rest = text
        .strip_prefix("/dev/fd/")
        .or_else(|| text.strip_prefix("/proc/self/fd/"))
        .or_else(|| text.strip_prefix("/proc/thread-self/fd/"))
        .or_else(|| {
            let after = text.strip_prefix("/proc/")?;
            let (id, rest) = after.split_once('/')?;
            let id: u32 = id.parse().ok()?;
            if id == pid {
                rest.strip_prefix("fd/").or_else(|| {
                    let (task, rest) = rest.strip_prefix("task/")?.split_once('/')?;
                    (task.parse::<u32>().ok()? == tid)
                        .then_some(rest)?
                        .strip_prefix("fd/")
                })
            } else if id == tid {
                rest.strip_prefix("fd/")
            } else {
                None
            }
        })?;
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    rest.parse().ok()
}

/// Whether a path the kernel reports for a descriptor (`readlink /proc/self/fd/N`)
/// names something in the filesystem: pipes, sockets and anonymous inodes read as
/// `pipe:[...]`, `socket:[...]`, `anon_inode:...`, which belong to their holders alone.
pub fn names_a_file(link: &OsStr) -> bool {
    link.as_bytes().first() == Some(&b'/')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots() -> Vec<PathBuf> {
        vec!["/work/ws".into(), "/tmp".into(), "/work/ws/nested".into()]
    }

    #[test]
    fn inside_a_root_is_allowed_outside_and_protected_are_not() {
        let ws = Path::new("/work/ws");
        let protected = vec![PathBuf::from("/work/ws/.git/hooks")];
        let place = |p: &str| place(Path::new(p), &roots(), ws, &protected);
        assert_eq!(
            place("/work/ws/src/a.rs"),
            Place::Inside {
                root: 0,
                beneath: "src/a.rs".into()
            }
        );
        // The workspace's own directory is the command's; a shared root's is not.
        assert_eq!(
            place("/work/ws"),
            Place::Inside {
                root: 0,
                beneath: "".into()
            }
        );
        assert_eq!(place("/tmp"), Place::Outside);
        assert_eq!(
            place("/tmp/x"),
            Place::Inside {
                root: 1,
                beneath: "x".into()
            }
        );
        // The deepest root holds it.
        assert_eq!(
            place("/work/ws/nested/y"),
            Place::Inside {
                root: 2,
                beneath: "y".into()
            }
        );
        assert_eq!(place("/work/wsx/y"), Place::Outside);
        assert_eq!(place("/etc/passwd"), Place::Outside);
        assert_eq!(place("/"), Place::Outside);
        for p in ["/work/ws/.git/hooks", "/work/ws/.git/hooks/pre-commit"] {
            assert_eq!(
                place(p),
                Place::Protected("/work/ws/.git/hooks".into()),
                "{p}"
            );
        }
        assert!(matches!(
            place("/work/ws/.git/hooksx"),
            Place::Inside { .. }
        ));
    }

    #[test]
    fn protected_names_are_refused_as_the_stage_refuses_them() {
        let protected = vec![
            PathBuf::from("/w/.git/hooks"),
            PathBuf::from("/w/.git/config"),
        ];
        let r = |p: &str, how| name_refusal(Path::new(p), how, &protected);
        use NameUse::*;
        assert_eq!(r("/w/.git/config", Write), Some(Refusal::ReadOnly));
        assert_eq!(r("/w/.git/config", Replace), Some(Refusal::Busy));
        assert_eq!(r("/w/.git/config", Remove), Some(Refusal::Busy));
        assert_eq!(r("/w/.git/config", Create), Some(Refusal::Exists));
        assert_eq!(r("/w/.git/config", LinkFrom), Some(Refusal::CrossDevice));
        assert_eq!(
            r("/w/.git/hooks/pre-commit", Create),
            Some(Refusal::ReadOnly)
        );
        assert_eq!(r("/w/.git/hooks/x", Remove), Some(Refusal::ReadOnly));
        // The pinned directories above: written in, never removed or replaced.
        assert_eq!(r("/w/.git", Remove), Some(Refusal::Busy));
        assert_eq!(r("/w/.git", Replace), Some(Refusal::Busy));
        assert_eq!(r("/w", Remove), Some(Refusal::Busy));
        // Protected itself and beneath another protected path, in either order.
        for list in [
            vec![
                PathBuf::from("/w/.git/hooks"),
                "/w/.git/hooks/.profile".into(),
            ],
            vec![
                PathBuf::from("/w/.git/hooks/.profile"),
                "/w/.git/hooks".into(),
            ],
        ] {
            let r = |p: &str, how| name_refusal(Path::new(p), how, &list);
            assert_eq!(r("/w/.git/hooks/.profile", Remove), Some(Refusal::Busy));
            assert_eq!(r("/w/.git/hooks/other", Remove), Some(Refusal::ReadOnly));
        }
        assert_eq!(r("/w/.git", Write), None);
        // Beside them: the command's.
        for how in [Write, Create, Remove, Replace, LinkFrom] {
            assert_eq!(r("/w/.git/config.lock", how), None);
            assert_eq!(r("/w/.git/index", how), None);
            assert_eq!(r("/w/.git/hooksx", how), None);
        }
    }

    #[test]
    fn descriptor_paths_of_the_caller_are_recognised_and_no_other() {
        let d = |p: &str| descriptor_path(p.as_bytes(), 100, 101);
        assert_eq!(d("/proc/self/fd/3"), Some(3));
        assert_eq!(d("/proc/thread-self/fd/12"), Some(12));
        assert_eq!(d("/proc/100/fd/4"), Some(4));
        assert_eq!(d("/proc/101/fd/4"), Some(4));
        assert_eq!(d("/proc/100/task/101/fd/5"), Some(5));
        assert_eq!(d("/dev/fd/0"), Some(0));
        assert_eq!(d("/dev/stderr"), Some(2));
        for other in [
            "/proc/99/fd/3",
            "/proc/self/fd/",
            "/proc/self/fd/x",
            "/proc/self/fd/3/x",
            "/proc/self/fd/3/",
            "/proc/100/task/99/fd/5",
            "/proc/self/cwd",
            "/proc/self/fd/-1",
            "relative/fd/3",
        ] {
            assert_eq!(d(other), None, "{other}");
        }
    }

    #[test]
    fn only_absolute_links_name_files() {
        assert!(names_a_file(OsStr::new("/work/ws/a")));
        assert!(!names_a_file(OsStr::new("pipe:[1234]")));
        assert!(!names_a_file(OsStr::new("anon_inode:[eventfd]")));
    }
}
