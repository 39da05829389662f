//! How many receive queues an interface has: one engine queue (UMEM + AF_XDP socket) per
//! receive queue, since the XDP program redirects to the socket of the packet's rx queue.

use super::ethtool::Ethtool;
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
    let sock = Ethtool::open(ifname)?;
    let mut channels = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..Default::default()
    };
    // Safety: ETHTOOL_GCHANNELS reads and writes one `struct ethtool_channels`, which
    // `channels` is (repr(C), live and writable for the call).
    let answered = unsafe {
        sock.call(
            ifname,
            (&mut channels as *mut EthtoolChannels).cast(),
            "ETHTOOL_GCHANNELS",
        )?
    };
    if !answered {
        return Ok(1);
    }
    Ok((channels.combined_count + channels.rx_count).max(1))
}
