//! Retransmission timeout per RFC 6298: SRTT/RTTVAR smoothing, clock granularity, bounds and
//! exponential backoff.

use std::time::Duration;

/// The RTO estimator of one connection.
#[derive(Clone, Copy, Debug)]
pub struct RttEstimator {
    /// SRTT and RTTVAR in nanoseconds (a u64 holds 584 years): the smoothing is shifts and
    /// adds, where `Duration`'s divisions cost a hundred instructions per ACK.
    srtt_ns: Option<u64>,
    rttvar_ns: u64,
    rto: Duration,
    backoff: u32,
    max: Duration,
    /// The bounds in nanoseconds: each sample clamps by them without converting.
    min_ns: u64,
    max_ns: u64,
    /// Latest sample.
    pub latest: Option<Duration>,
}

/// Clock granularity G of RFC 6298 §2 in nanoseconds (our timestamp clock ticks in
/// milliseconds).
const G_NS: u64 = 1_000_000;

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
            rto: initial,
            backoff: 0,
            max,
            min_ns: nanos(min),
            max_ns: nanos(max),
            latest: None,
        }
    }

    /// Feeds one RTT sample (RFC 6298 §2.2, §2.3); resets the backoff.
    pub fn on_sample(&mut self, r: Duration) {
        self.smooth(nanos(r));
        self.latest = Some(r);
    }

    /// [`RttEstimator::on_sample`] of a sample in nanoseconds (a timestamp echo's, counted
    /// without `Duration` arithmetic).
    pub fn on_sample_ns(&mut self, r: u64) {
        self.smooth(r);
        self.latest = Some(Duration::from_nanos(r));
    }

    /// SRTT, RTTVAR and the RTO after sample `r` (nanoseconds); resets the backoff.
    fn smooth(&mut self, r: u64) {
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
        self.rto = Duration::from_nanos(rto.clamp(self.min_ns, self.max_ns));
        self.backoff = 0;
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
        if self.srtt_ns.is_none() && self.rto < Duration::from_secs(3) {
            self.rto = Duration::from_secs(3).min(self.max);
        }
    }

    /// The current RTO including backoff.
    pub fn rto(&self) -> Duration {
        let f = 1u32 << self.backoff.min(16);
        self.rto.saturating_mul(f).min(self.max)
    }

    /// Smoothed RTT, if measured.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt_ns.map(Duration::from_nanos)
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
            assert_eq!((a.rto(), a.srtt(), a.latest), (b.rto(), b.srtt(), b.latest));
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
