//! Connection settings: MPA startup knobs (mpa's [`StartupConfig`]) and queue limits.

pub use mpa::StartupConfig as MpaSettings;

/// Which transport carries the stack.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Transport {
    /// The MPA/DDP/RDMAP stack over kernel TCP sockets (one thread per connection).
    #[default]
    Kernel,
    /// The AF_XDP engine with our own TCP (not available yet in this build).
    Xdp,
}

/// Settings of one queue pair / connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionConfig {
    /// MPA settings: revision (default 1, RFC 5044), markers wanted on what we receive (the M
    /// bit, negotiated per direction), CRC wanted (default on; on if either side asks),
    /// private-data limit (default 512), startup timeout.
    pub mpa: MpaSettings,
    /// Inbound RDMA Read Requests we serve at once (IRD).
    pub ird: u32,
    /// Outbound RDMA Reads we keep in flight (ORD).
    pub ord: u32,
    /// Effective MSS used to derive MULPDU; `None` asks the socket (TCP_MAXSEG).
    pub emss: Option<u32>,
    /// Kernel transport: give every FPDU its own TCP segment by waiting until the previous bytes
    /// left the socket (slow; for wire captures, which need one FPDU per segment with markers).
    pub segment_per_fpdu: bool,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        Self {
            mpa: MpaSettings::default(),
            ird: 16,
            ord: 16,
            emss: None,
            segment_per_fpdu: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_rfc5044_and_mpa43() {
        let c = ConnectionConfig::default();
        assert!(c.mpa.want_crc, "MPA-43: CRC on by default");
        assert_eq!(c.mpa.revision, 1);
        assert_eq!(c.mpa.max_private_data, 512);
        assert!(!c.mpa.want_markers);
    }
}
