//! Taking structured choices off the front of a fuzz input.

/// A cursor over fuzz input: small choices (flags, lengths, offsets) come off the front; what
/// is left is the payload. Reading past the end gives zeros, so every input is usable.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    /// A cursor at the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Input { data }
    }

    /// The next octet (0 past the end).
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    /// The next two octets, big-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }

    /// The next four octets, big-endian.
    pub fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    /// The next octet as a flag (its low bit).
    pub fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }

    /// Up to `n` octets (fewer at the end).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (a, b) = self.data.split_at(n.min(self.data.len()));
        self.data = b;
        a
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        self.bytes(self.data.len())
    }

    /// True when nothing is left.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_past_the_end_as_zeros() {
        let mut i = Input::new(&[1, 2, 3]);
        assert_eq!(i.u16(), 0x0102);
        assert_eq!(i.u32(), 0x0300_0000);
        assert!(i.is_empty());
        assert_eq!(i.bytes(4), &[] as &[u8]);
    }
}
