//! What every compare table shares: the figure a test is compared by ([`Metric`]), finding a
//! cell among records, the median over rounds, ratios, figures as text, and the planned cells
//! no round measured.

use super::record::{Cell, CompareRecord};
use crate::cli::TestKind;

/// The figure compare compares a test by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// t_typical in microseconds, lower is better.
    Typical,
    /// Average bandwidth in Gb/s.
    Bandwidth,
    /// Message rate in Mpps.
    Rate,
}

impl Metric {
    /// Every metric, in the order the tables and the plot show them.
    pub const ALL: [Metric; 3] = [Metric::Typical, Metric::Bandwidth, Metric::Rate];

    /// The metric of `test`: t_typical for the latency tests, the message rate for `send_bw`
    /// (compare sends small messages there), the bandwidth for the rest.
    pub fn of_test(test: TestKind) -> Metric {
        match test {
            t if t.is_latency() => Metric::Typical,
            TestKind::SendBw => Metric::Rate,
            _ => Metric::Bandwidth,
        }
    }

    /// The figure of a record.
    pub fn of(self, r: &CompareRecord) -> Option<f64> {
        match self {
            Metric::Typical => r.t_typical_us,
            Metric::Bandwidth => r.bw_gbps,
            Metric::Rate => r.msg_rate_mpps,
        }
    }

    /// The spread of the rounds of a record's figure, where the record keeps one.
    pub fn range(self, r: &CompareRecord) -> Option<[f64; 2]> {
        match self {
            Metric::Typical => r.t_typical_range_us,
            Metric::Bandwidth => r.bw_range_gbps,
            Metric::Rate => None,
        }
    }

    /// The column head of the figure, as perftest writes it.
    pub fn column(self) -> &'static str {
        match self {
            Metric::Typical => "t_typical[usec]",
            Metric::Bandwidth => "BW[Gb/sec]",
            Metric::Rate => "MsgRate[Mpps]",
        }
    }

    /// The unit of the figure.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::Typical => "usec",
            Metric::Bandwidth => "Gb/s",
            Metric::Rate => "Mpps",
        }
    }
}

/// The record of cell (`test`, `transport`, `bytes`) among `records`, if there is one.
pub fn find(
    records: &[CompareRecord],
    test: TestKind,
    transport: Cell,
    bytes: u64,
) -> Option<&CompareRecord> {
    records.iter().find(|r| r.is(test, transport, bytes))
}

/// A figure of a record.
type Field = fn(&CompareRecord) -> Option<f64>;

/// The values of figure `f` over `runs` that have it, in ascending order.
fn sorted(runs: &[&CompareRecord], f: Field) -> Vec<f64> {
    let mut v: Vec<f64> = runs.iter().filter_map(|r| f(r)).collect();
    v.sort_by(f64::total_cmp);
    v
}

/// The median of ascending `v` (the upper one of an even count).
fn median(v: &[f64]) -> Option<f64> {
    v.get(v.len() / 2).copied()
}

/// The cell (`test`, `transport`, `bytes`) over the rounds of `runs` that measured it: each
/// figure the median (the upper one of an even count), the spreads, the most copies avoided,
/// the first parameter block; all null where no round did.
pub fn median_record(
    runs: &[CompareRecord],
    test: TestKind,
    transport: Cell,
    bytes: u64,
) -> CompareRecord {
    let these: Vec<&CompareRecord> = runs
        .iter()
        .filter(|r| r.is(test, transport, bytes))
        .collect();
    let med = |f: Field| median(&sorted(&these, f));
    let range = |f: Field| {
        let v = sorted(&these, f);
        Some([*v.first()?, *v.last()?])
    };
    CompareRecord {
        t_typical_us: med(|r| r.t_typical_us),
        p99_us: med(|r| r.p99_us),
        bw_gbps: med(|r| r.bw_gbps),
        msg_rate_mpps: med(|r| r.msg_rate_mpps),
        t_typical_range_us: range(|r| r.t_typical_us),
        bw_range_gbps: range(|r| r.bw_gbps),
        ran: these.iter().find_map(|r| r.ran.clone()),
        cpu_s_per_gb: med(|r| r.cpu_s_per_gb),
        copies_avoided: these.iter().filter_map(|r| r.copies_avoided).max(),
        ..CompareRecord::new(test, transport, bytes)
    }
}

/// One median record per planned cell (`test`, `transport`, `bytes`), in the order given.
pub fn medians(
    runs: &[CompareRecord],
    cells: impl IntoIterator<Item = (TestKind, Cell, u64)>,
) -> Vec<CompareRecord> {
    cells
        .into_iter()
        .map(|(test, transport, bytes)| median_record(runs, test, transport, bytes))
        .collect()
}

/// `a / b` when both are there and b is not zero.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// A figure for compare's tables with `prec` decimals, or `n/a`.
pub fn figure(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "n/a".into(), |v| format!("{v:.prec$}"))
}

/// The cells among planned `records` (medians) that no round measured, as `transport test`:
/// those without their test's [`Metric`].
pub fn missing_cells(records: &[CompareRecord]) -> Vec<String> {
    records
        .iter()
        .filter(|r| Metric::of_test(r.test).of(r).is_none())
        .map(|r| format!("{} {}", r.transport, r.test.name()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(test: TestKind, cell: Cell, typ: Option<f64>, bw: Option<f64>) -> CompareRecord {
        CompareRecord {
            t_typical_us: typ,
            p99_us: typ.map(|t| t * 2.0),
            bw_gbps: bw,
            ..CompareRecord::new(test, cell, 64)
        }
    }

    #[test]
    fn ratios_are_n_a_when_a_side_is_missing() {
        assert_eq!(ratio(Some(3.0), Some(2.0)), Some(1.5));
        assert_eq!(ratio(None, Some(2.0)), None);
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
        assert_eq!(figure(Some(1.23456), 3), "1.235");
        assert_eq!(figure(None, 2), "n/a");
    }

    #[test]
    fn medians_take_the_middle_round_and_stay_null_without_one() {
        use TestKind::WriteLat;
        let runs = vec![
            run(WriteLat, Cell::Xdp, Some(9.0), None),
            run(WriteLat, Cell::Xdp, Some(4.0), None),
            run(WriteLat, Cell::Xdp, Some(5.0), None),
            run(WriteLat, Cell::Raw, Some(2.0), None),
            run(WriteLat, Cell::Raw, Some(3.0), None),
        ];
        let cells = [Cell::Xdp, Cell::Raw, Cell::Kernel].map(|c| (WriteLat, c, 64));
        let m = medians(&runs, cells);
        assert_eq!(m.len(), 3, "one row per planned cell");
        assert_eq!(m[0].t_typical_us, Some(5.0), "median, not mean or best");
        assert_eq!(m[0].p99_us, Some(10.0));
        assert_eq!(m[0].t_typical_range_us, Some([4.0, 9.0]));
        assert_eq!(m[1].t_typical_us, Some(3.0), "upper median of two");
        assert_eq!(m[2].t_typical_us, None, "no round measured it");
        assert_eq!(m[2].t_typical_range_us, None);
        assert_eq!(m[0].bw_gbps, None);
        assert_eq!(find(&m, WriteLat, Cell::Raw, 64), Some(&m[1]));
        assert_eq!(find(&m, WriteLat, Cell::Raw, 65), None);
        assert_eq!(missing_cells(&m), ["kernel write_lat"]);
    }

    #[test]
    fn each_test_is_missing_without_its_own_metric() {
        use TestKind::{RpcRead, SendBw, SendLat, WriteBw};
        assert_eq!(Metric::of_test(SendLat), Metric::Typical);
        assert_eq!(Metric::of_test(WriteBw), Metric::Bandwidth);
        assert_eq!(Metric::of_test(RpcRead), Metric::Bandwidth);
        assert_eq!(Metric::of_test(SendBw), Metric::Rate);
        let rate_only = CompareRecord {
            msg_rate_mpps: Some(1.0),
            ..CompareRecord::new(SendBw, Cell::Linux, 64)
        };
        let bw_only = CompareRecord {
            bw_gbps: Some(1.0),
            ..CompareRecord::new(SendBw, Cell::Xdp, 64)
        };
        let lat = run(SendLat, Cell::LinuxPoll, Some(1.0), None);
        let no_lat = run(SendLat, Cell::Kernel, None, Some(3.0));
        assert_eq!(
            missing_cells(&[rate_only, bw_only, lat, no_lat]),
            ["xdp send_bw", "kernel send_lat"]
        );
    }

    #[test]
    fn the_tcp_cells_keep_cpu_time_and_the_most_copies_avoided() {
        let tcp = |bw: f64, cpu: f64, copies: u64| CompareRecord {
            bw_gbps: Some(bw),
            cpu_s_per_gb: Some(cpu),
            copies_avoided: Some(copies),
            ..CompareRecord::new(TestKind::RpcRead, Cell::XdpTcpOption, 64)
        };
        let runs = [tcp(1.0, 3.0, 5), tcp(3.0, 1.0, 9), tcp(2.0, 2.0, 7)];
        let m = median_record(&runs, TestKind::RpcRead, Cell::XdpTcpOption, 64);
        assert_eq!((m.bw_gbps, m.cpu_s_per_gb), (Some(2.0), Some(2.0)));
        assert_eq!(m.bw_range_gbps, Some([1.0, 3.0]));
        assert_eq!(m.copies_avoided, Some(9));
    }
}
