//! The RDMAP Terminate header (RFC 5040 §4.8): the payload of an untagged QN 2 message.
//!
//! ```text
//! 0..4 : Terminate Control: Layer(4) | EType(4) | Code(8) | M | D | R | Reserved(13)
//! then, when M or D is set: 2 octets DDP Segment Length (meaningful only when M is set)
//! then, when D is set     : the Terminated DDP Header, 14 or 18 octets by its own T bit
//! then, when R is set     : the Terminated RDMA Header, 28 octets (a Read Request header)
//! ```
//!
//! Wireshark reads the length and DDP header when D is set; we always send M together with D,
//! so both readings agree on what we emit.

use crate::be::{get_u16, get_u32, put_u16, put_u32};
use crate::ddp::control::DdpControl;
use crate::ddp::tagged::TAGGED_HEADER_LEN;
use crate::ddp::untagged::UNTAGGED_HEADER_LEN;
use crate::rdmap::header_error::RdmapHeaderError;
use crate::rdmap::read_request::READ_REQUEST_HEADER_LEN;
use crate::rdmap::term_code::{Layer, TermCode};

/// Length of the Terminate Control field: the shortest Terminate header.
pub const TERMINATE_CONTROL_LEN: usize = 4;
/// Largest Terminate header: 4 + 2 + 18 + 28.
pub const TERMINATE_HEADER_MAX_LEN: usize =
    TERMINATE_CONTROL_LEN + 2 + UNTAGGED_HEADER_LEN + READ_REQUEST_HEADER_LEN;

const M_BIT: u32 = 0x8000;
const D_BIT: u32 = 0x4000;
const R_BIT: u32 = 0x2000;

mod field {
    pub const CONTROL: usize = 0;
    pub const SEG_LEN: usize = 4;
    pub const DDP_HEADER: usize = 6;
}

/// The Terminated DDP Header: a copy of the offending DDP header (14 or 18 octets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminatedDdpHeader {
    bytes: [u8; UNTAGGED_HEADER_LEN],
    len: u8,
}

impl TerminatedDdpHeader {
    /// Copy the header at the start of `segment`; its T bit decides 14 or 18 octets.
    /// `None` when the segment is too short to hold it.
    pub fn from_segment(segment: &[u8]) -> Option<TerminatedDdpHeader> {
        let len = if DdpControl::parse(*segment.first()?).tagged {
            TAGGED_HEADER_LEN
        } else {
            UNTAGGED_HEADER_LEN
        };
        // A fixed-size copy (no call to a copy routine: this runs for every last segment of
        // a message, kept in case it must be reported), the octets past a tagged header zeroed.
        let mut bytes = [0u8; UNTAGGED_HEADER_LEN];
        match segment.first_chunk::<UNTAGGED_HEADER_LEN>() {
            Some(all) => {
                bytes = *all;
                if len == TAGGED_HEADER_LEN {
                    bytes[TAGGED_HEADER_LEN..]
                        .copy_from_slice(&[0; UNTAGGED_HEADER_LEN - TAGGED_HEADER_LEN]);
                }
            }
            None => bytes[..len].copy_from_slice(segment.get(..len)?),
        }
        Some(TerminatedDdpHeader {
            bytes,
            len: len as u8,
        })
    }

    /// The copied octets.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

/// A checked, zero-copy view of a Terminate header.
#[derive(Debug, Clone)]
pub struct TerminatePacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TerminatePacket<T> {
    /// Wrap without checking; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        TerminatePacket { buffer }
    }

    /// Wrap after checking that every part the M/D/R bits announce is present.
    pub fn new_checked(buffer: T) -> Result<Self, RdmapHeaderError> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Err(Truncated)` when shorter than the Terminate Control field or than the parts its
    /// M/D/R bits announce.
    pub fn check_len(&self) -> Result<(), RdmapHeaderError> {
        if self.buffer.as_ref().len() < TERMINATE_CONTROL_LEN {
            return Err(RdmapHeaderError::Truncated);
        }
        if self.buffer.as_ref().len() < self.header_len()? {
            return Err(RdmapHeaderError::Truncated);
        }
        Ok(())
    }

    /// Give the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The raw 32-bit Terminate Control field.
    pub fn control(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::CONTROL)
    }

    /// M: the DDP Segment Length field is valid.
    pub fn m(&self) -> bool {
        self.control() & M_BIT != 0
    }

    /// D: a Terminated DDP Header follows.
    pub fn d(&self) -> bool {
        self.control() & D_BIT != 0
    }

    /// R: a Terminated RDMA Header follows.
    pub fn r(&self) -> bool {
        self.control() & R_BIT != 0
    }

    /// Length of the whole Terminate header per its M/D/R bits; needs the copied DDP header's
    /// first octet when D is set.
    pub fn header_len(&self) -> Result<usize, RdmapHeaderError> {
        let b = self.buffer.as_ref();
        let mut len = TERMINATE_CONTROL_LEN;
        if self.m() || self.d() {
            len += 2;
        }
        if self.d() {
            let c = *b
                .get(field::DDP_HEADER)
                .ok_or(RdmapHeaderError::Truncated)?;
            len += if DdpControl::parse(c).tagged {
                TAGGED_HEADER_LEN
            } else {
                UNTAGGED_HEADER_LEN
            };
        }
        if self.r() {
            len += READ_REQUEST_HEADER_LEN;
        }
        Ok(len)
    }

    /// DDP Segment Length (meaningful when M is set).
    pub fn seg_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::SEG_LEN)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TerminatePacket<T> {
    /// Set the 32-bit Terminate Control field.
    pub fn set_control(&mut self, v: u32) {
        put_u32(self.buffer.as_mut(), field::CONTROL, v);
    }

    /// Set the DDP Segment Length.
    pub fn set_seg_len(&mut self, v: u16) {
        put_u16(self.buffer.as_mut(), field::SEG_LEN, v);
    }
}

/// The fields of a Terminate header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminateRepr {
    /// Layer, EType, Code.
    pub code: TermCode,
    /// The offending DDP segment's length (M bit).
    pub seg_len: Option<u16>,
    /// The offending DDP header (D bit).
    pub ddp_header: Option<TerminatedDdpHeader>,
    /// The offending RDMA header, a Read Request (R bit).
    pub rdma_header: Option<[u8; READ_REQUEST_HEADER_LEN]>,
}

impl TerminateRepr {
    /// Parse; fails on an unknown layer or a truncated body.
    pub fn parse<T: AsRef<[u8]>>(p: &TerminatePacket<T>) -> Result<Self, RdmapHeaderError> {
        p.check_len()?;
        let b = p.buffer.as_ref();
        let c = p.control();
        let layer = match (c >> 28) as u8 {
            0 => Layer::Rdmap,
            1 => Layer::Ddp,
            2 => Layer::Llp,
            other => return Err(RdmapHeaderError::UnknownLayer(other)),
        };
        let code = TermCode {
            layer,
            etype: ((c >> 24) & 0xF) as u8,
            code: (c >> 16) as u8,
        };
        let mut at = TERMINATE_CONTROL_LEN;
        let mut seg_len = None;
        if p.m() || p.d() {
            if p.m() {
                seg_len = Some(p.seg_len());
            }
            at += 2;
        }
        let mut ddp_header = None;
        if p.d() {
            let h =
                TerminatedDdpHeader::from_segment(&b[at..]).ok_or(RdmapHeaderError::Truncated)?;
            at += h.as_bytes().len();
            ddp_header = Some(h);
        }
        let mut rdma_header = None;
        if p.r() {
            let mut r = [0u8; READ_REQUEST_HEADER_LEN];
            r.copy_from_slice(
                b.get(at..at + READ_REQUEST_HEADER_LEN)
                    .ok_or(RdmapHeaderError::Truncated)?,
            );
            rdma_header = Some(r);
        }
        Ok(TerminateRepr {
            code,
            seg_len,
            ddp_header,
            rdma_header,
        })
    }

    /// Octets `emit` writes.
    pub fn buffer_len(&self) -> usize {
        let mut len = TERMINATE_CONTROL_LEN;
        if self.seg_len.is_some() || self.ddp_header.is_some() {
            len += 2;
        }
        if let Some(h) = &self.ddp_header {
            len += h.as_bytes().len();
        }
        if self.rdma_header.is_some() {
            len += READ_REQUEST_HEADER_LEN;
        }
        len
    }

    /// Write the header into the first `buffer_len()` octets of `p`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut TerminatePacket<T>) {
        let mut c = (u32::from(self.code.layer as u8) << 28)
            | (u32::from(self.code.etype & 0xF) << 24)
            | (u32::from(self.code.code) << 16);
        if self.seg_len.is_some() {
            c |= M_BIT;
        }
        if self.ddp_header.is_some() {
            c |= D_BIT;
        }
        if self.rdma_header.is_some() {
            c |= R_BIT;
        }
        p.set_control(c);
        let mut at = TERMINATE_CONTROL_LEN;
        if self.seg_len.is_some() || self.ddp_header.is_some() {
            p.set_seg_len(self.seg_len.unwrap_or(0));
            at += 2;
        }
        let buf = p.buffer.as_mut();
        if let Some(h) = &self.ddp_header {
            let hb = h.as_bytes();
            buf[at..at + hb.len()].copy_from_slice(hb);
            at += hb.len();
        }
        if let Some(r) = &self.rdma_header {
            buf[at..at + READ_REQUEST_HEADER_LEN].copy_from_slice(r);
        }
    }

    /// Emit into a fixed array; returns it and the used length.
    pub fn to_bytes(&self) -> ([u8; TERMINATE_HEADER_MAX_LEN], usize) {
        let mut b = [0u8; TERMINATE_HEADER_MAX_LEN];
        self.emit(&mut TerminatePacket::new_unchecked(&mut b[..]));
        (b, self.buffer_len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ddp::error::DdpError;
    use proptest::prelude::*;

    /// A DDP base/bounds error with M and D gives Terminate Control 0x1101C000.
    #[test]
    fn golden_bounds_terminate_control() {
        let seg = [
            0xC1u8, 0x40, 0x12, 0x34, 0x56, 0x78, 0, 0, 0, 0, 0, 0, 0x40, 0x00, 0xAA,
        ];
        let t = TerminateRepr {
            code: DdpError::BaseBounds.term_code(),
            seg_len: Some(15),
            ddp_header: TerminatedDdpHeader::from_segment(&seg),
            rdma_header: None,
        };
        let (b, len) = t.to_bytes();
        assert_eq!(len, 4 + 2 + 14);
        assert_eq!(&b[..6], &[0x11, 0x01, 0xC0, 0x00, 0x00, 0x0F]);
        assert_eq!(&b[6..20], &seg[..14]);
        let p = TerminatePacket::new_checked(&b[..len]).unwrap();
        assert_eq!(TerminateRepr::parse(&p), Ok(t));
    }

    /// The copy of a tagged header taken from a whole segment (payload after it) is the same
    /// as from the 14 header octets alone: nothing of the payload is kept.
    #[test]
    fn tagged_header_copy_ignores_the_payload() {
        let mut seg = [0xEEu8; 40];
        seg[0] = 0xC1;
        let whole = TerminatedDdpHeader::from_segment(&seg).unwrap();
        let alone = TerminatedDdpHeader::from_segment(&seg[..14]).unwrap();
        assert_eq!(whole, alone);
        assert_eq!(whole.as_bytes(), &seg[..14]);
        seg[0] = 0x41;
        let untagged = TerminatedDdpHeader::from_segment(&seg).unwrap();
        assert_eq!(untagged.as_bytes(), &seg[..18]);
        assert_eq!(TerminatedDdpHeader::from_segment(&seg[..17]), None);
    }

    fn arb_term() -> impl Strategy<Value = TerminateRepr> {
        (
            0u8..3,
            0u8..16,
            any::<u8>(),
            proptest::option::of(any::<u16>()),
            proptest::option::of((any::<bool>(), proptest::collection::vec(any::<u8>(), 18))),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 28)),
        )
            .prop_map(|(l, etype, code, seg_len, hdr, rdma)| {
                let layer = [Layer::Rdmap, Layer::Ddp, Layer::Llp][l as usize];
                let ddp_header = hdr.map(|(tagged, mut v)| {
                    v[0] = if tagged { v[0] | 0x80 } else { v[0] & 0x7F };
                    TerminatedDdpHeader::from_segment(&v).unwrap()
                });
                let rdma_header = rdma.map(|v| {
                    let mut a = [0u8; 28];
                    a.copy_from_slice(&v);
                    a
                });
                TerminateRepr {
                    code: TermCode { layer, etype, code },
                    seg_len,
                    ddp_header,
                    rdma_header,
                }
            })
    }

    proptest! {
        #[test]
        fn parse_emit_roundtrip(t in arb_term()) {
            let (b, len) = t.to_bytes();
            let p = TerminatePacket::new_checked(&b[..len]).unwrap();
            prop_assert_eq!(TerminateRepr::parse(&p), Ok(t));
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(p) = TerminatePacket::new_checked(&b[..]) {
                let _ = TerminateRepr::parse(&p);
            }
        }
    }
}
