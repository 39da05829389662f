//! The connection's timers: RFC 6298 retransmission, delayed ACK (RFC 5681 §4.2), persist
//! (RFC 9293 §3.8.6.1) with its limit (RFC 6429), keepalive (RFC 1122 §4.2.3.6), the
//! FIN-WAIT-2 limit, TIME-WAIT and the FIN hold.

use crate::time::Timestamp;

use super::state::{CloseReason, State};
use super::Connection;

/// One of a connection's timers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Timer {
    /// Retransmission timer (RFC 6298 §5), also the SYN's.
    Rto,
    /// Delayed ACK (RFC 5681 §4.2; RFC 9293 §3.8.6.3), with the shorter delay for short segments
    /// when configured.
    DelayedAck,
    /// Persist timer: zero-window probes (RFC 9293 §3.8.6.1).
    Persist,
    /// Keepalive (RFC 1122 §4.2.3.6): idle time, then the probe interval.
    Keepalive,
    /// TIME-WAIT's 2*MSL (RFC 9293 §3.10.7.4).
    TimeWait,
    /// How long our FIN is held while the peer's data has holes (see `send_new_data`).
    FinHold,
    /// The longest FIN-WAIT-2 ([`crate::Config::fin_wait2_timeout`]).
    FinWait2,
}

impl Timer {
    const COUNT: usize = 7;

    /// The timers armed seldom (zero windows, closing): all but the RTO, the delayed ACK and
    /// keepalive, which most segments move.
    const SELDOM: [Timer; 4] = [
        Timer::Persist,
        Timer::TimeWait,
        Timer::FinHold,
        Timer::FinWait2,
    ];

    /// Whether this is one of [`Timer::SELDOM`].
    const fn is_seldom(self) -> bool {
        !matches!(self, Timer::Rto | Timer::DelayedAck | Timer::Keepalive)
    }
}

// Every timer is the RTO, the delayed ACK, keepalive or one of the seldom ones.
const _: () = {
    assert!(Timer::SELDOM.len() + 3 == Timer::COUNT);
    let mut i = 0;
    while i < Timer::SELDOM.len() {
        assert!(Timer::SELDOM[i].is_seldom());
        i += 1;
    }
};

/// The deadlines of a connection's timers: each [`Timer`] is stopped or armed for one instant.
/// Pure bookkeeping: what an expiry does is [`Connection::handle_timeout`]'s business. A
/// deadline is a plain `u64` of nanoseconds, `u64::MAX` for a stopped timer (no instant is that
/// late), so that the earliest one is a branch-free minimum. The earliest of the
/// [seldom armed](Timer::SELDOM) timers is kept apart, updated whenever one of them changes:
/// the earliest of all is then a minimum of four integers, not seven.
#[derive(Clone, Copy, Debug)]
pub(super) struct Timers {
    deadline: [u64; Timer::COUNT],
    /// The earliest deadline of [`Timer::SELDOM`] ([`STOPPED`] when none is armed).
    seldom: u64,
}

/// A stopped timer's deadline.
const STOPPED: u64 = u64::MAX;

impl Default for Timers {
    fn default() -> Self {
        Timers {
            deadline: [STOPPED; Timer::COUNT],
            seldom: STOPPED,
        }
    }
}

/// `cfg`'s keepalive idle time in nanoseconds; [`STOPPED`] with keepalive off. An idle time that
/// saturates to [`STOPPED`] arms the keepalive timer for never, the same as keepalive off.
pub(super) fn keepalive_idle_ns(cfg: &crate::config::Config) -> u64 {
    cfg.keepalive
        .map_or(STOPPED, |ka| crate::time::nanos(ka.idle))
}

/// `at` as a deadline (the latest instant stands for never, as a stopped timer).
fn armed(at: Timestamp) -> u64 {
    at.as_nanos()
}

fn instant(d: u64) -> Option<Timestamp> {
    (d != STOPPED).then_some(Timestamp::from_nanos(d))
}

impl Timers {
    /// The earliest deadline of [`Timer::SELDOM`], from the deadlines.
    fn seldom_of(&self) -> u64 {
        Timer::SELDOM
            .iter()
            .fold(STOPPED, |m, &t| m.min(self.deadline[t as usize]))
    }

    /// Sets `t`'s deadline to `d`, keeping [`Timers::seldom`] up to date.
    #[inline(always)]
    fn put(&mut self, t: Timer, d: u64) {
        self.deadline[t as usize] = d;
        if t.is_seldom() {
            self.seldom = self.seldom_of();
        }
    }

    /// The deadline of `t`, if armed.
    #[cfg(test)]
    pub fn get(&self, t: Timer) -> Option<Timestamp> {
        instant(self.deadline[t as usize])
    }

    /// True if `t` is armed.
    pub fn is_armed(&self, t: Timer) -> bool {
        self.deadline[t as usize] != STOPPED
    }

    /// Arms (or re-arms) `t` for `at`.
    #[inline]
    pub fn set(&mut self, t: Timer, at: Timestamp) {
        self.put(t, armed(at));
    }

    /// Arms `t` for `at` unless it is armed for an earlier instant.
    #[inline]
    pub fn set_earlier(&mut self, t: Timer, at: Timestamp) {
        let d = self.deadline[t as usize].min(armed(at));
        self.deadline[t as usize] = d;
        if t.is_seldom() {
            // (A deadline that only comes earlier.)
            self.seldom = self.seldom.min(d);
        }
    }

    /// The deadline of `t`, arming it for `at` first if it is stopped.
    pub fn get_or_set(&mut self, t: Timer, at: Timestamp) -> Timestamp {
        if !self.is_armed(t) {
            self.set(t, at);
        }
        Timestamp::from_nanos(self.deadline[t as usize])
    }

    /// Stops `t`.
    #[inline]
    pub fn stop(&mut self, t: Timer) {
        // (A seldom timer is mostly stopped already: nothing to update then.)
        if !t.is_seldom() || self.deadline[t as usize] != STOPPED {
            self.put(t, STOPPED);
        }
    }

    /// The earliest of the deadlines of the RTO, keepalive and [`Timer::SELDOM`].
    #[inline(always)]
    fn next_but_ack(&self) -> u64 {
        debug_assert_eq!(
            self.seldom,
            self.seldom_of(),
            "seldom timers' minimum is stale"
        );
        let d = |t: Timer| self.deadline[t as usize];
        d(Timer::Rto).min(d(Timer::Keepalive)).min(self.seldom)
    }

    /// The earliest deadline of all armed timers.
    pub fn next(&self) -> Option<Timestamp> {
        instant(
            self.next_but_ack()
                .min(self.deadline[Timer::DelayedAck as usize]),
        )
    }

    /// The earliest deadline of the armed timers but `t`.
    #[inline]
    pub fn next_but(&self, t: Timer) -> Option<Timestamp> {
        if t == Timer::DelayedAck {
            return instant(self.next_but_ack());
        }
        let skip = t as usize;
        let next = self
            .deadline
            .iter()
            .enumerate()
            .fold(STOPPED, |m, (i, &d)| if i == skip { m } else { m.min(d) });
        instant(next)
    }

    /// The deadline of `t`, if armed.
    pub fn deadline_of(&self, t: Timer) -> Option<Timestamp> {
        instant(self.deadline[t as usize])
    }

    /// The timers armed for `now` or earlier, one bit each (`1 << t as u8`), in one pass
    /// over the deadlines.
    pub fn due(&self, now: Timestamp) -> u8 {
        // (A stopped timer's `u64::MAX` is later than any `now` but the last instant.)
        let now = now.as_nanos().min(STOPPED - 1);
        debug_assert_eq!(
            self.seldom,
            self.seldom_of(),
            "seldom timers' minimum is stale"
        );
        let bit = |t: Timer| u8::from(self.deadline[t as usize] <= now) << t as u8;
        let mut due = bit(Timer::Rto) | bit(Timer::DelayedAck) | bit(Timer::Keepalive);
        if self.seldom <= now {
            due |= Timer::SELDOM.iter().fold(0, |m, &t| m | bit(t));
        }
        due
    }

    /// True if `t` is armed for `now` or earlier; it is then stopped (it fires once).
    #[inline]
    pub fn expired(&mut self, t: Timer, now: Timestamp) -> bool {
        let d = self.deadline[t as usize];
        if d <= now.as_nanos() && d != STOPPED {
            self.put(t, STOPPED);
            true
        } else {
            false
        }
    }
}

impl Connection {
    /// The earliest time `handle_timeout` must be called.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        self.timers.next()
    }

    /// The delayed ACK's deadline, if it is armed: a timer armed anew after most segments
    /// received, which a caller may keep apart from the others ([`Self::poll_timeout_but_ack`]).
    pub fn delayed_ack_deadline(&self) -> Option<Timestamp> {
        self.timers.deadline_of(Timer::DelayedAck)
    }

    /// The earliest deadline of the timers but the delayed ACK: with
    /// [`Self::delayed_ack_deadline`], what [`Self::poll_timeout`] says.
    pub fn poll_timeout_but_ack(&self) -> Option<Timestamp> {
        self.timers.next_but(Timer::DelayedAck)
    }

    /// Runs every timer that expired at `now`: one pass over the deadlines finds them, and
    /// nothing more is done when none did (a caller need not check `poll_timeout` first).
    pub fn handle_timeout(&mut self, now: Timestamp) {
        let due = self.timers.due(now);
        if due == 0 {
            return;
        }
        // Each timer found due is checked (and stopped) in the order below, as each check
        // would find it: an expiry's action arms no later timer for `now` or earlier (the
        // RTO re-arms only itself, a timeout ends the connection), so the timers not in
        // `due` stay not due.
        let expired =
            |c: &mut Self, t: Timer| due & (1 << t as u8) != 0 && c.timers.expired(t, now);
        if expired(self, Timer::FinHold) {
            self.fin_hold_over = true;
        }
        if expired(self, Timer::TimeWait) {
            self.terminate(CloseReason::Normal);
            return;
        }
        if expired(self, Timer::FinWait2) && self.state == State::FinWait2 {
            // The peer acknowledged our FIN and never sent its own: reset (as Linux does for
            // an orphaned connection at tcp_fin_timeout).
            self.counters.fin_wait2_timeouts += 1;
            self.abort_with(CloseReason::TimedOut);
            return;
        }
        if expired(self, Timer::Rto) {
            self.on_rto(now);
        }
        if expired(self, Timer::DelayedAck) {
            self.on_delayed_ack();
        }
        // The timer stops when it fires; it is re-armed only while the window stays shut.
        if expired(self, Timer::Persist)
            && self.snd_wnd == 0
            && self.scoreboard.is_empty()
            && self.has_unsent()
        {
            if self
                .cfg
                .persist_limit
                .zip(self.persist_since)
                .is_some_and(|(limit, since)| now.saturating_duration_since(since) >= limit)
            {
                // RFC 6429: the window stayed shut too long; reclaim the connection.
                self.counters.persist_timeouts += 1;
                self.abort_with(CloseReason::TimedOut);
                return;
            }
            // RFC 9293 §3.8.6.1: probe the zero window; back off like the RTO.
            self.probe_due = true;
            self.counters.window_probes += 1;
            self.persist_backoff = self.persist_backoff.saturating_add(1);
            self.arm_persist(now);
        }
        if expired(self, Timer::Keepalive) {
            if let Some(ka) = self.cfg.keepalive {
                if self.keepalive_sent >= ka.probes {
                    self.counters.keepalive_timeouts += 1;
                    self.terminate(CloseReason::TimedOut);
                    return;
                }
                if self.state.is_synchronized() && self.scoreboard.is_empty() {
                    self.probe_due = true;
                    self.keepalive_sent += 1;
                    self.counters.keepalives += 1;
                }
                self.timers.set(Timer::Keepalive, now + ka.interval);
            }
        }
    }

    /// [`Self::handle_timeout`] for a caller that knows the delayed ACK is due at `now`
    /// ([`Self::delayed_ack_deadline`]): when no other timer is due, only the delayed ACK's
    /// expiry runs (what `handle_timeout` would do then), without the pass over the others.
    pub fn handle_delayed_ack_timeout(&mut self, now: Timestamp) {
        if self.poll_timeout_but_ack().is_some_and(|d| d <= now) {
            self.handle_timeout(now);
        } else if self.timers.expired(Timer::DelayedAck, now) {
            self.on_delayed_ack();
        }
    }

    /// The delayed ACK's expiry: the ACK it held back goes out with the next transmit.
    fn on_delayed_ack(&mut self) {
        if self.ack_pending {
            self.ack_now = true;
            self.counters.delayed_acks += 1;
        }
    }

    /// RFC 6298 §5.1: start the timer when a segment is sent and it is not running.
    pub(super) fn arm_rto_if_idle(&mut self, now: Timestamp) {
        if !self.timers.is_armed(Timer::Rto) {
            self.timers.set(Timer::Rto, self.rtt.rto_deadline(now));
        }
    }

    /// Restarts the keepalive idle period (RFC 1122 §4.2.3.6) from `now`, if keepalive is on.
    pub(super) fn arm_keepalive(&mut self, now: Timestamp) {
        debug_assert_eq!(
            self.keepalive_idle_ns,
            keepalive_idle_ns(&self.cfg),
            "cached keepalive idle time is stale"
        );
        if self.keepalive_idle_ns != STOPPED {
            self.keepalive_sent = 0;
            self.timers.set(
                Timer::Keepalive,
                Timestamp::from_nanos(now.as_nanos().saturating_add(self.keepalive_idle_ns)),
            );
        }
    }

    /// Arms the persist timer; the first arming of a zero-window stretch starts the clock of
    /// [`crate::Config::persist_limit`].
    pub(super) fn arm_persist(&mut self, now: Timestamp) {
        self.persist_since.get_or_insert(now);
        let d = self
            .rtt
            .rto()
            .saturating_mul(1 << self.persist_backoff.min(6))
            .min(self.cfg.rto_max);
        self.timers.set(Timer::Persist, now + d);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn next_is_the_earliest_armed_deadline() {
        let t0 = Timestamp::ZERO;
        let mut t = Timers::default();
        assert_eq!(t.next(), None);
        t.set(Timer::Keepalive, t0 + Duration::from_secs(7200));
        t.set(Timer::Rto, t0 + Duration::from_secs(1));
        assert_eq!(t.next(), Some(t0 + Duration::from_secs(1)));
        t.stop(Timer::Rto);
        assert_eq!(t.next(), Some(t0 + Duration::from_secs(7200)));
    }

    #[test]
    fn expired_fires_once_and_only_when_due() {
        let t0 = Timestamp::ZERO;
        let mut t = Timers::default();
        t.set(Timer::DelayedAck, t0 + Duration::from_millis(40));
        assert!(!t.expired(Timer::DelayedAck, t0));
        assert!(!t.expired(Timer::Rto, t0 + Duration::from_secs(9)));
        assert!(t.expired(Timer::DelayedAck, t0 + Duration::from_millis(40)));
        assert!(!t.is_armed(Timer::DelayedAck));
        assert!(!t.expired(Timer::DelayedAck, t0 + Duration::from_secs(1)));
    }

    /// Every timer, in the order of their numbers.
    const ALL_TIMERS: [Timer; Timer::COUNT] = [
        Timer::Rto,
        Timer::DelayedAck,
        Timer::Persist,
        Timer::Keepalive,
        Timer::TimeWait,
        Timer::FinHold,
        Timer::FinWait2,
    ];

    /// `due` names exactly the timers `expired` would fire at `now`, stopped ones never.
    #[test]
    fn due_is_the_set_of_timers_expired_would_fire() {
        use proptest::prelude::*;
        let all = ALL_TIMERS;
        let deadline = prop_oneof![Just(None), (0u64..100).prop_map(Some)];
        let now = prop_oneof![0u64..100, Just(u64::MAX)];
        proptest!(|(ds in proptest::collection::vec(deadline, Timer::COUNT), now in now)| {
            let mut t = Timers::default();
            for (&timer, d) in all.iter().zip(&ds) {
                if let Some(d) = d {
                    t.set(timer, Timestamp::from_nanos(*d));
                }
            }
            let now = Timestamp::from_nanos(now);
            let due = t.due(now);
            for timer in all {
                let bit = due & (1 << timer as u8) != 0;
                prop_assert_eq!(bit, t.clone().expired(timer, now));
            }
        });
    }

    /// After any run of arming, stopping and expiries, the earliest deadlines (all, all but the
    /// delayed ACK) and the due set are those of the seven deadlines themselves.
    #[test]
    fn the_seldom_minimum_follows_every_change() {
        use proptest::prelude::*;
        let all = ALL_TIMERS;
        let op = (0u8..4, 0usize..Timer::COUNT, 0u64..100);
        proptest!(|(ops in proptest::collection::vec(op, 0..40), now in 0u64..100)| {
            let mut t = Timers::default();
            for (kind, i, at) in ops {
                let (timer, at) = (all[i], Timestamp::from_nanos(at));
                match kind {
                    0 => t.set(timer, at),
                    1 => t.set_earlier(timer, at),
                    2 => t.stop(timer),
                    _ => {
                        t.expired(timer, at);
                    }
                }
            }
            let fold = |skip: Option<Timer>| {
                let m = all
                    .iter()
                    .filter(|&&x| Some(x) != skip)
                    .fold(STOPPED, |m, &x| m.min(t.deadline[x as usize]));
                instant(m)
            };
            prop_assert_eq!(t.seldom, t.seldom_of());
            prop_assert_eq!(t.next(), fold(None));
            for skip in all {
                prop_assert_eq!(t.next_but(skip), fold(Some(skip)));
            }
            let now = Timestamp::from_nanos(now);
            let due = all.iter().fold(0u8, |m, &x| {
                m | (u8::from(t.clone().expired(x, now)) << x as u8)
            });
            prop_assert_eq!(t.due(now), due);
        });
    }

    #[test]
    fn set_earlier_and_get_or_set_keep_an_armed_deadline() {
        let t0 = Timestamp::ZERO;
        let (early, late) = (
            t0 + Duration::from_millis(5),
            t0 + Duration::from_millis(40),
        );
        let mut t = Timers::default();
        t.set_earlier(Timer::DelayedAck, late);
        t.set_earlier(Timer::DelayedAck, early);
        t.set_earlier(Timer::DelayedAck, late);
        assert_eq!(t.get(Timer::DelayedAck), Some(early));
        assert_eq!(t.get_or_set(Timer::FinHold, late), late);
        assert_eq!(t.get_or_set(Timer::FinHold, early), late);
    }
}
