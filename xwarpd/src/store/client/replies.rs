//! Replies into answers: the call each received Send answers, long replies (a reply chunk or
//! a position-0 read chunk fetched by RDMA Read), and the answer's data placed.

use std::time::Instant;

use dataplane::MemoryRegion;
use rpcrdma::storage::StorageReply;
use rpcrdma::storage_send::long_message_len;
use rpcrdma::{ClientEvent, HeaderRepr, Payload};

use super::super::MAX_LONG_MESSAGE;
use super::{
    Finished, LongSlots, Pending, ReadResult, StoreClient, StoreError, SyncDest, WriteResult,
    FETCH_WR, SEND_WR,
};

impl StoreClient {
    /// What one received Send answers: the call and its result (`None`: dropped).
    #[allow(clippy::type_complexity)]
    pub(super) fn take_reply(
        &mut self,
        msg: &[u8],
        sync: SyncDest<'_>,
    ) -> Result<Option<(u32, Result<Finished, StoreError>)>, StoreError> {
        let (xid, result) = match self.session.handle_receive(msg) {
            ClientEvent::Reply { xid, reply, .. } => {
                let p = self.finish(xid);
                (
                    xid,
                    answer(reply.reply, dest(p.as_ref(), sync, xid), &reply.rpc),
                )
            }
            ClientEvent::Refused { xid, body } => {
                self.finish(xid);
                (xid, Err(StoreError::Refused(body)))
            }
            ClientEvent::Failed { xid, error } => {
                self.finish(xid);
                (xid, Err(StoreError::Rpc(error.to_string())))
            }
            ClientEvent::LongReply { xid, header } => {
                let result = self.long_reply(&header, sync);
                self.flush_dones()?;
                (xid, result?)
            }
            ClientEvent::Dropped { .. } => return Ok(None),
        };
        Ok(Some((xid, result)))
    }

    /// A long reply (RDMA_NOMSG, RPCRDMA-30): the message is in the call's reply chunk (its
    /// echoed length says how much), or is RDMA-Read from the position-0 read chunk into the
    /// fetch slot (the DONE is then owed). The outer error is a broken connection.
    fn long_reply(
        &mut self,
        header: &HeaderRepr,
        sync: SyncDest<'_>,
    ) -> Result<Result<Finished, StoreError>, StoreError> {
        let xid = header.xid;
        let slot = self.pending.get(&xid).and_then(|p| p.long_slot);
        let empty = rpcrdma::ChunkLists::default();
        let chunks = header.body.chunks().unwrap_or(&empty);
        let Some(long) = self.long.as_ref() else {
            return Ok(self.refuse_long_reply(header, "long reply to a call without one"));
        };
        let (from, len) = if chunks.reads.is_empty() {
            // Into our reply chunk: the echo was checked against what we offered.
            let len = rpcrdma::chunk_rules::reply_chunk_len(chunks).unwrap_or(0);
            match slot {
                Some(i) if len <= LongSlots::SIZE as u64 => (i, len as usize),
                _ => {
                    return Ok(self.refuse_long_reply(header, "long reply without our reply chunk"));
                }
            }
        } else {
            let Ok(len) = long_message_len(chunks, MAX_LONG_MESSAGE) else {
                return Ok(self.refuse_long_reply(header, "long reply larger than we take"));
            };
            let base = LongSlots::FETCH * LongSlots::SIZE;
            let mut at = 0usize;
            let mut posted = 0;
            for r in chunks.reads.iter().take_while(|r| r.position == 0) {
                let n = r.target.length as usize;
                self.qp.post_read(
                    FETCH_WR,
                    &long.reply_mr,
                    base + at..base + at + n,
                    dataplane::RemoteAddr {
                        stag: r.target.handle,
                        to: r.target.offset,
                    },
                )?;
                at += n;
                posted += 1;
            }
            self.wait_fetches(posted)?;
            (LongSlots::FETCH, len as usize)
        };
        let mut m = std::mem::take(&mut self.long_msg);
        let long = self.long.as_ref().expect("checked above");
        long.reply_mr.read(from * LongSlots::SIZE, &mut m[..len]);
        let decoded = self.session.decode_long_reply(header, &m[..len]);
        let p = self.finish(xid);
        let result = match decoded {
            Ok(reply) => answer(reply.reply, dest(p.as_ref(), sync, xid), &reply.rpc),
            Err(e) => Err(StoreError::Rpc(e.to_string())),
        };
        self.long_msg = m;
        Ok(result)
    }

    /// Fails call `header.xid` for a long reply we cannot take; the session forgets the call
    /// (and owes the DONE that releases the server's memory, for a read-chunk reply).
    fn refuse_long_reply(
        &mut self,
        header: &HeaderRepr,
        why: &str,
    ) -> Result<Finished, StoreError> {
        let _ = self.session.decode_long_reply(header, &[]);
        self.finish(header.xid);
        Err(StoreError::Rpc(why.into()))
    }

    /// Waits for `n` RDMA Reads of a long reply (Send completions meanwhile free their slots).
    fn wait_fetches(&mut self, mut n: usize) -> Result<(), StoreError> {
        let deadline = Instant::now() + self.timeout;
        while n > 0 {
            let now = Instant::now();
            if now >= deadline {
                return Err(StoreError::Timeout);
            }
            let Some(c) = self.cq.wait(deadline - now) else {
                continue;
            };
            if !c.is_ok() {
                return Err(StoreError::Disconnected);
            }
            if c.wr_id == FETCH_WR {
                n -= 1;
            } else if c.wr_id & SEND_WR != 0 {
                self.send_free.push((c.wr_id & !SEND_WR) as usize);
            }
        }
        Ok(())
    }
}

/// Where inline READ data of call `xid` goes: its pipelined buffer, or the one a synchronous
/// call waits on.
fn dest<'a>(
    p: Option<&'a Pending>,
    sync: SyncDest<'a>,
    xid: u32,
) -> Option<(&'a MemoryRegion, usize)> {
    match (p, sync) {
        (
            Some(Pending {
                buf: Some((mr, at)),
                ..
            }),
            _,
        ) => Some((&**mr, *at)),
        (_, Some((x, mr, at))) if x == xid => Some((mr, at)),
        _ => None,
    }
}

/// The answer of a reply; inline READ data is copied to `read_into`.
fn answer(
    reply: Option<StorageReply<'_>>,
    read_into: Option<(&MemoryRegion, usize)>,
    rpc: &rpcrdma::ReplyHeader<'_>,
) -> Result<Finished, StoreError> {
    let Some(reply) = reply else {
        return Err(StoreError::Rpc(format!("not accepted: {rpc:?}")));
    };
    Ok(match reply {
        StorageReply::Null => Finished::Null,
        StorageReply::Read(r) => {
            let ok = r.map_err(StoreError::Status)?;
            let len = match ok.data {
                Payload::Inline(d) => {
                    let (mr, at) = read_into.ok_or(StoreError::Invalid("no READ buffer"))?;
                    mr.write(at, d)
                        .ok_or(StoreError::Rpc("more READ data than asked".into()))?;
                    d.len() as u32
                }
                Payload::WriteChunk { len, .. } => len,
                Payload::ReadChunk { .. } => {
                    return Err(StoreError::Rpc("READ data in a read chunk".into()))
                }
            };
            Finished::Read(ReadResult { len, eof: ok.eof })
        }
        StorageReply::Write(w) => {
            let w = w.map_err(StoreError::Status)?;
            Finished::Write(WriteResult {
                count: w.count,
                committed: w.committed,
                verifier: w.verifier,
            })
        }
        StorageReply::Commit(c) => Finished::Commit(c.map_err(StoreError::Status)?.verifier),
        StorageReply::Getattr(g) => Finished::Getattr(g.map_err(StoreError::Status)?),
    })
}
