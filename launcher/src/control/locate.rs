//! Finding `stockade-runner`: `$STOCKADE_RUNNER` when set, else next to this executable
//! (so `cargo build` output works without installing), else the distro's libexec path.

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

/// The absolute, canonical path of the runner to put in ConfinedArgv.
pub fn runner() -> Result<PathBuf, LauncherError> {
    if let Some(explicit) = std::env::var_os(RUNNER_ENV).filter(|v| !v.is_empty()) {
        return executable(Path::new(&explicit), "check $STOCKADE_RUNNER");
    }
    let sibling = launcher()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(RUNNER_NAME)));
    if let Some(sibling) = sibling.filter(|p| p.exists()) {
        return executable(&sibling, "reinstall stockade or set $STOCKADE_RUNNER");
    }
    executable(
        Path::new(LIBEXEC_RUNNER),
        "install it next to stockade or set $STOCKADE_RUNNER to its path",
    )
}

fn executable(path: &Path, hint: &'static str) -> Result<PathBuf, LauncherError> {
    use std::os::unix::fs::PermissionsExt;
    let missing = || ControlError::RunnerMissing {
        path: path.to_path_buf(),
        hint,
    };
    let canonical = path.canonicalize().map_err(|_| missing())?;
    let meta = canonical.metadata().map_err(|_| missing())?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(missing().into());
    }
    Ok(canonical)
}
