//! The block-storage service: a file, mmap'ed shared, served over RPC-over-RDMA (the `rpcrdma`
//! crate's storage program: READ, WRITE, COMMIT, GETATTR), and its client library.
//!
//! - [`MappedFile`](dataplane::MappedFile): the backing file, opened and sized; the server maps it
//!   shared (mlock'ed) and registers the mapping, so what RDMA places is in the page cache at
//!   once and COMMIT (msync + fdatasync of the range) makes it durable.
//! - [`StoreServer`]: listens, admits clients by network ([`AllowList`]) up to a connection
//!   cap, serves each connection on its own thread, one call at a time, and closes it after an
//!   idle timeout. READ data is RDMA-Written straight from the file's region into the client's
//!   write chunk, WRITE data RDMA-Read from its read chunk straight into the region at the
//!   offset: no staging buffer, no copy. Each connection has its own protection domain, in
//!   which the file's one mapping is registered again (local access only).
//! - [`StoreClient`]: connect, [`read`](StoreClient::read) into a registered buffer,
//!   [`write`](StoreClient::write), [`commit`](StoreClient::commit),
//!   [`getattr`](StoreClient::getattr).
//!
//! Connection parameters travel as RFC 8797 private data in the MPA Request and Reply: both
//! sides offer [`INLINE_SIZE`]-byte Sends and receive buffers.

mod admission;
mod client;
mod connection;
#[cfg(test)]
mod isolation_tests;
mod server;
mod stats;

pub use admission::{interface_subnet, AllowError, AllowList, Refusal, REFUSAL_LOG_INTERVAL};
pub use client::{
    Attributes, CallId, ClientOptions, Finished, ReadResult, StoreClient, StoreError, WriteResult,
    MAX_IN_FLIGHT,
};
pub use ipnet::IpNet;
pub use server::{
    ServerOptions, StartError, StoreServer, BLOCK_SIZE, DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
};
pub use stats::{CallCounts, ConnSnapshot, StoreSnapshot, StoreStats};

/// Send and receive buffer size both ends offer (RFC 8797 private data).
pub const INLINE_SIZE: u32 = 8192;
/// Largest READ or WRITE per call by default.
pub const DEFAULT_MAX_IO: u32 = 4 << 20;
