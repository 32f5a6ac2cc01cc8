//! The spare private directory: one made ahead by a process that answers many requests
//! (`stockade serve`), while its caller runs the previous command, so that the next
//! request finds its directory and files made and only writes them.
//!
//! A spare is taken only for the control base it was made in, only while it is younger
//! than `SPARE_KEPT_FOR` (its name carries its creation time, from which the sweep
//! reckons its command's age) and only
//! while it is still as it was made (`PrivateDir::intact`); otherwise it is removed and
//! the request makes a fresh directory. A process that never calls `prepare` (every
//! `confine`, `run`) has none, and makes each directory as it needs it.

use crate::control::private_dir::{PrivateDir, SPARE_KEPT_FOR};
use crate::error::LauncherError;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

struct Spare {
    base: PathBuf,
    made: Instant,
    dir: PrivateDir,
}

static SPARE: Mutex<Option<Spare>> = Mutex::new(None);

/// Makes the spare for `base`, unless one is kept already; a failure leaves none (the
/// next request makes its own directory and reports what went wrong).
pub fn prepare(base: &Path) {
    let Ok(mut slot) = SPARE.lock() else {
        return;
    };
    if slot
        .as_ref()
        .is_some_and(|s| s.base == base && s.made.elapsed() < SPARE_KEPT_FOR)
    {
        return;
    }
    if let Some(old) = slot.take() {
        old.dir.remove();
    }
    if let Ok(dir) = PrivateDir::create_ahead(base) {
        *slot = Some(Spare {
            base: base.to_path_buf(),
            made: Instant::now(),
            dir,
        });
    }
}

/// A private directory for one request: the spare made ahead for `base` when there is
/// one, else a fresh one.
pub fn take_or_create(base: &Path) -> Result<PrivateDir, LauncherError> {
    match take(base) {
        Some(dir) => Ok(dir),
        None => PrivateDir::create(base),
    }
}

/// The spare, when there is a young and intact one for `base`; one that is not is
/// removed.
fn take(base: &Path) -> Option<PrivateDir> {
    let spare = SPARE.lock().ok()?.take()?;
    if spare.base == base && spare.made.elapsed() < SPARE_KEPT_FOR && spare.dir.intact() {
        return Some(spare.dir);
    }
    spare.dir.remove();
    None
}

/// Removes the spare, if any (a process that made one ends).
pub fn discard() {
    if let Some(spare) = SPARE.lock().ok().and_then(|mut s| s.take()) {
        spare.dir.remove();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // One test: the spare is one slot for the whole process.
    #[test]
    fn a_spare_is_taken_for_its_own_base_while_intact_and_removed_otherwise() {
        let base = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        // Private directories (the sweep's stamp is the base's own).
        let dirs = |b: &Path| {
            std::fs::read_dir(b)
                .unwrap()
                .filter(|e| {
                    e.as_ref()
                        .unwrap()
                        .file_name()
                        .to_string_lossy()
                        .starts_with("req-")
                })
                .count()
        };
        prepare(base.path());
        assert_eq!(dirs(base.path()), 1);
        // Kept, not made again.
        prepare(base.path());
        assert_eq!(dirs(base.path()), 1);
        let taken = take(base.path()).expect("the spare");
        assert!(taken.path().starts_with(base.path()));
        assert!(take(base.path()).is_none(), "taken twice");
        taken.remove();
        // Another base: not taken, and removed.
        prepare(base.path());
        assert!(take(other.path()).is_none());
        assert_eq!(dirs(base.path()), 0);
        // Changed after it was made: not taken, and removed.
        prepare(base.path());
        let path = std::fs::read_dir(base.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("req-"))
            .unwrap();
        std::fs::write(path.join("request"), "planted").unwrap();
        assert!(take(base.path()).is_none());
        assert!(!path.exists(), "a changed spare was left");
        // Discarded: nothing left.
        prepare(base.path());
        discard();
        assert_eq!(dirs(base.path()), 0);
    }
}
