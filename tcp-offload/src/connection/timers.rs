//! The connection's timers: RFC 6298 retransmission, delayed ACK (RFC 5681 §4.2), persist
//! (RFC 9293 §3.8.6.1), keepalive (RFC 1122 §4.2.3.6), TIME-WAIT and the FIN hold.

use std::time::Instant;

use super::state::CloseReason;
use super::Connection;

impl Connection {
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
    pub(super) fn arm_rto_if_idle(&mut self, now: Instant) {
        if self.rto_at.is_none() {
            self.rto_at = Some(now + self.rtt.rto());
        }
    }

    pub(super) fn arm_keepalive(&mut self, now: Instant) {
        if let Some(ka) = self.cfg.keepalive {
            self.keepalive_sent = 0;
            self.keepalive_at = Some(now + ka.idle);
        }
    }

    pub(super) fn arm_persist(&mut self, now: Instant) {
        let d = self
            .rtt
            .rto()
            .saturating_mul(1 << self.persist_backoff.min(6))
            .min(self.cfg.rto_max);
        self.persist_at = Some(now + d);
    }
}
