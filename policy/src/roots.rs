//! What a writable root may be, and how one is pinned down.
//!
//! Three rules live here, all applied by [`crate::PolicyRequest::resolve`]:
//!
//! - **Broad roots.** A writable root that is `/`, the invoking user's home directory or
//!   an ancestor of either makes `workspace-write` meaningless (`~/.bashrc`, `/etc`), so
//!   it is refused unless the caller passes `--allow-broad-root`. The home is taken both
//!   from the passwd database (for the real uid) and from `$HOME`: either can be the one
//!   a shell start-up file is read from, and refusing both costs nothing.
//! - **Implicit roots.** `$TMPDIR` is the target's preference, not something the caller
//!   asked to be writable. It is granted only when it is safe as it stands (see
//!   [`check_implicit_tmpdir`]); otherwise it is left out and the reason reported.
//! - **Identity.** Each writable root is granted as the directory the path named when
//!   the policy was resolved: its device and inode ([`RootId`]) travel in the launch
//!   request, and the runner opens the path without following links and refuses to run
//!   when it now leads to another directory.

use std::ffi::OsString;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// The flag that lets a caller grant a broad root on purpose.
pub const ALLOW_BROAD_ROOT_FLAG: &str = "--allow-broad-root";

/// Who runs the command: decides which roots are too broad, where an implicit
/// `$TMPDIR` may live, and the default hidden set ([`crate::hidden`]). The launcher fills
/// it in once; [`crate::PolicyRequest::resolve`] takes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Invoker {
    /// The real uid.
    pub uid: u32,
    /// The invoking user's home directories, canonical: from the passwd database and
    /// from `$HOME` (deduplicated; either may be missing).
    pub homes: Vec<PathBuf>,
    /// `/run/user/UID` style runtime directory of the user, when it exists (canonical):
    /// one of the places an implicit `$TMPDIR` may live.
    pub runtime_dir: Option<PathBuf>,
    /// stockade's control base directories (requests, status and spill files), where
    /// they may be: hidden always, even without the default hidden set.
    pub control_bases: Vec<PathBuf>,
    /// The capabilities the invoking process holds (its permitted set, bit N being
    /// capability N): only those can be kept with `--keep-capability`. None for an
    /// ordinary user.
    pub capabilities: u64,
    /// The invoking process's variables that move credential stores
    /// ([`crate::credentials::variables`]), as (name, value): where the stores they name
    /// are hidden.
    pub store_variables: Vec<(OsString, OsString)>,
    /// Every other user's control bases that exist: hidden from a command that keeps a
    /// capability reading past file modes (`CAP_DAC_OVERRIDE`, `CAP_DAC_READ_SEARCH`), for
    /// which their 0700 modes mean nothing. The launcher looks for them only for such a
    /// command (empty otherwise: nothing else reads them).
    pub other_control_bases: Vec<PathBuf>,
    /// The system's credential files ([`crate::hidden::ROOT_SECRETS`]) that an invoker
    /// other than root can read (a member of the `shadow` group), found by the launcher:
    /// hidden by default as they are from root.
    pub readable_root_secrets: Vec<PathBuf>,
}

impl Invoker {
    /// An invoker from raw facts: `passwd_home` and `env_home` are canonicalised, and
    /// ignored when they are not absolute or do not exist.
    pub fn new(uid: u32, passwd_home: Option<&Path>, env_home: Option<&Path>) -> Invoker {
        let mut homes: Vec<PathBuf> = Vec::new();
        for home in [passwd_home, env_home].into_iter().flatten() {
            if let Some(c) = home
                .is_absolute()
                .then(|| home.canonicalize().ok())
                .flatten()
                && !homes.contains(&c)
            {
                homes.push(c);
            }
        }
        let runtime_dir = PathBuf::from(format!("/run/user/{uid}"))
            .canonicalize()
            .ok();
        Invoker {
            uid,
            homes,
            runtime_dir,
            control_bases: Vec::new(),
            capabilities: 0,
            store_variables: Vec::new(),
            other_control_bases: Vec::new(),
            readable_root_secrets: Vec::new(),
        }
    }
}

/// The home directory of `uid` in the text of `/etc/passwd` (the sixth field of the
/// first line whose third field is `uid`). Read directly, not through NSS: the binaries
/// are static and never load NSS modules.
pub fn home_from_passwd(passwd: &str, uid: u32) -> Option<PathBuf> {
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.len() >= 7 && fields[2].parse::<u32>().ok() == Some(uid) && !fields[5].is_empty())
            .then(|| PathBuf::from(fields[5]))
    })
}

/// The private group of `uid` in the text of `/etc/passwd` and `/etc/group`: its primary
/// group, when no other account in `passwd` has that group as its primary one and
/// `group` lists no member but the user. A file or directory writable by such a group
/// is writable by nobody else, so it is no way for another user in (a user private
/// group, as `umask 002` systems give every account). `None` when the user has no
/// `passwd` entry or the group is shared. Read directly, not through NSS (the binaries
/// are static): a group that only a network directory defines is judged by the local
/// files alone.
pub fn private_group(passwd: &str, group: &str, uid: u32) -> Option<u32> {
    let entries = || {
        passwd.lines().filter_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            let uid = fields.get(2)?.parse::<u32>().ok()?;
            let gid = fields.get(3)?.parse::<u32>().ok()?;
            Some((fields[0], uid, gid))
        })
    };
    let (name, _, gid) = entries().find(|&(_, u, _)| u == uid)?;
    if entries().any(|(_, u, g)| g == gid && u != uid) {
        return None;
    }
    for line in group.lines() {
        let fields: Vec<&str> = line.split(':').collect();
        if fields.get(2).and_then(|g| g.parse::<u32>().ok()) != Some(gid) {
            continue;
        }
        let members = fields.get(3).copied().unwrap_or("");
        if members.split(',').any(|m| !m.is_empty() && m != name) {
            return None;
        }
    }
    Some(gid)
}

/// The kernel's own interfaces, mounted as trees of files: a write there is no file
/// effect but a change to the running kernel or its devices. As root (which owns these
/// nodes and needs no capability for most of them) `kernel.core_pattern` names a program
/// the kernel then runs as root outside every sandbox, and a block device is the raw
/// bytes of a filesystem. `/dev/shm` is an ordinary tmpfs and not among them.
const KERNEL_TREES: &[&str] = &["/proc", "/sys", "/dev"];
const NOT_KERNEL_TREES: &[&str] = &["/dev/shm"];

/// Why a root is too broad (or no place for files) to be writable, when it is.
pub fn broad_reason(root: &Path, homes: &[PathBuf]) -> Option<String> {
    if root == Path::new("/") {
        return Some("it is / itself: the whole filesystem would be writable".into());
    }
    if let Some(tree) = KERNEL_TREES.iter().find(|t| root.starts_with(t))
        && !NOT_KERNEL_TREES.iter().any(|t| root.starts_with(t))
    {
        return Some(format!(
            "it lies in {tree}, the kernel's own interface, not a directory of files: a write there changes the running kernel or a device (as root, /proc/sys/kernel/core_pattern names a program the kernel runs as root outside the sandbox)"
        ));
    }
    for home in homes {
        if root == home {
            return Some(format!(
                "it is the home directory {}: shell start-up files and credentials would be writable",
                home.display()
            ));
        }
        if home.starts_with(root) {
            return Some(format!("it contains the home directory {}", home.display()));
        }
    }
    None
}

/// The identity of a directory: what a path must still lead to when the runner opens it.
///
/// Device and inode alone are not enough: a directory removed and recreated at once
/// often gets the freed inode number back. Its birth time (where the filesystem records
/// one) tells the two apart.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
    /// Birth time (seconds, nanoseconds), when the filesystem reports it.
    pub birth: Option<(i64, u32)>,
}

impl FileId {
    /// The identity of what `path` names, without following a link in its last
    /// component (a link is reported as an error: roots are directories).
    pub fn of_dir(path: &Path) -> io::Result<FileId> {
        let meta = std::fs::symlink_metadata(path)?;
        if !meta.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                "not a directory (or a symbolic link)",
            ));
        }
        Ok(FileId {
            dev: meta.dev(),
            ino: meta.ino(),
            birth: birth_of(path),
        })
    }
}

/// The birth time of what `path` names (its last component not followed), when the
/// filesystem reports one. Asked of `statx(2)` (crate::statx): Rust's std reads birth
/// times only when built against glibc, and a musl build would otherwise bind every root
/// by device and inode alone, without saying so.
fn birth_of(path: &Path) -> Option<(i64, u32)> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let buf = crate::statx::statx(
        libc::AT_FDCWD,
        &path,
        libc::AT_SYMLINK_NOFOLLOW,
        libc::STATX_BTIME,
    )
    .ok()?;
    crate::statx::birth(&buf)
}

/// A writable root as resolved: its canonical path and the directory it named then.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RootId {
    #[serde(with = "crate::raw")]
    pub path: PathBuf,
    pub id: FileId,
}

impl RootId {
    /// Pins down `path` (canonical, free of links) as it is now.
    pub fn of(path: &Path) -> io::Result<RootId> {
        Ok(RootId {
            path: path.to_path_buf(),
            id: FileId::of_dir(path)?,
        })
    }
}

/// Where an implicit `$TMPDIR` may live: beneath the shared temporary directories, the
/// user's runtime directory or the user's home. Anything else must be named explicitly
/// (`--writable`), where the user sees what they grant.
fn temp_locations(invoker: &Invoker) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = ["/tmp", "/var/tmp", "/dev/shm"]
        .iter()
        .filter_map(|p| Path::new(p).canonicalize().ok())
        .collect();
    out.extend(invoker.runtime_dir.clone());
    out
}

/// Decides whether the target's `$TMPDIR` (`raw`, as it appears in its environment) is
/// granted. `writable` are the roots the policy grants anyway (workspace, `/tmp`,
/// `--writable`): a link planted in one of them by an earlier command must not steer
/// the grant. Returns the canonical directory, or why it is not granted.
///
/// Not granted: a relative path or one that does not name a directory; a path that is or
/// passes through a symbolic link located in a directory confined commands can write
/// (beneath a writable root, or writable by every user) or owned by anyone but the user
/// or root; a directory not owned by the user; `/`, a home directory or an ancestor of
/// one, or of the workspace or another root; a directory outside the places temporary
/// directories live (beneath `/tmp`, `/var/tmp`, `/dev/shm`, `/run/user/UID` or the
/// home directory).
pub fn check_implicit_tmpdir(
    raw: &Path,
    invoker: &Invoker,
    writable: &[PathBuf],
) -> Result<PathBuf, String> {
    if !raw.is_absolute() {
        return Err("it is not an absolute path".into());
    }
    let resolved = walk_checking_links(raw, invoker.uid, writable)?;
    let meta = std::fs::symlink_metadata(&resolved)
        .map_err(|e| format!("{} cannot be examined: {e}", resolved.display()))?;
    if !meta.is_dir() {
        return Err(format!("{} is not a directory", resolved.display()));
    }
    // Already writable through another root: granting it widens nothing.
    if writable.iter().any(|r| resolved.starts_with(r)) {
        return Ok(resolved);
    }
    if meta.uid() != invoker.uid {
        return Err(format!(
            "{} is owned by uid {}, not by the invoking user",
            resolved.display(),
            meta.uid()
        ));
    }
    if let Some(why) = broad_reason(&resolved, &invoker.homes) {
        return Err(format!("{} is too broad: {why}", resolved.display()));
    }
    if let Some(root) = writable.iter().find(|r| r.starts_with(&resolved)) {
        return Err(format!(
            "{} contains the writable root {}",
            resolved.display(),
            root.display()
        ));
    }
    // A home of `/` (some service accounts) would make every directory "in the home".
    let inside_home = invoker
        .homes
        .iter()
        .any(|h| h.parent().is_some() && resolved.starts_with(h));
    if !inside_home
        && !temp_locations(invoker)
            .iter()
            .any(|t| resolved.starts_with(t))
    {
        return Err(format!(
            "{} is not beneath /tmp, /var/tmp, /dev/shm, the user's runtime directory or home; name it with --writable to grant it",
            resolved.display()
        ));
    }
    Ok(resolved)
}

/// Resolves `path` (absolute) component by component, like `realpath`, checking every
/// symbolic link met on the way (including links inside link targets): a link located
/// beneath one of `writable` (where a confined command could have planted it), in a
/// directory every user can write, or owned by anyone but the user or root is refused.
/// Returns the resolved path, or why a link on the way is not trusted.
pub fn walk_checking_links(path: &Path, uid: u32, writable: &[PathBuf]) -> Result<PathBuf, String> {
    // Components still to walk, last first.
    let mut todo: Vec<OsString> = Vec::new();
    push_components(&mut todo, path);
    let mut current = PathBuf::from("/");
    let mut links = 0;
    while let Some(name) = todo.pop() {
        if name == "." {
            continue;
        }
        if name == ".." {
            current.pop();
            continue;
        }
        let next = current.join(&name);
        let meta = std::fs::symlink_metadata(&next)
            .map_err(|e| format!("{} cannot be examined: {e}", next.display()))?;
        if !meta.file_type().is_symlink() {
            current = next;
            continue;
        }
        links += 1;
        if links > 40 {
            return Err(format!("too many symbolic links at {}", next.display()));
        }
        if meta.uid() != uid && meta.uid() != 0 {
            return Err(format!(
                "it passes through the symbolic link {}, owned by uid {}",
                next.display(),
                meta.uid()
            ));
        }
        if let Some(root) = writable.iter().find(|r| current.starts_with(r)) {
            return Err(format!(
                "it passes through the symbolic link {}, in the writable root {} where a confined command could have planted it",
                next.display(),
                root.display()
            ));
        }
        let parent = std::fs::metadata(&current)
            .map_err(|e| format!("{} cannot be examined: {e}", current.display()))?;
        if parent.mode() & 0o002 != 0 {
            return Err(format!(
                "it passes through the symbolic link {}, in {} which every user can write",
                next.display(),
                current.display()
            ));
        }
        let target = std::fs::read_link(&next)
            .map_err(|e| format!("{} cannot be read: {e}", next.display()))?;
        if target.is_absolute() {
            current = PathBuf::from("/");
        }
        push_components(&mut todo, &target);
    }
    Ok(current)
}

fn push_components(todo: &mut Vec<OsString>, path: &Path) {
    let names: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            Component::CurDir => Some(".".into()),
            Component::RootDir | Component::Prefix(_) => None,
        })
        .collect();
    todo.extend(names.into_iter().rev());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_bound_by_its_birth_time_where_the_filesystem_keeps_one() {
        // The oracle is coreutils' `stat`, which asks statx itself: "%W" is the birth
        // time in seconds, 0 where the filesystem keeps none.
        let dir = std::env::temp_dir().join(format!("stockade-birth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = std::process::Command::new("stat")
            .args(["-c", "%W"])
            .arg(&dir)
            .output()
            .unwrap();
        let seconds: i64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        let id = FileId::of_dir(&dir).unwrap();
        std::fs::remove_dir(&dir).unwrap();
        if seconds == 0 {
            assert_eq!(id.birth, None);
        } else {
            assert_eq!(id.birth.map(|(sec, _)| sec), Some(seconds));
        }
    }

    #[test]
    fn passwd_home_is_the_sixth_field_of_the_uid_line() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      broken line\n\
                      u:x:1000:1000:U,,,:/home/u:/bin/sh\n";
        assert_eq!(home_from_passwd(passwd, 0), Some("/root".into()));
        assert_eq!(home_from_passwd(passwd, 1000), Some("/home/u".into()));
        assert_eq!(home_from_passwd(passwd, 5), None);
    }

    #[test]
    fn a_private_group_is_the_primary_group_no_one_else_has_or_joins() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      u:x:1000:1000::/home/u:/bin/sh\n\
                      v:x:1001:100::/home/v:/bin/sh\n\
                      w:x:1002:100::/home/w:/bin/sh\n\
                      x:x:1003:1003::/home/x:/bin/sh\n";
        let group = "root:x:0:\nusers:x:100:\nu:x:1000:u\nx:x:1003:u\n";
        assert_eq!(private_group(passwd, group, 0), Some(0));
        // Listing the user itself as a member changes nothing.
        assert_eq!(private_group(passwd, group, 1000), Some(1000));
        // A primary group shared with another account, or one another user joins.
        assert_eq!(private_group(passwd, group, 1001), None);
        assert_eq!(private_group(passwd, group, 1003), None);
        // No passwd entry: nothing is known to be private.
        assert_eq!(private_group(passwd, group, 5), None);
    }

    #[test]
    fn slash_homes_and_their_ancestors_are_broad_and_what_is_inside_is_not() {
        let homes = vec![PathBuf::from("/home/u"), PathBuf::from("/srv/alt/u")];
        for broad in ["/", "/home", "/home/u", "/srv", "/srv/alt/u"] {
            assert!(broad_reason(Path::new(broad), &homes).is_some(), "{broad}");
        }
        for fine in ["/home/u/src/proj", "/home/v", "/srv/other", "/home/uu"] {
            assert_eq!(broad_reason(Path::new(fine), &homes), None, "{fine}");
        }
    }

    #[test]
    fn the_kernel_s_trees_are_no_writable_root_but_dev_shm_is_a_tmpfs_like_any() {
        for kernel in [
            "/proc",
            "/proc/sys/kernel",
            "/sys",
            "/sys/fs/cgroup",
            "/dev",
            "/dev/pts",
        ] {
            let why = broad_reason(Path::new(kernel), &[]).unwrap_or_default();
            assert!(why.contains("kernel's own interface"), "{kernel}: {why}");
        }
        for fine in [
            "/dev/shm",
            "/dev/shm/work",
            "/devices",
            "/process",
            "/system",
        ] {
            assert_eq!(broad_reason(Path::new(fine), &[]), None, "{fine}");
        }
    }

    fn scratch() -> PathBuf {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "stockade-roots-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir.canonicalize().unwrap()
    }

    /// This process's uid: the owner of `dir`, which it created.
    fn me(dir: &Path) -> u32 {
        std::fs::metadata(dir).unwrap().uid()
    }

    #[test]
    fn a_link_planted_in_a_writable_root_is_not_followed_into_a_grant() {
        let dir = scratch();
        let home = dir.join("home");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        let tmp = dir.join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        std::os::unix::fs::symlink(home.join(".ssh"), tmp.join("agent-tmp")).unwrap();
        let invoker = Invoker {
            uid: me(&dir),
            homes: vec![home.clone()],
            runtime_dir: None,
            control_bases: Vec::new(),
            capabilities: 0,
            store_variables: Vec::new(),
            other_control_bases: Vec::new(),
            readable_root_secrets: Vec::new(),
        };
        let err =
            check_implicit_tmpdir(&tmp.join("agent-tmp"), &invoker, std::slice::from_ref(&tmp))
                .unwrap_err();
        assert!(err.contains("symbolic link"), "{err}");
        // Control: the same directory named honestly is granted (it is in the home).
        assert_eq!(
            check_implicit_tmpdir(&home.join(".ssh"), &invoker, std::slice::from_ref(&tmp)),
            Ok(home.join(".ssh"))
        );
        // A link the user made outside every writable root is followed.
        std::os::unix::fs::symlink(home.join(".ssh"), dir.join("mine")).unwrap();
        assert_eq!(
            check_implicit_tmpdir(&dir.join("mine"), &invoker, std::slice::from_ref(&tmp)),
            Ok(home.join(".ssh"))
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn broad_foreign_and_misplaced_tmpdirs_are_not_granted() {
        let dir = scratch();
        let home = dir.join("home");
        std::fs::create_dir_all(home.join("t")).unwrap();
        let ws = home.join("t/ws");
        std::fs::create_dir_all(&ws).unwrap();
        let invoker = Invoker {
            uid: me(&dir),
            homes: vec![home.clone()],
            runtime_dir: None,
            control_bases: Vec::new(),
            capabilities: 0,
            store_variables: Vec::new(),
            other_control_bases: Vec::new(),
            readable_root_secrets: Vec::new(),
        };
        for bad in [
            Path::new("/"),
            &home,
            &dir,
            &home.join("t"),
            Path::new("rel"),
        ] {
            assert!(
                check_implicit_tmpdir(bad, &invoker, std::slice::from_ref(&ws)).is_err(),
                "{}",
                bad.display()
            );
        }
        // /etc is owned by root and not where temporary directories live.
        assert!(check_implicit_tmpdir(Path::new("/etc"), &invoker, &[]).is_err());
        // Even when the home is `/`.
        let rootless = Invoker {
            homes: vec!["/".into()],
            ..invoker.clone()
        };
        assert!(check_implicit_tmpdir(Path::new("/etc"), &rootless, &[]).is_err());
        // A directory already writable through another root is granted as it is.
        assert_eq!(
            check_implicit_tmpdir(&ws.join("t"), &invoker, std::slice::from_ref(&ws))
                .map_err(|_| ()),
            Err(()),
            "missing"
        );
        std::fs::create_dir(ws.join("t")).unwrap();
        assert_eq!(
            check_implicit_tmpdir(&ws.join("t"), &invoker, std::slice::from_ref(&ws)),
            Ok(ws.join("t"))
        );
        assert!(check_implicit_tmpdir(&home.join("missing"), &invoker, &[]).is_err());
        let fine = home.join("tmp");
        std::fs::create_dir(&fine).unwrap();
        assert_eq!(
            check_implicit_tmpdir(&fine, &invoker, std::slice::from_ref(&ws)),
            Ok(fine)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
