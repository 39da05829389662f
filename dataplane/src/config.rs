//! Connection settings: MPA startup knobs (mpa's [`StartupConfig`]) and queue limits.

pub use mpa::StartupConfig as MpaSettings;

/// Which transport carries the stack.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Transport {
    /// The MPA/DDP/RDMAP stack over kernel TCP sockets (a driver thread per connection, or
    /// inline: [`crate::Device::open_kernel`]).
    #[default]
    Kernel,
    /// The AF_XDP engine with our own TCP; opened with [`crate::Device::open_xdp`], which
    /// names the interface ([`XdpConfig`]).
    Xdp,
}

/// How a device's connections are driven: the AF_XDP engine, or the kernel transport's
/// connection drivers ([`crate::Device::open_kernel`]; not pinned).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EngineMode {
    /// The application's threads drive the engine whenever they poll or wait on a completion
    /// queue, post work, or connect: the lowest latency, no extra thread. Something must poll.
    Inline,
    /// The engine busy-polls on its own thread, pinned to `core` (a `core_affinity` index) when
    /// given; it yields the CPU while idle.
    #[default]
    Threaded,
    /// As [`EngineMode::Threaded`], pinned to this core.
    Pinned(usize),
}

/// Settings of an AF_XDP device: one interface queue, one engine. Made by
/// [`XdpConfig::new`] (the defaults), then changed field by field.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct XdpConfig {
    /// The interface to attach to (must be up, with an address to serve).
    pub interface: String,
    /// The interface's address the engine serves, IPv4 or IPv6 (one per device): `None` (the
    /// default) takes its first IPv4 address, else its first IPv6 address that is not
    /// link-local; `0.0.0.0` or `::` the first of that family; any other address must be one
    /// of the interface's.
    pub address: Option<std::net::IpAddr>,
    /// Its receive queue (default 0): the first of `queues`.
    pub queue: u32,
    /// Receive queues served, `queue` onwards (default 1, at most 64): one engine (a lane)
    /// per queue, all behind one XDP program. A flow belongs to one lane by a hash of its two
    /// ends ([`endpoint::Lane`]); `connect` spreads queue pairs over the lanes, a listener
    /// accepts on all of them, and a packet that arrives on another lane's queue is handed to
    /// its owner. Stream sockets spread over the lanes the same way.
    pub queues: u32,
    /// How lanes own flows when there are several ([`LaneSteering`]; default: follow the
    /// NIC's RSS when its driver reports it, the symmetric hash otherwise).
    pub lane_steering: LaneSteering,
    /// Zero-copy when the driver offers it, copy mode otherwise (default), or forced.
    pub bind: afxdp::BindMode,
    /// Native XDP with a fallback to generic mode (default), or forced.
    pub attach: afxdp::AttachPolicy,
    /// Local ports for active opens, steered to the engine (reserve them from the kernel with
    /// `deploy/host-setup`; default 40000-40999).
    pub local_ports: std::ops::RangeInclusive<u16>,
    /// Inline or threaded engine (default threaded).
    pub mode: EngineMode,
    /// With a threaded engine: the application's calls drive it too, as in inline mode (work
    /// posted on an idle connection is transmitted from the posting thread, polling an empty
    /// completion queue runs a round), and the engine thread stands down while they do. For
    /// programs that poll in a loop but may also wait without calling in, as rdma-core's do
    /// (off by default; no effect inline).
    pub assist: bool,
    /// Seeded fault injection on the engine's receive and transmit paths (tests; off by default).
    pub fault: crate::engine::FaultConfig,
    /// UMEM on 2 MiB huge pages (reserve them with `deploy/host-setup --hugepages N`; off by
    /// default).
    pub huge_pages: bool,
    /// Busy-poll socket options for NIC drivers that support them (off by default).
    pub busy_poll: Option<afxdp::BusyPoll>,
    /// Who computes the TCP checksums of transmitted segments: the device where its driver
    /// offers it through AF_XDP TX metadata, else the engine (`Auto`, the default); or as set
    /// ([`afxdp::TxChecksumOffload`]).
    pub tx_checksum: afxdp::TxChecksumOffload,
    /// The engine's caps: connections, neighbours, unverified SYN sources, outstanding work.
    pub limits: endpoint::EndpointLimits,
    /// Each listener's half-open table, SYN cookies, SYN-ACK retries and backlog (connections
    /// whose MPA startup has not finished).
    pub listener: tcp_offload::ListenerConfig,
}

impl XdpConfig {
    /// Defaults on `interface`.
    pub fn new(interface: impl Into<String>) -> Self {
        XdpConfig {
            interface: interface.into(),
            address: None,
            queue: 0,
            queues: 1,
            lane_steering: LaneSteering::Auto,
            bind: afxdp::BindMode::Auto,
            attach: afxdp::AttachPolicy::NativeOrGeneric,
            local_ports: 40000..=40999,
            mode: EngineMode::default(),
            assist: false,
            fault: crate::engine::FaultConfig::default(),
            huge_pages: false,
            busy_poll: None,
            tx_checksum: afxdp::TxChecksumOffload::Auto,
            limits: endpoint::EndpointLimits::default(),
            listener: tcp_offload::ListenerConfig::default(),
        }
    }
}

/// How the lanes of a multi-queue device decide which of them owns a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LaneSteering {
    /// Follow the NIC's RSS when its driver reports a Toeplitz hash over TCP's addresses and
    /// ports (`ETHTOOL_GRSSH`, `ETHTOOL_GRXFH`): a flow belongs to the lane of the queue its
    /// packets arrive on, and active opens pick ports that arrive on their own lane. The
    /// symmetric hash otherwise (veth, virtual devices).
    #[default]
    Auto,
    /// A hash of the flow's two ends that does not depend on their order, on any device: two
    /// xwarp hosts with the same queue count meet on the same lane; on a NIC whose RSS
    /// disagrees, packets are handed to their lane (a copy each). For NICs whose ntuple
    /// rules, not RSS, place flows.
    Symmetric,
}

/// What an open AF_XDP device runs on, as set up ([`crate::Device::xdp_info`]): for reports
/// (the bench's parameter block, `xwarpd status`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdpInfo {
    /// The interface.
    pub interface: String,
    /// Its receive queue the engine serves (the first of `queues`).
    pub queue: u32,
    /// How many queues (lanes) it serves.
    pub queues: u32,
    /// With several lanes: they follow the NIC's RSS (else the symmetric hash).
    pub lanes_follow_rss: bool,
    /// Native or generic XDP, as attached.
    pub attach_mode: afxdp::AttachMode,
    /// The AF_XDP socket is bound zero-copy (else copy mode).
    pub zero_copy: bool,
    /// The interface's MTU at open.
    pub mtu: u32,
    /// The MSS the engine's TCP offers.
    pub mss: u16,
    /// Inline, threaded or pinned engine.
    pub mode: EngineMode,
    /// Who computes TCP checksums of sent segments (`Auto` decided: never `Auto`).
    pub tx_checksum: afxdp::TxChecksumOffload,
}

/// Settings of one queue pair / connection: [`ConnectionConfig::default`], then the `with_*`
/// methods (or field by field).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionConfig {
    /// MPA settings: revision sent (default 2, RFC 6581) and accepted (default 1 and 2),
    /// markers wanted on what we receive (the M bit, negotiated per direction), CRC wanted
    /// (default on; on if either side asks), private-data limit (default 512), startup
    /// timeout, peer-to-peer mode (RTR types offered as Initiator, taken as Responder).
    pub mpa: MpaSettings,
    /// Inbound RDMA Read Requests we serve at once (IRD); offered in a Rev 2 startup frame. A
    /// peer exceeding it gets a Terminate (RFC 5040).
    pub ird: u32,
    /// Outbound RDMA Reads we keep in flight (ORD); offered in a Rev 2 startup frame and lowered
    /// to the peer's IRD (RFC 6581 §5): later Reads wait in order. The values in force are in
    /// [`crate::QueuePair::negotiated`].
    pub ord: u32,
    /// Effective MSS used to derive MULPDU; `None` asks the socket (TCP_MAXSEG).
    pub emss: Option<u32>,
    /// Kernel transport: give every FPDU its own TCP segment by waiting until the previous bytes
    /// left the socket (slow; for wire captures, which need one FPDU per segment with markers).
    pub segment_per_fpdu: bool,
    /// How long a closed queue pair's connection may take to finish (posted Sends and Writes
    /// out, FIN exchanged) before the transport aborts it with RST (default 5 s).
    pub close_timeout: std::time::Duration,
    /// Kernel transport listeners: connections accepted whose MPA startup has not finished
    /// (the Request being read, or waiting for the application's accept) at most (default
    /// [`DEFAULT_BACKLOG`]). The xdp transport's backlog is [`XdpConfig::listener`]'s
    /// `max_accept_queue`.
    pub backlog: usize,
    /// Kernel transport listeners: each source's share of the backlog (default 64 per address,
    /// per /64 for IPv6). A connection from a source holding its share is reset at once; in a
    /// full backlog the oldest connection of the source holding the most is reset to make room
    /// for a source holding fewer ([`endpoint::FairBacklog`]). The xdp transport's share is
    /// [`XdpConfig::limits`]' `backlog_share`.
    pub backlog_share: endpoint::SourceShare,
}

/// The default backlog of a listener: connections whose MPA startup has not finished.
pub const DEFAULT_BACKLOG: usize = 256;

impl Default for ConnectionConfig {
    fn default() -> Self {
        Self {
            mpa: MpaSettings::default(),
            ird: 16,
            ord: 16,
            emss: None,
            segment_per_fpdu: false,
            close_timeout: std::time::Duration::from_secs(5),
            backlog: DEFAULT_BACKLOG,
            backlog_share: endpoint::SourceShare::default(),
        }
    }
}

impl ConnectionConfig {
    /// With these MPA settings.
    pub fn with_mpa(self, mpa: MpaSettings) -> Self {
        Self { mpa, ..self }
    }
    /// With this IRD.
    pub fn with_ird(self, ird: u32) -> Self {
        Self { ird, ..self }
    }
    /// With this ORD.
    pub fn with_ord(self, ord: u32) -> Self {
        Self { ord, ..self }
    }
    /// With this effective MSS (`None`: ask the socket).
    pub fn with_emss(self, emss: Option<u32>) -> Self {
        Self { emss, ..self }
    }
    /// With one FPDU per TCP segment on the kernel transport (or not).
    pub fn with_segment_per_fpdu(self, segment_per_fpdu: bool) -> Self {
        Self {
            segment_per_fpdu,
            ..self
        }
    }
    /// With this kernel-transport listener backlog and share of it per source.
    pub fn with_backlog(self, backlog: usize, backlog_share: endpoint::SourceShare) -> Self {
        Self {
            backlog,
            backlog_share,
            ..self
        }
    }
    /// With this close timeout.
    pub fn with_close_timeout(self, close_timeout: std::time::Duration) -> Self {
        Self {
            close_timeout,
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_rfc6581_and_mpa43() {
        let c = ConnectionConfig::default();
        assert!(c.mpa.want_crc, "MPA-43: CRC on by default");
        // RFC 6581 as siw and Chelsio: initiate Rev 2, accept Rev 1 and Rev 2.
        assert_eq!(c.mpa.revision, 2);
        assert!(c.mpa.accept.contains(1) && c.mpa.accept.contains(2));
        assert!(!c.mpa.accept.contains(0));
        assert_eq!(c.mpa.max_private_data, 512);
        assert!(!c.mpa.want_markers);
    }
}
