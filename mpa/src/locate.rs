//! Out-of-order FPDU locator (draft §5.4 ways 2 and 3, §11.2; digest §3.8).
//!
//! Given one TCP segment that TCP has committed to keep (MPA-13) and its stream offset,
//! find the complete FPDUs it holds without any state and without copying, so DDP can
//! place them before the gap before them fills (MPA-12, MPA-25):
//!
//! 1. optionally an **aligned start**: the segment begins with an FPDU (what an MPA-aware
//!    sender does, MPA-05). This is a guess, accepted only with CRCs on and a matching CRC;
//!    a failed guess is not an error (unless its CRC matched and a marker disagrees);
//! 2. otherwise, or after a failed guess, the **markers** inside the segment: each one's
//!    FPDUPTR names an FPDU start; the first that lies inside the segment anchors;
//! 3. from the anchor, following FPDUs by **ULPDU_Length**, until one runs past the segment.
//!
//! Each FPDU found is fully verified (length bound, CRC, every marker it contains) and
//! comes with its stream offset (original send order, MPA-01). The anchoring marker must
//! lie inside the FPDU it names, else [`FramingError::MarkerMismatch`] (code 3, MPA-108).
//! After an error the iterator ends; the caller stops delivery on this half connection.

use crate::error::{BufferTooSmall, FramingError};
use crate::fpdu::{decode_fpdu, Decoded, FpduRef, FramingConfig, UlpduRanges};
use crate::marker::{self, distance_to_marker, MARKER_INTERVAL, MARKER_LEN};
use core::ops::Range;

/// How the locator looks for FPDU starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LocateOptions {
    /// Try the segment's first octet as an FPDU start (needs CRCs on to be trusted).
    pub aligned_start: bool,
}

impl Default for LocateOptions {
    fn default() -> Self {
        LocateOptions {
            aligned_start: true,
        }
    }
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
    guess_tried: bool,
    /// Index of the next marker to try as an anchor.
    next_marker: usize,
    done: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Anchor {
    /// The aligned-start guess (failure is not an error).
    Guess,
    /// A marker at this segment index; it must lie inside the first FPDU.
    Marker(usize),
    /// A verified FPDU before this one.
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
        guess_tried: false,
        next_marker: distance_to_marker(seg_offset) as usize,
        done: false,
    }
}

impl<'a> Locator<'a> {
    /// Finds the next anchor: the aligned-start guess first, then markers.
    fn find_anchor(&mut self) -> bool {
        if !self.guess_tried {
            self.guess_tried = true;
            if self.opts.aligned_start && self.cfg.crc && !self.seg.is_empty() {
                self.chain = Some(0);
                self.anchor = Anchor::Guess;
                return true;
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
                Ok(Decoded::Incomplete { .. }) if anchor == Anchor::Guess => self.chain = None,
                Ok(Decoded::Incomplete { .. }) => self.done = true,
                // A guess whose CRC matched but whose markers disagree is an FPDU start
                // with a bad marker (code 3); any other failed guess is just not a start.
                Err(e) if anchor == Anchor::Guess && e != FramingError::MarkerMismatch => {
                    self.chain = None
                }
                Err(error) => {
                    self.done = true;
                    return Some(Err(LocateError { offset, error }));
                }
            }
        }
        None
    }
}
