//! RPC-over-RDMA (draft-callaghan-rpcrdma-00, byte-compatible with RFC 8166 for MSG, NOMSG and
//! ERROR): the transport header with its chunk lists in XDR, the chunk rules, credits, the
//! inline/chunk decision, and a minimal ONC RPC codec with the block-storage program.
//!
//! Sans-IO: no sockets, threads or clocks. Digest: `specs/spec-rpcrdma.md`; requirement ids
//! RPCRDMA-xx are cited at the code and tests that implement them.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod auth;
pub mod chunk_list;
pub mod chunk_rules;
pub mod credits;
pub mod error;
pub mod header;
pub mod planner;
pub mod receive;
pub mod reduced;
pub mod rpc;
pub mod segment;
pub mod storage;
pub mod storage_send;
pub mod xdr;

pub use chunk_list::{ChunkLists, Limits, ReadChunk};
pub use chunk_rules::{check_echo, Direction, Rules};
pub use credits::{ClientCredits, NoCredit, Overrun, ServerCredits};
pub use error::{ErrorResponse, HeaderError};
pub use header::{Body, ErrorBody, HeaderRepr, Packet, Proc, VERSION};
pub use planner::{CallForm, CallPlan, CallShape, ChunkPlanner, Placement, PlanError, ReplyForm};
pub use receive::{receive_at_client, receive_at_server, refusal, ClientInbound, ServerInbound};
pub use reduced::{Padding, Payload, ReducedReader, ReducedWriter};
pub use rpc::{AcceptStat, CallHeader, RejectStat, ReplyHeader, ReplyStat, RpcError};
pub use segment::{ReadSegment, Segment, WriteChunk};
pub use xdr::{XdrError, XdrReader, XdrWriter};
