//! Segment arrival (RFC 9293 §3.10.7 SEGMENT ARRIVES) with the RFC 5961 checks and PAWS
//! (RFC 7323 §5), and the received data handed to the receive buffer (and a sink).

use std::net::SocketAddr;
use std::time::Duration;

use crate::time::Timestamp;

use crate::lean::{LeanSegment, SegmentHeader};
use crate::rx::{Accepted, RxRef, RxSink};
use crate::wire::{self, TcpSegment, WireError};

use super::rst::{rst_for, RstOut};
use super::state::{CloseReason, State};
use super::timers::Timer;
use super::{Connection, Event};

impl Connection {
    /// Parses `packet` (an IP packet) and handles it. Malformed packets are dropped and counted.
    pub fn handle_packet(&mut self, now: Timestamp, packet: &[u8]) -> Result<(), WireError> {
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
    pub fn handle_segment(&mut self, now: Timestamp, seg: &TcpSegment<'_>) {
        if !seg.lean().is_some_and(|l| self.predicted(now, &l, None)) {
            self.dispatch_segment(now, seg, None);
        }
    }

    /// A segment read in place ([`LeanSegment::parse`]) when header prediction takes it: as
    /// [`Self::handle_segment_with`] (`sink` in record mode) or [`Self::handle_segment`]
    /// (`None`), with the same result. Returns false, having changed nothing, when it does not
    /// (its checksum is wrong, or it needs the full path): parse it with
    /// [`wire::parse`] and hand it to one of those. A segment without payload gives the sink
    /// nothing: `None` for it has the same result.
    pub fn handle_lean(
        &mut self,
        now: Timestamp,
        seg: &LeanSegment<'_>,
        sink: Option<&mut dyn RxSink>,
    ) -> bool {
        let sink = sink.filter(|_| self.recv.record_mode);
        self.predicted(now, seg, sink)
    }

    /// [`Self::handle_packet`] with [`Self::handle_segment_with`]'s delivery.
    pub fn handle_packet_with(
        &mut self,
        now: Timestamp,
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
    /// # use tcp_offload::Timestamp;
    /// # use tcp_offload::{wire, Connection, RxRef};
    /// # fn place(conn: &mut Connection, packet: &[u8], region: &mut [u8]) {
    /// let seg = wire::parse(packet).unwrap();
    /// conn.handle_segment_with(Timestamp::ZERO, &seg, &mut |c: RxRef<'_>| {
    ///     // The one copy: from the received frame straight into the memory region.
    ///     let at = c.offset as usize;
    ///     region[at..at + c.data.len()].copy_from_slice(c.data);
    /// });
    /// # }
    /// ```
    pub fn handle_segment_with(
        &mut self,
        now: Timestamp,
        seg: &TcpSegment<'_>,
        sink: &mut dyn RxSink,
    ) {
        if !self.recv.record_mode {
            self.handle_segment(now, seg);
            return;
        }
        if seg
            .lean()
            .is_some_and(|l| self.predicted(now, &l, Some(&mut *sink)))
        {
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
        self.replay_window_checks(&lens);
        self.sink_lens = lens;
    }

    /// After chunks of `lens` octets went to a receive sink: the window check `poll_recv`
    /// makes at each chunk it pops, replayed with the chunks held as they would have been.
    pub(super) fn replay_window_checks(&mut self, lens: &[u64]) {
        if let [len] = lens {
            // One chunk (the fast path's segment): nothing queued behind it.
            return self.replay_window_check(0, *len);
        }
        let mut queued: u64 = lens.iter().sum();
        for &len in lens {
            queued -= len;
            self.replay_window_check(queued, len);
        }
    }

    /// The window check at popping a chunk of `len` octets with `queued` octets still queued
    /// behind it.
    #[inline]
    fn replay_window_check(&mut self, queued: u64, len: u64) {
        let buffer = u64::from(self.cfg.recv_buffer);
        let held = self.recv.held() + queued;
        let before = buffer.saturating_sub(held + len);
        // A window at least half the buffer before the read asks for no update (the first of
        // `window_update_if_opened`'s conditions, tested here before it looks up the EMSS).
        if before >= u64::from(self.cfg.recv_buffer) / 2 {
            return;
        }
        self.window_update_if_opened(before, buffer.saturating_sub(held));
    }

    fn dispatch_segment(
        &mut self,
        now: Timestamp,
        seg: &TcpSegment<'_>,
        sink: Option<&mut dyn RxSink>,
    ) {
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
    fn reply_rst(&mut self, seg: &TcpSegment<'_>) {
        if seg.flags.rst {
            return;
        }
        self.rst_out = Some(rst_for(seg));
    }

    fn segment_in_listen(&mut self, now: Timestamp, seg: &TcpSegment<'_>) {
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
        now: Timestamp,
        seg: &TcpSegment<'_>,
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
            self.scoreboard.clear();
            self.timers.stop(Timer::Rto);
            self.update_window(&seg.header(), true);
            self.establish(now);
            if self.opts.ts {
                self.sample_rtt_ts(now, &seg.header());
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
    fn challenge_ack(&mut self, now: Timestamp) {
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

    fn segment_in_sync(
        &mut self,
        now: Timestamp,
        seg: &TcpSegment<'_>,
        sink: Option<&mut dyn RxSink>,
    ) {
        // A retransmitted SYN in SYN-RECEIVED: our SYN-ACK was lost; send it again.
        if self.state == State::SynReceived
            && seg.flags.syn
            && !seg.flags.ack
            && seg.seq == self.rcv.isn
        {
            self.syn_due = true;
            return;
        }
        // Simultaneous open: the peer's SYN-ACK repeats its SYN at IRS; drop the SYN part (on
        // a copy: the segment is copied only then, not for every segment).
        let without_syn;
        let seg = if self.state == State::SynReceived
            && seg.flags.syn
            && seg.flags.ack
            && seg.seq == self.rcv.isn
        {
            let mut s = *seg;
            s.flags.syn = false;
            s.seq = s.seq.plus(1);
            // Our own SYN-ACK may not have gone out yet: acknowledge theirs explicitly.
            self.ack_now = true;
            without_syn = s;
            &without_syn
        } else {
            seg
        };
        // Sequence number as an offset near RCV.NXT (segments with wildly old sequence numbers are
        // simply unacceptable).
        let seg_off = self.rcv.off(seg.seq, self.recv.nxt);
        let seg_len = u64::from(seg.seg_len());
        // RFC 7323 §5.3 PAWS (R1-R3), before the window check; RST exempt.
        if self.opts.ts && !seg.flags.rst {
            if let Some((v, _)) = seg.options.timestamps {
                if (v.wrapping_sub(self.opts.ts_recent) as i32) < 0 {
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
                    self.timers.set(Timer::TimeWait, now + self.cfg.time_wait);
                }
            }
            return;
        }
        let seg_off = seg_off.unwrap_or(self.recv.nxt);
        self.update_ts_recent(seg_off, &seg.header());
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
                        self.timers.stop(Timer::Rto);
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
                self.scoreboard.drop_below(1);
                self.timers.stop(Timer::Rto);
                self.snd_wl1 = seg.seq;
                self.snd_wl2 = seg.ack;
                self.snd_wnd = u32::from(seg.window) << self.opts.snd_wscale;
                self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
                if self.opts.ts {
                    self.sample_rtt_ts(now, &seg.header());
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
        if !self.process_ack(now, seg) {
            return;
        }
        // Seventh: segment text.
        if matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        ) {
            self.accept_data(now, seg, sink);
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
                self.timers.set(Timer::TimeWait, now + self.cfg.time_wait);
            }
        }
        self.check_fin(now);
    }

    /// RFC 7323 §4.3 (TS.Recent update) for an acceptable segment at offset `seg_off`:
    /// SEG.SEQ <= Last.ACK.sent and its TSval not older.
    pub(super) fn update_ts_recent(&mut self, seg_off: u64, seg: &SegmentHeader) {
        if self.opts.ts {
            if let Some((v, _)) = seg.timestamps {
                if seg_off <= self.last_ack_sent
                    && (v.wrapping_sub(self.opts.ts_recent) as i32) >= 0
                {
                    self.opts.ts_recent = v;
                }
            }
        }
    }

    fn accept_data(&mut self, now: Timestamp, seg: &TcpSegment<'_>, sink: Option<&mut dyn RxSink>) {
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
        let seg_off = off;
        let rdma_run = self.rdma_run_of(seg);
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
        let nxt_before = self.recv.nxt;
        if rdma_run.is_some() {
            self.rdma_note_gaps(off, off + data.len() as u64);
        }
        let a = self
            .recv
            .accept(off, data, |o| rcv.seq(o), self.ooo_limits, sink);
        if let Some(t) = rdma_run {
            // Only what TCP accepted as new is placed: trimming moves the run in step.
            let run_at = seg_off + u64::from(t.data_offset);
            self.rdma_place(&t, run_at, off, data, nxt_before);
        }
        self.counters.bytes_received += a.new_bytes;
        self.counters.duplicate_bytes += a.dup_bytes;
        self.counters.ooo_committed += a.ooo_ranges;
        self.counters.ooo_dropped += a.ooo_dropped;
        if a.new_bytes > 0 && self.data_events {
            self.events.push_back(Event::Readable);
        }
        self.schedule_ack(now, &a, was_ooo, data.len());
    }

    /// RFC 5681 §4.2 / RFC 9293 §3.8.6.3, after `len` octets of a segment were accepted as
    /// `a` says (`was_ooo`: out-of-order data was held before): ACK at once for out-of-order
    /// data, gap fills and duplicates; else every second full segment or when the delayed-ACK
    /// timer fires.
    pub(super) fn schedule_ack(&mut self, now: Timestamp, a: &Accepted, was_ooo: bool, len: usize) {
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
            if self.segs_since_ack >= 2 {
                self.ack_now = true;
                return;
            }
            // The delay only matters for the timer: the segment's length is looked at here.
            let delay = match self.cfg.short_segment_ack {
                Some(d) if len + crate::config::SHORT_SEGMENT_SLACK <= self.emss() as usize => {
                    Some(d)
                }
                _ => self.cfg.delayed_ack,
            };
            if let Some(at) = delay.map(|d| now + d) {
                self.timers.set_earlier(Timer::DelayedAck, at);
            }
        }
    }
}
