//! Which device files a confined command may read: the standard set every program
//! expects (`/dev/null`, `/dev/zero`, `/dev/urandom`, its own terminal as `/dev/tty`,
//! `/dev/shm`, ...), and nothing else beneath `/dev` while the default hidden set applies.
//!
//! Why an allow-list and not a list of dangerous devices: reading a device reaches past
//! the sandbox in ways no list keeps up with. A disk's raw bytes hold every hidden file
//! on it; a virtual console (`/dev/tty1`) or a serial console (`/dev/ttyS0`) hands its
//! reader the keys typed at it, a password at a login prompt among them; the consoles'
//! screen contents, input events, raw HID reports, SCSI and NVMe passthrough, a flash
//! chip, the kernel log. Every one of those a root command could open for reading when
//! the rule was "everything but the raw devices". A device that is not on this list is
//! refused whatever it is, including one that appears while the command runs (a loop
//! device attached by someone else): Landlock rules attach to the entries that exist
//! when they are made, and only the standard entries get one.
//!
//! It is also what keeps `/dev` cheap: the carve-out (see [`crate::hidden`]) gives a
//! rule to the few standard entries instead of to every node beside the hidden ones
//! (a hundred on a small VM, several hundred on a desktop).
//!
//! `/dev/pts` is not among them: the machine's pseudo-terminals are the invoking user's
//! other terminals (and, for root, everyone's), and reading one takes the keys typed
//! there, a password given to `sudo` in another window among them. Under the namespace
//! stage `/dev/pts` is a devpts instance of the command's own, which the runner grants
//! apart; without the stage a command reaches its own terminal as `/dev/tty` or through
//! the descriptors it inherits.
//!
//! Writing stays as it was: only `/dev/null` among them, and the command's own
//! terminals, `/dev/shm` and queues where the namespace stage made them private.
//! `--allow-device PATH` gives back one device file, read and written ([`resolve`]);
//! `--no-default-hide` gives back reading every device the invoking user can read.

use std::ffi::OsStr;
use std::fmt;
use std::path::{Component, Path, PathBuf};

/// Where device files live.
pub const DEVICE_TREE: &str = "/dev";

/// The entries of `/dev` a confined command may read (and list, for directories). The
/// links among them (`fd`, `stdin`, `stdout`, `stderr`) get no rule of their own: what
/// they lead to decides (see [`crate::hidden`]); they are listed so that a refusal
/// through one is not named as a device's.
pub const STANDARD: &[&str] = &[
    "fd", "full", "mqueue", "null", "ptmx", "random", "shm", "stderr", "stdin", "stdout", "tty",
    "urandom", "zero",
];

/// Whether the `/dev` entry `name` is one of the standard devices.
pub fn is_standard(name: &OsStr) -> bool {
    STANDARD.iter().any(|s| OsStr::new(s) == name)
}

/// The entry of `/dev` that `path` (absolute, lexically clean) is or lies beneath, when
/// it is not a standard one: what the allow-list refuses. `None` for `/dev` itself, a
/// standard entry (and anything beneath one) and every path outside `/dev`.
pub fn beyond_standard(path: &Path) -> Option<&OsStr> {
    let rest = path.strip_prefix(DEVICE_TREE).ok()?;
    match rest.components().next() {
        Some(Component::Normal(name)) if !is_standard(name) => Some(name),
        _ => None,
    }
}

/// Why an `--allow-device` path cannot be granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceError {
    /// It names no device file beneath `/dev` (`why` says what it is).
    NotADevice { path: PathBuf, why: String },
    /// It names a device inside a hidden path.
    Hidden { device: PathBuf, hidden: PathBuf },
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceError::NotADevice { path, why } => write!(
                f,
                "--allow-device {}: {why}; name a character or block device beneath /dev (such as /dev/kvm)",
                path.display()
            ),
            DeviceError::Hidden { device, hidden } => write!(
                f,
                "--allow-device {}: it lies in the hidden path {}; leave out the --hide that names it",
                device.display(),
                hidden.display()
            ),
        }
    }
}

/// The `--allow-device` paths `asked` (relative ones from `cwd`), each canonical (a link
/// is followed: `/dev/stdin` leads through `/proc` to whatever the caller's stdin is)
/// and a character or block device beneath `/dev`; sorted and unique. Anything else is an
/// error naming it: read and write access to a file or a directory is what `--writable`
/// grants, with its own checks.
///
/// Under the namespace stage (`staged`: unless `--no-stage`) `/dev/pts` is a devpts
/// instance of the command's own, empty when it starts: a terminal of the machine named
/// there is not what the command would find (and the runner could not open it), so it is
/// refused here, pointing at `--no-stage`.
pub fn resolve(asked: &[PathBuf], cwd: &Path, staged: bool) -> Result<Vec<PathBuf>, DeviceError> {
    use std::os::unix::fs::FileTypeExt;
    let mut devices = Vec::with_capacity(asked.len());
    for asked in asked {
        let path = cwd.join(asked);
        let not_a_device = |why: String| DeviceError::NotADevice {
            path: path.clone(),
            why,
        };
        let canonical = path
            .canonicalize()
            .map_err(|e| not_a_device(format!("cannot be resolved: {e}")))?;
        let beneath_dev = canonical
            .strip_prefix(DEVICE_TREE)
            .is_ok_and(|rest| !rest.as_os_str().is_empty());
        if !beneath_dev {
            return Err(not_a_device(format!(
                "it is {}, not beneath /dev",
                canonical.display()
            )));
        }
        let kind = std::fs::metadata(&canonical)
            .map_err(|e| not_a_device(format!("cannot be examined: {e}")))?
            .file_type();
        if !(kind.is_char_device() || kind.is_block_device()) {
            return Err(not_a_device("it is not a device file".into()));
        }
        if staged && canonical.starts_with(crate::stage::PTS) {
            return Err(not_a_device(
                "a terminal of the machine, which the namespace stage keeps out of sight (its /dev/pts is the command's own); add --no-stage to grant it".into(),
            ));
        }
        devices.push(canonical);
    }
    devices.sort();
    devices.dedup();
    Ok(devices)
}

/// Refuses a device that lies in a hidden path: hiding wins, and a grant that silently
/// did nothing would surprise.
pub fn none_hidden(devices: &[PathBuf], hidden: &[PathBuf]) -> Result<(), DeviceError> {
    for device in devices {
        if let Some(h) = hidden.iter().find(|h| device.starts_with(h)) {
            return Err(DeviceError::Hidden {
                device: device.clone(),
                hidden: h.clone(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_devices_and_what_lies_beneath_them_are_not_beyond() {
        for p in [
            "/dev",
            "/dev/null",
            "/dev/urandom",
            "/dev/shm/x/y",
            "/dev/stdout",
            "/etc/passwd",
            "/device/sda",
        ] {
            assert_eq!(beyond_standard(Path::new(p)), None, "{p}");
        }
    }

    #[test]
    fn consoles_disks_and_the_rest_are_beyond() {
        for (p, entry) in [
            ("/dev/tty1", "tty1"),
            ("/dev/ttyS0", "ttyS0"),
            ("/dev/pts/3", "pts"),
            ("/dev/sda", "sda"),
            ("/dev/input/event0", "input"),
            ("/dev/kmsg", "kmsg"),
            ("/dev/nulls", "nulls"),
        ] {
            assert_eq!(
                beyond_standard(Path::new(p)),
                Some(OsStr::new(entry)),
                "{p}"
            );
        }
    }

    #[test]
    fn an_allowed_device_is_a_device_file_beneath_dev_and_nothing_else() {
        let dev = |p: &str| PathBuf::from(p);
        let got = resolve(
            &[dev("null"), dev("/dev/zero"), dev("/dev/null")],
            Path::new("/dev"),
            true,
        );
        assert_eq!(got.unwrap(), [dev("/dev/null"), dev("/dev/zero")]);
        for (p, why) in [
            ("/etc/hostname", "it is /etc/hostname, not beneath /dev"),
            ("/dev", "it is /dev, not beneath /dev"),
            ("/dev/stockade-none", "cannot be resolved"),
        ] {
            match resolve(&[dev(p)], Path::new("/"), false) {
                Err(DeviceError::NotADevice { path, why: w }) => {
                    assert_eq!(path, dev(p));
                    assert!(w.starts_with(why), "{p}: {w}");
                }
                other => panic!("{p}: {other:?}"),
            }
        }
        let hidden = none_hidden(&[dev("/dev/kvm")], &[dev("/dev")]);
        assert!(matches!(hidden, Err(DeviceError::Hidden { .. })));
        assert_eq!(
            none_hidden(&[dev("/dev/kvm")], &[dev("/root/.ssh")]),
            Ok(())
        );
    }
}
