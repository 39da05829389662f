//! Ethernet II header (optionally one 802.1Q tag): checked view and `Repr`.

/// Untagged header length.
pub const HEADER_LEN: usize = 14;
/// Length of one 802.1Q tag.
pub const VLAN_TAG_LEN: usize = 4;
/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86DD;
/// EtherType of an 802.1Q tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;

mod field {
    use core::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
    /// Inner EtherType when the frame carries one VLAN tag.
    pub const INNER_ETHERTYPE: Range<usize> = 16..18;
}

/// A MAC address.
pub type Mac = [u8; 6];
/// The broadcast address.
pub const BROADCAST: Mac = [0xff; 6];

/// Why a frame is not a usable Ethernet frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EthernetError {
    /// Shorter than the header (or header plus tag).
    Truncated,
}

/// A checked view of an Ethernet frame.
#[derive(Clone, Copy, Debug)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buf: T,
    header_len: usize,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Checks that the header (and a VLAN tag, if present) fits.
    pub fn new_checked(buf: T) -> Result<Self, EthernetError> {
        let b = buf.as_ref();
        if b.len() < HEADER_LEN {
            return Err(EthernetError::Truncated);
        }
        let outer = u16::from_be_bytes([b[12], b[13]]);
        let header_len = if outer == ETHERTYPE_VLAN {
            if b.len() < HEADER_LEN + VLAN_TAG_LEN {
                return Err(EthernetError::Truncated);
            }
            HEADER_LEN + VLAN_TAG_LEN
        } else {
            HEADER_LEN
        };
        Ok(EthernetFrame { buf, header_len })
    }

    /// Destination MAC.
    pub fn dst(&self) -> Mac {
        mac(&self.buf.as_ref()[field::DST])
    }

    /// Source MAC.
    pub fn src(&self) -> Mac {
        mac(&self.buf.as_ref()[field::SRC])
    }

    /// The EtherType of the payload (the inner one behind a VLAN tag).
    pub fn ethertype(&self) -> u16 {
        let b = self.buf.as_ref();
        let r = if self.header_len == HEADER_LEN {
            field::ETHERTYPE
        } else {
            field::INNER_ETHERTYPE
        };
        u16::from_be_bytes([b[r.start], b[r.start + 1]])
    }

    /// Header length (14, or 18 with a VLAN tag).
    pub fn header_len(&self) -> usize {
        self.header_len
    }

    /// The payload.
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[self.header_len..]
    }
}

/// The EtherType of an IP `packet` we emitted: IPv6 when its version nibble says 6, else IPv4.
pub(crate) fn ethertype_of(packet: &[u8]) -> u16 {
    match packet.first().map(|b| b >> 4) {
        Some(6) => ETHERTYPE_IPV6,
        _ => ETHERTYPE_IPV4,
    }
}

fn mac(b: &[u8]) -> Mac {
    let mut m = [0; 6];
    m.copy_from_slice(b);
    m
}

/// An untagged Ethernet header to emit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EthernetRepr {
    /// Destination MAC.
    pub dst: Mac,
    /// Source MAC.
    pub src: Mac,
    /// EtherType.
    pub ethertype: u16,
}

impl EthernetRepr {
    /// Reads the header of a checked frame.
    pub fn parse<T: AsRef<[u8]>>(f: &EthernetFrame<T>) -> Self {
        EthernetRepr {
            dst: f.dst(),
            src: f.src(),
            ethertype: f.ethertype(),
        }
    }

    /// Octets `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header at the start of `buf` (at least [`HEADER_LEN`] octets); returns false
    /// if it does not fit.
    pub fn emit(&self, buf: &mut [u8]) -> bool {
        if buf.len() < HEADER_LEN {
            return false;
        }
        buf[field::DST].copy_from_slice(&self.dst);
        buf[field::SRC].copy_from_slice(&self.src);
        buf[field::ETHERTYPE].copy_from_slice(&self.ethertype.to_be_bytes());
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emit_then_parse_round_trips() {
        let r = EthernetRepr {
            dst: [1, 2, 3, 4, 5, 6],
            src: [7, 8, 9, 10, 11, 12],
            ethertype: ETHERTYPE_IPV4,
        };
        let mut b = [0u8; 20];
        assert!(r.emit(&mut b));
        let f = EthernetFrame::new_checked(&b[..]).unwrap();
        assert_eq!(EthernetRepr::parse(&f), r);
        assert_eq!(f.payload().len(), 6);
    }

    #[test]
    fn vlan_tag_is_skipped_and_short_frames_refused() {
        let mut b = [0u8; 18];
        b[12..14].copy_from_slice(&ETHERTYPE_VLAN.to_be_bytes());
        b[16..18].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        let f = EthernetFrame::new_checked(&b[..]).unwrap();
        assert_eq!(f.ethertype(), ETHERTYPE_IPV4);
        assert_eq!(f.header_len(), 18);
        assert!(EthernetFrame::new_checked(&b[..17]).is_err());
        assert!(EthernetFrame::new_checked(&b[..13]).is_err());
    }
}
