//! The per-socket counters of an [`XskQueue`]: the kernel's, and what the queue refused of the
//! kernel's side of its rings.

use super::{XdpError, XskQueue};

/// The kernel's per-socket drop and error counters (`struct xdp_statistics`), and the queue's
/// own refusals.
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
    /// What the queue refused of the kernel's side of its rings.
    pub refused: XskRefused,
}

/// What a queue refused of what the kernel's side of its rings said (each a kernel bug, never
/// trusted; all zero in a healthy run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct XskRefused {
    /// Reloads of a ring index that was out of bounds: a producer more than a ring ahead of our
    /// consumer, or a consumer past our producer or more than a ring behind it.
    pub ring_indices: u64,
    /// Descriptors handed back with an address outside the UMEM.
    pub outside_umem: u64,
    /// Descriptors handed back for a frame the kernel did not hold through the matching ring:
    /// a frame handed back twice, or never lent.
    pub not_lent: u64,
}

impl XskQueue {
    /// The kernel's drop and error counters for this socket, with the queue's refusals.
    pub fn statistics(&self) -> Result<XskStatistics, XdpError> {
        let st = self.socket.statistics()?;
        Ok(XskStatistics {
            rx_dropped: st.rx_dropped,
            rx_invalid_descs: st.rx_invalid_descs,
            tx_invalid_descs: st.tx_invalid_descs,
            rx_ring_full: st.rx_ring_full,
            rx_fill_ring_empty_descs: st.rx_fill_ring_empty_descs,
            tx_ring_empty_descs: st.tx_ring_empty_descs,
            refused: self.refused(),
        })
    }
}
