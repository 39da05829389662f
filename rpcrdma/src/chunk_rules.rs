//! The semantic rules a parsed header must satisfy before any RDMA is started for it (§3.4,
//! §3.7, §5, §5.3). Structure (XDR, bounds) is checked by
//! [`HeaderRepr::parse`](crate::header::HeaderRepr::parse); this module checks meaning.

use crate::chunk_list::{ChunkLists, Limits};
use crate::error::HeaderError;
use crate::header::{Body, HeaderRepr};
use crate::segment::WriteChunk;

/// Which way a message travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Client to server: an RPC call (or RDMA_DONE).
    Call,
    /// Server to client: an RPC reply (or RDMA_ERROR).
    Reply,
}

/// Local policy for validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// Decode bounds and the largest segment accepted.
    pub limits: Limits,
    /// Accept RDMA_MSGP and RDMA_DONE (draft-00; RFC 8166 "not to be used"). When off, a server
    /// answers MSGP with ERR_CHUNK (as Linux does) and drops DONE.
    pub draft00_compat: bool,
    /// Accept read chunks in replies (draft-00 only; RFC 8166 removed them).
    pub reply_read_chunks: bool,
}

impl Default for Rules {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            draft00_compat: true,
            reply_read_chunks: true,
        }
    }
}

impl Rules {
    /// Checks a header received by a server (a call, or RDMA_DONE). RDMA_ERROR at a server is
    /// [`HeaderError::WrongDirection`] (dropped: RDMA_ERROR answers calls only, §5.3).
    pub fn check_call(&self, h: &HeaderRepr) -> Result<(), HeaderError> {
        match &h.body {
            Body::Error(_) => Err(HeaderError::WrongDirection),
            Body::Done if !self.draft00_compat => Err(HeaderError::WrongDirection),
            Body::Done => Ok(()),
            body => self.check_lists(body, Direction::Call),
        }
    }

    /// Checks a header received by a client (a reply, or RDMA_ERROR). RDMA_DONE at a client is
    /// [`HeaderError::WrongDirection`].
    pub fn check_reply(&self, h: &HeaderRepr) -> Result<(), HeaderError> {
        match &h.body {
            Body::Error(_) => Ok(()),
            Body::Done => Err(HeaderError::WrongDirection),
            body => self.check_lists(body, Direction::Reply),
        }
    }

    fn check_lists(&self, body: &Body, dir: Direction) -> Result<(), HeaderError> {
        let Some(c) = body.chunks() else {
            return Ok(());
        };
        if let Body::MsgP { align, .. } = body {
            if !self.draft00_compat {
                return Err(HeaderError::CompatProcDisabled);
            }
            // RDMA_MSGP alignment (§3.5): a non-zero power of two, multiple of 4.
            if !align.is_power_of_two() || align % 4 != 0 {
                return Err(HeaderError::BadAlignment);
            }
            // P-3: positions in a padded stream are undefined; no read chunks in MSGP.
            if !c.reads.is_empty() {
                return Err(HeaderError::ReadChunkInPaddedMessage);
            }
        }
        check_positions(c, matches!(body, Body::NoMsg(_)))?;
        if c.segments().any(|s| s.length > self.limits.max_segment_len) {
            return Err(HeaderError::SegmentTooLong);
        }
        let has_pos0 = c.reads.first().is_some_and(|s| s.position == 0);
        match dir {
            Direction::Call => {
                // A NOMSG call carries the whole call at position 0 (§5.1).
                if matches!(body, Body::NoMsg(_)) && !has_pos0 {
                    return Err(HeaderError::NoMsgWithoutMessage);
                }
                // Advertised chunks must be usable: at least one segment, no empty segments.
                if c.writes
                    .iter()
                    .chain(c.reply.iter())
                    .any(|w| w.segments.is_empty())
                {
                    return Err(HeaderError::EmptyChunk);
                }
                if c.segments().any(|s| s.length == 0) {
                    return Err(HeaderError::ZeroLengthSegment);
                }
            }
            Direction::Reply => {
                // RPCRDMA-11 / RFC 8166: read chunks in replies only in draft-00 mode.
                if !c.reads.is_empty() && !self.reply_read_chunks {
                    return Err(HeaderError::ReadListInReply);
                }
                // RPCRDMA-30: the reply chunk is echoed only by the NOMSG that follows its Write.
                match body {
                    Body::NoMsg(_) if c.reply.is_none() && !has_pos0 => {
                        return Err(HeaderError::NoMsgWithoutMessage)
                    }
                    Body::Msg(_) | Body::MsgP { .. } if c.reply.is_some() => {
                        return Err(HeaderError::ReplyChunkInInlineReply)
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }
}

/// §5.1: positions are multiples of 4, ascending (entries of one chunk are adjacent),
/// and position 0 appears only in RDMA_NOMSG.
fn check_positions(c: &ChunkLists, nomsg: bool) -> Result<(), HeaderError> {
    let mut prev = None;
    for s in &c.reads {
        if s.position % 4 != 0 {
            return Err(HeaderError::MisalignedPosition);
        }
        if s.position == 0 && !nomsg {
            return Err(HeaderError::PositionZeroOutsideNoMsg);
        }
        if prev.is_some_and(|p| s.position < p) {
            return Err(HeaderError::UnorderedPositions);
        }
        prev = Some(s.position);
    }
    Ok(())
}

/// Checks that a reply's chunks echo the call's (RPCRDMA-18, W-1): the same number of write
/// chunks, each an in-order fill of the advertised one, and a reply chunk only if the call had
/// one (and then a valid echo of it).
pub fn check_echo(call: &ChunkLists, reply: &ChunkLists) -> Result<(), HeaderError> {
    if reply.writes.len() != call.writes.len() {
        return Err(HeaderError::EchoMismatch);
    }
    if !reply
        .writes
        .iter()
        .zip(&call.writes)
        .all(|(r, c)| r.is_echo_of(c))
    {
        return Err(HeaderError::EchoMismatch);
    }
    match (&reply.reply, &call.reply) {
        (None, _) => Ok(()),
        (Some(r), Some(c)) if r.is_echo_of(c) => Ok(()),
        _ => Err(HeaderError::EchoMismatch),
    }
}

/// Bytes the reply chunk received, if it was used (RPCRDMA-30: the echoed lengths give the
/// length of the long reply).
pub fn reply_chunk_len(reply: &ChunkLists) -> Option<u64> {
    reply.reply.as_ref().map(WriteChunk::total_len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::{ReadSegment, Segment};

    fn seg(h: u32, l: u32) -> Segment {
        Segment {
            handle: h,
            length: l,
            offset: u64::from(h) * 0x1000,
        }
    }
    fn rs(position: u32, h: u32, l: u32) -> ReadSegment {
        ReadSegment {
            position,
            target: seg(h, l),
        }
    }
    fn msg(c: ChunkLists) -> HeaderRepr {
        HeaderRepr {
            xid: 9,
            credit: 4,
            body: Body::Msg(c),
        }
    }
    fn nomsg(c: ChunkLists) -> HeaderRepr {
        HeaderRepr {
            xid: 9,
            credit: 4,
            body: Body::NoMsg(c),
        }
    }
    fn reads(r: Vec<ReadSegment>) -> ChunkLists {
        ChunkLists {
            reads: r,
            ..Default::default()
        }
    }

    #[test]
    fn r1_read_positions_must_be_multiples_of_4() {
        let r = Rules::default();
        assert_eq!(
            r.check_call(&msg(reads(vec![rs(50, 1, 8)]))),
            Err(HeaderError::MisalignedPosition)
        );
        assert_eq!(r.check_call(&msg(reads(vec![rs(52, 1, 8)]))), Ok(()));
    }

    #[test]
    fn r4_rpcrdma_14_read_positions_ascend_and_same_position_entries_are_adjacent() {
        let r = Rules::default();
        assert_eq!(
            r.check_call(&msg(reads(vec![rs(100, 1, 8), rs(52, 2, 8)]))),
            Err(HeaderError::UnorderedPositions)
        );
        // 52, 100, 52: the two 52 entries are not adjacent, so the list is out of order.
        assert_eq!(
            r.check_call(&msg(reads(vec![rs(52, 1, 8), rs(100, 2, 8), rs(52, 3, 8)]))),
            Err(HeaderError::UnorderedPositions)
        );
        assert_eq!(
            r.check_call(&msg(reads(vec![rs(52, 1, 8), rs(52, 2, 8), rs(100, 3, 8)]))),
            Ok(())
        );
    }

    #[test]
    fn rpcrdma_29_position_zero_only_with_nomsg_and_nomsg_call_needs_it() {
        let r = Rules::default();
        assert_eq!(
            r.check_call(&msg(reads(vec![rs(0, 1, 64)]))),
            Err(HeaderError::PositionZeroOutsideNoMsg)
        );
        assert_eq!(r.check_call(&nomsg(reads(vec![rs(0, 1, 64)]))), Ok(()));
        // A long call may keep other read chunks after the position-0 one.
        assert_eq!(
            r.check_call(&nomsg(reads(vec![rs(0, 1, 64), rs(52, 2, 8192)]))),
            Ok(())
        );
        assert_eq!(
            r.check_call(&nomsg(ChunkLists::empty())),
            Err(HeaderError::NoMsgWithoutMessage)
        );
    }

    #[test]
    fn rpcrdma_30_nomsg_reply_needs_reply_chunk_or_position_zero_read() {
        let r = Rules::default();
        let with_reply = ChunkLists {
            reply: Some(WriteChunk::new(vec![seg(1, 500)])),
            ..Default::default()
        };
        assert_eq!(r.check_reply(&nomsg(with_reply.clone())), Ok(()));
        assert_eq!(r.check_reply(&nomsg(reads(vec![rs(0, 1, 500)]))), Ok(()));
        assert_eq!(
            r.check_reply(&nomsg(ChunkLists::empty())),
            Err(HeaderError::NoMsgWithoutMessage)
        );
        assert_eq!(
            r.check_reply(&msg(with_reply)),
            Err(HeaderError::ReplyChunkInInlineReply)
        );
    }

    #[test]
    fn rpcrdma_11_reply_read_chunks_only_in_draft00_mode() {
        let h = msg(reads(vec![rs(28, 1, 4096)]));
        assert_eq!(Rules::default().check_reply(&h), Ok(()));
        let strict = Rules {
            reply_read_chunks: false,
            ..Rules::default()
        };
        assert_eq!(strict.check_reply(&h), Err(HeaderError::ReadListInReply));
    }

    #[test]
    fn write_chunks_in_a_call_must_have_usable_segments() {
        let r = Rules::default();
        let empty = ChunkLists {
            writes: vec![WriteChunk::default()],
            ..Default::default()
        };
        assert_eq!(r.check_call(&msg(empty)), Err(HeaderError::EmptyChunk));
        let zero = ChunkLists {
            writes: vec![WriteChunk::new(vec![seg(1, 0)])],
            ..Default::default()
        };
        assert_eq!(
            r.check_call(&msg(zero.clone())),
            Err(HeaderError::ZeroLengthSegment)
        );
        // W-2: the same zero lengths are fine in a reply (an unused chunk echoed).
        assert_eq!(r.check_reply(&msg(zero)), Ok(()));
        let huge = ChunkLists {
            writes: vec![WriteChunk::new(vec![seg(1, u32::MAX)])],
            ..Default::default()
        };
        assert_eq!(r.check_call(&msg(huge)), Err(HeaderError::SegmentTooLong));
    }

    #[test]
    fn msgp_alignment_and_no_read_chunks() {
        let r = Rules::default();
        let p = |align, c| HeaderRepr {
            xid: 1,
            credit: 1,
            body: Body::MsgP {
                align,
                thresh: 1024,
                chunks: c,
            },
        };
        assert_eq!(r.check_call(&p(4096, ChunkLists::empty())), Ok(()));
        for bad in [0, 2, 12, 4095] {
            assert_eq!(
                r.check_call(&p(bad, ChunkLists::empty())),
                Err(HeaderError::BadAlignment),
                "align {bad}"
            );
        }
        assert_eq!(
            r.check_call(&p(4096, reads(vec![rs(52, 1, 8)]))),
            Err(HeaderError::ReadChunkInPaddedMessage)
        );
        let strict = Rules {
            draft00_compat: false,
            ..Rules::default()
        };
        assert_eq!(
            strict.check_call(&p(4096, ChunkLists::empty())),
            Err(HeaderError::CompatProcDisabled)
        );
    }

    #[test]
    fn done_and_error_directions() {
        let r = Rules::default();
        let done = HeaderRepr::done(1, 1);
        let err = HeaderRepr::err_chunk(1, 1);
        assert_eq!(r.check_call(&done), Ok(()));
        assert_eq!(r.check_reply(&done), Err(HeaderError::WrongDirection));
        assert_eq!(r.check_call(&err), Err(HeaderError::WrongDirection));
        assert_eq!(r.check_reply(&err), Ok(()));
    }

    #[test]
    fn rpcrdma_18_reply_must_echo_call_write_list() {
        let call = ChunkLists {
            writes: vec![WriteChunk::new(vec![seg(1, 4096), seg(2, 4096)])],
            ..Default::default()
        };
        let good = ChunkLists {
            writes: vec![call.writes[0].echo(6000).unwrap()],
            ..Default::default()
        };
        assert_eq!(check_echo(&call, &good), Ok(()));
        assert_eq!(
            check_echo(&call, &ChunkLists::empty()),
            Err(HeaderError::EchoMismatch)
        );
        let mut bad = good.clone();
        bad.writes[0].segments[0].offset += 4;
        assert_eq!(check_echo(&call, &bad), Err(HeaderError::EchoMismatch));
        let stray_reply = ChunkLists {
            reply: Some(WriteChunk::new(vec![seg(3, 1)])),
            ..good
        };
        assert_eq!(
            check_echo(&call, &stray_reply),
            Err(HeaderError::EchoMismatch)
        );
    }
}
