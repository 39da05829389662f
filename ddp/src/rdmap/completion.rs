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

/// Work completions waiting for the ULP, oldest first: a ring that doubles when full.
///
/// A ring of its own rather than a `VecDeque` so that [`push`](Self::push) and
/// [`pop`](Self::pop), on every message's path, stay small enough to inline into their callers.
#[derive(Debug, Default)]
pub(crate) struct CompletionRing {
    /// The slots; their number is zero or a power of two.
    slots: Vec<WorkCompletion>,
    /// Index of the oldest completion.
    head: usize,
    /// Completions held.
    len: usize,
}

/// What fills slots that hold no completion.
const EMPTY_SLOT: WorkCompletion = WorkCompletion {
    wr_id: 0,
    opcode: WcOpcode::Recv,
    status: WcStatus::Flushed,
    byte_len: 0,
    invalidated: None,
    solicited: false,
};

impl CompletionRing {
    /// Append `wc` after every completion held.
    #[inline]
    pub(crate) fn push(&mut self, wc: WorkCompletion) {
        if self.len == self.slots.len() {
            self.grow();
        }
        let at = (self.head + self.len) & (self.slots.len() - 1);
        self.slots[at] = wc;
        self.len += 1;
    }

    /// Take the oldest completion.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<WorkCompletion> {
        if self.len == 0 {
            return None;
        }
        let wc = self.slots[self.head];
        self.head = (self.head + 1) & (self.slots.len() - 1);
        self.len -= 1;
        Some(wc)
    }

    /// Whether no completion is held.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Double the slots (at least 8), the oldest completion moved to slot 0.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        self.slots.rotate_left(self.head);
        self.head = 0;
        let slots = (self.slots.len() * 2).max(8);
        self.slots.resize(slots, EMPTY_SLOT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wc(wr_id: u64) -> WorkCompletion {
        WorkCompletion {
            wr_id,
            ..EMPTY_SLOT
        }
    }

    #[test]
    fn ring_keeps_order_across_wrap_and_growth() {
        let mut ring = CompletionRing::default();
        assert_eq!(ring.pop(), None);
        let (mut next_in, mut next_out) = (0u64, 0u64);
        // Interleave pushes and pops so the head wanders before each growth.
        for round in 0..40u64 {
            for _ in 0..(round % 7 + 1) {
                ring.push(wc(next_in));
                next_in += 1;
            }
            for _ in 0..(round % 5) {
                if let Some(c) = ring.pop() {
                    assert_eq!(c.wr_id, next_out);
                    next_out += 1;
                }
            }
        }
        while let Some(c) = ring.pop() {
            assert_eq!(c.wr_id, next_out);
            next_out += 1;
        }
        assert_eq!(next_out, next_in);
        assert!(ring.is_empty());
    }
}
