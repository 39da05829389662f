//! `rdma_getaddrinfo` over the C library's `getaddrinfo`: one result, the address as the
//! source (RAI_PASSIVE) or the destination, reliable connections on RDMA_PS_TCP, no route
//! and no connect data (iWARP's private data carries no rdma_cm header).

use std::os::raw::{c_char, c_int};

use crate::abi::cm::*;
use crate::abi::verbs::IBV_QPT_RC;
use crate::errno;

/// A `calloc`ed copy of the socket address at `sa` of `len` octets.
///
/// # Safety
/// `sa` points to `len` readable octets.
unsafe fn copy_addr(sa: *const libc::sockaddr, len: libc::socklen_t) -> *mut libc::sockaddr {
    // Safety: calloc of len octets, freed by rdma_freeaddrinfo.
    let p = unsafe { libc::calloc(1, len as usize) }.cast::<libc::sockaddr>();
    if !p.is_null() {
        // Safety: the caller's promise on sa; p has len octets.
        unsafe { std::ptr::copy_nonoverlapping(sa.cast::<u8>(), p.cast::<u8>(), len as usize) };
    }
    p
}

/// `rdma_getaddrinfo`.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const RdmaAddrinfo,
    res: *mut *mut RdmaAddrinfo,
) -> c_int {
    if res.is_null() || (node.is_null() && service.is_null()) {
        return errno::fail(libc::EINVAL);
    }
    // Safety: the application's hints (or NULL).
    let h = unsafe { hints.as_ref() };
    let flags = h.map_or(0, |h| h.ai_flags);
    let passive = flags & RAI_PASSIVE != 0;
    // Safety: a zeroed addrinfo is a valid "no hints" value.
    let mut lh: libc::addrinfo = unsafe { std::mem::zeroed() };
    lh.ai_family = h.map_or(libc::AF_UNSPEC, |h| h.ai_family);
    lh.ai_socktype = libc::SOCK_STREAM;
    if passive {
        lh.ai_flags |= libc::AI_PASSIVE;
    }
    if flags & RAI_NUMERICHOST != 0 {
        lh.ai_flags |= libc::AI_NUMERICHOST;
    }
    let mut list: *mut libc::addrinfo = std::ptr::null_mut();
    // Safety: NUL-terminated strings or NULL from the application; list freed below.
    let rc = unsafe { libc::getaddrinfo(node, service, &lh, &mut list) };
    if rc != 0 || list.is_null() {
        return errno::fail(libc::EADDRNOTAVAIL);
    }
    // Safety: the first result getaddrinfo returned.
    let first = unsafe { &*list };
    // Safety: calloc of one rdma_addrinfo (zeroed: all pointers NULL), freed by
    // rdma_freeaddrinfo.
    let rai =
        unsafe { libc::calloc(1, std::mem::size_of::<RdmaAddrinfo>()) }.cast::<RdmaAddrinfo>();
    if rai.is_null() {
        // Safety: the list from getaddrinfo.
        unsafe { libc::freeaddrinfo(list) };
        return errno::fail(libc::ENOMEM);
    }
    // Safety: rai is a zeroed RdmaAddrinfo of ours; the addresses are copied from the result.
    unsafe {
        let r = &mut *rai;
        r.ai_flags = flags;
        r.ai_family = first.ai_family;
        r.ai_qp_type = IBV_QPT_RC;
        r.ai_port_space = RDMA_PS_TCP;
        if passive {
            r.ai_src_addr = copy_addr(first.ai_addr, first.ai_addrlen);
            r.ai_src_len = first.ai_addrlen;
        } else {
            r.ai_dst_addr = copy_addr(first.ai_addr, first.ai_addrlen);
            r.ai_dst_len = first.ai_addrlen;
            if let Some(h) = h.filter(|h| !h.ai_src_addr.is_null() && h.ai_src_len > 0) {
                r.ai_src_addr = copy_addr(h.ai_src_addr, h.ai_src_len);
                r.ai_src_len = h.ai_src_len;
            }
        }
        libc::freeaddrinfo(list);
        *res = rai;
    }
    0
}

/// `rdma_freeaddrinfo`.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_freeaddrinfo(res: *mut RdmaAddrinfo) {
    let mut p = res;
    while !p.is_null() {
        // Safety: a list made by xwarp_rdma_getaddrinfo: every pointer calloc'ed or NULL.
        unsafe {
            let r = &*p;
            let next = r.ai_next;
            libc::free(r.ai_src_addr.cast());
            libc::free(r.ai_dst_addr.cast());
            libc::free(r.ai_src_canonname.cast());
            libc::free(r.ai_dst_canonname.cast());
            libc::free(r.ai_route);
            libc::free(r.ai_connect);
            libc::free(p.cast());
            p = next;
        }
    }
}
