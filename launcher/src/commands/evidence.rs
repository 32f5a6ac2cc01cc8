//! The evidence the launcher gathers for naming refusals: what Unix permissions and the
//! host's mounts allow the invoking user, asked of the kernel outside the sandbox (the
//! decision is `stockade_policy::attribution`'s).

use nix::unistd::{AccessFlags, access};
use std::path::{Path, PathBuf};
use stockade_policy::attribution::{Access, UnixCheck};

/// `access(2)` as the invoking user (the launcher runs as that user), outside the
/// sandbox: the same answer the command would have had without stockade.
pub struct HostPermissions;

impl UnixCheck for HostPermissions {
    fn allows(&self, path: &Path, wanted: Access) -> bool {
        if wanted == Access::Metadata {
            return may_change_metadata(path);
        }
        if path.symlink_metadata().is_ok() {
            let flags = match wanted {
                Access::Read => AccessFlags::R_OK,
                _ => AccessFlags::W_OK,
            };
            return access(path, flags).is_ok();
        }
        // Not there: reading it fails anyway; writing it means creating it in the
        // nearest existing directory above.
        if wanted == Access::Read {
            return false;
        }
        let mut dir = path.parent();
        while let Some(d) = dir {
            if d.symlink_metadata().is_ok() {
                return access(d, AccessFlags::W_OK | AccessFlags::X_OK).is_ok();
            }
            dir = d.parent();
        }
        false
    }

    fn holds(&self, capability: u32) -> bool {
        capability < 64 && crate::control::capabilities::effective() & (1 << capability) != 0
    }

    fn may_trace_children(&self) -> bool {
        // Yama: 0 any process of the user, 1 its descendants, 2 only with CAP_SYS_PTRACE,
        // 3 none. Without Yama, Unix's own rule: the same user.
        match std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope") {
            Ok(scope) => scope.trim().parse::<u32>().is_ok_and(|s| s <= 1),
            Err(_) => true,
        }
    }

    fn resolve(&self, path: &Path) -> PathBuf {
        // The nearest existing ancestor canonical, the rest (not there yet) as named.
        let mut rest = Vec::new();
        let mut at = path;
        loop {
            if let Ok(real) = at.canonicalize() {
                return rest.iter().rev().fold(real, |p, name| p.join(name));
            }
            match (at.parent(), at.file_name()) {
                (Some(up), Some(name)) => {
                    rest.push(name.to_os_string());
                    at = up;
                }
                _ => return path.to_path_buf(),
            }
        }
    }
}

/// Whether the invoking user may change `path`'s mode, owner or times: its owner or root
/// (the capabilities a root launcher holds), on a filesystem the host mounted writable.
fn may_change_metadata(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = path.metadata() else {
        return false;
    };
    let read_only = nix::sys::statvfs::statvfs(path)
        .map(|v| v.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
        .unwrap_or(true);
    let uid = nix::unistd::geteuid().as_raw();
    !read_only && (uid == 0 || uid == meta.uid())
}

/// Whether the refused access would have failed anyway without stockade: opening
/// `/dev/tty` with no controlling terminal (shells try it at start; ENXIO where the
/// launcher has none either, asked here the same way).
pub fn fails_anyway(record: &stockade_policy::denial_record::DenialRecord) -> bool {
    record.path.as_deref() == Some("/dev/tty")
        && std::fs::OpenOptions::new()
            .read(true)
            .open("/dev/tty")
            .is_err()
}
