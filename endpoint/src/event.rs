//! What the application learns from an endpoint besides completions.

use std::net::SocketAddr;

use ddp::QpEvent;
use tcp_offload::CloseReason;

use crate::conn::ConnId;
use crate::endpoint::listeners::ListenerId;

/// What the application learns besides completions ([`crate::Endpoint::poll_event`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndpointEvent {
    /// A listener accepted a TCP connection; MPA startup runs (post receives now). On a
    /// stream listener the connection is ready for octets at once.
    Accepted {
        /// The listener.
        listener: ListenerId,
        /// The new connection.
        conn: ConnId,
        /// The peer.
        peer: SocketAddr,
    },
    /// MPA is up on `conn`.
    Established {
        /// The connection.
        conn: ConnId,
        /// The peer's private data.
        peer_private_data: Vec<u8>,
        /// What was negotiated.
        negotiated: ddp::NegotiatedFraming,
    },
    /// A listener opened with manual accept received a valid MPA Request on `conn`: accept or
    /// reject it (verbs API).
    ConnectRequest {
        /// The connection.
        conn: ConnId,
        /// The Request: private data, markers and CRC wishes, revision, and in Rev 2 the
        /// Initiator's IRD/ORD and peer-to-peer offer.
        request: mpa::RequestInfo,
    },
    /// MPA startup failed or was rejected; the connection is being closed (after the
    /// Terminate, for RFC 6581's IRD and RTR refusals).
    StartupFailed {
        /// The connection.
        conn: ConnId,
        /// The queue pair's event: `Rejected` or `StartupFailed`.
        event: QpEvent,
    },
    /// The stream entered the error state (Terminate sent or received, framing error).
    StreamError {
        /// The connection.
        conn: ConnId,
        /// The queue pair's event.
        event: QpEvent,
    },
    /// A stream connection's handshake completed: octets can be sent.
    StreamConnected {
        /// The connection.
        conn: ConnId,
    },
    /// A stream connection has new octets to read (or its end).
    StreamReadable {
        /// The connection.
        conn: ConnId,
    },
    /// A stream connection's send buffer has room again.
    StreamWritable {
        /// The connection.
        conn: ConnId,
    },
    /// The peer closed its side (FIN) after everything before it was delivered. Once MPA is up
    /// the stream is half-closed (DDP-69): posted receives and Reads have completed flushed,
    /// Sends and Writes still go out and complete; [`crate::Endpoint::close`] sends our FIN
    /// once they are acknowledged (DDP-70). The connection stays until then. On a plain
    /// stream: what arrived before the FIN can still be read, then the end.
    PeerClosed {
        /// The connection.
        conn: ConnId,
    },
    /// The connection is gone.
    Closed {
        /// The connection.
        conn: ConnId,
        /// Why TCP ended.
        reason: CloseReason,
    },
}
