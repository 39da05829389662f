//! The DDP/RDMAP engine of one stream, at the ULPDU level (below it MPA frames ULPDUs into FPDUs;
//! see [`crate::qp`] for the MPA-framed queue pair the transports drive).
//!
//! Transmit: work requests are cut into DDP segments no larger than MULPDU
//! ([`poll_ulpdu`](RdmapEngine::poll_ulpdu)); Read Responses are generated from local memory
//! when a Read Request is delivered; a Terminate preempts everything after an error.
//!
//! Receive: [`handle_ulpdu`](RdmapEngine::handle_ulpdu) validates (-06 §7.1) and places a
//! segment at once, even out of order (-06 §5.3, DDP-55); what must happen in stream order
//! (completions, Read Responses, invalidation, Terminate, errors) is recorded by stream position
//! and done by [`deliver_through`](RdmapEngine::deliver_through) once the transport says every
//! earlier ULPDU has been handed over (DDP-18, DDP-58, DDP-60).
//!
//! Completions come out in posting order per queue (send queue, receive queue). A buffer
//! posted for sending (Send, Write, or served by a Read) must stay unchanged until its
//! completion: the transmit path reads it when it frames, and again for a retransmission.
//!
//! Files: this one holds the state, posting and error handling; `transmit.rs` segmentation and
//! acknowledgement, `placement.rs` validation and placement, `pending.rs` the records waiting
//! for delivery, `delivery.rs` in-order delivery, `rtr.rs` the negotiated read depths and
//! peer-to-peer mode's ready-to-receive message.

use std::collections::VecDeque;

use mpa::{RtrType, Spacing};

use crate::ddp::error::DdpError;
use crate::ddp::header_error::DdpHeaderError;
use crate::ddp::memory::{Memory, RegionHandle};
use crate::ddp::rx_segment::{gather_prefix, RxSegment, HEAD_MAX};
use crate::ddp::segment::{DdpPacket, DdpRepr};
use crate::ddp::segmentation::next_segment;
use crate::ddp::stag::Stag;
use crate::ddp::stag_table::{
    Access, InvalidateFault, PdId, Region, StagTable, StreamId, TaggedFault,
};
use crate::ddp::tagged::{TaggedPacket, TaggedRepr, TAGGED_HEADER_LEN};
use crate::ddp::tx_segment::{TxPayload, TxSegment};
use crate::ddp::untagged::{UntaggedRepr, UNTAGGED_HEADER_LEN};
use crate::rdmap::completion::{WcOpcode, WcStatus, WorkCompletion};
use crate::rdmap::completion_ring::{CompletionRing, KeyedCompletion};
use crate::rdmap::control::{qn, RdmapControl, RdmapOpcode};
use crate::rdmap::header_error::RdmapHeaderError;
use crate::rdmap::read_request::{ReadRequestPacket, ReadRequestRepr, READ_REQUEST_HEADER_LEN};
use crate::rdmap::term_code::{RdmapError, TermCode};
use crate::rdmap::terminate::{
    TerminatePacket, TerminateRepr, TerminatedDdpHeader, TERMINATE_HEADER_MAX_LEN,
};
use crate::rdmap::work_request::{LocalBuf, WorkRequest, WorkRequestError, WorkRequestKind};

mod delivery;
mod half_close;
mod pending;
mod placement;
mod rtr;
mod transmit;

pub(crate) use transmit::SegmentRun;

/// Settings of the per-stream RDMAP engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RdmapConfig {
    /// This stream's identifier, for STag stream association (DDP-87).
    pub stream: StreamId,
    /// This stream's protection domain (DDP-86).
    pub pd: PdId,
    /// Inbound RDMA Read queue depth: Read Requests we accept outstanding; a peer with more
    /// gets a Terminate (0x0/0x2/0x07, see `placement.rs`).
    pub ird: u32,
    /// Outbound RDMA Read queue depth: Read Requests we keep outstanding at most (never more
    /// than the peer's IRD once MPA Rev 2 negotiated it); later ones wait in order.
    pub ord: u32,
    /// Largest ULPDU (DDP segment) the LLP takes, header included (DDP-02, DDP-41).
    pub mulpdu: usize,
}

impl Default for RdmapConfig {
    fn default() -> Self {
        RdmapConfig {
            stream: StreamId(0),
            pd: PdId(0),
            ird: 16,
            ord: 16,
            mulpdu: 1448 - 6,
        }
    }
}

/// Smallest MULPDU the engine accepts: a Terminate must fit (18 + 52 = 70 octets).
pub const MIN_MULPDU: usize = UNTAGGED_HEADER_LEN + TERMINATE_HEADER_MAX_LEN;

/// The engine's state: active, or in error after a fatal error (DDP -06 §6.2.2, §7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RdmapState {
    /// Data flows both ways.
    Active,
    /// An error was detected or reported: receive drops everything (DDP-82), work requests are
    /// flushed, and at most the Terminate goes out (DDP-83). Teardown is the ULP's call (DDP-75).
    Error,
}

/// Things the ULP should know about besides completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RdmapEvent {
    /// We detected an error and queued this Terminate (it is also reported when sent).
    TerminateQueued(TerminateRepr),
    /// The Terminate left in a ULPDU; nothing more will be sent.
    TerminateSent(TerminateRepr),
    /// The peer's Terminate was delivered; the stream is in error.
    TerminateReceived(TerminateRepr),
    /// A Terminate arrived that could not be parsed; the stream is in error.
    MalformedTerminateReceived,
    /// The transport failed (for example the MPA layer or TCP); the stream is in error.
    TransportFailed,
}

/// Counters, for tests and diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RdmapStats {
    /// ULPDUs produced.
    pub tx_ulpdus: u64,
    /// ULPDUs handed in.
    pub rx_ulpdus: u64,
    /// Of `rx_ulpdus`: in-order ULPDUs placed and delivered on the fast path
    /// ([`RdmapEngine::handle_ulpdu_in_order`] with nothing waiting for delivery).
    pub rx_ulpdus_fast: u64,
    /// Payload octets placed into memory.
    pub rx_placed_octets: u64,
    /// ULPDUs dropped because the stream is in error (DDP-82) or already delivered.
    pub rx_dropped: u64,
    /// Of `rx_dropped`: ULPDUs dropped because the stream had entered error (DDP-82), however
    /// they arrived (in order, or out of order after an error found out of order).
    pub rx_dropped_after_error: u64,
    /// ULPDUs handed in after the peer's half-close (DDP-68: the stream was torn down).
    pub rx_after_peer_close: u64,
    /// ULPDUs dropped because the ULP had closed the stream ([`RdmapEngine::shutdown`]).
    pub rx_after_close: u64,
    /// Segments whose data was dropped because the receive buffer or Read sink they were for
    /// had been deregistered.
    pub rx_region_gone: u64,
    /// Work requests flushed at framing because their region had been deregistered.
    pub tx_region_gone: u64,
    /// Read Requests beyond our IRD (answered with a Terminate).
    pub rx_ird_exceeded: u64,
    /// Ready-to-receive messages of peer-to-peer mode consumed (RFC 6581).
    pub rx_rtr: u64,
}

#[derive(Debug, Clone, Copy)]
enum TxHeader {
    Tagged {
        opcode: RdmapOpcode,
        stag: Stag,
        to: u64,
    },
    Untagged {
        opcode: RdmapOpcode,
        qn: u32,
        msn: u32,
        inv: u32,
    },
}

#[derive(Debug, Clone, Copy)]
enum TxSource {
    Region {
        region: RegionHandle,
        offset: u64,
    },
    /// A small payload carried inline, sent in one segment: the Read Request in
    /// `read_request_out`, the Terminate in `terminate_repr`, or zero octets. Kept out of the
    /// message, which every Send and Write copies.
    Inline,
}

#[derive(Debug, Clone, Copy)]
enum TxAfter {
    /// A Send or Write: completes when the transport acknowledges its last octet.
    AwaitAck { seq: u64 },
    /// A Read Request: takes an ORD slot when it starts; completes when the Read Response's
    /// last segment is delivered. It waits in `reads_queued` until it starts.
    ReadRequest,
    /// A Read Response: frees an IRD slot.
    ResponseSent,
    /// The zero-length Send or Write RTR message of peer-to-peer mode: nothing completes.
    Rtr,
    /// The Terminate (what it says is in `terminate_repr`).
    Terminate,
}

#[derive(Debug, Clone, Copy)]
struct TxMsg {
    header: TxHeader,
    source: TxSource,
    total: u32,
    sent: u32,
    after: TxAfter,
}

#[derive(Debug, Clone, Copy)]
struct SqEntry {
    wr_id: u64,
    opcode: WcOpcode,
    byte_len: u32,
    status: Option<WcStatus>,
    /// Stream offset whose acknowledgement completes a Send/Write.
    ack_at: Option<u64>,
}

#[derive(Debug, Clone, Copy)]
struct RqEntry {
    wr_id: u64,
    buf: LocalBuf,
}

/// A Read Request in `sq_pending`: what it asks for and its ORQ entry once it starts.
#[derive(Debug, Clone, Copy)]
struct ReadQueued {
    req: ReadRequestRepr,
    entry: OrqEntry,
}

#[derive(Debug, Clone, Copy)]
struct OrqEntry {
    /// The Read's send-queue entry (`None`: the RTR Read, which completes nothing).
    seq: Option<u64>,
    /// The Data Sink the Read Request named: a Read Response may only target it (`None`: a
    /// zero-length Read, which places nothing).
    sink: Option<SinkRange>,
}

/// The Data Sink of an outstanding RDMA Read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SinkRange {
    stag: Stag,
    to: u64,
    size: u32,
    /// The registration the Read was posted on: once it is gone, the Read Response lands
    /// nowhere and the Read completes flushed.
    region: RegionHandle,
}

impl SinkRange {
    /// Whether `len` octets at `to` lie inside the requested sink.
    fn covers(&self, to: u64, len: u64) -> bool {
        to >= self.to
            && to
                .checked_add(len)
                .is_some_and(|end| end <= self.to.saturating_add(u64::from(self.size)))
    }
}

/// What must happen in stream order for a ULPDU already placed.
#[derive(Debug, Clone, Copy)]
enum RxRecord {
    /// The L segment of a Send family message on QN 0.
    SendLast {
        msn: u32,
        len: u32,
        opcode: RdmapOpcode,
        inv: Stag,
        seg: Offending,
    },
    /// A Read Request on QN 1.
    ReadRequest {
        msn: u32,
        req: ReadRequestRepr,
        seg: Offending,
    },
    /// The L segment of a Read Response.
    ReadResponseLast { seg: Offending },
    /// A Terminate on QN 2 (None: malformed).
    Terminate(Option<TerminateRepr>),
    /// A validation error: send this Terminate.
    Error(TerminateRepr),
}

/// The DDP header and length of a placed segment, kept in case its delivery fails
/// (they go into the Terminate, DDP-81).
#[derive(Debug, Clone, Copy)]
struct Offending {
    hdr: TerminatedDdpHeader,
    seg_len: u16,
}

impl Offending {
    /// Inlined: it runs for the last segment of every message received.
    #[inline]
    fn of(seg: RxSegment<'_>) -> Option<Offending> {
        Some(Offending {
            hdr: TerminatedDdpHeader::from_segment(seg.head())?,
            seg_len: seg.len().min(usize::from(u16::MAX)) as u16,
        })
    }

    fn terminate(
        self,
        code: TermCode,
        rdma_header: Option<[u8; READ_REQUEST_HEADER_LEN]>,
    ) -> TerminateRepr {
        TerminateRepr {
            code,
            seg_len: Some(self.seg_len),
            ddp_header: Some(self.hdr),
            rdma_header,
        }
    }
}

/// The DDP/RDMAP engine of one stream. See the module documentation.
#[derive(Debug)]
pub struct RdmapEngine {
    cfg: RdmapConfig,
    state: RdmapState,
    /// The ULP asked for a graceful close: posts are refused.
    closing: bool,
    /// The ULP closed the stream for good ([`RdmapEngine::shutdown`]): nothing is placed.
    shut: bool,
    /// The peer half-closed its side (DDP-69): nothing more arrives; we may still send.
    peer_closed: bool,
    /// Stream position of the first receive error found (maybe out of order, not yet
    /// delivered): nothing after it is placed (DDP-82).
    rx_error_at: Option<u64>,
    // transmit
    sq_pending: VecDeque<TxMsg>,
    responses: VecDeque<TxMsg>,
    /// The Read Requests in `sq_pending`, in the same order.
    reads_queued: VecDeque<ReadQueued>,
    /// The Read Request last started: the payload of `current` when that is one.
    read_request_out: Option<ReadRequestRepr>,
    terminate: Option<TxMsg>,
    /// What the queued (or sent) Terminate says.
    terminate_repr: Option<TerminateRepr>,
    current: Option<TxMsg>,
    terminate_sent: bool,
    tx_msn: [u32; 3],
    /// A message ended in the last ULPDU: waits for `ulpdu_framed` to learn its stream end.
    just_finished: Option<u64>,
    // send queue completions (posting order)
    sq: VecDeque<SqEntry>,
    sq_base_seq: u64,
    orq: VecDeque<OrqEntry>,
    // receive
    rq: VecDeque<RqEntry>,
    rq_first_msn: u32,
    rr_next_msn: u32,
    irq_in_use: u32,
    /// Peer-to-peer mode, Responder: the ready-to-receive message still to come. A Send RTR
    /// (zero-length, MSN 1) is consumed without a receive buffer; a Write or Read RTR is an
    /// ordinary zero-length message, only counted.
    rtr_expected: Option<RtrType>,
    term_next_msn: u32,
    records: pending::Pending<RxRecord>,
    delivered_through: u64,
    /// The window of the last RDMA Write STag the in-order shortcut checked.
    last_write: Option<placement::WriteTargetCache>,
    /// Completions waiting, each with `completion_key`.
    completions: CompletionRing<KeyedCompletion>,
    /// What the owner set to tell its queue pairs' completions apart.
    completion_key: u64,
    events: VecDeque<RdmapEvent>,
    stats: RdmapStats,
}

impl RdmapEngine {
    /// Sets the protection domain tagged accesses are checked against.
    pub fn set_pd(&mut self, pd: PdId) {
        self.cfg.pd = pd;
        self.last_write = None;
    }

    /// A new engine; MSNs start at 1 on every queue (DDP-36). `cfg.mulpdu` is raised to
    /// [`MIN_MULPDU`] if smaller.
    pub fn new(mut cfg: RdmapConfig) -> Self {
        cfg.mulpdu = cfg.mulpdu.max(MIN_MULPDU);
        RdmapEngine {
            cfg,
            state: RdmapState::Active,
            closing: false,
            shut: false,
            rx_error_at: None,
            peer_closed: false,
            sq_pending: VecDeque::new(),
            responses: VecDeque::new(),
            reads_queued: VecDeque::new(),
            read_request_out: None,
            terminate: None,
            terminate_repr: None,
            current: None,
            terminate_sent: false,
            tx_msn: [1; 3],
            just_finished: None,
            sq: VecDeque::new(),
            sq_base_seq: 0,
            orq: VecDeque::new(),
            rq: VecDeque::new(),
            rq_first_msn: 1,
            rr_next_msn: 1,
            irq_in_use: 0,
            rtr_expected: None,
            term_next_msn: 1,
            records: pending::Pending::default(),
            delivered_through: 0,
            last_write: None,
            completions: CompletionRing::default(),
            completion_key: 0,
            events: VecDeque::new(),
            stats: RdmapStats::default(),
        }
    }

    /// Settings in force.
    pub fn config(&self) -> &RdmapConfig {
        &self.cfg
    }

    /// Current state.
    pub fn state(&self) -> RdmapState {
        self.state
    }

    /// Counters.
    pub fn stats(&self) -> RdmapStats {
        self.stats
    }

    /// Change MULPDU for segments not yet produced (DDP-02, DDP-03).
    pub fn set_mulpdu(&mut self, mulpdu: usize) {
        self.cfg.mulpdu = mulpdu.max(MIN_MULPDU);
    }

    /// Test hook for MSN wrap (DDP-37): set the next transmit MSN of QN 0 and the next expected
    /// receive MSN of QN 0. Call before any Send on either side.
    #[doc(hidden)]
    pub fn set_send_msn_for_test(&mut self, next_tx: u32, next_rx: u32) {
        self.tx_msn[qn::SEND as usize] = next_tx;
        self.rq_first_msn = next_rx;
    }

    // ----------------------------------------------------------------------------------------
    // Posting work

    fn push_sq(&mut self, wr_id: u64, opcode: WcOpcode, byte_len: u32) -> u64 {
        let seq = self.sq_base_seq + self.sq.len() as u64;
        self.sq.push_back(SqEntry {
            wr_id,
            opcode,
            byte_len,
            status: None,
            ack_at: None,
        });
        seq
    }

    fn next_msn(&mut self, queue: u32) -> u32 {
        take_msn(&mut self.tx_msn, queue)
    }

    /// Refuse work unless active and `buf` passes the table's local check for `need`.
    fn check_post<'t>(
        &self,
        tags: &'t StagTable,
        buf: LocalBuf,
        need: Access,
    ) -> Result<&'t Region, WorkRequestError> {
        if self.state != RdmapState::Active {
            return Err(WorkRequestError::InvalidState);
        }
        tags.check_local(buf.region, buf.offset, u64::from(buf.len), need)
            .map_err(WorkRequestError::Local)
    }

    /// Queue a Send or Write whose payload is `buf`; it completes on acknowledgement.
    fn queue_from_region(&mut self, wr_id: u64, wc: WcOpcode, buf: LocalBuf, header: TxHeader) {
        let seq = self.push_sq(wr_id, wc, buf.len);
        self.sq_pending.push_back(TxMsg {
            header,
            source: TxSource::Region {
                region: buf.region,
                offset: buf.offset,
            },
            total: buf.len,
            sent: 0,
            after: TxAfter::AwaitAck { seq },
        });
    }

    /// Post a work request. It is checked at once (the queue pair accepts work, the local
    /// buffer passes the STag table's local check) and refused with nothing queued otherwise.
    /// - `Recv` needs local write; it is consumed by the next Send in MSN order.
    /// - `Send` (Send, with SE, with Invalidate, with SE and Invalidate) and `Write` complete
    ///   once the transport acknowledges their last octet.
    /// - `Read` needs local write; the Read Request names the region's current STag and TO as
    ///   the Data Sink. At most ORD Read Requests are outstanding; later ones wait in the send
    ///   queue. It completes when the Read Response's last segment is delivered.
    ///
    /// After [`close`](Self::close) only receives are taken, after
    /// [`shutdown`](Self::shutdown) nothing (DDP-67). After the peer's half-close
    /// ([`peer_half_closed`](Self::peer_half_closed)) receives and Reads complete flushed at
    /// once; Sends and Writes go on.
    ///
    /// Deregistering a region does not wait for the work posted on it: each request keeps its
    /// region's [`RegionHandle`] (slot and generation), and when the engine reaches it after the
    /// region was deregistered, it completes with [`WcStatus::Flushed`] and touches no memory: a
    /// receive when its Send is delivered (the Send's data is dropped), a Read when its Response
    /// is delivered (the Response's data is dropped), a Send or Write when it would be framed.
    /// The stream goes on, except when a message is cut in the middle (a region gone while its
    /// Send, Write or Read Response was partly sent): then a Terminate (RDMAP catastrophic
    /// error) ends the stream, as the peer could not make sense of the rest.
    pub fn post(&mut self, tags: &StagTable, wr: WorkRequest) -> Result<(), WorkRequestError> {
        let need = match wr.kind {
            WorkRequestKind::Recv { .. } | WorkRequestKind::Read { .. } => Access::LOCAL_WRITE,
            WorkRequestKind::Send { .. } | WorkRequestKind::Write { .. } => Access::default(),
        };
        if self.shut || (self.closing && !matches!(wr.kind, WorkRequestKind::Recv { .. })) {
            return Err(WorkRequestError::InvalidState); // DDP-67
        }
        let region = self.check_post(tags, wr.local(), need)?;
        if self.flush_if_peer_closed(&wr) {
            return Ok(());
        }
        let wr_id = wr.wr_id;
        match wr.kind {
            WorkRequestKind::Recv { local } => self.rq.push_back(RqEntry { wr_id, buf: local }),
            WorkRequestKind::Send { local, opts } => {
                let opcode = match (opts.solicited, opts.invalidate.is_some()) {
                    (false, false) => RdmapOpcode::Send,
                    (false, true) => RdmapOpcode::SendInvalidate,
                    (true, false) => RdmapOpcode::SendSe,
                    (true, true) => RdmapOpcode::SendSeInvalidate,
                };
                let header = TxHeader::Untagged {
                    opcode,
                    qn: qn::SEND,
                    msn: 0,
                    inv: opts.invalidate.unwrap_or_default().0,
                };
                self.queue_from_region(wr_id, WcOpcode::Send, local, header);
            }
            WorkRequestKind::Write { local, remote } => {
                let header = TxHeader::Tagged {
                    opcode: RdmapOpcode::RdmaWrite,
                    stag: remote.stag,
                    to: remote.to,
                };
                self.queue_from_region(wr_id, WcOpcode::Write, local, header);
            }
            WorkRequestKind::Read { local, remote } => {
                let req = ReadRequestRepr {
                    sink_stag: region.stag,
                    sink_to: region.spec.base_to.wrapping_add(local.offset),
                    size: local.len,
                    src_stag: remote.stag,
                    src_to: remote.to,
                };
                self.queue_read_request(wr_id, req, local.region);
            }
        }
        Ok(())
    }

    /// Queue the Read Request `req` whose Data Sink is in `region`; it completes when its Read
    /// Response has been delivered.
    fn queue_read_request(&mut self, wr_id: u64, req: ReadRequestRepr, region: RegionHandle) {
        let seq = self.push_sq(wr_id, WcOpcode::Read, req.size);
        self.reads_queued.push_back(ReadQueued {
            req,
            entry: OrqEntry {
                seq: Some(seq),
                sink: Some(SinkRange {
                    stag: req.sink_stag,
                    to: req.sink_to,
                    size: req.size,
                    region,
                }),
            },
        });
        self.sq_pending.push_back(TxMsg {
            header: TxHeader::Untagged {
                opcode: RdmapOpcode::RdmaReadRequest,
                qn: qn::READ_REQUEST,
                msn: 0,
                inv: 0,
            },
            source: TxSource::Inline,
            total: READ_REQUEST_HEADER_LEN as u32,
            sent: 0,
            after: TxAfter::ReadRequest,
        });
    }

    /// Enter the error state: receive drops everything, outstanding requests are flushed.
    fn enter_error(&mut self) {
        if self.state == RdmapState::Error {
            return;
        }
        self.state = RdmapState::Error;
        self.records.clear();
        self.sq_pending.clear();
        self.reads_queued.clear();
        self.responses.clear();
        self.current = None;
        self.orq.clear();
        for e in self.sq.iter_mut() {
            if e.status.is_none() {
                e.status = Some(WcStatus::Flushed);
            }
        }
        self.drain_sq();
        self.flush_rq();
    }

    /// Every posted receive completes flushed.
    fn flush_rq(&mut self) {
        let key = self.completion_key;
        for r in self.rq.drain(..) {
            let wc = WorkCompletion {
                wr_id: r.wr_id,
                opcode: WcOpcode::Recv,
                status: WcStatus::Flushed,
                byte_len: 0,
                invalidated: None,
                solicited: false,
            };
            self.completions.push((key, wc));
        }
    }

    /// A local error: queue the one Terminate (DDP-83) and enter the error state.
    fn fail_stream(&mut self, t: TerminateRepr) {
        if self.state == RdmapState::Error {
            return;
        }
        self.enter_error();
        let (_, len) = t.to_bytes();
        let msn = self.next_msn(qn::TERMINATE);
        self.terminate = Some(TxMsg {
            header: TxHeader::Untagged {
                opcode: RdmapOpcode::Terminate,
                qn: qn::TERMINATE,
                msn,
                inv: 0,
            },
            source: TxSource::Inline,
            total: len as u32,
            sent: 0,
            after: TxAfter::Terminate,
        });
        self.terminate_repr = Some(t);
        self.events.push_back(RdmapEvent::TerminateQueued(t));
    }

    /// The ULP or the transport reports a fatal error with this code: a Terminate carrying it
    /// is queued (for example an MPA CRC error, LLP 0x2/0x0/0x02) and the stream enters error.
    pub fn terminate_with(&mut self, code: TermCode) {
        self.fail_stream(TerminateRepr {
            code,
            seg_len: None,
            ddp_header: None,
            rdma_header: None,
        });
    }

    /// The transport is gone (connection lost): report it, flush everything; nothing can be sent.
    pub fn transport_failed(&mut self) {
        if self.state == RdmapState::Active {
            self.events.push_back(RdmapEvent::TransportFailed);
        }
        self.abort();
    }

    /// Abortive teardown requested by the ULP (DDP-75): flush everything, send nothing more,
    /// no event.
    pub fn abort(&mut self) {
        self.enter_error();
        self.terminate = None;
        self.terminate_sent = true;
    }

    /// Graceful close by the ULP (DDP-66, DDP-67): later posts are refused; what is queued
    /// still goes out, and reception stays enabled (DDP-71). See [`is_idle`](Self::is_idle).
    pub fn close(&mut self) {
        self.closing = true;
    }

    /// The ULP closes the stream for good (the verbs API's queue-pair close): posts are refused
    /// from now on (DDP-67), and nothing reaches the ULP's memory any more. Every posted receive
    /// and every RDMA Read (sent or queued) completes flushed at once; ULPDUs that arrive later
    /// are dropped and counted ([`RdmapStats::rx_after_close`]): Read Requests are not served,
    /// late Read Responses and Writes land nowhere. Sends and Writes already posted still go
    /// out and complete on acknowledgement (DDP-66); [`is_idle`](Self::is_idle) then says the
    /// transport may close (and it aborts if that takes too long).
    pub fn shutdown(&mut self) {
        self.closing = true;
        if self.shut {
            return;
        }
        self.shut = true;
        self.records.clear();
        self.responses.clear();
        self.flush_reads();
        self.flush_rq();
    }

    /// Nothing left to send and every Send/Write/Read completed: the transport may close.
    pub fn is_idle(&self) -> bool {
        !self.wants_to_send() && self.sq.is_empty()
    }

    // ----------------------------------------------------------------------------------------
    // Output to the ULP

    /// Queues `wc` for the ULP, with the completion key.
    #[inline(always)]
    fn complete(&mut self, wc: WorkCompletion) {
        self.completions.push((self.completion_key, wc));
    }

    /// Sets the key every completion carries into
    /// [`move_completions`](Self::move_completions)'s ring (0 until set).
    pub fn set_completion_key(&mut self, key: u64) {
        self.completion_key = key;
    }

    /// The next work completion.
    #[inline(always)]
    pub fn poll_completion(&mut self) -> Option<WorkCompletion> {
        self.completions.pop().map(|(_, wc)| wc)
    }

    /// Every work completion, oldest first, after those of `to`, each as `f` makes it: what
    /// [`poll_completion`](Self::poll_completion) until none would give.
    #[inline(always)]
    pub fn drain_completions<U: Copy>(
        &mut self,
        to: &mut CompletionRing<U>,
        f: impl Fn(WorkCompletion) -> U,
    ) {
        self.completions.drain_into(to, |(_, wc)| f(wc));
    }

    /// Every work completion, oldest first, after those of `to`, each with the completion
    /// key: what [`drain_completions`](Self::drain_completions) would give, by trading slots
    /// with `to` when it is empty.
    #[inline(always)]
    pub fn move_completions(&mut self, to: &mut CompletionRing<KeyedCompletion>) {
        self.completions.move_into(to);
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<RdmapEvent> {
        self.events.pop_front()
    }

    /// Whether [`RdmapEngine::poll_completion`] or [`RdmapEngine::poll_event`] has something.
    pub fn has_output(&self) -> bool {
        !self.completions.is_empty() || !self.events.is_empty()
    }

    /// Whether [`RdmapEngine::poll_event`] has something.
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// Receive buffers posted and not yet consumed.
    pub fn posted_recvs(&self) -> usize {
        self.rq.len()
    }
}

/// Takes the next MSN of queue `queue` from the per-queue counters `tx_msn`.
#[inline(always)]
fn take_msn(tx_msn: &mut [u32; 3], queue: u32) -> u32 {
    let m = &mut tx_msn[queue as usize];
    let v = *m;
    *m = m.wrapping_add(1); // DDP-35, DDP-37: wraps to 0 after 0xFFFFFFFF
    v
}

#[cfg(test)]
mod dereg_tests;
#[cfg(test)]
mod half_close_tests;
#[cfg(test)]
mod place_write_tests;
#[cfg(test)]
mod shutdown_tests;
#[cfg(test)]
mod tests;
