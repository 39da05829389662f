//! Markers (draft §4.1, §5.1, §6.1 rule 7).
//!
//! With markers on for a direction, a 4-octet marker sits at every stream offset that is a
//! multiple of 512 from SeqStart (the first octet after the sender's own startup frame).
//! Offsets here are always **relative to SeqStart**, as wrapping `u32`: since 2^32 is a
//! multiple of 512, a marker position is simply `offset % 512 == 0`, across the 32-bit
//! sequence wrap too (MPA-36). Use [`stream_offset`] to turn a TCP sequence number into one.

/// Distance between markers, in stream octets (MPA-32).
pub const MARKER_INTERVAL: u32 = 512;
/// Octets of one marker.
pub const MARKER_LEN: usize = 4;
/// Receivers treat the two low bits of FPDUPTR as zero (MPA-35).
pub const FPDUPTR_MASK: u16 = 0xFFFC;

mod field {
    use core::ops::Range;
    pub const RESERVED: Range<usize> = 0..2;
    pub const FPDUPTR: Range<usize> = 2..4;
}

/// Stream offset of TCP sequence number `seq` in a direction whose SeqStart is `seq_start`.
#[inline]
pub fn stream_offset(seq: u32, seq_start: u32) -> u32 {
    seq.wrapping_sub(seq_start)
}

/// True if a marker sits at stream offset `offset` (markers on).
#[inline]
pub fn is_marker_position(offset: u32) -> bool {
    offset & (MARKER_INTERVAL - 1) == 0
}

/// Distance from `offset` to the next marker position at or after it (0 if on one).
#[inline]
pub fn distance_to_marker(offset: u32) -> u32 {
    offset.wrapping_neg() % MARKER_INTERVAL
}

/// A checked, zero-copy view of a 4-octet marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

/// Marker view errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MarkerViewError {
    /// Fewer than 4 octets.
    #[error("truncated marker")]
    Truncated,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Wraps a buffer of at least 4 octets.
    pub fn new_checked(buffer: T) -> Result<Self, MarkerViewError> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the buffer holds a whole marker.
    pub fn check_len(&self) -> Result<(), MarkerViewError> {
        if self.buffer.as_ref().len() < MARKER_LEN {
            Err(MarkerViewError::Truncated)
        } else {
            Ok(())
        }
    }

    /// The RESERVED field (0 on send, ignored on receive except in the CRC, MPA-30).
    pub fn reserved(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::RESERVED];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// The raw FPDUPTR field, low bits included.
    pub fn fpduptr(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::FPDUPTR];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// FPDUPTR with the two low bits cleared, as a receiver must read it (MPA-35).
    pub fn fpduptr_masked(&self) -> u16 {
        self.fpduptr() & FPDUPTR_MASK
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets RESERVED.
    pub fn set_reserved(&mut self, v: u16) {
        self.buffer.as_mut()[field::RESERVED].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets FPDUPTR.
    pub fn set_fpduptr(&mut self, v: u16) {
        self.buffer.as_mut()[field::FPDUPTR].copy_from_slice(&v.to_be_bytes());
    }
}

/// A marker's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    /// RESERVED as seen on the wire (a sender emits 0).
    pub reserved: u16,
    /// FPDUPTR as seen on the wire (low bits included).
    pub fpduptr: u16,
}

impl Repr {
    /// Reads a checked view.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr, MarkerViewError> {
        p.check_len()?;
        Ok(Repr {
            reserved: p.reserved(),
            fpduptr: p.fpduptr(),
        })
    }
    /// Octets needed to emit.
    pub const fn buffer_len(&self) -> usize {
        MARKER_LEN
    }
    /// Writes into a view of at least 4 octets.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_reserved(self.reserved);
        p.set_fpduptr(self.fpduptr);
    }
    /// The marker a sender writes: RESERVED 0 and the given pointer.
    pub fn to_bytes(fpduptr: u16) -> [u8; MARKER_LEN] {
        let p = fpduptr.to_be_bytes();
        [0, 0, p[0], p[1]]
    }
}

/// Where a marker says its FPDU is (draft §4.1, §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkerTarget {
    /// Stream offset of the FPDU's first octet (its leading marker, if it has one).
    pub fpdu_start: u32,
    /// Stream offset of the FPDU's ULPDU_Length field.
    pub header: u32,
}

/// Resolves the marker at stream offset `marker_offset` carrying `fpduptr` (raw; masked
/// here, MPA-35). Accepts both readings of ambiguity A1: a pointer to the FPDU's leading
/// marker (draft-literal) as well as one to its ULPDU_Length (what we send). A header can
/// never sit on a marker position, so the two are told apart without guessing.
pub fn resolve(marker_offset: u32, fpduptr: u16) -> MarkerTarget {
    let ptr = u32::from(fpduptr & FPDUPTR_MASK);
    if ptr == 0 {
        // Marker between FPDUs: it leads the FPDU whose header follows it (MPA-34).
        return MarkerTarget {
            fpdu_start: marker_offset,
            header: marker_offset.wrapping_add(4),
        };
    }
    let target = marker_offset.wrapping_sub(ptr);
    let header = if is_marker_position(target) {
        target.wrapping_add(4)
    } else {
        target
    };
    let before = header.wrapping_sub(4);
    let fpdu_start = if is_marker_position(before) {
        before
    } else {
        header
    };
    MarkerTarget { fpdu_start, header }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Draft §5.1: MPA started at sequence 11 puts markers at 11, 523, 1035.
    #[test]
    fn mpa_32_marker_positions_from_seq_start() {
        let hits: Vec<u32> = (0u32..1100)
            .filter(|&s| is_marker_position(stream_offset(s, 11)))
            .collect();
        assert_eq!(hits, vec![11, 523, 1035]);
    }

    /// MPA-36: wrap examples with SeqStart 0xFFFFFF00.
    #[test]
    fn mpa_36_wrap_examples() {
        let ss = 0xFFFF_FF00u32;
        let markers: Vec<u32> = [0xFFFF_FF00u32, 0x100, 0x300, 0x500]
            .into_iter()
            .filter(|&s| is_marker_position(stream_offset(s, ss)))
            .collect();
        assert_eq!(markers.len(), 4);
        assert!(!is_marker_position(stream_offset(0, ss)));
        let m = stream_offset(0x100, ss);
        assert_eq!(resolve(m, 0x0014).header.wrapping_add(ss), 0x0000_00EC);
        assert_eq!(resolve(m, 0x0140).header.wrapping_add(ss), 0xFFFF_FFC0);
    }

    /// MPA-35: the two low bits of FPDUPTR are treated as zero.
    #[test]
    fn mpa_35_low_bits_masked() {
        assert_eq!(resolve(512, 0x0017), resolve(512, 0x0014));
        assert_eq!(resolve(512, 0x0003), resolve(512, 0));
        let p = Packet::new_checked([0u8, 0, 0, 0x17]).unwrap();
        assert_eq!(p.fpduptr_masked(), 0x14);
    }

    /// A1: both pointer origins resolve to the same FPDU (D4: 0x01FC and 0x0200 at 512).
    #[test]
    fn a1_both_variants_resolve_alike() {
        let hdr_rel = resolve(512, 0x01FC);
        let literal = resolve(512, 0x0200);
        assert_eq!(
            hdr_rel,
            MarkerTarget {
                fpdu_start: 0,
                header: 4
            }
        );
        assert_eq!(literal, hdr_rel);
        // Fig. 6: interior marker at 0x200 pointing 0x14 back, no leading marker.
        assert_eq!(
            resolve(0x200, 0x14),
            MarkerTarget {
                fpdu_start: 0x1ec,
                header: 0x1ec
            }
        );
        // MPA-34: zero pointer = an FPDU starts at the marker.
        assert_eq!(
            resolve(0x400, 0),
            MarkerTarget {
                fpdu_start: 0x400,
                header: 0x404
            }
        );
    }

    #[test]
    fn distance_to_marker_wraps() {
        assert_eq!(distance_to_marker(0), 0);
        assert_eq!(distance_to_marker(1), 511);
        assert_eq!(distance_to_marker(0x1ec), 20);
        assert_eq!(distance_to_marker(u32::MAX), 1);
    }

    #[test]
    fn view_rejects_short_buffers() {
        assert_eq!(
            Packet::new_checked([0u8; 3]).unwrap_err(),
            MarkerViewError::Truncated
        );
        let mut buf = [0xffu8; 4];
        let r = Repr {
            reserved: 0x1234,
            fpduptr: 0x0014,
        };
        r.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, [0x12, 0x34, 0x00, 0x14]);
        assert_eq!(
            Repr::parse(&Packet::new_checked(&buf[..]).unwrap()).unwrap(),
            r
        );
    }
}
