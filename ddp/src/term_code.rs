//! Error numbers carried in a Terminate: Layer | EType | Code (RFC 5040 §7 / digest §6.5), with the
//! DDP numbers of -06 §7.2 (digest §4.5, DDP-84) and the RDMAP and LLP numbers.

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

/// The DDP errors of the -06 §7.2 table, one variant per row (DDP-84).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DdpError {
    /// 0x0/0x00 Local Catastrophic.
    LocalCatastrophic,
    /// 0x1/0x00 Invalid STag (§7.1 tagged #1, #2).
    InvalidStag,
    /// 0x1/0x01 Base or bounds violation (§7.1 tagged #3, #4).
    BaseBounds,
    /// 0x1/0x02 STag not associated with DDP Stream (§8.2).
    StagNotAssociated,
    /// 0x1/0x03 TO wrap (§7.1 tagged #5).
    ToWrap,
    /// 0x1/0x04 Invalid DDP version on a tagged segment.
    TaggedVersion,
    /// 0x2/0x01 Invalid QN (§7.1 untagged #1).
    InvalidQn,
    /// 0x2/0x02 Invalid MSN - no buffer available (§7.1 untagged #2).
    NoBuffer,
    /// 0x2/0x03 Invalid MSN - MSN range is not valid (§7.1 untagged #5).
    MsnRange,
    /// 0x2/0x04 Invalid MO (§7.1 untagged #3).
    InvalidMo,
    /// 0x2/0x05 DDP Message too long for available buffer (§7.1 untagged #4).
    TooLong,
    /// 0x2/0x06 Invalid DDP version on an untagged segment.
    UntaggedVersion,
}

impl DdpError {
    /// Every row of the table, in table order.
    pub const ALL: [DdpError; 12] = [
        DdpError::LocalCatastrophic,
        DdpError::InvalidStag,
        DdpError::BaseBounds,
        DdpError::StagNotAssociated,
        DdpError::ToWrap,
        DdpError::TaggedVersion,
        DdpError::InvalidQn,
        DdpError::NoBuffer,
        DdpError::MsnRange,
        DdpError::InvalidMo,
        DdpError::TooLong,
        DdpError::UntaggedVersion,
    ];

    /// (Error Type, Error Code) exactly as in -06 §7.2.
    pub const fn etype_code(self) -> (u8, u8) {
        match self {
            DdpError::LocalCatastrophic => (0x0, 0x00),
            DdpError::InvalidStag => (0x1, 0x00),
            DdpError::BaseBounds => (0x1, 0x01),
            DdpError::StagNotAssociated => (0x1, 0x02),
            DdpError::ToWrap => (0x1, 0x03),
            DdpError::TaggedVersion => (0x1, 0x04),
            DdpError::InvalidQn => (0x2, 0x01),
            DdpError::NoBuffer => (0x2, 0x02),
            DdpError::MsnRange => (0x2, 0x03),
            DdpError::InvalidMo => (0x2, 0x04),
            DdpError::TooLong => (0x2, 0x05),
            DdpError::UntaggedVersion => (0x2, 0x06),
        }
    }

    /// The Terminate triple with Layer = DDP.
    pub const fn term_code(self) -> TermCode {
        let (etype, code) = self.etype_code();
        TermCode {
            layer: Layer::Ddp,
            etype,
            code,
        }
    }
}

/// RDMAP errors (RFC 5040 §7; digest §6.5).
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

/// LLP (MPA) error codes, EType 0 (digest §6.5).
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
}

impl LlpError {
    /// The Terminate triple with Layer = LLP.
    pub const fn term_code(self) -> TermCode {
        let code = match self {
            LlpError::ConnectionLost => 0x01,
            LlpError::Crc => 0x02,
            LlpError::Marker => 0x03,
            LlpError::InvalidStartup => 0x04,
        };
        TermCode {
            layer: Layer::Llp,
            etype: 0,
            code,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DDP-84: the numbers are exactly those of -06 §7.2 (table-driven).
    #[test]
    fn ddp_84_table_numbers() {
        let table: [(u8, u8); 12] = [
            (0x0, 0x00),
            (0x1, 0x00),
            (0x1, 0x01),
            (0x1, 0x02),
            (0x1, 0x03),
            (0x1, 0x04),
            (0x2, 0x01),
            (0x2, 0x02),
            (0x2, 0x03),
            (0x2, 0x04),
            (0x2, 0x05),
            (0x2, 0x06),
        ];
        for (e, want) in DdpError::ALL.iter().zip(table) {
            assert_eq!(e.etype_code(), want, "{e:?}");
            assert_eq!(e.term_code().layer, Layer::Ddp);
        }
    }
}
