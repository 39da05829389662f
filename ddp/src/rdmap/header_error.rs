//! Why an RDMAP header could not be parsed: the malformed-input outcomes of the RDMAP wire views.

/// An RDMAP header (or the RDMAP Control Field) failed its checks. Small and `Copy`: no
/// allocation on the receive path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RdmapHeaderError {
    /// The buffer is shorter than the header it should hold.
    Truncated,
    /// RDMAP RV is not 1 (RFC 5040 §4.1).
    Version(u8),
    /// An RDMAP opcode RFC 5040 does not define (0x8..=0xF).
    UnknownOpcode(u8),
    /// A Terminate Control field layer nibble that is not RDMAP, DDP or LLP.
    UnknownLayer(u8),
}

impl core::fmt::Display for RdmapHeaderError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RdmapHeaderError::Truncated => write!(f, "truncated header"),
            RdmapHeaderError::Version(v) => write!(f, "invalid RDMAP version {v}"),
            RdmapHeaderError::UnknownOpcode(o) => write!(f, "unknown RDMAP opcode {o:#x}"),
            RdmapHeaderError::UnknownLayer(l) => write!(f, "unknown Terminate layer {l:#x}"),
        }
    }
}

impl std::error::Error for RdmapHeaderError {}
