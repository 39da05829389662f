//! A whole DDP segment (-06 §4.4): either header model, plus its payload.

use crate::ddp::control;
use crate::ddp::header_error::DdpHeaderError;
use crate::ddp::tagged::{TaggedPacket, TaggedRepr, TAGGED_HEADER_LEN};
use crate::ddp::untagged::{UntaggedPacket, UntaggedRepr, UNTAGGED_HEADER_LEN};

/// The header of a DDP segment, tagged or untagged (chosen by the T bit, DDP-13).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DdpHeader {
    /// T = 1.
    Tagged(TaggedRepr),
    /// T = 0.
    Untagged(UntaggedRepr),
}

impl DdpHeader {
    /// Parse the header at the start of `segment`; returns it and the payload.
    /// The control byte is read first, so a short buffer with DV != 1 reports the version
    /// error (the header layout is unknown then), and a short buffer with DV = 1 `Truncated`.
    pub fn parse(segment: &[u8]) -> Result<(DdpHeader, &[u8]), DdpHeaderError> {
        let c = *segment.first().ok_or(DdpHeaderError::Truncated)?;
        let tagged = control::is_tagged(c);
        if control::version(c) != control::DDP_VERSION {
            return Err(DdpHeaderError::Version {
                dv: control::version(c),
                tagged,
            });
        }
        if tagged {
            let p = TaggedPacket::new_checked(segment)?;
            Ok((
                DdpHeader::Tagged(TaggedRepr::parse(&p)?),
                &segment[TAGGED_HEADER_LEN..],
            ))
        } else {
            let p = UntaggedPacket::new_checked(segment)?;
            Ok((
                DdpHeader::Untagged(UntaggedRepr::parse(&p)?),
                &segment[UNTAGGED_HEADER_LEN..],
            ))
        }
    }

    /// 14 or 18.
    pub const fn buffer_len(&self) -> usize {
        match self {
            DdpHeader::Tagged(_) => TAGGED_HEADER_LEN,
            DdpHeader::Untagged(_) => UNTAGGED_HEADER_LEN,
        }
    }

    /// Write the header into the start of `buf` (at least `buffer_len()` octets).
    pub fn emit(&self, buf: &mut [u8]) {
        match self {
            DdpHeader::Tagged(r) => r.emit(&mut TaggedPacket::new_unchecked(buf)),
            DdpHeader::Untagged(r) => r.emit(&mut UntaggedPacket::new_unchecked(buf)),
        }
    }

    /// The L bit.
    pub const fn last(&self) -> bool {
        match self {
            DdpHeader::Tagged(r) => r.last,
            DdpHeader::Untagged(r) => r.last,
        }
    }

    /// `RsvdULP[0:7]`, the RDMAP control byte.
    pub const fn rsvd_ulp(&self) -> u8 {
        match self {
            DdpHeader::Tagged(r) => r.rsvd_ulp,
            DdpHeader::Untagged(r) => r.rsvd_ulp,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ddp::stag::Stag;
    use proptest::prelude::*;

    #[test]
    fn dispatch_on_t_bit() {
        let t = DdpHeader::Tagged(TaggedRepr {
            last: true,
            rsvd_ulp: 0x40,
            stag: Stag(7),
            to: 9,
        });
        let mut b = [0u8; 20];
        t.emit(&mut b);
        let (h, payload) = DdpHeader::parse(&b).unwrap();
        assert_eq!(h, t);
        assert_eq!(payload.len(), 6);
        let u = DdpHeader::Untagged(UntaggedRepr {
            last: false,
            rsvd_ulp: 0x43,
            rsvd_ulp_ext: 0,
            qn: 0,
            msn: 1,
            mo: 0,
        });
        u.emit(&mut b);
        assert_eq!(DdpHeader::parse(&b).unwrap(), (u, &b[18..]));
    }

    #[test]
    fn version_error_wins_over_truncation() {
        assert_eq!(
            DdpHeader::parse(&[0x82]),
            Err(DdpHeaderError::Version {
                dv: 2,
                tagged: true
            })
        );
        assert_eq!(
            DdpHeader::parse(&[0x41, 0x43]),
            Err(DdpHeaderError::Truncated)
        );
        assert_eq!(DdpHeader::parse(&[]), Err(DdpHeaderError::Truncated));
    }

    fn arb_header() -> impl Strategy<Value = DdpHeader> {
        prop_oneof![
            (any::<bool>(), any::<u8>(), any::<u32>(), any::<u64>()).prop_map(
                |(last, rsvd_ulp, s, to)| {
                    DdpHeader::Tagged(TaggedRepr {
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
                    DdpHeader::Untagged(UntaggedRepr {
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
            h.emit(&mut b);
            b[h.buffer_len()..].copy_from_slice(&payload);
            let (back, p) = DdpHeader::parse(&b).unwrap();
            prop_assert_eq!(back, h);
            prop_assert_eq!(p, &payload[..]);
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok((h, p)) = DdpHeader::parse(&b) {
                prop_assert_eq!(h.buffer_len() + p.len(), b.len());
            }
        }
    }
}
