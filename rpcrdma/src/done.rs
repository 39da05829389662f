//! RDMA_DONE (§3.6, §3.8): after a client has RDMA-Read the read chunks of a *reply*, it sends
//! one RDMA_DONE with the reply's XID (C-5) so the server can release that memory. Calls need no
//! DONE: the reply itself tells the client the server's Reads finished (§3.8).
//!
//! [`done_for_reply`] is the client's rule; [`DoneTracker`] the server's bookkeeping, with the
//! timeout after which it may release the memory anyway (RPCRDMA-22). Time is an argument.

use crate::header::{Body, HeaderRepr};
use std::time::{Duration, Instant};

/// The RDMA_DONE a client owes after reading the read chunks of `reply` (RPCRDMA-04), or
/// `None` when the reply carried no read chunks. `credit` is the client's current request.
pub fn done_for_reply(reply: &HeaderRepr, credit: u32) -> Option<HeaderRepr> {
    match &reply.body {
        Body::Msg(c) | Body::NoMsg(c) | Body::MsgP { chunks: c, .. } if !c.reads.is_empty() => {
            Some(HeaderRepr::done(reply.xid, credit))
        }
        _ => None,
    }
}

/// Server: replies whose read chunks expose memory until their RDMA_DONE arrives.
#[derive(Debug, Clone)]
pub struct DoneTracker {
    timeout: Duration,
    pending: Vec<(u32, Instant)>,
}

impl DoneTracker {
    /// A tracker that gives up on a DONE after `timeout`.
    pub fn new(timeout: Duration) -> Self {
        Self {
            timeout,
            pending: Vec::new(),
        }
    }

    /// A reply with read chunks for `xid` was sent at `now`.
    pub fn expect(&mut self, now: Instant, xid: u32) {
        self.pending.push((xid, now + self.timeout));
    }

    /// An RDMA_DONE for `xid` arrived: `true` if it was expected (release that reply's memory),
    /// `false` for a duplicate, late or unknown DONE (ignore it).
    pub fn on_done(&mut self, xid: u32) -> bool {
        match self.pending.iter().position(|(x, _)| *x == xid) {
            Some(i) => {
                self.pending.remove(i);
                true
            }
            None => false,
        }
    }

    /// The next expired reply at `now`, if any (RPCRDMA-22: release its memory; a DONE for it
    /// arriving later is ignored).
    pub fn poll_expired(&mut self, now: Instant) -> Option<u32> {
        let i = self.pending.iter().position(|(_, t)| *t <= now)?;
        Some(self.pending.remove(i).0)
    }

    /// When the next timeout falls due.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.pending.iter().map(|(_, t)| *t).min()
    }

    /// Replies still waiting for their DONE.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk_list::ChunkLists;
    use crate::segment::{ReadSegment, Segment, WriteChunk};

    fn reply(reads: bool) -> HeaderRepr {
        HeaderRepr {
            xid: 0x55,
            credit: 4,
            body: Body::Msg(ChunkLists {
                reads: if reads {
                    vec![ReadSegment {
                        position: 28,
                        target: Segment {
                            handle: 1,
                            length: 8192,
                            offset: 0,
                        },
                    }]
                } else {
                    Vec::new()
                },
                writes: vec![WriteChunk::default()],
                reply: None,
            }),
        }
    }

    #[test]
    fn rpcrdma_04_done_only_after_reply_read_chunks_with_the_reply_xid() {
        let d = done_for_reply(&reply(true), 7).unwrap();
        assert_eq!(d, HeaderRepr::done(0x55, 7));
        assert_eq!(d.to_vec().len(), 16);
        assert_eq!(done_for_reply(&reply(false), 7), None);
        assert_eq!(done_for_reply(&HeaderRepr::err_chunk(1, 1), 7), None);
    }

    #[test]
    fn no_done_for_reply_chunk_or_padded_replies() {
        // §5.2: a reply written into the reply chunk needs no DONE.
        let via_reply_chunk = HeaderRepr {
            xid: 1,
            credit: 1,
            body: Body::NoMsg(ChunkLists {
                reply: Some(WriteChunk::new(vec![Segment::default()])),
                ..Default::default()
            }),
        };
        assert_eq!(done_for_reply(&via_reply_chunk, 1), None);
        let padded = HeaderRepr {
            xid: 1,
            credit: 1,
            body: Body::MsgP {
                align: 4096,
                thresh: 1024,
                chunks: ChunkLists::default(),
            },
        };
        assert_eq!(done_for_reply(&padded, 1), None);
        // A long reply as a position-0 read chunk does need one.
        let long = HeaderRepr {
            xid: 2,
            credit: 1,
            body: Body::NoMsg(ChunkLists {
                reads: vec![ReadSegment::default()],
                ..Default::default()
            }),
        };
        assert_eq!(done_for_reply(&long, 1), Some(HeaderRepr::done(2, 1)));
    }

    #[test]
    fn rpcrdma_04_each_expected_done_is_consumed_once() {
        let t0 = Instant::now();
        let mut t = DoneTracker::new(Duration::from_secs(5));
        t.expect(t0, 1);
        t.expect(t0, 2);
        assert!(t.on_done(2));
        assert!(!t.on_done(2), "duplicate DONE");
        assert!(!t.on_done(9), "unknown DONE");
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn rpcrdma_22_missing_done_expires_after_the_timeout() {
        let t0 = Instant::now();
        let mut t = DoneTracker::new(Duration::from_secs(5));
        t.expect(t0, 1);
        t.expect(t0 + Duration::from_secs(1), 2);
        assert_eq!(t.next_deadline(), Some(t0 + Duration::from_secs(5)));
        assert_eq!(t.poll_expired(t0 + Duration::from_secs(4)), None);
        assert_eq!(t.poll_expired(t0 + Duration::from_secs(5)), Some(1));
        assert_eq!(t.poll_expired(t0 + Duration::from_secs(5)), None);
        assert!(!t.on_done(1), "a DONE after the timeout is ignored");
        assert_eq!(t.poll_expired(t0 + Duration::from_secs(6)), Some(2));
        assert!(t.is_empty());
    }
}
