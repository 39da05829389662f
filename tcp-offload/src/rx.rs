//! The receive side: in-order delivery, out-of-order commit and its memory bounds.
//!
//! A data range that passes every TCP check is *committed*: the first copy of every octet wins and
//! later duplicates never overwrite it (MPA-13, MPA-14). In record mode each newly committed range is
//! handed up at once as an [`RxChunk`] with its sequence number, in order or not (MPA-12, MPA-15);
//! in byte-stream mode out-of-order data waits here until the gap fills (MPA-17).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::rx_placed::{PlacedSpan, PlacedSpans};
use crate::seq::SeqNum;

/// A shared bound on out-of-order octets held by many connections together.
#[derive(Clone, Debug)]
pub struct OooBudget {
    used: Arc<AtomicUsize>,
    limit: usize,
}

impl OooBudget {
    /// A budget of `limit` octets.
    pub fn new(limit: usize) -> Self {
        OooBudget {
            used: Arc::new(AtomicUsize::new(0)),
            limit,
        }
    }
    /// Octets in use now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }
    fn try_take(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                u.checked_add(n).filter(|&t| t <= self.limit)
            })
            .is_ok()
    }
    fn release(&self, n: usize) {
        let _ = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                Some(u.saturating_sub(n))
            });
    }
}

/// Data handed up in record mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RxChunk {
    /// Sequence number of the first octet.
    pub seq: SeqNum,
    /// Stream offset of the first octet (0 = first data octet of the connection).
    pub offset: u64,
    /// The octets (committed: they never change and are never handed up again).
    pub data: Vec<u8>,
    /// True when this chunk started at the in-order point when it was committed.
    pub in_order: bool,
    /// The in-order point (RCV.NXT as a stream offset) after this chunk was committed: every octet
    /// before it has been handed up.
    pub in_order_point: u64,
}

impl RxChunk {
    /// This chunk as the borrowed form a [`RxSink`] receives.
    pub fn as_rx_ref(&self) -> RxRef<'_> {
        RxRef {
            seq: self.seq,
            offset: self.offset,
            data: &self.data,
            in_order: self.in_order,
            in_order_point: self.in_order_point,
        }
    }
}

/// A committed record-mode chunk lent to an [`RxSink`]: the fields of [`RxChunk`], with the
/// octets borrowed from the received packet instead of copied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxRef<'a> {
    /// Sequence number of the first octet.
    pub seq: SeqNum,
    /// Stream offset of the first octet (0 = first data octet of the connection).
    pub offset: u64,
    /// The octets (committed: they never change and are never handed up again).
    pub data: &'a [u8],
    /// True when this chunk started at the in-order point when it was committed.
    pub in_order: bool,
    /// The in-order point (RCV.NXT as a stream offset) after this chunk was committed: every octet
    /// before it has been handed up.
    pub in_order_point: u64,
}

impl RxRef<'_> {
    /// An owned copy (what [`crate::Connection::poll_recv`] would have returned).
    pub fn to_chunk(&self) -> RxChunk {
        RxChunk {
            seq: self.seq,
            offset: self.offset,
            data: self.data.to_vec(),
            in_order: self.in_order,
            in_order_point: self.in_order_point,
        }
    }
}

/// Takes committed record-mode chunks synchronously, during
/// [`crate::Connection::handle_segment_with`].
///
/// Contract: `on_chunk` is called once per chunk, in the order `poll_recv` would have returned
/// them; the chunk's octets count as consumed when the call returns (they never count against the
/// receive window) and `chunk.data` is only valid during the call, so a sink that needs octets
/// later (e.g. out-of-order data it cannot place yet) must copy them. The connection is borrowed
/// meanwhile, so the sink cannot call back into it.
pub trait RxSink {
    /// One committed chunk.
    fn on_chunk(&mut self, chunk: RxRef<'_>);
}

impl<F: FnMut(RxRef<'_>)> RxSink for F {
    fn on_chunk(&mut self, chunk: RxRef<'_>) {
        self(chunk)
    }
}

/// What one `accept` call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Accepted {
    pub new_bytes: u64,
    pub dup_bytes: u64,
    pub ooo_ranges: u64,
    pub ooo_dropped: u64,
    pub advanced: bool,
    pub filled_gap: bool,
}

/// Limits for out-of-order data.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OooLimits {
    pub max_ranges: usize,
    pub max_bytes: u64,
}

#[derive(Debug)]
pub(crate) struct RecvBuffer {
    /// RCV.NXT as a stream offset (SYN at 0; first data octet at 1).
    pub nxt: u64,
    /// Committed out-of-order ranges beyond `nxt`, sorted, disjoint, not adjacent.
    ranges: Vec<(u64, u64)>,
    /// Byte mode: out-of-order octets by start offset (exactly the committed ranges' pieces).
    pieces: BTreeMap<u64, Vec<u8>>,
    pub ooo_bytes: u64,
    inorder: VecDeque<u8>,
    /// Byte mode: unread in-order octets not in `inorder` because they were placed.
    placed: PlacedSpans,
    chunks: VecDeque<RxChunk>,
    chunk_bytes: u64,
    pub record_mode: bool,
    /// Start of the range most recently extended (first SACK block, RFC 2018 §4).
    last_changed: Option<u64>,
    budget: Option<OooBudget>,
}

impl RecvBuffer {
    pub fn new(nxt: u64) -> Self {
        RecvBuffer {
            nxt,
            ranges: Vec::new(),
            pieces: BTreeMap::new(),
            ooo_bytes: 0,
            inorder: VecDeque::new(),
            placed: PlacedSpans::default(),
            chunks: VecDeque::new(),
            chunk_bytes: 0,
            record_mode: false,
            last_changed: None,
            budget: None,
        }
    }

    /// An empty buffer starting at `nxt` that keeps this one's mode and shared budget (the SYN
    /// resets the receive side, but not what the upper layer asked for).
    pub fn fresh(&mut self, nxt: u64) -> RecvBuffer {
        let mut r = RecvBuffer::new(nxt);
        r.record_mode = self.record_mode;
        if let Some(b) = self.budget.take() {
            b.release(self.ooo_bytes as usize);
            self.ooo_bytes = 0;
            r.budget = Some(b);
        }
        r
    }

    pub fn set_budget(&mut self, b: OooBudget) {
        self.budget = Some(b);
    }

    /// Octets held that count against the receive window.
    pub fn held(&self) -> u64 {
        self.inorder.len() as u64 + self.placed.bytes() + self.chunk_bytes + self.ooo_bytes
    }

    /// Committed out-of-order ranges.
    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges
    }

    /// The most recently changed range start (for SACK block order).
    pub fn last_changed(&self) -> Option<u64> {
        self.last_changed
    }

    /// Commits what is new in `data` at offset `off` (already trimmed to the window by the caller).
    ///
    /// In record mode each newly committed range becomes a chunk: queued for [`Self::pop_chunk`]
    /// when `sink` is `None`, else handed to `sink` at once (borrowed from `data`, nothing queued
    /// or allocated). In byte mode `sink` is not used.
    pub fn accept(
        &mut self,
        off: u64,
        data: &[u8],
        seq_of: impl Fn(u64) -> SeqNum,
        lim: OooLimits,
        mut sink: Option<&mut dyn RxSink>,
    ) -> Accepted {
        let mut res = Accepted::default();
        let end = off + data.len() as u64;
        let start = off.max(self.nxt);
        res.dup_bytes += start.saturating_sub(off).min(data.len() as u64);
        // Walk [start, end) left to right: skip what is committed (below `nxt` or inside a range),
        // commit each gap. Our own commits all lie below `cur`, so the committed parts met ahead of
        // `cur` were committed before this call (duplicates). No gap list is built.
        let mut cur = start;
        while cur < end {
            let i = self.ranges.partition_point(|r| r.1 <= cur);
            let skip_to = if cur < self.nxt {
                self.nxt
            } else {
                match self.ranges.get(i) {
                    Some(&(rs, re)) if rs <= cur => re,
                    _ => cur,
                }
            };
            if skip_to > cur {
                res.dup_bytes += skip_to.min(end) - cur;
                cur = skip_to;
                continue;
            }
            let ge = self.ranges.get(i).map_or(end, |r| r.0.min(end));
            let gs = cur;
            cur = ge;
            let bytes = &data[(gs - off) as usize..(ge - off) as usize];
            if gs == self.nxt {
                res.new_bytes += ge - gs;
                res.advanced = true;
                self.nxt = ge;
                if !self.record_mode {
                    self.inorder.extend(bytes);
                }
                // Ranges now touching `nxt` join the in-order stream; the chunk reports the
                // in-order point after that.
                if self.advance() {
                    res.filled_gap = true;
                }
                if self.record_mode {
                    self.commit_chunk(gs, bytes, true, &seq_of, sink.as_deref_mut());
                }
            } else {
                // Out of order: commit if the bounds allow.
                let n = ge - gs;
                let new_range = !self.ranges.iter().any(|&(rs, re)| re == gs || rs == ge);
                let ranges_ok = !new_range || self.ranges.len() < lim.max_ranges;
                let bytes_ok = self.ooo_bytes + n <= lim.max_bytes;
                let budget_ok = ranges_ok
                    && bytes_ok
                    && self.budget.as_ref().is_none_or(|b| b.try_take(n as usize));
                if !budget_ok {
                    res.ooo_dropped += 1;
                    continue;
                }
                self.insert_range(gs, ge);
                self.ooo_bytes += n;
                res.new_bytes += n;
                res.ooo_ranges += 1;
                if self.record_mode {
                    self.commit_chunk(gs, bytes, false, &seq_of, sink.as_deref_mut());
                } else {
                    self.pieces.insert(gs, bytes.to_vec());
                }
            }
        }
        res
    }

    /// [`Self::accept`] for non-empty `data` starting at the in-order point while nothing is
    /// held out of order (the caller checked both; `seq` is the sequence number of `nxt`): the
    /// same commit without the walk over the ranges.
    ///
    /// Inlined, with the commit out of line: the caller sees what it returns, which is the
    /// same for every call. In record mode with a sink, the one chunk goes to it from here
    /// (what [`Self::commit_chunk`] does), without a frame of the commit's own.
    #[inline(always)]
    pub fn accept_next(
        &mut self,
        data: &[u8],
        seq: SeqNum,
        sink: Option<&mut dyn RxSink>,
    ) -> Accepted {
        debug_assert!(self.ranges.is_empty() && !data.is_empty());
        match sink {
            Some(s) if self.record_mode => {
                let off = self.nxt;
                self.nxt += data.len() as u64;
                s.on_chunk(self.chunk_ref(seq, off, data, true));
            }
            sink => self.commit_next(data, seq, sink),
        }
        Accepted {
            new_bytes: data.len() as u64,
            advanced: true,
            ..Accepted::default()
        }
    }

    /// The commit of [`Self::accept_next`].
    #[inline(never)]
    fn commit_next(&mut self, data: &[u8], seq: SeqNum, sink: Option<&mut dyn RxSink>) {
        let off = self.nxt;
        self.nxt += data.len() as u64;
        if self.record_mode {
            self.commit_chunk(off, data, true, &|_| seq, sink);
        } else {
            self.inorder.extend(data);
        }
    }

    /// [`Self::accept_next`] in byte mode for `data` whose octets `run` (a range of `data`)
    /// were placed at offset `bo` of transfer `rid`: those are not stored (see
    /// [`PlacedSpans`]).
    #[inline]
    pub fn accept_next_placed(
        &mut self,
        data: &[u8],
        run: std::ops::Range<usize>,
        rid: u64,
        bo: u32,
    ) -> Accepted {
        debug_assert!(self.ranges.is_empty() && !self.record_mode && run.end <= data.len());
        self.nxt += data.len() as u64;
        if run.start > 0 {
            self.inorder.extend(&data[..run.start]);
        }
        let len = (run.end - run.start) as u32;
        self.placed.push(self.inorder.len(), rid, bo, len);
        if run.end < data.len() {
            self.inorder.extend(&data[run.end..]);
        }
        Accepted {
            new_bytes: data.len() as u64,
            advanced: true,
            ..Accepted::default()
        }
    }

    /// [`Self::accept_next_placed`] for `len` octets (not 0) all placed at offset `bo` of
    /// transfer `rid`.
    #[inline(always)]
    pub fn accept_next_all_placed(&mut self, len: usize, rid: u64, bo: u32) -> Accepted {
        debug_assert!(self.ranges.is_empty() && !self.record_mode);
        self.nxt += len as u64;
        self.placed.push(self.inorder.len(), rid, bo, len as u32);
        Accepted {
            new_bytes: len as u64,
            advanced: true,
            ..Accepted::default()
        }
    }

    /// Record mode: hands the committed range `[off, off + bytes.len())` to `sink`, or queues a
    /// copy when there is none. `in_order_point` is the current `nxt`.
    fn commit_chunk<'s>(
        &mut self,
        off: u64,
        bytes: &[u8],
        in_order: bool,
        seq_of: &impl Fn(u64) -> SeqNum,
        sink: Option<&mut (dyn RxSink + 's)>,
    ) {
        match sink {
            Some(s) => s.on_chunk(self.chunk_ref(seq_of(off), off, bytes, in_order)),
            None => self.push_chunk(off, bytes.to_vec(), in_order, seq_of),
        }
    }

    /// The chunk `data` at stream offset `off` (its first octet's sequence number `seq`) as a
    /// sink is handed it, with the in-order point as it is now.
    #[inline(always)]
    fn chunk_ref<'d>(&self, seq: SeqNum, off: u64, data: &'d [u8], in_order: bool) -> RxRef<'d> {
        RxRef {
            seq,
            offset: off - 1,
            data,
            in_order,
            in_order_point: self.nxt - 1,
        }
    }

    fn push_chunk(
        &mut self,
        off: u64,
        data: Vec<u8>,
        in_order: bool,
        seq_of: &impl Fn(u64) -> SeqNum,
    ) {
        self.chunk_bytes += data.len() as u64;
        self.chunks.push_back(RxChunk {
            seq: seq_of(off),
            offset: off - 1,
            data,
            in_order,
            in_order_point: self.nxt - 1,
        });
    }

    fn insert_range(&mut self, s: u64, e: u64) {
        let i = self.ranges.partition_point(|r| r.1 < s);
        let mut ns = s;
        let mut ne = e;
        let mut j = i;
        while j < self.ranges.len() && self.ranges[j].0 <= ne {
            ns = ns.min(self.ranges[j].0);
            ne = ne.max(self.ranges[j].1);
            j += 1;
        }
        self.ranges.splice(i..j, [(ns, ne)]);
        self.last_changed = Some(ns);
    }

    /// Moves committed ranges that now touch `nxt` into the in-order stream. True if any did.
    fn advance(&mut self) -> bool {
        let mut any = false;
        while let Some(&(rs, re)) = self.ranges.first() {
            if rs > self.nxt {
                break;
            }
            self.ranges.remove(0);
            any = true;
            let n = re - rs;
            self.ooo_bytes -= n;
            if let Some(b) = &self.budget {
                b.release(n as usize);
            }
            if !self.record_mode {
                // Move the pieces in order.
                while let Some((&po, _)) = self.pieces.first_key_value() {
                    if po >= re {
                        break;
                    }
                    if let Some((_, p)) = self.pieces.pop_first() {
                        self.inorder.extend(&p);
                    }
                }
            }
            self.nxt = re;
            if self.last_changed == Some(rs) {
                self.last_changed = None;
            }
        }
        // In record mode the data was handed up already: the new in-order point is reported on the
        // chunk that filled the gap, the chunks that follow and by `Connection::rcv_nxt`.
        any
    }

    /// Byte mode: reads in-order octets up to the first placed span left out (the caller puts
    /// those back first, [`Self::placed_spans`]).
    pub fn read(&mut self, buf: &mut [u8]) -> usize {
        let n = buf.len().min(self.placed.held_ahead(self.inorder.len()));
        self.placed.consume(n as u64);
        let (a, b) = self.inorder.as_slices();
        let k = n.min(a.len());
        buf[..k].copy_from_slice(&a[..k]);
        buf[k..n].copy_from_slice(&b[..n - k]);
        self.inorder.drain(..n);
        n
    }

    /// Byte mode: drops the next `n` in-order octets unread (the ULP has them already: the
    /// TCP RDMA option placed them).
    pub fn discard(&mut self, n: usize) {
        let n = n.min(self.readable());
        let held = self.placed.consume(n as u64) as usize;
        self.inorder.drain(..held);
    }

    /// Byte mode: the placed spans left out, each with its offset in the unread stream.
    pub fn placed_spans(&self) -> impl Iterator<Item = (u64, &PlacedSpan)> + '_ {
        self.placed.iter()
    }

    /// True when some unread octets were left out as placed.
    pub fn has_placed_spans(&self) -> bool {
        !self.placed.is_empty()
    }

    /// Puts the octets of placed span `i` back (`bytes`: what the transfer buffer holds
    /// for it, as long as the span).
    pub fn restore_placed(&mut self, i: usize, bytes: &[u8]) {
        if let Some((s, at)) = self.placed.remove(i) {
            debug_assert_eq!(bytes.len(), s.len as usize);
            let tail = self.inorder.split_off(at);
            self.inorder.extend(bytes);
            self.inorder.extend(tail);
        }
    }

    /// True when `[s, e)` is committed (in order or in one out-of-order range).
    pub fn holds(&self, s: u64, e: u64) -> bool {
        e <= self.nxt || self.ranges.iter().any(|&(rs, re)| rs <= s && e <= re)
    }

    /// Unread in-order octets (byte mode).
    pub fn readable(&self) -> usize {
        self.inorder.len() + self.placed.bytes() as usize
    }

    /// Whether [`RecvBuffer::pop_chunk`] has a chunk to give.
    pub fn has_chunk(&self) -> bool {
        !self.chunks.is_empty()
    }

    /// Record mode: the next committed chunk.
    pub fn pop_chunk(&mut self) -> Option<RxChunk> {
        let c = self.chunks.pop_front()?;
        self.chunk_bytes -= c.data.len() as u64;
        Some(c)
    }

    /// Switches to record mode: unread in-order bytes and held out-of-order pieces become chunks.
    pub fn enter_record_mode(&mut self, seq_of: impl Fn(u64) -> SeqNum) {
        if self.record_mode {
            return;
        }
        self.record_mode = true;
        debug_assert!(self.placed.is_empty(), "placed spans are put back first");
        if !self.inorder.is_empty() {
            let data: Vec<u8> = self.inorder.drain(..).collect();
            let off = self.nxt - data.len() as u64;
            self.push_chunk(off, data, true, &seq_of);
        }
        let pieces = std::mem::take(&mut self.pieces);
        for (off, p) in pieces {
            self.push_chunk(off, p, false, &seq_of);
        }
    }
}

impl Drop for RecvBuffer {
    fn drop(&mut self) {
        if let Some(b) = &self.budget {
            b.release(self.ooo_bytes as usize);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIM: OooLimits = OooLimits {
        max_ranges: 4,
        max_bytes: 1000,
    };
    fn seq(o: u64) -> SeqNum {
        SeqNum(o as u32)
    }

    #[test]
    fn byte_mode_reassembles_in_order() {
        let mut r = RecvBuffer::new(1);
        assert_eq!(r.accept(6, b"world", seq, LIM, None).ooo_ranges, 1);
        assert_eq!(r.readable(), 0);
        let a = r.accept(1, b"hello", seq, LIM, None);
        assert!(a.filled_gap && a.advanced);
        let mut b = [0u8; 16];
        let n = r.read(&mut b);
        assert_eq!(&b[..n], b"helloworld");
        assert_eq!(r.nxt, 11);
        assert_eq!(r.ooo_bytes, 0);
    }

    #[test]
    fn committed_ooo_data_never_changes_and_is_handed_up_once_mpa_13_14() {
        let mut r = RecvBuffer::new(1);
        r.record_mode = true;
        r.accept(11, b"KLMNO", seq, LIM, None);
        // A different overlapping copy: only the new octets are committed.
        let a = r.accept(9, b"xxyyyyyQ", seq, LIM, None);
        assert_eq!(a.dup_bytes, 5);
        let mut got = vec![];
        while let Some(c) = r.pop_chunk() {
            got.push((c.offset, c.data, c.in_order));
        }
        assert_eq!(
            got,
            vec![
                (10, b"KLMNO".to_vec(), false),
                (8, b"xx".to_vec(), false),
                (15, b"Q".to_vec(), false)
            ]
        );
        let a = r.accept(1, b"abcdefghij", seq, LIM, None);
        assert_eq!(a.new_bytes, 8);
        assert_eq!(a.dup_bytes, 2);
        let c = r.pop_chunk().unwrap();
        assert_eq!(
            (c.offset, c.data.as_slice(), c.in_order),
            (0, &b"abcdefgh"[..], true)
        );
        assert_eq!(r.nxt, 17);
        assert!(r.pop_chunk().is_none());
    }

    #[test]
    fn ooo_memory_is_bounded_per_connection_and_globally() {
        let budget = OooBudget::new(150);
        let mut r = RecvBuffer::new(1);
        r.set_budget(budget.clone());
        for k in 0..10u64 {
            r.accept(100 + k * 200, &[1u8; 100], seq, LIM, None);
        }
        assert_eq!(
            r.ranges().len(),
            1,
            "global budget admits one 100-octet range"
        );
        assert_eq!(budget.used(), 100);
        drop(r);
        assert_eq!(budget.used(), 0);
        let mut r = RecvBuffer::new(1);
        for k in 0..10u64 {
            r.accept(100 + k * 20, &[1u8; 10], seq, LIM, None);
        }
        assert_eq!(r.ranges().len(), LIM.max_ranges);
    }

    #[test]
    fn switch_to_record_mode_keeps_unread_bytes() {
        let mut r = RecvBuffer::new(1);
        r.accept(1, b"startupFPDU", seq, LIM, None);
        let mut b = [0u8; 7];
        r.read(&mut b);
        r.accept(20, b"ooo", seq, LIM, None);
        r.enter_record_mode(seq);
        let c = r.pop_chunk().unwrap();
        assert_eq!((c.offset, c.data.as_slice()), (7, &b"FPDU"[..]));
        let c = r.pop_chunk().unwrap();
        assert_eq!((c.offset, c.in_order), (19, false));
    }
}

#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn seq(o: u64) -> SeqNum {
        SeqNum(o as u32)
    }

    proptest! {
        /// `accept` against a model (a map of committed octets): every octet is committed once
        /// with its first copy (MPA-13/14), new + duplicate octets add up to the input, in record
        /// mode the chunks are exactly the newly committed octets and in byte mode `read` yields
        /// the in-order stream; the ranges and `nxt` match the model.
        #[test]
        fn accept_matches_model(
            record in any::<bool>(),
            ops in prop::collection::vec((1u64..400, 0usize..120, any::<u8>()), 1..40),
        ) {
            let lim = OooLimits { max_ranges: usize::MAX, max_bytes: u64::MAX };
            let mut r = RecvBuffer::new(1);
            r.record_mode = record;
            let mut model: BTreeMap<u64, u8> = BTreeMap::new();
            let mut stream = Vec::new();
            for (off, len, v) in ops {
                let data: Vec<u8> = (0..len as u64).map(|i| (off + i) as u8 ^ v).collect();
                let before = model.len();
                let mut fresh = BTreeMap::new();
                for (i, &b) in data.iter().enumerate() {
                    let o = off + i as u64;
                    if !model.contains_key(&o) && o >= r.nxt {
                        fresh.insert(o, b);
                    }
                }
                let a = r.accept(off, &data, seq, lim, None);
                prop_assert_eq!(a.new_bytes + a.dup_bytes, len as u64);
                prop_assert_eq!(a.new_bytes, fresh.len() as u64);
                prop_assert_eq!(a.ooo_dropped, 0);
                model.extend(fresh.iter());
                prop_assert_eq!(model.len(), before + fresh.len());
                let mut nxt = 1;
                while model.contains_key(&nxt) { nxt += 1; }
                prop_assert_eq!(r.nxt, nxt);
                if record {
                    let mut got = BTreeMap::new();
                    while let Some(c) = r.pop_chunk() {
                        prop_assert_eq!(c.seq, seq(c.offset + 1));
                        prop_assert!(c.in_order_point < r.nxt);
                        for (i, &b) in c.data.iter().enumerate() {
                            prop_assert!(got.insert(c.offset + 1 + i as u64, b).is_none());
                        }
                    }
                    prop_assert_eq!(got, fresh);
                } else {
                    let mut buf = [0u8; 512];
                    let n = r.read(&mut buf);
                    stream.extend_from_slice(&buf[..n]);
                }
                // Ranges: exactly the committed octets above nxt, maximal and sorted.
                let mut want: Vec<(u64, u64)> = Vec::new();
                for (&o, _) in model.range(nxt..) {
                    match want.last_mut() {
                        Some(l) if l.1 == o => l.1 = o + 1,
                        _ => want.push((o, o + 1)),
                    }
                }
                prop_assert_eq!(r.ranges(), &want[..]);
                prop_assert_eq!(r.ooo_bytes, want.iter().map(|w| w.1 - w.0).sum::<u64>());
            }
            if !record {
                let want: Vec<u8> = model.range(1..r.nxt).map(|(_, &b)| b).collect();
                prop_assert_eq!(stream, want);
            }
        }
    }
}
