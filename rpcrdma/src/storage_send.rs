//! Whole messages of the storage program over RPC-over-RDMA: the transport header and the
//! reduced RPC message of one Send, built and taken apart in one place so the service and the
//! bench share every rule.
//!
//! Receive side: first [`receive_at_server`](crate::receive_at_server) /
//! [`receive_at_client`](crate::receive_at_client) (transport header and chunk rules), then
//! [`decode_call_message`] / [`decode_reply_message`] here (RPC header and procedure XDR).
//!
//! Decode-error policy (RPCRDMA-34, deterministic): a chunk that does not match the message
//! (length word != chunk sum, unused read chunk, bad echo) is a transport error answered with
//! RDMA_ERROR / ERR_CHUNK; malformed XDR inside the RPC arguments is GARBAGE_ARGS.

use crate::chunk_list::ChunkLists;
use crate::chunk_rules::check_echo;
use crate::error::HeaderError;
use crate::header::{Body, HeaderRepr, FIXED_LEN as FIXED_HEADER_LEN};
use crate::planner::{long_message_reads, CallShape};
use crate::reduced::{Padding, Payload, ReducedReader, ReducedWriter};
use crate::rpc::{AcceptStat, CallHeader, ReplyHeader, RpcError};
use crate::segment::{ReadSegment, Segment, WriteChunk};
use crate::storage::{self, StorageCall, StorageProc, StorageReply};
use crate::xdr::XdrError;

/// The memory a client advertises with a call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CallChunks {
    /// Segments holding WRITE data the server RDMA-Reads (in order); empty for inline data.
    /// Positions are computed while encoding.
    pub write_data: Vec<Segment>,
    /// Write chunk for READ data (the server RDMA-Writes into it).
    pub read_result: Option<WriteChunk>,
    /// Reply chunk for a reply too long to come inline.
    pub reply_chunk: Option<WriteChunk>,
}

impl CallChunks {
    /// The chunk lists as advertised, for checking the reply's echo ([`decode_reply_message`]).
    /// Read positions are left 0: only the write list and reply chunk are echoed.
    pub fn as_lists(&self) -> ChunkLists {
        ChunkLists {
            reads: self
                .write_data
                .iter()
                .map(|&target| ReadSegment {
                    position: 0,
                    target,
                })
                .collect(),
            writes: self.read_result.iter().cloned().collect(),
            reply: self.reply_chunk.clone(),
        }
    }
}

/// The sizes the [`ChunkPlanner`](crate::planner::ChunkPlanner) needs for a storage call with
/// AUTH_NONE: `data_len` is the WRITE data length or the READ count (ignored otherwise).
pub fn call_shape(proc: StorageProc, data_len: u32) -> CallShape {
    // RPC call header 40; reply header 24 (AUTH_NONE); status word 4.
    let (message_len, bulk_arg, bulk_result, reply_len) = match proc {
        StorageProc::Null => (40, 0, 0, 24),
        // offset, count | status, eof, length word
        StorageProc::Read => (40 + 12, 0, data_len, 24 + 12),
        // offset, stable, length word | status, count, committed, verifier
        StorageProc::Write => (40 + 16, data_len, 0, 24 + 20),
        // offset, count | status, verifier
        StorageProc::Commit => (40 + 12, 0, 0, 24 + 12),
        // | status, size, block_size, max_io, verifier
        StorageProc::Getattr => (40, 0, 0, 24 + 28),
    };
    CallShape {
        message_len,
        bulk_arg,
        bulk_result,
        reply_len,
    }
}

/// The RPC header of a storage call with AUTH_NONE.
pub fn call_header(xid: u32, proc: StorageProc) -> CallHeader<'static> {
    CallHeader::new(xid, storage::PROGRAM, storage::VERSION, proc as u32)
}

fn check_write_data(call: &StorageCall<'_>, chunks: &CallChunks) -> Result<(), HeaderError> {
    let data_len = match call {
        StorageCall::Write(a) => match a.data {
            Payload::ReadChunk { len, .. } => Some(len),
            _ => None,
        },
        _ => None,
    };
    let seg_sum: u64 = chunks.write_data.iter().map(|s| u64::from(s.length)).sum();
    if data_len.map(u64::from) != (!chunks.write_data.is_empty()).then_some(seg_sum) {
        return Err(HeaderError::LengthMismatch);
    }
    Ok(())
}

/// The chunk lists of a call whose WRITE data (if chunked) sits at `data_position`, with the
/// whole message as a position-0 chunk first when `long_message` is given (RPCRDMA-29).
fn call_lists(
    chunks: &CallChunks,
    data_position: Option<u32>,
    long_message: &[Segment],
) -> ChunkLists {
    let mut lists = chunks.as_lists();
    if let Some(pos) = data_position {
        lists.reads.iter_mut().for_each(|r| r.position = pos);
    }
    let mut reads = long_message_reads(long_message);
    reads.append(&mut lists.reads);
    lists.reads = reads;
    lists
}

/// Encodes a call Send (RDMA_MSG) into `buf`; returns its length. WRITE data must be
/// [`Payload::ReadChunk`] exactly when `chunks.write_data` is non-empty, with a length equal to
/// the segments' sum (RPCRDMA-13), else [`HeaderError::LengthMismatch`].
pub fn encode_call(
    buf: &mut [u8],
    credit: u32,
    rpc: &CallHeader<'_>,
    call: &StorageCall<'_>,
    chunks: &CallChunks,
) -> Result<usize, HeaderError> {
    check_write_data(call, chunks)?;
    // The header length does not depend on the position: size it, encode the message after
    // it, then write the header with the position the message encoding found.
    let hlen = FIXED_HEADER_LEN + call_lists(chunks, None, &[]).buffer_len();
    let (hbuf, mbuf) = split(buf, hlen)?;
    let (mlen, position) = encode_call_message(mbuf, rpc, call)?;
    let header = HeaderRepr {
        xid: rpc.xid,
        credit,
        body: Body::Msg(call_lists(chunks, position, &[])),
    };
    header.emit(hbuf)?;
    Ok(hlen + mlen)
}

/// Encodes an RDMA_MSGP call Send (§3.5, draft-00 only): inline opaque data of at least
/// `thresh` bytes is preceded by pad bytes so it starts on an `align` boundary of the receive
/// buffer (RPCRDMA-15, P-2). Chunked WRITE data is refused (P-3: no read chunks in MSGP).
pub fn encode_padded_call(
    buf: &mut [u8],
    credit: u32,
    rpc: &CallHeader<'_>,
    call: &StorageCall<'_>,
    chunks: &CallChunks,
    align: u32,
    thresh: u32,
) -> Result<usize, HeaderError> {
    if !chunks.write_data.is_empty() {
        return Err(HeaderError::ReadChunkInPaddedMessage);
    }
    check_write_data(call, chunks)?;
    let header = HeaderRepr {
        xid: rpc.xid,
        credit,
        body: Body::MsgP {
            align,
            thresh,
            chunks: chunks.as_lists(),
        },
    };
    let hlen = header.buffer_len();
    let (hbuf, mbuf) = split(buf, hlen)?;
    let mut w = ReducedWriter::new(mbuf).with_padding(Padding {
        align,
        thresh,
        base: hlen as u32,
    });
    rpc.encode(w.xdr())?;
    call.encode(&mut w)?;
    let mlen = w.position();
    header.emit(hbuf)?;
    Ok(hlen + mlen)
}

/// Encodes the (reduced) RPC call message alone into `buf`: the call header, then the
/// arguments. Returns its length and, for WRITE data as [`Payload::ReadChunk`], the data's
/// position (its length word is written, the data is not: the caller sends it after the
/// message, as ONC RPC over TCP does, or RDMA-Reads it). Shared with ONC RPC over TCP.
pub fn encode_call_message(
    buf: &mut [u8],
    rpc: &CallHeader<'_>,
    call: &StorageCall<'_>,
) -> Result<(usize, Option<u32>), HeaderError> {
    let mut w = ReducedWriter::new(buf);
    rpc.encode(w.xdr())?;
    let position = call.encode(&mut w)?;
    Ok((w.position(), position))
}

/// A long call (RPCRDMA-29, planner's [`CallForm::LongCall`](crate::planner::CallForm)):
/// encodes the reduced call message into `message_buf` (memory the client then registers and
/// advertises as `message_segments`, which must total the returned length) and returns that
/// length and the RDMA_NOMSG header to Send: the position-0 chunk first, then the WRITE data's
/// read chunk, write list and reply chunk as for [`encode_call`].
pub fn encode_long_call(
    message_buf: &mut [u8],
    credit: u32,
    rpc: &CallHeader<'_>,
    call: &StorageCall<'_>,
    chunks: &CallChunks,
    message_segments: &[Segment],
) -> Result<(usize, HeaderRepr), HeaderError> {
    check_write_data(call, chunks)?;
    let (mlen, position) = encode_call_message(message_buf, rpc, call)?;
    let header = HeaderRepr {
        xid: rpc.xid,
        credit,
        body: Body::NoMsg(call_lists(chunks, position, message_segments)),
    };
    Ok((mlen, header))
}

/// The length of the long message an RDMA_NOMSG's `chunks` carry (RPCRDMA-29): the sum of
/// the position-0 read segments. Checked against `max` (the receiver's buffer for it) before
/// anything is allocated or read: [`HeaderError::LongMessageTooLong`] above it,
/// [`HeaderError::NoMsgWithoutMessage`] when there is no position-0 chunk. Both are answered
/// with ERR_CHUNK at a server.
pub fn long_message_len(chunks: &ChunkLists, max: u32) -> Result<u32, HeaderError> {
    let mut total = 0u64;
    let mut any = false;
    for r in chunks.reads.iter().take_while(|r| r.position == 0) {
        any = true;
        total += u64::from(r.target.length);
    }
    if !any {
        return Err(HeaderError::NoMsgWithoutMessage);
    }
    u32::try_from(total)
        .ok()
        .filter(|&n| n <= max)
        .ok_or(HeaderError::LongMessageTooLong)
}

fn split(buf: &mut [u8], at: usize) -> Result<(&mut [u8], &mut [u8]), HeaderError> {
    if buf.len() < at {
        return Err(HeaderError::Xdr(XdrError::BufferTooShort));
    }
    Ok(buf.split_at_mut(at))
}

/// A decoded storage call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedCall<'a> {
    /// The RPC call header.
    pub rpc: CallHeader<'a>,
    /// Procedure and arguments; chunked WRITE data is [`Payload::ReadChunk`].
    pub call: StorageCall<'a>,
    /// RPCRDMA-25: the RPC XID differs from the transport XID (which takes precedence).
    pub xid_mismatch: bool,
}

/// Why a call's message was refused, and the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallRejection {
    /// A chunk does not match the message: answer this RDMA_ERROR (ERR_CHUNK).
    Transport(HeaderError),
    /// An RPC-level refusal: send this reply header (no results) in an RDMA_MSG.
    Rpc(ReplyHeader<'static>),
}

/// Decodes the RPC message of a call whose transport `header` passed the chunk rules.
/// `message` is the inline message (RDMA_MSG/MSGP) or the position-0 chunk after the server
/// read it (RDMA_NOMSG long call, RPCRDMA-29).
pub fn decode_call_message<'a>(
    header: &HeaderRepr,
    message: &'a [u8],
) -> Result<DecodedCall<'a>, CallRejection> {
    let empty = ChunkLists::default();
    let chunks = header.body.chunks().unwrap_or(&empty);
    let mut r = ReducedReader::for_call(message, chunks);
    if let Body::MsgP { align, thresh, .. } = header.body {
        r = r.with_padding(Padding {
            align,
            thresh,
            base: header.buffer_len() as u32,
        });
    }
    let (rpc, call) = decode_storage_call(r, header.xid)?;
    Ok(DecodedCall {
        xid_mismatch: rpc.xid != header.xid,
        rpc,
        call,
    })
}

/// Decodes an RPC call of the storage program from `r` (the message from its XID on):
/// header, program, version, procedure and arguments, to the end of the message. A refusal
/// carries the answer, addressed to `xid`. Shared by RPC-over-RDMA (after the transport header)
/// and ONC RPC over TCP (a whole record).
pub fn decode_storage_call<'a>(
    mut r: ReducedReader<'a, '_>,
    xid: u32,
) -> Result<(CallHeader<'a>, StorageCall<'a>), CallRejection> {
    let accepted = |stat| CallRejection::Rpc(ReplyHeader::accepted(xid, stat));
    let rpc = match CallHeader::decode(r.xdr()) {
        Ok(rpc) => rpc,
        Err(RpcError::RpcVersion(_)) => {
            return Err(CallRejection::Rpc(ReplyHeader::rpc_mismatch(xid)))
        }
        Err(_) => return Err(accepted(AcceptStat::GarbageArgs)),
    };
    if rpc.prog != storage::PROGRAM {
        return Err(accepted(AcceptStat::ProgUnavail));
    }
    if rpc.vers != storage::VERSION {
        return Err(accepted(AcceptStat::ProgMismatch {
            low: storage::VERSION,
            high: storage::VERSION,
        }));
    }
    let proc =
        StorageProc::try_from(rpc.proc_num).map_err(|_| accepted(AcceptStat::ProcUnavail))?;
    let call = StorageCall::decode(proc, &mut r)
        .and_then(|call| r.finish().map(|_| call))
        .map_err(|e| match e {
            HeaderError::Xdr(_) => accepted(AcceptStat::GarbageArgs),
            e => CallRejection::Transport(e),
        })?;
    Ok((rpc, call))
}

/// The call's write chunks as echoed in a reply: chunk `used.0` with `used.1` bytes written,
/// all others unused (W-1, W-2). `None` if more was written than advertised (W-3).
pub fn echo_writes(call: &ChunkLists, used: Option<(u32, u32)>) -> Option<Vec<WriteChunk>> {
    call.writes
        .iter()
        .enumerate()
        .map(|(i, c)| match used {
            Some((idx, len)) if idx as usize == i => c.echo(u64::from(len)),
            _ => c.echo(0),
        })
        .collect()
}

/// The write list a reply echoes, after checking the READ data's placement: RPCRDMA-17, with a
/// write chunk the data must go by RDMA Write (inline data is [`HeaderError::ChunkNotUsed`]);
/// an index past the call's write list or more bytes than advertised (W-3) is
/// [`HeaderError::EchoMismatch`].
fn reply_writes(
    call_chunks: &ChunkLists,
    reply: Option<&StorageReply<'_>>,
) -> Result<Vec<WriteChunk>, HeaderError> {
    let used = match reply {
        Some(StorageReply::Read(Ok(ok))) => match ok.data {
            Payload::WriteChunk { index, len } => Some((index, len)),
            Payload::Inline(d) if !d.is_empty() && !call_chunks.writes.is_empty() => {
                return Err(HeaderError::ChunkNotUsed)
            }
            _ => None,
        },
        _ => None,
    };
    if used.is_some_and(|(i, _)| i as usize >= call_chunks.writes.len()) {
        return Err(HeaderError::EchoMismatch);
    }
    echo_writes(call_chunks, used).ok_or(HeaderError::EchoMismatch)
}

/// Encodes the reduced RPC reply message alone (for a reply chunk or a position-0 read chunk);
/// `reply` must be `Some` exactly when `rpc` is SUCCESS. Returns its length.
pub fn encode_reply_message(
    buf: &mut [u8],
    rpc: &ReplyHeader<'_>,
    reply: Option<&StorageReply<'_>>,
) -> Result<usize, HeaderError> {
    if rpc.is_success() != reply.is_some() {
        return Err(HeaderError::Xdr(XdrError::BadDiscriminant));
    }
    let mut w = ReducedWriter::new(buf);
    rpc.encode(w.xdr())?;
    if let Some(r) = reply {
        r.encode(&mut w)?;
    }
    Ok(w.position())
}

/// Encodes an inline reply Send (RDMA_MSG) for a call that advertised `call_chunks`: the write
/// list echoed with rewritten lengths (RPCRDMA-18), no reply chunk, then the message. READ data
/// as [`Payload::WriteChunk`] must already have been RDMA-Written (W-4). Returns the length.
pub fn encode_reply(
    buf: &mut [u8],
    grant: u32,
    call_chunks: &ChunkLists,
    rpc: &ReplyHeader<'_>,
    reply: Option<&StorageReply<'_>>,
) -> Result<usize, HeaderError> {
    let writes = reply_writes(call_chunks, reply)?;
    let header = HeaderRepr {
        xid: rpc.xid,
        credit: grant,
        body: Body::Msg(ChunkLists {
            writes,
            ..ChunkLists::default()
        }),
    };
    let hlen = header.buffer_len();
    let (hbuf, mbuf) = split(buf, hlen)?;
    let mlen = encode_reply_message(mbuf, rpc, reply)?;
    header.emit(hbuf)?;
    Ok(hlen + mlen)
}

/// The RDMA_NOMSG header a server Sends after RDMA-Writing a `message_len`-byte reply into the
/// call's reply chunk (RPCRDMA-30): write list and reply chunk echoed with the bytes written.
/// `None` if the call had no reply chunk or it is too small.
pub fn reply_chunk_header(
    xid: u32,
    grant: u32,
    call_chunks: &ChunkLists,
    reply: Option<&StorageReply<'_>>,
    message_len: u32,
) -> Option<HeaderRepr> {
    let rc = call_chunks.reply.as_ref()?.echo(u64::from(message_len))?;
    Some(HeaderRepr {
        xid,
        credit: grant,
        body: Body::NoMsg(ChunkLists {
            reads: Vec::new(),
            writes: reply_writes(call_chunks, reply).ok()?,
            reply: Some(rc),
        }),
    })
}

/// The RDMA_NOMSG header of a long reply sent as a position-0 read chunk (planner's
/// [`ReplyForm::ReadChunk`](crate::planner::ReplyForm), draft-00): the server registered the
/// encoded reply message ([`encode_reply_message`]) as `message_segments`; the client RDMA-Reads
/// it, decodes it, and sends RDMA_DONE ([`crate::done::done_for_reply`]).
pub fn reply_read_chunk_header(
    xid: u32,
    grant: u32,
    call_chunks: &ChunkLists,
    reply: Option<&StorageReply<'_>>,
    message_segments: &[Segment],
) -> Option<HeaderRepr> {
    Some(HeaderRepr {
        xid,
        credit: grant,
        body: Body::NoMsg(ChunkLists {
            reads: long_message_reads(message_segments),
            writes: reply_writes(call_chunks, reply).ok()?,
            reply: None,
        }),
    })
}

/// A decoded storage reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedReply<'a> {
    /// The RPC reply header.
    pub rpc: ReplyHeader<'a>,
    /// The results, when the call was accepted with SUCCESS. READ data that came by RDMA Write
    /// is [`Payload::WriteChunk`] with the length written.
    pub reply: Option<StorageReply<'a>>,
    /// RPCRDMA-25: the RPC XID differs from the transport XID (which takes precedence: the
    /// reply was matched by the transport XID).
    pub xid_mismatch: bool,
}

/// Decodes a reply's RPC message for a call of `proc` that advertised `call_chunks`. `header`
/// passed the chunk rules; `message` is the inline message, or the reply-chunk contents for a
/// NOMSG reply. Checks the echo of the call's chunks (RPCRDMA-18) and the write-chunk lengths
/// against the length words (RPCRDMA-19).
pub fn decode_reply_message<'a>(
    header: &HeaderRepr,
    message: &'a [u8],
    call_chunks: &ChunkLists,
    proc: StorageProc,
) -> Result<DecodedReply<'a>, HeaderError> {
    let empty = ChunkLists::default();
    let chunks = header.body.chunks().unwrap_or(&empty);
    check_echo(call_chunks, chunks)?;
    let mut r = ReducedReader::for_reply(message, chunks);
    if let Body::MsgP { align, thresh, .. } = header.body {
        r = r.with_padding(Padding {
            align,
            thresh,
            base: header.buffer_len() as u32,
        });
    }
    let rpc = ReplyHeader::decode(r.xdr()).map_err(|e| match e {
        RpcError::Xdr(x) => HeaderError::Xdr(x),
        _ => HeaderError::Xdr(XdrError::BadDiscriminant),
    })?;
    let reply = if rpc.is_success() {
        Some(StorageReply::decode(proc, &mut r)?)
    } else {
        None
    };
    r.finish()?;
    Ok(DecodedReply {
        xid_mismatch: rpc.xid != header.xid,
        rpc,
        reply,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk_rules::Rules;
    use crate::receive::{receive_at_client, receive_at_server, ClientInbound, ServerInbound};
    use crate::storage::{ReadArgs, ReadOk, WriteArgs, WriteOk};

    fn seg(handle: u32, length: u32, offset: u64) -> Segment {
        Segment {
            handle,
            length,
            offset,
        }
    }

    /// Receive path of a server: transport header, then the RPC message.
    fn decode_send(send: &[u8]) -> Result<(HeaderRepr, DecodedCall<'_>), CallRejection> {
        match receive_at_server(send, &Rules::default(), 8) {
            ServerInbound::Call { header, message } => {
                decode_call_message(&header, message).map(|d| (header, d))
            }
            other => panic!("{other:?}"),
        }
    }

    fn server_decode(send: &[u8]) -> (HeaderRepr, DecodedCall<'_>) {
        decode_send(send).unwrap()
    }

    fn encode_plain(buf: &mut [u8], rpc: &CallHeader<'_>, call: &StorageCall<'_>) -> usize {
        encode_call(buf, 1, rpc, call, &CallChunks::default()).unwrap()
    }

    fn client_decode<'a>(
        send: &'a [u8],
        call: &ChunkLists,
        proc: StorageProc,
    ) -> (HeaderRepr, DecodedReply<'a>) {
        match receive_at_client(send, &Rules::default()) {
            ClientInbound::Reply { header, message } => {
                let d = decode_reply_message(&header, message, call, proc).unwrap();
                (header, d)
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rpcrdma_17_read_with_write_chunk_end_to_end() {
        let mut buf = [0u8; 1024];
        let chunks = CallChunks {
            read_result: Some(WriteChunk::new(vec![seg(0x10, 65536, 0x7000_0000)])),
            ..Default::default()
        };
        let call = StorageCall::Read(ReadArgs {
            offset: 4096,
            count: 65536,
        });
        let n = encode_call(
            &mut buf,
            4,
            &call_header(77, StorageProc::Read),
            &call,
            &chunks,
        )
        .unwrap();
        let (h, d) = server_decode(&buf[..n]);
        assert_eq!(d.call, call);
        assert!(!d.xid_mismatch);
        let call_chunks = h.body.chunks().unwrap().clone();
        assert_eq!(call_chunks.writes.len(), 1);

        // Server "RDMA-Writes" 50000 bytes (short read at EOF), then replies.
        let reply = StorageReply::Read(Ok(ReadOk {
            eof: true,
            data: Payload::WriteChunk {
                index: 0,
                len: 50000,
            },
        }));
        let mut out = [0u8; 1024];
        let m = encode_reply(
            &mut out,
            8,
            &call_chunks,
            &ReplyHeader::success(77),
            Some(&reply),
        )
        .unwrap();
        // Header 16 + 4 (no reads) + 4 + 4 + 16 + 4 (write list) + 4 (no reply chunk) = 52;
        // message 24 + status 4 + eof 4 + length word 4 = 36: no data bytes inline.
        assert_eq!(m, 52 + 36);
        let (rh, d) = client_decode(&out[..m], &call_chunks, StorageProc::Read);
        assert_eq!(rh.credit, 8);
        assert_eq!(
            rh.body.chunks().unwrap().writes[0].segments[0].length,
            50000
        );
        assert_eq!(d.reply, Some(reply));
    }

    #[test]
    fn rpcrdma_17_server_cannot_answer_inline_when_a_write_chunk_was_given() {
        let call_chunks = ChunkLists {
            writes: vec![WriteChunk::new(vec![seg(1, 4096, 0)])],
            ..Default::default()
        };
        let inline = StorageReply::Read(Ok(ReadOk {
            eof: false,
            data: Payload::Inline(&[1, 2, 3, 4]),
        }));
        let mut out = [0u8; 256];
        let r = ReplyHeader::success(1);
        assert_eq!(
            encode_reply(&mut out, 1, &call_chunks, &r, Some(&inline)),
            Err(HeaderError::ChunkNotUsed)
        );
        let too_long = StorageReply::Read(Ok(ReadOk {
            eof: false,
            data: Payload::WriteChunk {
                index: 0,
                len: 4097,
            },
        }));
        assert_eq!(
            encode_reply(&mut out, 1, &call_chunks, &r, Some(&too_long)),
            Err(HeaderError::EchoMismatch),
            "W-3: never more than advertised"
        );
        let bad_index = StorageReply::Read(Ok(ReadOk {
            eof: false,
            data: Payload::WriteChunk { index: 1, len: 1 },
        }));
        assert_eq!(
            encode_reply(&mut out, 1, &call_chunks, &r, Some(&bad_index)),
            Err(HeaderError::EchoMismatch)
        );
        // A client seeing inline data where it gave a write chunk flags it (RPCRDMA-19).
        let mut send = [0u8; 256];
        let header = HeaderRepr {
            xid: 1,
            credit: 1,
            body: Body::Msg(ChunkLists {
                writes: echo_writes(&call_chunks, None).unwrap(),
                ..Default::default()
            }),
        };
        let h = header.emit(&mut send).unwrap();
        let m = encode_reply_message(&mut send[h..], &r, Some(&inline)).unwrap();
        let ClientInbound::Reply { header, message } =
            receive_at_client(&send[..h + m], &Rules::default())
        else {
            panic!()
        };
        assert_eq!(
            decode_reply_message(&header, message, &call_chunks, StorageProc::Read),
            Err(HeaderError::LengthMismatch)
        );
    }

    #[test]
    fn rpcrdma_15_padded_write_lands_aligned_and_decodes() {
        for len in [1020usize, 1024, 5000] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let call = StorageCall::Write(WriteArgs {
                offset: 0,
                stable: false,
                data: Payload::Inline(&data),
            });
            let mut buf = vec![0u8; 16384];
            let n = encode_padded_call(
                &mut buf,
                1,
                &call_header(3, StorageProc::Write),
                &call,
                &CallChunks::default(),
                4096,
                1024,
            )
            .unwrap();
            // Where is the data in the receive buffer?
            let at = buf[..n].windows(len).position(|w| w == &data[..]).unwrap();
            assert_eq!(at % 4096 == 0, len >= 1024, "len {len} at {at}");
            let (_, d) = server_decode(&buf[..n]);
            assert_eq!(d.call, call);
        }
        let chunked = CallChunks {
            write_data: vec![seg(1, 8, 0)],
            ..Default::default()
        };
        let w = StorageCall::Write(WriteArgs {
            offset: 0,
            stable: false,
            data: Payload::ReadChunk {
                position: 0,
                len: 8,
            },
        });
        let mut buf = [0u8; 256];
        assert_eq!(
            encode_padded_call(
                &mut buf,
                1,
                &call_header(3, StorageProc::Write),
                &w,
                &chunked,
                4096,
                1024
            ),
            Err(HeaderError::ReadChunkInPaddedMessage)
        );
    }

    #[test]
    fn rpcrdma_16_write_with_read_chunk_end_to_end() {
        let mut buf = [0u8; 1024];
        let chunks = CallChunks {
            write_data: vec![seg(0x20, 32768, 0x1000), seg(0x21, 32768, 0x9000)],
            ..Default::default()
        };
        let call = StorageCall::Write(WriteArgs {
            offset: 0,
            stable: true,
            data: Payload::ReadChunk {
                position: 0,
                len: 65536,
            },
        });
        let n = encode_call(
            &mut buf,
            4,
            &call_header(5, StorageProc::Write),
            &call,
            &chunks,
        )
        .unwrap();
        let (h, d) = server_decode(&buf[..n]);
        // 40 (RPC header) + 8 + 4 + 4 (length word) = 56.
        let c = h.body.chunks().unwrap();
        assert!(c.reads.iter().all(|r| r.position == 56));
        assert_eq!(
            d.call,
            StorageCall::Write(WriteArgs {
                offset: 0,
                stable: true,
                data: Payload::ReadChunk {
                    position: 56,
                    len: 65536
                }
            })
        );
        // Reply: no write list, nothing to echo.
        let reply = StorageReply::Write(Ok(WriteOk {
            count: 65536,
            committed: true,
            verifier: 3,
        }));
        let mut out = [0u8; 256];
        let m = encode_reply(&mut out, 8, c, &ReplyHeader::success(5), Some(&reply)).unwrap();
        let (_, d) = client_decode(&out[..m], c, StorageProc::Write);
        assert_eq!(d.reply, Some(reply));
    }

    #[test]
    fn rpcrdma_13_write_data_length_must_match_segments() {
        let mut buf = [0u8; 1024];
        let chunks = CallChunks {
            write_data: vec![seg(1, 100, 0)],
            ..Default::default()
        };
        let call = StorageCall::Write(WriteArgs {
            offset: 0,
            stable: false,
            data: Payload::ReadChunk {
                position: 0,
                len: 101,
            },
        });
        assert_eq!(
            encode_call(
                &mut buf,
                1,
                &call_header(1, StorageProc::Write),
                &call,
                &chunks
            ),
            Err(HeaderError::LengthMismatch)
        );
        // A peer that lies anyway: tamper the segment length on the wire (bytes 28..32).
        let good = StorageCall::Write(WriteArgs {
            offset: 0,
            stable: false,
            data: Payload::ReadChunk {
                position: 0,
                len: 100,
            },
        });
        let n = encode_call(
            &mut buf,
            1,
            &call_header(1, StorageProc::Write),
            &good,
            &chunks,
        )
        .unwrap();
        buf[28..32].copy_from_slice(&99u32.to_be_bytes());
        // Refused before any RDMA Read: ERR_CHUNK.
        assert_eq!(
            decode_send(&buf[..n]).map(|_| ()),
            Err(CallRejection::Transport(HeaderError::LengthMismatch))
        );
    }

    #[test]
    fn rpc_level_refusals() {
        let mut buf = [0u8; 256];
        let accepted = |stat| Err(CallRejection::Rpc(ReplyHeader::accepted(9, stat)));
        let n = encode_plain(
            &mut buf,
            &CallHeader::new(9, 100003, 3, 1),
            &StorageCall::Null,
        );
        assert_eq!(
            decode_send(&buf[..n]).map(|_| ()),
            accepted(AcceptStat::ProgUnavail)
        );
        let n = encode_plain(
            &mut buf,
            &CallHeader::new(9, storage::PROGRAM, 2, 1),
            &StorageCall::Null,
        );
        assert_eq!(
            decode_send(&buf[..n]).map(|_| ()),
            accepted(AcceptStat::ProgMismatch { low: 1, high: 1 })
        );
        let n = encode_plain(
            &mut buf,
            &CallHeader::new(9, storage::PROGRAM, 1, 42),
            &StorageCall::Null,
        );
        assert_eq!(
            decode_send(&buf[..n]).map(|_| ()),
            accepted(AcceptStat::ProcUnavail)
        );
        // Truncated READ arguments: GARBAGE_ARGS.
        let read = StorageCall::Read(ReadArgs {
            offset: 1,
            count: 2,
        });
        let n = encode_plain(&mut buf, &call_header(9, StorageProc::Read), &read);
        assert_eq!(
            decode_send(&buf[..n - 4]).map(|_| ()),
            accepted(AcceptStat::GarbageArgs)
        );
        // rpcvers 3: MSG_DENIED / RPC_MISMATCH(2, 2).
        let n = encode_plain(
            &mut buf,
            &call_header(9, StorageProc::Null),
            &StorageCall::Null,
        );
        let hlen = HeaderRepr::parse_bytes(&buf[..n]).unwrap().0.buffer_len();
        buf[hlen + 8..hlen + 12].copy_from_slice(&3u32.to_be_bytes());
        assert_eq!(
            decode_send(&buf[..n]).map(|_| ()),
            Err(CallRejection::Rpc(ReplyHeader::rpc_mismatch(9)))
        );
    }

    #[test]
    fn rpcrdma_25_xid_mismatch_is_flagged_and_header_xid_wins() {
        let mut buf = [0u8; 256];
        let n = encode_call(
            &mut buf,
            1,
            &call_header(10, StorageProc::Getattr),
            &StorageCall::Getattr,
            &CallChunks::default(),
        )
        .unwrap();
        buf[0..4].copy_from_slice(&11u32.to_be_bytes());
        let (h, d) = server_decode(&buf[..n]);
        assert_eq!(h.xid, 11);
        assert!(d.xid_mismatch);
    }

    #[test]
    fn rpcrdma_25_reply_xid_mismatch_is_flagged_and_header_xid_wins() {
        let mut out = [0u8; 256];
        let none = ChunkLists::default();
        let m = encode_reply(
            &mut out,
            1,
            &none,
            &ReplyHeader::success(20),
            Some(&StorageReply::Null),
        )
        .unwrap();
        let (_, d) = client_decode(&out[..m], &none, StorageProc::Null);
        assert!(!d.xid_mismatch);
        // The RPC reply's XID is the first word after the 28-byte transport header.
        out[28..32].copy_from_slice(&21u32.to_be_bytes());
        let (h, d) = client_decode(&out[..m], &none, StorageProc::Null);
        assert_eq!(h.xid, 20);
        assert!(d.xid_mismatch);
    }

    #[test]
    fn rpcrdma_30_long_reply_through_reply_chunk() {
        let call_chunks = ChunkLists {
            reply: Some(WriteChunk::new(vec![seg(5, 4096, 0), seg(6, 4096, 4096)])),
            ..Default::default()
        };
        let data = vec![0xabu8; 5000];
        let reply = StorageReply::Read(Ok(ReadOk {
            eof: false,
            data: Payload::Inline(&data),
        }));
        let mut msg = vec![0u8; 8192];
        let mlen = encode_reply_message(&mut msg, &ReplyHeader::success(3), Some(&reply)).unwrap();
        let h = reply_chunk_header(3, 2, &call_chunks, Some(&reply), mlen as u32).unwrap();
        assert_eq!(h.body.proc(), crate::header::Proc::NoMsg);
        let send = h.to_vec();
        // Client: NOMSG header, the reply chunk says how long the message is.
        let ClientInbound::Reply { header, message } = receive_at_client(&send, &Rules::default())
        else {
            panic!()
        };
        assert!(message.is_empty());
        let len = crate::chunk_rules::reply_chunk_len(header.body.chunks().unwrap()).unwrap();
        assert_eq!(len, mlen as u64);
        let d =
            decode_reply_message(&header, &msg[..mlen], &call_chunks, StorageProc::Read).unwrap();
        assert_eq!(d.reply, Some(reply));
        // Too small a reply chunk: no header (the caller must fall back).
        assert!(reply_chunk_header(3, 2, &call_chunks, Some(&reply), 9000).is_none());
    }

    #[test]
    fn rpcrdma_29_long_message_len_is_bounded_before_anything_is_read() {
        let seg = |position, length| ReadSegment {
            position,
            target: Segment {
                handle: 1,
                length,
                offset: 0,
            },
        };
        let lists = |reads| ChunkLists {
            reads,
            ..ChunkLists::default()
        };
        // Position-0 entries add up; the WRITE data's chunk after them does not count.
        let c = lists(vec![seg(0, 100), seg(0, 60), seg(52, 4096)]);
        assert_eq!(long_message_len(&c, 160), Ok(160));
        assert_eq!(
            long_message_len(&c, 159),
            Err(HeaderError::LongMessageTooLong)
        );
        // Sums past u32 do not wrap.
        let huge = lists(vec![seg(0, u32::MAX), seg(0, u32::MAX)]);
        assert_eq!(
            long_message_len(&huge, u32::MAX),
            Err(HeaderError::LongMessageTooLong)
        );
        assert_eq!(
            long_message_len(&lists(vec![seg(52, 10)]), 100),
            Err(HeaderError::NoMsgWithoutMessage)
        );
        assert_eq!(
            HeaderError::LongMessageTooLong.response(),
            crate::error::ErrorResponse::ErrChunk
        );
    }

    #[test]
    fn rpcrdma_29_long_call_decodes_from_the_position_zero_chunk() {
        let mut msg = [0u8; 256];
        let data_seg = seg(0x30, 8192, 0x9000);
        let call = StorageCall::Write(WriteArgs {
            offset: 4,
            stable: false,
            data: Payload::ReadChunk {
                position: 0,
                len: 8192,
            },
        });
        let chunks = CallChunks {
            write_data: vec![data_seg],
            ..Default::default()
        };
        let (mlen, header) = encode_long_call(
            &mut msg,
            2,
            &call_header(44, StorageProc::Write),
            &call,
            &chunks,
            &[seg(0x31, 56, 0)],
        )
        .unwrap();
        assert_eq!(mlen, 56);
        let send = header.to_vec();
        let ServerInbound::Call { header, message } =
            receive_at_server(&send, &Rules::default(), 1)
        else {
            panic!("long call refused")
        };
        assert!(message.is_empty());
        let c = header.body.chunks().unwrap();
        assert_eq!(c.reads[0].position, 0);
        assert_eq!(c.read_chunk_at(0).unwrap().total_len(), mlen as u64);
        // The server RDMA-Reads the position-0 chunk, then decodes it as if inline.
        let d = decode_call_message(&header, &msg[..mlen]).unwrap();
        assert_eq!(
            d.call,
            StorageCall::Write(WriteArgs {
                offset: 4,
                stable: false,
                data: Payload::ReadChunk {
                    position: 56,
                    len: 8192
                }
            })
        );
    }

    #[test]
    fn rpcrdma_30_long_reply_as_position_zero_read_chunk_then_done() {
        let call_chunks = ChunkLists::default();
        let reply = StorageReply::Getattr(Ok(crate::storage::GetattrOk {
            size: 1,
            block_size: 2,
            max_io: 3,
            verifier: 4,
        }));
        let mut msg = [0u8; 128];
        let mlen = encode_reply_message(&mut msg, &ReplyHeader::success(8), Some(&reply)).unwrap();
        let h = reply_read_chunk_header(
            8,
            2,
            &call_chunks,
            Some(&reply),
            &[seg(0x77, mlen as u32, 0)],
        )
        .unwrap();
        let send = h.to_vec();
        let ClientInbound::Reply { header, .. } = receive_at_client(&send, &Rules::default())
        else {
            panic!()
        };
        let d = decode_reply_message(&header, &msg[..mlen], &call_chunks, StorageProc::Getattr)
            .unwrap();
        assert_eq!(d.reply, Some(reply));
        assert_eq!(
            crate::done::done_for_reply(&header, 3),
            Some(HeaderRepr::done(8, 3))
        );
    }

    #[test]
    fn call_shape_matches_the_encodings() {
        let data = [0u8; 12];
        let calls = [
            (StorageCall::Null, StorageReply::Null),
            (
                StorageCall::Read(ReadArgs {
                    offset: 1,
                    count: 12,
                }),
                StorageReply::Read(Ok(ReadOk {
                    eof: true,
                    data: Payload::Inline(&data),
                })),
            ),
            (
                StorageCall::Write(WriteArgs {
                    offset: 1,
                    stable: true,
                    data: Payload::Inline(&data),
                }),
                StorageReply::Write(Ok(WriteOk {
                    count: 12,
                    committed: true,
                    verifier: 1,
                })),
            ),
            (
                StorageCall::Commit(crate::storage::CommitArgs {
                    offset: 0,
                    count: 0,
                }),
                StorageReply::Commit(Ok(crate::storage::CommitOk { verifier: 1 })),
            ),
            (
                StorageCall::Getattr,
                StorageReply::Getattr(Ok(crate::storage::GetattrOk {
                    size: 1,
                    block_size: 1,
                    max_io: 1,
                    verifier: 1,
                })),
            ),
        ];
        for (call, reply) in calls {
            let shape = call_shape(call.proc(), 12);
            let mut buf = [0u8; 256];
            let n = encode_call(
                &mut buf,
                1,
                &call_header(1, call.proc()),
                &call,
                &CallChunks::default(),
            )
            .unwrap();
            let inline_arg = if shape.bulk_arg > 0 { 12 } else { 0 };
            assert_eq!(n as u32, 28 + shape.message_len + inline_arg, "{call:?}");
            let m = encode_reply_message(&mut buf, &ReplyHeader::success(1), Some(&reply)).unwrap();
            let inline_res = if shape.bulk_result > 0 { 12 } else { 0 };
            assert_eq!(m as u32, shape.reply_len + inline_res, "{reply:?}");
        }
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        fn segments(total_max: u32) -> impl Strategy<Value = Vec<Segment>> {
            proptest::collection::vec((1u32..total_max, any::<u32>(), any::<u64>()), 1..5).prop_map(
                |v| {
                    v.into_iter()
                        .map(|(length, handle, offset)| Segment {
                            handle,
                            length,
                            offset,
                        })
                        .collect()
                },
            )
        }

        proptest! {
            /// RPCRDMA-13, -14, -16: a WRITE whose data is split over any read segments
            /// round-trips through the wire with the data at its position and the sum checked.
            #[test]
            fn chunked_write_roundtrip(segs in segments(1 << 18), offset in any::<u64>(), stable in any::<bool>(), xid in any::<u32>()) {
                let len: u32 = segs.iter().map(|s| s.length).sum();
                let chunks = CallChunks { write_data: segs.clone(), ..Default::default() };
                let call = StorageCall::Write(WriteArgs { offset, stable, data: Payload::ReadChunk { position: 0, len } });
                let mut buf = [0u8; 1024];
                let n = encode_call(&mut buf, 3, &call_header(xid, StorageProc::Write), &call, &chunks).unwrap();
                let (h, d) = server_decode(&buf[..n]);
                prop_assert_eq!(&h.body.chunks().unwrap().reads.iter().map(|r| r.target).collect::<Vec<_>>(), &segs);
                prop_assert_eq!(d.call, StorageCall::Write(WriteArgs { offset, stable, data: Payload::ReadChunk { position: 56, len } }));
            }

            /// RPCRDMA-31: the whole receive path (header, rules, RPC, arguments, results)
            /// never panics on valid Sends with random bytes changed or cut off.
            #[test]
            fn receive_path_never_panics_on_mutated_sends(
                which in 0usize..3,
                muts in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
                cut in any::<usize>(),
            ) {
                let seg = Segment { handle: 9, length: 4096, offset: 0x1000 };
                let mut buf = [0u8; 512];
                let n = match which {
                    0 => encode_call(&mut buf, 1, &call_header(1, StorageProc::Write),
                        &StorageCall::Write(WriteArgs { offset: 1, stable: true, data: Payload::ReadChunk { position: 0, len: 4096 } }),
                        &CallChunks { write_data: vec![seg], ..Default::default() }).unwrap(),
                    1 => encode_call(&mut buf, 1, &call_header(2, StorageProc::Read),
                        &StorageCall::Read(ReadArgs { offset: 1, count: 4096 }),
                        &CallChunks { read_result: Some(WriteChunk::new(vec![seg])), reply_chunk: Some(WriteChunk::new(vec![seg])), ..Default::default() }).unwrap(),
                    _ => encode_reply(&mut buf, 1, &ChunkLists { writes: vec![WriteChunk::new(vec![seg])], ..Default::default() },
                        &ReplyHeader::success(3),
                        Some(&StorageReply::Read(Ok(ReadOk { eof: true, data: Payload::WriteChunk { index: 0, len: 100 } })))).unwrap(),
                };
                let mut send = buf[..n].to_vec();
                for (i, v) in muts {
                    let len = send.len();
                    send[i % len] = v;
                }
                send.truncate(cut % (n + 1));
                if let ServerInbound::Call { header, message } = receive_at_server(&send, &Rules::default(), 1) {
                    let _ = decode_call_message(&header, message);
                }
                for p in [StorageProc::Read, StorageProc::Getattr] {
                    if let ClientInbound::Reply { header, message } = receive_at_client(&send, &Rules::default()) {
                        let call = ChunkLists { writes: vec![WriteChunk::new(vec![seg])], ..Default::default() };
                        let _ = decode_reply_message(&header, message, &call, p);
                    }
                }
            }

            /// RPCRDMA-17, -18, -19: a READ written partly into a multi-segment write chunk
            /// round-trips with the echo filled in order and the length equal to the echo sum.
            #[test]
            fn chunked_read_reply_roundtrip(segs in segments(1 << 18), frac in 0.0f64..=1.0, xid in any::<u32>()) {
                let total: u32 = segs.iter().map(|s| s.length).sum();
                let written = (f64::from(total) * frac) as u32;
                let call_chunks = ChunkLists { writes: vec![WriteChunk::new(segs)], ..Default::default() };
                let reply = StorageReply::Read(Ok(ReadOk { eof: written < total, data: Payload::WriteChunk { index: 0, len: written } }));
                let mut out = [0u8; 1024];
                let m = encode_reply(&mut out, 5, &call_chunks, &ReplyHeader::success(xid), Some(&reply)).unwrap();
                let (h, d) = client_decode(&out[..m], &call_chunks, StorageProc::Read);
                prop_assert_eq!(h.body.chunks().unwrap().writes[0].total_len(), u64::from(written));
                prop_assert_eq!(d.reply, Some(reply));
            }
        }
    }
}
