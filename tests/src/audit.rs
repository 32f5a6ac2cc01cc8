//! Audit on for the duration of a test (the machine's setting put back after), for the
//! tests of attribution from Landlock's audit records. stockade never turns audit on;
//! a test does, here, as root, and only when it was off. One holder at a time across
//! processes (an exclusive lock), so no test turns it off under another.

use std::fs::File;
use std::os::fd::AsRawFd;

/// Audit enabled while this lives; dropping it puts back what was there.
pub struct AuditOn {
    was: bool,
    _lock: File,
}

/// Turns audit on (root only); `Err` says why it cannot be.
pub fn on() -> Result<AuditOn, String> {
    let lock = lock()?;
    let was = enabled().ok_or("cannot ask whether audit is enabled (AUDIT_GET)")?;
    if !was {
        set(true)?;
    }
    Ok(AuditOn { was, _lock: lock })
}

/// Holds the lock with audit as it is; `Some(true)` when it is on.
pub fn held() -> Result<(Option<bool>, File), String> {
    let lock = lock()?;
    Ok((enabled(), lock))
}

impl Drop for AuditOn {
    fn drop(&mut self) {
        if !self.was {
            let _ = set(false);
        }
    }
}

fn lock() -> Result<File, String> {
    const LOCK: &str = "/tmp/stockade-tests-audit.lock";
    // Another user's lock file (root's, mode 0644) is locked through a read-only open.
    let f = File::create(LOCK)
        .or_else(|_| File::open(LOCK))
        .map_err(|e| e.to_string())?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    Ok(f)
}

fn socket() -> Option<i32> {
    // SAFETY: plain socket and bind calls on a fresh descriptor; the address is a
    // zeroed sockaddr_nl with its family set.
    unsafe {
        let fd = libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_AUDIT,
        );
        if fd < 0 {
            return None;
        }
        let mut addr: libc::sockaddr_nl = std::mem::zeroed();
        addr.nl_family = libc::AF_NETLINK as u16;
        let len = std::mem::size_of::<libc::sockaddr_nl>() as u32;
        if libc::bind(fd, (&addr as *const libc::sockaddr_nl).cast(), len) != 0 {
            libc::close(fd);
            return None;
        }
        Some(fd)
    }
}

/// One request (`kind`, `body`) and its replies: the status for AUDIT_GET, the ack code.
fn ask(kind: u16, body: &[u8]) -> Option<(i32, Option<u32>)> {
    let fd = socket()?;
    let mut msg = Vec::new();
    msg.extend_from_slice(&(16 + body.len() as u32).to_ne_bytes());
    msg.extend_from_slice(&kind.to_ne_bytes());
    msg.extend_from_slice(&(1u16 | 4).to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend_from_slice(body);
    let mut buf = vec![0u8; 9000];
    let mut out = (0, None);
    // SAFETY: send and recv on our descriptor with buffers valid for their lengths.
    unsafe {
        if libc::send(fd, msg.as_ptr().cast(), msg.len(), 0) < 0 {
            libc::close(fd);
            return None;
        }
        for _ in 0..2 {
            let n = libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0);
            if n < 20 {
                break;
            }
            match u16::from_ne_bytes([buf[4], buf[5]]) {
                2 => {
                    out.0 = i32::from_ne_bytes([buf[16], buf[17], buf[18], buf[19]]);
                    if kind != 1000 || out.0 != 0 {
                        break;
                    }
                }
                1000 => {
                    out.1 = Some(u32::from_ne_bytes([buf[20], buf[21], buf[22], buf[23]]));
                    break;
                }
                _ => break,
            }
        }
        libc::close(fd);
    }
    Some(out)
}

/// Whether audit is enabled (`AUDIT_GET`).
pub fn enabled() -> Option<bool> {
    ask(1000, &[]).and_then(|(_, s)| s).map(|e| e != 0)
}

/// `AUDIT_SET` of `enabled` (struct audit_status: mask AUDIT_STATUS_ENABLED, enabled).
fn set(on: bool) -> Result<(), String> {
    let mut body = vec![0u8; 44];
    body[0..4].copy_from_slice(&1u32.to_ne_bytes());
    body[4..8].copy_from_slice(&u32::from(on).to_ne_bytes());
    match ask(1001, &body) {
        Some((0, _)) => Ok(()),
        Some((code, _)) => Err(format!("AUDIT_SET refused: errno {}", -code)),
        None => Err("cannot reach the audit netlink socket".into()),
    }
}
