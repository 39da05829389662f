//! The packet I/O an engine runs over: batches of received frames and free transmit frame
//! buffers. AF_XDP queues and the in-memory link ([`super::MemPort`]) implement it.

use std::time::Instant;

/// What became of one [`PacketIo::tx_frame`] call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxOutcome {
    /// A frame was queued for transmission.
    Queued,
    /// The fill function wrote nothing; the buffer went back to the free pool.
    Empty,
    /// No free transmit buffer (ring full): try again after the next completion.
    NoBuffer,
}

/// Frame-level I/O of one queue. Frames are whole Ethernet frames (no FCS).
pub trait PacketIo {
    /// Hands each frame received so far (at most `max`) to `f`, in arrival order, and returns
    /// how many were handed. The slice is valid only during the call (a UMEM frame goes back to
    /// the fill ring after it).
    fn rx_batch(&mut self, now: Instant, max: usize, f: &mut dyn FnMut(&[u8])) -> usize;

    /// Lends a free transmit buffer to `fill`, which writes one frame at its start and returns
    /// the length (or `None` to hand the buffer back unused).
    fn tx_frame(
        &mut self,
        now: Instant,
        fill: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> TxOutcome;

    /// Pushes queued transmit frames out (AF_XDP: kick the kernel when it needs a wakeup).
    fn flush(&mut self, now: Instant);

    /// When a frame will next be receivable if known (the in-memory link knows; a NIC queue
    /// does not and returns `None`).
    fn next_rx(&self) -> Option<Instant> {
        None
    }
}
