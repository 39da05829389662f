//! Output: perftest's tables on stdout and a JSON array of records.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::cli::TestKind;
use crate::stats::{BwStats, LatencyStats};

/// The dashed rule perftest prints around its tables.
pub const RULE: &str =
    "---------------------------------------------------------------------------------------";

/// perftest's bandwidth header with `--report_gbits`.
pub const BW_HEADER: &str =
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";
/// perftest's bandwidth header (its default unit, MB/sec: 2^20 bytes a second).
pub const BW_HEADER_MB: &str =
    " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]";

/// The storage tests' header with `--report_gbits`: fio's figures (IOPS, completion latency
/// percentiles of each call) beside perftest's average bandwidth.
pub const STORAGE_HEADER: &str = " #bytes     #iterations    BW average[Gb/sec]           IOPS    p50[usec]    p90[usec]    p99[usec]  p99.9[usec]";
/// The storage tests' header (bandwidth in MB/sec).
pub const STORAGE_HEADER_MB: &str = " #bytes     #iterations    BW average[MB/sec]           IOPS    p50[usec]    p90[usec]    p99[usec]  p99.9[usec]";
/// The column `--cpu_util` adds to every header (perftest's name).
pub const CPU_COLUMN: &str = "    CPU_Util[%]";

/// Gb/s (10^9 bit/s) to perftest's MB/sec (2^20 bytes/s).
pub fn gbps_to_mb_per_sec(gbps: f64) -> f64 {
    gbps * 1e9 / 8.0 / 1_048_576.0
}

/// The bandwidth unit of the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BwUnit {
    /// MB/sec (2^20 bytes/s), perftest's default.
    #[default]
    MegaBytes,
    /// Gb/sec (10^9 bit/s), perftest's `--report_gbits`.
    Gigabits,
}

/// What a test ran on, printed before the results (like perftest's parameter block) and kept
/// in the JSON. Fields that do not apply (XDP facts on the kernel transport) are `null`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Params {
    /// The test.
    pub test: String,
    /// `xdp`, `kernel` or `raw`.
    pub transport: String,
    /// Connection type (iWARP is reliable connected).
    pub connection: String,
    /// Queue pairs.
    pub num_of_qps: u32,
    /// Work requests in flight (bandwidth tests).
    pub tx_depth: u32,
    /// The interface (xdp).
    pub interface: Option<String>,
    /// Its receive queue (xdp).
    pub queue: Option<u32>,
    /// `native` or `generic` XDP.
    pub xdp_mode: Option<String>,
    /// AF_XDP zero-copy (else copy mode).
    pub zero_copy: Option<bool>,
    /// The engine: `inline`, `threaded`, or `pinned to CPU N`.
    pub engine: Option<String>,
    /// The interface's MTU.
    pub mtu: Option<u32>,
    /// The MSS of the engine's TCP.
    pub mss: Option<u16>,
    /// Who computed TCP checksums of sent segments: `engine`, `device` or `kernel` (xdp).
    pub tx_checksum: Option<String>,
    /// MPA markers we insert, as negotiated.
    pub tx_markers: Option<bool>,
    /// MPA markers the peer inserts, as negotiated.
    pub rx_markers: Option<bool>,
    /// MPA CRC, as negotiated.
    pub crc: Option<bool>,
    /// MULPDU in force for what we send.
    pub mulpdu: Option<usize>,
    /// Storage tests: the I/O pattern (fio's `--rw`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rw: Option<String>,
    /// Storage tests: calls in flight (fio's `--iodepth`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iodepth: Option<u32>,
    /// Storage tests: the seed of random offsets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Storage tests: the store's size, the range of the offsets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_size: Option<u64>,
    /// Bandwidth tests with `-b`: both sides stream.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bidirectional: bool,
}

impl Params {
    /// perftest-style lines: ` Name : value`.
    pub fn block(&self) -> String {
        let mut rows: Vec<(&str, String)> = vec![
            ("Test", self.test.clone()),
            ("Transport", self.transport.clone()),
            ("Connection type", self.connection.clone()),
            ("Number of qps", self.num_of_qps.to_string()),
        ];
        match self.iodepth {
            Some(d) => rows.push(("I/O depth", d.to_string())),
            None => rows.push(("TX depth", self.tx_depth.to_string())),
        }
        if self.bidirectional {
            rows.push(("Bidirectional", "on".into()));
        }
        let opt = |v: &Option<String>| v.clone();
        for (name, v) in [
            ("Interface", opt(&self.interface)),
            ("Queue", self.queue.map(|q| q.to_string())),
            ("XDP mode", opt(&self.xdp_mode)),
            (
                "AF_XDP bind",
                self.zero_copy
                    .map(|z| if z { "zero-copy" } else { "copy" }.to_string()),
            ),
            ("Engine", opt(&self.engine)),
            ("MTU", self.mtu.map(|m| m.to_string())),
            ("MSS", self.mss.map(|m| m.to_string())),
            ("TCP checksums", opt(&self.tx_checksum)),
            (
                "MPA markers",
                self.tx_markers
                    .zip(self.rx_markers)
                    .map(|(t, r)| format!("tx {}, rx {}", on_off(t), on_off(r))),
            ),
            ("MPA CRC", self.crc.map(|c| on_off(c).to_string())),
            ("MULPDU", self.mulpdu.map(|m| m.to_string())),
            ("I/O pattern", opt(&self.rw)),
            ("Random seed", self.seed.map(|s| s.to_string())),
            ("Store size", self.store_size.map(|s| s.to_string())),
        ] {
            if let Some(v) = v {
                rows.push((name, v));
            }
        }
        rows.iter()
            .map(|(n, v)| format!(" {n:<16}: {v}\n"))
            .collect()
    }
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// perftest's latency header.
pub const LAT_HEADER: &str = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]";

/// The header for a test, bandwidth in Gb/sec.
pub fn header(test: TestKind) -> &'static str {
    header_in(test, BwUnit::Gigabits)
}

/// The header for a test, bandwidth in `unit`.
pub fn header_in(test: TestKind, unit: BwUnit) -> &'static str {
    match (test.is_latency(), test.is_storage(), unit) {
        (true, _, _) => LAT_HEADER,
        (false, true, BwUnit::Gigabits) => STORAGE_HEADER,
        (false, true, BwUnit::MegaBytes) => STORAGE_HEADER_MB,
        (false, false, BwUnit::Gigabits) => BW_HEADER,
        (false, false, BwUnit::MegaBytes) => BW_HEADER_MB,
    }
}

/// The header for a test, with the CPU column of `--cpu_util` when `cpu`.
pub fn header_line(test: TestKind, unit: BwUnit, cpu: bool) -> String {
    let mut h = header_in(test, unit).to_string();
    if cpu {
        h.push_str(CPU_COLUMN);
    }
    h
}

/// One result row (one test, transport and size). Fields that do not apply are `null` in JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// Average bandwidth in perftest's MB/sec (2^20 bytes/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bw_average_mb_s: Option<f64>,
    /// Latency distribution: (percentile, microseconds) points (latency tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentiles_us: Option<Vec<[f64; 2]>>,
    /// I/Os per second (storage tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<f64>,
    /// 90th percentile (storage tests: of each call's completion latency).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p90_us: Option<f64>,
    /// `--cpu_util`: CPU time of this process over wall time, per cent of one core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_util: Option<f64>,
    /// `--cpu_util` with an engine thread: its share, per cent of one core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_util_engine: Option<f64>,
    /// `-b`: average bandwidth of the client's stream (the sum is `bw_gbps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bw_client_gbps: Option<f64>,
    /// `-b`: average bandwidth of the server's stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bw_server_gbps: Option<f64>,
    /// What the test ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Params>,
    /// The client's CPU time per GB moved, in seconds (ONC RPC over TCP rows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_s_per_gb: Option<f64>,
    /// Octets the TCP RDMA option placed so that the client's read skipped copying them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copies_avoided: Option<u64>,
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
            bw_average_mb_s: None,
            percentiles_us: None,
            iops: None,
            p90_us: None,
            cpu_util: None,
            cpu_util_engine: None,
            bw_client_gbps: None,
            bw_server_gbps: None,
            params: None,
            cpu_s_per_gb: None,
            copies_avoided: None,
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
            bw_average_mb_s: Some(gbps_to_mb_per_sec(b.avg_gbps)),
            percentiles_us: None,
            iops: None,
            p90_us: None,
            cpu_util: None,
            cpu_util_engine: None,
            bw_client_gbps: None,
            bw_server_gbps: None,
            params: None,
            cpu_s_per_gb: None,
            copies_avoided: None,
        }
    }

    /// A storage row: the bandwidth columns, IOPS (the message rate) and the latency of each
    /// call (`p90_us`, the 90th percentile, given apart: [`LatencyStats`] has no column for it).
    pub fn storage(
        test: TestKind,
        transport: &str,
        bytes: u64,
        b: &BwStats,
        l: &LatencyStats,
        p90_us: f64,
    ) -> Self {
        let mut r = Self::latency(test, transport, bytes, l);
        r.iterations = b.iterations;
        r.bw_peak_gbps = Some(b.peak_gbps);
        r.bw_gbps = Some(b.avg_gbps);
        r.msg_rate_mpps = Some(b.msg_rate_mpps);
        r.bw_average_mb_s = Some(gbps_to_mb_per_sec(b.avg_gbps));
        r.iops = Some(b.msg_rate_mpps * 1e6);
        r.p90_us = Some(p90_us);
        r
    }

    /// A bidirectional (`-b`) row: the sum of the client's stream `mine` and the server's
    /// `theirs` (perftest's figure), each stream kept apart too. The iterations are the
    /// client's.
    pub fn bidirectional(
        test: TestKind,
        transport: &str,
        bytes: u64,
        mine: &BwStats,
        theirs: &BwStats,
    ) -> Self {
        let sum = BwStats {
            iterations: mine.iterations,
            peak_gbps: mine.peak_gbps + theirs.peak_gbps,
            avg_gbps: mine.avg_gbps + theirs.avg_gbps,
            msg_rate_mpps: mine.msg_rate_mpps + theirs.msg_rate_mpps,
        };
        let mut r = Self::bandwidth(test, transport, bytes, &sum);
        r.bw_client_gbps = Some(mine.avg_gbps);
        r.bw_server_gbps = Some(theirs.avg_gbps);
        r
    }

    /// perftest's row for this record, bandwidth in Gb/sec.
    pub fn row(&self) -> String {
        self.row_in(BwUnit::Gigabits)
    }

    /// The CSV header of [`Record::csv`].
    pub const CSV_HEADER: &'static str = "test,transport,bytes,iterations,t_min_us,t_max_us,t_typical_us,t_avg_us,t_stdev_us,p99_us,p999_us,bw_peak_gbps,bw_gbps,msg_rate_mpps,iops,p90_us,cpu_util,cpu_util_engine,bw_client_gbps,bw_server_gbps";

    /// This record as one CSV line (empty fields where a column does not apply).
    pub fn csv(&self) -> String {
        let f = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v}"));
        format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            self.test,
            self.transport,
            self.bytes,
            self.iterations,
            f(self.t_min_us),
            f(self.t_max_us),
            f(self.t_typical_us),
            f(self.t_avg_us),
            f(self.t_stdev_us),
            f(self.p99_us),
            f(self.p999_us),
            f(self.bw_peak_gbps),
            f(self.bw_gbps),
            f(self.msg_rate_mpps),
            f(self.iops),
            f(self.p90_us),
            f(self.cpu_util),
            f(self.cpu_util_engine),
            f(self.bw_client_gbps),
            f(self.bw_server_gbps),
        )
    }

    /// perftest's row for this record, bandwidth in `unit`.
    pub fn row_in(&self, unit: BwUnit) -> String {
        let bw = |v: Option<f64>| match unit {
            BwUnit::Gigabits => v,
            BwUnit::MegaBytes => v.map(gbps_to_mb_per_sec),
        };
        let f = |v: Option<f64>| v.unwrap_or(f64::NAN);
        let mut row = if self.iops.is_some() {
            format!(
                " {:<11}{:<13}{:>20.2}{:>15.0}{:>13.2}{:>13.2}{:>13.2}{:>13.2}",
                self.bytes,
                self.iterations,
                f(bw(self.bw_gbps)),
                f(self.iops),
                f(self.t_typical_us),
                f(self.p90_us),
                f(self.p99_us),
                f(self.p999_us),
            )
        } else if self.t_typical_us.is_some() {
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
                f(bw(self.bw_peak_gbps)),
                f(bw(self.bw_gbps)),
                f(self.msg_rate_mpps),
            )
        };
        if let Some(c) = self.cpu_util {
            row.push_str(&format!("{c:>15.2}"));
        }
        row
    }
}

/// The lines printed under a row: each stream of a bidirectional run, the engine thread's CPU
/// share.
pub fn notes(r: &Record, unit: BwUnit) -> Vec<String> {
    let mut out = Vec::new();
    if let (Some(c), Some(s)) = (r.bw_client_gbps, r.bw_server_gbps) {
        let (c, s, u) = match unit {
            BwUnit::Gigabits => (c, s, "Gb/sec"),
            BwUnit::MegaBytes => (gbps_to_mb_per_sec(c), gbps_to_mb_per_sec(s), "MB/sec"),
        };
        out.push(format!(
            " bidirectional: client's stream {c:.2} {u} + server's stream {s:.2} {u} (the row is the sum)"
        ));
    }
    if let Some(e) = r.cpu_util_engine {
        out.push(format!(" CPU_Util of the engine thread: {e:.2} %"));
    }
    out
}

/// Writes `rows` as CSV (with a header line) to `path`.
pub fn write_csv(path: &Path, rows: &[Record]) -> Result<(), String> {
    let mut text = String::from(Record::CSV_HEADER);
    text.push('\n');
    for r in rows {
        text.push_str(&r.csv());
        text.push('\n');
    }
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
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
    fn mb_per_sec_is_perftests_default_and_gbits_on_request() {
        let b = BwStats {
            iterations: 10,
            peak_gbps: 8.388_608,
            avg_gbps: 8.388_608,
            msg_rate_mpps: 1.0,
        };
        let r = Record::bandwidth(TestKind::WriteBw, "kernel", 65_536, &b);
        // 8.388608 Gb/s = 1048576000 B/s = 1000 MB/sec (2^20).
        let cols: Vec<String> = r
            .row_in(BwUnit::MegaBytes)
            .split_whitespace()
            .map(String::from)
            .collect();
        assert_eq!(cols[2], "1000.00");
        assert_eq!(cols[3], "1000.00");
        assert!(r.row_in(BwUnit::Gigabits).contains("8.39"));
        assert_eq!(
            header_in(TestKind::WriteBw, BwUnit::MegaBytes),
            BW_HEADER_MB
        );
        assert_eq!(r.bw_average_mb_s.map(|v| v.round()), Some(1000.0));
    }

    #[test]
    fn csv_has_a_field_per_header_column() {
        let r = Record::latency(TestKind::WriteLat, "xdp", 64, &lat());
        let line = r.csv();
        assert_eq!(
            line.split(',').count(),
            Record::CSV_HEADER.split(',').count()
        );
        assert!(
            line.starts_with("write_lat,xdp,64,1000,10,90.5,12.25,"),
            "{line}"
        );
        assert!(line.ends_with(",,,,,,,,,"), "{line}");
    }

    #[test]
    fn storage_row_has_the_eight_columns_of_its_header_and_cpu_adds_one() {
        let b = BwStats {
            iterations: 500,
            peak_gbps: 2.0,
            avg_gbps: 1.048_576,
            msg_rate_mpps: 0.032,
        };
        let mut r = Record::storage(TestKind::RpcRead, "kernel", 4096, &b, &lat(), 20.5);
        assert_eq!(r.iops, Some(32_000.0));
        assert_eq!(r.t_typical_us, Some(12.25), "p50 is the median");
        let cols: Vec<String> = r
            .row_in(BwUnit::Gigabits)
            .split_whitespace()
            .map(String::from)
            .collect();
        assert_eq!(
            cols,
            ["4096", "500", "1.05", "32000", "12.25", "20.50", "30.00", "80.00"]
        );
        let header = header_line(TestKind::RpcRead, BwUnit::MegaBytes, false);
        assert_eq!(header, STORAGE_HEADER_MB);
        // MB/sec: 1.048576 Gb/s = 131072000 B/s = 125 MB/sec.
        assert_eq!(
            r.row_in(BwUnit::MegaBytes).split_whitespace().nth(2),
            Some("125.00")
        );
        r.cpu_util = Some(37.5);
        let with_cpu = header_line(TestKind::RpcRead, BwUnit::MegaBytes, true);
        assert!(with_cpu.ends_with("CPU_Util[%]"));
        let row = r.row_in(BwUnit::MegaBytes);
        assert_eq!(row.split_whitespace().count(), 9);
        assert_eq!(row.split_whitespace().last(), Some("37.50"));
        assert_eq!(
            with_cpu.split_whitespace().count(),
            STORAGE_HEADER_MB.split_whitespace().count() + 1
        );
        let line = r.csv();
        let header: Vec<&str> = Record::CSV_HEADER.split(',').collect();
        let fields: Vec<&str> = line.split(',').collect();
        assert_eq!(fields.len(), header.len());
        let at = |k: &str| fields[header.iter().position(|h| *h == k).unwrap()];
        assert_eq!(at("iops"), "32000");
        assert_eq!(at("p90_us"), "20.5");
        assert_eq!(at("cpu_util"), "37.5");
        assert_eq!(at("cpu_util_engine"), "");
    }

    #[test]
    fn bidirectional_row_is_the_sum_and_the_streams_are_noted() {
        let mine = BwStats {
            iterations: 100,
            peak_gbps: 5.0,
            avg_gbps: 4.0,
            msg_rate_mpps: 0.1,
        };
        let theirs = BwStats {
            iterations: 90,
            peak_gbps: 3.0,
            avg_gbps: 2.0,
            msg_rate_mpps: 0.05,
        };
        let r = Record::bidirectional(TestKind::WriteBw, "xdp", 65_536, &mine, &theirs);
        assert_eq!(r.bw_gbps, Some(6.0));
        assert_eq!(r.bw_peak_gbps, Some(8.0));
        assert_eq!(r.iterations, 100);
        assert_eq!((r.bw_client_gbps, r.bw_server_gbps), (Some(4.0), Some(2.0)));
        let n = notes(&r, BwUnit::Gigabits);
        assert_eq!(n.len(), 1);
        assert!(
            n[0].contains("client's stream 4.00 Gb/sec + server's stream 2.00 Gb/sec"),
            "{n:?}"
        );
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["bw_server_gbps"], 2.0);
        let one_way = Record::bandwidth(TestKind::WriteBw, "xdp", 65_536, &mine);
        assert!(notes(&one_way, BwUnit::Gigabits).is_empty());
        assert!(serde_json::to_value(&one_way)
            .unwrap()
            .get("bw_server_gbps")
            .is_none());
    }

    #[test]
    fn parameter_block_names_what_ran() {
        let p = Params {
            test: "write_bw".into(),
            transport: "xdp".into(),
            connection: "RC".into(),
            num_of_qps: 1,
            tx_depth: 128,
            interface: Some("xw0".into()),
            queue: Some(0),
            xdp_mode: Some("generic".into()),
            zero_copy: Some(false),
            engine: Some("inline".into()),
            mtu: Some(1500),
            mss: Some(1446),
            tx_markers: Some(true),
            rx_markers: Some(false),
            crc: Some(true),
            mulpdu: Some(1400),
            ..Params::default()
        };
        let b = p.block();
        for want in [
            " Transport       : xdp",
            " XDP mode        : generic",
            " AF_XDP bind     : copy",
            " MSS             : 1446",
            " MPA markers     : tx on, rx off",
            " MPA CRC         : on",
            " TX depth        : 128",
        ] {
            assert!(b.contains(want), "{want:?} missing in\n{b}");
        }
        let k = Params {
            transport: "kernel".into(),
            ..Params::default()
        }
        .block();
        assert!(!k.contains("XDP mode"), "{k}");
        let st = Params {
            iodepth: Some(4),
            rw: Some("randread".into()),
            seed: Some(7),
            store_size: Some(64 << 20),
            ..Params::default()
        }
        .block();
        for want in [
            " I/O depth       : 4",
            " I/O pattern     : randread",
            " Random seed     : 7",
            " Store size      : 67108864",
        ] {
            assert!(st.contains(want), "{want:?} missing in\n{st}");
        }
        assert!(!st.contains("TX depth"), "{st}");
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
