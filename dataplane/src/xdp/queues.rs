//! How many receive queues an interface has: one engine queue (UMEM + AF_XDP socket) per
//! receive queue, since the XDP program redirects to the socket of the packet's rx queue.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::XdpError;

const ETHTOOL_GCHANNELS: u32 = 0x0000_003c;

/// `struct ethtool_channels` (linux/ethtool.h).
#[repr(C)]
#[derive(Default)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

/// The number of receive queues of `ifname` in the calling thread's network namespace
/// (`ETHTOOL_GCHANNELS`: combined plus rx-only channels); 1 for drivers that do not report
/// channels.
pub fn rx_queue_count(ifname: &str) -> Result<u32, XdpError> {
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
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut channels = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..Default::default()
    };
    // Safety: ifreq is plain old data; all-zero is a valid value before we fill it.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &b) in req.ifr_name.iter_mut().zip(name) {
        *dst = b as libc::c_char;
    }
    req.ifr_ifru.ifru_data = (&mut channels as *mut EthtoolChannels).cast();
    // Safety: `req` names the interface and points at `channels`, both live and writable for
    // the duration of the ioctl, which fills `channels` only.
    let ret = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCETHTOOL as _, &mut req) };
    if ret < 0 {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EOPNOTSUPP) => Ok(1),
            Some(libc::ENODEV) => Err(XdpError::NoSuchInterface),
            _ => Err(XdpError::from_io("ETHTOOL_GCHANNELS", &e)),
        };
    }
    Ok((channels.combined_count + channels.rx_count).max(1))
}
