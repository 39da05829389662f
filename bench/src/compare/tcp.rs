//! compare's ONC RPC over TCP rows: `rpc_read` of 1 MiB from the block store over xwarp's own
//! TCP on the xdp transport, the TCP RDMA option off and on, beside RPC/RDMA on the same
//! transport: what placing READ data by RID saves (the client's CPU time per GB, and
//! throughput), measured in the same rounds as every other cell.

use super::record::{Cell, CompareRecord};
use super::table::{figure, find};
use crate::cli::TestKind;

/// The test of the TCP cells.
pub const TEST: TestKind = TestKind::RpcRead;

/// The message size of the TCP cells.
pub const BYTES: u64 = 1 << 20;

/// The two TCP cells and their `--tcp-rdma-option` value.
pub const CELLS: [(Cell, &str); 2] = [(Cell::XdpTcp, "off"), (Cell::XdpTcpOption, "on")];

/// The extra arguments of a cell (both sides).
pub fn cell_args(option: &str) -> [&str; 4] {
    ["--rpc-transport", "tcp", "--tcp-rdma-option", option]
}

/// The planned cells (test, cell, bytes), for [`super::table::medians`].
pub fn planned() -> impl Iterator<Item = (TestKind, Cell, u64)> {
    CELLS.into_iter().map(|(cell, _)| (TEST, cell, BYTES))
}

/// The TCP rows as text (`rows`: their medians), beside the RPC/RDMA rpc_read figure on xdp
/// (`rdma_gbps`).
pub fn table(rows: &[CompareRecord], rdma_gbps: Option<f64>) -> String {
    let mut out =
        String::from(" rpc_read 1 MiB on xdp     BW[Gb/sec]  client CPU[s/GB]  copies avoided\n");
    out += &format!(" {:<24} {:>11}\n", "RPC/RDMA", figure(rdma_gbps, 3));
    for (cell, name) in [
        (Cell::XdpTcp, "ONC RPC/TCP, option off"),
        (Cell::XdpTcpOption, "ONC RPC/TCP, option on"),
    ] {
        let r = find(rows, TEST, cell, BYTES);
        out += &format!(
            " {:<24} {:>11} {:>17} {:>15}\n",
            name,
            figure(r.and_then(|r| r.bw_gbps), 3),
            figure(r.and_then(|r| r.cpu_s_per_gb), 3),
            r.and_then(|r| r.copies_avoided)
                .map_or("n/a".into(), |c| c.to_string())
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::table::medians;

    fn run(cell: Cell, bw: f64, cpu: f64) -> CompareRecord {
        CompareRecord {
            bw_gbps: Some(bw),
            cpu_s_per_gb: Some(cpu),
            copies_avoided: Some(if cell == Cell::XdpTcp { 0 } else { 7 }),
            ..CompareRecord::new(TEST, cell, BYTES)
        }
    }

    #[test]
    fn medians_per_cell_and_a_table_with_both_and_rdma() {
        let runs = vec![
            run(Cell::XdpTcp, 1.0, 3.0),
            run(Cell::XdpTcp, 3.0, 1.0),
            run(Cell::XdpTcp, 2.0, 2.0),
            run(Cell::XdpTcpOption, 2.5, 1.5),
        ];
        let m = medians(&runs, planned());
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].bw_gbps, m[0].cpu_s_per_gb), (Some(2.0), Some(2.0)));
        assert_eq!(m[0].bw_range_gbps, Some([1.0, 3.0]));
        assert_eq!((m[1].bw_gbps, m[1].copies_avoided), (Some(2.5), Some(7)));
        let t = table(&m, Some(4.0));
        assert!(t.contains("RPC/RDMA") && t.contains("4.000"), "{t}");
        assert!(
            t.lines()
                .any(|l| l.contains("option on") && l.contains("1.500") && l.ends_with('7')),
            "{t}"
        );
        let none = medians(&[], planned());
        assert_eq!(none[1].bw_gbps, None);
        assert!(table(&none, None).contains("n/a"));
    }
}
