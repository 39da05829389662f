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
//! - Located FPDUs ([`Qp::handle_segment`], or [`Qp::handle_ulpdu`] after startup): MPA's
//!   out-of-order locator found the FPDU by a marker or by the ULPDU_Length chain from a known
//!   FPDU start, never by a matching CRC (MPA-70), and checked its CRC; the ULPDU is placed
//!   now, and delivered when [`Qp::deliver_through`] says every earlier octet has arrived.
//!
//! The two may be mixed on one connection: a TCP that places out-of-order segments early still
//! feeds the in-order bytes to `handle_rx_bytes`; an FPDU seen both ways is placed twice
//! (allowed, DDP-56) and delivered once.
//!
//! Placement writes through the caller's [`Memory`](crate::Memory) straight from the slice
//! handed in (or from each piece between markers), so the copy from the received frame into the
//! region is the only copy.
//!
//! Files: this one holds the settings, events, state and posting; `startup.rs` the MPA startup,
//! `transmit.rs` framing and acknowledgement, `receive.rs` the two receive paths.

use crate::rdmap::completion_ring::{CompletionRing, KeyedCompletion};
use std::collections::{BTreeSet, VecDeque};
use std::time::Instant;

use mpa::{
    Framer, FramingError, ReadDepths, RequestInfo, RtrType, StartupConfig, StartupError,
    StreamParser,
};

use crate::ddp::stag_table::{PdId, StagTable};
use crate::ddp::tx_segment::TxSegment;
use crate::rdmap::completion::WorkCompletion;
use crate::rdmap::engine::{RdmapConfig, RdmapEngine, RdmapEvent, RdmapState, RdmapStats};
use crate::rdmap::terminate::TerminateRepr;
use crate::rdmap::work_request::{WorkRequest, WorkRequestError};

/// Most FPDU starts the out-of-order length chain remembers (one per out-of-order run of
/// segments is what it needs; past the bound new ones are not kept and those segments wait
/// for in-order delivery).
pub const MAX_CHAIN_STARTS: usize = 64;

/// Settings of a queue pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QpConfig {
    /// Stream/PD identity and IRD/ORD. Its `mulpdu` is replaced by the value MPA derives from
    /// `emss` once markers are negotiated; its IRD/ORD are offered in a Rev 2 startup frame
    /// and replaced by what MPA negotiated (RFC 6581 §5).
    pub engine: RdmapConfig,
    /// MPA startup settings (revision sent and accepted, markers wanted, CRC wanted,
    /// private-data limit, timeout, peer-to-peer mode).
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
    /// The in-order fast path (on by default): an in-order FPDU whose ULPDU no marker splits is
    /// placed and delivered at once ([`crate::RdmapEngine::handle_ulpdu_in_order`]). Off, it
    /// takes the general path (placement, then delivery in stream order); tests compare the two.
    pub fast_path: bool,
}

impl Default for QpConfig {
    fn default() -> Self {
        QpConfig {
            engine: RdmapConfig::default(),
            startup: StartupConfig::default(),
            emss: mpa::mulpdu::DEFAULT_EMSS,
            private_data: Vec::new(),
            auto_accept: true,
            keep_for_retransmit: false,
            fast_path: true,
        }
    }
}

/// What MPA agreed on: how each direction frames and, from a Rev 2 exchange, the RDMA
/// parameters (RFC 6581 §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NegotiatedFraming {
    /// We insert markers.
    pub tx_markers: bool,
    /// The peer inserts markers.
    pub rx_markers: bool,
    /// CRCs both ways.
    pub crc: bool,
    /// MULPDU in force for what we send.
    pub mulpdu: usize,
    /// The connection's MPA revision.
    pub revision: u8,
    /// Read Requests we serve at once (IRD).
    pub ird: u32,
    /// Read Requests we keep outstanding at most (ORD): never above the peer's IRD.
    pub ord: u32,
    /// Peer-to-peer mode: the ready-to-receive message the Initiator sends first.
    pub rtr: Option<RtrType>,
}

/// Things the transport and the ULP must know besides completions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QpEvent {
    /// Responder without auto-accept: a valid Request arrived (its private data, markers and
    /// CRC wishes, revision, Rev 2 IRD/ORD and peer-to-peer offer); call [`Qp::accept`],
    /// [`Qp::accept_with`] or [`Qp::reject`].
    ConnectRequest(RequestInfo),
    /// MPA is up; FPDUs flow.
    Established {
        /// The peer's private data.
        peer_private_data: Vec<u8>,
        /// Markers, CRC, MULPDU.
        negotiated: NegotiatedFraming,
    },
    /// The connection was rejected (a Reply with R=1, sent or received). MPA is left; TCP is
    /// open and the ULP decides (MPA-80): normally the transport closes.
    Rejected {
        /// The Reply's private data.
        private_data: Vec<u8>,
    },
    /// Startup failed (bad key, revision, PD_Length, timeout, ...): close TCP now (MPA §7).
    /// For the RFC 6581 errors whose action is [`mpa::ErrorAction::Terminate`] (insufficient
    /// IRD, no matching RTR) MPA is up and a Terminate with the code is queued: close once it
    /// is out.
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

/// With a tag of its own (`repr(u8)`): the receive path asks for the phase per segment, and
/// a tag is one compare where a niche in the startup machines is several instructions.
#[repr(u8)]
enum Phase {
    Startup(Startup),
    Operational {
        framer: Framer,
        parser: StreamParser,
        negotiated: NegotiatedFraming,
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
    /// FPDU starts beyond the in-order point that the ULPDU_Length chain reached out of order
    /// (the end of each FPDU located there): the only places besides markers where the
    /// locator may start (MPA-70). At most [`MAX_CHAIN_STARTS`].
    chain_starts: BTreeSet<u64>,
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
            chain_starts: BTreeSet::new(),
            unacked: VecDeque::new(),
            unacked_hint: 0,
            events: VecDeque::new(),
        }
    }

    /// An MPA Initiator: its Request (with `cfg.private_data`, and in Rev 2 the engine's
    /// IRD/ORD) is the first output.
    pub fn new_initiator(cfg: QpConfig, now: Instant) -> Result<Qp, mpa::startup::UsageError> {
        let depths = ReadDepths::capped(cfg.engine.ird, cfg.engine.ord);
        let init = mpa::Initiator::new(cfg.startup, now, &cfg.private_data, depths)?;
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
        let agreed = qp.enter_operational(negotiated, 0, 0);
        qp.events.push_back(QpEvent::Established {
            peer_private_data: negotiated.peer_private_data.clone(),
            negotiated: agreed,
        });
        qp
    }

    // ----------------------------------------------------------------------------------------
    // State

    /// MPA is up (FPDUs may flow).
    pub fn is_established(&self) -> bool {
        matches!(self.phase, Phase::Operational { .. })
    }

    /// What MPA negotiated, once established.
    pub fn negotiated(&self) -> Option<NegotiatedFraming> {
        match &self.phase {
            Phase::Operational { negotiated, .. } => Some(*negotiated),
            _ => None,
        }
    }

    /// The stream is in error (Terminate sent or received, framing error, transport failure).
    pub fn is_error(&self) -> bool {
        self.engine.state() == RdmapState::Error
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
    pub fn stats(&self) -> RdmapStats {
        self.engine.stats()
    }

    /// The engine (read-only), for diagnostics.
    pub fn engine(&self) -> &RdmapEngine {
        &self.engine
    }

    // ----------------------------------------------------------------------------------------
    // Work requests (may be posted before establishment)

    /// Post a work request (see [`RdmapEngine::post`]).
    pub fn post(&mut self, tags: &StagTable, wr: WorkRequest) -> Result<(), WorkRequestError> {
        self.engine.post(tags, wr)
    }

    /// The next work completion.
    #[inline(always)]
    pub fn poll_completion(&mut self) -> Option<WorkCompletion> {
        self.engine.poll_completion()
    }

    /// Every work completion, oldest first, after those of `to`, each as `f` makes it: what
    /// [`Qp::poll_completion`] until none would give.
    #[inline(always)]
    pub fn drain_completions<U: Copy>(
        &mut self,
        to: &mut CompletionRing<U>,
        f: impl Fn(WorkCompletion) -> U,
    ) {
        self.engine.drain_completions(to, f);
    }

    /// Every work completion, oldest first, after those of `to`, each with the key set by
    /// [`Qp::set_completion_key`]: what [`Qp::drain_completions`] would give, by trading slots
    /// with `to` when it is empty.
    #[inline(always)]
    pub fn move_completions(&mut self, to: &mut CompletionRing<KeyedCompletion>) {
        self.engine.move_completions(to);
    }

    /// Sets the key every completion carries into [`Qp::move_completions`]'s ring (0 until
    /// set).
    pub fn set_completion_key(&mut self, key: u64) {
        self.engine.set_completion_key(key);
    }

    /// Whether [`Qp::poll_completion`] or [`Qp::poll_event`] may have something: a check for a
    /// round to skip both when not (never false when either has).
    pub fn has_output(&self) -> bool {
        !self.events.is_empty() || self.engine.has_output()
    }

    /// Whether [`Qp::poll_event`] may have something (never false when it has): a check for
    /// a round that moved the completions to skip the events when there are none.
    pub fn has_events(&self) -> bool {
        !self.events.is_empty() || self.engine.has_events()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<QpEvent> {
        if let Some(e) = self.events.pop_front() {
            return Some(e);
        }
        loop {
            let e = match self.engine.poll_event()? {
                RdmapEvent::TerminateQueued(_) => continue,
                RdmapEvent::TerminateSent(t) => QpEvent::TerminateSent(t),
                RdmapEvent::TerminateReceived(t) => QpEvent::TerminateReceived(t),
                RdmapEvent::MalformedTerminateReceived => QpEvent::MalformedTerminateReceived,
                RdmapEvent::TransportFailed => QpEvent::TransportFailed,
            };
            return Some(e);
        }
    }

    // ----------------------------------------------------------------------------------------
    // Lifecycle

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

    /// The peer's FIN, after every octet before it was handed in (DDP-10). Before MPA is up
    /// this is [`Qp::handle_close`]. Once up, the stream is half-closed, not in error (DDP-69,
    /// see [`RdmapEngine::peer_half_closed`]): receives and Reads flush, Sends and Writes go
    /// on and complete, Read Responses still go out; the transport closes our half when the
    /// ULP closes ([`Qp::close`] / [`Qp::shutdown`], then [`Qp::is_idle`]; DDP-70).
    pub fn handle_peer_fin(&mut self) {
        if self.is_established() {
            self.engine.peer_half_closed();
        } else {
            self.handle_close();
        }
    }

    /// The peer half-closed its side ([`Qp::handle_peer_fin`]).
    pub fn is_peer_closed(&self) -> bool {
        self.engine.is_peer_closed()
    }

    /// Graceful close (DDP-66, DDP-67): later posts fail; queued work still goes out and
    /// reception continues. Close TCP once [`Qp::is_idle`] says everything was acknowledged.
    pub fn close(&mut self) {
        self.engine.close();
    }

    /// The ULP closes the queue pair for good (see [`RdmapEngine::shutdown`]): receives and
    /// Reads flush now, nothing more is placed, posted Sends and Writes still go out. Close TCP
    /// once [`Qp::is_idle`] (or abort after a timeout).
    pub fn shutdown(&mut self) {
        self.engine.shutdown();
    }

    /// Abortive teardown (DDP-75): flush every work request, send nothing more.
    pub fn abort(&mut self) {
        self.engine.abort();
    }

    /// Nothing left to send and every Send/Write/Read complete.
    pub fn is_idle(&self) -> bool {
        self.startup_tx_at >= self.startup_tx.len() && self.engine.is_idle()
    }
}

mod receive;
mod startup;
mod transmit;

#[cfg(test)]
mod ooo_tests;
#[cfg(test)]
mod rev2_tests;
#[cfg(test)]
mod tests;
