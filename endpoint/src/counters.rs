//! Per-endpoint counters (read with [`crate::Endpoint::counters`]).

/// Counters of one endpoint. Plain integers: an endpoint is single-threaded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndpointCounters {
    /// Frames received.
    pub rx_packets: u64,
    /// Octets of frames received.
    pub rx_bytes: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Octets of frames sent.
    pub tx_bytes: u64,
    /// TCP segments retransmitted (sum over connections, closed ones included).
    pub retransmissions: u64,
    /// Tagged/untagged FPDUs placed out of order (before their gap filled).
    pub ooo_fpdus_placed: u64,
    /// Most octets held out of order by one connection at any time.
    pub ooo_bytes_max: u64,
    /// MPA CRC errors.
    pub crc_errors: u64,
    /// Other MPA framing errors (marker, length, alignment).
    pub framing_errors: u64,
    /// Terminates sent.
    pub terminates_sent: u64,
    /// Terminates received (malformed ones included).
    pub terminates_received: u64,
    /// Frames dropped: not for us (other MAC / EtherType / not TCP) or no flow and no listener.
    pub drops: u64,
    /// Malformed frames (bad Ethernet, IP or TCP header, checksum).
    pub malformed: u64,
    /// First fragments (IPv4, or IPv6 with a Fragment header) to a steered port: dropped, as
    /// the XDP program drops them (the endpoint does not reassemble; TCP retransmits).
    pub fragments: u64,
    /// RSTs sent for segments matching no connection and no listener.
    pub rsts_for_unknown: u64,
    /// Frames not sent because no transmit buffer was free.
    pub tx_no_buffer: u64,
    /// Frames not sent because the next hop's MAC is unknown.
    pub no_neighbour: u64,
    /// Connections established at the TCP level.
    pub connections_opened: u64,
    /// Connections removed after reaching CLOSED.
    pub connections_closed: u64,
    /// Internal inconsistencies caught (the connection was aborted instead of panicking).
    pub internal_errors: u64,
    /// Connections the application closed that had not finished within their close timeout
    /// (aborted with RST).
    pub close_timeouts: u64,
    /// DDP segments that arrived after the application closed their connection: dropped,
    /// nothing placed (sum over connections, closed ones included).
    pub rx_after_close: u64,
    /// FPDUs that could not be rebuilt for a (re)transmission, mostly because their region was
    /// deregistered while they were unacknowledged: the connection was aborted.
    pub rebuild_failures: u64,
    /// Handshakes completed past `max_connections` or the listener's backlog, or whose peer
    /// could get no next hop: reset at once.
    pub connections_refused: u64,
    /// Connections reset because the peer sent more than a startup frame before MPA was up
    /// (an Initiator may send FPDUs only after the Reply, a Responder after the first FPDU).
    pub startup_overruns: u64,
    /// MPA Requests the application neither accepted nor rejected within `accept_timeout`
    /// (reset).
    pub accept_timeouts: u64,
    /// Next hops neither set nor learnt because the table was full of addresses in use.
    pub neighbours_refused: u64,
    /// Posts refused at `max_outstanding_work`.
    pub work_refused: u64,
    /// SYN cookies sent by the listeners (half-open table full).
    pub syn_cookies_sent: u64,
    /// Half-open connections that expired after their SYN-ACK retries.
    pub half_open_expired: u64,
    /// Listener replies (cookies, RSTs) dropped because the listener's queue was full.
    pub listener_tx_overflow: u64,
    /// Connections dropped after unanswered keepalive probes (sum over connections).
    pub keepalive_timeouts: u64,
    /// Connections reset after the FIN-WAIT-2 limit (sum over connections).
    pub fin_wait2_timeouts: u64,
    /// Connections reset after the peer's window stayed shut past the persist limit.
    pub persist_timeouts: u64,
    /// Stream connections, TCP RDMA option: segments sent with a transfer annotation.
    pub rdma_segments_annotated: u64,
    /// Stream connections, TCP RDMA option: octets placed into registered buffers on arrival.
    pub rdma_bytes_placed: u64,
    /// Of those, octets placed before the hole before them filled.
    pub rdma_ooo_bytes_placed: u64,
    /// Octets the application's transfer reads skipped because they were placed already.
    pub rdma_copies_avoided: u64,
    /// Octets the application's transfer reads had to copy from the stream.
    pub rdma_bytes_copied: u64,
}

impl EndpointCounters {
    /// Adds `other`'s counts to these (the endpoints of a multi-queue host, summed); a maximum
    /// stays a maximum.
    pub fn add(&mut self, other: &EndpointCounters) {
        self.rx_packets += other.rx_packets;
        self.rx_bytes += other.rx_bytes;
        self.tx_packets += other.tx_packets;
        self.tx_bytes += other.tx_bytes;
        self.retransmissions += other.retransmissions;
        self.ooo_fpdus_placed += other.ooo_fpdus_placed;
        self.ooo_bytes_max = self.ooo_bytes_max.max(other.ooo_bytes_max);
        self.crc_errors += other.crc_errors;
        self.framing_errors += other.framing_errors;
        self.terminates_sent += other.terminates_sent;
        self.terminates_received += other.terminates_received;
        self.drops += other.drops;
        self.malformed += other.malformed;
        self.fragments += other.fragments;
        self.rsts_for_unknown += other.rsts_for_unknown;
        self.tx_no_buffer += other.tx_no_buffer;
        self.no_neighbour += other.no_neighbour;
        self.connections_opened += other.connections_opened;
        self.connections_closed += other.connections_closed;
        self.internal_errors += other.internal_errors;
        self.close_timeouts += other.close_timeouts;
        self.rx_after_close += other.rx_after_close;
        self.rebuild_failures += other.rebuild_failures;
        self.connections_refused += other.connections_refused;
        self.startup_overruns += other.startup_overruns;
        self.accept_timeouts += other.accept_timeouts;
        self.neighbours_refused += other.neighbours_refused;
        self.work_refused += other.work_refused;
        self.syn_cookies_sent += other.syn_cookies_sent;
        self.half_open_expired += other.half_open_expired;
        self.listener_tx_overflow += other.listener_tx_overflow;
        self.keepalive_timeouts += other.keepalive_timeouts;
        self.fin_wait2_timeouts += other.fin_wait2_timeouts;
        self.persist_timeouts += other.persist_timeouts;
        self.rdma_segments_annotated += other.rdma_segments_annotated;
        self.rdma_bytes_placed += other.rdma_bytes_placed;
        self.rdma_ooo_bytes_placed += other.rdma_ooo_bytes_placed;
        self.rdma_copies_avoided += other.rdma_copies_avoided;
        self.rdma_bytes_copied += other.rdma_bytes_copied;
    }
}
