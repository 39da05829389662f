//! Connection configuration (validated by [`Config::validate`]).

use std::fmt;
use std::time::Duration;

use crate::checksum::TxChecksum;

/// Which congestion controller a connection uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CongestionAlgo {
    /// CUBIC, RFC 9438 (default).
    #[default]
    Cubic,
    /// NewReno, RFC 5681 / RFC 6582.
    NewReno,
}

/// Keepalive settings (RFC 9293 §3.8.4, RFC 1122 §4.2.3.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keepalive {
    /// Idle time before the first probe.
    pub idle: Duration,
    /// Time between unanswered probes.
    pub interval: Duration,
    /// Unanswered probes before the connection is dropped.
    pub probes: u32,
}

/// Why [`Config::validate`] refused a configuration; each names the setting it refuses
/// ([`TcpConfigError::setting`], and in its `Display`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpConfigError {
    /// `mss` below 88.
    BadMss,
    /// `mtu` below the MSS (counted up to 128) plus 40.
    BadMtu,
    /// `window_scale` above 14 (RFC 7323 §2.3).
    BadWindowScale,
    /// `recv_buffer` below one MSS, or above what the window scale can advertise.
    BadRecvBuffer,
    /// `rto_min <= rto_initial <= rto_max` does not hold.
    BadRto,
    /// `dupthresh` is 0.
    BadDupThresh,
}

impl TcpConfigError {
    /// The [`Config`] field refused.
    pub fn setting(self) -> &'static str {
        match self {
            TcpConfigError::BadMss => "mss",
            TcpConfigError::BadMtu => "mtu",
            TcpConfigError::BadWindowScale => "window_scale",
            TcpConfigError::BadRecvBuffer => "recv_buffer",
            TcpConfigError::BadRto => "rto_initial",
            TcpConfigError::BadDupThresh => "dupthresh",
        }
    }

    fn rule(self) -> &'static str {
        match self {
            TcpConfigError::BadMss => "must be at least 88",
            TcpConfigError::BadMtu => "must be at least the MSS (counted up to 128) plus 40",
            TcpConfigError::BadWindowScale => "must be at most 14",
            TcpConfigError::BadRecvBuffer => {
                "must be at least one MSS and at most 65535 << window_scale"
            }
            TcpConfigError::BadRto => "must lie between rto_min and rto_max",
            TcpConfigError::BadDupThresh => "must be at least 1",
        }
    }
}

impl fmt::Display for TcpConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TCP setting `{}` {}", self.setting(), self.rule())
    }
}

impl std::error::Error for TcpConfigError {}

/// Settings of one connection. `Config::default()` gives a sensible, RFC-conformant set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The MSS we announce (RFC 9293 §3.7.1); also caps what we send.
    pub mss: u16,
    /// Path MTU of the local link (IP packet size); EMSS = min(peer MSS, mtu - 40) - options.
    pub mtu: u16,
    /// Receive buffer (bytes): bounds the advertised window and the out-of-order memory.
    pub recv_buffer: u32,
    /// Send buffer (bytes of queued, unacknowledged data).
    pub send_buffer: u32,
    /// Our window-scale shift (RFC 7323 §2); `None` disables the option.
    pub window_scale: Option<u8>,
    /// Offer timestamps (RFC 7323 §3).
    pub timestamps: bool,
    /// Offer SACK (RFC 2018).
    pub sack: bool,
    /// TIME-WAIT duration (2*MSL, RFC 9293 §3.4.2).
    pub time_wait: Duration,
    /// Initial RTO (RFC 6298 §2.1: 1 s).
    pub rto_initial: Duration,
    /// Lower bound of the RTO (RFC 6298 §2.4 says 1 s; 200 ms is the common deployed choice).
    pub rto_min: Duration,
    /// Upper bound of the RTO (RFC 6298 §2.5: at least 60 s).
    pub rto_max: Duration,
    /// Retransmissions of one segment before the connection is given up (RFC 9293 §3.8.3, R2).
    pub max_retries: u32,
    /// SYN retransmissions before the open fails.
    pub syn_retries: u32,
    /// Delayed-ACK timeout (RFC 5681 §4.2, < 500 ms); `None` acknowledges every segment at once.
    pub delayed_ack: Option<Duration>,
    /// Delay for acknowledging a data segment well short of the EMSS (at least
    /// [`SHORT_SEGMENT_SLACK`] octets shorter: its sender had no more to send and may be waiting
    /// for the ACK, as an iWARP sender is to complete its work). `None` (the default) treats it
    /// like any other segment.
    pub short_segment_ack: Option<Duration>,
    /// Segments acknowledged at once after the connection opens (quick-ACK phase, e.g. MPA startup).
    pub quick_acks: u32,
    /// Keepalive; `None` disables it (the default, RFC 1122 §4.2.3.6).
    pub keepalive: Option<Keepalive>,
    /// Longest FIN-WAIT-2 (our FIN acknowledged, the peer's still missing) before the
    /// connection is reset and counted (`fin_wait2_timeouts`), as Linux's `tcp_fin_timeout`;
    /// `None` waits for the peer's FIN forever (RFC 9293 sets no limit).
    pub fin_wait2_timeout: Option<Duration>,
    /// Longest time the peer may keep its window shut while we have data to send before the
    /// connection is reset and counted (`persist_timeouts`): RFC 6429 lets a TCP end a
    /// connection in the persist condition to reclaim resources. `None` probes forever.
    pub persist_limit: Option<Duration>,
    /// Congestion controller.
    pub congestion: CongestionAlgo,
    /// Initial congestion window in segments (RFC 5681 §3.1 allows up to 4; RFC 6928 allows 10).
    pub initial_window: u32,
    /// Duplicate-ACK threshold (RFC 5681 §3.2, RFC 6675 DupThresh).
    pub dupthresh: u32,
    /// Nagle's algorithm (RFC 9293 §3.7.4); off by default, as MPA asks (MPA-10).
    pub nagle: bool,
    /// In record mode, pack several whole records into one segment when they fit (MPA §5.3 MAY).
    pub pack_records: bool,
    /// Most discontiguous out-of-order ranges kept per connection.
    pub max_ooo_ranges: usize,
    /// Most out-of-order octets held per connection (never more than `recv_buffer`).
    pub max_ooo_bytes: u32,
    /// Challenge ACKs per second and connection (RFC 5961 §7 rate limit).
    pub challenge_acks_per_sec: u32,
    /// Offer the TCP RDMA option (draft-csapuntz-tcprdma-00, kind 25) in the handshake; it is
    /// used only when the peer offers it too (TCPRDMA-14). Off by default.
    pub tcp_rdma: bool,
    /// With the RDMA option on: end a segment before every marked message start, so that
    /// every ULP message starts a segment with A = 1 (draft §4 segmentation A). Off: segments
    /// are cut only between runs (segmentation B, fewer segments).
    pub tcp_rdma_align_messages: bool,
    /// Who finishes the TCP checksum of every segment this stack emits (connections,
    /// listeners, RSTs): [`TxChecksum::Full`] (default) unless the frames leave through a
    /// device told to finish them (AF_XDP TX metadata).
    pub tx_checksum: TxChecksum,
    /// The fast path of an ESTABLISHED connection (on by default): header prediction for
    /// in-order data and pure ACKs (RFC 9293 processing condensed for the segments that need
    /// no other step) and segments written from a header template. Each is a shortcut to the
    /// full path's result; off, every segment takes the full path (tests compare the two).
    pub fast_path: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mss: 1460,
            mtu: 1500,
            recv_buffer: 1 << 20,
            send_buffer: 1 << 21,
            window_scale: Some(7),
            timestamps: true,
            sack: true,
            time_wait: Duration::from_secs(60),
            rto_initial: Duration::from_secs(1),
            rto_min: Duration::from_millis(200),
            rto_max: Duration::from_secs(60),
            max_retries: 15,
            syn_retries: 6,
            delayed_ack: Some(Duration::from_millis(40)),
            short_segment_ack: None,
            quick_acks: 16,
            keepalive: None,
            fin_wait2_timeout: Some(Duration::from_secs(60)),
            persist_limit: Some(Duration::from_secs(120)),
            congestion: CongestionAlgo::Cubic,
            initial_window: 10,
            dupthresh: 3,
            nagle: false,
            pack_records: true,
            max_ooo_ranges: 64,
            max_ooo_bytes: 1 << 20,
            challenge_acks_per_sec: 100,
            tcp_rdma: false,
            tcp_rdma_align_messages: false,
            tx_checksum: TxChecksum::Full,
            fast_path: true,
        }
    }
}

/// How much shorter than the EMSS a data segment must be to count as short (a full segment is a
/// whole number of records a little under the EMSS).
pub const SHORT_SEGMENT_SLACK: usize = 128;

impl Config {
    /// Checks the settings for consistency. Every constructor that takes a `Config`
    /// (`Connection::connect`, `Connection::listen`, `TcpListener::new`) refuses one that
    /// fails this.
    pub fn validate(&self) -> Result<(), TcpConfigError> {
        if self.mss < 88 {
            return Err(TcpConfigError::BadMss);
        }
        if u32::from(self.mtu) < u32::from(self.mss).min(128) + 40 {
            return Err(TcpConfigError::BadMtu);
        }
        if self.window_scale.is_some_and(|s| s > 14) {
            return Err(TcpConfigError::BadWindowScale);
        }
        let max_wnd = 65535u64 << self.window_scale.unwrap_or(0);
        if self.recv_buffer < u32::from(self.mss) || u64::from(self.recv_buffer) > max_wnd {
            return Err(TcpConfigError::BadRecvBuffer);
        }
        if !(self.rto_min <= self.rto_initial && self.rto_initial <= self.rto_max) {
            return Err(TcpConfigError::BadRto);
        }
        if self.dupthresh == 0 {
            return Err(TcpConfigError::BadDupThresh);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_nagle_off() {
        let c = Config::default();
        assert_eq!(c.validate(), Ok(()));
        assert!(!c.nagle);
        assert_eq!(c.congestion, CongestionAlgo::Cubic);
    }

    #[test]
    fn rejects_bad_settings() {
        let d = Config::default;
        let cases = [
            (
                Config {
                    window_scale: Some(15),
                    ..d()
                },
                TcpConfigError::BadWindowScale,
            ),
            (
                Config {
                    window_scale: None,
                    recv_buffer: 1 << 20,
                    ..d()
                },
                TcpConfigError::BadRecvBuffer,
            ),
            (
                Config {
                    rto_min: Duration::from_secs(5),
                    ..d()
                },
                TcpConfigError::BadRto,
            ),
            (Config { mss: 10, ..d() }, TcpConfigError::BadMss),
            (Config { mtu: 100, ..d() }, TcpConfigError::BadMtu),
            (
                Config {
                    dupthresh: 0,
                    ..d()
                },
                TcpConfigError::BadDupThresh,
            ),
        ];
        for (c, e) in cases {
            assert_eq!(c.validate(), Err(e));
        }
    }

    #[test]
    fn errors_name_the_setting() {
        let e = TcpConfigError::BadRecvBuffer;
        assert_eq!(e.setting(), "recv_buffer");
        assert!(e.to_string().contains("`recv_buffer`"), "{e}");
        assert!(TcpConfigError::BadMtu.to_string().contains("`mtu`"));
    }
}
