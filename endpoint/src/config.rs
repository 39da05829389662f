//! Settings of an endpoint and of each connection's queue pair.

use std::net::IpAddr;
use std::ops::RangeInclusive;
use std::time::Duration;

use mpa::StartupConfig;
use tcp_offload::{Config, Keepalive, ListenerConfig};

use crate::error::EndpointError;
use crate::ethernet::Mac;
use crate::secrets::Secrets;

/// MPA and RDMAP settings of a connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QpSettings {
    /// MPA startup: markers wanted on receive, CRC wanted, revision, timeout.
    pub startup: StartupConfig,
    /// Private data of our Request (Initiator) or Reply (Responder).
    pub private_data: Vec<u8>,
    /// Inbound RDMA Read depth.
    pub ird: u32,
    /// Outbound RDMA Read depth.
    pub ord: u32,
    /// How long a connection the application closed may take to finish (queued Sends and
    /// Writes out, FIN exchanged) before it is aborted with RST.
    pub close_timeout: Duration,
    /// Listeners with manual accept: how long an MPA Request may wait for the application's
    /// accept or reject before the connection is reset (counted in `accept_timeouts`).
    pub accept_timeout: Duration,
}

impl Default for QpSettings {
    fn default() -> Self {
        QpSettings {
            startup: StartupConfig::default(),
            private_data: Vec::new(),
            ird: 16,
            ord: 16,
            close_timeout: Duration::from_secs(5),
            accept_timeout: Duration::from_secs(10),
        }
    }
}

/// The endpoint's bounds under load and hostile peers. Each refusal is counted in
/// [`crate::EndpointCounters`]. Per listener, the half-open table, SYN cookies and the backlog
/// are [`ListenerConfig`]'s (`max_half_open`, `syn_cookies`, `max_accept_queue`); each source's
/// share of a backlog is `backlog_share`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointLimits {
    /// Connections at once, of every role and state. A handshake completed past it is reset
    /// (`connections_refused`); `connect` fails with [`crate::EndpointError::TooManyConnections`].
    pub max_connections: usize,
    /// Next-hop entries (set by the caller or learnt from established flows). Keep it at least
    /// twice `max_connections`: entries of addresses without a live connection make room.
    pub max_neighbours: usize,
    /// Unverified SYN source MACs remembered to answer SYNs (first in, first out). Keep it
    /// above a listener's `max_half_open + max_tx_queue`.
    pub max_syn_sources: usize,
    /// Work requests posted and not yet taken with `poll_completion`: bounds the completion
    /// queue (every work request completes exactly once). Posts past it are refused.
    pub max_outstanding_work: usize,
    /// Each source's share of a listener's backlog ([`crate::FairBacklog`]): a handshake from
    /// a source holding `per_source` connections in MPA startup is reset
    /// (`backlog_share_refused`), and in a full backlog the oldest of the source holding the
    /// most is reset to make room for a source holding fewer (`backlog_evictions`). Default:
    /// 64 per address, per /64 for IPv6.
    pub backlog_share: crate::SourceShare,
}

impl Default for EndpointLimits {
    fn default() -> Self {
        EndpointLimits {
            max_connections: 4096,
            max_neighbours: 8192,
            max_syn_sources: 4096,
            max_outstanding_work: 1 << 16,
            backlog_share: crate::SourceShare::default(),
        }
    }
}

/// Endpoint settings.
#[derive(Clone, Debug)]
pub struct EndpointConfig {
    /// Our MAC.
    pub mac: Mac,
    /// Our address (IPv4 or IPv6): listeners and connections use it, and only frames to it
    /// are ours (`classify`). One address family per endpoint.
    pub ip: IpAddr,
    /// TCP settings of every connection.
    pub tcp: Config,
    /// Listener limits; `max_accept_queue` is each listener's backlog: connections whose MPA
    /// startup has not finished (Request not in, or waiting for the application's accept).
    pub listener: ListenerConfig,
    /// Connection, neighbour and work-request caps.
    pub limits: EndpointLimits,
    /// Local ports for active opens (reserved from the kernel by the host set-up).
    pub local_ports: RangeInclusive<u16>,
    /// The queue this endpoint serves among the host's (default: the only one): active opens
    /// take local ports whose flows it owns ([`crate::Lane`]).
    pub lane: crate::Lane,
    /// Next hop MAC when the neighbour table has no entry for the peer (e.g. a gateway).
    pub default_next_hop: Option<Mac>,
    /// The ISN generator's key and the STag key generator's seed (the caller's, from the OS
    /// random source).
    pub secrets: Secrets,
    /// Granularity of the timer wheel.
    pub timer_tick: Duration,
}

impl EndpointConfig {
    /// Checks the settings: the TCP settings must pass `tcp_offload::Config::validate`
    /// ([`EndpointError::Config`] names the one refused). [`crate::Endpoint::new`] refuses a
    /// configuration that fails this.
    pub fn validate(&self) -> Result<(), EndpointError> {
        self.tcp.validate().map_err(EndpointError::Config)
    }

    /// Defaults for `mac`/`ip`, with the caller's `secrets`.
    pub fn new(mac: Mac, ip: impl Into<IpAddr>, secrets: Secrets) -> Self {
        EndpointConfig {
            mac,
            ip: ip.into(),
            tcp: Config {
                // The peer completes its Sends and Writes when we acknowledge them: a short
                // segment (its sender had no more to send) is acknowledged after 25 us unless
                // our answer carries the ACK first; a lone full one after 1 ms, not 40.
                delayed_ack: Some(Duration::from_millis(1)),
                short_segment_ack: Some(Duration::from_micros(25)),
                // A dead peer is noticed: MPA connections may stay idle for long (RFC 1122
                // §4.2.3.6 allows keepalive when the application asks; iWARP does).
                keepalive: Some(Keepalive {
                    idle: Duration::from_secs(60),
                    interval: Duration::from_secs(10),
                    probes: 6,
                }),
                ..Config::default()
            },
            listener: ListenerConfig::default(),
            limits: EndpointLimits::default(),
            local_ports: 40000..=40999,
            lane: crate::Lane::ONLY,
            default_next_hop: None,
            secrets,
            timer_tick: Duration::from_micros(25),
        }
    }
}
