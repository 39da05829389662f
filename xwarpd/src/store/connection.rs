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
//! Every length a client controls is checked before anything is allocated, copied or posted:
//! a READ beyond `max_io` or its write chunk, and an inline READ whose reply cannot fit the
//! client's receive buffer, are answered TOO_BIG (the storage program's "larger than its
//! chunk") at once. The only buffers are the connection's, of fixed size, made at connect.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rpcrdma::storage::{
    CommitOk, GetattrOk, ReadOk, StorageCall, StorageReply, StoreStatus, WriteArgs, WriteOk,
};
use rpcrdma::{ChunkLists, Payload, ReplyOut, Rules, ServerEvent, ServerSession};

use super::server::{Ctx, BLOCK_SIZE};
use super::stats::ConnGuard;
use super::INLINE_SIZE;
use dataplane::{CompletionQueue, MemoryRegion, QueuePair, RemoteAddr};

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
    session: ServerSession,
    /// The client's receive size: replies longer than this would overrun it.
    max_inline_reply: u32,
    /// The received call (copied out of its receive buffer, which is re-posted at once).
    msg: Vec<u8>,
    /// Inline READ data; never longer than `max_inline_reply`.
    inline: Vec<u8>,
    /// The reply's RPC message, when it would go in a reply chunk (never: we refuse those).
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
        (recv_mr, send_mr, file_mr): (MemoryRegion, MemoryRegion, MemoryRegion),
        credits: u32,
        max_inline_reply: u32,
        stats: ConnGuard,
    ) -> Self {
        let mut session = ServerSession::new(credits, Rules::default(), Duration::from_secs(5));
        session.posted_receives(credits.saturating_sub(1));
        let n = INLINE_SIZE as usize;
        Self {
            qp,
            scq,
            rcq,
            recv_mr,
            send_mr,
            file_mr,
            session,
            max_inline_reply,
            msg: vec![0; n],
            inline: Vec::with_capacity(n),
            message: vec![0; n],
            out: vec![0; n],
            stats,
        }
    }

    /// Serves calls until the connection ends, it stays idle too long or the server stops;
    /// returns why it ended.
    pub(crate) fn run(&mut self, ctx: &Ctx) -> &'static str {
        let mut last_call = Instant::now();
        loop {
            if ctx.stop.load(Ordering::Acquire) {
                return "server shutting down";
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
            let handled = self.handle(ctx, &msg[..len]);
            self.msg = msg;
            if let Err(why) = handled {
                return why;
            }
        }
    }

    fn handle(&mut self, ctx: &Ctx, msg: &[u8]) -> Result<(), &'static str> {
        match self.session.handle_receive(msg) {
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
                let reply = fill_inline(reply, &self.inline);
                let mut enc = InlineEncoder {
                    session: &mut self.session,
                    out: &mut self.out,
                    message: &mut self.message,
                    max_inline_reply: self.max_inline_reply,
                    xid,
                    requested,
                    chunks: &chunks,
                };
                let out_len = match enc.encode(&reply) {
                    Some(n) => {
                        // Inline READ data (empty for every other reply).
                        self.stats.add_read(self.inline.len() as u64);
                        n
                    }
                    None => {
                        // No reply chunks here: a READ whose data was just short enough to pass
                        // the check but not with its headers is TOO_BIG too; anything else is
                        // SYSTEM_ERR rather than an overrun of the client's buffer.
                        self.stats.count_error();
                        let too_big = matches!(call.call, StorageCall::Read(_))
                            .then(|| error_reply(&call.call, StoreStatus::TooBig));
                        match too_big.and_then(|r| enc.encode(&r)) {
                            Some(n) => n,
                            None => enc
                                .session
                                .encode_rpc_error(
                                    enc.out,
                                    xid,
                                    requested,
                                    &chunks,
                                    rpcrdma::AcceptStat::SystemErr,
                                )
                                .map_err(|_| "cannot encode a reply")?,
                        }
                    }
                };
                self.send_out(out_len)
            }
            ServerEvent::Refused { .. } => {
                self.stats.count_refused();
                while let Some(n) = self.session.poll_transmit(&mut self.out) {
                    self.send_out(n)?;
                }
                Ok(())
            }
            ServerEvent::LongCall { header } => {
                // We never advertise long calls (8 KiB inline); refuse like a bad chunk.
                self.stats.count_refused();
                let grant = self.session.credits().last_grant().max(1);
                let n = rpcrdma::HeaderRepr::err_chunk(header.xid, grant)
                    .emit(&mut self.out)
                    .map_err(|_| "cannot encode RDMA_ERROR")?;
                self.send_out(n)
            }
            ServerEvent::Done { .. } => Ok(()),
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
                if a.offset > size {
                    return Err(Fail::Status(StoreStatus::OutOfRange));
                }
                if a.count > ctx.opts.max_io {
                    return Err(Fail::Status(StoreStatus::TooBig));
                }
                let n = (size - a.offset).min(u64::from(a.count)) as u32;
                let eof = a.offset + u64::from(n) >= size;
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
                        // The data alone must fit the client's receive buffer: refused before a
                        // byte is copied (the reply's own headers are checked when encoding).
                        if n > self.max_inline_reply {
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
                if offset
                    .checked_add(u64::from(len))
                    .is_none_or(|end| end > size)
                {
                    return Err(Fail::Status(StoreStatus::OutOfRange));
                }
                if len > ctx.opts.max_io {
                    return Err(Fail::Status(StoreStatus::TooBig));
                }
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
        let offered: u64 = chunks
            .reads
            .iter()
            .filter(|r| r.position == position)
            .map(|r| u64::from(r.target.length))
            .sum();
        if offered < u64::from(len) {
            return Err(Fail::Status(StoreStatus::Inval));
        }
        let mut at = 0u32;
        let mut posted = 0;
        for seg in chunks.reads.iter().filter(|r| r.position == position) {
            let take = seg.target.length.min(len - at);
            if take == 0 {
                break;
            }
            self.qp
                .post_read(
                    2,
                    &self.file_mr,
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
        if at != len {
            return Err(Fail::Status(StoreStatus::Inval));
        }
        let mut got = 0;
        while got < posted {
            match self.scq.wait(RDMA_TIMEOUT) {
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

/// Encodes the replies to one call into the connection's send buffer.
struct InlineEncoder<'a> {
    session: &'a mut ServerSession,
    out: &'a mut [u8],
    message: &'a mut [u8],
    max_inline_reply: u32,
    xid: u32,
    requested: u32,
    chunks: &'a ChunkLists,
}

impl InlineEncoder<'_> {
    /// The Send's length when `reply` fits the client's receive buffer inline.
    fn encode(&mut self, reply: &StorageReply<'_>) -> Option<usize> {
        let r = self.session.encode_reply_within(
            self.out,
            self.message,
            self.max_inline_reply,
            self.xid,
            self.requested,
            self.chunks,
            reply,
        );
        match r {
            Ok(ReplyOut::Inline { send_len }) => Some(send_len),
            Ok(ReplyOut::ReplyChunk { .. }) | Err(_) => None,
        }
    }
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
