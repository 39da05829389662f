//! The DDP Control Field (-06 §4.1): `|T|L|Rsvd(4)|DV(2)|`, octet 0 of every DDP header.

/// The only DDP version (DV) defined by -02 and -06 (DDP-20).
pub const DDP_VERSION: u8 = 1;

const T_BIT: u8 = 0x80;
/// The L bit in the control octet.
pub(crate) const L_BIT: u8 = 0x40;
const DV_MASK: u8 = 0x03;

/// The DDP Control Field: a one-octet field of the tagged and untagged headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DdpControl {
    /// T bit: the tagged header follows (DDP-13).
    pub tagged: bool,
    /// L bit: the last segment of a DDP message (DDP-14).
    pub last: bool,
    /// DV; the header views refuse anything but [`DDP_VERSION`] (DDP-21).
    pub version: u8,
}

impl DdpControl {
    /// A control field of the version we speak (DV = 1, DDP-20).
    pub const fn new(tagged: bool, last: bool) -> DdpControl {
        DdpControl {
            tagged,
            last,
            version: DDP_VERSION,
        }
    }

    /// Read the octet; Rsvd is not checked on receive (DDP-19), DV is left to the caller.
    pub const fn parse(octet: u8) -> DdpControl {
        DdpControl {
            tagged: octet & T_BIT != 0,
            last: octet & L_BIT != 0,
            version: octet & DV_MASK,
        }
    }

    /// The octet: Rsvd is 0 on transmit (DDP-19).
    pub const fn emit(self) -> u8 {
        (if self.tagged { T_BIT } else { 0 })
            | (if self.last { L_BIT } else { 0 })
            | (self.version & DV_MASK)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ddp_19_20_common_values() {
        assert_eq!(DdpControl::new(false, false).emit(), 0x01);
        assert_eq!(DdpControl::new(false, true).emit(), 0x41);
        assert_eq!(DdpControl::new(true, false).emit(), 0x81);
        assert_eq!(DdpControl::new(true, true).emit(), 0xC1);
    }

    #[test]
    fn ddp_19_rsvd_ignored_on_receive() {
        let c = DdpControl::parse(0x80 | 0x3C | 0x01);
        assert!(c.tagged);
        assert!(!c.last);
        assert_eq!(c.version, 1);
    }
}
