//! The retransmission queue (segments sent and not yet acknowledged, with their original
//! boundaries, MPA-61) and the SACK scoreboard over it (RFC 6675 §4: IsLost, pipe).

use crate::wire::Segment;

use super::Connection;

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
    pub(super) fn end(&self) -> u64 {
        self.off + u64::from(self.len) + u64::from(self.fin)
    }
}

impl Connection {
    /// Marks SACK blocks; true if something new was SACKed.
    pub(super) fn apply_sack(&mut self, seg: &Segment<'_>) -> bool {
        let mut any = false;
        for &(l, r) in seg.options.sack_blocks() {
            let (Some(lo), Some(ro)) =
                (self.snd.off(l, self.snd_una), self.snd.off(r, self.snd_una))
            else {
                continue;
            };
            if lo >= ro || lo < self.snd_una || ro > self.snd_nxt {
                continue; // RFC 2018 §4 / RFC 6675: ignore invalid or D-SACK blocks.
            }
            let i = self.sent.partition_point(|s| s.end() <= lo);
            for s in self.sent.iter_mut().skip(i) {
                if s.off >= ro {
                    break;
                }
                // Only whole segments count as SACKed: original boundaries are kept for retransmission.
                if s.off >= lo && s.end() <= ro && !s.sacked {
                    s.sacked = true;
                    s.lost = false;
                    any = true;
                }
            }
        }
        if any {
            self.recount();
        }
        any
    }

    /// RFC 6675 §4 IsLost for every segment: DupThresh SACKed segments, or more than
    /// (DupThresh-1)*SMSS SACKed octets, above it.
    pub(super) fn mark_lost(&mut self) {
        if self.sacked_bytes == 0 {
            return;
        }
        let thresh = self.cfg.dupthresh;
        let bytes_thresh = u64::from(thresh.saturating_sub(1)) * u64::from(self.emss());
        let mut segs_above = 0u32;
        let mut bytes_above = 0u64;
        for s in self.sent.iter_mut().rev() {
            if s.sacked {
                segs_above += 1;
                bytes_above += u64::from(s.len);
            } else if !s.lost && (segs_above >= thresh || bytes_above > bytes_thresh) {
                // A segment already resent by NextSeg rule (3) stays resent (it is at or below
                // HighRxt, RFC 6675 §4 rule (1.a)).
                s.lost = true;
            }
        }
        self.recount();
    }

    /// Octets in the network (RFC 6675 §4 "pipe"; without SACK, dupacks count as left segments).
    pub(super) fn pipe(&self) -> u32 {
        let mut p = self.sent_bytes - self.sacked_bytes - self.lost_pending_bytes
            + self.rexmit_unlost_bytes;
        if !self.sack_enabled && self.in_recovery {
            p = p.saturating_sub(u64::from(self.dupacks) * u64::from(self.emss()));
        }
        p.min(u64::from(u32::MAX)) as u32
    }

    /// Removes a segment's share of the scoreboard sums.
    pub(super) fn uncount(&mut self, s: &SentSeg) {
        let b = u64::from(s.len) + u64::from(s.fin);
        self.sent_bytes -= b;
        if s.sacked {
            self.sacked_bytes -= b;
        }
        if s.lost && !s.rexmit && !s.sacked {
            self.lost_pending -= 1;
            self.lost_pending_bytes -= b;
        }
        if !s.lost && s.rexmit && !s.sacked {
            self.rexmit_unlost_bytes -= b;
        }
    }

    /// Recomputes the scoreboard sums after bulk changes (loss marking, SACK, RTO).
    pub(super) fn recount(&mut self) {
        let (mut all, mut sacked, mut n, mut lost, mut twice) = (0, 0, 0, 0, 0);
        for s in &self.sent {
            let b = u64::from(s.len) + u64::from(s.fin);
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
        self.sent_bytes = all;
        self.sacked_bytes = sacked;
        self.lost_pending = n;
        self.lost_pending_bytes = lost;
        self.rexmit_unlost_bytes = twice;
    }
}
