//! The private control directories: where they live (the base), how each is made and
//! checked, and how leftovers are swept. A private directory holds a launch request and
//! its status file (`confine`), or spilled output (`run --json`).
//!
//! A request is written as a 0600 file created exclusively, so no other user can read,
//! replace or pre-create it. Next to it,
//! the empty 0600 status file the runner reports to (`stockade_policy::status`).
//!
//! Where: the first usable base directory that lies outside every writable root of the
//! policy, from these candidates in order:
//!
//! 1. `$XDG_RUNTIME_DIR/stockade` (when `XDG_RUNTIME_DIR` is set and absolute);
//! 2. `/run/user/UID/stockade` (when `/run/user/UID` exists);
//! 3. `/run/stockade-UID` (root only: `/run` is root's);
//! 4. `stockade-UID` in the system temp dir (`$TMPDIR`, else `/tmp`).
//!
//! Landlock denies the confined command any write outside its writable roots, whatever
//! its uid, so a status file there can be written only by the runner (through the
//! descriptor it opened before confining itself): the channel is `out-of-band`. When every
//! usable candidate is beneath a writable root (for example `--writable /`), the first
//! usable one is taken and the channel is `in-band`.
//!
//! A base directory is checked before use: a directory (not a link), owned by us, closed
//! to group and others. Private directories left behind by executors that never
//! classified (they died) are removed by a later `confine` once older than
//! [`STALE_AFTER`].
//!
//! The spill files of `stockade run --json` (`output.rs`) use the same base directories
//! and the same private directory and file creation.

use crate::error::LauncherError;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use stockade_policy::LaunchRequest;
use stockade_policy::confined::StatusChannel;
use stockade_policy::status::STATUS_FILE;
use stockade_policy::trust::{self, FileFacts, FileKind, Untrusted};

/// The name of the request file inside its private directory.
pub const REQUEST_FILE: &str = "request";
/// The prefix of every private directory's name.
pub const PRIVATE_PREFIX: &str = "req-";
/// A private directory not modified for this long is stale: its executor died before
/// classifying. (The runner unlinks the request when it starts, so the age counts from
/// the start of the command; a command still running after this long loses its status
/// file and is classified by the exit-code rules.)
pub const STALE_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// The candidate base directories, in order of preference.
pub fn base_candidates() -> Vec<PathBuf> {
    let uid = nix::unistd::geteuid();
    let mut out = Vec::new();
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from)
        && dir.is_absolute()
    {
        out.push(dir.join("stockade"));
    }
    let run_user = PathBuf::from(format!("/run/user/{uid}"));
    if run_user.is_dir() {
        out.push(run_user.join("stockade"));
    }
    if uid.is_root() && Path::new("/run").is_dir() {
        out.push(PathBuf::from(format!("/run/stockade-{uid}")));
    }
    out.push(std::env::temp_dir().join(format!("stockade-{uid}")));
    out
}

/// Whether `path` (which may not exist yet) lies beneath one of `roots`. Compared on
/// canonical paths: the deepest existing ancestor of `path` is canonicalised.
pub fn beneath_any(path: &Path, roots: &[PathBuf]) -> bool {
    let mut existing = path;
    let mut rest = Vec::new();
    let canonical = loop {
        match existing.canonicalize() {
            Ok(c) => break c,
            Err(_) => match (existing.parent(), existing.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name.to_os_string());
                    existing = parent;
                }
                // Nothing of it exists: judge it as written.
                _ => break path.to_path_buf(),
            },
        }
    };
    let full = rest.iter().rev().fold(canonical, |p, n| p.join(n));
    roots.iter().any(|r| full.starts_with(r))
}

fn unusable(path: &Path, reason: impl Into<String>) -> LauncherError {
    LauncherError::PrivateDir {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// The trust rule (`stockade_policy::trust`) applied to `meta`, as `lstat` or `fstat`
/// gave it.
pub fn trusted(meta: &std::fs::Metadata, expected: FileKind) -> Result<(), Untrusted> {
    let kind = if meta.file_type().is_file() {
        FileKind::Regular
    } else if meta.file_type().is_dir() {
        FileKind::Directory
    } else {
        FileKind::Other
    };
    let facts = FileFacts {
        kind,
        owner: meta.uid(),
        mode: meta.mode(),
    };
    trust::judge(&facts, expected, nix::unistd::geteuid().as_raw())
}

/// Creates `base` (0700) if needed and checks that nobody else controls it.
pub(crate) fn ensure_base(base: &Path) -> Result<(), LauncherError> {
    match DirBuilder::new().mode(0o700).create(base) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(unusable(base, e.to_string())),
    }
    let meta = std::fs::symlink_metadata(base).map_err(|e| unusable(base, e.to_string()))?;
    trusted(&meta, FileKind::Directory).map_err(|u| unusable(base, u.to_string()))?;
    Ok(())
}

/// Picks the base directory for a policy with `writable_roots`: the first usable
/// candidate outside all of them (out-of-band), else the first usable one (in-band).
fn choose_base(writable_roots: &[PathBuf]) -> Result<(PathBuf, StatusChannel), LauncherError> {
    choose_base_from(base_candidates(), writable_roots)
}

/// The first usable base directory, whatever the policy: for the launcher's own private
/// files (spilled output), which no confined command is meant to write.
pub fn first_usable_base() -> Result<PathBuf, LauncherError> {
    choose_base(&[]).map(|(base, _)| base)
}

/// Creates a fresh 0700 directory in `base`, named `prefix` and random characters, and
/// keeps it (the caller removes it).
pub fn create_private_dir(base: &Path, prefix: &str) -> Result<PathBuf, LauncherError> {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir_in(base)
        .map_err(|e| unusable(base, e.to_string()))?;
    Ok(dir.keep())
}

/// Creates `path` as a new 0600 file for writing; fails if anything is there already,
/// a symbolic link included.
pub fn create_private_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

fn choose_base_from(
    candidates: Vec<PathBuf>,
    writable_roots: &[PathBuf],
) -> Result<(PathBuf, StatusChannel), LauncherError> {
    let mut first_usable = None;
    let mut last_error = None;
    for base in candidates {
        let outside = !beneath_any(&base, writable_roots);
        if !outside && first_usable.is_some() {
            continue;
        }
        match ensure_base(&base) {
            Ok(()) if outside => return Ok((base, StatusChannel::OutOfBand)),
            Ok(()) => first_usable = Some(base),
            Err(e) => last_error = Some(e),
        }
    }
    match (first_usable, last_error) {
        (Some(base), _) => Ok((base, StatusChannel::InBand)),
        (None, Some(e)) => Err(e),
        (None, None) => Err(unusable(Path::new("/"), "no candidate directory")),
    }
}

/// The metadata of `dir` when it looks like a private directory `confine` made: named
/// `req-*`, a real directory (not a link), owned by us. Only such a directory is ever
/// removed.
pub fn own_private_dir(dir: &Path) -> Option<std::fs::Metadata> {
    let named = dir
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with(PRIVATE_PREFIX));
    if !named {
        return None;
    }
    let meta = std::fs::symlink_metadata(dir).ok()?;
    let ours = meta.file_type().is_dir() && meta.uid() == nix::unistd::geteuid().as_raw();
    ours.then_some(meta)
}

/// Removes private directories in `base` not modified for [`STALE_AFTER`]. Only our own
/// `req-*` directories (never links) are touched; errors are ignored (another `confine`
/// may be removing the same directory).
pub fn remove_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    let now = SystemTime::now();
    for entry in entries.flatten() {
        let Some(meta) = own_private_dir(&entry.path()) else {
            continue;
        };
        let age = meta
            .modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok());
        if age.is_some_and(|a| a > STALE_AFTER) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A private directory holding one request and its status file.
#[derive(Debug)]
pub struct PrivateDir {
    path: PathBuf,
    channel: StatusChannel,
}

impl PrivateDir {
    /// Creates a fresh private directory with a random name, outside `writable_roots`
    /// when possible, and its empty status file. Removes stale siblings first.
    pub fn create(writable_roots: &[PathBuf]) -> Result<PrivateDir, LauncherError> {
        let (base, channel) = choose_base(writable_roots)?;
        remove_stale(&base);
        let dir = PrivateDir {
            path: create_private_dir(&base, PRIVATE_PREFIX)?,
            channel,
        };
        if let Err(e) = dir.create_file(STATUS_FILE, &[]) {
            dir.remove();
            return Err(e);
        }
        Ok(dir)
    }

    /// Where the status file is.
    pub fn status_path(&self) -> PathBuf {
        self.path.join(STATUS_FILE)
    }

    /// Whether the status file is out of the command's reach.
    pub fn channel(&self) -> StatusChannel {
        self.channel
    }

    /// Creates `name` as a new 0600 file holding `bytes`; fails if it exists.
    fn create_file(&self, name: &str, bytes: &[u8]) -> Result<PathBuf, LauncherError> {
        let path = self.path.join(name);
        let write = || -> std::io::Result<()> {
            let mut file = create_private_file(&path)?;
            file.write_all(bytes)?;
            file.flush()
        };
        write().map_err(|source| LauncherError::WriteRequest {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    /// Writes `request` as a new 0600 file; fails if the file already exists.
    pub fn write_request(&self, request: &LaunchRequest) -> Result<PathBuf, LauncherError> {
        let bytes = request.encode().map_err(LauncherError::Encode)?;
        self.create_file(REQUEST_FILE, &bytes)
    }

    /// Removes the directory and whatever is left in it.
    pub fn remove(self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beneath_any_compares_canonical_paths_of_paths_that_may_not_exist() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("ws")).unwrap();
        std::os::unix::fs::symlink(root.join("ws"), root.join("link")).unwrap();
        let roots = vec![root.join("ws")];
        assert!(beneath_any(&root.join("ws/not/yet"), &roots));
        assert!(beneath_any(&root.join("link/stockade"), &roots));
        assert!(!beneath_any(&root.join("wsx/stockade"), &roots));
        assert!(!beneath_any(&root.join("other"), &roots));
        assert!(beneath_any(&root.join("other"), &[PathBuf::from("/")]));
    }

    #[test]
    fn the_first_usable_candidate_outside_the_writable_roots_wins() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ws = root.join("ws");
        std::fs::create_dir(&ws).unwrap();
        let inside = ws.join("stockade");
        let outside = root.join("run");
        let blocked = root.join("file");
        std::fs::write(&blocked, "").unwrap();
        let roots = vec![ws.clone()];
        let pick = |c: &[&PathBuf]| {
            choose_base_from(c.iter().map(|p| p.to_path_buf()).collect(), &roots)
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            pick(&[&inside, &blocked, &outside]).unwrap(),
            (outside.clone(), StatusChannel::OutOfBand)
        );
        // Nothing usable outside: the first usable one, in band.
        assert_eq!(
            pick(&[&blocked, &inside]).unwrap(),
            (inside.clone(), StatusChannel::InBand)
        );
        // Nothing usable at all: the error names the last candidate tried.
        assert!(pick(&[&blocked]).unwrap_err().contains("file"));
    }
}
