//! The next hop of a destination: output interface, source address, our MAC and the next hop's
//! MAC, from the kernel's routing and neighbour tables. A missing neighbour is resolved by the
//! kernel itself: we send one UDP datagram to the discard port of the next hop through an
//! ordinary socket (the kernel ARPs/solicits for it) and wait for the entry.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::thread;
use std::time::{Duration, Instant};

use super::netlink::{Mac, RtNetlink};
use super::XdpError;

/// UDP discard port (RFC 863): the datagram that triggers resolution is meant to be ignored.
const DISCARD_PORT: u16 = 9;

/// Everything needed to address an Ethernet frame to a destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextHop {
    /// Output interface index.
    pub ifindex: u32,
    /// Source address the kernel would use.
    pub src_ip: IpAddr,
    /// Our interface's MAC.
    pub src_mac: Mac,
    /// The gateway or the destination itself.
    pub hop_ip: IpAddr,
    /// The MAC frames go to.
    pub dst_mac: Mac,
}

/// Looks up (and if needed resolves) the next hop towards `dst` in the calling thread's network
/// namespace, waiting at most `timeout` for the neighbour to resolve.
pub fn resolve_next_hop(dst: IpAddr, timeout: Duration) -> Result<NextHop, XdpError> {
    let mut nl = RtNetlink::new()?;
    let route = nl.route_get(dst)?;
    let hop_ip = route.next_hop(dst);
    let src_ip = route.pref_src.ok_or(XdpError::NoRoute)?;
    let src_mac = nl.link_mac(route.oif)?;
    let deadline = Instant::now() + timeout;
    let mut triggered = false;
    loop {
        if let Some(mac) = nl
            .neighbour(route.oif, hop_ip)?
            .and_then(|n| n.usable_mac())
        {
            return Ok(NextHop {
                ifindex: route.oif,
                src_ip,
                src_mac,
                hop_ip,
                dst_mac: mac,
            });
        }
        if !triggered {
            trigger_resolution(src_ip, hop_ip)?;
            triggered = true;
        }
        if Instant::now() >= deadline {
            return Err(XdpError::NeighbourTimeout);
        }
        thread::sleep(Duration::from_millis(2));
    }
}

/// Makes the kernel resolve `hop`: one datagram to its discard port.
fn trigger_resolution(src: IpAddr, hop: IpAddr) -> Result<(), XdpError> {
    let sock = UdpSocket::bind(SocketAddr::new(src, 0))
        .map_err(|e| XdpError::from_io("bind UDP (resolution)", &e))?;
    sock.connect(SocketAddr::new(hop, DISCARD_PORT))
        .map_err(|e| XdpError::from_io("connect UDP (resolution)", &e))?;
    // An error here (say, EHOSTUNREACH from a failed earlier attempt) just means no entry yet.
    let _ = sock.send(b"xwarp");
    Ok(())
}
