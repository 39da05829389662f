//! What the ULP posts: local and remote buffer descriptions and post errors.

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
