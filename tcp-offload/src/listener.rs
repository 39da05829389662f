//! Passive opens at scale: a bounded half-open table, SYN cookies when it is full, and a bounded
//! accept queue (RFC 4987 §3.6, §3.1; RFC 9293 §3.10.7.2).
//!
//! Memory stays bounded under a SYN flood: at most `max_half_open` connections in SYN-RECEIVED, at
//! most `max_tx_queue` stateless replies waiting, at most `max_accept_queue` accepted connections.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::Instant;

use crate::config::Config;
use crate::connection::{emit_rst, emit_rst_for, Connection, RstOut, State};
use crate::counters::ListenerCounters;
use crate::isn::{FourTuple, IsnGenerator};
use crate::rx::OooBudget;
use crate::seq::SeqNum;
use crate::wire::{self, Flags, SegmentRepr, TcpOptions, TcpSegment, WireError};

/// Listener limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerConfig {
    /// Connections kept in SYN-RECEIVED.
    pub max_half_open: usize,
    /// Established connections waiting for `accept`.
    pub max_accept_queue: usize,
    /// Stateless replies (cookie SYN-ACKs, RSTs) waiting for `poll_transmit`.
    pub max_tx_queue: usize,
    /// Answer with SYN cookies when the half-open table is full.
    pub syn_cookies: bool,
    /// SYN-ACK retransmissions before a half-open entry is dropped.
    pub synack_retries: u32,
    /// Out-of-order octets all accepted connections may hold together.
    pub ooo_budget: usize,
}

impl Default for ListenerConfig {
    fn default() -> Self {
        ListenerConfig {
            max_half_open: 1024,
            max_accept_queue: 256,
            max_tx_queue: 1024,
            syn_cookies: true,
            synack_retries: 5,
            ooo_budget: 64 << 20,
        }
    }
}

/// MSS values a cookie can encode (3 bits).
const COOKIE_MSS: [u16; 8] = [536, 1024, 1220, 1360, 1440, 1460, 4036, 8960];
/// Seconds per cookie time slot; a cookie is valid for this slot and the previous one.
const COOKIE_SLOT_SECS: u64 = 64;

#[derive(Clone, Copy, Debug)]
struct CookieReply {
    tuple: FourTuple,
    iss: SeqNum,
    ack: SeqNum,
    mss: u16,
    tsval: Option<(u32, u32)>,
    wscale: Option<u8>,
    sack: bool,
}

#[derive(Clone, Copy, Debug)]
enum Reply {
    Cookie(CookieReply),
    Rst {
        tuple: FourTuple,
        seq: SeqNum,
        ack: Option<SeqNum>,
    },
}

/// A listening endpoint for one local address/port.
#[derive(Debug)]
pub struct TcpListener {
    cfg: Config,
    lcfg: ListenerConfig,
    local: SocketAddr,
    gen: IsnGenerator,
    half_open: HashMap<FourTuple, Connection>,
    dirty: VecDeque<FourTuple>,
    accept_queue: VecDeque<Connection>,
    tx: VecDeque<Reply>,
    budget: OooBudget,
    counters: ListenerCounters,
}

impl TcpListener {
    /// Listens on `local` (port must match; address `0.0.0.0` accepts any).
    pub fn new(cfg: Config, lcfg: ListenerConfig, local: SocketAddr, gen: IsnGenerator) -> Self {
        let budget = OooBudget::new(lcfg.ooo_budget);
        let cfg = Config {
            syn_retries: lcfg.synack_retries,
            ..cfg
        };
        TcpListener {
            cfg,
            lcfg,
            local,
            gen,
            half_open: HashMap::new(),
            dirty: VecDeque::new(),
            accept_queue: VecDeque::new(),
            tx: VecDeque::new(),
            budget,
            counters: ListenerCounters::default(),
        }
    }

    /// Counters.
    pub fn counters(&self) -> &ListenerCounters {
        &self.counters
    }
    /// Entries in the half-open table.
    pub fn half_open_len(&self) -> usize {
        self.half_open.len()
    }
    /// Stateless replies waiting.
    pub fn tx_queue_len(&self) -> usize {
        self.tx.len()
    }
    /// Connections waiting in the accept queue.
    pub fn accept_queue_len(&self) -> usize {
        self.accept_queue.len()
    }
    /// The shared out-of-order budget of accepted connections.
    pub fn ooo_budget(&self) -> &OooBudget {
        &self.budget
    }
    /// The local address.
    pub fn local(&self) -> SocketAddr {
        self.local
    }

    /// True if `seg` is addressed to this listener.
    pub fn matches(&self, seg: &TcpSegment<'_>) -> bool {
        seg.tuple.local.port() == self.local.port()
            && (self.local.ip().is_unspecified() || self.local.ip() == seg.tuple.local.ip())
    }

    /// Next established connection.
    pub fn accept(&mut self) -> Option<Connection> {
        self.accept_queue.pop_front()
    }

    /// Parses and handles a packet; malformed ones are dropped and counted.
    pub fn handle_packet(&mut self, now: Instant, packet: &[u8]) -> Result<(), WireError> {
        let mut bad_sum = 0;
        let seg = wire::parse_counted(packet, &mut self.counters.malformed, &mut bad_sum)?;
        self.handle_segment(now, &seg);
        Ok(())
    }

    fn cookie_slot(&self, now: Instant) -> u32 {
        (now.saturating_duration_since(self.gen.epoch()).as_secs() / COOKIE_SLOT_SECS) as u32
    }

    fn ts_now(&self, tuple: &FourTuple, now: Instant) -> u32 {
        (now.saturating_duration_since(self.gen.epoch()).as_millis() as u32)
            .wrapping_add(self.gen.ts_offset(tuple))
    }

    fn make_cookie(&self, tuple: &FourTuple, peer_isn: SeqNum, mss: u16, now: Instant) -> SeqNum {
        let slot = self.cookie_slot(now) & 31;
        let idx = COOKIE_MSS.iter().rposition(|&m| m <= mss).unwrap_or(0) as u32;
        let mac = self.gen.cookie_mac(tuple, peer_isn, slot) & 0x00FF_FFFF;
        SeqNum((slot << 27) | (idx << 24) | mac)
    }

    /// Checks a returned cookie (`ack - 1`); gives the encoded MSS.
    fn check_cookie(
        &self,
        tuple: &FourTuple,
        peer_isn: SeqNum,
        cookie: SeqNum,
        now: Instant,
    ) -> Option<u16> {
        let slot = cookie.0 >> 27;
        let idx = ((cookie.0 >> 24) & 7) as usize;
        let cur = self.cookie_slot(now);
        let fresh = [cur & 31, cur.wrapping_sub(1) & 31].contains(&slot);
        let mac = self.gen.cookie_mac(tuple, peer_isn, slot) & 0x00FF_FFFF;
        (fresh && mac == cookie.0 & 0x00FF_FFFF).then(|| COOKIE_MSS[idx])
    }

    /// Handles one segment addressed to this listener (or one of its half-open connections).
    pub fn handle_segment(&mut self, now: Instant, seg: &TcpSegment<'_>) {
        if let Some(c) = self.half_open.get_mut(&seg.tuple) {
            c.handle_segment(now, seg);
            let st = c.state();
            self.after_update(now, seg.tuple, st);
            return;
        }
        // An established connection waiting in the accept queue owns its segments: the peer's
        // first data may follow its handshake ACK before the user calls `accept`.
        if let Some(c) = self
            .accept_queue
            .iter_mut()
            .find(|c| c.tuple() == seg.tuple)
        {
            c.handle_segment(now, seg);
            return;
        }
        let f = seg.flags;
        if f.rst {
            return;
        }
        if f.syn && !f.ack {
            self.counters.syns += 1;
            if self.half_open.len() < self.lcfg.max_half_open {
                let c = Connection::accept_syn(self.cfg.clone(), seg, &self.gen, now);
                self.half_open.insert(seg.tuple, c);
                self.dirty.push_back(seg.tuple);
                self.counters.synacks += 1;
            } else if self.lcfg.syn_cookies {
                self.queue_cookie(now, seg);
            }
            return;
        }
        if f.ack && !f.syn {
            let cookie = seg.ack.plus(u32::MAX);
            let peer_isn = seg.seq.plus(u32::MAX);
            if self.lcfg.syn_cookies {
                if let Some(mss) = self.check_cookie(&seg.tuple, peer_isn, cookie, now) {
                    let opts = seg.options.timestamps.map(|(_, ecr)| {
                        let ws = (ecr & 0xF) as u8;
                        (if ws == 0xF { None } else { Some(ws) }, ecr & 0x10 != 0)
                    });
                    let mut c = Connection::from_cookie(
                        self.cfg.clone(),
                        seg,
                        cookie,
                        mss,
                        opts,
                        &self.gen,
                        now,
                    );
                    c.set_ooo_budget(self.budget.clone());
                    c.handle_segment(now, seg);
                    self.counters.cookies_accepted += 1;
                    self.push_accepted(c);
                    return;
                }
                self.counters.cookies_rejected += 1;
            }
            self.queue_rst(seg);
        }
    }

    fn queue_rst(&mut self, seg: &TcpSegment<'_>) {
        if self.tx.len() >= self.lcfg.max_tx_queue {
            self.counters.tx_overflow += 1;
            return;
        }
        let r = crate::connection::rst_for(seg);
        self.tx.push_back(Reply::Rst {
            tuple: seg.tuple,
            seq: r.seq,
            ack: r.ack,
        });
    }

    fn queue_cookie(&mut self, now: Instant, seg: &TcpSegment<'_>) {
        if self.tx.len() >= self.lcfg.max_tx_queue {
            self.counters.tx_overflow += 1;
            return;
        }
        let peer_mss = seg.options.mss.unwrap_or(536).min(self.cfg.mss);
        let iss = self.make_cookie(&seg.tuple, seg.seq, peer_mss, now);
        let mss = COOKIE_MSS[((iss.0 >> 24) & 7) as usize];
        // Options survive in our TSval's low 5 bits (echoed back in TSecr): wscale (4) + SACK (1).
        let ts_ok = self.cfg.timestamps && seg.options.timestamps.is_some();
        let wscale = if ts_ok {
            seg.options.window_scale.and(self.cfg.window_scale)
        } else {
            None
        };
        let sack = ts_ok && seg.options.sack_permitted && self.cfg.sack;
        let tsval = seg.options.timestamps.filter(|_| ts_ok).map(|(v, _)| {
            let now_ts = self.ts_now(&seg.tuple, now);
            let bits = u32::from(
                seg.options
                    .window_scale
                    .filter(|_| wscale.is_some())
                    .unwrap_or(0xF)
                    .min(0xF),
            ) | (u32::from(sack) << 4);
            let mut t = (now_ts & !0x3F) | bits;
            if (t.wrapping_sub(now_ts) as i32) > 0 {
                t = t.wrapping_sub(64);
            }
            (t, v)
        });
        self.tx.push_back(Reply::Cookie(CookieReply {
            tuple: seg.tuple,
            iss,
            ack: seg.seq.plus(1),
            mss,
            tsval,
            wscale,
            sack,
        }));
        self.counters.cookies_sent += 1;
    }

    fn push_accepted(&mut self, mut c: Connection) {
        if self.accept_queue.len() >= self.lcfg.max_accept_queue {
            self.counters.accept_overflow += 1;
            // Reset the peer (RFC 9293 §3.10.5 abort) and forget the connection.
            c.abort();
            let mut buf = [0u8; 128];
            if let Some(n) = c.poll_transmit(self.gen.epoch(), &mut buf) {
                if let Ok(seg) = wire::parse(&buf[..n]) {
                    if self.tx.len() < self.lcfg.max_tx_queue {
                        self.tx.push_back(Reply::Rst {
                            tuple: c.tuple(),
                            seq: seg.seq,
                            ack: None,
                        });
                    }
                }
            }
            return;
        }
        self.counters.accepted += 1;
        self.accept_queue.push_back(c);
    }

    fn after_update(&mut self, _now: Instant, tuple: FourTuple, st: State) {
        match st {
            State::SynReceived | State::Listen => {
                self.dirty.push_back(tuple);
            }
            State::Closed => {
                // Give it a chance to send its RST.
                self.dirty.push_back(tuple);
            }
            _ => {
                if let Some(mut c) = self.half_open.remove(&tuple) {
                    c.set_ooo_budget(self.budget.clone());
                    self.push_accepted(c);
                }
            }
        }
    }

    /// The earliest timer of the half-open entries.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.half_open
            .values()
            .filter_map(|c| c.poll_timeout())
            .min()
    }

    /// Runs expired timers (SYN-ACK retransmissions, expiry of half-open entries).
    pub fn handle_timeout(&mut self, now: Instant) {
        let mut expired = Vec::new();
        for (t, c) in self.half_open.iter_mut() {
            if c.poll_timeout().is_some_and(|d| d <= now) {
                c.handle_timeout(now);
                if c.state() == State::Closed {
                    expired.push(*t);
                } else {
                    self.dirty.push_back(*t);
                }
            }
        }
        for t in expired {
            self.half_open.remove(&t);
            self.counters.half_open_expired += 1;
        }
    }

    /// Writes the next packet (SYN-ACK, cookie SYN-ACK, RST) into `buf`.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        while let Some(t) = self.dirty.front().copied() {
            match self.half_open.get_mut(&t) {
                Some(c) => {
                    if let Some(n) = c.poll_transmit(now, buf) {
                        return Some(n);
                    }
                    if c.state() == State::Closed {
                        self.half_open.remove(&t);
                    }
                    self.dirty.pop_front();
                }
                None => {
                    self.dirty.pop_front();
                }
            }
        }
        let r = self.tx.pop_front()?;
        match r {
            Reply::Rst { tuple, seq, ack } => {
                self.counters.rsts_sent += 1;
                emit_rst(tuple, RstOut { seq, ack }, buf)
            }
            Reply::Cookie(c) => {
                let repr = SegmentRepr {
                    tuple: c.tuple,
                    seq: c.iss,
                    ack: Some(c.ack),
                    flags: Flags {
                        syn: true,
                        ..Default::default()
                    },
                    window: (self.cfg.recv_buffer.min(65535)) as u16,
                    options: TcpOptions {
                        mss: Some(c.mss),
                        window_scale: c.wscale.and(self.cfg.window_scale),
                        sack_permitted: c.sack,
                        timestamps: c.tsval,
                        ..Default::default()
                    },
                };
                repr.emit(buf, 0, |_| {}).ok()
            }
        }
    }

    /// Answers a segment that matches nothing with RST (helper for endpoints).
    pub fn emit_rst(seg: &TcpSegment<'_>, buf: &mut [u8]) -> Option<usize> {
        emit_rst_for(seg, buf)
    }
}
