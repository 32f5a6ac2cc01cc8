//! The filtering proxy: how a confined command reaches the network by name.
//!
//! One listening socket answers three protocols, told apart by the first byte a client
//! sends: SOCKS5 (`0x05`, with host names: `socks5h://`), SOCKS4 (refused: it carries
//! no host name in its common form), and HTTP, either `CONNECT host:port` (a tunnel:
//! TLS passes through undecrypted) or a plain request in absolute form
//! (`GET http://host/path`), forwarded with `Connection: close`.
//!
//! Every request is decided on the host name the client asked for, by the policy's
//! [`DomainRules`]; the name is then resolved here (or taken from a `--resolve` pin),
//! each address is checked again ([`DomainRules::check_address`]: no loopback, private
//! or link-local address, nor one of this machine's own, unless allowed explicitly), and the proxy connects to exactly
//! an address it checked. Refusals are answered (403, SOCKS reply 2) and recorded
//! ([`record`]).
//!
//! The proxy runs outside the sandbox with the caller's privileges, and its only client
//! is the confined command, so it is written for a hostile client:
//! - one thread per connection (a slow or stuck client holds only its own thread), at
//!   most [`Limits::max_connections`] at a time (past that, connections are closed at
//!   once);
//! - a request head must arrive whole within [`Limits::head_time`] and fit in
//!   [`Limits::max_head`] bytes; an established tunnel idle for [`Limits::idle_time`] is
//!   closed;
//! - nothing a client sends is logged as is: the record holds only parsed, normalised
//!   host names, at most [`stockade_policy::network_denials::MAX_RECORDED`] of them;
//! - no step panics on client input (a panic would end every connection at once).
//!
//! The proxy lives in its own process ([`host`]), started by the command's argv, so it
//! lives exactly as long as the command and never shares the launcher's supervision
//! loop.

mod connection;
pub mod host;
mod http;
mod local;
pub mod netns;
mod record;
mod relay;
mod resolver;
mod socks;
mod upstream;

pub use connection::{Config, Limits};
pub use record::Record;

use connection::{CONNECTION_STACK, Shared, read_before};

use std::io;
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A free port for the proxy: the kernel picks one, and it is released at once so that
/// the proxy host can bind it on the host's `127.0.0.1` when the command starts. Another
/// process taking it on `127.0.0.1` in between makes that start fail (a runner failure
/// that says so), never run the command with another listener on its proxy port.
///
/// The port is picked free on *every* address, not only on `127.0.0.1`: where no network
/// namespace holds the command, Landlock lets it connect to this port number on any
/// address, and a port the kernel picked free on `127.0.0.1` alone can be one a service
/// of this machine listens on at another of its addresses (`[::1]`, `127.0.0.2`, a LAN
/// address), which the command could then reach around the proxy. A dual-stack wildcard
/// bind (`[::]`, taking IPv4 too) conflicts with every such listener, so the kernel
/// picks around them; without IPv6, `0.0.0.0` does the same for IPv4. The socket is
/// bound only, never listening: nothing can connect to it meanwhile.
pub fn reserve_port() -> io::Result<u16> {
    use nix::sys::socket::{AddressFamily, SockaddrIn, SockaddrIn6};
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};
    let v6 = SockaddrIn6::from(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 0, 0, 0));
    match bound_port(AddressFamily::Inet6, &v6) {
        Ok(port) => Ok(port),
        // No IPv6 in this kernel or namespace: then nothing listens on an IPv6 address.
        Err(nix::errno::Errno::EAFNOSUPPORT | nix::errno::Errno::EADDRNOTAVAIL) => {
            let v4 = SockaddrIn::from(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
            bound_port(AddressFamily::Inet, &v4).map_err(io::Error::from)
        }
        Err(e) => Err(e.into()),
    }
}

/// Binds a TCP socket of `family` to `wildcard` (port 0; dual-stack for IPv6), and
/// returns the port the kernel chose; the socket is closed on return.
fn bound_port(
    family: nix::sys::socket::AddressFamily,
    wildcard: &dyn nix::sys::socket::SockaddrLike,
) -> nix::Result<u16> {
    use nix::sys::socket::{
        AddressFamily, SockFlag, SockType, SockaddrStorage, bind, getsockname, setsockopt, socket,
        sockopt,
    };
    use std::os::fd::AsRawFd;
    let fd = socket(family, SockType::Stream, SockFlag::SOCK_CLOEXEC, None)?;
    if family == AddressFamily::Inet6 {
        // Explicitly: the system default (`net.ipv6.bindv6only`) may be IPv6 only.
        setsockopt(&fd, sockopt::Ipv6V6Only, &false)?;
    }
    bind(fd.as_raw_fd(), wildcard)?;
    let bound: SockaddrStorage = getsockname(fd.as_raw_fd())?;
    bound
        .as_sockaddr_in6()
        .map(|a| a.port())
        .or_else(|| bound.as_sockaddr_in().map(|a| a.port()))
        .ok_or(nix::errno::Errno::EAFNOSUPPORT)
}

/// Starts answering connections on `listener` in a thread of its own, for as long as the
/// process lives.
pub fn serve(listener: TcpListener, config: Config) -> io::Result<()> {
    let shared = Arc::new(Shared {
        config,
        active: AtomicUsize::new(0),
    });
    std::thread::Builder::new()
        .name("proxy-accept".into())
        .stack_size(CONNECTION_STACK)
        .spawn(move || accept_loop(&listener, &shared))
        .map(drop)
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    loop {
        match listener.accept() {
            Ok((stream, _)) => admit(stream, shared),
            // Out of descriptors or memory: wait instead of spinning; connections that
            // end free what the next accept needs.
            Err(e) if e.kind() != io::ErrorKind::Interrupted => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(_) => {}
        }
    }
}

/// Holds one of the connection slots until dropped.
struct Slot(Arc<Shared>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::AcqRel);
    }
}

fn admit(stream: TcpStream, shared: &Arc<Shared>) {
    let max = shared.config.limits.max_connections;
    if shared.active.fetch_add(1, Ordering::AcqRel) >= max {
        shared.active.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    let slot = Slot(Arc::clone(shared));
    // A thread that cannot be created drops the closure, and with it the slot and the
    // connection.
    let _ = std::thread::Builder::new()
        .stack_size(CONNECTION_STACK)
        .spawn(move || {
            let shared = Arc::clone(&slot.0);
            handle(stream, &shared);
            drop(slot);
        });
}

/// One connection, from its first byte to its end.
fn handle(stream: TcpStream, shared: &Shared) {
    let deadline = Instant::now() + shared.config.limits.head_time;
    let _ = stream.set_nodelay(true);
    let mut first = [0u8; 1];
    if read_before(&stream, &mut first, deadline).ok() != Some(1) {
        return;
    }
    match first[0] {
        socks::VERSION_5 => socks::serve(stream, shared, deadline),
        socks::VERSION_4 => socks::refuse_v4(&stream, deadline),
        byte => http::serve(stream, byte, shared, deadline),
    }
}

#[cfg(test)]
mod tests;
