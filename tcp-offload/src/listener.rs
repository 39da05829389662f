//! Passive opens at scale: a bounded half-open table, SYN cookies when it is full, and a bounded
//! accept queue (RFC 4987 §3.6, §3.1; RFC 9293 §3.10.7.2).
//!
//! Memory stays bounded under a SYN flood: at most `max_half_open` connections in SYN-RECEIVED, at
//! most `max_tx_queue` stateless replies waiting, at most `max_accept_queue` accepted connections.
//! Work per call does not grow with the half-open table: the entries' deadlines sit in an ordered
//! set, so `poll_timeout` reads its first element and `handle_timeout` visits only expired ones.

use crate::time::Timestamp;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::SocketAddr;

use crate::config::{Config, TcpConfigError};
use crate::connection::{default_peer_mss, emit_rst, Connection, RstOut, State};
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

/// A connection in SYN-RECEIVED and the deadline it is filed under in `deadlines`.
#[derive(Debug)]
struct HalfOpen {
    conn: Connection,
    armed: Option<Timestamp>,
}

/// A listening endpoint for one local address/port.
#[derive(Debug)]
pub struct TcpListener {
    cfg: Config,
    lcfg: ListenerConfig,
    local: SocketAddr,
    gen: IsnGenerator,
    half_open: HashMap<FourTuple, HalfOpen>,
    /// The half-open entries' deadlines, earliest first (one per armed entry).
    deadlines: BTreeSet<(Timestamp, FourTuple)>,
    dirty: VecDeque<FourTuple>,
    accept_queue: VecDeque<Connection>,
    tx: VecDeque<Reply>,
    budget: OooBudget,
    counters: ListenerCounters,
}

impl TcpListener {
    /// Listens on `local` (port must match; address `0.0.0.0` accepts any). Refuses a `cfg`
    /// that fails [`Config::validate`].
    pub fn new(
        cfg: Config,
        lcfg: ListenerConfig,
        local: SocketAddr,
        gen: IsnGenerator,
    ) -> Result<Self, TcpConfigError> {
        cfg.validate()?;
        let budget = OooBudget::new(lcfg.ooo_budget);
        let cfg = Config {
            syn_retries: lcfg.synack_retries,
            ..cfg
        };
        Ok(TcpListener {
            cfg,
            lcfg,
            local,
            gen,
            half_open: HashMap::new(),
            deadlines: BTreeSet::new(),
            dirty: VecDeque::new(),
            accept_queue: VecDeque::new(),
            tx: VecDeque::new(),
            budget,
            counters: ListenerCounters::default(),
        })
    }

    /// Counters.
    pub fn counters(&self) -> &ListenerCounters {
        &self.counters
    }
    /// Entries in the half-open table.
    pub fn half_open_len(&self) -> usize {
        self.half_open.len()
    }
    /// Drained: gives back what a burst grew (bounded by max_tx_queue and the burst).
    fn shrink_drained(&mut self) {
        if self.tx.capacity() > 64 {
            self.tx.shrink_to_fit();
        }
        if self.dirty.capacity() > 64 {
            self.dirty.shrink_to_fit();
        }
    }

    /// True when [`TcpListener::poll_transmit`] would return `None` (no half-open connection
    /// marked to send, no stateless reply queued): a caller may skip it and the frame it
    /// would take for it.
    pub fn has_nothing_to_send(&self) -> bool {
        self.dirty.is_empty() && self.tx.is_empty()
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

    /// Whether [`TcpListener::accept`] has a connection to give (a check that moves no
    /// connection, for the rounds that have none).
    pub fn has_accepted(&self) -> bool {
        !self.accept_queue.is_empty()
    }

    /// Parses and handles a packet; malformed ones are dropped and counted.
    pub fn handle_packet(&mut self, now: Timestamp, packet: &[u8]) -> Result<(), WireError> {
        let mut bad_sum = 0;
        let seg = wire::parse_counted(packet, &mut self.counters.malformed, &mut bad_sum)?;
        self.handle_segment(now, &seg);
        Ok(())
    }

    fn cookie_slot(&self, now: Timestamp) -> u32 {
        (now.saturating_duration_since(self.gen.epoch()).as_secs() / COOKIE_SLOT_SECS) as u32
    }

    fn ts_now(&self, tuple: &FourTuple, now: Timestamp) -> u32 {
        (now.saturating_duration_since(self.gen.epoch()).as_millis() as u32)
            .wrapping_add(self.gen.ts_offset(tuple))
    }

    fn make_cookie(&self, tuple: &FourTuple, peer_isn: SeqNum, mss: u16, now: Timestamp) -> SeqNum {
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
        now: Timestamp,
    ) -> Option<u16> {
        let slot = cookie.0 >> 27;
        let idx = ((cookie.0 >> 24) & 7) as usize;
        let cur = self.cookie_slot(now);
        let fresh = [cur & 31, cur.wrapping_sub(1) & 31].contains(&slot);
        let mac = self.gen.cookie_mac(tuple, peer_isn, slot) & 0x00FF_FFFF;
        (fresh && mac == cookie.0 & 0x00FF_FFFF).then(|| COOKIE_MSS[idx])
    }

    /// Handles one segment addressed to this listener (or one of its half-open connections).
    pub fn handle_segment(&mut self, now: Timestamp, seg: &TcpSegment<'_>) {
        if let Some(h) = self.half_open.get_mut(&seg.tuple) {
            h.conn.handle_segment(now, seg);
            let st = h.conn.state();
            self.refile(seg.tuple);
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
                let conn = Connection::accept_syn(self.cfg.clone(), seg, &self.gen, now);
                self.half_open
                    .insert(seg.tuple, HalfOpen { conn, armed: None });
                self.refile(seg.tuple);
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

    fn queue_cookie(&mut self, now: Timestamp, seg: &TcpSegment<'_>) {
        if self.tx.len() >= self.lcfg.max_tx_queue {
            self.counters.tx_overflow += 1;
            return;
        }
        let peer_mss = seg
            .options
            .mss
            .unwrap_or(default_peer_mss(&seg.tuple))
            .min(self.cfg.mss);
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

    fn after_update(&mut self, _now: Timestamp, tuple: FourTuple, st: State) {
        match st {
            State::SynReceived | State::Listen => {
                self.dirty.push_back(tuple);
            }
            State::Closed => {
                // Give it a chance to send its RST.
                self.dirty.push_back(tuple);
            }
            _ => {
                if let Some(mut c) = self.remove_half_open(&tuple) {
                    c.set_ooo_budget(self.budget.clone());
                    self.push_accepted(c);
                }
            }
        }
    }

    /// Files half-open entry `t` under its connection's current deadline.
    fn refile(&mut self, t: FourTuple) {
        let Some(h) = self.half_open.get_mut(&t) else {
            return;
        };
        let due = h.conn.poll_timeout();
        if due != h.armed {
            if let Some(old) = h.armed {
                self.deadlines.remove(&(old, t));
            }
            if let Some(d) = due {
                self.deadlines.insert((d, t));
            }
            h.armed = due;
        }
    }

    /// Removes half-open entry `t` and its deadline.
    fn remove_half_open(&mut self, t: &FourTuple) -> Option<Connection> {
        let h = self.half_open.remove(t)?;
        if let Some(d) = h.armed {
            self.deadlines.remove(&(d, *t));
        }
        if self.half_open.len() < self.half_open.capacity() / 4 {
            // A flood is over: give the table's memory back (half its size at a quarter full).
            self.half_open.shrink_to(self.half_open.len() * 2);
        }
        Some(h.conn)
    }

    /// The earliest timer of the half-open entries.
    #[inline]
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        // (No half-open entry, as between handshakes: the count answers, no tree is walked.)
        if self.deadlines.is_empty() {
            return None;
        }
        self.deadlines.first().map(|(d, _)| *d)
    }

    /// Runs expired timers (SYN-ACK retransmissions, expiry of half-open entries); visits only
    /// the entries whose deadline has passed.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        let mut due = Vec::new();
        while self.deadlines.first().is_some_and(|&(d, _)| d <= now) {
            if let Some((_, t)) = self.deadlines.pop_first() {
                due.push(t);
            }
        }
        for t in due {
            let Some(h) = self.half_open.get_mut(&t) else {
                continue;
            };
            h.armed = None;
            h.conn.handle_timeout(now);
            if h.conn.state() == State::Closed {
                self.remove_half_open(&t);
                self.counters.half_open_expired += 1;
            } else {
                self.refile(t);
                self.dirty.push_back(t);
            }
        }
    }

    /// Writes the next packet (SYN-ACK, cookie SYN-ACK, RST) into `buf`.
    pub fn poll_transmit(&mut self, now: Timestamp, buf: &mut [u8]) -> Option<usize> {
        while let Some(t) = self.dirty.front().copied() {
            match self.half_open.get_mut(&t) {
                Some(h) => {
                    if let Some(n) = h.conn.poll_transmit(now, buf) {
                        // Sending the SYN-ACK arms its retransmission timer.
                        self.refile(t);
                        return Some(n);
                    }
                    if h.conn.state() == State::Closed {
                        self.remove_half_open(&t);
                    }
                    self.dirty.pop_front();
                }
                None => {
                    self.dirty.pop_front();
                }
            }
        }
        // (`dirty` is empty from here on.)
        let Some(r) = self.tx.pop_front() else {
            self.shrink_drained();
            return None;
        };
        if self.tx.is_empty() {
            // The last reply: callers stop asking once `has_nothing_to_send` says so.
            self.shrink_drained();
        }
        match r {
            Reply::Rst { tuple, seq, ack } => {
                self.counters.rsts_sent += 1;
                emit_rst(tuple, RstOut { seq, ack }, buf, self.cfg.tx_checksum)
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
                repr.emit_with(buf, 0, |_| {}, self.cfg.tx_checksum).ok()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::connection::Connection;

    fn tuple(i: u16) -> FourTuple {
        FourTuple {
            local: SocketAddr::from(([198, 18, 0, 2], 5000)),
            remote: SocketAddr::from(([198, 19, (i >> 8) as u8, i as u8], 1024 + i)),
        }
    }

    fn syn(i: u16) -> Vec<u8> {
        let repr = SegmentRepr {
            tuple: FourTuple {
                local: tuple(i).remote,
                remote: tuple(i).local,
            },
            seq: SeqNum(u32::from(i) * 7919),
            ack: None,
            flags: Flags {
                syn: true,
                ..Default::default()
            },
            window: 1000,
            options: TcpOptions {
                mss: Some(1460),
                ..Default::default()
            },
        };
        let mut buf = vec![0u8; 100];
        let n = repr.emit(&mut buf, 0, |_| {}).unwrap();
        buf.truncate(n);
        buf
    }

    /// Every half-open entry with a timer is filed once, under its connection's deadline, and
    /// nothing else is filed.
    fn assert_filed(l: &TcpListener) {
        let armed = l.half_open.values().filter(|h| h.armed.is_some()).count();
        assert_eq!(l.deadlines.len(), armed, "stale or missing deadlines");
        for (t, h) in &l.half_open {
            assert_eq!(
                h.armed,
                h.conn.poll_timeout(),
                "entry filed under an old deadline"
            );
            if let Some(d) = h.armed {
                assert!(l.deadlines.contains(&(d, *t)));
            }
        }
    }

    /// The deadline set follows the half-open table through SYNs, SYN-ACKs, retransmissions,
    /// completed handshakes and expiry, and `poll_timeout` is its first element.
    #[test]
    fn half_open_deadlines_track_every_entry_until_it_leaves() {
        let t0 = Timestamp::ZERO;
        let gen = IsnGenerator::new([5; 16], t0);
        let lcfg = ListenerConfig {
            synack_retries: 2,
            ..ListenerConfig::default()
        };
        let mut l = TcpListener::new(
            Config::default(),
            lcfg,
            SocketAddr::from(([198, 18, 0, 2], 5000)),
            gen.clone(),
        )
        .expect("valid TCP settings");
        let mut buf = vec![0u8; 2000];
        let mut now = t0;
        for i in 0..300u16 {
            l.handle_packet(now, &syn(i)).unwrap();
            if i % 7 == 0 {
                while l.poll_transmit(now, &mut buf).is_some() {}
                now += Duration::from_millis(13);
            }
            assert_filed(&l);
        }
        while l.poll_transmit(now, &mut buf).is_some() {}
        assert_filed(&l);
        // A real client completes its handshake: its entry leaves the table and the set.
        let mut client = Connection::connect(
            Config::default(),
            FourTuple {
                local: SocketAddr::from(([198, 18, 0, 1], 40000)),
                remote: SocketAddr::from(([198, 18, 0, 2], 5000)),
            },
            &gen,
            now,
        )
        .expect("valid TCP settings");
        for _ in 0..4 {
            while let Some(n) = client.poll_transmit(now, &mut buf) {
                l.handle_packet(now, &buf[..n]).unwrap();
            }
            while let Some(n) = l.poll_transmit(now, &mut buf) {
                if wire::parse(&buf[..n]).unwrap().tuple.local.port() == 40000 {
                    client.handle_packet(now, &buf[..n]).unwrap();
                }
            }
            assert_filed(&l);
        }
        assert!(l.accept().is_some());
        assert_eq!(l.half_open_len(), 300);
        // Timers run only when due; every spoofed entry retransmits, then expires.
        let mut rounds = 0;
        while let Some(d) = l.poll_timeout() {
            assert_eq!(Some(d), l.deadlines.first().map(|e| e.0));
            now = d;
            l.handle_timeout(now);
            while l.poll_transmit(now, &mut buf).is_some() {}
            assert_filed(&l);
            rounds += 1;
            assert!(rounds < 10_000, "timers do not converge");
        }
        assert_eq!(l.half_open_len(), 0);
        assert!(l.deadlines.is_empty());
        assert_eq!(l.counters().half_open_expired, 300);
    }
}
