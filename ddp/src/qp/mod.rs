//! The sans-IO queue pair: MPA startup, MPA framing and the DDP/RDMAP engine of one connection,
//! driven by a transport (kernel TCP sockets, or our AF_XDP TCP).
//!
//! # Decision: the Qp carries the MPA startup
//! [`Qp::new_initiator`] / [`Qp::new_responder`] give a queue pair that emits its MPA Request or
//! Reply through [`Qp::poll_transmit`] and reads the peer's frame from
//! [`Qp::handle_rx_bytes`], then switches to FPDUs on the same calls. A transport only moves
//! bytes: it never sees MPA frames. Work may be posted before the connection is established
//! (receive buffers should be); it goes out once MPA is up and, for a Responder, once the first
//! FPDU of the Initiator has arrived (MPA-85).
//!
//! # Stream coordinates
//! Every `u64` stream offset here counts octets of one direction of the TCP byte stream from
//! the connection's first octet, the startup frame included: the transmit side counts what
//! `poll_transmit` produced, the receive side what the peer sent. [`Qp::on_acked`] takes the
//! transmit count acknowledged (the kernel transport passes what it has written; a TCP passes
//! `ack - isn - 1`). [`Qp::handle_ulpdu`] and [`Qp::deliver_through`] take receive offsets.
//!
//! # Receive, two ways
//! - In-order bytes ([`Qp::handle_rx_bytes`]): MPA's stream parser finds FPDUs whatever the
//!   segmentation; each ULPDU is placed and delivered at once.
//! - Located FPDUs ([`Qp::handle_ulpdu`], after startup): the transport found the FPDU itself
//!   (MPA's out-of-order locator) and checked its CRC; the ULPDU is placed now, and delivered
//!   when [`Qp::deliver_through`] says every earlier octet has arrived.
//!
//! The two may be mixed on one connection: a TCP that places out-of-order segments early still
//! feeds the in-order bytes to `handle_rx_bytes`; an FPDU seen both ways is placed twice
//! (allowed, DDP-56) and delivered once.
//!
//! Placement writes through the caller's [`Memory`] straight from the slice handed in (or from
//! each piece between markers), so the copy from the received frame into the region is the
//! only copy.

use std::collections::VecDeque;
use std::time::Instant;

use mpa::{
    Framer, FramingConfig, FramingError, LocateOptions, StartupConfig, StartupError, StartupEvent,
    StreamParser,
};

use crate::ddp::memory::Memory;
use crate::ddp::stag_table::{PdId, StagTable};
use crate::ddp::tx_segment::TxSegment;
use crate::rdmap::completion::Completion;
use crate::rdmap::engine::{EngineConfig, EngineEvent, EngineState, EngineStats, RdmapEngine};
use crate::rdmap::term_code::LlpError;
use crate::rdmap::terminate::TerminateRepr;
use crate::rdmap::work_request::{LocalBuf, PostError, RemoteBuf, SendOpts};

/// Settings of a queue pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QpConfig {
    /// Stream/PD identity and IRD/ORD. Its `mulpdu` is replaced by the value MPA derives from
    /// `emss` once markers are negotiated.
    pub engine: EngineConfig,
    /// MPA startup settings (revision, markers wanted, CRC wanted, private-data limit, timeout).
    pub startup: StartupConfig,
    /// Effective MSS of the TCP connection (MULPDU is derived from it, MPA-63/64).
    pub emss: u32,
    /// Private data: in our Request (Initiator), or in our Reply when `auto_accept` is set.
    pub private_data: Vec<u8>,
    /// Keep a descriptor of every FPDU until it is acknowledged, so a TCP retransmission can
    /// rebuild it ([`Qp::rebuild_fpdu`]). Off for the kernel transport (TCP keeps its own copy).
    pub keep_for_retransmit: bool,
    /// Responder: accept every valid Request at once. When false, [`QpEvent::ConnectRequest`]
    /// is reported and the ULP calls [`Qp::accept`] or [`Qp::reject`].
    pub auto_accept: bool,
}

impl Default for QpConfig {
    fn default() -> Self {
        QpConfig {
            engine: EngineConfig::default(),
            startup: StartupConfig::default(),
            emss: mpa::mulpdu::DEFAULT_EMSS,
            private_data: Vec::new(),
            auto_accept: true,
            keep_for_retransmit: false,
        }
    }
}

/// What MPA agreed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    /// We insert markers.
    pub tx_markers: bool,
    /// The peer inserts markers.
    pub rx_markers: bool,
    /// CRCs both ways.
    pub crc: bool,
    /// MULPDU in force for what we send.
    pub mulpdu: usize,
}

/// Things the transport and the ULP must know besides completions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QpEvent {
    /// Responder without auto-accept: a valid Request arrived; call [`Qp::accept`] or
    /// [`Qp::reject`].
    ConnectRequest {
        /// The Request's private data.
        private_data: Vec<u8>,
        /// The Initiator wants markers on what it receives (we will send markers).
        peer_wants_markers: bool,
        /// The Initiator asked for CRCs.
        peer_wants_crc: bool,
    },
    /// MPA is up; FPDUs flow.
    Established {
        /// The peer's private data.
        peer_private_data: Vec<u8>,
        /// Markers, CRC, MULPDU.
        negotiated: Negotiated,
    },
    /// The connection was rejected (a Reply with R=1, sent or received). MPA is left; TCP is
    /// open and the ULP decides (MPA-80): normally the transport closes.
    Rejected {
        /// The Reply's private data.
        private_data: Vec<u8>,
    },
    /// Startup failed (bad key, revision, PD_Length, timeout, ...): close TCP now (MPA §7).
    StartupFailed(StartupError),
    /// An MPA receive error (CRC, marker, length): nothing more is delivered; a Terminate
    /// with the LLP code is queued; TCP stays open until the ULP closes (MPA-111, MPA-112).
    FramingError(FramingError),
    /// We sent a Terminate: the stream is in error; close after it has gone out.
    TerminateSent(TerminateRepr),
    /// The peer's Terminate arrived: the stream is in error; work requests were flushed.
    TerminateReceived(TerminateRepr),
    /// A malformed Terminate arrived: as [`QpEvent::TerminateReceived`].
    MalformedTerminateReceived,
    /// The transport failed or closed: the stream is in error; work requests were flushed.
    TransportFailed,
}

enum Startup {
    Initiator(mpa::Initiator),
    Responder(mpa::Responder),
}

enum Phase {
    Startup(Startup),
    Operational {
        framer: Framer,
        parser: StreamParser,
        negotiated: Negotiated,
    },
    /// MPA was left (rejected or failed): no FPDU will flow.
    Closed,
}

/// The queue pair. See the module documentation.
pub struct Qp {
    cfg: QpConfig,
    phase: Phase,
    engine: RdmapEngine,
    /// Startup octets not yet handed out.
    startup_tx: Vec<u8>,
    startup_tx_at: usize,
    /// Octets produced by `poll_transmit` so far.
    tx_total: u64,
    /// Receive offset of the next octet `handle_rx_bytes` parses as FPDU stream (or startup).
    rx_total: u64,
    /// Receive offset of the peer's SeqStart (just past its startup frame).
    rx_seq_start: u64,
    /// Transmit offset of our SeqStart.
    tx_seq_start: u64,
    /// Receive offset of the next FPDU the stream parser will give.
    rx_fpdu_pos: u64,
    ulpdu_tx: Vec<u8>,
    /// FPDUs sent and not yet acknowledged: (start, end, descriptor), when kept.
    unacked: VecDeque<(u64, u64, TxSegment)>,
    /// Index in `unacked` of the FPDU `rebuild_fpdu` most likely asks for next (the one after
    /// the last it rebuilt): first transmissions go in order, so the search is skipped.
    unacked_hint: usize,
    events: VecDeque<QpEvent>,
}

impl core::fmt::Debug for Qp {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Qp")
            .field("established", &self.is_established())
            .field("tx_total", &self.tx_total)
            .field("rx_total", &self.rx_total)
            .field("engine", &self.engine.state())
            .finish()
    }
}

impl Qp {
    fn with_phase(cfg: QpConfig, phase: Phase) -> Qp {
        let engine = RdmapEngine::new(cfg.engine);
        Qp {
            cfg,
            phase,
            engine,
            startup_tx: Vec::new(),
            startup_tx_at: 0,
            tx_total: 0,
            rx_total: 0,
            rx_seq_start: 0,
            tx_seq_start: 0,
            rx_fpdu_pos: 0,
            ulpdu_tx: vec![0; mpa::MAX_ULPDU_LEN],
            unacked: VecDeque::new(),
            unacked_hint: 0,
            events: VecDeque::new(),
        }
    }

    /// An MPA Initiator: its Request (with `cfg.private_data`) is the first output.
    pub fn new_initiator(cfg: QpConfig, now: Instant) -> Result<Qp, mpa::startup::UsageError> {
        let init = mpa::Initiator::new(cfg.startup, now, &cfg.private_data)?;
        let mut qp = Qp::with_phase(cfg, Phase::Startup(Startup::Initiator(init)));
        qp.pump_startup();
        Ok(qp)
    }

    /// An MPA Responder: waits for the Request, then replies (auto-accept) or reports
    /// [`QpEvent::ConnectRequest`].
    pub fn new_responder(cfg: QpConfig, now: Instant) -> Qp {
        let resp = mpa::Responder::new(cfg.startup, now);
        Qp::with_phase(cfg, Phase::Startup(Startup::Responder(resp)))
    }

    /// A queue pair for a connection whose MPA startup was done elsewhere (for example by the
    /// transport with `mpa::Initiator`/`Responder` directly). Stream offsets then count from
    /// SeqStart in both directions (0 = the first FPDU octet). A Responder still waits for the
    /// peer's first FPDU before sending (MPA-85). Reports [`QpEvent::Established`].
    pub fn new_established(cfg: QpConfig, negotiated: &mpa::Negotiated) -> Qp {
        let mut qp = Qp::with_phase(cfg, Phase::Closed);
        qp.enter_operational(negotiated, 0, 0);
        qp
    }

    // ----------------------------------------------------------------------------------------
    // State

    /// MPA is up (FPDUs may flow).
    pub fn is_established(&self) -> bool {
        matches!(self.phase, Phase::Operational { .. })
    }

    /// What MPA negotiated, once established.
    pub fn negotiated(&self) -> Option<Negotiated> {
        match &self.phase {
            Phase::Operational { negotiated, .. } => Some(*negotiated),
            _ => None,
        }
    }

    /// The stream is in error (Terminate sent or received, framing error, transport failure).
    pub fn is_error(&self) -> bool {
        self.engine.state() == EngineState::Error
    }

    /// Receive offset of the peer's first FPDU octet (its SeqStart), once established.
    pub fn rx_seq_start(&self) -> u64 {
        self.rx_seq_start
    }

    /// Transmit offset of our first FPDU octet (our SeqStart), once established.
    pub fn tx_seq_start(&self) -> u64 {
        self.tx_seq_start
    }

    /// Octets `poll_transmit` has produced so far.
    pub fn tx_offset(&self) -> u64 {
        self.tx_total
    }

    /// Moves the queue pair into protection domain `pd`: a responder created before the
    /// application chose its domain learns it when the application accepts. Tagged accesses
    /// are checked against the new domain from then on.
    pub fn set_pd(&mut self, pd: PdId) {
        self.engine.set_pd(pd);
    }

    /// The DDP/RDMAP engine's counters.
    pub fn stats(&self) -> EngineStats {
        self.engine.stats()
    }

    /// The engine (read-only), for diagnostics.
    pub fn engine(&self) -> &RdmapEngine {
        &self.engine
    }

    // ----------------------------------------------------------------------------------------
    // Work requests (may be posted before establishment)

    /// Post a receive buffer (see [`RdmapEngine::post_recv`]).
    pub fn post_recv(
        &mut self,
        tags: &StagTable,
        wr_id: u64,
        buf: LocalBuf,
    ) -> Result<(), PostError> {
        self.engine.post_recv(tags, wr_id, buf)
    }

    /// Post a Send (see [`RdmapEngine::post_send`]).
    pub fn post_send(
        &mut self,
        tags: &StagTable,
        wr_id: u64,
        buf: LocalBuf,
        opts: SendOpts,
    ) -> Result<(), PostError> {
        self.engine.post_send(tags, wr_id, buf, opts)
    }

    /// Post an RDMA Write (see [`RdmapEngine::post_write`]).
    pub fn post_write(
        &mut self,
        tags: &StagTable,
        wr_id: u64,
        buf: LocalBuf,
        remote: RemoteBuf,
    ) -> Result<(), PostError> {
        self.engine.post_write(tags, wr_id, buf, remote)
    }

    /// Post an RDMA Read (see [`RdmapEngine::post_read`]).
    pub fn post_read(
        &mut self,
        tags: &StagTable,
        wr_id: u64,
        buf: LocalBuf,
        remote: RemoteBuf,
    ) -> Result<(), PostError> {
        self.engine.post_read(tags, wr_id, buf, remote)
    }

    /// The next work completion.
    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.engine.poll_completion()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<QpEvent> {
        if let Some(e) = self.events.pop_front() {
            return Some(e);
        }
        loop {
            let e = match self.engine.poll_event()? {
                EngineEvent::TerminateQueued(_) => continue,
                EngineEvent::TerminateSent(t) => QpEvent::TerminateSent(t),
                EngineEvent::TerminateReceived(t) => QpEvent::TerminateReceived(t),
                EngineEvent::MalformedTerminateReceived => QpEvent::MalformedTerminateReceived,
                EngineEvent::TransportFailed => QpEvent::TransportFailed,
            };
            return Some(e);
        }
    }

    // ----------------------------------------------------------------------------------------
    // Responder decision

    /// Accept the pending Request with `private_data` in the Reply.
    pub fn accept(&mut self, private_data: &[u8]) -> Result<(), mpa::startup::UsageError> {
        self.decide(false, private_data)
    }

    /// Reject the pending Request (Reply with R=1); MPA is left, TCP stays open.
    pub fn reject(&mut self, private_data: &[u8]) -> Result<(), mpa::startup::UsageError> {
        self.decide(true, private_data)
    }

    fn decide(&mut self, reject: bool, pd: &[u8]) -> Result<(), mpa::startup::UsageError> {
        let Phase::Startup(Startup::Responder(r)) = &mut self.phase else {
            return Err(mpa::startup::UsageError::NotDeciding);
        };
        if reject {
            r.reject(pd)?;
        } else {
            r.accept(pd)?;
        }
        self.pump_startup();
        Ok(())
    }

    // ----------------------------------------------------------------------------------------
    // Transmit

    /// Whether `poll_transmit` would produce something now.
    pub fn wants_to_send(&self) -> bool {
        if self.startup_tx_at < self.startup_tx.len() {
            return true;
        }
        match &self.phase {
            Phase::Operational { framer, .. } => !framer.is_gated() && self.engine.wants_to_send(),
            _ => false,
        }
    }

    /// Produce the next octets to send into `out`: startup-frame bytes, or one whole FPDU
    /// (markers and CRC included, framed at the right stream offset, its ULPDU no larger than
    /// MULPDU). Returns the length, or `None` when there is nothing to send. `out` should hold
    /// [`Qp::max_fpdu_len`] octets; a smaller `out` gets smaller FPDUs.
    pub fn poll_transmit<M: Memory + ?Sized>(&mut self, mem: &M, out: &mut [u8]) -> Option<usize> {
        if self.startup_tx_at < self.startup_tx.len() {
            let src = &self.startup_tx[self.startup_tx_at..];
            let n = src.len().min(out.len());
            out[..n].copy_from_slice(&src[..n]);
            self.startup_tx_at += n;
            self.tx_total += n as u64;
            if self.startup_tx_at == self.startup_tx.len() {
                self.startup_tx.clear();
                self.startup_tx_at = 0;
            }
            return (n > 0).then_some(n);
        }
        let Phase::Operational { framer, .. } = &mut self.phase else {
            return None;
        };
        if framer.is_gated() {
            return None;
        }
        let cap = ulpdu_cap(framer, self.engine.config().mulpdu, out.len());
        let seg = self.engine.poll_segment(cap)?;
        let start = self.tx_total;
        let r = match seg.payload_slice(mem) {
            // One copy: header and payload gathered straight into the frame.
            Some(p) => framer.encode(&[seg.header(), p], out),
            None => {
                let n = seg.write_ulpdu(mem, &mut self.ulpdu_tx);
                framer.encode(&[&self.ulpdu_tx[..n]], out)
            }
        };
        match r {
            Ok(w) => {
                self.tx_total += w as u64;
                self.engine.ulpdu_framed(self.tx_total);
                if self.cfg.keep_for_retransmit {
                    self.unacked.push_back((start, self.tx_total, seg));
                }
                Some(w)
            }
            Err(_) => {
                // Sized above so this cannot happen; fail loudly rather than corrupt the stream.
                self.engine.transport_failed();
                None
            }
        }
    }

    /// Claims the next FPDU (its ULPDU no larger than MULPDU, its wire length at most `max_len`)
    /// without framing it: returns its transmit offset and wire length, and the caller frames it
    /// with [`Qp::rebuild_fpdu`] wherever it wants the bytes (the AF_XDP engine: straight into
    /// the packet, so a first transmission is framed once). `None` when there is no FPDU to send,
    /// startup bytes are still pending (use [`Qp::poll_transmit`] for those), or
    /// `keep_for_retransmit` is off (nothing could rebuild it).
    pub fn poll_fpdu_record(&mut self, max_len: usize) -> Option<(u64, usize)> {
        if !self.cfg.keep_for_retransmit || self.startup_tx_at < self.startup_tx.len() {
            return None;
        }
        let Phase::Operational { framer, .. } = &mut self.phase else {
            return None;
        };
        if framer.is_gated() {
            return None;
        }
        let cap = ulpdu_cap(framer, self.engine.config().mulpdu, max_len);
        let seg = self.engine.poll_segment(cap)?;
        let start = self.tx_total;
        let w = framer.skip(seg.len());
        self.tx_total += w as u64;
        self.engine.ulpdu_framed(self.tx_total);
        self.unacked.push_back((start, self.tx_total, seg));
        Some((start, w))
    }

    /// Rebuild, for a TCP retransmission, the FPDU that `poll_transmit` produced at transmit
    /// offset `stream_pos` (not yet acknowledged), from its descriptor and the region's
    /// memory: the same octets, markers and CRC included. Needs `keep_for_retransmit`.
    /// Returns its length, or `None` if no FPDU starts there (or `out` is too small).
    pub fn rebuild_fpdu<M: Memory + ?Sized>(
        &mut self,
        mem: &M,
        stream_pos: u64,
        out: &mut [u8],
    ) -> Option<usize> {
        let Phase::Operational { framer, .. } = &self.phase else {
            return None;
        };
        let cfg = framer.config();
        let h = self.unacked_hint;
        let i = if self.unacked.get(h).is_some_and(|e| e.0 == stream_pos) {
            h
        } else {
            self.unacked
                .binary_search_by_key(&stream_pos, |e| e.0)
                .ok()?
        };
        self.unacked_hint = i + 1;
        let (start, _, seg) = self.unacked[i];
        let offset = start.wrapping_sub(self.tx_seq_start) as u32;
        let r = match seg.payload_slice(mem) {
            Some(p) => mpa::encode_fpdu(cfg, offset, &[seg.header(), p], out),
            None => {
                let n = seg.write_ulpdu(mem, &mut self.ulpdu_tx);
                mpa::encode_fpdu(cfg, offset, &[&self.ulpdu_tx[..n]], out)
            }
        };
        r.ok()
    }

    /// Transmit offsets `(start, end)` of the FPDUs kept for retransmission (not yet acknowledged).
    pub fn unacked_fpdus(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.unacked.iter().map(|e| (e.0, e.1))
    }

    /// Fill `out` with as many whole outputs of [`Qp::poll_transmit`] as fit (startup bytes and
    /// FPDUs, each FPDU full-sized while room remains for one): one write for the kernel
    /// transport. Returns the octets written (0: nothing to send).
    pub fn poll_transmit_batch<M: Memory + ?Sized>(&mut self, mem: &M, out: &mut [u8]) -> usize {
        let mut n = 0;
        while out.len() - n >= self.max_fpdu_len().min(out.len()) {
            match self.poll_transmit(mem, &mut out[n..]) {
                Some(w) => n += w,
                None => break,
            }
        }
        n
    }

    /// Largest FPDU this queue pair produces at any stream offset (size `out` of
    /// `poll_transmit` to it).
    pub fn max_fpdu_len(&self) -> usize {
        match &self.phase {
            Phase::Operational { framer, .. } => {
                // At another stream offset the same FPDU may hold one marker more.
                let extra = if framer.config().markers { 4 } else { 0 };
                framer.wire_len(self.engine.config().mulpdu) + extra
            }
            _ => mpa::MAX_FPDU_LEN,
        }
    }

    /// The transport has the transmit stream acknowledged up to `offset` (exclusive): Sends and
    /// Writes whose FPDUs end there or before complete. The kernel transport calls this as soon
    /// as it has written the octets.
    pub fn on_acked(&mut self, offset: u64) {
        while self.unacked.front().is_some_and(|e| e.1 <= offset) {
            self.unacked.pop_front();
            self.unacked_hint = self.unacked_hint.saturating_sub(1);
        }
        self.engine.on_acked(offset);
    }

    // ----------------------------------------------------------------------------------------
    // Receive

    /// Feed in-order stream octets (any segmentation): startup frame first, then FPDUs, which
    /// are placed and delivered at once. Everything is consumed.
    pub fn handle_rx_bytes<M: Memory + ?Sized>(
        &mut self,
        tags: &mut StagTable,
        mem: &mut M,
        now: Instant,
        mut data: &[u8],
    ) {
        if let Phase::Startup(s) = &mut self.phase {
            let used = match s {
                Startup::Initiator(i) => i.handle_input(now, data),
                Startup::Responder(r) => r.handle_input(now, data),
            };
            self.rx_total += used as u64;
            data = &data[used..];
            self.pump_startup();
        }
        let Phase::Operational { framer, parser, .. } = &mut self.phase else {
            return;
        };
        while !data.is_empty() {
            let took = parser.push(data);
            self.rx_total += took as u64;
            data = &data[took..];
            loop {
                match parser.next_fpdu() {
                    Ok(Some(f)) => {
                        let pos = self.rx_fpdu_pos;
                        self.rx_fpdu_pos += f.wire_len() as u64;
                        framer.peer_fpdu_received();
                        // The pieces between markers go straight to their places (no copy).
                        let mut parts: [&[u8]; MAX_PARTS] = [&[]; MAX_PARTS];
                        let k = collect_parts(f.ulpdu_chunks(), &mut parts);
                        self.engine.handle_ulpdu_parts(tags, mem, pos, &parts[..k]);
                        self.engine.deliver_through(tags, pos + 1);
                    }
                    Ok(None) => break,
                    Err(e) => {
                        if !self.is_error() {
                            self.events.push_back(QpEvent::FramingError(e));
                            self.engine.terminate_with(llp_code(e));
                        }
                        return;
                    }
                }
            }
            if took == 0 {
                return;
            }
        }
    }

    /// Framing of what we receive (for MPA's out-of-order locator), once established.
    pub fn rx_framing(&self) -> Option<FramingConfig> {
        match &self.phase {
            Phase::Operational { parser, .. } => Some(parser.config()),
            _ => None,
        }
    }

    /// Out-of-order path for one TCP segment the transport has committed to keep, whose first
    /// octet is at receive offset `seg_pos`: MPA's locator finds the complete FPDUs in it
    /// (aligned start or markers), checks their CRCs, and each ULPDU is placed now. Returns how
    /// many FPDUs were found; FPDUs that straddle the segment's edges are not (the transport
    /// hands them over later in order, or the sender aligns FPDUs to segments). Delivery waits
    /// for [`Qp::deliver_through`]. A framing error stops the stream as in the in-order path.
    pub fn handle_segment<M: Memory + ?Sized>(
        &mut self,
        tags: &StagTable,
        mem: &mut M,
        seg_pos: u64,
        seg: &[u8],
    ) -> usize {
        let Some(cfg) = self.rx_framing() else {
            return 0;
        };
        if seg_pos < self.rx_seq_start {
            return 0;
        }
        let seg_off = (seg_pos - self.rx_seq_start) as u32;
        let mut found = 0;
        for item in mpa::locate(cfg, seg_off, seg, LocateOptions::default()) {
            match item {
                Ok(f) => {
                    let pos = seg_pos + u64::from(f.fpdu.offset().wrapping_sub(seg_off));
                    found += 1;
                    let mut parts: [&[u8]; MAX_PARTS] = [&[]; MAX_PARTS];
                    let k = collect_parts(f.segment_ranges().map(|r| &seg[r]), &mut parts);
                    self.handle_ulpdu_parts(tags, mem, pos, &parts[..k]);
                }
                Err(e) => {
                    self.handle_framing_error(e.error);
                    break;
                }
            }
        }
        found
    }

    /// Hand in one ULPDU located and CRC-checked by the transport, starting (its FPDU) at
    /// receive offset `stream_pos`, possibly out of order. It is placed now; see
    /// [`Qp::deliver_through`]. Ignored before establishment.
    pub fn handle_ulpdu<M: Memory + ?Sized>(
        &mut self,
        tags: &StagTable,
        mem: &mut M,
        stream_pos: u64,
        ulpdu: &[u8],
    ) {
        let Phase::Operational { framer, .. } = &mut self.phase else {
            return;
        };
        framer.peer_fpdu_received();
        self.engine.handle_ulpdu(tags, mem, stream_pos, ulpdu);
    }

    /// As [`Qp::handle_ulpdu`] for a ULPDU given as the pieces between MPA markers: each piece
    /// is copied straight into its place.
    pub fn handle_ulpdu_parts<M: Memory + ?Sized>(
        &mut self,
        tags: &StagTable,
        mem: &mut M,
        stream_pos: u64,
        parts: &[&[u8]],
    ) {
        let Phase::Operational { framer, .. } = &mut self.phase else {
            return;
        };
        framer.peer_fpdu_received();
        self.engine.handle_ulpdu_parts(tags, mem, stream_pos, parts);
    }

    /// Every receive octet before `stream_pos` has arrived and been handed in: deliver in order.
    pub fn deliver_through(&mut self, tags: &mut StagTable, stream_pos: u64) {
        self.engine.deliver_through(tags, stream_pos);
    }

    /// The transport reports an MPA framing error it found itself (out-of-order path).
    pub fn handle_framing_error(&mut self, e: FramingError) {
        if !self.is_error() {
            self.events.push_back(QpEvent::FramingError(e));
            self.engine.terminate_with(llp_code(e));
        }
    }

    /// Drive the startup deadline.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Phase::Startup(s) = &mut self.phase {
            match s {
                Startup::Initiator(i) => i.handle_timeout(now),
                Startup::Responder(r) => r.handle_timeout(now),
            }
            self.pump_startup();
        }
    }

    /// When to call [`Qp::handle_timeout`] next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Startup(Startup::Initiator(i)) => i.poll_timeout(),
            Phase::Startup(Startup::Responder(r)) => r.poll_timeout(),
            _ => None,
        }
    }

    /// TCP closed, reset or lost: startup fails, or the stream enters error with every work
    /// request flushed.
    pub fn handle_close(&mut self) {
        match &mut self.phase {
            Phase::Startup(Startup::Initiator(i)) => i.handle_close(),
            Phase::Startup(Startup::Responder(r)) => r.handle_close(),
            _ => {}
        }
        self.pump_startup();
        if self.is_established() {
            self.engine.transport_failed();
        } else {
            self.engine.abort();
        }
    }

    /// Graceful close (DDP-66, DDP-67): later posts fail; queued work still goes out and
    /// reception continues. Close TCP once [`Qp::is_idle`] says everything was acknowledged.
    pub fn close(&mut self) {
        self.engine.close();
    }

    /// Abortive teardown (DDP-75): flush every work request, send nothing more.
    pub fn abort(&mut self) {
        self.engine.abort();
    }

    /// Nothing left to send and every Send/Write/Read complete.
    pub fn is_idle(&self) -> bool {
        self.startup_tx_at >= self.startup_tx.len() && self.engine.is_idle()
    }

    /// Switch to FPDUs with what MPA negotiated; SeqStarts at the given stream offsets.
    fn enter_operational(&mut self, n: &mpa::Negotiated, tx_seq_start: u64, rx_seq_start: u64) {
        let mulpdu = mpa::mulpdu(self.cfg.emss, n.tx_markers);
        self.engine.set_mulpdu(mulpdu);
        let negotiated = Negotiated {
            tx_markers: n.tx_markers,
            rx_markers: n.rx_markers,
            crc: n.crc,
            mulpdu,
        };
        self.tx_seq_start = tx_seq_start;
        self.rx_seq_start = rx_seq_start;
        self.rx_fpdu_pos = rx_seq_start;
        self.phase = Phase::Operational {
            framer: n.framer(),
            parser: n.stream_parser(),
            negotiated,
        };
        let peer_private_data = n.peer_private_data.clone();
        self.events.push_back(QpEvent::Established {
            peer_private_data,
            negotiated,
        });
    }

    /// Take the startup machine's output and events.
    fn pump_startup(&mut self) {
        let Phase::Startup(s) = &mut self.phase else {
            return;
        };
        let (tx, evs): (Option<Vec<u8>>, Vec<StartupEvent>) = match s {
            Startup::Initiator(i) => (
                i.poll_transmit(),
                std::iter::from_fn(|| i.poll_event()).collect(),
            ),
            Startup::Responder(r) => (
                r.poll_transmit(),
                std::iter::from_fn(|| r.poll_event()).collect(),
            ),
        };
        if let Some(tx) = tx {
            self.startup_tx.extend_from_slice(&tx);
        }
        for ev in evs {
            match ev {
                StartupEvent::RequestReceived {
                    private_data,
                    peer_wants_markers,
                    peer_wants_crc,
                } => {
                    if self.cfg.auto_accept {
                        let pd = self.cfg.private_data.clone();
                        if let Phase::Startup(Startup::Responder(r)) = &mut self.phase {
                            let _ = r.accept(&pd);
                        }
                        // The accept queued a Reply and an Established event: take them.
                        self.pump_startup();
                        return;
                    }
                    self.events.push_back(QpEvent::ConnectRequest {
                        private_data,
                        peer_wants_markers,
                        peer_wants_crc,
                    });
                }
                StartupEvent::Established(n) => {
                    // SeqStart of our direction is after every startup octet we will send.
                    let tx_start =
                        self.tx_total + (self.startup_tx.len() - self.startup_tx_at) as u64;
                    let rx_start = self.rx_total;
                    self.enter_operational(&n, tx_start, rx_start);
                    return;
                }
                StartupEvent::Rejected { private_data } => {
                    self.phase = Phase::Closed;
                    self.engine.abort();
                    self.events.push_back(QpEvent::Rejected { private_data });
                    return;
                }
                StartupEvent::Failed(e) => {
                    self.phase = Phase::Closed;
                    self.engine.abort();
                    self.events.push_back(QpEvent::StartupFailed(e));
                    return;
                }
            }
        }
    }
}

/// Most pieces a ULPDU splits into between markers: a 64768-octet ULPDU spans at most 128
/// markers (one per 512 stream octets), so 129 pieces.
const MAX_PARTS: usize = 130;

/// Collect a ULPDU's pieces into `parts`; returns how many.
fn collect_parts<'a>(
    chunks: impl Iterator<Item = &'a [u8]>,
    parts: &mut [&'a [u8]; MAX_PARTS],
) -> usize {
    let mut k = 0;
    for c in chunks.take(MAX_PARTS) {
        parts[k] = c;
        k += 1;
    }
    k
}

/// The LLP Terminate code for an MPA receive error (digest §6.5).
fn llp_code(e: FramingError) -> crate::rdmap::term_code::TermCode {
    match e.code() {
        mpa::ErrorCode::MarkerError => LlpError::Marker.term_code(),
        _ => LlpError::Crc.term_code(),
    }
}

#[cfg(test)]
mod tests;

/// The largest ULPDU (at most `mulpdu`) whose FPDU, framed at the framer's offset, fits `room`.
fn ulpdu_cap(framer: &mpa::Framer, mulpdu: usize, room: usize) -> usize {
    let mut cap = mulpdu.min(room).min(mpa::MAX_ULPDU_LEN);
    loop {
        let w = framer.wire_len(cap);
        if w <= room || cap == 0 {
            return cap;
        }
        cap = cap.saturating_sub(w - room);
    }
}
