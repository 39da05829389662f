//! Where markers interrupt a ULPDU inside its FPDU: the ULPDU's octets lie in runs of
//! [`RUN`] octets separated by [`MARKER_LEN`]-octet holes (the marker slots), the first run
//! shorter. A sender writes the ULPDU straight into those runs, one pass per FPDU, and the
//! markers into the holes afterwards; a receiver reads the runs the same way.

use crate::marker::{MARKER_INTERVAL, MARKER_LEN};
use core::ops::Range;

/// ULPDU octets between two markers.
pub const RUN: usize = MARKER_INTERVAL as usize - MARKER_LEN;
/// A hole and the run after it.
const INTERVAL: usize = MARKER_INTERVAL as usize;

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

    /// Calls `f(data offset, destination offset, octets)` for each run of a stretch of `len`
    /// data octets, in order (the same runs as [`Self::runs`], in one loop with no slicing:
    /// for a memory that copies through its own pointers).
    #[inline]
    pub fn for_each_run(self, len: usize, mut f: impl FnMut(usize, usize, usize)) {
        let head = self.first.min(len);
        if head > 0 {
            f(0, 0, head);
        }
        let (mut at, mut to) = (head, head + MARKER_LEN);
        while at < len {
            let n = (len - at).min(RUN);
            f(at, to, n);
            at += n;
            to += INTERVAL;
        }
    }

    /// Copies `src` into the runs of `dst` (at least [`Self::span`]`(src.len())` octets),
    /// leaving the holes as they are.
    #[inline]
    pub fn copy_in(self, src: &[u8], dst: &mut [u8]) {
        if self.first >= src.len() {
            // No hole inside (contiguous, or the stretch ends before the next hole).
            dst[..src.len()].copy_from_slice(src);
        } else {
            spread_runs(self.first, src, dst);
        }
    }

    /// Copies the runs of `src` (at least [`Self::span`]`(dst.len())` octets) into `dst`,
    /// skipping the holes.
    #[inline]
    pub fn copy_out(self, src: &[u8], dst: &mut [u8]) {
        if self.first >= dst.len() {
            // No hole inside (contiguous, or the stretch ends before the next hole).
            dst.copy_from_slice(&src[..dst.len()]);
        } else {
            gather_runs(self.first, src, dst);
        }
    }
}

/// Octets of one piece of a whole run's copy: a run is four of them, each a constant-size
/// copy the compiler writes as a few vector moves (a whole run in one piece would be a call
/// to `memcpy`, whose set-up costs about as much as the moves).
const PIECE: usize = RUN / 4;
const _: () = assert!(PIECE * 4 == RUN);

/// Copies one whole run, in [`PIECE`]s.
#[inline(always)]
fn copy_run(src: &[u8; RUN], dst: &mut [u8; RUN]) {
    let (src, _) = src.as_chunks::<PIECE>();
    let (dst, _) = dst.as_chunks_mut::<PIECE>();
    for (d, s) in dst.iter_mut().zip(src) {
        *d = *s;
    }
}

/// Copies `src` to `dst` (the same length): a run's part, at most [`RUN`] octets (the
/// callers' bound: no call to `memcpy` in them, so they keep to scratch registers), as two
/// or four overlapping constant-size copies of the largest power of two that fits (what
/// `memcpy` does inside, without its call and its dispatch on the size).
#[inline(always)]
fn copy_part(src: &[u8], dst: &mut [u8]) {
    let n = src.len();
    debug_assert!(n <= RUN, "a part is at most a run");
    if n >= 256 {
        ends::<128>(&src[..256], &mut dst[..256]);
        ends::<128>(&src[n - 256..], &mut dst[n - 256..]);
    } else if n >= 128 {
        ends::<128>(src, dst);
    } else if n >= 64 {
        ends::<64>(src, dst);
    } else if n >= 32 {
        ends::<32>(src, dst);
    } else if n >= 16 {
        ends::<16>(src, dst);
    } else if n >= 8 {
        ends::<8>(src, dst);
    } else if n >= 4 {
        ends::<4>(src, dst);
    } else {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = *s;
        }
    }
}

/// Copies `src` (at least `K` octets, at most `2K`) to `dst` of the same length as its first
/// and last `K` octets, which overlap or meet.
#[inline(always)]
fn ends<const K: usize>(src: &[u8], dst: &mut [u8]) {
    let (Some(a), Some(b)) = (src.first_chunk::<K>(), src.last_chunk::<K>()) else {
        unreachable!("the caller picks K at most the length")
    };
    let (a, b) = (*a, *b);
    let Some(d) = dst.first_chunk_mut::<K>() else {
        unreachable!("the destination is as long as the source")
    };
    *d = a;
    let Some(d) = dst.last_chunk_mut::<K>() else {
        unreachable!("the destination is as long as the source")
    };
    *d = b;
}

/// [`Spacing::copy_in`]: `src` into `dst`, its first `head` octets, then each run after its
/// hole (whole runs one interval apart, then the rest), with AVX2's moves where the CPU has
/// them.
#[multiversion::multiversion(targets("x86_64+avx2"))]
fn spread_runs(head: usize, src: &[u8], dst: &mut [u8]) {
    spread_runs_portable(head, src, dst)
}

/// [`spread_runs`] for any CPU (its body, compiled again for each target).
#[inline(always)]
fn spread_runs_portable(head: usize, src: &[u8], dst: &mut [u8]) {
    if head > RUN || head > src.len() {
        return spread_runs_slow(head, src, dst);
    }
    copy_part(&src[..head], &mut dst[..head]);
    let (src, dst) = (&src[head..], &mut dst[head..]);
    let (runs, rest) = src.as_chunks::<RUN>();
    let (slots, _) = dst.as_chunks_mut::<INTERVAL>();
    for (slot, run) in slots[..runs.len()].iter_mut().zip(runs) {
        let Some((_, to)) = slot.split_first_chunk_mut::<MARKER_LEN>() else {
            unreachable!("an interval is longer than a marker")
        };
        copy_run(
            run,
            to.try_into().expect("an interval is a marker and a run"),
        );
    }
    if !rest.is_empty() {
        let at = runs.len() * INTERVAL + MARKER_LEN;
        copy_part(rest, &mut dst[at..at + rest.len()]);
    }
}

/// [`Spacing::copy_out`]: the first `head` octets of `src`, then its runs, each after its
/// hole, into `dst`, with AVX2's moves where the CPU has them.
#[multiversion::multiversion(targets("x86_64+avx2"))]
fn gather_runs(head: usize, src: &[u8], dst: &mut [u8]) {
    gather_runs_portable(head, src, dst)
}

/// [`gather_runs`] for any CPU (its body, compiled again for each target).
#[inline(always)]
fn gather_runs_portable(head: usize, src: &[u8], dst: &mut [u8]) {
    if head > RUN || head > dst.len() {
        return gather_runs_slow(head, src, dst);
    }
    copy_part(&src[..head], &mut dst[..head]);
    let (src, dst) = (&src[head..], &mut dst[head..]);
    let (runs, rest) = dst.as_chunks_mut::<RUN>();
    let (slots, _) = src.as_chunks::<INTERVAL>();
    let n = runs.len();
    for (run, slot) in runs.iter_mut().zip(&slots[..n]) {
        let Some((_, from)) = slot.split_first_chunk::<MARKER_LEN>() else {
            unreachable!("an interval is longer than a marker")
        };
        copy_run(
            from.try_into().expect("an interval is a marker and a run"),
            run,
        );
    }
    if !rest.is_empty() {
        let at = n * INTERVAL + MARKER_LEN;
        copy_part(&src[at..at + rest.len()], rest);
    }
}

/// [`spread_runs`] for a first run longer than the later ones or than the stretch (which
/// [`Spacing::copy_in`] does not send it): one copy per run.
#[cold]
#[inline(never)]
fn spread_runs_slow(head: usize, src: &[u8], dst: &mut [u8]) {
    Spacing::new(head).for_each_run(src.len(), |at, to, n| {
        dst[to..to + n].copy_from_slice(&src[at..at + n]);
    });
}

/// [`gather_runs`] for a first run longer than the later ones or than the stretch (which
/// [`Spacing::copy_out`] does not send it): one copy per run.
#[cold]
#[inline(never)]
fn gather_runs_slow(head: usize, src: &[u8], dst: &mut [u8]) {
    Spacing::new(head).for_each_run(dst.len(), |at, from, n| {
        dst[at..at + n].copy_from_slice(&src[from..from + n]);
    });
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

    /// `for_each_run` and the copies (whole runs one interval apart in constant-size pieces,
    /// then the rest; dispatched and portable bodies) place every octet where the run
    /// iterator does, for every start and lengths around each boundary (pieces, runs), into
    /// a destination longer than the stretch (nothing past it is touched).
    #[test]
    fn run_loops_and_copies_match_the_run_iterator() {
        let lens = [
            0usize, 1, 3, 4, 126, 127, 128, 507, 508, 509, 1015, 1016, 1017, 1500, 1524, 1525,
            2100, 9000,
        ];
        let firsts = [0usize, 1, 2, 4, 100, 506, 507, RUN];
        for first in firsts.into_iter().chain([usize::MAX]) {
            let sp = if first == usize::MAX {
                Spacing::CONTIGUOUS
            } else {
                Spacing::new(first)
            };
            for len in lens {
                let want: Vec<(usize, Range<usize>)> = sp.runs(len).collect();
                let mut got = Vec::new();
                sp.for_each_run(len, |at, to, n| got.push((at, to..to + n)));
                assert_eq!(got, want, "first {first} len {len}");

                let src: Vec<u8> = (0..len).map(|i| (i % 251) as u8 + 1).collect();
                let mut reference = vec![0u8; sp.span(len) + 9];
                for (at, r) in &want {
                    reference[r.clone()].copy_from_slice(&src[*at..*at + r.len()]);
                }
                let mut dst = vec![0u8; sp.span(len) + 9];
                sp.copy_in(&src, &mut dst);
                assert_eq!(dst, reference, "copy_in first {first} len {len}");
                let mut back = vec![0u8; len];
                sp.copy_out(&reference, &mut back);
                assert_eq!(back, src, "copy_out first {first} len {len}");

                // The portable bodies too (the dispatched copies above run the AVX2 ones
                // on a CPU that has it).
                let head = sp.first().min(len);
                let mut dst = vec![0u8; sp.span(len) + 9];
                spread_runs_portable(head, &src, &mut dst);
                assert_eq!(dst, reference, "portable copy_in first {first} len {len}");
                let mut back = vec![0u8; len];
                gather_runs_portable(head, &reference, &mut back);
                assert_eq!(back, src, "portable copy_out first {first} len {len}");
            }
        }
    }

    /// `copy_part` (overlapping constant-size copies picked by the length) copies exactly
    /// the source at every length up to a run, and nothing around it.
    #[test]
    fn part_copies_move_exactly_the_source() {
        let src: Vec<u8> = (0..RUN).map(|i| (i % 251) as u8 + 1).collect();
        for n in 0..=RUN {
            let mut dst = vec![0u8; n + 16];
            copy_part(&src[..n], &mut dst[8..8 + n]);
            assert_eq!(&dst[8..8 + n], &src[..n], "length {n}");
            assert!(
                dst[..8].iter().chain(&dst[8 + n..]).all(|&b| b == 0),
                "length {n}"
            );
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
