//! What every connection of the proxy shares: its configuration and bounds, the state
//! the connection threads count themselves in, and the bounded reads and writes each
//! protocol's handler uses on the client's socket.

use super::record::Record;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};
use stockade_policy::domains::{DomainRules, Host, Refusal};
use stockade_policy::network_denials::NetworkDenial;

/// The bounds that keep one client from exhausting the proxy.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Connections handled at once; more are closed as they arrive.
    pub max_connections: usize,
    /// The largest request head (HTTP request line and headers, or SOCKS handshake).
    pub max_head: usize,
    /// How long a client may take to send its whole request head.
    pub head_time: Duration,
    /// How long connecting to the destination may take (each address).
    pub connect_time: Duration,
    /// How long a tunnel may carry nothing in either direction before it is closed.
    pub idle_time: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 128,
            max_head: 32 * 1024,
            head_time: Duration::from_secs(15),
            connect_time: Duration::from_secs(15),
            idle_time: Duration::from_secs(15 * 60),
        }
    }
}

/// What a running proxy decides with.
pub struct Config {
    pub rules: DomainRules,
    pub record: Arc<Record>,
    pub limits: Limits,
}

/// The state every connection thread shares.
pub(super) struct Shared {
    pub(super) config: Config,
    pub(super) active: AtomicUsize,
}

impl Shared {
    /// Records a refusal.
    pub(super) fn refused(&self, host: &Host, port: u16, why: Refusal) {
        self.config
            .record
            .refused(NetworkDenial::new(host, port, why));
    }
}

/// Stack size of a connection thread: it parses a bounded head and copies through heap
/// buffers, so it needs little.
pub(super) const CONNECTION_STACK: usize = 128 * 1024;

/// One read that gives up at `deadline` (an error of kind `TimedOut`).
pub(super) fn read_before(
    mut stream: &TcpStream,
    buf: &mut [u8],
    deadline: Instant,
) -> io::Result<usize> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(io::ErrorKind::TimedOut.into());
            }
            other => return other,
        }
    }
}

/// Fills `buf` before `deadline`, or fails (`UnexpectedEof` when the client closed).
pub(super) fn read_exact_before(
    stream: &TcpStream,
    buf: &mut [u8],
    deadline: Instant,
) -> io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        match read_before(stream, &mut buf[filled..], deadline)? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => filled += n,
        }
    }
    Ok(())
}

/// Writes a short answer to the client, giving up after `limit` (a client that does
/// not read must not hold the thread).
pub(super) fn answer(mut stream: &TcpStream, bytes: &[u8], limit: Duration) -> io::Result<()> {
    stream.set_write_timeout(Some(limit))?;
    stream.write_all(bytes)
}
