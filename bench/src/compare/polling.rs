//! compare's polling rows: the latency tests over Linux TCP with sockperf's sockets
//! non-blocking at both ends (`--nonblocked`: its server polls its socket without sleeping), in
//! the same rounds as every other cell, beside xdp's figure. The table's `linux` column runs
//! sockperf as shipped, blocking, so on a host where waking a sleeping thread is dear it
//! measures the wake-up more than TCP; a bypass stack polls, and so do these rows.

use super::record::{Cell, CompareRecord};
use super::table::{figure, find, ratio, Metric};

/// The cell of the polling rows.
pub const CELL: Cell = Cell::LinuxPoll;

/// The polling rows as text (`rows`: their medians), each test's figure and xdp's over it
/// (`table`: the plan's medians, where xdp's figures are).
pub fn table(rows: &[CompareRecord], table: &[CompareRecord]) -> String {
    let mut out = format!(
        " Linux TCP, sockets non-blocking (sockperf --nonblocked)\n {:<10}{:>9}  {:<16}{:>10}{:>11}\n",
        "test",
        "#bytes",
        "metric",
        CELL.name(),
        "xdp/that"
    );
    for r in rows {
        let xdp = find(table, r.test, Cell::Xdp, r.bytes).and_then(|x| x.t_typical_us);
        out.push_str(&format!(
            " {:<10}{:>9}  {:<16}{:>10}{:>11}\n",
            r.test.name(),
            r.bytes,
            Metric::Typical.column(),
            figure(r.t_typical_us, 3),
            figure(ratio(xdp, r.t_typical_us), 2),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::TestKind::{self, SendLat, WriteLat};
    use crate::compare::table::{medians, missing_cells};

    fn rec(test: TestKind, cell: Cell, t: Option<f64>) -> CompareRecord {
        CompareRecord {
            t_typical_us: t,
            ..CompareRecord::new(test, cell, 64)
        }
    }

    #[test]
    fn medians_ratios_and_missing_cells() {
        let runs = [
            rec(WriteLat, CELL, Some(5.0)),
            rec(WriteLat, CELL, Some(4.0)),
            rec(WriteLat, Cell::Linux, Some(40.0)),
            rec(WriteLat, CELL, Some(7.0)),
            rec(SendLat, CELL, Some(6.0)),
            rec(SendLat, CELL, Some(8.0)),
        ];
        let planned = [(WriteLat, CELL, 64), (SendLat, CELL, 64)];
        let rows = medians(&runs, planned);
        assert_eq!(rows.len(), 2, "write_lat and send_lat");
        assert_eq!(rows[0].test, WriteLat);
        assert_eq!(
            rows[0].t_typical_us,
            Some(5.0),
            "the blocking run is not one"
        );
        assert_eq!(rows[0].t_typical_range_us, Some([4.0, 7.0]));
        assert_eq!(rows[1].t_typical_us, Some(8.0), "upper median of two");
        assert!(missing_cells(&rows).is_empty());
        let plan = [
            rec(WriteLat, Cell::Xdp, Some(4.0)),
            rec(SendLat, Cell::Xdp, None),
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
        let rows = medians(&runs[..2], planned);
        assert_eq!(missing_cells(&rows), ["linux-poll send_lat"]);
    }
}
