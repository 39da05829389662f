//! The block-storage service: a file, mmap'ed shared, served over RPC-over-RDMA (the `rpcrdma`
//! crate's storage program: READ, WRITE, COMMIT, GETATTR), and its client library.
//!
//! - [`MappedFile`](dataplane::MappedFile): the backing file, opened and sized; the server maps it
//!   shared (mlock'ed) and registers the mapping, so what RDMA places is in the page cache at
//!   once and COMMIT (msync + fdatasync of the range) makes it durable.
//! - [`StoreServer`]: listens, serves each connection on its own thread, one call at a time.
//!   READ data is RDMA-Written straight from the file's region into the client's write chunk,
//!   WRITE data RDMA-Read from its read chunk straight into the region at the offset: no
//!   staging buffer, no copy. All connections share the protection domain of that region.
//! - [`StoreClient`]: connect, [`read`](StoreClient::read) into a registered buffer,
//!   [`write`](StoreClient::write), [`commit`](StoreClient::commit),
//!   [`getattr`](StoreClient::getattr).
//!
//! Connection parameters travel as RFC 8797 private data in the MPA Request and Reply: both
//! sides offer [`INLINE_SIZE`]-byte Sends and receive buffers.

mod client;
mod server;
mod stats;

pub use client::{
    Attributes, CallId, ClientOptions, Finished, ReadResult, StoreClient, StoreError, WriteResult,
    MAX_IN_FLIGHT,
};
pub use server::{ServerOptions, StoreServer, BLOCK_SIZE};
pub use stats::{ConnSnapshot, ConnStats, StoreStats};

/// Send and receive buffer size both ends offer (RFC 8797 private data).
pub const INLINE_SIZE: u32 = 8192;
/// Largest READ or WRITE per call by default.
pub const DEFAULT_MAX_IO: u32 = 4 << 20;
