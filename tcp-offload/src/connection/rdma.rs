//! The TCP RDMA option on a connection (draft-csapuntz-tcprdma-00): negotiation state, the ULP's calls to annotate its send stream and to
//! register receive buffers, placement of annotated runs as segments are accepted, and the
//! ULP's read of transfer bytes that skips what was placed.
//!
//! Negotiation (TCPRDMA-14): with [`Config::tcp_rdma`] set, our SYN carries the
//! length-2 option and a SYN-ACK echoes it only when the SYN carried it; annotations are sent
//! and acted on only when both SYNs carried it. Connections rebuilt from a SYN cookie have it
//! off: the cookie SYN-ACK does not echo it (the listener keeps no state to remember it), so
//! the peer sees it refused and neither side annotates.
//!
//! [`Config::tcp_rdma`]: crate::Config::tcp_rdma

use crate::rdma::annotate::{AnnotateError, Transfer};
use crate::rdma::option::{RdmaAnnotation, RdmaOption, RID_LIMIT};
use crate::rdma::placement::{Placed, PlacedTransfer, PlacementError};
use crate::rx::Accepted;
use crate::rx_placed::PlacedSpan;
use crate::wire::TcpSegment;

use super::Connection;

impl Connection {
    /// True when both SYNs carried the RDMA option: annotations are sent and placed.
    pub fn rdma_enabled(&self) -> bool {
        self.opts.rdma
    }

    /// The stream offset (from 0) the next octet queued with [`Connection::send`] will have.
    pub fn send_position(&self) -> u64 {
        self.sendbuf.end - 1
    }

    /// Marks `len` octets of the send stream from stream offset `start` (see
    /// [`Self::send_position`]; not yet sent, after every earlier run) as bytes of the transfer
    /// `t` (TCPRDMA-02/06/07/10): every segment carrying them carries the option, a segment
    /// holds at most one run (TCPRDMA-11/13). The octets may be queued before or after the call.
    /// `len == 0` is a zero-length transfer at `start` (TCPRDMA-21, a failed READ): the segment
    /// starting there carries the option with data length 0 (give `total: Some(0)`).
    pub fn mark_transfer(
        &mut self,
        start: u64,
        len: u32,
        t: Transfer,
    ) -> Result<(), AnnotateError> {
        self.check_mark(start)?;
        if len == 0 {
            return self.marks.mark_empty(start + 1, t);
        }
        self.marks.mark_run(start + 1, len, t)
    }

    /// Marks stream offset `at` (not yet sent) as the first octet of a ULP message: the segment
    /// that starts there carries A = 1 (TCPRDMA-09, TCPRDMA-23 for ONC RPC record marks).
    pub fn mark_message_start(&mut self, at: u64) -> Result<(), AnnotateError> {
        self.check_mark(at)?;
        self.marks.mark_message(at + 1)
    }

    fn check_mark(&self, start: u64) -> Result<(), AnnotateError> {
        if !self.opts.rdma || self.record_mode_tx {
            return Err(AnnotateError::NotNegotiated);
        }
        if start + 1 < self.snd_nxt {
            return Err(AnnotateError::OutOfOrder);
        }
        Ok(())
    }

    /// Registers `buf` as the destination of transfer `rid` (TCPRDMA-08/32): annotated runs of
    /// it are written there as soon as TCP accepts their segments, in order or not.
    pub fn expect_transfer(&mut self, rid: u64, buf: Vec<u8>) -> Result<(), PlacementError> {
        if !self.opts.rdma {
            return Err(PlacementError::NotNegotiated);
        }
        if rid >= RID_LIMIT {
            return Err(PlacementError::BadRid);
        }
        self.placements.expect(rid, buf)
    }

    /// Hands back the buffer of `rid` with what was placed and copied into it; forgets the RID.
    pub fn take_transfer(&mut self, rid: u64) -> Option<PlacedTransfer> {
        self.restore_placed(|_, s| s.rid == rid);
        self.placements.take(rid)
    }

    /// Byte mode: consumes up to `len` in-order stream octets that the ULP knows (from its own
    /// parse of the stream) are octets `[buffer_offset, ..)` of transfer `rid`. Octets already
    /// placed there from these very stream octets are skipped (no copy, counted in
    /// `rdma_copies_avoided`); the others are copied from the stream into the buffer (counted
    /// in `rdma_bytes_copied`). Returns the octets consumed (at most [`Self::recv_ready`]).
    pub fn recv_transfer(
        &mut self,
        rid: u64,
        buffer_offset: u32,
        len: u32,
    ) -> Result<u32, PlacementError> {
        let len = len.min(self.recv.readable().min(u32::MAX as usize) as u32);
        self.placements.check_range(rid, buffer_offset, len)?;
        // The placed pieces as they stand, for `placed_run` and `next_placed`.
        self.placements.settle();
        let before = self.window_to_advertise();
        let mut done = 0u32;
        while done < len {
            let bo = buffer_offset + done;
            let at = self.read_offset();
            let placed = self.placements.placed_run(rid, bo, at).min(len - done);
            if placed > 0 {
                self.recv.discard(placed as usize);
                self.counters.rdma_copies_avoided += u64::from(placed);
                done += placed;
                continue;
            }
            let next = self.placements.next_placed(rid, bo, buffer_offset + len);
            let n = if next > bo { next - bo } else { 1 };
            let n = n.min(len - done);
            // The copy reads stream octets and may overwrite what `rid` holds for the stream.
            self.restore_placed(|at, s| at < u64::from(n) || s.rid == rid);
            if let Some(dst) = self.placements.copy_target(rid, bo, n, at) {
                let got = self.recv.read(dst);
                debug_assert_eq!(got, n as usize);
            }
            self.counters.rdma_bytes_copied += u64::from(n);
            done += n;
        }
        self.maybe_window_update(before);
        Ok(done)
    }

    /// Puts back into the receive buffer the unread octets it left out as placed (see
    /// [`crate::rx_placed`]) of the spans `pick` selects by offset in the unread stream and
    /// span, copied from their transfer buffers.
    pub(super) fn restore_placed(&mut self, pick: impl Fn(u64, &PlacedSpan) -> bool) {
        if !self.recv.has_placed_spans() {
            return;
        }
        let picked: Vec<(usize, PlacedSpan)> = self
            .recv
            .placed_spans()
            .enumerate()
            .filter(|(_, (at, s))| pick(*at, s))
            .map(|(i, (_, s))| (i, *s))
            .collect();
        // From the back: putting a span back leaves the indices of those before it.
        for &(i, s) in picked.iter().rev() {
            match self.placements.bytes(s.rid, s.bo, s.len) {
                Some(bytes) => self.recv.restore_placed(i, bytes),
                None => {
                    debug_assert!(false, "a placed span outlived its buffer");
                    self.recv.restore_placed(i, &vec![0; s.len as usize]);
                }
            }
        }
    }

    /// The fast path's commit of in-order `data` (at `recv.nxt`, nothing held out of order,
    /// byte mode) that carries the run `t`: places the run, as `rdma_place` would after the
    /// commit, and leaves the placed octets out of the receive buffer.
    pub(super) fn accept_next_placing(&mut self, t: &RdmaAnnotation, data: &[u8]) -> Accepted {
        let off = self.recv.nxt;
        let start = usize::from(t.data_offset);
        let end = start + usize::from(t.data_len);
        let run_at = off + start as u64;
        let Some(bytes) = data.get(start..end) else {
            // Not a run inside the payload (the parse refuses those): the general order.
            self.rdma_note_gaps(off, off + data.len() as u64);
            let a = self.recv.accept_next(data, self.rcv.seq(off), None);
            self.rdma_place(t, run_at, off, data, off);
            return a;
        };
        let placed = if self.placements.place_continuing(t, 0, run_at, bytes) {
            Placed::Yes
        } else {
            self.placements.place_general(t, run_at, run_at, bytes)
        };
        match placed {
            Placed::Yes => {
                self.counters.rdma_bytes_placed += bytes.len() as u64;
                self.placements.expect_next(t, run_at + bytes.len() as u64);
                return self
                    .recv
                    .accept_next_placed(data, start..end, t.rid, t.buffer_offset);
            }
            Placed::Unmatched => self.counters.rdma_unmatched += 1,
            Placed::Failed => self.counters.rdma_placement_failed += 1,
            Placed::Skipped => {}
        }
        self.recv.accept_next(data, self.rcv.seq(off), None)
    }

    /// Stream offset (connection-internal, data from 1) of the next octet `recv` returns.
    fn read_offset(&self) -> u64 {
        self.recv.nxt - u64::from(self.fin_delivered) - self.recv.readable() as u64
    }

    /// The RDMA option of an outgoing data segment `[off, off + len)`, when annotations are on
    /// (counted).
    pub(super) fn rdma_annotation(&mut self, off: u64, len: u32) -> Option<RdmaOption> {
        if !self.opts.rdma || len == 0 || self.marks.is_empty() {
            return None;
        }
        let rdma = self.marks.annotation(off, len);
        self.count_annotation(rdma);
        rdma
    }

    /// Counts an outgoing segment's RDMA option when it annotates a run.
    #[inline]
    pub(super) fn count_annotation(&mut self, rdma: Option<RdmaOption>) {
        if matches!(rdma, Some(RdmaOption::Transfer(_))) {
            self.counters.rdma_segments_annotated += 1;
        }
    }

    /// The run the segment describes (negotiated, valid option with transfer bytes), or none;
    /// counts ignored options.
    pub(super) fn rdma_run_of(&mut self, seg: &TcpSegment<'_>) -> Option<RdmaAnnotation> {
        if self.opts.rdma && seg.options.rdma_ignored.is_some() {
            self.counters.rdma_options_ignored += 1;
            return None;
        }
        self.rdma_run(seg.options.rdma)
    }

    /// The run a received segment's valid RDMA option `rdma` describes, when negotiated and
    /// it has transfer bytes.
    #[inline]
    pub(super) fn rdma_run(&self, rdma: Option<RdmaOption>) -> Option<RdmaAnnotation> {
        match rdma {
            Some(RdmaOption::Transfer(t)) if self.opts.rdma && t.data_len > 0 => Some(t),
            _ => None,
        }
    }

    /// Before `recv.accept`: the parts of `[off, end)` not yet received (what accept may
    /// commit), into `self.rdma_gaps`.
    pub(super) fn rdma_note_gaps(&mut self, off: u64, end: u64) {
        self.rdma_gaps.clear();
        let mut cur = off.max(self.recv.nxt);
        for &(rs, re) in self.recv.ranges() {
            if cur >= end {
                break;
            }
            if re <= cur {
                continue;
            }
            if rs > cur {
                self.rdma_gaps.push((cur, rs.min(end)));
            }
            cur = cur.max(re);
        }
        if cur < end {
            self.rdma_gaps.push((cur, end));
        }
    }

    /// After `recv.accept`: places the parts of the run `t` (starting at stream offset `run_at`)
    /// that accept committed, from `data` (which starts at stream offset `off`). `nxt_before`
    /// is the in-order point before accept: parts beyond it were placed before the hole filled.
    pub(super) fn rdma_place(
        &mut self,
        t: &RdmaAnnotation,
        run_at: u64,
        off: u64,
        data: &[u8],
        nxt_before: u64,
    ) {
        let run_end = run_at + u64::from(t.data_len);
        let mut unmatched = false;
        for k in 0..self.rdma_gaps.len() {
            let (gs, ge) = self.rdma_gaps[k];
            let (s, e) = (gs.max(run_at), ge.min(run_end));
            if s >= e || !self.recv.holds(s, e) {
                continue;
            }
            let bytes = &data[(s - off) as usize..(e - off) as usize];
            match self.placements.place(t, run_at, s, bytes) {
                Placed::Yes => {
                    self.counters.rdma_bytes_placed += e - s;
                    if gs > nxt_before {
                        self.counters.rdma_ooo_bytes_placed += e - s;
                    }
                }
                Placed::Unmatched => unmatched = true,
                Placed::Failed => self.counters.rdma_placement_failed += 1,
                Placed::Skipped => {}
            }
        }
        if unmatched {
            self.counters.rdma_unmatched += 1;
        }
    }
}
