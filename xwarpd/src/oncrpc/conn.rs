//! One ONC RPC over TCP connection, served on its own thread, one call at a time.
//!
//! Calls come as records (RFC 5531 §11, reassembled up to the service's `max_record`); each is
//! decoded with the storage program's own XDR (`rpcrdma`: the same procedures, arguments and
//! results as over RPC-over-RDMA, with every opaque inline) and answered with one record.
//! Credentials: AUTH_NONE and AUTH_SYS (a well-formed body) are accepted, anything else is
//! denied with AUTH_ERROR / AUTH_BADCRED (RFC 5531 §9).
//!
//! With the TCP RDMA option negotiated, every reply's record mark starts a segment marked A
//! (TCPRDMA-23), and a READ reply's data is a transfer of RID `0 << 32 | XID` (draft §5.1.1:
//! one operation per call, operation index 0; U = 0, TCPRDMA-20; the total known, so the
//! 20-octet form) whose buffer offset is the offset within the READ data. A failed READ sends
//! a zero-length transfer (TCPRDMA-21) so the client can release its buffer.
//!
//! Bounds: the connection's only buffers are one record in and one reply out (at most
//! `max_record` and `max_io` plus headers); a record longer than `max_record` closes the
//! connection before its octets are read; no call for `idle_timeout` closes it (counted). It
//! also closes when the service's gate gives its slot to a new client (it was silent while
//! the service was full).

use std::io;
use std::time::{Duration, Instant};

use rpcrdma::auth::{AuthSys, AUTH_NONE, AUTH_SYS};
use rpcrdma::rpc::{msg_type, peek_xid_and_type, RejectStat, ReplyStat};
use rpcrdma::storage::{
    CommitOk, GetattrOk, ReadOk, StorageCall, StorageReply, StoreStatus, WriteArgs, WriteOk,
};
use rpcrdma::storage_send::{decode_storage_call, encode_reply_message, CallRejection};
use rpcrdma::xdr::padded_len;
use rpcrdma::{ChunkLists, Payload, ReducedReader, ReplyHeader};

use super::read_rid;
use super::record::{single_fragment_mark, RecordError, RecordReader};
use super::server::TcpCtx;
use super::stream::{is_timeout, RpcStream, Transfer};
use crate::store::admission::Slot;
use crate::store::extent::{read_extent, write_extent};
use crate::store::fair_share::EVICTED;
use crate::store::stats::ConnGuard;
use crate::store::BLOCK_SIZE;

/// How often a waiting read wakes to check the stop flag and the idle timeout.
const POLL: Duration = Duration::from_millis(100);
/// RFC 5531 `auth_stat` AUTH_BADCRED.
const AUTH_BADCRED: u32 = 1;
/// Room for an encoded reply without its READ data (header with verifier, results).
const REPLY_HEAD: usize = 128;

/// Serves `stream` while it holds `slot`: until the peer closes, an error, the idle timeout,
/// the slot going to a new client or the service's stop.
pub(crate) fn serve(stream: Box<dyn RpcStream>, ctx: &TcpCtx, slot: Slot) {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    let stats = ctx.stats.add_conn(peer.clone());
    tracing::info!(%peer, "store TCP connection up");
    let mut conn = TcpConn {
        stream: Watched {
            inner: stream,
            idle_since: Instant::now(),
            idle_timeout: ctx.opts.idle_timeout,
            ctx_stop: ctx.stop.clone(),
            slot,
        },
        records: RecordReader::default(),
        inbuf: Vec::new(),
        out: Vec::new(),
        stats,
    };
    let why = conn.run(ctx);
    tracing::info!(%peer, reason = why, "store TCP connection closed");
}

/// The stream with the waits made bounded: a read wakes every [`POLL`] to check the stop
/// flag and the slot, and fails with `TimedOut` once no call has come for the idle timeout.
/// Octets read count as activity of the slot.
struct Watched {
    inner: Box<dyn RpcStream>,
    idle_since: Instant,
    idle_timeout: Duration,
    ctx_stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    slot: Slot,
}

/// Why a watched read gave up.
const STOPPED: &str = "server stopping";

impl RpcStream for Watched {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.inner.read(buf) {
                Err(e) if is_timeout(&e) => {}
                Ok(n) => {
                    if n > 0 {
                        self.slot.touch();
                    }
                    return Ok(n);
                }
                r => return r,
            }
            if self.ctx_stop.load(std::sync::atomic::Ordering::Acquire) {
                return Err(io::Error::other(STOPPED));
            }
            if self.slot.is_evicted() {
                return Err(io::Error::other(EVICTED));
            }
            if self.idle_since.elapsed() >= self.idle_timeout {
                return Err(io::Error::from(io::ErrorKind::TimedOut));
            }
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.inner.write_all(buf)
    }
    fn set_read_timeout(&mut self, t: Option<Duration>) -> io::Result<()> {
        self.inner.set_read_timeout(t)
    }
    fn peer_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.inner.peer_addr()
    }
    fn option(&mut self) -> Option<&mut dyn super::stream::TransferOption> {
        self.inner.option()
    }
}

struct TcpConn {
    stream: Watched,
    records: RecordReader,
    inbuf: Vec<u8>,
    out: Vec<u8>,
    stats: ConnGuard,
}

/// What a served call answers.
enum Answer {
    /// A reply without bulk data.
    Plain(StorageReply<'static>),
    /// A successful READ: `len` octets of the file from `from`.
    Read { from: usize, len: u32, eof: bool },
}

impl TcpConn {
    fn run(&mut self, ctx: &TcpCtx) -> &'static str {
        if self.stream.set_read_timeout(Some(POLL)).is_err() {
            return "cannot set a read timeout";
        }
        loop {
            self.stream.idle_since = Instant::now();
            let max = ctx.opts.max_record();
            match self
                .records
                .read_record(&mut self.stream, &mut self.inbuf, max)
            {
                Ok(()) => {}
                Err(RecordError::Closed) => return "peer closed",
                Err(RecordError::TooLong) => {
                    self.stats.count_refused();
                    return "record over the bound";
                }
                Err(RecordError::Truncated) => return "peer closed inside a record",
                Err(RecordError::Io(e)) if e.kind() == io::ErrorKind::TimedOut => {
                    ctx.stats.count_idle_closed();
                    return "idle timeout";
                }
                Err(RecordError::Io(e)) if e.to_string() == STOPPED => return STOPPED,
                Err(RecordError::Io(e)) if e.to_string() == EVICTED => return EVICTED,
                Err(RecordError::Io(_)) => return "read failed",
            }
            self.stream.slot.set_busy(true);
            let answered = self.answer(ctx);
            self.stream.slot.set_busy(false);
            if let Err(why) = answered {
                return why;
            }
        }
    }

    /// Decodes the record in `inbuf` and sends its answer.
    fn answer(&mut self, ctx: &TcpCtx) -> Result<(), &'static str> {
        let Ok((xid, mtype)) = peek_xid_and_type(&self.inbuf) else {
            self.stats.count_refused();
            return Err("record too short for an RPC message");
        };
        if mtype != msg_type::CALL {
            // RFC 5531 §9: a server only takes calls; nothing sensible to answer.
            self.stats.count_refused();
            return Err("not a CALL");
        }
        let lists = ChunkLists::default();
        let inbuf = std::mem::take(&mut self.inbuf);
        let r = ReducedReader::for_call(&inbuf, &lists);
        let outcome = match decode_storage_call(r, xid) {
            Ok((rpc, call)) if !credentials_ok(rpc.cred.flavor, rpc.cred.body) => {
                let _ = call;
                Err(ReplyHeader {
                    xid,
                    stat: ReplyStat::Denied(RejectStat::AuthError(AUTH_BADCRED)),
                })
            }
            Ok((_, call)) => Ok(call),
            Err(CallRejection::Rpc(h)) => Err(h),
            // No chunks over TCP: any other refusal is malformed arguments.
            Err(CallRejection::Transport(_)) => {
                Err(ReplyHeader::accepted(xid, rpcrdma::AcceptStat::GarbageArgs))
            }
        };
        let sent = match outcome {
            Err(header) => {
                self.stats.count_refused();
                self.send_plain(&header, None, None)
            }
            Ok(call) => {
                self.stats.count_call(&call);
                let answer = run_call(ctx, &call, &self.stats);
                self.send(ctx, xid, &call, answer)
            }
        };
        self.inbuf = inbuf;
        sent
    }

    /// Sends the answer to call `xid`.
    fn send(
        &mut self,
        ctx: &TcpCtx,
        xid: u32,
        call: &StorageCall<'_>,
        answer: Answer,
    ) -> Result<(), &'static str> {
        let ok = ReplyHeader::success(xid);
        match answer {
            Answer::Plain(reply) => {
                // A READ that failed: a zero-length transfer releases the client's buffer.
                let empty = matches!(call, StorageCall::Read(_)).then_some(xid);
                self.send_plain(&ok, Some(&reply), empty)
            }
            Answer::Read { from, len, eof } => {
                let reply = StorageReply::Read(Ok(ReadOk {
                    eof,
                    // Only the length word: the data follows from the file.
                    data: Payload::WriteChunk { index: 0, len },
                }));
                let head = self.encode(&ok, Some(&reply))?;
                let data_at = self.out.len();
                let end = data_at + padded_len(len as usize);
                self.out.resize(end, 0);
                let r = ctx.store.file.region();
                r.read(from, &mut self.out[data_at..data_at + len as usize])
                    .ok_or("reading the store failed")?;
                self.stats.add_read(u64::from(len));
                self.finish_record(head)?;
                self.mark(Some((xid, data_at as u64, len)))?;
                self.stream.write_all(&self.out).map_err(|_| "write failed")
            }
        }
    }

    /// Sends a reply without bulk data; `empty_read` marks a zero-length transfer of READ
    /// call `xid` at its start.
    fn send_plain(
        &mut self,
        rpc: &ReplyHeader<'_>,
        reply: Option<&StorageReply<'_>>,
        empty_read: Option<u32>,
    ) -> Result<(), &'static str> {
        let head = self.encode(rpc, reply)?;
        self.finish_record(head)?;
        self.mark(empty_read.map(|xid| (xid, 0, 0)))?;
        self.stream.write_all(&self.out).map_err(|_| "write failed")
    }

    /// Encodes the record mark's place and the reply header and results into `out`; returns
    /// where the record's body starts.
    fn encode(
        &mut self,
        rpc: &ReplyHeader<'_>,
        reply: Option<&StorageReply<'_>>,
    ) -> Result<usize, &'static str> {
        self.out.clear();
        self.out.resize(4 + REPLY_HEAD, 0);
        let n = encode_reply_message(&mut self.out[4..], rpc, reply)
            .map_err(|_| "cannot encode a reply")?;
        self.out.truncate(4 + n);
        Ok(4)
    }

    /// Writes the record mark for everything in `out` after `body_at`.
    fn finish_record(&mut self, body_at: usize) -> Result<(), &'static str> {
        let len = u32::try_from(self.out.len() - body_at).map_err(|_| "reply too long")?;
        self.out[..4].copy_from_slice(&single_fragment_mark(len));
        Ok(())
    }

    /// With the option negotiated: A on the record's first segment and, for a READ reply,
    /// the transfer (RID, data at `at` in the record, `len` octets; `len` 0: zero-length).
    fn mark(&mut self, read: Option<(u32, u64, u32)>) -> Result<(), &'static str> {
        let Some(o) = self.stream.option() else {
            return Ok(());
        };
        let start = o.send_position();
        o.mark_message_start(start)
            .map_err(|_| "cannot mark the record start")?;
        if let Some((xid, at, len)) = read {
            let t = Transfer {
                rid: read_rid(0, xid),
                buffer_offset: 0,
                total: Some(len),
                unsolicited: false,
            };
            o.mark_transfer(start + at, len, t)
                .map_err(|_| "cannot mark the READ data")?;
        }
        Ok(())
    }
}

/// AUTH_NONE, or AUTH_SYS with a body that decodes.
fn credentials_ok(flavor: u32, body: &[u8]) -> bool {
    match flavor {
        AUTH_NONE => true,
        AUTH_SYS => AuthSys::decode(body).is_ok(),
        _ => false,
    }
}

/// Runs `call` against the store.
fn run_call(ctx: &TcpCtx, call: &StorageCall<'_>, stats: &ConnGuard) -> Answer {
    let file = &ctx.store.file;
    let size = file.len();
    let verifier = ctx.store.verifier;
    let failed = |s: StoreStatus, r: fn(StoreStatus) -> StorageReply<'static>| {
        stats.count_error();
        Answer::Plain(r(s))
    };
    match *call {
        StorageCall::Null => Answer::Plain(StorageReply::Null),
        StorageCall::Getattr => Answer::Plain(StorageReply::Getattr(Ok(GetattrOk {
            size,
            block_size: BLOCK_SIZE,
            max_io: ctx.opts.max_io.max(1),
            verifier,
        }))),
        StorageCall::Commit(a) => match file.sync(a.offset, u64::from(a.count)) {
            Ok(()) => Answer::Plain(StorageReply::Commit(Ok(CommitOk { verifier }))),
            Err(_) => failed(StoreStatus::Io, |s| StorageReply::Commit(Err(s))),
        },
        StorageCall::Read(a) => {
            let fail = |s| StorageReply::Read(Err(s));
            let (n, eof) = match read_extent(size, ctx.opts.max_io, a) {
                Ok(x) => x,
                Err(s) => return failed(s, fail),
            };
            match file.range(a.offset, n) {
                Some(r) => Answer::Read {
                    from: r.start,
                    len: n,
                    eof,
                },
                None => failed(StoreStatus::Io, fail),
            }
        }
        StorageCall::Write(WriteArgs {
            offset,
            stable,
            data,
        }) => {
            let fail = |s| StorageReply::Write(Err(s));
            let Payload::Inline(d) = data else {
                return failed(StoreStatus::Inval, fail);
            };
            let len = d.len() as u32;
            if let Err(s) = write_extent(size, ctx.opts.max_io, offset, len) {
                return failed(s, fail);
            }
            let Some(at) = file.range(offset, len) else {
                return failed(StoreStatus::OutOfRange, fail);
            };
            if file.region().write(at.start, d).is_none() {
                return failed(StoreStatus::Io, fail);
            }
            if stable && file.sync(offset, u64::from(len)).is_err() {
                return failed(StoreStatus::Io, fail);
            }
            stats.add_written(u64::from(len));
            Answer::Plain(StorageReply::Write(Ok(WriteOk {
                count: len,
                committed: stable,
                verifier,
            })))
        }
    }
}
