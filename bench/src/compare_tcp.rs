//! compare's ONC RPC over TCP rows: `rpc_read` of 1 MiB from the block store over
//! xwarp's own TCP on the xdp transport, the TCP RDMA option off and on, beside RPC/RDMA on the
//! same transport: what placing READ data by RID saves (the client's CPU time per GB, and
//! throughput), measured in the same rounds as every other cell.

use crate::compare::{median, sorted, CompareRecord, Field};

/// The two TCP cells: (compare's transport name, `--tcp-rdma-option` value).
pub const TCP_CELLS: [(&str, &str); 2] = [("xdp-tcp", "off"), ("xdp-tcp-option", "on")];

/// The extra arguments of a cell (both sides).
pub fn cell_args(option: &str) -> [&str; 4] {
    ["--rpc-transport", "tcp", "--tcp-rdma-option", option]
}

/// The median of each TCP cell over the rounds that measured it (upper median), with the
/// spread; `None` fields where no round did.
pub fn medians(runs: &[CompareRecord]) -> Vec<CompareRecord> {
    TCP_CELLS
        .iter()
        .map(|(name, _)| {
            let these: Vec<&CompareRecord> = runs.iter().filter(|r| r.transport == *name).collect();
            let med = |f: Field| median(&sorted(&these, f));
            let bw = sorted(&these, |r| r.bw_gbps);
            CompareRecord {
                test: "rpc_read".into(),
                transport: (*name).into(),
                bytes: these.first().map_or(1 << 20, |r| r.bytes),
                bw_gbps: med(|r| r.bw_gbps),
                bw_range_gbps: bw.first().zip(bw.last()).map(|(a, b)| [*a, *b]),
                cpu_s_per_gb: med(|r| r.cpu_s_per_gb),
                copies_avoided: these.iter().filter_map(|r| r.copies_avoided).max(),
                ran: these.iter().find_map(|r| r.ran.clone()),
                ..CompareRecord::default()
            }
        })
        .collect()
}

/// The TCP rows as text, beside the RPC/RDMA rpc_read figure on xdp (`rdma_gbps`).
pub fn table(rows: &[CompareRecord], rdma_gbps: Option<f64>) -> String {
    let f = crate::compare::figure;
    let mut out =
        String::from(" rpc_read 1 MiB on xdp     BW[Gb/sec]  client CPU[s/GB]  copies avoided\n");
    out += &format!(" {:<24} {:>11}\n", "RPC/RDMA", f(rdma_gbps, 3));
    for r in rows {
        let name = match r.transport.as_str() {
            "xdp-tcp-option" => "ONC RPC/TCP, option on",
            _ => "ONC RPC/TCP, option off",
        };
        out += &format!(
            " {:<24} {:>11} {:>17} {:>15}\n",
            name,
            f(r.bw_gbps, 3),
            f(r.cpu_s_per_gb, 3),
            r.copies_avoided.map_or("n/a".into(), |c| c.to_string())
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(t: &str, bw: f64, cpu: f64) -> CompareRecord {
        CompareRecord {
            test: "rpc_read".into(),
            transport: t.into(),
            bytes: 1 << 20,
            bw_gbps: Some(bw),
            cpu_s_per_gb: Some(cpu),
            copies_avoided: Some(if t == "xdp-tcp" { 0 } else { 7 }),
            ..CompareRecord::default()
        }
    }

    #[test]
    fn medians_per_cell_and_a_table_with_both_and_rdma() {
        let runs = vec![
            run("xdp-tcp", 1.0, 3.0),
            run("xdp-tcp", 3.0, 1.0),
            run("xdp-tcp", 2.0, 2.0),
            run("xdp-tcp-option", 2.5, 1.5),
        ];
        let m = medians(&runs);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].bw_gbps, m[0].cpu_s_per_gb), (Some(2.0), Some(2.0)));
        assert_eq!(m[0].bw_range_gbps, Some([1.0, 3.0]));
        assert_eq!((m[1].bw_gbps, m[1].copies_avoided), (Some(2.5), Some(7)));
        let t = table(&m, Some(4.0));
        assert!(t.contains("RPC/RDMA") && t.contains("4.000"), "{t}");
        assert!(t.contains("option on") && t.contains("1.500"), "{t}");
        let none = medians(&[]);
        assert_eq!(none[1].bw_gbps, None);
        assert!(table(&none, None).contains("n/a"));
    }
}
