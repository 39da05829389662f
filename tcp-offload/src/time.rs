//! [`Timestamp`]: a point in time as whole nanoseconds since an epoch the caller fixes (an
//! endpoint takes the instant it was made). TCP reads no clock; every time it is given is a
//! `Timestamp`, and its deadlines are `Timestamp`s too. A `Timestamp` is one `u64`: adding a
//! [`Duration`], comparing and subtracting are single integer operations, where
//! `std::time::Instant` is two words with checked arithmetic. A `u64` of nanoseconds spans
//! 584 years; the arithmetic saturates rather than wraps.

use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::time::{Duration, Instant};

/// A point in time: nanoseconds since the caller's epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(u64);

/// `d` in whole nanoseconds, saturating.
#[inline]
pub fn nanos(d: Duration) -> u64 {
    d.as_secs()
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::from(d.subsec_nanos()))
}

impl Timestamp {
    /// The epoch itself.
    pub const ZERO: Timestamp = Timestamp(0);

    /// The point `n` nanoseconds after the epoch.
    pub const fn from_nanos(n: u64) -> Self {
        Timestamp(n)
    }

    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// `instant` counted from `epoch` (the epoch itself for an instant before it).
    pub fn since(epoch: Instant, instant: Instant) -> Self {
        Timestamp(nanos(instant.saturating_duration_since(epoch)))
    }

    /// This point as an `Instant`, counting from `epoch`.
    pub fn to_instant(self, epoch: Instant) -> Instant {
        epoch + Duration::from_nanos(self.0)
    }

    /// The time from `earlier` to `self`; zero if `earlier` is later.
    #[inline]
    pub fn saturating_duration_since(self, earlier: Timestamp) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// The time from `earlier` to `self`, if `earlier` is not later.
    #[inline]
    pub fn checked_duration_since(self, earlier: Timestamp) -> Option<Duration> {
        self.0.checked_sub(earlier.0).map(Duration::from_nanos)
    }

    /// Nanoseconds from `earlier` to `self`; zero if `earlier` is later.
    #[inline]
    pub fn nanos_since(self, earlier: Timestamp) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

impl Add<Duration> for Timestamp {
    type Output = Timestamp;

    #[inline]
    fn add(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_add(nanos(d)))
    }
}

impl AddAssign<Duration> for Timestamp {
    #[inline]
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Duration> for Timestamp {
    type Output = Timestamp;

    /// Saturates at the epoch.
    #[inline]
    fn sub(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_sub(nanos(d)))
    }
}

impl SubAssign<Duration> for Timestamp {
    /// Saturates at the epoch.
    #[inline]
    fn sub_assign(&mut self, d: Duration) {
        *self = *self - d;
    }
}

impl Sub<Timestamp> for Timestamp {
    type Output = Duration;

    /// As [`Timestamp::saturating_duration_since`].
    #[inline]
    fn sub(self, earlier: Timestamp) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_matches_instant_and_saturates() {
        let epoch = Instant::now();
        let d = Duration::new(3, 250_000_007);
        let i = epoch + d;
        let t = Timestamp::since(epoch, i);
        assert_eq!(t.as_nanos(), 3_250_000_007);
        assert_eq!(t.to_instant(epoch), i);
        assert_eq!((t + d) - t, d);
        assert_eq!(t.saturating_duration_since(t + d), Duration::ZERO);
        assert_eq!(t.checked_duration_since(t + d), None);
        assert_eq!(Timestamp::ZERO - d, Timestamp::ZERO);
        assert_eq!(Timestamp::since(i, epoch), Timestamp::ZERO);
        assert_eq!(
            Timestamp::from_nanos(u64::MAX) + d,
            Timestamp::from_nanos(u64::MAX)
        );
        assert_eq!(nanos(Duration::MAX), u64::MAX);
        let mut u = t;
        u += Duration::from_nanos(1);
        assert!(u > t);
    }
}
