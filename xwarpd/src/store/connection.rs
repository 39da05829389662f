//! One store connection, served on its own thread, one call at a time, against the file's
//! registration in the connection's own protection domain.
//!
//! READ: the bytes are RDMA-Written from the file's region into the call's write chunk, then the
//! reply is Sent (RDMAP orders the Write before the Send, RPCRDMA-03); without a write chunk they
//! come inline, copied out of the region into the reply. WRITE: chunked data is RDMA-Read from
//! the client's read chunk straight into the region at the offset, inline data written into it.
//! COMMIT: msync + fdatasync of the range. GETATTR: size, block size, max I/O and the boot
//! verifier. Bad transport headers are answered by the `rpcrdma` session (RDMA_ERROR
//! ERR_VERS/ERR_CHUNK).
//!
//! Long messages (RPCRDMA-29, -30): a long call (RDMA_NOMSG) is RDMA-Read from its position-0
//! chunk into the connection's long-message buffer and served as if it had come inline; a
//! reply too long for the client's receive buffer is RDMA-Written into the call's reply chunk
//! and announced by an RDMA_NOMSG, or, without a reply chunk large enough, goes as a
//! position-0 read chunk (the read-chunk fallback, draft §5.2) from a registration made for it
//! alone (remote read only) and dropped at the client's RDMA_DONE or after its timeout
//! (RPCRDMA-22). At most `credits` such replies are exposed at once (each owes a DONE, which
//! takes a credit, so a client within its credits never meets the bound); past it a reply is
//! answered like one nothing can carry (TOO_BIG for a READ, else SYSTEM_ERR).
//!
//! Every length a client controls is checked before anything is allocated, copied or posted:
//! a READ beyond `max_io` or its write chunk, and an inline READ whose reply cannot fit the
//! client's receive buffer, are answered TOO_BIG (the storage program's "larger than its
//! chunk") at once. A long call longer than [`MAX_LONG_MESSAGE`] is answered ERR_CHUNK before
//! anything is read. The only buffers are the connection's, of fixed size, made at connect
//! (and those of read-chunk replies, at most [`MAX_LONG_MESSAGE`] each, `credits` at once).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rpcrdma::storage::{
    CommitOk, GetattrOk, ReadOk, StorageCall, StorageReply, StoreStatus, WriteArgs, WriteOk,
};
use rpcrdma::storage_send::long_message_len;
use rpcrdma::{
    ChunkLists, LongReply, LongReplyError, Payload, ReadSegment, ReplyOut, Rules, Segment,
    ServerEvent, ServerSession,
};

use super::admission::Slot;
use super::extent::{read_extent, write_extent};
use super::fair_share::EVICTED;
use super::server::{Ctx, BLOCK_SIZE};
use super::stats::ConnGuard;
use super::{INLINE_SIZE, MAX_LONG_MESSAGE};
use dataplane::{Access, CompletionQueue, MemoryRegion, ProtectionDomain, QueuePair, RemoteAddr};

/// How long the server waits for its own RDMA Read or reply Send to complete.
const RDMA_TIMEOUT: Duration = Duration::from_secs(30);

/// Per-connection resources. Field order is drop order: the queue pair closes first, then the
/// regions it used go.
pub(crate) struct Conn {
    qp: QueuePair,
    scq: CompletionQueue,
    rcq: CompletionQueue,
    recv_mr: MemoryRegion,
    send_mr: MemoryRegion,
    /// The file, registered in this connection's protection domain (local access only).
    file_mr: MemoryRegion,
    /// Long calls are RDMA-Read into it, long replies RDMA-Written from it (local access
    /// only, [`MAX_LONG_MESSAGE`] bytes).
    long_mr: MemoryRegion,
    /// The read-chunk reply the client may still RDMA-Read (its XID), until its DONE.
    exposed: Vec<(u32, MemoryRegion)>,
    /// Most read-chunk replies exposed at once (the connection's credits).
    max_exposed: usize,
    pd: ProtectionDomain,
    session: ServerSession,
    /// The client's receive size: replies longer than this would overrun it.
    max_inline_reply: u32,
    /// The received call (copied out of its receive buffer, which is re-posted at once).
    msg: Vec<u8>,
    /// A long call's message, read from its position-0 chunk.
    long_msg: Vec<u8>,
    /// Inline READ data; never longer than [`MAX_LONG_MESSAGE`].
    inline: Vec<u8>,
    /// The reply's RPC message, when it does not go inline.
    message: Vec<u8>,
    /// The encoded reply Send.
    out: Vec<u8>,
    stats: ConnGuard,
}

/// Why a call could not be served: a status for the client, or a broken connection.
enum Fail {
    Status(StoreStatus),
    Conn(&'static str),
}

impl Conn {
    pub(crate) fn new(
        qp: QueuePair,
        (scq, rcq): (CompletionQueue, CompletionQueue),
        pd: ProtectionDomain,
        [recv_mr, send_mr, file_mr, long_mr]: [MemoryRegion; 4],
        credits: u32,
        max_inline_reply: u32,
        stats: ConnGuard,
    ) -> Self {
        let mut session = ServerSession::new(credits, Rules::default(), Duration::from_secs(5));
        session.posted_receives(credits.saturating_sub(1));
        let n = INLINE_SIZE as usize;
        let long = MAX_LONG_MESSAGE as usize;
        Self {
            qp,
            scq,
            rcq,
            recv_mr,
            send_mr,
            file_mr,
            long_mr,
            exposed: Vec::new(),
            max_exposed: credits as usize,
            pd,
            session,
            max_inline_reply,
            msg: vec![0; n],
            long_msg: vec![0; long],
            inline: Vec::with_capacity(long),
            message: vec![0; long],
            out: vec![0; n],
            stats,
        }
    }

    /// Serves calls until the connection ends, it stays idle too long, it gives `held` (its
    /// place under the connection cap) to a new client or the server stops; returns why it
    /// ended.
    pub(crate) fn run(&mut self, ctx: &Ctx, held: &Slot) -> &'static str {
        let mut last_call = Instant::now();
        loop {
            if ctx.stop.load(Ordering::Acquire) {
                return "server shutting down";
            }
            if held.is_evicted() {
                return EVICTED;
            }
            // RPCRDMA-22: a read-chunk reply whose DONE never came is no longer readable.
            if let Some(xid) = self.session.poll_expired_done(Instant::now()) {
                self.release(xid);
            }
            let Some(c) = self.rcq.wait(Duration::from_millis(100)) else {
                if !self.qp.is_connected() {
                    return "peer closed";
                }
                if last_call.elapsed() >= ctx.opts.idle_timeout {
                    ctx.stats.count_idle_closed();
                    return "idle timeout";
                }
                continue;
            };
            if !c.is_ok() {
                return "receive flushed";
            }
            last_call = Instant::now();
            let slot = c.wr_id as usize;
            let start = slot * INLINE_SIZE as usize;
            let len = (c.byte_len as usize).min(INLINE_SIZE as usize);
            let mut msg = std::mem::take(&mut self.msg);
            self.recv_mr.read(start, &mut msg[..len]);
            // Re-post at once: the buffer backs a credit (RPCRDMA-21).
            if self
                .qp
                .post_recv(c.wr_id, &self.recv_mr, start..start + INLINE_SIZE as usize)
                .is_err()
            {
                return "cannot re-post a receive";
            }
            self.session.posted_receives(1);
            held.set_busy(true);
            let handled = self.handle(ctx, &msg[..len]);
            held.set_busy(false);
            self.msg = msg;
            if let Err(why) = handled {
                return why;
            }
        }
    }

    fn handle(&mut self, ctx: &Ctx, msg: &[u8]) -> Result<(), &'static str> {
        let event = self.session.handle_receive(msg);
        self.dispatch(ctx, event)
    }

    fn dispatch(&mut self, ctx: &Ctx, event: ServerEvent<'_>) -> Result<(), &'static str> {
        match event {
            ServerEvent::Call {
                xid,
                requested,
                chunks,
                call,
            } => {
                self.stats.count_call(&call.call);
                self.inline.clear();
                let reply = match self.serve(ctx, &call.call, &chunks) {
                    Ok(r) => r.reply(ctx),
                    Err(Fail::Status(s)) => {
                        self.stats.count_error();
                        error_reply(&call.call, s)
                    }
                    Err(Fail::Conn(why)) => return Err(why),
                };
                let to = Reply {
                    xid,
                    requested,
                    chunks: &chunks,
                };
                let inline = std::mem::take(&mut self.inline);
                let out = self.encode_or_fail(&to, &call.call, fill_inline(reply, &inline));
                self.inline = inline;
                let out = out?;
                self.send_reply(xid, &chunks, out)
            }
            ServerEvent::Refused { .. } => {
                self.stats.count_refused();
                while let Some(n) = self.session.poll_transmit(&mut self.out) {
                    self.send_out(n)?;
                }
                Ok(())
            }
            ServerEvent::LongCall { header } => {
                let chunks = header.body.chunks().cloned().unwrap_or_default();
                // Bounded before anything is read (the chunk rules already bounded the list).
                let Ok(len) = long_message_len(&chunks, MAX_LONG_MESSAGE) else {
                    self.stats.count_refused();
                    let grant = self.session.credits().last_grant().max(1);
                    let n = rpcrdma::HeaderRepr::err_chunk(header.xid, grant)
                        .emit(&mut self.out)
                        .map_err(|_| "cannot encode RDMA_ERROR")?;
                    return self.send_out(n);
                };
                let segments: Vec<ReadSegment> = chunks
                    .reads
                    .iter()
                    .take_while(|r| r.position == 0)
                    .copied()
                    .collect();
                read_segments((&self.qp, &self.scq, &self.long_mr), 0, &segments, len).map_err(
                    |f| match f {
                        Fail::Conn(why) => why,
                        Fail::Status(_) => "long call chunk unreadable",
                    },
                )?;
                self.stats.count_long_call();
                let mut msg = std::mem::take(&mut self.long_msg);
                self.long_mr.read(0, &mut msg[..len as usize]);
                let event = self.session.decode_long_call(header, &msg[..len as usize]);
                let served = self.dispatch(ctx, event);
                self.long_msg = msg;
                served
            }
            ServerEvent::Done { xid, release } => {
                if release {
                    self.release(xid);
                }
                Ok(())
            }
        }
    }

    /// [`encode`](Self::encode), or when nothing can carry the reply a shorter answer:
    /// too long even for the long-message buffer (a READ just short enough to pass the check
    /// but not with its headers is TOO_BIG too), or a second read-chunk reply while one is
    /// exposed: anything else is SYSTEM_ERR rather than an overrun of the client's buffer.
    fn encode_or_fail(
        &mut self,
        to: &Reply<'_>,
        call: &StorageCall<'_>,
        reply: StorageReply<'_>,
    ) -> Result<ReplyOut, &'static str> {
        if let Some(out) = self.encode(to, &reply) {
            if let StorageReply::Read(Ok(ReadOk {
                data: Payload::Inline(d),
                ..
            })) = reply
            {
                self.stats.add_read(d.len() as u64);
            }
            return Ok(out);
        }
        self.stats.count_error();
        let too_big =
            matches!(call, StorageCall::Read(_)).then(|| error_reply(call, StoreStatus::TooBig));
        if let Some(out) = too_big.and_then(|r| self.encode(to, &r)) {
            return Ok(out);
        }
        let send_len = self
            .session
            .encode_rpc_error(
                &mut self.out,
                to.xid,
                to.requested,
                to.chunks,
                rpcrdma::AcceptStat::SystemErr,
            )
            .map_err(|_| "cannot encode a reply")?;
        Ok(ReplyOut::Inline { send_len })
    }

    /// Drops the registration of read-chunk reply `xid` (its DONE came or timed out): the
    /// client can no longer read it.
    fn release(&mut self, xid: u32) {
        self.exposed.retain(|(x, _)| *x != xid);
    }

    /// Encodes `reply` in the form the client's limits allow: inline, into the reply chunk,
    /// or (while fewer than `max_exposed` are) as a position-0 read chunk of a fresh remote-read
    /// registration. `None`: none of them can carry it.
    fn encode(&mut self, to: &Reply<'_>, reply: &StorageReply<'_>) -> Option<ReplyOut> {
        let mut long = LongReply {
            send: &mut self.out,
            message_buf: &mut self.message,
            max_inline_reply: self.max_inline_reply,
            expose: None,
        };
        let r = self
            .session
            .encode_long_reply(&mut long, to.xid, to.requested, to.chunks, reply);
        if !matches!(r, Err(LongReplyError::NoReplyChunk)) || self.exposed.len() >= self.max_exposed
        {
            return r.ok();
        }
        let mr = self
            .pd
            .register(MAX_LONG_MESSAGE as usize, Access::REMOTE_READ)
            .ok()?;
        long.expose = Some((
            Segment {
                handle: mr.stag(),
                length: MAX_LONG_MESSAGE,
                offset: 0,
            },
            Instant::now(),
        ));
        let out = self
            .session
            .encode_long_reply(&mut long, to.xid, to.requested, to.chunks, reply)
            .ok()?;
        if let ReplyOut::ReadChunk { message_len, .. } = out {
            mr.write(0, &self.message[..message_len])?;
            self.exposed.push((to.xid, mr));
        }
        Some(out)
    }

    /// Puts an encoded reply on the wire: the long message first (RDMA Write into the reply
    /// chunk; RDMAP orders it before the Send, RPCRDMA-03), then the Send.
    fn send_reply(
        &mut self,
        xid: u32,
        chunks: &ChunkLists,
        out: ReplyOut,
    ) -> Result<(), &'static str> {
        match out {
            ReplyOut::Inline { send_len } => self.send_out(send_len),
            ReplyOut::ReplyChunk {
                message_len,
                send_len,
            } => {
                let rc = chunks.reply.as_ref().ok_or("reply chunk vanished")?;
                self.long_mr
                    .write(0, &self.message[..message_len])
                    .ok_or("long reply too long")?;
                let mut done = 0usize;
                for seg in &rc.segments {
                    if done == message_len {
                        break;
                    }
                    let take = (seg.length as usize).min(message_len - done);
                    self.qp
                        .post_write(
                            4,
                            &self.long_mr,
                            done..done + take,
                            RemoteAddr {
                                stag: seg.handle,
                                to: seg.offset,
                            },
                        )
                        .map_err(|_| "RDMA Write refused")?;
                    done += take;
                }
                self.stats.count_long_reply();
                self.send_out(send_len)
            }
            ReplyOut::ReadChunk { send_len, .. } => {
                debug_assert!(self.exposed.iter().any(|(x, _)| *x == xid));
                self.stats.count_long_reply();
                self.send_out(send_len)
            }
        }
    }

    fn serve(
        &mut self,
        ctx: &Ctx,
        call: &StorageCall<'_>,
        chunks: &ChunkLists,
    ) -> Result<Done, Fail> {
        let size = ctx.file.len();
        match *call {
            StorageCall::Null => Ok(Done::Null),
            StorageCall::Getattr => Ok(Done::Getattr),
            StorageCall::Commit(a) => {
                ctx.file
                    .sync(a.offset, u64::from(a.count))
                    .map_err(|_| Fail::Status(StoreStatus::Io))?;
                Ok(Done::Commit)
            }
            StorageCall::Read(a) => {
                let (n, eof) = read_extent(size, ctx.opts.max_io, a).map_err(Fail::Status)?;
                let r = ctx
                    .file
                    .range(a.offset, n)
                    .ok_or(Fail::Status(StoreStatus::Io))?;
                match chunks.writes.first() {
                    Some(chunk) => {
                        if chunk.total_len() < u64::from(n) {
                            return Err(Fail::Status(StoreStatus::TooBig));
                        }
                        // RDMA Write out of the file's region segment by segment, then the reply
                        // Send follows in order.
                        let mut done = 0u32;
                        for seg in &chunk.segments {
                            if done == n {
                                break;
                            }
                            let take = seg.length.min(n - done);
                            let from = r.start + done as usize..r.start + (done + take) as usize;
                            let to = RemoteAddr {
                                stag: seg.handle,
                                to: seg.offset,
                            };
                            self.qp
                                .post_write(1, &self.file_mr, from, to)
                                .map_err(|_| Fail::Conn("RDMA Write refused"))?;
                            done += take;
                        }
                        self.stats.add_read(u64::from(n));
                        Ok(Done::ReadChunk { len: n, eof })
                    }
                    None => {
                        // The data alone must fit the long-message buffer: refused before a
                        // byte is copied (the reply's own headers are checked when encoding;
                        // whether it goes inline, in the reply chunk or as a read chunk too).
                        if n > MAX_LONG_MESSAGE {
                            return Err(Fail::Status(StoreStatus::TooBig));
                        }
                        self.inline.resize(n as usize, 0);
                        self.file_mr
                            .read(r.start, &mut self.inline)
                            .ok_or(Fail::Status(StoreStatus::Io))?;
                        // Counted once the reply is known to fit.
                        Ok(Done::ReadInline { eof })
                    }
                }
            }
            StorageCall::Write(WriteArgs {
                offset,
                stable,
                data,
            }) => {
                let len = data.len();
                write_extent(size, ctx.opts.max_io, offset, len).map_err(Fail::Status)?;
                let at = ctx
                    .file
                    .range(offset, len)
                    .ok_or(Fail::Status(StoreStatus::OutOfRange))?
                    .start;
                match data {
                    Payload::Inline(d) => {
                        self.file_mr
                            .write(at, d)
                            .ok_or(Fail::Status(StoreStatus::Io))?;
                    }
                    Payload::ReadChunk { position, .. } => {
                        self.pull(at, chunks, position, len)?;
                    }
                    Payload::WriteChunk { .. } => return Err(Fail::Status(StoreStatus::Inval)),
                }
                if stable {
                    ctx.file
                        .sync(offset, u64::from(len))
                        .map_err(|_| Fail::Status(StoreStatus::Io))?;
                }
                self.stats.add_written(u64::from(len));
                Ok(Done::Write {
                    count: len,
                    committed: stable,
                })
            }
        }
    }

    /// RDMA-Reads the read chunk at `position` (`len` bytes) into the file from `base` on and
    /// waits. A chunk shorter than `len` is refused before anything is posted, so no byte of a
    /// refused WRITE reaches the file.
    fn pull(
        &mut self,
        base: usize,
        chunks: &ChunkLists,
        position: u32,
        len: u32,
    ) -> Result<(), Fail> {
        let segments: Vec<ReadSegment> = chunks
            .reads
            .iter()
            .filter(|r| r.position == position)
            .copied()
            .collect();
        read_segments((&self.qp, &self.scq, &self.file_mr), base, &segments, len)
    }

    /// Sends the first `len` bytes of `out` and waits until the Send (and every Write before
    /// it) completed, so the send buffer is free again and no Write still reads the file's
    /// region for this call.
    fn send_out(&mut self, len: usize) -> Result<(), &'static str> {
        self.send_mr
            .write(0, &self.out[..len])
            .ok_or("reply too long")?;
        self.qp
            .post_send(3, &self.send_mr, 0..len)
            .map_err(|_| "cannot post the reply")?;
        loop {
            match self.scq.wait(RDMA_TIMEOUT) {
                Some(c) if !c.is_ok() => return Err("send failed"),
                Some(c) if c.opcode == dataplane::Opcode::Send => return Ok(()),
                Some(_) => {}
                None => return Err("send timed out"),
            }
        }
    }
}

/// The call a reply answers.
struct Reply<'a> {
    xid: u32,
    requested: u32,
    chunks: &'a ChunkLists,
}

/// RDMA-Reads `segments` (`len` bytes in all, in order) into `mr` from `base` on and waits for
/// the Reads. Segments offering less than `len` are refused before anything is posted.
fn read_segments(
    (qp, scq, mr): (&QueuePair, &CompletionQueue, &MemoryRegion),
    base: usize,
    segments: &[ReadSegment],
    len: u32,
) -> Result<(), Fail> {
    let offered: u64 = segments.iter().map(|r| u64::from(r.target.length)).sum();
    if offered < u64::from(len) {
        return Err(Fail::Status(StoreStatus::Inval));
    }
    let mut at = 0u32;
    let mut posted = 0;
    for seg in segments {
        let take = seg.target.length.min(len - at);
        if take == 0 {
            break;
        }
        qp.post_read(
            2,
            mr,
            base + at as usize..base + (at + take) as usize,
            RemoteAddr {
                stag: seg.target.handle,
                to: seg.target.offset,
            },
        )
        .map_err(|_| Fail::Conn("RDMA Read refused"))?;
        posted += 1;
        at += take;
    }
    let mut got = 0;
    while got < posted {
        match scq.wait(RDMA_TIMEOUT) {
            Some(c) if c.opcode == dataplane::Opcode::Read => {
                if !c.is_ok() {
                    return Err(Fail::Conn("RDMA Read failed"));
                }
                got += 1;
            }
            Some(c) if !c.is_ok() => return Err(Fail::Conn("work request failed")),
            Some(_) => {}
            None => return Err(Fail::Conn("RDMA Read timed out")),
        }
    }
    Ok(())
}

/// A served call before its reply is encoded.
enum Done {
    Null,
    Getattr,
    Commit,
    ReadChunk {
        len: u32,
        eof: bool,
    },
    /// The data is in the connection's `inline` buffer.
    ReadInline {
        eof: bool,
    },
    Write {
        count: u32,
        committed: bool,
    },
}

impl Done {
    fn reply<'a>(self, ctx: &Ctx) -> StorageReply<'a> {
        let verifier = ctx.verifier;
        match self {
            Done::Null => StorageReply::Null,
            Done::Getattr => StorageReply::Getattr(Ok(GetattrOk {
                size: ctx.file.len(),
                block_size: BLOCK_SIZE,
                max_io: ctx.opts.max_io.max(1),
                verifier,
            })),
            Done::Commit => StorageReply::Commit(Ok(CommitOk { verifier })),
            Done::ReadChunk { len, eof } => StorageReply::Read(Ok(ReadOk {
                eof,
                data: Payload::WriteChunk { index: 0, len },
            })),
            // Filled in by `fill_inline` (the data lives in the connection's buffer).
            Done::ReadInline { eof } => StorageReply::Read(Ok(ReadOk {
                eof,
                data: Payload::Inline(&[]),
            })),
            Done::Write { count, committed } => StorageReply::Write(Ok(WriteOk {
                count,
                committed,
                verifier,
            })),
        }
    }
}

/// Points an inline READ reply at its data.
fn fill_inline<'a>(reply: StorageReply<'a>, inline: &'a [u8]) -> StorageReply<'a> {
    match reply {
        StorageReply::Read(Ok(ReadOk {
            eof,
            data: Payload::Inline(_),
        })) => StorageReply::Read(Ok(ReadOk {
            eof,
            data: Payload::Inline(inline),
        })),
        r => r,
    }
}

fn error_reply(call: &StorageCall<'_>, s: StoreStatus) -> StorageReply<'static> {
    match call {
        StorageCall::Null => StorageReply::Null,
        StorageCall::Read(_) => StorageReply::Read(Err(s)),
        StorageCall::Write(_) => StorageReply::Write(Err(s)),
        StorageCall::Commit(_) => StorageReply::Commit(Err(s)),
        StorageCall::Getattr => StorageReply::Getattr(Err(s)),
    }
}
