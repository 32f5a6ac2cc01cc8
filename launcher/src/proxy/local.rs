//! The addresses of this machine's own interfaces: a name the rules allow may resolve to
//! one of them (a server's own public address, a global IPv6 address), and connecting
//! there reaches the host's own services as loopback would. The address classes cannot
//! tell (they know ranges, not hosts), so the proxy asks the kernel for the interface
//! addresses when it is about to connect.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use stockade_policy::addresses::carried_v4;

/// The addresses of this machine's interfaces now (they change: DHCP, IPv6 temporary
/// addresses), IPv4-mapped IPv6 forms given as the IPv4 address they carry. `None` when
/// the kernel would not list them: the caller then refuses rather than guess.
pub fn addresses() -> Option<Vec<IpAddr>> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list it allocated to `list` on success.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return None;
    }
    let mut out = Vec::new();
    let mut cursor = list;
    while !cursor.is_null() {
        // SAFETY: `cursor` is a node of the list getifaddrs returned, not yet freed.
        let entry = unsafe { &*cursor };
        // SAFETY: `ifa_addr`, when not null, points at a sockaddr of the family its
        // `sa_family` names, of at least that family's size.
        unsafe {
            if let Some(addr) = entry.ifa_addr.as_ref() {
                match i32::from(addr.sa_family) {
                    libc::AF_INET => {
                        let a = &*(entry.ifa_addr as *const libc::sockaddr_in);
                        out.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr))));
                    }
                    libc::AF_INET6 => {
                        let a = &*(entry.ifa_addr as *const libc::sockaddr_in6);
                        out.push(IpAddr::V6(Ipv6Addr::from(a.sin6_addr.s6_addr)));
                    }
                    _ => {}
                }
            }
        }
        cursor = entry.ifa_next;
    }
    // SAFETY: the list getifaddrs returned, freed once, not used afterwards.
    unsafe { libc::freeifaddrs(list) };
    Some(out)
}

/// Whether `ip` is in `local`, as itself or, for an IPv6 form that carries an IPv4
/// address (IPv4-mapped, NAT64, 6to4), as the address it leads to.
pub fn is_local(local: &[IpAddr], ip: IpAddr) -> bool {
    let carried = match ip {
        IpAddr::V6(v6) => carried_v4(v6).map(IpAddr::V4),
        IpAddr::V4(_) => None,
    };
    local.contains(&ip) || carried.is_some_and(|v4| local.contains(&v4))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_among_the_interface_addresses_and_mapped_forms_count() {
        let local = addresses().expect("getifaddrs");
        assert!(is_local(&local, "127.0.0.1".parse().unwrap()), "{local:?}");
        assert!(is_local(&local, "::ffff:127.0.0.1".parse().unwrap()));
        assert!(is_local(&local, "64:ff9b::7f00:1".parse().unwrap()));
        assert!(is_local(&local, "2002:7f00:1::1".parse().unwrap()));
        // TEST-NET-3 is on no machine's interfaces.
        assert!(!is_local(&local, "203.0.113.254".parse().unwrap()));
    }
}
