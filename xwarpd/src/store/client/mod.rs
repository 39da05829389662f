//! The store's client: one connection, data straight between the caller's registered buffer and
//! the server's file (the server RDMA-Writes READ data into the buffer and RDMA-Reads WRITE data
//! out of it; small transfers travel inline).
//!
//! Calls either run one at a time ([`StoreClient::read`], [`StoreClient::write`], ...) or are
//! pipelined: [`StoreClient::start_read`] / [`StoreClient::start_write`] put a call on the wire
//! and return at once while the server's credit grant allows another (RPCRDMA-07: never more
//! calls outstanding than the last grant; before the first reply that is 1, RPCRDMA-35), and
//! [`StoreClient::wait_any`] collects the answers in the order they come.
//!
//! Long messages (RPCRDMA-29, -30, -36): a call that does not fit the server's inline size goes
//! as RDMA_NOMSG with its message in a position-0 read chunk; a call whose reply may not fit
//! ours offers a reply chunk; a reply sent as a position-0 read chunk instead (draft §5.2) is
//! RDMA-Read and acknowledged with RDMA_DONE. Both take one of a few long-message slots,
//! registered at the first long message. [`MessagePolicy`] chooses whether bulk data goes by
//! RDMA (the default) or in the messages, and whether reply chunks are offered.
//!
//! ```no_run
//! use xwarpd::store::{StoreClient, ClientOptions};
//! use dataplane::Access;
//! let mut c = StoreClient::connect("198.18.0.1:20049".parse().unwrap(), &ClientOptions::default()).unwrap();
//! let buf = c.pd().register(1 << 20, Access::ALL).unwrap();
//! buf.write(0, b"hello").unwrap();
//! c.write(4096, &buf, 0..5).unwrap();
//! c.commit(0, 0).unwrap();
//! let got = c.read(4096, &buf, 100..105).unwrap();
//! assert_eq!(got.len, 5);
//! ```

mod long_slots;
mod replies;
mod types;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dataplane::{Access, Device, MemoryRegion, Opcode, ProtectionDomain, QpInit, QueuePair};
use rpcrdma::negotiation::PrivateData;
use rpcrdma::storage::{CommitArgs, ReadArgs, StorageCall, StorageProc, WriteArgs};
use rpcrdma::storage_send::CallChunks;
use rpcrdma::{ChunkPlanner, ClientSession, Payload, Placement, Rules, Segment, WriteChunk};

use super::{INLINE_SIZE, MAX_LONG_MESSAGE};
use long_slots::LongSlots;
pub use types::{
    Attributes, CallId, ClientOptions, Finished, MessagePolicy, ReadResult, StoreError, WriteResult,
};

/// The most calls a client has in flight: it keeps this many reply receives posted (C-3) and
/// asks the server for as many credits; the server's grant may allow fewer.
pub const MAX_IN_FLIGHT: usize = 16;
/// wr_id tag of the Sends carrying calls (the low bits are the send slot).
const SEND_WR: u64 = 1 << 32;
/// wr_id of the RDMA Reads fetching a long reply from its read chunk.
const FETCH_WR: u64 = 2 << 32;
/// Calls with a long message (a long call, or a reply chunk) in flight at once; more wait.
const LONG_SLOTS: usize = 4;

/// Bytes of a READ reply besides its data: transport header with an echoed reply chunk, RPC
/// reply header, status, eof and the length word.
const REPLY_OVERHEAD: u64 = 64;
/// Bytes of a WRITE call besides its data (RPC call header and arguments), with room to spare.
const CALL_OVERHEAD: u32 = 128;

/// A pipelined call's buffer: kept registered (the server reaches it by RDMA) until the call
/// ends, and where inline READ data goes.
struct Pending {
    buf: Option<(Arc<MemoryRegion>, usize)>,
    /// The long-message slot the call holds until its answer.
    long_slot: Option<usize>,
}

/// The buffer a call waited on in place (the one-at-a-time calls) places inline READ data in.
type SyncDest<'a> = Option<(u32, &'a MemoryRegion, usize)>;

/// A connected store client.
pub struct StoreClient {
    // Field order is drop order: the connection closes before its regions go.
    qp: QueuePair,
    session: ClientSession,
    pending: HashMap<u32, Pending>,
    ready: VecDeque<(CallId, Result<Finished, StoreError>)>,
    /// Send slots (of `INLINE_SIZE` bytes in `send_mr`) whose Send has completed.
    send_free: Vec<usize>,
    msg: Vec<u8>,
    policy: MessagePolicy,
    /// The client's receive size (replies longer than this do not come inline).
    max_inline_reply: u32,
    long: Option<LongSlots>,
    /// A long message: encoded for a long call, or a long reply taken out of its slot.
    long_msg: Vec<u8>,
    pd: ProtectionDomain,
    cq: dataplane::CompletionQueue,
    rcq: dataplane::CompletionQueue,
    send_mr: MemoryRegion,
    recv_mr: MemoryRegion,
    timeout: Duration,
    _device: Device,
}

impl std::fmt::Debug for StoreClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreClient")
            .field("qp", &self.qp.num())
            .finish()
    }
}

fn first_xid() -> u32 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() ^ (d.as_secs() as u32))
        .unwrap_or(1);
    t ^ std::process::id().rotate_left(16)
}

impl StoreClient {
    /// Connects to a store server at `addr`, negotiating inline sizes with RFC 8797 private data.
    pub fn connect(addr: SocketAddr, opts: &ClientOptions) -> Result<Self, StoreError> {
        let device = Device::open(opts.transport.clone())?;
        Self::connect_on(&device, addr, opts)
    }

    /// [`connect`](Self::connect) through an open `device` (an AF_XDP device from
    /// [`Device::open_xdp`], for one); `opts.transport` is not used.
    pub fn connect_on(
        device: &Device,
        addr: SocketAddr,
        opts: &ClientOptions,
    ) -> Result<Self, StoreError> {
        let device = device.clone();
        let pd = device.alloc_pd();
        let cq = device.create_cq();
        let rcq = device.create_cq();
        // A Send's buffer stays busy until the Send completes, which may be after its reply.
        let send_slots = MAX_IN_FLIGHT + 1;
        let send_mr = pd.register(INLINE_SIZE as usize * send_slots, Access::LOCAL_WRITE)?;
        let recv_mr = pd.register(INLINE_SIZE as usize * MAX_IN_FLIGHT, Access::LOCAL_WRITE)?;
        let mine = PrivateData {
            remote_invalidation: false,
            send_size: INLINE_SIZE,
            recv_size: INLINE_SIZE,
        };
        let init = QpInit {
            pd: pd.clone(),
            send_cq: cq.clone(),
            recv_cq: rcq.clone(),
        };
        let qp = device.connect(addr, init, &opts.connection, &mine.encode())?;
        let server = PrivateData::decode(qp.peer_private_data());
        let (call, reply) = PrivateData::inline_limits(&mine, server.as_ref());
        let planner = ChunkPlanner {
            max_inline_call: call,
            max_inline_reply: reply,
            ..ChunkPlanner::default()
        };
        for i in 0..MAX_IN_FLIGHT {
            let s = i * INLINE_SIZE as usize;
            qp.post_recv(i as u64, &recv_mr, s..s + INLINE_SIZE as usize)?;
        }
        Ok(Self {
            session: ClientSession::new(
                MAX_IN_FLIGHT as u32,
                first_xid(),
                planner,
                Rules::default(),
            ),
            pending: HashMap::new(),
            ready: VecDeque::new(),
            send_free: (0..send_slots).rev().collect(),
            msg: vec![0u8; INLINE_SIZE as usize],
            policy: MessagePolicy::default(),
            max_inline_reply: reply,
            long: None,
            long_msg: Vec::new(),
            qp,
            pd,
            cq,
            rcq,
            send_mr,
            recv_mr,
            timeout: opts.call_timeout,
            _device: device,
        })
    }

    /// What MPA negotiated on this connection: markers and CRC per direction, the revision.
    pub fn negotiated(&self) -> dataplane::NegotiatedFraming {
        self.qp.negotiated()
    }

    /// The protection domain buffers for [`read`](Self::read) and [`write`](Self::write) must
    /// be registered in (`pd().register(len, Access::ALL)`).
    pub fn pd(&self) -> &ProtectionDomain {
        &self.pd
    }

    /// The store's size and limits.
    pub fn getattr(&mut self) -> Result<Attributes, StoreError> {
        match self.call(&StorageCall::Getattr, CallChunks::default(), false, None)? {
            Finished::Getattr(a) => Ok(a),
            _ => Err(StoreError::Rpc("reply of another procedure".into())),
        }
    }

    /// Reads `range.len()` bytes at `offset` of the store into `buf[range]`. Large reads are
    /// RDMA-Written by the server straight into `buf` (which needs [`Access::REMOTE_WRITE`]);
    /// small ones come inline and are copied in. A read past the end returns fewer bytes with
    /// `eof`.
    pub fn read(
        &mut self,
        offset: u64,
        buf: &MemoryRegion,
        range: Range<usize>,
    ) -> Result<ReadResult, StoreError> {
        let (call, chunks, long_reply) = self.read_call(offset, buf, &range)?;
        match self.call(&call, chunks, long_reply, Some((buf, range.start)))? {
            Finished::Read(r) => Ok(r),
            _ => Err(StoreError::Rpc("reply of another procedure".into())),
        }
    }

    /// Writes `buf[range]` at `offset` of the store. Large writes are RDMA-Read by the server
    /// straight out of `buf` (which needs [`Access::REMOTE_READ`]); small ones go inline.
    /// `stable` asks the server to make the data durable before it answers.
    pub fn write_with(
        &mut self,
        offset: u64,
        buf: &MemoryRegion,
        range: Range<usize>,
        stable: bool,
    ) -> Result<WriteResult, StoreError> {
        let mut inline = Vec::new();
        let (call, chunks) = self.write_call(offset, buf, &range, stable, &mut inline)?;
        match self.call(&call, chunks, false, None)? {
            Finished::Write(w) => Ok(w),
            _ => Err(StoreError::Rpc("reply of another procedure".into())),
        }
    }

    /// [`write_with`](Self::write_with), unstable (make it durable with [`commit`](Self::commit)).
    pub fn write(
        &mut self,
        offset: u64,
        buf: &MemoryRegion,
        range: Range<usize>,
    ) -> Result<WriteResult, StoreError> {
        self.write_with(offset, buf, range, false)
    }

    /// Makes `[offset, offset+count)` durable (`count` 0: the whole store). Returns the server's
    /// boot verifier. Once this returns, the data survives a crash of the server.
    pub fn commit(&mut self, offset: u64, count: u32) -> Result<u64, StoreError> {
        let call = StorageCall::Commit(CommitArgs { offset, count });
        match self.call(&call, CallChunks::default(), false, None)? {
            Finished::Commit(v) => Ok(v),
            _ => Err(StoreError::Rpc("reply of another procedure".into())),
        }
    }

    /// Starts a READ of `range.len()` bytes at `offset` into `buf[range]` and returns without
    /// waiting for it, once the server's credits allow another call (until then it waits,
    /// keeping the answers that arrive for [`wait_any`](Self::wait_any)). `buf` stays
    /// registered until the call ends; do not touch `buf[range]` before its answer.
    pub fn start_read(
        &mut self,
        offset: u64,
        buf: &Arc<MemoryRegion>,
        range: Range<usize>,
    ) -> Result<CallId, StoreError> {
        let (call, chunks, long_reply) = self.read_call(offset, buf, &range)?;
        let xid = self.start(&call, chunks, long_reply, Some((buf.clone(), range.start)))?;
        Ok(CallId(xid))
    }

    /// Starts a WRITE of `buf[range]` at `offset` (see [`start_read`](Self::start_read) for
    /// when it returns); do not change `buf[range]` before its answer.
    pub fn start_write(
        &mut self,
        offset: u64,
        buf: &Arc<MemoryRegion>,
        range: Range<usize>,
        stable: bool,
    ) -> Result<CallId, StoreError> {
        let mut inline = Vec::new();
        let (call, chunks) = self.write_call(offset, buf, &range, stable, &mut inline)?;
        let xid = self.start(&call, chunks, false, Some((buf.clone(), range.start)))?;
        Ok(CallId(xid))
    }

    /// Waits for the next call to finish and returns it with its answer (a call's own failure,
    /// such as a status from the server, is the inner error). Fails when no call is in flight,
    /// on a timeout, or when the connection is lost.
    pub fn wait_any(&mut self) -> Result<(CallId, Result<Finished, StoreError>), StoreError> {
        loop {
            if let Some(done) = self.ready.pop_front() {
                return Ok(done);
            }
            if self.pending.is_empty() {
                return Err(StoreError::Invalid("no call in flight"));
            }
            self.pump(None)?;
        }
    }

    /// [`wait_any`](Self::wait_any) without waiting: the next finished call if an answer has
    /// come, else `None` (also with no call in flight). The call timeout is the caller's to
    /// keep. For a caller that polls several clients in turn.
    #[allow(clippy::type_complexity)]
    pub fn poll_any(
        &mut self,
    ) -> Result<Option<(CallId, Result<Finished, StoreError>)>, StoreError> {
        if self.ready.is_empty() && !self.pending.is_empty() {
            self.reap_sends()?;
            match self.rcq.poll_one() {
                Some(c) => self.take_receive(c, None)?,
                None if !self.qp.is_connected() => return Err(StoreError::Disconnected),
                None => {}
            }
        }
        Ok(self.ready.pop_front())
    }

    /// Calls started and not yet returned by [`wait_any`](Self::wait_any).
    pub fn in_flight(&self) -> usize {
        self.pending.len() + self.ready.len()
    }

    /// The server's current credit grant: how many calls may be in flight at once (at most
    /// [`MAX_IN_FLIGHT`]).
    pub fn credits(&self) -> u32 {
        self.session.credits().granted()
    }

    /// How the following calls carry bulk data and long messages.
    pub fn set_policy(&mut self, policy: MessagePolicy) {
        self.policy = policy;
    }

    fn check_range(&self, buf: &MemoryRegion, range: &Range<usize>) -> Result<u32, StoreError> {
        if !self.pd.owns(buf) {
            return Err(StoreError::Invalid(
                "buffer not registered in this client's protection domain (use pd())",
            ));
        }
        if range.start >= range.end || range.end > buf.len() {
            return Err(StoreError::Invalid(
                "empty range or range outside the buffer",
            ));
        }
        u32::try_from(range.len()).map_err(|_| StoreError::Invalid("range longer than 4 GiB"))
    }

    /// The READ call and its write chunk (the server RDMA-Writes into `buf[range]`) or none
    /// (the data comes in the reply), and whether the reply may be too long for inline and
    /// wants a reply chunk (RPCRDMA-30).
    fn read_call(
        &self,
        offset: u64,
        buf: &MemoryRegion,
        range: &Range<usize>,
    ) -> Result<(StorageCall<'static>, CallChunks, bool), StoreError> {
        let count = self.check_range(buf, range)?;
        let plan = self
            .session
            .plan(StorageProc::Read, count)
            .map_err(|e| StoreError::Rpc(e.to_string()))?;
        let mut chunks = CallChunks::default();
        let long_reply = if plan.bulk_result == Placement::Chunk && self.policy.ddp {
            if !buf.access().contains(Access::REMOTE_WRITE) {
                return Err(StoreError::Invalid("READ buffer lacks REMOTE_WRITE access"));
            }
            chunks.read_result = Some(WriteChunk::new(vec![Segment {
                handle: buf.stag(),
                length: count,
                offset: range.start as u64,
            }]));
            false
        } else {
            // The data comes in the reply: header, status, eof, length word and the data.
            let reply_len = REPLY_OVERHEAD + u64::from(count.next_multiple_of(4));
            if reply_len > u64::from(MAX_LONG_MESSAGE) {
                return Err(StoreError::Invalid(
                    "READ too long for a reply without a write chunk",
                ));
            }
            reply_len > u64::from(self.max_inline_reply)
        };
        Ok((
            StorageCall::Read(ReadArgs { offset, count }),
            chunks,
            long_reply,
        ))
    }

    /// The WRITE call: its read chunk (the server RDMA-Reads `buf[range]`), or the data copied
    /// into `inline`.
    fn write_call<'i>(
        &self,
        offset: u64,
        buf: &MemoryRegion,
        range: &Range<usize>,
        stable: bool,
        inline: &'i mut Vec<u8>,
    ) -> Result<(StorageCall<'i>, CallChunks), StoreError> {
        let count = self.check_range(buf, range)?;
        let plan = self
            .session
            .plan(StorageProc::Write, count)
            .map_err(|e| StoreError::Rpc(e.to_string()))?;
        let mut chunks = CallChunks::default();
        let data = if plan.bulk_arg == Placement::Chunk && self.policy.ddp {
            if !buf.access().contains(Access::REMOTE_READ) {
                return Err(StoreError::Invalid("WRITE buffer lacks REMOTE_READ access"));
            }
            chunks.write_data = vec![Segment {
                handle: buf.stag(),
                length: count,
                offset: range.start as u64,
            }];
            Payload::ReadChunk {
                position: 0,
                len: count,
            }
        } else {
            // In the message, which goes as a long call when it does not fit inline.
            if count > MAX_LONG_MESSAGE - CALL_OVERHEAD {
                return Err(StoreError::Invalid(
                    "WRITE too long for a call without a read chunk",
                ));
            }
            inline.resize(range.len(), 0);
            buf.read(range.start, inline)
                .ok_or(StoreError::Invalid("range outside the buffer"))?;
            Payload::Inline(inline)
        };
        let call = StorageCall::Write(WriteArgs {
            offset,
            stable,
            data,
        });
        Ok((call, chunks))
    }

    /// Sends one call and waits for its answer; `read_into` takes inline READ data.
    fn call(
        &mut self,
        call: &StorageCall<'_>,
        chunks: CallChunks,
        long_reply: bool,
        read_into: Option<(&MemoryRegion, usize)>,
    ) -> Result<Finished, StoreError> {
        let xid = self.start(call, chunks, long_reply, None)?;
        let sync = read_into.map(|(mr, at)| (xid, mr, at));
        loop {
            if let Some(i) = self.ready.iter().position(|(id, _)| id.0 == xid) {
                let (_, r) = self.ready.remove(i).expect("found above");
                return r;
            }
            self.pump(sync)?;
        }
    }

    /// Puts a call on the wire once a credit (RPCRDMA-07), a send slot and, when it needs
    /// one, a long-message slot are free: inline (RDMA_MSG) when it fits the server's inline
    /// size, else as a long call (RPCRDMA-29, -36). `long_reply`: the reply may not fit inline,
    /// so the call offers a reply chunk (unless the policy says not to).
    fn start(
        &mut self,
        call: &StorageCall<'_>,
        mut chunks: CallChunks,
        long_reply: bool,
        buf: Option<(Arc<MemoryRegion>, usize)>,
    ) -> Result<u32, StoreError> {
        let reply_chunk = long_reply && self.policy.reply_chunks;
        if self.long.is_none() && (reply_chunk || !self.policy.ddp) {
            self.long = Some(LongSlots::new(&self.pd)?);
            self.long_msg = vec![0; MAX_LONG_MESSAGE as usize];
        }
        // A call needs a long slot when it offers a reply chunk; one that may turn out long
        // takes one if free, and waits for one if it does turn out long.
        let mut wait_for_slot = reply_chunk;
        let (started, slot) = loop {
            self.reap_sends()?;
            self.flush_dones()?;
            let slot_free = self.long.as_ref().is_some_and(|l| !l.free.is_empty());
            if self.session.can_start()
                && !self.send_free.is_empty()
                && (slot_free || !wait_for_slot)
            {
                let slot = self.long.as_mut().and_then(|l| l.free.pop());
                match self.try_start(call, &mut chunks, reply_chunk, slot) {
                    Err(StoreError::Rpc(_)) if slot.is_none() && !wait_for_slot => {
                        // Long, and no slot was free: wait for one.
                        wait_for_slot = true;
                        if self.long.is_none() {
                            self.long = Some(LongSlots::new(&self.pd)?);
                            self.long_msg = vec![0; MAX_LONG_MESSAGE as usize];
                        }
                    }
                    Err(e) => {
                        self.free_slot(slot);
                        return Err(e);
                    }
                    Ok(started) => break (started, slot),
                }
                continue;
            }
            self.pump(None)?;
        };
        let slot_used = reply_chunk || started.long_message_len.is_some();
        let long_slot = if slot_used { slot } else { None };
        if !slot_used {
            self.free_slot(slot);
        }
        let send_slot = self.send_free.pop().expect("checked above");
        let at = send_slot * INLINE_SIZE as usize;
        self.pending.insert(started.xid, Pending { buf, long_slot });
        let (send, n) = (&self.msg, started.send_len);
        self.send_mr
            .write(at, &send[..n])
            .ok_or(StoreError::Invalid("call too long"))?;
        self.qp
            .post_send(SEND_WR | send_slot as u64, &self.send_mr, at..at + n)?;
        Ok(started.xid)
    }

    /// Encodes the call into `self.msg` (the Send) and, for a long call, its message into
    /// slot `slot`'s remote-readable memory; the reply chunk of `slot` is offered when
    /// `reply_chunk`. Without a slot, a call that does not fit inline fails with
    /// [`StoreError::Rpc`].
    fn try_start(
        &mut self,
        call: &StorageCall<'_>,
        chunks: &mut CallChunks,
        reply_chunk: bool,
        slot: Option<usize>,
    ) -> Result<rpcrdma::Started, StoreError> {
        let long = slot.and_then(|i| self.long.as_ref().map(|l| (l, i)));
        chunks.reply_chunk = long.filter(|_| reply_chunk).map(|(l, i)| l.reply_chunk(i));
        let long_at = long.map_or(
            Segment {
                handle: 0,
                length: 0,
                offset: 0,
            },
            |(l, i)| l.call_at(i),
        );
        let started = self
            .session
            .start_call_within(&mut self.msg, &mut self.long_msg, call, chunks, long_at)
            .map_err(|e| StoreError::Rpc(e.to_string()))?;
        if let (Some(n), Some((l, _))) = (started.long_message_len, long) {
            l.call_mr
                .write(long_at.offset as usize, &self.long_msg[..n])
                .ok_or(StoreError::Invalid("long call too long"))?;
        }
        Ok(started)
    }

    fn free_slot(&mut self, slot: Option<usize>) {
        if let (Some(i), Some(l)) = (slot, self.long.as_mut()) {
            l.free.push(i);
        }
    }

    /// The pending call `xid` is answered: its long slot is free again.
    fn finish(&mut self, xid: u32) -> Option<Pending> {
        let p = self.pending.remove(&xid)?;
        self.free_slot(p.long_slot);
        Some(p)
    }

    /// Sends the RDMA_DONEs owed for long replies read from read chunks (RPCRDMA-04, -20), as
    /// send slots and credits allow.
    fn flush_dones(&mut self) -> Result<(), StoreError> {
        while let Some(&send_slot) = self.send_free.last() {
            let mut done = [0u8; 16];
            let Some(n) = self.session.poll_done(&mut done) else {
                return Ok(());
            };
            self.send_free.pop();
            let at = send_slot * INLINE_SIZE as usize;
            self.send_mr
                .write(at, &done[..n])
                .ok_or(StoreError::Invalid("DONE too long"))?;
            self.qp
                .post_send(SEND_WR | send_slot as u64, &self.send_mr, at..at + n)?;
        }
        Ok(())
    }

    /// Frees the send slots of completed Sends; a failed Send means the connection is gone.
    fn reap_sends(&mut self) -> Result<(), StoreError> {
        while let Some(c) = self.cq.poll_one() {
            if !c.is_ok() {
                return Err(StoreError::Disconnected);
            }
            if c.wr_id & SEND_WR != 0 {
                self.send_free.push((c.wr_id & !SEND_WR) as usize);
            }
        }
        Ok(())
    }

    /// Waits for one received reply (at most the call timeout) and files its answer in `ready`.
    fn pump(&mut self, sync: SyncDest<'_>) -> Result<(), StoreError> {
        let deadline = Instant::now() + self.timeout;
        let c = loop {
            self.reap_sends()?;
            let now = Instant::now();
            if now >= deadline {
                return Err(StoreError::Timeout);
            }
            // Short waits while every send slot is busy, so they come back promptly.
            let cap = if self.send_free.is_empty() {
                Duration::from_millis(1)
            } else {
                Duration::from_millis(200)
            };
            if let Some(c) = self.rcq.wait((deadline - now).min(cap)) {
                break c;
            }
            if !self.qp.is_connected() {
                return Err(StoreError::Disconnected);
            }
        };
        self.take_receive(c, sync)
    }

    /// Files the answer of received reply `c` in `ready` and reposts its buffer.
    fn take_receive(
        &mut self,
        c: dataplane::Completion,
        sync: SyncDest<'_>,
    ) -> Result<(), StoreError> {
        if c.opcode != Opcode::Recv || !c.is_ok() {
            return Err(StoreError::Disconnected);
        }
        let start = c.wr_id as usize * INLINE_SIZE as usize;
        let len = (c.byte_len as usize).min(INLINE_SIZE as usize);
        self.recv_mr.read(start, &mut self.msg[..len]);
        // The buffer backs a reply receive again at once (C-3).
        self.qp
            .post_recv(c.wr_id, &self.recv_mr, start..start + INLINE_SIZE as usize)?;
        let msg = std::mem::take(&mut self.msg);
        let outcome = self.take_reply(&msg[..len], sync);
        self.msg = msg;
        let Some((xid, result)) = outcome? else {
            return Ok(());
        };
        self.ready.push_back((CallId(xid), result));
        Ok(())
    }
}
