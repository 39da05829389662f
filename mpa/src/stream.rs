//! In-order receive parser over the TCP byte stream of one half connection (draft §5.4,
//! §5.4.1). Push octets as they come, in any segmentation (kernel TCP,
//! re-segmenting middleboxes: MPA-72), pull verified FPDUs in order.
//!
//! Copy only what has to wait: at an FPDU boundary with nothing held,
//! [`StreamParser::next_fpdu_in_place`] verifies complete FPDUs straight from the caller's
//! segment, and the parser knows how many octets complete the FPDU being held, so
//! only an FPDU split across segments is copied (a sender that aligns FPDUs with segments,
//! MPA-58, causes no copy at all).
//!
//! Buffering is bounded: at most `capacity` octets are held, and since a complete FPDU is
//! always pulled out and no accepted FPDU exceeds [`MAX_FPDU_LEN`], the parser cannot wedge.
//! After the first error it delivers nothing more on this half connection (MPA-111) and
//! keeps returning that error.
//!
//! ULPDU_Length 0 (A10, undefined in the draft): framing is intact and the CRC covers it,
//! so the parser delivers an empty ULPDU; DDP rejects it as too short for its header.
//! ULPDU_Length above 64768 (A11): [`FramingError::UlpduTooLong`] at once.

use crate::error::FramingError;
use crate::fpdu::{decode_fpdu, Decoded, FpduRef, FramingConfig, MAX_FPDU_LEN};

/// Default buffering bound: one largest FPDU plus 64 KiB of read-ahead.
pub const DEFAULT_CAPACITY: usize = MAX_FPDU_LEN + 65536;

/// In-order FPDU parser of one receive half connection.
#[derive(Debug, Clone)]
pub struct StreamParser {
    cfg: FramingConfig,
    /// Stream offset of `buf[head]`.
    offset: u32,
    buf: Vec<u8>,
    head: usize,
    capacity: usize,
    failed: Option<FramingError>,
    delivered: u64,
    /// Octets pushed into `buf` (copied), over the parser's life.
    copied: u64,
}

impl StreamParser {
    /// A parser whose first FPDU starts at stream `offset` (0 = the peer's SeqStart).
    pub fn new(cfg: FramingConfig, offset: u32) -> Self {
        Self::with_capacity(cfg, offset, DEFAULT_CAPACITY)
    }

    /// As [`Self::new`] with a buffering bound (raised to [`MAX_FPDU_LEN`] if smaller).
    pub fn with_capacity(cfg: FramingConfig, offset: u32, capacity: usize) -> Self {
        StreamParser {
            cfg,
            offset,
            buf: Vec::new(),
            head: 0,
            capacity: capacity.max(MAX_FPDU_LEN),
            failed: None,
            delivered: 0,
            copied: 0,
        }
    }

    /// The framing configuration.
    pub fn config(&self) -> FramingConfig {
        self.cfg
    }

    /// Appends received octets; returns how many were taken (fewer than `data.len()` only
    /// when the buffer is full: pull FPDUs, then push the rest). Takes nothing after an error.
    pub fn push(&mut self, data: &[u8]) -> usize {
        if self.failed.is_some() {
            return 0;
        }
        if self.head > 0 {
            self.buf.drain(..self.head);
            self.head = 0;
        }
        let take = data.len().min(self.capacity - self.buf.len());
        self.buf.extend_from_slice(&data[..take]);
        self.copied += take as u64;
        take
    }

    /// The next complete, verified FPDU at the start of `data`, parsed where it is (no copy),
    /// when nothing is held (the stream is at an FPDU boundary); `Ok(None)` when octets are
    /// held (push, then [`Self::next_fpdu`]) or `data` does not hold a whole FPDU (push it).
    /// The FPDU's [`FpduRef::wire_len`] octets of `data` are consumed.
    pub fn next_fpdu_in_place<'d>(
        &mut self,
        data: &'d [u8],
    ) -> Result<Option<FpduRef<'d>>, FramingError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        if self.buffered() > 0 {
            return Ok(None);
        }
        match decode_fpdu(self.cfg, self.offset, data) {
            Ok(Decoded::Complete(f)) => {
                self.offset = self.offset.wrapping_add(f.wire_len() as u32);
                self.delivered += 1;
                Ok(Some(f))
            }
            Ok(Decoded::Incomplete { .. }) => Ok(None),
            Err(e) => {
                self.failed = Some(e);
                Err(e)
            }
        }
    }

    /// Takes in-order `data` (any segmentation) and hands each complete, verified FPDU to
    /// `f`, in order. At an FPDU boundary with nothing held, FPDUs are verified where they are
    /// ([`Self::next_fpdu_in_place`]); only an FPDU split across segments is copied, and only
    /// up to its own end. Returns the octets taken: all of `data` (fewer only
    /// if the buffer filled, which a complete FPDU always being pulled out prevents). Stops at
    /// the first framing error, which stays (MPA-111).
    pub fn feed(
        &mut self,
        mut data: &[u8],
        f: &mut dyn FnMut(FpduRef<'_>),
    ) -> Result<usize, FramingError> {
        let total = data.len();
        while !data.is_empty() {
            if let Some(fpdu) = self.next_fpdu_in_place(data)? {
                data = &data[fpdu.wire_len()..];
                f(fpdu);
                continue;
            }
            let want = self.wanted().unwrap_or(data.len()).min(data.len());
            let took = self.push(&data[..want]);
            data = &data[took..];
            while let Some(fpdu) = self.next_fpdu()? {
                f(fpdu);
            }
            if took == 0 {
                break;
            }
        }
        Ok(total - data.len())
    }

    /// How many more octets to push for the FPDU being held: those that complete its header
    /// while its length is not in, then those that complete the FPDU (so what follows it is
    /// parsed in place). `None` when nothing is held (or after an error): the rest of the
    /// segment is all one incomplete FPDU.
    fn wanted(&self) -> Option<usize> {
        let held = self.buffered();
        if held == 0 || self.failed.is_some() {
            return None;
        }
        let lead = self.header_lead();
        if held < lead + 2 {
            return Some(lead + 2 - held);
        }
        let end = self.pending_end()?;
        let total = end.wrapping_sub(self.offset) as usize;
        total.checked_sub(held).filter(|&n| n > 0)
    }

    /// Octets before the ULPDU_Length field of the FPDU at `offset`: a marker when the FPDU
    /// starts at a marker position.
    fn header_lead(&self) -> usize {
        if self.cfg.markers && crate::marker::is_marker_position(self.offset) {
            crate::marker::MARKER_LEN
        } else {
            0
        }
    }

    /// Octets copied into the parser's buffer so far (pushed), for counters and tests.
    pub fn octets_copied(&self) -> u64 {
        self.copied
    }

    /// The next complete, verified FPDU, or `Ok(None)` if more octets are needed. The
    /// returned ULPDU borrows the parser's buffer until the next call.
    pub fn next_fpdu(&mut self) -> Result<Option<FpduRef<'_>>, FramingError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let start = self.head;
        let (layout, len) = match decode_fpdu(self.cfg, self.offset, &self.buf[start..]) {
            Ok(Decoded::Complete(f)) => (*f.layout(), f.wire_len()),
            Ok(Decoded::Incomplete { .. }) => return Ok(None),
            Err(e) => {
                self.failed = Some(e);
                return Err(e);
            }
        };
        self.head += len;
        self.offset = self.offset.wrapping_add(len as u32);
        self.delivered += 1;
        Ok(Some(FpduRef::from_parts(
            layout,
            &self.buf[start..start + len],
        )))
    }

    /// Stream offset of the next FPDU expected.
    pub fn next_offset(&self) -> u32 {
        self.offset
    }

    /// Where the FPDU after the one being assembled starts, once that one's ULPDU_Length has
    /// arrived (the length chain, MPA-70 way 1): an out-of-order segment holding this offset
    /// can be located from it ([`crate::LocateOptions::known_start`]). `None` before the
    /// header is in, when no octet of the FPDU is, or after an error. (Its CRC is not yet
    /// checked: a wrong length shows up as a CRC error at the one or the other.)
    pub fn pending_end(&self) -> Option<u32> {
        if self.failed.is_some() {
            return None;
        }
        let held = &self.buf[self.head..];
        let lead = self.header_lead();
        let h = held.get(lead..lead + 2)?;
        let len = u16::from_be_bytes([h[0], h[1]]);
        if usize::from(len) > crate::fpdu::MAX_ULPDU_LEN {
            return None;
        }
        let wire = crate::fpdu::fpdu_wire_len(self.cfg, self.offset, usize::from(len));
        Some(self.offset.wrapping_add(wire as u32))
    }

    /// Octets held that do not yet form a complete FPDU.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.head
    }

    /// FPDUs delivered so far (a Responder may send once this is non-zero, MPA-85).
    pub fn fpdus_delivered(&self) -> u64 {
        self.delivered
    }

    /// The error that stopped delivery, if any.
    pub fn error(&self) -> Option<FramingError> {
        self.failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framer::Framer;

    /// Bounded buffering: push takes at most `capacity` octets; pulling frees room, and a
    /// full buffer always holds a complete FPDU (no wedge).
    #[test]
    fn push_is_bounded_and_never_wedges() {
        let cfg = FramingConfig {
            markers: true,
            crc: true,
        };
        let mut f = Framer::new(cfg, 0);
        let mut s = Vec::new();
        let big = vec![7u8; 60000];
        for _ in 0..4 {
            f.encode_to_vec(&[&big], &mut s).unwrap();
        }
        let mut p = StreamParser::with_capacity(cfg, 0, 0);
        assert_eq!(p.capacity, MAX_FPDU_LEN);
        let mut at = 0;
        let mut got = 0;
        while at < s.len() {
            let took = p.push(&s[at..]);
            assert!(p.buffered() <= MAX_FPDU_LEN);
            at += took;
            while let Some(u) = p.next_fpdu().unwrap() {
                assert_eq!(u.ulpdu_len(), 60000);
                got += 1;
            }
            assert!(took > 0 || p.buffered() < MAX_FPDU_LEN, "progress");
        }
        assert_eq!(got, 4);
        assert_eq!(p.next_offset() as usize, s.len());
    }

    /// Feeds `segments` in order; returns the ULPDUs.
    fn receive(p: &mut StreamParser, segments: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for &seg in segments {
            let took = p.feed(seg, &mut |f| out.push(f.ulpdu_to_vec())).unwrap();
            assert_eq!(took, seg.len());
        }
        out
    }

    /// A stream of FPDUs, their ULPDUs and each FPDU's wire range in the stream.
    struct Stream {
        wire: Vec<u8>,
        ulpdus: Vec<Vec<u8>>,
        ranges: Vec<(usize, usize)>,
    }

    /// `n` FPDUs of ULPDU lengths 1..300 (a fixed sequence).
    fn stream_of(cfg: FramingConfig, n: usize) -> Stream {
        let mut f = Framer::new(cfg, 0);
        let (mut s, mut ulpdus, mut ranges) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..n {
            let u: Vec<u8> = (0..1 + (i * 37) % 300).map(|k| (i + k) as u8).collect();
            let start = s.len();
            f.encode_to_vec(&[&u], &mut s).unwrap();
            ranges.push((start, s.len()));
            ulpdus.push(u);
        }
        Stream {
            wire: s,
            ulpdus,
            ranges,
        }
    }

    /// Segments that each hold whole FPDUs (an aligning sender, MPA-58) are parsed where they
    /// are: nothing is copied.
    #[test]
    fn whole_fpdu_segments_are_parsed_in_place_without_a_copy() {
        for markers in [false, true] {
            let cfg = FramingConfig { markers, crc: true };
            let st = stream_of(cfg, 200);
            // One, two or three FPDUs per segment.
            let mut segs = Vec::new();
            let mut i = 0;
            while i < st.ranges.len() {
                let j = (i + 1 + i % 3).min(st.ranges.len());
                segs.push(&st.wire[st.ranges[i].0..st.ranges[j - 1].1]);
                i = j;
            }
            let mut p = StreamParser::new(cfg, 0);
            assert_eq!(receive(&mut p, &segs), st.ulpdus, "markers {markers}");
            assert_eq!(p.octets_copied(), 0, "markers {markers}");
            assert_eq!(p.fpdus_delivered(), 200);
        }
    }

    /// Any segmentation gives the same ULPDUs as the whole stream, and only FPDUs split across
    /// segments are copied, each no further than its own end.
    #[test]
    fn split_fpdus_alone_are_copied() {
        for markers in [false, true] {
            let cfg = FramingConfig { markers, crc: true };
            let Stream {
                wire: s,
                ulpdus,
                ranges,
            } = stream_of(cfg, 300);
            // Segment lengths from a fixed linear congruential sequence, 1 to 1500 octets.
            let (mut x, mut at, mut cuts) = (12345u64, 0usize, vec![0usize]);
            while at < s.len() {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                at = (at + 1 + (x >> 33) as usize % 1500).min(s.len());
                cuts.push(at);
            }
            let segs: Vec<&[u8]> = cuts.windows(2).map(|w| &s[w[0]..w[1]]).collect();
            let mut p = StreamParser::new(cfg, 0);
            assert_eq!(receive(&mut p, &segs), ulpdus, "markers {markers}");
            // The octets of FPDUs that a cut falls inside: an upper bound of what may be copied.
            let split: usize = ranges
                .iter()
                .filter(|(a, b)| cuts.iter().any(|c| a < c && c < b))
                .map(|(a, b)| b - a)
                .sum();
            let copied = p.octets_copied() as usize;
            assert!(
                copied > 0 && copied <= split,
                "copied {copied} of split {split}"
            );
            assert!(copied < s.len() / 2, "copied {copied} of {}", s.len());
        }
    }

    #[test]
    fn in_place_takes_nothing_while_octets_are_held_and_reports_errors() {
        let cfg = FramingConfig {
            markers: false,
            crc: true,
        };
        let Stream {
            wire: s, ranges, ..
        } = stream_of(cfg, 2);
        let mut p = StreamParser::new(cfg, 0);
        assert_eq!(p.wanted(), None);
        // One octet held: the length is not in yet, one more octet completes it.
        p.push(&s[..1]);
        assert!(p.next_fpdu_in_place(&s[1..]).unwrap().is_none());
        assert_eq!(p.wanted(), Some(1));
        p.push(&s[1..2]);
        assert_eq!(p.wanted(), Some(ranges[0].1 - 2));
        p.push(&s[2..ranges[0].1]);
        assert!(p.next_fpdu().unwrap().is_some());
        assert_eq!(p.wanted(), None);
        // A corrupt CRC found in place stops the stream, as it does when pushed (MPA-111).
        let mut bad = s[ranges[1].0..ranges[1].1].to_vec();
        *bad.last_mut().unwrap() ^= 1;
        let e = p.next_fpdu_in_place(&bad).unwrap_err();
        assert_eq!(p.error(), Some(e));
        assert_eq!(p.next_fpdu_in_place(&s[ranges[1].0..]).unwrap_err(), e);
    }
}
