//! Building segments: `poll_transmit*`, the SYN, ACKs, new data (window, cwnd, Nagle, record
//! alignment: MPA §5.3, MPA-61) and retransmissions of whole original segments.

use crate::time::Timestamp;

use crate::rdma::annotate::{MssAccounting, SegmentOption};
use crate::rdma::option::decode_encoded;
use crate::seq::SeqNum;
use crate::template::{HeaderTemplate, SegmentFields};
use crate::tx::{NoRecordSource, Plan, RecordSource, SendBuffer, Split};
use crate::wire::{Flags, SegmentRepr};

use super::options::syn_options;
use super::rst::emit_rst;
use super::state::State;
use super::timers::Timer;
use super::Connection;

impl Connection {
    /// Writes the next packet to send (an IPv4 packet) into `buf` and returns its length.
    /// Uses owned data only; connections with external records use [`Self::poll_transmit_with`].
    pub fn poll_transmit(&mut self, now: Timestamp, buf: &mut [u8]) -> Option<usize> {
        self.poll_transmit_with(now, buf, &mut NoRecordSource)
    }

    /// Like [`Self::poll_transmit`]; `source` writes the bytes of external records.
    pub fn poll_transmit_with<S: RecordSource + ?Sized>(
        &mut self,
        now: Timestamp,
        buf: &mut [u8],
        source: &mut S,
    ) -> Option<usize> {
        // Every debug-build test checks the contract of the cheap check below.
        let quiet = cfg!(debug_assertions) && self.has_nothing_to_send();
        let n = self.transmit(now, buf, source);
        debug_assert!(
            !(quiet && n.is_some()),
            "has_nothing_to_send, yet a segment went out"
        );
        let n = n?;
        self.counters.segs_out += 1;
        Some(n)
    }

    /// True only when [`Connection::poll_transmit_with`] would certainly send nothing now
    /// (no RST, SYN, ACK, duplicate ACK, probe, lost segment, loss recovery, unsent data or
    /// FIN): a caller can skip taking a frame for it. False means it may send. Timers that fall
    /// due change it only through `handle_timeout`, which runs before a transmit.
    pub fn has_nothing_to_send(&self) -> bool {
        // An ACK due first (one flag: a pure ACK's round asks twice).
        !self.ack_now && self.nothing_but_an_ack_to_send()
    }

    /// Whether nothing but an ACK could go out: no unsent data or FIN (asked first: the common
    /// case of a sender when it is asked), RST, SYN, duplicate ACK, probe, lost segment or loss
    /// recovery.
    #[inline(always)]
    pub(super) fn nothing_but_an_ack_to_send(&self) -> bool {
        !self.has_unsent()
            && self.rst_out.is_none()
            && !self.syn_due
            && self.dupacks_owed == 0
            && !self.probe_due
            && !self.recovery.active
            && self.scoreboard.lost_pending() == 0
    }

    fn transmit<S: RecordSource + ?Sized>(
        &mut self,
        now: Timestamp,
        buf: &mut [u8],
        source: &mut S,
    ) -> Option<usize> {
        if let Some(n) = self.send_bulk(now, buf, source) {
            return Some(n);
        }
        if let Some(r) = self.rst_out.take() {
            self.counters.rsts_sent += 1;
            return emit_rst(self.tuple, r, buf, self.cfg.tx_checksum);
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
        if self.ack_now && self.only_ack_due() {
            // A pure ACK (the delayed ACK's deadline, an ACK of received data): what the chain
            // below would come to, without asking each sender in turn.
            return self.send_ack_if_due(now, buf);
        }
        if let Some(n) = self.send_retransmission(now, buf, source) {
            return Some(n);
        }
        if let Some(n) = self.send_new_data(now, buf, source) {
            return Some(n);
        }
        // Rules (3) and (4) apply only in loss recovery: the common case skips the call.
        if self.recovery.active {
            if let Some(n) = self.send_sack_extra(now, buf, source) {
                return Some(n);
            }
        }
        if self.probe_due {
            self.probe_due = false;
            // Zero-window probe / keepalive: an old sequence number elicits an ACK without breaking
            // record alignment (RFC 9293 §3.8.4, RFC 1122 §4.2.3.6).
            let seq = self.snd.seq(self.snd_una.saturating_sub(1));
            return self.emit(now, buf, seq, Flags::default(), 0, 0, false, source, false);
        }
        self.send_ack_if_due(now, buf)
    }

    /// The next new data segment of a bulk transfer: what `transmit`'s chain comes to (through
    /// `send_new_data`) when the connection is ESTABLISHED with unsent data, the fast path on
    /// and nothing else pending (no RST, duplicate ACK, lost segment, loss recovery, FIN,
    /// Nagle or SACK blocks), asked once instead of stage by stage. `None` when
    /// that is not the case or no segment can go (blocked, the buffer refused), with nothing
    /// changed that the chain would not change the same way: the caller goes the general way.
    #[inline(always)]
    fn send_bulk<S: RecordSource + ?Sized>(
        &mut self,
        now: Timestamp,
        buf: &mut [u8],
        source: &mut S,
    ) -> Option<usize> {
        let start = self.snd_nxt;
        if start >= self.sendbuf.end
            || self.state != State::Established
            || self.rst_out.is_some()
            || self.dupacks_owed > 0
            || self.fin_queued
            || self.recovery.active
            || self.scoreboard.lost_pending() > 0
            || !self.cfg.fast_path
            || self.cfg.nagle
            || (self.opts.sack && !self.recv.ranges().is_empty())
        {
            return None;
        }
        let emss = self.emss();
        let wnd_edge = self.snd_una + u64::from(self.snd_wnd);
        let wnd_room = wnd_edge.saturating_sub(start).min(u64::from(u32::MAX)) as u32;
        // `pipe` outside loss recovery.
        let pipe = self.scoreboard.pipe().min(u64::from(u32::MAX)) as u32;
        let room = wnd_room.min(self.cc.cwnd.saturating_sub(pipe));
        let Plan::Send {
            len,
            split,
            boundary,
        } = self.sendbuf.plan(start, emss, room, self.pack_up_to())
        else {
            return None;
        };
        if len == 0 {
            return None;
        }
        // With the TCP RDMA option's marks, only the hot run's segment (its option written,
        // nothing else changed, as often as asked); any other to the general way.
        let (mut len, mut rdma) = (len, false);
        if self.opts.rdma && !self.marks.is_empty() {
            let hot = self
                .marks
                .next_segment_hot(start, len, emss, MssAccounting::Rfc6691);
            (len, rdma) = (hot?, true);
            debug_assert!(len > 0);
        }
        let seq = self.snd.seq(start);
        let flags = Flags {
            psh: true,
            ..Flags::default()
        };
        let n = self.emit(now, buf, seq, flags, start, len, rdma, source, true)?;
        if rdma {
            self.counters.rdma_segments_annotated += 1;
        }
        // `send_new_data`'s count of segments that are not header-aligned.
        let end_aligned = |b: &SendBuffer| b.is_boundary(start + u64::from(len));
        debug_assert!(split.is_some() || end_aligned(&self.sendbuf));
        debug_assert_eq!(boundary, self.sendbuf.is_boundary(start));
        if !(boundary && (split.is_none() || end_aligned(&self.sendbuf))) {
            self.count_unaligned(split);
        }
        self.record_new_segment(now, start, len, false);
        Some(n)
    }

    /// True when, past RST, SYN and duplicate ACKs, nothing but an ACK can go out: nothing
    /// lost to resend, no loss recovery, no unsent data or FIN, no probe (each sender of
    /// `transmit`'s chain would send nothing and change nothing).
    #[inline]
    fn only_ack_due(&self) -> bool {
        self.scoreboard.lost_pending() == 0
            && !self.recovery.active
            && !self.has_unsent()
            && !self.probe_due
    }

    #[inline]
    fn send_ack_if_due(&mut self, now: Timestamp, buf: &mut [u8]) -> Option<usize> {
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
            false,
            &mut NoRecordSource,
            true,
        )
    }

    fn send_syn(&mut self, now: Timestamp, buf: &mut [u8]) -> Option<usize> {
        let mut o = syn_options(&self.cfg, &self.tuple);
        let synack = self.state == State::SynReceived;
        if synack {
            // Echo only what the peer offered (RFC 7323 §2.2, §3.2; RFC 2018 §2).
            if !self.opts.ws_enabled {
                o.window_scale = None;
            }
            o.sack_permitted &= self.opts.sack;
            if !self.opts.rdma {
                o.rdma = None;
            }
            o.timestamps = if self.opts.ts {
                Some((self.ts_clock.tsval(now), self.opts.ts_recent))
            } else {
                None
            };
        } else if o.timestamps.is_some() {
            o.timestamps = Some((self.ts_clock.tsval(now), 0));
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
        let n = repr.emit_with(buf, 0, |_| {}, self.cfg.tx_checksum).ok()?;
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

    /// Retransmits segment `i` of the scoreboard with its original boundaries (MPA-61); if the
    /// peer acked part of it, from SND.UNA (rare; counted). Updates the retransmission counters,
    /// Karn's state and the segment's timestamp; the caller updates the scoreboard flags.
    pub(super) fn resend<S: RecordSource + ?Sized>(
        &mut self,
        now: Timestamp,
        buf: &mut [u8],
        source: &mut S,
        i: usize,
    ) -> Option<usize> {
        let s = self.scoreboard.get(i);
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
        let rdma = self.rdma_annotation(start, len);
        let rdma = self.marks.set_encoded(rdma) != SegmentOption::None;
        let n = self.emit(now, buf, seq, flags, start, len, rdma, source, true)?;
        self.counters.data_segs_out += 1;
        let ts = self.ts_clock.tsval(now);
        self.scoreboard.on_resend(i, ts);
        self.counters.retransmits += 1;
        if self.recovery.active {
            self.counters.fast_retransmits += 1;
        }
        self.rtt_timed = None; // Karn
        self.arm_rto_if_idle(now);
        Some(n)
    }

    /// How far records are packed into one segment (`SendBuffer::plan`): up to a quarter of
    /// what is queued and not yet acknowledged, so that a queue's worth spans at least four
    /// segments and, with the peer acknowledging every second one, two ACKs come back per
    /// queue's worth. An iWARP sender completes its work when it is acknowledged, and what an
    /// application keeps queued is bounded by its send queue: one segment packing all of it
    /// would leave the sender idle while the peer processes that segment and the peer idle
    /// while the sender refills (64 B send_bw with 128 in flight at MTU 9000). A deep queue is
    /// not affected (a quarter of it exceeds the MSS), nor is a lone record (always whole).
    fn pack_up_to(&self) -> u32 {
        if !self.cfg.pack_records {
            return 0;
        }
        let queued = self.sendbuf.end.saturating_sub(self.snd_una);
        (queued / 4).min(u64::from(u32::MAX)) as u32
    }

    fn send_new_data<S: RecordSource + ?Sized>(
        &mut self,
        now: Timestamp,
        buf: &mut [u8],
        source: &mut S,
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
        let mut boundary = None;
        if self.snd_nxt < data_end {
            match self
                .sendbuf
                .plan(self.snd_nxt, emss, room, self.pack_up_to())
            {
                Plan::Empty => {}
                Plan::Send {
                    len: l,
                    split: s,
                    boundary: b,
                } => {
                    // Nagle (RFC 9293 §3.7.4), off by default.
                    if self.cfg.nagle
                        && l < emss
                        && !self.scoreboard.is_empty()
                        && self.snd_nxt + u64::from(l) < data_end
                    {
                        return None;
                    }
                    len = l;
                    split = s;
                    boundary = Some(b);
                }
                Plan::Blocked { need } => {
                    // MPA §5.3 exception: the window (not cwnd) is smaller than the record and
                    // nothing is in flight to open it: send what fits.
                    if self.scoreboard.is_empty()
                        && wnd_room > 0
                        && wnd_room < need
                        && cwnd_room >= wnd_room.min(emss)
                    {
                        len = wnd_room.min(emss);
                        split = Some(Split::Window);
                    } else {
                        if self.scoreboard.is_empty()
                            && self.snd_wnd == 0
                            && !self.timers.is_armed(Timer::Persist)
                        {
                            self.arm_persist(now);
                        }
                        return None;
                    }
                }
            }
        }
        let mut rdma = false;
        if len > 0 && self.opts.rdma && !self.marks.is_empty() {
            // TCPRDMA-13: at most one run per segment; RFC 6691: the option's octets come out
            // of the payload. The option for the segment comes with its length.
            // The hot run's segment first (a bulk transfer's), apart from the general cut.
            let hot = self
                .marks
                .next_segment_hot(self.snd_nxt, len, emss, MssAccounting::Rfc6691);
            if let Some(l) = hot {
                (len, rdma) = (l, true);
                self.counters.rdma_segments_annotated += 1;
            } else {
                let kind;
                (len, kind) = self.marks.next_segment_encoded(
                    self.snd_nxt,
                    len,
                    emss,
                    MssAccounting::Rfc6691,
                    self.cfg.tcp_rdma_align_messages,
                );
                rdma = kind != SegmentOption::None;
                if kind == SegmentOption::Transfer {
                    self.counters.rdma_segments_annotated += 1;
                }
            }
        }
        let mut fin = fin_pending && self.snd_nxt + u64::from(len) == data_end;
        if fin && !self.fin_hold_over && !self.recv.ranges().is_empty() {
            // Hold our FIN (at most two RTOs) while the peer's data has holes: some peers (smoltcp
            // 0.12) stop their retransmission timer when our FIN arrives in FIN-WAIT-1, and the hole
            // would never be filled. Sending the FIN a little later costs nothing.
            let until = self
                .timers
                .get_or_set(Timer::FinHold, now + self.rtt.rto() * 2);
            if now < until {
                fin = false;
            } else {
                self.fin_hold_over = true;
            }
        }
        if fin {
            self.timers.stop(Timer::FinHold);
        }
        if len == 0 && !fin {
            return None;
        }
        if len == 0 && fin && self.scoreboard.has_fin() {
            return None;
        }
        // Count every segment that is not header-aligned (MPA §5.3 exceptions): the piece that
        // splits a record and the pieces that carry its rest.
        // Without a split the segment ends on a record boundary (a plan's whole records, or
        // byte-stream data, where any cut is one): only its start needs looking up.
        let end_aligned = |b: &SendBuffer| b.is_boundary(self.snd_nxt + u64::from(len));
        debug_assert!(split.is_some() || end_aligned(&self.sendbuf));
        debug_assert!(boundary.is_none_or(|b| b == self.sendbuf.is_boundary(self.snd_nxt)));
        let aligned = boundary.unwrap_or_else(|| self.sendbuf.is_boundary(self.snd_nxt))
            && (split.is_none() || end_aligned(&self.sendbuf));
        if !aligned {
            self.count_unaligned(split);
        }
        let start = self.snd_nxt;
        let seq = self.snd.seq(start);
        let flags = Flags {
            fin,
            psh: len > 0,
            ..Default::default()
        };
        let n = self.emit(now, buf, seq, flags, start, len, rdma, source, true)?;
        self.record_new_segment(now, start, len, fin);
        Some(n)
    }

    /// Counts a segment that is not header-aligned (MPA §5.3 exceptions) by why it was cut:
    /// `split`, else the reason the record it continues was split for.
    #[inline(always)]
    fn count_unaligned(&mut self, split: Option<Split>) {
        let why = split.or(self.last_split).unwrap_or(Split::Emss);
        self.last_split = Some(why);
        match why {
            Split::Emss => self.counters.split_emss += 1,
            Split::Window => self.counters.split_window += 1,
        }
    }

    /// What a new segment of `len` octets (and `fin`) from `start`, just emitted, changes: the
    /// counters, the scoreboard, SND.NXT, the RTT sample's start, the retransmission timer
    /// (RFC 6298 §5.1), the persist state.
    #[inline(always)]
    fn record_new_segment(&mut self, now: Timestamp, start: u64, len: u32, fin: bool) {
        self.counters.data_segs_out += 1;
        self.scoreboard.push(start, len, fin);
        self.snd_nxt = start + u64::from(len) + u64::from(fin);
        self.counters.bytes_sent += u64::from(len);
        if self.rtt_timed.is_none() && !self.opts.ts {
            self.rtt_timed = Some((self.snd_nxt, now));
        }
        self.arm_rto_if_idle(now);
        self.timers.stop(Timer::Persist);
        self.persist_since = None;
    }

    /// Emits one segment with the current ACK, window and options (with `rdma`, the RDMA
    /// option `SendMarks::encoded` holds for the segment); payload from the send buffer.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn emit<S: RecordSource + ?Sized>(
        &mut self,
        now: Timestamp,
        buf: &mut [u8],
        seq: SeqNum,
        mut flags: Flags,
        off: u64,
        len: u32,
        rdma: bool,
        source: &mut S,
        with_sack: bool,
    ) -> Option<usize> {
        flags.ack = true;
        let n = if self.use_template(with_sack) {
            let f = SegmentFields {
                seq,
                ack: self.rcv.seq(self.recv.nxt),
                flags,
                window: self.advertise(false),
                timestamps: self.timestamps(now),
            };
            // The RDMA option follows the timestamps, 4-aligned, NOPs after it to the next
            // boundary (the full path's layout).
            let t = self.template.as_deref()?;
            let option = rdma.then(|| self.marks.encoded_with_sum());
            let sendbuf = &self.sendbuf;
            let fill = |p: &mut [u8]| sendbuf.fill(off, p, source);
            let cks = self.cfg.tx_checksum;
            let n = t.write(buf, &f, option, len as usize, fill, cks)?;
            self.counters.segs_out_fast += 1;
            n
        } else {
            self.emit_full(now, buf, seq, flags, off, len, rdma, source, with_sack)?
        };
        self.last_ack_sent = self.recv.nxt;
        self.ack_now = false;
        self.ack_pending = false;
        self.segs_since_ack = 0;
        self.timers.stop(Timer::DelayedAck);
        Some(n)
    }

    /// Whether a segment (asking for SACK blocks when `with_sack`) is written from the header
    /// template: it carries no option but timestamps and the RDMA option, and the connection is
    /// synchronized (its addresses and options settled for good; the template is built then).
    fn use_template(&mut self, with_sack: bool) -> bool {
        let sack = with_sack && self.opts.sack && !self.recv.ranges().is_empty();
        if !self.cfg.fast_path || sack || !self.state.is_synchronized() {
            return false;
        }
        if self.template.is_none() {
            self.template = HeaderTemplate::new(self.tuple, self.opts.ts).map(Box::new);
        }
        self.template.is_some()
    }

    /// [`Self::emit`]'s segment built field by field (any options).
    #[allow(clippy::too_many_arguments)]
    fn emit_full<S: RecordSource + ?Sized>(
        &mut self,
        now: Timestamp,
        buf: &mut [u8],
        seq: SeqNum,
        flags: Flags,
        off: u64,
        len: u32,
        rdma: bool,
        source: &mut S,
        with_sack: bool,
    ) -> Option<usize> {
        let mut options = self.base_options(now);
        // Option space priority: timestamps, then the RDMA option (mandatory on segments with
        // transfer bytes, TCPRDMA-11), then as many SACK blocks as still fit.
        options.rdma = rdma.then(|| decode_encoded(self.marks.encoded())).flatten();
        if with_sack {
            let used = options.encoded_len();
            let limit = (self.emss() + if self.opts.ts { 12 } else { 0 }) as usize;
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
        let fill = |p: &mut [u8]| sendbuf.fill(off, p, source);
        repr.emit_with(buf, len as usize, fill, self.cfg.tx_checksum)
            .ok()
    }
}
