//! Plain TCP byte streams on the xdp transport: [`TcpListener`] and
//! [`TcpStream`], shaped like `std::net`'s, run by the device's AF_XDP engine (inline or
//! threaded) as `endpoint` stream connections: our TCP, no MPA. With
//! [`StreamConfig::tcp_rdma`] both ends offer the TCP RDMA option (draft-csapuntz-tcprdma-00):
//! the sender marks transfer bytes ([`TcpStream::write_transfer`]), the receiver registers a
//! buffer per RID ([`TcpStream::expect_transfer`]) into which annotated bytes are placed as
//! they arrive, in order or not, and reads the stream skipping them
//! ([`TcpStream::read_transfer`]).
//!
//! ```text
//! Device::tcp_listen(addr, StreamConfig) -> TcpListener ── accept() -> (TcpStream, peer)
//! Device::tcp_connect(addr, &StreamConfig) -> TcpStream
//! TcpStream: Read + Write (also for &TcpStream), shutdown, timeouts, try_clone,
//!            mark_transfer / mark_message_start / write_transfer (sender),
//!            expect_transfer / read_transfer / take_transfer (receiver), counters
//! ```
//!
//! Blocking calls wait on the engine's state (driving the engine in inline mode) until they
//! can make progress or their timeout passes. The kernel transport has no stream API: use
//! `std::net` there.

mod routes;
mod socket;
mod tcp_listener;

use std::time::Duration;

pub(crate) use routes::StreamRoutes;
pub use socket::TcpStream;
pub use tcp_listener::TcpListener;
pub use tcp_offload::rdma::{PlacedTransfer, Transfer};

/// Settings of a stream listener or connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamConfig {
    /// Offer the TCP RDMA option (kind 25) in the handshake; it is used only when the peer
    /// offers it too. Off by default.
    pub tcp_rdma: bool,
    /// How long `tcp_connect` waits for the handshake.
    pub connect_timeout: Duration,
    /// How long a closed connection may take to finish (queued octets out, FINs exchanged)
    /// before it is reset.
    pub close_timeout: Duration,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            tcp_rdma: false,
            connect_timeout: Duration::from_secs(10),
            close_timeout: Duration::from_secs(5),
        }
    }
}

impl StreamConfig {
    fn options(&self) -> endpoint::StreamOptions {
        endpoint::StreamOptions {
            tcp_rdma: self.tcp_rdma,
            close_timeout: self.close_timeout,
        }
    }
}

/// A stream's TCP RDMA option counters (see `tcp_offload::TcpCounters`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamCounters {
    /// Segments sent with a transfer annotation.
    pub segments_annotated: u64,
    /// Octets placed into registered buffers as they arrived.
    pub bytes_placed: u64,
    /// Of those, octets placed before the hole before them filled.
    pub ooo_bytes_placed: u64,
    /// Octets `read_transfer` skipped because they were placed already.
    pub copies_avoided: u64,
    /// Octets `read_transfer` copied from the stream.
    pub bytes_copied: u64,
    /// TCP retransmissions.
    pub retransmissions: u64,
}

/// An `io::Error` of kind `kind` with message `msg`.
pub(crate) fn io_err(kind: std::io::ErrorKind, msg: &'static str) -> std::io::Error {
    std::io::Error::new(kind, msg)
}
