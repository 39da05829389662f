//! Byte mode with the TCP RDMA option: in-order octets that the receive buffer leaves out
//! because they were placed into a transfer buffer as they arrived ([`PlacedSpans`]). They
//! still belong to the stream: they count as unread and against the window, a discard drops
//! them, and before anything reads them as stream octets (or the transfer buffer leaves the
//! connection or is written from elsewhere) the connection copies them back from the transfer
//! buffer, which holds exactly these octets ([`crate::rdma::placement`] keeps it so).

use std::collections::VecDeque;

/// One run of stream octets held in a transfer buffer instead of the receive buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

/// The spans of the unread in-order stream left out of the receive buffer, in stream order.
#[derive(Debug, Default)]
pub struct PlacedSpans {
    spans: VecDeque<PlacedSpan>,
    /// Octets in all spans.
    bytes: u64,
    /// Sum of `held_before` over the spans: held octets that lie before the last span.
    held_before_last: u64,
}

impl PlacedSpans {
    /// Octets left out.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// True when nothing is left out.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Appends `len` octets at offset `bo` of transfer `rid`, after the `held` octets the
    /// receive buffer holds now (all of them precede it in the stream).
    #[inline(always)]
    pub fn push(&mut self, held: usize, rid: u64, bo: u32, len: u32) {
        let before = held as u64 - self.held_before_last;
        if let Some(last) = self.spans.back_mut() {
            let continues = before == 0
                && last.rid == rid
                && u64::from(last.bo) + u64::from(last.len) == u64::from(bo)
                && last.len.checked_add(len).is_some();
            if continues {
                last.len += len;
                self.bytes += u64::from(len);
                return;
            }
        }
        self.held_before_last += before;
        self.bytes += u64::from(len);
        self.spans.push_back(PlacedSpan {
            rid,
            bo,
            len,
            held_before: before,
        });
    }

    /// Held octets readable before the first span: all `held` when there is none.
    pub fn held_ahead(&self, held: usize) -> usize {
        self.spans.front().map_or(held, |s| s.held_before as usize)
    }

    /// Drops `n` octets from the front of the unread stream, which holds `held` octets: the
    /// held ones among them are the caller's to drop; returns how many of the `n` were held.
    pub fn consume(&mut self, mut n: u64) -> u64 {
        let mut held = 0;
        while n > 0 {
            let Some(first) = self.spans.front_mut() else {
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
            self.bytes -= k;
            n -= k;
            if first.len == 0 {
                self.spans.pop_front();
            }
        }
        held
    }

    /// The spans with the offset of each in the unread stream (from the read point).
    pub fn iter(&self) -> impl Iterator<Item = (u64, &PlacedSpan)> + '_ {
        let mut pos = 0u64;
        self.spans.iter().map(move |s| {
            let at = pos + s.held_before;
            pos = at + u64::from(s.len);
            (at, s)
        })
    }

    /// Forgets span `i`, whose octets the caller puts back into the held octets: returns it
    /// and the index among the held octets where they go.
    pub fn remove(&mut self, i: usize) -> Option<(PlacedSpan, usize)> {
        let at: u64 = self.spans.iter().take(i + 1).map(|s| s.held_before).sum();
        let s = self.spans.remove(i)?;
        self.bytes -= u64::from(s.len);
        match self.spans.get_mut(i) {
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
