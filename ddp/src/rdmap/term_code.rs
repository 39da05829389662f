//! Error numbers carried in a Terminate: Layer | EType | Code (RFC 5040 §7), with the
//! RDMAP and LLP numbers (the DDP numbers of -06 §7.2 are in [`crate::ddp::error`]).

/// The layer that detected the error (upper nibble of the Terminate Control field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Layer {
    /// RDMAP (0x0).
    Rdmap = 0,
    /// DDP (0x1).
    Ddp = 1,
    /// LLP, that is MPA (0x2).
    Llp = 2,
}

/// One (Layer, EType, Code) triple.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TermCode {
    /// Layer.
    pub layer: Layer,
    /// 4-bit error type.
    pub etype: u8,
    /// 8-bit error code.
    pub code: u8,
}

/// RDMAP errors (RFC 5040 §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RdmapError {
    /// 0x0/0x00.
    LocalCatastrophic,
    /// 0x1/0x00 Invalid STag.
    InvalidStag,
    /// 0x1/0x01 Base or bounds violation.
    BaseBounds,
    /// 0x1/0x02 Access rights violation.
    AccessRights,
    /// 0x1/0x03 STag not associated with RDMAP Stream.
    StagNotAssociated,
    /// 0x1/0x04 TO wrap.
    ToWrap,
    /// 0x1/0x09 STag cannot be Invalidated (protection: PD/stream/rights).
    CannotInvalidateProtection,
    /// 0x2/0x05 Invalid RDMAP version.
    Version,
    /// 0x2/0x06 Unexpected OpCode.
    UnexpectedOpcode,
    /// 0x2/0x07 Catastrophic error, localized to RDMAP Stream.
    CatastrophicStream,
    /// 0x2/0x09 STag cannot be Invalidated (unknown or already invalid STag).
    CannotInvalidate,
    /// 0x2/0xFF Unspecified.
    Unspecified,
}

impl RdmapError {
    /// The Terminate triple with Layer = RDMAP.
    pub const fn term_code(self) -> TermCode {
        let (etype, code) = match self {
            RdmapError::LocalCatastrophic => (0x0, 0x00),
            RdmapError::InvalidStag => (0x1, 0x00),
            RdmapError::BaseBounds => (0x1, 0x01),
            RdmapError::AccessRights => (0x1, 0x02),
            RdmapError::StagNotAssociated => (0x1, 0x03),
            RdmapError::ToWrap => (0x1, 0x04),
            RdmapError::CannotInvalidateProtection => (0x1, 0x09),
            RdmapError::Version => (0x2, 0x05),
            RdmapError::UnexpectedOpcode => (0x2, 0x06),
            RdmapError::CatastrophicStream => (0x2, 0x07),
            RdmapError::CannotInvalidate => (0x2, 0x09),
            RdmapError::Unspecified => (0x2, 0xFF),
        };
        TermCode {
            layer: Layer::Rdmap,
            etype,
            code,
        }
    }
}

/// LLP (MPA) error codes, EType 0: the MPA error codes (MPA draft §7; RFC 6581 adds 5 to 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LlpError {
    /// 0x01 TCP connection closed, terminated or lost.
    ConnectionLost,
    /// 0x02 MPA CRC error.
    Crc,
    /// 0x03 MPA marker and ULPDU length mismatch.
    Marker,
    /// 0x04 Invalid MPA Request/Reply frame.
    InvalidStartup,
    /// 0x05 Local catastrophic error (RFC 6581 §9).
    LocalCatastrophic,
    /// 0x06 Insufficient IRD resources: the peer's ORD exceeds our IRD (RFC 6581 §5, §9).
    InsufficientIrd,
    /// 0x07 No matching RTR option (RFC 6581 §5, §9).
    NoMatchingRtr,
}

impl LlpError {
    /// The Terminate triple with Layer = LLP.
    pub const fn term_code(self) -> TermCode {
        let code = match self {
            LlpError::ConnectionLost => 0x01,
            LlpError::Crc => 0x02,
            LlpError::Marker => 0x03,
            LlpError::InvalidStartup => 0x04,
            LlpError::LocalCatastrophic => 0x05,
            LlpError::InsufficientIrd => 0x06,
            LlpError::NoMatchingRtr => 0x07,
        };
        TermCode {
            layer: Layer::Llp,
            etype: 0,
            code,
        }
    }
}
