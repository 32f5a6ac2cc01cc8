//! Copying a tunnel's bytes both ways: one thread per direction, each moving what its
//! source has to its destination, so a peer that stops reading stalls only its own
//! direction, never the other one.
//!
//! The bytes go through a pipe with `splice(2)` where one can be made: the kernel moves
//! page references from one socket to the other and the proxy never copies the payload
//! through its own memory. Without a pipe (out of descriptors) a buffer is used instead,
//! the same way. A tunnel costs one more TCP hop than a direct connection (received
//! from the server, sent to the client): on loopback that is CPU, about what the
//! server's side of the hop costs, and on a 2-core machine shared by server, proxy and
//! client the three processes' work bounds a transfer through the proxy to 72-100% of a
//! direct one across runs, however the relay takes its turns (bench/results.md, 3b,
//! solves each process's cost from pinned runs and lists the relay variants measured: a
//! buffer instead of the pipe was 10% slower; two threads per direction, other pipe
//! sizes, batched wake-ups and the threads as `SCHED_BATCH` were within the noise,
//! `SCHED_IDLE` slower; a BPF sockmap redirecting the bytes
//! inside the kernel, which needs root, was no faster and cannot pass an end of file on).
//!
//! An end of file in one direction is passed on as a half close (`shutdown(Write)`), so
//! protocols that finish sending before they read the answer keep working. The tunnel
//! ends when both directions are done, on any error in either (both sockets are shut
//! down, which wakes the other direction), or after `idle` without a byte moving either
//! way: a direction that waits longer than `idle` for its source looks at when the
//! other one last moved, and a write blocked that long fails (`SO_SNDTIMEO`).

use nix::fcntl::{FcntlArg, OFlag, SpliceFFlags, fcntl, splice};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Bytes moved per step, and the pipe's capacity when the kernel grants it (an
/// ordinary user may be refused past the default 64 KiB once their pipes hold
/// `pipe-user-pages-soft`: the default then serves, in more steps). What a tunnel whose
/// destination stops reading holds is mostly its sockets' buffers (the kernel grows
/// each to several MiB, within its global TCP memory limit); the pipe adds at most
/// this per direction. A 256 KiB pipe measured 5-10% slower on loopback.
const CHUNK: usize = 1024 * 1024;

/// What a tunnel's sockets may queue unsent (`TCP_NOTSENT_LOWAT`): a write waits while
/// this much is queued and not yet sent. Left alone, the kernel grows a busy socket's
/// send buffer up to `tcp_wmem`'s maximum, and a command that opened every tunnel it
/// may to a fast server and never read would park that much per tunnel in the host's
/// shared TCP memory on the proxy's side. What the proxy's receiving sockets hold is
/// not bounded here: their window, once the kernel's autotuning has grown it, is not
/// shrunk by a later clamp (TCP never takes back window it advertised), and a fixed
/// `SO_RCVBUF` would turn autotuning off and is capped at `net.core.rmem_max` (208 KiB
/// on most machines, 8 MB/s at 50 ms of round trip). The connection limit bounds the
/// sum instead (README: the proxy's bounds).
const UNSENT: u32 = 512 * 1024;

/// Sets a TCP option whose value is an `int` (nix names neither `TCP_WINDOW_CLAMP` nor
/// `TCP_NOTSENT_LOWAT`).
fn set_tcp_option(s: &TcpStream, option: libc::c_int, value: u32) -> io::Result<()> {
    let value = value as libc::c_int;
    // SAFETY: setsockopt reads `size_of::<c_int>()` bytes from `value`, alive across the
    // call, on a descriptor `s` owns.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            option,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// When either direction last moved a byte, in milliseconds since the tunnel began.
struct Clock {
    start: Instant,
    last: AtomicU64,
}

impl Clock {
    fn touch(&self) {
        let now = self.start.elapsed().as_millis() as u64;
        self.last.fetch_max(now, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        let now = self.start.elapsed().as_millis() as u64;
        Duration::from_millis(now.saturating_sub(self.last.load(Ordering::Relaxed)))
    }
}

/// Where a direction holds the bytes between its source and its destination.
enum Carrier {
    /// A pipe: `splice` in from the source, out to the destination.
    Pipe { read: OwnedFd, write: OwnedFd },
    /// A buffer: `read` and `write`.
    Buffer(Vec<u8>),
}

impl Carrier {
    fn new(pipe: bool) -> Carrier {
        if pipe && let Ok((read, write)) = nix::unistd::pipe2(OFlag::O_CLOEXEC) {
            let _ = fcntl(&write, FcntlArg::F_SETPIPE_SZ(CHUNK as i32));
            return Carrier::Pipe { read, write };
        }
        Carrier::Buffer(vec![0; CHUNK])
    }

    /// Moves what `src` has now (at least one byte, or the end of file: `Ok(false)`)
    /// to `dst`, all of it.
    fn step(&mut self, mut src: &TcpStream, mut dst: &TcpStream) -> io::Result<bool> {
        match self {
            Carrier::Pipe { read, write } => {
                // The pipe is empty here (every step drains it), so this never waits on
                // the pipe; the source has data or an end of file (it polled ready).
                let mut held =
                    splice(src, None, &*write, None, CHUNK, SpliceFFlags::SPLICE_F_MOVE)?;
                if held == 0 {
                    // Not necessarily the end: TCP's `splice` stops in front of an
                    // urgent byte and answers 0 for as long as it is next, which would
                    // end this direction early and drop what follows. A read that does
                    // not wait tells: 0 is the end of file; else it steps over the
                    // urgent byte (dropped, as a plain read drops it) and returns what
                    // follows, or nothing yet (`WouldBlock`, tried again when the source
                    // polls ready, which a lone urgent byte does not make it).
                    let mut small = [0u8; 4096];
                    let n = nix::sys::socket::recv(
                        src.as_raw_fd(),
                        &mut small,
                        nix::sys::socket::MsgFlags::MSG_DONTWAIT,
                    )?;
                    if n == 0 {
                        return Ok(false);
                    }
                    dst.write_all(&small[..n])?;
                    return Ok(true);
                }
                while held > 0 {
                    let n = splice(&*read, None, dst, None, held, SpliceFFlags::SPLICE_F_MOVE)?;
                    if n == 0 {
                        return Err(io::ErrorKind::WriteZero.into());
                    }
                    held -= n;
                }
                Ok(true)
            }
            Carrier::Buffer(buf) => {
                let n = src.read(buf)?;
                if n == 0 {
                    return Ok(false);
                }
                dst.write_all(&buf[..n])?;
                Ok(true)
            }
        }
    }
}

/// One direction: `src` to `dst` until the end of file (passed on as a half close) or
/// the tunnel's end. Returns whether it ended cleanly.
fn pump(src: &TcpStream, dst: &TcpStream, idle: Duration, clock: &Clock, pipe: bool) -> bool {
    let mut carrier = Carrier::new(pipe);
    loop {
        // Wait for the source, at most until the tunnel as a whole has been idle for
        // `idle` (the other direction may be busy all along: a download sends nothing up).
        let wait = idle.saturating_sub(clock.idle_for());
        if wait.is_zero() {
            return false;
        }
        let timeout = PollTimeout::try_from(wait.as_millis().clamp(1, i32::MAX as u128) as i32)
            .unwrap_or(PollTimeout::MAX);
        let mut fds = [PollFd::new(src.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
            Ok(_) => {}
            Err(_) => return false,
        }
        match carrier.step(src, dst) {
            Ok(true) => clock.touch(),
            Ok(false) => {
                let _ = dst.shutdown(Shutdown::Write);
                return true;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
                ) => {}
            // A reset, a write that waited `idle` (SO_SNDTIMEO), a peer gone.
            Err(_) => return false,
        }
    }
}

/// Copies between `client` and `server` until both directions end, an error, or `idle`
/// passes without any byte moving. `to_server` is sent to the server first (what the
/// client sent after its request head, or a rewritten head).
pub fn relay(client: &TcpStream, server: &TcpStream, to_server: Vec<u8>, idle: Duration) {
    relay_with(client, server, to_server, idle, true)
}

fn relay_with(
    client: &TcpStream,
    server: &TcpStream,
    to_server: Vec<u8>,
    idle: Duration,
    pipe: bool,
) {
    for s in [client, server] {
        if s.set_nonblocking(false).is_err() || s.set_write_timeout(Some(idle)).is_err() {
            return;
        }
        // Since Linux 3.12; a socket that refuses it does not carry a tunnel.
        if set_tcp_option(s, libc::TCP_NOTSENT_LOWAT, UNSENT).is_err() {
            return;
        }
    }
    let clock = Clock {
        start: Instant::now(),
        last: AtomicU64::new(0),
    };
    // Either direction failing ends both: shutting the sockets down wakes the other.
    let end_all = || {
        let _ = client.shutdown(Shutdown::Both);
        let _ = server.shutdown(Shutdown::Both);
    };
    std::thread::scope(|scope| {
        let up = std::thread::Builder::new()
            .name("relay-up".into())
            .stack_size(super::connection::CONNECTION_STACK)
            .spawn_scoped(scope, || {
                let sent = (&*server).write_all(&to_server).is_ok();
                if !(sent && pump(client, server, idle, &clock, pipe)) {
                    end_all();
                }
            });
        if up.is_err() {
            // No thread for the second direction: nothing is relayed.
            end_all();
            return;
        }
        if !pump(server, client, idle, &clock, pipe) {
            end_all();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A connected pair of loopback sockets.
    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    /// A tunnel between two pairs: returns (client's end, server's end, the relay).
    fn tunnel(
        initial: &[u8],
        idle: Duration,
        pipe: bool,
    ) -> (TcpStream, TcpStream, std::thread::JoinHandle<()>) {
        let (client, client_proxy) = pair();
        let (server_proxy, server) = pair();
        let initial = initial.to_vec();
        let t = std::thread::spawn(move || {
            relay_with(&client_proxy, &server_proxy, initial, idle, pipe)
        });
        (client, server, t)
    }

    #[test]
    fn bytes_cross_both_ways_and_half_closes_are_passed_on() {
        for pipe in [true, false] {
            let (mut client, mut server, t) = tunnel(b"head:", Duration::from_secs(60), pipe);
            let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
            let up = big.clone();
            let writer = std::thread::spawn(move || {
                client.write_all(&up).unwrap();
                client.shutdown(Shutdown::Write).unwrap();
                client
            });
            let mut got = Vec::new();
            server.read_to_end(&mut got).unwrap();
            assert_eq!(&got[..5], b"head:", "pipe {pipe}");
            assert!(got[5..] == big[..], "pipe {pipe}: upstream bytes differ");
            // The server answers after the client's half close, then closes.
            server.write_all(&big).unwrap();
            server.shutdown(Shutdown::Write).unwrap();
            let mut client = writer.join().unwrap();
            let mut back = Vec::new();
            client.read_to_end(&mut back).unwrap();
            assert!(back == big, "pipe {pipe}: downstream bytes differ");
            t.join().unwrap();
        }
    }

    #[test]
    fn a_peer_that_stops_reading_stalls_only_its_own_direction() {
        for pipe in [true, false] {
            let (mut client, mut server, t) = tunnel(b"", Duration::from_secs(60), pipe);
            // The client never reads: the server's writes fill every buffer on the way
            // and then block (in a thread of the test's, so the test goes on).
            let mut flood = server.try_clone().unwrap();
            let stuck = std::thread::spawn(move || {
                let chunk = vec![7u8; 64 * 1024];
                while flood.write_all(&chunk).is_ok() {}
            });
            // Upstream still flows both ways of the test's choosing.
            for i in 0..50u8 {
                client.write_all(&[i; 1000]).unwrap();
                let mut got = [0u8; 1000];
                server.read_exact(&mut got).unwrap();
                assert_eq!(got, [i; 1000], "pipe {pipe}");
            }
            // Ending the client ends the tunnel, and with it the blocked flood.
            drop(client);
            t.join().unwrap();
            let _ = server.shutdown(Shutdown::Both);
            stuck.join().unwrap();
        }
    }

    fn tcp_option(s: &TcpStream, option: libc::c_int) -> u32 {
        let mut value: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `value`, alive across the call.
        let r = unsafe {
            libc::getsockopt(
                s.as_raw_fd(),
                libc::IPPROTO_TCP,
                option,
                (&mut value as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!(r, 0, "{}", io::Error::last_os_error());
        value as u32
    }

    #[test]
    fn the_tunnels_sockets_queue_at_most_their_unsent_bound() {
        let (client, client_proxy) = pair();
        let (server_proxy, server) = pair();
        // Copies of the proxy's own ends, to ask the kernel what the relay set on them.
        let watch = [
            client_proxy.try_clone().unwrap(),
            server_proxy.try_clone().unwrap(),
        ];
        for s in &watch {
            assert_ne!(
                tcp_option(s, libc::TCP_NOTSENT_LOWAT),
                UNSENT,
                "already set"
            );
        }
        let t = std::thread::spawn(move || {
            relay_with(
                &client_proxy,
                &server_proxy,
                b"x".to_vec(),
                Duration::from_secs(60),
                true,
            )
        });
        let mut got = [0u8; 1];
        (&server).read_exact(&mut got).unwrap();
        for s in &watch {
            assert_eq!(tcp_option(s, libc::TCP_NOTSENT_LOWAT), UNSENT);
        }
        drop(client);
        drop(server);
        t.join().unwrap();
    }

    #[test]
    fn a_tunnel_idle_past_its_limit_is_closed() {
        let (mut client, mut server, t) = tunnel(b"", Duration::from_millis(300), true);
        client.write_all(b"x").unwrap();
        let mut got = [0u8; 1];
        server.read_exact(&mut got).unwrap();
        // Nothing more moves: the relay gives up and both ends see the tunnel close.
        t.join().unwrap();
        let mut rest = Vec::new();
        assert!(matches!(client.read_to_end(&mut rest), Ok(0) | Err(_)));
        assert!(matches!(server.read_to_end(&mut rest), Ok(0) | Err(_)));
    }

    #[test]
    fn urgent_data_does_not_end_a_direction() {
        // `splice` from a TCP socket stops at an urgent byte and answers 0 for as long
        // as it is next, as at an end of file: the rest of the stream must still cross
        // (the urgent byte itself is dropped, as a plain read drops it).
        for pipe in [true, false] {
            let (mut client, server, t) = tunnel(b"", Duration::from_secs(60), pipe);
            let fd = server.as_fd();
            let send = |bytes: &[u8], flags| {
                nix::sys::socket::send(fd.as_raw_fd(), bytes, flags).unwrap();
                std::thread::sleep(Duration::from_millis(100));
            };
            send(b"before", nix::sys::socket::MsgFlags::empty());
            send(b"!", nix::sys::socket::MsgFlags::MSG_OOB);
            send(b"after", nix::sys::socket::MsgFlags::empty());
            server.shutdown(Shutdown::Both).unwrap();
            let mut got = Vec::new();
            client.read_to_end(&mut got).unwrap();
            assert_eq!(got, b"beforeafter", "pipe {pipe}");
            drop(client);
            t.join().unwrap();
        }
    }
}
