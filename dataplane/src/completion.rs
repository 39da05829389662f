//! Work completions: what a completion queue reports for each finished work request.

/// Which work request finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opcode {
    /// A posted Send went out (completes when handed to TCP).
    Send,
    /// A posted receive buffer was filled by a peer's Send.
    Recv,
    /// A posted RDMA Write went out.
    Write,
    /// A posted RDMA Read finished: the data is placed in the local region.
    Read,
}

/// How it finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Done.
    Success,
    /// Flushed: the queue pair closed or failed before the request could finish (why it
    /// failed, if it did: [`crate::QueuePair::error`]).
    Flushed,
}

/// One work completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The caller's id from the work request.
    pub wr_id: u64,
    /// Which kind of request it was.
    pub opcode: Opcode,
    /// How it finished.
    pub status: Status,
    /// Bytes transferred (for receives: the length of the message received).
    pub byte_len: u32,
    /// The queue pair it belongs to.
    pub qp_num: u32,
    /// For receives: the Send carried the solicited-event flag.
    pub solicited: bool,
    /// For receives: the Send invalidated this local STag.
    pub invalidated: Option<u32>,
}

impl Completion {
    /// True when the request finished successfully.
    pub fn is_ok(&self) -> bool {
        self.status == Status::Success
    }
}
