//! compare's queue rows: `write_bw` of 64 KiB on the xdp transport with one queue pair over a
//! one-queue device and with two queue pairs over two queues (`-q 2` at both ends: one engine
//! per queue, a stream thread per queue pair), in the same rounds as every other cell. Neither
//! side is pinned in these two cells, so that two queues may use two cores per side; the
//! one-queue cell runs unpinned too, so the pair compares like with like.

use super::record::{Cell, CompareRecord};
use super::table::{figure, find, ratio};
use crate::cli::TestKind;

/// The test of the queue cells.
pub const TEST: TestKind = TestKind::WriteBw;

/// The message size of the queue cells.
pub const BYTES: u64 = 65_536;

/// The two cells and their queue pairs (and queues).
pub const CELLS: [(Cell, u32); 2] = [(Cell::XdpOneQueue, 1), (Cell::XdpTwoQueues, 2)];

/// The extra arguments of a cell (both sides).
pub fn cell_args(qps: u32) -> [String; 2] {
    ["-q".into(), qps.to_string()]
}

/// The planned cells (test, cell, bytes), for [`super::table::medians`].
pub fn planned() -> impl Iterator<Item = (TestKind, Cell, u64)> {
    CELLS.into_iter().map(|(cell, _)| (TEST, cell, BYTES))
}

/// The queue rows as text (`rows`: their medians), with the two-queue / one-queue ratio.
pub fn table(rows: &[CompareRecord]) -> String {
    let bw = |cell| find(rows, TEST, cell, BYTES).and_then(|r| r.bw_gbps);
    let (one, two) = (bw(Cell::XdpOneQueue), bw(Cell::XdpTwoQueues));
    format!(
        " write_bw 64 KiB on xdp, not pinned   BW[Gb/sec]\n {:<36}{:>11}\n {:<36}{:>11}\n {:<36}{:>11}\n",
        "1 queue pair, 1 queue",
        figure(one, 3),
        "2 queue pairs, 2 queues (-q 2)",
        figure(two, 3),
        "2 queues / 1 queue",
        figure(ratio(two, one), 2),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::table::{medians, missing_cells};

    fn rec(cell: Cell, bw: Option<f64>) -> CompareRecord {
        CompareRecord {
            bw_gbps: bw,
            ..CompareRecord::new(TEST, cell, BYTES)
        }
    }

    #[test]
    fn medians_ratio_and_missing_cells() {
        let runs = [
            rec(Cell::XdpOneQueue, Some(2.0)),
            rec(Cell::XdpTwoQueues, Some(3.0)),
            rec(Cell::XdpOneQueue, Some(4.0)),
            rec(Cell::XdpTwoQueues, Some(5.0)),
            rec(Cell::XdpOneQueue, Some(3.0)),
        ];
        let rows = medians(&runs, planned());
        assert_eq!(rows[0].bw_gbps, Some(3.0));
        assert_eq!(rows[0].bw_range_gbps, Some([2.0, 4.0]));
        assert_eq!(rows[1].bw_gbps, Some(5.0), "upper median of two");
        let t = table(&rows);
        assert!(
            t.lines()
                .any(|l| l.contains("2 queues / 1 queue") && l.ends_with("1.67")),
            "{t}"
        );
        assert!(missing_cells(&rows).is_empty());
        let rows = medians(&runs[..1], planned());
        assert_eq!(missing_cells(&rows), ["xdp-2q write_bw"]);
        assert!(table(&rows).contains("n/a"));
    }
}
