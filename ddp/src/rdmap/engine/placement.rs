//! Receive: validation before placement (-06 §7.1) and placement, in any order.

use super::*;
use crate::be::{get_u32, get_u64};
use crate::ddp::control::DdpControl;
use crate::ddp::stag_table::RemoteWindow;

/// The DDP control octet's T, L and DV bits, and their values for the last segment of an
/// untagged message.
const SEND_LAST_MASK: u8 = 0xC3;
const SEND_LAST: u8 = 0x41;
/// The RDMAP control octet's RV and opcode bits, and their values for a Send and a Send with
/// Solicited Event.
const RDMAP_MASK: u8 = 0xCF;
const SEND_CONTROL: u8 = 0x43;
const SEND_SE_CONTROL: u8 = 0x45;

impl RdmapEngine {
    // ----------------------------------------------------------------------------------------
    // Receive

    /// Hand in one complete ULPDU (a DDP segment, the MPA payload) that starts at `stream_pos`
    /// in the peer's byte stream. It is validated and placed at once, in any order; anything
    /// that must happen in order waits for [`deliver_through`](Self::deliver_through).
    pub fn handle_ulpdu<M: Memory + ?Sized>(
        &mut self,
        tags: &StagTable,
        mem: &mut M,
        stream_pos: u64,
        ulpdu: &[u8],
    ) {
        self.handle_ulpdu_parts(tags, mem, stream_pos, &[ulpdu]);
    }

    /// As [`handle_ulpdu`](Self::handle_ulpdu) for a ULPDU given in parts (the pieces between
    /// MPA markers): each part is copied straight into its place, with no reassembly copy.
    pub fn handle_ulpdu_parts<M: Memory + ?Sized>(
        &mut self,
        tags: &StagTable,
        mem: &mut M,
        stream_pos: u64,
        parts: &[&[u8]],
    ) {
        self.stats.rx_ulpdus += 1;
        if self.shut {
            self.stats.rx_after_close += 1;
            return;
        }
        if self.peer_closed {
            self.rx_after_peer_close();
            return;
        }
        // DDP-82 (-06 §7.1): after an error every later segment is silently dropped: once the
        // stream is in error, and at once for every segment after an error found out of
        // order ("later" in stream order, however the segments arrive).
        if self.state != RdmapState::Active || self.rx_error_at.is_some_and(|e| stream_pos > e) {
            self.stats.rx_dropped += 1;
            self.stats.rx_dropped_after_error += 1;
            return;
        }
        if stream_pos < self.delivered_through {
            self.stats.rx_dropped += 1;
            return;
        }
        if let Some(rec) = self.place(tags, mem, stream_pos, parts) {
            self.record(stream_pos, rec);
        }
    }

    /// Keeps `rec` of the ULPDU at `stream_pos` for delivery in stream order.
    fn record(&mut self, stream_pos: u64, rec: RxRecord) {
        if matches!(rec, RxRecord::Error(_)) {
            // DDP-80: placement of this segment stopped before anything was written. The
            // report (Terminate, flush) follows in stream order, at delivery, so the ULP sees
            // what in-order reception shows: every message before the error is delivered once
            // the gap fills (DDP-58), then the error. Segments before it that arrive later are
            // still placed; a segment after it never is.
            self.rx_error_at = Some(self.rx_error_at.map_or(stream_pos, |e| e.min(stream_pos)));
            // Placed before the error was known: never delivered.
            self.records.drop_after(stream_pos);
        }
        self.records.insert(stream_pos, rec);
    }

    /// Every ULPDU starting before `stream_pos` has been handed in: deliver, in stream order,
    /// what was recorded up to there (DDP-58, DDP-60).
    pub fn deliver_through(&mut self, tags: &mut StagTable, stream_pos: u64) {
        if stream_pos <= self.delivered_through {
            return;
        }
        self.delivered_through = stream_pos;
        while let Some((_, rec)) = self.records.pop_before(stream_pos) {
            if self.state != RdmapState::Active {
                self.records.clear();
                break;
            }
            self.deliver(tags, rec);
        }
    }

    /// [`handle_ulpdu`](Self::handle_ulpdu) of the next ULPDU in order (every one before
    /// `stream_pos` handed in), then [`deliver_through`](Self::deliver_through) it. With
    /// nothing waiting for delivery and no error, this is the in-order fast path: the ULPDU is
    /// placed and what it completes delivered at once, without the bookkeeping of records kept
    /// for a later delivery (an RDMA Write's segment goes straight to its place).
    pub fn handle_ulpdu_in_order<M: Memory + ?Sized>(
        &mut self,
        tags: &mut StagTable,
        mem: &mut M,
        stream_pos: u64,
        ulpdu: &[u8],
    ) {
        self.handle_ulpdu_parts_in_order(tags, mem, stream_pos, &[ulpdu]);
    }

    /// As [`handle_ulpdu_in_order`](Self::handle_ulpdu_in_order) for a ULPDU given as the
    /// pieces between MPA markers.
    pub fn handle_ulpdu_parts_in_order<M: Memory + ?Sized>(
        &mut self,
        tags: &mut StagTable,
        mem: &mut M,
        stream_pos: u64,
        parts: &[&[u8]],
    ) {
        if self.quiet_at(stream_pos) && self.place_write(tags, mem, parts) {
            self.stats.rx_ulpdus += 1;
            self.stats.rx_ulpdus_fast += 1;
            self.delivered_through = stream_pos + 1;
            return;
        }
        self.handle_other_in_order(tags, mem, stream_pos, parts);
    }

    /// [`handle_ulpdu_parts_in_order`](Self::handle_ulpdu_parts_in_order) of a ULPDU its RDMA
    /// Write shortcut does not take (as [`place_write_quiet`](Self::place_write_quiet)
    /// found): placed, and what it completes delivered at once while nothing waits for
    /// delivery; else placed and delivered in stream order.
    pub(crate) fn handle_other_in_order<M: Memory + ?Sized>(
        &mut self,
        tags: &mut StagTable,
        mem: &mut M,
        stream_pos: u64,
        parts: &[&[u8]],
    ) {
        if !self.quiet_at(stream_pos) {
            self.handle_ulpdu_parts(tags, mem, stream_pos, parts);
            self.deliver_through(tags, stream_pos + 1);
            return;
        }
        self.handle_quiet_in_order(tags, mem, stream_pos, parts);
    }

    /// [`handle_other_in_order`](Self::handle_other_in_order) of a ULPDU the in-order fast path
    /// may take ([`quiet_at`](Self::quiet_at) its position, as the caller checked). Inlined:
    /// a whole Send's shortcut runs in the receive loop; the rest of the path is out of line.
    #[inline(always)]
    pub(crate) fn handle_quiet_in_order<M: Memory + ?Sized>(
        &mut self,
        tags: &mut StagTable,
        mem: &mut M,
        stream_pos: u64,
        parts: &[&[u8]],
    ) {
        debug_assert!(self.quiet_at(stream_pos));
        if let [only] = parts {
            if self.receive_send_quiet(tags, mem, stream_pos, only) {
                return;
            }
        }
        self.place_quiet_in_order(tags, mem, stream_pos, parts);
    }

    /// [`handle_quiet_in_order`](Self::handle_quiet_in_order) of a ULPDU its Send shortcut
    /// does not take.
    #[inline(never)]
    fn place_quiet_in_order<M: Memory + ?Sized>(
        &mut self,
        tags: &mut StagTable,
        mem: &mut M,
        stream_pos: u64,
        parts: &[&[u8]],
    ) {
        self.stats.rx_ulpdus += 1;
        self.stats.rx_ulpdus_fast += 1;
        match self.place(tags, mem, stream_pos, parts) {
            Some(rec @ RxRecord::Error(_)) => {
                self.record(stream_pos, rec);
                self.deliver_through(tags, stream_pos + 1);
            }
            rec => {
                // What `deliver_through` does with this one record (the state is Active).
                self.delivered_through = stream_pos + 1;
                if let Some(rec) = rec {
                    self.deliver(tags, rec);
                }
            }
        }
    }

    /// The in-order fast path for a whole Send or Send with Solicited Event in the one
    /// segment `seg`, at a position the fast path may take ([`quiet_at`](Self::quiet_at), as
    /// the caller checked), for the next posted receive (its MSN, no offset, room for the
    /// payload, still registered): the payload goes to the buffer and the receive completes.
    /// True when done, with what [`Self::place`] and [`Self::deliver`] would have done; false,
    /// having done nothing, for anything else (the full path then takes it).
    #[inline(always)]
    fn receive_send_quiet<M: Memory + ?Sized>(
        &mut self,
        tags: &StagTable,
        mem: &mut M,
        stream_pos: u64,
        seg: &[u8],
    ) -> bool {
        let Some(h) = seg.first_chunk::<UNTAGGED_HEADER_LEN>() else {
            return false;
        };
        // DDP control: T = 0, L = 1, DV = 1; RDMAP control: RV = 1, Send or Send with SE
        // (Rsvd ignored on receive: DDP-19, RFC 5040 §4.1).
        if h[0] & SEND_LAST_MASK != SEND_LAST {
            return false;
        }
        let opcode = match h[1] & RDMAP_MASK {
            SEND_CONTROL => RdmapOpcode::Send,
            SEND_SE_CONTROL => RdmapOpcode::SendSe,
            _ => return false,
        };
        let (queue, msn, mo) = (get_u32(h, 6), get_u32(h, 10), get_u32(h, 14));
        if queue != qn::SEND || msn != self.rq_first_msn || mo != 0 || self.rtr_expected.is_some() {
            return false;
        }
        let n = seg.len() - UNTAGGED_HEADER_LEN;
        let Some(rqe) = self.rq.pop_front() else {
            return false;
        };
        if n as u64 > u64::from(rqe.buf.len) || !tags.is_registered(rqe.buf.region) {
            // Put back where it was: nothing done.
            self.rq.push_front(rqe);
            return false;
        }
        self.stats.rx_ulpdus += 1;
        self.stats.rx_ulpdus_fast += 1;
        if n > 0 {
            mem.write(rqe.buf.region, rqe.buf.offset, &seg[UNTAGGED_HEADER_LEN..]);
            self.stats.rx_placed_octets += n as u64;
        }
        self.delivered_through = stream_pos + 1;
        self.rq_first_msn = self.rq_first_msn.wrapping_add(1);
        self.complete(WorkCompletion {
            wr_id: rqe.wr_id,
            opcode: WcOpcode::Recv,
            status: WcStatus::Success,
            byte_len: n as u32,
            invalidated: None,
            solicited: opcode.solicited(),
        });
        true
    }

    /// True while the in-order fast path may take the ULPDU at `stream_pos`: open, active,
    /// no error, nothing waiting for delivery.
    #[inline(always)]
    pub(crate) fn quiet_at(&self, stream_pos: u64) -> bool {
        !self.shut
            && !self.peer_closed
            && self.state == RdmapState::Active
            && self.rx_error_at.is_none()
            && stream_pos >= self.delivered_through
            && self.records.is_empty()
    }

    /// An RDMA Write segment (its pieces between markers; the header in the first) with
    /// payload that passes every check (what [`Self::place`] does for it: the tagged checks of
    /// -06 §7.1, then the copy); false, having done nothing, for any other segment or any check
    /// that fails (the full path then reports it). Only while no record waits for delivery: no
    /// Send with Invalidate before it can revoke its STag.
    fn place_write<M: Memory + ?Sized>(
        &mut self,
        tags: &StagTable,
        mem: &mut M,
        parts: &[&[u8]],
    ) -> bool {
        let Some(head) = parts.first() else {
            return false;
        };
        let seg = RxSegment::new(parts, head);
        let Some((region, offset)) = self.write_target(tags, head, seg.len()) else {
            return false;
        };
        seg.write_payload(mem, region, offset, TAGGED_HEADER_LEN);
        true
    }

    /// Where the payload of an RDMA Write segment of `len` octets whose header is at the
    /// front of `head` goes, when it passes every check of [`Self::place_write`]; counts it
    /// as placed. `None`, having done nothing, otherwise. A header whose octets before the TO
    /// (the L bit aside) match the last checked one, with the STag table unchanged since,
    /// only has its TO and length checked against the window found then.
    #[inline(always)]
    fn write_target(
        &mut self,
        tags: &StagTable,
        head: &[u8],
        len: usize,
    ) -> Option<(RegionHandle, u64)> {
        let n = len.checked_sub(TAGGED_HEADER_LEN)? as u64;
        let head = head.get(..TAGGED_HEADER_LEN)?;
        // An untagged segment (every Send) fails `write_window`'s checks: skip them.
        if n == 0 || !DdpControl::parse(head[0]).tagged {
            return None;
        }
        let prefix = get_u64(head, 0) & WriteTargetCache::PREFIX_MASK;
        let window = match self.last_write {
            Some(c) if c.epoch == tags.epoch() && c.prefix == prefix => c.window,
            _ => self.write_window(tags, head)?,
        };
        let to = get_u64(head, 6);
        let r = window.range(to, n).ok()?;
        debug_assert_eq!(
            Ok(r),
            tags.check_remote(
                Stag(get_u32(head, 2)),
                to,
                n,
                Access::REMOTE_WRITE,
                self.cfg.pd,
                self.cfg.stream
            )
        );
        self.stats.rx_placed_octets += n;
        Some((r.region, r.offset))
    }

    /// The header and STag checks of [`Self::write_target`] on the 14 octets of a tagged
    /// header: an RDMA Write whose STag the peer may write. The window found is kept for the
    /// next segment; `None`, keeping nothing, when a check fails.
    #[inline(never)]
    fn write_window(&mut self, tags: &StagTable, head: &[u8]) -> Option<RemoteWindow> {
        let p = TaggedPacket::new_checked(head).ok()?;
        let write = RdmapControl {
            opcode: RdmapOpcode::RdmaWrite,
        };
        if RdmapControl::parse(p.rsvd_ulp()) != Ok(write) {
            return None;
        }
        let h = TaggedRepr::parse(&p).ok()?;
        let window = tags
            .remote_window(h.stag, Access::REMOTE_WRITE, self.cfg.pd, self.cfg.stream)
            .ok()?;
        self.last_write = Some(WriteTargetCache {
            epoch: tags.epoch(),
            prefix: get_u64(head, 0) & WriteTargetCache::PREFIX_MASK,
            window,
        });
        Some(window)
    }

    /// The in-order fast path for an RDMA Write segment of `len` octets given as its
    /// stretch of an FPDU, markers' slots included, and the stretch's [`Spacing`], at a
    /// position the fast path may take ([`quiet_at`](Self::quiet_at), as the caller checked):
    /// the payload goes to its place with one [`Memory::write`] (no marker inside it) or one
    /// [`Memory::write_spaced`], a header that a marker splits gathered first. True when
    /// done, with what [`Self::handle_ulpdu_parts_in_order`] would have done; false, having
    /// done nothing, for anything else (another segment, a check that fails): the caller then
    /// takes [`handle_quiet_in_order`](Self::handle_quiet_in_order).
    #[inline(always)]
    pub(crate) fn place_write_quiet<M: Memory + ?Sized>(
        &mut self,
        tags: &StagTable,
        mem: &mut M,
        stream_pos: u64,
        stretch: &[u8],
        len: usize,
        spacing: Spacing,
    ) -> bool {
        debug_assert!(self.quiet_at(stream_pos));
        // The payload's first octet in the stretch, and the payload's spacing.
        let first = spacing.first();
        let (target, from, payload) = if first >= TAGGED_HEADER_LEN {
            // The header lies before the first hole.
            let payload = Spacing::new(first - TAGGED_HEADER_LEN);
            debug_assert!(spacing.is_contiguous() || payload == spacing.advance(TAGGED_HEADER_LEN));
            let target = self.write_target(tags, stretch, len);
            (target, TAGGED_HEADER_LEN, payload)
        } else {
            // A marker splits the header: its octets gathered from around the marker.
            let mut head = [0u8; TAGGED_HEADER_LEN];
            let from = spacing.span(TAGGED_HEADER_LEN);
            let Some(header) = stretch.get(..from) else {
                return false;
            };
            spacing.copy_out(header, &mut head);
            let target = self.write_target(tags, &head, len);
            (target, from, spacing.advance(TAGGED_HEADER_LEN))
        };
        let Some((region, offset)) = target else {
            return false;
        };
        self.stats.rx_ulpdus += 1;
        self.stats.rx_ulpdus_fast += 1;
        if stretch.len() == len {
            mem.write(region, offset, &stretch[TAGGED_HEADER_LEN..]);
        } else {
            mem.write_spaced(
                region,
                offset,
                &stretch[from..],
                len - TAGGED_HEADER_LEN,
                payload,
            );
        }
        self.delivered_through = stream_pos + 1;
        true
    }

    fn terminate_for(code: TermCode, seg: RxSegment<'_>, with_header: bool) -> RxRecord {
        RxRecord::Error(TerminateRepr {
            code,
            seg_len: Some(seg.len().min(usize::from(u16::MAX)) as u16),
            ddp_header: if with_header {
                TerminatedDdpHeader::from_segment(seg.head())
            } else {
                None
            },
            rdma_header: None,
        })
    }

    /// Validate and place one segment; returns what to do at delivery.
    fn place<M: Memory + ?Sized>(
        &mut self,
        tags: &StagTable,
        mem: &mut M,
        stream_pos: u64,
        parts: &[&[u8]],
    ) -> Option<RxRecord> {
        // Zeroed only when the header must be gathered from several parts.
        let mut buf;
        let head: &[u8] = match parts {
            [only] => only,
            _ => {
                buf = [0u8; HEAD_MAX];
                let n = gather_prefix(parts, &mut buf);
                &buf[..n]
            }
        };
        let seg = RxSegment::new(parts, head);
        let header = match DdpPacket::new_checked(seg.head()).and_then(|p| DdpRepr::parse(&p)) {
            Ok(h) => h,
            Err(DdpHeaderError::Version { tagged, .. }) => {
                // DDP-21: the header layout is unknown, so it is not copied.
                let e = if tagged {
                    DdpError::TaggedVersion
                } else {
                    DdpError::UntaggedVersion
                };
                return Some(Self::terminate_for(e.term_code(), seg, false));
            }
            Err(_) => {
                // Shorter than its header: no §7.2 code exists, so DDP Local Catastrophic.
                return Some(Self::terminate_for(
                    DdpError::LocalCatastrophic.term_code(),
                    seg,
                    false,
                ));
            }
        };
        let ctrl = match RdmapControl::parse(header.rsvd_ulp()) {
            Ok(c) => c,
            Err(RdmapHeaderError::Version(_)) => {
                return rx_fail(RdmapError::Version.term_code(), seg)
            }
            Err(_) => return rx_fail(RdmapError::UnexpectedOpcode.term_code(), seg),
        };
        let opcode = ctrl.opcode;
        match header {
            DdpRepr::Tagged(h) => self.place_tagged(tags, mem, stream_pos, seg, h, opcode),
            DdpRepr::Untagged(h) => self.place_untagged(tags, mem, seg, h, opcode),
        }
    }

    fn place_tagged<M: Memory + ?Sized>(
        &mut self,
        tags: &StagTable,
        mem: &mut M,
        stream_pos: u64,
        seg: RxSegment<'_>,
        h: TaggedRepr,
        opcode: RdmapOpcode,
    ) -> Option<RxRecord> {
        let n = (seg.len() - TAGGED_HEADER_LEN) as u64;
        let mut sink_gone = false;
        let need = match opcode {
            RdmapOpcode::RdmaWrite => Access::REMOTE_WRITE,
            RdmapOpcode::RdmaReadResponse => {
                if self.orq.is_empty() {
                    return rx_fail(RdmapError::UnexpectedOpcode.term_code(), seg);
                }
                // Only the sink an outstanding Read named may be written (as siw checks).
                if n > 0 {
                    let named = |o: &&OrqEntry| o.sink.filter(|s| s.stag == h.stag);
                    let Some(sink) = self
                        .orq
                        .iter()
                        .filter_map(|o| named(&o))
                        .find(|s| s.covers(h.to, n))
                    else {
                        let e = if self.orq.iter().any(|o| named(&o).is_some()) {
                            DdpError::BaseBounds
                        } else {
                            DdpError::InvalidStag
                        };
                        return rx_fail(e.term_code(), seg);
                    };
                    // The sink's region was deregistered after the Read was posted: its slot
                    // may hold another region (even under the same STag), so nothing lands.
                    sink_gone = !tags.is_registered(sink.region);
                }
                Access::LOCAL_WRITE
            }
            _ => return rx_fail(RdmapError::UnexpectedOpcode.term_code(), seg),
        };
        if n == 0 && opcode == RdmapOpcode::RdmaWrite && self.rtr_expected == Some(RtrType::Write) {
            // RFC 6581 §5: the Initiator's Write RTR (nothing to place).
            self.rtr_expected = None;
            self.stats.rx_rtr += 1;
        }
        // DDP-49/50: a zero-length tagged segment is not checked.
        // An earlier Send with Invalidate of this STag, placed but not yet delivered, revokes
        // it for everything after it in the stream, even what arrives first (DDP-102).
        if n > 0 && self.invalidated_before(h.stag, stream_pos) {
            return rx_fail(DdpError::InvalidStag.term_code(), seg);
        }
        if sink_gone {
            self.stats.rx_region_gone += 1;
        } else if n > 0 {
            match tags.check_remote(h.stag, h.to, n, need, self.cfg.pd, self.cfg.stream) {
                Ok(p) => {
                    seg.write_payload(mem, p.region, p.offset, TAGGED_HEADER_LEN);
                    self.stats.rx_placed_octets += n;
                }
                Err(f) => return rx_fail(tagged_code(f), seg),
            }
        }
        if opcode == RdmapOpcode::RdmaReadResponse && h.last {
            return Some(RxRecord::ReadResponseLast {
                seg: Offending::of(seg)?,
            });
        }
        None
    }

    fn place_untagged<M: Memory + ?Sized>(
        &mut self,
        tags: &StagTable,
        mem: &mut M,
        seg: RxSegment<'_>,
        h: UntaggedRepr,
        opcode: RdmapOpcode,
    ) -> Option<RxRecord> {
        let fail = |e: DdpError| rx_fail(e.term_code(), seg);
        let n = (seg.len() - UNTAGGED_HEADER_LEN) as u64;
        let payload = seg.small_payload(UNTAGGED_HEADER_LEN).unwrap_or(&[]);
        match h.qn {
            qn::SEND => {
                if self.rtr_expected == Some(RtrType::Send)
                    && h.msn == self.rq_first_msn
                    && h.last
                    && h.mo == 0
                    && n == 0
                    && opcode == RdmapOpcode::Send
                {
                    // RFC 6581 §5: the Initiator's Send RTR takes MSN 1 and no buffer of the
                    // ULP's; it is the first message of the stream, so nothing placed earlier
                    // can have counted on MSN 1.
                    self.rtr_expected = None;
                    self.rq_first_msn = self.rq_first_msn.wrapping_add(1);
                    self.stats.rx_rtr += 1;
                    return None;
                }
                // §7.1 untagged #2 and #5: the MSN must name a posted buffer.
                if self.rq.is_empty() {
                    return fail(DdpError::NoBuffer);
                }
                let idx = h.msn.wrapping_sub(self.rq_first_msn);
                let Some(rqe) = self.rq.get(idx as usize) else {
                    return fail(DdpError::MsnRange);
                };
                let buf = rqe.buf;
                if opcode.queue() != Some(qn::SEND) {
                    return rx_fail(RdmapError::UnexpectedOpcode.term_code(), seg);
                }
                if n > 0 {
                    // #3 and #4 (u64 arithmetic: MO + n may exceed 2^32).
                    if u64::from(h.mo) >= u64::from(buf.len) {
                        return fail(DdpError::InvalidMo);
                    }
                    if u64::from(h.mo) + n > u64::from(buf.len) {
                        return fail(DdpError::TooLong);
                    }
                    if tags.is_registered(buf.region) {
                        seg.write_payload(
                            mem,
                            buf.region,
                            buf.offset + u64::from(h.mo),
                            UNTAGGED_HEADER_LEN,
                        );
                        self.stats.rx_placed_octets += n;
                    } else {
                        // Deregistered after it was posted: the data lands nowhere and the
                        // receive completes flushed at delivery.
                        self.stats.rx_region_gone += 1;
                    }
                } else if u64::from(h.mo) > u64::from(buf.len) {
                    return fail(DdpError::InvalidMo);
                }
                if h.last {
                    let len = h.mo.saturating_add(n as u32);
                    return Some(RxRecord::SendLast {
                        msn: h.msn,
                        len,
                        opcode,
                        inv: Stag(h.rsvd_ulp_ext),
                        seg: Offending::of(seg)?,
                    });
                }
                None
            }
            qn::READ_REQUEST => {
                // QN 1's buffers are implicit, IRD of them (RFC 5040). An MSN no IRD-sized
                // window from the next expected one could hold is out of range (DDP, as siw);
                // one that fits the window but finds every IRD slot busy is a peer exceeding
                // our IRD: RFC 5040's Remote Operation Error, "Catastrophic error, localized
                // to RDMAP Stream" (0x0/0x2/0x07, what siw sends for it).
                let idx = h.msn.wrapping_sub(self.rr_next_msn);
                if idx >= self.cfg.ird.max(1) {
                    return fail(DdpError::MsnRange);
                }
                if idx >= self.cfg.ird.saturating_sub(self.irq_in_use) {
                    self.stats.rx_ird_exceeded += 1;
                    return rx_fail(RdmapError::CatastrophicStream.term_code(), seg);
                }
                if opcode != RdmapOpcode::RdmaReadRequest {
                    return rx_fail(RdmapError::UnexpectedOpcode.term_code(), seg);
                }
                if h.mo != 0 {
                    return fail(DdpError::InvalidMo);
                }
                if n > READ_REQUEST_HEADER_LEN as u64 {
                    return fail(DdpError::TooLong);
                }
                let Ok(p) = ReadRequestPacket::new_checked(payload) else {
                    return rx_fail(RdmapError::Unspecified.term_code(), seg);
                };
                if !h.last {
                    return rx_fail(RdmapError::Unspecified.term_code(), seg);
                }
                let req = ReadRequestRepr::parse(&p).ok()?;
                if req.size == 0 && self.rtr_expected == Some(RtrType::Read) {
                    // RFC 6581 §5: the Initiator's Read RTR, answered like any zero-length Read.
                    self.rtr_expected = None;
                    self.stats.rx_rtr += 1;
                }
                Some(RxRecord::ReadRequest {
                    msn: h.msn,
                    req,
                    seg: Offending::of(seg)?,
                })
            }
            qn::TERMINATE => {
                if h.msn.wrapping_sub(self.term_next_msn) >= 1 {
                    return fail(DdpError::MsnRange);
                }
                if opcode != RdmapOpcode::Terminate {
                    return rx_fail(RdmapError::UnexpectedOpcode.term_code(), seg);
                }
                let t = TerminatePacket::new_checked(payload)
                    .ok()
                    .and_then(|p| TerminateRepr::parse(&p).ok());
                Some(RxRecord::Terminate(t))
            }
            _ => fail(DdpError::InvalidQn),
        }
    }

    /// Whether a recorded, undelivered Send with Invalidate before `stream_pos` names `stag`.
    fn invalidated_before(&self, stag: Stag, stream_pos: u64) -> bool {
        self.records.any_before(stream_pos, |r| {
            matches!(r, RxRecord::SendLast { opcode, inv, .. } if opcode.carries_invalidate() && *inv == stag)
        })
    }
}

/// The outcome of the last RDMA Write header and STag checks that passed: the checks that
/// do not depend on the TO and length answer the same for a header with the same control,
/// RDMAP control and STag octets (the L bit changes none of them), as long as the STag table
/// keeps its epoch and the engine its PD.
#[derive(Debug, Clone, Copy)]
pub(super) struct WriteTargetCache {
    /// [`StagTable::epoch`] when the checks passed.
    epoch: u64,
    /// Header octets 0..6 (control, RDMAP control, STag) in the top 48 bits, L bit cleared.
    prefix: u64,
    /// What the STag allows.
    window: RemoteWindow,
}

impl WriteTargetCache {
    /// Keeps header octets 0..6 of a big-endian load of octets 0..8, without the L bit.
    const PREFIX_MASK: u64 = 0xBFFF_FFFF_FFFF_0000;
}

/// A validation failure of `seg`: Terminate with M set and its DDP header copied.
fn rx_fail(code: TermCode, seg: RxSegment<'_>) -> Option<RxRecord> {
    Some(RdmapEngine::terminate_for(code, seg, true))
}

/// The Terminate code for a tagged placement check at the data sink.
fn tagged_code(f: TaggedFault) -> TermCode {
    f.term_code()
}
