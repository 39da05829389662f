//! DDP (draft-ietf-rddp-ddp-06) and RDMAP (RFC 5040), sans-IO, as two module trees with the queue
//! pair on top:
//!
//! - [`ddp`]: the tagged and untagged headers, the STag table, segmentation, the
//!   segment forms placement works on, the DDP errors.
//! - [`rdmap`]: the RDMAP headers (control and opcodes, Read Request, Terminate), the Terminate
//!   numbers, work requests and completions, and the per-stream engine (placement, in-order
//!   delivery, Read Responses, Terminate).
//! - [`qp`]: the queue pair the transports drive: MPA startup and framing around the engine.
//!
//! The crate root re-exports the types users name (`ddp::Qp`, `ddp::StagTable`, ...), each under
//! its one name.
//!
//! # Wire formats: one scheme
//!
//! Every DDP and RDMAP header is written like [`ddp::tagged`]:
//! - the octets in a doc diagram, the requirement id beside each rule;
//! - `XXX_HEADER_LEN`, its length (the Terminate, whose length varies, has
//!   `TERMINATE_CONTROL_LEN` and `TERMINATE_HEADER_MAX_LEN`), and the field offsets in one
//!   `mod field`;
//! - `XxxPacket<T: AsRef<[u8]>>`, a checked zero-copy view: `new_checked` / `check_len` (after
//!   which no accessor panics), `new_unchecked`, `into_inner`, a getter per field, a setter per
//!   field when `T: AsMut<[u8]>`, and `payload()` where a payload follows;
//! - `XxxRepr`, the fields: `parse(&XxxPacket)` (the layer's header error on malformed input),
//!   `buffer_len()`, and `emit(&mut XxxPacket)`, in place, the payload untouched.
//!
//! | header | view | fields | length |
//! |---|---|---|---|
//! | DDP tagged (-06 §4.2) | [`TaggedPacket`] | [`TaggedRepr`] | [`TAGGED_HEADER_LEN`] |
//! | DDP untagged (-06 §4.3) | [`UntaggedPacket`] | [`UntaggedRepr`] | [`UNTAGGED_HEADER_LEN`] |
//! | DDP, either model (-06 §4.4) | [`DdpPacket`] | [`DdpRepr`] | 14 or 18, by the T bit |
//! | RDMA Read Request (RFC 5040 §4.4) | [`ReadRequestPacket`] | [`ReadRequestRepr`] | [`READ_REQUEST_HEADER_LEN`] |
//! | Terminate (RFC 5040 §4.8) | [`TerminatePacket`] | [`TerminateRepr`] | 4 to 52, by its M/D/R bits |
//!
//! The two one-octet control fields inside the DDP header are values, not views: [`DdpControl`]
//! and [`RdmapControl`], each with `parse(octet)` and `emit() -> octet`. Malformed input is a
//! [`DdpHeaderError`] from DDP's views and an [`RdmapHeaderError`] from RDMAP's.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod be;
pub mod ddp;
pub mod qp;
pub mod rdmap;
#[cfg(test)]
mod test_support;

pub use crate::ddp::control::DdpControl;
pub use crate::ddp::error::DdpError;
pub use crate::ddp::header_error::DdpHeaderError;
pub use crate::ddp::memory::{Memory, RegionHandle, VecMemory};
pub use crate::ddp::region_slots::RegionSlots;
pub use crate::ddp::segment::{DdpPacket, DdpRepr};
pub use crate::ddp::stag::Stag;
pub use crate::ddp::stag_table::{
    Access, PdId, Region, RegionRange, RegionSpec, StagTable, StreamId, TaggedFault,
};
pub use crate::ddp::tagged::{TaggedPacket, TaggedRepr, TAGGED_HEADER_LEN};
pub use crate::ddp::tx_segment::{TxPayload, TxSegment};
pub use crate::ddp::untagged::{UntaggedPacket, UntaggedRepr, UNTAGGED_HEADER_LEN};
pub use crate::qp::{NegotiatedFraming, Qp, QpConfig, QpEvent};
pub use crate::rdmap::completion::{WcOpcode, WcStatus, WorkCompletion};
pub use crate::rdmap::completion_ring::{CompletionRing, KeyedCompletion};
pub use crate::rdmap::control::{RdmapControl, RdmapOpcode};
pub use crate::rdmap::engine::{RdmapConfig, RdmapEngine, RdmapEvent, RdmapState, RdmapStats};
pub use crate::rdmap::header_error::RdmapHeaderError;
pub use crate::rdmap::read_request::{ReadRequestPacket, ReadRequestRepr, READ_REQUEST_HEADER_LEN};
pub use crate::rdmap::term_code::{Layer, LlpError, RdmapError, TermCode};
pub use crate::rdmap::terminate::{TerminatePacket, TerminateRepr, TerminatedDdpHeader};
pub use crate::rdmap::work_request::{
    LocalBuf, RemoteBuf, SendOpts, WorkRequest, WorkRequestError, WorkRequestKind,
};
