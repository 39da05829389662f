//! Per-connection (and per-listener) counters: what happened, for tests, tuning and operators.

/// Counters of one connection. All values only ever grow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpCounters {
    /// Segments accepted by `handle_segment` (after parsing).
    pub segs_in: u64,
    /// Of `segs_in`: segments taken by header prediction (the fast path).
    pub segs_in_fast: u64,
    /// Of `segs_out`: segments written from the header template (the fast path).
    pub segs_out_fast: u64,
    /// Segments produced by `poll_transmit`.
    pub segs_out: u64,
    /// Segments carrying data (or FIN) sent, retransmissions included.
    pub data_segs_out: u64,
    /// Data octets sent for the first time.
    pub bytes_sent: u64,
    /// Data octets accepted (each counted once).
    pub bytes_received: u64,
    /// Segments retransmitted (any cause).
    pub retransmits: u64,
    /// Retransmissions after an RTO expiry.
    pub rto_retransmits: u64,
    /// Fast retransmissions (dupack / SACK loss recovery).
    pub fast_retransmits: u64,
    /// RFC 6675 §4 NextSeg rule (3): unSACKed segments below the highest SACKed one, not yet deemed
    /// lost, retransmitted when nothing lost and no new data could be sent (also in `fast_retransmits`).
    pub sack_rule3_retransmits: u64,
    /// RFC 6675 §4 NextSeg rule (4): rescue retransmissions of the highest outstanding unSACKed
    /// segment, at most one per loss-recovery episode (also in `fast_retransmits`).
    pub rescue_retransmits: u64,
    /// Retransmissions found unnecessary afterwards (the original was acknowledged, per timestamps).
    pub spurious_retransmits: u64,
    /// RTO expiries.
    pub rto_expiries: u64,
    /// Duplicate ACKs received (RFC 5681 §2 definition).
    pub dupacks: u64,
    /// Loss-recovery episodes entered (fast retransmit).
    pub recoveries: u64,
    /// Out-of-order data ranges committed and handed up before the gap filled.
    pub ooo_committed: u64,
    /// Out-of-order data dropped because the per-connection or global bound was reached.
    pub ooo_dropped: u64,
    /// Received data octets that had already been received (never handed up twice).
    pub duplicate_bytes: u64,
    /// Malformed packets dropped (bad data offset, option length, truncation, checksum).
    pub malformed: u64,
    /// Bad checksums (also counted in `malformed`).
    pub bad_checksum: u64,
    /// Challenge ACKs sent (RFC 5961 §3, §4, §5).
    pub challenge_acks: u64,
    /// Challenge ACKs suppressed by the rate limit (RFC 5961 §7).
    pub challenge_acks_limited: u64,
    /// Segments outside the receive window, dropped with an ACK (RFC 9293 §3.10.7.4).
    pub out_of_window: u64,
    /// Segments dropped by PAWS (RFC 7323 §5).
    pub paws_dropped: u64,
    /// ACKs of data never sent / too old, dropped (RFC 5961 §5.2).
    pub bad_acks: u64,
    /// RSTs sent.
    pub rsts_sent: u64,
    /// RSTs received and acted on.
    pub rsts_received: u64,
    /// MPA §5.3 exception: segments (first transmissions) not header-aligned because a record is
    /// larger than the EMSS.
    pub split_emss: u64,
    /// MPA §5.3 exception: segments not header-aligned because the peer's window was smaller than
    /// the record while nothing was in flight.
    pub split_window: u64,
    /// Retransmissions that could not start on a record boundary (peer acked part of a segment).
    pub unaligned_retransmits: u64,
    /// Zero-window probes sent (persist timer).
    pub window_probes: u64,
    /// Keepalive probes sent.
    pub keepalives: u64,
    /// Connections dropped because their keepalive probes went unanswered.
    pub keepalive_timeouts: u64,
    /// Connections reset after `Config::fin_wait2_timeout` in FIN-WAIT-2.
    pub fin_wait2_timeouts: u64,
    /// Connections reset after the peer's window stayed shut for `Config::persist_limit`.
    pub persist_timeouts: u64,
    /// Pure ACKs sent.
    pub acks_sent: u64,
    /// Delayed ACKs that fired from the timer.
    pub delayed_acks: u64,
    /// TCP RDMA option: segments sent with a run annotation (retransmissions included).
    pub rdma_segments_annotated: u64,
    /// TCP RDMA option: received options ignored (bad length, misaligned, past the payload).
    pub rdma_options_ignored: u64,
    /// TCP RDMA option: octets placed into registered buffers.
    pub rdma_bytes_placed: u64,
    /// TCP RDMA option: octets placed while a hole before them was still open.
    pub rdma_ooo_bytes_placed: u64,
    /// TCP RDMA option: octets `recv_transfer` skipped because they were placed already.
    pub rdma_copies_avoided: u64,
    /// TCP RDMA option: octets `recv_transfer` had to copy from the stream.
    pub rdma_bytes_copied: u64,
    /// TCP RDMA option: annotated segments whose RID had no registered buffer.
    pub rdma_unmatched: u64,
    /// TCP RDMA option: transfers that stopped placing (bounds, total change, conflict).
    pub rdma_placement_failed: u64,
}

/// Counters of a [`crate::TcpListener`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ListenerCounters {
    /// SYNs received.
    pub syns: u64,
    /// SYN-ACKs sent from the half-open table.
    pub synacks: u64,
    /// SYN cookies sent (half-open table full).
    pub cookies_sent: u64,
    /// Valid cookies returned (connection created from a cookie).
    pub cookies_accepted: u64,
    /// ACKs that carried an invalid cookie (answered with RST).
    pub cookies_rejected: u64,
    /// Half-open entries expired after their SYN-ACK retries.
    pub half_open_expired: u64,
    /// Connections handed to `accept`.
    pub accepted: u64,
    /// Connections dropped because the accept queue was full.
    pub accept_overflow: u64,
    /// Replies dropped because the transmit queue was full.
    pub tx_overflow: u64,
    /// Malformed packets.
    pub malformed: u64,
    /// RSTs sent.
    pub rsts_sent: u64,
}
