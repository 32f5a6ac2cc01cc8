//! Writing launch requests: each into its own private directory (0700), as a 0600 file
//! created exclusively, so no other user can read, replace or pre-create it.
//!
//! Private directories live under `$XDG_RUNTIME_DIR/stockade` when `XDG_RUNTIME_DIR` is
//! set, else under `stockade-UID` in the system temp dir. The base directory is checked
//! before use: a directory (not a link), owned by us, closed to group and others.

use crate::error::LauncherError;
use std::fs::{DirBuilder, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use stockade_policy::LaunchRequest;

/// The name of the request file inside its private directory.
pub const REQUEST_FILE: &str = "request";

/// The base directory that holds private directories.
pub fn base_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir.join("stockade"),
        _ => std::env::temp_dir().join(format!("stockade-{}", nix::unistd::geteuid())),
    }
}

fn unusable(path: &Path, reason: impl Into<String>) -> LauncherError {
    LauncherError::PrivateDir {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Creates `base` (0700) if needed and checks that nobody else controls it.
pub(crate) fn ensure_base(base: &Path) -> Result<(), LauncherError> {
    match DirBuilder::new().mode(0o700).create(base) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(unusable(base, e.to_string())),
    }
    let meta = std::fs::symlink_metadata(base).map_err(|e| unusable(base, e.to_string()))?;
    if !meta.file_type().is_dir() {
        return Err(unusable(
            base,
            "it is not a directory (a symbolic link is refused)",
        ));
    }
    let euid = nix::unistd::geteuid().as_raw();
    if meta.uid() != euid {
        return Err(unusable(
            base,
            format!("it is owned by uid {}, not by uid {euid}", meta.uid()),
        ));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(unusable(
            base,
            format!(
                "its mode is {:04o}; group and others must have no access",
                meta.mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

/// A private directory holding one request (and, later, its status).
#[derive(Debug)]
pub struct PrivateDir {
    path: PathBuf,
}

impl PrivateDir {
    /// Creates a fresh private directory with a random name.
    pub fn create() -> Result<PrivateDir, LauncherError> {
        let base = base_dir();
        ensure_base(&base)?;
        let dir = tempfile::Builder::new()
            .prefix("req-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in(&base)
            .map_err(|e| unusable(&base, e.to_string()))?;
        Ok(PrivateDir { path: dir.keep() })
    }

    /// Writes `request` as a new 0600 file; fails if the file already exists.
    pub fn write_request(&self, request: &LaunchRequest) -> Result<PathBuf, LauncherError> {
        let bytes = request.encode().map_err(LauncherError::Encode)?;
        let path = self.path.join(REQUEST_FILE);
        let write = || -> std::io::Result<()> {
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&path)?;
            file.write_all(&bytes)?;
            file.flush()
        };
        write().map_err(|source| LauncherError::WriteRequest {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    /// Removes the directory and whatever is left in it.
    pub fn remove(self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
