//! Registered memory for long messages (RPCRDMA-29, -30, -36), made at the first one.

use dataplane::{Access, MemoryRegion, ProtectionDomain};
use rpcrdma::{Segment, WriteChunk};

use super::super::MAX_LONG_MESSAGE;
use super::{StoreError, LONG_SLOTS};

/// Registered memory for long messages, made at the first one: per slot a long call's message
/// (remote read) and a reply chunk (remote write); one more reply-side slot takes long replies
/// fetched from a read chunk.
pub(super) struct LongSlots {
    pub(super) call_mr: MemoryRegion,
    pub(super) reply_mr: MemoryRegion,
    pub(super) free: Vec<usize>,
}

impl LongSlots {
    pub(super) const SIZE: usize = MAX_LONG_MESSAGE as usize;
    /// The reply-side slot long replies are fetched into.
    pub(super) const FETCH: usize = LONG_SLOTS;

    pub(super) fn new(pd: &ProtectionDomain) -> Result<Self, StoreError> {
        Ok(Self {
            call_mr: pd.register(Self::SIZE * LONG_SLOTS, Access::REMOTE_READ)?,
            reply_mr: pd.register(
                Self::SIZE * (LONG_SLOTS + 1),
                Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            )?,
            free: (0..LONG_SLOTS).rev().collect(),
        })
    }

    /// Where a long call's message in `slot` is read from.
    pub(super) fn call_at(&self, slot: usize) -> Segment {
        Segment {
            handle: self.call_mr.stag(),
            length: MAX_LONG_MESSAGE,
            offset: (slot * Self::SIZE) as u64,
        }
    }

    /// The reply chunk of `slot`.
    pub(super) fn reply_chunk(&self, slot: usize) -> WriteChunk {
        WriteChunk::new(vec![Segment {
            handle: self.reply_mr.stag(),
            length: MAX_LONG_MESSAGE,
            offset: (slot * Self::SIZE) as u64,
        }])
    }
}
