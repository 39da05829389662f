//! XDR primitives (RFC 4506): big-endian 4-byte units, checked in both directions.
//!
//! [`XdrReader`] never panics and never reads past its slice: every length read from the wire is
//! checked against a caller-given bound and against the bytes that remain before anything is
//! sliced or allocated. [`XdrWriter`] writes into a caller-provided buffer (for example the
//! registered Send buffer) and reports [`XdrError::BufferTooShort`] instead of panicking.

use thiserror::Error;

/// Size of one XDR unit in bytes.
pub const UNIT: usize = 4;

/// Errors of the XDR layer. Small and `Copy`: no allocation on the hot path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum XdrError {
    /// The input ended inside an item.
    #[error("XDR input truncated")]
    Truncated,
    /// A boolean or optional-data discriminant was neither 0 nor 1.
    #[error("XDR boolean is neither 0 nor 1")]
    BadBool,
    /// A counted item (opaque, array, list) is longer than the bound the caller allows.
    #[error("XDR length exceeds the allowed bound")]
    TooLong,
    /// An enum or union discriminant has a value the type does not define.
    #[error("XDR discriminant out of range")]
    BadDiscriminant,
    /// The output buffer cannot hold the item.
    #[error("output buffer too short")]
    BufferTooShort,
}

/// Number of pad bytes that round `len` up to a multiple of four.
pub const fn pad_len(len: usize) -> usize {
    (UNIT - len % UNIT) % UNIT
}

/// `len` rounded up to a multiple of four (data plus XDR roundup).
pub const fn padded_len(len: usize) -> usize {
    len + pad_len(len)
}

/// A checked cursor over XDR-encoded bytes.
#[derive(Debug, Clone)]
pub struct XdrReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> XdrReader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes left to read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The unread tail.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// Takes the next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], XdrError> {
        if n > self.remaining() {
            return Err(XdrError::Truncated);
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// Skips `n` bytes.
    pub fn skip(&mut self, n: usize) -> Result<(), XdrError> {
        self.bytes(n).map(|_| ())
    }

    /// An `unsigned int`.
    pub fn u32(&mut self) -> Result<u32, XdrError> {
        let b = self.bytes(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// An `unsigned hyper`.
    pub fn u64(&mut self) -> Result<u64, XdrError> {
        let hi = u64::from(self.u32()?);
        let lo = u64::from(self.u32()?);
        Ok(hi << 32 | lo)
    }

    /// A `bool`: exactly 0 or 1, anything else is [`XdrError::BadBool`].
    pub fn bool(&mut self) -> Result<bool, XdrError> {
        match self.u32()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(XdrError::BadBool),
        }
    }

    /// Fixed-length opaque of `n` bytes plus its roundup (pad bytes are not checked).
    pub fn opaque_fixed(&mut self, n: usize) -> Result<&'a [u8], XdrError> {
        if padded_len(n) > self.remaining() {
            return Err(XdrError::Truncated);
        }
        let data = self.bytes(n)?;
        self.skip(pad_len(n))?;
        Ok(data)
    }

    /// The length word of a variable-length item, checked against `max`.
    pub fn length(&mut self, max: u32) -> Result<u32, XdrError> {
        let n = self.u32()?;
        if n > max {
            return Err(XdrError::TooLong);
        }
        Ok(n)
    }

    /// Variable-length `opaque<max>`: length word, data, roundup.
    pub fn opaque(&mut self, max: u32) -> Result<&'a [u8], XdrError> {
        let n = self.length(max)?;
        self.opaque_fixed(n as usize)
    }

    /// Optional data `T *`: a boolean, then `T` if present.
    pub fn optional<T>(
        &mut self,
        item: impl FnOnce(&mut Self) -> Result<T, XdrError>,
    ) -> Result<Option<T>, XdrError> {
        if self.bool()? {
            item(self).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Counted array `T<max>`: a count word, then that many items. `min_item_len` (bytes of the
    /// smallest encoded item) lets the count be checked against the input before allocating.
    pub fn array<T>(
        &mut self,
        max: u32,
        min_item_len: usize,
        mut item: impl FnMut(&mut Self) -> Result<T, XdrError>,
    ) -> Result<Vec<T>, XdrError> {
        let n = self.length(max)? as usize;
        if n.saturating_mul(min_item_len) > self.remaining() {
            return Err(XdrError::Truncated);
        }
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(item(self)?);
        }
        Ok(out)
    }

    /// XDR optional-data linked list (`struct list { T entry; list *next; }` behind a pointer):
    /// `1, entry, 1, entry, ..., 0`. At most `max` entries.
    pub fn list<T>(
        &mut self,
        max: u32,
        mut item: impl FnMut(&mut Self) -> Result<T, XdrError>,
    ) -> Result<Vec<T>, XdrError> {
        let mut out = Vec::new();
        while self.bool()? {
            if out.len() as u64 >= u64::from(max) {
                return Err(XdrError::TooLong);
            }
            out.push(item(self)?);
        }
        Ok(out)
    }
}

/// A checked XDR encoder into a caller-provided buffer.
#[derive(Debug)]
pub struct XdrWriter<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> XdrWriter<'a> {
    /// A writer at the start of `buf`.
    pub fn new(buf: &'a mut [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes written so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Room left in the buffer.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The bytes written so far.
    pub fn written(&self) -> &[u8] {
        &self.buf[..self.pos]
    }

    /// Raw bytes, no length word, no roundup.
    pub fn bytes(&mut self, data: &[u8]) -> Result<(), XdrError> {
        if data.len() > self.remaining() {
            return Err(XdrError::BufferTooShort);
        }
        self.buf[self.pos..self.pos + data.len()].copy_from_slice(data);
        self.pos += data.len();
        Ok(())
    }

    /// `n` zero bytes.
    pub fn zeros(&mut self, n: usize) -> Result<(), XdrError> {
        if n > self.remaining() {
            return Err(XdrError::BufferTooShort);
        }
        self.buf[self.pos..self.pos + n].fill(0);
        self.pos += n;
        Ok(())
    }

    /// An `unsigned int`.
    pub fn u32(&mut self, v: u32) -> Result<(), XdrError> {
        self.bytes(&v.to_be_bytes())
    }

    /// An `unsigned hyper`.
    pub fn u64(&mut self, v: u64) -> Result<(), XdrError> {
        self.bytes(&v.to_be_bytes())
    }

    /// A `bool` as 0 or 1.
    pub fn bool(&mut self, v: bool) -> Result<(), XdrError> {
        self.u32(u32::from(v))
    }

    /// Fixed-length opaque: data and zero roundup.
    pub fn opaque_fixed(&mut self, data: &[u8]) -> Result<(), XdrError> {
        if padded_len(data.len()) > self.remaining() {
            return Err(XdrError::BufferTooShort);
        }
        self.bytes(data)?;
        self.zeros(pad_len(data.len()))
    }

    /// Variable-length opaque: length word, data, zero roundup.
    pub fn opaque(&mut self, data: &[u8]) -> Result<(), XdrError> {
        let n = u32::try_from(data.len()).map_err(|_| XdrError::TooLong)?;
        if UNIT + padded_len(data.len()) > self.remaining() {
            return Err(XdrError::BufferTooShort);
        }
        self.u32(n)?;
        self.opaque_fixed(data)
    }

    /// Optional data `T *`.
    pub fn optional<T>(
        &mut self,
        v: Option<&T>,
        item: impl FnOnce(&mut Self, &T) -> Result<(), XdrError>,
    ) -> Result<(), XdrError> {
        match v {
            Some(v) => {
                self.bool(true)?;
                item(self, v)
            }
            None => self.bool(false),
        }
    }

    /// Counted array: count word, then the items.
    pub fn array<T>(
        &mut self,
        items: &[T],
        mut item: impl FnMut(&mut Self, &T) -> Result<(), XdrError>,
    ) -> Result<(), XdrError> {
        let n = u32::try_from(items.len()).map_err(|_| XdrError::TooLong)?;
        self.u32(n)?;
        items.iter().try_for_each(|v| item(self, v))
    }

    /// Optional-data linked list: `1, entry, ..., 0`.
    pub fn list<T>(
        &mut self,
        items: &[T],
        mut item: impl FnMut(&mut Self, &T) -> Result<(), XdrError>,
    ) -> Result<(), XdrError> {
        for v in items {
            self.bool(true)?;
            item(self, v)?;
        }
        self.bool(false)
    }
}

/// Encodes with `f` into a fresh vector of exactly `len` bytes (tests and slow paths).
pub fn encode_to_vec(
    len: usize,
    f: impl FnOnce(&mut XdrWriter<'_>) -> Result<(), XdrError>,
) -> Result<Vec<u8>, XdrError> {
    let mut v = vec![0u8; len];
    let mut w = XdrWriter::new(&mut v);
    f(&mut w)?;
    let n = w.position();
    v.truncate(n);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn integers_are_big_endian() {
        let v = encode_to_vec(12, |w| {
            w.u32(0x0102_0304)?;
            w.u64(0x0506_0708_090a_0b0c)
        })
        .unwrap();
        assert_eq!(v, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        let mut r = XdrReader::new(&v);
        assert_eq!(r.u32(), Ok(0x0102_0304));
        assert_eq!(r.u64(), Ok(0x0506_0708_090a_0b0c));
        assert_eq!(r.u32(), Err(XdrError::Truncated));
    }

    #[test]
    fn opaque_is_length_data_and_zero_roundup() {
        let v = encode_to_vec(64, |w| w.opaque(b"abcde")).unwrap();
        assert_eq!(v, [0, 0, 0, 5, b'a', b'b', b'c', b'd', b'e', 0, 0, 0]);
        assert_eq!(XdrReader::new(&v).opaque(5), Ok(&b"abcde"[..]));
        assert_eq!(XdrReader::new(&v).opaque(4), Err(XdrError::TooLong));
        assert_eq!(XdrReader::new(&v[..10]).opaque(5), Err(XdrError::Truncated));
    }

    #[test]
    fn bool_rejects_values_other_than_0_and_1() {
        assert_eq!(XdrReader::new(&[0, 0, 0, 2]).bool(), Err(XdrError::BadBool));
        assert_eq!(XdrReader::new(&[0, 0, 0, 1]).bool(), Ok(true));
    }

    #[test]
    fn list_encodes_as_optional_chain_and_is_bounded() {
        let v = encode_to_vec(64, |w| w.list(&[7u32, 8], |w, x| w.u32(*x))).unwrap();
        assert_eq!(
            v,
            [0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 8, 0, 0, 0, 0]
        );
        assert_eq!(XdrReader::new(&v).list(2, |r| r.u32()), Ok(vec![7, 8]));
        assert_eq!(
            XdrReader::new(&v).list(1, |r| r.u32()),
            Err(XdrError::TooLong)
        );
    }

    #[test]
    fn array_count_is_checked_against_input_before_allocation() {
        // Claims 1000 items of 4 bytes with only 4 bytes behind it.
        let v = [0, 0, 0x03, 0xe8, 0, 0, 0, 1];
        assert_eq!(
            XdrReader::new(&v).array(4096, 4, |r| r.u32()),
            Err(XdrError::Truncated)
        );
        assert_eq!(
            XdrReader::new(&v).array(10, 4, |r| r.u32()),
            Err(XdrError::TooLong)
        );
    }

    #[test]
    fn writer_reports_short_buffer() {
        let mut b = [0u8; 6];
        let mut w = XdrWriter::new(&mut b);
        assert_eq!(w.u32(1), Ok(()));
        assert_eq!(w.u32(2), Err(XdrError::BufferTooShort));
        assert_eq!(w.opaque(b"x"), Err(XdrError::BufferTooShort));
        assert_eq!(w.position(), 4);
    }

    proptest! {
        #[test]
        fn reader_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64), max in 0u32..100) {
            let mut r = XdrReader::new(&bytes);
            let _ = r.opaque(max);
            let _ = r.list(max, |r| r.u64());
            let _ = r.array(max, 4, |r| r.bool());
            prop_assert!(r.position() <= bytes.len());
        }

        #[test]
        fn opaque_roundtrip(data in proptest::collection::vec(any::<u8>(), 0..40)) {
            let v = encode_to_vec(64, |w| w.opaque(&data)).unwrap();
            prop_assert_eq!(v.len() % 4, 0);
            let mut r = XdrReader::new(&v);
            prop_assert_eq!(r.opaque(64).unwrap(), &data[..]);
            prop_assert_eq!(r.remaining(), 0);
        }
    }
}
