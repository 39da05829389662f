//! Watches the TCP segments one side puts on the link: counts SYN/FIN/RST, tells first
//! transmissions from retransmissions by sequence space, checks header alignment against the
//! record boundaries the sender was given (MPA-05/06/57: each segment starts with a record and
//! holds only whole records; MPA-61: retransmissions keep the original boundaries) and that
//! every payload octet is the stream's.

use std::collections::HashSet;

use etherparse::{SlicedPacket, TransportSlice};

use super::verify::Pattern;

/// Counters of a [`SegmentAudit`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AuditStats {
    /// TCP segments seen.
    pub segments: u64,
    /// Packets that did not parse as IPv4 + TCP.
    pub unparsed: u64,
    /// Segments with SYN.
    pub syn: u64,
    /// Segments with FIN.
    pub fin: u64,
    /// Segments with RST.
    pub rst: u64,
    /// Data segments carrying only new octets.
    pub first_tx: u64,
    /// Octets in those.
    pub first_tx_bytes: u64,
    /// Data segments carrying octets sent before.
    pub retx: u64,
    /// Octets in those.
    pub retx_bytes: u64,
    /// First transmissions not starting and ending on a record boundary.
    pub first_tx_unaligned: u64,
    /// Retransmissions not starting and ending on a record boundary, other than those below.
    pub retx_unaligned: u64,
    /// Retransmissions repeating exactly an unaligned first transmission (the same exception
    /// again, boundaries kept).
    pub retx_repeating_unaligned: u64,
    /// Retransmissions whose range is not that of an earlier segment.
    pub retx_reshaped: u64,
    /// Data segments whose octets differ from the stream's pattern.
    pub wrong_payload: u64,
    /// Data segments before the stream start or without a SYN seen first.
    pub out_of_stream: u64,
}

impl AuditStats {
    /// Data segments not aligned to records, first transmissions and retransmissions.
    pub fn unaligned(&self) -> u64 {
        self.first_tx_unaligned + self.retx_unaligned
    }

    /// Field-wise sum.
    pub fn add(&mut self, o: &AuditStats) {
        self.segments += o.segments;
        self.unparsed += o.unparsed;
        self.syn += o.syn;
        self.fin += o.fin;
        self.rst += o.rst;
        self.first_tx += o.first_tx;
        self.first_tx_bytes += o.first_tx_bytes;
        self.retx += o.retx;
        self.retx_bytes += o.retx_bytes;
        self.first_tx_unaligned += o.first_tx_unaligned;
        self.retx_unaligned += o.retx_unaligned;
        self.retx_repeating_unaligned += o.retx_repeating_unaligned;
        self.retx_reshaped += o.retx_reshaped;
        self.wrong_payload += o.wrong_payload;
        self.out_of_stream += o.out_of_stream;
    }
}

/// A data segment that broke a rule, for reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentRange {
    /// Stream offset of the first octet.
    pub start: u64,
    /// Stream offset after the last octet.
    pub end: u64,
    /// Whether it repeated octets sent before.
    pub retransmission: bool,
}

/// See the module doc. Feed it every packet one side sends, as sent.
#[derive(Clone, Debug, Default)]
pub struct SegmentAudit {
    boundaries: Option<Vec<u64>>,
    pattern: Option<Pattern>,
    isn: Option<u32>,
    sent_end: u64,
    ranges: HashSet<(u64, u64)>,
    unaligned_firsts: HashSet<(u64, u64)>,
    stats: AuditStats,
    unaligned_examples: Vec<SegmentRange>,
}

const EXAMPLES: usize = 8;

impl SegmentAudit {
    /// Counts flags and retransmissions only.
    pub fn new() -> Self {
        SegmentAudit::default()
    }

    /// Also checks alignment to these record boundaries (ascending stream offsets, as
    /// [`RecordPlan::boundaries`](super::RecordPlan::boundaries) gives).
    pub fn with_boundaries(mut self, boundaries: Vec<u64>) -> Self {
        self.boundaries = Some(boundaries);
        self
    }

    /// Also checks every payload octet against the stream `pattern`.
    pub fn with_pattern(mut self, pattern: Pattern) -> Self {
        self.pattern = Some(pattern);
        self
    }

    /// Counters so far.
    pub fn stats(&self) -> AuditStats {
        self.stats
    }

    /// The first few unaligned segments.
    pub fn unaligned_examples(&self) -> &[SegmentRange] {
        &self.unaligned_examples
    }

    /// Unwraps a 32-bit stream offset to the 64-bit one nearest to what was sent so far.
    fn unwrap_offset(&self, off32: u32) -> i64 {
        let reference = self.sent_end as i64;
        let base = (reference & !0xffff_ffff) | i64::from(off32);
        [base - (1 << 32), base, base + (1 << 32)]
            .into_iter()
            .min_by_key(|c| (c - reference).abs())
            .unwrap_or(base)
    }

    fn is_boundary(&self, offset: u64) -> bool {
        match &self.boundaries {
            Some(b) => b.binary_search(&offset).is_ok(),
            None => true,
        }
    }

    /// Looks at one packet.
    pub fn observe(&mut self, packet: &[u8]) {
        let Ok(sliced) = SlicedPacket::from_ip(packet) else {
            self.stats.unparsed += 1;
            return;
        };
        let Some(TransportSlice::Tcp(tcp)) = sliced.transport else {
            self.stats.unparsed += 1;
            return;
        };
        self.stats.segments += 1;
        self.stats.rst += u64::from(tcp.rst());
        self.stats.fin += u64::from(tcp.fin());
        if tcp.syn() {
            self.stats.syn += 1;
            self.isn.get_or_insert(tcp.sequence_number());
            return;
        }
        let payload = tcp.payload();
        if payload.is_empty() {
            return;
        }
        let Some(isn) = self.isn else {
            self.stats.out_of_stream += 1;
            return;
        };
        let off32 = tcp.sequence_number().wrapping_sub(isn.wrapping_add(1));
        let Ok(start) = u64::try_from(self.unwrap_offset(off32)) else {
            self.stats.out_of_stream += 1;
            return;
        };
        let end = start + payload.len() as u64;
        let retransmission = start < self.sent_end;
        if retransmission {
            self.stats.retx += 1;
            self.stats.retx_bytes += payload.len() as u64;
            if !self.ranges.contains(&(start, end)) {
                self.stats.retx_reshaped += 1;
            }
        } else {
            self.stats.first_tx += 1;
            self.stats.first_tx_bytes += payload.len() as u64;
        }
        self.ranges.insert((start, end));
        self.sent_end = self.sent_end.max(end);
        if !(self.is_boundary(start) && self.is_boundary(end)) {
            if !retransmission {
                self.stats.first_tx_unaligned += 1;
                self.unaligned_firsts.insert((start, end));
            } else if self.unaligned_firsts.contains(&(start, end)) {
                self.stats.retx_repeating_unaligned += 1;
                return self.check_payload(start, payload);
            } else {
                self.stats.retx_unaligned += 1;
            }
            if self.unaligned_examples.len() < EXAMPLES {
                self.unaligned_examples.push(SegmentRange {
                    start,
                    end,
                    retransmission,
                });
            }
        }
        self.check_payload(start, payload);
    }

    fn check_payload(&mut self, start: u64, payload: &[u8]) {
        if let Some(p) = &self.pattern {
            if p.first_mismatch(start, payload).is_some() {
                self.stats.wrong_payload += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    fn segment(seq: u32, syn: bool, rst: bool, payload: &[u8]) -> Vec<u8> {
        let mut b =
            PacketBuilder::ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64).tcp(1000, 2000, seq, 65535);
        if syn {
            b = b.syn();
        }
        if rst {
            b = b.rst();
        }
        let mut out = Vec::new();
        b.write(&mut out, payload).unwrap();
        out
    }

    fn stream(p: &Pattern, at: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0; len];
        p.fill(at, &mut v);
        v
    }

    #[test]
    fn classifies_alignment_retransmission_and_payload() {
        let p = Pattern::new(4);
        // Records [0,100) [100,250) [250,300); ISN near the wrap so offsets cross 2^32.
        let isn = u32::MAX - 120;
        let mut a = SegmentAudit::new()
            .with_boundaries(vec![0, 100, 250, 300])
            .with_pattern(p);
        let data = |at: u64, len: usize| {
            segment(
                isn.wrapping_add(1).wrapping_add(at as u32),
                false,
                false,
                &stream(&p, at, len),
            )
        };
        a.observe(&segment(isn, true, false, &[]));
        a.observe(&data(0, 100)); // aligned
        a.observe(&data(100, 200)); // aligned, two records packed
        a.observe(&data(100, 200)); // same boundaries again: aligned retransmission
        a.observe(&data(100, 150)); // reshaped but aligned retransmission
        a.observe(&data(0, 50)); // unaligned retransmission
        a.observe(&data(0, 50)); // the same again: still not a first transmission's range
        let mut bad = data(250, 50);
        let last = bad.len() - 1;
        bad[last] ^= 1;
        a.observe(&bad); // a reshaped retransmission with a wrong octet
        a.observe(&segment(0, false, true, &[]));
        a.observe(&[0x45, 0, 0]);
        let s = a.stats();
        assert_eq!((s.syn, s.rst, s.unparsed, s.segments), (1, 1, 1, 9));
        assert_eq!((s.first_tx, s.first_tx_bytes), (2, 300));
        assert_eq!((s.retx, s.retx_bytes), (5, 200 + 150 + 50 + 50 + 50));
        assert_eq!(
            (s.first_tx_unaligned, s.retx_unaligned, s.retx_reshaped),
            (0, 2, 3)
        );
        assert_eq!(s.retx_repeating_unaligned, 0);
        assert_eq!(s.wrong_payload, 1);
        let example = SegmentRange {
            start: 0,
            end: 50,
            retransmission: true,
        };
        assert_eq!(a.unaligned_examples(), &[example, example]);
    }

    #[test]
    fn unaligned_first_transmissions_are_caught() {
        let mut a = SegmentAudit::new().with_boundaries(vec![0, 100, 200]);
        a.observe(&segment(10, true, false, &[]));
        a.observe(&segment(11, false, false, &[0; 60]));
        a.observe(&segment(71, false, false, &[0; 140]));
        assert_eq!(a.stats().first_tx_unaligned, 2);
        assert_eq!(a.stats().retx, 0);
        // Resending an unaligned first transmission unchanged repeats that exception.
        a.observe(&segment(11, false, false, &[0; 60]));
        assert_eq!(
            (a.stats().retx_repeating_unaligned, a.stats().retx_unaligned),
            (1, 0)
        );
    }

    #[test]
    fn data_before_the_syn_is_out_of_stream() {
        let mut a = SegmentAudit::new();
        a.observe(&segment(11, false, false, &[0; 10]));
        assert_eq!(a.stats().out_of_stream, 1);
        assert_eq!(a.stats().first_tx, 0);
    }
}
