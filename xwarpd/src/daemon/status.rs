//! `xwarpd status`: what a running daemon serves, for people (the metrics are for machines).
//!
//! ```text
//! xwarpd 0.1.0, up 1h 2m 3s
//! transport   xdp on eth1 queue 0: native XDP, zero-copy, MTU 1500, MSS 1460, engine threaded,
//!             TCP checksums by the device
//! store       1 connection open (64 at most), 12 accepted, 0 refused, 0 closed idle
//! echo        3 connections, 10 messages, 0 refused
//! totals      rx 1.2 MiB, tx 3.4 MiB; reads 10, writes 3, commits 1; 0 errors
//! xdp program 1234 redirected, 56 passed, 0 malformed, 0 without socket, 0 fragments
//! ```

use std::fmt::Write as _;

use super::metrics::Snapshot;
use dataplane::{AttachMode, EngineMode, TxChecksumOffload};

/// `n` bytes with a binary unit, one decimal.
fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

fn duration(s: u64) -> String {
    let (h, m, s) = (s / 3600, s / 60 % 60, s % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m {s}s"),
        _ => format!("{h}h {m}m {s}s"),
    }
}

fn plural(n: usize, one: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {one}s")
    }
}

impl Snapshot {
    /// The summary `xwarpd status` prints; `max_connections` is the store's cap, if it runs.
    pub fn to_status(&self, max_connections: Option<u32>) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "xwarpd {}, up {}",
            env!("CARGO_PKG_VERSION"),
            duration(self.uptime_seconds)
        );
        match &self.xdp_info {
            Some(x) => {
                let attach = match x.attach_mode {
                    AttachMode::Native => "native XDP",
                    AttachMode::Generic => "generic XDP",
                };
                let copy = if x.zero_copy {
                    "zero-copy"
                } else {
                    "copy mode"
                };
                let engine = match x.mode {
                    EngineMode::Inline => "inline".to_string(),
                    EngineMode::Threaded => "threaded".to_string(),
                    EngineMode::Pinned(c) => format!("pinned to CPU {c}"),
                };
                let queues = match x.queues {
                    0 | 1 => format!("queue {}", x.queue),
                    n => format!(
                        "queues {}-{} (an engine each, {})",
                        x.queue,
                        x.queue + n - 1,
                        if x.lanes_follow_rss {
                            "flows by the NIC's RSS"
                        } else {
                            "flows by symmetric hash"
                        }
                    ),
                };
                let checksums = match x.tx_checksum {
                    TxChecksumOffload::Device => "TCP checksums by the device",
                    TxChecksumOffload::Kernel => "TCP checksums by the kernel",
                    TxChecksumOffload::Off | TxChecksumOffload::Auto => {
                        "TCP checksums by the engine"
                    }
                };
                let _ = writeln!(
                    o,
                    "transport   xdp on {} {queues}: {attach}, {copy}, MTU {}, MSS {}, engine {engine}, {checksums}",
                    x.interface, x.mtu, x.mss
                );
            }
            None => {
                let _ = writeln!(o, "transport   {} (kernel TCP sockets)", self.transport);
            }
        }
        let st = &self.store;
        if let Some(max) = max_connections {
            let _ = writeln!(
                o,
                "store       {} open ({max} at most), {} accepted, {} refused, {} evicted silent, {} closed idle",
                plural(st.open.len(), "connection"),
                st.accepted,
                st.refused_full + st.refused_not_allowed + st.refused_source_share,
                st.evicted,
                st.idle_closed
            );
            for c in &st.open {
                let _ = writeln!(
                    o,
                    "  conn {:<5} {:<22} reads {}, writes {}, commits {}",
                    c.id, c.peer, c.counts.reads, c.counts.writes, c.counts.commits
                );
            }
        } else {
            let _ = writeln!(o, "store       not served");
        }
        let _ = writeln!(
            o,
            "echo        {} connections, {} messages, {} refused",
            self.echo_connections, self.echo_messages, self.echo_refused
        );
        let d = &self.device;
        let t = &st.totals;
        let _ = writeln!(
            o,
            "totals      rx {}, tx {}; reads {}, writes {}, commits {}; {} errors",
            bytes(d.rx_bytes),
            bytes(d.tx_bytes),
            t.reads,
            t.writes,
            t.commits,
            d.connection_errors + t.errors
        );
        if let Some(x) = &self.xdp_counters {
            let _ = writeln!(
                o,
                "xdp program {} redirected, {} passed, {} malformed, {} without socket, {} fragments",
                x.redirected, x.passed, x.malformed, x.steered_no_socket, x.fragments
            );
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{CallCounts, ConnSnapshot, StoreSnapshot};
    use dataplane::XdpInfo;

    #[test]
    fn status_names_transport_xdp_mode_zero_copy_queue_connections_and_totals() {
        let s = Snapshot {
            transport: "xdp",
            uptime_seconds: 3723,
            xdp_info: Some(XdpInfo {
                interface: "xw0".into(),
                queue: 2,
                queues: 1,
                lanes_follow_rss: false,
                attach_mode: AttachMode::Generic,
                zero_copy: false,
                mtu: 1500,
                mss: 1460,
                mode: EngineMode::Pinned(1),
                tx_checksum: dataplane::TxChecksumOffload::Off,
            }),
            store: StoreSnapshot {
                open: vec![ConnSnapshot {
                    id: 4,
                    peer: "198.18.0.2:40001".into(),
                    counts: CallCounts {
                        reads: 5,
                        ..CallCounts::default()
                    },
                }],
                accepted: 9,
                totals: CallCounts {
                    writes: 6,
                    ..CallCounts::default()
                },
                ..StoreSnapshot::default()
            },
            device: dataplane::CounterSnapshot {
                rx_bytes: 3 << 20,
                ..Default::default()
            },
            ..Snapshot::default()
        };
        let t = s.to_status(Some(64));
        for want in [
            "up 1h 2m 3s",
            "xdp on xw0 queue 2: generic XDP, copy mode, MTU 1500, MSS 1460, engine pinned to CPU 1, TCP checksums by the engine",
            "1 connection open (64 at most), 9 accepted",
            "conn 4",
            "198.18.0.2:40001",
            "rx 3.0 MiB",
            "writes 6",
        ] {
            assert!(t.contains(want), "{want:?} missing in\n{t}");
        }
        let mut two = s.clone();
        if let Some(x) = two.xdp_info.as_mut() {
            x.queues = 2;
        }
        let t = two.to_status(None);
        assert!(
            t.contains(
                "xdp on xw0 queues 2-3 (an engine each, flows by symmetric hash): generic XDP"
            ),
            "{t}"
        );
        let k = Snapshot {
            transport: "kernel",
            ..Snapshot::default()
        }
        .to_status(None);
        assert!(k.contains("transport   kernel"), "{k}");
        assert!(k.contains("store       not served"), "{k}");
        assert!(!k.contains("xdp program"), "{k}");
    }
}
