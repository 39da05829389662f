//! Connection settings: the MPA knobs and queue limits, validated before anything is sent.

use std::time::Duration;

use crate::ConfigError;

/// Which transport carries the stack.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Transport {
    /// The MPA/DDP/RDMAP stack over kernel TCP sockets (one thread per connection).
    #[default]
    Kernel,
    /// The AF_XDP engine with our own TCP (not available yet in this build).
    Xdp,
}

/// MPA settings of one end (RFC 5044 / draft-ietf-rddp-mpa-01 §6.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpaSettings {
    /// Ask the peer to put markers in what it sends to us (the M bit we send). Markers are
    /// negotiated per direction: we send markers when the peer's frame has M=1 (MPA-98).
    pub markers: bool,
    /// Ask for CRC32c (the C bit). CRCs are on when either side asks (MPA-99); default on (MPA-43).
    pub crc: bool,
    /// MPA revision we send and accept: 1 (RFC 5044, default) or 0 (the draft).
    pub revision: u8,
    /// Largest private data we accept from a peer (RFC 5044: 512). A larger PD_Length closes
    /// the connection as a malformed frame (MPA-91).
    pub private_data_limit: usize,
    /// How long to wait for a complete startup frame (MPA-90, MPA-92).
    pub startup_timeout: Duration,
}

impl Default for MpaSettings {
    fn default() -> Self {
        Self {
            markers: false,
            crc: true,
            revision: 1,
            private_data_limit: 512,
            startup_timeout: Duration::from_secs(5),
        }
    }
}

impl MpaSettings {
    /// Checks the values.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.revision > 1 {
            return Err(ConfigError::Revision(self.revision));
        }
        if self.private_data_limit > usize::from(u16::MAX) {
            return Err(ConfigError::PrivateDataLimit(self.private_data_limit));
        }
        Ok(())
    }

    /// Checks private data we are about to send against our own limit.
    pub fn check_private_data(&self, pd: &[u8]) -> Result<(), ConfigError> {
        if pd.len() > self.private_data_limit.min(usize::from(u16::MAX)) {
            return Err(ConfigError::PrivateDataTooLong {
                len: pd.len(),
                limit: self.private_data_limit,
            });
        }
        Ok(())
    }
}

/// Settings of one queue pair / connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionConfig {
    /// MPA settings.
    pub mpa: MpaSettings,
    /// Inbound RDMA Read Requests we serve at once (IRD).
    pub ird: u32,
    /// Outbound RDMA Reads we keep in flight (ORD).
    pub ord: u32,
    /// Most work requests outstanding per queue before `post_*` answers `QueueFull`.
    pub max_outstanding: usize,
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
            max_outstanding: 4096,
            segment_per_fpdu: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_rfc5044_and_mpa43() {
        let s = MpaSettings::default();
        assert!(s.crc, "MPA-43: CRC on by default");
        assert_eq!(s.revision, 1);
        assert_eq!(s.private_data_limit, 512);
        assert!(s.validate().is_ok());
    }

    #[test]
    fn bad_values_are_refused() {
        let s = MpaSettings { revision: 2, ..Default::default() };
        assert_eq!(s.validate(), Err(ConfigError::Revision(2)));
        let s = MpaSettings { private_data_limit: 70000, ..Default::default() };
        assert!(s.validate().is_err());
        let s = MpaSettings::default();
        assert!(s.check_private_data(&[0; 512]).is_ok());
        assert!(s.check_private_data(&[0; 513]).is_err());
    }
}
