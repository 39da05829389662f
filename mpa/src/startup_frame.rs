//! MPA Request and Reply frames (draft §6.1.1, Figure 7; RFC 6581 §7.1).
//!
//! ```text
//! 0..16   Key  "MPA ID Req Frame" / "MPA ID Rep Frame"
//! 16      M 0x80 | C 0x40 | R 0x20 | Enhanced 0x10 (Rev 2) | Res 0x0F
//! 17      Rev
//! 18..20  PD_Length (u16 BE)
//! 20..    Private data (PD_Length octets); in a Rev 2 frame with the Enhanced flag the first
//!         4 are the IRD/ORD octets ([`crate::enhanced`]), the ULP's private data follows
//! ```
//! Plain bytes in the Startup Phase: no CRC, no markers, no padding. In Rev 0 and Rev 1
//! frames the Enhanced bit is a Res bit (not checked on receive, MPA-101).

use thiserror::Error;

use crate::enhanced::{EnhancedData, EnhancedPacket, ENHANCED_LEN};
pub use crate::revision::{REVISION_DRAFT, REVISION_ENHANCED, REVISION_RFC5044};

/// Key of an MPA Request Frame (hex of §6.1.1; A3: capital F as in the hex).
pub const KEY_REQUEST: [u8; 16] = *b"MPA ID Req Frame";
/// Key of an MPA Reply Frame.
pub const KEY_REPLY: [u8; 16] = *b"MPA ID Rep Frame";
/// Octets before the private data.
pub const HEADER_LEN: usize = 20;

const FLAG_M: u8 = 0x80;
const FLAG_C: u8 = 0x40;
const FLAG_R: u8 = 0x20;
const FLAG_ENHANCED: u8 = 0x10;
const FLAG_RES: u8 = 0x0F;

mod field {
    use core::ops::Range;
    pub const KEY: Range<usize> = 0..16;
    pub const FLAGS: usize = 16;
    pub const REV: usize = 17;
    pub const PD_LENGTH: Range<usize> = 18..20;
    pub const PD: usize = 20;
}

/// Request (sent by the Initiator) or Reply (sent by the Responder).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameKind {
    /// "MPA ID Req Frame".
    Request,
    /// "MPA ID Rep Frame".
    Reply,
}

impl FrameKind {
    /// The 16-octet key.
    pub fn key(self) -> &'static [u8; 16] {
        match self {
            FrameKind::Request => &KEY_REQUEST,
            FrameKind::Reply => &KEY_REPLY,
        }
    }
    /// The kind a key names, if any.
    pub fn from_key(key: &[u8]) -> Option<FrameKind> {
        if key == KEY_REQUEST {
            Some(FrameKind::Request)
        } else if key == KEY_REPLY {
            Some(FrameKind::Reply)
        } else {
            None
        }
    }
}

/// Frame view errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Error)]
pub enum FrameError {
    /// Fewer octets than the header plus PD_Length.
    #[error("truncated MPA startup frame")]
    Truncated,
    /// The key is neither the Request nor the Reply key.
    #[error("bad MPA key")]
    BadKey,
    /// A Rev 2 frame with the Enhanced flag and PD_Length below 4 (RFC 6581 §7.1).
    #[error("MPA Rev 2 frame too short for its IRD/ORD octets")]
    NoEnhancedData,
}

/// A checked zero-copy view of a Request or Reply frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps without checks (accessors may then panic on short buffers).
    pub fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }
    /// Wraps a buffer holding at least the header and `PD_Length` octets of private data.
    pub fn new_checked(buffer: T) -> Result<Self, FrameError> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }
    /// Checks the buffer covers the header and the private data.
    pub fn check_len(&self) -> Result<(), FrameError> {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN || b.len() < self.frame_len() {
            Err(FrameError::Truncated)
        } else {
            Ok(())
        }
    }
    /// Octets of the whole frame (header + PD_Length); needs 20 octets.
    pub fn frame_len(&self) -> usize {
        HEADER_LEN + usize::from(self.pd_length())
    }
    /// The 16-octet key.
    pub fn key(&self) -> &[u8] {
        &self.buffer.as_ref()[field::KEY]
    }
    /// Request or Reply, by key.
    pub fn kind(&self) -> Option<FrameKind> {
        FrameKind::from_key(self.key())
    }
    fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }
    /// M: the frame's sender wants markers on what it receives.
    pub fn markers(&self) -> bool {
        self.flags() & FLAG_M != 0
    }
    /// C: the frame's sender wants CRCs.
    pub fn crc(&self) -> bool {
        self.flags() & FLAG_C != 0
    }
    /// R: in a Reply, 1 = rejected (unchecked in a Request, MPA-100).
    pub fn reject(&self) -> bool {
        self.flags() & FLAG_R != 0
    }
    /// The Enhanced flag (RFC 6581 §7.1): in a Rev 2 frame, the private data starts with the
    /// IRD/ORD octets. A Res bit in other revisions.
    pub fn enhanced(&self) -> bool {
        self.flags() & FLAG_ENHANCED != 0
    }
    /// Res bits (0 on send, not checked on receive, MPA-101).
    pub fn reserved(&self) -> u8 {
        self.flags() & FLAG_RES
    }
    /// Whether the private data leads with the IRD/ORD octets: Rev 2 and the Enhanced flag.
    pub fn has_enhanced_data(&self) -> bool {
        self.revision() == REVISION_ENHANCED && self.enhanced()
    }
    /// Rev.
    pub fn revision(&self) -> u8 {
        self.buffer.as_ref()[field::REV]
    }
    /// PD_Length.
    pub fn pd_length(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::PD_LENGTH];
        u16::from_be_bytes([b[0], b[1]])
    }
    /// The private data (PD_Length octets).
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PD..self.frame_len()]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes the key.
    pub fn set_key(&mut self, key: &[u8; 16]) {
        self.buffer.as_mut()[field::KEY].copy_from_slice(key);
    }
    /// Writes the flag octet (M, C, R, Enhanced; Res 0).
    pub fn set_flags(&mut self, m: bool, c: bool, r: bool, enhanced: bool) {
        let bit = |on: bool, f: u8| if on { f } else { 0 };
        let f = bit(m, FLAG_M) | bit(c, FLAG_C) | bit(r, FLAG_R) | bit(enhanced, FLAG_ENHANCED);
        self.buffer.as_mut()[field::FLAGS] = f;
    }
    /// Writes Rev.
    pub fn set_revision(&mut self, rev: u8) {
        self.buffer.as_mut()[field::REV] = rev;
    }
    /// Writes PD_Length.
    pub fn set_pd_length(&mut self, len: u16) {
        self.buffer.as_mut()[field::PD_LENGTH].copy_from_slice(&len.to_be_bytes());
    }
    /// The private-data area (after PD_Length is set).
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        let end = self.frame_len();
        &mut self.buffer.as_mut()[field::PD..end]
    }
}

/// A parsed Request or Reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr<'a> {
    /// Request or Reply.
    pub kind: FrameKind,
    /// M bit.
    pub markers: bool,
    /// C bit.
    pub crc: bool,
    /// R bit (meaningful in a Reply only; senders of a Request set 0).
    pub reject: bool,
    /// Rev.
    pub revision: u8,
    /// Rev 2: the IRD/ORD octets (RFC 6581 §7.1), sent with the Enhanced flag ahead of
    /// `private_data`. Parsed only from Rev 2 frames with the flag; emitted whenever set.
    pub enhanced: Option<EnhancedData>,
    /// The ULP's private data (at most 65535 octets with the enhanced data).
    pub private_data: &'a [u8],
}

impl<'a> Repr<'a> {
    /// Parses a view: checks the length, the key and, in a Rev 2 frame with the Enhanced
    /// flag, that the IRD/ORD octets are there; Res is ignored (MPA-101). The revision and the
    /// private-data limit are the state machines' business.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&'a T>) -> Result<Repr<'a>, FrameError> {
        p.check_len()?;
        let buf: &'a [u8] = p.buffer.as_ref();
        let p = Packet::new_unchecked(buf);
        let kind = p.kind().ok_or(FrameError::BadKey)?;
        let mut pd = &buf[field::PD..p.frame_len()];
        let mut enhanced = None;
        if p.has_enhanced_data() {
            let e = EnhancedPacket::new_checked(pd).map_err(|_| FrameError::NoEnhancedData)?;
            enhanced = Some(EnhancedData::parse(&e));
            pd = &pd[ENHANCED_LEN..];
        }
        Ok(Repr {
            kind,
            markers: p.markers(),
            crc: p.crc(),
            reject: p.reject(),
            revision: p.revision(),
            enhanced,
            private_data: pd,
        })
    }

    fn enhanced_len(&self) -> usize {
        if self.enhanced.is_some() {
            ENHANCED_LEN
        } else {
            0
        }
    }

    /// Octets of the emitted frame.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.enhanced_len() + self.private_data.len()
    }

    /// Writes the frame into a view of at least [`Self::buffer_len`] octets. PD_Length (the
    /// enhanced octets included) must not exceed 65535 (the private data is truncated to fit).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        let room = usize::from(u16::MAX) - self.enhanced_len();
        let pd = &self.private_data[..self.private_data.len().min(room)];
        p.set_key(self.kind.key());
        p.set_flags(self.markers, self.crc, self.reject, self.enhanced.is_some());
        p.set_revision(self.revision);
        p.set_pd_length((self.enhanced_len() + pd.len()) as u16);
        let out = p.private_data_mut();
        let (head, tail) = out.split_at_mut(self.enhanced_len());
        if let Some(e) = self.enhanced {
            head.copy_from_slice(&e.to_bytes());
        }
        tail.copy_from_slice(pd);
    }

    /// The frame as a new vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.buffer_len()];
        self.emit(&mut Packet::new_unchecked(&mut v[..]));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        s.split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).unwrap())
            .collect()
    }

    /// Request, Reply and reject frames derived from Figure 7, byte for byte (MPA-77, MPA-94, MPA-96, MPA-103).
    #[test]
    fn derived_request_and_reply_frames() {
        let req = Repr {
            kind: FrameKind::Request,
            markers: true,
            crc: true,
            reject: false,
            revision: 0,
            enhanced: None,
            private_data: &[],
        };
        assert_eq!(
            req.to_vec(),
            hex("4d 50 41 20 49 44 20 52 65 71 20 46 72 61 6d 65 c0 00 00 00")
        );
        let rep = Repr {
            kind: FrameKind::Reply,
            markers: false,
            crc: true,
            reject: false,
            revision: 0,
            enhanced: None,
            private_data: b"ok",
        };
        assert_eq!(
            rep.to_vec(),
            hex("4d 50 41 20 49 44 20 52 65 70 20 46 72 61 6d 65 40 00 00 02 6f 6b")
        );
        let rej = Repr {
            reject: true,
            private_data: &[],
            ..rep
        };
        assert_eq!(
            rej.to_vec(),
            hex("4d 50 41 20 49 44 20 52 65 70 20 46 72 61 6d 65 60 00 00 00")
        );
        let rfc = Repr {
            markers: false,
            revision: 1,
            ..req
        };
        assert_eq!(
            rfc.to_vec(),
            hex("4d 50 41 20 49 44 20 52 65 71 20 46 72 61 6d 65 40 01 00 00")
        );
        for frame in [req, rep, rej, rfc] {
            let bytes = frame.to_vec();
            assert_eq!(
                Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap(),
                frame
            );
        }
    }

    /// RFC 6581 §7.1: a Rev 2 Request with the Enhanced flag, IRD/ORD octets ahead of the
    /// ULP's private data, byte for byte; the ULP's private data comes back alone.
    #[test]
    fn rfc6581_7_1_rev2_frame_bytes() {
        use crate::enhanced::{RtrType, RtrTypes};
        let req = Repr {
            kind: FrameKind::Request,
            markers: false,
            crc: true,
            reject: false,
            revision: 2,
            enhanced: Some(EnhancedData {
                ird: 16,
                ord: 8,
                p2p: true,
                rtr: RtrTypes::only(RtrType::Write).with(RtrType::Read),
            }),
            private_data: b"pd",
        };
        let bytes = req.to_vec();
        assert_eq!(
            bytes,
            hex("4d 50 41 20 49 44 20 52 65 71 20 46 72 61 6d 65 50 02 00 06 80 10 c0 08 70 64")
        );
        let back = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(back, req);
        assert_eq!(back.private_data, b"pd");
    }

    /// RFC 6581 §7.1: the Enhanced flag means IRD/ORD octets only in a Rev 2 frame; a Rev 2
    /// frame with the flag and fewer than 4 octets is malformed; without the flag, or in Rev 1,
    /// the private data is all the ULP's.
    #[test]
    fn rfc6581_7_1_enhanced_flag_only_counts_in_rev2() {
        let mut b = hex("4d 50 41 20 49 44 20 52 65 70 20 46 72 61 6d 65 50 02 00 03 01 02 03");
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap()),
            Err(FrameError::NoEnhancedData)
        );
        b[17] = 1;
        let r = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!((r.enhanced, r.private_data), (None, &[1u8, 2, 3][..]));
        b[17] = 2;
        b[16] = 0x40;
        let r = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!((r.enhanced, r.private_data), (None, &[1u8, 2, 3][..]));
    }

    /// MPA-100/101: R in a Request and Res bits are carried but not errors.
    #[test]
    fn res_bits_and_request_r_are_not_errors() {
        let mut b = hex("4d 50 41 20 49 44 20 52 65 71 20 46 72 61 6d 65 ff 00 00 00");
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.reserved(), 0x0f);
        assert!(p.enhanced() && !p.has_enhanced_data());
        let r = Repr::parse(&p).unwrap();
        assert!(r.markers && r.crc && r.reject);
        b[0] = b'm';
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&b[..])),
            Err(FrameError::BadKey)
        );
    }

    #[test]
    fn truncated_frames_are_reported() {
        let bytes = hex("4d 50 41 20 49 44 20 52 65 70 20 46 72 61 6d 65 40 00 00 02 6f");
        assert_eq!(
            Packet::new_checked(&bytes[..]).unwrap_err(),
            FrameError::Truncated
        );
        assert_eq!(
            Packet::new_checked(&bytes[..19]).unwrap_err(),
            FrameError::Truncated
        );
    }
}
