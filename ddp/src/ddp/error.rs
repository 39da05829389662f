//! The DDP errors of -06 §7.2 (DDP-84): the Error Type and Code DDP reports, and
//! the Terminate triple (Layer = DDP) that carries them.

use crate::rdmap::term_code::{Layer, TermCode};

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
