//! Congestion control: NewReno (RFC 5681 / RFC 6582) and CUBIC (RFC 9438), sharing slow start.
//!
//! The controller owns `cwnd` and `ssthresh`; loss *detection* and the recovery episode live in the
//! connection, which calls [`Congestion::on_congestion_event`] once per episode and
//! [`Congestion::on_ack`] for every newly acknowledged octet outside recovery.

use std::time::Duration;

use crate::time::Timestamp;

use crate::config::CongestionAlgo;

/// CUBIC constants (RFC 9438 §4.1, §5).
const CUBIC_C: f64 = 0.4;
const CUBIC_BETA: f64 = 0.7;

/// Congestion state of one connection.
#[derive(Clone, Debug)]
pub struct Congestion {
    algo: CongestionAlgo,
    mss: u32,
    /// Congestion window, octets.
    pub cwnd: u32,
    /// Slow-start threshold, octets.
    pub ssthresh: u32,
    /// Octets acked in congestion avoidance not yet turned into cwnd growth (RFC 5681 §3.1 byte counting).
    acked_ca: u64,
    // CUBIC state (RFC 9438 §4).
    w_max: f64,
    k: f64,
    epoch_start: Option<Timestamp>,
    w_est: f64,
    cwnd_epoch: f64,
}

impl Congestion {
    /// A controller with initial window `iw` segments (RFC 5681 §3.1 / RFC 6928).
    pub fn new(algo: CongestionAlgo, mss: u32, iw: u32) -> Self {
        let mss = mss.max(1);
        Congestion {
            algo,
            mss,
            cwnd: mss.saturating_mul(iw.max(1)),
            ssthresh: u32::MAX,
            acked_ca: 0,
            w_max: 0.0,
            k: 0.0,
            epoch_start: None,
            w_est: 0.0,
            cwnd_epoch: 0.0,
        }
    }

    /// Which algorithm runs.
    pub fn algo(&self) -> CongestionAlgo {
        self.algo
    }

    /// Updates the MSS (after the handshake), rescaling an untouched initial window.
    pub fn set_mss(&mut self, mss: u32, iw: u32) {
        self.mss = mss.max(1);
        self.cwnd = self.mss.saturating_mul(iw.max(1));
    }

    /// In slow start?
    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// New data acknowledged (`acked` octets) outside loss recovery; `srtt_ns` is the smoothed
    /// RTT in nanoseconds, if there is one yet.
    pub fn on_ack(&mut self, now: Timestamp, acked: u32, srtt_ns: Option<u64>) {
        if self.in_slow_start() {
            // RFC 5681 §3.1 (with RFC 3465 L=2): cwnd += min(N, 2*SMSS) per ACK... using N up to 2 SMSS.
            self.cwnd = self.cwnd.saturating_add(acked.min(2 * self.mss));
            return;
        }
        match self.algo {
            CongestionAlgo::NewReno => {
                // RFC 5681 §3.1 eq. 3 via byte counting: one SMSS per cwnd of acked data.
                self.acked_ca += u64::from(acked);
                if self.acked_ca >= u64::from(self.cwnd) {
                    self.acked_ca -= u64::from(self.cwnd);
                    self.cwnd = self.cwnd.saturating_add(self.mss);
                }
            }
            CongestionAlgo::Cubic => self.cubic_ack(now, acked, srtt_ns),
        }
    }

    fn cubic_ack(&mut self, now: Timestamp, acked: u32, srtt_ns: Option<u64>) {
        let mss = f64::from(self.mss);
        let cwnd = f64::from(self.cwnd) / mss; // in segments
        let epoch = *self.epoch_start.get_or_insert_with(|| {
            // RFC 9438 §4.2: a new congestion-avoidance epoch.
            if self.w_max < cwnd {
                self.k = 0.0;
                self.w_max = cwnd;
            } else {
                self.k = ((self.w_max - cwnd) / CUBIC_C).cbrt();
            }
            self.w_est = cwnd;
            self.cwnd_epoch = cwnd;
            now
        });
        let t = now.saturating_duration_since(epoch).as_secs_f64();
        let rtt = srtt_ns.map_or(0.1, |ns| Duration::from_nanos(ns).as_secs_f64());
        // RFC 9438 §4.2 eq. 1 target at t + RTT.
        let w_cubic = |t: f64| CUBIC_C * (t - self.k).powi(3) + self.w_max;
        let mut target = w_cubic(t + rtt);
        target = target.clamp(cwnd, 1.5 * cwnd);
        // RFC 9438 §4.3 Reno-friendly region: alpha = 3(1-beta)/(1+beta).
        let alpha = if self.w_est >= self.w_max {
            1.0
        } else {
            3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA)
        };
        self.w_est += alpha * (f64::from(acked) / mss) / cwnd;
        let new_cwnd = if w_cubic(t) < self.w_est {
            self.w_est
        } else {
            // §4.4 concave / §4.5 convex: cwnd += (target - cwnd)/cwnd per acked segment.
            cwnd + (target - cwnd) / cwnd * (f64::from(acked) / mss)
        };
        let bytes = (new_cwnd * mss).min(f64::from(u32::MAX / 2));
        if bytes as u32 > self.cwnd {
            self.cwnd = bytes as u32;
        }
    }

    /// Once per loss-recovery episode (fast retransmit, RFC 5681 §3.2 step 2 / RFC 9438 §4.6):
    /// sets ssthresh from `flight` octets in flight and returns it.
    pub fn on_congestion_event(&mut self, flight: u32) -> u32 {
        let mss = self.mss;
        match self.algo {
            CongestionAlgo::NewReno => {
                self.ssthresh = (flight / 2).max(2 * mss);
            }
            CongestionAlgo::Cubic => {
                let cwnd = f64::from(self.cwnd) / f64::from(mss);
                // §4.7 fast convergence.
                self.w_max = if cwnd < self.w_max {
                    cwnd * (1.0 + CUBIC_BETA) / 2.0
                } else {
                    cwnd
                };
                let base = flight.max(self.cwnd.min(flight.saturating_mul(2)));
                self.ssthresh = ((f64::from(base) * CUBIC_BETA) as u32).max(2 * mss);
                self.epoch_start = None;
            }
        }
        self.acked_ca = 0;
        self.ssthresh
    }

    /// Leaves recovery: cwnd deflates to ssthresh (RFC 6675 / RFC 6582 full ACK).
    pub fn on_recovery_end(&mut self, flight: u32) {
        self.cwnd = match self.algo {
            CongestionAlgo::NewReno => self.ssthresh.min(flight.max(self.mss) + self.mss),
            CongestionAlgo::Cubic => self.ssthresh,
        }
        .max(self.mss);
    }

    /// RTO expiry (RFC 5681 §3.1 eq. 4, RFC 9438 §4.8): ssthresh from flight, cwnd = 1 SMSS.
    pub fn on_rto(&mut self, flight: u32) {
        self.on_congestion_event(flight);
        self.cwnd = self.mss;
    }

    /// The SMSS the controller works with.
    pub fn mss(&self) -> u32 {
        self.mss
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_start_doubles_per_rtt_rfc5681_s3_1() {
        let t = Timestamp::ZERO;
        let mut c = Congestion::new(CongestionAlgo::NewReno, 1000, 2);
        assert_eq!(c.cwnd, 2000);
        c.on_ack(t, 1000, None);
        c.on_ack(t, 1000, None);
        assert_eq!(c.cwnd, 4000);
    }

    #[test]
    fn newreno_loss_halves_rfc5681_eq4() {
        let mut c = Congestion::new(CongestionAlgo::NewReno, 1000, 10);
        assert_eq!(c.on_congestion_event(10_000), 5000);
        c.on_recovery_end(20_000);
        assert_eq!(c.cwnd, 5000);
        c.on_rto(3000);
        assert_eq!(c.cwnd, 1000);
        assert_eq!(c.ssthresh, 2000);
    }

    #[test]
    fn newreno_congestion_avoidance_one_mss_per_window() {
        let t = Timestamp::ZERO;
        let mut c = Congestion::new(CongestionAlgo::NewReno, 1000, 10);
        c.on_congestion_event(20_000);
        c.on_recovery_end(20_000);
        assert_eq!(c.cwnd, 10_000);
        for _ in 0..10 {
            c.on_ack(t, 1000, None);
        }
        assert_eq!(c.cwnd, 11_000);
    }

    #[test]
    fn cubic_reduces_by_beta_and_regrows_rfc9438() {
        let t = Timestamp::ZERO;
        let mut c = Congestion::new(CongestionAlgo::Cubic, 1000, 100);
        let ss = c.on_congestion_event(100_000);
        assert_eq!(ss, 70_000);
        c.on_recovery_end(100_000);
        assert_eq!(c.cwnd, 70_000);
        // Concave growth back toward W_max = 100 segments over K seconds (K = cbrt(30/0.4) ≈ 4.2 s).
        let mut now = t;
        for _ in 0..200 {
            now += Duration::from_millis(50);
            for _ in 0..(c.cwnd / 1000) {
                c.on_ack(now, 1000, Some(50_000_000));
            }
        }
        assert!(c.cwnd > 95_000, "cwnd {}", c.cwnd);
    }
}
