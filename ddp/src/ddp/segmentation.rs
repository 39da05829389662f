//! Cutting a ULP message into DDP segments no larger than MULPDU (-06 §5.2, DDP-41..DDP-48).

/// One segment's share of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentPlan {
    /// Offset of the first payload octet within the message (MO, or TO - initial TO).
    pub offset: u32,
    /// Payload octets.
    pub len: u32,
    /// The L bit: set on the last segment only (DDP-14, DDP-15).
    pub last: bool,
}

/// The segments of a message of `total` octets, in increasing offset order (DDP-54), each
/// carrying at most `mulpdu - header_len` payload octets. A zero-length message is one segment
/// (DDP-48). Returns `None` when MULPDU cannot hold the header plus one octet.
pub fn segments(total: u32, mulpdu: usize, header_len: usize) -> Option<Segments> {
    let max = mulpdu.checked_sub(header_len).filter(|m| *m > 0)?;
    Some(Segments {
        total,
        next: 0,
        max_payload: u32::try_from(max).unwrap_or(u32::MAX),
        done: false,
    })
}

/// Iterator over [`SegmentPlan`]s; see [`segments`].
#[derive(Debug, Clone)]
pub struct Segments {
    total: u32,
    next: u32,
    max_payload: u32,
    done: bool,
}

/// The next segment after `sent` payload octets of a `total`-octet message.
pub fn next_segment(total: u32, sent: u32, max_payload: u32) -> SegmentPlan {
    let len = (total - sent).min(max_payload);
    SegmentPlan {
        offset: sent,
        len,
        last: sent + len == total,
    }
}

impl Iterator for Segments {
    type Item = SegmentPlan;
    fn next(&mut self) -> Option<SegmentPlan> {
        if self.done {
            return None;
        }
        let s = next_segment(self.total, self.next, self.max_payload);
        self.next += s.len;
        self.done = s.last;
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// -06 §5.2 examples (DDP-45, DDP-47).
    #[test]
    fn examples_of_5_2() {
        let u: Vec<_> = segments(2048, 1500, 18).unwrap().collect();
        assert_eq!(
            u,
            [
                SegmentPlan {
                    offset: 0,
                    len: 1482,
                    last: false
                },
                SegmentPlan {
                    offset: 1482,
                    len: 566,
                    last: true
                }
            ]
        );
        let t: Vec<_> = segments(2048, 1500, 14).unwrap().collect();
        assert_eq!(
            t,
            [
                SegmentPlan {
                    offset: 0,
                    len: 1486,
                    last: false
                },
                SegmentPlan {
                    offset: 1486,
                    len: 562,
                    last: true
                }
            ]
        );
    }

    /// DDP-48: zero length gives exactly one L segment.
    #[test]
    fn ddp_48_zero_length_one_segment() {
        let v: Vec<_> = segments(0, 128, 18).unwrap().collect();
        assert_eq!(
            v,
            [SegmentPlan {
                offset: 0,
                len: 0,
                last: true
            }]
        );
    }

    #[test]
    fn mulpdu_too_small_refused() {
        assert!(segments(10, 18, 18).is_none());
        assert!(segments(10, 10, 18).is_none());
    }

    proptest! {
        /// DDP-14/15/17/41/43: sizes <= MULPDU, exactly one L and it is last, offsets contiguous.
        #[test]
        fn segmentation_properties(total in 0u32..(1 << 20), mulpdu in 19usize..9000, tagged: bool) {
            let hl = if tagged { 14 } else { 18 };
            let v: Vec<_> = segments(total, mulpdu, hl).unwrap().collect();
            let mut expect_off = 0u32;
            for (i, s) in v.iter().enumerate() {
                prop_assert!(s.len as usize + hl <= mulpdu);
                prop_assert_eq!(s.offset, expect_off);
                prop_assert_eq!(s.last, i == v.len() - 1);
                prop_assert!(s.len > 0 || total == 0);
                expect_off += s.len;
            }
            prop_assert_eq!(expect_off, total);
        }
    }
}
