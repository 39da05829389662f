//! What a driver offers AF_XDP sockets beyond plain rings: the `netdev` generic netlink
//! family's `xsk-features` of an interface (Linux 6.8+, include/uapi/linux/netdev.h;
//! `ynl --family netdev --do dev-get`). One request to resolve the family, one for the device.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::XdpError;

/// `NETDEV_XSK_FLAGS_TX_CHECKSUM`: the driver finishes L4 checksums requested in TX metadata.
pub const XSK_TX_CHECKSUM: u64 = 2;

/// `NETDEV_XDP_ACT_XSK_ZEROCOPY`: the driver runs AF_XDP sockets in zero-copy mode.
pub const XDP_XSK_ZEROCOPY: u64 = 8;

const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const NETDEV_CMD_DEV_GET: u8 = 1;
const NETDEV_A_DEV_IFINDEX: u16 = 1;
const NETDEV_A_DEV_XDP_FEATURES: u16 = 3;
const NETDEV_A_DEV_XSK_FEATURES: u16 = 6;
const NLMSG_ERROR: u16 = 2;
const NLMSG_HDR: usize = 16;
const GENL_HDR: usize = 4;

/// An interface's XDP and AF_XDP feature bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DevFeatures {
    /// `xdp-features` (`NETDEV_XDP_ACT_*`: basic, redirect, ndo-xmit, xsk-zerocopy, ...).
    pub xdp: u64,
    /// `xsk-features` (`NETDEV_XSK_FLAGS_*`: [`XSK_TX_CHECKSUM`], tx-timestamp, ...).
    pub xsk: u64,
}

/// [`dev_features`] of the interface named `ifname` (in the calling thread's namespace).
pub fn interface_features(ifname: &str) -> Result<DevFeatures, XdpError> {
    super::program::ifindex(ifname).and_then(dev_features)
}

/// The feature bits of interface `ifindex` (in the calling thread's namespace): zero when the
/// kernel has no `netdev` family (before 6.3) or does not report them (`xsk` before 6.8).
pub fn dev_features(ifindex: u32) -> Result<DevFeatures, XdpError> {
    let sock = GenlSocket::open()?;
    let Some(family) = sock.family_id("netdev")? else {
        return Ok(DevFeatures::default());
    };
    let reply = sock.request(
        family,
        NETDEV_CMD_DEV_GET,
        &attr(NETDEV_A_DEV_IFINDEX, &ifindex.to_ne_bytes()),
    )?;
    let u64_of = |kind| {
        find_attr(&reply, kind)
            .and_then(|v| Some(u64::from_ne_bytes(v.get(..8)?.try_into().ok()?)))
            .unwrap_or(0)
    };
    Ok(DevFeatures {
        xdp: u64_of(NETDEV_A_DEV_XDP_FEATURES),
        xsk: u64_of(NETDEV_A_DEV_XSK_FEATURES),
    })
}

/// One netlink attribute: length, type, value, padded to 4 bytes.
fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
    let len = 4 + value.len();
    let mut a = Vec::with_capacity(len.next_multiple_of(4));
    a.extend_from_slice(&(len as u16).to_ne_bytes());
    a.extend_from_slice(&kind.to_ne_bytes());
    a.extend_from_slice(value);
    a.resize(len.next_multiple_of(4), 0);
    a
}

/// The value of the first attribute of `kind` in `attrs` (a run of attributes), if any.
fn find_attr(attrs: &[u8], kind: u16) -> Option<&[u8]> {
    let mut rest = attrs;
    while rest.len() >= 4 {
        let len = usize::from(u16::from_ne_bytes([rest[0], rest[1]]));
        let k = u16::from_ne_bytes([rest[2], rest[3]]) & 0x3fff;
        if len < 4 || len > rest.len() {
            return None;
        }
        if k == kind {
            return Some(&rest[4..len]);
        }
        rest = &rest[len.next_multiple_of(4).min(rest.len())..];
    }
    None
}

/// A `NETLINK_GENERIC` socket with a receive timeout.
struct GenlSocket {
    fd: OwnedFd,
}

impl GenlSocket {
    fn open() -> Result<Self, XdpError> {
        // Safety: plain socket creation; the fd is owned right away.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_GENERIC,
            )
        };
        if raw < 0 {
            return Err(XdpError::last_os("open generic netlink socket"));
        }
        // Safety: `raw` is a fresh fd nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let tv = libc::timeval {
            tv_sec: 1,
            tv_usec: 0,
        };
        // Safety: `tv` is readable for its size and outlives the call.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        Ok(GenlSocket { fd })
    }

    /// The id of generic netlink family `name`; `None` when the kernel has none by that name.
    fn family_id(&self, name: &str) -> Result<Option<u16>, XdpError> {
        let mut v = name.as_bytes().to_vec();
        v.push(0);
        match self.request(
            GENL_ID_CTRL,
            CTRL_CMD_GETFAMILY,
            &attr(CTRL_ATTR_FAMILY_NAME, &v),
        ) {
            Ok(reply) => Ok(find_attr(&reply, CTRL_ATTR_FAMILY_ID)
                .and_then(|id| Some(u16::from_ne_bytes(id.get(..2)?.try_into().ok()?)))),
            Err(XdpError::Os { errno, .. }) if errno == libc::ENOENT => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Sends one request (`cmd` of family `family` with `attrs`) and returns the attributes of
    /// its reply.
    fn request(&self, family: u16, cmd: u8, attrs: &[u8]) -> Result<Vec<u8>, XdpError> {
        let len = NLMSG_HDR + GENL_HDR + attrs.len();
        let mut msg = Vec::with_capacity(len);
        msg.extend_from_slice(&(len as u32).to_ne_bytes());
        msg.extend_from_slice(&family.to_ne_bytes());
        msg.extend_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
        msg.extend_from_slice(&1u32.to_ne_bytes()); // sequence
        msg.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it in
        msg.extend_from_slice(&[cmd, 1, 0, 0]); // genlmsghdr: command, version 1
        msg.extend_from_slice(attrs);
        // Safety: `msg` is readable for its length; the kernel only reads it.
        let sent = unsafe { libc::send(self.fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
        if sent < 0 {
            return Err(XdpError::last_os("send generic netlink request"));
        }
        let mut buf = vec![0u8; 8192];
        // Safety: `buf` is writable for its length and outlives the call.
        let n = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(XdpError::last_os("receive generic netlink reply"));
        }
        let reply = &buf[..n as usize];
        if reply.len() < NLMSG_HDR {
            return Err(XdpError::Invalid("short generic netlink reply"));
        }
        let msg_len =
            (u32::from_ne_bytes(reply[..4].try_into().expect("4 bytes")) as usize).min(reply.len());
        let kind = u16::from_ne_bytes([reply[4], reply[5]]);
        if kind == NLMSG_ERROR {
            let errno = reply.get(NLMSG_HDR..NLMSG_HDR + 4).map_or(libc::EIO, |e| {
                -i32::from_ne_bytes(e.try_into().expect("4 bytes"))
            });
            return Err(XdpError::Os {
                op: "generic netlink request",
                errno,
            });
        }
        Ok(reply
            .get(NLMSG_HDR + GENL_HDR..msg_len)
            .unwrap_or_default()
            .to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_padded_and_found_again() {
        let mut run = attr(5, b"abc");
        assert_eq!(run.len(), 8);
        run.extend(attr(6, &7u64.to_ne_bytes()));
        assert_eq!(find_attr(&run, 5), Some(&b"abc"[..]));
        assert_eq!(find_attr(&run, 6), Some(&7u64.to_ne_bytes()[..]));
        assert_eq!(find_attr(&run, 9), None);
        // A length past the end stops the walk instead of reading beyond it.
        let mut bad = run.clone();
        bad[0] = 200;
        assert_eq!(find_attr(&bad, 6), None);
    }
}
