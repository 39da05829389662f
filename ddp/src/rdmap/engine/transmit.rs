//! Transmit: choosing the next message, cutting it into segments, and completing Sends and
//! Writes on acknowledgement.

use super::*;
use crate::ddp::control::L_BIT;
use crate::ddp::segmentation::SegmentPlan;

impl RdmapEngine {
    // ----------------------------------------------------------------------------------------
    // Transmit

    /// Whether [`poll_ulpdu`](Self::poll_ulpdu) has something to send now. (Inlined: asked
    /// in every round.)
    #[inline(always)]
    pub fn wants_to_send(&self) -> bool {
        if self.terminate_sent {
            return false;
        }
        self.current.is_some()
            || self.terminate.is_some()
            || (self.state == RdmapState::Active
                && (!self.responses.is_empty() || (!self.sq_pending.is_empty() && self.sq_ready())))
    }

    /// The next queued message may start: a Read Request only while fewer than ORD Reads are
    /// outstanding (RFC 5040; the RTR Read of peer-to-peer mode goes first whatever ORD says).
    fn sq_ready(&self) -> bool {
        match self.sq_pending.front() {
            None => false,
            Some(m) => match m.after {
                TxAfter::ReadRequest => {
                    self.reads_queued
                        .front()
                        .is_some_and(|r| r.entry.seq.is_none())
                        || (self.orq.len() as u32) < self.cfg.ord
                }
                _ => true,
            },
        }
    }

    /// Whether `m` reads a region that has been deregistered since it was queued.
    fn source_gone(tags: &StagTable, m: &TxMsg) -> bool {
        matches!(m.source, TxSource::Region { region, .. } if !tags.is_registered(region))
    }

    /// A region was deregistered under a message partly sent (or a Read Response due): the
    /// peer cannot make sense of the rest, so the stream ends with a Terminate.
    fn fail_region_gone(&mut self) {
        self.stats.tx_region_gone += 1;
        self.terminate_with(RdmapError::CatastrophicStream.term_code());
    }

    /// Makes the next message to send the one in progress (`current`, which is empty); false,
    /// leaving it empty, when none may go now.
    fn pick_next(&mut self, tags: &StagTable) -> bool {
        debug_assert!(self.current.is_none());
        if let Some(t) = self.terminate.take() {
            self.current = Some(t);
            return true;
        }
        if self.state != RdmapState::Active {
            return false;
        }
        if let Some(r) = self.responses.pop_front() {
            if Self::source_gone(tags, &r) {
                self.fail_region_gone();
                self.current = self.terminate.take();
            } else {
                self.current = Some(r);
            }
            return self.current.is_some();
        }
        // A Send or Write whose region was deregistered before its first octet went out
        // completes flushed; the stream goes on (no MSN was taken).
        while self
            .sq_pending
            .front()
            .is_some_and(|m| Self::source_gone(tags, m))
        {
            if let Some(TxMsg {
                after: TxAfter::AwaitAck { seq },
                ..
            }) = self.sq_pending.pop_front()
            {
                self.stats.tx_region_gone += 1;
                if let Some(e) = seq
                    .checked_sub(self.sq_base_seq)
                    .and_then(|i| self.sq.get_mut(i as usize))
                {
                    e.status = Some(WcStatus::Flushed);
                }
            }
            self.drain_sq();
        }
        if !self.sq_ready() {
            return false;
        }
        // Moved straight into place, the MSN taken there.
        self.current = self.sq_pending.pop_front();
        let Some(m) = self.current.as_mut() else {
            return false;
        };
        if let TxHeader::Untagged {
            qn, ref mut msn, ..
        } = m.header
        {
            *msn = take_msn(&mut self.tx_msn, qn);
        }
        if let TxAfter::ReadRequest = m.after {
            // Its request and ORQ entry, the front of `reads_queued` (same order).
            let r = self.reads_queued.pop_front();
            debug_assert!(r.is_some(), "a queued Read Request without its entry");
            if let Some(r) = r {
                self.orq.push_back(r.entry);
                self.read_request_out = Some(r.req);
            }
        }
        true
    }

    /// Produce the next DDP segment (ULPDU) into `out`, at most `min(MULPDU, out.len())` octets.
    /// Returns its length, or `None` when there is nothing to send. After framing it, the caller
    /// reports the stream offset just past its FPDU with [`ulpdu_framed`](Self::ulpdu_framed).
    pub fn poll_ulpdu<M: Memory + ?Sized>(
        &mut self,
        tags: &StagTable,
        mem: &M,
        out: &mut [u8],
    ) -> Option<usize> {
        let seg = self.poll_segment(tags, out.len())?;
        Some(seg.write_ulpdu(mem, out))
    }

    /// As [`poll_ulpdu`](Self::poll_ulpdu), but return the segment as a descriptor (header
    /// octets and payload location, at most `min(MULPDU, max_len)` octets) so the caller can
    /// frame it straight from memory, and rebuild it for a retransmission. `tags` says which
    /// regions are still registered (see [`post`](Self::post) for what happens to work on a
    /// deregistered one).
    pub fn poll_segment(&mut self, tags: &StagTable, max_len: usize) -> Option<TxSegment> {
        self.poll_segment_inline(tags, max_len)
    }

    /// [`poll_segment`](Self::poll_segment), inlined into the claim loop: the descriptor is
    /// built where the caller keeps it rather than returned through memory and moved.
    #[inline(always)]
    pub(crate) fn poll_segment_inline(
        &mut self,
        tags: &StagTable,
        max_len: usize,
    ) -> Option<TxSegment> {
        if self.terminate_sent {
            return None;
        }
        if self
            .current
            .as_ref()
            .is_some_and(|m| Self::source_gone(tags, m))
        {
            self.fail_region_gone();
        }
        if self.terminate.is_some() {
            // A Terminate preempts a message in progress: the stream is dead anyway.
            self.current = None;
        }
        if self.current.is_none() && !self.pick_next(tags) {
            return None;
        }
        // The message stays in place (it is large) until its last segment.
        let msg = self.current.as_mut()?;
        let limit = self.cfg.mulpdu.min(max_len);
        let hl = match msg.header {
            TxHeader::Tagged { .. } => TAGGED_HEADER_LEN,
            TxHeader::Untagged { .. } => UNTAGGED_HEADER_LEN,
        };
        let inline = matches!(msg.source, TxSource::Inline);
        if limit <= hl || (inline && limit < hl + msg.total as usize) {
            // Too small for progress (inline payloads go in one segment).
            return None;
        }
        let plan = next_segment(msg.total, msg.sent, (limit - hl) as u32);
        let hbytes = segment_header(&msg.header, plan);
        let payload = match msg.source {
            TxSource::Region { region, offset } => TxPayload::Region {
                region,
                offset: offset + u64::from(plan.offset),
                len: plan.len,
            },
            TxSource::Inline => TxPayload::Inline {
                bytes: Box::new(Self::inline_bytes(
                    msg.after,
                    self.read_request_out,
                    self.terminate_repr,
                )),
                len: plan.len as u8,
            },
        };
        msg.sent += plan.len;
        self.stats.tx_ulpdus += 1;
        if plan.last {
            let after = msg.after;
            self.message_sent(after);
        }
        Some(TxSegment::new(hbytes, hl, payload))
    }

    /// [`poll_segment_inline`](Self::poll_segment_inline)'s common case taken whole: nothing
    /// in progress, no Terminate or Read Response due, the send queue's front a Send or Write
    /// from a registered region that fits one segment of at most `min(MULPDU, max_len)`
    /// octets. Returns that segment, the message sent, as `poll_segment_inline` would; `None`
    /// with nothing changed otherwise (the caller goes on with `poll_segment_inline`).
    #[inline(always)]
    pub(crate) fn poll_single_segment(
        &mut self,
        tags: &StagTable,
        max_len: usize,
    ) -> Option<TxSegment> {
        if self.current.is_some()
            || self.terminate.is_some()
            || self.terminate_sent
            || self.state != RdmapState::Active
            || !self.responses.is_empty()
        {
            return None;
        }
        let m = self.sq_pending.front()?;
        let (TxAfter::AwaitAck { seq }, TxSource::Region { region, offset }) = (m.after, m.source)
        else {
            return None;
        };
        let hl = match m.header {
            TxHeader::Tagged { .. } => TAGGED_HEADER_LEN,
            TxHeader::Untagged { .. } => UNTAGGED_HEADER_LEN,
        };
        let limit = self.cfg.mulpdu.min(max_len);
        if limit <= hl || m.total as usize > limit - hl || !tags.is_registered(region) {
            return None;
        }
        debug_assert_eq!(m.sent, 0, "a queued message is unsent");
        let (mut header, total) = (m.header, m.total);
        self.sq_pending.pop_front();
        if let TxHeader::Untagged {
            qn, ref mut msn, ..
        } = header
        {
            *msn = take_msn(&mut self.tx_msn, qn);
        }
        let plan = SegmentPlan {
            offset: 0,
            len: total,
            last: true,
        };
        debug_assert_eq!(plan, next_segment(total, 0, (limit - hl) as u32));
        self.stats.tx_ulpdus += 1;
        self.just_finished = Some(seq);
        let payload = TxPayload::Region {
            region,
            offset,
            len: total,
        };
        Some(TxSegment::new(segment_header(&header, plan), hl, payload))
    }

    /// The message in progress is all sent: what follows its last segment.
    #[inline(always)]
    fn message_sent(&mut self, after: TxAfter) {
        self.current = None;
        match after {
            TxAfter::AwaitAck { seq } => self.just_finished = Some(seq),
            TxAfter::ReadRequest | TxAfter::Rtr => {}
            TxAfter::ResponseSent => self.irq_in_use = self.irq_in_use.saturating_sub(1),
            TxAfter::Terminate => {
                self.terminate_sent = true;
                if let Some(t) = self.terminate_repr {
                    self.events.push_back(RdmapEvent::TerminateSent(t));
                }
            }
        }
    }

    /// The inline payload of a message followed by `after`: the Read Request `read_request`
    /// (the one started last), the Terminate `terminate`, or zeros (a zero-length message).
    /// (Cold: kept out of the segment loop every Send and Write runs.)
    #[cold]
    #[inline(never)]
    fn inline_bytes(
        after: TxAfter,
        read_request: Option<ReadRequestRepr>,
        terminate: Option<TerminateRepr>,
    ) -> [u8; TERMINATE_HEADER_MAX_LEN] {
        let mut bytes = [0u8; TERMINATE_HEADER_MAX_LEN];
        match after {
            TxAfter::ReadRequest => {
                if let Some(req) = read_request {
                    bytes[..READ_REQUEST_HEADER_LEN].copy_from_slice(&req.to_bytes());
                }
            }
            TxAfter::Terminate => {
                if let Some(t) = terminate {
                    bytes = t.to_bytes().0;
                }
            }
            _ => {}
        }
        bytes
    }

    /// Starts claiming the next segments of the message in progress from a registered region:
    /// the [`SegmentRun`] yields the same segments as consecutive
    /// [`poll_segment`](Self::poll_segment) calls with `max_len` would, the checks of the
    /// Terminate, the state and the region made once (nothing the caller does between the
    /// segments can change them). The caller ends it with [`end_run`](Self::end_run) before
    /// anything else reaches the engine. `None` (nothing changed) when no such message is in
    /// progress or it has one segment left; the caller goes on with `poll_segment`.
    #[inline(always)]
    pub(crate) fn start_run(&self, tags: &StagTable, max_len: usize) -> Option<SegmentRun> {
        let msg = self.current.as_ref()?;
        let limit = self.cfg.mulpdu.min(max_len);
        let (hl, offset_at, base) = match msg.header {
            TxHeader::Tagged { to, .. } => (TAGGED_HEADER_LEN, TAGGED_TO_AT, to),
            TxHeader::Untagged { .. } => (UNTAGGED_HEADER_LEN, UNTAGGED_MO_AT, 0),
        };
        let max_payload = limit.checked_sub(hl).filter(|&m| m > 0)? as u32;
        // One segment left (a small message's only one: tested first): no run to share the
        // checks with.
        if msg.total - msg.sent <= max_payload {
            return None;
        }
        if self.terminate_sent || self.terminate.is_some() {
            return None;
        }
        let TxSource::Region { region, offset } = msg.source else {
            return None;
        };
        if !tags.is_registered(region) {
            return None;
        }
        let first = SegmentPlan {
            offset: 0,
            len: 0,
            last: false,
        };
        Some(SegmentRun {
            template: segment_header(&msg.header, first),
            hl: hl as u8,
            offset_at: offset_at as u8,
            base,
            region,
            offset,
            total: msg.total,
            sent: msg.sent,
            max_payload,
            claimed: 0,
            #[cfg(debug_assertions)]
            header: msg.header,
        })
    }

    /// Ends a run started with [`start_run`](Self::start_run): the message in progress has
    /// the run's segments sent, completing as [`poll_segment`](Self::poll_segment) would
    /// after its last one.
    #[inline(always)]
    pub(crate) fn end_run(&mut self, run: &SegmentRun) {
        let Some(msg) = self.current.as_mut() else {
            return;
        };
        msg.sent = run.sent;
        self.stats.tx_ulpdus += run.claimed;
        if run.sent == run.total {
            let after = msg.after;
            self.message_sent(after);
        }
    }

    /// The ULPDU last returned by [`poll_ulpdu`](Self::poll_ulpdu) ends at `stream_end` (the
    /// transport's stream offset just past its FPDU). A Send or Write whose last segment it was
    /// completes when [`on_acked`](Self::on_acked) reaches that offset.
    pub fn ulpdu_framed(&mut self, stream_end: u64) {
        if let Some(seq) = self.just_finished.take() {
            if let Some(e) = seq
                .checked_sub(self.sq_base_seq)
                .and_then(|i| self.sq.get_mut(i as usize))
            {
                e.ack_at = Some(stream_end);
            }
        }
    }

    /// The transport has the stream acknowledged up to `offset` (exclusive). Sends and Writes
    /// whose FPDUs end at or before it complete (DDP-59). (Inlined: called in every round.)
    #[inline(always)]
    pub fn on_acked(&mut self, offset: u64) {
        // The acknowledged Sends and Writes at the front (most often all there is) complete as
        // they are found, in one pass; what is behind the first other entry as below. The
        // completions come in queue order either way.
        while self
            .sq
            .front()
            .is_some_and(|e| e.status.is_none() && e.ack_at.is_some_and(|a| a <= offset))
        {
            self.complete_front(WcStatus::Success);
        }
        if self.sq.is_empty() {
            return;
        }
        for e in self.sq.iter_mut() {
            match e.ack_at {
                // Ack points are set in queue order (messages go out in posting order, each
                // at a later stream offset): every later entry's lies past this one too.
                Some(a) if a > offset => break,
                Some(_) if e.status.is_none() => e.status = Some(WcStatus::Success),
                // A Read (completed by its response) or a message not yet sent.
                _ => {}
            }
        }
        self.complete_sq_front();
    }

    /// Completes, in posting order, the send-queue entries at the front that have a status.
    pub(super) fn drain_sq(&mut self) {
        self.complete_sq_front();
    }

    /// [`drain_sq`](Self::drain_sq), inlined into [`on_acked`](Self::on_acked), which runs for
    /// every acknowledgement.
    #[inline(always)]
    fn complete_sq_front(&mut self) {
        while let Some(status) = self.sq.front().and_then(|e| e.status) {
            self.complete_front(status);
        }
    }

    /// Takes the send queue's front entry out with a completion of `status`.
    #[inline(always)]
    fn complete_front(&mut self, status: WcStatus) {
        let Some(e) = self.sq.pop_front() else {
            return;
        };
        self.sq_base_seq += 1;
        self.complete(WorkCompletion {
            wr_id: e.wr_id,
            opcode: e.opcode,
            status,
            byte_len: if status == WcStatus::Success {
                e.byte_len
            } else {
                0
            },
            invalidated: None,
            solicited: false,
        });
    }
}

/// Where the tagged header's TO and the untagged header's MO sit.
const TAGGED_TO_AT: usize = 6;
const UNTAGGED_MO_AT: usize = 14;

/// The DDP header (RDMAP control included) of the segment `plan` of a message with `header`.
#[inline(always)]
fn segment_header(header: &TxHeader, plan: SegmentPlan) -> [u8; UNTAGGED_HEADER_LEN] {
    let repr = match *header {
        TxHeader::Tagged { opcode, stag, to } => DdpRepr::Tagged(TaggedRepr {
            last: plan.last,
            rsvd_ulp: RdmapControl { opcode }.emit(),
            stag,
            to: to.wrapping_add(u64::from(plan.offset)),
        }),
        TxHeader::Untagged {
            opcode,
            qn,
            msn,
            inv,
        } => DdpRepr::Untagged(UntaggedRepr {
            last: plan.last,
            rsvd_ulp: RdmapControl { opcode }.emit(),
            rsvd_ulp_ext: inv,
            qn,
            msn,
            mo: plan.offset,
        }),
    };
    let mut hbytes = [0u8; UNTAGGED_HEADER_LEN];
    repr.emit(&mut DdpPacket::new_unchecked(&mut hbytes[..]));
    hbytes
}

/// The next segments of one message from a registered region, claimed in a run
/// ([`RdmapEngine::start_run`]): each header is the first one with its offset and L bit set.
#[derive(Debug)]
pub(crate) struct SegmentRun {
    template: [u8; UNTAGGED_HEADER_LEN],
    hl: u8,
    offset_at: u8,
    /// The tagged message's first TO (0 for untagged: the MO starts at 0).
    base: u64,
    region: RegionHandle,
    offset: u64,
    total: u32,
    sent: u32,
    max_payload: u32,
    claimed: u64,
    #[cfg(debug_assertions)]
    header: TxHeader,
}

impl SegmentRun {
    /// The next segment and whether it is the message's last, or `None` after the last.
    #[inline(always)]
    pub(crate) fn next_segment(&mut self) -> Option<(TxSegment, bool)> {
        if self.sent == self.total && self.claimed > 0 {
            return None;
        }
        let plan = next_segment(self.total, self.sent, self.max_payload);
        let mut hbytes = self.template;
        let at = usize::from(self.offset_at);
        if at == TAGGED_TO_AT {
            let to = self.base.wrapping_add(u64::from(plan.offset));
            hbytes[at..at + 8].copy_from_slice(&to.to_be_bytes());
        } else {
            hbytes[at..at + 4].copy_from_slice(&plan.offset.to_be_bytes());
        }
        if plan.last {
            hbytes[0] |= L_BIT;
        }
        #[cfg(debug_assertions)]
        debug_assert_eq!(hbytes, segment_header(&self.header, plan));
        self.sent += plan.len;
        self.claimed += 1;
        let payload = TxPayload::Region {
            region: self.region,
            offset: self.offset + u64::from(plan.offset),
            len: plan.len,
        };
        Some((
            TxSegment::new(hbytes, usize::from(self.hl), payload),
            plan.last,
        ))
    }
}
