//! TCP sequence numbers: 32-bit values compared modulo 2^32 (RFC 9293 §3.4).
//!
//! Inside the crate, positions are mostly kept as 64-bit stream offsets (no wrap); [`SeqNum`] is used
//! at the wire boundary and in the public API.

use core::fmt;

/// A TCP sequence number; ordering is by signed 32-bit distance (RFC 9293 §3.4).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SeqNum(pub u32);

impl SeqNum {
    /// `self + n` modulo 2^32.
    #[inline]
    pub fn plus(self, n: u32) -> SeqNum {
        SeqNum(self.0.wrapping_add(n))
    }
    /// Signed distance `self - other` (meaningful within ±2^31).
    #[inline]
    pub fn diff(self, other: SeqNum) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }
    /// `self < other` in sequence space.
    #[inline]
    pub fn lt(self, other: SeqNum) -> bool {
        self.diff(other) < 0
    }
    /// `self <= other` in sequence space.
    #[inline]
    pub fn le(self, other: SeqNum) -> bool {
        self.diff(other) <= 0
    }
    /// `self > other` in sequence space.
    #[inline]
    pub fn gt(self, other: SeqNum) -> bool {
        self.diff(other) > 0
    }
    /// `self >= other` in sequence space.
    #[inline]
    pub fn ge(self, other: SeqNum) -> bool {
        self.diff(other) >= 0
    }
}

impl fmt::Debug for SeqNum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Seq({})", self.0)
    }
}

/// Maps between 64-bit stream offsets and sequence numbers for one direction.
///
/// Offset 0 is the SYN (the ISN); the first data octet is offset 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct SeqSpace {
    pub isn: SeqNum,
}

impl SeqSpace {
    #[inline]
    pub fn seq(&self, off: u64) -> SeqNum {
        self.isn.plus(off as u32)
    }
    /// The offset of `seq`, taken as the one nearest to `near` (within ±2^31). `None` if it would be
    /// before offset 0.
    #[inline]
    pub fn off(&self, seq: SeqNum, near: u64) -> Option<u64> {
        let d = seq.diff(self.seq(near)) as i64;
        let o = near as i64 + d;
        (o >= 0).then_some(o as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_wrap_rfc9293_s3_4() {
        let a = SeqNum(u32::MAX - 5);
        let b = a.plus(10);
        assert_eq!(b.0, 4);
        assert!(a.lt(b));
        assert!(b.gt(a));
        assert!(a.le(a) && a.ge(a));
        assert_eq!(b.diff(a), 10);
        assert_eq!(a.diff(b), -10);
    }

    #[test]
    fn offsets_across_wrap() {
        let s = SeqSpace {
            isn: SeqNum(u32::MAX - 1),
        };
        assert_eq!(s.seq(0), SeqNum(u32::MAX - 1));
        assert_eq!(s.seq(3), SeqNum(1));
        assert_eq!(s.off(SeqNum(1), 0), Some(3));
        assert_eq!(s.off(SeqNum(u32::MAX - 2), 0), None);
        // Far past the first wrap: offsets stay 64-bit.
        let far = (1u64 << 32) + 100;
        assert_eq!(s.off(s.seq(far + 7), far), Some(far + 7));
        assert_eq!(s.off(s.seq(far - 7), far), Some(far - 7));
    }
}
