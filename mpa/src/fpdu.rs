//! FPDU encode/decode (draft §4, §5.1, §5.2, §5.4).
//!
//! Framing is a **pure function** of ([`FramingConfig`], stream offset relative to SeqStart,
//! ULPDU): the same ULPDU framed at the same offset always gives the same octets, so a TCP
//! retransmission can re-frame instead of keeping a copy.
//!
//! Layout of one FPDU (markers on; without markers the marker parts are absent):
//! ```text
//! [leading marker, FPDUPTR 0, iff the FPDU starts on a marker position]
//! ULPDU_Length(2, BE) | ULPDU | PAD(0..3 zeros)      <- a marker at every 512-octet position,
//!                                                       FPDUPTR = its distance from ULPDU_Length
//! [marker right after PAD if that is a marker position: still this FPDU]
//! CRC32c(4, LSB first) over every octet above (markers included)
//! ```
//! A marker position right after the CRC belongs to the *next* FPDU (its leading marker).

use crate::crc::{crc32c, crc_from_wire, crc_to_wire, CRC_LEN};
use crate::error::{BufferTooSmall, EncodeError, FramingError};
use crate::marker::{self, distance_to_marker, is_marker_position, MARKER_INTERVAL, MARKER_LEN};
use crate::spacing::Spacing;
use core::ops::Range;

/// Octets of the ULPDU_Length field.
pub const HEADER_LEN: usize = 2;
/// Largest ULPDU a sender may post and a receiver accepts (MPA-22, A11).
pub const MAX_ULPDU_LEN: usize = 64768;
/// Largest FPDU on the wire (64768-octet ULPDU with all its markers), any offset.
pub const MAX_FPDU_LEN: usize = 65288;

/// ULPDU octets between two markers inside an FPDU body.
const BODY_PER_MARKER: u32 = MARKER_INTERVAL - MARKER_LEN as u32;

/// How one direction frames: markers (peer asked with M=1) and CRC (either side asked with C=1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FramingConfig {
    /// Markers every 512 stream octets.
    pub markers: bool,
    /// CRC generated (send) and checked (receive). When off, the sender writes 0 in the CRC
    /// field and the receiver ignores it (MPA-28, A15).
    pub crc: bool,
}

impl Default for FramingConfig {
    /// No markers, CRC on (MPA-43).
    fn default() -> Self {
        FramingConfig {
            markers: false,
            crc: true,
        }
    }
}

/// PAD octets after a ULPDU of `ulpdu_len` octets: to the next 4-octet boundary (draft §4).
#[inline]
pub fn pad_len(ulpdu_len: usize) -> usize {
    (4 - (HEADER_LEN + ulpdu_len) % 4) % 4
}

/// Where each part of one FPDU sits; a pure function of (markers, offset, ULPDU length).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FpduLayout {
    offset: u32,
    ulpdu_len: u32,
    leading: bool,
    /// Body index (0 = first ULPDU_Length octet) before which the first non-leading marker
    /// goes; `u32::MAX` without markers.
    first_marker: u32,
    /// Non-leading markers (interior ones and the one right after PAD).
    markers: u32,
    wire_len: u32,
}

impl FpduLayout {
    /// The layout of an FPDU of `ulpdu_len` octets starting at stream `offset`.
    pub fn new(markers: bool, offset: u32, ulpdu_len: u16) -> Self {
        Self::compute(markers, offset, u32::from(ulpdu_len))
    }

    fn compute(markers: bool, offset: u32, ulpdu_len: u32) -> Self {
        // ULPDU_Length, ULPDU and PAD: the next multiple of 4.
        let body = (HEADER_LEN as u32 + ulpdu_len + 3) & !3;
        if !markers {
            return FpduLayout {
                offset,
                ulpdu_len,
                leading: false,
                first_marker: u32::MAX,
                markers: 0,
                wire_len: body + CRC_LEN as u32,
            };
        }
        let leading = is_marker_position(offset);
        let lead = if leading { MARKER_LEN as u32 } else { 0 };
        let first = distance_to_marker(offset.wrapping_add(lead));
        // One marker before body index `first` and one every interval after, while the
        // index is at most `body`: none when `body < first` (`first` is at most 511 and
        // `body` at least 4, so the sum never goes below 0).
        let n = (body + BODY_PER_MARKER - first) / BODY_PER_MARKER;
        FpduLayout {
            offset,
            ulpdu_len,
            leading,
            first_marker: first,
            markers: n,
            wire_len: lead + body + MARKER_LEN as u32 * n + CRC_LEN as u32,
        }
    }

    /// Stream offset of the FPDU's first octet.
    pub fn offset(&self) -> u32 {
        self.offset
    }
    /// ULPDU octets (the ULPDU_Length value).
    pub fn ulpdu_len(&self) -> usize {
        self.ulpdu_len as usize
    }
    /// Octets on the wire, markers and CRC included.
    pub fn wire_len(&self) -> usize {
        self.wire_len as usize
    }
    /// True if the FPDU starts with a marker (FPDUPTR 0, MPA-34).
    pub fn has_leading_marker(&self) -> bool {
        self.leading
    }
    /// True if, with markers on, the FPDU ends exactly on a marker position (the next
    /// FPDU then starts with a leading marker). Legal, but tshark 4.0 loses the stream
    /// there (design brief): senders that want a clean capture can size around it.
    pub fn ends_on_marker_position(&self) -> bool {
        self.first_marker != u32::MAX && is_marker_position(self.offset.wrapping_add(self.wire_len))
    }
    /// Position of ULPDU_Length within the FPDU (0, or 4 after a leading marker).
    pub fn header_pos(&self) -> usize {
        if self.leading {
            MARKER_LEN
        } else {
            0
        }
    }
    /// Position of the CRC field within the FPDU.
    pub fn crc_pos(&self) -> usize {
        self.wire_len() - CRC_LEN
    }
    /// Markers inside the FPDU, the leading one included.
    pub fn marker_count(&self) -> usize {
        (self.markers + u32::from(self.leading)) as usize
    }
    /// How markers interrupt the ULPDU, which starts at [`Self::header_pos`] + 2.
    pub fn ulpdu_spacing(&self) -> Spacing {
        if self.first_marker == u32::MAX {
            Spacing::CONTIGUOUS
        } else {
            Spacing::new(self.first_marker.saturating_sub(HEADER_LEN as u32) as usize)
        }
    }
    /// The ULPDU as byte ranges of the FPDU, in order, skipping markers (no copy).
    pub fn ulpdu_ranges(&self) -> UlpduRanges {
        UlpduRanges {
            pos: HEADER_LEN as u32,
            end: HEADER_LEN as u32 + self.ulpdu_len,
            next_marker: self.first_marker,
            markers_before: 0,
            lead: self.header_pos() as u32,
        }
    }
    /// The markers of this FPDU with the pointer each must carry.
    pub fn marker_slots(&self) -> MarkerSlots {
        MarkerSlots {
            leading: self.leading,
            lead: self.header_pos() as u32,
            first: self.first_marker,
            next: 0,
            count: self.markers,
        }
    }
}

/// Iterator over the ULPDU's byte ranges within its FPDU (see [`FpduLayout::ulpdu_ranges`]).
#[derive(Debug, Clone)]
pub struct UlpduRanges {
    pos: u32,
    end: u32,
    next_marker: u32,
    markers_before: u32,
    lead: u32,
}

impl Iterator for UlpduRanges {
    type Item = Range<usize>;
    fn next(&mut self) -> Option<Range<usize>> {
        if self.pos >= self.end {
            return None;
        }
        while self.next_marker <= self.pos {
            self.markers_before += 1;
            self.next_marker = self.next_marker.saturating_add(BODY_PER_MARKER);
        }
        let stop = self.end.min(self.next_marker);
        let wire = (self.lead + self.pos + MARKER_LEN as u32 * self.markers_before) as usize;
        let r = wire..wire + (stop - self.pos) as usize;
        self.pos = stop;
        Some(r)
    }
}

/// One marker of an FPDU: its position in the FPDU and the FPDUPTR a sender writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkerSlot {
    /// Position of the marker's first octet within the FPDU.
    pub pos: usize,
    /// FPDUPTR as we send it: 0 for a leading marker, else the distance back to ULPDU_Length.
    pub fpduptr: u16,
    /// The draft-literal alternative of ambiguity A1 (distance back to the FPDU's leading
    /// marker); equal to `fpduptr` when there is no leading marker.
    pub fpduptr_literal: u16,
}

impl MarkerSlot {
    /// Whether a received (raw) FPDUPTR agrees with this slot; low bits masked (MPA-35),
    /// both A1 variants accepted.
    pub fn accepts(&self, raw: u16) -> bool {
        let p = raw & marker::FPDUPTR_MASK;
        p == self.fpduptr || p == self.fpduptr_literal
    }
}

/// Iterator over an FPDU's markers (see [`FpduLayout::marker_slots`]).
#[derive(Debug, Clone)]
pub struct MarkerSlots {
    leading: bool,
    lead: u32,
    first: u32,
    next: u32,
    count: u32,
}

impl Iterator for MarkerSlots {
    type Item = MarkerSlot;
    fn next(&mut self) -> Option<MarkerSlot> {
        if self.leading {
            self.leading = false;
            return Some(MarkerSlot {
                pos: 0,
                fpduptr: 0,
                fpduptr_literal: 0,
            });
        }
        if self.next >= self.count {
            return None;
        }
        let lead = self.lead;
        let rel = self.first + MARKER_INTERVAL * self.next;
        self.next += 1;
        Some(MarkerSlot {
            pos: (lead + rel) as usize,
            fpduptr: rel as u16,
            fpduptr_literal: (lead + rel) as u16,
        })
    }
}

/// Whether an FPDU can start at stream `offset` with markers on: a multiple of 4 and not
/// 4 octets past a marker position (the octets there always follow a marker, which is a
/// leading marker of an FPDU that began 4 octets earlier, or an interior one). Without
/// markers every offset is valid.
pub fn is_valid_start(offset: u32) -> bool {
    offset & 3 == 0 && offset % MARKER_INTERVAL != MARKER_LEN as u32
}

/// Octets the FPDU carrying a ULPDU of `ulpdu_len` octets takes on the wire at `offset`.
#[inline]
pub fn fpdu_wire_len(cfg: FramingConfig, offset: u32, ulpdu_len: usize) -> usize {
    if !cfg.markers && ulpdu_len <= MAX_ULPDU_LEN {
        // Without markers the offset does not matter: length, ULPDU, PAD, CRC.
        return HEADER_LEN + ulpdu_len + pad_len(ulpdu_len) + CRC_LEN;
    }
    let len = ulpdu_len.min(u32::MAX as usize / 2) as u32;
    FpduLayout::compute(cfg.markers, offset, len).wire_len()
}

/// Frames one ULPDU, given as a gather list (e.g. DDP header, then payload), into `out`
/// as the FPDU that starts at stream `offset`: one copy of the ULPDU with the markers put in
/// on the way, then the CRC over the output just written. Returns the FPDU length. On error nothing meaningful is written.
pub fn encode_fpdu(
    cfg: FramingConfig,
    offset: u32,
    ulpdu: &[&[u8]],
    out: &mut [u8],
) -> Result<usize, EncodeError> {
    let len: usize = ulpdu.iter().map(|p| p.len()).sum();
    let (mut part, mut at) = (0, 0);
    encode_fpdu_with(
        cfg,
        offset,
        len,
        &mut |dst| {
            let mut done = 0;
            while done < dst.len() {
                let src = &ulpdu[part][at..];
                let n = src.len().min(dst.len() - done);
                dst[done..done + n].copy_from_slice(&src[..n]);
                done += n;
                at += n;
                if at == ulpdu[part].len() {
                    part += 1;
                    at = 0;
                }
            }
        },
        out,
    )
}

/// As [`encode_fpdu`], for a ULPDU of `ulpdu_len` octets that `fill` writes: it is called
/// with consecutive pieces of the FPDU body (the ULPDU, in order, cut at marker positions)
/// and must fill each completely. For a sender whose ULPDU lives where it may not be
/// borrowed (memory a peer or device may write): the one copy goes straight into the frame.
pub fn encode_fpdu_with(
    cfg: FramingConfig,
    offset: u32,
    ulpdu_len: usize,
    fill: &mut dyn FnMut(&mut [u8]),
    out: &mut [u8],
) -> Result<usize, EncodeError> {
    encode_fpdu_spaced(
        cfg,
        offset,
        ulpdu_len,
        &mut |dst, spacing| {
            for (_, r) in spacing.runs(ulpdu_len) {
                fill(&mut dst[r]);
            }
        },
        out,
    )
}

/// As [`encode_fpdu_with`], with the whole ULPDU written by one call: `fill` gets the
/// stretch of the frame the ULPDU takes, markers' slots included, and its [`Spacing`], and
/// must write the ULPDU's `ulpdu_len` octets into the runs ([`Spacing::copy_in`]); the
/// markers go into the slots afterwards, so the cost of markers is per marker, not per piece.
/// Inlined whole: a caller with a known `fill` then calls it directly, not through the
/// `dyn` (a caller that knows whether markers are on takes [`encode_fpdu_marked`] or
/// [`encode_fpdu_unmarked`], where `fill` itself is inlined).
#[inline(always)]
pub fn encode_fpdu_spaced(
    cfg: FramingConfig,
    offset: u32,
    ulpdu_len: usize,
    fill: &mut dyn FnMut(&mut [u8], Spacing),
    out: &mut [u8],
) -> Result<usize, EncodeError> {
    let len = ulpdu_len;
    if len > MAX_ULPDU_LEN {
        return Err(EncodeError::UlpduTooLong(len));
    }
    if !cfg.markers {
        return encode_unmarked(cfg.crc, len, fill, out);
    }
    encode_marked(cfg.crc, offset, len, |dst, spacing| fill(dst, spacing), out)
}

/// Frames a ULPDU of `ulpdu_len` octets with markers as the FPDU that starts at stream
/// `offset`: `fill` writes the ULPDU into the runs of the stretch it gets, as for
/// [`encode_fpdu_spaced`] (not called for an empty ULPDU). The same octets as
/// [`encode_fpdu_spaced`] with markers on; generic, so a known `fill` is inlined.
#[inline(always)]
pub fn encode_fpdu_marked(
    crc: bool,
    offset: u32,
    ulpdu_len: usize,
    fill: impl FnOnce(&mut [u8], Spacing),
    out: &mut [u8],
) -> Result<usize, EncodeError> {
    if ulpdu_len > MAX_ULPDU_LEN {
        return Err(EncodeError::UlpduTooLong(ulpdu_len));
    }
    encode_marked(crc, offset, ulpdu_len, fill, out)
}

/// [`encode_fpdu_spaced`] with markers, for a ULPDU of at most [`MAX_ULPDU_LEN`] octets.
#[inline(always)]
fn encode_marked(
    crc: bool,
    offset: u32,
    len: usize,
    fill: impl FnOnce(&mut [u8], Spacing),
    out: &mut [u8],
) -> Result<usize, EncodeError> {
    if !is_valid_start(offset) {
        return Err(EncodeError::Misaligned);
    }
    let layout = FpduLayout::new(true, offset, len as u16);
    let wire_len = layout.wire_len();
    let Some(out) = out.get_mut(..wire_len) else {
        return Err(EncodeError::BufferTooSmall { needed: wire_len });
    };
    let header = layout.header_pos();
    out[header..header + HEADER_LEN].copy_from_slice(&(len as u16).to_be_bytes());
    // A valid start puts the first non-leading marker at least 4 body octets in, after
    // ULPDU_Length (body indices and marker positions are multiples of 4).
    let spacing = layout.ulpdu_spacing();
    let ulpdu = header + HEADER_LEN;
    let crc_pos = layout.crc_pos();
    // The ULPDU ends where PAD starts: right after its last octet when no marker interrupts
    // it, else PAD's length and that of the marker that sits right before the CRC (when the
    // CRC's place would be a marker position) before the CRC (no division by the run length).
    let end = if layout.markers == 0 {
        ulpdu + len
    } else {
        let after_pad = offset.wrapping_add((crc_pos - MARKER_LEN) as u32);
        let after_pad = if is_marker_position(after_pad) {
            MARKER_LEN
        } else {
            0
        };
        crc_pos - after_pad - pad_len(len)
    };
    debug_assert_eq!(end, ulpdu + spacing.span(len));
    if len > 0 {
        fill(&mut out[ulpdu..end], spacing);
    }
    // PAD never holds a marker: it ends on the first multiple of 4 after the ULPDU. At least
    // 4 octets (the CRC) follow the ULPDU, so three zeros always fit; what lies past PAD
    // (a marker slot or the CRC) is written below.
    out[end..end + 3].fill(0);
    if layout.leading {
        out[..MARKER_LEN].copy_from_slice(&marker::Repr::to_bytes(0));
    }
    // The non-leading markers, as `marker_slots` gives them: every slot one interval apart
    // from the first that ends before the CRC, each as one big-endian word: RESERVED 0,
    // FPDUPTR its body index (below 2^16: the FPDU is shorter than that).
    if layout.markers > 0 {
        let body = &mut out[header..crc_pos];
        // `at` a u32, so that `at + MARKER_LEN` cannot overflow a usize (no check for it).
        let mut at = layout.first_marker;
        while at as usize + MARKER_LEN <= body.len() {
            let slot = at as usize;
            body[slot..slot + MARKER_LEN].copy_from_slice(&at.to_be_bytes());
            at += MARKER_INTERVAL;
        }
        debug_assert_eq!(
            ((at - layout.first_marker) / MARKER_INTERVAL) as usize,
            layout.markers as usize
        );
    }
    // The CRC covers exactly the contiguous octets written so far (markers included), so
    // one call over the freshly written (cache-hot) output is both simplest and fastest:
    // the crc32c crate's long-buffer path beats per-chunk updates at marker boundaries.
    let crc = if crc { crc32c(&out[..crc_pos]) } else { 0 };
    out[crc_pos..].copy_from_slice(&crc_to_wire(crc));
    Ok(wire_len)
}

/// [`encode_fpdu_spaced`] without markers (the layout then does not depend on the offset):
/// ULPDU_Length, the ULPDU in one piece, PAD, CRC.
#[inline(always)]
fn encode_unmarked(
    crc: bool,
    len: usize,
    fill: &mut dyn FnMut(&mut [u8], Spacing),
    out: &mut [u8],
) -> Result<usize, EncodeError> {
    encode_fpdu_unmarked(crc, len, |dst| fill(dst, Spacing::CONTIGUOUS), out)
}

/// Frames a ULPDU of `ulpdu_len` octets without markers (the FPDU is the same at every
/// stream offset): ULPDU_Length, the ULPDU that `fill` writes into the one contiguous
/// stretch it gets (not called for an empty ULPDU), PAD, and the CRC when `crc`. The same
/// octets as [`encode_fpdu_spaced`] with markers off; generic, so a known `fill` is inlined.
#[inline(always)]
pub fn encode_fpdu_unmarked(
    crc: bool,
    ulpdu_len: usize,
    fill: impl FnOnce(&mut [u8]),
    out: &mut [u8],
) -> Result<usize, EncodeError> {
    let len = ulpdu_len;
    if len > MAX_ULPDU_LEN {
        return Err(EncodeError::UlpduTooLong(len));
    }
    let body = HEADER_LEN + len;
    let crc_pos = body + pad_len(len);
    let wire_len = crc_pos + CRC_LEN;
    let Some(out) = out.get_mut(..wire_len) else {
        return Err(EncodeError::BufferTooSmall { needed: wire_len });
    };
    out[..HEADER_LEN].copy_from_slice(&(len as u16).to_be_bytes());
    if len > 0 {
        fill(&mut out[HEADER_LEN..body]);
    }
    // PAD, and up to 3 octets of the CRC field, written below.
    out[body..body + 3].fill(0);
    let crc = if crc { crc32c(&out[..crc_pos]) } else { 0 };
    out[crc_pos..].copy_from_slice(&crc_to_wire(crc));
    Ok(wire_len)
}

/// Result of looking at the start of a buffer for one FPDU.
#[derive(Debug, Clone, Copy)]
pub enum Decoded<'a> {
    /// A whole, verified FPDU.
    Complete(FpduRef<'a>),
    /// Not enough octets yet: at least `needed` octets (from the FPDU start) are required.
    Incomplete {
        /// Octets needed from the FPDU start.
        needed: usize,
    },
}

/// Decodes the FPDU that starts at the beginning of `buf`, at stream `offset`. Checks the
/// length bound (A11), the CRC if on (code 2) and every marker's FPDUPTR (code 3). Never
/// reads past `buf` and never panics; nothing is delivered before the last CRC octet
/// (MPA-71).
pub fn decode_fpdu(
    cfg: FramingConfig,
    offset: u32,
    buf: &[u8],
) -> Result<Decoded<'_>, FramingError> {
    if cfg.markers && !is_valid_start(offset) {
        return Err(FramingError::Misaligned);
    }
    let lead = if cfg.markers && is_marker_position(offset) {
        MARKER_LEN
    } else {
        0
    };
    let Some(h) = buf.get(lead..lead + HEADER_LEN) else {
        return Ok(Decoded::Incomplete {
            needed: lead + HEADER_LEN,
        });
    };
    let len = u16::from_be_bytes([h[0], h[1]]);
    if usize::from(len) > MAX_ULPDU_LEN {
        return Err(FramingError::UlpduTooLong(len));
    }
    let layout = FpduLayout::new(cfg.markers, offset, len);
    let Some(wire) = buf.get(..layout.wire_len()) else {
        return Ok(Decoded::Incomplete {
            needed: layout.wire_len(),
        });
    };
    verify(cfg, &layout, wire)?;
    Ok(Decoded::Complete(FpduRef { layout, wire }))
}

/// Checks CRC (code 2) then markers (code 3) of a whole FPDU.
fn verify(cfg: FramingConfig, layout: &FpduLayout, wire: &[u8]) -> Result<(), FramingError> {
    let crc_pos = layout.crc_pos();
    if cfg.crc {
        let got = crc_from_wire([
            wire[crc_pos],
            wire[crc_pos + 1],
            wire[crc_pos + 2],
            wire[crc_pos + 3],
        ]);
        if crc32c(&wire[..crc_pos]) != got {
            return Err(FramingError::CrcMismatch);
        }
    }
    // A leading marker's FPDUPTR is 0 whichever origin is read (A1); low bits masked.
    if layout.leading && u16::from_be_bytes([wire[2], wire[3]]) & marker::FPDUPTR_MASK != 0 {
        return Err(FramingError::MarkerMismatch);
    }
    // The non-leading markers, as `marker_slots` gives them: every slot one interval apart
    // from the first that ends before the CRC. Each carries its distance back to
    // ULPDU_Length, or (A1) to the leading marker before it; RESERVED is not checked
    // (MPA-30): FPDUPTR is the word's low half.
    if layout.markers == 0 {
        return Ok(());
    }
    let lead = layout.header_pos();
    let body = &wire[lead..crc_pos];
    // The slots that end in `body` (the loop test is the slice's bounds check; `at` a u32,
    // so that `at + MARKER_LEN` cannot overflow a usize).
    let mut at = layout.first_marker;
    while at as usize + MARKER_LEN <= body.len() {
        let slot = at as usize;
        let m = &body[slot..slot + MARKER_LEN];
        let ptr = u32::from_be_bytes([m[0], m[1], m[2], m[3]]) as u16 & marker::FPDUPTR_MASK;
        let d = ptr.wrapping_sub(at as u16);
        if d != 0 && d != lead as u16 {
            return Err(FramingError::MarkerMismatch);
        }
        at += MARKER_INTERVAL;
    }
    Ok(())
}

/// A verified FPDU borrowed from a receive buffer: its stream position and its ULPDU as
/// ranges of the wire octets (markers skipped, nothing copied).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FpduRef<'a> {
    layout: FpduLayout,
    wire: &'a [u8],
}

impl<'a> FpduRef<'a> {
    /// Stream offset (relative to SeqStart) of the FPDU's first octet: the original send
    /// order of ULPDUs (MPA-01).
    pub fn offset(&self) -> u32 {
        self.layout.offset
    }
    /// Stream offset just past the FPDU (where the next one starts).
    pub fn end_offset(&self) -> u32 {
        self.layout.offset.wrapping_add(self.layout.wire_len)
    }
    /// ULPDU length (MPA-24).
    pub fn ulpdu_len(&self) -> usize {
        self.layout.ulpdu_len()
    }
    /// Octets the FPDU takes on the wire.
    pub fn wire_len(&self) -> usize {
        self.wire.len()
    }
    /// The layout.
    pub fn layout(&self) -> &FpduLayout {
        &self.layout
    }
    /// The FPDU's wire octets, markers, PAD and CRC included.
    pub fn wire(&self) -> &'a [u8] {
        self.wire
    }
    /// The ULPDU as ranges of [`Self::wire`] (markers skipped).
    pub fn ulpdu_ranges(&self) -> UlpduRanges {
        self.layout.ulpdu_ranges()
    }
    /// The ULPDU's stretch of the wire octets, markers' slots inside it included, and how
    /// the markers interrupt it: the ULPDU is the runs [`Spacing::runs`] gives for
    /// [`Self::ulpdu_len`] octets.
    pub fn ulpdu_spaced(&self) -> (&'a [u8], Spacing) {
        let spacing = self.layout.ulpdu_spacing();
        let start = self.layout.header_pos() + HEADER_LEN;
        let end = start + spacing.span(self.ulpdu_len());
        (&self.wire[start..end], spacing)
    }
    /// The ULPDU as slices, markers skipped (MPA-41).
    pub fn ulpdu_chunks(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let wire = self.wire;
        self.layout.ulpdu_ranges().map(move |r| &wire[r])
    }
    /// The ULPDU as one slice when no marker splits it (the common aligned case).
    pub fn ulpdu_contiguous(&self) -> Option<&'a [u8]> {
        let mut it = self.layout.ulpdu_ranges();
        match (it.next(), it.next()) {
            (None, _) => Some(&[]),
            (Some(r), None) => Some(&self.wire[r]),
            _ => None,
        }
    }
    /// Copies the ULPDU (markers removed) to the front of `out`; returns its length.
    pub fn copy_ulpdu(&self, out: &mut [u8]) -> Result<usize, BufferTooSmall> {
        let n = self.ulpdu_len();
        if out.len() < n {
            return Err(BufferTooSmall { needed: n });
        }
        let mut at = 0;
        for c in self.ulpdu_chunks() {
            out[at..at + c.len()].copy_from_slice(c);
            at += c.len();
        }
        Ok(at)
    }
    /// The ULPDU in a new vector (tests, slow paths).
    pub fn ulpdu_to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.ulpdu_len());
        self.ulpdu_chunks().for_each(|c| v.extend_from_slice(c));
        v
    }

    pub(crate) fn from_parts(layout: FpduLayout, wire: &'a [u8]) -> Self {
        FpduRef { layout, wire }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without markers the FPDU framed from a contiguous fill is the one `encode_fpdu`
    /// frames at any offset, CRC on and off, at lengths around every PAD length; too long a
    /// ULPDU or too small an output is refused alike.
    #[test]
    fn unmarked_framing_equals_the_general_encoder() {
        for crc in [true, false] {
            let cfg = FramingConfig {
                markers: false,
                crc,
            };
            for len in (0..40)
                .chain(1440..1450)
                .chain([MAX_ULPDU_LEN, MAX_ULPDU_LEN + 1])
            {
                let ulpdu: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
                let mut want = vec![0xeeu8; MAX_FPDU_LEN + 8];
                let w = encode_fpdu(cfg, 1000, &[&ulpdu], &mut want);
                let mut got = vec![0xeeu8; MAX_FPDU_LEN + 8];
                let fill = |dst: &mut [u8]| dst.copy_from_slice(&ulpdu);
                let g = encode_fpdu_unmarked(crc, len, fill, &mut got);
                assert_eq!(g, w, "len {len}");
                assert_eq!(got, want, "len {len}");
                let Ok(n) = w else { continue };
                let fill = |dst: &mut [u8]| dst.copy_from_slice(&ulpdu);
                let short = encode_fpdu_unmarked(crc, len, fill, &mut got[..n - 1]);
                assert_eq!(short, encode_fpdu(cfg, 0, &[&ulpdu], &mut want[..n - 1]));
            }
        }
    }

    /// With markers the FPDU framed from a spaced fill is the one `encode_fpdu` frames, at
    /// every valid start of an interval, CRC on and off, at lengths around the run and PAD
    /// boundaries; too long a ULPDU, a misaligned start or too small an output is refused alike.
    #[test]
    fn marked_framing_equals_the_general_encoder() {
        for crc in [true, false] {
            let cfg = FramingConfig { markers: true, crc };
            for offset in (0..516u32).step_by(4).chain([3, 2054]) {
                for len in (0..8)
                    .chain(500..512)
                    .chain(1440..1446)
                    .chain([MAX_ULPDU_LEN, MAX_ULPDU_LEN + 1])
                {
                    let ulpdu: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
                    let mut want = vec![0xeeu8; MAX_FPDU_LEN + 8];
                    let w = encode_fpdu(cfg, offset, &[&ulpdu], &mut want);
                    let mut got = vec![0xeeu8; MAX_FPDU_LEN + 8];
                    let fill = |dst: &mut [u8], sp: Spacing| sp.copy_in(&ulpdu, dst);
                    let g = encode_fpdu_marked(crc, offset, len, fill, &mut got);
                    assert_eq!(g, w, "offset {offset} len {len}");
                    assert_eq!(got, want, "offset {offset} len {len}");
                    let Ok(n) = w else { continue };
                    let fill = |dst: &mut [u8], sp: Spacing| sp.copy_in(&ulpdu, dst);
                    let short = encode_fpdu_marked(crc, offset, len, fill, &mut got[..n - 1]);
                    let want_short = encode_fpdu(cfg, offset, &[&ulpdu], &mut want[..n - 1]);
                    assert_eq!(short, want_short, "offset {offset} len {len}");
                }
            }
        }
    }

    /// The layout's markers and wire length agree with a walk over the FPDU's octets (a
    /// marker wherever the stream offset is a multiple of 512, before a body octet or right
    /// after PAD), at every offset of an interval and at lengths around every boundary.
    #[test]
    fn layout_matches_an_octet_walk() {
        let lens = (0..24)
            .chain(500..520)
            .chain(1010..1030)
            .chain(1440..1450)
            .chain([8960, MAX_ULPDU_LEN as u32]);
        let lens: Vec<u32> = lens.collect();
        for offset in 0..512u32 {
            for &len in &lens {
                let body = HEADER_LEN as u32 + len + pad_len(len as usize) as u32;
                let (mut at, mut markers) = (0u32, 0);
                for _ in 0..=body {
                    if is_marker_position(offset.wrapping_add(at)) {
                        at += MARKER_LEN as u32;
                        markers += 1;
                    }
                    at += 1;
                }
                let wire = at - 1 + CRC_LEN as u32;
                let l = FpduLayout::new(true, offset, len as u16);
                assert_eq!(l.wire_len(), wire as usize, "offset {offset} len {len}");
                assert_eq!(l.marker_count(), markers, "offset {offset} len {len}");
                let plain = FpduLayout::new(false, offset, len as u16);
                assert_eq!(plain.wire_len(), (body + 4) as usize, "len {len}");
            }
        }
    }
}
