//! The endpoint's clock: the `Instant`s its callers pass, as the [`Timestamp`]s TCP and the
//! timer wheel count in (nanoseconds since the instant the endpoint was made). An `Instant` is
//! turned into a `Timestamp` once per call that drives the endpoint, and back only where a
//! deadline leaves it ([`crate::Endpoint::poll_timeout`]).
//!
//! The conversion reads an `Instant`'s seconds and nanoseconds through its `Hash` (a few
//! inlined stores) instead of `Instant::duration_since` (a library call with checked
//! arithmetic, several times dearer). That reading is checked against `duration_since` when
//! the clock is made, and the clock converts the library's way when it fails (an `Instant`
//! that hashes otherwise) or when the difference does not fit in the fast arithmetic.

use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use tcp_offload::Timestamp;

/// The seconds and nanoseconds an `Instant` feeds its hasher (a signed 64-bit count of
/// seconds, then a 32-bit count of nanoseconds, on the platforms that keep an `Instant` as a
/// `timespec`); `None` when it feeds anything else.
#[derive(Default)]
struct InstantParts {
    secs: i64,
    nanos: u32,
    /// Writes seen: 1 after the seconds, 2 after the nanoseconds; `u8::MAX` once a write
    /// did not fit that order.
    writes: u8,
}

impl Hasher for InstantParts {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, _: &[u8]) {
        self.writes = u8::MAX;
    }
    fn write_i64(&mut self, x: i64) {
        self.secs = x;
        self.writes = if self.writes == 0 { 1 } else { u8::MAX };
    }
    fn write_u32(&mut self, x: u32) {
        self.nanos = x;
        self.writes = if self.writes == 1 { 2 } else { u8::MAX };
    }
}

/// `t`'s seconds and nanoseconds, as its `Hash` gives them.
#[inline]
fn parts(t: Instant) -> Option<(i64, u32)> {
    let mut p = InstantParts::default();
    t.hash(&mut p);
    (p.writes == 2).then_some((p.secs, p.nanos))
}

/// The epoch and the last time the endpoint was driven at, in both forms.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    epoch: Instant,
    /// The epoch's seconds and nanoseconds ([`parts`]), when reading them was found exact.
    epoch_parts: Option<(i64, u32)>,
    /// The last `now` the endpoint was driven at.
    pub last: Instant,
    /// `last` as a `Timestamp`.
    pub stamp: Timestamp,
}

impl Clock {
    /// A clock whose epoch is `epoch`.
    pub fn new(epoch: Instant) -> Self {
        // The reading is used only if it agrees with the library's difference.
        let probe = Duration::new(1, 500_000_001);
        let epoch_parts = parts(epoch).filter(|&(s, n)| {
            epoch
                .checked_add(probe)
                .and_then(parts)
                .is_some_and(|(s2, n2)| {
                    s2.wrapping_sub(s) == 1 && i64::from(n2) - i64::from(n) == 500_000_001
                        || s2.wrapping_sub(s) == 2 && i64::from(n2) - i64::from(n) == -499_999_999
                })
        });
        Clock {
            epoch,
            epoch_parts,
            last: epoch,
            stamp: Timestamp::ZERO,
        }
    }

    /// Moves the clock to `now` and returns it as a `Timestamp` (a compare when `now` is the
    /// last time again, as for every frame of one receive batch).
    #[inline]
    pub fn set(&mut self, now: Instant) -> Timestamp {
        if now != self.last {
            self.last = now;
            self.stamp = self.stamp_of(now);
        }
        self.stamp
    }

    /// `t` as a `Timestamp` (the epoch for an earlier instant), without moving the clock:
    /// `Timestamp::since(epoch, t)`, in a few integer operations when the parts can be read.
    #[inline]
    pub fn stamp_of(&self, t: Instant) -> Timestamp {
        let fast = self
            .epoch_parts
            .zip(parts(t))
            .and_then(|((es, en), (s, n))| {
                s.checked_sub(es)?
                    .checked_mul(1_000_000_000)?
                    .checked_add(i64::from(n) - i64::from(en))
            });
        let stamp = match fast {
            Some(ns) => Timestamp::from_nanos(ns.max(0) as u64),
            None => Timestamp::since(self.epoch, t),
        };
        debug_assert_eq!(stamp, Timestamp::since(self.epoch, t));
        stamp
    }

    /// `t` as an `Instant`.
    pub fn instant(&self, t: Timestamp) -> Instant {
        t.to_instant(self.epoch)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// The seconds and nanoseconds read through `Hash` give `Timestamp::since`'s stamps, across
    /// second boundaries and before the epoch; the reading is in use where `Instant` is a
    /// `timespec`.
    #[test]
    fn the_read_parts_give_the_librarys_stamps() {
        let epoch = Instant::now();
        let c = Clock::new(epoch);
        #[cfg(target_os = "linux")]
        assert!(c.epoch_parts.is_some());
        let mut ns = 1u64;
        while ns < 1 << 50 {
            for d in [ns - 1, ns, ns + 999_999_999, ns * 7 + 123] {
                let d = Duration::from_nanos(d);
                let later = epoch + d;
                assert_eq!(c.stamp_of(later), Timestamp::since(epoch, later));
                assert_eq!(c.stamp_of(later).as_nanos(), nanos_of(d));
                if let Some(earlier) = epoch.checked_sub(d) {
                    assert_eq!(c.stamp_of(earlier), Timestamp::ZERO);
                }
            }
            ns *= 3;
        }
    }

    fn nanos_of(d: Duration) -> u64 {
        d.as_nanos() as u64
    }

    /// A deadline passes through the clock both ways unchanged to the nanosecond, so the
    /// instants `poll_timeout` reports are the ones TCP computed.
    #[test]
    fn instants_and_stamps_round_trip_exactly() {
        let epoch = Instant::now();
        let mut c = Clock::new(epoch);
        let later = epoch + Duration::new(7, 123_456_789);
        let t = c.set(later);
        assert_eq!(t.as_nanos(), 7_123_456_789);
        assert_eq!((c.last, c.stamp), (later, t));
        assert_eq!(
            c.instant(t + Duration::from_millis(200)),
            later + Duration::from_millis(200)
        );
        assert_eq!(c.stamp_of(epoch), Timestamp::ZERO);
        // An instant before the epoch counts as the epoch.
        assert_eq!(c.stamp_of(epoch - Duration::from_secs(1)), Timestamp::ZERO);
        // Far from the epoch, either way.
        let far = Duration::from_secs(400 * 365 * 86_400);
        assert_eq!(
            c.stamp_of(epoch + far).as_nanos(),
            400 * 365 * 86_400 * 1_000_000_000
        );
        if let Some(before) = epoch.checked_sub(far) {
            assert_eq!(c.stamp_of(before), Timestamp::ZERO);
        }
        // The clock moves with `now`, backwards too.
        assert_eq!(
            c.set(epoch + Duration::from_secs(1)).as_nanos(),
            1_000_000_000
        );
    }
}
