//! A stateful FPDU sender: [`crate::fpdu::encode_fpdu`] plus the running stream offset and
//! the Responder's send gate (MPA-85).

use crate::crc::CRC_LEN;
use crate::error::EncodeError;
use crate::fpdu::{
    encode_fpdu, encode_fpdu_spaced, encode_fpdu_with, fpdu_wire_len, pad_len, FramingConfig,
    HEADER_LEN, MAX_ULPDU_LEN,
};
use crate::marker::{MARKER_INTERVAL, MARKER_LEN};
use crate::spacing::{Spacing, RUN};

/// What [`Framer::fit`] found: a ULPDU length whose FPDU fits, and that FPDU's wire length
/// at the offset it was asked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fit {
    ulpdu: usize,
    wire: usize,
    offset: u32,
}

impl Fit {
    /// The ULPDU length that fits.
    pub fn ulpdu_len(&self) -> usize {
        self.ulpdu
    }

    /// The wire length of that ULPDU's FPDU at the offset asked at.
    pub fn wire_len(&self) -> usize {
        self.wire
    }
}

/// The wire lengths of FPDUs carrying ULPDUs of one length, at any stream offset: what
/// [`fpdu_wire_len`] gives, the markers counted without a division (for a sender that
/// claims a run of equal FPDUs, asking at each one's offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireLens {
    markers: bool,
    /// ULPDU_Length, ULPDU, PAD and CRC: the length without markers.
    unmarked: u32,
    /// ULPDU_Length, ULPDU and PAD as whole runs between markers, and the octets left over.
    whole_runs: u32,
    rest: u32,
}

impl WireLens {
    /// The lengths for a ULPDU of `ulpdu_len` octets (at most [`MAX_ULPDU_LEN`]) framed as
    /// `cfg` says.
    pub fn new(cfg: FramingConfig, ulpdu_len: usize) -> Self {
        debug_assert!(ulpdu_len <= MAX_ULPDU_LEN);
        let body = (HEADER_LEN + ulpdu_len + pad_len(ulpdu_len)) as u32;
        WireLens {
            markers: cfg.markers,
            unmarked: body + CRC_LEN as u32,
            whole_runs: body / RUN as u32,
            rest: body % RUN as u32,
        }
    }

    /// The wire length of the FPDU starting at stream `offset`, a multiple of 4 with markers
    /// (as every FPDU's start is).
    #[inline]
    pub fn at(self, offset: u32) -> usize {
        if !self.markers {
            return self.unmarked as usize;
        }
        debug_assert_eq!(offset % 4, 0);
        // A leading marker at a marker position; the body's octets before the first other
        // marker; then one marker before each whole run of the body and one more when the
        // rest reaches that first marker's place.
        let into = offset % MARKER_INTERVAL;
        let lead = if into == 0 { MARKER_LEN as u32 } else { 0 };
        let first = MARKER_INTERVAL - into - lead;
        let markers = self.whole_runs + u32::from(self.rest >= first);
        (self.unmarked + lead + MARKER_LEN as u32 * markers) as usize
    }
}

/// Frames consecutive ULPDUs of one send half connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Framer {
    cfg: FramingConfig,
    offset: u32,
    gated: bool,
}

impl Framer {
    /// A framer whose next FPDU starts at stream `offset` (0 = SeqStart).
    pub fn new(cfg: FramingConfig, offset: u32) -> Self {
        Framer {
            cfg,
            offset,
            gated: false,
        }
    }

    /// A framer that refuses to frame until [`Framer::peer_fpdu_received`] is called:
    /// a Responder must receive a valid FPDU before it sends any FPDU or marker (MPA-85).
    pub fn new_gated(cfg: FramingConfig, offset: u32) -> Self {
        Framer {
            cfg,
            offset,
            gated: true,
        }
    }

    /// The framing configuration.
    pub fn config(&self) -> FramingConfig {
        self.cfg
    }

    /// Stream offset of the next FPDU.
    pub fn offset(&self) -> u32 {
        self.offset
    }

    /// True while the Responder gate is closed.
    pub fn is_gated(&self) -> bool {
        self.gated
    }

    /// Opens the gate: the first valid FPDU from the peer has arrived.
    pub fn peer_fpdu_received(&mut self) {
        self.gated = false;
    }

    /// Wire octets the next FPDU would take for a ULPDU of `ulpdu_len` octets.
    pub fn wire_len(&self, ulpdu_len: usize) -> usize {
        fpdu_wire_len(self.cfg, self.offset, ulpdu_len)
    }

    /// As [`Framer::wire_len`], from the lengths of that ULPDU length (debug-checked).
    #[inline]
    pub fn wire_len_from(&self, lens: WireLens) -> usize {
        let wire = lens.at(self.offset);
        debug_assert_eq!(wire, lens_check(self, lens));
        wire
    }

    /// Claims the next FPDU's place in the stream without framing it, for a sender that frames
    /// it later at the same offset with [`encode_fpdu`] (e.g. straight into a packet buffer);
    /// returns its wire length. Framing is a pure function of the offset, so the later bytes are
    /// exactly what [`Framer::encode`] would have produced here.
    pub fn skip(&mut self, ulpdu_len: usize) -> usize {
        let n = self.wire_len(ulpdu_len);
        self.offset = self.offset.wrapping_add(n as u32);
        n
    }

    /// The ULPDU length to frame next at the current offset: `max_ulpdu` (at most `room` and
    /// [`MAX_ULPDU_LEN`]), stepped down by its FPDU's excess over `room` until the FPDU fits
    /// (0 when none does), with that FPDU's wire length.
    pub fn fit(&self, max_ulpdu: usize, room: usize) -> Fit {
        let mut cap = max_ulpdu.min(room).min(MAX_ULPDU_LEN);
        loop {
            let wire = self.wire_len(cap);
            if wire <= room || cap == 0 {
                return Fit {
                    ulpdu: cap,
                    wire,
                    offset: self.offset,
                };
            }
            cap = cap.saturating_sub(wire - room);
        }
    }

    /// As [`Framer::skip`], reusing the wire length [`Framer::fit`] found when the ULPDU is
    /// the one it fitted at this offset.
    pub fn skip_fitted(&mut self, fit: Fit, ulpdu_len: usize) -> usize {
        if fit.offset != self.offset || fit.ulpdu != ulpdu_len {
            return self.skip(ulpdu_len);
        }
        self.offset = self.offset.wrapping_add(fit.wire as u32);
        fit.wire
    }

    /// As [`Framer::skip`], with the wire length [`Framer::wire_len`] gave for `ulpdu_len` at
    /// this offset (debug-checked).
    #[inline]
    pub fn skip_known(&mut self, ulpdu_len: usize, wire: usize) -> usize {
        debug_assert_eq!(wire, self.wire_len(ulpdu_len));
        self.offset = self.offset.wrapping_add(wire as u32);
        wire
    }

    /// Frames the ULPDU (gather list) into `out` and advances the offset; returns the FPDU
    /// length. On error the offset does not move.
    pub fn encode(&mut self, ulpdu: &[&[u8]], out: &mut [u8]) -> Result<usize, EncodeError> {
        if self.gated {
            return Err(EncodeError::AwaitingPeerFpdu);
        }
        let n = encode_fpdu(self.cfg, self.offset, ulpdu, out)?;
        self.offset = self.offset.wrapping_add(n as u32);
        Ok(n)
    }

    /// As [`Framer::encode`], for a ULPDU of `ulpdu_len` octets that `fill` writes piece by
    /// piece ([`encode_fpdu_with`]).
    pub fn encode_with(
        &mut self,
        ulpdu_len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
        out: &mut [u8],
    ) -> Result<usize, EncodeError> {
        if self.gated {
            return Err(EncodeError::AwaitingPeerFpdu);
        }
        let n = encode_fpdu_with(self.cfg, self.offset, ulpdu_len, fill, out)?;
        self.offset = self.offset.wrapping_add(n as u32);
        Ok(n)
    }

    /// As [`Framer::encode_with`], with the whole ULPDU written by one call into its
    /// stretch of the frame ([`encode_fpdu_spaced`]).
    pub fn encode_spaced(
        &mut self,
        ulpdu_len: usize,
        fill: &mut dyn FnMut(&mut [u8], Spacing),
        out: &mut [u8],
    ) -> Result<usize, EncodeError> {
        if self.gated {
            return Err(EncodeError::AwaitingPeerFpdu);
        }
        let n = encode_fpdu_spaced(self.cfg, self.offset, ulpdu_len, fill, out)?;
        self.offset = self.offset.wrapping_add(n as u32);
        Ok(n)
    }

    /// Frames the ULPDU onto the end of `out` (convenience for tests and slow paths).
    pub fn encode_to_vec(
        &mut self,
        ulpdu: &[&[u8]],
        out: &mut Vec<u8>,
    ) -> Result<usize, EncodeError> {
        let len: usize = ulpdu.iter().map(|p| p.len()).sum();
        let start = out.len();
        out.resize(start + self.wire_len(len), 0);
        let r = self.encode(ulpdu, &mut out[start..]);
        if r.is_err() {
            out.truncate(start);
        }
        r
    }
}

/// What [`Framer::wire_len`] gives for the ULPDU length `lens` were made for (for debug
/// checks: the length depends on the body's length only, so the ULPDU that fills it whole).
fn lens_check(framer: &Framer, lens: WireLens) -> usize {
    let body = lens.whole_runs as usize * RUN + lens.rest as usize;
    framer.wire_len(body - HEADER_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lengths without a division are `fpdu_wire_len`'s at every start in an interval
    /// (and across the wrap), for ULPDU lengths around each run boundary, markers on and off.
    #[test]
    fn wire_lens_match_the_layout_at_every_offset() {
        let lens = (0..=40).chain((500..=520).chain(1000..=1030)).chain([
            1448,
            1460,
            8948,
            9000,
            MAX_ULPDU_LEN - 1,
            MAX_ULPDU_LEN,
        ]);
        for markers in [false, true] {
            let cfg = FramingConfig { markers, crc: true };
            for len in lens.clone() {
                let w = WireLens::new(cfg, len);
                let starts = (0..=1024u32).chain(u32::MAX - 600..=u32::MAX);
                for offset in starts.filter(|o| !markers || o % 4 == 0) {
                    assert_eq!(
                        w.at(offset),
                        fpdu_wire_len(cfg, offset, len),
                        "markers {markers} len {len} offset {offset}"
                    );
                }
            }
        }
    }
}
