//! Where markers interrupt a ULPDU inside its FPDU: the ULPDU's octets lie in runs of
//! [`RUN`] octets separated by [`MARKER_LEN`]-octet holes (the marker slots), the first run
//! shorter. A sender writes the ULPDU straight into those runs, one pass per FPDU, and the
//! markers into the holes afterwards; a receiver reads the runs the same way.

use crate::marker::{MARKER_INTERVAL, MARKER_LEN};
use core::ops::Range;

/// ULPDU octets between two markers.
pub const RUN: usize = MARKER_INTERVAL as usize - MARKER_LEN;

/// The hole pattern of a stretch of ULPDU octets laid out in a destination: `first` data
/// octets, a hole, then [`RUN`] data octets and a hole, again and again. A hole after the
/// last data octet is not part of the stretch. Without markers there are no holes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spacing {
    /// Data octets before the next hole (0: the stretch starts with a hole); `usize::MAX`
    /// without markers.
    first: usize,
}

impl Spacing {
    /// No holes: the data is contiguous.
    pub const CONTIGUOUS: Spacing = Spacing { first: usize::MAX };

    /// Holes after `first` data octets and after every [`RUN`] data octets from there.
    pub fn new(first: usize) -> Spacing {
        Spacing { first }
    }

    /// Data octets before the next hole (`usize::MAX` when contiguous).
    pub fn first(self) -> usize {
        self.first
    }

    /// True when there are no holes.
    pub fn is_contiguous(self) -> bool {
        self.first == usize::MAX
    }

    /// The spacing of what follows the first `n` data octets (the stretch starting at
    /// destination offset [`Self::span`]`(n)`).
    pub fn advance(self, n: usize) -> Spacing {
        if self.is_contiguous() {
            self
        } else if n < self.first {
            Spacing {
                first: self.first - n,
            }
        } else {
            let k = (n - self.first) % RUN;
            Spacing {
                first: if k == 0 { 0 } else { RUN - k },
            }
        }
    }

    /// Holes inside a stretch of `len` data octets (before its last data octet).
    pub fn holes(self, len: usize) -> usize {
        if len <= self.first {
            0
        } else {
            1 + (len - self.first - 1) / RUN
        }
    }

    /// Destination octets a stretch of `len` data octets takes, its inner holes included.
    pub fn span(self, len: usize) -> usize {
        len + MARKER_LEN * self.holes(len)
    }

    /// The runs of a stretch of `len` data octets, as (data offset, destination range).
    pub fn runs(self, len: usize) -> Runs {
        Runs {
            data: 0,
            dst: 0,
            left: len,
            next: self.first,
        }
    }

    /// Copies `src` into the runs of `dst` (at least [`Self::span`]`(src.len())` octets),
    /// leaving the holes as they are.
    #[inline]
    pub fn copy_in(self, src: &[u8], dst: &mut [u8]) {
        let mut at = self.first.min(src.len());
        dst[..at].copy_from_slice(&src[..at]);
        // Each later run follows its hole.
        let mut to = at;
        while at < src.len() {
            to += MARKER_LEN;
            let n = (src.len() - at).min(RUN);
            dst[to..to + n].copy_from_slice(&src[at..at + n]);
            at += n;
            to += n;
        }
    }

    /// Copies the runs of `src` (at least [`Self::span`]`(dst.len())` octets) into `dst`,
    /// skipping the holes.
    #[inline]
    pub fn copy_out(self, src: &[u8], dst: &mut [u8]) {
        let mut at = self.first.min(dst.len());
        dst[..at].copy_from_slice(&src[..at]);
        let mut from = at;
        while at < dst.len() {
            from += MARKER_LEN;
            let n = (dst.len() - at).min(RUN);
            dst[at..at + n].copy_from_slice(&src[from..from + n]);
            at += n;
            from += n;
        }
    }
}

/// Iterator over a stretch's runs (see [`Spacing::runs`]).
#[derive(Debug, Clone)]
pub struct Runs {
    data: usize,
    dst: usize,
    left: usize,
    next: usize,
}

impl Iterator for Runs {
    type Item = (usize, Range<usize>);

    #[inline]
    fn next(&mut self) -> Option<(usize, Range<usize>)> {
        if self.left == 0 {
            return None;
        }
        if self.next == 0 {
            self.dst += MARKER_LEN;
            self.next = RUN;
        }
        let n = self.left.min(self.next);
        let item = (self.data, self.dst..self.dst + n);
        self.data += n;
        self.dst += n;
        self.left -= n;
        self.next -= n;
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runs, span and advance agree with a byte-by-byte walk for every start and length.
    #[test]
    fn runs_span_and_advance_match_a_walk() {
        for first in [0usize, 1, 4, 100, 507, RUN] {
            let sp = Spacing::new(first);
            for len in [0usize, 1, 3, first, first + 1, 508, 509, 1016, 1500, 2100] {
                // Byte-by-byte destination positions of each data octet.
                let mut pos = Vec::new();
                let (mut d, mut next) = (0usize, first);
                for _ in 0..len {
                    if next == 0 {
                        d += MARKER_LEN;
                        next = RUN;
                    }
                    pos.push(d);
                    d += 1;
                    next -= 1;
                }
                let got: Vec<usize> = sp.runs(len).flat_map(|(_, r)| r).collect();
                assert_eq!(got, pos, "first {first} len {len}");
                assert_eq!(sp.span(len), d, "first {first} len {len}");
                assert_eq!(sp.advance(len).first(), next, "first {first} len {len}");
            }
        }
    }

    /// Copying in then out gives the data back and leaves the holes untouched.
    #[test]
    fn copy_in_and_out_round_trip() {
        let src: Vec<u8> = (0..1500u32).map(|i| i as u8 | 1).collect();
        for first in [0usize, 2, 300, RUN] {
            let sp = Spacing::new(first);
            let mut dst = vec![0u8; sp.span(src.len())];
            sp.copy_in(&src, &mut dst);
            assert_eq!(
                dst.iter().filter(|&&b| b == 0).count(),
                4 * sp.holes(src.len())
            );
            let mut back = vec![0u8; src.len()];
            sp.copy_out(&dst, &mut back);
            assert_eq!(back, src);
        }
        let mut dst = [0u8; 3];
        Spacing::CONTIGUOUS.copy_in(b"abc", &mut dst);
        assert_eq!(&dst, b"abc");
        assert_eq!(Spacing::CONTIGUOUS.span(1 << 20), 1 << 20);
    }
}
