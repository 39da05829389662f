//! compare's queue rows: `write_bw` of 64 KiB on the xdp transport with one
//! queue pair over a one-queue device and with two queue pairs over two queues (`-q 2` at both
//! ends: one engine per queue, a stream thread per queue pair), in the same rounds as every
//! other cell. Neither side is pinned in these two cells, so that two queues may use two cores
//! per side; the one-queue cell runs unpinned too, so the pair compares like with like.

use crate::compare::{cell, median_record, CompareRecord};

/// The two cells: (compare's transport name, queue pairs and queues).
pub const QUEUE_CELLS: [(&str, u32); 2] = [("xdp-1q", 1), ("xdp-2q", 2)];

/// The message size of the queue cells.
pub const BYTES: u64 = 65_536;

/// The extra arguments of a cell (both sides).
pub fn cell_args(qps: u32) -> [String; 2] {
    ["-q".into(), qps.to_string()]
}

/// The median of each queue cell over the rounds that measured it (upper median), with the
/// spread; `None` fields where no round did.
pub fn medians(runs: &[CompareRecord]) -> Vec<CompareRecord> {
    QUEUE_CELLS
        .iter()
        .map(|(name, _)| median_record(runs, "write_bw", name, BYTES))
        .collect()
}

/// The queue rows as text, with the two-queue / one-queue ratio.
pub fn table(rows: &[CompareRecord]) -> String {
    let f = crate::compare::figure;
    let bw = |name: &str| cell(rows, "write_bw", name, BYTES).and_then(|r| r.bw_gbps);
    let (one, two) = (bw("xdp-1q"), bw("xdp-2q"));
    format!(
        " write_bw 64 KiB on xdp, not pinned   BW[Gb/sec]\n {:<36}{:>11}\n {:<36}{:>11}\n {:<36}{:>11}\n",
        "1 queue pair, 1 queue",
        f(one, 3),
        "2 queue pairs, 2 queues (-q 2)",
        f(two, 3),
        "2 queues / 1 queue",
        f(crate::compare::ratio(two, one), 2),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(transport: &str, bw: Option<f64>) -> CompareRecord {
        CompareRecord {
            test: "write_bw".into(),
            transport: transport.into(),
            bytes: BYTES,
            bw_gbps: bw,
            ..CompareRecord::default()
        }
    }

    #[test]
    fn medians_ratio_and_missing_cells() {
        let runs = [
            rec("xdp-1q", Some(2.0)),
            rec("xdp-2q", Some(3.0)),
            rec("xdp-1q", Some(4.0)),
            rec("xdp-2q", Some(5.0)),
            rec("xdp-1q", Some(3.0)),
        ];
        let rows = medians(&runs);
        assert_eq!(rows[0].bw_gbps, Some(3.0));
        assert_eq!(rows[0].bw_range_gbps, Some([2.0, 4.0]));
        assert_eq!(rows[1].bw_gbps, Some(5.0), "upper median of two");
        let t = table(&rows);
        assert!(
            t.lines()
                .any(|l| l.contains("2 queues / 1 queue") && l.ends_with("1.67")),
            "{t}"
        );
        assert!(crate::compare::missing_cells(&rows).is_empty());
        let rows = medians(&runs[..1]);
        assert_eq!(crate::compare::missing_cells(&rows), ["xdp-2q write_bw"]);
        assert!(table(&rows).contains("n/a"));
    }
}
