//! Socket addresses between C (`struct sockaddr*`, `sockaddr_storage`) and Rust.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use crate::abi::cm::SockaddrStorage;

/// The address at `sa`, if it is IPv4 or IPv6.
///
/// # Safety
/// `sa` is NULL or points to a socket address of the size its family says.
pub(crate) unsafe fn from_c(sa: *const libc::sockaddr) -> Option<SocketAddr> {
    if sa.is_null() {
        return None;
    }
    // Safety: the caller's promise.
    match i32::from(unsafe { (*sa).sa_family }) {
        libc::AF_INET => {
            // Safety: an AF_INET address is a sockaddr_in.
            let s = unsafe { &*(sa as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr)),
                u16::from_be(s.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // Safety: an AF_INET6 address is a sockaddr_in6.
            let s = unsafe { &*(sa as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(s.sin6_addr.s6_addr),
                u16::from_be(s.sin6_port),
                s.sin6_flowinfo,
                s.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// `a` as a `sockaddr_storage`, and its length.
pub(crate) fn to_storage(a: SocketAddr) -> (SockaddrStorage, libc::socklen_t) {
    let mut st = SockaddrStorage::default();
    let len = match a {
        SocketAddr::V4(v4) => {
            let s = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*v4.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // Safety: a sockaddr_in fits the 128 octets of the storage.
            unsafe { std::ptr::write_unaligned(st.bytes.as_mut_ptr().cast(), s) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            let s = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            };
            // Safety: a sockaddr_in6 fits the 128 octets of the storage.
            unsafe { std::ptr::write_unaligned(st.bytes.as_mut_ptr().cast(), s) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (st, len as libc::socklen_t)
}

/// The address of the storage, if any is set.
pub(crate) fn from_storage(st: &SockaddrStorage) -> Option<SocketAddr> {
    // Safety: the storage holds a sockaddr of its family (to_storage) or zeros (family 0).
    unsafe { from_c(st.bytes.as_ptr().cast()) }
}

/// The GID of an IP address: IPv6, IPv4 mapped.
pub(crate) fn gid_of(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

/// The local address the kernel's routes would send from to reach `dst`.
pub(crate) fn route_source(dst: SocketAddr) -> std::io::Result<IpAddr> {
    let any: SocketAddr = match dst {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let s = std::net::UdpSocket::bind(any)?;
    let port = if dst.port() == 0 { 9 } else { dst.port() };
    s.connect(SocketAddr::new(dst.ip(), port))?;
    Ok(s.local_addr()?.ip())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Addresses survive the trip through C's layout, both families.
    #[test]
    fn storage_round_trips() {
        for a in ["198.18.0.1:18515", "[2001:db8::1]:4791"] {
            let a: SocketAddr = a.parse().unwrap();
            let (st, len) = to_storage(a);
            assert_eq!(from_storage(&st), Some(a));
            assert!(len as usize <= 128);
        }
        assert_eq!(from_storage(&SockaddrStorage::default()), None);
    }

    #[test]
    fn loopback_routes_from_loopback() {
        let src = route_source("127.0.0.1:18515".parse().unwrap()).unwrap();
        assert!(src.is_loopback());
    }
}
