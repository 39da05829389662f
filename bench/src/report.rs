//! Output: perftest's tables on stdout and a JSON array of records.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::cli::TestKind;
use crate::stats::{BwStats, LatencyStats};

/// The dashed rule perftest prints around its tables.
pub const RULE: &str =
    "---------------------------------------------------------------------------------------";

/// perftest's bandwidth header.
pub const BW_HEADER: &str =
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";

/// perftest's latency header.
pub const LAT_HEADER: &str = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]";

/// The header for a test.
pub fn header(test: TestKind) -> &'static str {
    if test.is_latency() {
        LAT_HEADER
    } else {
        BW_HEADER
    }
}

/// One result row (one test, transport and size). Fields that do not apply are `null` in JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Test name (`write_lat`, ...).
    pub test: String,
    /// `xdp`, `kernel` or `raw`.
    pub transport: String,
    /// Message size.
    pub bytes: u64,
    /// Iterations measured.
    pub iterations: u64,
    /// Smallest latency.
    pub t_min_us: Option<f64>,
    /// Largest latency.
    pub t_max_us: Option<f64>,
    /// Median latency.
    pub t_typical_us: Option<f64>,
    /// Mean latency.
    pub t_avg_us: Option<f64>,
    /// Standard deviation.
    pub t_stdev_us: Option<f64>,
    /// 99th percentile.
    pub p99_us: Option<f64>,
    /// 99.9th percentile.
    pub p999_us: Option<f64>,
    /// Best-window bandwidth.
    pub bw_peak_gbps: Option<f64>,
    /// Average bandwidth.
    pub bw_gbps: Option<f64>,
    /// Message rate.
    pub msg_rate_mpps: Option<f64>,
}

impl Record {
    /// A latency row.
    pub fn latency(test: TestKind, transport: &str, bytes: u64, s: &LatencyStats) -> Self {
        Self {
            test: test.name().into(),
            transport: transport.into(),
            bytes,
            iterations: s.samples,
            t_min_us: Some(s.t_min_us),
            t_max_us: Some(s.t_max_us),
            t_typical_us: Some(s.t_typical_us),
            t_avg_us: Some(s.t_avg_us),
            t_stdev_us: Some(s.t_stdev_us),
            p99_us: Some(s.p99_us),
            p999_us: Some(s.p999_us),
            bw_peak_gbps: None,
            bw_gbps: None,
            msg_rate_mpps: None,
        }
    }

    /// A bandwidth row.
    pub fn bandwidth(test: TestKind, transport: &str, bytes: u64, b: &BwStats) -> Self {
        Self {
            test: test.name().into(),
            transport: transport.into(),
            bytes,
            iterations: b.iterations,
            t_min_us: None,
            t_max_us: None,
            t_typical_us: None,
            t_avg_us: None,
            t_stdev_us: None,
            p99_us: None,
            p999_us: None,
            bw_peak_gbps: Some(b.peak_gbps),
            bw_gbps: Some(b.avg_gbps),
            msg_rate_mpps: Some(b.msg_rate_mpps),
        }
    }

    /// perftest's row for this record.
    pub fn row(&self) -> String {
        let f = |v: Option<f64>| v.unwrap_or(f64::NAN);
        if self.t_typical_us.is_some() {
            format!(
                " {:<7}{:<10}{:>14.2}{:>15.2}{:>17.2}{:>15.2}{:>17.2}{:>23.2}{:>25.2}",
                self.bytes,
                self.iterations,
                f(self.t_min_us),
                f(self.t_max_us),
                f(self.t_typical_us),
                f(self.t_avg_us),
                f(self.t_stdev_us),
                f(self.p99_us),
                f(self.p999_us),
            )
        } else {
            format!(
                " {:<11}{:<13}{:>17.2}{:>20.2}{:>20.6}",
                self.bytes,
                self.iterations,
                f(self.bw_peak_gbps),
                f(self.bw_gbps),
                f(self.msg_rate_mpps),
            )
        }
    }
}

/// Writes `value` as pretty JSON to `path`.
pub fn write_json<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<(), String> {
    let text = serde_json::to_string_pretty(value).map_err(|e| format!("JSON: {e}"))?;
    let mut f =
        std::fs::File::create(path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    f.write_all(text.as_bytes())
        .and_then(|_| f.write_all(b"\n"))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lat() -> LatencyStats {
        LatencyStats {
            samples: 1000,
            t_min_us: 10.0,
            t_max_us: 90.5,
            t_typical_us: 12.25,
            t_avg_us: 13.0,
            t_stdev_us: 2.0,
            p99_us: 30.0,
            p999_us: 80.0,
        }
    }

    #[test]
    fn latency_row_has_the_nine_columns_of_the_header() {
        let r = Record::latency(TestKind::WriteLat, "kernel", 64, &lat());
        let row = r.row();
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cols,
            ["64", "1000", "10.00", "90.50", "12.25", "13.00", "2.00", "30.00", "80.00"]
        );
        assert!(LAT_HEADER.contains("t_typical[usec]"));
    }

    #[test]
    fn bandwidth_row_has_the_five_columns_of_the_header() {
        let b = BwStats {
            iterations: 5000,
            peak_gbps: 9.5,
            avg_gbps: 9.25,
            msg_rate_mpps: 0.017_642,
        };
        let r = Record::bandwidth(TestKind::WriteBw, "kernel", 65_536, &b);
        let row = r.row();
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols, ["65536", "5000", "9.50", "9.25", "0.017642"]);
        assert_eq!(header(TestKind::WriteBw), BW_HEADER);
    }

    #[test]
    fn json_has_nulls_where_a_column_does_not_apply() {
        let r = Record::latency(TestKind::SendLat, "kernel", 2, &lat());
        let v = serde_json::to_value(&r).unwrap();
        assert!(v["bw_gbps"].is_null());
        assert!(v["msg_rate_mpps"].is_null());
        assert_eq!(v["t_typical_us"], 12.25);
        assert_eq!(v["test"], "send_lat");
    }
}
