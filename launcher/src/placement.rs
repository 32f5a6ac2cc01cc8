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
//! - in a file or directory on the path that is writable by every user, or owned by
//!   someone other than the invoking user or root (they could swap it).
//!
//! What this cannot see: another command whose own policy makes this binary's directory
//! writable (for example `--workspace` set to a build tree holding a second stockade).
//! The README says to keep stockade's binaries out of every directory any command may
//! write.

use crate::error::LauncherError;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use stockade_policy::Policy;
use stockade_policy::grants;
use stockade_policy::roots::{self, Invoker};

/// The invoking user: the real uid, its home from `/etc/passwd`, and `$HOME`.
pub fn invoker() -> Invoker {
    let uid = nix::unistd::getuid().as_raw();
    let passwd_home = std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|text| roots::home_from_passwd(&text, uid));
    let env_home = std::env::var_os("HOME").map(PathBuf::from);
    Invoker::new(uid, passwd_home.as_deref(), env_home.as_deref())
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
) -> Result<(), LauncherError> {
    let exposed = |why: String| LauncherError::ExposedBinary {
        what,
        path: binary.to_path_buf(),
        why,
    };
    for root in grants::writable_roots(policy) {
        if binary.starts_with(&root) {
            return Err(exposed(format!(
                "it lies beneath the writable root {} of this command",
                root.display()
            )));
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
        if binary.starts_with(&dir) {
            return Err(exposed(format!(
                "it lies beneath {}, which confined commands are granted or every user can write",
                dir.display()
            )));
        }
    }
    for path in binary.ancestors() {
        let meta = std::fs::metadata(path)
            .map_err(|e| exposed(format!("{} cannot be examined: {e}", path.display())))?;
        // Sticky or not: a directory anyone can write is no place for a trusted binary.
        if meta.mode() & 0o002 != 0 {
            return Err(exposed(format!(
                "{} is writable by every user",
                path.display()
            )));
        }
        if meta.uid() != 0 && meta.uid() != invoker.uid {
            return Err(exposed(format!(
                "{} is owned by uid {}, neither the invoking user nor root",
                path.display(),
                meta.uid()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use stockade_policy::{Mode, PolicyRequest};

    /// A scratch directory outside /tmp and /var/tmp (which are refused as a whole).
    fn scratch(name: &str) -> PathBuf {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../target")
            .join(format!("placement-test-{}-{name}", std::process::id()));
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
        let me = invoker();
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
        // A $TMPDIR no command could be granted (not a temp location) does not count.
        let res = check("runner", &safe, &ws_write, Some(&dir.join("bin")), &me);
        assert!(res.is_ok(), "{res:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
