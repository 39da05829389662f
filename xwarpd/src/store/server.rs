//! The store's server: a listener whose connections each get a thread that serves the storage
//! program over RPC-over-RDMA, one call at a time, against one [`MappedFile`].
//!
//! The file is mapped shared and registered once, in one protection domain that every
//! connection's queue pair uses, so it is the local buffer of every transfer (no staging copy):
//! READ: the bytes are RDMA-Written from the file's region into the call's write chunk, then the
//! reply is Sent (RDMAP orders the Write before the Send, RPCRDMA-03); without a write chunk they
//! come inline, read out of the region. WRITE: chunked data is RDMA-Read from the client's read
//! chunk straight into the region at the offset, inline data written into it. COMMIT: msync +
//! fdatasync of the range. GETATTR: size, block size, max I/O and the boot verifier.
//! Bad transport headers are answered by the `rpcrdma` session (RDMA_ERROR ERR_VERS/ERR_CHUNK).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rpcrdma::negotiation::PrivateData;
use rpcrdma::storage::{
    CommitOk, GetattrOk, ReadOk, StorageCall, StorageReply, StoreStatus, WriteArgs, WriteOk,
};
use rpcrdma::{ChunkLists, Payload, ReplyOut, Rules, ServerEvent, ServerSession};

use super::stats::{ConnStats, StoreStats};
use super::INLINE_SIZE;
use dataplane::{
    AcceptError, Access, CompletionQueue, ConnectionConfig, Device, FileRegion, Incoming, Listener,
    MappedFile, MemoryRegion, ProtectionDomain, QpInit, QueuePair, RemoteAddr,
};

/// Block size reported by GETATTR.
pub const BLOCK_SIZE: u32 = 4096;

/// How a store is served.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Credits (receive buffers) per connection.
    pub credits: u32,
    /// Largest READ or WRITE per call.
    pub max_io: u32,
    /// MPA and queue settings of accepted connections.
    pub connection: ConnectionConfig,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            credits: 16,
            max_io: super::DEFAULT_MAX_IO,
            connection: ConnectionConfig::default(),
        }
    }
}

/// A running store service. Dropping it (or [`StoreServer::shutdown`]) stops accepting, closes
/// every connection and joins their threads.
#[derive(Debug)]
pub struct StoreServer {
    local: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
    stats: Arc<StoreStats>,
    file: Arc<FileRegion>,
}

impl StoreServer {
    /// Serves `file` on `addr` through `device`. The whole file is mapped and mlock'ed (a
    /// memory-lock limit too small for it fails here).
    pub fn start(
        device: &Device,
        addr: SocketAddr,
        file: MappedFile,
        opts: ServerOptions,
    ) -> Result<Self, dataplane::ConnectError> {
        let listener = device.listen(addr, opts.connection.clone())?;
        let local = listener.local_addr();
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(StoreStats::default());
        let pd = device.alloc_pd();
        let file = Arc::new(
            file.register(&pd)
                .map_err(|e| dataplane::ConnectError::Io(std::io::Error::other(e)))?,
        );
        let verifier = dataplane::os_random_u64();
        let ctx = Ctx {
            device: device.clone(),
            pd,
            file: file.clone(),
            opts,
            stats: stats.clone(),
            stop: stop.clone(),
            verifier,
        };
        let acceptor = std::thread::Builder::new()
            .name("xwarp-store".into())
            .spawn(move || accept_loop(listener, ctx))
            .map_err(dataplane::ConnectError::Io)?;
        tracing::info!(%local, size = file.len(), "store serving");
        Ok(Self {
            local,
            stop,
            acceptor: Some(acceptor),
            stats,
            file,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Live counters of the service and its connections.
    pub fn stats(&self) -> &Arc<StoreStats> {
        &self.stats
    }

    /// Stops: no new connections, open ones are closed, the file is synced.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.acceptor.take() {
            let _ = h.join();
        }
        if let Err(e) = self.file.sync(0, 0) {
            tracing::warn!(error = %e, "final sync of the store failed");
        }
    }
}

impl Drop for StoreServer {
    fn drop(&mut self) {
        self.stop_now();
    }
}

#[derive(Clone)]
struct Ctx {
    device: Device,
    /// The domain of the file's region, shared by every connection so their queue pairs reach it.
    pd: ProtectionDomain,
    file: Arc<FileRegion>,
    opts: ServerOptions,
    stats: Arc<StoreStats>,
    stop: Arc<AtomicBool>,
    verifier: u64,
}

fn accept_loop(listener: Listener, ctx: Ctx) {
    let conns: Mutex<Vec<JoinHandle<()>>> = Mutex::default();
    while !ctx.stop.load(Ordering::Acquire) {
        match listener.accept_timeout(Duration::from_millis(100)) {
            Ok(inc) => {
                let c = ctx.clone();
                let h = std::thread::Builder::new()
                    .name("xwarp-store-conn".into())
                    .spawn(move || serve_incoming(inc, c));
                if let Ok(h) = h {
                    let mut v = conns.lock().unwrap_or_else(|p| p.into_inner());
                    v.retain(|h| !h.is_finished());
                    v.push(h);
                }
            }
            Err(AcceptError::Timeout) => {}
            Err(AcceptError::Closed) => break,
        }
    }
    for h in conns.into_inner().unwrap_or_default() {
        let _ = h.join();
    }
}

/// Per-connection resources. Field order is drop order: the queue pair closes first.
struct Conn {
    qp: QueuePair,
    scq: CompletionQueue,
    rcq: CompletionQueue,
    recv_mr: MemoryRegion,
    send_mr: MemoryRegion,
    session: ServerSession,
    /// The client's receive size: replies longer than this would overrun it.
    max_inline_reply: u32,
    stats: Arc<ConnStats>,
}

fn serve_incoming(inc: Incoming, ctx: Ctx) {
    let peer = inc
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    let client = PrivateData::decode(inc.private_data());
    let mine = PrivateData {
        remote_invalidation: false,
        send_size: INLINE_SIZE,
        recv_size: INLINE_SIZE,
    };
    // Replies may be as long as our send size and the client's receive buffers allow.
    let (_, max_inline_reply) = PrivateData::inline_limits(
        &client.unwrap_or(PrivateData {
            remote_invalidation: false,
            send_size: rpcrdma::planner::DEFAULT_INLINE,
            recv_size: rpcrdma::planner::DEFAULT_INLINE,
        }),
        Some(&mine),
    );
    let pd = ctx.pd.clone();
    let scq = ctx.device.create_cq();
    let rcq = ctx.device.create_cq();
    let credits = ctx.opts.credits.max(1);
    let regions = (|| {
        Ok::<_, dataplane::RegisterError>((
            pd.register(INLINE_SIZE as usize * credits as usize, Access::LOCAL_WRITE)?,
            pd.register(INLINE_SIZE as usize, Access::LOCAL_WRITE)?,
        ))
    })();
    let (recv_mr, send_mr) = match regions {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(%peer, error = %e, "cannot register connection buffers: rejecting");
            let _ = inc.reject(b"");
            return;
        }
    };
    let init = QpInit {
        pd: pd.clone(),
        send_cq: scq.clone(),
        recv_cq: rcq.clone(),
    };
    let posted = inc.accept_with(init, &mine.encode(), |qp| {
        for i in 0..credits as usize {
            let s = i * INLINE_SIZE as usize;
            qp.post_recv(i as u64, &recv_mr, s..s + INLINE_SIZE as usize)?;
        }
        Ok(())
    });
    let qp = match posted {
        Ok(qp) => qp,
        Err(e) => {
            tracing::info!(%peer, error = %e, "store connection failed during accept");
            return;
        }
    };
    let stats = ctx.stats.add_conn(peer.clone());
    tracing::info!(%peer, qp = qp.num(), "store connection up");
    let mut session = ServerSession::new(credits, Rules::default(), Duration::from_secs(5));
    session.posted_receives(credits.saturating_sub(1));
    let mut conn = Conn {
        qp,
        scq,
        rcq,
        recv_mr,
        send_mr,
        session,
        max_inline_reply,
        stats,
    };
    let why = conn.run(&ctx);
    conn.stats.connected.store(false, Ordering::Relaxed);
    tracing::info!(%peer, reason = why, "store connection closed");
}

/// Why a call could not be served: a status for the client, or a broken connection.
enum Fail {
    Status(StoreStatus),
    Conn(&'static str),
}

impl Conn {
    fn run(&mut self, ctx: &Ctx) -> &'static str {
        let mut msg = vec![0u8; INLINE_SIZE as usize];
        loop {
            if ctx.stop.load(Ordering::Acquire) {
                return "server shutting down";
            }
            let Some(c) = self.rcq.wait(Duration::from_millis(100)) else {
                if !self.qp.is_connected() {
                    return "peer closed";
                }
                continue;
            };
            if !c.is_ok() {
                return "receive flushed";
            }
            let slot = c.wr_id as usize;
            let start = slot * INLINE_SIZE as usize;
            let len = (c.byte_len as usize).min(INLINE_SIZE as usize);
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
            if let Err(why) = self.handle(ctx, &msg[..len]) {
                return why;
            }
        }
    }

    fn handle(&mut self, ctx: &Ctx, msg: &[u8]) -> Result<(), &'static str> {
        let mut out = [0u8; INLINE_SIZE as usize];
        match self.session.handle_receive(msg) {
            ServerEvent::Call {
                xid,
                requested,
                chunks,
                call,
            } => {
                self.stats.count_call(&call.call);
                let served = self.serve(ctx, &call.call, &chunks);
                let mut inline = Vec::new();
                let reply = match served {
                    Ok(r) => r.reply(&mut inline, ctx),
                    Err(Fail::Status(s)) => {
                        self.stats.count_error();
                        error_reply(&call.call, s)
                    }
                    Err(Fail::Conn(why)) => return Err(why),
                };
                let reply = fill_inline(reply, &inline);
                let mut mbuf = vec![0u8; INLINE_SIZE as usize];
                let out_len = match self.session.encode_reply_within(
                    &mut out,
                    &mut mbuf,
                    self.max_inline_reply,
                    xid,
                    requested,
                    &chunks,
                    &reply,
                ) {
                    Ok(ReplyOut::Inline { send_len }) => send_len,
                    Ok(ReplyOut::ReplyChunk { .. }) | Err(_) => {
                        // No reply chunks here: answer SYSTEM_ERR rather than overrun the client.
                        self.stats.count_error();
                        self.session
                            .encode_rpc_error(
                                &mut out,
                                xid,
                                requested,
                                &chunks,
                                rpcrdma::AcceptStat::SystemErr,
                            )
                            .map_err(|_| "cannot encode a reply")?
                    }
                };
                self.send(&out[..out_len])
            }
            ServerEvent::Refused { .. } => {
                self.stats.count_refused();
                while let Some(n) = self.session.poll_transmit(&mut out) {
                    self.send(&out[..n])?;
                }
                Ok(())
            }
            ServerEvent::LongCall { header } => {
                // We never advertise long calls (8 KiB inline); refuse like a bad chunk.
                self.stats.count_refused();
                let grant = self.session.credits().last_grant().max(1);
                let n = rpcrdma::HeaderRepr::err_chunk(header.xid, grant)
                    .emit(&mut out)
                    .map_err(|_| "cannot encode RDMA_ERROR")?;
                self.send(&out[..n])
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
                self.stats.count_commit();
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
                match chunks.writes.first() {
                    Some(chunk) => {
                        if chunk.total_len() < u64::from(n) {
                            return Err(Fail::Status(StoreStatus::TooBig));
                        }
                        let at = ctx
                            .file
                            .range(a.offset, n)
                            .ok_or(Fail::Status(StoreStatus::Io))?
                            .start;
                        // RDMA Write out of the file's region segment by segment, then the reply
                        // Send follows in order.
                        let mut done = 0u32;
                        for seg in &chunk.segments {
                            if done == n {
                                break;
                            }
                            let take = seg.length.min(n - done);
                            let r = at + done as usize..at + (done + take) as usize;
                            self.qp
                                .post_write(
                                    1,
                                    ctx.file.region(),
                                    r,
                                    RemoteAddr {
                                        stag: seg.handle,
                                        to: seg.offset,
                                    },
                                )
                                .map_err(|_| Fail::Conn("RDMA Write refused"))?;
                            done += take;
                        }
                        self.stats.add_read(u64::from(n));
                        Ok(Done::ReadChunk { len: n, eof })
                    }
                    None => {
                        let mut v = vec![0u8; n as usize];
                        let r = ctx
                            .file
                            .range(a.offset, n)
                            .ok_or(Fail::Status(StoreStatus::Io))?;
                        ctx.file
                            .region()
                            .read(r.start, &mut v)
                            .ok_or(Fail::Status(StoreStatus::Io))?;
                        self.stats.add_read(u64::from(n));
                        Ok(Done::ReadInline { data: v, eof })
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
                        ctx.file
                            .region()
                            .write(at, d)
                            .ok_or(Fail::Status(StoreStatus::Io))?;
                    }
                    Payload::ReadChunk { position, .. } => {
                        self.pull(ctx.file.region(), at, chunks, position, len)?;
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

    /// RDMA-Reads the read chunk at `position` (`len` bytes) into `dst` from `base` on and
    /// waits. A chunk shorter than `len` is refused before anything is posted, so no byte of a
    /// refused WRITE reaches the file.
    fn pull(
        &mut self,
        dst: &MemoryRegion,
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
                    dst,
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
            match self.scq.wait(Duration::from_secs(30)) {
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

    /// Sends a reply and waits until it (and every Write before it) completed, so the send
    /// buffer is free again and no Write still reads the file's region for this call.
    fn send(&mut self, bytes: &[u8]) -> Result<(), &'static str> {
        self.send_mr.write(0, bytes).ok_or("reply too long")?;
        self.qp
            .post_send(3, &self.send_mr, 0..bytes.len())
            .map_err(|_| "cannot post the reply")?;
        loop {
            match self.scq.wait(Duration::from_secs(30)) {
                Some(c) if !c.is_ok() => return Err("send failed"),
                Some(c) if c.opcode == dataplane::Opcode::Send => return Ok(()),
                Some(_) => {}
                None => return Err("send timed out"),
            }
        }
    }
}

/// A served call before its reply is encoded.
enum Done {
    Null,
    Getattr,
    Commit,
    ReadChunk { len: u32, eof: bool },
    ReadInline { data: Vec<u8>, eof: bool },
    Write { count: u32, committed: bool },
}

impl Done {
    fn reply<'a>(self, inline: &mut Vec<u8>, ctx: &Ctx) -> StorageReply<'a> {
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
            Done::ReadInline { data, eof } => {
                *inline = data;
                // Filled in by `fill_inline` (the data lives in `inline`).
                StorageReply::Read(Ok(ReadOk {
                    eof,
                    data: Payload::Inline(&[]),
                }))
            }
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
