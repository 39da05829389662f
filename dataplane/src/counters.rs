//! Per-device counters (relaxed atomics; read with [`Counters::snapshot`]).

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// Live counters of a device, shared by its listeners and connections.
        #[derive(Debug, Default)]
        pub struct DeviceCounters { $(pub(crate) $name: AtomicU64,)* }

        /// A point-in-time copy of a device's counters ([`crate::Device::counters`]).
        #[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
        pub struct CounterSnapshot { $($(#[$doc])* pub $name: u64,)* }

        impl DeviceCounters {
            /// Reads every counter.
            pub fn snapshot(&self) -> CounterSnapshot {
                CounterSnapshot { $($name: self.$name.load(Ordering::Relaxed),)* }
            }
        }
    };
}

counters! {
    /// TCP connections accepted by listeners.
    tcp_accepted,
    /// Kernel transport: connections a listener reset at once for want of a place in its
    /// backlog (full, or their source holding its share).
    backlog_refused,
    /// Kernel transport: of those, connections whose source held its share of the backlog.
    backlog_share_refused,
    /// Kernel transport: connections in MPA startup reset to make room in a full backlog (the
    /// oldest of the source holding the most, for a source holding fewer).
    backlog_evictions,
    /// MPA connections established (either side).
    mpa_established,
    /// Startup frames that were malformed (bad key, revision, PD_Length): TCP closed.
    startup_malformed,
    /// Startup frames that did not arrive in time.
    startup_timeouts,
    /// Connections rejected (R=1) by us or the peer.
    startup_rejected,
    /// Rev 2 Replies whose IRD/ORD or RTR choice could not work (RFC 6581 §5): Terminate sent.
    startup_refused,
    /// Rev 2 Requests the peer closed on, retried with Rev 1 (RFC 6581 §8).
    rev1_fallbacks,
    /// FPDUs with a bad CRC.
    crc_errors,
    /// Marker errors (FPDUPTR disagreeing with the length chain).
    marker_errors,
    /// Other framing errors (bad ULPDU_Length, truncated DDP/RDMAP headers).
    framing_errors,
    /// Terminate messages we sent.
    terminates_sent,
    /// Terminate messages we received.
    terminates_received,
    /// Connections that ended in error.
    connection_errors,
    /// Bytes written to sockets (kernel transport), or frame octets sent (xdp transport).
    tx_bytes,
    /// Bytes read from sockets (kernel transport), or frame octets received (xdp transport).
    rx_bytes,
    /// DDP segments that arrived after the application closed their queue pair: dropped,
    /// nothing placed.
    rx_after_close,
    /// Closed queue pairs whose connection did not finish within the close timeout: aborted
    /// with RST.
    close_timeouts,
}

impl DeviceCounters {
    pub(crate) fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }
}
