//! A connection's round, in stages ([`Round`]): TCP events, deadlines, receive (queue-pair
//! events and completions included), work requests into TCP as records, segments into frames
//! (FPDUs framed straight into the frame), close; then its timer. Also the round after a
//! receive batch alone (`service_received`) and the frames built outside a connection.

use std::collections::VecDeque;
use std::time::Instant;

use ddp::{Memory, QpEvent, StagTable};
use mpa::FramingError;
use tcp_offload::{CloseReason, Event, State, Timestamp};

use super::admission::leave_backlog;
use super::listeners::ListenerEntry;
use super::CompletionQueue;
use super::{shrink_sparse, Endpoint};
use crate::conn::{Closing, Conn, ConnId, FpduSource, Role};
use crate::counters::EndpointCounters;
use crate::domain::{Domain, DomainGuard};
use crate::ethernet::{self, EthernetRepr, Mac};
use crate::event::EndpointEvent;
use crate::frame_sink::{FrameSink, TxOutcome};
use crate::neighbours::Neighbours;
use crate::timer_wheel::TimerWheel;

impl<D: Domain> Endpoint<D> {
    /// Writes the frames built outside a connection (RSTs for strays).
    pub(crate) fn flush_pending(&mut self, now: Instant, io: &mut dyn FrameSink) {
        while let Some(f) = self.pending_tx.pop() {
            let r = io.tx_frame(now, &mut |buf: &mut [u8]| {
                let n = f.len().min(buf.len());
                buf[..n].copy_from_slice(&f[..n]);
                Some(n)
            });
            if r == TxOutcome::NoBuffer {
                self.counters.tx_no_buffer += 1;
                self.pending_tx.push(f);
                return;
            }
            self.counters.tx_packets += 1;
            self.counters.tx_bytes += f.len() as u64;
        }
    }

    /// After a receive batch: when no frame went to a listener or a stray and every
    /// connection the batch marked is quiet (what it received is placed, no TCP event, nothing
    /// to send now), runs what their rounds would (acknowledged work completed, completions
    /// and queue-pair events queued, timers armed), unmarks them and returns true. The rest of
    /// the engine's round (the other timers, the transmit ring's flush) may then wait for its
    /// next call: the application sees the data and its completions first. False: nothing was
    /// done, run the whole round.
    pub fn service_received(&mut self) -> bool {
        if self.listener_rx || self.busy || !self.pending_tx.is_empty() {
            return false;
        }
        let quiet = |id: &u64| {
            self.conns
                .get(id)
                .is_some_and(|c| !c.dirty || c.quiet_after_receive())
        };
        if !self.dirty.iter().all(quiet) {
            return false;
        }
        // The marks left for the next round are pushed after the connections marked now.
        let marked = self.dirty.len();
        for i in 0..marked {
            let id = self.dirty[i];
            let Some(c) = self.conns.get_mut(&id).filter(|c| c.dirty) else {
                continue;
            };
            c.drive_acked();
            drain_qp(
                c,
                ConnId(id),
                self.clock.last,
                &mut self.events,
                &mut self.completions,
                &mut self.counters,
            );
            if c.quiet_after_receive() {
                c.dirty = false;
                let deadline = c.deadline(&self.clock);
                arm(&mut self.wheel, id, c, deadline);
            } else {
                // What it completed left it work (a close, something to send): its round
                // runs at the next call.
                self.dirty.push(id);
            }
        }
        if self.dirty.len() == marked {
            self.dirty.clear();
        } else {
            self.dirty.drain(..marked);
        }
        true
    }

    /// Runs one connection's round, stage by stage (see [`Round`]): TCP events, deadlines, receive,
    /// transmit, frames, and its removal once TCP ended. With the fast path on
    /// (`EndpointConfig::tcp.fast_path`; the tests compare the two), a quiet connection
    /// ([`Conn::quiet_round`]: an ACK or in-order data received, nothing to send) runs only what
    /// such a round does: the hand-over of what TCP acknowledged, the completions and its timers.
    /// With `only_if_marked` a connection no longer marked is left alone: it was serviced since it
    /// was marked (by `transmit_conn` after a post), its round ran whole then, and a frame it could
    /// not get marked it again. Returns whether it is marked for the next round. Inlined into
    /// its callers: left out of line, its round pays for the call and the registers saved.
    #[inline(always)]
    pub(crate) fn service(
        &mut self,
        now: Instant,
        id: u64,
        io: &mut dyn FrameSink,
        only_if_marked: bool,
    ) -> bool {
        let Some(c) = self.conns.get_mut(&id) else {
            return false;
        };
        if only_if_marked && !c.dirty {
            return false;
        }
        c.dirty = false;
        let ack_round = self.cfg.tcp.fast_path && c.ack_round();
        let quiet = ack_round || self.cfg.tcp.fast_path && c.quiet_round();
        let closed = if quiet {
            // Every stage but the receive's hand-over of what TCP acknowledged (and the
            // completions it makes) has nothing to do (but the pure ACK of an ACK round); the
            // timers are armed as after a round.
            c.drive_acked();
            drain_qp_inline(
                c,
                ConnId(id),
                now,
                &mut self.events,
                &mut self.completions,
                &mut self.counters,
            );
            if ack_round {
                return self.send_pure_ack(now, id, io);
            }
            debug_assert!(
                c.quiet_round() && c.tcp.state() != State::Closed,
                "handing over ACKs left work"
            );
            None
        } else {
            let mut round = Round {
                now,
                ts: self.clock.stamp,
                id,
                mac: self.cfg.mac,
                events: &mut self.events,
                completions: &mut self.completions,
                counters: &mut self.counters,
                listeners: &mut self.listeners,
                neighbours: &self.neighbours,
                scratch: &mut self.scratch,
                rebuild: &mut self.rebuild,
                dirty: &mut self.dirty,
                busy: &mut self.busy,
            };
            let news = round.events(c);
            round.deadlines(c);
            // The connection's tags and memory: its protection domain's (held for the rest of the
            // round; lock order endpoint -> domain), or the endpoint's own. The handle is taken out
            // of the connection for the round and put back after it (a move, not a reference count
            // up and down per round); nothing in between looks at `c.pd`.
            let pd = c.pd.take();
            let mut guard = pd.as_ref().map(|p| p.lock());
            let (tags, mem): (&mut StagTable, &mut dyn Memory) = match guard.as_mut() {
                Some(g) => g.parts(),
                None => (&mut self.tags, &mut self.mem),
            };
            round.receive(c, tags, mem, news.peer_closed);
            round.transmit(c, tags, mem);
            round.frames(c, tags, mem, io);
            drop(guard);
            c.pd = pd;
            round.close(c, news.closed)
        };
        match closed {
            Some(reason) => {
                self.remove_closed(id, reason);
                false
            }
            None => {
                // A quiet connection's only deadlines are TCP's (MPA up, not closing).
                let deadline = if quiet {
                    debug_assert_eq!(c.tcp.poll_timeout_but_ack(), c.deadline(&self.clock));
                    c.tcp.poll_timeout_but_ack()
                } else {
                    c.deadline(&self.clock)
                };
                arm(&mut self.wheel, id, c, deadline);
                c.dirty
            }
        }
    }

    /// The rest of [`Endpoint::service`]'s round of connection `id` when [`Conn::ack_round`]
    /// held and what TCP acknowledged is handed over: the pure ACK into a frame, the timers
    /// armed. The other stages have nothing to do, and a pure ACK rebuilds no record: the
    /// round's result with none of its other work. Out of line: the rounds inlined into the
    /// loop stay as they are.
    #[inline(never)]
    fn send_pure_ack(&mut self, now: Instant, id: u64, io: &mut dyn FrameSink) -> bool {
        let Some(c) = self.conns.get_mut(&id) else {
            return false;
        };
        debug_assert!(c.ack_round(), "handing over ACKs left work");
        if let Some(dst) = next_hop(c, &self.neighbours, &mut self.counters) {
            let (ts, macs) = (self.clock.stamp, mac_pair(dst, self.cfg.mac));
            // (The rounds' record source, though a pure ACK asks it for nothing.)
            let mut src_rec = FpduSource {
                qp: c.state.iwarp_mut().map(|i| &mut i.qp),
                tags: &self.tags,
                mem: &self.mem as &dyn Memory,
                scratch: &mut self.rebuild,
                failures: 0,
            };
            let tcp = &mut c.tcp;
            let mut produced = 0usize;
            let r = io.tx_frame(now, &mut |buf: &mut [u8]| {
                let n = frame_out_to(buf, &macs, |b| tcp.poll_transmit_with(ts, b, &mut src_rec))?;
                produced = n;
                Some(n)
            });
            match r {
                TxOutcome::NoBuffer => {
                    self.counters.tx_no_buffer += 1;
                    self.busy = true;
                    // Marked again: the next round retries it when frames are back.
                    c.mark(id, &mut self.dirty);
                }
                _ if produced == 0 => {}
                _ => {
                    self.counters.tx_packets += 1;
                    self.counters.tx_bytes += produced as u64;
                }
            }
        }
        debug_assert!(
            !c.qp().is_some_and(|q| q.has_output()) && c.tcp.state() != State::Closed,
            "a pure ACK left the queue pair output or closed the connection"
        );
        // Its only deadlines are TCP's (MPA up, not closing).
        debug_assert_eq!(c.tcp.poll_timeout_but_ack(), c.deadline(&self.clock));
        let deadline = c.tcp.poll_timeout_but_ack();
        arm(&mut self.wheel, id, c, deadline);
        c.dirty
    }

    /// Takes closed connection `id` out of the tables: its timer, its listener's backlog, its
    /// flow; what it counted is added to the endpoint's counters.
    fn remove_closed(&mut self, id: u64, reason: CloseReason) {
        let Some(mut c) = self.conns.remove(&id) else {
            return;
        };
        self.wheel.cancel(id, &mut c.armed);
        if let Some(l) = c.backlog() {
            leave_backlog(&mut self.listeners, l);
        }
        c.fold_counters(&mut self.counters);
        self.flows.remove(&c.tcp.tuple());
        self.last_flow = None;
        shrink_sparse(&mut self.flows);
        self.counters.connections_closed += 1;
        self.events.push_back(EndpointEvent::Closed {
            conn: ConnId(id),
            reason,
        });
    }
}

/// What TCP's events told a connection's round.
struct TcpNews {
    /// TCP ended, for this reason.
    closed: Option<CloseReason>,
    /// The peer's FIN arrived.
    peer_closed: bool,
}

/// One connection's round: what it reaches of the endpoint besides the connection (queues,
/// counters, tables, buffers), borrowed apart from the connection table for the round. Its
/// stages run in this order, each a method: [`events`](Self::events),
/// [`deadlines`](Self::deadlines), [`receive`](Self::receive), [`transmit`](Self::transmit),
/// [`frames`](Self::frames), [`close`](Self::close).
struct Round<'a> {
    now: Instant,
    /// `now` as TCP counts time.
    ts: Timestamp,
    id: u64,
    /// Our MAC, the source of every frame.
    mac: Mac,
    events: &'a mut VecDeque<EndpointEvent>,
    completions: &'a mut CompletionQueue,
    counters: &'a mut EndpointCounters,
    listeners: &'a mut [ListenerEntry],
    neighbours: &'a Neighbours,
    /// Startup frames and claimed FPDUs, before TCP takes them.
    scratch: &'a mut [u8],
    /// FPDUs rebuilt for a partial retransmission.
    rebuild: &'a mut [u8],
    /// The connections marked for the next round.
    dirty: &'a mut Vec<u64>,
    /// The sink ran out of buffers in this round.
    busy: &'a mut bool,
}

impl Round<'_> {
    fn conn_id(&self) -> ConnId {
        ConnId(self.id)
    }

    /// Events: TCP's events become the application's (a stream's data events, the peer's
    /// FIN); an iWARP initiator whose handshake completed starts its queue pair (MPA Request).
    fn events<D: Domain>(&mut self, c: &mut Conn<D>) -> TcpNews {
        let mut news = TcpNews {
            closed: None,
            peer_closed: false,
        };
        let mut start = false;
        while let Some(e) = c.tcp.poll_event() {
            match e {
                Event::Connected => start = true,
                Event::PeerClosed => {
                    self.events.push_back(EndpointEvent::PeerClosed {
                        conn: self.conn_id(),
                    });
                    news.peer_closed = true;
                }
                Event::Closed(r) => news.closed = Some(r),
                Event::Readable | Event::Writable | Event::RecordAcked(_) => {}
            }
            if c.is_stream() {
                super::stream::stream_event(c, self.conn_id(), e, self.events);
            }
        }
        if start && c.role == Role::Initiator {
            self.counters.connections_opened += 1;
            // A byte stream has no queue pair: it is ready once TCP is.
            if !c.is_stream() && !c.start_qp(self.id, self.now, false, None) {
                self.counters.internal_errors += 1;
            }
        }
        news
    }

    /// Deadlines: an MPA Request the application did not answer in time, and a close the
    /// application asked for that did not finish in time, reset the connection.
    fn deadlines<D>(&mut self, c: &mut Conn<D>) {
        if c.decide_deadline_passed(self.now) {
            self.counters.accept_timeouts += 1;
            c.abort();
            self.events.push_back(EndpointEvent::StartupFailed {
                conn: self.conn_id(),
                event: QpEvent::StartupFailed(mpa::StartupError::Timeout),
            });
        }
        if c.closing.deadline_passed(self.now)
            && !matches!(c.tcp.state(), State::TimeWait | State::Closed)
        {
            self.counters.close_timeouts += 1;
            c.abort();
        }
    }

    /// Receive: in-order feed and out-of-order placement straight into the regions, what TCP
    /// has acknowledged handed to the queue pair, the peer's FIN, then the queue pair's
    /// completions and events.
    fn receive<D>(
        &mut self,
        c: &mut Conn<D>,
        tags: &mut StagTable,
        mem: &mut dyn Memory,
        peer_closed: bool,
    ) {
        c.drive_rx(self.now, tags, mem, self.counters);
        if c.overran_startup() && c.tcp.state() != State::Closed {
            // More than a startup frame before MPA was up (counted by the feed): reset.
            c.abort();
        }
        c.drive_acked();
        if peer_closed && !c.is_stream() {
            // Only now: data and ACKs that came with the FIN are in (delivered, completed).
            // Once MPA is up the stream is half-closed (DDP -06 §6.2.1, DDP-69): receives and
            // Reads flush, our Sends, Writes and Read Responses go on (TCP is in CLOSE-WAIT and
            // still sends), and our FIN follows the application's close (DDP-70). Before MPA
            // is up the startup fails and TCP closes.
            match c.qp_mut() {
                Some(q) if q.is_established() => q.handle_peer_fin(),
                Some(q) => {
                    q.handle_peer_fin();
                    c.closing.begin();
                }
                None => c.closing.begin(),
            }
        }
        self.qp_output::<D, true>(c);
    }

    /// Transmit: the queue pair's output into TCP as records; a closing connection whose queue
    /// pair is idle and whose TCP queue is empty closes TCP (FIN).
    fn transmit<D>(&mut self, c: &mut Conn<D>, tags: &mut StagTable, mem: &mut dyn Memory) {
        c.drive_tx(tags, mem, self.scratch, self.counters);
        if matches!(c.closing, Closing::Draining { .. }) {
            let idle = c.qp().is_none_or(|q| q.is_idle() || q.is_error());
            if idle && c.tcp.send_queued() == 0 {
                c.closing.close_tcp();
                c.tcp.close(self.ts);
            }
        }
    }

    /// Frames: TCP's segments into `io`'s frames (FPDUs framed straight into the frame), TCP
    /// topped up from the queue pair as room opens; then the completions and events of this
    /// round's transmissions and ACKs (a Terminate sent). No next-hop lookup and no frame
    /// taken for a connection with nothing to send, as in most rounds, and the next hop kept
    /// while the neighbour table stays the same; a frame short of a next hop is counted. Out
    /// of frames, the connection is marked for the next round.
    fn frames<D>(
        &mut self,
        c: &mut Conn<D>,
        tags: &mut StagTable,
        mem: &mut dyn Memory,
        io: &mut dyn FrameSink,
    ) {
        let hop = if c.tcp.has_nothing_to_send() {
            None
        } else {
            next_hop(c, self.neighbours, self.counters)
        };
        if let Some(dst) = hop {
            // Checked above for the first frames, after an abort for the RST.
            loop {
                let (failures, stopped) = self.send_frames(c, tags, mem, io, dst);
                if failures > 0 {
                    // An FPDU could not be rebuilt (its region was deregistered while it was
                    // unacknowledged): the stream cannot go on with the same octets.
                    self.counters.rebuild_failures += failures;
                    c.abort();
                }
                if stopped || c.tcp.has_nothing_to_send() {
                    break;
                }
            }
            // No top-up between frames: a frame sent frees no room in TCP's send buffer (only
            // ACKs do, received before `transmit` moved what fitted) and gives the queue pair
            // nothing new to send. Debug builds check that a top-up would move nothing.
            if cfg!(debug_assertions) {
                let queued = c.tcp.send_queued();
                c.drive_tx(tags, mem, self.scratch, self.counters);
                debug_assert_eq!(c.tcp.send_queued(), queued, "frames made room");
            }
        }
        self.qp_output::<D, false>(c);
    }

    /// Sends TCP's segments in frames to `dst` (TCP has one to send) while it has more; stops
    /// after a frame with an FPDU that could not be rebuilt, out of frames (the connection
    /// marked for the next round) or when a frame came back empty. Returns the rebuild
    /// failures and whether it stopped for want of a frame or of a segment.
    fn send_frames<D>(
        &mut self,
        c: &mut Conn<D>,
        tags: &StagTable,
        mem: &dyn Memory,
        io: &mut dyn FrameSink,
        dst: Mac,
    ) -> (u64, bool) {
        let (now, ts) = (self.now, self.ts);
        let macs = mac_pair(dst, self.mac);
        let mut src_rec = FpduSource {
            qp: c.state.iwarp_mut().map(|i| &mut i.qp),
            tags,
            mem,
            scratch: self.rebuild,
            failures: 0,
        };
        let tcp = &mut c.tcp;
        loop {
            let mut produced = 0usize;
            let r = io.tx_frame(now, &mut |buf: &mut [u8]| {
                let n = frame_out_to(buf, &macs, |b| tcp.poll_transmit_with(ts, b, &mut src_rec))?;
                produced = n;
                Some(n)
            });
            let stopped = match r {
                TxOutcome::NoBuffer => {
                    self.counters.tx_no_buffer += 1;
                    *self.busy = true;
                    // Marked again (as `Conn::mark`): the next round retries it when frames
                    // are back.
                    if !c.dirty {
                        c.dirty = true;
                        self.dirty.push(self.id);
                    }
                    true
                }
                _ if produced == 0 => true,
                _ => {
                    self.counters.tx_packets += 1;
                    self.counters.tx_bytes += produced as u64;
                    false
                }
            };
            if stopped || src_rec.failures > 0 {
                return (src_rec.failures, stopped);
            }
            if tcp.has_nothing_to_send() {
                return (0, true);
            }
        }
    }

    /// Close: when TCP ended (or was found CLOSED: aborted in this round), the queue pair
    /// learns it and its flushed work completes; returns the reason to remove the connection
    /// for. A stream closed in order is kept while its unread octets wait for the application.
    fn close<D>(&mut self, c: &mut Conn<D>, closed: Option<CloseReason>) -> Option<CloseReason> {
        let closed = match closed {
            None if c.tcp.state() == State::Closed => Some(CloseReason::Aborted),
            r => r,
        };
        let reason = closed.and_then(|r| super::stream::close_reason_unless_held(c, r))?;
        if let Some(q) = c.qp_mut() {
            q.handle_close();
            q.move_completions(self.completions);
        }
        Some(reason)
    }

    /// The queue pair's completions and events into the endpoint's queues; a connection whose
    /// MPA came up leaves its listener's backlog. `AFTER_RECEIVE`: the receive stage's, where
    /// the completions of what TCP acknowledged show up, drained inline; out of line after the
    /// frames.
    #[inline(always)]
    fn qp_output<D, const AFTER_RECEIVE: bool>(&mut self, c: &mut Conn<D>) {
        if c.qp().is_some_and(|q| q.has_output()) {
            let (conn, now) = (self.conn_id(), self.now);
            let (events, completions, counters) = (
                &mut *self.events,
                &mut *self.completions,
                &mut *self.counters,
            );
            if AFTER_RECEIVE {
                drain_qp_inline(c, conn, now, events, completions, counters);
            } else {
                drain_qp(c, conn, now, events, completions, counters);
            }
        }
        if let Some(l) = c.note_mpa_up() {
            leave_backlog(self.listeners, l);
        }
    }
}

/// The next hop of `c`'s frames, looked up again only when the neighbour table changed since
/// it was; none is counted.
#[inline(always)]
fn next_hop<D>(
    c: &mut Conn<D>,
    neighbours: &Neighbours,
    counters: &mut EndpointCounters,
) -> Option<Mac> {
    let generation = neighbours.generation();
    let hop = match c.hop {
        Some((g, mac)) if g == generation => Some(mac),
        _ => {
            let hop = neighbours.next_hop(c.tcp.tuple().remote.ip());
            c.hop = hop.map(|mac| (generation, mac));
            hop
        }
    };
    if hop.is_none() {
        counters.no_neighbour += 1;
    }
    hop
}

/// Timers: the connection's one wheel entry fires no later than its earliest deadline but
/// TCP's delayed ACK. It moves only when the deadline comes earlier: a later one (the
/// retransmission timer pushed back by every ACK) or none leaves it armed, and when it fires
/// early `handle_timeout` finds nothing due and the round re-arms it for the real deadline
/// (one spurious round per timeout period instead of a wheel move per segment). The delayed
/// ACK, armed anew after most segments received and mostly stopped by the next segment sent,
/// is queued in the wheel's queued lane (an append, nothing moved) when no deadline of the
/// connection at or before it is queued there; a queued deadline that fires early is
/// followed by TCP's own (`Endpoint::expire_connections`), as the wheel entry is.
/// `deadline` is the connection's [`Conn::deadline`]. (Inlined: it ends every round.)
#[inline(always)]
fn arm<D>(wheel: &mut TimerWheel, id: u64, c: &mut Conn<D>, deadline: Option<Timestamp>) {
    if let Some(d) = deadline {
        if c.armed.is_none_or(|a| d < a.at) {
            wheel.insert(id, d, &mut c.armed);
        }
    }
    if let Some(d) = c.tcp.delayed_ack_deadline() {
        if c.ack_queued.is_none_or(|q| d < q) {
            wheel.queue(id, d);
            c.ack_queued = Some(d);
        }
    }
}

/// Moves a queue pair's completions and events to the endpoint's queues; stream errors and
/// failed startups mark the connection for closing.
#[inline(never)]
fn drain_qp<D>(
    c: &mut Conn<D>,
    conn: ConnId,
    now: Instant,
    events: &mut VecDeque<EndpointEvent>,
    completions: &mut CompletionQueue,
    counters: &mut EndpointCounters,
) {
    drain_qp_inline(c, conn, now, events, completions, counters);
}

/// [`drain_qp`], inlined for its completions (the common output); the events are
/// [`drain_qp_events`]'s, out of line.
#[inline(always)]
fn drain_qp_inline<D>(
    c: &mut Conn<D>,
    conn: ConnId,
    now: Instant,
    events: &mut VecDeque<EndpointEvent>,
    completions: &mut CompletionQueue,
    counters: &mut EndpointCounters,
) {
    let Some(q) = c.state.iwarp_mut().map(|i| &mut i.qp) else {
        return;
    };
    q.move_completions(completions);
    // Most output is completions alone: no event to look for.
    if q.has_events() {
        drain_qp_events(c, conn, now, events, counters);
    }
}

/// [`drain_qp`]'s events: into the endpoint's events, stream errors and failed startups
/// marking the connection for closing, an MPA Request starting the application's deadline to
/// answer it.
#[inline(never)]
fn drain_qp_events<D>(
    c: &mut Conn<D>,
    conn: ConnId,
    now: Instant,
    events: &mut VecDeque<EndpointEvent>,
    counters: &mut EndpointCounters,
) {
    let mut requested = false;
    while let Some(e) = c.qp_mut().and_then(|q| q.poll_event()) {
        match e {
            QpEvent::Established {
                peer_private_data,
                negotiated,
            } => events.push_back(EndpointEvent::Established {
                conn,
                peer_private_data,
                negotiated,
            }),
            QpEvent::ConnectRequest(request) => {
                requested = true;
                events.push_back(EndpointEvent::ConnectRequest { conn, request })
            }
            event @ (QpEvent::Rejected { .. } | QpEvent::StartupFailed(_)) => {
                c.closing.begin();
                // RFC 6581 §5: an IRD/ORD or RTR refusal queued a Terminate; TCP closes
                // once it is out. Anything else closes at once.
                let terminate = matches!(
                    &event,
                    QpEvent::StartupFailed(e) if e.action() == mpa::ErrorAction::Terminate
                );
                if !terminate {
                    c.tcp.abort();
                }
                events.push_back(EndpointEvent::StartupFailed { conn, event });
            }
            ev => {
                match ev {
                    QpEvent::FramingError(FramingError::CrcMismatch) => counters.crc_errors += 1,
                    QpEvent::FramingError(_) => counters.framing_errors += 1,
                    QpEvent::TerminateSent(_) => counters.terminates_sent += 1,
                    QpEvent::TerminateReceived(_) | QpEvent::MalformedTerminateReceived => {
                        counters.terminates_received += 1
                    }
                    _ => {}
                }
                // The stream is dead: close TCP once what is queued (the Terminate) is out.
                c.closing.begin();
                events.push_back(EndpointEvent::StreamError { conn, event: ev });
            }
        }
    }
    if requested {
        c.await_answer(now + c.settings.accept_timeout);
    }
}

/// Writes an IPv4 packet with an Ethernet header in front into a transmit frame: `emit` writes
/// the packet at `buf[14..]` and returns its length.
pub(crate) fn frame_out(
    buf: &mut [u8],
    src: Mac,
    dst: Mac,
    emit: impl FnOnce(&mut [u8]) -> Option<usize>,
) -> Option<usize> {
    if buf.len() <= ethernet::HEADER_LEN {
        return None;
    }
    let n = emit(&mut buf[ethernet::HEADER_LEN..])?;
    EthernetRepr {
        dst,
        src,
        ethertype: ethernet::ethertype_of(&buf[ethernet::HEADER_LEN..]),
    }
    .emit(buf);
    Some(ethernet::HEADER_LEN + n)
}

/// An Ethernet header's first 12 octets: destination and source MAC.
fn mac_pair(dst: Mac, src: Mac) -> [u8; 12] {
    let mut m = [0u8; 12];
    m[..6].copy_from_slice(&dst);
    m[6..].copy_from_slice(&src);
    m
}

/// [`frame_out`] with the header's addresses as [`mac_pair`] gives them (found once for a
/// run of frames): the same frame.
#[inline(always)]
fn frame_out_to(
    buf: &mut [u8],
    macs: &[u8; 12],
    emit: impl FnOnce(&mut [u8]) -> Option<usize>,
) -> Option<usize> {
    let (head, packet) = buf.split_first_chunk_mut::<{ ethernet::HEADER_LEN }>()?;
    if packet.is_empty() {
        return None;
    }
    let n = emit(packet)?;
    let ethertype = ethernet::ethertype_of(packet);
    head[..12].copy_from_slice(macs);
    head[12..].copy_from_slice(&ethertype.to_be_bytes());
    debug_assert!({
        let (dst, src) = (macs[..6].try_into(), macs[6..].try_into());
        let mut want = [0u8; ethernet::HEADER_LEN];
        let repr = EthernetRepr {
            dst: dst.expect("6 octets"),
            src: src.expect("6 octets"),
            ethertype,
        };
        repr.emit(&mut want) && want == *head
    });
    Some(ethernet::HEADER_LEN + n)
}
