//! A raw `AF_PACKET` socket bound to one interface: injects arbitrary frames (malformed ones
//! included) and captures what arrives, as an independent witness in tests.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use afxdp::program::ifindex;

/// An `AF_PACKET`/`SOCK_RAW` socket bound to one interface (all protocols).
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
}

impl PacketSocket {
    /// Opens and binds the socket to `ifname` in the calling thread's network namespace.
    pub fn open(ifname: &str) -> io::Result<Self> {
        let ifindex = ifindex(ifname).map_err(|_| io::Error::from(io::ErrorKind::NotFound))?;
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // Safety: plain socket(2) call; the fd is owned right after the check.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(proto)) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // Safety: `raw` is a fresh fd we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // Safety: sockaddr_ll is plain old data; all-zero is valid before we fill it.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = proto;
        addr.sll_ifindex = ifindex as i32;
        // Safety: `addr` is a valid sockaddr_ll of the length passed.
        let ret = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if ret < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { fd })
    }

    /// Sends `frame` (a whole Ethernet frame) out of the interface.
    pub fn send(&self, frame: &[u8]) -> io::Result<usize> {
        // Safety: `frame` is readable for its length during the call.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Receives frames until `accept` takes one or `timeout` passes; returns the accepted
    /// frame. Outgoing frames are seen too (AF_PACKET captures both directions).
    pub fn recv_matching(
        &self,
        timeout: Duration,
        mut accept: impl FnMut(&[u8]) -> bool,
    ) -> io::Result<Option<Vec<u8>>> {
        let deadline = Instant::now() + timeout;
        let mut buf = vec![0u8; 65536];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // Safety: one valid pollfd for the duration of the call.
            let r = unsafe { libc::poll(&mut pfd, 1, left.as_millis().clamp(1, 1000) as i32) };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if r == 0 {
                continue;
            }
            // Safety: `buf` is writable for its length during the call.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            let frame = &buf[..n as usize];
            if accept(frame) {
                return Ok(Some(frame.to_vec()));
            }
        }
    }
}
