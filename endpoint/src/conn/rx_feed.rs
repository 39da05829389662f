//! The receive side of an iWARP connection between TCP and the queue pair: in-order octets
//! through MPA's stream parser, out-of-order ones through its locator, held until their gap
//! fills.

use std::collections::BTreeMap;
use std::time::Instant;

use ddp::{Memory, Qp, StagTable};

use crate::config::QpSettings;
use crate::counters::EndpointCounters;

/// The most octets a peer may send before MPA is up: one startup frame (MPA §7.1: an
/// Initiator sends FPDUs only after the Reply, a Responder only after the Initiator's first
/// FPDU), whose private data our startup reader bounds by `max_private_data`.
pub(super) fn startup_rx_limit(s: &QpSettings) -> u64 {
    (mpa::startup_frame::HEADER_LEN + usize::from(s.startup.max_private_data)) as u64
}

/// The receive side of a connection between TCP and the queue pair: in-order octets go through
/// MPA's stream parser, out-of-order ones through the locator at once (placed before their gap
/// fills) and are kept until the gap fills, then fed in order. Before MPA is up, at most one
/// startup frame is taken: octets past it mark the connection `overrun` (it is reset).
#[derive(Debug)]
pub(crate) struct RxFeed {
    /// Receive offset of the next octet fed in order to the queue pair.
    pub next: u64,
    /// Chunks TCP handed up out of order, waiting for the gap before them (bounded by TCP's
    /// out-of-order limits: TCP commits, and hands up, no more than they allow).
    pub ooo: BTreeMap<u64, HeldChunk>,
    /// Octets in `ooo`.
    pub ooo_bytes: u64,
    /// Stream octets allowed before MPA is up; `u64::MAX` once the queue pair was seen
    /// established (it stays so: MPA is left only during startup).
    startup_limit: u64,
    /// The peer sent past `startup_limit` before MPA was up.
    pub overrun: bool,
}

impl RxFeed {
    pub(super) fn new(startup_limit: u64) -> Self {
        RxFeed {
            next: 0,
            ooo: BTreeMap::new(),
            ooo_bytes: 0,
            startup_limit,
            overrun: false,
        }
    }

    /// Feeds the chunk `data` at stream offset `offset` (one copy: placement writes straight
    /// from `data` into the region; only out-of-order chunks are also kept). The in-order case,
    /// every segment's on a clean path, is inlined into the receive sink.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn feed<M: Memory + ?Sized>(
        &mut self,
        qp: &mut Qp,
        tags: &mut StagTable,
        mem: &mut M,
        now: Instant,
        offset: u64,
        data: &[u8],
        c: &mut EndpointCounters,
    ) {
        let end = offset + data.len() as u64;
        if end <= self.next || self.overrun {
            return;
        }
        if end > self.startup_limit {
            if qp.is_established() {
                self.startup_limit = u64::MAX;
            } else {
                // More than a startup frame before MPA is up: nothing of it is kept.
                self.overrun = true;
                c.startup_overruns += 1;
                return;
            }
        }
        if offset > self.next {
            self.hold(qp, tags, mem, offset, data, c);
            return;
        }
        let skip = (self.next - offset) as usize;
        qp.handle_rx_bytes(tags, mem, now, &data[skip..]);
        self.next = end;
        if !self.ooo.is_empty() {
            self.deliver_held(qp, tags, mem, now);
        }
    }

    /// An out-of-order chunk: placed now if the queue pair can locate FPDUs in it, and held
    /// for in-order delivery.
    fn hold<M: Memory + ?Sized>(
        &mut self,
        qp: &mut Qp,
        tags: &mut StagTable,
        mem: &mut M,
        offset: u64,
        data: &[u8],
        c: &mut EndpointCounters,
    ) {
        // MPA-70: the queue pair locates FPDUs only by markers or the length chain; a chunk
        // neither reaches waits here for in-order delivery.
        let mut located = false;
        if qp.is_established() && !qp.is_error() {
            let n = qp.handle_segment(tags, mem, offset, data);
            c.ooo_fpdus_placed += n as u64;
            located = n > 0;
        }
        self.ooo_bytes += data.len() as u64;
        c.ooo_bytes_max = c.ooo_bytes_max.max(self.ooo_bytes);
        let data = data.to_vec();
        self.ooo.insert(offset, HeldChunk { data, located });
        if located {
            self.follow_chain(qp, tags, mem, offset, c);
        }
    }

    /// The held chunks the in-order point reached, fed in order.
    fn deliver_held<M: Memory + ?Sized>(
        &mut self,
        qp: &mut Qp,
        tags: &mut StagTable,
        mem: &mut M,
        now: Instant,
    ) {
        while let Some(e) = self.ooo.first_entry() {
            if *e.key() > self.next {
                break;
            }
            let (off, HeldChunk { data, .. }) = e.remove_entry();
            self.ooo_bytes -= data.len() as u64;
            let end = off + data.len() as u64;
            if end > self.next {
                let skip = (self.next - off) as usize;
                qp.handle_rx_bytes(tags, mem, now, &data[skip..]);
                self.next = end;
            }
        }
    }

    /// The length chain may now reach held chunks after `from` that nothing located yet (an
    /// FPDU located in one ends where the next begins): hands them to the queue pair again,
    /// in order, until one yields nothing.
    fn follow_chain<M: Memory + ?Sized>(
        &mut self,
        qp: &mut Qp,
        tags: &mut StagTable,
        mem: &mut M,
        from: u64,
        c: &mut EndpointCounters,
    ) {
        for (&off, h) in self.ooo.range_mut(from + 1..) {
            if h.located {
                continue;
            }
            if qp.is_error() {
                return;
            }
            let n = qp.handle_segment(tags, mem, off, &h.data);
            if n == 0 {
                return;
            }
            c.ooo_fpdus_placed += n as u64;
            h.located = true;
        }
    }
}

/// An out-of-order chunk held for in-order delivery.
#[derive(Debug)]
pub(crate) struct HeldChunk {
    pub data: Vec<u8>,
    /// The queue pair found FPDUs in it (it is not handed over out of order again).
    pub located: bool,
}

/// Takes TCP's committed chunks during `handle_segment_with` and feeds them to the queue pair
/// straight from the received frame.
pub(crate) struct FeedSink<'a, M: Memory + ?Sized> {
    pub qp: &'a mut Qp,
    pub rx: &'a mut RxFeed,
    pub tags: &'a mut StagTable,
    pub mem: &'a mut M,
    pub now: Instant,
    pub counters: &'a mut EndpointCounters,
}

impl<M: Memory + ?Sized> tcp_offload::RxSink for FeedSink<'_, M> {
    fn on_chunk(&mut self, chunk: tcp_offload::RxRef<'_>) {
        self.rx.feed(
            self.qp,
            self.tags,
            self.mem,
            self.now,
            chunk.offset,
            chunk.data,
            self.counters,
        );
    }
}
