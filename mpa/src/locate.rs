//! Out-of-order FPDU locator (draft §5.4 ways 2 and 3, MPA-70; §11.2).
//!
//! Given one TCP segment that TCP has committed to keep (MPA-13) and its stream offset,
//! find the complete FPDUs it holds without copying, so DDP can place them before the gap
//! before them fills (MPA-12, MPA-25). An FPDU start is taken ONLY from (MPA-70):
//!
//! 1. a **known start** the caller names: an offset the ULPDU_Length chain already reached
//!    (the end of an FPDU verified before, in order or out of order; §5.4 ways 1 and 3);
//! 2. otherwise the **markers** inside the segment: each one's FPDUPTR names an FPDU start;
//!    the first that lies inside the segment anchors (§5.4 way 2);
//! 3. from the anchor, following FPDUs by **ULPDU_Length**, until one runs past the segment.
//!
//! The locator never guesses: a segment's first octet is not taken to be an FPDU start because
//! a CRC matches there (a ULP payload may hold a valid FPDU image, CRC and all). With markers
//! off and no known start inside, nothing is found: the segment waits (in TCP's bounded
//! out-of-order store) for the chain or for in-order delivery.
//!
//! Each FPDU found is fully verified (length bound, CRC, every marker it contains) and
//! comes with its stream offset (original send order, MPA-01). The anchoring marker must
//! lie inside the FPDU it names, else [`FramingError::MarkerMismatch`] (code 3, MPA-108).
//! After an error the iterator ends; the caller stops delivery on this half connection.

use crate::error::{BufferTooSmall, FramingError};
use crate::fpdu::{decode_fpdu, Decoded, FpduRef, FramingConfig, UlpduRanges};
use crate::marker::{self, distance_to_marker, MARKER_INTERVAL, MARKER_LEN};
use core::ops::Range;

/// Where the locator may start, besides the markers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LocateOptions {
    /// Stream offset (relative to SeqStart) of an FPDU start the ULPDU_Length chain already
    /// reached (MPA-70 ways 1 and 3). Used when it lies inside the segment; then the markers
    /// are not needed. Only pass an offset that a verified FPDU's length led to.
    pub known_start: Option<u32>,
}

/// An FPDU found in a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocatedFpdu<'a> {
    /// Index of the FPDU's first octet in the segment.
    pub start: usize,
    /// The verified FPDU (its `offset()` is the stream position).
    pub fpdu: FpduRef<'a>,
}

impl<'a> LocatedFpdu<'a> {
    /// The ULPDU as byte ranges of the **segment**, markers skipped (no copy, no allocation).
    pub fn segment_ranges(&self) -> SegmentRanges {
        SegmentRanges {
            inner: self.fpdu.ulpdu_ranges(),
            base: self.start,
        }
    }
    /// Copies the ULPDU (markers removed) to the front of `out`; returns its length.
    pub fn copy_ulpdu(&self, out: &mut [u8]) -> Result<usize, BufferTooSmall> {
        self.fpdu.copy_ulpdu(out)
    }
}

/// Iterator over a located ULPDU's ranges in the segment.
#[derive(Debug, Clone)]
pub struct SegmentRanges {
    inner: UlpduRanges,
    base: usize,
}

impl Iterator for SegmentRanges {
    type Item = Range<usize>;
    fn next(&mut self) -> Option<Range<usize>> {
        self.inner
            .next()
            .map(|r| r.start + self.base..r.end + self.base)
    }
}

/// A framing error in a located segment, with the stream offset of the FPDU concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[error("{error} at stream offset {offset}")]
pub struct LocateError {
    /// Stream offset of the FPDU that failed.
    pub offset: u32,
    /// What was wrong.
    pub error: FramingError,
}

/// Iterator over the complete FPDUs of one segment; see the module documentation.
#[derive(Debug, Clone)]
pub struct Locator<'a> {
    cfg: FramingConfig,
    seg_offset: u32,
    seg: &'a [u8],
    opts: LocateOptions,
    /// Next FPDU start to decode along the ULPDU_Length chain.
    chain: Option<usize>,
    /// Where the current chain came from.
    anchor: Anchor,
    known_tried: bool,
    /// Index of the next marker to try as an anchor.
    next_marker: usize,
    done: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Anchor {
    /// A marker at this segment index; it must lie inside the first FPDU.
    Marker(usize),
    /// A known start, or a verified FPDU before this one.
    Chain,
}

/// Locates the complete FPDUs inside `seg`, whose first octet is at stream `seg_offset`
/// (relative to the peer's SeqStart).
pub fn locate(cfg: FramingConfig, seg_offset: u32, seg: &[u8], opts: LocateOptions) -> Locator<'_> {
    Locator {
        cfg,
        seg_offset,
        seg,
        opts,
        chain: None,
        anchor: Anchor::Chain,
        known_tried: false,
        next_marker: distance_to_marker(seg_offset) as usize,
        done: false,
    }
}

impl<'a> Locator<'a> {
    /// Finds the next anchor: the known start first (MPA-70 ways 1/3), then markers (way 2).
    fn find_anchor(&mut self) -> bool {
        if !self.known_tried {
            self.known_tried = true;
            if let Some(k) = self.opts.known_start {
                let d = k.wrapping_sub(self.seg_offset) as usize;
                if d < self.seg.len() {
                    self.chain = Some(d);
                    self.anchor = Anchor::Chain;
                    return true;
                }
            }
        }
        if !self.cfg.markers {
            return false;
        }
        while self.next_marker + MARKER_LEN <= self.seg.len() {
            let m = self.next_marker;
            self.next_marker += MARKER_INTERVAL as usize;
            let view = marker::Packet::new_unchecked(&self.seg[m..m + MARKER_LEN]);
            let moff = self.seg_offset.wrapping_add(m as u32);
            let target = marker::resolve(moff, view.fpduptr());
            let d = target.fpdu_start.wrapping_sub(self.seg_offset) as usize;
            if d <= m {
                self.chain = Some(d);
                self.anchor = Anchor::Marker(m);
                return true;
            }
        }
        false
    }
}

impl<'a> Iterator for Locator<'a> {
    type Item = Result<LocatedFpdu<'a>, LocateError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            let Some(pos) = self.chain else {
                if !self.find_anchor() {
                    self.done = true;
                }
                continue;
            };
            let offset = self.seg_offset.wrapping_add(pos as u32);
            let anchor = self.anchor;
            match decode_fpdu(self.cfg, offset, &self.seg[pos..]) {
                Ok(Decoded::Complete(fpdu)) => {
                    let end = pos + fpdu.wire_len();
                    if let Anchor::Marker(m) = anchor {
                        if m >= end {
                            self.done = true;
                            let error = FramingError::MarkerMismatch;
                            return Some(Err(LocateError { offset, error }));
                        }
                    }
                    self.chain = Some(end);
                    self.anchor = Anchor::Chain;
                    return Some(Ok(LocatedFpdu { start: pos, fpdu }));
                }
                Ok(Decoded::Incomplete { .. }) => self.done = true,
                Err(error) => {
                    self.done = true;
                    return Some(Err(LocateError { offset, error }));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framer::Framer;

    const PLAIN: FramingConfig = FramingConfig {
        markers: false,
        crc: true,
    };

    /// A ULPDU whose payload is itself a whole valid FPDU image (length, payload, CRC).
    fn fpdu_image_inside(cfg: FramingConfig, offset: u32) -> (Vec<u8>, Vec<u8>, usize) {
        let mut image = Vec::new();
        Framer::new(cfg, offset + 40)
            .encode_to_vec(&[b"forged message"], &mut image)
            .unwrap();
        let mut ulpdu = vec![0x55u8; 38];
        ulpdu.extend_from_slice(&image);
        let mut wire = Vec::new();
        Framer::new(cfg, offset)
            .encode_to_vec(&[&ulpdu], &mut wire)
            .unwrap();
        (wire, image, 40)
    }

    /// MPA-70: with markers off and no known chain start, a segment that begins with a valid
    /// FPDU image (the tail of a ULP payload, CRC matching) yields nothing: no CRC-match guess.
    #[test]
    fn mpa_70_valid_fpdu_image_at_segment_start_is_not_taken_for_an_fpdu() {
        let (wire, image, at) = fpdu_image_inside(PLAIN, 0);
        let seg = &wire[at..];
        assert!(seg.starts_with(&image));
        assert_eq!(
            decode_fpdu(PLAIN, at as u32, seg).map(|d| matches!(d, Decoded::Complete(_))),
            Ok(true),
            "the image alone decodes with a good CRC"
        );
        assert_eq!(
            locate(PLAIN, at as u32, seg, LocateOptions::default()).count(),
            0
        );
        // The same segment with the real FPDU start as the known chain start: the real FPDU.
        let opts = LocateOptions {
            known_start: Some(0),
        };
        let got: Vec<_> = locate(PLAIN, 0, &wire, opts).collect();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].unwrap().fpdu.ulpdu_len(), 38 + image.len());
    }

    /// MPA-70 way 3: a known start inside the segment (not at its first octet) anchors the
    /// chain there; a known start outside the segment is ignored.
    #[test]
    fn mpa_70_known_start_inside_the_segment_anchors_the_length_chain() {
        let mut f = Framer::new(PLAIN, 0);
        let mut wire = Vec::new();
        f.encode_to_vec(&[b"first ulpdu"], &mut wire).unwrap();
        let second = wire.len();
        f.encode_to_vec(&[b"second"], &mut wire).unwrap();
        f.encode_to_vec(&[b"third"], &mut wire).unwrap();
        let seg = &wire[5..];
        let opts = LocateOptions {
            known_start: Some(second as u32),
        };
        let got: Vec<_> = locate(PLAIN, 5, seg, opts)
            .map(|r| r.unwrap().fpdu.ulpdu_to_vec())
            .collect();
        assert_eq!(got, [b"second".to_vec(), b"third".to_vec()]);
        let outside = LocateOptions {
            known_start: Some(wire.len() as u32 + 8),
        };
        assert_eq!(locate(PLAIN, 5, seg, outside).count(), 0);
    }
}
