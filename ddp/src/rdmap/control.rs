//! The RDMAP Control Field (RFC 5040 §4.1): `|RV(2)|Rsvd(2)|Opcode(4)|` = DDP `RsvdULP[0:7]`.

use crate::rdmap::header_error::RdmapHeaderError;

/// The RDMAP version (RV) of RFC 5040.
pub const RDMAP_VERSION: u8 = 1;

/// RDMAP opcodes of RFC 5040 (§4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RdmapOpcode {
    /// Tagged, no RDMAP header.
    RdmaWrite = 0x0,
    /// Untagged QN 1, 28-octet Read Request header.
    RdmaReadRequest = 0x1,
    /// Tagged, no RDMAP header.
    RdmaReadResponse = 0x2,
    /// Untagged QN 0.
    Send = 0x3,
    /// Untagged QN 0, Invalidate STag in `RsvdULP[8:39]`.
    SendInvalidate = 0x4,
    /// Untagged QN 0, solicited event.
    SendSe = 0x5,
    /// Untagged QN 0, solicited event and Invalidate STag.
    SendSeInvalidate = 0x6,
    /// Untagged QN 2, Terminate header.
    Terminate = 0x7,
}

/// The untagged queue numbers RDMAP uses (RFC 5040 §4).
pub mod qn {
    /// Send queue: the ULP's posted receive buffers.
    pub const SEND: u32 = 0;
    /// Inbound RDMA Read Request queue, sized by IRD.
    pub const READ_REQUEST: u32 = 1;
    /// Terminate queue (at most one Terminate).
    pub const TERMINATE: u32 = 2;
}

impl RdmapOpcode {
    /// Decode the 4-bit opcode.
    pub const fn from_u8(v: u8) -> Result<RdmapOpcode, RdmapHeaderError> {
        Ok(match v {
            0x0 => RdmapOpcode::RdmaWrite,
            0x1 => RdmapOpcode::RdmaReadRequest,
            0x2 => RdmapOpcode::RdmaReadResponse,
            0x3 => RdmapOpcode::Send,
            0x4 => RdmapOpcode::SendInvalidate,
            0x5 => RdmapOpcode::SendSe,
            0x6 => RdmapOpcode::SendSeInvalidate,
            0x7 => RdmapOpcode::Terminate,
            other => return Err(RdmapHeaderError::UnknownOpcode(other)),
        })
    }

    /// Whether the message uses the Tagged Buffer Model.
    pub const fn is_tagged(self) -> bool {
        matches!(self, RdmapOpcode::RdmaWrite | RdmapOpcode::RdmaReadResponse)
    }

    /// The QN an untagged opcode travels on (None for tagged opcodes).
    pub const fn queue(self) -> Option<u32> {
        match self {
            RdmapOpcode::RdmaWrite | RdmapOpcode::RdmaReadResponse => None,
            RdmapOpcode::RdmaReadRequest => Some(qn::READ_REQUEST),
            RdmapOpcode::Terminate => Some(qn::TERMINATE),
            _ => Some(qn::SEND),
        }
    }

    /// Whether `RsvdULP[8:39]` carries an Invalidate STag.
    pub const fn carries_invalidate(self) -> bool {
        matches!(
            self,
            RdmapOpcode::SendInvalidate | RdmapOpcode::SendSeInvalidate
        )
    }

    /// Whether the message asks for a solicited event.
    pub const fn solicited(self) -> bool {
        matches!(self, RdmapOpcode::SendSe | RdmapOpcode::SendSeInvalidate)
    }
}

/// The RDMAP control field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RdmapControl {
    /// The message opcode.
    pub opcode: RdmapOpcode,
}

impl RdmapControl {
    /// Parse: RV must be 1 (else 0x0/0x2/0x05), opcode known (else 0x0/0x2/0x06). Rsvd ignored.
    pub const fn parse(byte: u8) -> Result<RdmapControl, RdmapHeaderError> {
        let rv = byte >> 6;
        if rv != RDMAP_VERSION {
            return Err(RdmapHeaderError::Version(rv));
        }
        match RdmapOpcode::from_u8(byte & 0x0F) {
            Ok(opcode) => Ok(RdmapControl { opcode }),
            Err(e) => Err(e),
        }
    }

    /// `RV = 1, Rsvd = 0, opcode`.
    pub const fn emit(self) -> u8 {
        (RDMAP_VERSION << 6) | self.opcode as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn control_bytes_of_every_opcode() {
        let expect = [
            (RdmapOpcode::RdmaWrite, 0x40),
            (RdmapOpcode::RdmaReadRequest, 0x41),
            (RdmapOpcode::RdmaReadResponse, 0x42),
            (RdmapOpcode::Send, 0x43),
            (RdmapOpcode::SendInvalidate, 0x44),
            (RdmapOpcode::SendSe, 0x45),
            (RdmapOpcode::SendSeInvalidate, 0x46),
            (RdmapOpcode::Terminate, 0x47),
        ];
        for (op, byte) in expect {
            assert_eq!(RdmapControl { opcode: op }.emit(), byte);
            assert_eq!(RdmapControl::parse(byte), Ok(RdmapControl { opcode: op }));
        }
    }

    #[test]
    fn bad_version_and_opcode() {
        assert_eq!(RdmapControl::parse(0x83), Err(RdmapHeaderError::Version(2)));
        assert_eq!(
            RdmapControl::parse(0x48),
            Err(RdmapHeaderError::UnknownOpcode(8))
        );
    }

    proptest! {
        #[test]
        fn parse_emit_roundtrip(op in 0u8..8) {
            let c = RdmapControl { opcode: RdmapOpcode::from_u8(op).unwrap() };
            prop_assert_eq!(RdmapControl::parse(c.emit()), Ok(c));
        }

        #[test]
        fn any_byte_never_panics(b: u8) {
            let _ = RdmapControl::parse(b);
        }
    }
}
