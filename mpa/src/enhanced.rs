//! The Enhanced RDMA Connection Establishment data of MPA Revision 2 (RFC 6581 §7.1): four
//! octets at the start of the private data of a Rev 2 Request or Reply whose Enhanced flag is
//! set, before the ULP's own private data.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+---------------------------+-+-+---------------------------+
//! |A|B|            IRD            |C|D|            ORD            |
//! +-+-+---------------------------+-+-+---------------------------+
//! A: peer-to-peer mode          B: ready-to-receive by a zero-length Send
//! C: RTR by a zero-length RDMA Write    D: RTR by a zero-length RDMA Read
//! IRD / ORD: 14-bit inbound / outbound RDMA Read queue depths
//! ```
//! In a Request, B/C/D are the RTR messages the Initiator can send; in a Reply, the Responder
//! sets exactly one of those offered (RFC 6581 §5).

/// Octets of the enhanced data.
pub const ENHANCED_LEN: usize = 4;
/// Largest IRD or ORD the 14-bit fields carry.
pub const MAX_READ_DEPTH: u16 = 0x3FFF;

const FLAG_HI: u16 = 0x8000;
const FLAG_LO: u16 = 0x4000;

mod field {
    use core::ops::Range;
    pub const IRD: Range<usize> = 0..2;
    pub const ORD: Range<usize> = 2..4;
}

/// A ready-to-receive message of peer-to-peer mode: the first FPDU the Initiator sends, which
/// lets the Responder send (RFC 6581 §5; it is never surfaced to a ULP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RtrType {
    /// A zero-length Send (B); it consumes no receive buffer of the ULP's.
    Send,
    /// A zero-length RDMA Write (C) to STag 0, TO 0.
    Write,
    /// A zero-length RDMA Read Request (D); the Responder answers with a zero-length Read
    /// Response. Needs an RDMA Read credit both ways (ORD and IRD of at least 1).
    Read,
}

impl RtrType {
    /// Every type, in the order a Responder prefers them: Write (nothing to answer, no
    /// buffer), Read, Send.
    pub const PREFERENCE: [RtrType; 3] = [RtrType::Write, RtrType::Read, RtrType::Send];

    fn bit(self) -> u8 {
        match self {
            RtrType::Send => 1,
            RtrType::Write => 2,
            RtrType::Read => 4,
        }
    }
}

/// A set of RTR types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RtrTypes(u8);

impl RtrTypes {
    /// No type: no peer-to-peer mode.
    pub const NONE: RtrTypes = RtrTypes(0);
    /// Send, Write and Read.
    pub const ALL: RtrTypes = RtrTypes(7);

    /// The set holding only `t`.
    pub fn only(t: RtrType) -> Self {
        RtrTypes(t.bit())
    }

    /// The set with `t` added.
    pub fn with(self, t: RtrType) -> Self {
        RtrTypes(self.0 | t.bit())
    }

    /// Whether `t` is in the set.
    pub fn contains(self, t: RtrType) -> bool {
        self.0 & t.bit() != 0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The types in both sets.
    pub fn intersection(self, other: RtrTypes) -> RtrTypes {
        RtrTypes(self.0 & other.0)
    }

    /// How many types the set holds.
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// The single type of a one-element set.
    pub fn single(self) -> Option<RtrType> {
        RtrType::PREFERENCE
            .into_iter()
            .find(|t| self.len() == 1 && self.contains(*t))
    }

    /// The first type of [`RtrType::PREFERENCE`] in the set.
    pub fn preferred(self) -> Option<RtrType> {
        RtrType::PREFERENCE.into_iter().find(|t| self.contains(*t))
    }
}

/// A checked view of the four octets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnhancedPacket<T: AsRef<[u8]>> {
    buffer: T,
}

/// The enhanced data needs four octets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Truncated;

impl<T: AsRef<[u8]>> EnhancedPacket<T> {
    /// Wraps a buffer of at least [`ENHANCED_LEN`] octets.
    pub fn new_checked(buffer: T) -> Result<Self, Truncated> {
        if buffer.as_ref().len() < ENHANCED_LEN {
            return Err(Truncated);
        }
        Ok(EnhancedPacket { buffer })
    }

    fn word(&self, r: core::ops::Range<usize>) -> u16 {
        let b = &self.buffer.as_ref()[r];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// A: peer-to-peer mode.
    pub fn p2p(&self) -> bool {
        self.word(field::IRD) & FLAG_HI != 0
    }
    /// The RTR types flagged (B, C, D).
    pub fn rtr(&self) -> RtrTypes {
        let mut s = RtrTypes::NONE;
        if self.word(field::IRD) & FLAG_LO != 0 {
            s = s.with(RtrType::Send);
        }
        if self.word(field::ORD) & FLAG_HI != 0 {
            s = s.with(RtrType::Write);
        }
        if self.word(field::ORD) & FLAG_LO != 0 {
            s = s.with(RtrType::Read);
        }
        s
    }
    /// IRD (14 bits).
    pub fn ird(&self) -> u16 {
        self.word(field::IRD) & MAX_READ_DEPTH
    }
    /// ORD (14 bits).
    pub fn ord(&self) -> u16 {
        self.word(field::ORD) & MAX_READ_DEPTH
    }
}

/// Parsed enhanced data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EnhancedData {
    /// The sender's inbound RDMA Read queue depth: Read Requests it serves at once.
    pub ird: u16,
    /// The sender's outbound RDMA Read queue depth: Read Requests it keeps outstanding.
    pub ord: u16,
    /// Peer-to-peer mode (A).
    pub p2p: bool,
    /// RTR types: offered (Request) or chosen (Reply).
    pub rtr: RtrTypes,
}

impl EnhancedData {
    /// Reads the view.
    pub fn parse<T: AsRef<[u8]>>(p: &EnhancedPacket<T>) -> EnhancedData {
        EnhancedData {
            ird: p.ird(),
            ord: p.ord(),
            p2p: p.p2p(),
            rtr: p.rtr(),
        }
    }

    /// The four octets; IRD and ORD above [`MAX_READ_DEPTH`] are sent as that.
    pub fn to_bytes(&self) -> [u8; ENHANCED_LEN] {
        let flag = |on: bool, f: u16| if on { f } else { 0 };
        let ird = self.ird.min(MAX_READ_DEPTH)
            | flag(self.p2p, FLAG_HI)
            | flag(self.rtr.contains(RtrType::Send), FLAG_LO);
        let ord = self.ord.min(MAX_READ_DEPTH)
            | flag(self.rtr.contains(RtrType::Write), FLAG_HI)
            | flag(self.rtr.contains(RtrType::Read), FLAG_LO);
        let mut b = [0u8; ENHANCED_LEN];
        b[field::IRD].copy_from_slice(&ird.to_be_bytes());
        b[field::ORD].copy_from_slice(&ord.to_be_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6581 §7.1: A and B lead the IRD word, C and D the ORD word; 14-bit depths.
    #[test]
    fn rfc6581_7_1_bit_layout() {
        let d = EnhancedData {
            ird: 0x0123,
            ord: 0x0045,
            p2p: true,
            rtr: RtrTypes::only(RtrType::Send),
        };
        assert_eq!(d.to_bytes(), [0xC1, 0x23, 0x00, 0x45]);
        let w = EnhancedData {
            p2p: false,
            rtr: RtrTypes::only(RtrType::Write).with(RtrType::Read),
            ..d
        };
        assert_eq!(w.to_bytes(), [0x01, 0x23, 0xC0, 0x45]);
        for x in [d, w] {
            let b = x.to_bytes();
            assert_eq!(
                EnhancedData::parse(&EnhancedPacket::new_checked(b).unwrap()),
                x
            );
        }
    }

    /// RFC 6581 §7.1: depths are 14 bits; larger values are sent as the largest.
    #[test]
    fn rfc6581_7_1_depths_saturate_at_14_bits() {
        let d = EnhancedData {
            ird: u16::MAX,
            ord: 0x4000,
            p2p: false,
            rtr: RtrTypes::NONE,
        };
        assert_eq!(d.to_bytes(), [0x3F, 0xFF, 0x3F, 0xFF]);
        assert_eq!(EnhancedPacket::new_checked(&[0u8; 3][..]), Err(Truncated));
    }

    #[test]
    fn rtr_sets() {
        let s = RtrTypes::only(RtrType::Read).with(RtrType::Send);
        assert_eq!(s.len(), 2);
        assert_eq!(s.single(), None);
        assert_eq!(s.preferred(), Some(RtrType::Read));
        assert_eq!(
            s.intersection(RtrTypes::only(RtrType::Send)).single(),
            Some(RtrType::Send)
        );
        assert!(RtrTypes::NONE.is_empty() && RtrTypes::NONE.preferred().is_none());
        assert_eq!(RtrTypes::ALL.preferred(), Some(RtrType::Write));
    }
}
