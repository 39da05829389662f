//! ACK processing: RFC 9293 §3.10.7.4 fifth check, RFC 5961 §5.2 ACK validation, new data
//! acknowledged (RTT samples, release of send data, congestion control).

use crate::time::Timestamp;

use crate::lean::SegmentHeader;
use crate::wire::TcpSegment;

use super::state::{CloseReason, State};
use super::timers::Timer;
use super::{Connection, Event};

impl Connection {
    /// The ACK processing of RFC 9293 §3.10.7.4 fifth check plus RFC 5961 §5.2. Returns false when
    /// the segment must be dropped.
    pub(super) fn process_ack(&mut self, now: Timestamp, seg: &TcpSegment<'_>) -> bool {
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
        if self.opts.sack && seg.options.sack_count > 0 {
            sacked_new = self.apply_sack(seg);
        }
        let header = seg.header();
        if new_data {
            self.on_new_ack(now, &header, ack);
        } else if ack == self.snd_una
            && seg.payload.is_empty()
            && !seg.flags.fin
            && !self.scoreboard.is_empty()
            && (u32::from(seg.window) << self.opts.snd_wscale) == old_wnd
        {
            // RFC 5681 §2 duplicate ACK.
            self.counters.dupacks += 1;
            self.recovery.dupacks += 1;
            self.on_dupack(now, sacked_new);
        }
        self.after_ack(now, &header)
    }

    /// The rest of the ACK processing once new data (if any) is taken as acknowledged: the
    /// send window, the states that wait for our FIN's ACK, the persist timer. Returns false
    /// when the segment must be dropped (the connection ended). Inlined: it runs for every
    /// segment with an ACK, the fast path's included.
    #[inline(always)]
    pub(super) fn after_ack(&mut self, now: Timestamp, seg: &SegmentHeader) -> bool {
        self.update_window(seg, false);
        // State transitions that depend on our FIN being acknowledged.
        let fin_acked =
            self.fin_queued && self.scoreboard.is_empty() && self.snd_una == self.sendbuf.end + 1;
        match self.state {
            State::FinWait1 if fin_acked => {
                self.state = State::FinWait2;
                if let Some(limit) = self.cfg.fin_wait2_timeout {
                    self.timers.set(Timer::FinWait2, now + limit);
                }
            }
            State::Closing if fin_acked => self.enter_time_wait(now),
            State::LastAck if fin_acked => {
                self.terminate(CloseReason::Normal);
                return false;
            }
            _ => {}
        }
        if self.scoreboard.is_empty()
            && self.snd_wnd == 0
            && self.has_unsent()
            && !self.timers.is_armed(Timer::Persist)
        {
            self.arm_persist(now);
        }
        true
    }

    /// Marks the SACK blocks of `seg` (RFC 2018 §3, honoured per RFC 6675); true if something
    /// new was SACKed.
    fn apply_sack(&mut self, seg: &TcpSegment<'_>) -> bool {
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
            any |= self.scoreboard.sack(lo, ro);
        }
        any
    }

    pub(super) fn on_new_ack(&mut self, now: Timestamp, seg: &SegmentHeader, ack: u64) {
        let acked = ack - self.snd_una;
        let mut any_rexmit = false;
        let ts_ecr = seg.timestamps.map(|t| t.1);
        let (ts, mut spurious) = (self.opts.ts, 0);
        // Handed out: the segments ever retransmitted.
        self.scoreboard.pop_acked(ack, |s| {
            any_rexmit = true;
            // Spurious when the ACK echoes a timestamp older than the retransmission.
            if let Some(ecr) = ts_ecr {
                if ts && (ecr.wrapping_sub(s.rexmit_ts) as i32) < 0 {
                    spurious += 1;
                }
            }
        });
        self.counters.spurious_retransmits += spurious;
        self.snd_una = ack;
        self.retries = 0;
        self.rtt.reset_backoff();
        // RTT (RFC 7323 §4.1 with timestamps; Karn's rule otherwise, RFC 6298 §3).
        if self.opts.ts {
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
        let data_events = self.data_events;
        let before = self.sendbuf.queued;
        self.marks.release(ack.min(self.sendbuf.end));
        self.sendbuf.release(ack.min(self.sendbuf.end), |id| {
            if data_events {
                events.push_back(Event::RecordAcked(id))
            }
        });
        if self.sendbuf.queued < before && data_events {
            self.events.push_back(Event::Writable);
        }
        self.on_ack_recovery(now, ack, acked);
        // RFC 6298 §5.2/5.3.
        if self.scoreboard.is_empty() {
            self.timers.stop(Timer::Rto);
        } else {
            self.timers.set(Timer::Rto, self.rtt.rto_deadline(now));
        }
    }
}
