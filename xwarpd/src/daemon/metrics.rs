//! Counters in the Prometheus text exposition format, and a tiny HTTP responder serving them
//! (any `GET` answers the metrics; one request per connection).

use super::worker::Worker;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use crate::store::{CallCounts, Refusal, StoreSnapshot};
use dataplane::CounterSnapshot;
use endpoint::EndpointCounters;

/// Everything the daemon reports, at one instant.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Transport name (`kernel`, `xdp`).
    pub transport: &'static str,
    /// The device's (engine's) counters.
    pub device: CounterSnapshot,
    /// The store's counters (totals and open connections).
    pub store: StoreSnapshot,
    /// Echo listener counters: connections and messages echoed.
    pub echo_connections: u64,
    /// Messages echoed.
    pub echo_messages: u64,
    /// Echo connections rejected at the listener's connection cap.
    pub echo_refused: u64,
    /// Seconds since start.
    pub uptime_seconds: u64,
    /// Per-engine counters of the AF_XDP transport (empty on the kernel transport), by queue.
    pub engines: Vec<(u32, EndpointCounters)>,
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Snapshot {
    /// Renders the Prometheus text format (version 0.0.4).
    pub fn to_prometheus(&self) -> String {
        let mut o = String::new();
        let t = self.transport;
        let metric = |o: &mut String, name: &str, kind: &str, help: &str, v: u64| {
            let _ = writeln!(o, "# HELP xwarpd_{name} {help}");
            let _ = writeln!(o, "# TYPE xwarpd_{name} {kind}");
            let _ = writeln!(o, "xwarpd_{name}{{transport=\"{t}\"}} {v}");
        };
        let d = &self.device;
        metric(
            &mut o,
            "uptime_seconds",
            "gauge",
            "Seconds since the daemon started.",
            self.uptime_seconds,
        );
        for (name, help, v) in [
            (
                "tcp_accepted_total",
                "TCP connections accepted by listeners.",
                d.tcp_accepted,
            ),
            (
                "mpa_established_total",
                "MPA connections established.",
                d.mpa_established,
            ),
            (
                "startup_malformed_total",
                "Malformed MPA startup frames.",
                d.startup_malformed,
            ),
            (
                "startup_timeouts_total",
                "MPA startups that timed out.",
                d.startup_timeouts,
            ),
            (
                "startup_rejected_total",
                "MPA connections rejected.",
                d.startup_rejected,
            ),
            ("crc_errors_total", "FPDUs with a bad CRC.", d.crc_errors),
            ("marker_errors_total", "MPA marker errors.", d.marker_errors),
            (
                "framing_errors_total",
                "Other framing errors.",
                d.framing_errors,
            ),
            (
                "terminates_sent_total",
                "Terminate messages sent.",
                d.terminates_sent,
            ),
            (
                "terminates_received_total",
                "Terminate messages received.",
                d.terminates_received,
            ),
            (
                "connection_errors_total",
                "Connections that ended in error.",
                d.connection_errors,
            ),
            ("tx_bytes_total", "Bytes sent.", d.tx_bytes),
            ("rx_bytes_total", "Bytes received.", d.rx_bytes),
            (
                "echo_connections_total",
                "Connections of the echo listeners.",
                self.echo_connections,
            ),
            (
                "echo_messages_total",
                "Sends echoed by the echo listeners.",
                self.echo_messages,
            ),
            (
                "echo_refused_total",
                "Echo connections rejected at a listener's connection cap.",
                self.echo_refused,
            ),
        ] {
            metric(&mut o, name, "counter", help, v);
        }
        let st = &self.store;
        let _ = writeln!(
            o,
            "# HELP xwarpd_store_connections Store connections now open."
        );
        let _ = writeln!(o, "# TYPE xwarpd_store_connections gauge");
        let _ = writeln!(o, "xwarpd_store_connections {}", st.open.len());
        for (name, help, v) in [
            (
                "store_connections_accepted_total",
                "Store connections accepted.",
                st.accepted,
            ),
            (
                "store_connections_idle_closed_total",
                "Store connections closed for having had no call within the idle timeout.",
                st.idle_closed,
            ),
        ] {
            let _ = writeln!(o, "# HELP xwarpd_{name} {help}");
            let _ = writeln!(o, "# TYPE xwarpd_{name} counter");
            let _ = writeln!(o, "xwarpd_{name} {v}");
        }
        let _ = writeln!(
            o,
            "# HELP xwarpd_store_connections_refused_total Store connections refused: the peer is in no allowed network, or the server was at its connection cap."
        );
        let _ = writeln!(o, "# TYPE xwarpd_store_connections_refused_total counter");
        for (reason, v) in [
            (Refusal::NotAllowed, st.refused_not_allowed),
            (Refusal::Full, st.refused_full),
        ] {
            let _ = writeln!(
                o,
                "xwarpd_store_connections_refused_total{{reason=\"{}\"}} {v}",
                reason.label()
            );
        }
        type Field = fn(&CallCounts) -> u64;
        let calls: [(&str, &str, Field); 8] = [
            ("reads_total", "READ calls.", |c| c.reads),
            ("writes_total", "WRITE calls.", |c| c.writes),
            ("commits_total", "COMMIT calls.", |c| c.commits),
            ("other_calls_total", "GETATTR and NULL calls.", |c| {
                c.other_calls
            }),
            ("read_bytes_total", "Bytes returned by READ.", |c| {
                c.bytes_read
            }),
            ("written_bytes_total", "Bytes stored by WRITE.", |c| {
                c.bytes_written
            }),
            (
                "errors_total",
                "Calls answered with a non-OK status.",
                |c| c.errors,
            ),
            (
                "refused_total",
                "Messages refused (RDMA_ERROR, RPC rejections).",
                |c| c.refused,
            ),
        ];
        // Service totals (closed connections included), then one series per OPEN connection:
        // a connection's series go when it closes, so there are at most as many as the cap.
        for (name, help, f) in calls {
            let _ = writeln!(o, "# HELP xwarpd_store_{name} {help} All connections.");
            let _ = writeln!(o, "# TYPE xwarpd_store_{name} counter");
            let _ = writeln!(o, "xwarpd_store_{name} {}", f(&st.totals));
            let _ = writeln!(
                o,
                "# HELP xwarpd_store_connection_{name} {help} Per open connection."
            );
            let _ = writeln!(o, "# TYPE xwarpd_store_connection_{name} counter");
            for c in &st.open {
                let _ = writeln!(
                    o,
                    "xwarpd_store_connection_{name}{{conn=\"{}\",peer=\"{}\"}} {}",
                    c.id,
                    escape(&c.peer),
                    f(&c.counts)
                );
            }
        }
        type EngineField = fn(&EndpointCounters) -> u64;
        let per_engine: [(&str, &str, &str, EngineField); 14] = [
            (
                "engine_rx_packets_total",
                "counter",
                "Frames received.",
                |e| e.rx_packets,
            ),
            ("engine_tx_packets_total", "counter", "Frames sent.", |e| {
                e.tx_packets
            }),
            (
                "engine_rx_bytes_total",
                "counter",
                "Octets received.",
                |e| e.rx_bytes,
            ),
            ("engine_tx_bytes_total", "counter", "Octets sent.", |e| {
                e.tx_bytes
            }),
            (
                "engine_retransmissions_total",
                "counter",
                "TCP segments retransmitted.",
                |e| e.retransmissions,
            ),
            (
                "engine_ooo_fpdus_placed_total",
                "counter",
                "FPDUs placed out of order, before their gap filled.",
                |e| e.ooo_fpdus_placed,
            ),
            (
                "engine_ooo_bytes_max",
                "gauge",
                "Most octets one connection held out of order at any time.",
                |e| e.ooo_bytes_max,
            ),
            (
                "engine_crc_errors_total",
                "counter",
                "MPA CRC errors.",
                |e| e.crc_errors,
            ),
            (
                "engine_framing_errors_total",
                "counter",
                "Other MPA framing errors (marker, length, alignment).",
                |e| e.framing_errors,
            ),
            (
                "engine_terminates_total",
                "counter",
                "Terminates sent and received.",
                |e| e.terminates_sent + e.terminates_received,
            ),
            (
                "engine_drops_total",
                "counter",
                "Frames dropped: not ours, no flow or listener, or malformed.",
                |e| e.drops + e.malformed,
            ),
            (
                "engine_malformed_total",
                "counter",
                "Malformed frames (bad Ethernet, IP or TCP header or checksum); part of drops.",
                |e| e.malformed,
            ),
            (
                "engine_tx_stalls_total",
                "counter",
                "Frames not sent for want of a transmit buffer or a neighbour's MAC.",
                |e| e.tx_no_buffer + e.no_neighbour,
            ),
            (
                "engine_connections_opened_total",
                "counter",
                "TCP connections established by the engine.",
                |e| e.connections_opened,
            ),
        ];
        if !self.engines.is_empty() {
            for (name, kind, help, f) in per_engine {
                let _ = writeln!(o, "# HELP xwarpd_{name} {help} Per engine (queue).");
                let _ = writeln!(o, "# TYPE xwarpd_{name} {kind}");
                for (q, e) in &self.engines {
                    let _ = writeln!(o, "xwarpd_{name}{{queue=\"{q}\"}} {}", f(e));
                }
            }
        }
        o
    }
}

/// The metrics endpoint: a thread answering HTTP GETs with [`Snapshot::to_prometheus`].
#[derive(Debug)]
pub struct MetricsServer {
    local: SocketAddr,
    _worker: Worker,
}

impl MetricsServer {
    /// Binds `addr` and serves what `snapshot` returns.
    pub fn start(
        addr: SocketAddr,
        snapshot: impl Fn() -> Snapshot + Send + 'static,
    ) -> std::io::Result<Self> {
        let l = TcpListener::bind(addr)?;
        l.set_nonblocking(true)?;
        let local = l.local_addr()?;
        let worker = Worker::spawn("xwarpd-metrics", move |stop| {
            while Worker::running(stop) {
                match l.accept() {
                    Ok((mut c, _)) => {
                        let _ = c.set_nonblocking(false);
                        let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
                        let _ = c.set_write_timeout(Some(Duration::from_secs(2)));
                        let mut req = [0u8; 2048];
                        let n = c.read(&mut req).unwrap_or(0);
                        let resp = if req[..n].starts_with(b"GET ") {
                            let body = snapshot().to_prometheus();
                            format!(
                                    "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                                    body.len()
                                )
                        } else {
                            "HTTP/1.0 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".into()
                        };
                        let _ = c.write_all(resp.as_bytes());
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        })?;
        Ok(Self {
            local,
            _worker: worker,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ConnSnapshot;

    #[test]
    fn prometheus_text_has_help_type_and_labels() {
        let s = Snapshot {
            transport: "kernel",
            device: CounterSnapshot {
                tx_bytes: 42,
                ..CounterSnapshot::default()
            },
            store: StoreSnapshot {
                totals: CallCounts {
                    reads: 10,
                    ..CallCounts::default()
                },
                open: vec![ConnSnapshot {
                    id: 7,
                    peer: "198.18.0.2:4000".into(),
                    counts: CallCounts {
                        reads: 3,
                        ..CallCounts::default()
                    },
                }],
                accepted: 8,
                refused_full: 2,
                ..StoreSnapshot::default()
            },
            ..Snapshot::default()
        };
        let t = s.to_prometheus();
        assert!(t.contains("# TYPE xwarpd_tx_bytes_total counter\n"));
        assert!(t.contains("xwarpd_tx_bytes_total{transport=\"kernel\"} 42\n"));
        assert!(t.contains("xwarpd_store_reads_total 10\n"));
        assert!(t.contains(
            "xwarpd_store_connection_reads_total{conn=\"7\",peer=\"198.18.0.2:4000\"} 3\n"
        ));
        assert!(t.contains("xwarpd_store_connections 1\n"));
        assert!(t.contains("xwarpd_store_connections_accepted_total 8\n"));
        assert!(t.contains("xwarpd_store_connections_refused_total{reason=\"full\"} 2\n"));
        assert!(t.contains("xwarpd_store_connections_refused_total{reason=\"not_allowed\"} 0\n"));
        assert!(
            !t.contains("engine_"),
            "no engine lines on the kernel transport"
        );
        // Once the connection has closed its series are gone; the totals stay.
        let mut closed = s.clone();
        closed.store.open.clear();
        let ct = closed.to_prometheus();
        assert!(!ct.contains("xwarpd_store_connection_reads_total{"), "{ct}");
        assert!(ct.contains("xwarpd_store_reads_total 10\n"));
        let e = Snapshot {
            engines: vec![(
                3,
                EndpointCounters {
                    rx_packets: 1,
                    rx_bytes: 2,
                    tx_packets: 3,
                    tx_bytes: 4,
                    retransmissions: 5,
                    ooo_fpdus_placed: 9,
                    crc_errors: 6,
                    terminates_sent: 7,
                    terminates_received: 8,
                    drops: 10,
                    malformed: 11,
                    ..EndpointCounters::default()
                },
            )],
            ..s
        };
        let et = e.to_prometheus();
        for line in [
            "xwarpd_engine_rx_packets_total{queue=\"3\"} 1\n",
            "xwarpd_engine_rx_bytes_total{queue=\"3\"} 2\n",
            "xwarpd_engine_tx_packets_total{queue=\"3\"} 3\n",
            "xwarpd_engine_tx_bytes_total{queue=\"3\"} 4\n",
            "xwarpd_engine_retransmissions_total{queue=\"3\"} 5\n",
            "xwarpd_engine_ooo_fpdus_placed_total{queue=\"3\"} 9\n",
            "xwarpd_engine_crc_errors_total{queue=\"3\"} 6\n",
            "xwarpd_engine_terminates_total{queue=\"3\"} 15\n",
            "xwarpd_engine_drops_total{queue=\"3\"} 21\n",
            "xwarpd_engine_malformed_total{queue=\"3\"} 11\n",
            "# TYPE xwarpd_engine_ooo_bytes_max gauge\n",
        ] {
            assert!(et.contains(line), "{line:?} missing in\n{et}");
        }
        // Every sample line is `name{labels} value` or `name value`.
        for l in t.lines().chain(et.lines()).filter(|l| !l.starts_with('#')) {
            let v = l.rsplit(' ').next().unwrap();
            assert!(v.parse::<u64>().is_ok(), "{l}");
        }
    }

    #[test]
    fn http_get_answers_the_metrics() {
        let m = MetricsServer::start("127.0.0.1:0".parse().unwrap(), || Snapshot {
            transport: "kernel",
            echo_messages: 7,
            ..Snapshot::default()
        })
        .unwrap();
        let mut c = std::net::TcpStream::connect(m.local_addr()).unwrap();
        c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        assert!(s.starts_with("HTTP/1.0 200 OK\r\n"), "{s}");
        assert!(s.contains("xwarpd_echo_messages_total{transport=\"kernel\"} 7"));
    }
}
