//! The receiver's side: buffers the ULP registered per RID, the placement of annotated runs
//! into them as segments are accepted (in order or not), the placed ranges per RID and the
//! ULP's read of the stream that skips the copy for bytes already placed.
//!
//! Rules implemented (draft §3.1.5, §6.1):
//! * Only bytes TCP accepts as new are placed, so placed bytes are exactly the stream's bytes
//!   (the stream stays authoritative; a duplicate is never placed twice, overlap trimming moves
//!   the buffer offset in step). TCPRDMA-08.
//! * Placed ranges are kept per RID as (buffer range, stream offset) pieces: an interval set
//!   that merges neighbours and is bounded ([`MAX_PIECES`]). A piece that would map buffer
//!   octets already placed from other stream octets is a conflict: the transfer stops placing.
//! * TCPRDMA-31: `buffer_offset + data_len` within the buffer and within the total; TCPRDMA-07:
//!   the total may not change; either failure stops placing for the RID (the ULP copies).
//! * TCPRDMA-32: the table is per connection; unknown RIDs (solicited or not) are not placed.

use super::option::{RdmaAnnotation, RdmaOption};

/// Most RIDs a connection expects at once.
pub const MAX_EXPECTED: usize = 256;
/// Most disjoint placed pieces per RID (beyond: further pieces are copied, not placed).
pub const MAX_PIECES: usize = 256;

/// Why a registration or a read was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlacementError {
    /// The option was not negotiated on this connection.
    NotNegotiated,
    /// The RID does not fit 46 bits or is already expected.
    BadRid,
    /// [`MAX_EXPECTED`] RIDs are expected already.
    Full,
    /// No buffer is registered for the RID.
    Unknown,
    /// The range does not fit the registered buffer.
    OutOfBounds,
}

/// What happened to one piece offered for placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placed {
    /// Written into the RID's buffer.
    Yes,
    /// No buffer for the RID (not placed; copied by the ULP as usual).
    Unmatched,
    /// The transfer failed now (bounds, total, conflict): no more placement for it.
    Failed,
    /// Not placed (the transfer failed earlier, or its piece table is full).
    Skipped,
}

#[derive(Debug)]
struct Expected {
    rid: u64,
    buf: Vec<u8>,
    /// (buffer start, buffer end, stream offset of the buffer start), sorted, disjoint.
    pieces: Vec<(u32, u32, u64)>,
    total: Option<u32>,
    failed: bool,
}

/// A transfer buffer handed back to the ULP.
#[derive(Debug, PartialEq, Eq)]
pub struct PlacedTransfer {
    /// The RID.
    pub rid: u64,
    /// The buffer, with the placed (and `recv_transfer`-copied) octets in it.
    pub buf: Vec<u8>,
    /// Buffer ranges `[start, end)` filled, sorted, merged.
    pub filled: Vec<(u32, u32)>,
    /// The total the sender announced, if it did.
    pub total: Option<u32>,
    /// True when placement stopped (bounds, total change, conflicting annotations): the
    /// ranges in `filled` are still right, the rest must come from the stream.
    pub failed: bool,
}

impl PlacedTransfer {
    /// Octets filled.
    pub fn filled_len(&self) -> u64 {
        self.filled.iter().map(|&(s, e)| u64::from(e - s)).sum()
    }
}

/// The per-connection table of expected transfers.
#[derive(Debug, Default)]
pub struct Placements {
    expected: Vec<Expected>,
    /// The option of the segment expected next in order (header prediction for the option),
    /// while nothing else changes the table; [`NextRun::NONE`] when none is.
    next: NextRun,
    /// A piece table of a transfer taken, emptied, for the next one registered.
    spare: Vec<(u32, u32, u64)>,
}

/// What the next in-order segment of the transfer placed last carries when all of its payload
/// continues that transfer's last piece: the first 8 octets of its option (kind, length, A = 0,
/// U, RID), its buffer offset (data offset 0, data length its payload's) and the option's total
/// octets (20-octet form), with where that lands. [`Placements::place_predicted`] places such a
/// segment with the checks that [`Placements::place`] would make already made.
#[derive(Clone, Copy, Debug, Default)]
struct NextRun {
    /// Octets 0..8 of the option (kind, length, A = 0, U, RID) as a native-endian word of the
    /// octets as they lie; 0 (no option's: its kind is not 0) when no segment is expected.
    head: u64,
    /// The buffer offset (octets 8..12): where the transfer's last piece ends, which the
    /// piece itself records only when settled ([`Placements::settle`]).
    bo: u32,
    /// Octets 16..20 (the total, or NOPs), as a native-endian word of the octets as they lie.
    total: u32,
    /// The RID.
    rid: u64,
    /// Index of the transfer in `expected`.
    idx: usize,
    /// Stream offset of the run's next octet.
    at: u64,
    /// Where a placement must end by: the buffer's length, the total, 32-bit buffer offsets.
    limit: u64,
}

impl NextRun {
    /// No segment expected.
    const NONE: Self = NextRun {
        head: 0,
        bo: 0,
        total: 0,
        rid: 0,
        idx: 0,
        at: 0,
        limit: 0,
    };
}

impl Placements {
    /// Registers `buf` for `rid`.
    pub fn expect(&mut self, rid: u64, buf: Vec<u8>) -> Result<(), PlacementError> {
        if rid >= super::option::RID_LIMIT || self.find(rid).is_some() {
            return Err(PlacementError::BadRid);
        }
        if self.expected.len() >= MAX_EXPECTED {
            return Err(PlacementError::Full);
        }
        self.expected.push(Expected {
            rid,
            buf,
            pieces: std::mem::take(&mut self.spare),
            total: None,
            failed: false,
        });
        Ok(())
    }

    fn find(&self, rid: u64) -> Option<usize> {
        self.expected.iter().position(|e| e.rid == rid)
    }

    /// True when any RID is expected.
    pub fn is_empty(&self) -> bool {
        self.expected.is_empty()
    }

    /// Hands the buffer of `rid` back and forgets the RID.
    pub fn take(&mut self, rid: u64) -> Option<PlacedTransfer> {
        self.stop_predicting();
        let mut e = self.expected.swap_remove(self.find(rid)?);
        let mut filled: Vec<(u32, u32)> = Vec::with_capacity(e.pieces.len());
        for &(s, end, _) in &e.pieces {
            match filled.last_mut() {
                Some(last) if last.1 == s => last.1 = end,
                _ => filled.push((s, end)),
            }
        }
        e.pieces.clear();
        self.spare = e.pieces;
        Some(PlacedTransfer {
            rid,
            buf: e.buf,
            filled,
            total: e.total,
            failed: e.failed,
        })
    }

    /// Places `bytes`, which TCP has just accepted as new at stream offset `at`, for the run
    /// `t` that starts at stream offset `run_at`; `bytes` lies inside the run.
    pub(crate) fn place(
        &mut self,
        t: &RdmaAnnotation,
        run_at: u64,
        at: u64,
        bytes: &[u8],
    ) -> Placed {
        self.stop_predicting();
        if self.place_continuing(t, at - run_at, at, bytes) {
            return Placed::Yes;
        }
        self.place_general(t, run_at, at, bytes)
    }

    /// [`Self::place`]'s shortcut for `bytes` (`into_run` octets into the run) that continue
    /// the last piece of their transfer from the stream octets that follow it (in-order
    /// placement): true when placed so; false, nothing changed, when [`Self::place_general`]
    /// must judge them.
    #[inline]
    pub(crate) fn place_continuing(
        &mut self,
        t: &RdmaAnnotation,
        into_run: u64,
        at: u64,
        bytes: &[u8],
    ) -> bool {
        self.stop_predicting();
        let Some(i) = self.find(t.rid) else {
            return false;
        };
        let e = &mut self.expected[i];
        !e.failed && e.place_next(t, into_run, at, bytes)
    }

    /// [`Self::place`] for any piece.
    pub(crate) fn place_general(
        &mut self,
        t: &RdmaAnnotation,
        run_at: u64,
        at: u64,
        bytes: &[u8],
    ) -> Placed {
        self.stop_predicting();
        let Some(i) = self.find(t.rid) else {
            return Placed::Unmatched;
        };
        let e = &mut self.expected[i];
        if e.failed {
            return Placed::Skipped;
        }
        // TCPRDMA-07: the total is the same on every segment that carries it.
        match (e.total, t.total) {
            (Some(a), Some(b)) if a != b => {
                e.failed = true;
                return Placed::Failed;
            }
            (None, Some(b)) => e.total = Some(b),
            _ => {}
        }
        let start = u64::from(t.buffer_offset) + (at - run_at);
        let end = start + bytes.len() as u64;
        // TCPRDMA-31: never past the buffer or the announced total.
        if end > e.buf.len() as u64 || e.total.is_some_and(|n| end > u64::from(n)) {
            e.failed = true;
            return Placed::Failed;
        }
        let (start, end) = (start as u32, end as u32);
        // Octets already placed must have come from the same stream octets.
        let j = e.pieces.partition_point(|p| p.1 <= start);
        let delta = at.wrapping_sub(u64::from(start));
        let conflict = e.pieces[j..]
            .iter()
            .take_while(|p| p.0 < end)
            .any(|p| p.2.wrapping_sub(u64::from(p.0)) != delta);
        if conflict {
            e.failed = true;
            return Placed::Failed;
        }
        if !e.fill(start, end, at) {
            return Placed::Skipped;
        }
        e.buf[start as usize..end as usize].copy_from_slice(bytes);
        Placed::Yes
    }

    /// No segment is expected next ([`Self::place_predicted`] places none until the next
    /// [`Self::expect_next`]).
    pub(crate) fn stop_predicting(&mut self) {
        self.settle();
        self.next = NextRun::NONE;
    }

    /// Brings the last piece of the transfer being predicted up to date: predicted placements
    /// extend it in `next` alone (`next.bo` is where it ends). Every reader of the pieces
    /// settles first (`placed_run` and `next_placed`: their caller).
    #[inline]
    pub(crate) fn settle(&mut self) {
        let n = &self.next;
        if n.head == 0 {
            return;
        }
        if let Some(last) = self
            .expected
            .get_mut(n.idx)
            .and_then(|e| e.pieces.last_mut())
        {
            last.1 = n.bo;
        }
    }

    /// True when the pieces record every placement ([`Self::settle`] has nothing to do).
    fn is_settled(&self) -> bool {
        let n = &self.next;
        n.head == 0
            || self
                .expected
                .get(n.idx)
                .and_then(|e| e.pieces.last())
                .is_none_or(|p| p.1 == n.bo)
    }

    /// After the in-order placement of the run `t` that ended at stream offset `next_at`
    /// (the last piece of its transfer ends there): the segment expected next continues it.
    pub(crate) fn expect_next(&mut self, t: &RdmaAnnotation, next_at: u64) {
        self.stop_predicting();
        let Some(idx) = self.find(t.rid) else { return };
        let e = &self.expected[idx];
        let bo = u64::from(t.buffer_offset) + u64::from(t.data_len);
        let continues = e.pieces.last().is_some_and(|p| {
            u64::from(p.1) == bo && p.2.wrapping_sub(u64::from(p.0)) == next_at.wrapping_sub(bo)
        });
        // A 20-octet form places only with the total already known (TCPRDMA-07).
        if e.failed || !continues || (t.total.is_some() && t.total != e.total) {
            return;
        }
        let Ok(bo) = u32::try_from(bo) else { return };
        let next = RdmaOption::Transfer(RdmaAnnotation {
            aligned: false,
            buffer_offset: bo,
            data_offset: 0,
            data_len: 0,
            ..*t
        });
        let (octets, _) = next.encoded();
        let limit = e.total.map_or(u64::from(u32::MAX), u64::from);
        self.next = NextRun {
            head: u64::from_ne_bytes(crate::wire::octets(&octets, 0..8)),
            bo,
            total: u32::from_ne_bytes(crate::wire::octets(&octets, 16..20)),
            rid: t.rid,
            idx,
            at: next_at,
            limit: limit.min(e.buf.len() as u64),
        };
    }

    /// Places `data`, the in-order segment at stream offset `at` whose RDMA option is `raw`
    /// (as the lean parse reads it: 16 or 20 octets, kind and length checked; empty when there
    /// is none), when it is the segment expected next
    /// ([`Self::expect_next`]) with all its payload in the run: [`Self::place`]'s result for
    /// it. Returns the RID and buffer offset written, or `None` (nothing changed) when the
    /// segment is another, for the general path.
    #[inline]
    pub(crate) fn place_predicted(
        &mut self,
        raw: &[u8],
        at: u64,
        data: &[u8],
    ) -> Option<(u64, u32)> {
        let n = &mut self.next;
        let (option, total) = raw.split_first_chunk::<16>()?;
        let (head, fields) = option.split_at(8);
        let len = u16::try_from(data.len()).ok()?;
        // Octets 8..16 as this segment must carry them (buffer offset, data offset 0, data
        // length), compared as one big-endian word; the length octet (in `head`) fixes the
        // form, so a total is there exactly when one is expected.
        let want = u64::from(n.bo) << 32 | u64::from(len);
        let total_ok = match *total {
            [] => true,
            [a, b, c, d] => u32::from_ne_bytes([a, b, c, d]) == n.total,
            _ => false,
        };
        let head_word = u64::from_ne_bytes(crate::wire::octets(head, 0..8));
        let fields_word = u64::from_be_bytes(crate::wire::octets(fields, 0..8));
        if head_word != n.head || fields_word != want || at != n.at || !total_ok {
            return None;
        }
        let bo = n.bo;
        let end = u64::from(bo) + u64::from(len);
        if end > n.limit {
            return None;
        }
        let e = self.expected.get_mut(n.idx)?;
        let target = e.buf.get_mut(bo as usize..end as usize)?;
        // Within `limit`, so within 32 bits. The transfer's last piece now ends there too
        // (written when the pieces are next read: `settle`).
        debug_assert!(e.pieces.last().is_some_and(|p| p.0 <= bo && p.1 <= bo));
        n.bo = end as u32;
        n.at += u64::from(len);
        target.copy_from_slice(data);
        debug_assert_eq!(e.rid, n.rid);
        Some((n.rid, bo))
    }

    /// How many octets from buffer offset `bo` of `rid` were placed from the stream octets
    /// starting at `at` (0 when the next octet was not, or from elsewhere).
    /// The pieces must be settled ([`Self::settle`]).
    pub(crate) fn placed_run(&self, rid: u64, bo: u32, at: u64) -> u32 {
        debug_assert!(self.is_settled());
        let Some(i) = self.find(rid) else { return 0 };
        let e = &self.expected[i];
        let j = e.pieces.partition_point(|p| p.1 <= bo);
        match e.pieces.get(j) {
            Some(&(s, end, ss)) if s <= bo && ss + u64::from(bo - s) == at => end - bo,
            _ => 0,
        }
    }

    /// The first buffer offset at or after `bo` where a placed piece starts (bounded by `limit`).
    /// The pieces must be settled ([`Self::settle`]).
    pub(crate) fn next_placed(&self, rid: u64, bo: u32, limit: u32) -> u32 {
        debug_assert!(self.is_settled());
        let Some(i) = self.find(rid) else {
            return limit;
        };
        let e = &self.expected[i];
        let j = e.pieces.partition_point(|p| p.1 <= bo);
        e.pieces.get(j).map_or(limit, |p| p.0.max(bo).min(limit))
    }

    /// The buffer of `rid` for the ULP's copy path; records `[bo, bo + len)` as filled from
    /// stream offset `at` (the stream wins over any piece placed there from elsewhere, which
    /// also marks the transfer failed). Bounds are the caller's ([`Self::check_range`]).
    pub(crate) fn copy_target(
        &mut self,
        rid: u64,
        bo: u32,
        len: u32,
        at: u64,
    ) -> Option<&mut [u8]> {
        self.stop_predicting();
        let i = self.find(rid)?;
        let e = &mut self.expected[i];
        let delta = at.wrapping_sub(u64::from(bo));
        let j = e.pieces.partition_point(|p| p.1 <= bo);
        if e.pieces[j..]
            .iter()
            .take_while(|p| p.0 < bo + len)
            .any(|p| p.2.wrapping_sub(u64::from(p.0)) != delta)
        {
            e.failed = true;
        }
        // When the table is full the range is copied but not recorded.
        let _ = e.fill(bo, bo + len, at);
        Some(&mut e.buf[bo as usize..(bo + len) as usize])
    }

    /// The octets `[bo, bo + len)` of the buffer of `rid`, when it is registered and holds them.
    pub(crate) fn bytes(&self, rid: u64, bo: u32, len: u32) -> Option<&[u8]> {
        let e = &self.expected[self.find(rid)?];
        e.buf.get(bo as usize..bo as usize + len as usize)
    }

    /// Checks that `[bo, bo + len)` fits the buffer of `rid`.
    pub(crate) fn check_range(&self, rid: u64, bo: u32, len: u32) -> Result<(), PlacementError> {
        let i = self.find(rid).ok_or(PlacementError::Unknown)?;
        if u64::from(bo) + u64::from(len) > self.expected[i].buf.len() as u64 {
            return Err(PlacementError::OutOfBounds);
        }
        Ok(())
    }
}

impl Expected {
    /// [`Placements::place`] when `bytes` continue the last piece placed, from the stream
    /// octets that follow it (in-order placement; `into_run` octets into the run): nothing lies
    /// past that piece, so there is nothing to conflict with. Extends the piece and copies,
    /// with one bounds check; false (nothing changed) in any other case.
    #[inline]
    fn place_next(&mut self, t: &RdmaAnnotation, into_run: u64, at: u64, bytes: &[u8]) -> bool {
        let Some(last) = self.pieces.last_mut() else {
            return false;
        };
        let start = u64::from(t.buffer_offset) + into_run;
        let end = start + bytes.len() as u64;
        // Within the buffer and the total, and buffer offsets that fit 32 bits (the general
        // path judges the rest).
        let limit = self
            .total
            .map_or(u64::from(u32::MAX), u64::from)
            .min(self.buf.len() as u64);
        let continues = u64::from(last.1) == start
            && last.2.wrapping_sub(u64::from(last.0)) == at.wrapping_sub(start);
        // TCPRDMA-07: a total, when the segment carries one, is the one already known.
        if !continues || end > limit || (t.total.is_some() && t.total != self.total) {
            return false;
        }
        last.1 = end as u32;
        self.buf[start as usize..end as usize].copy_from_slice(bytes);
        true
    }

    /// Records `[s, end)` as filled from stream offset `at`: pieces under it are cut away, then
    /// it merges with neighbours that continue it (same stream-to-buffer offset). False (and
    /// nothing changed) when that would exceed [`MAX_PIECES`].
    fn fill(&mut self, s: u32, end: u32, at: u64) -> bool {
        // In-order placement continues the last piece (nothing lies past it, so nothing
        // overlaps): extend it in place, the general path's result without its allocations.
        match self.pieces.last_mut() {
            Some(last)
                if last.1 == s
                    && last.2.wrapping_sub(u64::from(last.0)) == at.wrapping_sub(u64::from(s)) =>
            {
                last.1 = last.1.max(end);
                true
            }
            Some(_) => self.fill_general(s, end, at),
            // The first piece of a transfer: nothing to cut or merge.
            None => {
                self.pieces.push((s, end, at));
                true
            }
        }
    }

    /// [`Expected::fill`] for any piece: cut what it covers, merge, splice.
    fn fill_general(&mut self, s: u32, end: u32, at: u64) -> bool {
        let lo = self.pieces.partition_point(|p| p.1 < s);
        let hi = lo + self.pieces[lo..].iter().take_while(|p| p.0 <= end).count();
        let mut new: Vec<(u32, u32, u64)> = Vec::with_capacity(hi - lo + 2);
        for &(ps, pe, pat) in &self.pieces[lo..hi] {
            if ps < s {
                new.push((ps, pe.min(s), pat));
            }
            if pe > end {
                new.push((end.max(ps), pe, pat + u64::from(end.max(ps) - ps)));
            }
        }
        new.push((s, end, at));
        new.sort_unstable();
        let mut merged: Vec<(u32, u32, u64)> = Vec::with_capacity(new.len());
        for p in new {
            match merged.last_mut() {
                Some(m)
                    if m.1 == p.0
                        && m.2.wrapping_sub(u64::from(m.0)) == p.2.wrapping_sub(u64::from(p.0)) =>
                {
                    m.1 = p.1
                }
                _ => merged.push(p),
            }
        }
        if self.pieces.len() - (hi - lo) + merged.len() > MAX_PIECES {
            return false;
        }
        self.pieces.splice(lo..hi, merged);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The fast paths of `fill` (the first piece, in-order continuation) leave exactly the
        /// pieces the general path does, for any sequence of fills (in order, overlapping, out
        /// of order, remapped).
        #[test]
        fn fill_fast_path_matches_the_general_path(
            fills in prop::collection::vec((0u32..4000, 1u32..600, 0u64..3, any::<bool>()), 1..60)
        ) {
            let new = || Expected { rid: 1, buf: Vec::new(), pieces: Vec::new(), total: None, failed: false };
            let (mut fast, mut general) = (new(), new());
            let mut next = 0u32;
            for (s, len, shift, in_order) in fills {
                // Half of the fills continue the last one, as in-order placement does.
                let s = if in_order { next } else { s };
                let at = u64::from(s) + 1000 * shift;
                prop_assert_eq!(fast.fill(s, s + len, at), general.fill_general(s, s + len, at));
                prop_assert_eq!(&fast.pieces, &general.pieces);
                next = s + len;
            }
        }
    }

    proptest! {
        /// The in-order shortcut of `place` leaves the buffers, pieces, totals and verdicts the
        /// general path does, for any sequence of pieces (most continuing the last one, some
        /// anywhere, with totals that agree, change or are absent).
        #[test]
        fn place_shortcut_matches_the_general_path(
            pieces in prop::collection::vec(
                (0u32..3000, 1usize..500, 0u64..2, any::<bool>(), 0u32..3, any::<u8>()),
                1..40,
            )
        ) {
            let (mut fast, mut general) = (Placements::default(), Placements::default());
            for p in [&mut fast, &mut general] {
                p.expect(1, vec![0; 2048]).unwrap();
            }
            let mut next = 0u32;
            for (bo, len, shift, in_order, total, fill) in pieces {
                let bo = if in_order { next } else { bo };
                let t = RdmaAnnotation {
                    total: [None, Some(2048), Some(2000)][total as usize],
                    ..ann(1, bo, None)
                };
                let run_at = 5000 * shift;
                let bytes = vec![fill; len];
                prop_assert_eq!(
                    fast.place(&t, run_at, run_at, &bytes),
                    general.place_general(&t, run_at, run_at, &bytes)
                );
                next = bo + len as u32;
            }
            prop_assert_eq!(&fast.expected[0].pieces, &general.expected[0].pieces);
            prop_assert_eq!(fast.take(1), general.take(1));
        }
    }

    proptest! {
        /// Placement of the segment the last one predicts (`place_predicted`, tried first as
        /// the connection's fast path does, `expect_next` after each in-order placement) leaves
        /// the buffers, pieces, totals and verdicts that the general path leaves, for any
        /// sequence of segments (most continuing the last one, some anywhere, of an unknown
        /// RID, with A set, from other stream octets, without the option's octets, in either
        /// form, with totals that agree, change or are absent).
        #[test]
        fn predicted_placement_matches_the_general_path(
            segs in prop::collection::vec(
                (0u32..3000, 1usize..500, any::<bool>(), 0u8..5, 0u32..3, any::<u8>()),
                1..40,
            )
        ) {
            let (mut fast, mut general) = (Placements::default(), Placements::default());
            for p in [&mut fast, &mut general] {
                p.expect(1, vec![0; 2048]).unwrap();
            }
            let (mut next_bo, mut next_at) = (0u32, 100u64);
            for (bo, len, in_order, odd, total, fill) in segs {
                let (bo, at) = if in_order { (next_bo, next_at) } else { (bo, u64::from(bo) * 3) };
                // The buffer octets that follow, from stream octets that do not.
                let at = if odd == 3 { at + 7 } else { at };
                let t = RdmaAnnotation {
                    aligned: odd == 1,
                    rid: if odd == 2 { 2 } else { 1 },
                    data_len: len as u16,
                    total: [None, Some(2048), Some(2000)][total as usize],
                    ..ann(1, bo, None)
                };
                let o = RdmaOption::Transfer(t);
                let (octets, _) = o.encoded();
                let bytes = vec![fill; len];
                // Offered without its octets too (a segment the lean parse read none of).
                let raw = if odd == 4 { &[][..] } else { &octets[..o.len()] };
                let verdict = match fast.place_predicted(raw, at, &bytes) {
                    Some(placed) => {
                        prop_assert_eq!(placed, (t.rid, t.buffer_offset));
                        Placed::Yes
                    }
                    None => {
                        let v = fast.place(&t, at, at, &bytes);
                        if v == Placed::Yes {
                            fast.expect_next(&t, at + len as u64);
                        }
                        v
                    }
                };
                prop_assert_eq!(verdict, general.place_general(&t, at, at, &bytes));
                (next_bo, next_at) = (bo + len as u32, at + len as u64);
            }
            fast.stop_predicting();
            prop_assert_eq!(&fast.expected[0].pieces, &general.expected[0].pieces);
            prop_assert_eq!(fast.take(1), general.take(1));
        }
    }

    fn ann(rid: u64, bo: u32, total: Option<u32>) -> RdmaAnnotation {
        RdmaAnnotation {
            aligned: false,
            unsolicited: false,
            rid,
            buffer_offset: bo,
            data_offset: 0,
            data_len: 0,
            total,
        }
    }

    /// TCPRDMA-08: pieces out of order land at their offsets; duplicates are harmless; the
    /// interval set merges into one range.
    #[test]
    fn tcprdma_08_out_of_order_pieces_merge_into_one_range() {
        let mut p = Placements::default();
        p.expect(5, vec![0; 30]).unwrap();
        let t = ann(5, 0, Some(30));
        assert_eq!(p.place(&t, 100, 120, &[3; 10]), Placed::Yes);
        assert_eq!(p.place(&t, 100, 100, &[1; 10]), Placed::Yes);
        assert_eq!(p.place(&t, 100, 100, &[1; 10]), Placed::Yes);
        assert_eq!(p.place(&t, 100, 110, &[2; 10]), Placed::Yes);
        assert_eq!(p.placed_run(5, 0, 100), 30);
        assert_eq!(p.placed_run(5, 0, 101), 0, "from other stream octets");
        let done = p.take(5).unwrap();
        assert_eq!(done.filled, vec![(0, 30)]);
        assert_eq!(&done.buf[..], &[[1u8; 10], [2; 10], [3; 10]].concat()[..]);
        assert!(!done.failed);
    }

    /// TCPRDMA-31: out of the buffer or past the total fails the transfer, writes nothing;
    /// TCPRDMA-07: a changed total fails it; a conflicting re-annotation fails it.
    #[test]
    fn tcprdma_31_07_bounds_total_and_conflicts_fail_the_transfer() {
        let mut p = Placements::default();
        p.expect(1, vec![0; 4096]).unwrap();
        assert_eq!(
            p.place(&ann(1, 0xFFFF_FF00, None), 0, 0, &[9; 1000]),
            Placed::Failed
        );
        assert_eq!(p.place(&ann(1, 0, None), 0, 0, &[9; 10]), Placed::Skipped);
        assert!(p.take(1).unwrap().buf.iter().all(|&b| b == 0));

        p.expect(2, vec![0; 100]).unwrap();
        assert_eq!(p.place(&ann(2, 0, Some(50)), 0, 0, &[1; 10]), Placed::Yes);
        assert_eq!(
            p.place(&ann(2, 45, Some(50)), 0, 0, &[1; 10]),
            Placed::Failed
        );
        p.expect(3, vec![0; 100]).unwrap();
        assert_eq!(p.place(&ann(3, 0, Some(50)), 0, 0, &[1; 10]), Placed::Yes);
        assert_eq!(
            p.place(&ann(3, 10, Some(60)), 0, 0, &[1; 10]),
            Placed::Failed
        );
        p.expect(4, vec![0; 100]).unwrap();
        assert_eq!(p.place(&ann(4, 0, None), 0, 0, &[1; 10]), Placed::Yes);
        // Same buffer octets from other stream octets.
        assert_eq!(
            p.place(&ann(4, 5, None), 500, 500, &[2; 10]),
            Placed::Failed
        );
        let t = p.take(4).unwrap();
        assert!(t.failed);
        assert_eq!(t.filled, vec![(0, 10)]);
        assert_eq!(p.place(&ann(77, 0, None), 0, 0, &[1]), Placed::Unmatched);
    }

    /// A transfer registered after one was taken starts with nothing placed (the piece table
    /// it gets is the taken one's, emptied).
    #[test]
    fn a_transfer_taken_leaves_no_pieces_to_the_next() {
        let mut p = Placements::default();
        p.expect(1, vec![0; 100]).unwrap();
        assert_eq!(p.place(&ann(1, 0, None), 0, 0, &[1; 10]), Placed::Yes);
        assert_eq!(p.take(1).unwrap().filled, vec![(0, 10)]);
        p.expect(2, vec![0; 100]).unwrap();
        assert_eq!(p.placed_run(2, 0, 0), 0);
        assert_eq!(p.place(&ann(2, 50, None), 500, 500, &[2; 10]), Placed::Yes);
        assert_eq!(p.take(2).unwrap().filled, vec![(50, 60)]);
    }

    /// The piece table is bounded: beyond it pieces are skipped, not placed.
    #[test]
    fn piece_table_is_bounded() {
        let mut p = Placements::default();
        p.expect(1, vec![0; 2 * MAX_PIECES + 10]).unwrap();
        let t = ann(1, 0, None);
        for k in 0..MAX_PIECES as u64 {
            assert_eq!(p.place(&t, 0, 2 * k, &[1]), Placed::Yes);
        }
        assert_eq!(p.place(&t, 0, 2 * MAX_PIECES as u64, &[1]), Placed::Skipped);
        // Filling a hole merges two pieces: allowed even when full.
        assert_eq!(p.place(&t, 0, 1, &[1]), Placed::Yes);
        for k in 0..MAX_EXPECTED as u64 - 1 {
            p.expect(100 + k, Vec::new()).unwrap();
        }
        assert_eq!(p.expect(5000, Vec::new()), Err(PlacementError::Full));
        assert_eq!(p.expect(1, Vec::new()), Err(PlacementError::BadRid));
    }
}
