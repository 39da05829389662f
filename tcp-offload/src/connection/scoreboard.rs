//! The retransmission queue and the SACK scoreboard over it (RFC 6675 §2, §4): every segment sent
//! and not yet cumulatively acknowledged, with its original boundaries (retransmissions resend
//! whole original segments, MPA-61), whether the peer SACKed it, whether it is deemed lost and
//! whether it was resent; and the sums that make RFC 6675's "pipe".
//!
//! Offsets are the connection's send-side stream offsets (SYN at 0, data from 1). The flags of a
//! segment change only through the methods here, so the sums always match the segments.

use std::collections::VecDeque;

/// One segment sent and not yet cumulatively acknowledged.
#[derive(Clone, Copy, Debug)]
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
    /// The offset after the segment (its FIN included).
    pub(super) fn end(&self) -> u64 {
        self.off + u64::from(self.len) + u64::from(self.fin)
    }

    /// Sequence space the segment occupies (data and FIN).
    fn octets(&self) -> u64 {
        u64::from(self.len) + u64::from(self.fin)
    }
}

/// The retransmission queue with its SACK marks and sums.
#[derive(Debug, Default)]
pub(super) struct Scoreboard {
    segs: VecDeque<SentSeg>,
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
        self.segs.iter().all(|s| !s.rexmit)
    }

    /// NextSeg rule (1) (RFC 6675 §4): the oldest segment deemed lost and not yet resent.
    pub fn next_lost(&self) -> Option<usize> {
        if self.lost_pending == 0 {
            return None;
        }
        self.segs
            .iter()
            .position(|s| s.lost && !s.rexmit && !s.sacked)
    }

    /// NextSeg rule (3) (RFC 6675 §4): the oldest segment above HighRxt (the highest segment
    /// resent by rules 1 and 3) and below the highest SACKed octet that is neither SACKed nor
    /// deemed lost. `None` also when nothing is SACKed.
    pub fn next_unlost_below_sack(&self) -> Option<usize> {
        // Highest octet covered by a SACK (rule 1.b) and HighRxt (rule 1.a).
        let high_sacked = self.segs.iter().rev().find(|s| s.sacked)?.end();
        let above_rxt = self
            .segs
            .iter()
            .rposition(|s| s.rexmit)
            .map_or(0, |k| k + 1);
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
        let i = self.segs.iter().rposition(|s| !s.sacked)?;
        let s = &self.segs[i];
        (!s.rexmit && !s.lost).then_some(i)
    }

    // ----- the queue ----------------------------------------------------------------------------

    /// A new segment `[off, off + len)` (+ FIN) was sent.
    pub fn push(&mut self, off: u64, len: u32, fin: bool) {
        let s = SentSeg {
            off,
            len,
            fin,
            sacked: false,
            lost: false,
            rexmit: false,
            ever_rexmit: false,
            rexmit_ts: 0,
        };
        self.sent_octets += s.octets();
        self.segs.push_back(s);
    }

    /// Removes and returns the oldest segment if `ack` covers all of it.
    pub fn pop_acked(&mut self, ack: u64) -> Option<SentSeg> {
        if self.segs.front()?.end() > ack {
            return None;
        }
        let s = self.segs.pop_front()?;
        self.uncount(&s);
        Some(s)
    }

    /// Forgets every segment that starts below `off`.
    pub fn drop_below(&mut self, off: u64) {
        self.segs.retain(|s| s.off >= off);
        self.recount();
    }

    /// Forgets every segment.
    pub fn clear(&mut self) {
        self.segs.clear();
        self.recount();
    }

    // ----- marks --------------------------------------------------------------------------------

    /// A valid SACK block `[lo, ro)` (RFC 2018 §3): marks every segment it covers whole (original
    /// boundaries are kept for retransmission). True if a segment became SACKed.
    pub fn sack(&mut self, lo: u64, ro: u64) -> bool {
        let mut any = false;
        let i = self.segs.partition_point(|s| s.end() <= lo);
        for s in self.segs.iter_mut().skip(i) {
            if s.off >= ro {
                break;
            }
            if s.off >= lo && s.end() <= ro && !s.sacked {
                s.sacked = true;
                s.lost = false;
                any = true;
            }
        }
        if any {
            self.recount();
        }
        any
    }

    /// RFC 6675 §4 IsLost for every segment: `dupthresh` SACKed segments, or more than
    /// (`dupthresh` - 1) * `smss` SACKed octets, above it.
    pub fn mark_lost(&mut self, dupthresh: u32, smss: u32) {
        if self.sacked_octets == 0 {
            return;
        }
        let bytes_thresh = u64::from(dupthresh.saturating_sub(1)) * u64::from(smss);
        let mut segs_above = 0u32;
        let mut bytes_above = 0u64;
        for s in self.segs.iter_mut().rev() {
            if s.sacked {
                segs_above += 1;
                bytes_above += u64::from(s.len);
            } else if !s.lost && (segs_above >= dupthresh || bytes_above > bytes_thresh) {
                // A segment already resent by NextSeg rule (3) stays resent (it is at or below
                // HighRxt, RFC 6675 §4 rule (1.a)).
                s.lost = true;
            }
        }
        self.recount();
    }

    /// A partial ACK (RFC 6582 §3.2 step 3): the oldest segment is deemed lost unless SACKed or
    /// already resent.
    pub fn on_partial_ack(&mut self) {
        if let Some(f) = self.segs.front_mut() {
            if !f.sacked && !f.rexmit {
                f.lost = true;
            }
        }
        self.recount();
    }

    /// Entering fast recovery (RFC 5681 §3.2, RFC 6675 §5): the oldest segment is deemed lost and
    /// due for retransmission.
    pub fn on_recovery_start(&mut self) {
        if let Some(f) = self.segs.front_mut() {
            f.lost = true;
            f.rexmit = false;
        }
        self.recount();
    }

    /// A retransmission timeout (RFC 6675 §5.1): every segment not SACKed is deemed lost and due
    /// for retransmission.
    pub fn on_rto(&mut self) {
        for s in self.segs.iter_mut() {
            if !s.sacked {
                s.lost = true;
                s.rexmit = false;
            }
        }
        self.recount();
    }

    /// Segment `i` was retransmitted at TSval `ts`.
    pub fn on_resend(&mut self, i: usize, ts: u32) {
        let s = &mut self.segs[i];
        s.ever_rexmit = true;
        s.rexmit_ts = ts;
    }

    /// Segment `i`, deemed lost, was resent by NextSeg rule (1): back in the network once.
    pub fn resent_lost(&mut self, i: usize) {
        let s = &mut self.segs[i];
        s.rexmit = true;
        let b = s.octets();
        self.lost_pending -= 1;
        self.lost_pending_octets -= b;
    }

    /// Segment `i`, not deemed lost, was resent by NextSeg rule (3): HighRxt moves past it
    /// (RFC 6675 §5 C.3) and it is in the network twice.
    pub fn resent_unlost(&mut self, i: usize) {
        let s = &mut self.segs[i];
        s.rexmit = true;
        let b = s.octets();
        self.rexmit_unlost_octets += b;
    }

    // ----- sums ---------------------------------------------------------------------------------

    /// Removes a segment's share of the sums.
    fn uncount(&mut self, s: &SentSeg) {
        let b = s.octets();
        self.sent_octets -= b;
        if s.sacked {
            self.sacked_octets -= b;
        }
        if s.lost && !s.rexmit && !s.sacked {
            self.lost_pending -= 1;
            self.lost_pending_octets -= b;
        }
        if !s.lost && s.rexmit && !s.sacked {
            self.rexmit_unlost_octets -= b;
        }
    }

    /// Recomputes the sums after bulk changes (loss marking, SACK, RTO).
    fn recount(&mut self) {
        let (mut all, mut sacked, mut n, mut lost, mut twice) = (0, 0, 0, 0, 0);
        for s in &self.segs {
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
        self.sent_octets = all;
        self.sacked_octets = sacked;
        self.lost_pending = n;
        self.lost_pending_octets = lost;
        self.rexmit_unlost_octets = twice;
    }
}
