//! The Untagged Buffer Model header (-06 §4.3): 18 octets, T = 0.
//!
//! ```text
//! 0: DDP control | 1: RsvdULP[0:7] (RDMAP control) | 2..6: RsvdULP[8:39] (Invalidate STag)
//! 6..10: QN | 10..14: MSN | 14..18: MO | 18..: payload
//! ```

use crate::be::{get_u32, put_u32};
use crate::ddp::control::{DdpControl, DDP_VERSION};
use crate::ddp::header_error::DdpHeaderError;

/// Length of the untagged header (DDP-30).
pub const UNTAGGED_HEADER_LEN: usize = 18;

mod field {
    pub const CONTROL: usize = 0;
    pub const RSVD_ULP: usize = 1;
    pub const RSVD_ULP_EXT: usize = 2;
    pub const QN: usize = 6;
    pub const MSN: usize = 10;
    pub const MO: usize = 14;
    pub const PAYLOAD: usize = 18;
}

/// A checked, zero-copy view of an untagged DDP segment.
#[derive(Debug, Clone)]
pub struct UntaggedPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UntaggedPacket<T> {
    /// Wrap without checking; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        UntaggedPacket { buffer }
    }

    /// Wrap after checking the buffer holds the whole header.
    pub fn new_checked(buffer: T) -> Result<Self, DdpHeaderError> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Err(Truncated)` when shorter than 18 octets.
    pub fn check_len(&self) -> Result<(), DdpHeaderError> {
        if self.buffer.as_ref().len() < UNTAGGED_HEADER_LEN {
            Err(DdpHeaderError::Truncated)
        } else {
            Ok(())
        }
    }

    /// Give the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The raw DDP control byte.
    pub fn control(&self) -> u8 {
        self.buffer.as_ref()[field::CONTROL]
    }

    /// `RsvdULP[0:7]` (the RDMAP control byte under RDMAP).
    pub fn rsvd_ulp(&self) -> u8 {
        self.buffer.as_ref()[field::RSVD_ULP]
    }

    /// `RsvdULP[8:39]` (the Invalidate STag under RDMAP Send with Invalidate).
    pub fn rsvd_ulp_ext(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::RSVD_ULP_EXT)
    }

    /// Queue Number.
    pub fn qn(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::QN)
    }

    /// Message Sequence Number.
    pub fn msn(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::MSN)
    }

    /// Message Offset.
    pub fn mo(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::MO)
    }

    /// The 18 header octets.
    pub fn header(&self) -> &[u8] {
        &self.buffer.as_ref()[..field::PAYLOAD]
    }

    /// The ULP payload after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UntaggedPacket<T> {
    /// Set the control byte.
    pub fn set_control(&mut self, v: u8) {
        self.buffer.as_mut()[field::CONTROL] = v;
    }

    /// Set `RsvdULP[0:7]`.
    pub fn set_rsvd_ulp(&mut self, v: u8) {
        self.buffer.as_mut()[field::RSVD_ULP] = v;
    }

    /// Set `RsvdULP[8:39]`.
    pub fn set_rsvd_ulp_ext(&mut self, v: u32) {
        put_u32(self.buffer.as_mut(), field::RSVD_ULP_EXT, v);
    }

    /// Set QN.
    pub fn set_qn(&mut self, v: u32) {
        put_u32(self.buffer.as_mut(), field::QN, v);
    }

    /// Set MSN.
    pub fn set_msn(&mut self, v: u32) {
        put_u32(self.buffer.as_mut(), field::MSN, v);
    }

    /// Set MO.
    pub fn set_mo(&mut self, v: u32) {
        put_u32(self.buffer.as_mut(), field::MO, v);
    }

    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

/// The fields of an untagged header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UntaggedRepr {
    /// L bit.
    pub last: bool,
    /// `RsvdULP[0:7]`.
    pub rsvd_ulp: u8,
    /// `RsvdULP[8:39]`.
    pub rsvd_ulp_ext: u32,
    /// Queue Number.
    pub qn: u32,
    /// Message Sequence Number.
    pub msn: u32,
    /// Message Offset.
    pub mo: u32,
}

impl UntaggedRepr {
    /// Parse; rejects T = 1 and DV != 1 (DDP-21: 0x2/0x06 at the sink). Rsvd is ignored (DDP-19).
    pub fn parse<T: AsRef<[u8]>>(p: &UntaggedPacket<T>) -> Result<Self, DdpHeaderError> {
        p.check_len()?;
        let c = DdpControl::parse(p.control());
        if c.tagged {
            return Err(DdpHeaderError::WrongModel);
        }
        if c.version != DDP_VERSION {
            return Err(DdpHeaderError::Version {
                dv: c.version,
                tagged: false,
            });
        }
        Ok(UntaggedRepr {
            last: c.last,
            rsvd_ulp: p.rsvd_ulp(),
            rsvd_ulp_ext: p.rsvd_ulp_ext(),
            qn: p.qn(),
            msn: p.msn(),
            mo: p.mo(),
        })
    }

    /// Header length: always 18.
    pub const fn buffer_len(&self) -> usize {
        UNTAGGED_HEADER_LEN
    }

    /// Write the header into the first 18 octets of `p` (payload untouched).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut UntaggedPacket<T>) {
        p.set_control(DdpControl::new(false, self.last).emit());
        p.set_rsvd_ulp(self.rsvd_ulp);
        p.set_rsvd_ulp_ext(self.rsvd_ulp_ext);
        p.set_qn(self.qn);
        p.set_msn(self.msn);
        p.set_mo(self.mo);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn emit(r: &UntaggedRepr) -> [u8; UNTAGGED_HEADER_LEN] {
        let mut b = [0u8; UNTAGGED_HEADER_LEN];
        r.emit(&mut UntaggedPacket::new_unchecked(&mut b[..]));
        b
    }

    /// The untagged example of -06 §5.2 (DDP-30, DDP-45).
    #[test]
    fn golden_untagged_segments_of_5_2() {
        let s1 = UntaggedRepr {
            last: false,
            rsvd_ulp: 0x43,
            rsvd_ulp_ext: 0,
            qn: 0,
            msn: 1,
            mo: 0,
        };
        assert_eq!(
            emit(&s1),
            [0x01, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]
        );
        let s2 = UntaggedRepr {
            last: true,
            mo: 1482,
            ..s1
        };
        assert_eq!(
            emit(&s2),
            [0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0x05, 0xca]
        );
        assert_eq!(
            UntaggedRepr::parse(&UntaggedPacket::new_checked(&emit(&s2)[..]).unwrap()),
            Ok(s2)
        );
    }

    /// Send with Invalidate, STag 0xAABBCCDD, MSN 5.
    #[test]
    fn golden_send_with_invalidate() {
        let r = UntaggedRepr {
            last: true,
            rsvd_ulp: 0x44,
            rsvd_ulp_ext: 0xAABBCCDD,
            qn: 0,
            msn: 5,
            mo: 0,
        };
        assert_eq!(
            emit(&r),
            [0x41, 0x44, 0xaa, 0xbb, 0xcc, 0xdd, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0]
        );
    }

    #[test]
    fn ddp_21_bad_version_rejected() {
        let mut b = [0u8; 18];
        b[0] = 0x40;
        assert_eq!(
            UntaggedRepr::parse(&UntaggedPacket::new_unchecked(&b[..])),
            Err(DdpHeaderError::Version {
                dv: 0,
                tagged: false
            })
        );
    }

    #[test]
    fn truncated_rejected() {
        assert_eq!(
            UntaggedPacket::new_checked(&[0x41u8; 17][..]).err(),
            Some(DdpHeaderError::Truncated)
        );
    }

    proptest! {
        #[test]
        fn parse_emit_roundtrip(last: bool, rsvd_ulp: u8, ext: u32, qn: u32, msn: u32, mo: u32) {
            let r = UntaggedRepr { last, rsvd_ulp, rsvd_ulp_ext: ext, qn, msn, mo };
            let b = emit(&r);
            prop_assert_eq!(UntaggedRepr::parse(&UntaggedPacket::new_checked(&b[..]).unwrap()), Ok(r));
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(p) = UntaggedPacket::new_checked(&b[..]) {
                let _ = UntaggedRepr::parse(&p);
                let _ = p.payload();
            }
        }
    }
}
