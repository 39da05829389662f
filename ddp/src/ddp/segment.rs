//! A DDP segment of either model (-06 §4.4): the T bit of the DDP Control Field (DDP-13) chooses
//! the tagged or the untagged header.
//!
//! ```text
//! 0: DDP control (T = 1) | tagged header, 14 octets (crate::ddp::tagged)   | payload
//! 0: DDP control (T = 0) | untagged header, 18 octets (crate::ddp::untagged) | payload
//! ```

use crate::ddp::control::{DdpControl, DDP_VERSION};
use crate::ddp::header_error::DdpHeaderError;
use crate::ddp::tagged::{TaggedPacket, TaggedRepr, TAGGED_HEADER_LEN};
use crate::ddp::untagged::{UntaggedPacket, UntaggedRepr, UNTAGGED_HEADER_LEN};

mod field {
    pub const CONTROL: usize = 0;
}

/// A checked, zero-copy view of a DDP segment of either model.
#[derive(Debug, Clone)]
pub struct DdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> DdpPacket<T> {
    /// Wrap without checking; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        DdpPacket { buffer }
    }

    /// Wrap after checking the control octet's DV and that the buffer holds the header its T bit
    /// announces.
    pub fn new_checked(buffer: T) -> Result<Self, DdpHeaderError> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// The control octet is read first, so a short buffer with DV != 1 reports the version error
    /// (the header layout is unknown then: DDP-21), and a short buffer with DV = 1 `Truncated`.
    pub fn check_len(&self) -> Result<(), DdpHeaderError> {
        let b = self.buffer.as_ref();
        let c = DdpControl::parse(*b.get(field::CONTROL).ok_or(DdpHeaderError::Truncated)?);
        if c.version != DDP_VERSION {
            return Err(DdpHeaderError::Version {
                dv: c.version,
                tagged: c.tagged,
            });
        }
        if b.len() < self.header_len() {
            return Err(DdpHeaderError::Truncated);
        }
        Ok(())
    }

    /// Give the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The raw DDP control byte.
    pub fn control(&self) -> u8 {
        self.buffer.as_ref()[field::CONTROL]
    }

    /// The length of the header the T bit announces: 14 or 18.
    pub fn header_len(&self) -> usize {
        if DdpControl::parse(self.control()).tagged {
            TAGGED_HEADER_LEN
        } else {
            UNTAGGED_HEADER_LEN
        }
    }

    /// The header octets.
    pub fn header(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.header_len()]
    }

    /// The ULP payload after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

/// The fields of a DDP header of either model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DdpRepr {
    /// T = 1.
    Tagged(TaggedRepr),
    /// T = 0.
    Untagged(UntaggedRepr),
}

impl DdpRepr {
    /// Parse the header of the model its T bit names (DDP-13). (Inlined: fat LTO leaves this
    /// generic out of line in the receive path otherwise.)
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &DdpPacket<T>) -> Result<Self, DdpHeaderError> {
        p.check_len()?;
        let b = p.buffer.as_ref();
        if DdpControl::parse(p.control()).tagged {
            Ok(DdpRepr::Tagged(TaggedRepr::parse(
                &TaggedPacket::new_unchecked(b),
            )?))
        } else {
            Ok(DdpRepr::Untagged(UntaggedRepr::parse(
                &UntaggedPacket::new_unchecked(b),
            )?))
        }
    }

    /// Header length: 14 or 18.
    pub const fn buffer_len(&self) -> usize {
        match self {
            DdpRepr::Tagged(_) => TAGGED_HEADER_LEN,
            DdpRepr::Untagged(_) => UNTAGGED_HEADER_LEN,
        }
    }

    /// Write the header into the first `buffer_len()` octets of `p` (payload untouched).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut DdpPacket<T>) {
        let b = p.buffer.as_mut();
        match self {
            DdpRepr::Tagged(r) => r.emit(&mut TaggedPacket::new_unchecked(b)),
            DdpRepr::Untagged(r) => r.emit(&mut UntaggedPacket::new_unchecked(b)),
        }
    }

    /// The L bit.
    pub const fn last(&self) -> bool {
        match self {
            DdpRepr::Tagged(r) => r.last,
            DdpRepr::Untagged(r) => r.last,
        }
    }

    /// `RsvdULP[0:7]`, the RDMAP control byte.
    pub const fn rsvd_ulp(&self) -> u8 {
        match self {
            DdpRepr::Tagged(r) => r.rsvd_ulp,
            DdpRepr::Untagged(r) => r.rsvd_ulp,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ddp::stag::Stag;
    use proptest::prelude::*;

    /// The header and the payload of `segment`, through the view.
    fn parse(segment: &[u8]) -> Result<(DdpRepr, &[u8]), DdpHeaderError> {
        let p = DdpPacket::new_checked(segment)?;
        Ok((DdpRepr::parse(&p)?, &segment[p.header_len()..]))
    }

    fn emit(h: &DdpRepr, buf: &mut [u8]) {
        h.emit(&mut DdpPacket::new_unchecked(buf));
    }

    #[test]
    fn dispatch_on_t_bit() {
        let t = DdpRepr::Tagged(TaggedRepr {
            last: true,
            rsvd_ulp: 0x40,
            stag: Stag(7),
            to: 9,
        });
        let mut b = [0u8; 20];
        emit(&t, &mut b);
        let (h, payload) = parse(&b).unwrap();
        assert_eq!(h, t);
        assert_eq!(payload.len(), 6);
        let u = DdpRepr::Untagged(UntaggedRepr {
            last: false,
            rsvd_ulp: 0x43,
            rsvd_ulp_ext: 0,
            qn: 0,
            msn: 1,
            mo: 0,
        });
        emit(&u, &mut b);
        assert_eq!(parse(&b).unwrap(), (u, &b[18..]));
    }

    #[test]
    fn version_error_wins_over_truncation() {
        assert_eq!(
            parse(&[0x82]),
            Err(DdpHeaderError::Version {
                dv: 2,
                tagged: true
            })
        );
        assert_eq!(parse(&[0x41, 0x43]), Err(DdpHeaderError::Truncated));
        assert_eq!(parse(&[]), Err(DdpHeaderError::Truncated));
    }

    fn arb_header() -> impl Strategy<Value = DdpRepr> {
        prop_oneof![
            (any::<bool>(), any::<u8>(), any::<u32>(), any::<u64>()).prop_map(
                |(last, rsvd_ulp, s, to)| {
                    DdpRepr::Tagged(TaggedRepr {
                        last,
                        rsvd_ulp,
                        stag: Stag(s),
                        to,
                    })
                }
            ),
            (
                any::<bool>(),
                any::<u8>(),
                any::<u32>(),
                any::<u32>(),
                any::<u32>(),
                any::<u32>()
            )
                .prop_map(|(last, rsvd_ulp, rsvd_ulp_ext, qn, msn, mo)| {
                    DdpRepr::Untagged(UntaggedRepr {
                        last,
                        rsvd_ulp,
                        rsvd_ulp_ext,
                        qn,
                        msn,
                        mo,
                    })
                }),
        ]
    }

    proptest! {
        /// parse(emit(x)) == x for either model, payload returned intact.
        #[test]
        fn parse_emit_roundtrip(h in arb_header(), payload in proptest::collection::vec(any::<u8>(), 0..40)) {
            let mut b = vec![0u8; h.buffer_len() + payload.len()];
            emit(&h, &mut b);
            b[h.buffer_len()..].copy_from_slice(&payload);
            let (back, p) = parse(&b).unwrap();
            prop_assert_eq!(back, h);
            prop_assert_eq!(p, &payload[..]);
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok((h, p)) = parse(&b) {
                prop_assert_eq!(h.buffer_len() + p.len(), b.len());
            }
        }
    }
}
