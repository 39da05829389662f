//! The engine's state and the routing of its completions and events to the verbs objects.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use endpoint::{ConnId, EndpointEvent, FastMap, ListenerId};
use tcp_offload::CloseReason;

use super::shared_program::LaneProgram;
use crate::counters::DeviceCounters;
use crate::engine::{Engine, XskIo};
use crate::qp_events::{startup_error, stream_error};
use crate::queue_pair::{map_completion, Established, QpError};
use crate::work::WorkTracker;
use crate::{CompletionQueue, ConnectError, Opcode};

/// What a queue pair handle and the router share: where completions go and how it ended.
#[derive(Debug)]
pub(crate) struct QpLink {
    pub(crate) num: u32,
    pub(crate) send_cq: CompletionQueue,
    pub(crate) recv_cq: CompletionQueue,
    /// The queue pair's requests in flight.
    pub(crate) work: WorkTracker,
    status: Mutex<LinkStatus>,
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct LinkStatus {
    pub(crate) error: Option<QpError>,
    pub(crate) close_requested: bool,
    /// The peer's FIN arrived: the stream is half-closed (DDP-69).
    pub(crate) peer_closed: bool,
    pub(crate) finished: bool,
    /// What MPA negotiated, once established.
    pub(crate) negotiated: Option<ddp::NegotiatedFraming>,
}

impl QpLink {
    pub(crate) fn new(num: u32, init: &crate::QpInit) -> Self {
        QpLink {
            num,
            send_cq: init.send_cq.clone(),
            recv_cq: init.recv_cq.clone(),
            work: WorkTracker::new(init.pd.clone()),
            status: Mutex::default(),
        }
    }

    pub(crate) fn status(&self) -> LinkStatus {
        *self.status.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn update(&self, f: impl FnOnce(&mut LinkStatus)) {
        f(&mut self.status.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// Hands `wc` to its completion queue through the work tracker (which may hold it back,
    /// or map it to the application's id); `Err` when the queue overran and dropped it.
    fn deliver(&self, wc: ddp::WorkCompletion) -> Result<(), crate::CqError> {
        let Some(wc) = self.work.complete(wc) else {
            return Ok(());
        };
        let c = map_completion(wc, self.num);
        let cq = if c.opcode == Opcode::Recv {
            &self.recv_cq
        } else {
            &self.send_cq
        };
        cq.inner.push(c)
    }

    fn set_error(&self, e: QpError) {
        self.update(|s| {
            if s.error.is_none() {
                s.error = Some(e);
            }
        });
    }
}

/// Completes a request that never reached its connection as flushed.
fn flush_unposted(link: &QpLink, wr: &ddp::WorkRequest) {
    let opcode = match wr.kind {
        ddp::WorkRequestKind::Recv { .. } => ddp::WcOpcode::Recv,
        ddp::WorkRequestKind::Send { .. } => ddp::WcOpcode::Send,
        ddp::WorkRequestKind::Write { .. } => ddp::WcOpcode::Write,
        ddp::WorkRequestKind::Read { .. } => ddp::WcOpcode::Read,
    };
    let wc = ddp::WorkCompletion {
        wr_id: wr.wr_id,
        opcode,
        status: ddp::WcStatus::Flushed,
        byte_len: 0,
        invalidated: None,
        solicited: false,
    };
    let _ = link.deliver(wc);
}

/// A connection between TCP set-up and the application's queue pair.
#[derive(Debug)]
pub(crate) enum Pending {
    /// `connect` waits for MPA.
    Connecting,
    /// MPA ended for a `connect`: the peer's private data and what was negotiated, or why
    /// not.
    Done(Result<Established, ConnectError>),
    /// A listener's TCP connection, MPA Request not yet in.
    Accepted {
        listener: ListenerId,
        peer: SocketAddr,
    },
}

/// An MPA Request waiting in a listener's queue.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) conn: ConnId,
    pub(crate) peer: SocketAddr,
    pub(crate) info: mpa::RequestInfo,
}

/// Everything behind the device's lock. Field order is drop order: the engine (and its
/// AF_XDP socket and UMEM) goes before the XDP program is detached.
pub(crate) struct State {
    pub(crate) engine: Engine<XskIo>,
    /// The device's program, shared by its lanes, as this lane uses it.
    pub(crate) program: LaneProgram,
    pub(crate) routes: FastMap<ConnId, Arc<QpLink>>,
    pub(crate) pending: FastMap<ConnId, Pending>,
    pub(crate) listeners: FastMap<ListenerId, VecDeque<Request>>,
    pub(crate) counters: Arc<DeviceCounters>,
    /// Ports of closed listeners that the XDP program keeps steering until their accepted
    /// connections are gone (unsteered then, unless listened on again).
    pub(crate) unsteer_later: Vec<u16>,
    /// Stream listeners' accept queues and stream connections' ends (`crate::stream`).
    pub(crate) streams: crate::stream::StreamRoutes,
    /// Work posted on active opens before TCP was up (`Device::connect_with`), handed to each
    /// connection in the round its queue pair appears.
    pub(crate) early_work: FastMap<ConnId, Vec<ddp::WorkRequest>>,
}

impl State {
    /// One engine round, then routing. Returns true when anything happened.
    pub(crate) fn poll(&mut self, now: Instant) -> bool {
        let frames = self.engine.poll(now);
        self.after_round(frames)
    }

    /// [`State::poll`] for a spinning caller (inline drive, engine thread): the clock is read
    /// only when the round has something to do ([`crate::engine::Engine::poll_spinning`]).
    pub(crate) fn poll_spinning(&mut self) -> bool {
        let frames = self.engine.poll_spinning();
        let any = self.after_round(frames);
        if frames > 0 {
            crate::stage_times::routed();
        }
        any
    }

    /// Routing and port clean-up after an engine round that received `frames`.
    fn after_round(&mut self, frames: usize) -> bool {
        if !self.early_work.is_empty() {
            self.hand_over_early_work();
        }
        let routed = self.route();
        if !self.unsteer_later.is_empty() {
            self.unsteer_unused();
        }
        frames > 0 || routed
    }

    /// Posts the work of active opens whose queue pair now exists (TCP came up in this
    /// round: the MPA Request is out, the Reply cannot have arrived). A connection that is
    /// gone drops its work; a refusal completes the rest of the connection's work flushed.
    fn hand_over_early_work(&mut self) {
        let State {
            engine,
            early_work,
            routes,
            ..
        } = self;
        early_work.retain(|conn, work| {
            let ep = engine.endpoint_mut();
            let mut posted = 0;
            for wr in work.iter() {
                match ep.post(*conn, *wr) {
                    Ok(()) => posted += 1,
                    Err(endpoint::EndpointError::NotReady) if posted == 0 => return true,
                    Err(_) => break,
                }
            }
            if posted < work.len() {
                if let Some(link) = routes.get(conn) {
                    for wr in &work[posted..] {
                        flush_unposted(link, wr);
                    }
                }
            }
            false
        });
    }

    /// Stops steering the ports of closed listeners whose connections are all gone.
    pub(crate) fn unsteer_unused(&mut self) {
        let State {
            engine,
            program,
            unsteer_later,
            ..
        } = self;
        unsteer_later.retain(|&port| {
            if engine.endpoint().has_connection_on_port(port) {
                return true;
            }
            program.unsteer_port(port);
            false
        });
    }

    /// Moves the engine's completions and events to their queue pairs, listeners and waiting
    /// `connect` calls. Returns true when there were any.
    pub(crate) fn route(&mut self) -> bool {
        let mut any = false;
        while let Some((conn, wc)) = self.engine.endpoint_mut().poll_completion() {
            any = true;
            if let Some(link) = self.routes.get(&conn) {
                if link.deliver(wc).is_err() && link.status().error.is_none() {
                    // The queue pair goes to error: reset, the rest of its work flushed.
                    link.set_error(QpError::CqOverrun);
                    link.update(|s| s.close_requested = true);
                    let _ = self.engine.endpoint_mut().abort(conn);
                }
            }
        }
        while let Some(ev) = self.engine.endpoint_mut().poll_event() {
            any = true;
            self.handle_event(ev);
        }
        any
    }

    fn handle_event(&mut self, ev: EndpointEvent) {
        let Some(ev) = self.streams.route(ev, self.engine.endpoint_mut()) else {
            return;
        };
        let c = &self.counters;
        match ev {
            EndpointEvent::Accepted {
                listener,
                conn,
                peer,
            } => {
                DeviceCounters::inc(&c.tcp_accepted);
                self.pending
                    .insert(conn, Pending::Accepted { listener, peer });
            }
            EndpointEvent::ConnectRequest { conn, request } => match self.pending.remove(&conn) {
                Some(Pending::Accepted { listener, peer }) => {
                    match self.listeners.get_mut(&listener) {
                        Some(q) => q.push_back(Request {
                            conn,
                            peer,
                            info: request,
                        }),
                        // The listener is gone: nobody will accept.
                        None => {
                            let _ = self.engine.endpoint_mut().abort(conn);
                        }
                    }
                }
                other => {
                    if let Some(p) = other {
                        self.pending.insert(conn, p);
                    }
                }
            },
            EndpointEvent::Established {
                conn,
                peer_private_data,
                negotiated,
            } => {
                DeviceCounters::inc(&c.mpa_established);
                if let Some(link) = self.routes.get(&conn) {
                    link.update(|s| s.negotiated = Some(negotiated));
                }
                if let Some(p @ Pending::Connecting) = self.pending.get_mut(&conn) {
                    *p = Pending::Done(Ok(Established {
                        peer_private_data,
                        negotiated,
                    }));
                }
            }
            EndpointEvent::StartupFailed { conn, event } => {
                let e = startup_error(c, event);
                match self.pending.get_mut(&conn) {
                    Some(p @ Pending::Connecting) => *p = Pending::Done(Err(e)),
                    _ => {
                        self.pending.remove(&conn);
                    }
                }
            }
            EndpointEvent::StreamError { conn, event } => {
                let e = stream_error(c, &event);
                if let (Some(link), Some(e)) = (self.routes.get(&conn), e) {
                    link.set_error(e);
                }
            }
            EndpointEvent::PeerClosed { conn } => {
                // Half-closed, not failed (DDP-69): the application may still send and closes
                // when done (DDP-70). Before MPA is up the startup failure reports it.
                if let Some(link) = self.routes.get(&conn) {
                    link.update(|s| s.peer_closed = true);
                }
            }
            EndpointEvent::StreamConnected { .. }
            | EndpointEvent::StreamReadable { .. }
            | EndpointEvent::StreamWritable { .. } => {}
            EndpointEvent::Closed { conn, reason } => {
                if let Some(p @ Pending::Connecting) = self.pending.get_mut(&conn) {
                    // A refused SYN is not a peer that closed after our MPA Request: no
                    // RFC 6581 §8 fallback to Rev 1, and the caller sees the refusal (as the
                    // kernel transport's connect does).
                    *p = Pending::Done(Err(match reason {
                        CloseReason::Refused => ConnectError::Io(std::io::Error::new(
                            std::io::ErrorKind::ConnectionRefused,
                            "the peer refused the TCP connection (RST to our SYN)",
                        )),
                        _ => ConnectError::Startup(mpa::StartupError::ConnectionClosed),
                    }));
                } else if !matches!(self.pending.get(&conn), Some(Pending::Done(_))) {
                    self.pending.remove(&conn);
                }
                for q in self.listeners.values_mut() {
                    q.retain(|r| r.conn != conn);
                }
                if let Some(link) = self.routes.remove(&conn) {
                    let st = link.status();
                    if st.error.is_none() && !st.close_requested {
                        link.set_error(QpError::PeerClosed);
                    }
                    if link.status().error.is_some() {
                        DeviceCounters::inc(&c.connection_errors);
                    }
                    link.update(|s| s.finished = true);
                }
            }
        }
    }
}
