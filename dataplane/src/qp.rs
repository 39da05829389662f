//! Queue pairs: the application's handle on one connected RDMAP stream.
//!
//! Work requests go to the transport's connection driver through a queue and a wake-up; finished
//! requests come back as [`Completion`]s on the queue pair's completion queues.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::pd::{Access, Region};
use crate::{CompletionQueue, MemoryRegion, PostError, ProtectionDomain};

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
    #[error("sent Terminate layer {layer} type {etype} code {code:#04x}")]
    TerminateSent { layer: u8, etype: u8, code: u8 },
    /// The peer sent a Terminate with this layer/type/code.
    #[error("received Terminate layer {layer} type {etype} code {code:#04x}")]
    TerminateReceived { layer: u8, etype: u8, code: u8 },
    /// MPA framing failed (CRC, marker or length error) and the connection was closed.
    #[error("MPA framing error (code {0})")]
    Framing(u8),
}

/// A work request as the connection driver sees it.
#[derive(Debug, Clone)]
pub(crate) enum WorkRequest {
    Send { wr_id: u64, region: Arc<Region>, range: Range<usize>, solicited: bool, invalidate: Option<u32> },
    Recv { wr_id: u64, region: Arc<Region>, range: Range<usize> },
    Write { wr_id: u64, region: Arc<Region>, range: Range<usize>, remote: RemoteAddr },
    Read { wr_id: u64, region: Arc<Region>, range: Range<usize>, remote: RemoteAddr },
}

/// State shared by a queue pair handle and its connection driver.
#[derive(Debug)]
pub(crate) struct QpShared {
    pub(crate) num: u32,
    pub(crate) pending: Mutex<VecDeque<WorkRequest>>,
    pub(crate) waker: crate::kernel::Waker,
    pub(crate) close_requested: AtomicBool,
    pub(crate) finished: AtomicBool,
    pub(crate) error: Mutex<Option<QpError>>,
    pub(crate) send_cq: CompletionQueue,
    pub(crate) recv_cq: CompletionQueue,
}

static NEXT_QP: AtomicU32 = AtomicU32::new(1);

impl QpShared {
    pub(crate) fn new(send_cq: CompletionQueue, recv_cq: CompletionQueue) -> std::io::Result<Self> {
        Ok(Self {
            num: NEXT_QP.fetch_add(1, Ordering::Relaxed),
            pending: Mutex::default(),
            waker: crate::kernel::Waker::new()?,
            close_requested: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            error: Mutex::new(None),
            send_cq,
            recv_cq,
        })
    }

    pub(crate) fn set_error(&self, e: QpError) {
        let mut g = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if g.is_none() {
            *g = Some(e);
        }
    }
}

/// A connected queue pair. Dropping it closes the connection gracefully.
#[derive(Debug)]
pub struct QueuePair {
    pub(crate) shared: Arc<QpShared>,
    pub(crate) pd: ProtectionDomain,
    pub(crate) driver: Option<JoinHandle<()>>,
    pub(crate) peer_private_data: Vec<u8>,
}

fn check_local(
    pd: &ProtectionDomain,
    mr: &MemoryRegion,
    range: &Range<usize>,
    need: Access,
) -> Result<(), PostError> {
    if mr.region.pd_id != pd.inner.id {
        return Err(PostError::ForeignRegion);
    }
    if range.start > range.end || range.end > mr.len() {
        return Err(PostError::LocalBounds);
    }
    if u32::try_from(range.end - range.start).is_err() {
        return Err(PostError::TooLong);
    }
    if !mr.access().contains(need) {
        return Err(PostError::LocalAccess);
    }
    Ok(())
}

impl QueuePair {
    /// The queue pair's number (unique in this process).
    pub fn num(&self) -> u32 {
        self.shared.num
    }

    /// The private data the peer sent in its MPA Request or Reply.
    pub fn peer_private_data(&self) -> &[u8] {
        &self.peer_private_data
    }

    /// Why the queue pair failed, if it did.
    pub fn error(&self) -> Option<QpError> {
        *self.shared.error.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True while the connection is usable.
    pub fn is_connected(&self) -> bool {
        !self.shared.finished.load(Ordering::Acquire)
            && !self.shared.close_requested.load(Ordering::Acquire)
    }

    fn post(&self, wr: WorkRequest) -> Result<(), PostError> {
        if !self.is_connected() {
            return Err(PostError::NotConnected);
        }
        {
            let mut q = self.shared.pending.lock().unwrap_or_else(|p| p.into_inner());
            q.push_back(wr);
        }
        self.shared.waker.wake();
        Ok(())
    }

    /// Sends `mr[range]` as one RDMAP Send into the peer's next posted receive buffer.
    pub fn post_send(&self, wr_id: u64, mr: &MemoryRegion, range: Range<usize>) -> Result<(), PostError> {
        check_local(&self.pd, mr, &range, Access::LOCAL_READ)?;
        self.post(WorkRequest::Send { wr_id, region: mr.region.clone(), range, solicited: false, invalidate: None })
    }

    /// Send with the solicited-event flag and/or a remote STag to invalidate.
    pub fn post_send_with(
        &self,
        wr_id: u64,
        mr: &MemoryRegion,
        range: Range<usize>,
        solicited: bool,
        invalidate: Option<u32>,
    ) -> Result<(), PostError> {
        check_local(&self.pd, mr, &range, Access::LOCAL_READ)?;
        self.post(WorkRequest::Send { wr_id, region: mr.region.clone(), range, solicited, invalidate })
    }

    /// Posts `mr[range]` as a receive buffer for one incoming Send.
    pub fn post_recv(&self, wr_id: u64, mr: &MemoryRegion, range: Range<usize>) -> Result<(), PostError> {
        check_local(&self.pd, mr, &range, Access::LOCAL_WRITE)?;
        self.post(WorkRequest::Recv { wr_id, region: mr.region.clone(), range })
    }

    /// RDMA Writes `mr[range]` to the peer's buffer at `remote`.
    pub fn post_write(
        &self,
        wr_id: u64,
        mr: &MemoryRegion,
        range: Range<usize>,
        remote: RemoteAddr,
    ) -> Result<(), PostError> {
        check_local(&self.pd, mr, &range, Access::LOCAL_READ)?;
        self.post(WorkRequest::Write { wr_id, region: mr.region.clone(), range, remote })
    }

    /// RDMA Reads `range.len()` bytes from the peer's buffer at `remote` into `mr[range]`.
    pub fn post_read(
        &self,
        wr_id: u64,
        mr: &MemoryRegion,
        range: Range<usize>,
        remote: RemoteAddr,
    ) -> Result<(), PostError> {
        check_local(&self.pd, mr, &range, Access::LOCAL_WRITE)?;
        self.post(WorkRequest::Read { wr_id, region: mr.region.clone(), range, remote })
    }

    /// Closes the connection gracefully: sends what is queued, then FIN; outstanding receives
    /// complete as flushed. Returns once the connection driver has stopped.
    pub fn close(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.shared.close_requested.store(true, Ordering::Release);
        self.shared.waker.wake();
        if let Some(h) = self.driver.take() {
            let _ = h.join();
        }
    }
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        self.shutdown();
    }
}
