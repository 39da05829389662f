//! RPC-over-RDMA (draft-ietf-nfsv4-rpcrdma-00, byte-compatible with RFC 8166 for MSG, NOMSG and
//! ERROR): the transport header with its chunk lists in XDR, the chunk rules, credits, the
//! inline/chunk decision, and a minimal ONC RPC codec with the block-storage program.
//!
//! Sans-IO: no sockets, threads or clocks. Requirement ids RPCRDMA-xx are cited at the code
//! and tests that implement them and defined in `REQUIREMENTS.md` at the repository's top.
//!
//! Map: [`xdr`] primitives; [`segment`], [`chunk_list`], [`header`] the transport header
//! ([`Packet`] view, [`HeaderRepr`] parse/emit/buffer_len); [`chunk_rules`] and [`receive`] the
//! validity checks and the RDMA_ERROR answers; [`reduced`] the XDR stream with chunked items;
//! [`credits`] flow control; [`done`] RDMA_DONE; [`planner`] the inline threshold and
//! [`negotiation`] its parameters (CONF_RDMA, RFC 8797 private data); [`rpc`] and [`auth`] ONC RPC;
//! [`storage`] the block program; [`storage_send`] whole Sends of it; [`session`] one
//! connection's state at either end (credits, XIDs, chunks, DONEs, answers to bad requests).
//!
//! # A storage READ through a write chunk, both sides
//!
//! ```
//! use rpcrdma::storage::{ReadArgs, ReadOk, StorageCall, StorageProc, StorageReply};
//! use rpcrdma::storage_send::*;
//! use rpcrdma::*;
//!
//! // Client: plan (1 MiB result -> write chunk), take a credit, advertise the registered
//! // destination, encode the call Send into the send buffer.
//! let shape = CallShape { message_len: 52, bulk_result: 1 << 20, reply_len: 36, ..Default::default() };
//! let plan = ChunkPlanner::default().plan_call(&shape).unwrap();
//! assert_eq!(plan.bulk_result, Placement::Chunk);
//! let mut credits = ClientCredits::new(32);
//! credits.try_start_call().unwrap();
//! let dest = Segment { handle: 0x42, length: 1 << 20, offset: 0x7000_0000 };
//! let chunks = CallChunks { read_result: Some(WriteChunk::new(vec![dest])), ..Default::default() };
//! let read = StorageCall::Read(ReadArgs { offset: 0, count: 1 << 20 });
//! let mut send = [0u8; 1024];
//! let n = encode_call(&mut send, credits.requested(), &call_header(7, StorageProc::Read), &read, &chunks).unwrap();
//!
//! // Server: check the header (bad ones get their RDMA_ERROR here), decode the call.
//! let mut server = ServerCredits::new(32);
//! server.on_call().unwrap();
//! let ServerInbound::Call { header, message } = receive_at_server(&send[..n], &Rules::default(), 1) else {
//!     unreachable!()
//! };
//! let call = decode_call_message(&header, message).unwrap();
//! assert_eq!(call.call, read);
//! let call_chunks = header.body.chunks().unwrap();
//! // ... RDMA Write the data into call_chunks.writes[0] (before the reply, W-4) ...
//! let grant = server.grant_for_reply(header.credit, false);
//! let reply = StorageReply::Read(Ok(ReadOk { eof: false, data: Payload::WriteChunk { index: 0, len: 1 << 20 } }));
//! let mut out = [0u8; 1024];
//! let m = encode_reply(&mut out, grant, call_chunks, &ReplyHeader::success(call.rpc.xid), Some(&reply)).unwrap();
//!
//! // Client: the echoed write chunk says how much landed.
//! let ClientInbound::Reply { header: rh, message } = receive_at_client(&out[..m], &Rules::default()) else {
//!     unreachable!()
//! };
//! credits.on_reply(rh.credit);
//! let d = decode_reply_message(&rh, message, &chunks.as_lists(), StorageProc::Read).unwrap();
//! assert_eq!(d.reply, Some(reply));
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod auth;
pub mod chunk_list;
pub mod chunk_rules;
pub mod credits;
pub mod done;
pub mod error;
pub mod header;
pub mod negotiation;
pub mod planner;
pub mod receive;
pub mod reduced;
pub mod rpc;
pub mod segment;
pub mod session;
pub mod storage;
pub mod storage_send;
pub mod xdr;

pub use chunk_list::{ChunkLists, Limits, ReadChunk};
pub use chunk_rules::{check_echo, Direction, Rules};
pub use credits::{ClientCredits, NoCredit, Overrun, ServerCredits};
pub use done::{done_for_reply, DoneTracker};
pub use error::{ErrorResponse, HeaderError};
pub use header::{Body, ErrorBody, HeaderRepr, Packet, Proc, VERSION};
pub use planner::{CallForm, CallPlan, CallShape, ChunkPlanner, Placement, PlanError, ReplyForm};
pub use receive::{receive_at_client, receive_at_server, refusal, ClientInbound, ServerInbound};
pub use reduced::{Padding, Payload, ReducedReader, ReducedWriter};
pub use rpc::{AcceptStat, CallHeader, RejectStat, ReplyHeader, ReplyStat, RpcError};
pub use segment::{ReadSegment, Segment, WriteChunk};
pub use session::{
    ClientEvent, ClientSession, LongReply, LongReplyError, ReplyOut, ServerEvent, ServerSession,
    ServerStats, StartError, Started,
};
pub use xdr::{XdrError, XdrReader, XdrWriter};
