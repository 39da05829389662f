//! One connection of an endpoint: our TCP, the queue pair (MPA startup, framing, DDP/RDMAP) and
//! the glue between them (in-order feed, out-of-order placement, record transmit, ACK tracking).

use std::collections::BTreeMap;
use std::time::Instant;

use ddp::{Memory, Qp, StagTable};
use tcp_offload::{Connection, RecordId, RecordSource, State};

use crate::config::QpSettings;
use crate::counters::EndpointCounters;
use crate::endpoint::listeners::ListenerId;

/// The endpoint's name for a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

/// Which MPA role a connection plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Initiator,
    Responder,
}

pub(crate) struct Conn<D> {
    pub tcp: Connection,
    /// Created once TCP is established (its EMSS sets MULPDU).
    pub qp: Option<Qp>,
    pub role: Role,
    pub settings: QpSettings,
    pub listener: Option<ListenerId>,
    /// The protection domain whose STags and regions this connection reaches (verbs API);
    /// `None`: the endpoint's own table and memory.
    pub pd: Option<D>,
    /// Responder: report the MPA Request and wait for the application's accept or reject.
    pub manual_accept: bool,
    /// Counted in its listener's backlog (MPA startup not finished).
    pub in_backlog: bool,
    /// Manual accept: the MPA Request was reported; reset if not answered by then.
    pub decide_deadline: Option<Instant>,
    /// What has been fed to the queue pair, and out-of-order chunks waiting for their gap.
    pub rx: RxFeed,
    /// Transmit offset TCP has acknowledged.
    pub acked: u64,
    /// The connection is on its way out (the application closed it, or the stream failed):
    /// TCP closes once the queue pair is idle.
    pub closing: bool,
    /// The application closed it: abort (RST) if it has not finished by then.
    pub close_deadline: Option<Instant>,
    /// TCP close already called.
    pub tcp_closed: bool,
    /// Currently armed timer deadline.
    pub armed: Option<Instant>,
    pub dirty: bool,
    /// Counters of the TCP already added to the endpoint's.
    pub retrans_seen: u64,
    /// A plain byte stream (no MPA, no queue pair), see `stream.rs`.
    pub stream: Option<crate::endpoint::stream::StreamState>,
}

impl<D> Conn<D> {
    /// An iWARP connection: its queue pair takes received data through the receive sink and
    /// completes work from SND.UNA, so TCP's data events are off ([`Conn::make_stream`] turns
    /// them back on).
    pub fn new(mut tcp: Connection, role: Role, settings: QpSettings) -> Self {
        tcp.set_data_events(false);
        Conn {
            tcp,
            qp: None,
            role,
            listener: None,
            pd: None,
            manual_accept: false,
            in_backlog: false,
            decide_deadline: None,
            rx: RxFeed::new(startup_rx_limit(&settings)),
            settings,
            acked: 0,
            closing: false,
            close_deadline: None,
            tcp_closed: false,
            armed: None,
            dirty: true,
            retrans_seen: 0,
            stream: None,
        }
    }

    /// Makes this a byte stream (no queue pair): the application reads and writes TCP's
    /// octets and hears of them through TCP's data events. Call it before any segment is
    /// handled for the connection's new role.
    pub fn make_stream(&mut self) {
        self.tcp.set_data_events(true);
        self.stream = Some(crate::endpoint::stream::StreamState::default());
    }

    /// The next deadline of TCP, the MPA startup, the application's accept or the close
    /// timeout.
    pub fn deadline(&self) -> Option<Instant> {
        let q = self.qp.as_ref().and_then(|q| q.poll_timeout());
        [
            self.tcp.poll_timeout(),
            q,
            self.close_deadline,
            self.decide_deadline,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Still finishing a close the application asked for (not yet in TIME-WAIT or gone).
    pub fn is_lingering(&self) -> bool {
        self.close_deadline.is_some()
            && !matches!(self.tcp.state(), State::TimeWait | State::Closed)
    }

    /// Feeds chunks TCP queued (before the queue pair existed, or through `poll_recv`) to the
    /// queue pair. The endpoint's receive path normally hands them over during
    /// `handle_segment_with` instead ([`FeedSink`]), straight from the frame.
    pub fn drive_rx<M: Memory + ?Sized>(
        &mut self,
        now: Instant,
        tags: &mut StagTable,
        mem: &mut M,
        c: &mut EndpointCounters,
    ) {
        if self.stream.is_some() {
            // The application reads a stream's octets from TCP itself.
            return;
        }
        while let Some(chunk) = self.tcp.poll_recv() {
            let Some(qp) = self.qp.as_mut() else {
                c.internal_errors += 1;
                continue;
            };
            self.rx
                .feed(qp, tags, mem, now, chunk.offset, &chunk.data, c);
        }
    }

    /// Moves what the queue pair has to send into TCP: startup frames as owned records, FPDUs
    /// as external records rebuilt at each (re)transmission.
    pub fn drive_tx<M: Memory + ?Sized>(
        &mut self,
        tags: &StagTable,
        mem: &M,
        scratch: &mut [u8],
        c: &mut EndpointCounters,
    ) {
        if !matches!(self.tcp.state(), State::Established | State::CloseWait) || self.tcp_closed {
            return;
        }
        let Some(qp) = self.qp.as_mut() else {
            return;
        };
        while qp.wants_to_send() && self.tcp.send_capacity() >= qp.max_fpdu_len() as u64 {
            // FPDUs are only claimed here; `FpduSource` frames each straight into its packet
            // (markers and CRC in that pass), so a first transmission is framed once.
            let r = if let Some((start, n)) = qp.poll_fpdu_record(tags, scratch.len()) {
                self.tcp.send_record(n as u32, start)
            } else if let Some(n) = qp.poll_transmit(tags, mem, scratch) {
                // Startup bytes (the MPA Request/Reply) ride as owned bytes.
                self.tcp.send_record_bytes(&scratch[..n])
            } else {
                break;
            };
            if r.is_err() {
                // The stream would have a hole: give the connection up rather than corrupt it.
                c.internal_errors += 1;
                qp.abort();
                self.tcp.abort();
                return;
            }
        }
    }

    /// Whether what a receive left on this connection is at most completions and queue-pair
    /// events: MPA up (queue pair established, out of the backlog), nothing the round must do
    /// at once (no TCP event, no chunk to feed, nothing to send now, queue pair with nothing
    /// to send, not closing).
    pub fn quiet_after_receive(&self) -> bool {
        self.stream.is_none()
            && !self.closing
            && !self.in_backlog
            && !self.rx.overrun
            && self
                .qp
                .as_ref()
                .is_some_and(|q| q.is_established() && !q.wants_to_send())
            && !self.tcp.has_events()
            && !self.tcp.has_recv_chunk()
            && self.tcp.has_nothing_to_send()
    }

    /// Tells the queue pair how far TCP has its transmit stream acknowledged.
    pub fn drive_acked(&mut self) {
        let Some(qp) = self.qp.as_mut() else {
            return;
        };
        if !self.tcp.state().is_synchronized() {
            return;
        }
        let una = self
            .tcp
            .snd_una()
            .0
            .wrapping_sub(self.tcp.send_seq_of_offset(0).0);
        let delta = una.wrapping_sub(self.acked as u32);
        if delta != 0 && (delta as i32) > 0 {
            self.acked = (self.acked + u64::from(delta)).min(qp.tx_offset());
            qp.on_acked(self.acked);
        }
    }
}

/// Rebuilds FPDU bytes (markers and CRC included) from the memory region, for the first
/// transmission and every retransmission. Record ids are the FPDUs' transmit offsets.
/// A rebuild that fails (no such FPDU, or its region deregistered since) leaves zeros and is
/// counted in `failures`: the connection cannot go on and is given up after the round.
pub(crate) struct FpduSource<'a, M: Memory + ?Sized> {
    pub qp: Option<&'a mut Qp>,
    pub tags: &'a StagTable,
    pub mem: &'a M,
    pub scratch: &'a mut [u8],
    pub failures: u64,
}

impl<M: Memory + ?Sized> RecordSource for FpduSource<'_, M> {
    fn write_record(&mut self, id: RecordId, offset: u32, dst: &mut [u8]) {
        let Some(qp) = self.qp.as_deref_mut() else {
            dst.fill(0);
            self.failures += 1;
            return;
        };
        if offset == 0 {
            // Whole FPDU into the frame: framed and CRC'd in one pass, no extra copy.
            if qp.rebuild_fpdu(self.tags, self.mem, id, dst) == Some(dst.len()) {
                return;
            }
        }
        match qp.rebuild_fpdu(self.tags, self.mem, id, self.scratch) {
            Some(n) if (offset as usize) + dst.len() <= n => {
                dst.copy_from_slice(&self.scratch[offset as usize..offset as usize + dst.len()]);
            }
            _ => {
                dst.fill(0);
                self.failures += 1;
            }
        }
    }
}

/// The most octets a peer may send before MPA is up: one startup frame (MPA §7.1: an
/// Initiator sends FPDUs only after the Reply, a Responder only after the Initiator's first
/// FPDU), whose private data our startup reader bounds by `max_private_data`.
fn startup_rx_limit(s: &QpSettings) -> u64 {
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
    /// Stream octets allowed before MPA is up.
    startup_limit: u64,
    /// The peer sent past `startup_limit` before MPA was up.
    pub overrun: bool,
}

impl RxFeed {
    fn new(startup_limit: u64) -> Self {
        RxFeed {
            next: 0,
            ooo: BTreeMap::new(),
            ooo_bytes: 0,
            startup_limit,
            overrun: false,
        }
    }

    /// Feeds the chunk `data` at stream offset `offset` (one copy: placement writes straight
    /// from `data` into the region; only out-of-order chunks are also kept).
    #[allow(clippy::too_many_arguments)]
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
        if end > self.startup_limit && !qp.is_established() {
            // More than a startup frame before MPA is up: nothing of it is kept.
            self.overrun = true;
            c.startup_overruns += 1;
            return;
        }
        if offset > self.next {
            // MPA-70: the queue pair locates FPDUs only by markers or the length chain; a
            // chunk neither reaches waits here for in-order delivery.
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
            return;
        }
        let skip = (self.next - offset) as usize;
        qp.handle_rx_bytes(tags, mem, now, &data[skip..]);
        self.next = end;
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
}

impl RxFeed {
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
