//! DDP (draft-ietf-rddp-ddp-06) and RDMAP (RFC 5040), sans-IO.
//!
//! Layers, bottom up, one file per concept:
//! - wire: [`control`], [`tagged`], [`untagged`], [`segment`] (DDP headers), [`rdmap_control`],
//!   [`read_request`], [`terminate`] (RDMAP headers), [`term_code`] (error numbers), [`wire_error`].
//! - resources: [`stag`], [`stag_table`] (regions, rights, PD/stream association, invalidation),
//!   [`memory`] (the caller's memory behind region handles).
//! - [`segmentation`]: messages into ULPDUs no larger than MULPDU.
//! - [`rdmap_engine`]: the DDP/RDMAP engine of one stream at the ULPDU level (work requests,
//!   placement, in-order delivery, completions, Terminate).
//! - [`qp`]: the queue pair the transports drive: MPA startup and framing around the engine.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod be;
pub mod control;
pub mod memory;
pub mod rdmap_control;
pub mod read_request;
pub mod segment;
pub mod segmentation;
pub mod stag;
pub mod stag_table;
pub mod tagged;
pub mod term_code;
pub mod terminate;
pub mod tx_segment;
pub mod untagged;
pub mod wire_error;

pub use memory::{Memory, RegionHandle, VecMemory};
pub use rdmap_control::{Opcode, RdmapControl};
pub use read_request::{ReadRequestPacket, ReadRequestRepr, READ_REQUEST_LEN};
pub use segment::DdpHeader;
pub use stag::Stag;
pub use stag_table::{
    Access, PdId, Placement, Region, RegionSpec, StagTable, StreamId, TaggedFault,
};
pub use tagged::{TaggedPacket, TaggedRepr, TAGGED_HEADER_LEN};
pub use term_code::{DdpError, Layer, LlpError, RdmapError, TermCode};
pub use terminate::{CopiedHeader, TerminatePacket, TerminateRepr};
pub use tx_segment::{TxPayload, TxSegment};
pub use untagged::{UntaggedPacket, UntaggedRepr, UNTAGGED_HEADER_LEN};
pub use wire_error::WireError;
pub mod completion;
pub mod rdmap_engine;
mod rx_segment;
pub mod work_request;

pub use completion::{Completion, WcOpcode, WcStatus};
pub use rdmap_engine::{EngineConfig, EngineEvent, EngineState, EngineStats, RdmapEngine};
pub use work_request::{LocalBuf, PostError, RemoteBuf, SendOpts};
pub mod qp;
pub use qp::{Negotiated, Qp, QpConfig, QpEvent};
