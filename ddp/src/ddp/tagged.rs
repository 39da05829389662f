//! The Tagged Buffer Model header (-06 §4.2): 14 octets, T = 1.
//!
//! ```text
//! 0: DDP control | 1: RsvdULP (RDMAP control) | 2..6: STag | 6..14: TO | 14..: payload
//! ```

use crate::be::{get_u32, get_u64, put_u32, put_u64};
use crate::ddp::control::{DdpControl, DDP_VERSION};
use crate::ddp::header_error::DdpHeaderError;
use crate::ddp::stag::Stag;

/// Length of the tagged header (DDP-22).
pub const TAGGED_HEADER_LEN: usize = 14;

mod field {
    pub const CONTROL: usize = 0;
    pub const RSVD_ULP: usize = 1;
    pub const STAG: usize = 2;
    pub const TO: usize = 6;
    pub const PAYLOAD: usize = 14;
}

/// A checked, zero-copy view of a tagged DDP segment.
#[derive(Debug, Clone)]
pub struct TaggedPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TaggedPacket<T> {
    /// Wrap without checking; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        TaggedPacket { buffer }
    }

    /// Wrap after checking the buffer holds the whole header.
    pub fn new_checked(buffer: T) -> Result<Self, DdpHeaderError> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Err(Truncated)` when shorter than 14 octets.
    pub fn check_len(&self) -> Result<(), DdpHeaderError> {
        if self.buffer.as_ref().len() < TAGGED_HEADER_LEN {
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

    /// RsvdULP (the RDMAP control byte under RDMAP).
    pub fn rsvd_ulp(&self) -> u8 {
        self.buffer.as_ref()[field::RSVD_ULP]
    }

    /// The Data Sink STag.
    pub fn stag(&self) -> Stag {
        Stag(get_u32(self.buffer.as_ref(), field::STAG))
    }

    /// The Tagged Offset of this segment's first payload octet.
    pub fn to(&self) -> u64 {
        get_u64(self.buffer.as_ref(), field::TO)
    }

    /// The 14 header octets.
    pub fn header(&self) -> &[u8] {
        &self.buffer.as_ref()[..field::PAYLOAD]
    }

    /// The ULP payload after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TaggedPacket<T> {
    /// Set the control byte.
    pub fn set_control(&mut self, v: u8) {
        self.buffer.as_mut()[field::CONTROL] = v;
    }

    /// Set RsvdULP.
    pub fn set_rsvd_ulp(&mut self, v: u8) {
        self.buffer.as_mut()[field::RSVD_ULP] = v;
    }

    /// Set the STag.
    pub fn set_stag(&mut self, v: Stag) {
        put_u32(self.buffer.as_mut(), field::STAG, v.0);
    }

    /// Set the TO.
    pub fn set_to(&mut self, v: u64) {
        put_u64(self.buffer.as_mut(), field::TO, v);
    }

    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

/// The fields of a tagged header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaggedRepr {
    /// L bit.
    pub last: bool,
    /// RsvdULP, carried unmodified (DDP-23).
    pub rsvd_ulp: u8,
    /// Data Sink STag.
    pub stag: Stag,
    /// Tagged Offset.
    pub to: u64,
}

impl TaggedRepr {
    /// Parse; rejects T = 0 and DV != 1 (DDP-21: 0x1/0x04 at the sink). Rsvd is ignored (DDP-19).
    pub fn parse<T: AsRef<[u8]>>(p: &TaggedPacket<T>) -> Result<Self, DdpHeaderError> {
        p.check_len()?;
        let c = DdpControl::parse(p.control());
        if !c.tagged {
            return Err(DdpHeaderError::WrongModel);
        }
        if c.version != DDP_VERSION {
            return Err(DdpHeaderError::Version {
                dv: c.version,
                tagged: true,
            });
        }
        Ok(TaggedRepr {
            last: c.last,
            rsvd_ulp: p.rsvd_ulp(),
            stag: p.stag(),
            to: p.to(),
        })
    }

    /// Header length: always 14.
    pub const fn buffer_len(&self) -> usize {
        TAGGED_HEADER_LEN
    }

    /// Write the header into the first 14 octets of `p` (payload untouched).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut TaggedPacket<T>) {
        p.set_control(DdpControl::new(true, self.last).emit());
        p.set_rsvd_ulp(self.rsvd_ulp);
        p.set_stag(self.stag);
        p.set_to(self.to);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn emit(r: &TaggedRepr) -> [u8; TAGGED_HEADER_LEN] {
        let mut b = [0u8; TAGGED_HEADER_LEN];
        r.emit(&mut TaggedPacket::new_unchecked(&mut b[..]));
        b
    }

    /// The tagged example of -06 §5.2 (DDP-22, DDP-47).
    #[test]
    fn golden_tagged_segments_of_5_2() {
        let s1 = TaggedRepr {
            last: false,
            rsvd_ulp: 0x40,
            stag: Stag(0x12345678),
            to: 16384,
        };
        assert_eq!(
            emit(&s1),
            [0x81, 0x40, 0x12, 0x34, 0x56, 0x78, 0, 0, 0, 0, 0, 0, 0x40, 0x00]
        );
        let s2 = TaggedRepr {
            last: true,
            to: 17870,
            ..s1
        };
        assert_eq!(
            emit(&s2),
            [0xc1, 0x40, 0x12, 0x34, 0x56, 0x78, 0, 0, 0, 0, 0, 0, 0x45, 0xce]
        );
        assert_eq!(
            TaggedRepr::parse(&TaggedPacket::new_checked(&emit(&s2)[..]).unwrap()),
            Ok(s2)
        );
    }

    #[test]
    fn ddp_21_bad_version_rejected() {
        let b = [0xC2u8, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            TaggedRepr::parse(&TaggedPacket::new_unchecked(&b[..])),
            Err(DdpHeaderError::Version {
                dv: 2,
                tagged: true
            })
        );
    }

    #[test]
    fn truncated_rejected() {
        assert_eq!(
            TaggedPacket::new_checked(&[0xC1u8; 13][..]).err(),
            Some(DdpHeaderError::Truncated)
        );
    }

    proptest! {
        #[test]
        fn parse_emit_roundtrip(last: bool, rsvd_ulp: u8, stag: u32, to: u64) {
            let r = TaggedRepr { last, rsvd_ulp, stag: Stag(stag), to };
            let b = emit(&r);
            prop_assert_eq!(TaggedRepr::parse(&TaggedPacket::new_checked(&b[..]).unwrap()), Ok(r));
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(p) = TaggedPacket::new_checked(&b[..]) {
                let _ = TaggedRepr::parse(&p);
                let _ = p.payload();
            }
        }
    }
}
