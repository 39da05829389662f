//! One TCP connection: the RFC 9293 state machine with RFC 5961 protections, RFC 7323 options,
//! RFC 6298 retransmission timer, RFC 5681/6582/6675 loss recovery, CUBIC/NewReno, delayed ACKs,
//! persist and keepalive timers, and the MPA-aware send and receive paths.
//!
//! Sans-IO: see the crate docs for the call order.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::cc::Congestion;
use crate::config::Config;
use crate::counters::Counters;
use crate::isn::{FourTuple, IsnGenerator};
use crate::rtt::RttEstimator;
use crate::rx::{OooBudget, OooLimits, RecvBuffer, RxChunk, RxRef, RxSink};
use crate::seq::{SeqNum, SeqSpace};
use crate::tx::{NoRecordSource, Plan, RecordId, RecordSource, SendBuffer, Split};
use crate::wire::{self, Flags, Segment, SegmentRepr, TcpOptions, WireError, MAX_SACK_BLOCKS};

/// Connection states, named as in RFC 9293 §3.3.2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// No connection.
    Closed,
    /// Waiting for a SYN.
    Listen,
    /// SYN sent, waiting for a matching SYN.
    SynSent,
    /// SYN received and SYN-ACK sent, waiting for the ACK.
    SynReceived,
    /// Open: data flows both ways.
    Established,
    /// We closed; our FIN is not yet acknowledged.
    FinWait1,
    /// Our FIN is acknowledged; waiting for the peer's FIN.
    FinWait2,
    /// The peer closed; we may still send.
    CloseWait,
    /// Both closed at once; waiting for the ACK of our FIN.
    Closing,
    /// The peer closed first, then we did; waiting for the ACK of our FIN.
    LastAck,
    /// Both FINs acknowledged; waiting 2*MSL.
    TimeWait,
}

impl State {
    /// States after the handshake (RFC 9293 "synchronized states").
    pub fn is_synchronized(self) -> bool {
        !matches!(
            self,
            State::Closed | State::Listen | State::SynSent | State::SynReceived
        )
    }
}

/// Why a connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// Orderly close (both FINs exchanged).
    Normal,
    /// The peer reset the connection.
    Reset,
    /// Retransmissions or keepalives went unanswered.
    TimedOut,
    /// We aborted (sent RST).
    Aborted,
    /// The connection attempt was refused (RST in SYN-SENT).
    Refused,
}

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

#[derive(Clone, Copy, Debug)]
struct SentSeg {
    off: u64,
    len: u32,
    fin: bool,
    sacked: bool,
    lost: bool,
    /// Retransmitted since it was last marked lost.
    rexmit: bool,
    /// Ever retransmitted (Karn).
    ever_rexmit: bool,
    /// TSval of the latest retransmission (spurious detection).
    rexmit_ts: u32,
}

impl SentSeg {
    fn end(&self) -> u64 {
        self.off + u64::from(self.len) + u64::from(self.fin)
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct RstOut {
    pub seq: SeqNum,
    pub ack: Option<SeqNum>,
}

/// One TCP connection (sans-IO).
#[derive(Debug)]
pub struct Connection {
    cfg: Config,
    tuple: FourTuple,
    state: State,
    passive: bool,
    from_listen: bool,
    challenge_window: Option<Instant>,
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
    sent: VecDeque<SentSeg>,
    /// Sum of the sequence lengths in `sent`.
    sent_bytes: u64,
    /// Sum over SACKed segments in `sent`.
    sacked_bytes: u64,
    /// Segments marked lost and not yet retransmitted (and their octets).
    lost_pending: u32,
    lost_pending_bytes: u64,
    /// Octets of segments retransmitted while not deemed lost (NextSeg rule 3): in the network twice
    /// (RFC 6675 §4 pipe: not lost, and at or below HighRxt).
    rexmit_unlost_bytes: u64,
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
    snd_wscale: u8,
    rcv_wscale: u8,
    ws_enabled: bool,
    peer_mss: u16,
    ts_enabled: bool,
    ts_recent: u32,
    ts_offset: u32,
    ts_epoch: Instant,
    /// The last `(now, ts_now(now))`; its TSval is also the floor of the next one.
    ts_cache: Option<(Instant, u32)>,
    last_ack_sent: u64,
    sack_enabled: bool,

    // Timers.
    rto_at: Option<Instant>,
    delack_at: Option<Instant>,
    persist_at: Option<Instant>,
    keepalive_at: Option<Instant>,
    timewait_at: Option<Instant>,
    rtt: RttEstimator,
    rtt_timed: Option<(u64, Instant)>,
    retries: u32,
    syn_timed_out: bool,
    persist_backoff: u32,
    keepalive_sent: u32,

    // Congestion and loss recovery.
    cc: Congestion,
    dupacks: u32,
    in_recovery: bool,
    recovery_point: u64,
    recover: u64,
    /// RFC 6675 RescueRxt: the RecoveryPoint of the episode that made its rescue retransmission
    /// (`None`: undefined; reset on entering recovery so each episode has one).
    rescue_rxt: Option<u64>,

    // ACK generation.
    ack_now: bool,
    /// RFC 5681 §4.2: immediate *duplicate* ACKs (no data) owed, one per out-of-order or
    /// gap-filling segment (capped), even when several arrived in one batch.
    dupacks_owed: u8,
    /// Our FIN is held until then while the peer's data has holes.
    fin_hold_until: Option<Instant>,
    fin_hold_over: bool,
    ack_pending: bool,
    segs_since_ack: u32,
    quick_acks: u32,
    probe_due: bool,
    rst_out: Option<RstOut>,

    events: VecDeque<Event>,
    counters: Counters,
    ooo_limits: OooLimits,
    /// Lengths of the chunks handed to a sink during one `handle_segment_with` (capacity kept).
    sink_lens: Vec<u64>,
}

/// IP + TCP header octets without options (RFC 9293 §3.7.1 MMS_S - MSS).
fn ip_tcp_overhead(tuple: &FourTuple) -> u16 {
    match tuple.local {
        SocketAddr::V4(_) => 40,
        SocketAddr::V6(_) => 60,
    }
}

/// Options we offer in a SYN / SYN-ACK.
fn syn_options(cfg: &Config, tuple: &FourTuple) -> TcpOptions {
    TcpOptions {
        mss: Some(cfg.mss.min(cfg.mtu.saturating_sub(ip_tcp_overhead(tuple)))),
        window_scale: cfg.window_scale,
        sack_permitted: cfg.sack,
        timestamps: cfg.timestamps.then_some((0, 0)),
        ..Default::default()
    }
}

impl Connection {
    fn blank(cfg: Config, tuple: FourTuple, iss: SeqNum, gen: &IsnGenerator, now: Instant) -> Self {
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
            sent: VecDeque::new(),
            sent_bytes: 0,
            sacked_bytes: 0,
            lost_pending: 0,
            lost_pending_bytes: 0,
            rexmit_unlost_bytes: 0,
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
            snd_wscale: 0,
            rcv_wscale: 0,
            ws_enabled: false,
            peer_mss: 536,
            ts_enabled: false,
            ts_recent: 0,
            ts_offset: gen.ts_offset(&tuple),
            ts_epoch: gen.epoch().min(now),
            ts_cache: None,
            last_ack_sent: 0,
            sack_enabled: false,
            rto_at: None,
            delack_at: None,
            persist_at: None,
            keepalive_at: None,
            timewait_at: None,
            rtt_timed: None,
            retries: 0,
            syn_timed_out: false,
            persist_backoff: 0,
            keepalive_sent: 0,
            dupacks: 0,
            in_recovery: false,
            recovery_point: 0,
            recover: 0,
            rescue_rxt: None,
            ack_now: false,
            dupacks_owed: 0,
            fin_hold_until: None,
            fin_hold_over: false,
            ack_pending: false,
            segs_since_ack: 0,
            probe_due: false,
            rst_out: None,
            events: VecDeque::new(),
            counters: Counters::default(),
            ooo_limits,
            sink_lens: Vec::with_capacity(8),
            cfg,
        }
    }

    /// Active open (RFC 9293 §3.10.1 OPEN, active): sends a SYN from `tuple.local` to `tuple.remote`.
    pub fn connect(cfg: Config, tuple: FourTuple, gen: &IsnGenerator, now: Instant) -> Self {
        let iss = gen.isn(&tuple, now);
        let mut c = Self::blank(cfg, tuple, iss, gen, now);
        c.state = State::SynSent;
        c.syn_due = true;
        c
    }

    /// Passive open of a single connection (RFC 9293 §3.10.1 OPEN, passive): LISTEN on `local`.
    /// For many connections use [`crate::Listener`].
    pub fn listen(cfg: Config, local: SocketAddr, gen: &IsnGenerator, now: Instant) -> Self {
        let tuple = FourTuple {
            local,
            remote: SocketAddr::from(([0, 0, 0, 0], 0)),
        };
        let mut c = Self::blank(cfg, tuple, SeqNum(0), gen, now);
        c.state = State::Listen;
        c.passive = true;
        c.from_listen = true;
        c
    }

    /// A connection in SYN-RECEIVED for the SYN `syn` (used by [`crate::Listener`]).
    pub fn accept_syn(cfg: Config, syn: &Segment<'_>, gen: &IsnGenerator, now: Instant) -> Self {
        let iss = gen.isn(&syn.tuple, now);
        let mut c = Self::blank(cfg, syn.tuple, iss, gen, now);
        c.passive = true;
        c.on_syn(syn, now);
        c.state = State::SynReceived;
        c.syn_due = true;
        c
    }

    /// A connection in ESTABLISHED rebuilt from a validated SYN cookie (used by [`crate::Listener`]).
    /// `iss` is our cookie ISN, `ack` the cookie-validating ACK segment, `mss` the MSS the cookie
    /// encoded, `wscale`/`sack` the peer's options recovered from the cookie's timestamp bits.
    pub(crate) fn from_cookie(
        cfg: Config,
        ack: &Segment<'_>,
        iss: SeqNum,
        mss: u16,
        peer_opts: Option<(Option<u8>, bool)>,
        gen: &IsnGenerator,
        now: Instant,
    ) -> Self {
        let mut c = Self::blank(cfg, ack.tuple, iss, gen, now);
        c.passive = true;
        c.rcv = SeqSpace {
            isn: ack.seq.plus(u32::MAX),
        };
        // The cookie SYN-ACK advertised min(recv_buffer, 65535), unscaled.
        c.rcv_edge = 1 + u64::from(c.cfg.recv_buffer.min(65535));
        c.peer_mss = mss;
        if let Some((ws, sack)) = peer_opts {
            if let (Some(ws), Some(ours)) = (ws, c.cfg.window_scale) {
                c.ws_enabled = true;
                c.snd_wscale = ws.min(14);
                c.rcv_wscale = ours;
            }
            c.sack_enabled = sack && c.cfg.sack;
            c.ts_enabled = c.cfg.timestamps && ack.options.timestamps.is_some();
            if let Some((v, _)) = ack.options.timestamps {
                c.ts_recent = v;
            }
        }
        c.snd_una = 1;
        c.snd_nxt = 1;
        c.snd_wl1 = ack.seq;
        c.snd_wl2 = ack.ack;
        c.snd_wnd = u32::from(ack.window) << c.snd_wscale;
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
    pub fn counters(&self) -> &Counters {
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
        self.in_recovery
    }
    /// Current RTO.
    pub fn rto(&self) -> Duration {
        self.rtt.rto()
    }
    /// Smoothed RTT, once measured.
    pub fn srtt(&self) -> Option<Duration> {
        self.rtt.srtt()
    }
    /// The effective MSS for payload (EMSS, MPA §3.1.1: min(MSS, PMTU - headers incl. options)).
    pub fn emss(&self) -> u32 {
        let base = u32::from(
            self.peer_mss
                .min(self.cfg.mss)
                .min(self.cfg.mtu.saturating_sub(ip_tcp_overhead(&self.tuple))),
        );
        base.saturating_sub(if self.ts_enabled { 12 } else { 0 })
            .max(1)
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
        self.sack_enabled
    }
    /// True if timestamps were negotiated.
    pub fn timestamps_enabled(&self) -> bool {
        self.ts_enabled
    }
    /// Window scale shifts (ours applied to received windows' meaning, peer's) if negotiated.
    pub fn window_scales(&self) -> Option<(u8, u8)> {
        self.ws_enabled
            .then_some((self.rcv_wscale, self.snd_wscale))
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
        let off = self.sendbuf.end - 1;
        self.sendbuf.push_external_record(len, id);
        Ok(off)
    }

    /// Record mode: queues a record whose bytes the connection keeps. Returns its stream offset.
    pub fn send_record_bytes(&mut self, data: &[u8]) -> Result<u64, SendError> {
        self.check_record(u32::try_from(data.len()).map_err(|_| SendError::BufferFull)?)?;
        let off = self.sendbuf.end - 1;
        self.sendbuf.push_owned_record(data);
        Ok(off)
    }

    fn check_record(&self, len: u32) -> Result<(), SendError> {
        if !self.can_send() {
            return Err(SendError::InvalidState);
        }
        if !self.record_mode_tx {
            return Err(SendError::WrongMode);
        }
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
        let before = self.window_to_advertise();
        let c = self.recv.pop_chunk();
        self.maybe_window_update(before);
        c
    }

    fn maybe_window_update(&mut self, before: u64) {
        let after = self.window_to_advertise();
        self.window_update_if_opened(before, after);
    }

    /// Asks for a window-update ACK when reading opened the window from `before` to `after` by
    /// min(2 EMSS, buffer / 2) while it was below half the buffer.
    fn window_update_if_opened(&mut self, before: u64, after: u64) {
        let thresh = u64::from(self.emss())
            .saturating_mul(2)
            .min(u64::from(self.cfg.recv_buffer) / 2);
        if self.state.is_synchronized()
            && after >= before + thresh
            && before < u64::from(self.cfg.recv_buffer) / 2
        {
            self.ack_now = true;
        }
    }

    /// Acknowledge the next `n` data segments at once (e.g. while MPA starts up).
    pub fn quick_ack(&mut self, n: u32) {
        self.quick_acks = self.quick_acks.max(n);
    }

    /// Orderly close of our sending half (RFC 9293 §3.10.4): a FIN follows the queued data.
    pub fn close(&mut self, now: Instant) {
        match self.state {
            State::Listen | State::SynSent => self.terminate(CloseReason::Normal),
            State::SynReceived => {
                // The FIN follows once ESTABLISHED is reached (RFC 9293 §3.10.4).
                self.fin_queued = true;
            }
            State::Established => {
                self.fin_queued = true;
                self.state = State::FinWait1;
            }
            State::CloseWait => {
                self.fin_queued = true;
                self.state = State::LastAck;
            }
            _ => {}
        }
        let _ = now;
    }

    /// Abort (RFC 9293 §3.10.5): sends RST and closes.
    pub fn abort(&mut self) {
        if self.state.is_synchronized() || self.state == State::SynReceived {
            self.rst_out = Some(RstOut {
                seq: self.snd.seq(self.snd_nxt),
                ack: None,
            });
        }
        self.terminate(CloseReason::Aborted);
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn terminate(&mut self, why: CloseReason) {
        self.closed_normally = why == CloseReason::Normal && self.state.is_synchronized();
        if self.state != State::Closed {
            self.state = State::Closed;
            self.events.push_back(Event::Closed(why));
        }
        self.rto_at = None;
        self.delack_at = None;
        self.persist_at = None;
        self.keepalive_at = None;
        self.timewait_at = None;
        self.ack_now = false;
        self.ack_pending = false;
        self.probe_due = false;
        self.syn_due = false;
    }

    // ----- timers -------------------------------------------------------------------------------

    /// The earliest time `handle_timeout` must be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        [
            self.rto_at,
            self.delack_at,
            self.persist_at,
            self.keepalive_at,
            self.timewait_at,
            self.fin_hold_until,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Runs every timer that expired at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.fin_hold_until.is_some_and(|t| t <= now) {
            self.fin_hold_until = None;
            self.fin_hold_over = true;
        }
        if self.timewait_at.is_some_and(|t| t <= now) {
            self.timewait_at = None;
            self.terminate(CloseReason::Normal);
            return;
        }
        if self.rto_at.is_some_and(|t| t <= now) {
            self.rto_at = None;
            self.on_rto(now);
        }
        if self.delack_at.is_some_and(|t| t <= now) {
            self.delack_at = None;
            if self.ack_pending {
                self.ack_now = true;
                self.counters.delayed_acks += 1;
            }
        }
        if self.persist_at.is_some_and(|t| t <= now) {
            self.persist_at = None;
            if self.snd_wnd == 0 && self.sent.is_empty() && self.has_unsent() {
                // RFC 9293 §3.8.6.1: probe the zero window; back off like the RTO.
                self.probe_due = true;
                self.counters.window_probes += 1;
                self.persist_backoff = self.persist_backoff.saturating_add(1);
                self.arm_persist(now);
            }
        }
        if self.keepalive_at.is_some_and(|t| t <= now) {
            self.keepalive_at = None;
            if let Some(ka) = self.cfg.keepalive {
                if self.keepalive_sent >= ka.probes {
                    self.terminate(CloseReason::TimedOut);
                    return;
                }
                if self.state.is_synchronized() && self.sent.is_empty() {
                    self.probe_due = true;
                    self.keepalive_sent += 1;
                    self.counters.keepalives += 1;
                }
                self.keepalive_at = Some(now + ka.interval);
            }
        }
    }

    /// RFC 6298 §5.1: start the timer when a segment is sent and it is not running.
    fn arm_rto_if_idle(&mut self, now: Instant) {
        if self.rto_at.is_none() {
            self.rto_at = Some(now + self.rtt.rto());
        }
    }

    fn arm_keepalive(&mut self, now: Instant) {
        if let Some(ka) = self.cfg.keepalive {
            self.keepalive_sent = 0;
            self.keepalive_at = Some(now + ka.idle);
        }
    }

    fn on_rto(&mut self, now: Instant) {
        self.counters.rto_expiries += 1;
        match self.state {
            State::SynSent | State::SynReceived => {
                self.syn_tx_count += 1;
                if self.syn_tx_count > self.cfg.syn_retries {
                    self.terminate(CloseReason::TimedOut);
                    return;
                }
                self.syn_timed_out = true;
                self.rtt.back_off();
                self.syn_due = true;
                self.counters.retransmits += 1;
                self.counters.rto_retransmits += 1;
            }
            _ if !self.sent.is_empty() => {
                self.retries += 1;
                if self.retries > self.cfg.max_retries {
                    self.rst_out = Some(RstOut {
                        seq: self.snd.seq(self.snd_nxt),
                        ack: None,
                    });
                    self.terminate(CloseReason::TimedOut);
                    return;
                }
                // RFC 5681 §3.1 eq. 4 / RFC 6298 §5.4-5.6 / RFC 6582 §4 (recover).
                let flight = self.pipe();
                self.cc.on_rto(flight);
                self.in_recovery = false;
                self.dupacks = 0;
                self.recover = self.snd_nxt;
                for s in self.sent.iter_mut() {
                    if !s.sacked {
                        s.lost = true;
                        s.rexmit = false;
                    }
                }
                self.recount();
                self.rtt_timed = None;
                self.rtt.back_off();
            }
            _ => {}
        }
        self.rto_at = Some(now + self.rtt.rto());
    }

    // ----- receive path -------------------------------------------------------------------------

    /// Parses `packet` (an IP packet) and handles it. Malformed packets are dropped and counted.
    pub fn handle_packet(&mut self, now: Instant, packet: &[u8]) -> Result<(), WireError> {
        let seg = wire::parse_counted(
            packet,
            &mut self.counters.malformed,
            &mut self.counters.bad_checksum,
        )?;
        self.handle_segment(now, &seg);
        Ok(())
    }

    /// Handles one parsed segment addressed to this connection (RFC 9293 §3.10.7 SEGMENT ARRIVES).
    /// Record-mode data is queued for [`Self::poll_recv`].
    pub fn handle_segment(&mut self, now: Instant, seg: &Segment<'_>) {
        self.dispatch_segment(now, seg, None);
    }

    /// [`Self::handle_packet`] with [`Self::handle_segment_with`]'s delivery.
    pub fn handle_packet_with(
        &mut self,
        now: Instant,
        packet: &[u8],
        sink: &mut dyn RxSink,
    ) -> Result<(), WireError> {
        let seg = wire::parse_counted(
            packet,
            &mut self.counters.malformed,
            &mut self.counters.bad_checksum,
        )?;
        self.handle_segment_with(now, &seg, sink);
        Ok(())
    }

    /// [`Self::handle_segment`], but in record mode every chunk committed by this segment is handed
    /// to `sink` during the call, its octets borrowed from `seg.payload`: no copy, no allocation.
    ///
    /// Contract: the chunks, their order and every field are exactly what `poll_recv` would have
    /// returned had this been `handle_segment(now, seg)` followed by `poll_recv` until `None`;
    /// chunks still queued from before (by `handle_segment` or by [`Self::enter_record_mode`]) go
    /// to `sink` first. The counters, events (`Readable` included), timers, and the ACKs and
    /// windows that `poll_transmit` emits afterwards are those of that sequence too: the octets
    /// given to the sink never count against the receive window, and a window-update ACK is owed
    /// exactly when draining would have owed one. In byte-stream mode `sink` is not called and
    /// this is `handle_segment` (TCP holds in-order and out-of-order data for `recv`).
    ///
    /// ```no_run
    /// # use std::time::Instant;
    /// # use tcp_offload::{wire, Connection, RxRef};
    /// # fn place(conn: &mut Connection, packet: &[u8], region: &mut [u8]) {
    /// let seg = wire::parse(packet).unwrap();
    /// conn.handle_segment_with(Instant::now(), &seg, &mut |c: RxRef<'_>| {
    ///     // The one copy: from the received frame straight into the memory region.
    ///     let at = c.offset as usize;
    ///     region[at..at + c.data.len()].copy_from_slice(c.data);
    /// });
    /// # }
    /// ```
    pub fn handle_segment_with(&mut self, now: Instant, seg: &Segment<'_>, sink: &mut dyn RxSink) {
        if !self.recv.record_mode {
            self.dispatch_segment(now, seg, None);
            return;
        }
        let mut lens = std::mem::take(&mut self.sink_lens);
        lens.clear();
        let mut out = |c: RxRef<'_>| {
            lens.push(c.data.len() as u64);
            sink.on_chunk(c);
        };
        while let Some(c) = self.recv.pop_chunk() {
            out(c.as_rx_ref());
        }
        self.dispatch_segment(now, seg, Some(&mut out));
        // Replay the window check `poll_recv` makes at each chunk it pops, with the chunks held
        // as they would have been.
        let buffer = u64::from(self.cfg.recv_buffer);
        let held = self.recv.held();
        let mut queued: u64 = lens.iter().sum();
        for &len in &lens {
            let before = buffer.saturating_sub(held + queued);
            queued -= len;
            let after = buffer.saturating_sub(held + queued);
            self.window_update_if_opened(before, after);
        }
        self.sink_lens = lens;
    }

    fn dispatch_segment(&mut self, now: Instant, seg: &Segment<'_>, sink: Option<&mut dyn RxSink>) {
        self.counters.segs_in += 1;
        match self.state {
            State::Closed => {
                // After an orderly close we still know the stream: a late duplicate of data or FIN
                // we already acknowledged (reordered, or a peer's spurious retransmission) is
                // dropped quietly; anything else gets the RST of RFC 9293 §3.10.7.1.
                let old_dup = self.closed_normally
                    && !seg.flags.syn
                    && self.rcv.seq(self.recv.nxt).ge(seg.seq.plus(seg.seg_len()));
                if !old_dup {
                    self.reply_rst(seg);
                }
            }
            State::Listen => self.segment_in_listen(now, seg),
            State::SynSent => self.segment_in_syn_sent(now, seg, sink),
            _ => self.segment_in_sync(now, seg, sink),
        }
    }

    /// RFC 9293 §3.10.7.1: reset for a segment that does not belong to a connection.
    fn reply_rst(&mut self, seg: &Segment<'_>) {
        if seg.flags.rst {
            return;
        }
        self.rst_out = Some(rst_for(seg));
    }

    fn on_syn(&mut self, seg: &Segment<'_>, now: Instant) {
        // Record the peer's ISN and options (RFC 9293 §3.10.7.2/3; RFC 7323 §2.2, §3.2; RFC 2018 §2).
        self.rcv = SeqSpace { isn: seg.seq };
        self.recv = self.recv.fresh(1);
        self.rcv_edge = 1;
        self.fin_rcvd = None;
        let o = &seg.options;
        self.peer_mss = o.mss.unwrap_or(536).max(64);
        if let (Some(ws), Some(ours)) = (o.window_scale, self.cfg.window_scale) {
            self.ws_enabled = true;
            self.snd_wscale = ws.min(14);
            self.rcv_wscale = ours;
        } else {
            self.ws_enabled = false;
            self.snd_wscale = 0;
            self.rcv_wscale = 0;
        }
        self.sack_enabled = o.sack_permitted && self.cfg.sack;
        if let (Some((v, _)), true) = (o.timestamps, self.cfg.timestamps) {
            self.ts_enabled = true;
            self.ts_recent = v;
        } else {
            self.ts_enabled = false;
        }
        self.set_emss();
        let _ = now;
    }

    fn set_emss(&mut self) {
        let emss = self.emss();
        self.cc.set_mss(emss, self.cfg.initial_window);
    }

    fn segment_in_listen(&mut self, now: Instant, seg: &Segment<'_>) {
        // RFC 9293 §3.10.7.2.
        if seg.flags.rst {
            return;
        }
        if seg.flags.ack {
            self.rst_out = Some(rst_for(seg));
            return;
        }
        if !seg.flags.syn || seg.tuple.local.port() != self.tuple.local.port() {
            return;
        }
        self.tuple = seg.tuple;
        self.on_syn(seg, now);
        self.recv.nxt = 1;
        self.state = State::SynReceived;
        self.syn_due = true;
        self.syn_tx_count = 0;
    }

    fn segment_in_syn_sent(
        &mut self,
        now: Instant,
        seg: &Segment<'_>,
        sink: Option<&mut dyn RxSink>,
    ) {
        // RFC 9293 §3.10.7.3.
        let mut ack_ok = false;
        if seg.flags.ack {
            let iss = self.snd.isn;
            if seg.ack.le(iss) || seg.ack.gt(self.snd.seq(self.snd_nxt)) {
                if !seg.flags.rst {
                    self.rst_out = Some(RstOut {
                        seq: seg.ack,
                        ack: None,
                    });
                }
                return;
            }
            ack_ok = true;
        }
        if seg.flags.rst {
            // RFC 5961 §3.2 / RFC 9293: only an RST acknowledging our SYN resets.
            if ack_ok {
                self.counters.rsts_received += 1;
                self.terminate(CloseReason::Refused);
            }
            return;
        }
        if !seg.flags.syn {
            return;
        }
        self.on_syn(seg, now);
        self.recv.nxt = 1;
        if ack_ok {
            self.snd_una = self.snd.off(seg.ack, self.snd_una).unwrap_or(1);
            self.sent.clear();
            self.recount();
            self.rto_at = None;
            self.update_window(seg, true);
            self.establish(now);
            if self.ts_enabled {
                self.sample_rtt_ts(now, seg);
            } else if let Some((_, t)) = self.rtt_timed.take() {
                if self.syn_tx_count == 0 {
                    self.rtt.on_sample(now.saturating_duration_since(t));
                }
            }
            self.ack_now = true;
            self.accept_data(now, seg, sink);
        } else {
            // Simultaneous open (RFC 9293 §3.5, figure 7): SYN-RECEIVED, resend our SYN as SYN-ACK.
            self.state = State::SynReceived;
            self.syn_due = true;
        }
    }

    fn establish(&mut self, now: Instant) {
        self.state = State::Established;
        self.events.push_back(Event::Connected);
        if self.syn_timed_out {
            self.rtt.reinit_after_syn_timeout();
        }
        self.rtt.reset_backoff();
        self.syn_due = false;
        self.arm_keepalive(now);
    }

    /// Our TSval at `now`. Never smaller than the last one (RFC 7323 §5.4: TSval values are
    /// monotonically non-decreasing), even when the caller's `now` goes backwards (several
    /// threads driving one engine with clock reads taken before its lock): a smaller TSval
    /// makes the peer's PAWS drop the segment (RFC 7323 §5.3), a hole it reports with dupacks.
    fn ts_now(&mut self, now: Instant) -> u32 {
        // Calls in one engine poll share `now`: compute the clock once for them.
        if let Some((t, v)) = self.ts_cache {
            if t == now {
                return v;
            }
        }
        let mut v = (now.saturating_duration_since(self.ts_epoch).as_millis() as u32)
            .wrapping_add(self.ts_offset);
        if let Some((_, last)) = self.ts_cache {
            if (v.wrapping_sub(last) as i32) < 0 {
                v = last;
            }
        }
        self.ts_cache = Some((now, v));
        v
    }

    fn sample_rtt_ts(&mut self, now: Instant, seg: &Segment<'_>) {
        if let Some((_, ecr)) = seg.options.timestamps {
            let d = self.ts_now(now).wrapping_sub(ecr);
            if ecr != 0 && d < 60_000 {
                self.rtt
                    .on_sample(Duration::from_millis(u64::from(d)).max(Duration::from_micros(500)));
            }
        }
    }

    fn rcv_wnd(&self) -> u64 {
        self.rcv_edge.saturating_sub(self.recv.nxt)
    }

    /// RFC 9293 §3.10.7.4 first check: is the segment acceptable?
    fn acceptable(&self, seg_off: u64, seg_len: u64) -> bool {
        let nxt = self.recv.nxt;
        let wnd = self.rcv_wnd();
        match (seg_len, wnd) {
            (0, 0) => seg_off == nxt,
            (0, _) => nxt <= seg_off && seg_off < nxt + wnd,
            (_, 0) => false,
            (_, _) => {
                let last = seg_off + seg_len - 1;
                (nxt <= seg_off && seg_off < nxt + wnd) || (nxt <= last && last < nxt + wnd)
            }
        }
    }

    /// RFC 5961 §3.2, §4.2, §5.2 challenge ACK, rate-limited per §7 to
    /// `Config::challenge_acks_per_sec`.
    fn challenge_ack(&mut self, now: Instant) {
        if self
            .challenge_window
            .is_none_or(|t| now.saturating_duration_since(t) >= Duration::from_secs(1))
        {
            self.challenge_window = Some(now);
            self.challenge_count = 0;
        }
        if self.challenge_count >= self.cfg.challenge_acks_per_sec {
            self.counters.challenge_acks_limited += 1;
            return;
        }
        self.challenge_count += 1;
        self.counters.challenge_acks += 1;
        self.ack_now = true;
    }

    fn segment_in_sync(&mut self, now: Instant, seg: &Segment<'_>, sink: Option<&mut dyn RxSink>) {
        let mut seg = *seg;
        // A retransmitted SYN in SYN-RECEIVED: our SYN-ACK was lost; send it again.
        if self.state == State::SynReceived
            && seg.flags.syn
            && !seg.flags.ack
            && seg.seq == self.rcv.isn
        {
            self.syn_due = true;
            return;
        }
        // Simultaneous open: the peer's SYN-ACK repeats its SYN at IRS; drop the SYN part.
        if self.state == State::SynReceived
            && seg.flags.syn
            && seg.flags.ack
            && seg.seq == self.rcv.isn
        {
            seg.flags.syn = false;
            seg.seq = seg.seq.plus(1);
            // Our own SYN-ACK may not have gone out yet: acknowledge theirs explicitly.
            self.ack_now = true;
        }
        // Sequence number as an offset near RCV.NXT (segments with wildly old sequence numbers are
        // simply unacceptable).
        let seg_off = self.rcv.off(seg.seq, self.recv.nxt);
        let seg_len = u64::from(seg.seg_len());
        // RFC 7323 §5.3 PAWS (R1-R3), before the window check; RST exempt.
        if self.ts_enabled && !seg.flags.rst {
            if let Some((v, _)) = seg.options.timestamps {
                if (v.wrapping_sub(self.ts_recent) as i32) < 0 {
                    self.counters.paws_dropped += 1;
                    self.ack_now = true;
                    return;
                }
            }
        }
        let ok = seg_off.is_some_and(|o| self.acceptable(o, seg_len));
        if !ok {
            // RFC 9293 §3.10.7.4: not acceptable -> ACK (unless RST) and drop.
            self.counters.out_of_window += 1;
            if !seg.flags.rst {
                self.ack_now = true;
                if self.state == State::TimeWait && seg.flags.fin {
                    // RFC 9293 §3.10.7.4: a retransmitted FIN restarts the 2 MSL timeout.
                    self.timewait_at = Some(now + self.cfg.time_wait);
                }
            }
            return;
        }
        let seg_off = seg_off.unwrap_or(self.recv.nxt);
        // RFC 7323 §4.3 (TS.Recent update): SEG.SEQ <= Last.ACK.sent.
        if self.ts_enabled {
            if let Some((v, _)) = seg.options.timestamps {
                if seg_off <= self.last_ack_sent && (v.wrapping_sub(self.ts_recent) as i32) >= 0 {
                    self.ts_recent = v;
                }
            }
        }
        self.arm_keepalive(now);
        // Second: RST (RFC 5961 §3.2).
        if seg.flags.rst {
            if seg_off == self.recv.nxt {
                self.counters.rsts_received += 1;
                match self.state {
                    State::SynReceived if self.from_listen => {
                        // RFC 9293 §3.10.7.4: a passive open returns to LISTEN.
                        self.state = State::Listen;
                        self.tuple.remote = SocketAddr::from(([0, 0, 0, 0], 0));
                        self.rto_at = None;
                        self.snd_nxt = 0;
                        self.syn_due = false;
                    }
                    State::Closing | State::LastAck | State::TimeWait => {
                        self.terminate(CloseReason::Normal)
                    }
                    _ => self.terminate(CloseReason::Reset),
                }
            } else {
                self.challenge_ack(now);
            }
            return;
        }
        // Fourth: SYN in a synchronized state (RFC 5961 §4.2) -> challenge ACK.
        if seg.flags.syn {
            self.challenge_ack(now);
            return;
        }
        // Fifth: ACK.
        if !seg.flags.ack {
            return;
        }
        if self.state == State::SynReceived {
            let a = seg.ack;
            if a.gt(self.snd.seq(self.snd_una)) && a.le(self.snd.seq(self.snd_nxt)) {
                self.snd_una = 1;
                self.sent.retain(|s| s.off >= 1);
                self.recount();
                self.rto_at = None;
                self.snd_wl1 = seg.seq;
                self.snd_wl2 = seg.ack;
                self.snd_wnd = u32::from(seg.window) << self.snd_wscale;
                self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
                if self.ts_enabled {
                    self.sample_rtt_ts(now, &seg);
                }
                let fin_queued = self.fin_queued;
                self.establish(now);
                if fin_queued {
                    self.state = State::FinWait1;
                }
            } else {
                self.rst_out = Some(RstOut {
                    seq: seg.ack,
                    ack: None,
                });
                return;
            }
        }
        if !self.process_ack(now, &seg) {
            return;
        }
        // Seventh: segment text.
        if matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        ) {
            self.accept_data(now, &seg, sink);
        } else if !seg.payload.is_empty() {
            // Data after the peer's FIN: ignore but acknowledge.
            self.ack_now = true;
        }
        // Eighth: FIN.
        if seg.flags.fin {
            let fin_off = seg_off + seg.payload.len() as u64;
            if matches!(
                self.state,
                State::Established | State::FinWait1 | State::FinWait2 | State::SynReceived
            ) {
                self.fin_rcvd.get_or_insert(fin_off);
            }
            self.ack_now = true;
            if self.state == State::TimeWait {
                // RFC 9293: retransmitted FIN -> ACK and restart the 2 MSL timeout.
                self.timewait_at = Some(now + self.cfg.time_wait);
            }
        }
        self.check_fin(now);
    }

    fn check_fin(&mut self, now: Instant) {
        let Some(fo) = self.fin_rcvd else { return };
        if self.fin_delivered || self.recv.nxt != fo {
            return;
        }
        self.fin_delivered = true;
        self.recv.nxt = fo + 1;
        self.ack_now = true;
        self.events.push_back(Event::PeerClosed);
        match self.state {
            State::SynReceived | State::Established => self.state = State::CloseWait,
            State::FinWait1 => {
                // Our FIN not yet acked (else we'd be in FIN-WAIT-2): simultaneous close.
                self.state = State::Closing;
            }
            State::FinWait2 => self.enter_time_wait(now),
            _ => {}
        }
    }

    fn enter_time_wait(&mut self, now: Instant) {
        self.state = State::TimeWait;
        self.rto_at = None;
        self.persist_at = None;
        self.keepalive_at = None;
        self.timewait_at = Some(now + self.cfg.time_wait);
    }

    fn update_window(&mut self, seg: &Segment<'_>, force: bool) {
        // RFC 9293 §3.10.7.4 fifth check: SND.WL1/WL2 rule.
        if force
            || self.snd_wl1.lt(seg.seq)
            || (self.snd_wl1 == seg.seq && self.snd_wl2.le(seg.ack))
        {
            let scale = if seg.flags.syn { 0 } else { self.snd_wscale };
            self.snd_wnd = u32::from(seg.window) << scale;
            self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
            self.snd_wl1 = seg.seq;
            self.snd_wl2 = seg.ack;
            if self.snd_wnd > 0 {
                self.persist_at = None;
                self.persist_backoff = 0;
            }
        }
    }

    /// The ACK processing of RFC 9293 §3.10.7.4 fifth check plus RFC 5961 §5.2. Returns false when
    /// the segment must be dropped.
    fn process_ack(&mut self, now: Instant, seg: &Segment<'_>) -> bool {
        let Some(ack) = self.snd.off(seg.ack, self.snd_una) else {
            self.counters.bad_acks += 1;
            self.ack_now = true;
            return false;
        };
        if ack > self.snd_nxt {
            // Acks something not yet sent: ACK and drop (RFC 9293, RFC 5961 §5.2).
            self.counters.bad_acks += 1;
            self.ack_now = true;
            return false;
        }
        if ack + u64::from(self.max_snd_wnd) + 1 < self.snd_una {
            // Too old (RFC 5961 §5.2): ACK and drop.
            self.counters.bad_acks += 1;
            self.ack_now = true;
            return false;
        }
        let old_wnd = self.snd_wnd;
        let new_data = ack > self.snd_una;
        // SACK blocks (RFC 2018 §3, honoured per RFC 6675).
        let mut sacked_new = false;
        if self.sack_enabled && seg.options.sack_count > 0 {
            sacked_new = self.apply_sack(seg);
        }
        if new_data {
            self.on_new_ack(now, seg, ack);
        } else if ack == self.snd_una
            && seg.payload.is_empty()
            && !seg.flags.fin
            && !self.sent.is_empty()
            && (u32::from(seg.window) << self.snd_wscale) == old_wnd
        {
            // RFC 5681 §2 duplicate ACK.
            self.counters.dupacks += 1;
            self.dupacks += 1;
            self.on_dupack(now, sacked_new);
        }
        self.update_window(seg, false);
        // State transitions that depend on our FIN being acknowledged.
        let fin_acked =
            self.fin_queued && self.sent.is_empty() && self.snd_una == self.sendbuf.end + 1;
        match self.state {
            State::FinWait1 if fin_acked => {
                self.state = State::FinWait2;
            }
            State::Closing if fin_acked => self.enter_time_wait(now),
            State::LastAck if fin_acked => {
                self.terminate(CloseReason::Normal);
                return false;
            }
            _ => {}
        }
        if self.sent.is_empty()
            && self.snd_wnd == 0
            && self.has_unsent()
            && self.persist_at.is_none()
        {
            self.arm_persist(now);
        }
        true
    }

    fn has_unsent(&self) -> bool {
        self.snd_nxt < self.sendbuf.end || (self.fin_queued && self.snd_nxt == self.sendbuf.end)
    }

    fn arm_persist(&mut self, now: Instant) {
        let d = self
            .rtt
            .rto()
            .saturating_mul(1 << self.persist_backoff.min(6))
            .min(self.cfg.rto_max);
        self.persist_at = Some(now + d);
    }

    fn on_new_ack(&mut self, now: Instant, seg: &Segment<'_>, ack: u64) {
        let acked = ack - self.snd_una;
        let mut any_rexmit = false;
        let ts_ecr = seg.options.timestamps.map(|t| t.1);
        while let Some(s) = self.sent.front() {
            if s.end() > ack {
                break;
            }
            if s.ever_rexmit {
                any_rexmit = true;
                // Spurious when the ACK echoes a timestamp older than the retransmission.
                if let Some(ecr) = ts_ecr {
                    if self.ts_enabled && (ecr.wrapping_sub(s.rexmit_ts) as i32) < 0 {
                        self.counters.spurious_retransmits += 1;
                    }
                }
            }
            if let Some(s) = self.sent.pop_front() {
                self.uncount(&s);
            }
        }
        self.snd_una = ack;
        self.retries = 0;
        self.rtt.reset_backoff();
        // RTT (RFC 7323 §4.1 with timestamps; Karn's rule otherwise, RFC 6298 §3).
        if self.ts_enabled {
            self.sample_rtt_ts(now, seg);
        } else if let Some((end, t)) = self.rtt_timed {
            if ack >= end {
                self.rtt_timed = None;
                if !any_rexmit {
                    self.rtt.on_sample(now.saturating_duration_since(t));
                }
            }
        }
        // Release acknowledged send data.
        let events = &mut self.events;
        let before = self.sendbuf.queued;
        self.sendbuf.release(ack.min(self.sendbuf.end), |id| {
            events.push_back(Event::RecordAcked(id))
        });
        if self.sendbuf.queued < before {
            self.events.push_back(Event::Writable);
        }
        // Loss recovery / congestion control.
        let flight = self.pipe();
        if self.in_recovery {
            if ack >= self.recovery_point {
                // Full ACK: leave recovery (RFC 6582 §3.2 step 3, RFC 6675 §5).
                self.in_recovery = false;
                self.dupacks = 0;
                self.cc.on_recovery_end(flight);
            } else {
                // Partial ACK (RFC 6582 §3.2 step 3): the next hole is lost; retransmit it.
                if !self.sack_enabled {
                    let segs = (acked / u64::from(self.emss()).max(1)) as u32;
                    self.dupacks = self.dupacks.saturating_sub(segs.max(1));
                }
                if let Some(f) = self.sent.front_mut() {
                    if !f.sacked && !f.rexmit {
                        f.lost = true;
                    }
                }
                self.recount();
            }
        } else {
            self.dupacks = 0;
            self.cc
                .on_ack(now, acked.min(u64::from(u32::MAX)) as u32, self.rtt.srtt());
        }
        if self.sack_enabled {
            self.mark_lost();
        }
        // RFC 6298 §5.2/5.3.
        if self.sent.is_empty() {
            self.rto_at = None;
        } else {
            self.rto_at = Some(now + self.rtt.rto());
        }
    }

    fn on_dupack(&mut self, _now: Instant, _sacked_new: bool) {
        if self.sack_enabled {
            self.mark_lost();
        }
        if self.in_recovery {
            return;
        }
        let first_lost = self.sack_enabled && self.sent.front().is_some_and(|s| s.lost);
        // RFC 5681 §3.2 / RFC 6675 §5: enter on DupThresh dupacks or when IsLost(SND.UNA).
        if self.dupacks < self.cfg.dupthresh && !first_lost {
            return;
        }
        // RFC 6582 §3.2 step 2 / §4.1: not for data sent before the last recovery or RTO.
        if self.snd_una < self.recover {
            return;
        }
        self.in_recovery = true;
        self.counters.recoveries += 1;
        self.recover = self.snd_nxt;
        self.recovery_point = self.snd_nxt;
        self.rescue_rxt = None;
        let flight = (self.snd_nxt - self.snd_una).min(u64::from(u32::MAX)) as u32;
        let ss = self.cc.on_congestion_event(flight);
        self.cc.cwnd = ss;
        if let Some(f) = self.sent.front_mut() {
            f.lost = true;
            f.rexmit = false;
        }
        self.recount();
    }

    /// Marks SACK blocks; true if something new was SACKed.
    fn apply_sack(&mut self, seg: &Segment<'_>) -> bool {
        let mut any = false;
        for &(l, r) in seg.options.sack_blocks() {
            let (Some(lo), Some(ro)) =
                (self.snd.off(l, self.snd_una), self.snd.off(r, self.snd_una))
            else {
                continue;
            };
            if lo >= ro || lo < self.snd_una || ro > self.snd_nxt {
                continue; // RFC 2018 §4 / RFC 6675: ignore invalid or D-SACK blocks.
            }
            let i = self.sent.partition_point(|s| s.end() <= lo);
            for s in self.sent.iter_mut().skip(i) {
                if s.off >= ro {
                    break;
                }
                // Only whole segments count as SACKed: original boundaries are kept for retransmission.
                if s.off >= lo && s.end() <= ro && !s.sacked {
                    s.sacked = true;
                    s.lost = false;
                    any = true;
                }
            }
        }
        if any {
            self.recount();
        }
        any
    }

    /// RFC 6675 §4 IsLost for every segment: DupThresh SACKed segments, or more than
    /// (DupThresh-1)*SMSS SACKed octets, above it.
    fn mark_lost(&mut self) {
        if self.sacked_bytes == 0 {
            return;
        }
        let thresh = self.cfg.dupthresh;
        let bytes_thresh = u64::from(thresh.saturating_sub(1)) * u64::from(self.emss());
        let mut segs_above = 0u32;
        let mut bytes_above = 0u64;
        for s in self.sent.iter_mut().rev() {
            if s.sacked {
                segs_above += 1;
                bytes_above += u64::from(s.len);
            } else if !s.lost && (segs_above >= thresh || bytes_above > bytes_thresh) {
                // A segment already resent by NextSeg rule (3) stays resent (it is at or below
                // HighRxt, RFC 6675 §4 rule (1.a)).
                s.lost = true;
            }
        }
        self.recount();
    }

    /// Octets in the network (RFC 6675 §4 "pipe"; without SACK, dupacks count as left segments).
    fn pipe(&self) -> u32 {
        let mut p = self.sent_bytes - self.sacked_bytes - self.lost_pending_bytes
            + self.rexmit_unlost_bytes;
        if !self.sack_enabled && self.in_recovery {
            p = p.saturating_sub(u64::from(self.dupacks) * u64::from(self.emss()));
        }
        p.min(u64::from(u32::MAX)) as u32
    }

    /// Removes a segment's share of the scoreboard sums.
    fn uncount(&mut self, s: &SentSeg) {
        let b = u64::from(s.len) + u64::from(s.fin);
        self.sent_bytes -= b;
        if s.sacked {
            self.sacked_bytes -= b;
        }
        if s.lost && !s.rexmit && !s.sacked {
            self.lost_pending -= 1;
            self.lost_pending_bytes -= b;
        }
        if !s.lost && s.rexmit && !s.sacked {
            self.rexmit_unlost_bytes -= b;
        }
    }

    /// Recomputes the scoreboard sums after bulk changes (loss marking, SACK, RTO).
    fn recount(&mut self) {
        let (mut all, mut sacked, mut n, mut lost, mut twice) = (0, 0, 0, 0, 0);
        for s in &self.sent {
            let b = u64::from(s.len) + u64::from(s.fin);
            all += b;
            if s.sacked {
                sacked += b;
            } else if s.lost && !s.rexmit {
                n += 1;
                lost += b;
            } else if !s.lost && s.rexmit {
                twice += b;
            }
        }
        self.sent_bytes = all;
        self.sacked_bytes = sacked;
        self.lost_pending = n;
        self.lost_pending_bytes = lost;
        self.rexmit_unlost_bytes = twice;
    }

    fn accept_data(&mut self, now: Instant, seg: &Segment<'_>, sink: Option<&mut dyn RxSink>) {
        if seg.payload.is_empty() {
            return;
        }
        let Some(mut off) = self
            .rcv
            .off(seg.seq.plus(u32::from(seg.flags.syn)), self.recv.nxt)
        else {
            return;
        };
        let mut data = seg.payload;
        // Trim to the window (RFC 9293 §3.10.7.4 seventh step).
        if off < self.recv.nxt {
            let k = ((self.recv.nxt - off) as usize).min(data.len());
            self.counters.duplicate_bytes += k as u64;
            data = &data[k..];
            off = self.recv.nxt;
        }
        let right = self.rcv_edge.max(self.recv.nxt);
        if off + data.len() as u64 > right {
            let keep = right.saturating_sub(off) as usize;
            data = &data[..keep.min(data.len())];
        }
        if data.is_empty() {
            self.ack_now = true;
            return;
        }
        let rcv = self.rcv;
        let was_ooo = !self.recv.ranges().is_empty();
        let a = self
            .recv
            .accept(off, data, |o| rcv.seq(o), self.ooo_limits, sink);
        self.counters.bytes_received += a.new_bytes;
        self.counters.duplicate_bytes += a.dup_bytes;
        self.counters.ooo_committed += a.ooo_ranges;
        self.counters.ooo_dropped += a.ooo_dropped;
        if a.new_bytes > 0 {
            self.events.push_back(Event::Readable);
        }
        // RFC 5681 §4.2 / RFC 9293 §3.8.6.3: ACK at once for out-of-order data, gap fills and
        // duplicates; else every second full segment or when the delayed-ACK timer fires.
        if !a.advanced || a.filled_gap || was_ooo {
            self.dupacks_owed = self.dupacks_owed.saturating_add(1).min(8);
        }
        if !a.advanced
            || a.filled_gap
            || was_ooo
            || a.dup_bytes > 0
            || self.cfg.delayed_ack.is_none()
        {
            self.ack_now = true;
        } else if self.quick_acks > 0 {
            self.quick_acks -= 1;
            self.ack_now = true;
        } else {
            self.ack_pending = true;
            self.segs_since_ack += 1;
            let short = data.len() + crate::config::SHORT_SEGMENT_SLACK <= self.emss() as usize;
            let delay = match self.cfg.short_segment_ack {
                Some(d) if short => Some(d),
                _ => self.cfg.delayed_ack,
            };
            if self.segs_since_ack >= 2 {
                self.ack_now = true;
            } else if let Some(at) = delay.map(|d| now + d) {
                self.delack_at = Some(self.delack_at.map_or(at, |t| t.min(at)));
            }
        }
    }

    // ----- transmit path ------------------------------------------------------------------------

    /// The window we can advertise now (octets, before scaling).
    fn window_to_advertise(&self) -> u64 {
        u64::from(self.cfg.recv_buffer).saturating_sub(self.recv.held())
    }

    fn advertise(&mut self, syn: bool) -> u16 {
        let free = self.window_to_advertise();
        let scale = if syn { 0 } else { self.rcv_wscale };
        let mut w = (free >> scale).min(65535);
        // Never shrink the window (RFC 9293 §3.8.6.2.2).
        let edge_now = self.recv.nxt + (w << scale);
        if edge_now < self.rcv_edge {
            w = (self.rcv_edge - self.recv.nxt)
                .div_ceil(1 << scale)
                .min(65535);
        }
        self.rcv_edge = self.rcv_edge.max(self.recv.nxt + (w << scale));
        w as u16
    }

    fn base_options(&mut self, now: Instant) -> TcpOptions {
        let ts = if self.ts_enabled {
            Some((self.ts_now(now), self.ts_recent))
        } else {
            None
        };
        TcpOptions {
            timestamps: ts,
            ..Default::default()
        }
    }

    fn add_sack_blocks(&self, o: &mut TcpOptions, room: usize) {
        if !self.sack_enabled {
            return;
        }
        let ranges = self.recv.ranges();
        if ranges.is_empty() {
            return;
        }
        let max =
            (room.saturating_sub(4) / 8).min(if self.ts_enabled { 3 } else { MAX_SACK_BLOCKS });
        let mut n = 0;
        // RFC 2018 §4: the block with the most recently received data first, then the others.
        let first = self
            .recv
            .last_changed()
            .and_then(|s| ranges.iter().position(|r| r.0 == s));
        let order = first
            .into_iter()
            .chain((0..ranges.len()).rev().filter(|&i| Some(i) != first));
        for i in order {
            if n >= max {
                break;
            }
            let (s, e) = ranges[i];
            o.sack[n] = (self.rcv.seq(s), self.rcv.seq(e));
            n += 1;
        }
        o.sack_count = n as u8;
    }

    /// Writes the next packet to send (an IPv4 packet) into `buf` and returns its length.
    /// Uses owned data only; connections with external records use [`Self::poll_transmit_with`].
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        self.poll_transmit_with(now, buf, &mut NoRecordSource)
    }

    /// Like [`Self::poll_transmit`]; `source` writes the bytes of external records.
    pub fn poll_transmit_with(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        source: &mut dyn RecordSource,
    ) -> Option<usize> {
        let n = self.transmit(now, buf, source)?;
        self.counters.segs_out += 1;
        Some(n)
    }

    fn transmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        source: &mut dyn RecordSource,
    ) -> Option<usize> {
        if let Some(r) = self.rst_out.take() {
            self.counters.rsts_sent += 1;
            return emit_rst(self.tuple, r, buf);
        }
        match self.state {
            State::Closed | State::Listen => return None,
            State::SynSent | State::SynReceived if self.syn_due => return self.send_syn(now, buf),
            State::SynSent => return None,
            _ => {}
        }
        if self.state == State::SynReceived {
            // Data waits for ESTABLISHED; only ACKs (e.g. challenge ACKs) go out.
            return self.send_ack_if_due(now, buf);
        }
        if self.state == State::TimeWait || self.state == State::Closed {
            return self.send_ack_if_due(now, buf);
        }
        if self.dupacks_owed > 0 {
            // Sent apart from data so that the peer counts it as a duplicate ACK (RFC 5681 §2).
            let owed = self.dupacks_owed - 1;
            self.ack_now = true;
            let r = self.send_ack_if_due(now, buf);
            self.dupacks_owed = owed;
            return r;
        }
        if let Some(n) = self.send_retransmission(now, buf, source) {
            return Some(n);
        }
        if let Some(n) = self.send_new_data(now, buf, source) {
            return Some(n);
        }
        if let Some(n) = self.send_sack_extra(now, buf, source) {
            return Some(n);
        }
        if self.probe_due {
            self.probe_due = false;
            // Zero-window probe / keepalive: an old sequence number elicits an ACK without breaking
            // record alignment (RFC 9293 §3.8.4, RFC 1122 §4.2.3.6).
            let seq = self.snd.seq(self.snd_una.saturating_sub(1));
            return self.emit(now, buf, seq, Flags::default(), 0, 0, source, false);
        }
        self.send_ack_if_due(now, buf)
    }

    fn send_ack_if_due(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        if !self.ack_now {
            return None;
        }
        self.counters.acks_sent += 1;
        let seq = self.snd.seq(self.snd_nxt);
        self.emit(
            now,
            buf,
            seq,
            Flags::default(),
            0,
            0,
            &mut NoRecordSource,
            true,
        )
    }

    fn send_syn(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        let mut o = syn_options(&self.cfg, &self.tuple);
        let synack = self.state == State::SynReceived;
        if synack {
            // Echo only what the peer offered (RFC 7323 §2.2, §3.2; RFC 2018 §2).
            if !self.ws_enabled {
                o.window_scale = None;
            }
            o.sack_permitted &= self.sack_enabled;
            o.timestamps = if self.ts_enabled {
                Some((self.ts_now(now), self.ts_recent))
            } else {
                None
            };
        } else if o.timestamps.is_some() {
            o.timestamps = Some((self.ts_now(now), 0));
        }
        let window = self.advertise(true);
        let repr = SegmentRepr {
            tuple: self.tuple,
            seq: self.snd.isn,
            ack: synack.then(|| self.rcv.seq(self.recv.nxt)),
            flags: Flags {
                syn: true,
                ..Default::default()
            },
            window,
            options: o,
        };
        let n = repr.emit(buf, 0, |_| {}).ok()?;
        self.syn_due = false;
        self.snd_nxt = self.snd_nxt.max(1);
        if synack {
            self.last_ack_sent = self.recv.nxt;
            self.ack_now = false;
        }
        if self.rtt_timed.is_none() && self.syn_tx_count == 0 {
            self.rtt_timed = Some((1, now));
        }
        self.arm_rto_if_idle(now);
        Some(n)
    }

    /// RFC 6675 §4 NextSeg rule (1) (and the RTO / NewReno retransmissions): the first segment
    /// marked lost and not yet resent.
    fn send_retransmission(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        source: &mut dyn RecordSource,
    ) -> Option<usize> {
        if self.lost_pending == 0 {
            return None;
        }
        let i = self
            .sent
            .iter()
            .position(|s| s.lost && !s.rexmit && !s.sacked)?;
        let pipe = self.pipe();
        let s = self.sent[i];
        let seg_total = s.len + u32::from(s.fin);
        // The first retransmission of a recovery episode is always allowed (RFC 5681 §3.2 step 2).
        let first = i == 0 && self.sent.iter().all(|x| !x.rexmit);
        if !first && pipe.saturating_add(seg_total) > self.cc.cwnd.max(self.emss()) && pipe > 0 {
            return None;
        }
        let n = self.resend(now, buf, source, i)?;
        self.sent[i].rexmit = true;
        self.lost_pending -= 1;
        self.lost_pending_bytes -= u64::from(seg_total);
        if !self.in_recovery {
            self.counters.rto_retransmits += 1;
        }
        Some(n)
    }

    /// RFC 6675 §4 NextSeg rules (3) and (4), tried in loss recovery (§5 step C) when rule (1)
    /// found nothing lost to resend and rule (2) no new data to send. Whole original segments only
    /// (MPA-61), so "a segment of up to SMSS" is one original segment.
    fn send_sack_extra(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        source: &mut dyn RecordSource,
    ) -> Option<usize> {
        if !self.in_recovery
            || !self.sack_enabled
            || self.sacked_bytes == 0
            || self.lost_pending > 0
        {
            return None;
        }
        // §5 (C): only while cwnd - pipe >= 1 SMSS.
        if self.cc.cwnd.saturating_sub(self.pipe()) < self.emss() {
            return None;
        }
        // Highest octet covered by a SACK (rule 1.b) and HighRxt (rule 1.a: segments after the
        // highest one resent by rules 1 and 3).
        let high_sacked = self.sent.iter().rev().find(|s| s.sacked)?.end();
        let above_rxt = self
            .sent
            .iter()
            .rposition(|s| s.rexmit)
            .map_or(0, |k| k + 1);
        // Rule (3): an unSACKed segment meeting (1.a) and (1.b) but not IsLost.
        if let Some(k) = self
            .sent
            .iter()
            .skip(above_rxt)
            .take_while(|s| s.off < high_sacked)
            .position(|s| !s.sacked && !s.lost && !s.rexmit)
        {
            let i = above_rxt + k;
            let n = self.resend(now, buf, source, i)?;
            // HighRxt moves past it (§5 C.3); it is now in the network twice (pipe).
            self.sent[i].rexmit = true;
            let s = self.sent[i];
            self.rexmit_unlost_bytes += u64::from(s.len) + u64::from(s.fin);
            self.counters.sack_rule3_retransmits += 1;
            return Some(n);
        }
        // Rule (4): one rescue retransmission per episode, of the segment holding the highest
        // outstanding unSACKed octet, if HighACK > RescueRxt (or RescueRxt is undefined).
        if self.rescue_rxt.is_some_and(|r| self.snd_una <= r) {
            return None;
        }
        let i = self.sent.iter().rposition(|s| !s.sacked)?;
        if self.sent[i].rexmit || self.sent[i].lost {
            return None; // Already resent (or rule 1's to resend): nothing to rescue.
        }
        let n = self.resend(now, buf, source, i)?;
        // HighRxt is not updated (§4 rule 4, §5 C.3), so `rexmit` stays clear and pipe unchanged.
        self.rescue_rxt = Some(self.recovery_point);
        self.counters.rescue_retransmits += 1;
        Some(n)
    }

    /// Retransmits segment `i` of the scoreboard with its original boundaries (MPA-61); if the
    /// peer acked part of it, from SND.UNA (rare; counted). Updates the retransmission counters,
    /// Karn's state and the segment's timestamp; the caller updates the scoreboard flags.
    fn resend(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        source: &mut dyn RecordSource,
        i: usize,
    ) -> Option<usize> {
        let s = self.sent[i];
        let mut start = s.off;
        let mut len = s.len;
        if start < self.snd_una {
            let cut = (self.snd_una - start).min(u64::from(len)) as u32;
            start += u64::from(cut);
            len -= cut;
            if !self.sendbuf.is_boundary(start) {
                self.counters.unaligned_retransmits += 1;
            }
        }
        let seq = self.snd.seq(start);
        let flags = Flags {
            fin: s.fin,
            psh: len > 0,
            ..Default::default()
        };
        let n = self.emit(now, buf, seq, flags, start, len, source, true)?;
        self.counters.data_segs_out += 1;
        let ts = self.ts_now(now);
        let seg = &mut self.sent[i];
        seg.ever_rexmit = true;
        seg.rexmit_ts = ts;
        self.counters.retransmits += 1;
        if self.in_recovery {
            self.counters.fast_retransmits += 1;
        }
        self.rtt_timed = None; // Karn
        self.arm_rto_if_idle(now);
        Some(n)
    }

    fn send_new_data(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        source: &mut dyn RecordSource,
    ) -> Option<usize> {
        if !matches!(
            self.state,
            State::Established
                | State::CloseWait
                | State::FinWait1
                | State::Closing
                | State::LastAck
        ) {
            return None;
        }
        let data_end = self.sendbuf.end;
        let fin_pending = self.fin_queued && self.snd_nxt <= data_end;
        if self.snd_nxt >= data_end && !fin_pending {
            return None;
        }
        let emss = self.emss();
        let wnd_edge = self.snd_una + u64::from(self.snd_wnd);
        let wnd_room = wnd_edge
            .saturating_sub(self.snd_nxt)
            .min(u64::from(u32::MAX)) as u32;
        let pipe = self.pipe();
        let cwnd_room = self.cc.cwnd.saturating_sub(pipe);
        let room = wnd_room.min(cwnd_room);
        let mut len = 0u32;
        let mut split = None;
        if self.snd_nxt < data_end {
            match self
                .sendbuf
                .plan(self.snd_nxt, emss, room, self.cfg.pack_records)
            {
                Plan::Empty => {}
                Plan::Send { len: l, split: s } => {
                    // Nagle (RFC 9293 §3.7.4), off by default.
                    if self.cfg.nagle
                        && l < emss
                        && !self.sent.is_empty()
                        && self.snd_nxt + u64::from(l) < data_end
                    {
                        return None;
                    }
                    len = l;
                    split = s;
                }
                Plan::Blocked { need } => {
                    // MPA §5.3 exception: the window (not cwnd) is smaller than the record and
                    // nothing is in flight to open it: send what fits.
                    if self.sent.is_empty()
                        && wnd_room > 0
                        && wnd_room < need
                        && cwnd_room >= wnd_room.min(emss)
                    {
                        len = wnd_room.min(emss);
                        split = Some(Split::Window);
                    } else {
                        if self.sent.is_empty() && self.snd_wnd == 0 && self.persist_at.is_none() {
                            self.arm_persist(now);
                        }
                        return None;
                    }
                }
            }
        }
        let mut fin = fin_pending && self.snd_nxt + u64::from(len) == data_end;
        if fin && !self.fin_hold_over && !self.recv.ranges().is_empty() {
            // Hold our FIN (at most two RTOs) while the peer's data has holes: some peers (smoltcp
            // 0.12) stop their retransmission timer when our FIN arrives in FIN-WAIT-1, and the hole
            // would never be filled. Sending the FIN a little later costs nothing.
            let until = *self.fin_hold_until.get_or_insert(now + self.rtt.rto() * 2);
            if now < until {
                fin = false;
            } else {
                self.fin_hold_over = true;
            }
        }
        if fin {
            self.fin_hold_until = None;
        }
        if len == 0 && !fin {
            return None;
        }
        if len == 0 && fin && self.sent.iter().any(|s| s.fin) {
            return None;
        }
        // Count every segment that is not header-aligned (MPA §5.3 exceptions): the piece that
        // splits a record and the pieces that carry its rest.
        let aligned = self.sendbuf.is_boundary(self.snd_nxt)
            && self.sendbuf.is_boundary(self.snd_nxt + u64::from(len));
        if !aligned {
            let why = split.or(self.last_split).unwrap_or(Split::Emss);
            self.last_split = Some(why);
            match why {
                Split::Emss => self.counters.split_emss += 1,
                Split::Window => self.counters.split_window += 1,
            }
        }
        let start = self.snd_nxt;
        let seq = self.snd.seq(start);
        let flags = Flags {
            fin,
            psh: len > 0,
            ..Default::default()
        };
        let n = self.emit(now, buf, seq, flags, start, len, source, true)?;
        self.counters.data_segs_out += 1;
        self.sent_bytes += u64::from(len) + u64::from(fin);
        self.sent.push_back(SentSeg {
            off: start,
            len,
            fin,
            sacked: false,
            lost: false,
            rexmit: false,
            ever_rexmit: false,
            rexmit_ts: 0,
        });
        self.snd_nxt = start + u64::from(len) + u64::from(fin);
        self.counters.bytes_sent += u64::from(len);
        if self.rtt_timed.is_none() && !self.ts_enabled {
            self.rtt_timed = Some((self.snd_nxt, now));
        }
        // RFC 6298 §5.1.
        self.arm_rto_if_idle(now);
        self.persist_at = None;
        Some(n)
    }

    /// Emits one segment with the current ACK, window and options; payload from the send buffer.
    #[allow(clippy::too_many_arguments)]
    fn emit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        seq: SeqNum,
        mut flags: Flags,
        off: u64,
        len: u32,
        source: &mut dyn RecordSource,
        with_sack: bool,
    ) -> Option<usize> {
        flags.ack = true;
        let mut options = self.base_options(now);
        if with_sack {
            let used = options.encoded_len();
            let limit = (self.emss() + if self.ts_enabled { 12 } else { 0 }) as usize;
            let room = limit.saturating_sub(len as usize + used).min(40 - used);
            self.add_sack_blocks(&mut options, room);
        }
        let window = self.advertise(false);
        let repr = SegmentRepr {
            tuple: self.tuple,
            seq,
            ack: Some(self.rcv.seq(self.recv.nxt)),
            flags,
            window,
            options,
        };
        let sendbuf = &self.sendbuf;
        let n = repr
            .emit(buf, len as usize, |p| sendbuf.fill(off, p, source))
            .ok()?;
        self.last_ack_sent = self.recv.nxt;
        self.ack_now = false;
        self.ack_pending = false;
        self.segs_since_ack = 0;
        self.delack_at = None;
        Some(n)
    }
}

/// The RST answering `seg` (RFC 9293 §3.10.7.1).
pub(crate) fn rst_for(seg: &Segment<'_>) -> RstOut {
    if seg.flags.ack {
        RstOut {
            seq: seg.ack,
            ack: None,
        }
    } else {
        RstOut {
            seq: SeqNum(0),
            ack: Some(seg.seq.plus(seg.seg_len())),
        }
    }
}

/// Emits a bare RST (no options, window 0).
pub(crate) fn emit_rst(tuple: FourTuple, r: RstOut, buf: &mut [u8]) -> Option<usize> {
    let repr = SegmentRepr {
        tuple,
        seq: r.seq,
        ack: r.ack,
        flags: Flags {
            rst: true,
            ..Default::default()
        },
        window: 0,
        options: TcpOptions::default(),
    };
    repr.emit(buf, 0, |_| {}).ok()
}

/// Emits the RST answering `seg` into `buf` (for listeners and endpoints without a connection).
pub fn emit_rst_for(seg: &Segment<'_>, buf: &mut [u8]) -> Option<usize> {
    if seg.flags.rst {
        return None;
    }
    emit_rst(seg.tuple, rst_for(seg), buf)
}
