//! Receive: in-order octets through MPA's stream parser, or FPDUs the transport located out of
//! order; each ULPDU is placed at once and delivered in stream order.

use std::time::Instant;

use mpa::{FpduRef, Framer, FramingConfig, FramingError, LocateOptions};

use crate::ddp::memory::Memory;
use crate::ddp::stag_table::StagTable;
use crate::rdmap::engine::RdmapEngine;
use crate::rdmap::term_code::{LlpError, TermCode};

use super::{Phase, Qp, QpEvent, Startup, MAX_CHAIN_STARTS};

impl Qp {
    /// Feed in-order stream octets (any segmentation): startup frame first, then FPDUs, which
    /// are placed and delivered at once. Everything is consumed. Inlined: it runs once per
    /// segment received.
    #[inline(always)]
    pub fn handle_rx_bytes<M: Memory + ?Sized>(
        &mut self,
        tags: &mut StagTable,
        mem: &mut M,
        now: Instant,
        mut data: &[u8],
    ) {
        if let Phase::Startup(s) = &mut self.phase {
            let used = match s {
                Startup::Initiator(i) => i.handle_input(now, data),
                Startup::Responder(r) => r.handle_input(now, data),
            };
            self.rx_total += used as u64;
            data = &data[used..];
            self.pump_startup();
        }
        let Phase::Operational { framer, parser, .. } = &mut self.phase else {
            return;
        };
        let (engine, at) = (&mut self.engine, &mut self.rx_fpdu_pos);
        let fast = self.cfg.fast_path;
        // The in-order fast path: the whole FPDUs at the front of `data`, the parser at an FPDU
        // boundary (all a sender that aligns FPDUs with segments sends, MPA-58), are verified
        // where they lie and placed one after the other in this loop, an RDMA Write's payload
        // copied to its place at once. The parser's feed takes the rest.
        let mut taken = 0;
        while fast && taken < data.len() {
            match parser.next_fpdu_in_place(&data[taken..]) {
                Ok(Some(f)) => {
                    taken += f.wire_len();
                    place_fpdu(engine, framer, at, tags, mem, &f, true);
                }
                Ok(None) => break,
                Err(e) => return self.handle_framing_error(e),
            }
        }
        // Otherwise complete FPDUs are verified and placed straight from the segment; only an
        // FPDU split across segments is copied (mpa's StreamParser::feed).
        if taken < data.len() {
            match parser.feed(&data[taken..], &mut |f| {
                place_fpdu(engine, framer, at, tags, mem, &f, fast)
            }) {
                Ok(took) => taken += took,
                Err(e) => return self.handle_framing_error(e),
            }
        }
        self.rx_total += taken as u64;
        self.prune_chain_starts();
    }

    /// Framing of what we receive (for MPA's out-of-order locator), once established.
    pub fn rx_framing(&self) -> Option<FramingConfig> {
        match &self.phase {
            Phase::Operational { parser, .. } => Some(parser.config()),
            _ => None,
        }
    }

    /// Out-of-order path for one TCP segment the transport has committed to keep, whose first
    /// octet is at receive offset `seg_pos`. MPA's locator finds the complete FPDUs in it ONLY
    /// from an FPDU start the ULPDU_Length chain already reached (the in-order parser's next
    /// FPDU once its length is in, or the end of an FPDU located out of order before) or from
    /// the markers (MPA-70); it never guesses. Each verified ULPDU is placed now and the end of
    /// the last one becomes a known chain start. Returns how many FPDUs were found; none when
    /// neither anchor reaches the segment (it then waits for in-order delivery). Delivery waits
    /// for [`Qp::deliver_through`]. A framing error stops the stream at once (MPA-111), as the
    /// in-order path does.
    pub fn handle_segment<M: Memory + ?Sized>(
        &mut self,
        tags: &StagTable,
        mem: &mut M,
        seg_pos: u64,
        seg: &[u8],
    ) -> usize {
        let Phase::Operational { parser, .. } = &self.phase else {
            return 0;
        };
        let cfg = parser.config();
        if seg_pos < self.rx_seq_start || self.is_error() {
            return 0;
        }
        let seg_end = seg_pos + seg.len() as u64;
        // In order, the chain is at `rx_fpdu_pos` (the parser's next FPDU, its `next_offset`)
        // and, once that FPDU's length is in, at its end.
        let in_order_next = parser
            .pending_end()
            .map(|e| self.rx_fpdu_pos + u64::from(e.wrapping_sub(parser.next_offset())));
        let known = [Some(self.rx_fpdu_pos), in_order_next]
            .into_iter()
            .flatten()
            .chain(self.chain_starts.range(seg_pos..seg_end).next().copied())
            .filter(|&k| k >= seg_pos && k < seg_end)
            .min();
        let to_off = |pos: u64| (pos - self.rx_seq_start) as u32;
        let seg_off = to_off(seg_pos);
        let opts = LocateOptions {
            known_start: known.map(to_off),
        };
        let mut found = 0;
        let mut chain_end = None;
        for item in mpa::locate(cfg, seg_off, seg, opts) {
            match item {
                Ok(f) => {
                    let pos = seg_pos + u64::from(f.fpdu.offset().wrapping_sub(seg_off));
                    found += 1;
                    chain_end = Some(pos + f.fpdu.wire_len() as u64);
                    with_parts(f.segment_ranges().map(|r| &seg[r]), |parts| {
                        self.handle_ulpdu_parts(tags, mem, pos, parts)
                    });
                    if self.is_error() {
                        // DDP-82: nothing after the error is placed, not even in this segment.
                        break;
                    }
                }
                Err(e) => {
                    self.handle_framing_error(e.error);
                    break;
                }
            }
        }
        if let Some(end) = chain_end {
            if self.chain_starts.len() < MAX_CHAIN_STARTS {
                self.chain_starts.insert(end);
            }
        }
        found
    }

    /// Forgets remembered chain starts the in-order point has passed.
    #[inline(always)]
    fn prune_chain_starts(&mut self) {
        if self
            .chain_starts
            .first()
            .is_some_and(|&s| s < self.rx_total)
        {
            self.prune_passed_chain_starts();
        }
    }

    /// [`Qp::prune_chain_starts`] once the first start is passed.
    #[inline(never)]
    fn prune_passed_chain_starts(&mut self) {
        while self
            .chain_starts
            .first()
            .is_some_and(|&s| s < self.rx_total)
        {
            self.chain_starts.pop_first();
        }
    }

    /// Hand in one ULPDU located and CRC-checked by the transport, starting (its FPDU) at
    /// receive offset `stream_pos`, possibly out of order. It is placed now; see
    /// [`Qp::deliver_through`]. Ignored before establishment.
    pub fn handle_ulpdu<M: Memory + ?Sized>(
        &mut self,
        tags: &StagTable,
        mem: &mut M,
        stream_pos: u64,
        ulpdu: &[u8],
    ) {
        let Phase::Operational { framer, .. } = &mut self.phase else {
            return;
        };
        framer.peer_fpdu_received();
        self.engine.handle_ulpdu(tags, mem, stream_pos, ulpdu);
    }

    /// As [`Qp::handle_ulpdu`] for a ULPDU given as the pieces between MPA markers: each piece
    /// is copied straight into its place.
    pub fn handle_ulpdu_parts<M: Memory + ?Sized>(
        &mut self,
        tags: &StagTable,
        mem: &mut M,
        stream_pos: u64,
        parts: &[&[u8]],
    ) {
        let Phase::Operational { framer, .. } = &mut self.phase else {
            return;
        };
        framer.peer_fpdu_received();
        self.engine.handle_ulpdu_parts(tags, mem, stream_pos, parts);
    }

    /// Every receive octet before `stream_pos` has arrived and been handed in: deliver in order.
    pub fn deliver_through(&mut self, tags: &mut StagTable, stream_pos: u64) {
        self.engine.deliver_through(tags, stream_pos);
    }

    /// The transport reports an MPA framing error it found itself (out-of-order path).
    pub fn handle_framing_error(&mut self, e: FramingError) {
        if !self.is_error() {
            self.events.push_back(QpEvent::FramingError(e));
            self.engine.terminate_with(llp_code(e));
        }
    }
}

/// Places the verified in-order FPDU `f`, which starts at receive position `*at`, and
/// delivers through it; `*at` moves past it. The pieces between markers go straight to their
/// places (no copy); with `fast`, through the engine's in-order fast path. (Inlined into both
/// receive loops of [`Qp::handle_rx_bytes`].)
#[inline(always)]
fn place_fpdu<M: Memory + ?Sized>(
    engine: &mut RdmapEngine,
    framer: &mut Framer,
    at: &mut u64,
    tags: &mut StagTable,
    mem: &mut M,
    f: &FpduRef<'_>,
    fast: bool,
) {
    let pos = *at;
    *at += f.wire_len() as u64;
    framer.peer_fpdu_received();
    if !fast {
        with_parts(f.ulpdu_chunks(), |parts| {
            engine.handle_ulpdu_parts(tags, mem, pos, parts)
        });
        engine.deliver_through(tags, pos + 1);
    } else {
        let (stretch, spacing) = f.ulpdu_spaced();
        if !engine.quiet_at(pos) {
            // Records wait for delivery, or an error: the general in-order path.
            with_parts(f.ulpdu_chunks(), |parts| {
                engine.handle_other_in_order(tags, mem, pos, parts)
            });
        } else if engine.place_write_quiet(tags, mem, pos, stretch, f.ulpdu_len(), spacing) {
            // An RDMA Write: its payload is in place.
        } else if stretch.len() == f.ulpdu_len() {
            // No marker inside the ULPDU: one slice.
            engine.handle_quiet_in_order(tags, mem, pos, &[stretch]);
        } else {
            with_parts(f.ulpdu_chunks(), |parts| {
                engine.handle_quiet_in_order(tags, mem, pos, parts)
            });
        }
    }
}

/// Most pieces a ULPDU splits into between markers: a 64768-octet ULPDU spans at most 128
/// markers (one per 512 stream octets), so 129 pieces.
const MAX_PARTS: usize = 130;

/// Pieces gathered on the stack before the full-size array is needed (markers every 512
/// octets: up to a 3,500-octet ULPDU).
const FEW_PARTS: usize = 8;

/// Runs `f` on a ULPDU's pieces (at most [`MAX_PARTS`]). Most ULPDUs are one piece (no
/// markers) or a few: those are gathered in a short array, since initialising the full one
/// (2 KiB) for every FPDU cost more than placing a small one.
fn with_parts<'a, R>(
    chunks: impl Iterator<Item = &'a [u8]>,
    f: impl FnOnce(&[&'a [u8]]) -> R,
) -> R {
    let mut chunks = chunks.take(MAX_PARTS);
    let mut few: [&[u8]; FEW_PARTS] = [&[]; FEW_PARTS];
    for (n, slot) in few.iter_mut().enumerate() {
        match chunks.next() {
            Some(c) => *slot = c,
            None => return f(&few[..n]),
        }
    }
    let mut all: [&[u8]; MAX_PARTS] = [&[]; MAX_PARTS];
    all[..FEW_PARTS].copy_from_slice(&few);
    let mut n = FEW_PARTS;
    for c in chunks {
        all[n] = c;
        n += 1;
    }
    f(&all[..n])
}

/// The LLP Terminate code for an MPA receive error (the MPA error codes of draft §7).
fn llp_code(e: FramingError) -> TermCode {
    match e.code() {
        mpa::ErrorCode::MarkerError => LlpError::Marker.term_code(),
        _ => LlpError::Crc.term_code(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `with_parts` hands over the pieces in order, whatever their count: none, a few, exactly
    /// the short array's size, one more, and more than `MAX_PARTS` (cut there).
    #[test]
    fn with_parts_passes_every_piece_in_order() {
        let data: Vec<u8> = (0..=255).collect();
        for n in [
            0,
            1,
            FEW_PARTS - 1,
            FEW_PARTS,
            FEW_PARTS + 1,
            MAX_PARTS,
            MAX_PARTS + 5,
        ] {
            let pieces: Vec<&[u8]> = (0..n).map(|i| &data[i % 256..=i % 256]).collect();
            let got = with_parts(pieces.iter().copied(), |parts| parts.to_vec());
            assert_eq!(got, pieces[..n.min(MAX_PARTS)], "{n} pieces");
        }
    }
}
