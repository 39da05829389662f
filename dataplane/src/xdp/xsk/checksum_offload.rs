//! TCP checksums left to the device or the kernel through AF_XDP TX metadata: who computes them
//! ([`TxChecksumOffload`], `Auto` decided from the driver's AF_XDP features) and the request
//! the queue writes in front of a packet's first frame.

use super::{Frame, XskQueue};
use crate::xdp::tx_metadata::{self, TX_METADATA_LEN};
use crate::xdp::xsk_features;

/// Who computes the TCP checksum of a transmitted frame. With anything but `Off`, every frame
/// [`XskQueue::send`] queues that carries TCP over IPv4 or IPv6 gets an AF_XDP TX metadata
/// request (`XDP_TXMD_FLAGS_CHECKSUM`, from the TCP header to the end, stored at the TCP
/// checksum field), and its checksum field must hold the pseudo header's folded sum
/// (`tcp_offload::TxChecksum::Offloaded`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TxChecksumOffload {
    /// The engine computes it (default); frames leave complete.
    #[default]
    Off,
    /// The device: zero-copy drivers that list `tx-checksum` among their AF_XDP features
    /// (`ynl --family netdev --dump dev-get`; mlx5 among them); in copy mode the
    /// kernel's transmit path hands the request to the driver as `CHECKSUM_PARTIAL` and
    /// computes the sum itself where the device cannot. Not for veth towards an XDP receiver:
    /// the partial sum crosses the pair unfinished.
    Device,
    /// The kernel, in software (`XDP_UMEM_TX_SW_CSUM`; copy mode only): the same request, the
    /// sum computed in the `sendto` path. Proves the metadata path on veth; saves nothing there.
    Kernel,
    /// `Device` where the driver lists `tx-checksum` among its AF_XDP features (the `netdev`
    /// netlink family, Linux 6.8+), else `Off`: what [`crate::XdpConfig`] starts with.
    Auto,
}

impl TxChecksumOffload {
    /// `Auto` decided for interface `ifname` (other settings stay as they are).
    pub fn resolve(self, ifname: &str) -> TxChecksumOffload {
        if self != TxChecksumOffload::Auto {
            return self;
        }
        let features = crate::xdp::program::ifindex(ifname).and_then(xsk_features::dev_features);
        match features {
            Ok(f) if f.xsk & xsk_features::XSK_TX_CHECKSUM != 0 => TxChecksumOffload::Device,
            Ok(_) => TxChecksumOffload::Off,
            Err(e) => {
                tracing::debug!("{ifname}: AF_XDP features unknown ({e}); checksums by the engine");
                TxChecksumOffload::Off
            }
        }
    }
}
impl XskQueue {
    /// Writes a TX metadata checksum request in front of `frame` when it starts an Ethernet
    /// frame of TCP over IPv4 or IPv6 (else leaves it alone).
    pub(super) fn request_tcp_checksum(&self, frame: &mut Frame) {
        let Some(meta) = tx_metadata::tcp_checksum_request(self.data(frame)) else {
            return;
        };
        let at = frame.addr - u64::from(TX_METADATA_LEN);
        debug_assert!(at >= self.frame_start(frame.addr));
        // Safety: the metadata slot is the end of `frame`'s headroom (the packet starts
        // `UMEM_HEADROOM` >= 16 bytes into the frame, see `alloc`); `&mut frame` is the only
        // token of that frame, so neither the kernel nor another view touches those bytes.
        unsafe { self.umem.bytes_mut(at, meta.len()) }.copy_from_slice(&meta);
        frame.options |= libc::XDP_TX_METADATA;
    }
}
