//! The endpoint's clock: the `Instant`s its callers pass, as the [`Timestamp`]s TCP and the
//! timer wheel count in (nanoseconds since the instant the endpoint was made). An `Instant` is
//! turned into a `Timestamp` once per call that drives the endpoint, and back only where a
//! deadline leaves it ([`crate::Endpoint::poll_timeout`]).

use std::time::Instant;

use tcp_offload::Timestamp;

/// The epoch and the last time the endpoint was driven at, in both forms.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    epoch: Instant,
    /// The last `now` the endpoint was driven at.
    pub last: Instant,
    /// `last` as a `Timestamp`.
    pub stamp: Timestamp,
}

impl Clock {
    /// A clock whose epoch is `epoch`.
    pub fn new(epoch: Instant) -> Self {
        Clock {
            epoch,
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
            self.stamp = Timestamp::since(self.epoch, now);
        }
        self.stamp
    }

    /// `t` as a `Timestamp` (the epoch for an earlier instant), without moving the clock.
    pub fn stamp_of(&self, t: Instant) -> Timestamp {
        Timestamp::since(self.epoch, t)
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
        // The clock moves with `now`, backwards too.
        assert_eq!(
            c.set(epoch + Duration::from_secs(1)).as_nanos(),
            1_000_000_000
        );
    }
}
