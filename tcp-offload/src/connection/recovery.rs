//! Loss recovery: fast retransmit / fast recovery (RFC 5681 §3.2) with NewReno (RFC 6582) or
//! SACK (RFC 6675 NextSeg rules, RescueRxt), and RTO recovery (RFC 6298 §5, RFC 5681 §3.1).

use crate::time::Timestamp;

use crate::tx::RecordSource;

use super::rst::RstOut;
use super::state::{CloseReason, State};
use super::timers::Timer;
use super::Connection;

/// The state of loss recovery (RFC 5681 §3.2, RFC 6582, RFC 6675 §5).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct LossRecovery {
    /// Duplicate ACKs counted (RFC 5681 §2); without SACK, in recovery, less the segments
    /// partial ACKs covered (RFC 6582 §3.2 step 3).
    pub dupacks: u32,
    /// In fast recovery.
    pub active: bool,
    /// RFC 6675 RecoveryPoint: SND.NXT when this episode began; an ACK at or above it ends it.
    pub point: u64,
    /// RFC 6582 `recover`: no new episode for data sent before the last episode or RTO.
    pub recover: u64,
    /// RFC 6675 RescueRxt: the RecoveryPoint of the episode that made its rescue retransmission
    /// (`None`: undefined; reset on entering recovery so each episode has one).
    pub rescue_rxt: Option<u64>,
}

impl Connection {
    /// Octets in the network (RFC 6675 §4 "pipe"; without SACK, dupacks count as left segments).
    #[inline]
    pub(super) fn pipe(&self) -> u32 {
        let mut p = self.scoreboard.pipe();
        if !self.opts.sack && self.recovery.active {
            p = p.saturating_sub(u64::from(self.recovery.dupacks) * u64::from(self.emss()));
        }
        p.min(u64::from(u32::MAX)) as u32
    }

    /// RFC 6675 §4 IsLost, with DupThresh from the configuration and SMSS the EMSS.
    /// (Nothing SACKed marks nothing: the EMSS is not worked out for it.)
    pub(super) fn mark_lost(&mut self) {
        if self.scoreboard.sacked_octets() != 0 {
            let emss = self.emss();
            self.scoreboard.mark_lost(self.cfg.dupthresh, emss);
        }
    }

    /// New data acknowledged up to `ack` (`acked` octets): a full ACK ends fast recovery, a
    /// partial one marks the next hole lost; outside recovery congestion control grows; with
    /// SACK, IsLost is re-evaluated.
    pub(super) fn on_ack_recovery(&mut self, now: Timestamp, ack: u64, acked: u64) {
        if self.recovery.active {
            let flight = self.pipe();
            if ack >= self.recovery.point {
                // Full ACK: leave recovery (RFC 6582 §3.2 step 3, RFC 6675 §5).
                self.recovery.active = false;
                self.recovery.dupacks = 0;
                self.cc.on_recovery_end(flight);
            } else {
                // Partial ACK (RFC 6582 §3.2 step 3): the next hole is lost; retransmit it.
                if !self.opts.sack {
                    let segs = (acked / u64::from(self.emss()).max(1)) as u32;
                    self.recovery.dupacks = self.recovery.dupacks.saturating_sub(segs.max(1));
                }
                self.scoreboard.on_partial_ack();
            }
        } else {
            self.recovery.dupacks = 0;
            self.cc.on_ack(
                now,
                acked.min(u64::from(u32::MAX)) as u32,
                self.rtt.srtt_ns(),
            );
        }
        if self.opts.sack {
            self.mark_lost();
        }
    }

    /// A duplicate ACK (RFC 5681 §2), already counted: with SACK, IsLost is re-evaluated; fast
    /// recovery starts on DupThresh duplicates or when the oldest segment IsLost.
    pub(super) fn on_dupack(&mut self, _now: Timestamp, _sacked_new: bool) {
        if self.opts.sack {
            self.mark_lost();
        }
        if self.recovery.active {
            return;
        }
        let first_lost = self.opts.sack && self.scoreboard.front().is_some_and(|s| s.lost);
        // RFC 5681 §3.2 / RFC 6675 §5: enter on DupThresh dupacks or when IsLost(SND.UNA).
        if self.recovery.dupacks < self.cfg.dupthresh && !first_lost {
            return;
        }
        // RFC 6582 §3.2 step 2 / §4.1: not for data sent before the last recovery or RTO.
        if self.snd_una < self.recovery.recover {
            return;
        }
        self.recovery.active = true;
        self.counters.recoveries += 1;
        self.recovery.recover = self.snd_nxt;
        self.recovery.point = self.snd_nxt;
        self.recovery.rescue_rxt = None;
        let flight = (self.snd_nxt - self.snd_una).min(u64::from(u32::MAX)) as u32;
        let ss = self.cc.on_congestion_event(flight);
        self.cc.cwnd = ss;
        self.scoreboard.on_recovery_start();
    }

    /// The retransmission timer expired (RFC 6298 §5.4-5.7): the SYN is resent, or every
    /// segment not SACKed is deemed lost, with the congestion response of RFC 5681 §3.1; the
    /// connection times out after too many expiries.
    pub(super) fn on_rto(&mut self, now: Timestamp) {
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
            _ if !self.scoreboard.is_empty() => {
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
                self.recovery.active = false;
                self.recovery.dupacks = 0;
                self.recovery.recover = self.snd_nxt;
                self.scoreboard.on_rto();
                self.rtt_timed = None;
                self.rtt.back_off();
            }
            _ => {}
        }
        self.timers.set(Timer::Rto, self.rtt.rto_deadline(now));
    }

    /// RFC 6675 §4 NextSeg rule (1) (and the RTO / NewReno retransmissions): the first segment
    /// marked lost and not yet resent.
    pub(super) fn send_retransmission<S: RecordSource + ?Sized>(
        &mut self,
        now: Timestamp,
        buf: &mut [u8],
        source: &mut S,
    ) -> Option<usize> {
        let i = self.scoreboard.next_lost()?;
        let pipe = self.pipe();
        let s = self.scoreboard.get(i);
        let seg_total = s.len + u32::from(s.fin);
        // The first retransmission of a recovery episode is always allowed (RFC 5681 §3.2 step 2).
        let first = i == 0 && self.scoreboard.none_resent();
        if !first && pipe.saturating_add(seg_total) > self.cc.cwnd.max(self.emss()) && pipe > 0 {
            return None;
        }
        let n = self.resend(now, buf, source, i)?;
        self.scoreboard.resent_lost(i);
        if !self.recovery.active {
            self.counters.rto_retransmits += 1;
        }
        Some(n)
    }

    /// RFC 6675 §4 NextSeg rules (3) and (4), tried in loss recovery (§5 step C) when rule (1)
    /// found nothing lost to resend and rule (2) no new data to send. Whole original segments only
    /// (MPA-61), so "a segment of up to SMSS" is one original segment.
    pub(super) fn send_sack_extra<S: RecordSource + ?Sized>(
        &mut self,
        now: Timestamp,
        buf: &mut [u8],
        source: &mut S,
    ) -> Option<usize> {
        if !self.recovery.active
            || !self.opts.sack
            || self.scoreboard.sacked_octets() == 0
            || self.scoreboard.lost_pending() > 0
        {
            return None;
        }
        // §5 (C): only while cwnd - pipe >= 1 SMSS.
        if self.cc.cwnd.saturating_sub(self.pipe()) < self.emss() {
            return None;
        }
        // Rule (3): an unSACKed segment meeting (1.a) and (1.b) but not IsLost.
        if let Some(i) = self.scoreboard.next_unlost_below_sack() {
            let n = self.resend(now, buf, source, i)?;
            // HighRxt moves past it (§5 C.3); it is now in the network twice (pipe).
            self.scoreboard.resent_unlost(i);
            self.counters.sack_rule3_retransmits += 1;
            return Some(n);
        }
        // Rule (4): one rescue retransmission per episode, of the segment holding the highest
        // outstanding unSACKed octet, if HighACK > RescueRxt (or RescueRxt is undefined).
        if self.recovery.rescue_rxt.is_some_and(|r| self.snd_una <= r) {
            return None;
        }
        let i = self.scoreboard.rescue_candidate()?;
        let n = self.resend(now, buf, source, i)?;
        // HighRxt is not updated (§4 rule 4, §5 C.3), so `rexmit` stays clear and pipe unchanged.
        self.recovery.rescue_rxt = Some(self.recovery.point);
        self.counters.rescue_retransmits += 1;
        Some(n)
    }
}
