//! Settings of an endpoint and of each connection's queue pair.

use std::net::Ipv4Addr;
use std::ops::RangeInclusive;
use std::time::Duration;

use mpa::StartupConfig;
use tcp_offload::{Config, ListenerConfig};

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
}

impl Default for QpSettings {
    fn default() -> Self {
        QpSettings {
            startup: StartupConfig::default(),
            private_data: Vec::new(),
            ird: 16,
            ord: 16,
            close_timeout: Duration::from_secs(5),
        }
    }
}

/// Endpoint settings.
#[derive(Clone, Debug)]
pub struct EndpointConfig {
    /// Our MAC.
    pub mac: Mac,
    /// Our IPv4 address.
    pub ip: Ipv4Addr,
    /// TCP settings of every connection.
    pub tcp: Config,
    /// Listener limits.
    pub listener: ListenerConfig,
    /// Local ports for active opens (reserved from the kernel by the host set-up).
    pub local_ports: RangeInclusive<u16>,
    /// Next hop MAC when the neighbour table has no entry for the peer (e.g. a gateway).
    pub default_next_hop: Option<Mac>,
    /// The ISN generator's key and the STag key generator's seed (the caller's, from the OS
    /// random source).
    pub secrets: Secrets,
    /// Granularity of the timer wheel.
    pub timer_tick: Duration,
}

impl EndpointConfig {
    /// Defaults for `mac`/`ip`, with the caller's `secrets`.
    pub fn new(mac: Mac, ip: Ipv4Addr, secrets: Secrets) -> Self {
        EndpointConfig {
            mac,
            ip,
            tcp: Config {
                // The peer completes its Sends and Writes when we acknowledge them: a short
                // segment (its sender had no more to send) is acknowledged after 25 us unless
                // our answer carries the ACK first; a lone full one after 1 ms, not 40.
                delayed_ack: Some(Duration::from_millis(1)),
                short_segment_ack: Some(Duration::from_micros(25)),
                ..Config::default()
            },
            listener: ListenerConfig::default(),
            local_ports: 40000..=40999,
            default_next_hop: None,
            secrets,
            timer_tick: Duration::from_micros(25),
        }
    }
}
