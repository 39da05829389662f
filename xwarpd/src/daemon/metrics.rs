//! Counters as Prometheus/OpenMetrics text, through `prometheus-client`'s registry, and a
//! tiny HTTP responder serving them (any `GET` answers the metrics; one request per connection).
//!
//! Each scrape builds a registry from one [`Snapshot`]. Labels are bounded: `reason` (three
//! values), `queue` (the engines), and `conn`/`peer` on the per-connection store series, which
//! exist only while that connection is open (at most the connection cap): a closed connection's
//! calls stay in the service totals. `xwarpd_build_info` names the version and transport.

use super::worker::Worker;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

use crate::store::{CallCounts, Refusal, StoreSnapshot};
use dataplane::engine::FaultCounters;
use dataplane::SteerCounters;
use dataplane::{CounterSnapshot, EngineLoad, XdpInfo};
use endpoint::EndpointCounters;

/// The content type of [`Snapshot::to_prometheus`] (OpenMetrics text, which Prometheus reads).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Everything the daemon reports, at one instant.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Transport name (`kernel`, `xdp`).
    pub transport: &'static str,
    /// The device's (engine's) counters.
    pub device: CounterSnapshot,
    /// The store's counters (totals and open connections), RPC-over-RDMA service.
    pub store: StoreSnapshot,
    /// The store's ONC RPC over TCP service, when it runs (`store.tcp`): the same counters,
    /// exported as `xwarpd_store_tcp_*`.
    pub store_tcp: Option<StoreSnapshot>,
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
    /// What each engine holds now (connections, half-open handshakes, neighbours), by queue.
    pub engine_loads: Vec<(u32, EngineLoad)>,
    /// What the AF_XDP device runs on (attach mode, zero-copy, queue); `None` on kernel.
    pub xdp_info: Option<XdpInfo>,
    /// The XDP program's steering counters; `None` on the kernel transport.
    pub xdp_counters: Option<SteerCounters>,
    /// What the engines' fault injectors did, when a test turned them on
    /// (`XWARP_TEST_FAULTS`, debug builds); `None` otherwise.
    pub faults: Option<FaultCounters>,
}

type Labels = Vec<(&'static str, String)>;

/// The counters of one store service under `prefix` (`store`, `store_tcp`); `what` names the
/// service in the help texts.
fn register_store(r: &mut Registry, prefix: &str, what: &str, st: &StoreSnapshot) {
    let open = i64::try_from(st.open.len()).unwrap_or(i64::MAX);
    r.register(
        format!("{prefix}_connections"),
        help(&format!("{what}: connections now open.")),
        ConstGauge::new(open),
    );
    counter(
        r,
        &format!("{prefix}_connections_accepted"),
        &format!("{what}: connections accepted."),
        st.accepted,
    );
    counter(
        r,
        &format!("{prefix}_connections_idle_closed"),
        &format!("{what}: connections closed for having had no call within the idle timeout."),
        st.idle_closed,
    );
    let refused: Vec<(Labels, u64)> = [
        (Refusal::NotAllowed, st.refused_not_allowed),
        (Refusal::Full, st.refused_full),
        (Refusal::SourceShare, st.refused_source_share),
    ]
    .into_iter()
    .map(|(reason, v)| (vec![("reason", reason.label().to_string())], v))
    .collect();
    labelled(
        r,
        &format!("{prefix}_connections_refused"),
        &format!("{what}: connections refused: the peer is in no allowed network, the server was at its connection cap with none silent, or the peer's source held its share."),
        &refused,
    );
    counter(
        r,
        &format!("{prefix}_connections_evicted"),
        &format!("{what}: silent connections closed to give their slot to a new client (the server was full)."),
        st.evicted,
    );
    type Field = fn(&CallCounts) -> u64;
    let calls: [(&str, &str, Field); 8] = [
        ("reads", "READ calls.", |c| c.reads),
        ("writes", "WRITE calls.", |c| c.writes),
        ("commits", "COMMIT calls.", |c| c.commits),
        ("other_calls", "GETATTR and NULL calls.", |c| c.other_calls),
        ("read_bytes", "Bytes returned by READ.", |c| c.bytes_read),
        ("written_bytes", "Bytes stored by WRITE.", |c| {
            c.bytes_written
        }),
        ("errors", "Calls answered with a non-OK status.", |c| {
            c.errors
        }),
        (
            "refused",
            "Messages refused (RDMA_ERROR, RPC rejections).",
            |c| c.refused,
        ),
    ];
    // Service totals (closed connections included), then one series per OPEN connection.
    for (name, help, f) in calls {
        counter(
            r,
            &format!("{prefix}_{name}"),
            &format!("{what}: {help} All connections."),
            f(&st.totals),
        );
        let rows: Vec<(Labels, u64)> = st
            .open
            .iter()
            .map(|c| {
                (
                    vec![("conn", c.id.to_string()), ("peer", c.peer.clone())],
                    f(&c.counts),
                )
            })
            .collect();
        labelled(
            r,
            &format!("{prefix}_connection_{name}"),
            &format!("{what}: {help} Per open connection."),
            &rows,
        );
    }
}

/// `help` without its final period: the encoder adds one.
fn help(text: &str) -> String {
    text.trim_end_matches('.').to_string()
}

fn counter(r: &mut Registry, name: &str, help: &str, v: u64) {
    r.register(name, self::help(help), ConstCounter::new(v));
}

fn labelled(r: &mut Registry, name: &str, help: &str, rows: &[(Labels, u64)]) {
    let f = Family::<Labels, Counter>::default();
    for (l, v) in rows {
        f.get_or_create(l).inc_by(*v);
    }
    r.register(name, self::help(help), f);
}

impl Snapshot {
    /// The registry of this snapshot's metrics (prefix `xwarpd_`).
    pub fn registry(&self) -> Registry {
        let mut r = Registry::with_prefix("xwarpd");
        r.register(
            "build",
            help("The xwarpd version and the transport it serves."),
            Info::new(vec![
                ("version", env!("CARGO_PKG_VERSION").to_string()),
                ("transport", self.transport.to_string()),
            ]),
        );
        let up = i64::try_from(self.uptime_seconds).unwrap_or(i64::MAX);
        r.register(
            "uptime_seconds",
            help("Seconds since the daemon started."),
            ConstGauge::new(up),
        );
        let d = &self.device;
        for (name, help, v) in [
            (
                "tcp_accepted",
                "TCP connections accepted by listeners.",
                d.tcp_accepted,
            ),
            (
                "backlog_refused",
                "Kernel transport: connections reset at once for want of a place in a listener's backlog (full, or their source holding its share).",
                d.backlog_refused,
            ),
            (
                "backlog_share_refused",
                "Kernel transport: of those, connections whose source held its share of the backlog.",
                d.backlog_share_refused,
            ),
            (
                "backlog_evictions",
                "Kernel transport: connections in MPA startup reset to make room in a full backlog for a source holding fewer.",
                d.backlog_evictions,
            ),
            (
                "mpa_established",
                "MPA connections established.",
                d.mpa_established,
            ),
            (
                "startup_malformed",
                "Malformed MPA startup frames.",
                d.startup_malformed,
            ),
            (
                "startup_timeouts",
                "MPA startups that timed out.",
                d.startup_timeouts,
            ),
            (
                "startup_rejected",
                "MPA connections rejected.",
                d.startup_rejected,
            ),
            ("crc_errors", "FPDUs with a bad CRC.", d.crc_errors),
            ("marker_errors", "MPA marker errors.", d.marker_errors),
            ("framing_errors", "Other framing errors.", d.framing_errors),
            (
                "terminates_sent",
                "Terminate messages sent.",
                d.terminates_sent,
            ),
            (
                "terminates_received",
                "Terminate messages received.",
                d.terminates_received,
            ),
            (
                "connection_errors",
                "Connections that ended in error.",
                d.connection_errors,
            ),
            ("tx_bytes", "Bytes sent.", d.tx_bytes),
            ("rx_bytes", "Bytes received.", d.rx_bytes),
            (
                "echo_connections",
                "Connections of the echo listeners.",
                self.echo_connections,
            ),
            (
                "echo_messages",
                "Sends echoed by the echo listeners.",
                self.echo_messages,
            ),
            (
                "echo_refused",
                "Echo connections rejected at a listener's connection cap.",
                self.echo_refused,
            ),
        ] {
            counter(&mut r, name, help, v);
        }
        register_store(&mut r, "store", "Store (RPC-over-RDMA)", &self.store);
        if let Some(t) = &self.store_tcp {
            register_store(&mut r, "store_tcp", "Store over ONC RPC/TCP", t);
        }
        self.register_xdp(&mut r);
        self.register_faults(&mut r);
        r
    }

    /// What the engines' fault injector did, when it is on.
    fn register_faults(&self, r: &mut Registry) {
        let Some(f) = &self.faults else {
            return;
        };
        let kinds = [
            ("drop", f.dropped),
            ("duplicate", f.duplicated),
            ("reorder", f.reordered),
            ("corrupt", f.corrupted),
            ("corrupt_past_checksum", f.corrupted_past_checksum),
        ];
        let rows: Vec<(Labels, u64)> = kinds
            .iter()
            .flat_map(|(kind, n)| {
                [("rx", n[0]), ("tx", n[1])].map(|(dir, v)| {
                    let labels = vec![("kind", kind.to_string()), ("direction", dir.into())];
                    (labels, v)
                })
            })
            .collect();
        labelled(
            r,
            "engine_faults_injected",
            "Faults the engines' test injector made (XWARP_TEST_FAULTS): frames dropped, duplicated, held back, and with a bit of TCP payload flipped, the TCP checksum left stale or mended.",
            &rows,
        );
    }

    fn register_xdp(&self, r: &mut Registry) {
        if let Some(x) = &self.xdp_counters {
            for (name, help, v) in [
                ("xdp_redirected", "Frames the XDP program handed to an AF_XDP socket.", x.redirected),
                ("xdp_passed", "Frames the XDP program gave to the kernel: not ours.", x.passed),
                ("xdp_malformed", "Frames the XDP program dropped: truncated or impossible headers.", x.malformed),
                (
                    "xdp_steered_no_socket",
                    "Frames to a steered port with no AF_XDP socket on their queue (given to the kernel).",
                    x.steered_no_socket,
                ),
                (
                    "xdp_fragments",
                    "First IP fragments of TCP segments to a steered port, dropped (the engine does not reassemble).",
                    x.fragments,
                ),
            ] {
                counter(r, name, help, v);
            }
        }
        if self.engines.is_empty() {
            return;
        }
        type EngineField = fn(&EndpointCounters) -> u64;
        let per_engine: [(&str, &str, EngineField); 21] = [
            ("engine_rx_packets", "Frames received.", |e| e.rx_packets),
            ("engine_tx_packets", "Frames sent.", |e| e.tx_packets),
            ("engine_rx_bytes", "Octets received.", |e| e.rx_bytes),
            ("engine_tx_bytes", "Octets sent.", |e| e.tx_bytes),
            (
                "engine_retransmissions",
                "TCP segments retransmitted.",
                |e| e.retransmissions,
            ),
            (
                "engine_rto_expiries",
                "TCP retransmission timeouts that fired.",
                |e| e.rto_expiries,
            ),
            (
                "engine_window_probes",
                "TCP zero-window probes sent.",
                |e| e.window_probes,
            ),
            (
                "engine_ooo_fpdus_placed",
                "FPDUs placed out of order, before their gap filled.",
                |e| e.ooo_fpdus_placed,
            ),
            ("engine_crc_errors", "MPA CRC errors.", |e| e.crc_errors),
            (
                "engine_framing_errors",
                "Other MPA framing errors (marker, length, alignment).",
                |e| e.framing_errors,
            ),
            ("engine_terminates", "Terminates sent and received.", |e| {
                e.terminates_sent + e.terminates_received
            }),
            (
                "engine_drops",
                "Frames dropped: not ours, no flow or listener, or malformed.",
                |e| e.drops + e.malformed,
            ),
            (
                "engine_malformed",
                "Malformed frames (bad Ethernet, IP or TCP header or checksum); part of drops.",
                |e| e.malformed,
            ),
            (
                "engine_tx_stalls",
                "Frames not sent for want of a transmit buffer or a neighbour's MAC.",
                |e| e.tx_no_buffer + e.no_neighbour,
            ),
            (
                "engine_connections_opened",
                "TCP connections established by the engine.",
                |e| e.connections_opened,
            ),
            (
                "engine_connections_closed",
                "Connections the engine closed or reaped (MPA startup timeout, idle, peer close).",
                |e| e.connections_closed,
            ),
            (
                "engine_connections_refused",
                "Connections refused at a cap (backlog, a source's share of it, connection limit) with a reset.",
                |e| e.connections_refused,
            ),
            (
                "engine_backlog_share_refused",
                "Of those, connections whose source held its share of the listener's backlog.",
                |e| e.backlog_share_refused,
            ),
            (
                "engine_backlog_evictions",
                "Connections in MPA startup reset to make room in a full backlog for a source holding fewer.",
                |e| e.backlog_evictions,
            ),
            (
                "engine_syn_cookies_sent",
                "SYN-ACKs carrying a SYN cookie (the half-open table was full).",
                |e| e.syn_cookies_sent,
            ),
            (
                "engine_half_open_expired",
                "Half-open handshakes dropped after their last SYN-ACK retry.",
                |e| e.half_open_expired,
            ),
        ];
        for (name, help, f) in per_engine {
            let rows: Vec<(Labels, u64)> = self
                .engines
                .iter()
                .map(|(q, e)| (vec![("queue", q.to_string())], f(e)))
                .collect();
            labelled(r, name, &format!("{help} Per engine (queue)."), &rows);
        }
        let most = Family::<Labels, Gauge>::default();
        for (q, e) in &self.engines {
            most.get_or_create(&vec![("queue", q.to_string())])
                .set(i64::try_from(e.ooo_bytes_max).unwrap_or(i64::MAX));
        }
        type LoadField = fn(&EngineLoad) -> usize;
        let loads: [(&str, &str, LoadField); 4] = [
            (
                "engine_connections",
                "Connections the engine holds now (every state after SYN-RECEIVED).",
                |l| l.connections,
            ),
            (
                "engine_half_open",
                "Half-open handshakes (SYN-RECEIVED) the engine holds now.",
                |l| l.half_open,
            ),
            (
                "engine_neighbours",
                "Next-hop entries the engine holds now.",
                |l| l.neighbours,
            ),
            (
                "engine_syn_sources",
                "Unverified SYN source MACs the engine keeps to answer SYNs.",
                |l| l.syn_sources,
            ),
        ];
        for (name, help_text, f) in loads {
            let g = Family::<Labels, Gauge>::default();
            for (q, l) in &self.engine_loads {
                g.get_or_create(&vec![("queue", q.to_string())])
                    .set(i64::try_from(f(l)).unwrap_or(i64::MAX));
            }
            r.register(name, help(&format!("{help_text} Per engine (queue).")), g);
        }
        r.register(
            "engine_ooo_bytes_max",
            help("Most octets one connection held out of order at any time. Per engine (queue)."),
            most,
        );
    }

    /// Renders the registry as OpenMetrics text (ends with `# EOF`).
    pub fn to_prometheus(&self) -> String {
        let mut o = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut o, &self.registry());
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
                                    "HTTP/1.0 200 OK\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
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
    use prometheus_parse::{Scrape, Value};

    /// Parses `text` with a Prometheus text parser; every sample as (name, labels, value).
    fn parse(text: &str) -> Scrape {
        Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("parses")
    }

    fn value(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        s.samples
            .iter()
            .find(|x| x.metric == name && labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
            .map(|x| match x.value {
                Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => v,
                _ => f64::NAN,
            })
    }

    fn sample() -> Snapshot {
        Snapshot {
            transport: "kernel",
            device: CounterSnapshot {
                tx_bytes: 42,
                backlog_refused: 30,
                backlog_share_refused: 29,
                backlog_evictions: 31,
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
                refused_source_share: 5,
                evicted: 6,
                ..StoreSnapshot::default()
            },
            ..Snapshot::default()
        }
    }

    /// The ONC RPC over TCP service's counters get their own `xwarpd_store_tcp_*` series when
    /// it runs, and none when it does not; the RPC-over-RDMA ones keep their names.
    #[test]
    fn the_onc_rpc_tcp_service_is_exported_beside_the_rdma_store() {
        let off = parse(&sample().to_prometheus());
        assert!(
            !off.samples
                .iter()
                .any(|x| x.metric.starts_with("xwarpd_store_tcp")),
            "no TCP service, no series"
        );
        let mut s = sample();
        s.store_tcp = Some(StoreSnapshot {
            totals: CallCounts {
                reads: 5,
                bytes_read: 5 << 20,
                ..CallCounts::default()
            },
            open: vec![ConnSnapshot {
                id: 9,
                peer: "198.18.0.3:900".into(),
                counts: CallCounts {
                    reads: 2,
                    ..CallCounts::default()
                },
            }],
            accepted: 4,
            refused_not_allowed: 1,
            ..StoreSnapshot::default()
        });
        let text = s.to_prometheus();
        let p = parse(&text);
        assert_eq!(
            value(&p, "xwarpd_store_tcp_reads_total", &[]),
            Some(5.0),
            "{text}"
        );
        assert_eq!(
            value(&p, "xwarpd_store_tcp_read_bytes_total", &[]),
            Some(5242880.0)
        );
        assert_eq!(value(&p, "xwarpd_store_tcp_connections", &[]), Some(1.0));
        assert_eq!(
            value(&p, "xwarpd_store_tcp_connections_accepted_total", &[]),
            Some(4.0)
        );
        assert_eq!(
            value(
                &p,
                "xwarpd_store_tcp_connections_refused_total",
                &[("reason", "not_allowed")]
            ),
            Some(1.0)
        );
        assert_eq!(
            value(
                &p,
                "xwarpd_store_tcp_connection_reads_total",
                &[("conn", "9"), ("peer", "198.18.0.3:900")]
            ),
            Some(2.0)
        );
        // The RDMA service's series are unchanged beside it.
        assert_eq!(value(&p, "xwarpd_store_reads_total", &[]), Some(10.0));
        assert_eq!(
            value(&p, "xwarpd_store_connections_accepted_total", &[]),
            Some(8.0)
        );
    }

    #[test]
    fn the_registry_text_parses_with_build_info_totals_and_bounded_labels() {
        let s = sample();
        let text = s.to_prometheus();
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert!(
            !text.contains(".."),
            "a help text ends in two periods:\n{text}"
        );
        let p = parse(&text);
        let version = env!("CARGO_PKG_VERSION");
        assert_eq!(
            value(
                &p,
                "xwarpd_build_info",
                &[("version", version), ("transport", "kernel")]
            ),
            Some(1.0),
            "{text}"
        );
        assert_eq!(value(&p, "xwarpd_tx_bytes_total", &[]), Some(42.0));
        for (name, v) in [
            ("xwarpd_backlog_refused_total", 30.0),
            ("xwarpd_backlog_share_refused_total", 29.0),
            ("xwarpd_backlog_evictions_total", 31.0),
            ("xwarpd_store_connections_evicted_total", 6.0),
        ] {
            assert_eq!(
                value(&p, name, &[]),
                Some(v),
                "{name} in
{text}"
            );
        }
        assert_eq!(
            value(
                &p,
                "xwarpd_store_connections_refused_total",
                &[("reason", "source_share")]
            ),
            Some(5.0)
        );
        assert_eq!(value(&p, "xwarpd_store_reads_total", &[]), Some(10.0));
        assert_eq!(
            value(
                &p,
                "xwarpd_store_connection_reads_total",
                &[("conn", "7"), ("peer", "198.18.0.2:4000")]
            ),
            Some(3.0)
        );
        assert_eq!(value(&p, "xwarpd_store_connections", &[]), Some(1.0));
        assert_eq!(
            value(&p, "xwarpd_store_connections_accepted_total", &[]),
            Some(8.0)
        );
        assert_eq!(
            value(
                &p,
                "xwarpd_store_connections_refused_total",
                &[("reason", "full")]
            ),
            Some(2.0)
        );
        assert_eq!(
            value(
                &p,
                "xwarpd_store_connections_refused_total",
                &[("reason", "not_allowed")]
            ),
            Some(0.0)
        );
        assert!(
            !p.samples
                .iter()
                .any(|x| x.metric.contains("engine_") || x.metric.contains("xdp_")),
            "no engine or XDP series on the kernel transport"
        );
        // Labels are bounded: only these keys appear.
        for x in &p.samples {
            for (k, _) in x.labels.iter() {
                assert!(
                    ["version", "transport", "reason", "conn", "peer"].contains(&k.as_str()),
                    "unexpected label {k} on {}",
                    x.metric
                );
            }
        }
        // Once the connection has closed its series are gone; the totals stay.
        let mut closed = s.clone();
        closed.store.open.clear();
        let c = parse(&closed.to_prometheus());
        assert!(
            !c.samples.iter().any(|x| x.labels.get("conn").is_some()),
            "a closed connection's series stayed"
        );
        assert_eq!(value(&c, "xwarpd_store_reads_total", &[]), Some(10.0));
    }

    #[test]
    fn xdp_program_and_engine_counters_are_exported_by_queue() {
        let e = Snapshot {
            transport: "xdp",
            engines: vec![(
                3,
                EndpointCounters {
                    rx_packets: 1,
                    rx_bytes: 2,
                    tx_packets: 3,
                    tx_bytes: 4,
                    retransmissions: 5,
                    ooo_fpdus_placed: 9,
                    ooo_bytes_max: 12,
                    crc_errors: 6,
                    terminates_sent: 7,
                    terminates_received: 8,
                    drops: 10,
                    malformed: 11,
                    connections_closed: 13,
                    connections_refused: 14,
                    backlog_share_refused: 23,
                    backlog_evictions: 24,
                    syn_cookies_sent: 16,
                    half_open_expired: 17,
                    ..EndpointCounters::default()
                },
            )],
            engine_loads: vec![(
                3,
                EngineLoad {
                    connections: 18,
                    half_open: 19,
                    neighbours: 20,
                    syn_sources: 22,
                },
            )],
            xdp_counters: Some(SteerCounters {
                redirected: 100,
                passed: 101,
                malformed: 102,
                steered_no_socket: 103,
                fragments: 104,
            }),
            ..sample()
        };
        let text = e.to_prometheus();
        let p = parse(&text);
        for (name, v) in [
            ("xwarpd_engine_rx_packets_total", 1.0),
            ("xwarpd_engine_rx_bytes_total", 2.0),
            ("xwarpd_engine_tx_packets_total", 3.0),
            ("xwarpd_engine_tx_bytes_total", 4.0),
            ("xwarpd_engine_retransmissions_total", 5.0),
            ("xwarpd_engine_ooo_fpdus_placed_total", 9.0),
            ("xwarpd_engine_crc_errors_total", 6.0),
            ("xwarpd_engine_terminates_total", 15.0),
            ("xwarpd_engine_drops_total", 21.0),
            ("xwarpd_engine_malformed_total", 11.0),
            ("xwarpd_engine_ooo_bytes_max", 12.0),
            ("xwarpd_engine_connections_closed_total", 13.0),
            ("xwarpd_engine_connections_refused_total", 14.0),
            ("xwarpd_engine_backlog_share_refused_total", 23.0),
            ("xwarpd_engine_backlog_evictions_total", 24.0),
            ("xwarpd_engine_syn_cookies_sent_total", 16.0),
            ("xwarpd_engine_half_open_expired_total", 17.0),
            ("xwarpd_engine_connections", 18.0),
            ("xwarpd_engine_half_open", 19.0),
            ("xwarpd_engine_neighbours", 20.0),
            ("xwarpd_engine_syn_sources", 22.0),
        ] {
            assert_eq!(
                value(&p, name, &[("queue", "3")]),
                Some(v),
                "{name} in\n{text}"
            );
        }
        for (name, v) in [
            ("xwarpd_xdp_redirected_total", 100.0),
            ("xwarpd_xdp_passed_total", 101.0),
            ("xwarpd_xdp_malformed_total", 102.0),
            ("xwarpd_xdp_steered_no_socket_total", 103.0),
            ("xwarpd_xdp_fragments_total", 104.0),
        ] {
            assert_eq!(value(&p, name, &[]), Some(v), "{name} in\n{text}");
        }
    }

    #[test]
    fn injected_faults_are_exported_by_kind_and_direction_only_when_on() {
        let off = parse(&sample().to_prometheus());
        assert!(!off
            .samples
            .iter()
            .any(|x| x.metric.starts_with("xwarpd_engine_faults_injected")));
        let on = Snapshot {
            faults: Some(FaultCounters {
                dropped: [1, 2],
                corrupted: [3, 4],
                corrupted_past_checksum: [5, 6],
                ..FaultCounters::default()
            }),
            ..sample()
        };
        let text = on.to_prometheus();
        let p = parse(&text);
        let name = "xwarpd_engine_faults_injected_total";
        for (kind, dir, v) in [
            ("drop", "tx", 2.0),
            ("corrupt", "rx", 3.0),
            ("corrupt_past_checksum", "tx", 6.0),
            ("reorder", "rx", 0.0),
        ] {
            let labels = [("kind", kind), ("direction", dir)];
            assert_eq!(value(&p, name, &labels), Some(v), "{kind} {dir} in\n{text}");
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
        assert!(s.contains(CONTENT_TYPE), "{s}");
        assert!(s.contains("xwarpd_echo_messages_total 7\n"), "{s}");
    }
}
