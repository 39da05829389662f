//! The RDMA Read Request header (RFC 5040 §4.4): 28 octets, the payload of an
//! untagged QN 1 message.
//!
//! ```text
//! 0..4: Data Sink STag | 4..12: Data Sink TO | 12..16: RDMA Read Message Size
//! 16..20: Data Source STag | 20..28: Data Source TO
//! ```

use crate::be::{get_u32, get_u64, put_u32, put_u64};
use crate::ddp::stag::Stag;
use crate::rdmap::header_error::RdmapHeaderError;

/// Length of the Read Request header.
pub const READ_REQUEST_HEADER_LEN: usize = 28;

mod field {
    pub const SINK_STAG: usize = 0;
    pub const SINK_TO: usize = 4;
    pub const SIZE: usize = 12;
    pub const SRC_STAG: usize = 16;
    pub const SRC_TO: usize = 20;
}

/// A checked, zero-copy view of a Read Request header.
#[derive(Debug, Clone)]
pub struct ReadRequestPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ReadRequestPacket<T> {
    /// Wrap without checking; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        ReadRequestPacket { buffer }
    }

    /// Wrap after checking the buffer holds the whole header.
    pub fn new_checked(buffer: T) -> Result<Self, RdmapHeaderError> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Err(Truncated)` when shorter than 28 octets.
    pub fn check_len(&self) -> Result<(), RdmapHeaderError> {
        if self.buffer.as_ref().len() < READ_REQUEST_HEADER_LEN {
            Err(RdmapHeaderError::Truncated)
        } else {
            Ok(())
        }
    }

    /// Give the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Data Sink STag (the requester's buffer).
    pub fn sink_stag(&self) -> Stag {
        Stag(get_u32(self.buffer.as_ref(), field::SINK_STAG))
    }

    /// Data Sink Tagged Offset.
    pub fn sink_to(&self) -> u64 {
        get_u64(self.buffer.as_ref(), field::SINK_TO)
    }

    /// RDMA Read Message Size.
    pub fn size(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::SIZE)
    }

    /// Data Source STag (the responder's buffer).
    pub fn src_stag(&self) -> Stag {
        Stag(get_u32(self.buffer.as_ref(), field::SRC_STAG))
    }

    /// Data Source Tagged Offset.
    pub fn src_to(&self) -> u64 {
        get_u64(self.buffer.as_ref(), field::SRC_TO)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ReadRequestPacket<T> {
    /// Set the Data Sink STag.
    pub fn set_sink_stag(&mut self, v: Stag) {
        put_u32(self.buffer.as_mut(), field::SINK_STAG, v.0);
    }

    /// Set the Data Sink Tagged Offset.
    pub fn set_sink_to(&mut self, v: u64) {
        put_u64(self.buffer.as_mut(), field::SINK_TO, v);
    }

    /// Set the RDMA Read Message Size.
    pub fn set_size(&mut self, v: u32) {
        put_u32(self.buffer.as_mut(), field::SIZE, v);
    }

    /// Set the Data Source STag.
    pub fn set_src_stag(&mut self, v: Stag) {
        put_u32(self.buffer.as_mut(), field::SRC_STAG, v.0);
    }

    /// Set the Data Source Tagged Offset.
    pub fn set_src_to(&mut self, v: u64) {
        put_u64(self.buffer.as_mut(), field::SRC_TO, v);
    }
}

/// The fields of a Read Request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadRequestRepr {
    /// Requester's STag for the Read Response.
    pub sink_stag: Stag,
    /// Requester's TO for the Read Response.
    pub sink_to: u64,
    /// Octets to read.
    pub size: u32,
    /// Responder's STag (needs remote read).
    pub src_stag: Stag,
    /// Responder's TO.
    pub src_to: u64,
}

impl ReadRequestRepr {
    /// Parse (length-checked).
    pub fn parse<T: AsRef<[u8]>>(p: &ReadRequestPacket<T>) -> Result<Self, RdmapHeaderError> {
        p.check_len()?;
        Ok(ReadRequestRepr {
            sink_stag: p.sink_stag(),
            sink_to: p.sink_to(),
            size: p.size(),
            src_stag: p.src_stag(),
            src_to: p.src_to(),
        })
    }

    /// Always 28.
    pub const fn buffer_len(&self) -> usize {
        READ_REQUEST_HEADER_LEN
    }

    /// Write the header into the first 28 octets of `p`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut ReadRequestPacket<T>) {
        p.set_sink_stag(self.sink_stag);
        p.set_sink_to(self.sink_to);
        p.set_size(self.size);
        p.set_src_stag(self.src_stag);
        p.set_src_to(self.src_to);
    }

    /// The 28 octets as an array.
    pub fn to_bytes(&self) -> [u8; READ_REQUEST_HEADER_LEN] {
        let mut b = [0u8; READ_REQUEST_HEADER_LEN];
        self.emit(&mut ReadRequestPacket::new_unchecked(&mut b[..]));
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ddp::untagged::{UntaggedPacket, UntaggedRepr};
    use proptest::prelude::*;

    /// The whole 46-octet Read Request segment, byte for byte.
    #[test]
    fn golden_read_request_segment() {
        let mut seg = [0u8; 46];
        let h = UntaggedRepr {
            last: true,
            rsvd_ulp: 0x41,
            rsvd_ulp_ext: 0,
            qn: 1,
            msn: 1,
            mo: 0,
        };
        h.emit(&mut UntaggedPacket::new_unchecked(&mut seg[..]));
        let rr = ReadRequestRepr {
            sink_stag: Stag(0x11111111),
            sink_to: 0x1000,
            size: 4096,
            src_stag: Stag(0x22222222),
            src_to: 0x2000,
        };
        rr.emit(&mut ReadRequestPacket::new_unchecked(&mut seg[18..]));
        let expect: [u8; 46] = [
            0x41, 0x41, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01,
            0x00, 0x00, 0x00, 0x00, 0x11, 0x11, 0x11, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x10, 0x00, 0x00, 0x00, 0x10, 0x00, 0x22, 0x22, 0x22, 0x22, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x20, 0x00,
        ];
        assert_eq!(seg, expect);
        assert_eq!(
            ReadRequestRepr::parse(&ReadRequestPacket::new_checked(&seg[18..]).unwrap()),
            Ok(rr)
        );
    }

    proptest! {
        #[test]
        fn parse_emit_roundtrip(a: u32, b: u64, c: u32, d: u32, e: u64) {
            let r = ReadRequestRepr { sink_stag: Stag(a), sink_to: b, size: c, src_stag: Stag(d), src_to: e };
            let bytes = r.to_bytes();
            prop_assert_eq!(ReadRequestRepr::parse(&ReadRequestPacket::new_checked(&bytes[..]).unwrap()), Ok(r));
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(p) = ReadRequestPacket::new_checked(&b[..]) {
                let _ = ReadRequestRepr::parse(&p);
            }
        }
    }
}
