//! TCP checksums left to the device or the kernel through AF_XDP TX metadata: who computes them
//! ([`TxChecksumOffload`], `Auto` decided from the driver's AF_XDP features) and the request
//! the queue writes in front of a packet's first frame.

use super::{Frame, XskQueue};
use crate::tx_metadata::{self, TX_METADATA_LEN};
use crate::xsk_features;

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
    /// netlink family, Linux 6.8+), else `Off`: what `dataplane::XdpConfig` starts with.
    Auto,
}

impl TxChecksumOffload {
    /// `Auto` decided for interface `ifname` (other settings stay as they are).
    pub fn resolve(self, ifname: &str) -> TxChecksumOffload {
        self.resolve_with(|| xsk_features::interface_features(ifname).ok())
    }

    /// `Auto` decided by the driver's `features` (asked only for `Auto`; `None`: unknown).
    pub(super) fn resolve_with(
        self,
        features: impl FnOnce() -> Option<xsk_features::DevFeatures>,
    ) -> TxChecksumOffload {
        if self != TxChecksumOffload::Auto {
            return self;
        }
        Self::for_features(features())
    }

    /// What `Auto` becomes for a driver with `features` (`None`: unknown): the device when it
    /// lists `tx-checksum`, else the engine.
    fn for_features(features: Option<xsk_features::DevFeatures>) -> TxChecksumOffload {
        match features {
            Some(f) if f.xsk & xsk_features::XSK_TX_CHECKSUM != 0 => TxChecksumOffload::Device,
            _ => TxChecksumOffload::Off,
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

#[cfg(test)]
mod tests {
    use super::*;
    use xsk_features::{DevFeatures, XSK_TX_CHECKSUM};

    /// Offload only where the driver offers it: `Auto` is the device exactly when the
    /// driver lists tx-checksum among its AF_XDP features (veth, which lists none, is tested
    /// against the kernel in afxdp/tests/xsk_tx_checksum.rs).
    #[test]
    fn auto_is_the_device_exactly_when_the_driver_offers_tx_checksums() {
        let with = |xsk| Some(DevFeatures { xdp: 0x7f, xsk });
        assert_eq!(
            TxChecksumOffload::for_features(with(XSK_TX_CHECKSUM)),
            TxChecksumOffload::Device
        );
        // Timestamps alone (1) and launch time (4) are not checksums.
        assert_eq!(
            TxChecksumOffload::for_features(with(1 | 4)),
            TxChecksumOffload::Off
        );
        assert_eq!(
            TxChecksumOffload::for_features(with(0)),
            TxChecksumOffload::Off
        );
        assert_eq!(
            TxChecksumOffload::for_features(None),
            TxChecksumOffload::Off
        );
    }
}
