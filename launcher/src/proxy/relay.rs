//! Copying a tunnel's bytes both ways, in one thread, without either direction waiting
//! on the other: both sockets are non-blocking, each direction has its own buffer, and
//! one `poll` waits for whatever can move next. A peer that stops reading stalls only
//! its own direction (its buffer stays full), never the other one.
//!
//! An end of file in one direction is passed on as a half close (`shutdown(Write)`), so
//! protocols that finish sending before they read the answer keep working. The tunnel
//! ends when both directions are done, on any error, or after `idle` without traffic.

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsFd;
use std::time::Duration;

/// Bytes in flight per direction.
const BUFFER: usize = 256 * 1024;

/// One direction of the tunnel.
struct Direction {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// The source reached end of file.
    eof: bool,
    /// The end of file was passed on to the destination.
    closed: bool,
}

impl Direction {
    fn new(initial: Vec<u8>) -> Direction {
        let end = initial.len();
        let mut buf = initial;
        buf.resize(BUFFER.max(end), 0);
        Direction {
            buf,
            start: 0,
            end,
            eof: false,
            closed: false,
        }
    }

    fn pending(&self) -> bool {
        self.start < self.end
    }

    fn wants_read(&self) -> bool {
        !self.eof && !self.pending()
    }

    /// Reads what the source has. `Ok(false)`: nothing moved.
    fn fill(&mut self, mut src: &TcpStream) -> io::Result<bool> {
        if !self.wants_read() {
            return Ok(false);
        }
        match src.read(&mut self.buf) {
            Ok(0) => {
                self.eof = true;
                Ok(true)
            }
            Ok(n) => {
                self.start = 0;
                self.end = n;
                Ok(true)
            }
            Err(e) if retry(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Writes what is buffered; passes an end of file on once everything is written.
    fn drain(&mut self, mut dst: &TcpStream) -> io::Result<bool> {
        let mut moved = false;
        while self.pending() {
            match dst.write(&self.buf[self.start..self.end]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.start += n;
                    moved = true;
                }
                Err(e) if retry(&e) => return Ok(moved),
                Err(e) => return Err(e),
            }
        }
        if self.eof && !self.closed {
            self.closed = true;
            let _ = dst.shutdown(Shutdown::Write);
            moved = true;
        }
        Ok(moved)
    }

    fn done(&self) -> bool {
        self.closed
    }
}

fn retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

/// Copies between `client` and `server` until both directions end, an error, or `idle`
/// passes without any byte moving. `to_server` is sent to the server first (what the
/// client sent after its request head, or a rewritten head).
pub fn relay(client: &TcpStream, server: &TcpStream, to_server: Vec<u8>, idle: Duration) {
    if client.set_nonblocking(true).is_err() || server.set_nonblocking(true).is_err() {
        return;
    }
    let mut up = Direction::new(to_server);
    let mut down = Direction::new(Vec::new());
    let timeout = PollTimeout::try_from(idle.as_millis().min(i32::MAX as u128) as i32)
        .unwrap_or(PollTimeout::MAX);
    loop {
        let step = (|| -> io::Result<bool> {
            let mut moved = up.fill(client)?;
            moved |= up.drain(server)?;
            moved |= down.fill(server)?;
            moved |= down.drain(client)?;
            Ok(moved)
        })();
        match step {
            Err(_) => return,
            Ok(_) if up.done() && down.done() => return,
            // Something moved: try again before waiting (more may be ready).
            Ok(true) => continue,
            Ok(false) => {}
        }
        let mut client_events = PollFlags::empty();
        let mut server_events = PollFlags::empty();
        if up.wants_read() {
            client_events |= PollFlags::POLLIN;
        }
        if up.pending() {
            server_events |= PollFlags::POLLOUT;
        }
        if down.wants_read() {
            server_events |= PollFlags::POLLIN;
        }
        if down.pending() {
            client_events |= PollFlags::POLLOUT;
        }
        let mut fds = [
            PollFd::new(client.as_fd(), client_events),
            PollFd::new(server.as_fd(), server_events),
        ];
        match poll(&mut fds, timeout) {
            Ok(0) => return,
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => {}
            Err(_) => return,
        }
        // An error, or a hang-up on a socket nothing was asked of, would be reported
        // again by every poll without any read or write to clear it: the tunnel is over.
        let asked = [client_events, server_events];
        for (fd, asked) in fds.iter().zip(asked) {
            let got = fd.revents().unwrap_or(PollFlags::POLLERR);
            if got.intersects(PollFlags::POLLERR | PollFlags::POLLNVAL)
                || (got.contains(PollFlags::POLLHUP) && asked.is_empty())
            {
                return;
            }
        }
    }
}
