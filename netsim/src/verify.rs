//! Seeded stream contents (the shared `tool_support::pattern`), record sizes and the
//! receive-side verifier.

use std::collections::BTreeMap;
use std::fmt;

use super::stream::Delivery;
pub use tool_support::pattern::{mix64, Pattern};

/// Record (MPA FPDU) sizes for a stream, drawn from a seed, summing to the stream length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordPlan {
    sizes: Vec<usize>,
}

impl RecordPlan {
    /// Records the size of FPDUs carrying ULPDUs of uniformly random length in `1..=mulpdu`
    /// (2-octet length, ULPDU, pad to 4, 4-octet CRC, no markers), so every record fits in
    /// `EMSS` when `mulpdu = EMSS - (6 + EMSS mod 4)` (MPA-64). The last record is cut to make
    /// the sum exactly `total`.
    pub fn fpdus(seed: u64, mulpdu: usize, total: u64) -> RecordPlan {
        let mulpdu = mulpdu.max(1) as u64;
        let mut sizes = Vec::new();
        let mut sum = 0u64;
        let mut i = 0u64;
        while sum < total {
            let ulpdu = 1 + mix64(seed ^ mix64(i)) % mulpdu;
            let fpdu = (2 + ulpdu).div_ceil(4) * 4 + 4;
            let size = fpdu.min(total - sum);
            sizes.push(size as usize);
            sum += size;
            i += 1;
        }
        RecordPlan { sizes }
    }

    /// Records of the given sizes.
    pub fn from_sizes(sizes: Vec<usize>) -> RecordPlan {
        RecordPlan { sizes }
    }

    /// The sizes, in stream order.
    pub fn sizes(&self) -> &[usize] {
        &self.sizes
    }

    /// Total octets.
    pub fn total(&self) -> u64 {
        self.sizes.iter().map(|&s| s as u64).sum()
    }

    /// Stream offsets where a record starts, plus the end of the stream; ascending.
    pub fn boundaries(&self) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.sizes.len() + 1);
        let mut at = 0u64;
        out.push(at);
        for &s in &self.sizes {
            at += s as u64;
            out.push(at);
        }
        out
    }
}

/// A delivery the verifier refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerifyError {
    /// Octet at `offset` is not the stream's.
    Mismatch {
        /// First wrong offset.
        offset: u64,
    },
    /// Octet at `offset` was handed up before.
    Twice {
        /// First offset handed up twice.
        offset: u64,
    },
    /// Data past the end of the stream.
    PastEnd {
        /// Offset of the delivery.
        offset: u64,
        /// Its length.
        len: usize,
    },
    /// The in-order point moved backwards.
    InOrderBackwards {
        /// Before.
        from: u64,
        /// After.
        to: u64,
    },
    /// The in-order point claims octets not handed up yet.
    InOrderAhead {
        /// Claimed in-order point.
        in_order: u64,
        /// End of the contiguous prefix actually handed up.
        prefix: u64,
    },
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerifyError::Mismatch { offset } => write!(f, "wrong octet at stream offset {offset}"),
            VerifyError::Twice { offset } => {
                write!(f, "octet at stream offset {offset} handed up twice")
            }
            VerifyError::PastEnd { offset, len } => {
                write!(
                    f,
                    "{len} octets at offset {offset} run past the end of the stream"
                )
            }
            VerifyError::InOrderBackwards { from, to } => {
                write!(f, "in-order point went back from {from} to {to}")
            }
            VerifyError::InOrderAhead { in_order, prefix } => {
                write!(
                    f,
                    "in-order point {in_order} ahead of the data handed up ({prefix})"
                )
            }
        }
    }
}

impl std::error::Error for VerifyError {}

/// Checks what a receiver hands up against the [`Pattern`] it should carry: every octet right,
/// none twice, none past the end, and the in-order point honest and monotonic. Counts deliveries
/// that came ahead of a gap (out-of-order commits).
#[derive(Clone, Debug)]
pub struct StreamVerifier {
    pattern: Pattern,
    total: u64,
    /// Disjoint, non-adjacent ranges handed up: start -> end.
    ranges: BTreeMap<u64, u64>,
    in_order: u64,
    stats: VerifyStats,
}

/// What a [`StreamVerifier`] has seen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VerifyStats {
    /// Deliveries accepted.
    pub deliveries: u64,
    /// Octets accepted.
    pub bytes: u64,
    /// Deliveries that started beyond the contiguous prefix handed up so far.
    pub ooo_deliveries: u64,
    /// Octets in those.
    pub ooo_bytes: u64,
}

impl StreamVerifier {
    /// Expects `total` octets of `pattern`.
    pub fn new(pattern: Pattern, total: u64) -> Self {
        StreamVerifier {
            pattern,
            total,
            ranges: BTreeMap::new(),
            in_order: 0,
            stats: VerifyStats::default(),
        }
    }

    /// End of the contiguous prefix handed up.
    pub fn prefix(&self) -> u64 {
        match self.ranges.first_key_value() {
            Some((&0, &end)) => end,
            _ => 0,
        }
    }

    /// Counters.
    pub fn stats(&self) -> VerifyStats {
        self.stats
    }

    /// Octets expected in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// True once every octet arrived and the in-order point reached the end.
    pub fn is_complete(&self) -> bool {
        self.prefix() == self.total && self.in_order == self.total
    }

    /// Checks one delivery and, if it passes, records it (a refused one changes nothing).
    pub fn accept(&mut self, d: &Delivery) -> Result<(), VerifyError> {
        let len = d.data.len() as u64;
        let end = d.offset.checked_add(len).filter(|&e| e <= self.total);
        let Some(end) = end else {
            return Err(VerifyError::PastEnd {
                offset: d.offset,
                len: d.data.len(),
            });
        };
        if len > 0 {
            // The nearest range starting before `end` is the only one that can overlap.
            if let Some((&s, &e)) = self.ranges.range(..end).next_back() {
                if e > d.offset {
                    return Err(VerifyError::Twice {
                        offset: s.max(d.offset),
                    });
                }
            }
            if let Some(offset) = self.pattern.first_mismatch(d.offset, &d.data) {
                return Err(VerifyError::Mismatch { offset });
            }
        }
        let prefix = self.prefix();
        let new_prefix = if len > 0 && d.offset == prefix {
            self.ranges.get(&end).copied().unwrap_or(end)
        } else {
            prefix
        };
        if d.in_order < self.in_order {
            return Err(VerifyError::InOrderBackwards {
                from: self.in_order,
                to: d.in_order,
            });
        }
        if d.in_order > new_prefix {
            return Err(VerifyError::InOrderAhead {
                in_order: d.in_order,
                prefix: new_prefix,
            });
        }
        if len > 0 {
            self.insert(d.offset, end);
            self.stats.deliveries += 1;
            self.stats.bytes += len;
            if d.offset > prefix {
                self.stats.ooo_deliveries += 1;
                self.stats.ooo_bytes += len;
            }
        }
        self.in_order = d.in_order;
        Ok(())
    }

    fn insert(&mut self, mut start: u64, mut end: u64) {
        if let Some((&s, &e)) = self.ranges.range(..=start).next_back() {
            if e == start {
                self.ranges.remove(&s);
                start = s;
            }
        }
        if let Some(e) = self.ranges.remove(&end) {
            end = e;
        }
        self.ranges.insert(start, end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(p: &Pattern, offset: u64, len: usize, in_order: u64) -> Delivery {
        let mut data = vec![0; len];
        p.fill(offset, &mut data);
        Delivery {
            offset,
            data,
            in_order,
        }
    }

    #[test]
    fn in_order_stream_verifies_and_completes() {
        let p = Pattern::new(9);
        let mut v = StreamVerifier::new(p, 1000);
        let mut at = 0;
        for len in [1, 99, 400, 500] {
            v.accept(&delivery(&p, at, len, at + len as u64)).unwrap();
            at += len as u64;
        }
        assert!(v.is_complete());
        assert_eq!(v.stats().ooo_deliveries, 0);
        assert_eq!(v.stats().bytes, 1000);
    }

    #[test]
    fn a_flipped_bit_is_caught_at_its_offset() {
        let p = Pattern::new(9);
        let mut v = StreamVerifier::new(p, 1000);
        let mut d = delivery(&p, 100, 300, 0);
        d.data[123] ^= 0x10;
        v.ranges.insert(0, 100);
        assert_eq!(v.accept(&d), Err(VerifyError::Mismatch { offset: 223 }));
    }

    #[test]
    fn a_shifted_stream_is_caught() {
        let p = Pattern::new(3);
        let mut v = StreamVerifier::new(p, 1000);
        let mut d = delivery(&p, 1, 64, 0);
        d.offset = 0;
        d.in_order = 64;
        assert!(matches!(v.accept(&d), Err(VerifyError::Mismatch { .. })));
    }

    #[test]
    fn an_octet_handed_up_twice_is_caught() {
        let p = Pattern::new(5);
        let mut v = StreamVerifier::new(p, 1000);
        v.accept(&delivery(&p, 500, 100, 0)).unwrap();
        assert_eq!(
            v.accept(&delivery(&p, 590, 20, 0)),
            Err(VerifyError::Twice { offset: 590 })
        );
        assert_eq!(
            v.accept(&delivery(&p, 450, 51, 0)),
            Err(VerifyError::Twice { offset: 500 })
        );
        v.accept(&delivery(&p, 450, 50, 0)).unwrap();
        v.accept(&delivery(&p, 600, 10, 0)).unwrap();
        assert_eq!(
            v.accept(&delivery(&p, 449, 2, 0)),
            Err(VerifyError::Twice { offset: 450 })
        );
    }

    #[test]
    fn a_lost_octet_leaves_the_stream_incomplete() {
        let p = Pattern::new(5);
        let mut v = StreamVerifier::new(p, 100);
        v.accept(&delivery(&p, 0, 50, 50)).unwrap();
        v.accept(&delivery(&p, 51, 49, 50)).unwrap();
        assert!(!v.is_complete());
        assert_eq!(v.prefix(), 50);
        assert_eq!(
            v.accept(&Delivery {
                offset: 100,
                data: vec![],
                in_order: 100
            }),
            Err(VerifyError::InOrderAhead {
                in_order: 100,
                prefix: 50
            })
        );
    }

    #[test]
    fn out_of_order_commits_are_counted_and_the_in_order_point_checked() {
        let p = Pattern::new(8);
        let mut v = StreamVerifier::new(p, 300);
        v.accept(&delivery(&p, 200, 100, 0)).unwrap();
        v.accept(&delivery(&p, 0, 100, 100)).unwrap();
        assert_eq!(
            v.accept(&delivery(&p, 100, 50, 90)),
            Err(VerifyError::InOrderBackwards { from: 100, to: 90 })
        );
        let mut v2 = v.clone();
        v2.accept(&delivery(&p, 100, 100, 300)).unwrap();
        assert!(v2.is_complete());
        assert_eq!(v2.stats().ooo_deliveries, 1);
        assert_eq!(v2.stats().ooo_bytes, 100);
    }

    #[test]
    fn data_past_the_end_is_caught() {
        let p = Pattern::new(1);
        let mut v = StreamVerifier::new(p, 10);
        assert_eq!(
            v.accept(&delivery(&p, 5, 6, 0)),
            Err(VerifyError::PastEnd { offset: 5, len: 6 })
        );
        assert!(matches!(
            v.accept(&Delivery {
                offset: u64::MAX,
                data: vec![1],
                in_order: 0
            }),
            Err(VerifyError::PastEnd { .. })
        ));
    }

    #[test]
    fn fpdu_plan_sums_to_total_and_fits_emss() {
        let plan = RecordPlan::fpdus(77, 1454, 256 * 1024);
        assert_eq!(plan.total(), 256 * 1024);
        assert!(plan.sizes().iter().all(|&s| (1..=1460).contains(&s)));
        let b = plan.boundaries();
        assert_eq!(b.first(), Some(&0));
        assert_eq!(b.last(), Some(&(256 * 1024)));
        assert!(b.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(plan, RecordPlan::fpdus(77, 1454, 256 * 1024), "seeded");
        assert_ne!(plan, RecordPlan::fpdus(78, 1454, 256 * 1024));
    }
}
