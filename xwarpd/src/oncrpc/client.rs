//! The store's client over ONC RPC on TCP: the same calls as [`crate::store::StoreClient`]
//! (READ, WRITE, COMMIT, GETATTR; one at a time), over any [`RpcStream`].
//!
//! With the TCP RDMA option negotiated on the stream, a READ registers its buffer under
//! RID `0 << 32 | XID` before the call goes out, so the reply's data is placed as its segments
//! arrive (even out of order); reading the reply then skips the octets already placed
//! (counted as copies avoided). WRITE data is marked as an unsolicited transfer (U = 1,
//! TCPRDMA-22) of RID `XID`. Without the option (a kernel socket, or a peer that did not
//! offer it) the same calls copy from the stream.

use std::net::SocketAddr;
use std::time::Duration;

use rpcrdma::rpc::CallHeader;
use rpcrdma::storage::{CommitArgs, ReadArgs, StorageCall, StorageProc, StorageReply, WriteArgs};
use rpcrdma::storage_send::{call_header, encode_call_message};
use rpcrdma::xdr::padded_len;
use rpcrdma::{ChunkLists, Payload, ReducedReader, ReplyHeader, Segment, WriteChunk};

use super::read_rid;
use super::record::{single_fragment_mark, RecordError, RecordReader};
use super::stream::{RpcStream, Transfer};
use crate::store::{Attributes, ReadResult, StoreError, WriteResult};

/// Room for a call without its WRITE data (header with AUTH_SYS credentials, arguments).
const CALL_HEAD: usize = 1024;
/// Largest reply header (verifier body at most 400 octets) with results, READ data aside.
const REPLY_HEAD_MAX: usize = 512;

/// How a TCP client behaves.
#[derive(Debug, Clone)]
pub struct TcpClientOptions {
    /// How long one call may wait for its reply.
    pub call_timeout: Duration,
}

impl Default for TcpClientOptions {
    fn default() -> Self {
        Self {
            call_timeout: Duration::from_secs(30),
        }
    }
}

/// What the client's READs did with their data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpClientCounters {
    /// READ data octets received.
    pub bytes_read: u64,
    /// READ data octets registered for placement (RID buffers offered).
    pub bytes_expected: u64,
    /// READ data octets not copied because the stream had placed them (TCP RDMA option).
    pub copies_avoided: u64,
    /// READ calls whose buffer was registered by RID.
    pub placed_reads: u64,
}

/// A store client over a byte stream.
pub struct TcpStoreClient {
    stream: Box<dyn RpcStream>,
    records: RecordReader,
    next_xid: u32,
    out: Vec<u8>,
    head: Vec<u8>,
    counters: TcpClientCounters,
}

impl std::fmt::Debug for TcpStoreClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpStoreClient")
            .field("next_xid", &self.next_xid)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl TcpStoreClient {
    /// Connects over kernel TCP.
    pub fn connect_kernel(addr: SocketAddr, opts: &TcpClientOptions) -> Result<Self, StoreError> {
        let s = std::net::TcpStream::connect_timeout(&addr, opts.call_timeout)?;
        s.set_nodelay(true)?;
        Self::over(Box::new(s), opts)
    }

    /// Connects over our own TCP through `device` (xdp transport), offering the TCP RDMA
    /// option when `tcp_rdma` (it is used when the server offers it too).
    pub fn connect_xdp(
        device: &dataplane::Device,
        addr: SocketAddr,
        tcp_rdma: bool,
        opts: &TcpClientOptions,
    ) -> Result<Self, StoreError> {
        let s = super::xdp::connect(device, addr, tcp_rdma)?;
        Self::over(Box::new(s), opts)
    }

    /// A client on an open stream.
    pub fn over(
        mut stream: Box<dyn RpcStream>,
        opts: &TcpClientOptions,
    ) -> Result<Self, StoreError> {
        stream.set_read_timeout(Some(opts.call_timeout))?;
        Ok(Self {
            stream,
            records: RecordReader::default(),
            next_xid: 1,
            out: Vec::new(),
            head: Vec::with_capacity(REPLY_HEAD_MAX),
            counters: TcpClientCounters::default(),
        })
    }

    /// True when the stream negotiated the TCP RDMA option.
    pub fn placement(&mut self) -> bool {
        self.stream.option().is_some()
    }

    /// What READs did with their data so far.
    pub fn counters(&self) -> TcpClientCounters {
        self.counters
    }

    /// The stream's own count of octets not copied (the connection total), when it has the
    /// option.
    pub fn stream_copies_avoided(&mut self) -> Option<u64> {
        self.stream.option().map(|o| o.copies_avoided())
    }

    /// GETATTR.
    pub fn getattr(&mut self) -> Result<Attributes, StoreError> {
        match self.call_plain(&StorageCall::Getattr)? {
            StorageReply::Getattr(r) => r.map_err(StoreError::Status),
            _ => Err(StoreError::Rpc("reply of another procedure".into())),
        }
    }

    /// COMMIT of `[offset, offset + count)` (`count` 0: to the end); the server's verifier.
    pub fn commit(&mut self, offset: u64, count: u32) -> Result<u64, StoreError> {
        match self.call_plain(&StorageCall::Commit(CommitArgs { offset, count }))? {
            StorageReply::Commit(r) => r.map(|ok| ok.verifier).map_err(StoreError::Status),
            _ => Err(StoreError::Rpc("reply of another procedure".into())),
        }
    }

    /// WRITE of `data` at `offset` (`stable`: durable before the reply).
    pub fn write(
        &mut self,
        offset: u64,
        data: &[u8],
        stable: bool,
    ) -> Result<WriteResult, StoreError> {
        let len = u32::try_from(data.len()).map_err(|_| StoreError::Invalid("data too long"))?;
        let call = StorageCall::Write(WriteArgs {
            offset,
            stable,
            // Only the length word is encoded; the data follows from `data`.
            data: Payload::ReadChunk { position: 0, len },
        });
        let xid = self.send_call(&call, Some(data))?;
        match self.reply_plain(xid, StorageProc::Write)? {
            StorageReply::Write(r) => r
                .map(|ok| WriteResult {
                    count: ok.count,
                    committed: ok.committed,
                    verifier: ok.verifier,
                })
                .map_err(StoreError::Status),
            _ => Err(StoreError::Rpc("reply of another procedure".into())),
        }
    }

    /// READ of `count` octets at `offset` into `buf` (resized to `count`; the data is its
    /// first `len` octets).
    pub fn read(
        &mut self,
        offset: u64,
        buf: &mut Vec<u8>,
        count: u32,
    ) -> Result<ReadResult, StoreError> {
        buf.resize(count as usize, 0);
        let xid = self.next_xid;
        let rid = read_rid(0, xid);
        let placed = match self.stream.option() {
            Some(o) if count > 0 => {
                o.expect_transfer(rid, std::mem::take(buf))?;
                true
            }
            _ => false,
        };
        let call = StorageCall::Read(ReadArgs { offset, count });
        let r = self
            .send_call(&call, None)
            .and_then(|xid| self.read_reply(xid, rid, placed, buf, count));
        if placed {
            // The buffer comes back whatever happened (a failed READ: a zero-length transfer).
            if let Some(t) = self.stream.option().and_then(|o| o.take_transfer(rid)) {
                *buf = t.buf;
            }
        }
        r
    }

    /// Encodes and sends a call (with `data` after its message: WRITE data); returns its XID.
    fn send_call(
        &mut self,
        call: &StorageCall<'_>,
        data: Option<&[u8]>,
    ) -> Result<u32, StoreError> {
        let xid = self.next_xid;
        self.next_xid = self.next_xid.wrapping_add(1).max(1);
        let rpc: CallHeader<'_> = call_header(xid, call.proc());
        self.out.clear();
        self.out.resize(4 + CALL_HEAD, 0);
        let (n, _) = encode_call_message(&mut self.out[4..], &rpc, call)
            .map_err(|_| StoreError::Invalid("cannot encode the call"))?;
        self.out.truncate(4 + n);
        let data = data.unwrap_or(&[]);
        let pad = padded_len(data.len()) - data.len();
        let len = u32::try_from(n + data.len() + pad)
            .map_err(|_| StoreError::Invalid("call too long"))?;
        self.out[..4].copy_from_slice(&single_fragment_mark(len));
        if let Some(o) = self.stream.option() {
            // U = 1 on WRITE data (TCPRDMA-22); A on the call's first segment.
            let start = o.send_position();
            o.mark_message_start(start)?;
            if !data.is_empty() {
                let t = Transfer {
                    rid: u64::from(xid),
                    buffer_offset: 0,
                    total: Some(data.len() as u32),
                    unsolicited: true,
                };
                o.mark_transfer(start + self.out.len() as u64, data.len() as u32, t)?;
            }
        }
        self.stream.write_all(&self.out)?;
        if !data.is_empty() {
            self.stream.write_all(data)?;
            self.stream.write_all(&[0u8; 3][..pad])?;
        }
        Ok(xid)
    }

    fn call_plain(&mut self, call: &StorageCall<'_>) -> Result<StorageReply<'static>, StoreError> {
        let xid = self.send_call(call, None)?;
        self.reply_plain(xid, call.proc())
    }

    /// Reads a whole reply record of a call without bulk data and decodes its results.
    fn reply_plain(
        &mut self,
        xid: u32,
        proc: StorageProc,
    ) -> Result<StorageReply<'static>, StoreError> {
        let mut rec = std::mem::take(&mut self.head);
        let r = self
            .records
            .read_record(self.stream.as_mut(), &mut rec, REPLY_HEAD_MAX as u32)
            .map_err(record_error)
            .and_then(|()| decode_plain(&rec, xid, proc));
        self.head = rec;
        r
    }

    /// Reads the reply of READ `xid`: the header and results from the stream, then the data
    /// into `buf` (or, with placement, through the stream's transfer read, which skips what
    /// was placed).
    fn read_reply(
        &mut self,
        xid: u32,
        rid: u64,
        placed: bool,
        buf: &mut [u8],
        count: u32,
    ) -> Result<ReadResult, StoreError> {
        let mut head = std::mem::take(&mut self.head);
        let result = self
            .records
            .begin(self.stream.as_mut())
            .map_err(record_error)
            .and_then(|()| read_head(&mut self.records, self.stream.as_mut(), &mut head))
            .and_then(|data_len| decode_read_head(&head, xid, data_len, count));
        self.head = head;
        let (len, eof) = match result {
            Ok(x) => x,
            Err(e) => {
                let _ = self.records.skip_rest(self.stream.as_mut());
                return Err(e);
            }
        };
        self.read_data(rid, placed, buf, len)?;
        let pad = padded_len(len as usize) - len as usize;
        let mut p = [0u8; 3];
        self.records
            .read_exact(self.stream.as_mut(), &mut p[..pad])
            .map_err(record_error)?;
        if !self.records.at_boundary() {
            self.records
                .skip_rest(self.stream.as_mut())
                .map_err(record_error)?;
            return Err(StoreError::Rpc("READ reply longer than its data".into()));
        }
        self.counters.bytes_read += u64::from(len);
        Ok(ReadResult { len, eof })
    }

    /// Reads `len` octets of READ data: straight into `dst`, or with placement through the
    /// stream's transfer read into the RID's buffer (`dst` is then empty: the stream holds it).
    fn read_data(
        &mut self,
        rid: u64,
        placed: bool,
        dst: &mut [u8],
        len: u32,
    ) -> Result<(), StoreError> {
        if !placed {
            return self
                .records
                .read_exact(self.stream.as_mut(), &mut dst[..len as usize])
                .map_err(record_error);
        }
        self.counters.placed_reads += 1;
        self.counters.bytes_expected += u64::from(len);
        let total = len;
        let mut done = 0u32;
        while done < total {
            let run = self
                .records
                .next_run(self.stream.as_mut(), total - done)
                .map_err(record_error)?;
            let o = self.stream.option().ok_or(StoreError::Disconnected)?;
            let before = o.copies_avoided();
            let n = o.read_transfer(rid, done, run)?;
            if n == 0 {
                return Err(StoreError::Disconnected);
            }
            self.counters.copies_avoided += o.copies_avoided().saturating_sub(before);
            self.records.consumed(n);
            done += n;
        }
        Ok(())
    }
}

/// Reads the head of a READ reply (everything before its data) into `head`, word by word as
/// its fields say; returns the data's length word (0 when the reply carries no data).
fn read_head(
    rec: &mut RecordReader,
    s: &mut dyn RpcStream,
    head: &mut Vec<u8>,
) -> Result<u32, StoreError> {
    head.clear();
    let mut take = |n: usize, head: &mut Vec<u8>| -> Result<u32, StoreError> {
        if head.len() + n > REPLY_HEAD_MAX {
            return Err(StoreError::Rpc("reply header too long".into()));
        }
        let at = head.len();
        head.resize(at + n, 0);
        rec.read_exact(s, &mut head[at..]).map_err(record_error)?;
        let w = &head[head.len() - 4..];
        Ok(u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
    };
    // xid, msg_type, reply_stat
    if take(12, head)? != 0 {
        // MSG_DENIED: reject_stat, then RPC_MISMATCH's range or AUTH_ERROR's auth_stat.
        let n = if take(4, head)? == 0 { 8 } else { 4 };
        take(n, head)?;
        return Ok(0);
    }
    // Verifier flavor and length, its body, accept_stat.
    let vlen = take(8, head)? as usize;
    match take(padded_len(vlen.min(REPLY_HEAD_MAX)) + 4, head)? {
        0 => {}
        // PROG_MISMATCH: the supported range.
        2 => return take(8, head).map(|_| 0),
        _ => return Ok(0),
    }
    // READ status; when OK, eof and the data's length word.
    if take(4, head)? != 0 {
        return Ok(0);
    }
    take(8, head)
}

fn record_error(e: RecordError) -> StoreError {
    match e {
        RecordError::Io(e) if super::stream::is_timeout(&e) => StoreError::Timeout,
        RecordError::Io(e) => StoreError::Io(e),
        RecordError::TooLong => StoreError::Rpc("reply record over the bound".into()),
        RecordError::Closed | RecordError::Truncated => StoreError::Disconnected,
    }
}

/// Checks the reply header of call `xid`; `Err` for a denied or unsuccessful reply.
fn check_header(r: &mut ReducedReader<'_, '_>, xid: u32) -> Result<(), StoreError> {
    let h = ReplyHeader::decode(r.xdr()).map_err(|e| StoreError::Rpc(e.to_string()))?;
    if h.xid != xid {
        return Err(StoreError::Rpc(format!(
            "reply to XID {} for call {xid}",
            h.xid
        )));
    }
    if !h.is_success() {
        return Err(StoreError::Rpc(format!("{:?}", h.stat)));
    }
    Ok(())
}

/// Decodes a whole reply record of call `xid` of `proc` (no bulk data).
fn decode_plain(
    rec: &[u8],
    xid: u32,
    proc: StorageProc,
) -> Result<StorageReply<'static>, StoreError> {
    let lists = ChunkLists::default();
    let mut r = ReducedReader::for_reply(rec, &lists);
    check_header(&mut r, xid)?;
    let reply = StorageReply::decode(proc, &mut r).map_err(|e| StoreError::Rpc(e.to_string()))?;
    if !r.finish().is_ok_and(|rest| rest.is_empty()) {
        return Err(StoreError::Rpc("trailing octets in the reply".into()));
    }
    // Only READ borrows (its data); plain replies own everything.
    Ok(match reply {
        StorageReply::Null => StorageReply::Null,
        StorageReply::Write(w) => StorageReply::Write(w),
        StorageReply::Commit(c) => StorageReply::Commit(c),
        StorageReply::Getattr(g) => StorageReply::Getattr(g),
        StorageReply::Read(_) => return Err(StoreError::Rpc("unexpected READ reply".into())),
    })
}

/// Decodes the head of a READ reply (everything up to its data) with the storage program's
/// XDR: the data, not in `head`, resolves like a write chunk of `data_len` octets would. Returns
/// the data length and eof; the data must fit the `count` asked for.
fn decode_read_head(
    head: &[u8],
    xid: u32,
    data_len: u32,
    count: u32,
) -> Result<(u32, bool), StoreError> {
    let lists = ChunkLists {
        writes: vec![WriteChunk::new(vec![Segment {
            handle: 0,
            length: data_len,
            offset: 0,
        }])],
        ..Default::default()
    };
    let mut r = ReducedReader::for_reply(head, &lists);
    check_header(&mut r, xid)?;
    match StorageReply::decode(StorageProc::Read, &mut r) {
        Ok(StorageReply::Read(Ok(ok))) if ok.data.len() <= count => Ok((ok.data.len(), ok.eof)),
        Ok(StorageReply::Read(Ok(_))) => Err(StoreError::Rpc("more READ data than asked".into())),
        Ok(StorageReply::Read(Err(s))) => Err(StoreError::Status(s)),
        Ok(_) => Err(StoreError::Rpc("reply of another procedure".into())),
        Err(e) => Err(StoreError::Rpc(e.to_string())),
    }
}
