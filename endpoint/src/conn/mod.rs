//! One connection of an endpoint: our TCP, the layers above it as its state says (the queue
//! pair: MPA startup, framing, DDP/RDMAP; or a plain byte stream), and the glue between them
//! (in-order feed, out-of-order placement, record transmit, ACK tracking).
//!
//! * `state`: what a connection holds in each state, and how far it is on its way out;
//! * `rx_feed`: the receive side between TCP and the queue pair.

mod rx_feed;
mod state;

use std::time::Instant;

use ddp::{Memory, PdId, Qp, QpConfig, StagTable, StreamId};
use tcp_offload::{Connection, RecordId, RecordSource, State, Timestamp};

use crate::clock::Clock;
use crate::config::QpSettings;
use crate::counters::{fold_tcp_counters, EndpointCounters};
use crate::domain::Domain;
use crate::endpoint::admission::BacklogSlot;
use crate::endpoint::stream::StreamState;
use crate::ethernet::Mac;
use crate::timer_wheel::Armed;
pub(crate) use rx_feed::FeedSink;
use rx_feed::{startup_rx_limit, RxFeed};
pub(crate) use state::{Closing, ConnState, Iwarp, MpaPhase};

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
    /// What runs over TCP, and how far it got.
    pub state: ConnState,
    /// How far it is on its way out.
    pub closing: Closing,
    pub role: Role,
    pub settings: QpSettings,
    /// The protection domain whose STags and regions this connection reaches (verbs API);
    /// `None`: the endpoint's own table and memory.
    pub pd: Option<D>,
    /// Its timer wheel entry: the deadline it is armed for (every deadline but TCP's delayed
    /// ACK).
    pub armed: Option<Armed>,
    /// Its delayed-ACK deadline queued in the wheel's queued lane, not yet fired: the one
    /// that counts when a queued deadline of it fires (an earlier one queued since makes a
    /// later one stale).
    pub ack_queued: Option<Timestamp>,
    /// Marked for the endpoint's next round.
    pub dirty: bool,
    /// The next hop of its frames and the neighbour table's generation it was looked up at.
    pub hop: Option<(u64, Mac)>,
}

impl<D> Conn<D> {
    /// An iWARP connection, its TCP handshake under way: its queue pair will take received
    /// data through the receive sink and complete work from SND.UNA, so TCP's data events
    /// are off ([`Conn::make_stream`] turns them back on).
    pub fn new(mut tcp: Connection, role: Role, settings: QpSettings) -> Self {
        tcp.set_data_events(false);
        Conn {
            tcp,
            state: ConnState::Handshake,
            closing: Closing::No,
            role,
            settings,
            pd: None,
            armed: None,
            ack_queued: None,
            dirty: true,
            hop: None,
        }
    }

    /// Marks connection `id` (this one) for the endpoint's next round, once.
    pub fn mark(&mut self, id: u64, dirty: &mut Vec<u64>) {
        if !self.dirty {
            self.dirty = true;
            dirty.push(id);
        }
    }

    /// Makes this a byte stream (no queue pair): the application reads and writes TCP's
    /// octets and hears of them through TCP's data events. Call it before any segment is
    /// handled for the connection's new role.
    pub fn make_stream(&mut self) {
        self.tcp.set_data_events(true);
        self.state = ConnState::Stream(StreamState::default());
    }

    /// The queue pair, once TCP is established (iWARP connections).
    pub fn qp(&self) -> Option<&Qp> {
        self.state.iwarp().map(|i| &i.qp)
    }

    /// The queue pair, mutably.
    pub fn qp_mut(&mut self) -> Option<&mut Qp> {
        self.state.iwarp_mut().map(|i| &mut i.qp)
    }

    /// Whether this is a plain byte stream.
    pub fn is_stream(&self) -> bool {
        matches!(self.state, ConnState::Stream(_))
    }

    /// A byte stream's own state.
    pub fn stream(&self) -> Option<&StreamState> {
        match &self.state {
            ConnState::Stream(s) => Some(s),
            _ => None,
        }
    }

    /// A byte stream's own state, mutably.
    pub fn stream_mut(&mut self) -> Option<&mut StreamState> {
        match &mut self.state {
            ConnState::Stream(s) => Some(s),
            _ => None,
        }
    }

    /// Its place in a listener's backlog (MPA startup not finished).
    pub fn backlog(&self) -> Option<BacklogSlot> {
        match self.state.iwarp()?.mpa {
            MpaPhase::Startup { backlog, .. } => backlog,
            MpaPhase::Up => None,
        }
    }

    /// TCP is established: record mode on, the queue pair created with the connection's EMSS
    /// as stream `id` of its domain, MPA starting as the connection's role says (a responder
    /// holding `backlog`, its place in its listener's backlog; `manual_accept`: its MPA Request waits for the
    /// application). Only from [`ConnState::Handshake`]. False when the queue pair could not
    /// be made: TCP is aborted.
    pub fn start_qp(
        &mut self,
        id: u64,
        now: Instant,
        manual_accept: bool,
        backlog: Option<BacklogSlot>,
    ) -> bool
    where
        D: Domain,
    {
        if !matches!(self.state, ConnState::Handshake) {
            return true;
        }
        self.tcp.enter_record_mode();
        let cfg = QpConfig {
            engine: ddp::RdmapConfig {
                stream: StreamId(id as u32),
                pd: self.pd.as_ref().map_or(PdId(0), |p| p.id()),
                ird: self.settings.ird,
                ord: self.settings.ord,
                ..ddp::RdmapConfig::default()
            },
            startup: self.settings.startup,
            emss: self.tcp.emss(),
            private_data: self.settings.private_data.clone(),
            keep_for_retransmit: true,
            auto_accept: !manual_accept,
            fast_path: self.tcp.config().fast_path,
        };
        let mut qp = match self.role {
            Role::Initiator => match Qp::new_initiator(cfg, now) {
                Ok(q) => q,
                Err(_) => {
                    self.abort();
                    return false;
                }
            },
            Role::Responder => Qp::new_responder(cfg, now),
        };
        // Its completions carry the connection's id into the endpoint's queue.
        qp.set_completion_key(id);
        self.state = ConnState::Iwarp(Iwarp {
            qp,
            rx: RxFeed::new(startup_rx_limit(&self.settings)),
            acked: 0,
            mpa: MpaPhase::Startup {
                backlog,
                decide_by: None,
            },
        });
        true
    }

    /// Moves a connection whose queue pair reports MPA up to [`MpaPhase::Up`]; returns the
    /// backlog place it leaves.
    pub fn note_mpa_up(&mut self) -> Option<BacklogSlot> {
        let i = self.state.iwarp_mut()?;
        match i.mpa {
            MpaPhase::Startup { backlog, .. } if i.qp.is_established() => {
                i.mpa = MpaPhase::Up;
                backlog
            }
            _ => None,
        }
    }

    /// Takes the connection out of its listener's backlog without leaving it (it was evicted:
    /// its place is gone already).
    pub fn forget_backlog(&mut self) {
        if let Some(MpaPhase::Startup { backlog, .. }) = self.mpa_mut() {
            *backlog = None;
        }
    }

    /// The MPA Request was reported: the application has until `by` to answer it.
    pub fn await_answer(&mut self, by: Instant) {
        if let Some(MpaPhase::Startup { decide_by, .. }) = self.mpa_mut() {
            *decide_by = Some(by);
        }
    }

    /// The application answered the MPA Request (accept or reject): its deadline is off.
    pub fn answered(&mut self) {
        if let Some(MpaPhase::Startup { decide_by, .. }) = self.mpa_mut() {
            *decide_by = None;
        }
    }

    /// Whether the application's deadline to answer the MPA Request has passed at `now`; it
    /// is then spent.
    pub fn decide_deadline_passed(&mut self, now: Instant) -> bool {
        match self.mpa_mut() {
            Some(MpaPhase::Startup { decide_by, .. }) if decide_by.is_some_and(|d| now >= d) => {
                *decide_by = None;
                true
            }
            _ => false,
        }
    }

    fn mpa_mut(&mut self) -> Option<&mut MpaPhase> {
        self.state.iwarp_mut().map(|i| &mut i.mpa)
    }

    /// Abortive close of the whole connection: the queue pair flushes its work and sends
    /// nothing more (DDP-75), then TCP sends RST and closes.
    pub fn abort(&mut self) {
        if let Some(q) = self.qp_mut() {
            q.abort();
        }
        self.tcp.abort();
    }

    /// The next deadline of TCP (but its delayed ACK, which the endpoint queues apart), the
    /// MPA startup, the application's accept or the close timeout.
    pub fn deadline(&self, clock: &Clock) -> Option<Timestamp> {
        let stamp = |t: Option<Instant>| t.map(|t| clock.stamp_of(t));
        let mut at = self.tcp.poll_timeout_but_ack();
        if let ConnState::Iwarp(i) = &self.state {
            at = earliest(at, stamp(i.qp.poll_timeout()));
            if let MpaPhase::Startup { decide_by, .. } = i.mpa {
                at = earliest(at, stamp(decide_by));
            }
        }
        earliest(at, stamp(self.closing.deadline()))
    }

    /// Still finishing a close the application asked for (not yet in TIME-WAIT or gone).
    pub fn is_lingering(&self) -> bool {
        self.closing.deadline().is_some()
            && !matches!(self.tcp.state(), State::TimeWait | State::Closed)
    }

    /// The peer sent more than a startup frame before MPA was up (the connection is reset).
    pub fn overran_startup(&self) -> bool {
        self.state.iwarp().is_some_and(|i| i.rx.overrun)
    }

    /// Out-of-order octets held for the queue pair.
    pub fn ooo_bytes(&self) -> u64 {
        self.state.iwarp().map_or(0, |i| i.rx.ooo_bytes)
    }

    /// Adds what this connection counted (its TCP's counters, the segments its queue pair
    /// dropped after close and those it placed on the fast path) to `c`. The endpoint folds each connection once: into a copy
    /// while it lives, into its own counters when it is removed.
    pub fn fold_counters(&self, c: &mut EndpointCounters) {
        fold_tcp_counters(c, self.tcp.counters());
        if let Some(q) = self.qp() {
            c.rx_after_close += q.stats().rx_after_close;
            c.rx_ulpdus_fast += q.stats().rx_ulpdus_fast;
        }
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
        if self.is_stream() {
            // The application reads a stream's octets from TCP itself.
            return;
        }
        while let Some(chunk) = self.tcp.poll_recv() {
            let Some(Iwarp { qp, rx, .. }) = self.state.iwarp_mut() else {
                c.internal_errors += 1;
                continue;
            };
            rx.feed(qp, tags, mem, now, chunk.offset, &chunk.data, c);
        }
    }

    /// Moves what the queue pair has to send into TCP: startup frames as owned records, FPDUs
    /// as external records rebuilt at each (re)transmission. (The check is inlined into the
    /// round; most rounds have nothing to move.)
    #[inline]
    pub fn drive_tx<M: Memory + ?Sized>(
        &mut self,
        tags: &StagTable,
        mem: &M,
        scratch: &mut [u8],
        c: &mut EndpointCounters,
    ) {
        if matches!(self.tcp.state(), State::Established | State::CloseWait)
            && !matches!(self.closing, Closing::TcpClosed { .. })
            && self.qp().is_some_and(|q| q.wants_to_send())
        {
            self.move_records(tags, mem, scratch, c);
        }
    }

    /// [`Conn::drive_tx`]'s work: records while the queue pair has some and TCP has room.
    fn move_records<M: Memory + ?Sized>(
        &mut self,
        tags: &StagTable,
        mem: &M,
        scratch: &mut [u8],
        c: &mut EndpointCounters,
    ) {
        let Some(Iwarp { qp, .. }) = self.state.iwarp_mut() else {
            return;
        };
        let tcp = &mut self.tcp;
        let mut refused = false;
        // Startup bytes (the MPA Request/Reply) ride as owned bytes, ahead of every FPDU.
        while qp.has_startup_bytes() && tcp.send_capacity() >= qp.max_fpdu_len() as u64 {
            let Some(n) = qp.poll_transmit(tags, mem, scratch) else {
                break;
            };
            refused = tcp.send_record_bytes(&scratch[..n]).is_err();
            if refused {
                break;
            }
        }
        if !refused {
            // FPDUs are only claimed here; `FpduSource` frames each straight into its packet
            // (markers and CRC in that pass), so a first transmission is framed once.
            // The connection's state and mode are checked once for the run; a connection
            // that cannot take records refuses the first FPDU claimed, as `send_record` would.
            let room = tcp.send_capacity();
            match tcp.record_queue() {
                Ok(mut records) => {
                    qp.claim_fpdus(tags, scratch.len(), room, |start, n| {
                        refused = records.push(n as u32, start).is_err();
                        !refused
                    });
                }
                Err(_) => refused = qp.claim_fpdus(tags, scratch.len(), room, |_, _| false) > 0,
            }
        }
        if refused {
            // The stream would have a hole: give the connection up rather than corrupt it.
            c.internal_errors += 1;
            self.abort();
        }
    }

    /// Whether what a receive left on this connection is at most completions and queue-pair
    /// events: MPA up (queue pair established, out of the backlog), nothing the round must do
    /// at once (no TCP event, no chunk to feed, nothing to send now, queue pair with nothing
    /// to send, not closing).
    pub fn quiet_after_receive(&self) -> bool {
        // (MPA may have come up in this receive, before the round that moves the connection on
        // runs: quiet when no backlog waits for that round.)
        self.state
            .iwarp()
            .filter(|i| {
                !matches!(
                    i.mpa,
                    MpaPhase::Startup {
                        backlog: Some(_),
                        ..
                    }
                )
            })
            .is_some_and(|i| self.nothing_to_do_at_once(i))
    }

    /// Whether this connection's round has nothing to do but hand what TCP acknowledged to the
    /// queue pair, move the completions that makes and arm the timers: as
    /// [`Conn::quiet_after_receive`], with MPA up (no startup deadline or backlog to mind) and
    /// no queue-pair event waiting. Handing over acknowledgements changes none of this (it
    /// only completes work), so it still holds after it.
    #[inline(always)]
    pub fn quiet_round(&self) -> bool {
        let ConnState::Iwarp(i) = &self.state else {
            return false;
        };
        self.nothing_to_do_at_once(i) && matches!(i.mpa, MpaPhase::Up) && !i.qp.has_events()
    }

    /// Whether this connection's round has nothing to do but what [`Conn::quiet_round`]'s
    /// does and one pure ACK to send (its delayed ACK fell due): as [`Conn::quiet_round`], with
    /// that ACK as TCP's only output. Such a round is the quiet one and the frames stage.
    #[inline(always)]
    pub fn ack_round(&self) -> bool {
        let ConnState::Iwarp(i) = &self.state else {
            return false;
        };
        self.tcp.has_only_an_ack_to_send()
            && self.nothing_to_do_but_send(i)
            && matches!(i.mpa, MpaPhase::Up)
            && !i.qp.has_events()
    }

    /// The part of [`Conn::quiet_after_receive`] and [`Conn::quiet_round`] past MPA's phase:
    /// nothing to send now and [`Conn::nothing_to_do_but_send`]. The queue pair is asked
    /// first: work posted since the last round (a message to send) is the common reason a
    /// round is not quiet.
    #[inline(always)]
    fn nothing_to_do_at_once(&self, i: &Iwarp) -> bool {
        !i.qp.wants_to_send() && self.tcp.has_nothing_to_send() && self.nothing_else_to_do(i)
    }

    /// [`Conn::nothing_else_to_do`] and the queue pair with nothing to send.
    #[inline(always)]
    fn nothing_to_do_but_send(&self, i: &Iwarp) -> bool {
        self.nothing_else_to_do(i) && !i.qp.wants_to_send()
    }

    /// No TCP event or chunk to feed, not closing, no overrun, the queue pair established.
    #[inline(always)]
    fn nothing_else_to_do(&self, i: &Iwarp) -> bool {
        !self.tcp.has_events()
            && !self.tcp.has_recv_chunk()
            && !self.closing.is_closing()
            && !i.rx.overrun
            && i.qp.is_established()
    }

    /// Tells the queue pair how far TCP has its transmit stream acknowledged. (Inlined into
    /// both kinds of round: it runs in every one.)
    #[inline(always)]
    pub fn drive_acked(&mut self) {
        let Some(Iwarp { qp, acked, .. }) = self.state.iwarp_mut() else {
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
        let delta = una.wrapping_sub(*acked as u32);
        if (delta as i32) > 0 {
            *acked = (*acked + u64::from(delta)).min(qp.tx_offset());
            qp.on_acked(*acked);
        }
    }
}

/// The earlier of two optional deadlines.
fn earliest(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
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
    #[inline]
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
