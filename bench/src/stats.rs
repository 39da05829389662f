//! Statistics of a run, as perftest reports them.
//!
//! Latency: one sample per iteration in nanoseconds, kept in an HDR histogram (3 significant
//! digits; values below 2048 ns are exact). `t_typical` is the median, as perftest's.
//! Bandwidth: bytes and completion times; `BW average` over the whole run, `BW peak` over the
//! best window spanning at least 5% of the run, `MsgRate` in millions per second.

use std::time::Duration;

use hdrhistogram::Histogram;

/// Latency samples of a run.
#[derive(Debug, Clone)]
pub struct LatencyRecorder {
    hist: Histogram<u64>,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyRecorder {
    /// An empty recorder (1 ns to 1 hour, 3 significant digits).
    pub fn new() -> Self {
        // Constant, valid bounds: low >= 1, high >= 2 * low, 3 significant digits.
        let hist = Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
            .expect("constant histogram bounds are valid");
        Self { hist }
    }

    /// Adds one sample (zero counts as 1 ns, the histogram's floor).
    pub fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1);
        self.hist.saturating_record(ns);
    }

    /// Number of samples.
    pub fn len(&self) -> u64 {
        self.hist.len()
    }

    /// True without samples.
    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// The latency distribution as (percentile, microseconds) points, for CDF curves and the
    /// JSON: [`CDF_PERCENTILES`] of the samples.
    pub fn percentiles(&self) -> Vec<[f64; 2]> {
        if self.hist.is_empty() {
            return Vec::new();
        }
        CDF_PERCENTILES
            .iter()
            .map(|&p| [p, self.hist.value_at_quantile(p / 100.0) as f64 / 1000.0])
            .collect()
    }

    /// The `q`-th quantile (0 to 1) in microseconds, `None` without samples.
    pub fn quantile_us(&self, q: f64) -> Option<f64> {
        (!self.hist.is_empty()).then(|| self.hist.value_at_quantile(q) as f64 / 1000.0)
    }

    /// perftest's `-H` dump: one line per recorded value bucket, `usec count`.
    pub fn histogram_lines(&self) -> Vec<String> {
        self.hist
            .iter_recorded()
            .map(|v| {
                format!(
                    "{:.3}, {}",
                    v.value_iterated_to() as f64 / 1000.0,
                    v.count_at_value()
                )
            })
            .collect()
    }

    /// The summary, `None` without samples.
    pub fn summary(&self) -> Option<LatencyStats> {
        if self.hist.is_empty() {
            return None;
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        Some(LatencyStats {
            samples: self.hist.len(),
            t_min_us: us(self.hist.min()),
            t_max_us: us(self.hist.max()),
            t_typical_us: us(self.hist.value_at_quantile(0.5)),
            t_avg_us: self.hist.mean() / 1000.0,
            t_stdev_us: self.hist.stdev() / 1000.0,
            p99_us: us(self.hist.value_at_quantile(0.99)),
            p999_us: us(self.hist.value_at_quantile(0.999)),
        })
    }
}

/// The percentiles [`LatencyRecorder::percentiles`] reports.
pub const CDF_PERCENTILES: [f64; 14] = [
    0.0, 1.0, 5.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99, 99.999, 100.0,
];

/// perftest's latency columns, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyStats {
    /// Number of samples.
    pub samples: u64,
    /// Smallest sample.
    pub t_min_us: f64,
    /// Largest sample.
    pub t_max_us: f64,
    /// The median (perftest's "typical").
    pub t_typical_us: f64,
    /// The mean.
    pub t_avg_us: f64,
    /// The standard deviation.
    pub t_stdev_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
}

/// perftest's bandwidth columns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BwStats {
    /// Messages completed.
    pub iterations: u64,
    /// Best window, in Gb/s (10^9 bits per second).
    pub peak_gbps: f64,
    /// Whole run, in Gb/s.
    pub avg_gbps: f64,
    /// Whole run, in millions of messages per second.
    pub msg_rate_mpps: f64,
}

/// Bits per second in Gb/s for `bytes` moved in `secs`.
pub fn gbps(bytes: u64, secs: f64) -> f64 {
    if secs <= 0.0 {
        return 0.0;
    }
    bytes as f64 * 8.0 / secs / 1e9
}

/// Computes the bandwidth columns for messages of `msg_bytes`, given the completion time of
/// each message as an offset from the start of the run (sorted ascending) and the total run
/// time `total` (which may be longer than the last completion, e.g. to include a final drain).
/// The peak is the best window spanning at least 5% of the run.
pub fn bandwidth(msg_bytes: u64, completions: &[Duration], total: Duration) -> BwStats {
    let n = completions.len() as u64;
    let avg_gbps = gbps(msg_bytes.saturating_mul(n), total.as_secs_f64());
    let peak = peak_gbps(msg_bytes, completions, total / 20)
        .unwrap_or(avg_gbps)
        .max(avg_gbps);
    BwStats::of_run(msg_bytes, n, total, peak)
}

impl BwStats {
    /// `messages` of `msg_bytes` in `total`, with the best window's rate `peak_gbps` measured
    /// by whoever ran it.
    pub fn of_run(msg_bytes: u64, messages: u64, total: Duration, peak_gbps: f64) -> Self {
        let secs = total.as_secs_f64();
        BwStats {
            iterations: messages,
            peak_gbps,
            avg_gbps: gbps(msg_bytes.saturating_mul(messages), secs),
            msg_rate_mpps: if secs > 0.0 {
                messages as f64 / secs / 1e6
            } else {
                0.0
            },
        }
    }
}

/// The best rate over any window that spans at least `min_span`: the messages completed in
/// `(t_i, t_j]` over `t_j - t_i`, where `t_0` is the start of the run. Completions that land
/// at the same instant (a burst handed over at once) stay in one window, so a burst never
/// reads as an infinite rate. `None` when no window spans `min_span` (or it is zero).
pub fn peak_gbps(msg_bytes: u64, completions: &[Duration], min_span: Duration) -> Option<f64> {
    if min_span.is_zero() {
        return None;
    }
    let pts: Vec<Duration> = std::iter::once(Duration::ZERO)
        .chain(completions.iter().copied())
        .collect();
    let mut best: Option<f64> = None;
    let mut j = 0;
    for i in 0..pts.len() {
        j = j.max(i + 1);
        while j < pts.len() && pts[j].saturating_sub(pts[i]) < min_span {
            j += 1;
        }
        if j >= pts.len() {
            break;
        }
        let mut k = j;
        while k + 1 < pts.len() && pts[k + 1] == pts[k] {
            k += 1;
        }
        let dt = (pts[k] - pts[i]).as_secs_f64();
        let r = gbps(msg_bytes * (k - i) as u64, dt);
        best = Some(best.map_or(r, |b: f64| b.max(r)));
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(v: u64) -> Duration {
        Duration::from_nanos(v)
    }

    #[test]
    fn latency_percentiles_of_1_to_100_ns() {
        // Values below 2048 are exact in a 3-digit HDR histogram, so these are hand-computed.
        let mut r = LatencyRecorder::new();
        for v in (1..=100).rev() {
            r.record(ns(v));
        }
        let s = r.summary().unwrap();
        assert_eq!(s.samples, 100);
        assert_eq!(s.t_min_us, 0.001);
        assert_eq!(s.t_max_us, 0.100);
        // median: the smallest value with at least half the samples at or below it
        assert_eq!(s.t_typical_us, 0.050);
        assert_eq!(s.p99_us, 0.099);
        assert_eq!(s.p999_us, 0.100);
        assert!((s.t_avg_us - 0.0505).abs() < 1e-12);
        // population stdev of 1..=100: sqrt((100^2 - 1) / 12) = 28.8660...
        assert!(
            (s.t_stdev_us - 0.028_866_07).abs() < 1e-7,
            "{}",
            s.t_stdev_us
        );
    }

    #[test]
    fn typical_is_the_median_not_the_mean() {
        let mut r = LatencyRecorder::new();
        for v in [10, 11, 12, 13, 1000] {
            r.record(ns(v));
        }
        let s = r.summary().unwrap();
        assert_eq!(s.t_typical_us, 0.012);
        assert!((s.t_avg_us - 0.2092).abs() < 1e-12);
        assert_eq!(s.t_max_us, 1.0);
    }

    #[test]
    fn tail_percentiles_see_one_outlier_in_a_thousand() {
        let mut r = LatencyRecorder::new();
        for _ in 0..999 {
            r.record(ns(500));
        }
        r.record(ns(1500));
        let s = r.summary().unwrap();
        assert_eq!(s.p99_us, 0.5);
        // 99.9% of 1000 samples = 999 samples at or below: still 500
        assert_eq!(s.p999_us, 0.5);
        assert_eq!(s.t_max_us, 1.5);
    }

    #[test]
    fn large_values_keep_three_significant_digits() {
        let mut r = LatencyRecorder::new();
        r.record(Duration::from_micros(12_345));
        let s = r.summary().unwrap();
        assert!((s.t_typical_us - 12_345.0).abs() / 12_345.0 < 1e-3);
    }

    #[test]
    fn empty_recorder_has_no_summary_and_zero_counts_as_one_ns() {
        let mut r = LatencyRecorder::new();
        assert!(r.summary().is_none());
        r.record(Duration::ZERO);
        assert_eq!(r.summary().unwrap().t_min_us, 0.001);
    }

    #[test]
    fn gbps_math() {
        // 1 GB in 1 s is 8 Gb/s; 64 KiB x 1000 in 0.5 s = 65_536_000 * 8 / 0.5 = 1.048576 Gb/s
        assert_eq!(gbps(1_000_000_000, 1.0), 8.0);
        assert!((gbps(65_536 * 1000, 0.5) - 1.048_576).abs() < 1e-12);
        assert_eq!(gbps(10, 0.0), 0.0);
    }

    #[test]
    fn bandwidth_average_peak_and_rate() {
        // 4 messages of 1000 bytes completing at 1, 2, 3, 10 ms; run took 10 ms.
        let c = [1, 2, 3, 10].map(Duration::from_millis);
        let b = bandwidth(1000, &c, Duration::from_millis(10));
        assert_eq!(b.iterations, 4);
        // average: 4000 B * 8 / 0.01 s = 3.2 Mb/s = 0.0032 Gb/s
        assert!((b.avg_gbps - 0.0032).abs() < 1e-12);
        // rate: 4 / 0.01 s = 400 msg/s = 0.0004 Mpps
        assert!((b.msg_rate_mpps - 0.0004).abs() < 1e-12);
        // peak: window of 1 message over 1 ms (1->2 or 2->3): 8000 bits / 1 ms = 0.008 Gb/s
        assert!((b.peak_gbps - 0.008).abs() < 1e-12);
    }

    #[test]
    fn peak_window_spans_at_least_min_span() {
        // 200 completions, 1 us apart, except a 10-us gap; windows of at least 2 us
        let mut t = 0u64;
        let c: Vec<Duration> = (0..200)
            .map(|i| {
                t += if i == 100 { 10_000 } else { 1_000 };
                ns(t)
            })
            .collect();
        // best window: 2 messages of 100 B in 2 us = 1600 bits / 2e-6 s = 0.8 Gb/s
        assert!((peak_gbps(100, &c, ns(2_000)).unwrap() - 0.8).abs() < 1e-9);
        assert!(
            peak_gbps(100, &c, ns(1_000_000)).is_none(),
            "no window that long"
        );
        assert!(peak_gbps(100, &c, Duration::ZERO).is_none());
    }

    #[test]
    fn a_burst_of_simultaneous_completions_is_not_an_infinite_peak() {
        // 10 messages handed over at once at 1 ms, run of 2 ms: peak is 10 messages in 1 ms
        let c = [Duration::from_millis(1); 10];
        let p = peak_gbps(1000, &c, Duration::from_micros(100)).unwrap();
        assert!((p - 0.08).abs() < 1e-12, "{p}");
        let b = bandwidth(1000, &c, Duration::from_millis(2));
        assert!((b.peak_gbps - 0.08).abs() < 1e-12);
        assert!((b.avg_gbps - 0.04).abs() < 1e-12);
    }

    #[test]
    fn peak_is_never_below_average() {
        let c = [ns(5), ns(5)];
        let b = bandwidth(1000, &c, Duration::from_micros(1));
        assert!(b.peak_gbps >= b.avg_gbps);
    }
}
