//! What the store client takes and gives: its options, its errors and the answers of calls.

use std::time::Duration;

use dataplane::{ConnectError, ConnectionConfig, PostError, Transport};
use rpcrdma::storage::{GetattrOk, StoreStatus};
use rpcrdma::ErrorBody;

/// How a client connects.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Transport of the client's device (the kernel transport today).
    pub transport: Transport,
    /// MPA and queue settings.
    pub connection: ConnectionConfig,
    /// How long one call may take before it fails with [`StoreError::Timeout`].
    pub call_timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            transport: Transport::Kernel,
            connection: ConnectionConfig::default(),
            call_timeout: Duration::from_secs(30),
        }
    }
}

/// How a client's messages carry bulk data and long messages (RFC 8166 §3.5: DDP-eligible
/// data may travel by RDMA or in the message; the requester chooses). Set with
/// [`StoreClient::set_policy`](super::StoreClient::set_policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessagePolicy {
    /// READ and WRITE data go by RDMA (write and read chunks) where the chunk planner says
    /// (at least 4 KiB, or too long for inline). Off: the data stays in the RPC messages, and
    /// messages too long for the inline size go as long calls and long replies (up to
    /// [`MAX_LONG_MESSAGE`](super::super::MAX_LONG_MESSAGE)).
    pub ddp: bool,
    /// Offer a reply chunk with a call whose reply may not fit inline (RPCRDMA-30). Off: the
    /// server returns such a reply as a position-0 read chunk, which the client RDMA-Reads and
    /// acknowledges with RDMA_DONE (draft §5.2).
    pub reply_chunks: bool,
}

impl Default for MessagePolicy {
    fn default() -> Self {
        Self {
            ddp: true,
            reply_chunks: true,
        }
    }
}

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The device could not be opened.
    #[error(transparent)]
    Device(#[from] dataplane::DeviceError),
    /// Connecting failed (TCP, MPA startup, rejection).
    #[error("connect: {0}")]
    Connect(#[from] ConnectError),
    /// Registering the client's own buffers failed.
    #[error(transparent)]
    Register(#[from] dataplane::RegisterError),
    /// A work request could not be posted (the buffer is not from [`StoreClient::pd`](super::StoreClient::pd), a range
    /// is out of bounds, the connection is down).
    #[error("post: {0}")]
    Post(#[from] PostError),
    /// The caller's arguments are unusable (empty or oversized range, wrong access rights).
    #[error("invalid argument: {0}")]
    Invalid(&'static str),
    /// The server answered with a non-OK status.
    #[error("server status {0:?}")]
    Status(StoreStatus),
    /// The server refused the call at the transport level (RDMA_ERROR).
    #[error("RDMA_ERROR from the server: {0:?}")]
    Refused(ErrorBody),
    /// The RPC was not accepted (PROG_UNAVAIL, GARBAGE_ARGS, ...) or the reply was unusable.
    #[error("RPC failed: {0}")]
    Rpc(String),
    /// No reply in time.
    #[error("no reply within the call timeout")]
    Timeout,
    /// The connection broke.
    #[error("connection lost")]
    Disconnected,
    /// The byte stream failed (ONC RPC over TCP: connect, read, write).
    #[error("stream: {0}")]
    Io(#[from] std::io::Error),
}

/// The store's attributes (GETATTR).
pub type Attributes = GetattrOk;

/// What a READ returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadResult {
    /// Bytes placed at the start of the range.
    pub len: u32,
    /// The read reached the end of the store.
    pub eof: bool,
}

/// What a WRITE returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteResult {
    /// Bytes written.
    pub count: u32,
    /// The data is already durable (the call asked for a stable write).
    pub committed: bool,
    /// The server's boot verifier: a change means uncommitted data may be lost.
    pub verifier: u64,
}

/// A call in flight (its XID).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallId(pub u32);

/// The answer of a finished call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    /// READ.
    Read(ReadResult),
    /// WRITE.
    Write(WriteResult),
    /// COMMIT: the server's boot verifier.
    Commit(u64),
    /// GETATTR.
    Getattr(Attributes),
    /// NULL.
    Null,
}
