//! Work completions: {wr_id, opcode, status, byte_len} plus receive details.

use crate::ddp::stag::Stag;

/// Which work request completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WcOpcode {
    /// A Send (any variant) posted with `post_send`.
    Send,
    /// An RDMA Write.
    Write,
    /// An RDMA Read (the data has been placed in the local buffer).
    Read,
    /// A receive buffer consumed by an incoming Send.
    Recv,
}

/// How it completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WcStatus {
    /// Done.
    Success,
    /// The queue pair entered the error state (a Terminate was sent or received, or the
    /// transport failed) before this request completed.
    Flushed,
}

/// One work completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkCompletion {
    /// The caller's identifier from the post.
    pub wr_id: u64,
    /// What kind of request.
    pub opcode: WcOpcode,
    /// Outcome.
    pub status: WcStatus,
    /// Octets transferred (for Recv: the ULP Message Length, DDP-61).
    pub byte_len: u32,
    /// Recv only: the STag the peer's Send with Invalidate invalidated.
    pub invalidated: Option<Stag>,
    /// Recv only: the Send asked for a solicited event.
    pub solicited: bool,
}
