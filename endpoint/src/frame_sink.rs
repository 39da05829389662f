//! Where an endpoint writes the frames it transmits: the caller's transmit buffers (an AF_XDP
//! UMEM frame, a simulated link's buffer). Frames are built in place, so an FPDU is framed
//! straight into the buffer that goes on the wire.

use std::time::Instant;

/// What became of one [`FrameSink::tx_frame`] call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxOutcome {
    /// A frame was queued for transmission.
    Queued,
    /// The fill function wrote nothing; the buffer went back to the free pool.
    Empty,
    /// No free transmit buffer (ring full): try again after the next completion.
    NoBuffer,
}

/// Transmit buffers for whole Ethernet frames (no FCS).
pub trait FrameSink {
    /// Lends a free transmit buffer to `fill`, which writes one frame at its start and returns
    /// the length (or `None` to hand the buffer back unused). `now` is the endpoint's time of
    /// the transmission.
    fn tx_frame(
        &mut self,
        now: Instant,
        fill: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> TxOutcome;
}
