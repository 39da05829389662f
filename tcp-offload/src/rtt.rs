//! Retransmission timeout per RFC 6298: SRTT/RTTVAR smoothing, clock granularity, bounds and
//! exponential backoff.

use std::time::Duration;

use crate::time::Timestamp;

/// The RTO estimator of one connection.
#[derive(Clone, Copy, Debug)]
pub struct RttEstimator {
    /// SRTT and RTTVAR in nanoseconds (a u64 holds 584 years): the smoothing is shifts and
    /// adds, where `Duration`'s divisions cost a hundred instructions per ACK.
    srtt_ns: Option<u64>,
    rttvar_ns: u64,
    /// The RTO before backoff, in nanoseconds (as are the bounds and the latest sample: a
    /// deadline is a `Timestamp` plus nanoseconds, with no `Duration` in between).
    rto_ns: u64,
    backoff: u32,
    min_ns: u64,
    max_ns: u64,
    /// Latest sample.
    latest_ns: Option<u64>,
}

/// Clock granularity G of RFC 6298 §2 in nanoseconds (our timestamp clock ticks in
/// milliseconds).
const G_NS: u64 = 1_000_000;

/// Below this, SRTT, RTTVAR and a sample (36 years) smooth without saturating: 7 * SRTT + R'
/// and SRTT + 4 * RTTVAR stay under 2^63.
const EXACT: u64 = 1 << 60;

/// `d` in nanoseconds, saturating.
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl RttEstimator {
    /// RFC 6298 §2.1: before any sample RTO = initial.
    pub fn new(initial: Duration, min: Duration, max: Duration) -> Self {
        RttEstimator {
            srtt_ns: None,
            rttvar_ns: 0,
            rto_ns: nanos(initial).min(nanos(max)),
            backoff: 0,
            min_ns: nanos(min),
            max_ns: nanos(max),
            latest_ns: None,
        }
    }

    /// Feeds one RTT sample (RFC 6298 §2.2, §2.3); resets the backoff.
    pub fn on_sample(&mut self, r: Duration) {
        self.on_sample_ns(nanos(r));
    }

    /// [`RttEstimator::on_sample`] of a sample in nanoseconds (a timestamp echo's, counted
    /// without `Duration` arithmetic).
    #[inline]
    pub fn on_sample_ns(&mut self, r: u64) {
        self.latest_ns = Some(r);
        self.backoff = 0;
        // A sample equal to SRTT with RTTVAR at zero leaves both, and so the RTO, as they are
        // (the steady state of a path whose samples are all the 500 us floor; below u64::MAX / 8
        // the smoothing's products do not saturate).
        if self.srtt_ns != Some(r) || self.rttvar_ns != 0 || r > u64::MAX / 8 {
            self.smooth(r);
        }
    }

    /// SRTT, RTTVAR and the RTO after sample `r` (nanoseconds): plain arithmetic below
    /// [`EXACT`] (every sample but the first, in practice), else [`Self::smooth_saturating`]
    /// (the same values where nothing saturates).
    #[inline(always)]
    fn smooth(&mut self, r: u64) {
        match self.srtt_ns {
            Some(s) if (s | r | self.rttvar_ns) < EXACT => {
                let delta = s.abs_diff(r);
                self.rttvar_ns = (self.rttvar_ns * 3 + delta) / 4;
                let srtt = (s * 7 + r) / 8;
                self.srtt_ns = Some(srtt);
                let rto = srtt + G_NS.max(self.rttvar_ns * 4);
                self.rto_ns = rto.clamp(self.min_ns, self.max_ns);
            }
            _ => self.smooth_saturating(r),
        }
    }

    /// [`Self::smooth`] of any values (the first sample's included), saturating.
    #[inline(never)]
    fn smooth_saturating(&mut self, r: u64) {
        let srtt = match self.srtt_ns {
            None => {
                self.rttvar_ns = r / 2;
                r
            }
            Some(s) => {
                // RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R'|, then SRTT = 7/8 SRTT + 1/8 R'.
                let delta = s.abs_diff(r);
                self.rttvar_ns = self.rttvar_ns.saturating_mul(3).saturating_add(delta) / 4;
                s.saturating_mul(7).saturating_add(r) / 8
            }
        };
        self.srtt_ns = Some(srtt);
        let rto = srtt.saturating_add(G_NS.max(self.rttvar_ns.saturating_mul(4)));
        self.rto_ns = rto.clamp(self.min_ns, self.max_ns);
    }

    /// RFC 6298 §5.5: double the RTO (bounded by the maximum).
    pub fn back_off(&mut self) {
        self.backoff = self.backoff.saturating_add(1);
    }

    /// Clears the backoff (new data acknowledged).
    pub fn reset_backoff(&mut self) {
        self.backoff = 0;
    }

    /// RFC 6298 §5.7: after a SYN timeout with RTO < 3 s, use 3 s once data flows.
    pub fn reinit_after_syn_timeout(&mut self) {
        const THREE_S_NS: u64 = 3_000_000_000;
        if self.srtt_ns.is_none() && self.rto_ns < THREE_S_NS {
            self.rto_ns = THREE_S_NS.min(self.max_ns);
        }
    }

    /// The current RTO including backoff.
    pub fn rto(&self) -> Duration {
        Duration::from_nanos(self.rto_ns())
    }

    /// [`RttEstimator::rto`] in nanoseconds.
    #[inline]
    pub fn rto_ns(&self) -> u64 {
        if self.backoff == 0 {
            return self.rto_ns;
        }
        let f = 1u64 << self.backoff.min(16);
        self.rto_ns.saturating_mul(f).min(self.max_ns)
    }

    /// When a retransmission timer started at `now` expires: `now + self.rto()`.
    #[inline]
    pub fn rto_deadline(&self, now: Timestamp) -> Timestamp {
        Timestamp::from_nanos(now.as_nanos().saturating_add(self.rto_ns()))
    }

    /// The latest sample.
    pub fn latest(&self) -> Option<Duration> {
        self.latest_ns.map(Duration::from_nanos)
    }

    /// Smoothed RTT, if measured.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt_ns.map(Duration::from_nanos)
    }

    /// SRTT in nanoseconds, if measured.
    pub fn srtt_ns(&self) -> Option<u64> {
        self.srtt_ns
    }

    /// Consecutive backoffs.
    pub fn backoffs(&self) -> u32 {
        self.backoff
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est() -> RttEstimator {
        RttEstimator::new(
            Duration::from_secs(1),
            Duration::from_millis(200),
            Duration::from_secs(60),
        )
    }

    #[test]
    fn first_sample_rfc6298_s2_2() {
        let mut e = est();
        assert_eq!(e.rto(), Duration::from_secs(1));
        e.on_sample(Duration::from_millis(100));
        // RTO = SRTT + 4*RTTVAR = 100 + 4*50 = 300 ms.
        assert_eq!(e.rto(), Duration::from_millis(300));
    }

    #[test]
    fn later_samples_rfc6298_s2_3() {
        let mut e = est();
        e.on_sample(Duration::from_millis(100));
        e.on_sample(Duration::from_millis(200));
        // RTTVAR = 3/4*50 + 1/4*100 = 62.5; SRTT = 7/8*100 + 1/8*200 = 112.5; RTO = 362.5 ms.
        assert_eq!(e.srtt(), Some(Duration::from_micros(112_500)));
        assert_eq!(e.rto(), Duration::from_micros(362_500));
    }

    #[test]
    fn min_max_and_backoff_rfc6298_s2_4_s5_5() {
        let mut e = est();
        e.on_sample(Duration::from_millis(1));
        assert_eq!(e.rto(), Duration::from_millis(200));
        e.back_off();
        assert_eq!(e.rto(), Duration::from_millis(400));
        for _ in 0..20 {
            e.back_off();
        }
        assert_eq!(e.rto(), Duration::from_secs(60));
        e.on_sample(Duration::from_millis(1));
        assert_eq!(e.rto(), Duration::from_millis(200));
    }

    #[test]
    fn a_sample_in_nanoseconds_is_the_same_sample() {
        let (mut a, mut b) = (est(), est());
        for ms in [100u64, 200, 1, 3000, 40] {
            a.on_sample(Duration::from_millis(ms));
            b.on_sample_ns(ms * 1_000_000);
            assert_eq!(
                (a.rto(), a.srtt(), a.latest()),
                (b.rto(), b.srtt(), b.latest())
            );
        }
    }

    /// RFC 6298's smoothing step by step, every sample smoothed, in `Duration`s: what the
    /// estimator must agree with, its skipped steps included.
    struct Reference {
        srtt: Option<u64>,
        rttvar: u64,
        rto: Duration,
        backoff: u32,
    }

    impl Reference {
        fn sample(&mut self, r: u64) {
            let srtt = match self.srtt {
                None => {
                    self.rttvar = r / 2;
                    r
                }
                Some(s) => {
                    self.rttvar = (3 * self.rttvar + s.abs_diff(r)) / 4;
                    (7 * s + r) / 8
                }
            };
            self.srtt = Some(srtt);
            let rto = Duration::from_nanos(srtt + G_NS.max(4 * self.rttvar));
            self.rto = rto.clamp(Duration::from_millis(200), Duration::from_secs(60));
            self.backoff = 0;
        }

        fn rto(&self) -> Duration {
            (self.rto * (1 << self.backoff.min(16))).min(Duration::from_secs(60))
        }
    }

    proptest::proptest! {
        /// Samples repeating the 500 us floor (the steady state whose smoothing is skipped),
        /// other samples and backoffs in any order: the RTO, SRTT and deadline of every step
        /// are the full smoothing's.
        #[test]
        fn skipped_smoothing_is_the_smoothing(
            steps in proptest::collection::vec(0u8..8, 1..200),
        ) {
            let mut e = est();
            let mut r = Reference { srtt: None, rttvar: 0, rto: Duration::from_secs(1), backoff: 0 };
            let now = Timestamp::from_nanos(123_456_789);
            for step in steps {
                match step {
                    0 => {
                        e.back_off();
                        r.backoff += 1;
                    }
                    1 => {
                        e.on_sample_ns(3_000_000);
                        r.sample(3_000_000);
                    }
                    2 => {
                        e.on_sample(Duration::from_millis(250));
                        r.sample(250_000_000);
                    }
                    3 => {
                        // Long enough to reach the steady state from any of the samples here.
                        for _ in 0..300 {
                            e.on_sample_ns(500_000);
                            r.sample(500_000);
                        }
                        proptest::prop_assert_eq!((r.srtt, r.rttvar), (Some(500_000), 0));
                    }
                    _ => {
                        e.on_sample_ns(500_000);
                        r.sample(500_000);
                    }
                }
                proptest::prop_assert_eq!(e.rto(), r.rto());
                proptest::prop_assert_eq!(e.srtt(), r.srtt.map(Duration::from_nanos));
                proptest::prop_assert_eq!(e.rto_deadline(now), now + r.rto());
            }
        }
    }

    #[test]
    fn syn_timeout_reinit_rfc6298_s5_7() {
        let mut e = est();
        e.back_off();
        e.reinit_after_syn_timeout();
        e.reset_backoff();
        assert_eq!(e.rto(), Duration::from_secs(3));
    }
}
