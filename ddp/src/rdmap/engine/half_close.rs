//! The peer's graceful half-close (DDP -06 §6.2.1): the LLP says the peer will send nothing
//! more (a TCP FIN after every octet before it was handed in and delivered).
//!
//! - DDP-69: the stream is half-closed, not in error: outbound requests go on as before. Sends
//!   and Writes posted (before or after) go out and complete on acknowledgement, and Read
//!   Responses to Read Requests delivered before the FIN are still sent. The transport closes
//!   our half when the ULP asks for graceful teardown (DDP-70).
//! - What needs the peer to send again can never complete: every posted receive and every RDMA
//!   Read (sent or queued) completes [`WcStatus::Flushed`] at once, and so does any receive or
//!   Read posted later.
//! - DDP-68: a ULPDU handed in after the half-close is an error: the stream is torn down
//!   abortively (counted in [`RdmapStats::rx_after_peer_close`]).

use super::*;

impl RdmapEngine {
    /// The LLP reports the peer's graceful half-close (TCP FIN), after handing in and
    /// delivering everything before it. See the module documentation.
    pub fn peer_half_closed(&mut self) {
        if self.peer_closed || self.state != RdmapState::Active {
            return;
        }
        self.peer_closed = true;
        // Placed but never deliverable (a gap the FIN will not fill).
        self.records.clear();
        self.flush_reads();
        self.flush_rq();
    }

    /// The peer has half-closed its side ([`peer_half_closed`](Self::peer_half_closed)).
    pub fn is_peer_closed(&self) -> bool {
        self.peer_closed
    }

    /// Every RDMA Read, sent or still queued, completes flushed now: its Response cannot come
    /// (or may not land). Nothing of a queued Read Request is on the wire yet.
    pub(super) fn flush_reads(&mut self) {
        self.orq.clear();
        let read_request = |m: &TxMsg| matches!(m.after, TxAfter::ReadRequest);
        self.sq_pending.retain(|m| !read_request(m));
        self.reads_queued.clear();
        if self.current.as_ref().is_some_and(read_request) {
            // Inline and not started: nothing of it is on the wire.
            self.current = None;
        }
        for e in self.sq.iter_mut() {
            if e.opcode == WcOpcode::Read && e.status.is_none() {
                e.status = Some(WcStatus::Flushed);
            }
        }
        self.drain_sq();
    }

    /// A receive or Read posted after the peer's half-close: it completes flushed at once
    /// (in posting order with the send queue, for a Read). True when `wr` was one.
    pub(super) fn flush_if_peer_closed(&mut self, wr: &WorkRequest) -> bool {
        if !self.peer_closed {
            return false;
        }
        match wr.kind {
            WorkRequestKind::Recv { .. } => {
                self.complete(WorkCompletion {
                    wr_id: wr.wr_id,
                    opcode: WcOpcode::Recv,
                    status: WcStatus::Flushed,
                    byte_len: 0,
                    invalidated: None,
                    solicited: false,
                });
                true
            }
            WorkRequestKind::Read { local, .. } => {
                self.push_sq(wr.wr_id, WcOpcode::Read, local.len);
                self.flush_reads();
                true
            }
            WorkRequestKind::Send { .. } | WorkRequestKind::Write { .. } => false,
        }
    }

    /// DDP-68: data after the peer's half-close tears the stream down abortively.
    pub(super) fn rx_after_peer_close(&mut self) {
        self.stats.rx_after_peer_close += 1;
        self.transport_failed();
    }
}
