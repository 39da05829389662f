//! Why a header could not be parsed: the malformed-input outcomes of the wire layer.

/// A header failed its checks. Small and `Copy`: no allocation on the receive path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    /// The buffer is shorter than the header it should hold.
    Truncated,
    /// The DDP control field's T bit does not match the view used (tagged vs untagged).
    WrongModel,
    /// DV is not 1 (DDP-20, DDP-21). Carries the DV seen and whether T was set.
    DdpVersion {
        /// The DV field seen.
        dv: u8,
        /// The T bit seen (selects the 0x1/0x04 or 0x2/0x06 code).
        tagged: bool,
    },
    /// RDMAP RV is not 1 (RFC 5040; digest §6.1).
    RdmapVersion(u8),
    /// An RDMAP opcode RFC 5040 does not define (0x8..=0xF).
    UnknownOpcode(u8),
    /// A Terminate Control field layer nibble that is not RDMAP, DDP or LLP.
    UnknownLayer(u8),
}

impl core::fmt::Display for WireError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            WireError::Truncated => write!(f, "truncated header"),
            WireError::WrongModel => write!(f, "tagged/untagged model mismatch"),
            WireError::DdpVersion { dv, .. } => write!(f, "invalid DDP version {dv}"),
            WireError::RdmapVersion(v) => write!(f, "invalid RDMAP version {v}"),
            WireError::UnknownOpcode(o) => write!(f, "unknown RDMAP opcode {o:#x}"),
            WireError::UnknownLayer(l) => write!(f, "unknown Terminate layer {l:#x}"),
        }
    }
}

impl std::error::Error for WireError {}
