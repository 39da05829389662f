//! The inline threshold: how a call or reply of given sizes travels (§3.1,
//! §3.4, §5, §5.1, §5.2, §6).
//!
//! Sizes are whole Sends: transport header plus (reduced) RPC message, because what must fit is
//! the peer's posted receive buffer. Before negotiation both limits are 1024 bytes (§6.1,
//! RPCRDMA-35; RFC 8166's default inline threshold).

use crate::chunk_list::ChunkLists;
use crate::segment::{ReadSegment, Segment};
use crate::xdr::padded_len;
use thiserror::Error;

/// The inline size assumed before negotiation (§6.1).
pub const DEFAULT_INLINE: u32 = 1024;

/// Header bytes of an RDMA_MSG/RDMA_NOMSG with all three lists empty.
const EMPTY_HEADER: u32 = 28;

/// Policy and negotiated limits of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkPlanner {
    /// Largest call Send the server accepts inline (its `maxcallsize`, RPCRDMA-36).
    pub max_inline_call: u32,
    /// Largest reply Send the client accepts inline (its receive buffers, `maxreplysize`).
    pub max_inline_reply: u32,
    /// DDP-eligible data at least this long goes by RDMA, not inline (§3.1: "a few kilobytes").
    pub ddp_threshold: u32,
    /// The server may RDMA-Read from the client (client's `maxrdmaread` > 0, RPCRDMA-38); when
    /// false, calls carry no read chunks.
    pub call_read_chunks: bool,
    /// Segments used per chunk (1 for one contiguous registration).
    pub segments_per_chunk: u32,
}

impl Default for ChunkPlanner {
    fn default() -> Self {
        Self {
            max_inline_call: DEFAULT_INLINE,
            max_inline_reply: DEFAULT_INLINE,
            ddp_threshold: 4096,
            call_read_chunks: true,
            segments_per_chunk: 1,
        }
    }
}

/// The sizes of one call, as the client knows them before encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CallShape {
    /// RPC call message without the bulk argument's data (header, fixed arguments, the length
    /// word of the bulk argument).
    pub message_len: u32,
    /// Length of the DDP-eligible argument data (WRITE data); 0 if none.
    pub bulk_arg: u32,
    /// Largest DDP-eligible result expected (READ data); 0 if none.
    pub bulk_result: u32,
    /// Largest reply message expected, without the bulk result's data.
    pub reply_len: u32,
}

/// Where a DDP-eligible item travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// In the Send.
    Inline,
    /// By RDMA: a read chunk for an argument, a write chunk for a result.
    Chunk,
}

/// The transport procedure of the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallForm {
    /// RDMA_MSG: the reduced call follows the header.
    Msg,
    /// RDMA_NOMSG: the reduced call itself is a read chunk at position 0 (RPCRDMA-29).
    LongCall,
}

/// How a call goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallPlan {
    /// Bulk argument: inline or read chunk.
    pub bulk_arg: Placement,
    /// Bulk result: inline or write chunk.
    pub bulk_result: Placement,
    /// Size of the reply chunk to advertise, if the reply may not fit inline (RPCRDMA-30).
    pub reply_chunk: Option<u32>,
    /// RDMA_MSG or a position-0 long call.
    pub form: CallForm,
    /// Bytes of the Send (header plus inline message; the header alone for a long call).
    pub send_len: u32,
}

/// How a reply goes out: inline, through the reply chunk, or as a position-0 read chunk (§5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyForm {
    /// RDMA_MSG with the reply inline.
    Inline,
    /// RDMA Write of the reply into the call's reply chunk, then RDMA_NOMSG.
    ReplyChunk,
    /// RDMA_NOMSG with the reply as a position-0 read chunk; the client RDMA-Reads it and sends
    /// RDMA_DONE (draft-00 only).
    ReadChunk,
}

/// No way to send a message within the limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum PlanError {
    /// The call is too large inline and read chunks are not allowed (RPCRDMA-38).
    #[error("call too large for the inline limit and read chunks are not allowed")]
    CallTooLarge,
    /// The reply is too large inline, the reply chunk is missing or too small, and read
    /// chunks in replies are off.
    #[error("reply too large for the client's inline limit and its reply chunk")]
    ReplyTooLarge,
}

impl ChunkPlanner {
    fn read_entries_len(&self) -> u32 {
        24 * self.segments_per_chunk.max(1)
    }

    fn write_chunk_len(&self) -> u32 {
        8 + 16 * self.segments_per_chunk.max(1)
    }

    /// Plans a call: read chunks for large data, write chunks and a reply chunk for what comes
    /// back, and a position-0 long call when it does not fit inline (§3.4, §5.1, §6.2).
    pub fn plan_call(&self, s: &CallShape) -> Result<CallPlan, PlanError> {
        let pad = |n: u32| padded_len(n as usize) as u32;
        let mut header = EMPTY_HEADER;
        // Step 2: bulk results of at least the threshold go to a write chunk.
        let bulk_result = if s.bulk_result > 0 && s.bulk_result >= self.ddp_threshold {
            header += self.write_chunk_len();
            Placement::Chunk
        } else {
            Placement::Inline
        };
        // Step 1: a bulk argument of at least the threshold goes to a read chunk; so does one
        // that would not fit inline.
        let inline_total = header + s.message_len + pad(s.bulk_arg);
        let bulk_arg = if s.bulk_arg > 0
            && self.call_read_chunks
            && (s.bulk_arg >= self.ddp_threshold || inline_total > self.max_inline_call)
        {
            header += self.read_entries_len();
            Placement::Chunk
        } else {
            Placement::Inline
        };
        // Step 3: a reply chunk when the reply may not fit the client's receive buffer.
        let inline_result = if bulk_result == Placement::Inline {
            pad(s.bulk_result)
        } else {
            0
        };
        let reply_send = EMPTY_HEADER + s.reply_len + inline_result;
        let reply_chunk = (reply_send > self.max_inline_reply).then(|| {
            header += self.write_chunk_len() - 4;
            s.reply_len + inline_result
        });
        // Step 4: too long for the server's inline limit -> position-0 long call.
        let message = s.message_len
            + if bulk_arg == Placement::Inline {
                pad(s.bulk_arg)
            } else {
                0
            };
        if header + message <= self.max_inline_call {
            return Ok(CallPlan {
                bulk_arg,
                bulk_result,
                reply_chunk,
                form: CallForm::Msg,
                send_len: header + message,
            });
        }
        if !self.call_read_chunks {
            return Err(PlanError::CallTooLarge);
        }
        let header = header + self.read_entries_len();
        if header > self.max_inline_call {
            return Err(PlanError::CallTooLarge);
        }
        Ok(CallPlan {
            bulk_arg,
            bulk_result,
            reply_chunk,
            form: CallForm::LongCall,
            send_len: header,
        })
    }

    /// Plans a reply of `header_len + message_len` bytes (the reduced reply and its header with
    /// the echoed write list) for a call that advertised `call_chunks` (§5.2;
    /// RPCRDMA-30). `reply_read_chunks`: draft-00 read chunks in replies allowed.
    pub fn plan_reply(
        &self,
        header_len: u32,
        message_len: u32,
        call_chunks: &ChunkLists,
        reply_read_chunks: bool,
    ) -> Result<ReplyForm, PlanError> {
        if header_len.saturating_add(message_len) <= self.max_inline_reply {
            return Ok(ReplyForm::Inline);
        }
        if call_chunks
            .reply
            .as_ref()
            .is_some_and(|c| c.total_len() >= u64::from(message_len))
        {
            return Ok(ReplyForm::ReplyChunk);
        }
        if reply_read_chunks {
            return Ok(ReplyForm::ReadChunk);
        }
        Err(PlanError::ReplyTooLarge)
    }

    /// Where the server puts a DDP-eligible result: RPCRDMA-17, with a write chunk it must use
    /// RDMA Write; RPCRDMA-11, without one it returns the data inline (or, draft-00, as a read
    /// chunk when `reply_read_chunks` and the data reaches the threshold).
    pub fn place_result(
        &self,
        call_has_write_chunk: bool,
        len: u32,
        reply_read_chunks: bool,
    ) -> Placement {
        if call_has_write_chunk || (reply_read_chunks && len >= self.ddp_threshold) {
            Placement::Chunk
        } else {
            Placement::Inline
        }
    }
}

/// The position-0 read entries of a long message (RPCRDMA-29): the whole reduced message in
/// the given segments, in order.
pub fn long_message_reads(segments: &[Segment]) -> Vec<ReadSegment> {
    segments
        .iter()
        .map(|&target| ReadSegment {
            position: 0,
            target,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::WriteChunk;

    fn small_call() -> CallShape {
        CallShape {
            message_len: 56,
            bulk_arg: 0,
            bulk_result: 0,
            reply_len: 40,
        }
    }

    #[test]
    fn rpcrdma_35_default_limits_are_1024() {
        let p = ChunkPlanner::default();
        assert_eq!(p.max_inline_call, 1024);
        assert_eq!(p.max_inline_reply, 1024);
        let plan = p.plan_call(&small_call()).unwrap();
        assert_eq!(plan.form, CallForm::Msg);
        assert_eq!(plan.send_len, 28 + 56);
        assert!(plan.send_len <= 1024);
        assert_eq!(plan.reply_chunk, None);
    }

    #[test]
    fn large_write_data_goes_to_a_read_chunk_small_stays_inline() {
        let p = ChunkPlanner::default();
        let big = CallShape {
            bulk_arg: 65536,
            ..small_call()
        };
        let plan = p.plan_call(&big).unwrap();
        assert_eq!(plan.bulk_arg, Placement::Chunk);
        assert_eq!(plan.send_len, 28 + 24 + 56);
        let small = CallShape {
            bulk_arg: 512,
            ..small_call()
        };
        let plan = p.plan_call(&small).unwrap();
        assert_eq!(plan.bulk_arg, Placement::Inline);
        assert_eq!(plan.send_len, 28 + 56 + 512);
        // Below the threshold but too big for the inline limit: chunk anyway.
        let mid = CallShape {
            bulk_arg: 2000,
            ..small_call()
        };
        assert_eq!(p.plan_call(&mid).unwrap().bulk_arg, Placement::Chunk);
    }

    #[test]
    fn rpcrdma_38_no_read_chunks_when_client_maxrdmaread_is_zero() {
        let p = ChunkPlanner {
            call_read_chunks: false,
            max_inline_call: 1 << 20,
            ..ChunkPlanner::default()
        };
        let big = CallShape {
            bulk_arg: 65536,
            ..small_call()
        };
        let plan = p.plan_call(&big).unwrap();
        assert_eq!(plan.bulk_arg, Placement::Inline);
        let tight = ChunkPlanner {
            call_read_chunks: false,
            ..ChunkPlanner::default()
        };
        assert_eq!(tight.plan_call(&big), Err(PlanError::CallTooLarge));
    }

    #[test]
    fn large_read_result_gets_a_write_chunk() {
        let p = ChunkPlanner::default();
        let read = CallShape {
            bulk_result: 1 << 20,
            ..small_call()
        };
        let plan = p.plan_call(&read).unwrap();
        assert_eq!(plan.bulk_result, Placement::Chunk);
        assert_eq!(plan.reply_chunk, None);
        assert_eq!(plan.send_len, 28 + 24 + 56);
        // A small read result comes inline, no reply chunk needed.
        let small = CallShape {
            bulk_result: 512,
            ..small_call()
        };
        let plan = p.plan_call(&small).unwrap();
        assert_eq!(plan.bulk_result, Placement::Inline);
        assert_eq!(plan.reply_chunk, None);
    }

    #[test]
    fn rpcrdma_30_client_adds_reply_chunk_for_a_long_reply() {
        let p = ChunkPlanner::default();
        let readdir_like = CallShape {
            reply_len: 65536,
            ..small_call()
        };
        let plan = p.plan_call(&readdir_like).unwrap();
        assert_eq!(plan.reply_chunk, Some(65536));
        assert_eq!(plan.send_len, 28 + 20 + 56);
    }

    #[test]
    fn rpcrdma_29_a_64k_call_with_1k_limit_is_a_position_zero_long_call() {
        let p = ChunkPlanner {
            call_read_chunks: true,
            ..ChunkPlanner::default()
        };
        let huge = CallShape {
            message_len: 65536,
            ..small_call()
        };
        let plan = p.plan_call(&huge).unwrap();
        assert_eq!(plan.form, CallForm::LongCall);
        assert_eq!(plan.send_len, 28 + 24);
        let reads = long_message_reads(&[Segment {
            handle: 1,
            length: 65536,
            offset: 0,
        }]);
        assert_eq!(reads[0].position, 0);
    }

    #[test]
    fn rpcrdma_36_call_above_negotiated_maxcallsize_goes_as_position_zero() {
        let p = ChunkPlanner {
            max_inline_call: 2048,
            ..ChunkPlanner::default()
        };
        let c = CallShape {
            message_len: 3000 - 28,
            ..small_call()
        };
        assert_eq!(p.plan_call(&c).unwrap().form, CallForm::LongCall);
        let fits = CallShape {
            message_len: 2048 - 28,
            ..small_call()
        };
        assert_eq!(p.plan_call(&fits).unwrap().form, CallForm::Msg);
    }

    #[test]
    fn rpcrdma_30_reply_inline_then_reply_chunk_then_read_chunk() {
        let p = ChunkPlanner::default();
        let none = ChunkLists::default();
        assert_eq!(p.plan_reply(28, 900, &none, false), Ok(ReplyForm::Inline));
        let with_reply = ChunkLists {
            reply: Some(WriteChunk::new(vec![Segment {
                handle: 1,
                length: 65536,
                offset: 0,
            }])),
            ..Default::default()
        };
        assert_eq!(
            p.plan_reply(28, 65536, &with_reply, false),
            Ok(ReplyForm::ReplyChunk)
        );
        assert_eq!(
            p.plan_reply(28, 65537, &with_reply, true),
            Ok(ReplyForm::ReadChunk),
            "reply chunk too small"
        );
        assert_eq!(
            p.plan_reply(28, 65537, &with_reply, false),
            Err(PlanError::ReplyTooLarge)
        );
    }

    #[test]
    fn rpcrdma_11_17_result_placement_follows_the_write_list() {
        let p = ChunkPlanner::default();
        assert_eq!(p.place_result(true, 10, false), Placement::Chunk);
        assert_eq!(p.place_result(false, 1 << 20, false), Placement::Inline);
        assert_eq!(p.place_result(false, 1 << 20, true), Placement::Chunk);
        assert_eq!(p.place_result(false, 100, true), Placement::Inline);
    }
}
