//! A connection's round: TCP events, receive, queue-pair events and completions, work requests
//! into TCP as records, segments into frames (FPDUs framed straight into the frame), close and
//! timers. And the frames built outside a connection.

use std::collections::VecDeque;
use std::time::Instant;

use ddp::{Memory, QpEvent, StagTable, WorkCompletion};
use mpa::FramingError;
use tcp_offload::{CloseReason, Event, State};

use super::admission::leave_backlog;
use super::{shrink_sparse, Endpoint};
use crate::conn::{Closing, Conn, ConnId, ConnState, FpduSource, Role};
use crate::counters::EndpointCounters;
use crate::domain::{Domain, DomainGuard};
use crate::ethernet::{self, EthernetRepr, Mac};
use crate::event::EndpointEvent;
use crate::frame_sink::{FrameSink, TxOutcome};
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
        let mut dirty = std::mem::take(&mut self.dirty);
        for id in dirty.drain(..) {
            let Some(c) = self.conns.get_mut(&id).filter(|c| c.dirty) else {
                continue;
            };
            c.drive_acked();
            drain_qp(
                c,
                ConnId(id),
                self.last_now,
                &mut self.events,
                &mut self.completions,
                &mut self.counters,
            );
            if c.quiet_after_receive() {
                c.dirty = false;
                arm(&mut self.wheel, id, c);
            } else {
                // What it completed left it work (a close, something to send): its round
                // runs at the next call.
                self.dirty.push(id);
            }
        }
        if self.dirty.is_empty() {
            self.dirty = dirty;
        }
        true
    }

    /// Runs one connection: TCP events, receive, queue-pair events, transmit, timers. With
    /// `only_if_marked` a connection no longer marked is left alone: it was serviced since it
    /// was marked (by `transmit_conn` after a post), its round ran whole then, and a frame it
    /// could not get marked it again. Returns whether it is marked for the next round.
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
        let mut closed = None;
        let mut start = false;
        let mut peer_closed = false;
        while let Some(e) = c.tcp.poll_event() {
            match e {
                Event::Connected => start = true,
                Event::PeerClosed => {
                    self.events
                        .push_back(EndpointEvent::PeerClosed { conn: ConnId(id) });
                    peer_closed = true;
                }
                Event::Closed(r) => closed = Some(r),
                Event::Readable | Event::Writable | Event::RecordAcked(_) => {}
            }
            if c.is_stream() {
                super::stream::stream_event(c, ConnId(id), e, &mut self.events);
            }
        }
        if start && c.role == Role::Initiator && !c.is_stream() {
            self.counters.connections_opened += 1;
            if !c.start_qp(id, now, false, None) {
                self.counters.internal_errors += 1;
            }
        }
        if c.decide_deadline_passed(now) {
            // The application never answered the MPA Request: reset.
            self.counters.accept_timeouts += 1;
            c.abort();
            self.events.push_back(EndpointEvent::StartupFailed {
                conn: ConnId(id),
                event: QpEvent::StartupFailed(mpa::StartupError::Timeout),
            });
        }
        if c.closing.deadline_passed(now)
            && !matches!(c.tcp.state(), State::TimeWait | State::Closed)
        {
            // Closed by the application and not finished in time: abort (RST).
            self.counters.close_timeouts += 1;
            c.abort();
        }
        // The connection's tags and memory: its protection domain's (held for the whole round;
        // lock order endpoint -> domain), or the endpoint's own. The handle is taken out of
        // the connection for the round and put back after it (a move, not a reference count
        // up and down per round); nothing in between looks at `c.pd`.
        let pd = c.pd.take();
        let mut guard = pd.as_ref().map(|p| p.lock());
        let (tags, mem): (&mut StagTable, &mut dyn Memory) = match guard.as_mut() {
            Some(g) => g.parts(),
            None => (&mut self.tags, &mut self.mem),
        };
        // Receive: in-order feed and out-of-order placement, straight into the regions.
        c.drive_rx(now, tags, mem, &mut self.counters);
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
        // Queue-pair events and completions.
        drain_qp(
            c,
            ConnId(id),
            now,
            &mut self.events,
            &mut self.completions,
            &mut self.counters,
        );
        if let Some(l) = c.note_mpa_up() {
            leave_backlog(&mut self.listeners, l);
        }
        // Transmit: queue-pair output into TCP as records.
        c.drive_tx(tags, mem, &mut self.scratch, &mut self.counters);
        if matches!(c.closing, Closing::Draining { .. }) {
            let idle = c.qp().is_none_or(|q| q.is_idle() || q.is_error());
            if idle && c.tcp.send_queued() == 0 {
                c.closing.close_tcp();
                c.tcp.close(now);
            }
        }
        // Segments into frames (no next-hop lookup and no frame taken for a connection with
        // nothing to send, as in most rounds; a frame short of a next hop is counted).
        let src = self.cfg.mac;
        let dst_ip = c.tcp.tuple().remote.ip();
        let hop = if c.tcp.has_nothing_to_send() {
            None
        } else {
            let hop = self.neighbours.next_hop(dst_ip);
            if hop.is_none() {
                self.counters.no_neighbour += 1;
            }
            hop
        };
        if let Some(dst) = hop {
            // Checked above for the first frame, at the end of the loop for the next.
            loop {
                let mut produced = 0usize;
                let mut src_rec = FpduSource {
                    qp: c.state.iwarp_mut().map(|i| &mut i.qp),
                    tags: &*tags,
                    mem: &*mem,
                    scratch: &mut self.rebuild,
                    failures: 0,
                };
                let tcp = &mut c.tcp;
                let r = io.tx_frame(now, &mut |buf: &mut [u8]| {
                    let n = frame_out(buf, src, dst, |b| {
                        tcp.poll_transmit_with(now, b, &mut src_rec)
                    })?;
                    produced = n;
                    Some(n)
                });
                let failures = src_rec.failures;
                if failures > 0 {
                    // An FPDU could not be rebuilt (its region was deregistered while it was
                    // unacknowledged): the stream cannot go on with the same octets.
                    self.counters.rebuild_failures += failures;
                    c.abort();
                }
                match r {
                    TxOutcome::NoBuffer => {
                        self.counters.tx_no_buffer += 1;
                        self.busy = true;
                        // Marked again: the next round retries it when frames are back.
                        if !c.dirty {
                            c.dirty = true;
                            self.dirty.push(id);
                        }
                        break;
                    }
                    _ if produced == 0 => break,
                    _ => {
                        self.counters.tx_packets += 1;
                        self.counters.tx_bytes += produced as u64;
                    }
                }
                // More room in TCP's send buffer may have opened: top it up.
                c.drive_tx(tags, mem, &mut self.scratch, &mut self.counters);
                if c.tcp.has_nothing_to_send() {
                    break;
                }
            }
        }
        // Completions and events of this round's transmissions and ACKs (Terminate sent).
        drain_qp(
            c,
            ConnId(id),
            now,
            &mut self.events,
            &mut self.completions,
            &mut self.counters,
        );
        if let Some(l) = c.note_mpa_up() {
            leave_backlog(&mut self.listeners, l);
        }
        drop(guard);
        c.pd = pd;
        if closed.is_none() && c.tcp.state() == State::Closed {
            closed = Some(CloseReason::Aborted);
        }
        // A stream closed in order keeps its unread octets for the application.
        let closed = closed.and_then(|r| super::stream::close_reason_unless_held(c, r));
        if let Some(reason) = closed {
            if let Some(q) = c.qp_mut() {
                q.handle_close();
                while let Some(wc) = q.poll_completion() {
                    self.completions.push_back((ConnId(id), wc));
                }
            }
            let c = self.conns.remove(&id).expect("present");
            self.wheel.cancel(id);
            if let Some(l) = c.backlog() {
                leave_backlog(&mut self.listeners, l);
            }
            c.fold_counters(&mut self.counters);
            self.flows.remove(&c.tcp.tuple());
            shrink_sparse(&mut self.conns);
            shrink_sparse(&mut self.flows);
            self.counters.connections_closed += 1;
            self.events.push_back(EndpointEvent::Closed {
                conn: ConnId(id),
                reason,
            });
            return false;
        }
        arm(&mut self.wheel, id, c);
        c.dirty
    }
}

/// Timers: the connection's one wheel entry fires no later than its earliest deadline. It
/// moves only when the deadline comes earlier: a later one (the retransmission timer pushed
/// back by every ACK) or none leaves it armed, and when it fires early `handle_timeout` finds
/// nothing due and the round re-arms it for the real deadline (one spurious round per timeout
/// period instead of a wheel move per segment).
fn arm<D>(wheel: &mut TimerWheel, id: u64, c: &mut Conn<D>) {
    if let Some(d) = c.deadline() {
        if c.armed.is_none_or(|a| d < a) {
            c.armed = Some(d);
            wheel.insert(id, d);
        }
    }
}

/// Moves a queue pair's completions and events to the endpoint's queues; stream errors and
/// failed startups mark the connection for closing.
fn drain_qp<D>(
    c: &mut Conn<D>,
    conn: ConnId,
    now: Instant,
    events: &mut VecDeque<EndpointEvent>,
    completions: &mut VecDeque<(ConnId, WorkCompletion)>,
    counters: &mut EndpointCounters,
) {
    // The application's accept deadline exists only while MPA starts up.
    let (q, mut decide_by) = match &mut c.state {
        ConnState::Startup(s) => (&mut s.iwarp.qp, Some(&mut s.decide_by)),
        ConnState::Established(i) => (&mut i.qp, None),
        ConnState::Handshake | ConnState::Stream(_) => return,
    };
    if q.has_output() {
        while let Some(wc) = q.poll_completion() {
            completions.push_back((conn, wc));
        }
        while let Some(e) = q.poll_event() {
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
                    if let Some(d) = decide_by.as_deref_mut() {
                        *d = Some(now + c.settings.accept_timeout);
                    }
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
                        QpEvent::FramingError(FramingError::CrcMismatch) => {
                            counters.crc_errors += 1
                        }
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
