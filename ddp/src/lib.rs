//! DDP (draft-ietf-rddp-ddp-06) and RDMAP (RFC 5040), sans-IO, as two module trees with the queue
//! pair on top:
//!
//! - [`ddp`](crate::ddp): the tagged and untagged headers, the STag table, segmentation, the
//!   segment forms placement works on, the DDP errors.
//! - [`rdmap`]: the RDMAP headers (control and opcodes, Read Request, Terminate), the Terminate
//!   numbers, work requests and completions, and the per-stream engine (placement, in-order
//!   delivery, Read Responses, Terminate).
//! - [`qp`]: the queue pair the transports drive: MPA startup and framing around the engine.
//!
//! The crate root re-exports the types users name (`ddp::Qp`, `ddp::StagTable`, ...).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod be;
pub mod ddp;
pub mod qp;
pub mod rdmap;

pub use crate::ddp::error::DdpError;
pub use crate::ddp::header_error::DdpHeaderError;
pub use crate::ddp::memory::{Memory, RegionHandle, VecMemory};
pub use crate::ddp::segment::DdpHeader;
pub use crate::ddp::stag::Stag;
pub use crate::ddp::stag_table::{
    Access, PdId, Region, RegionRange, RegionSpec, StagTable, StreamId, TaggedFault,
};
pub use crate::ddp::tagged::{TaggedPacket, TaggedRepr, TAGGED_HEADER_LEN};
pub use crate::ddp::tx_segment::{TxPayload, TxSegment};
pub use crate::ddp::untagged::{UntaggedPacket, UntaggedRepr, UNTAGGED_HEADER_LEN};
pub use crate::qp::{NegotiatedFraming, Qp, QpConfig, QpEvent};
pub use crate::rdmap::completion::{WcOpcode, WcStatus, WorkCompletion};
pub use crate::rdmap::control::{RdmapControl, RdmapOpcode};
pub use crate::rdmap::engine::{RdmapConfig, RdmapEngine, RdmapEvent, RdmapState, RdmapStats};
pub use crate::rdmap::header_error::RdmapHeaderError;
pub use crate::rdmap::read_request::{ReadRequestPacket, ReadRequestRepr, READ_REQUEST_LEN};
pub use crate::rdmap::term_code::{Layer, LlpError, RdmapError, TermCode};
pub use crate::rdmap::terminate::{CopiedHeader, TerminatePacket, TerminateRepr};
pub use crate::rdmap::work_request::{LocalBuf, RemoteBuf, SendOpts, WorkRequestError};
