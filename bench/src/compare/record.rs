//! One row of the compare JSON ([`CompareRecord`]) and what names its cell: the test, the size
//! and what it ran over ([`Cell`]).

use serde::{Deserialize, Serialize};

use crate::cli::TestKind;
use crate::report::{Params, Record};

/// What a compare record was measured over: a column of the table (raw AF_XDP frames, the xdp
/// and kernel transports, Linux TCP) or a cell beside it. Its name is the JSON's `transport`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub enum Cell {
    /// Raw AF_XDP frames (`raw_lat`, `raw_bw`): the floor of this path.
    Raw,
    /// The xdp transport.
    Xdp,
    /// The kernel transport.
    Kernel,
    /// Linux TCP (sockperf as shipped, blocking; iperf3).
    Linux,
    /// Linux TCP with sockperf's sockets non-blocking at both ends (the polling rows).
    LinuxPoll,
    /// The xdp transport, one queue pair over one queue, not pinned (the queue rows).
    XdpOneQueue,
    /// The xdp transport, two queue pairs over two queues, not pinned (the queue rows).
    XdpTwoQueues,
    /// The block store over ONC RPC on xwarp's TCP (xdp), the TCP RDMA option off.
    XdpTcp,
    /// The block store over ONC RPC on xwarp's TCP (xdp), the TCP RDMA option on.
    XdpTcpOption,
}

impl Cell {
    /// Every cell, the table's columns first.
    pub const ALL: [Cell; 9] = [
        Cell::Raw,
        Cell::Xdp,
        Cell::Kernel,
        Cell::Linux,
        Cell::LinuxPoll,
        Cell::XdpOneQueue,
        Cell::XdpTwoQueues,
        Cell::XdpTcp,
        Cell::XdpTcpOption,
    ];

    /// The table's columns, in order.
    pub const TABLE: [Cell; 4] = [Cell::Raw, Cell::Xdp, Cell::Kernel, Cell::Linux];

    /// The name printed and written to JSON (`transport`).
    pub fn name(self) -> &'static str {
        match self {
            Cell::Raw => "raw",
            Cell::Xdp => "xdp",
            Cell::Kernel => "kernel",
            Cell::Linux => "linux",
            Cell::LinuxPoll => "linux-poll",
            Cell::XdpOneQueue => "xdp-1q",
            Cell::XdpTwoQueues => "xdp-2q",
            Cell::XdpTcp => "xdp-tcp",
            Cell::XdpTcpOption => "xdp-tcp-option",
        }
    }

    /// The cell of a JSON `transport` name.
    pub fn from_name(name: &str) -> Option<Cell> {
        Cell::ALL.into_iter().find(|c| c.name() == name)
    }
}

impl std::fmt::Display for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl From<Cell> for &'static str {
    fn from(c: Cell) -> Self {
        c.name()
    }
}

impl TryFrom<String> for Cell {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        Cell::from_name(&s).ok_or_else(|| format!("unknown compare transport {s:?}"))
    }
}

/// One row of the compare JSON: a cell's figures (a run's, or the median over the rounds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareRecord {
    /// The test as compare names it (`write_lat`, ...).
    pub test: TestKind,
    /// What it ran over.
    pub transport: Cell,
    /// Message size.
    pub bytes: u64,
    /// Median latency (latency tests).
    pub t_typical_us: Option<f64>,
    /// 99th percentile (latency tests).
    pub p99_us: Option<f64>,
    /// Average bandwidth (bandwidth tests).
    pub bw_gbps: Option<f64>,
    /// Message rate (bandwidth tests).
    pub msg_rate_mpps: Option<f64>,
    /// The spread of the rounds: the smallest and largest t_typical (latency tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_typical_range_us: Option<[f64; 2]>,
    /// The spread of the rounds: the smallest and largest bandwidth (bandwidth tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bw_range_gbps: Option<[f64; 2]>,
    /// What the run that measured this ran on (its parameter block; the first round's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ran: Option<Params>,
    /// The client's CPU time per GB (the ONC RPC over TCP cells).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_s_per_gb: Option<f64>,
    /// Octets the TCP RDMA option placed without a copy (the ONC RPC over TCP cells).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copies_avoided: Option<u64>,
    /// The testbed's MTU when this was measured (compare runs the plan at each MTU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
}

impl CompareRecord {
    /// The cell (`test`, `transport`, `bytes`) with no figure yet.
    pub fn new(test: TestKind, transport: Cell, bytes: u64) -> Self {
        Self {
            test,
            transport,
            bytes,
            t_typical_us: None,
            p99_us: None,
            bw_gbps: None,
            msg_rate_mpps: None,
            t_typical_range_us: None,
            bw_range_gbps: None,
            ran: None,
            cpu_s_per_gb: None,
            copies_avoided: None,
            mtu: None,
        }
    }

    /// The cell's figures from a bench run's record `r` (none without one). The storage
    /// tests' records have call latencies too; compare shows their bandwidth.
    pub fn from_record(test: TestKind, transport: Cell, r: Option<&Record>, bytes: u64) -> Self {
        let lat = r.filter(|_| test.is_latency());
        Self {
            t_typical_us: lat.and_then(|r| r.t_typical_us),
            p99_us: lat.and_then(|r| r.p99_us),
            bw_gbps: r.and_then(|r| r.bw_gbps),
            msg_rate_mpps: r.and_then(|r| r.msg_rate_mpps),
            ran: r.and_then(|r| r.params.clone()),
            cpu_s_per_gb: r.and_then(|r| r.cpu_s_per_gb),
            copies_avoided: r.and_then(|r| r.copies_avoided),
            ..Self::new(test, transport, bytes)
        }
    }

    /// Whether this is the cell (`test`, `transport`, `bytes`).
    pub fn is(&self, test: TestKind, transport: Cell, bytes: u64) -> bool {
        self.test == test && self.transport == transport && self.bytes == bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON keeps the names earlier files used, so they still read.
    #[test]
    fn cells_and_tests_are_written_by_their_names_and_read_back() {
        let names: Vec<&str> = Cell::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(
            names,
            [
                "raw",
                "xdp",
                "kernel",
                "linux",
                "linux-poll",
                "xdp-1q",
                "xdp-2q",
                "xdp-tcp",
                "xdp-tcp-option"
            ]
        );
        for c in Cell::ALL {
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.name()));
            assert_eq!(serde_json::from_str::<Cell>(&json).unwrap(), c);
        }
        let e = serde_json::from_str::<Cell>("\"xdp-3q\"").unwrap_err();
        assert!(e.to_string().contains("xdp-3q"), "{e}");
        let old = r#"{"test":"send_lat","transport":"linux-poll","bytes":64,
            "t_typical_us":7.5,"p99_us":null,"bw_gbps":null,"msg_rate_mpps":null}"#;
        let r: CompareRecord = serde_json::from_str(old).unwrap();
        assert!(r.is(TestKind::SendLat, Cell::LinuxPoll, 64));
        assert_eq!(r.t_typical_us, Some(7.5));
        assert!(serde_json::from_str::<CompareRecord>(&old.replace("send_lat", "nap")).is_err());
    }

    #[test]
    fn compare_json_has_exactly_its_keys_with_nulls_where_unmeasured() {
        let r = CompareRecord::from_record(TestKind::SendBw, Cell::Xdp, None, 64);
        let v = serde_json::to_value(&r).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "bw_gbps",
                "bytes",
                "msg_rate_mpps",
                "p99_us",
                "t_typical_us",
                "test",
                "transport"
            ]
        );
        assert!(v["bw_gbps"].is_null());
        assert_eq!(v["bytes"], 64);
        assert_eq!(v["test"], "send_bw");
        assert_eq!(v["transport"], "xdp");
    }
}
