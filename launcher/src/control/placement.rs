//! Who invokes stockade (for the root rules), and where stockade's own binaries may lie.
//!
//! A runner or launcher that a confined command can replace is a full escape: the
//! command swaps in a wrapper, and every later command (read-only included) runs it
//! unconfined while stockade still reports `full`. So `confine` and `run` refuse, before
//! anything is written, when the runner they would use or the launcher itself lies
//! where a confined command could write. "Could write" means, checked on the canonical
//! path of each binary:
//!
//! - beneath a writable root of this policy (workspace, `/tmp`, `$TMPDIR`, `--writable`):
//!   replacing the file, or renaming any directory on its path, is then allowed;
//! - beneath a place every confined command of the user is granted or anyone can write,
//!   whatever this policy says: `/tmp`, `/var/tmp`, `/dev/shm`, the launcher's and the
//!   target's `$TMPDIR` when a command could be granted it (another command may be);
//! - in a file or directory on the path that is writable by every user, by a group other
//!   than the user's private one (or through an access control list), or owned by
//!   someone other than the invoking user or root (they could swap it).
//!
//! A dynamically linked runner (a development build) runs the loader's choice of code
//! before it confines anything, so `LD_PRELOAD`, `LD_LIBRARY_PATH` and `LD_AUDIT`
//! entries are held to the same rule; an empty or relative entry is the current
//! directory, usually the workspace.
//!
//! What this cannot see: another command whose own policy makes this binary's directory
//! writable (for example `--workspace` set to a build tree holding a second stockade).
//! The README says to keep stockade's binaries out of every directory any command may
//! write.

use crate::control::error::ControlError;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use stockade_policy::Policy;
use stockade_policy::grants;
use stockade_policy::roots::{self, Invoker};

/// The invoking user: the real uid, its home from `/etc/passwd`, and `$HOME`, with what
/// is hidden for it by default. Other users' control bases are looked for only when
/// `reads_past_modes` (the command keeps a capability that reads past their 0700
/// modes): no one else needs them, and finding them is a look into every home.
pub fn invoker(reads_past_modes: bool) -> Invoker {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let identity = identity_from(&passwd);
    let uid = identity.uid;
    Invoker {
        control_bases: crate::control::private_dir::base_candidates(),
        other_control_bases: if reads_past_modes {
            crate::control::private_dir::other_users_bases(&passwd)
        } else {
            Vec::new()
        },
        capabilities: crate::control::capabilities::permitted(),
        readable_root_secrets: readable_root_secrets(uid),
        store_variables: stockade_policy::credentials::variables()
            .into_iter()
            .filter_map(|name| Some((name.into(), std::env::var_os(name)?)))
            .collect(),
        ..identity
    }
}

/// Who invokes, and no more: the real uid, its homes and its runtime directory (for
/// judging a `$TMPDIR`), without looking for what is hidden from it.
pub fn identity() -> Invoker {
    identity_from(&std::fs::read_to_string("/etc/passwd").unwrap_or_default())
}

fn identity_from(passwd: &str) -> Invoker {
    let uid = nix::unistd::getuid().as_raw();
    let passwd_home = roots::home_from_passwd(passwd, uid);
    let env_home = std::env::var_os("HOME").map(PathBuf::from);
    Invoker::new(uid, passwd_home.as_deref(), env_home.as_deref())
}

/// The system's credential files an invoker other than root can read, as `access(R_OK)`
/// answers for the real uid and groups (a member of the `shadow` group reads
/// `/etc/shadow`); none for root, from whom all of them are hidden anyway.
fn readable_root_secrets(uid: u32) -> Vec<PathBuf> {
    if uid == 0 {
        return Vec::new();
    }
    stockade_policy::hidden::ROOT_SECRETS
        .iter()
        .map(PathBuf::from)
        .filter(|p| nix::unistd::access(p.as_path(), nix::unistd::AccessFlags::R_OK).is_ok())
        .collect()
}

/// Refuses when `binary` (canonical; `what` names it) could be replaced by a confined
/// command (see the module comment). `target_tmpdir` is `$TMPDIR` of the command's
/// environment as given.
pub fn check(
    what: &'static str,
    binary: &Path,
    policy: &Policy,
    target_tmpdir: Option<&Path>,
    invoker: &Invoker,
) -> Result<(), ControlError> {
    exposure(binary, policy, target_tmpdir, invoker).map_err(|why| ControlError::ExposedBinary {
        what,
        path: binary.to_path_buf(),
        why,
    })
}

/// The dynamic loader's variables: each names code a dynamically linked runner loads
/// before it confines anything.
const LOADER_VARS: [&str; 3] = ["LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT"];

/// Refuses a dynamically linked runner or launcher (`what`; a development build) when
/// the environment it is started with (`env`: an executor spawns the argv with its own,
/// which that one is built from; `stockade run` starts both with none, so there this is
/// a second guard) makes the loader take
/// code from where a confined command could have planted it: an empty or relative entry
/// (the current directory, usually the workspace) or one in an exposed place.
pub fn check_loader_env(
    what: &'static str,
    runner: &Path,
    env: &[(OsString, OsString)],
    policy: &Policy,
    target_tmpdir: Option<&Path>,
    invoker: &Invoker,
) -> Result<(), ControlError> {
    if !has_interpreter(runner) {
        return Ok(());
    }
    let exposed = |why: String| ControlError::ExposedBinary {
        what,
        path: runner.to_path_buf(),
        why,
    };
    for name in LOADER_VARS {
        let Some(value) = stockade_policy::environment::lookup(env, name) else {
            continue;
        };
        // Split as bytes, as the loader does: a lossy copy of a name that is not UTF-8
        // names another path, which would be judged in place of the one loaded from.
        let separators: &[u8] = if name == "LD_PRELOAD" { b" :" } else { b":;" };
        for entry in value.as_bytes().split(|b| separators.contains(b)) {
            let path = Path::new(std::ffi::OsStr::from_bytes(entry));
            let why = if !path.is_absolute() {
                Err(format!(
                    "the entry {:?} is relative (the current directory)",
                    path.as_os_str()
                ))
            } else {
                exposure(path, policy, target_tmpdir, invoker)
            };
            if let Err(why) = why {
                return Err(exposed(format!(
                    "it is dynamically linked and ${name} makes it load code from where a confined command could write: {why}; build it statically or drop ${name}"
                )));
            }
        }
    }
    Ok(())
}

/// Whether the ELF file at `path` names a program interpreter (is dynamically linked).
/// A file that cannot be read or parsed counts as dynamic: the check then runs.
fn has_interpreter(path: &Path) -> bool {
    use std::io::Read;
    const PT_INTERP: u32 = 3;
    // The program headers follow the ELF header (64 bytes) in every linker's output: the
    // first page holds them. Headers beyond it count as an interpreter (the check runs).
    let mut head = vec![0u8; 4096];
    let Ok(n) = std::fs::File::open(path).and_then(|mut f| f.read(&mut head)) else {
        return true;
    };
    let head = &head[..n];
    let u16_at = |o: usize| head.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| {
        head.get(o..o + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |o: usize| {
        head.get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    };
    // 64-bit little-endian ELF only (what stockade builds for).
    if head.get(..6) != Some(&[0x7f, b'E', b'L', b'F', 2, 1]) {
        return true;
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38))
    else {
        return true;
    };
    (0..phnum as usize).any(|i| {
        let at = phoff as usize + i * phentsize as usize;
        u32_at(at).is_none_or(|t| t == PT_INTERP)
    })
}

/// Why `path` (absolute) is a place a confined command could write, if it is: beneath a
/// writable root of `policy` or a shared scratch directory, or a file or directory on
/// its path (from the nearest one that exists) is writable by every user, by a group
/// other than the user's private one or through an ACL, or owned by someone other than
/// the user or root.
fn exposure(
    path: &Path,
    policy: &Policy,
    target_tmpdir: Option<&Path>,
    invoker: &Invoker,
) -> Result<(), String> {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    for root in grants::writable_roots(policy) {
        if path.starts_with(&root) {
            return Err(format!(
                "it lies beneath the writable root {} of this command",
                root.display()
            ));
        }
    }
    // A $TMPDIR counts when some command could be granted it (one that never can, like
    // `/`, is no place a confined command writes).
    let tmpdirs = std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .into_iter()
        .chain(target_tmpdir.map(Path::to_path_buf))
        .filter_map(|p| roots::check_implicit_tmpdir(&p, invoker, &[]).ok());
    let shared = ["/tmp", "/var/tmp", "/dev/shm"]
        .iter()
        .filter_map(|p| Path::new(p).canonicalize().ok())
        .chain(tmpdirs);
    for dir in shared {
        if path.starts_with(&dir) {
            return Err(format!(
                "it lies beneath {}, which confined commands are granted or every user can write",
                dir.display()
            ));
        }
    }
    for p in path.ancestors() {
        // A path that does not exist is as safe as its nearest existing ancestor.
        let Ok(own) = p.symlink_metadata() else {
            continue;
        };
        // A link's own mode says nothing: what it leads to is what could be swapped (the
        // path is canonical when it exists, so only a missing one's ancestors are links).
        let meta = if own.file_type().is_symlink() {
            std::fs::metadata(p).map_err(|e| format!("{} cannot be examined: {e}", p.display()))?
        } else {
            own
        };
        // Sticky or not: a directory anyone can write is no place for trusted code.
        if meta.mode() & 0o002 != 0 {
            return Err(format!("{} is writable by every user", p.display()));
        }
        // Nor one a group can write: its other members could swap the binary between
        // this check and the `execve` of the argv (renaming the checked file away, then
        // back), or rewrite it in place. Only the user's private group is harmless, and
        // only without an access control list (whose named entries the group bits then
        // stand for).
        if meta.mode() & 0o020 != 0 {
            if has_access_acl(p) {
                return Err(format!(
                    "{} is writable through its access control list",
                    p.display()
                ));
            }
            if private_group(invoker.uid) != Some(meta.gid()) {
                return Err(format!(
                    "{} is writable by its group (gid {}), whose other members could replace what it holds",
                    p.display(),
                    meta.gid()
                ));
            }
        }
        if meta.uid() != 0 && meta.uid() != invoker.uid {
            return Err(format!(
                "{} is owned by uid {}, neither the invoking user nor root",
                p.display(),
                meta.uid()
            ));
        }
    }
    Ok(())
}

/// The private group of `uid` (see `roots::private_group`), from the local files.
fn private_group(uid: u32) -> Option<u32> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    let group = std::fs::read_to_string("/etc/group").unwrap_or_default();
    roots::private_group(&passwd, &group, uid)
}

/// Whether `path` carries a POSIX access ACL. An answer other than "no such attribute"
/// or "not supported here" counts as yes: the caller then refuses.
fn has_access_acl(path: &Path) -> bool {
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return true;
    };
    // SAFETY: both strings are NUL-terminated and outlive the call; a null buffer of
    // size 0 asks only for the attribute's size.
    let n = unsafe {
        libc::getxattr(
            c_path.as_ptr(),
            c"system.posix_acl_access".as_ptr(),
            std::ptr::null_mut(),
            0,
        )
    };
    if n >= 0 {
        return true;
    }
    let errno = std::io::Error::last_os_error().raw_os_error();
    !matches!(errno, Some(libc::ENODATA) | Some(libc::EOPNOTSUPP))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use stockade_policy::{Mode, PolicyRequest};

    /// A scratch directory outside /tmp and /var/tmp (which are refused as a whole).
    fn scratch(name: &str) -> PathBuf {
        // The target directory: outside every shared temp dir even for a checkout in
        // one (CI then points CARGO_TARGET_DIR elsewhere), as the rules under test need.
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
        // A checkout beneath /tmp: the control binary must lie outside it (the home).
        let shared = ["/tmp", "/var/tmp", "/dev/shm"]
            .iter()
            .filter_map(|d| Path::new(d).canonicalize().ok())
            .any(|d| target.canonicalize().is_ok_and(|t| t.starts_with(d)));
        let target = match std::env::var_os("HOME") {
            Some(home) if shared => PathBuf::from(home).join(".cache/stockade-e2e"),
            _ => target,
        };
        let dir = target.join(format!("placement-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("ws")).unwrap();
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        dir.canonicalize().unwrap()
    }

    fn binary(dir: &Path) -> PathBuf {
        let path = dir.join("stockade-runner");
        std::fs::write(&path, b"#!/bin/true\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn binaries_a_confined_command_could_replace_are_refused() {
        let dir = scratch("rules");
        let me = invoker(false);
        let policy = |mode| {
            PolicyRequest {
                workspace: Some(dir.join("ws")),
                ..PolicyRequest::new(mode)
            }
            .resolve(&dir, None, &me)
            .unwrap()
        };
        let ws_write = policy(Mode::WorkspaceWrite);
        // Control: outside every writable root, in directories only their owner writes.
        let safe = binary(&dir.join("bin"));
        assert!(check("runner", &safe, &ws_write, None, &me).is_ok());
        // Beneath the workspace: refused in workspace-write, naming the root.
        let exposed = binary(&dir.join("ws"));
        let err = check("runner", &exposed, &ws_write, None, &me).unwrap_err();
        assert!(err.to_string().contains("writable root"), "{err}");
        assert!(check("runner", &exposed, &policy(Mode::ReadOnly), None, &me).is_ok());
        // A directory on the path anyone can write: refused whatever the mode.
        std::fs::set_permissions(dir.join("bin"), std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = check("runner", &safe, &policy(Mode::ReadOnly), None, &me).unwrap_err();
        assert!(err.to_string().contains("writable by every user"), "{err}");
        std::fs::set_permissions(dir.join("bin"), std::fs::Permissions::from_mode(0o755)).unwrap();
        // A $TMPDIR no command could be granted (`/`, the broadest root) does not count.
        let res = check("runner", &safe, &ws_write, Some(Path::new("/")), &me);
        assert!(res.is_ok(), "{res:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
