//! Requests to a network driver through `SIOCETHTOOL` (linux/ethtool.h): the channel count
//! ([`super::queues`]) and the RSS ([`super::rss`]).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::XdpError;

/// A socket to send ethtool requests on.
pub(crate) struct Ethtool(OwnedFd);

impl Ethtool {
    /// A socket for requests about `ifname` (checked to be a valid interface name).
    pub(crate) fn open(ifname: &str) -> Result<Self, XdpError> {
        let name = ifname.as_bytes();
        if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(&0) {
            return Err(XdpError::Invalid("interface name"));
        }
        // Safety: plain socket(2) call; the fd is owned right after the check.
        let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(XdpError::last_os("socket (ethtool)"));
        }
        // Safety: `raw` is a fresh fd we own.
        Ok(Ethtool(unsafe { OwnedFd::from_raw_fd(raw) }))
    }

    /// Runs the ethtool request at `data` on `ifname`: true when the driver answered, false
    /// when it does not support the request.
    ///
    /// # Safety
    /// `data` must point at a live, writable request at least as long as what its command and
    /// sizes ask the kernel to read and write.
    pub(crate) unsafe fn call(
        &self,
        ifname: &str,
        data: *mut libc::c_char,
        what: &'static str,
    ) -> Result<bool, XdpError> {
        // Safety: ifreq is plain old data; all-zero is a valid value before we fill it.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (dst, &b) in req.ifr_name.iter_mut().zip(ifname.as_bytes()) {
            *dst = b as libc::c_char;
        }
        req.ifr_ifru.ifru_data = data;
        // Safety: `req` names the interface and points at the caller's request, live and
        // long enough for the ioctl (this function's contract); the kernel writes only in it.
        let ret = unsafe { libc::ioctl(self.0.as_raw_fd(), libc::SIOCETHTOOL as _, &mut req) };
        if ret == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EOPNOTSUPP | libc::EINVAL) => Ok(false),
            Some(libc::ENODEV) => Err(XdpError::NoSuchInterface),
            _ => Err(XdpError::from_io(what, &e)),
        }
    }
}
