//! Header prediction: the receive fast path of an ESTABLISHED connection (as Linux's
//! `tcp_rcv_established` and TAS's fast path). A segment that carries the next octets in order
//! (or, without data, acknowledges new data), no flag but ACK and PSH and no option but
//! timestamps and the TCP RDMA option, while nothing is held out of order, needs only some
//! steps of SEGMENT ARRIVES (RFC 9293 §3.10.7.4): PAWS and TS.Recent (RFC 7323), the ACK of new
//! data, the send window, the in-order commit, the RDMA run's placement and the ACK policy. Those steps are the full path's own functions; what
//! is skipped is the deciding. Every other segment takes the full path (`input`), and
//! `Config::fast_path` off sends them all there.

use crate::time::Timestamp;

use crate::lean::LeanSegment;
use crate::rx::{Accepted, RxSink};

use super::state::State;
use super::{Connection, Event};

impl Connection {
    /// Handles `seg` on the fast path when it qualifies and its checksum is right, with the
    /// full path's result; returns false, having changed nothing, when not. `sink` as in
    /// `handle_segment_with` (record mode; `None`: byte mode, or chunks queued for
    /// `poll_recv`).
    pub(super) fn predicted(
        &mut self,
        now: Timestamp,
        seg: &LeanSegment<'_>,
        sink: Option<&mut dyn RxSink>,
    ) -> bool {
        let Some(ack) = self.predict(seg) else {
            return false;
        };
        if !seg.checksum_ok() {
            return false;
        }
        let h = &seg.header;
        self.counters.segs_in += 1;
        self.counters.segs_in_fast += 1;
        // PAWS passed (checked in `predict`); SEG.SEQ is RCV.NXT.
        self.update_ts_recent(self.recv.nxt, h);
        self.arm_keepalive(now);
        if ack > self.snd_una {
            self.on_new_ack(now, h, ack);
        }
        // ESTABLISHED with no FIN queued: no state waits for this ACK, so the segment stays.
        let kept = self.after_ack(now, h);
        debug_assert!(kept);
        let data = seg.payload;
        if data.is_empty() {
            return true;
        }
        let to_sink = sink.is_some();
        if self.opts.rdma {
            // The segment the last placement expects (only byte mode places: entering record
            // mode stops the expectation): placed, its octets left out of the receive buffer.
            // Apart, so that what this commit returns is known here and its tests fold away.
            let raw = seg.rdma_octets();
            if let Some((rid, bo)) = self.placements.place_predicted(raw, self.recv.nxt, data) {
                debug_assert!(!self.recv.record_mode);
                self.counters.rdma_bytes_placed += data.len() as u64;
                let a = self.recv.accept_next_all_placed(data.len(), rid, bo);
                self.after_in_order_commit(now, &a, data.len(), to_sink);
                return true;
            }
            let a = self.accept_in_order(seg, sink);
            self.after_in_order_commit(now, &a, data.len(), to_sink);
        } else {
            // Apart: what the plain commit returns is known here, and its tests fold away.
            let a = self.recv.accept_next(data, h.seq, sink);
            self.after_in_order_commit(now, &a, data.len(), to_sink);
        }
        true
    }

    /// What follows the in-order commit `a` of a segment's `len` octets (`to_sink`: with a
    /// receive sink): the counters, the event, the ACK policy and the window check.
    #[inline(always)]
    fn after_in_order_commit(&mut self, now: Timestamp, a: &Accepted, len: usize, to_sink: bool) {
        self.counters.bytes_received += a.new_bytes;
        if self.data_events {
            self.events.push_back(Event::Readable);
        }
        self.schedule_ack(now, a, false, len);
        if to_sink && self.recv.record_mode {
            // The one chunk went to the sink: the window check `poll_recv` would have made.
            self.replay_window_checks(&[a.new_bytes]);
        }
    }

    /// The in-order commit of `seg`'s payload (not empty) on a connection with the RDMA option,
    /// with the placement of its run, when it is not the segment the last placement expects.
    #[inline(always)]
    fn accept_in_order(
        &mut self,
        seg: &LeanSegment<'_>,
        sink: Option<&mut dyn RxSink>,
    ) -> Accepted {
        let data = seg.payload;
        // In order and nothing held: the run's part not yet received is all of the segment.
        let (off, run) = (self.recv.nxt, self.rdma_run(seg.rdma()));
        match run {
            // Byte mode: the placed octets are left out of the receive buffer.
            Some(t) if !self.recv.record_mode => self.accept_next_placing(&t, data),
            _ => {
                if run.is_some() {
                    self.rdma_note_gaps(off, off + data.len() as u64);
                }
                let a = self.recv.accept_next(data, seg.header.seq, sink);
                if let Some(t) = run {
                    self.rdma_place(&t, off + u64::from(t.data_offset), off, data, off);
                }
                a
            }
        }
    }

    /// Whether `seg` qualifies (see the module documentation); its ACK as a send offset if
    /// so.
    fn predict(&self, seg: &LeanSegment<'_>) -> Option<u64> {
        let h = &seg.header;
        debug_assert_eq!(
            seg.ack_alone(),
            h.flags.ack && !h.flags.syn && !h.flags.fin && !h.flags.rst
        );
        if !self.cfg.fast_path
            || self.state != State::Established
            || !seg.ack_alone()
            || self.fin_queued
            || self.fin_rcvd.is_some()
            || !self.recv.ranges().is_empty()
            || self.recv.has_chunk()
            || h.seq != self.rcv.seq(self.recv.nxt)
        {
            return None;
        }
        if self.opts.ts {
            // PAWS (RFC 7323 §5.3): a timestamp not older than TS.Recent.
            let (v, _) = h.timestamps?;
            if (v.wrapping_sub(self.opts.ts_recent) as i32) < 0 {
                return None;
            }
        }
        let ack = self.snd.off(h.ack, self.snd_una)?;
        if ack < self.snd_una || ack > self.snd_nxt {
            return None;
        }
        let len = seg.payload.len() as u64;
        if len == 0 {
            // A pure ACK of nothing new (a duplicate ACK, a window update) takes the full path.
            return (ack > self.snd_una).then_some(ack);
        }
        // Wholly inside the window: nothing trimmed.
        (self.recv.nxt + len <= self.rcv_edge).then_some(ack)
    }
}
