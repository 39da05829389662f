//! One TCP connection: the RFC 9293 state machine with RFC 5961 protections, RFC 7323 options,
//! RFC 6298 retransmission timer, RFC 5681/6582/6675 loss recovery, CUBIC/NewReno, delayed ACKs,
//! persist and keepalive timers, and the MPA-aware send and receive paths.
//!
//! Sans-IO: see the crate docs for the call order.
//!
//! The [`Connection`] type, its constructors and the upper layer's calls live here; the rest is
//! split by concern, each file an `impl Connection` block:
//!
//! * `state`: the RFC 9293 states and the transitions shared by input, timers and the API;
//! * `input`: segment arrival (RFC 9293 §3.10.7, RFC 5961, PAWS) and received data;
//! * `predict`: header prediction, the fast path of in-order data and pure ACKs;
//! * `window`: the receive window we advertise and the peer's send window (RFC 9293 §3.8.6);
//! * `ack`: ACK processing (RFC 9293 §3.10.7.4 fifth check, RFC 5961 §5.2);
//! * `scoreboard`: the retransmission queue and its SACK marks (RFC 6675 §4);
//! * `recovery`: fast retransmit / fast recovery, NewReno, SACK recovery, RTO recovery;
//! * `output`: building segments (`poll_transmit*`), new data, Nagle, record alignment (MPA-61);
//! * `timers`: the retransmission, delayed-ACK, persist, keepalive and TIME-WAIT timers;
//! * `options`: negotiated options (MSS, window scale, timestamps, SACK-permitted);
//! * `rst`: resets for segments without a connection;
//! * `rdma`: the TCP RDMA option (annotations sent, runs placed; draft-csapuntz-tcprdma-00).

mod ack;
mod input;
mod options;
mod output;
mod predict;
mod rdma;
mod record_queue;
mod recovery;
mod rst;
mod scoreboard;
mod state;
mod timers;
mod window;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use crate::time::Timestamp;

use crate::cc::Congestion;
use crate::config::{Config, TcpConfigError};
use crate::counters::TcpCounters;
use crate::isn::{FourTuple, IsnGenerator};
use crate::rdma::annotate::SendMarks;
use crate::rdma::placement::Placements;
use crate::rtt::RttEstimator;
use crate::rx::{OooBudget, OooLimits, RecvBuffer, RxChunk};
use crate::seq::{SeqNum, SeqSpace};
use crate::template::HeaderTemplate;
use crate::tx::{RecordId, SendBuffer, Split};
use crate::wire::TcpSegment;

pub(crate) use options::default_peer_mss;
use options::{Negotiated, TsClock};
pub use record_queue::RecordQueue;
use recovery::LossRecovery;
pub use rst::emit_rst_for;
pub(crate) use rst::{emit_rst, rst_for, RstOut};
use scoreboard::Scoreboard;
pub use state::{CloseReason, State};
use timers::Timers;

/// Something the upper layer should know (drained with [`Connection::poll_event`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The handshake completed (ESTABLISHED).
    Connected,
    /// New data can be read (`recv` in byte mode, `poll_recv` in record mode).
    Readable,
    /// The peer sent FIN (MPA-04: report close); no more data will arrive.
    PeerClosed,
    /// An external record was fully acknowledged; its memory may be released.
    RecordAcked(RecordId),
    /// Send buffer space became available.
    Writable,
    /// The connection is over.
    Closed(CloseReason),
}

/// Errors of the send calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendError {
    /// The connection cannot send (not open, or already closed for sending).
    InvalidState,
    /// Not enough send-buffer space for the whole record.
    BufferFull,
    /// Record mode is on: use `send_record*`; or off: use `send`.
    WrongMode,
    /// Empty records are not allowed.
    EmptyRecord,
}

/// One TCP connection (sans-IO).
#[derive(Debug)]
pub struct Connection {
    cfg: Config,
    tuple: FourTuple,
    state: State,
    passive: bool,
    from_listen: bool,
    challenge_window: Option<Timestamp>,
    challenge_count: u32,
    closed_normally: bool,

    // Send side (offsets: SYN at 0, data from 1).
    snd: SeqSpace,
    snd_una: u64,
    snd_nxt: u64,
    snd_wnd: u32,
    max_snd_wnd: u32,
    snd_wl1: SeqNum,
    snd_wl2: SeqNum,
    sendbuf: SendBuffer,
    /// Segments sent and not yet acknowledged, with their SACK marks.
    scoreboard: Scoreboard,
    fin_queued: bool,
    syn_due: bool,
    syn_tx_count: u32,
    record_mode_tx: bool,
    last_split: Option<Split>,

    // Receive side.
    rcv: SeqSpace,
    recv: RecvBuffer,
    rcv_edge: u64,
    fin_rcvd: Option<u64>,
    fin_delivered: bool,

    // Options.
    opts: Negotiated,
    /// [`options::effective_mss`] of `opts`, `cfg` and `tuple`, kept current by `set_emss`.
    emss: u32,
    ts_clock: TsClock,
    last_ack_sent: u64,

    // Timers.
    timers: Timers,
    rtt: RttEstimator,
    rtt_timed: Option<(u64, Timestamp)>,
    retries: u32,
    syn_timed_out: bool,
    persist_backoff: u32,
    /// When the current zero-window stretch began (persist limit).
    persist_since: Option<Timestamp>,
    keepalive_sent: u32,
    /// [`timers::keepalive_idle_ns`] of `cfg`.
    keepalive_idle_ns: u64,

    // Congestion and loss recovery.
    cc: Congestion,
    recovery: LossRecovery,

    // ACK generation.
    ack_now: bool,
    /// RFC 5681 §4.2: immediate *duplicate* ACKs (no data) owed, one per out-of-order or
    /// gap-filling segment (capped), even when several arrived in one batch.
    dupacks_owed: u8,
    fin_hold_over: bool,
    ack_pending: bool,
    segs_since_ack: u32,
    quick_acks: u32,
    probe_due: bool,
    rst_out: Option<RstOut>,

    events: VecDeque<Event>,
    /// Whether Readable, Writable and RecordAcked are queued ([`Connection::set_data_events`]).
    data_events: bool,
    counters: TcpCounters,
    ooo_limits: OooLimits,
    /// Lengths of the chunks handed to a sink during one `handle_segment_with` (capacity kept).
    sink_lens: Vec<u64>,
    /// TCP RDMA option: the send stream's transfer runs and message starts.
    marks: SendMarks,
    /// TCP RDMA option: the receive buffers registered per RID.
    placements: Placements,
    /// TCP RDMA option: the not-yet-received parts of the segment being accepted (capacity kept).
    rdma_gaps: Vec<(u64, u64)>,
    /// The header template of segments without options but timestamps (the fast path), once
    /// the connection is synchronized.
    template: Option<Box<HeaderTemplate>>,
}

impl Connection {
    fn blank(
        cfg: Config,
        tuple: FourTuple,
        iss: SeqNum,
        gen: &IsnGenerator,
        now: Timestamp,
    ) -> Self {
        let mss = u32::from(cfg.mss);
        let ooo_limits = OooLimits {
            max_ranges: cfg.max_ooo_ranges,
            max_bytes: u64::from(cfg.max_ooo_bytes.min(cfg.recv_buffer)),
        };
        Connection {
            rtt: RttEstimator::new(cfg.rto_initial, cfg.rto_min, cfg.rto_max),
            cc: Congestion::new(cfg.congestion, mss, cfg.initial_window),
            quick_acks: cfg.quick_acks,
            tuple,
            state: State::Closed,
            passive: false,
            from_listen: false,
            challenge_window: None,
            challenge_count: 0,
            closed_normally: false,
            snd: SeqSpace { isn: iss },
            snd_una: 0,
            snd_nxt: 0,
            snd_wnd: 0,
            max_snd_wnd: 0,
            snd_wl1: SeqNum(0),
            snd_wl2: SeqNum(0),
            sendbuf: SendBuffer::new(1),
            scoreboard: Scoreboard::default(),
            fin_queued: false,
            syn_due: false,
            syn_tx_count: 0,
            record_mode_tx: false,
            last_split: None,
            rcv: SeqSpace::default(),
            recv: RecvBuffer::new(1),
            rcv_edge: 1,
            fin_rcvd: None,
            fin_delivered: false,
            opts: Negotiated::default(),
            emss: options::effective_mss(&Negotiated::default(), &cfg, &tuple),
            ts_clock: TsClock::new(gen.epoch().min(now), gen.ts_offset(&tuple)),
            last_ack_sent: 0,
            timers: Timers::default(),
            rtt_timed: None,
            retries: 0,
            syn_timed_out: false,
            persist_backoff: 0,
            persist_since: None,
            keepalive_sent: 0,
            keepalive_idle_ns: timers::keepalive_idle_ns(&cfg),
            recovery: LossRecovery::default(),
            ack_now: false,
            dupacks_owed: 0,
            fin_hold_over: false,
            ack_pending: false,
            segs_since_ack: 0,
            probe_due: false,
            rst_out: None,
            events: VecDeque::new(),
            data_events: true,
            counters: TcpCounters::default(),
            ooo_limits,
            sink_lens: Vec::with_capacity(8),
            marks: SendMarks::default(),
            placements: Placements::default(),
            rdma_gaps: Vec::new(),
            template: None,
            cfg,
        }
    }

    /// Active open (RFC 9293 §3.10.1 OPEN, active): sends a SYN from `tuple.local` to `tuple.remote`.
    /// Refuses a `cfg` that fails [`Config::validate`].
    pub fn connect(
        cfg: Config,
        tuple: FourTuple,
        gen: &IsnGenerator,
        now: Timestamp,
    ) -> Result<Self, TcpConfigError> {
        cfg.validate()?;
        let iss = gen.isn(&tuple, now);
        let mut c = Self::blank(cfg, tuple, iss, gen, now);
        c.state = State::SynSent;
        c.syn_due = true;
        Ok(c)
    }

    /// Passive open of a single connection (RFC 9293 §3.10.1 OPEN, passive): LISTEN on `local`.
    /// For many connections use [`crate::TcpListener`]. Refuses a `cfg` that fails
    /// [`Config::validate`].
    pub fn listen(
        cfg: Config,
        local: SocketAddr,
        gen: &IsnGenerator,
        now: Timestamp,
    ) -> Result<Self, TcpConfigError> {
        cfg.validate()?;
        let tuple = FourTuple {
            local,
            remote: SocketAddr::from(([0, 0, 0, 0], 0)),
        };
        let mut c = Self::blank(cfg, tuple, SeqNum(0), gen, now);
        c.state = State::Listen;
        c.passive = true;
        c.from_listen = true;
        Ok(c)
    }

    /// A connection in SYN-RECEIVED for the SYN `syn` (used by [`crate::TcpListener`]).
    pub fn accept_syn(
        cfg: Config,
        syn: &TcpSegment<'_>,
        gen: &IsnGenerator,
        now: Timestamp,
    ) -> Self {
        let iss = gen.isn(&syn.tuple, now);
        let mut c = Self::blank(cfg, syn.tuple, iss, gen, now);
        c.passive = true;
        c.on_syn(syn, now);
        c.state = State::SynReceived;
        c.syn_due = true;
        c
    }

    /// A connection in ESTABLISHED rebuilt from a validated SYN cookie (used by [`crate::TcpListener`]).
    /// `iss` is our cookie ISN, `ack` the cookie-validating ACK segment, `mss` the MSS the cookie
    /// encoded, `wscale`/`sack` the peer's options recovered from the cookie's timestamp bits.
    pub(crate) fn from_cookie(
        cfg: Config,
        ack: &TcpSegment<'_>,
        iss: SeqNum,
        mss: u16,
        peer_opts: Option<(Option<u8>, bool)>,
        gen: &IsnGenerator,
        now: Timestamp,
    ) -> Self {
        let mut c = Self::blank(cfg, ack.tuple, iss, gen, now);
        c.passive = true;
        c.rcv = SeqSpace {
            isn: ack.seq.plus(u32::MAX),
        };
        // The cookie SYN-ACK advertised min(recv_buffer, 65535), unscaled.
        c.rcv_edge = 1 + u64::from(c.cfg.recv_buffer.min(65535));
        c.opts.peer_mss = mss;
        if let Some((ws, sack)) = peer_opts {
            if let (Some(ws), Some(ours)) = (ws, c.cfg.window_scale) {
                c.opts.ws_enabled = true;
                c.opts.snd_wscale = ws.min(14);
                c.opts.rcv_wscale = ours;
            }
            c.opts.sack = sack && c.cfg.sack;
            c.opts.ts = c.cfg.timestamps && ack.options.timestamps.is_some();
            if let Some((v, _)) = ack.options.timestamps {
                c.opts.ts_recent = v;
            }
        }
        c.snd_una = 1;
        c.snd_nxt = 1;
        c.snd_wl1 = ack.seq;
        c.snd_wl2 = ack.ack;
        c.snd_wnd = u32::from(ack.window) << c.opts.snd_wscale;
        c.max_snd_wnd = c.snd_wnd;
        c.last_ack_sent = 1;
        c.set_emss();
        c.state = State::Established;
        c.events.push_back(Event::Connected);
        c.arm_keepalive(now);
        c
    }

    // ----- accessors ---------------------------------------------------------------------------

    /// The current state.
    pub fn state(&self) -> State {
        self.state
    }

    /// The 4-tuple.
    pub fn tuple(&self) -> FourTuple {
        self.tuple
    }

    /// Counters.
    pub fn counters(&self) -> &TcpCounters {
        &self.counters
    }

    /// Congestion window (octets).
    pub fn cwnd(&self) -> u32 {
        self.cc.cwnd
    }

    /// Slow-start threshold (octets).
    pub fn ssthresh(&self) -> u32 {
        self.cc.ssthresh
    }

    /// True while in fast recovery.
    pub fn in_recovery(&self) -> bool {
        self.recovery.active
    }

    /// Current RTO.
    pub fn rto(&self) -> Duration {
        self.rtt.rto()
    }

    /// Smoothed RTT, once measured.
    pub fn srtt(&self) -> Option<Duration> {
        self.rtt.srtt()
    }

    /// RCV.NXT: the in-order point of the receive side.
    pub fn rcv_nxt(&self) -> SeqNum {
        self.rcv.seq(self.recv.nxt)
    }

    /// The in-order point as a stream offset (octets of data received in order).
    pub fn rcv_nxt_offset(&self) -> u64 {
        // The SYN and a received FIN occupy sequence space but no data offset.
        (self.recv.nxt - u64::from(self.fin_delivered)).saturating_sub(1)
    }

    /// SND.UNA.
    pub fn snd_una(&self) -> SeqNum {
        self.snd.seq(self.snd_una)
    }

    /// Octets of send data queued and not yet acknowledged.
    pub fn send_queued(&self) -> u64 {
        self.sendbuf.queued
    }

    /// Free send-buffer space.
    pub fn send_capacity(&self) -> u64 {
        u64::from(self.cfg.send_buffer).saturating_sub(self.sendbuf.queued)
    }

    /// The peer's current send window (octets).
    pub fn peer_window(&self) -> u32 {
        self.snd_wnd
    }

    /// Sequence number a stream offset of our send data has on the wire.
    pub fn send_seq_of_offset(&self, offset: u64) -> SeqNum {
        self.snd.seq(offset + 1)
    }

    /// True if SACK was negotiated.
    pub fn sack_enabled(&self) -> bool {
        self.opts.sack
    }

    /// True if timestamps were negotiated.
    pub fn timestamps_enabled(&self) -> bool {
        self.opts.ts
    }

    /// Window scale shifts (ours applied to received windows' meaning, peer's) if negotiated.
    pub fn window_scales(&self) -> Option<(u8, u8)> {
        self.opts
            .ws_enabled
            .then_some((self.opts.rcv_wscale, self.opts.snd_wscale))
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Connects this connection's out-of-order memory to a shared bound.
    pub fn set_ooo_budget(&mut self, b: OooBudget) {
        self.recv.set_budget(b);
    }

    /// Outstanding octets not yet acknowledged (sequence space).
    pub fn bytes_in_flight(&self) -> u64 {
        self.snd_nxt.saturating_sub(self.snd_una)
    }

    // ----- upper-layer calls -------------------------------------------------------------------

    fn can_send(&self) -> bool {
        matches!(
            self.state,
            State::SynSent | State::SynReceived | State::Established | State::CloseWait
        ) && !self.fin_queued
    }

    /// Byte-stream mode: queues as much of `data` as fits; returns the count.
    pub fn send(&mut self, data: &[u8]) -> Result<usize, SendError> {
        if !self.can_send() {
            return Err(SendError::InvalidState);
        }
        if self.record_mode_tx {
            return Err(SendError::WrongMode);
        }
        let n = (self.send_capacity().min(data.len() as u64)) as usize;
        self.sendbuf.push_bytes(&data[..n]);
        Ok(n)
    }

    /// Switches the send side to record mode (MPA Full Operation): from now on every segment begins
    /// with a record and holds only whole records. Byte data queued before stays byte data.
    pub fn enter_record_mode(&mut self) {
        self.record_mode_tx = true;
        self.restore_placed(|_, _| true);
        // Nothing is placed in record mode: no segment is expected for the shortcut.
        self.placements.stop_predicting();
        let rcv = self.rcv;
        self.recv.enter_record_mode(|o| rcv.seq(o));
    }

    /// True when record mode is on.
    pub fn record_mode(&self) -> bool {
        self.record_mode_tx
    }

    /// Record mode: queues a record of `len` octets whose bytes `source` will write at
    /// (re)transmission time. Returns the record's stream offset.
    pub fn send_record(&mut self, len: u32, id: RecordId) -> Result<u64, SendError> {
        self.check_record(len)?;
        Ok(self.push_record(len, id))
    }

    /// Queues a checked record; returns its stream offset.
    #[inline]
    fn push_record(&mut self, len: u32, id: RecordId) -> u64 {
        let off = self.sendbuf.end - 1;
        self.sendbuf.push_external_record(len, id);
        off
    }

    /// Record mode: queues a record whose bytes the connection keeps. Returns its stream offset.
    pub fn send_record_bytes(&mut self, data: &[u8]) -> Result<u64, SendError> {
        self.check_record(u32::try_from(data.len()).map_err(|_| SendError::BufferFull)?)?;
        let off = self.sendbuf.end - 1;
        self.sendbuf.push_owned_record(data);
        Ok(off)
    }

    fn check_record(&self, len: u32) -> Result<(), SendError> {
        self.check_sendable_records()?;
        self.check_record_len(len)
    }

    /// Whether records can be queued now: the state allows sending and record mode is on.
    fn check_sendable_records(&self) -> Result<(), SendError> {
        if !self.can_send() {
            return Err(SendError::InvalidState);
        }
        if !self.record_mode_tx {
            return Err(SendError::WrongMode);
        }
        Ok(())
    }

    /// Whether a record of `len` octets fits: not empty, and room for it in the send buffer.
    #[inline]
    fn check_record_len(&self, len: u32) -> Result<(), SendError> {
        if len == 0 {
            return Err(SendError::EmptyRecord);
        }
        if u64::from(len) > self.send_capacity() {
            return Err(SendError::BufferFull);
        }
        Ok(())
    }

    /// Byte mode: reads in-order data.
    pub fn recv(&mut self, buf: &mut [u8]) -> usize {
        let before = self.window_to_advertise();
        let want = buf.len() as u64;
        self.restore_placed(|at, _| at < want);
        let n = self.recv.read(buf);
        self.maybe_window_update(before);
        n
    }

    /// Byte mode: octets ready for `recv`.
    pub fn recv_ready(&self) -> usize {
        self.recv.readable()
    }

    /// Record mode: the next committed chunk (in order or out of order, each octet once).
    pub fn poll_recv(&mut self) -> Option<RxChunk> {
        // Most rounds have nothing here (the receive sink took the data in place): skip the
        // window arithmetic, which only a chunk taken can change.
        if !self.recv.has_chunk() {
            return None;
        }
        let before = self.window_to_advertise();
        let c = self.recv.pop_chunk();
        self.maybe_window_update(before);
        c
    }

    /// Acknowledge the next `n` data segments at once (e.g. while MPA starts up).
    pub fn quick_ack(&mut self, n: u32) {
        self.quick_acks = self.quick_acks.max(n);
    }

    /// Whether [`Event::Readable`], [`Event::Writable`] and [`Event::RecordAcked`] are queued
    /// (on by default). An owner that learns of received and acknowledged data another way
    /// (an iWARP queue pair: placement through the receive sink, completions from SND.UNA)
    /// turns them off and spares a queued and dropped event per segment and per record. The
    /// connection-state events are always queued.
    pub fn set_data_events(&mut self, on: bool) {
        self.data_events = on;
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Whether [`Connection::poll_event`] has an event.
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// Record mode: whether [`Connection::poll_recv`] has a chunk (most segments are placed
    /// through the receive sink and leave none).
    pub fn has_recv_chunk(&self) -> bool {
        self.recv.has_chunk()
    }

    /// Whether all this connection has to send is one pure ACK (an ACK due; no RST, SYN,
    /// duplicate ACK, probe, lost segment, loss recovery, unsent data or FIN): the next
    /// transmit writes it and [`Connection::has_nothing_to_send`] holds after it.
    pub fn has_only_an_ack_to_send(&self) -> bool {
        self.ack_now && self.nothing_but_an_ack_to_send()
    }

    pub(super) fn has_unsent(&self) -> bool {
        self.snd_nxt < self.sendbuf.end || (self.fin_queued && self.snd_nxt == self.sendbuf.end)
    }
}
