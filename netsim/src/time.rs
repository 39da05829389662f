//! Virtual time of a simulation: nanoseconds since the simulation started.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::{Duration, Instant};

/// A point in virtual time, in nanoseconds since the start of a simulation.
///
/// The simulation never reads a clock. Transports that take a `std::time::Instant` map a
/// `SimTime` onto one with [`SimTime::to_instant`] from a base the test picks once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(u64);

impl SimTime {
    /// The start of every simulation.
    pub const ZERO: SimTime = SimTime(0);
    /// The farthest representable point (about 584 years).
    pub const MAX: SimTime = SimTime(u64::MAX);

    /// `nanos` nanoseconds after the start.
    pub const fn from_nanos(nanos: u64) -> SimTime {
        SimTime(nanos)
    }

    /// `micros` microseconds after the start (saturating).
    pub const fn from_micros(micros: u64) -> SimTime {
        SimTime(micros.saturating_mul(1_000))
    }

    /// `millis` milliseconds after the start (saturating).
    pub const fn from_millis(millis: u64) -> SimTime {
        SimTime(millis.saturating_mul(1_000_000))
    }

    /// `secs` seconds after the start (saturating).
    pub const fn from_secs(secs: u64) -> SimTime {
        SimTime(secs.saturating_mul(1_000_000_000))
    }

    /// Nanoseconds since the start.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Whole microseconds since the start.
    pub const fn as_micros(self) -> u64 {
        self.0 / 1_000
    }

    /// Time since the start as a `Duration`.
    pub const fn since_start(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// `self - earlier`, or zero when `earlier` is later.
    pub fn saturating_since(self, earlier: SimTime) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// This point as an `Instant`, counting from `base` (the instant the simulation started).
    pub fn to_instant(self, base: Instant) -> Instant {
        base + self.since_start()
    }

    /// The point `instant` stands for when the simulation started at `base`; zero if earlier.
    pub fn from_instant(base: Instant, instant: Instant) -> SimTime {
        SimTime::ZERO + instant.saturating_duration_since(base)
    }
}

fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Add<Duration> for SimTime {
    type Output = SimTime;
    /// Saturates at [`SimTime::MAX`].
    fn add(self, rhs: Duration) -> SimTime {
        SimTime(self.0.saturating_add(duration_nanos(rhs)))
    }
}

impl AddAssign<Duration> for SimTime {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}

impl Sub<SimTime> for SimTime {
    type Output = Duration;
    /// Saturates at zero.
    fn sub(self, rhs: SimTime) -> Duration {
        self.saturating_since(rhs)
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:06}s",
            self.0 / 1_000_000_000,
            (self.0 % 1_000_000_000) / 1_000
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_trip() {
        assert_eq!(SimTime::from_millis(3).as_micros(), 3_000);
        assert_eq!(SimTime::from_secs(2).as_nanos(), 2_000_000_000);
        assert_eq!(
            SimTime::from_micros(7).since_start(),
            Duration::from_micros(7)
        );
        let base = Instant::now();
        let t = SimTime::from_millis(1234);
        assert_eq!(SimTime::from_instant(base, t.to_instant(base)), t);
    }

    #[test]
    fn arithmetic_saturates_instead_of_panicking() {
        assert_eq!(SimTime::MAX + Duration::from_secs(1), SimTime::MAX);
        assert_eq!(SimTime::ZERO - SimTime::from_secs(1), Duration::ZERO);
        assert_eq!(
            SimTime::from_secs(3) - SimTime::from_secs(1),
            Duration::from_secs(2)
        );
        let mut t = SimTime::ZERO;
        t += Duration::from_millis(5);
        assert_eq!(t, SimTime::from_millis(5));
    }

    #[test]
    fn display_shows_seconds_and_micros() {
        assert_eq!(SimTime::from_micros(1_500_001).to_string(), "1.500001s");
    }
}
