//! Negotiated TCP options: MSS and the EMSS (MPA §3.1.1), window scale and timestamps
//! (RFC 7323), SACK-permitted and the SACK blocks we send (RFC 2018).

use crate::time::Timestamp;
use std::net::SocketAddr;

use crate::config::Config;
use crate::isn::FourTuple;
use crate::lean::SegmentHeader;
use crate::rdma::option::RdmaOption;
use crate::seq::SeqSpace;
use crate::wire::{TcpOptions, TcpSegment, MAX_SACK_BLOCKS};

use super::Connection;

/// IP + TCP header octets without options (RFC 9293 §3.7.1 MMS_S - MSS).
fn ip_tcp_overhead(tuple: &FourTuple) -> u16 {
    match tuple.local {
        SocketAddr::V4(_) => 40,
        SocketAddr::V6(_) => 60,
    }
}

/// The MSS to assume when a SYN carries no MSS option (RFC 9293 §3.7.1: 536 over IPv4; 1220,
/// the IPv6 minimum MTU of 1280 (RFC 8200 §5) less 60, over IPv6).
pub(crate) fn default_peer_mss(tuple: &FourTuple) -> u16 {
    match tuple.local {
        SocketAddr::V4(_) => 536,
        SocketAddr::V6(_) => 1220,
    }
}

/// The EMSS for `opts` negotiated on `tuple` under `cfg` (MPA §3.1.1: min(MSS, PMTU - headers
/// incl. options)); at least 1.
pub(super) fn effective_mss(opts: &Negotiated, cfg: &Config, tuple: &FourTuple) -> u32 {
    let base = u32::from(
        opts.peer_mss
            .min(cfg.mss)
            .min(cfg.mtu.saturating_sub(ip_tcp_overhead(tuple))),
    );
    base.saturating_sub(if opts.ts { 12 } else { 0 }).max(1)
}

/// Options we offer in a SYN / SYN-ACK.
pub(super) fn syn_options(cfg: &Config, tuple: &FourTuple) -> TcpOptions {
    TcpOptions {
        mss: Some(cfg.mss.min(cfg.mtu.saturating_sub(ip_tcp_overhead(tuple)))),
        window_scale: cfg.window_scale,
        sack_permitted: cfg.sack,
        timestamps: cfg.timestamps.then_some((0, 0)),
        // TCPRDMA-14: the length-2 form offers the RDMA option.
        rdma: cfg.tcp_rdma.then_some(RdmaOption::Negotiate),
        ..Default::default()
    }
}

/// The options both ends agreed on in the handshake, and TS.Recent.
#[derive(Clone, Copy, Debug)]
pub(super) struct Negotiated {
    /// The peer's MSS ([`default_peer_mss`] when its SYN carries none).
    pub peer_mss: u16,
    /// Window scaling (RFC 7323 §2.2): on only when both SYNs carried the option.
    pub ws_enabled: bool,
    /// The shift of the windows the peer advertises (its option; 0 when off).
    pub snd_wscale: u8,
    /// The shift of the windows we advertise (our option; 0 when off).
    pub rcv_wscale: u8,
    /// SACK-permitted both ways (RFC 2018 §2).
    pub sack: bool,
    /// Timestamps both ways (RFC 7323 §3.2).
    pub ts: bool,
    /// TS.Recent (RFC 7323 §4.3): the peer's TSval we echo.
    pub ts_recent: u32,
    /// The TCP RDMA option both ways (TCPRDMA-14: both SYNs carried the length-2 form).
    pub rdma: bool,
}

impl Default for Negotiated {
    fn default() -> Self {
        Negotiated {
            peer_mss: 536,
            ws_enabled: false,
            snd_wscale: 0,
            rcv_wscale: 0,
            sack: false,
            ts: false,
            ts_recent: 0,
            rdma: false,
        }
    }
}

/// Our timestamp clock: milliseconds since an epoch plus the connection's offset (RFC 7323
/// §5.4, §7.1), never going backwards.
#[derive(Clone, Copy, Debug)]
pub(super) struct TsClock {
    epoch: Timestamp,
    offset: u32,
    /// The last `(now, tsval(now))`; its TSval is also the floor of the next one.
    last: Option<(Timestamp, u32)>,
}

impl TsClock {
    /// A clock that reads `offset` at `epoch`.
    pub fn new(epoch: Timestamp, offset: u32) -> Self {
        TsClock {
            epoch,
            offset,
            last: None,
        }
    }

    /// Our TSval at `now`. Never smaller than the last one (RFC 7323 §5.4: TSval values are
    /// monotonically non-decreasing), even when the caller's `now` goes backwards (several
    /// threads driving one engine with clock reads taken before its lock): a smaller TSval
    /// makes the peer's PAWS drop the segment (RFC 7323 §5.3), a hole it reports with dupacks.
    pub fn tsval(&mut self, now: Timestamp) -> u32 {
        // Calls in one engine poll share `now`: compute the clock once for them.
        if let Some((t, v)) = self.last {
            if t == now {
                return v;
            }
        }
        let mut v = ((now.nanos_since(self.epoch) / 1_000_000) as u32).wrapping_add(self.offset);
        if let Some((_, last)) = self.last {
            if (v.wrapping_sub(last) as i32) < 0 {
                v = last;
            }
        }
        self.last = Some((now, v));
        v
    }
}

impl Connection {
    /// The effective MSS for payload (EMSS, MPA §3.1.1: min(MSS, PMTU - headers incl. options)).
    /// Cached: `Connection::set_emss` refreshes it wherever the peer's MSS, the timestamp
    /// option or the tuple change (the configured MSS and MTU are fixed for the connection).
    pub fn emss(&self) -> u32 {
        debug_assert_eq!(
            self.emss,
            effective_mss(&self.opts, &self.cfg, &self.tuple),
            "cached EMSS is stale"
        );
        self.emss
    }

    pub(super) fn on_syn(&mut self, seg: &TcpSegment<'_>, now: Timestamp) {
        // Record the peer's ISN and options (RFC 9293 §3.10.7.2/3; RFC 7323 §2.2, §3.2; RFC 2018 §2).
        self.rcv = SeqSpace { isn: seg.seq };
        self.recv = self.recv.fresh(1);
        self.rcv_edge = 1;
        self.fin_rcvd = None;
        let o = &seg.options;
        self.opts.peer_mss = o.mss.unwrap_or(default_peer_mss(&self.tuple)).max(64);
        if let (Some(ws), Some(ours)) = (o.window_scale, self.cfg.window_scale) {
            self.opts.ws_enabled = true;
            self.opts.snd_wscale = ws.min(14);
            self.opts.rcv_wscale = ours;
        } else {
            self.opts.ws_enabled = false;
            self.opts.snd_wscale = 0;
            self.opts.rcv_wscale = 0;
        }
        self.opts.sack = o.sack_permitted && self.cfg.sack;
        if let (Some((v, _)), true) = (o.timestamps, self.cfg.timestamps) {
            self.opts.ts = true;
            self.opts.ts_recent = v;
        } else {
            self.opts.ts = false;
        }
        self.opts.rdma = self.cfg.tcp_rdma && o.rdma == Some(RdmaOption::Negotiate);
        self.set_emss();
        let _ = now;
    }

    /// Recomputes the cached EMSS from the negotiated options and gives it to congestion control.
    pub(super) fn set_emss(&mut self) {
        self.emss = effective_mss(&self.opts, &self.cfg, &self.tuple);
        self.cc.set_mss(self.emss, self.cfg.initial_window);
    }

    pub(super) fn sample_rtt_ts(&mut self, now: Timestamp, seg: &SegmentHeader) {
        if let Some((_, ecr)) = seg.timestamps {
            let d = self.ts_clock.tsval(now).wrapping_sub(ecr);
            if ecr != 0 && d < 60_000 {
                // At least 500 us (d < 60,000 ms: no overflow).
                self.rtt
                    .on_sample_ns((u64::from(d) * 1_000_000).max(500_000));
            }
        }
    }

    pub(super) fn base_options(&mut self, now: Timestamp) -> TcpOptions {
        TcpOptions {
            timestamps: self.timestamps(now),
            ..Default::default()
        }
    }

    /// The (TSval, TSecr) a segment sent at `now` carries, when timestamps are on.
    pub(super) fn timestamps(&mut self, now: Timestamp) -> Option<(u32, u32)> {
        self.opts
            .ts
            .then(|| (self.ts_clock.tsval(now), self.opts.ts_recent))
    }

    pub(super) fn add_sack_blocks(&self, o: &mut TcpOptions, room: usize) {
        if !self.opts.sack {
            return;
        }
        let ranges = self.recv.ranges();
        if ranges.is_empty() {
            return;
        }
        let max = (room.saturating_sub(4) / 8).min(if self.opts.ts { 3 } else { MAX_SACK_BLOCKS });
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
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn tsval_counts_milliseconds_from_the_offset_rfc7323_s5_4() {
        let t0 = Timestamp::ZERO;
        let mut c = TsClock::new(t0, u32::MAX - 5);
        assert_eq!(c.tsval(t0), u32::MAX - 5);
        // Wraps like sequence numbers.
        assert_eq!(c.tsval(t0 + Duration::from_millis(10)), 4);
    }

    #[test]
    fn tsval_never_goes_backwards_rfc7323_s5_4() {
        let t0 = Timestamp::ZERO;
        let mut c = TsClock::new(t0, 1000);
        assert_eq!(c.tsval(t0 + Duration::from_millis(50)), 1050);
        // An older clock reading (another thread's, taken before the lock) keeps the last TSval.
        assert_eq!(c.tsval(t0 + Duration::from_millis(20)), 1050);
        assert_eq!(c.tsval(t0 + Duration::from_millis(60)), 1060);
    }
}
