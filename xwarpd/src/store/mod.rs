//! The block-storage service: a file, mmap'ed shared, served over RPC-over-RDMA (the `rpcrdma`
//! crate's storage program: READ, WRITE, COMMIT, GETATTR), and its client library.
//!
//! - [`MappedFile`](dataplane::MappedFile): the backing file, opened and sized; the server maps it
//!   shared (mlock'ed) and registers the mapping, so what RDMA places is in the page cache at
//!   once and COMMIT (msync + fdatasync of the range) makes it durable.
//! - [`StoreServer`]: listens, admits clients by network ([`AllowList`]) up to a connection
//!   cap shared fairly among sources (a silent connection gives way to a new client when the
//!   cap is reached), serves each connection on its own thread, one call at a time, and closes it after an
//!   idle timeout. READ data is RDMA-Written straight from the file's region into the client's
//!   write chunk, WRITE data RDMA-Read from its read chunk straight into the region at the
//!   offset: no staging buffer, no copy. Each connection has its own protection domain, in
//!   which the file's one mapping is registered again (local access only).
//! - [`StoreClient`]: connect, [`read`](StoreClient::read) into a registered buffer,
//!   [`write`](StoreClient::write), [`commit`](StoreClient::commit),
//!   [`getattr`](StoreClient::getattr).
//!
//! Connection parameters travel as RFC 8797 private data in the MPA Request and Reply: both
//! sides offer [`INLINE_SIZE`]-byte Sends and receive buffers. Messages longer than that travel
//! as RPC-over-RDMA long messages, up to [`MAX_LONG_MESSAGE`]: long calls as RDMA_NOMSG with a
//! position-0 read chunk, long replies through the call's reply chunk or, without one, as a
//! position-0 read chunk the client RDMA-Reads and acknowledges with RDMA_DONE.

pub(crate) mod admission;
mod client;
mod connection;
pub(crate) mod extent;
pub(crate) mod fair_share;
#[cfg(test)]
mod isolation_tests;
mod server;
pub(crate) mod stats;
pub(crate) mod threads;

pub use admission::{interface_subnet, AllowError, AllowList, Refusal, REFUSAL_LOG_INTERVAL};
pub use client::{
    Attributes, CallId, ClientOptions, Finished, MessagePolicy, ReadResult, StoreClient,
    StoreError, WriteResult, MAX_IN_FLIGHT,
};
pub use fair_share::DEFAULT_SILENT_AFTER;
pub use ipnet::IpNet;
pub use server::{
    default_source_share, ServerOptions, StartError, StoreServer, BLOCK_SIZE, DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
};
pub use stats::{CallCounts, ConnSnapshot, StoreSnapshot, StoreStats};

/// Send and receive buffer size both ends offer (RFC 8797 private data).
pub const INLINE_SIZE: u32 = 8192;
/// Largest long message (RPCRDMA-29, -30) either end takes: a long call's position-0 chunk, a
/// long reply in a reply chunk or a read chunk. Longer ones are refused (ERR_CHUNK, TOO_BIG)
/// before anything is allocated or moved.
pub const MAX_LONG_MESSAGE: u32 = 64 << 10;
/// Largest READ or WRITE per call by default.
pub const DEFAULT_MAX_IO: u32 = 4 << 20;
