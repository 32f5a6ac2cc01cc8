//! The stage's half of the network by name: inside the command's fresh network
//! namespace (which starts with nothing but a loopback interface that is down), bring
//! loopback up, listen on the proxy's port there, and hand that listening socket to the
//! proxy host outside. A socket keeps the namespace it was made in: the host accepts
//! connections from inside the namespace on it, and opens its own connections from the
//! host's network, so the proxy is the namespace's only way out.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::os::fd::{AsRawFd, RawFd};

/// A failure: what was being done, and the system's answer.
type Failed = (String, Option<io::Error>);

fn os(what: &str) -> Failed {
    (what.to_string(), Some(io::Error::last_os_error()))
}

/// Sets up the namespace's loopback and sends a socket listening on `127.0.0.1:port`
/// through `channel`, which is closed afterwards (the command must not inherit it).
pub fn hand_over_listener(channel: RawFd, port: u16) -> Result<(), Failed> {
    let result = loopback_up().and_then(|()| {
        let listener =
            TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).map_err(|e| {
                (
                    format!("cannot listen on 127.0.0.1:{port} in the network namespace"),
                    Some(e),
                )
            })?;
        send_fd(channel, listener.as_raw_fd())
    });
    // SAFETY: closing the channel this process was handed; nothing else uses it.
    unsafe { libc::close(channel) };
    result
}

/// `ip link set lo up`: a new network namespace's loopback starts down.
pub fn loopback_up() -> Result<(), Failed> {
    // SAFETY: socket() returns a new descriptor or -1.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(os("cannot open a socket to configure loopback"));
    }
    // SAFETY: an all-zero ifreq is valid; the name is copied in within its bounds, and
    // the ioctls read and write this one struct.
    let result = unsafe {
        let mut req: libc::ifreq = std::mem::zeroed();
        for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
            *dst = *src as libc::c_char;
        }
        if libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &mut req) < 0 {
            Err(os("cannot read loopback's flags in the network namespace"))
        } else {
            req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            if libc::ioctl(fd, libc::SIOCSIFFLAGS as _, &req) < 0 {
                Err(os("cannot bring loopback up in the network namespace"))
            } else {
                Ok(())
            }
        }
    };
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::close(fd) };
    result
}

/// Sends `fd` over the unix socket `channel` (one byte carrying it).
fn send_fd(channel: RawFd, fd: RawFd) -> Result<(), Failed> {
    let mut byte = [1u8];
    // SAFETY: CMSG_SPACE and CMSG_LEN are size computations.
    let (space, len) = unsafe {
        let size = std::mem::size_of::<RawFd>() as u32;
        (libc::CMSG_SPACE(size) as usize, libc::CMSG_LEN(size))
    };
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // SAFETY: a zeroed msghdr is a valid empty header; the buffers it points at live
    // across the call, and the control message is written within `control`.
    let sent = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = len as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
        libc::sendmsg(channel, &msg, libc::MSG_NOSIGNAL)
    };
    if sent != 1 {
        return Err(os("cannot hand the proxy's socket to the proxy host"));
    }
    Ok(())
}
