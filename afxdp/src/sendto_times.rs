//! The time this process spends in the transmit ring's `sendto` kicks, for latency work.
//! Counted with the `sendto-times` feature only (`dataplane`'s `stage-times` turns it on):
//! without it no clock is read and [`sendto_times`] reports nothing.
//!
//! Counts are process-wide (relaxed atomics), over every queue.

/// The kicks timed so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendtoTimes {
    /// `sendto` calls timed.
    pub kicks: u64,
    /// Their summed duration, in nanoseconds.
    pub total_ns: u64,
}

/// The kicks timed so far (all zero without the `sendto-times` feature).
pub fn sendto_times() -> SendtoTimes {
    #[cfg(feature = "sendto-times")]
    return on::read();
    #[cfg(not(feature = "sendto-times"))]
    SendtoTimes::default()
}

/// Runs `kick` (one `sendto`), timing it with the feature.
#[inline(always)]
pub(crate) fn timed(kick: impl FnOnce()) {
    #[cfg(feature = "sendto-times")]
    {
        let t = std::time::Instant::now();
        kick();
        on::add(t.elapsed());
    }
    #[cfg(not(feature = "sendto-times"))]
    kick();
}

#[cfg(feature = "sendto-times")]
mod on {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use std::time::Duration;

    static KICKS: AtomicU64 = AtomicU64::new(0);
    static TOTAL_NS: AtomicU64 = AtomicU64::new(0);

    pub(super) fn add(d: Duration) {
        TOTAL_NS.fetch_add(d.as_nanos() as u64, Relaxed);
        KICKS.fetch_add(1, Relaxed);
    }

    pub(super) fn read() -> super::SendtoTimes {
        super::SendtoTimes {
            kicks: KICKS.load(Relaxed),
            total_ns: TOTAL_NS.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(not(feature = "sendto-times"))]
    #[test]
    fn without_the_feature_the_kick_runs_and_nothing_is_counted() {
        let mut ran = false;
        timed(|| ran = true);
        assert!(ran);
        assert_eq!(sendto_times(), SendtoTimes::default());
    }

    /// Counts are process-wide, so other tests kicking at the same time may add to them: the
    /// check is a lower bound.
    #[cfg(feature = "sendto-times")]
    #[test]
    fn with_the_feature_each_kick_is_counted() {
        let before = sendto_times();
        timed(|| std::thread::sleep(std::time::Duration::from_millis(1)));
        let after = sendto_times();
        assert!(after.kicks > before.kicks);
        assert!(after.total_ns >= before.total_ns + 1_000_000);
    }
}
