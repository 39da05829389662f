//! Why a DDP header could not be parsed: the malformed-input outcomes of the DDP wire views.

/// A DDP header failed its checks. Small and `Copy`: no allocation on the receive path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DdpHeaderError {
    /// The buffer is shorter than the header it should hold.
    Truncated,
    /// The DDP control field's T bit does not match the view used (tagged vs untagged).
    WrongModel,
    /// DV is not 1 (DDP-20, DDP-21). Carries the DV seen and whether T was set.
    Version {
        /// The DV field seen.
        dv: u8,
        /// The T bit seen (selects the 0x1/0x04 or 0x2/0x06 code).
        tagged: bool,
    },
}

impl core::fmt::Display for DdpHeaderError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DdpHeaderError::Truncated => write!(f, "truncated header"),
            DdpHeaderError::WrongModel => write!(f, "tagged/untagged model mismatch"),
            DdpHeaderError::Version { dv, .. } => write!(f, "invalid DDP version {dv}"),
        }
    }
}

impl std::error::Error for DdpHeaderError {}
