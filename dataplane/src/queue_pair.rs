//! Queue pairs: the application's handle on one connected RDMAP stream.
//!
//! The protocol state (ddp's sans-IO [`ddp::Qp`]) sits behind a mutex shared by the handle and
//! the connection driver: the application posts work requests directly (errors come back at
//! once), the driver moves bytes and turns ddp's completions into [`Completion`]s on the queue
//! pair's completion queues.

use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use ddp::{LocalBuf, RemoteBuf, SendOpts, Stag, WorkRequest};
use smallvec::SmallVec;

use crate::kernel::{InlineConn, InlineHandle, Waker};
use crate::pd::PdInner;
use crate::sgl::{Sge, WorkRequest as Wr};
use crate::sync::{AtomicBool, Mutex, MutexGuard};
use crate::work::WorkTracker;
use crate::xdp_device::XdpQp;
use crate::{
    Completion, CompletionQueue, MemoryRegion, Opcode, PostError, ProtectionDomain, Status,
};

/// Where a remote buffer is: the peer's STag and the tagged offset (TO) inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemoteAddr {
    /// The peer's STag.
    pub stag: u32,
    /// Tagged offset within the peer's region.
    pub to: u64,
}

/// Why a queue pair stopped working.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QpError {
    /// The peer closed TCP (MPA error 1).
    #[error("the peer closed the connection")]
    PeerClosed,
    /// A socket error (the `io::ErrorKind`).
    #[error("socket error: {0:?}")]
    Io(std::io::ErrorKind),
    /// We detected a protocol error and sent a Terminate with this layer/type/code.
    #[error("sent Terminate layer {layer} type {etype:#x} code {code:#04x}")]
    TerminateSent {
        /// 0 RDMAP, 1 DDP, 2 LLP (MPA).
        layer: u8,
        /// Error type.
        etype: u8,
        /// Error code.
        code: u8,
    },
    /// The peer sent a Terminate with this layer/type/code (malformed ones read as 0xff/0xff/0xff).
    #[error("received Terminate layer {layer} type {etype:#x} code {code:#04x}")]
    TerminateReceived {
        /// 0 RDMAP, 1 DDP, 2 LLP (MPA).
        layer: u8,
        /// Error type.
        etype: u8,
        /// Error code.
        code: u8,
    },
    /// MPA framing failed (CRC 2, marker 3); a Terminate was queued, then the connection closed.
    #[error("MPA framing error (code {0})")]
    Framing(u8),
    /// A completion queue of the queue pair overran (completions were lost), so the queue
    /// pair was closed, as verbs moves it to the error state.
    #[error("a completion queue of this queue pair overran: poll it more often or create it larger (Device::create_cq_with)")]
    CqOverrun,
}

pub(crate) fn map_completion(c: ddp::WorkCompletion, qp_num: u32) -> Completion {
    Completion {
        wr_id: c.wr_id,
        opcode: match c.opcode {
            ddp::WcOpcode::Send => Opcode::Send,
            ddp::WcOpcode::Write => Opcode::Write,
            ddp::WcOpcode::Read => Opcode::Read,
            ddp::WcOpcode::Recv => Opcode::Recv,
        },
        status: match c.status {
            ddp::WcStatus::Success => Status::Success,
            ddp::WcStatus::Flushed => Status::Flushed,
        },
        byte_len: c.byte_len,
        qp_num,
        solicited: c.solicited,
        invalidated: c.invalidated.map(|s| s.0),
    }
}

/// How MPA ended for a new queue pair: the peer's private data and what was negotiated.
#[derive(Debug, Clone)]
pub(crate) struct Established {
    pub(crate) peer_private_data: Vec<u8>,
    pub(crate) negotiated: ddp::NegotiatedFraming,
}

/// State shared by a queue pair handle and its connection driver. Posts check the flags
/// first and ddp's state under the lock (ddp refuses work once shut down or failed), so a
/// post racing a close or a failure is either refused or completes (flushed at the latest);
/// completions reach the completion queues under the lock ([`QpShared::locked`]). The loom
/// model `loom_models::queue_pair` checks both.
#[derive(Debug)]
pub(crate) struct QpShared {
    pub(crate) num: u32,
    pub(crate) qp: Mutex<ddp::Qp>,
    pub(crate) pd: ProtectionDomain,
    pub(crate) waker: Waker,
    pub(crate) close_requested: AtomicBool,
    finished: AtomicBool,
    error: Mutex<Option<QpError>>,
    pub(crate) send_cq: CompletionQueue,
    pub(crate) recv_cq: CompletionQueue,
    /// The requests in flight.
    pub(crate) work: WorkTracker,
    /// Inline devices: the connection the application's calls step (no driver thread).
    inline: OnceLock<InlineHandle>,
}

static NEXT_QP: AtomicU32 = AtomicU32::new(1);

pub(crate) fn next_qp_num() -> u32 {
    NEXT_QP.fetch_add(1, Ordering::Relaxed)
}

impl QpShared {
    pub(crate) fn new(
        num: u32,
        qp: ddp::Qp,
        pd: ProtectionDomain,
        send_cq: CompletionQueue,
        recv_cq: CompletionQueue,
    ) -> std::io::Result<Self> {
        Ok(Self {
            num,
            qp: Mutex::new(qp),
            work: WorkTracker::new(pd.clone()),
            pd,
            waker: Waker::new()?,
            close_requested: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            error: Mutex::new(None),
            send_cq,
            recv_cq,
            inline: OnceLock::new(),
        })
    }

    /// Marks the queue pair as run inline by `conn`.
    pub(crate) fn set_inline(&self, conn: InlineHandle) {
        let _ = self.inline.set(conn);
    }

    /// The inline connection, if the queue pair runs inline and is not done.
    fn inline_conn(&self) -> Option<Arc<InlineConn>> {
        self.inline.get()?.upgrade()
    }

    /// The doorbell: an inline connection frames and writes at once, a driver thread wakes.
    pub(crate) fn ring(&self) {
        match self.inline_conn() {
            Some(c) => c.transmit(),
            None if self.inline.get().is_some() => {}
            None => self.waker.wake(),
        }
    }

    pub(crate) fn lock_qp(&self) -> MutexGuard<'_, ddp::Qp> {
        self.qp.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn pd(&self) -> &PdInner {
        &self.pd.inner
    }

    /// Posts `wrs` on the shared queue pair in order, under one lock, and wakes the driver
    /// once (the doorbell). Returns the refusal that stopped it and at which request.
    fn post_chain(&self, wrs: &[WorkRequest]) -> Result<(), (usize, PostError)> {
        if self.close_requested.load(Ordering::Acquire) || self.is_finished() {
            return Err((0, PostError::NotConnected));
        }
        let r = {
            let mut qp = self.lock_qp();
            let st = self.pd().lock();
            wrs.iter()
                .enumerate()
                .try_for_each(|(i, wr)| qp.post(&st.tags, *wr).map_err(|e| (i, refused(e))))
        };
        self.ring();
        r
    }

    /// Runs `f` on the queue pair under its lock, then hands every completion ddp holds to
    /// the completion queues before the lock is released: completions of one work queue reach
    /// their CQ in ddp's order (posting order) whichever thread polls them, the application's
    /// close or the driver's round.
    pub(crate) fn locked<R>(&self, f: impl FnOnce(&mut ddp::Qp) -> R) -> R {
        let mut qp = self.lock_qp();
        let r = f(&mut qp);
        #[cfg(not(loom_broken = "qp_deliver_after_unlock"))]
        while let Some(c) = qp.poll_completion() {
            self.deliver(c);
        }
        // The model's broken variant: delivered after the lock is released, where two threads
        // can hand one queue's completions over in the wrong order.
        #[cfg(loom_broken = "qp_deliver_after_unlock")]
        {
            let done: Vec<_> = std::iter::from_fn(|| qp.poll_completion()).collect();
            drop(qp);
            done.into_iter().for_each(|c| self.deliver(c));
        }
        r
    }

    /// The application closes: posts are refused from now on, posted receives and Reads
    /// complete flushed at once, and the driver starts the close in its next round.
    pub(crate) fn request_close(&self) {
        self.close_requested.store(true, Ordering::Release);
        self.locked(|qp| qp.shutdown());
        self.ring();
    }

    /// Why the queue pair failed, if it did.
    pub(crate) fn error(&self) -> Option<QpError> {
        *self.error.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn set_error(&self, e: QpError) {
        let mut g = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if g.is_none() {
            *g = Some(e);
        }
    }

    /// Hands ddp's completion `c` to the completion queue (held back for a successful
    /// unsignaled request). Takes the domain's lock: call without holding it.
    pub(crate) fn deliver(&self, c: ddp::WorkCompletion) {
        let Some(c) = self.work.complete(c) else {
            return;
        };
        let c = map_completion(c, self.num);
        let cq = if c.opcode == Opcode::Recv {
            &self.recv_cq
        } else {
            &self.send_cq
        };
        if cq.inner.push(c).is_err() {
            // The driver sees the request and closes; ddp flushes what is left.
            self.set_error(QpError::CqOverrun);
            self.close_requested.store(true, Ordering::Release);
            self.waker.wake();
        }
    }

    pub(crate) fn set_finished(&self) {
        self.finished.store(true, Ordering::Release);
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }
}

/// A connected queue pair. Dropping it closes the connection gracefully.
#[derive(Debug)]
pub struct QueuePair {
    pub(crate) kind: QpKind,
    pub(crate) peer_private_data: Vec<u8>,
    pub(crate) negotiated: ddp::NegotiatedFraming,
    /// A handle whose connection moved to another handle (drop does not close it).
    pub(crate) detached: bool,
}

/// Which transport runs the queue pair.
#[derive(Debug)]
pub(crate) enum QpKind {
    /// A driver thread over a kernel TCP socket; the protocol state is shared.
    Kernel(Arc<QpShared>),
    /// A connection of the AF_XDP engine.
    Xdp(XdpQp),
}

/// What a work request of [`QueuePair::post`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostKind {
    /// An RDMAP Send of the range into the peer's next posted receive buffer.
    Send {
        /// Send with Solicited Event.
        solicited: bool,
        /// Send with Invalidate: the peer invalidates this (its own) STag before delivering.
        invalidate: Option<u32>,
    },
    /// The range as a receive buffer for one incoming Send.
    Recv,
    /// An RDMA Write of the range to the peer's buffer at this address.
    Write(RemoteAddr),
    /// An RDMA Read of `range.len()` bytes from the peer's buffer at this address into the range.
    Read(RemoteAddr),
}

fn remote_buf(r: RemoteAddr) -> RemoteBuf {
    RemoteBuf {
        stag: Stag(r.stag),
        to: r.to,
    }
}

/// A refusal of ddp's as the verbs API reports it.
pub(crate) fn refused(e: ddp::WorkRequestError) -> PostError {
    match e {
        ddp::WorkRequestError::InvalidState => PostError::NotConnected,
        other => PostError::Refused(other),
    }
}

/// ddp's request for `kind` on `local`, carrying our id.
fn ddp_request(id: u64, local: LocalBuf, kind: PostKind) -> WorkRequest {
    match kind {
        PostKind::Recv => WorkRequest::recv(id, local),
        PostKind::Send {
            solicited,
            invalidate,
        } => {
            let opts = SendOpts {
                solicited,
                invalidate: invalidate.map(Stag),
            };
            WorkRequest::send(id, local, opts)
        }
        PostKind::Write(r) => WorkRequest::write(id, local, remote_buf(r)),
        PostKind::Read(r) => WorkRequest::read(id, local, remote_buf(r)),
    }
}

/// A chain of work requests was refused; nothing of it was queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("work request {index} of the chain: {error}; nothing of the chain was posted")]
pub struct PostListError {
    /// Which request (0-based) was refused.
    pub index: usize,
    /// Why.
    pub error: PostError,
}

impl QueuePair {
    /// A kernel-transport queue pair.
    pub(crate) fn kernel(shared: Arc<QpShared>, up: Established) -> Self {
        QueuePair {
            kind: QpKind::Kernel(shared),
            peer_private_data: up.peer_private_data,
            negotiated: up.negotiated,
            detached: false,
        }
    }

    /// An AF_XDP queue pair.
    pub(crate) fn xdp(qp: XdpQp, up: Established) -> Self {
        QueuePair {
            kind: QpKind::Xdp(qp),
            peer_private_data: up.peer_private_data,
            negotiated: up.negotiated,
            detached: false,
        }
    }

    /// The queue pair's number (unique in this process).
    pub fn num(&self) -> u32 {
        match &self.kind {
            QpKind::Kernel(s) => s.num,
            QpKind::Xdp(x) => x.link.num,
        }
    }

    /// The private data the peer sent in its MPA Request or Reply (its own: a Rev 2 frame's
    /// IRD/ORD octets are not part of it).
    pub fn peer_private_data(&self) -> &[u8] {
        &self.peer_private_data
    }

    /// What MPA negotiated: markers and CRC per direction, the revision, and the IRD/ORD in
    /// force (RFC 6581 §5: the ORD never above the peer's IRD; with Rev 1, the configured
    /// ones), and the peer-to-peer RTR message if any.
    pub fn negotiated(&self) -> ddp::NegotiatedFraming {
        self.negotiated
    }

    /// Why the queue pair failed, if it did.
    pub fn error(&self) -> Option<QpError> {
        match &self.kind {
            QpKind::Kernel(s) => s.error(),
            QpKind::Xdp(x) => x.error(),
        }
    }

    /// The peer closed its sending side (TCP FIN) after everything before it was delivered:
    /// the queue pair is half-closed (DDP -06 §6.2.1, DDP-69). Its receives and RDMA Reads
    /// (posted then or later) complete flushed; Sends and Writes still go out and complete,
    /// and the peer's Read Requests delivered before still get their Responses.
    /// [`close`](Self::close) when done sends our FIN (DDP-70).
    pub fn is_peer_closed(&self) -> bool {
        match &self.kind {
            QpKind::Kernel(s) => s.lock_qp().is_peer_closed(),
            QpKind::Xdp(x) => x.link.status().peer_closed,
        }
    }

    /// True while both directions are open: false once the queue pair failed, the application
    /// closed it, or the peer closed its side ([`is_peer_closed`](Self::is_peer_closed): Sends
    /// and Writes still go out then).
    pub fn is_connected(&self) -> bool {
        match &self.kind {
            QpKind::Kernel(s) => {
                !s.is_finished() && !s.close_requested.load(Ordering::Acquire) && {
                    let q = s.lock_qp();
                    !q.is_error() && !q.is_peer_closed()
                }
            }
            QpKind::Xdp(x) => x.is_connected(),
        }
    }

    /// Posts one work request on `mr[range]` (a region of this queue pair's protection
    /// domain): checked at once (range, domain, rights, state) and refused with nothing queued
    /// otherwise. Its completion comes on the send queue's CQ (or the receive queue's, for
    /// `Recv`) with `wr_id`. The `post_*` methods are shorthands for it; [`Self::post_list`]
    /// takes scatter-gather lists, unsignaled requests and chains.
    pub fn post(
        &self,
        wr_id: u64,
        mr: &MemoryRegion,
        range: Range<usize>,
        kind: PostKind,
    ) -> Result<(), PostError> {
        if range.start > range.end {
            return Err(PostError::LocalBounds);
        }
        let sge = [Sge::new(mr, range)];
        self.post_list(&[Wr::new(wr_id, kind, &sge)])
            .map_err(|e| e.error)
    }

    /// Posts a chain of work requests at once (verbs' linked `ibv_post_send` list): all of
    /// them are checked first (domain, bounds, rights, list length, total length, state) and
    /// none is queued when one fails ([`PostListError::index`] says which); then they are
    /// queued in order under one lock, with one wake-up of the transport (the doorbell).
    /// Each request's scatter-gather list ([`Sge`]) is one message.
    pub fn post_list(&self, wrs: &[Wr<'_>]) -> Result<(), PostListError> {
        let at = |index| move |error| PostListError { index, error };
        let (pd, work) = match &self.kind {
            QpKind::Kernel(s) => (&s.pd, &s.work),
            QpKind::Xdp(x) => (&x.pd, &x.link.work),
        };
        let lens = wrs
            .iter()
            .enumerate()
            .map(|(i, wr)| wr.check(pd).map_err(at(i)))
            .collect::<Result<SmallVec<[u32; 4]>, _>>()?;
        // The local buffers: a one-element list's is its region, taken without a lock; a
        // longer list gets a gather region, registered under the domain's lock (which the
        // engine also takes per frame: only lists pay for it).
        let mut locals = SmallVec::<[LocalBuf; 4]>::new();
        if wrs.iter().all(|wr| wr.sgl.len() == 1) {
            locals.extend(wrs.iter().zip(&lens).map(|(wr, &len)| wr.single_buf(len)));
        } else {
            let mut st = pd.inner.lock();
            for (i, (wr, &len)) in wrs.iter().zip(&lens).enumerate() {
                match wr.local_buf(&mut st, pd, len) {
                    Ok(l) => locals.push(l),
                    Err(e) => {
                        for l in &locals {
                            crate::sgl::release(&mut st, l.region);
                        }
                        return Err(at(i)(e));
                    }
                }
            }
        }
        let mut ids = SmallVec::<[u64; 4]>::new();
        let ddp_wrs = wrs
            .iter()
            .zip(&locals)
            .map(|(wr, &local)| {
                let gather = (wr.sgl.len() > 1).then_some(local.region);
                let recv = wr.kind == PostKind::Recv;
                let id = work.start(wr.wr_id, recv, wr.reports_success(), gather);
                ids.push(id);
                ddp_request(id, local, wr.kind)
            })
            .collect::<SmallVec<[WorkRequest; 4]>>();
        let posted = match &self.kind {
            QpKind::Kernel(s) => s.post_chain(&ddp_wrs),
            QpKind::Xdp(x) => x.post_chain(&ddp_wrs),
        };
        posted.map_err(|(i, e)| {
            // Only the state can refuse here (checked above): the first request then.
            work.cancel(ids[i..].iter().copied());
            at(i)(e)
        })
    }

    /// Sends `mr[range]` as one RDMAP Send into the peer's next posted receive buffer.
    pub fn post_send(
        &self,
        wr_id: u64,
        mr: &MemoryRegion,
        range: Range<usize>,
    ) -> Result<(), PostError> {
        self.post_send_with(wr_id, mr, range, false, None)
    }

    /// A Send with the solicited-event flag and/or a remote STag for the peer to invalidate.
    pub fn post_send_with(
        &self,
        wr_id: u64,
        mr: &MemoryRegion,
        range: Range<usize>,
        solicited: bool,
        invalidate: Option<u32>,
    ) -> Result<(), PostError> {
        let kind = PostKind::Send {
            solicited,
            invalidate,
        };
        self.post(wr_id, mr, range, kind)
    }

    /// Posts `mr[range]` as a receive buffer for one incoming Send.
    pub fn post_recv(
        &self,
        wr_id: u64,
        mr: &MemoryRegion,
        range: Range<usize>,
    ) -> Result<(), PostError> {
        self.post(wr_id, mr, range, PostKind::Recv)
    }

    /// RDMA Writes `mr[range]` to the peer's buffer at `remote`.
    pub fn post_write(
        &self,
        wr_id: u64,
        mr: &MemoryRegion,
        range: Range<usize>,
        remote: RemoteAddr,
    ) -> Result<(), PostError> {
        self.post(wr_id, mr, range, PostKind::Write(remote))
    }

    /// RDMA Reads `range.len()` bytes from the peer's buffer at `remote` into `mr[range]`.
    pub fn post_read(
        &self,
        wr_id: u64,
        mr: &MemoryRegion,
        range: Range<usize>,
        remote: RemoteAddr,
    ) -> Result<(), PostError> {
        self.post(wr_id, mr, range, PostKind::Read(remote))
    }

    /// Closes the queue pair; dropping it does the same. Returns at once: posted receives and
    /// RDMA Reads complete flushed on their completion queues now, and nothing the peer sends
    /// from now on reaches memory (counted in [`crate::CounterSnapshot::rx_after_close`]).
    /// Posted Sends and Writes still go out and complete; then the transport closes TCP (FIN),
    /// and resets it (RST, the rest flushed) if that has not finished within
    /// [`crate::ConnectionConfig::close_timeout`].
    pub fn close(self) {
        drop(self)
    }

    fn shutdown(&mut self) {
        match &self.kind {
            QpKind::Kernel(s) => s.request_close(),
            QpKind::Xdp(x) => x.close(),
        }
    }
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        if !self.detached {
            self.shutdown();
        }
    }
}
