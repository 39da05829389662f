//! Per-endpoint counters (read with [`crate::Endpoint::counters`]).

/// Declares [`EndpointCounters`] and its [`EndpointCounters::add`] from one list, so that a
/// counter cannot be added to one and forgotten in the other. `sum` counters add up across
/// endpoints, `max` ones keep the larger.
macro_rules! endpoint_counters {
    ($($(#[$doc:meta])* $kind:ident $name:ident,)*) => {
        /// Counters of one endpoint. Plain integers: an endpoint is single-threaded.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct EndpointCounters {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl EndpointCounters {
            /// Adds `other`'s counts to these (the endpoints of a multi-queue host, summed); a
            /// maximum stays a maximum.
            pub fn add(&mut self, other: &EndpointCounters) {
                $(endpoint_counters!(@$kind self.$name, other.$name);)*
            }
        }
    };
    (@sum $a:expr, $b:expr) => { $a += $b };
    (@max $a:expr, $b:expr) => { $a = $a.max($b) };
}

endpoint_counters! {
    /// Frames received.
    sum rx_packets,
    /// Octets of frames received.
    sum rx_bytes,
    /// Frames sent.
    sum tx_packets,
    /// Octets of frames sent.
    sum tx_bytes,
    /// TCP segments retransmitted (sum over connections, closed ones included).
    sum retransmissions,
    /// Retransmission timeouts that fired (sum over connections): each one backs the RTO off.
    sum rto_expiries,
    /// Zero-window probes sent (sum over connections): a peer's window stayed shut for a
    /// persist interval, or the update that opened it was lost.
    sum window_probes,
    /// Tagged/untagged FPDUs placed out of order (before their gap filled).
    sum ooo_fpdus_placed,
    /// Most octets held out of order by one connection at any time.
    max ooo_bytes_max,
    /// MPA CRC errors.
    sum crc_errors,
    /// Other MPA framing errors (marker, length, alignment).
    sum framing_errors,
    /// Terminates sent.
    sum terminates_sent,
    /// Terminates received (malformed ones included).
    sum terminates_received,
    /// Frames dropped: not for us (other MAC / EtherType / not TCP) or no flow and no listener.
    sum drops,
    /// Malformed frames (bad Ethernet, IP or TCP header, checksum).
    sum malformed,
    /// First fragments (IPv4, or IPv6 with a Fragment header) to a steered port: dropped, as
    /// the XDP program drops them (the endpoint does not reassemble; TCP retransmits).
    sum fragments,
    /// RSTs sent for segments matching no connection and no listener.
    sum rsts_for_unknown,
    /// Frames not sent because no transmit buffer was free.
    sum tx_no_buffer,
    /// Frames not sent because the next hop's MAC is unknown.
    sum no_neighbour,
    /// Connections established at the TCP level.
    sum connections_opened,
    /// Connections removed after reaching CLOSED.
    sum connections_closed,
    /// Internal inconsistencies caught (the connection was aborted instead of panicking).
    sum internal_errors,
    /// Connections the application closed that had not finished within their close timeout
    /// (aborted with RST).
    sum close_timeouts,
    /// DDP segments that arrived after the application closed their connection: dropped,
    /// nothing placed (sum over connections, closed ones included).
    sum rx_after_close,
    /// FPDUs that could not be rebuilt for a (re)transmission, mostly because their region was
    /// deregistered while they were unacknowledged: the connection was aborted.
    sum rebuild_failures,
    /// Handshakes completed past `max_connections` or the listener's backlog (full, or its
    /// source holding its share), or whose peer could get no next hop: reset at once.
    sum connections_refused,
    /// Of those, handshakes whose source already held its share of the listener's backlog
    /// (`EndpointLimits::backlog_share`).
    sum backlog_share_refused,
    /// Connections in MPA startup reset to make room in a full backlog: the oldest of the
    /// source holding the most, for a handshake from a source holding fewer.
    sum backlog_evictions,
    /// Connections reset because the peer sent more than a startup frame before MPA was up
    /// (an Initiator may send FPDUs only after the Reply, a Responder after the first FPDU).
    sum startup_overruns,
    /// MPA Requests the application neither accepted nor rejected within `accept_timeout`
    /// (reset).
    sum accept_timeouts,
    /// Next hops neither set nor learnt because the table was full of addresses in use.
    sum neighbours_refused,
    /// Posts refused at `max_outstanding_work`.
    sum work_refused,
    /// SYN cookies sent by the listeners (half-open table full).
    sum syn_cookies_sent,
    /// Half-open connections that expired after their SYN-ACK retries.
    sum half_open_expired,
    /// Listener replies (cookies, RSTs) dropped because the listener's queue was full.
    sum listener_tx_overflow,
    /// Connections dropped after unanswered keepalive probes (sum over connections).
    sum keepalive_timeouts,
    /// Connections reset after the FIN-WAIT-2 limit (sum over connections).
    sum fin_wait2_timeouts,
    /// Connections reset after the peer's window stayed shut past the persist limit.
    sum persist_timeouts,
    /// Stream connections, TCP RDMA option: segments sent with a transfer annotation.
    sum rdma_segments_annotated,
    /// Stream connections, TCP RDMA option: octets placed into registered buffers on arrival.
    sum rdma_bytes_placed,
    /// Of those, octets placed before the hole before them filled.
    sum rdma_ooo_bytes_placed,
    /// Octets the application's transfer reads skipped because they were placed already.
    sum rdma_copies_avoided,
    /// Octets the application's transfer reads had to copy from the stream.
    sum rdma_bytes_copied,
    /// TCP segments received through header prediction, the fast path (sum over connections).
    sum rx_segments_fast,
    /// TCP segments sent from a connection's header template, the fast path.
    sum tx_segments_fast,
    /// In-order DDP segments placed and delivered on the fast path (sum over connections).
    sum rx_ulpdus_fast,
}

/// Adds what one connection's TCP counted to `c`: retransmissions, RTO expiries, window
/// probes, the timeouts that end a connection (keepalive, FIN-WAIT-2, persist), the TCP RDMA
/// option's counters and the fast path's.
pub(crate) fn fold_tcp_counters(c: &mut EndpointCounters, t: &tcp_offload::TcpCounters) {
    c.retransmissions += t.retransmits;
    c.rto_expiries += t.rto_expiries;
    c.window_probes += t.window_probes;
    c.keepalive_timeouts += t.keepalive_timeouts;
    c.fin_wait2_timeouts += t.fin_wait2_timeouts;
    c.persist_timeouts += t.persist_timeouts;
    c.rdma_segments_annotated += t.rdma_segments_annotated;
    c.rdma_bytes_placed += t.rdma_bytes_placed;
    c.rdma_ooo_bytes_placed += t.rdma_ooo_bytes_placed;
    c.rdma_copies_avoided += t.rdma_copies_avoided;
    c.rdma_bytes_copied += t.rdma_bytes_copied;
    c.rx_segments_fast += t.segs_in_fast;
    c.tx_segments_fast += t.segs_out_fast;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_sums_counts_and_keeps_the_larger_maximum() {
        let mut a = EndpointCounters {
            rx_packets: 2,
            ooo_bytes_max: 10,
            rdma_bytes_copied: 1,
            ..EndpointCounters::default()
        };
        let b = EndpointCounters {
            rx_packets: 3,
            ooo_bytes_max: 7,
            rdma_bytes_copied: 4,
            ..EndpointCounters::default()
        };
        a.add(&b);
        assert_eq!(
            (a.rx_packets, a.ooo_bytes_max, a.rdma_bytes_copied),
            (5, 10, 5)
        );
    }
}
