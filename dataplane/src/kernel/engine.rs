//! The protocol engine a connection driver runs: MPA framing, DDP placement and RDMAP on one
//! stream, sans-IO. The driver feeds it socket bytes and work requests and writes out what it
//! produces; this trait is the only thing the kernel transport knows about the protocol.

use std::time::Instant;

use crate::qp::{QpError, WorkRequest};
use crate::Completion;

/// One connection's protocol state after MPA startup.
pub(crate) trait Engine: Send + 'static {
    /// Queues a work request. Requests that cannot be carried out complete with an error status.
    fn post(&mut self, now: Instant, wr: WorkRequest);
    /// Consumes bytes read from the socket (any segmentation).
    fn handle_rx(&mut self, now: Instant, bytes: &[u8]);
    /// Appends the next chunk of wire bytes (one FPDU, or a few) to `out`; false when idle.
    fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> bool;
    /// Next completion (receives go to the receive CQ, the rest to the send CQ).
    fn poll_completion(&mut self) -> Option<Completion>;
    /// Set once the stream failed; the driver then sends what is queued (a Terminate) and closes.
    fn fatal(&self) -> Option<QpError>;
    /// The peer closed TCP: the engine completes what it can and reports the rest via `flush`.
    fn peer_closed(&mut self);
    /// Completes every outstanding work request as flushed.
    fn flush(&mut self) -> Vec<Completion>;
}
