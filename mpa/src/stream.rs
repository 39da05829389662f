//! In-order receive parser over the TCP byte stream of one half connection (draft §5.4,
//! §5.4.1; digest §3.8). Push octets as they come, in any segmentation (kernel TCP,
//! re-segmenting middleboxes: MPA-72), pull verified FPDUs in order.
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
        take
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
        let lead = if self.cfg.markers && crate::marker::is_marker_position(self.offset) {
            crate::marker::MARKER_LEN
        } else {
            0
        };
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
}
