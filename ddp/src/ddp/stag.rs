//! The Steering Tag: a 24-bit table index and an 8-bit key. DDP leaves the STag's contents to
//! the implementation (-06 §4.2); this split is the verbs convention (the low octet the key).

/// A 32-bit STag as carried on the wire: `index << 8 | key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Stag(pub u32);

impl Stag {
    /// Build an STag from a 24-bit index (upper bits dropped) and a key.
    pub const fn new(index: u32, key: u8) -> Stag {
        Stag((index << 8) | key as u32)
    }

    /// The 24-bit index into the STag table.
    pub const fn index(self) -> u32 {
        self.0 >> 8
    }

    /// The 8-bit key, chosen at random by the table so STags are not guessable.
    pub const fn key(self) -> u8 {
        self.0 as u8
    }
}

impl core::fmt::Display for Stag {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:#010x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_and_key_split() {
        let s = Stag::new(0x123456, 0x78);
        assert_eq!(s.0, 0x12345678);
        assert_eq!(s.index(), 0x123456);
        assert_eq!(s.key(), 0x78);
    }
}
