//! The kernel's per-socket counters of an [`XskQueue`].

use super::{XdpError, XskQueue};

/// The kernel's per-socket drop and error counters (`struct xdp_statistics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct XskStatistics {
    /// Received packets dropped for reasons other than a full ring.
    pub rx_dropped: u64,
    /// Received packets dropped for an invalid descriptor.
    pub rx_invalid_descs: u64,
    /// Transmit descriptors the kernel rejected as invalid.
    pub tx_invalid_descs: u64,
    /// Received packets dropped because the rx ring was full.
    pub rx_ring_full: u64,
    /// Times the fill ring was empty when a packet arrived.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the tx ring was empty when the kernel looked for work.
    pub tx_ring_empty_descs: u64,
}

impl XskQueue {
    /// The kernel's drop and error counters for this socket.
    pub fn statistics(&self) -> Result<XskStatistics, XdpError> {
        let st = self.socket.statistics()?;
        Ok(XskStatistics {
            rx_dropped: st.rx_dropped,
            rx_invalid_descs: st.rx_invalid_descs,
            tx_invalid_descs: st.tx_invalid_descs,
            rx_ring_full: st.rx_ring_full,
            rx_fill_ring_empty_descs: st.rx_fill_ring_empty_descs,
            tx_ring_empty_descs: st.tx_ring_empty_descs,
        })
    }
}
