//! xwarpd, the xwarp daemon, as a library: what it serves and how it runs, on top of the
//! `dataplane` verbs API.
//!
//! - [`daemon`]: configuration, lifecycle ([`daemon::run`]), echo listeners, counters on a Unix
//!   control socket (`xwarpd stats`) and a Prometheus endpoint.
//! - [`store`]: the block store served over RPC-over-RDMA ([`store::StoreServer`]) and its
//!   client library ([`store::StoreClient`], used by `xwarp-bench`).
//! - [`oncrpc`]: the same store over ONC RPC on plain TCP ([`oncrpc::TcpStoreServer`],
//!   [`oncrpc::TcpStoreClient`]), with the TCP RDMA option's placement where it is negotiated.
//!
//! The `xwarpd` binary (`src/main.rs`) is the command line over [`daemon`].
#![forbid(unsafe_code)]

pub mod daemon;
pub mod oncrpc;
pub mod store;
