//! The retransmission queue and the SACK scoreboard over it (RFC 6675 §2, §4): every segment sent
//! and not yet cumulatively acknowledged, with its original boundaries (retransmissions resend
//! whole original segments, MPA-61), whether the peer SACKed it, whether it is deemed lost and
//! whether it was resent; and the sums that make RFC 6675's "pipe".
//!
//! Offsets are the connection's send-side stream offsets (SYN at 0, data from 1). The flags of a
//! segment change only through the methods here, and every change updates the sums at once
//! (O(1) per segment changed): no figure is recomputed over the queue per ACK. Loss marking
//! (IsLost) keeps a frontier that only moves up the queue, so each segment is visited a bounded
//! number of times over its life, however many ACKs arrive.

use fifo::Ring;

/// One segment sent and not yet cumulatively acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct SentSeg {
    pub(super) off: u64,
    pub(super) len: u32,
    pub(super) fin: bool,
    pub(super) sacked: bool,
    pub(super) lost: bool,
    /// Retransmitted since it was last marked lost.
    pub(super) rexmit: bool,
    /// Ever retransmitted (Karn).
    pub(super) ever_rexmit: bool,
    /// TSval of the latest retransmission (spurious detection).
    pub(super) rexmit_ts: u32,
}

impl SentSeg {
    /// A segment just sent: no marks.
    fn new(off: u64, len: u32, fin: bool) -> Self {
        SentSeg {
            off,
            len,
            fin,
            sacked: false,
            lost: false,
            rexmit: false,
            ever_rexmit: false,
            rexmit_ts: 0,
        }
    }

    /// The offset after the segment (its FIN included).
    pub(super) fn end(&self) -> u64 {
        self.off + u64::from(self.len) + u64::from(self.fin)
    }

    /// Sequence space the segment occupies (data and FIN).
    fn octets(&self) -> u64 {
        u64::from(self.len) + u64::from(self.fin)
    }

    /// Deemed lost and not yet resent: NextSeg rule (1)'s to send.
    fn is_lost_pending(&self) -> bool {
        !self.sacked && self.lost && !self.rexmit
    }

    /// Resent by NextSeg rule (3) while not deemed lost: in the network twice.
    fn is_resent_unlost(&self) -> bool {
        !self.sacked && !self.lost && self.rexmit
    }
}

/// The retransmission queue with its SACK marks and sums.
#[derive(Debug, Default)]
pub(super) struct Scoreboard {
    segs: Ring<SentSeg>,
    /// Sum of the sequence lengths of all segments.
    sent_octets: u64,
    /// Sum over SACKed segments.
    sacked_octets: u64,
    /// Segments marked lost and not yet retransmitted (and their octets).
    lost_pending: u32,
    lost_pending_octets: u64,
    /// Octets of segments retransmitted while not deemed lost (NextSeg rule 3): in the network
    /// twice (RFC 6675 §4 pipe: not lost, and at or below HighRxt).
    rexmit_unlost_octets: u64,
    /// Segments with `rexmit` set.
    resent: u32,
    /// Segments with `ever_rexmit` set (Karn: the ones an ACK's caller looks at).
    ever_resent: u32,
    /// No lost-pending segment starts below this offset (where NextSeg rule (1) starts looking).
    lost_pending_from: u64,
    /// IsLost's frontier, see [`LossFrontier`].
    frontier: LossFrontier,
    /// SACK blocks applied lately (the peer repeats its blocks, the newest one grown, in every
    /// ACK): every segment lying whole inside one of them is SACKed, so only the rest of a block
    /// that contains one is walked.
    applied: [Option<(u64, u64)>; 4],
    /// The slot of `applied` the next new block takes.
    applied_next: usize,
}

/// Where IsLost (RFC 6675 §4) stands. IsLost is monotone here: SACK marks are only added, a
/// segment stops being deemed lost only by being SACKed, segments leave only from the bottom and
/// new ones join at the top. So the unSACKed segments that are IsLost are those below one point
/// of the queue that only moves up, and only the SACKed segments above it must be counted. (A
/// segment once marked stays marked, so the point is valid whatever thresholds come next.)
#[derive(Clone, Copy, Debug, Default)]
struct LossFrontier {
    /// SACKed segments starting at or above `edge`, and the sum of their `len`.
    edge: u64,
    sacked_above: u32,
    sacked_len_above: u64,
    /// Every unSACKed segment starting below `marked` is marked lost.
    marked: u64,
}

impl Scoreboard {
    // ----- queries ------------------------------------------------------------------------------

    /// True when nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }

    /// The oldest segment (the one holding SND.UNA).
    pub fn front(&self) -> Option<&SentSeg> {
        self.segs.front()
    }

    /// Segment `i` (0: the oldest).
    pub fn get(&self, i: usize) -> SentSeg {
        self.segs[i]
    }

    /// True if a segment in flight carries our FIN.
    pub fn has_fin(&self) -> bool {
        self.segs.iter().any(|s| s.fin)
    }

    /// Octets SACKed (whole segments).
    pub fn sacked_octets(&self) -> u64 {
        self.sacked_octets
    }

    /// Segments deemed lost and not yet retransmitted.
    pub fn lost_pending(&self) -> u32 {
        self.lost_pending
    }

    /// RFC 6675 §4 "pipe" in octets: every segment not SACKed and not deemed lost, plus every
    /// retransmitted segment (a segment resent while not deemed lost counts twice).
    pub fn pipe(&self) -> u64 {
        self.sent_octets - self.sacked_octets - self.lost_pending_octets + self.rexmit_unlost_octets
    }

    /// True if no segment in flight has been retransmitted since it was last marked lost.
    pub fn none_resent(&self) -> bool {
        self.resent == 0
    }

    /// NextSeg rule (1) (RFC 6675 §4): the oldest segment deemed lost and not yet resent.
    #[inline]
    pub fn next_lost(&mut self) -> Option<usize> {
        if self.lost_pending == 0 {
            return None;
        }
        self.next_lost_pending()
    }

    /// [`Self::next_lost`] when some segment is lost and not yet resent: out of line, so the
    /// usual answer (none) costs the caller one test.
    #[inline(never)]
    fn next_lost_pending(&mut self) -> Option<usize> {
        let from = self.index_of(self.lost_pending_from);
        let k = self
            .segs
            .iter()
            .skip(from)
            .position(SentSeg::is_lost_pending)?;
        self.lost_pending_from = self.segs[from + k].off;
        Some(from + k)
    }

    /// NextSeg rule (3) (RFC 6675 §4): the oldest segment above HighRxt (the highest segment
    /// resent by rules 1 and 3) and below the highest SACKed octet that is neither SACKed nor
    /// deemed lost. `None` also when nothing is SACKed.
    pub fn next_unlost_below_sack(&self) -> Option<usize> {
        // Highest octet covered by a SACK (rule 1.b) and HighRxt (rule 1.a).
        let high_sacked = self.segs.iter().rev().find(|s| s.sacked)?.end();
        let above_rxt = self.segs.rposition(|s| s.rexmit).map_or(0, |k| k + 1);
        let k = self
            .segs
            .iter()
            .skip(above_rxt)
            .take_while(|s| s.off < high_sacked)
            .position(|s| !s.sacked && !s.lost && !s.rexmit)?;
        Some(above_rxt + k)
    }

    /// NextSeg rule (4) (RFC 6675 §4): the segment holding the highest outstanding unSACKed
    /// octet, unless it was already resent or is rule (1)'s to resend.
    pub fn rescue_candidate(&self) -> Option<usize> {
        let i = self.segs.rposition(|s| !s.sacked)?;
        let s = &self.segs[i];
        (!s.rexmit && !s.lost).then_some(i)
    }

    // ----- the queue ----------------------------------------------------------------------------

    /// A new segment `[off, off + len)` (+ FIN) was sent. (Inlined: once per segment sent.)
    #[inline(always)]
    pub fn push(&mut self, off: u64, len: u32, fin: bool) {
        let s = SentSeg::new(off, len, fin);
        // A new segment carries no mark: of the sums, only the sent octets count it.
        debug_assert!(!s.sacked && !s.lost && !s.rexmit && !s.ever_rexmit);
        self.sent_octets += s.octets();
        self.segs.push_back(s);
    }

    /// Removes every segment `ack` covers whole, handing those ever retransmitted to `each`,
    /// oldest first, before. While no segment carries a mark (none SACKed, lost-pending,
    /// resent), only the sent octets change: one subtraction for the whole run, not a recount
    /// per segment; and an ACK of everything with none ever resent empties the queue at once.
    pub fn pop_acked(&mut self, ack: u64, mut each: impl FnMut(&SentSeg)) {
        // Every segment occupies sequence space (data or FIN), so no SACKed octets means no
        // SACKed segment.
        let unmarked = self.sacked_octets == 0
            && self.lost_pending == 0
            && self.rexmit_unlost_octets == 0
            && self.resent == 0;
        if unmarked && self.ever_resent == 0 && self.segs.back().is_some_and(|s| s.end() <= ack) {
            // Every sum is zero but the sent octets, which go with the segments.
            self.sent_octets = 0;
            self.segs.clear();
            return;
        }
        let (mut n, mut octets, mut resent) = (0, 0, 0);
        for s in self.segs.iter() {
            if s.end() > ack {
                break;
            }
            if s.ever_rexmit {
                each(s);
                resent += 1;
            }
            octets += s.octets();
            n += 1;
        }
        self.ever_resent -= resent;
        if unmarked {
            self.sent_octets -= octets;
            self.segs.drop_front(n);
        } else {
            for _ in 0..n {
                if let Some(s) = self.segs.pop_front() {
                    self.uncount_marks(&s);
                }
            }
            self.sent_octets -= octets;
        }
    }

    /// Forgets every segment that starts below `off`.
    pub fn drop_below(&mut self, off: u64) {
        while self.segs.front().is_some_and(|s| s.off < off) {
            if let Some(s) = self.segs.pop_front() {
                self.uncount(&s);
            }
        }
    }

    /// Forgets every segment.
    pub fn clear(&mut self) {
        *self = Scoreboard::default();
    }

    // ----- marks --------------------------------------------------------------------------------

    /// A valid SACK block `[lo, ro)` (RFC 2018 §3): marks every segment it covers whole (original
    /// boundaries are kept for retransmission). True if a segment became SACKed.
    pub fn sack(&mut self, lo: u64, ro: u64) -> bool {
        // The largest block applied before that this one contains: only the segments reaching
        // out of it can be new.
        let known = (0..self.applied.len())
            .filter_map(|k| Some((k, self.applied[k]?)))
            .filter(|&(_, (l, r))| lo <= l && r <= ro)
            .max_by_key(|&(_, (l, r))| r - l);
        let (any, slot) = match known {
            Some((k, (l, r))) => (self.sack_in(lo, ro, lo, l) | self.sack_in(lo, ro, r, ro), k),
            None => {
                let k = self.applied_next;
                self.applied_next = (k + 1) % self.applied.len();
                (self.sack_in(lo, ro, lo, ro), k)
            }
        };
        self.applied[slot] = Some((lo, ro));
        any
    }

    /// RFC 6675 §4 IsLost for every segment: `dupthresh` SACKed segments, or more than
    /// (`dupthresh` - 1) * `smss` SACKed octets, above it. Moves the frontier up past every SACKed
    /// segment that has enough SACKed above it, then marks the unSACKed segments below it.
    /// (Nothing SACKed, as on most ACKs, marks nothing: that check is inlined.)
    #[inline]
    pub fn mark_lost(&mut self, dupthresh: u32, smss: u32) {
        if self.sacked_octets != 0 {
            self.mark_lost_sacked(dupthresh, smss);
        }
    }

    /// [`Scoreboard::mark_lost`] with something SACKed.
    #[inline(never)]
    fn mark_lost_sacked(&mut self, dupthresh: u32, smss: u32) {
        let bytes_thresh = u64::from(dupthresh.saturating_sub(1)) * u64::from(smss);
        if dupthresh == 0 {
            // Everything unSACKed is lost (a configuration `Config::validate` refuses).
            for i in 0..self.segs.len() {
                if !self.segs[i].sacked && !self.segs[i].lost {
                    self.update(i, |s| s.lost = true);
                }
            }
            return;
        }
        let is_lost_below =
            |f: &LossFrontier| f.sacked_above >= dupthresh || f.sacked_len_above > bytes_thresh;
        let mut upto = None;
        let mut i = self.index_of(self.frontier.edge);
        while is_lost_below(&self.frontier) {
            // The lowest SACKed segment at or above the edge: every unSACKed one below it is
            // IsLost. Try the next one with this one no longer counted above.
            let Some(k) = self.segs.iter().skip(i).position(|s| s.sacked) else {
                break;
            };
            let s = self.segs[i + k];
            upto = Some(s.off);
            self.frontier.edge = s.off + 1;
            self.frontier.sacked_above -= 1;
            self.frontier.sacked_len_above -= u64::from(s.len);
            i += k + 1;
        }
        if let Some(upto) = upto {
            self.mark_lost_below(upto);
        }
    }

    /// A partial ACK (RFC 6582 §3.2 step 3): the oldest segment is deemed lost unless SACKed or
    /// already resent.
    pub fn on_partial_ack(&mut self) {
        if self.segs.front().is_some_and(|f| !f.sacked && !f.rexmit) {
            self.update(0, |f| f.lost = true);
        }
    }

    /// Entering fast recovery (RFC 5681 §3.2, RFC 6675 §5): the oldest segment is deemed lost and
    /// due for retransmission.
    pub fn on_recovery_start(&mut self) {
        if !self.segs.is_empty() {
            self.update(0, |f| {
                f.lost = true;
                f.rexmit = false;
            });
        }
    }

    /// A retransmission timeout (RFC 6675 §5.1): every segment not SACKed is deemed lost and due
    /// for retransmission.
    pub fn on_rto(&mut self) {
        for i in 0..self.segs.len() {
            if !self.segs[i].sacked {
                self.update(i, |s| {
                    s.lost = true;
                    s.rexmit = false;
                });
            }
        }
    }

    /// Segment `i` was retransmitted at TSval `ts`.
    pub fn on_resend(&mut self, i: usize, ts: u32) {
        let s = &mut self.segs[i];
        let first = !s.ever_rexmit;
        s.ever_rexmit = true;
        s.rexmit_ts = ts;
        self.ever_resent += u32::from(first);
    }

    /// Segment `i`, deemed lost, was resent by NextSeg rule (1): back in the network once.
    pub fn resent_lost(&mut self, i: usize) {
        self.update(i, |s| s.rexmit = true);
    }

    /// Segment `i`, not deemed lost, was resent by NextSeg rule (3): HighRxt moves past it
    /// (RFC 6675 §5 C.3) and it is in the network twice.
    pub fn resent_unlost(&mut self, i: usize) {
        self.update(i, |s| s.rexmit = true);
    }

    // ----- sums ---------------------------------------------------------------------------------

    /// The index of the first segment starting at or above `off`.
    fn index_of(&self, off: u64) -> usize {
        if self.segs.front().is_none_or(|s| s.off >= off) {
            return 0;
        }
        self.segs.partition_point(|s| s.off < off)
    }

    /// Changes the flags of segment `i` with `f`, keeping the sums.
    fn update(&mut self, i: usize, f: impl FnOnce(&mut SentSeg)) {
        let old = self.segs[i];
        self.uncount(&old);
        f(&mut self.segs[i]);
        let new = self.segs[i];
        self.count(&new);
    }

    /// Adds a segment's share to the sums.
    fn count(&mut self, s: &SentSeg) {
        let b = s.octets();
        self.sent_octets += b;
        if s.sacked {
            self.sacked_octets += b;
            if s.off >= self.frontier.edge {
                self.frontier.sacked_above += 1;
                self.frontier.sacked_len_above += u64::from(s.len);
            }
        }
        if s.is_lost_pending() {
            self.lost_pending += 1;
            self.lost_pending_octets += b;
            self.lost_pending_from = self.lost_pending_from.min(s.off);
        }
        if s.is_resent_unlost() {
            self.rexmit_unlost_octets += b;
        }
        self.resent += u32::from(s.rexmit);
        self.ever_resent += u32::from(s.ever_rexmit);
    }

    /// Removes a segment's share of the sums.
    fn uncount(&mut self, s: &SentSeg) {
        self.sent_octets -= s.octets();
        self.ever_resent -= u32::from(s.ever_rexmit);
        self.uncount_marks(s);
    }

    /// Removes a segment's share of the sums its marks make (all but the sent octets and the
    /// ever-resent count).
    fn uncount_marks(&mut self, s: &SentSeg) {
        let b = s.octets();
        if s.sacked {
            self.sacked_octets -= b;
            if s.off >= self.frontier.edge {
                self.frontier.sacked_above -= 1;
                self.frontier.sacked_len_above -= u64::from(s.len);
            }
        }
        if s.is_lost_pending() {
            self.lost_pending -= 1;
            self.lost_pending_octets -= b;
        }
        if s.is_resent_unlost() {
            self.rexmit_unlost_octets -= b;
        }
        self.resent -= u32::from(s.rexmit);
    }

    /// Marks SACKed the segments lying whole inside `[lo, ro)` among those that reach into
    /// `[from, to)`; true if one was not SACKed before.
    fn sack_in(&mut self, lo: u64, ro: u64, from: u64, to: u64) -> bool {
        let mut any = false;
        let mut i = self.segs.partition_point(|s| s.end() <= from);
        while let Some(&s) = self.segs.get(i) {
            if s.off >= to {
                break;
            }
            if s.off >= lo && s.end() <= ro && !s.sacked {
                self.update(i, |s| {
                    s.sacked = true;
                    s.lost = false;
                });
                any = true;
            }
            i += 1;
        }
        any
    }

    /// Marks lost every unSACKed segment starting below `upto` and not yet marked.
    fn mark_lost_below(&mut self, upto: u64) {
        let from = self.index_of(self.frontier.marked);
        for i in from..self.segs.len() {
            let s = self.segs[i];
            if s.off >= upto {
                break;
            }
            if !s.sacked && !s.lost {
                // A segment already resent by NextSeg rule (3) stays resent (it is at or below
                // HighRxt, RFC 6675 §4 rule (1.a)).
                self.update(i, |s| s.lost = true);
            }
        }
        self.frontier.marked = self.frontier.marked.max(upto);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use std::collections::VecDeque;

    /// The scoreboard as it was before incremental accounting: flags changed in place, every
    /// figure recounted over the whole queue, IsLost found by a scan from the top.
    #[derive(Default)]
    struct Recount {
        segs: VecDeque<SentSeg>,
    }

    /// (sent, SACKed, lost-pending count, lost-pending octets, resent-unlost octets).
    type Sums = (u64, u64, u32, u64, u64);

    impl Recount {
        fn sums(&self) -> Sums {
            let (mut all, mut sacked, mut n, mut lost, mut twice) = (0, 0, 0, 0, 0);
            for s in self.segs.iter() {
                let b = s.octets();
                all += b;
                if s.sacked {
                    sacked += b;
                } else if s.lost && !s.rexmit {
                    n += 1;
                    lost += b;
                } else if !s.lost && s.rexmit {
                    twice += b;
                }
            }
            (all, sacked, n, lost, twice)
        }

        fn pipe(&self) -> u64 {
            let (all, sacked, _, lost, twice) = self.sums();
            all - sacked - lost + twice
        }

        fn sack(&mut self, lo: u64, ro: u64) -> bool {
            let mut any = false;
            for s in self.segs.iter_mut() {
                if s.off >= lo && s.end() <= ro && !s.sacked {
                    s.sacked = true;
                    s.lost = false;
                    any = true;
                }
            }
            any
        }

        fn mark_lost(&mut self, dupthresh: u32, smss: u32) {
            if self.sums().1 == 0 {
                return;
            }
            let bytes_thresh = u64::from(dupthresh.saturating_sub(1)) * u64::from(smss);
            let (mut segs_above, mut bytes_above) = (0u32, 0u64);
            for s in self.segs.iter_mut().rev() {
                if s.sacked {
                    segs_above += 1;
                    bytes_above += u64::from(s.len);
                } else if !s.lost && (segs_above >= dupthresh || bytes_above > bytes_thresh) {
                    s.lost = true;
                }
            }
        }

        /// Segment `i` resent at `ts`; `rexmit` set too unless a rescue (NextSeg rule 4).
        fn resend(&mut self, i: usize, ts: u32, rexmit: bool) {
            let s = &mut self.segs[i];
            s.rexmit |= rexmit;
            s.ever_rexmit = true;
            s.rexmit_ts = ts;
        }

        fn next_lost(&self) -> Option<usize> {
            self.segs
                .iter()
                .position(|s| s.lost && !s.rexmit && !s.sacked)
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// A new segment of `len` octets (a FIN-only one when 0), the FIN on it when `fin`.
        Send {
            len: u32,
            fin: bool,
        },
        /// A cumulative ACK at `at` of the outstanding range (0..=1000 per mille).
        Ack {
            at: u32,
        },
        /// A SACK block between two points of the outstanding range (per mille), on segment
        /// boundaries when `aligned`.
        Sack {
            a: u32,
            b: u32,
            aligned: bool,
        },
        /// The last SACK block again, grown to the left and right by these shares (per mille)
        /// of the room there, on segment boundaries when `aligned` (a peer's next ACK).
        SackAgain {
            left: u32,
            right: u32,
            aligned: bool,
        },
        /// IsLost with the thresholds numbered `which` (mostly the connection's usual ones).
        MarkLost {
            which: usize,
        },
        PartialAck,
        RecoveryStart,
        Rto,
        /// NextSeg rules (1), (3), (4) (the caller's guards aside).
        ResendLost,
        ResendUnlost,
        Rescue,
    }

    /// An ACK over many segments removes them in one run, with the sums and the segments
    /// handed out (those ever resent) equal to a full recount's: with no marks anywhere (a run,
    /// and everything at once), with a SACKed segment, and with a segment resent (Karn) while
    /// nothing else is marked, acknowledged in part and as a whole.
    #[test]
    fn ack_of_a_run_equals_recount_with_and_without_marks() {
        let all = 1 + 1460 * 3 + 700 + 1;
        for (sacked, resent, ack) in [
            (false, false, 1 + 1460 * 2 + 700),
            (false, false, all),
            (true, true, 1 + 1460 * 2 + 700),
            (false, true, 1 + 1460 * 2 + 700),
            (false, true, all),
        ] {
            let mut sb = Scoreboard::default();
            let mut r = Recount::default();
            let mut off = 1;
            for len in [1460, 1460, 700, 1460, 0] {
                sb.push(off, len, len == 0);
                let s = SentSeg::new(off, len, len == 0);
                r.segs.push_back(s);
                off = s.end();
            }
            assert_eq!(off, all);
            if sacked {
                assert!(sb.sack(1461, 2921));
                assert!(r.sack(1461, 2921));
            }
            if resent {
                sb.on_resend(0, 7);
                r.resend(0, 7, false);
            }
            let mut popped = Vec::new();
            sb.pop_acked(ack, |s| popped.push(*s));
            let n = r.segs.iter().take_while(|s| s.end() <= ack).count();
            let gone: Vec<SentSeg> = r.segs.drain(..n).filter(|s| s.ever_rexmit).collect();
            assert_eq!(popped, gone);
            assert_eq!(popped.len(), usize::from(resent));
            check(&sb, &r).unwrap();
            assert_eq!(sb.pipe(), r.pipe());
        }
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (prop_oneof![1 => 0u32..3, 4 => 0u32..3000], prop::bool::weighted(0.02))
                .prop_map(|(len, fin)| Op::Send { len, fin }),
            2 => (0u32..=1000).prop_map(|at| Op::Ack { at }),
            6 => (0u32..=1000, 0u32..=1000, any::<bool>())
                .prop_map(|(a, b, aligned)| Op::Sack { a, b, aligned }),
            6 => (prop_oneof![0u32..1, 0u32..=1000], prop_oneof![0u32..1, 0u32..=1000], any::<bool>())
                .prop_map(|(left, right, aligned)| Op::SackAgain { left, right, aligned }),
            4 => (0usize..8).prop_map(|which| Op::MarkLost { which }),
            1 => Just(Op::PartialAck),
            1 => Just(Op::RecoveryStart),
            1 => Just(Op::Rto),
            3 => Just(Op::ResendLost),
            2 => Just(Op::ResendUnlost),
            1 => Just(Op::Rescue),
        ]
    }

    /// (DupThresh, SMSS): the usual pair most of the time, others (0 included, which
    /// `Config::validate` refuses) now and then: the frontier must hold whatever comes next.
    const THRESHOLDS: [(u32, u32); 8] = [
        (3, 1448),
        (3, 1448),
        (3, 1448),
        (3, 1448),
        (3, 1448),
        (1, 536),
        (2, 1000),
        (0, 1448),
    ];

    /// The point `per_mille` of the way from `una` to `nxt`, moved to a segment boundary when
    /// `aligned`.
    fn point(r: &Recount, una: u64, nxt: u64, per_mille: u32, aligned: bool) -> u64 {
        let p = una + (nxt - una) * u64::from(per_mille) / 1000;
        if !aligned {
            return p;
        }
        r.segs
            .iter()
            .map(|s| s.off.max(una))
            .chain([nxt])
            .find(|&b| b >= p)
            .unwrap_or(nxt)
    }

    fn check(sb: &Scoreboard, r: &Recount) -> Result<(), TestCaseError> {
        prop_assert!(sb.segs.iter().eq(r.segs.iter()), "flags differ");
        let own = Recount {
            segs: sb.segs.iter().copied().collect(),
        };
        let sums = (
            sb.sent_octets,
            sb.sacked_octets,
            sb.lost_pending,
            sb.lost_pending_octets,
            sb.rexmit_unlost_octets,
        );
        prop_assert_eq!(sums, own.sums());
        prop_assert_eq!(sb.pipe(), r.pipe());
        prop_assert_eq!(sb.sacked_octets(), r.sums().1);
        prop_assert_eq!(sb.lost_pending(), r.sums().2);
        prop_assert_eq!(sb.none_resent(), r.segs.iter().all(|s| !s.rexmit));
        prop_assert_eq!(
            sb.ever_resent as usize,
            r.segs.iter().filter(|s| s.ever_rexmit).count()
        );
        let f = sb.frontier;
        let above = sb.segs.iter().filter(|s| s.sacked && s.off >= f.edge);
        prop_assert_eq!(f.sacked_above as usize, above.clone().count());
        prop_assert_eq!(
            f.sacked_len_above,
            above.map(|s| u64::from(s.len)).sum::<u64>()
        );
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

        /// The incremental figures (pipe, SACKed octets, lost-pending segments and octets,
        /// resent-unlost octets, the loss frontier's counts) and every segment's flags equal
        /// those of a full recount after any sequence of sends, ACKs, SACK blocks, loss marking,
        /// recovery starts, partial ACKs, retransmissions and RTOs; NextSeg rule (1) picks the
        /// same segment.
        #[test]
        fn incremental_equals_recount(ops in prop::collection::vec(op(), 1..300)) {
            let mut sb = Scoreboard::default();
            let mut r = Recount::default();
            let (mut una, mut nxt, mut fin_sent) = (1u64, 1u64, false);
            let mut last_block = None;
            for (ts, op) in ops.into_iter().enumerate() {
                let ts = ts as u32;
                match op {
                    Op::Send { len, fin } => {
                        let fin = fin || len == 0;
                        if !fin_sent {
                            sb.push(nxt, len, fin);
                            let s = SentSeg::new(nxt, len, fin);
                            nxt = s.end();
                            r.segs.push_back(s);
                            fin_sent = fin;
                        }
                    }
                    Op::Ack { at } => {
                        let ack = point(&r, una, nxt, at, false).max(una);
                        let mut popped = Vec::new();
                        sb.pop_acked(ack, |s| popped.push(*s));
                        let n = r.segs.iter().take_while(|s| s.end() <= ack).count();
                        let gone: Vec<SentSeg> = r.segs.drain(..n).collect();
                        let resent: Vec<SentSeg> =
                            gone.into_iter().filter(|s| s.ever_rexmit).collect();
                        prop_assert_eq!(popped, resent);
                        prop_assert!(r.segs.front().is_none_or(|s| s.end() > ack));
                        una = ack;
                    }
                    Op::Sack { a, b, aligned } => {
                        let (lo, ro) = (
                            point(&r, una, nxt, a.min(b), aligned),
                            point(&r, una, nxt, a.max(b), aligned),
                        );
                        if lo < ro {
                            prop_assert_eq!(sb.sack(lo, ro), r.sack(lo, ro));
                            last_block = Some((lo, ro));
                        }
                    }
                    Op::SackAgain { left, right, aligned } => {
                        if let Some((lo, ro)) = last_block {
                            let lo = lo.max(una);
                            let ro = ro.max(lo);
                            let (lo, ro) = (
                                point(&r, una, lo, 1000 - left, aligned),
                                point(&r, ro, nxt, right, aligned),
                            );
                            if lo < ro {
                                prop_assert_eq!(sb.sack(lo, ro), r.sack(lo, ro));
                                last_block = Some((lo, ro));
                            }
                        }
                    }
                    Op::MarkLost { which } => {
                        let (d, smss) = THRESHOLDS[which];
                        sb.mark_lost(d, smss);
                        r.mark_lost(d, smss);
                    }
                    Op::PartialAck => {
                        sb.on_partial_ack();
                        if let Some(f) = r.segs.front_mut() {
                            if !f.sacked && !f.rexmit {
                                f.lost = true;
                            }
                        }
                    }
                    Op::RecoveryStart => {
                        sb.on_recovery_start();
                        if let Some(f) = r.segs.front_mut() {
                            f.lost = true;
                            f.rexmit = false;
                        }
                    }
                    Op::Rto => {
                        sb.on_rto();
                        for s in r.segs.iter_mut().filter(|s| !s.sacked) {
                            s.lost = true;
                            s.rexmit = false;
                        }
                    }
                    Op::ResendLost => {
                        let i = sb.next_lost();
                        prop_assert_eq!(i, r.next_lost());
                        if let Some(i) = i {
                            sb.resent_lost(i);
                            sb.on_resend(i, ts);
                            r.resend(i, ts, true);
                        }
                    }
                    Op::ResendUnlost => {
                        if let Some(i) = sb.next_unlost_below_sack() {
                            sb.resent_unlost(i);
                            sb.on_resend(i, ts);
                            r.resend(i, ts, true);
                        }
                    }
                    Op::Rescue => {
                        if let Some(i) = sb.rescue_candidate() {
                            sb.on_resend(i, ts);
                            r.resend(i, ts, false);
                        }
                    }
                }
                check(&sb, &r)?;
            }
        }
    }
}
