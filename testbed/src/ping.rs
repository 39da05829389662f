//! ICMP echo through the kernel (a raw `IPPROTO_ICMP` socket): shows that traffic the XDP
//! program passes still reaches the peer's kernel, without depending on a `ping` binary.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use tcp_offload::checksum;

/// Sends one ICMP echo request to `dst` (from the calling thread's network namespace) and waits
/// for the matching reply; returns the round-trip time, or `None` on timeout.
pub fn icmp_echo(
    dst: Ipv4Addr,
    ident: u16,
    seq: u16,
    timeout: Duration,
) -> io::Result<Option<Duration>> {
    // Safety: plain socket(2) call; the fd is owned right after the check.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: `raw` is a fresh fd we own.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut req = [0u8; 16];
    req[0] = 8; // echo request
    req[4..6].copy_from_slice(&ident.to_be_bytes());
    req[6..8].copy_from_slice(&seq.to_be_bytes());
    req[8..16].copy_from_slice(b"xwarping");
    let sum = checksum::field(&req, 0);
    req[2..4].copy_from_slice(&sum.to_be_bytes());
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(dst.octets()),
        },
        sin_zero: [0; 8],
    };
    let start = Instant::now();
    // Safety: `req` and `addr` are valid for the lengths passed during the call.
    let n = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            req.as_ptr().cast(),
            req.len(),
            0,
            (&addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = [0u8; 1500];
    while start.elapsed() < timeout {
        let left = timeout.saturating_sub(start.elapsed());
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // Safety: one valid pollfd for the duration of the call.
        let r = unsafe { libc::poll(&mut pfd, 1, left.as_millis().clamp(1, 1000) as i32) };
        if r <= 0 {
            continue;
        }
        // Safety: `buf` is writable for its length during the call.
        let n = unsafe {
            libc::recv(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n <= 0 {
            continue;
        }
        // A raw IPv4 socket returns the IP header too.
        let pkt = &buf[..n as usize];
        let ihl = usize::from(pkt[0] & 0x0F) * 4;
        let Some(icmp) = pkt.get(ihl..ihl + 8) else {
            continue;
        };
        if pkt[12..16] == dst.octets()
            && icmp[0] == 0
            && icmp[4..6] == ident.to_be_bytes()
            && icmp[6..8] == seq.to_be_bytes()
        {
            return Ok(Some(start.elapsed()));
        }
    }
    Ok(None)
}
