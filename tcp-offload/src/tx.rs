//! The send side's data: queued records (or byte-stream data), where their bytes come from, and how
//! new segments are cut so that each begins with a record and holds only whole records (MPA §5.3,
//! "header alignment").
//!
//! Record bytes are not necessarily kept here: a record handed in with [`crate::Connection::send_record`]
//! is tracked as `(offset, len, id)` and its bytes are (re)written into the outgoing frame by the
//! caller's [`RecordSource`] at every (re)transmission. Records handed in with bytes
//! (`send_record_bytes`) and byte-stream data are kept in an owned buffer.

use fifo::Ring;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};

/// An opaque record identifier chosen by the caller (e.g. an index into its own FPDU table).
pub type RecordId = u64;

/// Produces record bytes on demand: at first transmission and again at every retransmission.
pub trait RecordSource {
    /// Writes octets `[offset, offset + dst.len())` of record `id` into `dst`.
    fn write_record(&mut self, id: RecordId, offset: u32, dst: &mut [u8]);
}

/// A [`RecordSource`] for connections that only use owned data; writes zeros if asked.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoRecordSource;

impl RecordSource for NoRecordSource {
    fn write_record(&mut self, _id: RecordId, _offset: u32, dst: &mut [u8]) {
        dst.fill(0);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChunkKind {
    /// Byte-stream data (may be cut anywhere), bytes in the owned buffer at `owned`.
    Bytes { owned: u64 },
    /// A record with its bytes in the owned buffer at `owned`.
    OwnedRecord { owned: u64 },
    /// A record whose bytes the caller's [`RecordSource`] writes.
    External { id: RecordId },
}

/// Largest byte-stream chunk (the unit in which acknowledged memory is released).
pub const BYTE_CHUNK: u32 = 16 * 1024;

#[derive(Clone, Copy, Debug)]
struct Chunk {
    off: u64,
    len: u32,
    kind: ChunkKind,
}

impl Chunk {
    fn end(&self) -> u64 {
        self.off + u64::from(self.len)
    }
    fn is_record(&self) -> bool {
        !matches!(self.kind, ChunkKind::Bytes { .. })
    }
}

/// Why a new segment does not end on a record boundary (MPA §5.3 exceptions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Split {
    /// The record is larger than the EMSS.
    Emss,
    /// The peer's window is smaller than the record.
    Window,
}

/// The plan for the next new-data segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Nothing queued.
    Empty,
    /// Send `len` octets; `split` says when this breaks header alignment, `boundary` whether
    /// the segment starts on a boundary ([`SendBuffer::is_boundary`] of its first octet).
    Send {
        len: u32,
        split: Option<Split>,
        boundary: bool,
    },
    /// The next record does not fit the window / cwnd yet; wait (or take the window exception).
    Blocked { need: u32 },
}

/// Queued, not yet acknowledged send data in stream offsets (offset 1 = first data octet).
#[derive(Debug)]
pub(crate) struct SendBuffer {
    chunks: Ring<Chunk>,
    owned: VecDeque<u8>,
    owned_base: u64,
    owned_end: u64,
    /// Offset after the last queued octet.
    pub end: u64,
    /// Octets queued and not yet acknowledged.
    pub queued: u64,
    /// Index of the chunk the last lookup found: consecutive lookups (plan, boundary checks, fill
    /// of the next segment) land on it or the next one, so most need no binary search. Only a
    /// hint (an atomic so that lookups keep taking `&self` and the buffer stays `Sync`).
    hint: AtomicUsize,
}

impl SendBuffer {
    pub fn new(start: u64) -> Self {
        SendBuffer {
            chunks: Ring::new(),
            owned: VecDeque::new(),
            owned_base: 0,
            owned_end: 0,
            end: start,
            queued: 0,
            hint: AtomicUsize::new(0),
        }
    }

    fn push(&mut self, len: u32, kind: ChunkKind) {
        self.chunks.push_back(Chunk {
            off: self.end,
            len,
            kind,
        });
        self.end += u64::from(len);
        self.queued += u64::from(len);
    }

    /// Appends byte-stream data, in chunks of at most [`BYTE_CHUNK`] octets so that memory is
    /// released as acknowledgments arrive.
    pub fn push_bytes(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let owned = self.owned_end;
            let room = match self.chunks.back() {
                Some(c) if matches!(c.kind, ChunkKind::Bytes { .. }) => {
                    BYTE_CHUNK.saturating_sub(c.len)
                }
                _ => 0,
            };
            let (now, rest) = data.split_at(
                data.len()
                    .min(if room > 0 { room } else { BYTE_CHUNK } as usize),
            );
            self.owned.extend(now);
            self.owned_end += now.len() as u64;
            if room > 0 {
                if let Some(last) = self.chunks.back_mut() {
                    last.len += now.len() as u32;
                }
                self.end += now.len() as u64;
                self.queued += now.len() as u64;
            } else {
                self.push(now.len() as u32, ChunkKind::Bytes { owned });
            }
            data = rest;
        }
    }

    /// Appends a record whose bytes we keep.
    pub fn push_owned_record(&mut self, data: &[u8]) {
        let owned = self.owned_end;
        self.owned.extend(data);
        self.owned_end += data.len() as u64;
        self.push(data.len() as u32, ChunkKind::OwnedRecord { owned });
    }

    /// Appends a record whose bytes the caller rebuilds.
    pub fn push_external_record(&mut self, len: u32, id: RecordId) {
        self.push(len, ChunkKind::External { id });
    }

    /// Drops chunks wholly below `una`; calls `acked` for each external record released.
    pub fn release(&mut self, una: u64, mut acked: impl FnMut(RecordId)) {
        while let Some(c) = self.chunks.front() {
            if c.end() > una {
                break;
            }
            let c = *c;
            self.chunks.pop_front();
            let h = self.hint.get_mut();
            *h = h.saturating_sub(1);
            self.queued -= u64::from(c.len);
            match c.kind {
                ChunkKind::Bytes { owned } | ChunkKind::OwnedRecord { owned } => {
                    let to = owned + u64::from(c.len);
                    let n = (to - self.owned_base) as usize;
                    self.owned.drain(..n.min(self.owned.len()));
                    self.owned_base = to;
                }
                ChunkKind::External { id } => acked(id),
            }
        }
    }

    /// The index of the chunk holding `off`: most lookups find it at the hint, inline.
    #[inline]
    fn index_of(&self, off: u64) -> Option<usize> {
        let h = self.hint.load(Ordering::Relaxed);
        match self.chunks.get(h) {
            Some(c) if c.off <= off && off < c.end() => Some(h),
            _ => self.index_near(off, h),
        }
    }

    /// [`Self::index_of`] with the chunk found (one lookup in the ring, not two).
    #[inline]
    fn chunk_of(&self, off: u64) -> Option<(usize, Chunk)> {
        let h = self.hint.load(Ordering::Relaxed);
        match self.chunks.get(h) {
            Some(c) if c.off <= off && off < c.end() => Some((h, *c)),
            _ => {
                let i = self.index_near(off, h)?;
                Some((i, self.chunks[i]))
            }
        }
    }

    /// [`Self::index_of`] past the hint `h`: the next chunk, the previous or a search.
    fn index_near(&self, off: u64, h: usize) -> Option<usize> {
        let holds = |i: usize| {
            self.chunks
                .get(i)
                .is_some_and(|c| c.off <= off && off < c.end())
        };
        // The next chunk (the next segment) or the previous (a boundary check looked one ahead),
        // else a binary search.
        let i = if holds(h + 1) {
            h + 1
        } else if h > 0 && holds(h - 1) {
            h - 1
        } else {
            let i = self.chunks.partition_point(|c| c.end() <= off);
            if !holds(i) {
                return None;
            }
            i
        };
        self.hint.store(i, Ordering::Relaxed);
        Some(i)
    }

    /// True when `off` is the first octet of a record (or inside byte-stream data, where any cut is fine).
    pub fn is_boundary(&self, off: u64) -> bool {
        match self.chunk_of(off) {
            Some((_, c)) => !c.is_record() || c.off == off,
            None => true,
        }
    }

    /// Plans the next new segment starting at `nxt`: at most `emss` octets and `room` octets
    /// (window and cwnd). Whole records only; after the first, further whole records are
    /// packed while the segment stays within `pack_up_to` octets (0: one record per segment).
    /// Inlined into its one caller: it runs once per segment sent.
    #[inline(always)]
    pub fn plan(&self, nxt: u64, emss: u32, room: u32, pack_up_to: u32) -> Plan {
        let Some((i, c)) = self.chunk_of(nxt) else {
            return Plan::Empty;
        };
        let rem = (c.end() - nxt) as u32;
        let limit = emss.min(room);
        if !c.is_record() {
            // Byte stream: ordinary TCP segmentation (MPA-08) across consecutive byte chunks,
            // stopping before a record.
            if limit == 0 {
                return Plan::Blocked { need: 1 };
            }
            let mut len = rem;
            for n in self.chunks.iter().skip(i + 1) {
                if n.is_record() || len >= limit {
                    break;
                }
                len = len.saturating_add(n.len);
            }
            return Plan::Send {
                len: len.min(limit),
                split: None,
                boundary: true,
            };
        }
        if rem > emss {
            // MPA §5.3 exception: the record cannot fit one segment at all.
            return if room >= emss {
                Plan::Send {
                    len: emss,
                    split: Some(Split::Emss),
                    boundary: nxt == c.off,
                }
            } else {
                Plan::Blocked { need: emss }
            };
        }
        if rem > room {
            return Plan::Blocked { need: rem };
        }
        let mut len = rem;
        let limit = limit.min(pack_up_to);
        let boundary = nxt == c.off;
        // Records never are empty: none can join one that fills the limit (then no walk).
        if boundary && len < limit {
            len = self.pack_records(i + 1, len, limit);
        }
        Plan::Send {
            len,
            split: None,
            boundary,
        }
    }

    /// `len` plus the lengths of the consecutive records from chunk `from` on that fit in
    /// `limit` octets with it (the whole records [`Self::plan`] packs after the first).
    /// By index, not a chained iterator: the walk mostly stops at the first record (an FPDU
    /// a few octets short of the limit, with markers), where setting one up costs more than
    /// the look. Out of line: most segments do not walk.
    #[inline(never)]
    fn pack_records(&self, from: usize, mut len: u32, limit: u32) -> u32 {
        let mut j = from;
        while let Some(n) = self.chunks.get(j) {
            if !n.is_record() || len + n.len > limit {
                break;
            }
            len += n.len;
            j += 1;
        }
        len
    }

    /// Writes octets `[off, off + dst.len())` into `dst`, from the owned buffer or the source.
    /// After an external record the lookup hint is left at the chunk behind it. Inlined: it
    /// runs once per segment sent.
    #[inline(always)]
    pub fn fill<S: RecordSource + ?Sized>(&self, off: u64, dst: &mut [u8], src: &mut S) {
        if dst.is_empty() {
            // A segment without payload (a pure ACK): nothing to look up.
            return;
        }
        let h = self.hint.load(Ordering::Relaxed);
        if let Some(&Chunk {
            off: o,
            len,
            kind: ChunkKind::External { id },
        }) = self.chunks.get(h)
        {
            if o == off && len as usize == dst.len() {
                // One whole external record at the hint (a first transmission): no walk.
                src.write_record(id, 0, dst);
                self.hint.store(h + 1, Ordering::Relaxed);
                return;
            }
        }
        let mut pos = off;
        let mut at = 0usize;
        let Some(mut i) = self.index_of(off) else {
            dst.fill(0);
            return;
        };
        while at < dst.len() {
            let Some(c) = self.chunks.get(i) else {
                dst[at..].fill(0);
                return;
            };
            let within = (pos - c.off) as u32;
            let n = ((c.len - within) as usize).min(dst.len() - at);
            let out = &mut dst[at..at + n];
            match c.kind {
                ChunkKind::Bytes { owned } | ChunkKind::OwnedRecord { owned } => {
                    let start = (owned + u64::from(within) - self.owned_base) as usize;
                    let (a, b) = self.owned.as_slices();
                    copy_from_split(a, b, start, out);
                }
                ChunkKind::External { id } => {
                    src.write_record(id, within, out);
                    // The next new segment most often starts with the next record.
                    self.hint.store(i + 1, Ordering::Relaxed);
                }
            }
            at += n;
            pos += n as u64;
            i += 1;
        }
    }
}

/// Copies `out.len()` octets starting at `start` from the two halves of a ring buffer.
fn copy_from_split(a: &[u8], b: &[u8], start: usize, out: &mut [u8]) {
    let n = out.len();
    if start >= a.len() {
        let s = start - a.len();
        out.copy_from_slice(&b[s..s + n]);
    } else if start + n <= a.len() {
        out.copy_from_slice(&a[start..start + n]);
    } else {
        let k = a.len() - start;
        out[..k].copy_from_slice(&a[start..]);
        out[k..].copy_from_slice(&b[..n - k]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Pattern;
    impl RecordSource for Pattern {
        fn write_record(&mut self, id: RecordId, offset: u32, dst: &mut [u8]) {
            for (k, b) in dst.iter_mut().enumerate() {
                *b = (id as u8)
                    .wrapping_mul(31)
                    .wrapping_add((offset as usize + k) as u8);
            }
        }
    }

    #[test]
    fn packs_whole_records_up_to_emss() {
        let mut s = SendBuffer::new(1);
        for id in 0..5 {
            s.push_external_record(400, id);
        }
        assert_eq!(
            s.plan(1, 1000, 100_000, u32::MAX),
            Plan::Send {
                len: 800,
                split: None,
                boundary: true
            }
        );
        assert_eq!(
            s.plan(1, 1000, 100_000, 0),
            Plan::Send {
                len: 400,
                split: None,
                boundary: true
            }
        );
        // Packing stops at `pack_up_to`; the first record goes whatever it says.
        assert_eq!(
            s.plan(1, 1000, 100_000, 799),
            Plan::Send {
                len: 400,
                split: None,
                boundary: true
            }
        );
        assert_eq!(
            s.plan(1, 1000, 100_000, 800),
            Plan::Send {
                len: 800,
                split: None,
                boundary: true
            }
        );
        assert_eq!(s.plan(1, 1000, 300, u32::MAX), Plan::Blocked { need: 400 });
        assert_eq!(s.plan(2001, 1000, 1000, u32::MAX), Plan::Empty);
        assert!(s.is_boundary(401) && !s.is_boundary(402));
    }

    #[test]
    fn record_larger_than_emss_is_an_exception_mpa_s5_3() {
        let mut s = SendBuffer::new(1);
        s.push_external_record(3000, 9);
        assert_eq!(
            s.plan(1, 1000, 10_000, u32::MAX),
            Plan::Send {
                len: 1000,
                split: Some(Split::Emss),
                boundary: true
            }
        );
        // The tail (1000 octets) fits: no exception for it.
        assert_eq!(
            s.plan(2001, 1000, 10_000, u32::MAX),
            Plan::Send {
                len: 1000,
                split: None,
                boundary: false
            }
        );
    }

    #[test]
    fn fill_rebuilds_bytes_from_owned_and_external() {
        let mut s = SendBuffer::new(1);
        s.push_bytes(b"hello ");
        s.push_bytes(b"world");
        s.push_external_record(8, 3);
        s.push_owned_record(b"OWN!");
        let mut out = [0u8; 23];
        s.fill(1, &mut out, &mut Pattern);
        assert_eq!(&out[..11], b"hello world");
        let mut exp = [0u8; 8];
        Pattern.write_record(3, 0, &mut exp);
        assert_eq!(&out[11..19], &exp);
        assert_eq!(&out[19..], b"OWN!");
        // Release the byte chunk: later fills still find the right bytes.
        let mut acked = vec![];
        s.release(12, |id| acked.push(id));
        s.release(20, |id| acked.push(id));
        assert_eq!(acked, vec![3]);
        let mut out = [0u8; 2];
        s.fill(21, &mut out, &mut Pattern);
        assert_eq!(&out, b"WN");
        assert_eq!(s.queued, 4);
    }

    /// Plans and fills segment after segment, as the sender does, on `s` (its hint left where
    /// the previous fill put it) and on `r` (the same chunks, hint reset before every call);
    /// returns the plans and bytes of both.
    fn walk_both(s: &SendBuffer, r: &SendBuffer, emss: u32) -> [(Vec<Plan>, Vec<u8>); 2] {
        let mut out: [(Vec<Plan>, Vec<u8>); 2] = Default::default();
        for (b, (plans, bytes)) in [s, r].into_iter().zip(out.iter_mut()) {
            let mut nxt = 1;
            loop {
                if std::ptr::eq(b, r) {
                    b.hint.store(0, Ordering::Relaxed);
                }
                let plan = b.plan(nxt, emss, 100_000, emss);
                plans.push(plan);
                let Plan::Send { len, .. } = plan else { break };
                let mut seg = vec![0u8; len as usize];
                if std::ptr::eq(b, r) {
                    b.hint.store(0, Ordering::Relaxed);
                }
                b.fill(nxt, &mut seg, &mut Pattern);
                bytes.extend(seg);
                nxt += u64::from(len);
            }
        }
        out
    }

    #[test]
    fn fill_leaves_the_hint_at_the_next_record() {
        let mut s = SendBuffer::new(1);
        s.push_external_record(100, 0);
        s.push_external_record(100, 1);
        let mut seg = [0u8; 100];
        s.fill(1, &mut seg, &mut Pattern);
        assert_eq!(s.hint.load(Ordering::Relaxed), 1);
        // A split record: the hint moves on and the record's rest is still found.
        s.fill(101, &mut seg[..40], &mut Pattern);
        assert_eq!(s.index_of(141), Some(1));
    }

    /// A record segment's plan as the send buffer's chunks say it by a plain walk: the record
    /// at `nxt` (whole, or cut at the EMSS), then the whole records after it while they fit
    /// `min(emss, room, pack_up_to)`.
    fn plan_by_walk(b: &SendBuffer, nxt: u64, emss: u32, room: u32, pack_up_to: u32) -> Plan {
        let Some(i) = b.chunks.iter().position(|c| c.off <= nxt && nxt < c.end()) else {
            return Plan::Empty;
        };
        let c = b.chunks[i];
        let rem = (c.end() - nxt) as u32;
        if rem > emss {
            return match room >= emss {
                true => Plan::Send {
                    len: emss,
                    split: Some(Split::Emss),
                    boundary: nxt == c.off,
                },
                false => Plan::Blocked { need: emss },
            };
        }
        if rem > room {
            return Plan::Blocked { need: rem };
        }
        let mut len = rem;
        if nxt == c.off {
            let limit = emss.min(room).min(pack_up_to);
            for n in b.chunks.iter().skip(i + 1) {
                if !n.is_record() || len + n.len > limit {
                    break;
                }
                len += n.len;
            }
        }
        Plan::Send {
            len,
            split: None,
            boundary: nxt == c.off,
        }
    }

    proptest::proptest! {
        /// Planning records (the packing of whole records skipped when the first one fills
        /// the limit) gives the plain walk's plan at every record boundary and inside
        /// records, for any room and packing bound.
        #[test]
        fn record_plans_equal_the_plain_walk(
            lens in proptest::collection::vec(1u32..3000, 1..30),
            emss in 100u32..4000,
            room in 0u32..10_000,
            pack_up_to in proptest::prop_oneof![proptest::strategy::Just(0u32), 0u32..10_000, proptest::strategy::Just(u32::MAX)],
            inside in 0u32..3000,
        ) {
            let mut b = SendBuffer::new(1);
            for (id, &l) in lens.iter().enumerate() {
                b.push_external_record(l, id as u64);
            }
            let starts: Vec<u64> = b.chunks.iter().map(|c| c.off).collect();
            for off in starts {
                for nxt in [off, off + u64::from(inside % 3000)] {
                    proptest::prop_assert_eq!(
                        b.plan(nxt, emss, room, pack_up_to),
                        plan_by_walk(&b, nxt, emss, room, pack_up_to),
                        "at {}", nxt
                    );
                }
            }
        }

        /// The hint a fill leaves changes no segment: the plans and octets of a send buffer's
        /// walk (records whole, packed and split, byte-stream data) equal those found by search.
        #[test]
        fn hint_after_fill_changes_no_segment(
            chunks in proptest::collection::vec((0u8..3, 1u32..3000), 1..40),
            emss in 200u32..4000,
        ) {
            let mut bufs = [SendBuffer::new(1), SendBuffer::new(1)];
            for b in &mut bufs {
                for (id, &(kind, len)) in chunks.iter().enumerate() {
                    match kind {
                        0 => b.push_external_record(len, id as u64),
                        1 => b.push_owned_record(&vec![id as u8; len as usize]),
                        _ => b.push_bytes(&vec![!(id as u8); len as usize]),
                    }
                }
            }
            let [a, b] = walk_both(&bufs[0], &bufs[1], emss);
            proptest::prop_assert_eq!(a, b);
        }

        /// The hinted chunk lookup (the index, and the chunk with it) finds what a plain
        /// binary search finds, for any order of lookups interleaved with releases of
        /// acknowledged chunks.
        #[test]
        fn hinted_lookup_equals_binary_search(
            lens in proptest::collection::vec(1u32..3000, 1..60),
            steps in proptest::collection::vec((proptest::bool::weighted(0.1), 0u64..200_000), 1..200),
        ) {
            let mut s = SendBuffer::new(1);
            for (id, &l) in lens.iter().enumerate() {
                s.push_external_record(l, id as u64);
            }
            for (release, at) in steps {
                let off = at % (s.end + 10);
                if release {
                    s.release(off, |_| {});
                }
                // The offset, then the next chunk's start and back (the hint's neighbours).
                let next = s.chunks.iter().find(|c| c.off > off).map_or(off + 1, |c| c.off);
                for o in [off, next, off, off + 1] {
                    let i = s.chunks.partition_point(|c| c.end() <= o);
                    let want = (i < s.chunks.len() && s.chunks[i].off <= o).then_some(i);
                    proptest::prop_assert_eq!(s.index_of(o), want);
                    let found = s.chunk_of(o).map(|(i, c)| (i, c.off, c.len));
                    let chunk = want.map(|i| (i, s.chunks[i].off, s.chunks[i].len));
                    proptest::prop_assert_eq!(found, chunk);
                }
            }
        }
    }
}
