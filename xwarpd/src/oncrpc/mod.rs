//! The block store over ONC RPC on plain TCP (RFC 5531, record marking §11), beside the
//! RPC-over-RDMA service: the same program, procedures and XDR (`rpcrdma::storage`), the same
//! file and boot verifier ([`SharedStore`]), the same admission, bounds and counters, on a
//! port of its own ([`DEFAULT_TCP_STORE_PORT`]).
//!
//! On our own TCP (the xdp transport) with the TCP RDMA option negotiated
//! (draft-csapuntz-tcprdma-00), READ replies are annotated so the client's TCP places
//! the data straight into the buffer it registered for the call's RID; a client or server on
//! kernel TCP simply ignores the option (RFC 9293: unknown options are ignored) and copies.
//!
//! - [`record`]: record marking, reassembly with bounds.
//! - [`stream`]: the byte stream ([`RpcStream`]) and the option's calls on it.
//! - [`TcpStoreServer`]: listener, admission, a thread per connection (`conn`).
//! - [`TcpStoreClient`]: READ / WRITE / COMMIT / GETATTR over a stream.
//! - [`xdp`]: the xdp transport's streams (our TCP, where the option can be negotiated).

mod client;
mod conn;
pub mod record;
mod server;
pub mod stream;
pub mod xdp;

pub use client::{TcpClientCounters, TcpClientOptions, TcpStoreClient};
pub use server::{
    SharedStore, StartError, TcpServerOptions, TcpStoreServer, DEFAULT_TCP_STORE_PORT,
    RECORD_OVERHEAD,
};
pub use stream::{KernelListener, RpcListener, RpcStream, TransferOption};

/// The RID of an operation's bulk data (draft §5.1.1, TCPRDMA-18): the operation's index in the
/// call (0 for the store's single-operation calls) above the call's XID; bits 40-45 stay zero
/// (TCPRDMA-19).
pub fn read_rid(op_index: u8, xid: u32) -> u64 {
    (u64::from(op_index) << 32) | u64::from(xid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcprdma_18_rid_is_operation_index_above_xid() {
        assert_eq!(read_rid(0, 0x1234_5678), 0x1234_5678);
        assert_eq!(read_rid(2, 0xdead_beef), 0x2_dead_beef);
        assert!(read_rid(255, u32::MAX) < 1 << 40, "bits 40-45 are zero");
    }
}
