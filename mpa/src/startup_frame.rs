//! MPA Request and Reply frames (draft §6.1.1, Figure 7; digest §1.4).
//!
//! ```text
//! 0..16   Key  "MPA ID Req Frame" / "MPA ID Rep Frame"
//! 16      M 0x80 | C 0x40 | R 0x20 | Res 0x1F
//! 17      Rev
//! 18..20  PD_Length (u16 BE)
//! 20..    Private data (PD_Length octets)
//! ```
//! Plain bytes in the Startup Phase: no CRC, no markers, no padding.

use thiserror::Error;

/// Key of an MPA Request Frame (hex of §6.1.1; A3: capital F as in the hex).
pub const KEY_REQUEST: [u8; 16] = *b"MPA ID Req Frame";
/// Key of an MPA Reply Frame.
pub const KEY_REPLY: [u8; 16] = *b"MPA ID Rep Frame";
/// Octets before the private data.
pub const HEADER_LEN: usize = 20;
/// Revision of draft-ietf-rddp-mpa-01.
pub const REVISION_DRAFT: u8 = 0;
/// Revision of RFC 5044.
pub const REVISION_RFC5044: u8 = 1;

const FLAG_M: u8 = 0x80;
const FLAG_C: u8 = 0x40;
const FLAG_R: u8 = 0x20;
const FLAG_RES: u8 = 0x1F;

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
    /// Res bits (0 on send, not checked on receive, MPA-101).
    pub fn reserved(&self) -> u8 {
        self.flags() & FLAG_RES
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
    /// Writes the flag octet (M, C, R; Res 0).
    pub fn set_flags(&mut self, m: bool, c: bool, r: bool) {
        let f = (if m { FLAG_M } else { 0 })
            | (if c { FLAG_C } else { 0 })
            | (if r { FLAG_R } else { 0 });
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
    /// Private data (at most 65535 octets).
    pub private_data: &'a [u8],
}

impl<'a> Repr<'a> {
    /// Parses a view: checks the length and the key; Res is ignored (MPA-101). The
    /// revision and the private-data limit are the state machines' business.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&'a T>) -> Result<Repr<'a>, FrameError> {
        p.check_len()?;
        let buf: &'a [u8] = p.buffer.as_ref();
        let p = Packet::new_unchecked(buf);
        let kind = p.kind().ok_or(FrameError::BadKey)?;
        let end = p.frame_len();
        Ok(Repr {
            kind,
            markers: p.markers(),
            crc: p.crc(),
            reject: p.reject(),
            revision: p.revision(),
            private_data: &buf[field::PD..end],
        })
    }

    /// Octets of the emitted frame.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.private_data.len()
    }

    /// Writes the frame into a view of at least [`Self::buffer_len`] octets. The private
    /// data must not exceed 65535 octets (it is truncated to that).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        let pd = &self.private_data[..self.private_data.len().min(usize::from(u16::MAX))];
        p.set_key(self.kind.key());
        p.set_flags(self.markers, self.crc, self.reject);
        p.set_revision(self.revision);
        p.set_pd_length(pd.len() as u16);
        p.private_data_mut().copy_from_slice(pd);
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

    /// Digest §1.4 derived examples, byte for byte (MPA-77, MPA-94, MPA-96, MPA-103).
    #[test]
    fn digest_1_4_frames() {
        let req = Repr {
            kind: FrameKind::Request,
            markers: true,
            crc: true,
            reject: false,
            revision: 0,
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

    /// MPA-100/101: R in a Request and Res bits are carried but not errors.
    #[test]
    fn res_bits_and_request_r_are_not_errors() {
        let mut b = hex("4d 50 41 20 49 44 20 52 65 71 20 46 72 61 6d 65 ff 00 00 00");
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.reserved(), 0x1f);
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
