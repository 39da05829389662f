//! Byte mode with the TCP RDMA option: in-order octets that the receive buffer leaves out
//! because they were placed into a transfer buffer as they arrived ([`PlacedSpans`]). They
//! still belong to the stream: they count as unread and against the window, a discard drops
//! them, and before anything reads them as stream octets (or the transfer buffer leaves the
//! connection or is written from elsewhere) the connection copies them back from the transfer
//! buffer, which holds exactly these octets ([`crate::rdma::placement`] keeps it so).

use std::collections::VecDeque;

/// One run of stream octets held in a transfer buffer instead of the receive buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlacedSpan {
    /// The transfer (RID) whose buffer holds the octets.
    pub rid: u64,
    /// Their offset in that buffer.
    pub bo: u32,
    /// How many.
    pub len: u32,
    /// Held octets between the previous span (or the read point) and this one.
    held_before: u64,
}

/// The spans of the unread in-order stream left out of the receive buffer, in stream order:
/// the last one apart (in-order placement extends it segment after segment), the others
/// queued before it.
#[derive(Debug, Default)]
pub struct PlacedSpans {
    /// The spans before `last`.
    spans: VecDeque<PlacedSpan>,
    /// The last span; `len == 0` when there is none (then `spans` is empty too, and it is
    /// all zero but `rid` and `bo`).
    last: PlacedSpan,
    /// Octets in all spans.
    bytes: u64,
    /// Sum of `held_before` over the spans: held octets that lie before the end of the last.
    held_before_last: u64,
}

impl PlacedSpans {
    /// Octets left out.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// True when nothing is left out.
    pub fn is_empty(&self) -> bool {
        self.last.len == 0
    }

    /// Appends `len` octets (not 0) at offset `bo` of transfer `rid`, after the `held` octets
    /// the receive buffer holds now (all of them precede it in the stream).
    #[inline(always)]
    pub fn push(&mut self, held: usize, rid: u64, bo: u32, len: u32) {
        let before = held as u64 - self.held_before_last;
        let last = &mut self.last;
        // Without a last span (`len` 0, `held_before` 0), extending it makes the span a new
        // one would be: no test of its presence needed.
        let continues = before == 0
            && last.rid == rid
            && u64::from(last.bo) + u64::from(last.len) == u64::from(bo)
            && last.len.checked_add(len).is_some();
        self.bytes += u64::from(len);
        if continues {
            last.len += len;
            return;
        }
        self.push_new(before, rid, bo, len);
    }

    /// [`Self::push`] of a span that does not continue the last one.
    fn push_new(&mut self, before: u64, rid: u64, bo: u32, len: u32) {
        self.held_before_last += before;
        let span = PlacedSpan {
            rid,
            bo,
            len,
            held_before: before,
        };
        let last = std::mem::replace(&mut self.last, span);
        if last.len > 0 {
            self.spans.push_back(last);
        }
    }

    /// The first span, if any.
    fn first_mut(&mut self) -> Option<&mut PlacedSpan> {
        match self.spans.front_mut() {
            Some(s) => Some(s),
            None => (self.last.len > 0).then_some(&mut self.last),
        }
    }

    /// Forgets the first span (its octets and the held ones before it are gone).
    fn pop_first(&mut self) {
        if self.spans.pop_front().is_none() {
            self.last = PlacedSpan::default();
        }
    }

    /// Held octets readable before the first span: all `held` when there is none.
    pub fn held_ahead(&self, held: usize) -> usize {
        match self.spans.front() {
            Some(s) => s.held_before as usize,
            None if self.last.len > 0 => self.last.held_before as usize,
            None => held,
        }
    }

    /// Drops `n` octets from the front of the unread stream, which holds `held` octets: the
    /// held ones among them are the caller's to drop; returns how many of the `n` were held.
    pub fn consume(&mut self, mut n: u64) -> u64 {
        let mut held = 0;
        while n > 0 {
            let Some(first) = self.first_mut() else {
                return held + n;
            };
            if first.held_before > 0 {
                let k = first.held_before.min(n);
                first.held_before -= k;
                self.held_before_last -= k;
                held += k;
                n -= k;
                continue;
            }
            let k = u64::from(first.len).min(n);
            first.len -= k as u32;
            first.bo += k as u32;
            let emptied = first.len == 0;
            self.bytes -= k;
            n -= k;
            if emptied {
                self.pop_first();
            }
        }
        held
    }

    /// The spans with the offset of each in the unread stream (from the read point).
    pub fn iter(&self) -> impl Iterator<Item = (u64, &PlacedSpan)> + '_ {
        let mut pos = 0u64;
        let last = (self.last.len > 0).then_some(&self.last);
        self.spans.iter().chain(last).map(move |s| {
            let at = pos + s.held_before;
            pos = at + u64::from(s.len);
            (at, s)
        })
    }

    /// Forgets span `i`, whose octets the caller puts back into the held octets: returns it
    /// and the index among the held octets where they go.
    pub fn remove(&mut self, i: usize) -> Option<(PlacedSpan, usize)> {
        let queued = self.spans.len();
        // Held octets before it: those before the spans ahead of it, then its own.
        let ahead: u64 = self.spans.iter().take(i).map(|s| s.held_before).sum();
        let s = if i < queued {
            self.spans.remove(i)?
        } else if i == queued && self.last.len > 0 {
            let next_last = self.spans.pop_back().unwrap_or_default();
            std::mem::replace(&mut self.last, next_last)
        } else {
            return None;
        };
        let at = ahead + s.held_before;
        self.bytes -= u64::from(s.len);
        let next = if i < queued {
            Some(self.spans.get_mut(i).unwrap_or(&mut self.last))
        } else {
            None
        };
        match next {
            // The octets and those held before them now lie before the next span.
            Some(next) => {
                next.held_before += s.held_before + u64::from(s.len);
                self.held_before_last += u64::from(s.len);
            }
            None => self.held_before_last -= s.held_before,
        }
        Some((s, at as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model: the unread stream as (Some((rid, bo)) for a left-out octet, None for a held one).
    fn model(spans: &PlacedSpans, held: usize) -> Vec<Option<(u64, u32)>> {
        let mut v = Vec::new();
        let mut h = 0;
        for (at, s) in spans.iter() {
            while (v.len() as u64) < at {
                v.push(None);
                h += 1;
            }
            for k in 0..s.len {
                v.push(Some((s.rid, s.bo + k)));
            }
        }
        v.extend(std::iter::repeat_n(None, held - h));
        v
    }

    /// One step on the unread stream.
    #[derive(Clone, Debug)]
    enum Op {
        /// `k` octets held (received, not placed).
        Hold(usize),
        /// `len` octets placed for transfer `rid`, continuing its octets when `next`.
        Push {
            rid: u64,
            next: bool,
            bo: u32,
            len: u32,
        },
        /// `n` octets dropped from the front (a fraction of the unread stream, per mille).
        Consume(u64),
        /// The held octets before the first span read, at most `k`.
        Read(usize),
        /// Span `i` (modulo their count) put back among the held octets.
        Remove(usize),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            (0usize..40).prop_map(Op::Hold),
            (0u64..3, any::<bool>(), 0u32..5000, 1u32..60)
                .prop_map(|(rid, next, bo, len)| Op::Push { rid, next, bo, len }),
            (0u64..=1000).prop_map(Op::Consume),
            (0usize..40).prop_map(Op::Read),
            (0usize..8).prop_map(Op::Remove),
        ]
    }

    proptest::proptest! {
        /// For any sequence of holds, pushes (continuing or not), consumption, reads and
        /// put-backs, the spans map every unread octet where an octet-by-octet model of the
        /// stream has it, with the counts (octets left out, held ahead, held among those
        /// consumed, where a put-back span goes) the model gives.
        #[test]
        fn spans_match_an_octet_model(ops in proptest::collection::vec(op(), 1..80)) {
            let mut p = PlacedSpans::default();
            let mut stream: Vec<Option<(u64, u32)>> = Vec::new();
            let mut held = 0usize;
            let mut next_bo = [0u32; 3];
            for op in ops {
                match op {
                    Op::Hold(k) => {
                        stream.extend(std::iter::repeat_n(None, k));
                        held += k;
                    }
                    Op::Push { rid, next, bo, len } => {
                        let bo = if next { next_bo[rid as usize] } else { bo };
                        p.push(held, rid, bo, len);
                        stream.extend((0..len).map(|k| Some((rid, bo + k))));
                        next_bo[rid as usize] = bo + len;
                    }
                    Op::Consume(permille) => {
                        let n = stream.len() * permille as usize / 1000;
                        let want = stream.drain(..n).filter(|o| o.is_none()).count();
                        proptest::prop_assert_eq!(p.consume(n as u64), want as u64);
                        held -= want;
                    }
                    Op::Read(k) => {
                        let n = k.min(p.held_ahead(held));
                        proptest::prop_assert!(stream[..n].iter().all(|o| o.is_none()));
                        stream.drain(..n);
                        proptest::prop_assert_eq!(p.consume(n as u64), n as u64);
                        held -= n;
                    }
                    Op::Remove(i) => {
                        let count = p.iter().count();
                        if count == 0 {
                            proptest::prop_assert!(p.remove(0).is_none());
                            continue;
                        }
                        let (pos, span) = p.iter().nth(i % count).map(|(a, s)| (a as usize, *s)).unwrap();
                        let (s, at) = p.remove(i % count).expect("a span");
                        proptest::prop_assert_eq!(s, span);
                        proptest::prop_assert_eq!(at, stream[..pos].iter().filter(|o| o.is_none()).count());
                        stream[pos..pos + s.len as usize].fill(None);
                        held += s.len as usize;
                    }
                }
                proptest::prop_assert_eq!(model(&p, held), stream.clone());
                let placed = stream.iter().filter(|o| o.is_some()).count();
                proptest::prop_assert_eq!(p.bytes(), placed as u64);
                proptest::prop_assert_eq!(p.is_empty(), placed == 0);
                let ahead = stream.iter().position(|o| o.is_some()).unwrap_or(held);
                proptest::prop_assert_eq!(p.held_ahead(held), ahead);
            }
        }
    }

    /// Ensures pushes, consumption and removal keep the spans where the stream has them.
    #[test]
    fn spans_follow_the_stream() {
        let mut p = PlacedSpans::default();
        let mut held = 3;
        p.push(held, 7, 0, 4);
        p.push(held, 7, 4, 2); // continues the span
        held += 5;
        p.push(held, 7, 6, 3);
        held += 1;
        assert_eq!(p.bytes(), 9);
        assert_eq!(p.held_ahead(held), 3);
        let m = model(&p, held);
        assert_eq!(m.len(), 18);
        assert_eq!(m[3], Some((7, 0)));
        assert_eq!(m[8], Some((7, 5)));
        assert_eq!(m[9], None);
        assert_eq!(m[14], Some((7, 6)));
        // Drop 3 held octets and 2 placed ones.
        assert_eq!(p.consume(5), 3);
        held -= 3;
        assert_eq!(model(&p, held)[..], m[5..]);
        // Put the first span back: its 4 octets join the held ones before the next span.
        let (s, at) = p.remove(0).expect("a span");
        assert_eq!((s.rid, s.bo, s.len, at), (7, 2, 4, 0));
        held += 4;
        assert_eq!(p.held_ahead(held), 9);
        assert_eq!(p.bytes(), 3);
        let (s, at) = p.remove(0).expect("a span");
        assert_eq!((s.bo, s.len, at), (6, 3, 9));
        held += 3;
        assert!(p.is_empty());
        assert_eq!(p.held_ahead(held), held);
        assert_eq!(p.consume(4), 4);
    }
}
