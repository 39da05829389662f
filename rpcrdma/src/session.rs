//! One connection's RPC-over-RDMA state for the storage program, both ends, sans-IO: credits,
//! XIDs and the chunks each call advertised, RDMA_DONE bookkeeping, and the answers to bad
//! requests. Bytes in: `handle_receive` with each received Send. Bytes out: the `encode_*`
//! calls, `poll_transmit` (server answers it generated itself) and `poll_done` (client DONEs).
//!
//! RDMA itself (registering memory, Reads of read chunks, Writes into write chunks) stays with
//! the caller; the events say what to move and where.

use crate::chunk_list::ChunkLists;
use crate::chunk_rules::Rules;
use crate::credits::{ClientCredits, NoCredit, ServerCredits};
use crate::done::{done_for_reply, DoneTracker};
use crate::error::HeaderError;
use crate::header::{Body, ErrorBody, HeaderRepr, Packet};
use crate::planner::{CallPlan, ChunkPlanner, PlanError};
use crate::receive::{receive_at_client, receive_at_server, ClientInbound, ServerInbound};
use crate::rpc::{AcceptStat, ReplyHeader};
use crate::segment::Segment;
use crate::storage::{StorageCall, StorageProc, StorageReply};
use crate::storage_send::{
    call_header, call_shape, decode_call_message, decode_reply_message, echo_writes, encode_call,
    encode_long_call, encode_reply, encode_reply_message, reply_chunk_header,
    reply_read_chunk_header, CallChunks, CallRejection, DecodedCall, DecodedReply,
};
use crate::xdr::XdrError;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};
use thiserror::Error;

/// Why a call could not be started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum StartError {
    /// Every granted credit is in use (RPCRDMA-07): wait for a reply.
    #[error(transparent)]
    NoCredit(#[from] NoCredit),
    /// The call could not be encoded (buffer too short, chunk/data mismatch).
    #[error("cannot encode the call: {0}")]
    Encode(#[from] HeaderError),
}

struct Pending {
    proc: StorageProc,
    chunks: ChunkLists,
}

/// What a client makes of one received Send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientEvent<'a> {
    /// Call `xid` is answered. READ data in a write chunk has been placed by then (Write before
    /// Send, RPCRDMA-03).
    Reply {
        /// The call.
        xid: u32,
        /// The reply's transport header (echoed chunks, grant).
        header: HeaderRepr,
        /// RPC header and results.
        reply: DecodedReply<'a>,
    },
    /// Call `xid` is answered by an RDMA_NOMSG: the reply is in the call's reply chunk (length:
    /// the echoed reply chunk) or must be RDMA-Read from the position-0 read chunk. Fetch it,
    /// then call [`ClientSession::decode_long_reply`].
    LongReply {
        /// The call.
        xid: u32,
        /// The NOMSG header.
        header: HeaderRepr,
    },
    /// The server refused call `xid` with RDMA_ERROR.
    Refused {
        /// The call.
        xid: u32,
        /// ERR_VERS with the server's range, or ERR_CHUNK.
        body: ErrorBody,
    },
    /// The answer to call `xid` was unusable; the call failed with a transport error.
    Failed {
        /// The call.
        xid: u32,
        /// What was wrong.
        error: HeaderError,
    },
    /// A Send matching no outstanding call, or too broken to tell; dropped.
    Dropped {
        /// What was wrong (`None`: unknown XID).
        error: Option<HeaderError>,
    },
}

/// A call put on the wire by [`ClientSession::start_call_within`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Started {
    /// The call's XID.
    pub xid: u32,
    /// Bytes of the Send.
    pub send_len: usize,
    /// A long call: bytes of the message in `message_buf` (the position-0 read chunk).
    pub long_message_len: Option<usize>,
}

/// The client end of one connection.
pub struct ClientSession {
    credits: ClientCredits,
    planner: ChunkPlanner,
    rules: Rules,
    next_xid: u32,
    pending: HashMap<u32, Pending>,
    owed_dones: VecDeque<u32>,
}

impl ClientSession {
    /// A fresh connection: grant 1 until the first reply (RPCRDMA-35). `max_outstanding` is the
    /// number of reply receives the client keeps posted (C-3); `first_xid` should differ across
    /// connections (for example from a clock or a random source).
    pub fn new(max_outstanding: u32, first_xid: u32, planner: ChunkPlanner, rules: Rules) -> Self {
        Self {
            credits: ClientCredits::new(max_outstanding),
            planner,
            rules,
            next_xid: first_xid,
            pending: HashMap::new(),
            owed_dones: VecDeque::new(),
        }
    }

    /// The credit state.
    pub fn credits(&self) -> &ClientCredits {
        &self.credits
    }

    /// Calls waiting for their reply.
    pub fn outstanding(&self) -> usize {
        self.pending.len()
    }

    /// Whether a call may be sent now.
    pub fn can_start(&self) -> bool {
        self.owed_dones.is_empty() && self.credits.available() > 0
    }

    /// How a call of `proc` moving `data_len` bytes should travel (inline or chunks).
    pub fn plan(&self, proc: StorageProc, data_len: u32) -> Result<CallPlan, PlanError> {
        self.planner.plan_call(&call_shape(proc, data_len))
    }

    /// Encodes `call` with the advertised `chunks` into `buf` (an RDMA_MSG Send), taking a
    /// credit and an XID. Returns the XID and the Send length. Owed DONEs go first: while one
    /// is owed this returns [`StartError::NoCredit`] until [`ClientSession::poll_done`] sent it.
    pub fn start_call(
        &mut self,
        buf: &mut [u8],
        call: &StorageCall<'_>,
        chunks: &CallChunks,
    ) -> Result<(u32, usize), StartError> {
        self.check_can_start()?;
        let xid = self.next_xid;
        let n = encode_call(
            buf,
            self.credits.requested(),
            &call_header(xid, call.proc()),
            call,
            chunks,
        )?;
        self.commit_call(xid, call, chunks)?;
        Ok((xid, n))
    }

    /// [`start_call`](Self::start_call) in the form the server's inline limit requires
    /// (RPCRDMA-36): RDMA_MSG when the whole Send fits
    /// `max_inline_call`, else a long call (RPCRDMA-29): the reduced message is encoded into
    /// `message_buf`, which the caller must copy to the registered memory `long_at` names
    /// (handle and offset; its length is the room there) and keep readable until the reply,
    /// and `send` gets the RDMA_NOMSG header with the message as the position-0 read chunk.
    pub fn start_call_within(
        &mut self,
        send: &mut [u8],
        message_buf: &mut [u8],
        call: &StorageCall<'_>,
        chunks: &CallChunks,
        long_at: Segment,
    ) -> Result<Started, StartError> {
        self.check_can_start()?;
        let xid = self.next_xid;
        let rpc = call_header(xid, call.proc());
        let credit = self.credits.requested();
        let limit = self.planner.max_inline_call as usize;
        let (send_len, long_message_len) = match encode_call(send, credit, &rpc, call, chunks) {
            Ok(n) if n <= limit => (n, None),
            Ok(_) | Err(HeaderError::Xdr(XdrError::BufferTooShort)) => {
                let (mlen, mut header) =
                    encode_long_call(message_buf, credit, &rpc, call, chunks, &[long_at])?;
                if mlen > long_at.length as usize {
                    return Err(HeaderError::LongMessageTooLong.into());
                }
                // The position-0 chunk is exactly the message.
                if let Body::NoMsg(c) = &mut header.body {
                    c.reads[0].target.length = mlen as u32;
                }
                if header.buffer_len() > limit {
                    return Err(HeaderError::Xdr(XdrError::BufferTooShort).into());
                }
                (header.emit(send)?, Some(mlen))
            }
            Err(e) => return Err(e.into()),
        };
        self.commit_call(xid, call, chunks)?;
        Ok(Started {
            xid,
            send_len,
            long_message_len,
        })
    }

    fn check_can_start(&self) -> Result<(), StartError> {
        if !self.owed_dones.is_empty() {
            return Err(NoCredit {
                in_flight: self.credits.calls_in_flight(),
                granted: self.credits.granted(),
            }
            .into());
        }
        Ok(self.credits.check_available()?)
    }

    /// Takes the credit and the XID of a call just encoded.
    fn commit_call(
        &mut self,
        xid: u32,
        call: &StorageCall<'_>,
        chunks: &CallChunks,
    ) -> Result<(), StartError> {
        self.credits.try_start_call()?;
        self.next_xid = self.next_xid.wrapping_add(1);
        self.pending.insert(
            xid,
            Pending {
                proc: call.proc(),
                chunks: chunks.as_lists(),
            },
        );
        Ok(())
    }

    /// Takes in one received Send.
    pub fn handle_receive<'a>(&mut self, buf: &'a [u8]) -> ClientEvent<'a> {
        match receive_at_client(buf, &self.rules) {
            ClientInbound::Reply { header, message } => {
                let xid = header.xid;
                if !self.pending.contains_key(&xid) {
                    return ClientEvent::Dropped { error: None };
                }
                self.credits.on_reply(header.credit);
                if matches!(header.body, Body::NoMsg(_)) {
                    return ClientEvent::LongReply { xid, header };
                }
                let p = self.pending.remove(&xid).expect("checked above");
                match decode_reply_message(&header, message, &p.chunks, p.proc) {
                    Ok(reply) => ClientEvent::Reply { xid, header, reply },
                    Err(error) => ClientEvent::Failed { xid, error },
                }
            }
            ClientInbound::Error { xid, credit, body } => {
                if self.pending.remove(&xid).is_none() {
                    return ClientEvent::Dropped { error: None };
                }
                self.credits.on_reply(credit);
                ClientEvent::Refused { xid, body }
            }
            ClientInbound::Invalid { xid, error } => match xid {
                Some(xid) if self.pending.remove(&xid).is_some() => {
                    // No valid grant came with it: keep the last one.
                    self.credits.on_reply(self.credits.granted());
                    ClientEvent::Failed { xid, error }
                }
                _ => ClientEvent::Dropped { error: Some(error) },
            },
        }
    }

    /// Decodes a long reply fetched after [`ClientEvent::LongReply`]: `message` is what the
    /// reply chunk received or what was RDMA-Read from the position-0 chunk. A reply that came
    /// by read chunks leaves an RDMA_DONE owed (RPCRDMA-04), sent by
    /// [`ClientSession::poll_done`].
    pub fn decode_long_reply<'m>(
        &mut self,
        header: &HeaderRepr,
        message: &'m [u8],
    ) -> Result<DecodedReply<'m>, HeaderError> {
        let p = self
            .pending
            .remove(&header.xid)
            .ok_or(HeaderError::ChunkNotUsed)?;
        if done_for_reply(header, 0).is_some() {
            self.owed_dones.push_back(header.xid);
        }
        decode_reply_message(header, message, &p.chunks, p.proc)
    }

    /// The next owed RDMA_DONE, encoded into `buf` when a credit is free (RPCRDMA-20).
    pub fn poll_done(&mut self, buf: &mut [u8]) -> Option<usize> {
        let &xid = self.owed_dones.front()?;
        let done = HeaderRepr::done(xid, self.credits.requested());
        if buf.len() < done.buffer_len() || self.credits.try_send_done().is_err() {
            return None;
        }
        self.owed_dones.pop_front();
        done.emit(buf).ok()
    }
}

/// What a server makes of one received Send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEvent<'a> {
    /// A call to serve. Pull chunked WRITE data (RDMA Read, `chunks.reads`); put READ data into
    /// `chunks.writes[0]` (RDMA Write) before replying with [`ServerSession::encode_reply`].
    Call {
        /// The XID to answer.
        xid: u32,
        /// Credits the client asked for (pass back to `encode_reply`).
        requested: u32,
        /// The chunks the call advertised.
        chunks: ChunkLists,
        /// RPC header and arguments.
        call: DecodedCall<'a>,
    },
    /// A long call (RDMA_NOMSG): RDMA-Read the position-0 chunk of `header`, then call
    /// [`ServerSession::decode_long_call`].
    LongCall {
        /// The NOMSG header.
        header: HeaderRepr,
    },
    /// RDMA_DONE for reply `xid`: release its read-chunk memory if `release`.
    Done {
        /// The reply.
        xid: u32,
        /// It was expected (not late, not duplicate).
        release: bool,
    },
    /// Refused; an answer (RDMA_ERROR or an RPC error reply) is queued for
    /// [`ServerSession::poll_transmit`] unless the message was dropped.
    Refused {
        /// The XID, when known.
        xid: Option<u32>,
    },
}

/// How [`ServerSession::encode_reply_within`] sent a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyOut {
    /// Send `send[..send_len]` (RDMA_MSG, reply inline).
    Inline {
        /// Bytes of the Send.
        send_len: usize,
    },
    /// RDMA-Write `message_buf[..message_len]` into the call's reply chunk, then Send
    /// `send[..send_len]` (RDMA_NOMSG).
    ReplyChunk {
        /// Bytes of the reply message.
        message_len: usize,
        /// Bytes of the NOMSG Send.
        send_len: usize,
    },
    /// The read-chunk fallback (draft §5.2): no reply chunk large
    /// enough, so the reply message goes as a position-0 read chunk. Copy
    /// `message_buf[..message_len]` to the exposed memory, Send `send[..send_len]`
    /// (RDMA_NOMSG), and keep the memory readable until the RDMA_DONE or its timeout
    /// ([`ServerSession::poll_expired_done`]); the DONE is already expected.
    ReadChunk {
        /// Bytes of the reply message.
        message_len: usize,
        /// Bytes of the NOMSG Send.
        send_len: usize,
    },
}

/// A reply that cannot be sent as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum LongReplyError {
    /// Too long for the client's receive buffers, and the call gave no reply chunk large
    /// enough (RPCRDMA-30).
    #[error("reply too long for inline and no large enough reply chunk")]
    NoReplyChunk,
    /// Encoding failed.
    #[error(transparent)]
    Encode(#[from] HeaderError),
}

/// Where [`ServerSession::encode_long_reply`] puts a reply.
#[derive(Debug)]
pub struct LongReply<'a> {
    /// The Send.
    pub send: &'a mut [u8],
    /// The reply message, when it does not go inline.
    pub message_buf: &'a mut [u8],
    /// The client's receive size.
    pub max_inline_reply: u32,
    /// Memory the client may RDMA-Read a long reply from (its length is the room), and the
    /// time the reply goes out; `None`: no read-chunk fallback.
    pub expose: Option<(Segment, Instant)>,
}

/// The server end of one connection.
pub struct ServerSession {
    credits: ServerCredits,
    rules: Rules,
    dones: DoneTracker,
    transmit: VecDeque<Vec<u8>>,
    stats: ServerStats,
}

/// What a server refused, by kind (malformed and protocol errors kept apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServerStats {
    /// Sends dropped without an answer (shorter than 16 bytes, RDMA_ERROR from a client, DONE
    /// with draft-00 compatibility off).
    pub dropped: u64,
    /// Requests answered with RDMA_ERROR / ERR_VERS.
    pub err_vers: u64,
    /// Requests answered with RDMA_ERROR / ERR_CHUNK.
    pub err_chunk: u64,
    /// Calls answered with an RPC-level refusal (PROG_UNAVAIL, GARBAGE_ARGS, RPC_MISMATCH...).
    pub rpc_rejected: u64,
}

impl ServerSession {
    /// A connection granting at most `max_credits`; DONEs are waited for `done_timeout`.
    pub fn new(max_credits: u32, rules: Rules, done_timeout: Duration) -> Self {
        Self {
            credits: ServerCredits::new(max_credits),
            rules,
            dones: DoneTracker::new(done_timeout),
            transmit: VecDeque::new(),
            stats: ServerStats::default(),
        }
    }

    /// The credit state; post [`ServerCredits::receives_to_post`] receives after each event
    /// and reply, and report them with [`ServerSession::posted_receives`].
    pub fn credits(&self) -> &ServerCredits {
        &self.credits
    }

    /// Refusal counters.
    pub fn stats(&self) -> ServerStats {
        self.stats
    }

    /// Receives were posted.
    pub fn posted_receives(&mut self, n: u32) {
        self.credits.posted_receives(n)
    }

    /// Sets how many receive buffers the server can afford now (RPCRDMA-08).
    pub fn set_budget(&mut self, buffers: u32) {
        self.credits.set_budget(buffers)
    }

    /// Takes in one received Send. An overrun (a client ignoring its credits) is counted in
    /// [`ServerCredits::overruns`]; on a real transport the connection breaks (RPCRDMA-28).
    pub fn handle_receive<'a>(&mut self, buf: &'a [u8]) -> ServerEvent<'a> {
        match receive_at_server(buf, &self.rules, self.credits.last_grant()) {
            ServerInbound::Call { header, message } => {
                let _ = self.credits.on_call();
                if matches!(header.body, Body::NoMsg(_)) {
                    return ServerEvent::LongCall { header };
                }
                self.decode(header, message)
            }
            ServerInbound::Done { xid, .. } => {
                let _ = self.credits.on_done();
                ServerEvent::Done {
                    xid,
                    release: self.dones.on_done(xid),
                }
            }
            ServerInbound::Refused { reply, .. } => {
                let xid = Packet::new_checked(buf).ok().map(|p| p.xid());
                match reply {
                    Some(mut err) => {
                        match err.body {
                            Body::Error(ErrorBody::Vers { .. }) => self.stats.err_vers += 1,
                            _ => self.stats.err_chunk += 1,
                        }
                        let _ = self.credits.on_call();
                        let requested = Packet::new_checked(buf).map_or(1, |p| p.credit());
                        err.credit = self.credits.grant_for_error(requested);
                        self.transmit.push_back(err.to_vec());
                    }
                    None => {
                        self.stats.dropped += 1;
                        let _ = self.credits.on_dropped();
                    }
                }
                ServerEvent::Refused { xid }
            }
        }
    }

    fn decode<'a>(&mut self, header: HeaderRepr, message: &'a [u8]) -> ServerEvent<'a> {
        let result = decode_call_message(&header, message);
        let (xid, requested) = (header.xid, header.credit);
        let chunks = match header.body {
            Body::Msg(c) | Body::NoMsg(c) | Body::MsgP { chunks: c, .. } => c,
            Body::Done | Body::Error(_) => ChunkLists::default(),
        };
        match result {
            Ok(call) => ServerEvent::Call {
                xid,
                requested,
                chunks,
                call,
            },
            Err(rejection) => {
                self.reject(xid, requested, &chunks, rejection);
                ServerEvent::Refused { xid: Some(xid) }
            }
        }
    }

    fn reject(&mut self, xid: u32, requested: u32, chunks: &ChunkLists, r: CallRejection) {
        let grant = self.credits.grant_for_error(requested);
        let bytes = match r {
            CallRejection::Transport(_) => {
                self.stats.err_chunk += 1;
                HeaderRepr::err_chunk(xid, grant).to_vec()
            }
            CallRejection::Rpc(rpc) => {
                self.stats.rpc_rejected += 1;
                let header = HeaderRepr {
                    xid,
                    credit: grant,
                    body: Body::Msg(ChunkLists {
                        writes: echo_writes(chunks, None).unwrap_or_default(),
                        ..ChunkLists::default()
                    }),
                };
                let mut v = header.to_vec();
                let h = v.len();
                v.resize(h + rpc.buffer_len(), 0);
                let mut w = crate::xdr::XdrWriter::new(&mut v[h..]);
                if rpc.encode(&mut w).is_err() {
                    return;
                }
                v
            }
        };
        self.transmit.push_back(bytes);
    }

    /// Decodes a long call after its position-0 chunk was read into `message`.
    pub fn decode_long_call<'a>(
        &mut self,
        header: HeaderRepr,
        message: &'a [u8],
    ) -> ServerEvent<'a> {
        self.decode(header, message)
    }

    /// The next answer the session generated itself (RDMA_ERROR, RPC error replies).
    pub fn poll_transmit(&mut self, buf: &mut [u8]) -> Option<usize> {
        let next = self.transmit.front()?;
        if buf.len() < next.len() {
            return None;
        }
        let v = self.transmit.pop_front()?;
        buf[..v.len()].copy_from_slice(&v);
        Some(v.len())
    }

    /// Encodes the reply to call `xid` (inline RDMA_MSG, write list echoed) into `buf` with a
    /// fresh grant (RPCRDMA-06, -08). READ data as a write chunk must already be written (W-4).
    pub fn encode_reply(
        &mut self,
        buf: &mut [u8],
        xid: u32,
        requested: u32,
        call_chunks: &ChunkLists,
        reply: &StorageReply<'_>,
    ) -> Result<usize, HeaderError> {
        let grant = self.credits.grant_for_reply(requested, false);
        encode_reply(
            buf,
            grant,
            call_chunks,
            &ReplyHeader::success(xid),
            Some(reply),
        )
    }

    /// Encodes the reply to call `xid` in the form the client's receive size allows (§5.2,
    /// RPCRDMA-30): inline when the whole Send fits `max_inline_reply`
    /// (the client's receive buffers), else the reply message goes into `message_buf` for an
    /// RDMA Write into the call's reply chunk, followed by the RDMA_NOMSG header in `send`.
    /// Without a large enough reply chunk: [`LongReplyError::NoReplyChunk`] (answer with a
    /// shorter result, or SYSTEM_ERR through [`ServerSession::encode_rpc_error`]).
    #[allow(clippy::too_many_arguments)]
    pub fn encode_reply_within(
        &mut self,
        send: &mut [u8],
        message_buf: &mut [u8],
        max_inline_reply: u32,
        xid: u32,
        requested: u32,
        call_chunks: &ChunkLists,
        reply: &StorageReply<'_>,
    ) -> Result<ReplyOut, LongReplyError> {
        let mut long = LongReply {
            send,
            message_buf,
            max_inline_reply,
            expose: None,
        };
        self.encode_long_reply(&mut long, xid, requested, call_chunks, reply)
    }

    /// [`encode_reply_within`](Self::encode_reply_within) with the read-chunk fallback: when
    /// the reply fits neither inline nor a reply chunk and `long.expose` names server memory
    /// (handle, offset, room) the client may RDMA-Read, the reply goes as a position-0 read
    /// chunk there ([`ReplyOut::ReadChunk`]) and its DONE is expected from `now`.
    pub fn encode_long_reply(
        &mut self,
        long: &mut LongReply<'_>,
        xid: u32,
        requested: u32,
        call_chunks: &ChunkLists,
        reply: &StorageReply<'_>,
    ) -> Result<ReplyOut, LongReplyError> {
        let rpc = ReplyHeader::success(xid);
        let mlen = encode_reply_message(long.message_buf, &rpc, Some(reply))?;
        let inline = HeaderRepr {
            xid,
            credit: 0,
            body: Body::Msg(ChunkLists {
                writes: echo_writes(call_chunks, None).unwrap_or_default(),
                ..ChunkLists::default()
            }),
        };
        if inline.buffer_len() + mlen <= long.max_inline_reply as usize {
            let grant = self.credits.grant_for_reply(requested, false);
            let n = encode_reply(long.send, grant, call_chunks, &rpc, Some(reply))?;
            return Ok(ReplyOut::Inline { send_len: n });
        }
        let fits = call_chunks
            .reply
            .as_ref()
            .is_some_and(|c| c.total_len() >= mlen as u64);
        if fits {
            let grant = self.credits.grant_for_reply(requested, false);
            let header = reply_chunk_header(xid, grant, call_chunks, Some(reply), mlen as u32)
                .ok_or(LongReplyError::Encode(HeaderError::EchoMismatch))?;
            let send_len = header.emit(long.send)?;
            return Ok(ReplyOut::ReplyChunk {
                message_len: mlen,
                send_len,
            });
        }
        let Some((at, now)) = long.expose.filter(|(s, _)| s.length as usize >= mlen) else {
            return Err(LongReplyError::NoReplyChunk);
        };
        let seg = Segment {
            length: mlen as u32,
            ..at
        };
        let mut header = reply_read_chunk_header(xid, 0, call_chunks, Some(reply), &[seg])
            .ok_or(LongReplyError::Encode(HeaderError::EchoMismatch))?;
        if header.buffer_len() > long.send.len() {
            return Err(HeaderError::Xdr(XdrError::BufferTooShort).into());
        }
        header.credit = self.credits.grant_for_reply(requested, true);
        let send_len = header.emit(long.send)?;
        self.dones.expect(now, xid);
        Ok(ReplyOut::ReadChunk {
            message_len: mlen,
            send_len,
        })
    }

    /// Encodes an accepted-but-failed RPC reply (for example SYSTEM_ERR) to call `xid`.
    pub fn encode_rpc_error(
        &mut self,
        buf: &mut [u8],
        xid: u32,
        requested: u32,
        call_chunks: &ChunkLists,
        stat: AcceptStat,
    ) -> Result<usize, HeaderError> {
        if stat == AcceptStat::Success {
            return Err(HeaderError::Xdr(XdrError::BadDiscriminant));
        }
        let grant = self.credits.grant_for_reply(requested, false);
        encode_reply(
            buf,
            grant,
            call_chunks,
            &ReplyHeader::accepted(xid, stat),
            None,
        )
    }

    /// A reply with read chunks for `xid` went out at `now` (long reply as position-0 read
    /// chunk): its memory stays exposed until the DONE or the timeout (RPCRDMA-22).
    pub fn expect_done(&mut self, now: Instant, xid: u32) {
        self.dones.expect(now, xid);
    }

    /// A reply whose DONE timed out at `now`: release its memory (RPCRDMA-22).
    pub fn poll_expired_done(&mut self, now: Instant) -> Option<u32> {
        let xid = self.dones.poll_expired(now)?;
        self.credits.forget_done();
        Some(xid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reduced::Payload;
    use crate::segment::{Segment, WriteChunk};
    use crate::storage::{self, ReadArgs, ReadOk, WriteArgs, WriteOk};

    fn pair(max: u32) -> (ClientSession, ServerSession) {
        let mut s = ServerSession::new(max, Rules::default(), Duration::from_secs(1));
        let n = s.credits().receives_to_post();
        s.posted_receives(n);
        (
            ClientSession::new(64, 1000, ChunkPlanner::default(), Rules::default()),
            s,
        )
    }

    /// Serves one received call: READ answers from a fake store through the write chunk.
    fn serve(s: &mut ServerSession, send: &[u8], out: &mut [u8]) -> Option<usize> {
        let ev = s.handle_receive(send);
        let n = match ev {
            ServerEvent::Call {
                xid,
                requested,
                chunks,
                call,
            } => {
                let reply = match call.call {
                    StorageCall::Read(a) => StorageReply::Read(Ok(ReadOk {
                        eof: false,
                        data: Payload::WriteChunk {
                            index: 0,
                            len: a.count,
                        },
                    })),
                    StorageCall::Write(a) => StorageReply::Write(Ok(WriteOk {
                        count: a.data.len(),
                        committed: a.stable,
                        verifier: 1,
                    })),
                    StorageCall::Getattr => StorageReply::Getattr(Ok(storage::GetattrOk {
                        size: 1 << 20,
                        block_size: 4096,
                        max_io: 1 << 20,
                        verifier: 1,
                    })),
                    StorageCall::Commit(_) => {
                        StorageReply::Commit(Ok(storage::CommitOk { verifier: 1 }))
                    }
                    StorageCall::Null => StorageReply::Null,
                };
                s.encode_reply(out, xid, requested, &chunks, &reply)
                    .unwrap()
            }
            ServerEvent::Refused { .. } => s.poll_transmit(out)?,
            other => panic!("{other:?}"),
        };
        let p = s.credits().receives_to_post();
        s.posted_receives(p);
        Some(n)
    }

    #[test]
    fn read_and_write_through_sessions() {
        let (mut c, mut s) = pair(8);
        let mut send = [0u8; 512];
        let mut out = [0u8; 512];
        let dest = Segment {
            handle: 5,
            length: 65536,
            offset: 0,
        };
        let plan = c.plan(StorageProc::Read, 65536).unwrap();
        assert_eq!(plan.bulk_result, crate::planner::Placement::Chunk);
        let (xid, n) = c
            .start_call(
                &mut send,
                &StorageCall::Read(ReadArgs {
                    offset: 0,
                    count: 65536,
                }),
                &CallChunks {
                    read_result: Some(WriteChunk::new(vec![dest])),
                    ..Default::default()
                },
            )
            .unwrap();
        let m = serve(&mut s, &send[..n], &mut out).unwrap();
        match c.handle_receive(&out[..m]) {
            ClientEvent::Reply { xid: x, reply, .. } => {
                assert_eq!(x, xid);
                assert_eq!(
                    reply.reply,
                    Some(StorageReply::Read(Ok(ReadOk {
                        eof: false,
                        data: Payload::WriteChunk {
                            index: 0,
                            len: 65536
                        }
                    })))
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(c.outstanding(), 0);
        assert_eq!(c.credits().granted(), 8);
        // WRITE, inline.
        let (_, n) = c
            .start_call(
                &mut send,
                &StorageCall::Write(WriteArgs {
                    offset: 0,
                    stable: true,
                    data: Payload::Inline(b"hello"),
                }),
                &CallChunks::default(),
            )
            .unwrap();
        let m = serve(&mut s, &send[..n], &mut out).unwrap();
        assert!(matches!(
            c.handle_receive(&out[..m]),
            ClientEvent::Reply {
                reply: DecodedReply {
                    reply: Some(StorageReply::Write(Ok(WriteOk { count: 5, .. }))),
                    ..
                },
                ..
            }
        ));
        assert_eq!(s.credits().overruns(), 0);
    }

    #[test]
    fn rpcrdma_07_session_never_exceeds_the_grant() {
        let (mut c, mut s) = pair(4);
        let mut sends = Vec::new();
        let mut buf = [0u8; 256];
        // Fresh connection: one call only (RPCRDMA-35).
        for _ in 0..40 {
            if let Ok((_, n)) =
                c.start_call(&mut buf, &StorageCall::Getattr, &CallChunks::default())
            {
                sends.push(buf[..n].to_vec());
            }
        }
        assert_eq!(sends.len(), 1);
        let mut out = [0u8; 256];
        let m = serve(&mut s, &sends.pop().unwrap(), &mut out).unwrap();
        assert!(matches!(
            c.handle_receive(&out[..m]),
            ClientEvent::Reply { .. }
        ));
        // Now the grant is 4: 40 attempts, 4 calls.
        for _ in 0..40 {
            if let Ok((_, n)) =
                c.start_call(&mut buf, &StorageCall::Getattr, &CallChunks::default())
            {
                sends.push(buf[..n].to_vec());
            }
        }
        assert_eq!(sends.len(), 4);
        // All four reach the server before any reply: in progress = grant, no overrun.
        let calls: Vec<_> = sends
            .iter()
            .map(|send| match s.handle_receive(send) {
                ServerEvent::Call {
                    xid,
                    requested,
                    chunks,
                    ..
                } => (xid, requested, chunks),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(s.credits().in_progress(), 4);
        for (xid, requested, chunks) in calls {
            let reply = StorageReply::Getattr(Err(storage::StoreStatus::Io));
            let m = s
                .encode_reply(&mut out, xid, requested, &chunks, &reply)
                .unwrap();
            let p = s.credits().receives_to_post();
            s.posted_receives(p);
            assert!(matches!(
                c.handle_receive(&out[..m]),
                ClientEvent::Reply { .. }
            ));
        }
        assert_eq!(s.credits().overruns(), 0);
        assert_eq!(c.outstanding(), 0);
    }

    #[test]
    fn rpcrdma_33_wrong_version_refused_and_call_released() {
        let (mut c, mut s) = pair(4);
        let mut send = [0u8; 256];
        let (xid, n) = c
            .start_call(&mut send, &StorageCall::Null, &CallChunks::default())
            .unwrap();
        send[4..8].copy_from_slice(&2u32.to_be_bytes());
        let mut out = [0u8; 256];
        let m = serve(&mut s, &send[..n], &mut out).unwrap();
        assert_eq!(m, 28);
        assert_eq!(
            c.handle_receive(&out[..m]),
            ClientEvent::Refused {
                xid,
                body: ErrorBody::Vers { low: 1, high: 1 }
            }
        );
        assert_eq!(c.outstanding(), 0);
        assert!(c.can_start());
        assert_eq!(
            s.stats(),
            ServerStats {
                err_vers: 1,
                ..ServerStats::default()
            }
        );
        // Too short to answer: dropped and counted.
        assert_eq!(
            s.handle_receive(&send[..12]),
            ServerEvent::Refused { xid: None }
        );
        assert_eq!(s.stats().dropped, 1);
        assert_eq!(s.poll_transmit(&mut out), None);
    }

    #[test]
    fn rpc_level_refusal_is_answered_and_fails_nothing_else() {
        let (mut c, mut s) = pair(4);
        let mut send = [0u8; 256];
        let (xid, n) = c
            .start_call(&mut send, &StorageCall::Getattr, &CallChunks::default())
            .unwrap();
        // Change the RPC program number (transport header 28 bytes, prog at +12).
        send[28 + 12..28 + 16].copy_from_slice(&(storage::PROGRAM + 1).to_be_bytes());
        let mut out = [0u8; 256];
        let m = serve(&mut s, &send[..n], &mut out).unwrap();
        match c.handle_receive(&out[..m]) {
            ClientEvent::Reply { xid: x, reply, .. } => {
                assert_eq!(x, xid);
                assert_eq!(
                    reply.rpc,
                    ReplyHeader::accepted(xid, AcceptStat::ProgUnavail)
                );
                assert_eq!(reply.reply, None);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(s.stats().rpc_rejected, 1);
    }

    #[test]
    fn unknown_xid_is_dropped() {
        let (mut c, _) = pair(4);
        let reply = HeaderRepr::err_chunk(77, 1).to_vec();
        assert_eq!(
            c.handle_receive(&reply),
            ClientEvent::Dropped { error: None }
        );
    }

    #[test]
    fn rpcrdma_04_20_long_reply_by_read_chunk_owes_a_done_before_the_next_call() {
        let (mut c, mut s) = pair(4);
        let mut send = [0u8; 256];
        let (xid, _) = c
            .start_call(&mut send, &StorageCall::Getattr, &CallChunks::default())
            .unwrap();
        // The server answers with a position-0 read chunk (draft-00 long reply).
        let reply = StorageReply::Getattr(Ok(storage::GetattrOk {
            size: 9,
            block_size: 512,
            max_io: 1 << 20,
            verifier: 3,
        }));
        let mut msg = [0u8; 128];
        let mlen = crate::storage_send::encode_reply_message(
            &mut msg,
            &ReplyHeader::success(xid),
            Some(&reply),
        )
        .unwrap();
        let seg = Segment {
            handle: 0x99,
            length: mlen as u32,
            offset: 0,
        };
        let h = crate::storage_send::reply_read_chunk_header(
            xid,
            4,
            &ChunkLists::default(),
            Some(&reply),
            &[seg],
        )
        .unwrap();
        let now = Instant::now();
        s.expect_done(now, xid);
        let wire = h.to_vec();
        let ClientEvent::LongReply { header, .. } = c.handle_receive(&wire) else {
            panic!()
        };
        // ... the client RDMA-Reads the chunk ...
        let d = c.decode_long_reply(&header, &msg[..mlen]).unwrap();
        assert_eq!(d.reply, Some(reply));
        // A call must wait for the DONE (so calls cannot starve it of credits).
        assert!(!c.can_start());
        assert!(matches!(
            c.start_call(&mut send, &StorageCall::Null, &CallChunks::default()),
            Err(StartError::NoCredit(_))
        ));
        let mut done = [0u8; 16];
        let n = c.poll_done(&mut done).unwrap();
        assert_eq!(&done[..n], &HeaderRepr::done(xid, 64).to_vec()[..]);
        assert_eq!(c.poll_done(&mut done), None);
        assert!(c.can_start());
        assert_eq!(
            s.handle_receive(&done[..n]),
            ServerEvent::Done { xid, release: true }
        );
    }

    #[test]
    fn rpcrdma_30_long_inline_read_goes_through_the_reply_chunk() {
        let (mut c, mut s) = pair(4);
        let mut send = [0u8; 512];
        let rc = Segment {
            handle: 0x51,
            length: 8192,
            offset: 0,
        };
        let (xid, n) = c
            .start_call(
                &mut send,
                &StorageCall::Read(ReadArgs {
                    offset: 0,
                    count: 4000,
                }),
                &CallChunks {
                    reply_chunk: Some(WriteChunk::new(vec![rc])),
                    ..Default::default()
                },
            )
            .unwrap();
        let ServerEvent::Call {
            requested, chunks, ..
        } = s.handle_receive(&send[..n])
        else {
            panic!()
        };
        let data = vec![0x42u8; 4000];
        let reply = StorageReply::Read(Ok(ReadOk {
            eof: false,
            data: Payload::Inline(&data),
        }));
        let mut out = [0u8; 1024];
        let mut msg = vec![0u8; 8192];
        let placed = s
            .encode_reply_within(&mut out, &mut msg, 1024, xid, requested, &chunks, &reply)
            .unwrap();
        let ReplyOut::ReplyChunk {
            message_len,
            send_len,
        } = placed
        else {
            panic!("{placed:?}")
        };
        // ... RDMA Write of msg[..message_len] into the reply chunk, then the Send ...
        let ClientEvent::LongReply { header, .. } = c.handle_receive(&out[..send_len]) else {
            panic!()
        };
        assert_eq!(
            crate::chunk_rules::reply_chunk_len(header.body.chunks().unwrap()),
            Some(message_len as u64)
        );
        let d = c.decode_long_reply(&header, &msg[..message_len]).unwrap();
        assert_eq!(d.reply, Some(reply));
        // Small replies stay inline; without a reply chunk a long one is refused.
        let small = StorageReply::Read(Ok(ReadOk {
            eof: false,
            data: Payload::Inline(&data[..100]),
        }));
        assert!(matches!(
            s.encode_reply_within(&mut out, &mut msg, 1024, 9, 1, &chunks, &small),
            Ok(ReplyOut::Inline { .. })
        ));
        assert_eq!(
            s.encode_reply_within(
                &mut out,
                &mut msg,
                1024,
                9,
                1,
                &ChunkLists::default(),
                &reply
            ),
            Err(LongReplyError::NoReplyChunk)
        );
    }

    /// Starts `call` without chunks and hands it to the server: its XID, the credits asked
    /// and the call's chunk lists.
    fn deliver(
        c: &mut ClientSession,
        s: &mut ServerSession,
        call: &StorageCall<'_>,
    ) -> (u32, u32, ChunkLists) {
        let mut send = [0u8; 1024];
        let (xid, n) = c
            .start_call(&mut send, call, &CallChunks::default())
            .unwrap();
        let ServerEvent::Call {
            requested, chunks, ..
        } = s.handle_receive(&send[..n])
        else {
            panic!("not a call")
        };
        (xid, requested, chunks)
    }

    /// Memory with `room` bytes a long message may go to (handle 0x70 at 0x1000).
    fn long_msg_at(room: u32) -> Segment {
        Segment {
            handle: 0x70,
            length: room,
            offset: 0x1000,
        }
    }

    #[test]
    fn rpcrdma_29_36_start_call_within_goes_long_exactly_past_the_inline_limit() {
        let (mut c, mut s) = pair(8);
        let mut send = [0u8; 1024];
        let mut message = vec![0u8; 8192];
        // WRITE data inline: 28 header + 56 call + data. 940 bytes: 1024, still inline.
        for (len, long) in [(940usize, false), (941, true), (5000, true)] {
            let data = vec![len as u8; len];
            let call = StorageCall::Write(WriteArgs {
                offset: 8,
                stable: false,
                data: Payload::Inline(&data),
            });
            let st = c
                .start_call_within(
                    &mut send,
                    &mut message,
                    &call,
                    &CallChunks::default(),
                    long_msg_at(8192),
                )
                .unwrap();
            assert_eq!(st.long_message_len.is_some(), long, "{len}");
            assert!(st.send_len <= 1024);
            let event = s.handle_receive(&send[..st.send_len]);
            let decoded = match (event, st.long_message_len) {
                (ServerEvent::Call { call, .. }, None) => call.call,
                (ServerEvent::LongCall { header }, Some(mlen)) => {
                    // The position-0 chunk is exactly the message, where we said.
                    let c0 = header.body.chunks().unwrap();
                    assert_eq!(
                        crate::storage_send::long_message_len(c0, 1 << 20),
                        Ok(mlen as u32)
                    );
                    assert_eq!(c0.reads[0].target.handle, 0x70);
                    assert_eq!(c0.reads[0].target.offset, 0x1000);
                    // ... the server RDMA-Reads message[..mlen] ...
                    match s.decode_long_call(header, &message[..mlen]) {
                        ServerEvent::Call { call, .. } => call.call,
                        other => panic!("{other:?}"),
                    }
                }
                (other, l) => panic!("{len}: {other:?} (long {l:?})"),
            };
            assert_eq!(decoded, call);
            let mut out = [0u8; 256];
            let reply = StorageReply::Write(Ok(WriteOk {
                count: len as u32,
                committed: false,
                verifier: 1,
            }));
            let n = s
                .encode_reply(&mut out, st.xid, 4, &ChunkLists::default(), &reply)
                .unwrap();
            assert!(matches!(
                c.handle_receive(&out[..n]),
                ClientEvent::Reply { .. }
            ));
        }
        // No room for the message where it would go: refused, no credit or XID taken.
        let data = vec![1u8; 5000];
        let call = StorageCall::Write(WriteArgs {
            offset: 0,
            stable: false,
            data: Payload::Inline(&data),
        });
        let before = c.outstanding();
        assert_eq!(
            c.start_call_within(
                &mut send,
                &mut message,
                &call,
                &CallChunks::default(),
                long_msg_at(4000)
            ),
            Err(StartError::Encode(HeaderError::LongMessageTooLong))
        );
        assert_eq!(c.outstanding(), before);
    }

    #[test]
    fn rpcrdma_30_read_chunk_fallback_when_no_reply_chunk_fits_then_done_releases() {
        let (mut c, mut s) = pair(4);
        let read = StorageCall::Read(ReadArgs {
            offset: 0,
            count: 3000,
        });
        let (xid, requested, chunks) = deliver(&mut c, &mut s, &read);
        let data: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        let reply = StorageReply::Read(Ok(ReadOk {
            eof: true,
            data: Payload::Inline(&data),
        }));
        let mut out = [0u8; 1024];
        let mut msg = vec![0u8; 8192];
        let now = Instant::now();
        // Exposed memory too small: no fallback.
        let mut long = LongReply {
            send: &mut out,
            message_buf: &mut msg,
            max_inline_reply: 1024,
            expose: Some((long_msg_at(100), now)),
        };
        assert_eq!(
            s.encode_long_reply(&mut long, xid, requested, &chunks, &reply),
            Err(LongReplyError::NoReplyChunk)
        );
        long.expose = Some((long_msg_at(8192), now));
        let placed = s
            .encode_long_reply(&mut long, xid, requested, &chunks, &reply)
            .unwrap();
        let ReplyOut::ReadChunk {
            message_len,
            send_len,
        } = placed
        else {
            panic!("{placed:?}")
        };
        assert_eq!(message_len, 24 + 12 + 3000);
        let ClientEvent::LongReply { header, .. } = c.handle_receive(&out[..send_len]) else {
            panic!()
        };
        let c0 = header.body.chunks().unwrap();
        assert_eq!(c0.reads[0].target.length as usize, message_len);
        // ... the client RDMA-Reads it ...
        let d = c.decode_long_reply(&header, &msg[..message_len]).unwrap();
        assert_eq!(d.reply, Some(reply));
        let mut done = [0u8; 16];
        let dn = c.poll_done(&mut done).unwrap();
        assert_eq!(
            s.handle_receive(&done[..dn]),
            ServerEvent::Done { xid, release: true }
        );
        // Never released twice, and nothing left to expire.
        assert_eq!(s.poll_expired_done(now + Duration::from_secs(60)), None);
    }

    #[test]
    fn rpcrdma_22_an_unacknowledged_read_chunk_reply_expires() {
        let (mut c, mut s) = pair(4);
        let (xid, requested, chunks) = deliver(&mut c, &mut s, &StorageCall::Getattr);
        let reply = StorageReply::Getattr(Ok(storage::GetattrOk {
            size: 1,
            block_size: 512,
            max_io: 4096,
            verifier: 2,
        }));
        let (mut out, mut msg) = ([0u8; 256], [0u8; 256]);
        let now = Instant::now();
        // A receive size below even this small reply forces the fallback.
        let mut long = LongReply {
            send: &mut out,
            message_buf: &mut msg,
            max_inline_reply: 40,
            expose: Some((long_msg_at(256), now)),
        };
        let placed = s
            .encode_long_reply(&mut long, xid, requested, &chunks, &reply)
            .unwrap();
        assert!(matches!(placed, ReplyOut::ReadChunk { .. }));
        assert_eq!(s.poll_expired_done(now), None);
        assert_eq!(s.poll_expired_done(now + Duration::from_secs(2)), Some(xid));
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;
        use std::collections::VecDeque;

        #[derive(Debug, Clone)]
        enum Step {
            /// Client starts a call of this kind with this size.
            Call(u8, u32),
            /// The server takes in the oldest Send in flight to it.
            Deliver,
            /// The server answers the call at this index of its in-progress list.
            Answer(usize),
            /// The server's buffer budget changes.
            Budget(u32),
        }

        fn step() -> impl Strategy<Value = Step> {
            prop_oneof![
                (0u8..4, 1u32..1 << 20).prop_map(|(k, n)| Step::Call(k, n)),
                Just(Step::Deliver),
                any::<usize>().prop_map(Step::Answer),
                (0u32..16).prop_map(Step::Budget),
            ]
        }

        proptest! {
            /// RPCRDMA-07, -28, -06: through both sessions, with Sends delivered in order and
            /// replies in any order, the server never sees a Send without a posted receive,
            /// every call gets its own reply back, and draining always completes.
            #[test]
            fn sessions_keep_credits_and_match_replies(max in 1u32..12, steps in proptest::collection::vec(step(), 1..150)) {
                let mut c = ClientSession::new(16, 7, ChunkPlanner::default(), Rules::default());
                let mut s = ServerSession::new(max, Rules::default(), Duration::from_secs(1));
                let n = s.credits().receives_to_post();
                s.posted_receives(n);
                let mut to_server: VecDeque<Vec<u8>> = VecDeque::new();
                let mut in_progress: Vec<(u32, u32, ChunkLists, StorageProc, u32)> = Vec::new();
                let mut expected: HashMap<u32, StorageProc> = HashMap::new();
                let seg = |n| Segment { handle: 3, length: n, offset: 0 };
                let mut buf = [0u8; 512];
                let answer = |s: &mut ServerSession, c: &mut ClientSession, e: &mut HashMap<u32, StorageProc>,
                                  (xid, requested, chunks, proc, n): (u32, u32, ChunkLists, StorageProc, u32)|
                 -> Result<(), TestCaseError> {
                    let reply = match proc {
                        StorageProc::Read => StorageReply::Read(Ok(ReadOk { eof: false, data: Payload::WriteChunk { index: 0, len: n } })),
                        StorageProc::Write => StorageReply::Write(Ok(WriteOk { count: n, committed: false, verifier: 1 })),
                        StorageProc::Commit => StorageReply::Commit(Err(storage::StoreStatus::Io)),
                        _ => StorageReply::Getattr(Err(storage::StoreStatus::Io)),
                    };
                    let mut out = [0u8; 512];
                    let m = s.encode_reply(&mut out, xid, requested, &chunks, &reply).unwrap();
                    let p = s.credits().receives_to_post();
                    s.posted_receives(p);
                    match c.handle_receive(&out[..m]) {
                        ClientEvent::Reply { xid: x, reply: r, .. } => {
                            prop_assert_eq!(x, xid);
                            prop_assert_eq!(e.remove(&xid), Some(proc));
                            prop_assert_eq!(r.reply, Some(reply));
                        }
                        other => prop_assert!(false, "{:?}", other),
                    }
                    Ok(())
                };
                for st in steps {
                    match st {
                        Step::Call(kind, n) => {
                            let (call, chunks) = match kind {
                                0 => (StorageCall::Read(ReadArgs { offset: 0, count: n }),
                                      CallChunks { read_result: Some(WriteChunk::new(vec![seg(n)])), ..Default::default() }),
                                1 => (StorageCall::Write(WriteArgs { offset: 0, stable: false, data: Payload::ReadChunk { position: 0, len: n } }),
                                      CallChunks { write_data: vec![seg(n)], ..Default::default() }),
                                2 => (StorageCall::Commit(storage::CommitArgs { offset: 0, count: 0 }), CallChunks::default()),
                                _ => (StorageCall::Getattr, CallChunks::default()),
                            };
                            let before = c.credits().calls_in_flight();
                            if let Ok((xid, len)) = c.start_call(&mut buf, &call, &chunks) {
                                prop_assert!(before < c.credits().granted());
                                to_server.push_back(buf[..len].to_vec());
                                expected.insert(xid, call.proc());
                            }
                        }
                        Step::Deliver => {
                            if let Some(send) = to_server.pop_front() {
                                match s.handle_receive(&send) {
                                    ServerEvent::Call { xid, requested, chunks, call } => {
                                        let n = match call.call {
                                            StorageCall::Read(a) => a.count,
                                            StorageCall::Write(a) => a.data.len(),
                                            _ => 0,
                                        };
                                        in_progress.push((xid, requested, chunks, call.call.proc(), n));
                                    }
                                    other => prop_assert!(false, "{:?}", other),
                                }
                            }
                        }
                        Step::Answer(i) if !in_progress.is_empty() => {
                            let job = in_progress.remove(i % in_progress.len());
                            answer(&mut s, &mut c, &mut expected, job)?;
                        }
                        Step::Answer(_) => {}
                        Step::Budget(b) => s.set_budget(b),
                    }
                    prop_assert_eq!(s.credits().overruns(), 0);
                }
                // Drain: deliver everything, answer everything.
                while let Some(send) = to_server.pop_front() {
                    if let ServerEvent::Call { xid, requested, chunks, call } = s.handle_receive(&send) {
                        let n = match call.call {
                            StorageCall::Read(a) => a.count,
                            StorageCall::Write(a) => a.data.len(),
                            _ => 0,
                        };
                        in_progress.push((xid, requested, chunks, call.call.proc(), n));
                    }
                }
                for job in std::mem::take(&mut in_progress) {
                    answer(&mut s, &mut c, &mut expected, job)?;
                }
                prop_assert_eq!(s.credits().overruns(), 0);
                prop_assert!(expected.is_empty());
                prop_assert_eq!(c.outstanding(), 0);
                prop_assert!(c.can_start());
            }
        }
    }
}
