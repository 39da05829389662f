//! The endpoint's work completions, with their connections, oldest first.

use ddp::{WcOpcode, WcStatus, WorkCompletion};

use crate::conn::ConnId;

/// Work completions waiting for the application, oldest first: a ring that doubles when full
/// and is given back once drained after a burst. A ring of its own rather than a `VecDeque`
/// so that [`push`](Self::push) and [`pop`](Self::pop), on every message's path, inline into
/// their callers.
#[derive(Debug, Default)]
pub(crate) struct CompletionQueue {
    /// The slots; their number is zero or a power of two.
    slots: Vec<(ConnId, WorkCompletion)>,
    /// Index of the oldest completion.
    head: usize,
    /// Completions held.
    len: usize,
}

/// What fills slots that hold no completion.
const EMPTY_SLOT: (ConnId, WorkCompletion) = (
    ConnId(0),
    WorkCompletion {
        wr_id: 0,
        opcode: WcOpcode::Recv,
        status: WcStatus::Flushed,
        byte_len: 0,
        invalidated: None,
        solicited: false,
    },
);

/// Slots a drained queue keeps; more are given back.
const KEPT_SLOTS: usize = 64;

impl CompletionQueue {
    /// Appends `wc` of `conn` after every completion held.
    #[inline(always)]
    pub(crate) fn push(&mut self, conn: ConnId, wc: WorkCompletion) {
        if self.len == self.slots.len() {
            self.grow();
        }
        let at = (self.head + self.len) & (self.slots.len() - 1);
        self.slots[at] = (conn, wc);
        self.len += 1;
    }

    /// Takes the oldest completion; when none is left, gives back the slots of a burst.
    #[inline(always)]
    pub(crate) fn pop(&mut self) -> Option<(ConnId, WorkCompletion)> {
        if self.len == 0 {
            if self.slots.len() > KEPT_SLOTS {
                self.shrink();
            }
            return None;
        }
        let c = self.slots[self.head];
        self.head = (self.head + 1) & (self.slots.len() - 1);
        self.len -= 1;
        Some(c)
    }

    /// Doubles the slots (at least 8), the oldest completion moved to slot 0.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        self.slots.rotate_left(self.head);
        self.head = 0;
        let slots = (self.slots.len() * 2).max(8);
        self.slots.resize(slots, EMPTY_SLOT);
    }

    /// Gives back the slots of a drained queue but [`KEPT_SLOTS`].
    #[cold]
    #[inline(never)]
    fn shrink(&mut self) {
        self.head = 0;
        self.slots.truncate(KEPT_SLOTS);
        self.slots.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wc(wr_id: u64) -> WorkCompletion {
        WorkCompletion {
            wr_id,
            ..EMPTY_SLOT.1
        }
    }

    #[test]
    fn queue_keeps_order_across_wrap_growth_and_shrink() {
        let mut q = CompletionQueue::default();
        assert_eq!(q.pop(), None);
        let (mut next_in, mut next_out) = (0u64, 0u64);
        for round in 0..60u64 {
            // Bursts past the kept slots now and then, drained to empty after each.
            let burst = if round % 10 == 9 { 300 } else { round % 7 + 1 };
            for _ in 0..burst {
                q.push(ConnId(next_in % 3), wc(next_in));
                next_in += 1;
            }
            for _ in 0..(round % 5) {
                if let Some((conn, c)) = q.pop() {
                    assert_eq!((conn, c.wr_id), (ConnId(next_out % 3), next_out));
                    next_out += 1;
                }
            }
            if round % 10 == 9 {
                while let Some((_, c)) = q.pop() {
                    assert_eq!(c.wr_id, next_out);
                    next_out += 1;
                }
                assert!(
                    q.slots.len() <= KEPT_SLOTS,
                    "a drained queue keeps few slots"
                );
            }
        }
        while let Some((_, c)) = q.pop() {
            assert_eq!(c.wr_id, next_out);
            next_out += 1;
        }
        assert_eq!(next_out, next_in);
    }
}
