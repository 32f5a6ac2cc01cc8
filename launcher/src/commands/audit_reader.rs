//! Reading Landlock's audit records for the command `stockade run` supervises: the audit
//! netlink socket's read-only multicast group (`AUDIT_NLGRP_READLOG`), which any process
//! holding `CAP_AUDIT_READ` may join beside (or without) auditd. Which records are the
//! command's is `stockade_policy::landlock_audit`'s decision.
//!
//! The kernel records Landlock's refusals only while audit is enabled: the launcher never
//! turns it on (that would be a change to the whole machine's logging, and another
//! run's reader could turn it off under this one); where it is off, or the records
//! cannot be read, the refusals are named from the command's lines (`policy-check`), and
//! the run's `attribution` says why.

use nix::sys::socket::{
    AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, bind, recv, send,
    setsockopt, socket, sockopt,
};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};
use stockade_policy::landlock_audit::{self, Collector};

/// `AUDIT_NLGRP_READLOG` (linux/audit.h): the group every record is multicast to.
const READLOG_GROUP: u32 = 1;
/// `AUDIT_GET` (linux/audit.h): asks for `struct audit_status`.
const AUDIT_GET: u16 = 1000;
/// `NLMSG_ERROR`.
const NLMSG_ERROR: u16 = 2;
/// The receive buffer asked for: room for some ten thousand records between two reads.
const RECEIVE_BUFFER: usize = 4 << 20;
/// The largest record the kernel sends (`MAX_AUDIT_MESSAGE_LENGTH`), with its header.
const MAX_MESSAGE: usize = 8970 + 16;
/// Reads per wake-up of the supervision loop, so a flood cannot starve the rest of it.
const READS_PER_WAKE: usize = 256;
/// How long after the command settled the launcher waits for its domain's last record
/// (the kernel frees the domain, and says so, a few milliseconds after its last process
/// ends).
pub const SETTLE_WAIT: Duration = Duration::from_secs(2);

/// The open socket and what it collected.
pub struct AuditReader {
    socket: OwnedFd,
    buf: Vec<u8>,
    pub collector: Collector,
}

impl AuditReader {
    /// Joins the multicast group, when this kernel records Landlock's refusals after
    /// `execve` (`abi` >= 7), the caller may read the records and audit is not known to
    /// be off. `Err`: why the records will not be read.
    pub fn open(abi: u32) -> Result<AuditReader, String> {
        if abi < 7 {
            return Err(format!(
                "Landlock ABI {abi} records no refusal after the command starts (ABI 7, Linux 6.15, does)"
            ));
        }
        let socket = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
            SockProtocol::NetlinkAudit,
        )
        .map_err(|e| format!("the audit netlink socket is unavailable ({e})"))?;
        if let Err(e) = bind(socket.as_raw_fd(), &NetlinkAddr::new(0, READLOG_GROUP)) {
            return Err(match e {
                nix::errno::Errno::EPERM => {
                    "reading the audit log needs CAP_AUDIT_READ, which this process lacks".into()
                }
                e => format!("cannot join the audit log's read-only group ({e})"),
            });
        }
        if enabled() == Some(false) {
            return Err(
                "audit is off on this machine (`auditctl -e 1` turns it on; stockade does not)"
                    .into(),
            );
        }
        // Root may raise the buffer past the system's limit; anyone else gets the limit.
        if setsockopt(&socket, sockopt::RcvBufForce, &RECEIVE_BUFFER).is_err() {
            let _ = setsockopt(&socket, sockopt::RcvBuf, &RECEIVE_BUFFER);
        }
        Ok(AuditReader {
            socket,
            buf: vec![0u8; MAX_MESSAGE],
            collector: Collector::new(&new_tag()),
        })
    }

    /// The tag the runner restricts itself under.
    pub fn tag(&self) -> String {
        self.collector.tag().to_string()
    }

    /// Reads what is waiting, at most [`READS_PER_WAKE`] records.
    pub fn read_ready(&mut self) {
        for _ in 0..READS_PER_WAKE {
            match recv(
                self.socket.as_raw_fd(),
                &mut self.buf,
                MsgFlags::MSG_DONTWAIT,
            ) {
                Ok(n) => feed(&mut self.collector, &self.buf[..n]),
                // The buffer overflowed: records were dropped (the domain's own count,
                // when it is freed, still says how many refusals there were).
                Err(nix::errno::Errno::ENOBUFS) => self.collector.collected.lost = true,
                Err(nix::errno::Errno::EINTR) => {}
                Err(_) => return,
            }
        }
    }

    /// After the command settled: reads until its domain is freed, or `wait` passed.
    /// `false` when the domain's end was not seen (processes of the command still
    /// running, or records lost).
    pub fn finish(&mut self, wait: Duration) -> bool {
        let start = Instant::now();
        let until = start + wait;
        loop {
            self.read_ready();
            let left = until.saturating_duration_since(Instant::now());
            // The runner's probe was recorded before the command started: with no
            // record of it by now, none is coming.
            let unknown = self.collector.collected.domain.is_none() && start.elapsed() > wait / 20;
            if self.collector.finished() || left.is_zero() || unknown {
                break;
            }
            let mut fds = [nix::poll::PollFd::new(
                self.socket.as_fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
            let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms));
        }
        self.collector.finished()
    }
}

/// Each netlink message in `datagram` given to `collector`.
fn feed(collector: &mut Collector, datagram: &[u8]) {
    let mut at = datagram;
    while at.len() >= 16 {
        let len = u32::from_ne_bytes([at[0], at[1], at[2], at[3]]) as usize;
        let kind = u16::from_ne_bytes([at[4], at[5]]);
        if !(16..=at.len()).contains(&len) {
            return;
        }
        if kind == landlock_audit::LANDLOCK_ACCESS || kind == landlock_audit::LANDLOCK_DOMAIN {
            collector.feed(kind, &String::from_utf8_lossy(&at[16..len]));
        }
        at = &at[len.next_multiple_of(4).min(at.len())..];
    }
}

/// Whether audit is enabled (`AUDIT_GET`, which needs `CAP_AUDIT_CONTROL`); `None` when
/// that cannot be asked: the records themselves then tell.
fn enabled() -> Option<bool> {
    let s = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkAudit,
    )
    .ok()?;
    bind(s.as_raw_fd(), &NetlinkAddr::new(0, 0)).ok()?;
    let timeout = nix::sys::time::TimeVal::new(1, 0);
    setsockopt(&s, sockopt::ReceiveTimeout, &timeout).ok()?;
    // struct nlmsghdr: length, type, flags (NLM_F_REQUEST | NLM_F_ACK), sequence, port.
    let mut request = Vec::with_capacity(16);
    request.extend_from_slice(&16u32.to_ne_bytes());
    request.extend_from_slice(&AUDIT_GET.to_ne_bytes());
    request.extend_from_slice(&(1u16 | 4).to_ne_bytes());
    request.extend_from_slice(&1u32.to_ne_bytes());
    request.extend_from_slice(&0u32.to_ne_bytes());
    send(s.as_raw_fd(), &request, MsgFlags::empty()).ok()?;
    let mut buf = vec![0u8; MAX_MESSAGE];
    // The acknowledgement, then the status (or an error in place of both).
    for _ in 0..2 {
        let n = recv(s.as_raw_fd(), &mut buf, MsgFlags::empty()).ok()?;
        if n < 20 {
            return None;
        }
        match u16::from_ne_bytes([buf[4], buf[5]]) {
            NLMSG_ERROR => {
                let code = i32::from_ne_bytes([buf[16], buf[17], buf[18], buf[19]]);
                if code != 0 {
                    return None;
                }
            }
            // struct audit_status: mask, then enabled.
            AUDIT_GET if n >= 24 => {
                return Some(u32::from_ne_bytes([buf[20], buf[21], buf[22], buf[23]]) != 0);
            }
            _ => return None,
        }
    }
    None
}

/// A fresh tag from the kernel's random numbers (a tag is an identity among concurrent
/// runs, not a secret: a short read leaves it less random, never wrong).
fn new_tag() -> String {
    let mut bytes = [0u8; 8];
    // SAFETY: getrandom writes at most `bytes.len()` bytes into `bytes`.
    let _ = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    landlock_audit::tag_from(u64::from_ne_bytes(bytes) ^ u64::from(std::process::id()))
}

impl crate::supervise::SideReader for AuditReader {
    fn fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }

    fn read_ready(&mut self) {
        AuditReader::read_ready(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(kind: u16, text: &str) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&(16 + text.len() as u32).to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(text.as_bytes());
        while m.len() % 4 != 0 {
            m.push(0);
        }
        m
    }

    #[test]
    fn every_message_of_a_datagram_is_read_and_a_bad_length_stops_the_reading() {
        let mut c = Collector::new("stk-0123456789a");
        let mut d = message(
            landlock_audit::LANDLOCK_ACCESS,
            "audit(1.1:1): domain=b blockers=scope.signal opid=2 ocomm=\"x\"",
        );
        d.extend(message(
            landlock_audit::LANDLOCK_DOMAIN,
            "audit(1.1:1): domain=b status=allocated mode=enforcing pid=3 uid=0 exe=\"/r\" comm=\"stk-0123456789a\"",
        ));
        d.extend(message(1300, "audit(1.1:1): arch=c000003e syscall=62"));
        d.extend(message(
            landlock_audit::LANDLOCK_ACCESS,
            "audit(1.1:2): domain=b blockers=fs.make_reg path=\"/etc\" dev=\"vda\" ino=1",
        ));
        feed(&mut c, &d);
        assert_eq!((c.collected.domain, c.collected.pid), (Some(0xb), Some(3)));
        assert_eq!(c.collected.refused.len(), 1);
        // A length past the datagram: nothing past it is read, nothing panics.
        let mut bad = message(landlock_audit::LANDLOCK_ACCESS, "audit(1.1:3): domain=b");
        bad[0..4].copy_from_slice(&9999u32.to_ne_bytes());
        feed(&mut c, &bad);
        feed(&mut c, &[1, 2, 3]);
        assert_eq!(c.collected.refused.len(), 1);
    }
}
