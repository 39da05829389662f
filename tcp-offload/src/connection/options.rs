//! Negotiated TCP options: MSS and the EMSS (MPA §3.1.1), window scale and timestamps
//! (RFC 7323), SACK-permitted and the SACK blocks we send (RFC 2018).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::isn::FourTuple;
use crate::seq::SeqSpace;
use crate::wire::{Segment, TcpOptions, MAX_SACK_BLOCKS};

use super::Connection;

/// IP + TCP header octets without options (RFC 9293 §3.7.1 MMS_S - MSS).
fn ip_tcp_overhead(tuple: &FourTuple) -> u16 {
    match tuple.local {
        SocketAddr::V4(_) => 40,
        SocketAddr::V6(_) => 60,
    }
}

/// Options we offer in a SYN / SYN-ACK.
pub(super) fn syn_options(cfg: &Config, tuple: &FourTuple) -> TcpOptions {
    TcpOptions {
        mss: Some(cfg.mss.min(cfg.mtu.saturating_sub(ip_tcp_overhead(tuple)))),
        window_scale: cfg.window_scale,
        sack_permitted: cfg.sack,
        timestamps: cfg.timestamps.then_some((0, 0)),
        ..Default::default()
    }
}

impl Connection {
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

    pub(super) fn on_syn(&mut self, seg: &Segment<'_>, now: Instant) {
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

    pub(super) fn set_emss(&mut self) {
        let emss = self.emss();
        self.cc.set_mss(emss, self.cfg.initial_window);
    }

    /// Our TSval at `now`. Never smaller than the last one (RFC 7323 §5.4: TSval values are
    /// monotonically non-decreasing), even when the caller's `now` goes backwards (several
    /// threads driving one engine with clock reads taken before its lock): a smaller TSval
    /// makes the peer's PAWS drop the segment (RFC 7323 §5.3), a hole it reports with dupacks.
    pub(super) fn ts_now(&mut self, now: Instant) -> u32 {
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

    pub(super) fn sample_rtt_ts(&mut self, now: Instant, seg: &Segment<'_>) {
        if let Some((_, ecr)) = seg.options.timestamps {
            let d = self.ts_now(now).wrapping_sub(ecr);
            if ecr != 0 && d < 60_000 {
                self.rtt
                    .on_sample(Duration::from_millis(u64::from(d)).max(Duration::from_micros(500)));
            }
        }
    }

    pub(super) fn base_options(&mut self, now: Instant) -> TcpOptions {
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

    pub(super) fn add_sack_blocks(&self, o: &mut TcpOptions, room: usize) {
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
}
