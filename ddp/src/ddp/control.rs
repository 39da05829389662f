//! The DDP Control Field (-06 §4.1, digest §1.1): `|T|L|Rsvd(4)|DV(2)|`, octet 0 of every DDP header.

/// The only DDP version (DV) defined by -02 and -06 (DDP-20).
pub const DDP_VERSION: u8 = 1;

const T_BIT: u8 = 0x80;
const L_BIT: u8 = 0x40;
const DV_MASK: u8 = 0x03;

/// Encode a control byte: Rsvd is 0 and DV is 1 on transmit (DDP-19, DDP-20).
pub const fn encode(tagged: bool, last: bool) -> u8 {
    (if tagged { T_BIT } else { 0 }) | (if last { L_BIT } else { 0 }) | DDP_VERSION
}

/// T bit: the tagged header follows (DDP-13).
pub const fn is_tagged(byte: u8) -> bool {
    byte & T_BIT != 0
}

/// L bit: the last segment of a DDP message (DDP-14).
pub const fn is_last(byte: u8) -> bool {
    byte & L_BIT != 0
}

/// DV field; Rsvd is not checked on receive (DDP-19).
pub const fn version(byte: u8) -> u8 {
    byte & DV_MASK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ddp_19_20_common_values() {
        assert_eq!(encode(false, false), 0x01);
        assert_eq!(encode(false, true), 0x41);
        assert_eq!(encode(true, false), 0x81);
        assert_eq!(encode(true, true), 0xC1);
    }

    #[test]
    fn ddp_19_rsvd_ignored_on_receive() {
        let b = 0x80 | 0x3C | 0x01;
        assert!(is_tagged(b));
        assert!(!is_last(b));
        assert_eq!(version(b), 1);
    }
}
