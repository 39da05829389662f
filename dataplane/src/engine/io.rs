//! The packet I/O an engine runs over: batches of received frames, and free transmit frame
//! buffers the endpoint writes its frames into ([`FrameSink`]). AF_XDP queues ([`super::XskIo`])
//! implement it.

use std::time::Instant;

use endpoint::FrameSink;

/// Frame-level I/O of one queue. Frames are whole Ethernet frames (no FCS).
pub trait PacketIo: FrameSink {
    /// Hands each frame received so far (at most `max`) to `f`, in arrival order, and returns
    /// how many were handed. The slice is valid only during the call (a UMEM frame goes back to
    /// the fill ring after it).
    fn rx_batch(&mut self, now: Instant, max: usize, f: &mut dyn FnMut(&[u8])) -> usize;

    /// Pushes queued transmit frames out (AF_XDP: kick the kernel when it needs a wakeup).
    fn flush(&mut self, now: Instant);

    /// When a frame will next be receivable if known (a test's in-memory link knows; a NIC
    /// queue does not and returns `None`).
    fn next_rx(&self) -> Option<Instant> {
        None
    }
}
