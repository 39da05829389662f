//! Transmit: the startup frame's octets, then whole FPDUs framed from the engine's segments
//! (markers and CRC in one pass), kept for a retransmission when asked, and acknowledgements.

use crate::ddp::memory::Memory;
use crate::ddp::stag_table::StagTable;
use crate::ddp::tx_segment::TxPayload;
use crate::rdmap::engine::SegmentRun;
use mpa::WireLens;

use super::{Phase, Qp};

impl Qp {
    /// Whether `poll_transmit` would produce something now. (Inlined: a transport asks it in
    /// every round.)
    #[inline(always)]
    pub fn wants_to_send(&self) -> bool {
        if self.startup_tx_at < self.startup_tx.len() {
            return true;
        }
        match &self.phase {
            Phase::Operational { framer, .. } => !framer.is_gated() && self.engine.wants_to_send(),
            _ => false,
        }
    }

    /// Produce the next octets to send into `out`: startup-frame bytes, or one whole FPDU
    /// (markers and CRC included, framed at the right stream offset, its ULPDU no larger than
    /// MULPDU). Returns the length, or `None` when there is nothing to send. `out` should hold
    /// [`Qp::max_fpdu_len`] octets; a smaller `out` gets smaller FPDUs.
    pub fn poll_transmit<M: Memory + ?Sized>(
        &mut self,
        tags: &StagTable,
        mem: &M,
        out: &mut [u8],
    ) -> Option<usize> {
        if self.startup_tx_at < self.startup_tx.len() {
            let src = &self.startup_tx[self.startup_tx_at..];
            let n = src.len().min(out.len());
            out[..n].copy_from_slice(&src[..n]);
            self.startup_tx_at += n;
            self.tx_total += n as u64;
            if self.startup_tx_at == self.startup_tx.len() {
                self.startup_tx.clear();
                self.startup_tx_at = 0;
            }
            return (n > 0).then_some(n);
        }
        let Phase::Operational { framer, .. } = &mut self.phase else {
            return None;
        };
        if framer.is_gated() {
            return None;
        }
        let cap = framer
            .fit(self.engine.config().mulpdu, out.len())
            .ulpdu_len();
        let seg = self.engine.poll_segment(tags, cap)?;
        let start = self.tx_total;
        // One copy: header and payload straight into the frame, between the markers.
        let r = framer.encode_spaced(
            seg.len(),
            &mut |dst, spacing| seg.write_spaced(mem, spacing, dst),
            out,
        );
        match r {
            Ok(w) => {
                self.tx_total += w as u64;
                self.engine.ulpdu_framed(self.tx_total);
                if self.cfg.keep_for_retransmit {
                    self.unacked.push_back((start, self.tx_total, seg));
                }
                Some(w)
            }
            Err(_) => {
                // Sized above so this cannot happen; fail loudly rather than corrupt the stream.
                self.engine.transport_failed();
                None
            }
        }
    }

    /// Claims the next FPDU (its ULPDU no larger than MULPDU, its wire length at most `max_len`)
    /// without framing it: returns its transmit offset and wire length, and the caller frames it
    /// with [`Qp::rebuild_fpdu`] wherever it wants the bytes (the AF_XDP engine: straight into
    /// the packet, so a first transmission is framed once). `None` when there is no FPDU to send,
    /// startup bytes are still pending (use [`Qp::poll_transmit`] for those), or
    /// `keep_for_retransmit` is off (nothing could rebuild it).
    pub fn poll_fpdu_record(&mut self, tags: &StagTable, max_len: usize) -> Option<(u64, usize)> {
        let mut one = None;
        self.claim_fpdus(tags, max_len, u64::MAX, |start, n| {
            one = Some((start, n));
            false
        });
        one
    }

    /// Claims FPDUs as [`Qp::poll_fpdu_record`] does, one after another while there are some
    /// and `room` (the transport's free send space) holds one of [`Qp::max_fpdu_len`]: hands
    /// each one's transmit offset and wire length to `claimed`, which takes it (true, and
    /// `room` shrinks by its length) or stops the claiming (false, the FPDU claimed all the
    /// same). Returns how many were claimed.
    pub fn claim_fpdus(
        &mut self,
        tags: &StagTable,
        max_len: usize,
        mut room: u64,
        mut claimed: impl FnMut(u64, usize) -> bool,
    ) -> usize {
        if !self.cfg.keep_for_retransmit || self.has_startup_bytes() {
            return 0;
        }
        let Phase::Operational { framer, .. } = &mut self.phase else {
            return 0;
        };
        if framer.is_gated() {
            return 0;
        }
        let mulpdu = self.engine.config().mulpdu;
        // At another stream offset the same FPDU may hold one marker more.
        let extra = if framer.config().markers { 4 } else { 0 };
        let mut n = 0;
        let mut stopped = false;
        while !stopped && self.engine.wants_to_send() {
            let Phase::Operational { framer, .. } = &mut self.phase else {
                break;
            };
            // The fit of a whole `mulpdu` (the usual case) is the full FPDU's layout, found
            // once for both the room test and the claim.
            let fit = framer.fit(mulpdu, max_len);
            let full = if fit.ulpdu_len() == mulpdu {
                fit.wire_len()
            } else {
                framer.wire_len(mulpdu)
            };
            if room < (full + extra) as u64 {
                break;
            }
            if fit.ulpdu_len() == mulpdu {
                if let Some(run) = self.engine.start_run(tags, mulpdu) {
                    let (claims, stop) =
                        self.claim_run(run, max_len, full, &mut room, &mut claimed);
                    n += claims;
                    stopped = stop;
                    continue;
                }
            }
            // A message of one segment (a small Send) taken whole, else segment by segment.
            let seg = match self.engine.poll_single_segment(tags, fit.ulpdu_len()) {
                Some(seg) => seg,
                None => match self.engine.poll_segment_inline(tags, fit.ulpdu_len()) {
                    Some(seg) => seg,
                    None => break,
                },
            };
            let start = self.tx_total;
            let w = framer.skip_fitted(fit, seg.len());
            self.tx_total += w as u64;
            self.engine.ulpdu_framed(self.tx_total);
            self.unacked.push_back((start, self.tx_total, seg));
            n += 1;
            room = room.saturating_sub(w as u64);
            if !claimed(start, w) {
                break;
            }
        }
        n
    }

    /// [`Qp::claim_fpdus`]'s claims of the whole FPDUs of a run of the message in progress,
    /// the first one's wire length `full`: each next one is claimed when the same tests as
    /// that loop's pass at its offset (a whole MULPDU fits `max_len`, `room` holds it).
    /// Returns how many it claimed and whether `claimed` stopped the claiming.
    #[inline(never)]
    fn claim_run(
        &mut self,
        mut run: SegmentRun,
        max_len: usize,
        mut full: usize,
        room: &mut u64,
        claimed: &mut impl FnMut(u64, usize) -> bool,
    ) -> (usize, bool) {
        let Phase::Operational { framer, .. } = &mut self.phase else {
            return (0, false);
        };
        let mulpdu = self.engine.config().mulpdu;
        // Without markers `full` is the same at every offset.
        let extra = if framer.config().markers { 4 } else { 0 };
        let lens = WireLens::new(framer.config(), mulpdu);
        let (mut n, mut stopped) = (0, false);
        while let Some((seg, last)) = run.next_segment() {
            let start = self.tx_total;
            let w = if seg.len() == mulpdu {
                framer.skip_known(mulpdu, full)
            } else {
                framer.skip(seg.len())
            };
            self.tx_total += w as u64;
            self.unacked.push_back((start, self.tx_total, seg));
            n += 1;
            *room = room.saturating_sub(w as u64);
            if !claimed(start, w) {
                stopped = true;
                break;
            }
            if last {
                break;
            }
            if extra != 0 {
                full = framer.wire_len_from(lens);
                if full > max_len {
                    break;
                }
            }
            if *room < (full + extra) as u64 {
                break;
            }
        }
        self.engine.end_run(&run);
        self.engine.ulpdu_framed(self.tx_total);
        (n, stopped)
    }

    /// Whether startup-frame octets wait to be sent (by [`Qp::poll_transmit`]).
    pub fn has_startup_bytes(&self) -> bool {
        self.startup_tx_at < self.startup_tx.len()
    }

    /// Rebuild, for a TCP retransmission, the FPDU that `poll_transmit` produced at transmit
    /// offset `stream_pos` (not yet acknowledged), from its descriptor and the region's
    /// memory: the same octets, markers and CRC included. Needs `keep_for_retransmit`.
    /// Returns its length, or `None` if no FPDU starts there, `out` is too small, or its
    /// payload's region has been deregistered since (`tags` says; the same octets cannot be
    /// produced, so the transport must give the connection up).
    pub fn rebuild_fpdu<M: Memory + ?Sized>(
        &mut self,
        tags: &StagTable,
        mem: &M,
        stream_pos: u64,
        out: &mut [u8],
    ) -> Option<usize> {
        let Phase::Operational { framer, .. } = &self.phase else {
            return None;
        };
        let cfg = framer.config();
        let h = self.unacked_hint;
        let (i, (start, _, seg)) = match self.unacked.get(h) {
            Some(e) if e.0 == stream_pos => (h, e),
            _ => {
                let i = self
                    .unacked
                    .binary_search_by_key(&stream_pos, |e| e.0)
                    .ok()?;
                (i, &self.unacked[i])
            }
        };
        self.unacked_hint = i + 1;
        if let TxPayload::Region { region, .. } = seg.payload {
            if !tags.is_registered(region) {
                return None;
            }
        }
        if !cfg.markers {
            // The same FPDU at every offset, its ULPDU one stretch: framed without spacing.
            // The closure inlined: else a call of its own per FPDU.
            return mpa::encode_fpdu_unmarked(
                cfg.crc,
                seg.len(),
                #[inline(always)]
                |dst: &mut [u8]| seg.write_contiguous(mem, dst),
                out,
            )
            .ok();
        }
        let offset = start.wrapping_sub(self.tx_seq_start) as u32;
        // The closure inlined here too: else a call of its own per FPDU.
        mpa::encode_fpdu_marked(
            cfg.crc,
            offset,
            seg.len(),
            #[inline(always)]
            |dst: &mut [u8], spacing| seg.write_spaced(mem, spacing, dst),
            out,
        )
        .ok()
    }

    /// Transmit offsets `(start, end)` of the FPDUs kept for retransmission (not yet acknowledged).
    pub fn unacked_fpdus(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.unacked.iter().map(|e| (e.0, e.1))
    }

    /// Fill `out` with as many whole outputs of [`Qp::poll_transmit`] as fit (startup bytes and
    /// FPDUs, each FPDU full-sized while room remains for one): one write for the kernel
    /// transport. Returns the octets written (0: nothing to send).
    pub fn poll_transmit_batch<M: Memory + ?Sized>(
        &mut self,
        tags: &StagTable,
        mem: &M,
        out: &mut [u8],
    ) -> usize {
        let mut n = 0;
        while out.len() - n >= self.max_fpdu_len().min(out.len()) {
            match self.poll_transmit(tags, mem, &mut out[n..]) {
                Some(w) => n += w,
                None => break,
            }
        }
        n
    }

    /// Largest FPDU this queue pair produces at any stream offset (size `out` of
    /// `poll_transmit` to it).
    pub fn max_fpdu_len(&self) -> usize {
        match &self.phase {
            Phase::Operational { framer, .. } => {
                // At another stream offset the same FPDU may hold one marker more.
                let extra = if framer.config().markers { 4 } else { 0 };
                framer.wire_len(self.engine.config().mulpdu) + extra
            }
            _ => mpa::MAX_FPDU_LEN,
        }
    }

    /// The transport has the transmit stream acknowledged up to `offset` (exclusive): Sends and
    /// Writes whose FPDUs end there or before complete. The kernel transport calls this as soon
    /// as it has written the octets. (Inlined: a transport calls it in every round.)
    #[inline(always)]
    pub fn on_acked(&mut self, offset: u64) {
        while self.unacked.front().is_some_and(|e| e.1 <= offset) {
            self.unacked.pop_front();
            self.unacked_hint = self.unacked_hint.saturating_sub(1);
        }
        self.engine.on_acked(offset);
    }
}
