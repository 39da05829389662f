//! compare's polling rows: the latency tests over Linux TCP with sockperf's sockets
//! non-blocking at both ends (`--nonblocked`: its server polls its socket without sleeping), in
//! the same rounds as every other cell, beside xdp's figure. The table's `linux` column runs
//! sockperf as shipped, blocking, so on a host where waking a sleeping thread is dear it
//! measures the wake-up more than TCP; a bypass stack polls, and so do these rows.

use crate::compare::{cell, median_record, ratio, CompareRecord, PLAN};

/// The transport name of the polling cells.
pub const TRANSPORT: &str = "linux-poll";

/// The plan's latency tests, the ones compare runs a polling cell for: (test name, bytes).
fn cells() -> impl Iterator<Item = (&'static str, u64)> {
    PLAN.iter()
        .filter(|p| p.0.is_latency())
        .map(|p| (p.0.name(), p.1))
}

/// The median of each polling cell over the rounds that measured it (upper median), with the
/// spread; `None` fields where no round did.
pub fn medians(runs: &[CompareRecord]) -> Vec<CompareRecord> {
    cells()
        .map(|(test, bytes)| median_record(runs, test, TRANSPORT, bytes))
        .collect()
}

/// The polling rows as text: each test's figure and xdp's over it (`table` holds the plan's
/// medians, where xdp's figures are).
pub fn table(rows: &[CompareRecord], table: &[CompareRecord]) -> String {
    let f = crate::compare::figure;
    let mut out = format!(
        " Linux TCP, sockets non-blocking (sockperf --nonblocked)\n {:<10}{:>9}  {:<16}{:>10}{:>11}\n",
        "test", "#bytes", "metric", "linux-poll", "xdp/that"
    );
    for r in rows {
        let xdp = cell(table, &r.test, "xdp", r.bytes).and_then(|x| x.t_typical_us);
        out.push_str(&format!(
            " {:<10}{:>9}  {:<16}{:>10}{:>11}\n",
            r.test,
            r.bytes,
            "t_typical[usec]",
            f(r.t_typical_us, 3),
            f(ratio(xdp, r.t_typical_us), 2),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(test: &str, transport: &str, t: Option<f64>) -> CompareRecord {
        CompareRecord {
            test: test.into(),
            transport: transport.into(),
            bytes: 64,
            t_typical_us: t,
            ..CompareRecord::default()
        }
    }

    #[test]
    fn medians_ratios_and_missing_cells() {
        let runs = [
            rec("write_lat", TRANSPORT, Some(5.0)),
            rec("write_lat", TRANSPORT, Some(4.0)),
            rec("write_lat", "linux", Some(40.0)),
            rec("write_lat", TRANSPORT, Some(7.0)),
            rec("send_lat", TRANSPORT, Some(6.0)),
            rec("send_lat", TRANSPORT, Some(8.0)),
        ];
        let rows = medians(&runs);
        assert_eq!(rows.len(), 2, "write_lat and send_lat");
        assert_eq!(rows[0].test, "write_lat");
        assert_eq!(
            rows[0].t_typical_us,
            Some(5.0),
            "the blocking run is not one"
        );
        assert_eq!(rows[0].t_typical_range_us, Some([4.0, 7.0]));
        assert_eq!(rows[1].t_typical_us, Some(8.0), "upper median of two");
        assert!(crate::compare::missing_cells(&rows).is_empty());
        let plan = [
            rec("write_lat", "xdp", Some(4.0)),
            rec("send_lat", "xdp", None),
        ];
        let t = table(&rows, &plan);
        assert!(
            t.lines()
                .any(|l| l.starts_with(" write_lat") && l.ends_with("0.80")),
            "{t}"
        );
        assert!(
            t.lines()
                .any(|l| l.starts_with(" send_lat") && l.ends_with("n/a")),
            "{t}"
        );
        let rows = medians(&runs[..2]);
        assert_eq!(
            crate::compare::missing_cells(&rows),
            ["linux-poll send_lat"]
        );
    }
}
