//! Finding `stockade-runner`: `$STOCKADE_RUNNER` when set, else next to this executable
//! (so `cargo build` output works without installing), else `../libexec/stockade/`
//! beside this executable's directory (an install tree moved as a whole), else the
//! distro's libexec path.

use crate::control::error::ControlError;
use crate::error::LauncherError;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The environment variable naming the runner explicitly.
pub const RUNNER_ENV: &str = "STOCKADE_RUNNER";
pub const RUNNER_NAME: &str = "stockade-runner";
/// Where distro packages install the runner (see packaging/).
pub const LIBEXEC_RUNNER: &str = "/usr/libexec/stockade/stockade-runner";

/// This launcher's own executable, canonical, read once per process: `/proc/self/exe`
/// names the file this process was started from, so reading it again (one `readlink`
/// and a canonicalization each time, several times per `stockade run`) would only give
/// the same answer.
///
/// The file found at that path must be the one running (same device and inode): a
/// launcher replaced or removed since it started reads as `PATH (deleted)`, and a file
/// planted under that very name, or a new binary at the old path, would otherwise be
/// what the argv starts as the stage or the proxy host, outside the sandbox.
pub fn launcher() -> std::io::Result<PathBuf> {
    static EXE: OnceLock<Result<PathBuf, (std::io::ErrorKind, String)>> = OnceLock::new();
    EXE.get_or_init(|| {
        use std::os::unix::fs::MetadataExt;
        let found = std::env::current_exe()
            .and_then(|p| p.canonicalize())
            .map_err(|e| (e.kind(), e.to_string()))?;
        let same = |a: &std::fs::Metadata, b: &std::fs::Metadata| {
            (a.dev(), a.ino()) == (b.dev(), b.ino())
        };
        match (std::fs::metadata("/proc/self/exe"), std::fs::metadata(&found)) {
            (Ok(running), Ok(there)) if same(&running, &there) => Ok(found),
            _ => Err((
                std::io::ErrorKind::NotFound,
                format!(
                    "{} is no longer the file this launcher was started from (replaced or removed while it ran); start stockade again",
                    found.display()
                ),
            )),
        }
    })
    .clone()
    .map_err(|(kind, msg)| std::io::Error::new(kind, msg))
}

/// Whether the file at [`launcher`]'s path is still the one this process runs from. A
/// process that lives long (`stockade serve`) asks before each answer: once an upgrade
/// or anything else replaced the file, the argv it hands out would start another binary
/// as the stage, so it stops and its provider starts the new one.
pub fn launcher_unchanged() -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(path) = launcher() else {
        return false;
    };
    match (std::fs::metadata("/proc/self/exe"), std::fs::metadata(path)) {
        (Ok(running), Ok(there)) => (running.dev(), running.ino()) == (there.dev(), there.ino()),
        _ => false,
    }
}

/// The absolute, canonical path of the runner to put in ConfinedArgv: `$STOCKADE_RUNNER`,
/// else next to this launcher (a `cargo build` tree), else in the libexec directory of
/// this launcher's own prefix (an install tree moved as a whole: `PREFIX/bin/stockade`
/// with `PREFIX/libexec/stockade/stockade-runner`), else the system path.
pub fn runner() -> Result<PathBuf, LauncherError> {
    find_runner().map_err(LauncherError::from)
}

fn find_runner() -> Result<PathBuf, ControlError> {
    if let Some(explicit) = std::env::var_os(RUNNER_ENV).filter(|v| !v.is_empty()) {
        return executable(Path::new(&explicit), "check $STOCKADE_RUNNER");
    }
    let own = launcher().ok();
    let sibling = sibling_of(own.as_deref());
    if let Some(sibling) = sibling.filter(|p| present(p)) {
        return executable(&sibling, "reinstall stockade or set $STOCKADE_RUNNER");
    }
    let in_prefix = own.as_deref().and_then(prefix_runner);
    if let Some(in_prefix) = in_prefix.as_ref().filter(|p| present(p)) {
        return executable(in_prefix, "reinstall stockade or set $STOCKADE_RUNNER");
    }
    executable(
        Path::new(LIBEXEC_RUNNER),
        "install it next to stockade, in ../libexec/stockade/ beside stockade's bin directory, or set $STOCKADE_RUNNER to its path",
    )
    .map_err(|e| match e {
        ControlError::RunnerMissing { path, hint, .. } => ControlError::RunnerMissing {
            path,
            hint,
            also: sibling_of(own.as_deref())
                .into_iter()
                .chain(in_prefix)
                .filter(|p| p != Path::new(LIBEXEC_RUNNER))
                .collect(),
        },
        other => other,
    })
}

fn sibling_of(launcher: Option<&Path>) -> Option<PathBuf> {
    launcher
        .and_then(Path::parent)
        .map(|dir| dir.join(RUNNER_NAME))
}

/// `PREFIX/libexec/stockade/stockade-runner` for a launcher at `PREFIX/bin/stockade`.
fn prefix_runner(launcher: &Path) -> Option<PathBuf> {
    let bin = launcher.parent()?;
    let prefix = bin.parent()?;
    Some(prefix.join("libexec/stockade").join(RUNNER_NAME))
}

/// Whether something is at `path`, or might be beyond a directory this user cannot
/// search (then the lookup stops there, to say so, rather than silently trying the next
/// place).
fn present(path: &Path) -> bool {
    match path.symlink_metadata() {
        Ok(_) => true,
        Err(e) => e.kind() == std::io::ErrorKind::PermissionDenied,
    }
}

fn executable(path: &Path, hint: &'static str) -> Result<PathBuf, ControlError> {
    use std::os::unix::fs::PermissionsExt;
    let missing = || ControlError::RunnerMissing {
        path: path.to_path_buf(),
        hint,
        also: Vec::new(),
    };
    let canonical = match path.canonicalize() {
        Ok(canonical) => canonical,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Err(unreachable(path));
        }
        Err(_) => return Err(missing()),
    };
    let meta = canonical.metadata().map_err(|_| missing())?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(missing());
    }
    if nix::unistd::access(&canonical, nix::unistd::AccessFlags::X_OK).is_err() {
        return Err(unreachable(&canonical));
    }
    Ok(canonical)
}

/// The runner at `path` exists or may, but this user cannot reach or execute it: which
/// directory (or the file itself) stops them, with its mode and owner.
fn unreachable(path: &Path) -> ControlError {
    use std::os::unix::fs::MetadataExt;
    let uid = nix::unistd::getuid().as_raw();
    let mut chain: Vec<&Path> = path.ancestors().collect();
    chain.reverse();
    let x_ok = |p: &Path| nix::unistd::access(p, nix::unistd::AccessFlags::X_OK).is_ok();
    let blocked = chain
        .into_iter()
        .find(|p| !x_ok(p))
        .unwrap_or(path)
        .to_path_buf();
    let how = std::fs::metadata(&blocked)
        .map(|m| format!("mode {:04o}, owner uid {}", m.mode() & 0o7777, m.uid()))
        .ok();
    ControlError::RunnerUnreachable {
        path: path.to_path_buf(),
        uid,
        blocked,
        how,
    }
}
