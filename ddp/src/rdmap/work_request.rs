//! What the ULP posts: one [`WorkRequest`] type (the caller's id and a [`WorkRequestKind`]
//! with its local and remote buffers), and why a post is refused. Every layer above takes it
//! through one `post` call: [`RdmapEngine::post`](crate::RdmapEngine::post),
//! [`Qp::post`](crate::Qp::post), the endpoint's and the verbs API's.

use crate::ddp::memory::RegionHandle;
use crate::ddp::stag::Stag;
use crate::ddp::stag_table::LocalFault;

/// A local buffer: `len` octets at `offset` (0-based) within a registered region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalBuf {
    /// The region.
    pub region: RegionHandle,
    /// Offset from the region start.
    pub offset: u64,
    /// Length in octets (a DDP message is shorter than 2^32, DDP-42).
    pub len: u32,
}

/// A remote buffer as advertised by the peer: STag and Tagged Offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteBuf {
    /// The peer's STag.
    pub stag: Stag,
    /// The peer's Tagged Offset of the first octet.
    pub to: u64,
}

/// Options of the Send family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SendOpts {
    /// Send with Solicited Event.
    pub solicited: bool,
    /// Send with Invalidate: the peer invalidates this STag before delivering.
    pub invalidate: Option<Stag>,
}

/// What a work request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkRequestKind {
    /// A receive buffer (needs local write), consumed by the next Send in MSN order.
    Recv {
        /// Where the Send's payload goes.
        local: LocalBuf,
    },
    /// A Send of the Send family (with Solicited Event and/or Invalidate per `opts`).
    Send {
        /// The payload.
        local: LocalBuf,
        /// Solicited event, invalidation.
        opts: SendOpts,
    },
    /// An RDMA Write of `local` to the peer's `remote`.
    Write {
        /// The payload.
        local: LocalBuf,
        /// Where it goes at the peer.
        remote: RemoteBuf,
    },
    /// An RDMA Read of `local.len` octets at the peer's `remote` into `local` (needs local
    /// write).
    Read {
        /// The Data Sink.
        local: LocalBuf,
        /// The Data Source at the peer.
        remote: RemoteBuf,
    },
}

/// One work request: the caller's identifier (it comes back in the completion) and what to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkRequest {
    /// The caller's identifier.
    pub wr_id: u64,
    /// What to do.
    pub kind: WorkRequestKind,
}

impl WorkRequest {
    /// Post `local` as a receive buffer.
    pub const fn recv(wr_id: u64, local: LocalBuf) -> Self {
        WorkRequest {
            wr_id,
            kind: WorkRequestKind::Recv { local },
        }
    }

    /// Send `local`.
    pub const fn send(wr_id: u64, local: LocalBuf, opts: SendOpts) -> Self {
        WorkRequest {
            wr_id,
            kind: WorkRequestKind::Send { local, opts },
        }
    }

    /// RDMA Write `local` to the peer's `remote`.
    pub const fn write(wr_id: u64, local: LocalBuf, remote: RemoteBuf) -> Self {
        WorkRequest {
            wr_id,
            kind: WorkRequestKind::Write { local, remote },
        }
    }

    /// RDMA Read `local.len` octets at the peer's `remote` into `local`.
    pub const fn read(wr_id: u64, local: LocalBuf, remote: RemoteBuf) -> Self {
        WorkRequest {
            wr_id,
            kind: WorkRequestKind::Read { local, remote },
        }
    }

    /// The local buffer the request reads or writes.
    pub const fn local(&self) -> LocalBuf {
        match self.kind {
            WorkRequestKind::Recv { local }
            | WorkRequestKind::Send { local, .. }
            | WorkRequestKind::Write { local, .. }
            | WorkRequestKind::Read { local, .. } => local,
        }
    }
}

/// Why a work request was refused at post time (nothing was queued).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkRequestError {
    /// The queue pair is not in a state that accepts work (not yet established, or in error).
    InvalidState,
    /// The local buffer failed the STag table's local check.
    Local(LocalFault),
}

impl core::fmt::Display for WorkRequestError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            WorkRequestError::InvalidState => write!(f, "queue pair not ready"),
            WorkRequestError::Local(l) => write!(f, "local buffer refused: {l:?}"),
        }
    }
}

impl std::error::Error for WorkRequestError {}
