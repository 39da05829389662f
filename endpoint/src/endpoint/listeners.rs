//! Listeners: TCP's passive opens on our address, their SYN-ACKs and stateless replies, and
//! the hand-over of established connections into the flow table (MPA then runs as Responder)
//! when the caps admit them (see `admission.rs`).

use std::net::SocketAddr;
use std::time::Instant;

use tcp_offload::{TcpListener, Timestamp};

use super::admission::Admission;
use super::{check_private_data, Endpoint};
use crate::config::QpSettings;
use crate::conn::{Conn, Role};
use crate::domain::Domain;
use crate::error::EndpointError;
use crate::ethernet::{self, EthernetRepr, Mac};
use crate::event::EndpointEvent;
use crate::frame_sink::{FrameSink, TxOutcome};

/// The endpoint's name for a listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ListenerId(pub u32);

pub(crate) struct ListenerEntry {
    pub(crate) tcp: TcpListener,
    settings: QpSettings,
    manual_accept: bool,
    /// Its connections whose MPA startup has not finished (`max_accept_queue` of them, each
    /// source's share `EndpointLimits::backlog_share`).
    pub(crate) backlog: crate::FairBacklog,
    /// Closed by [`Endpoint::unlisten`]: matches no segment, holds no state.
    pub(crate) closed: bool,
    /// A plain-stream listener (no MPA): its connections are byte streams.
    stream: Option<crate::StreamOptions>,
}

/// What closed listeners counted, kept for [`Endpoint::counters`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RetiredListenerCounters {
    pub(crate) syn_cookies_sent: u64,
    pub(crate) half_open_expired: u64,
    pub(crate) listener_tx_overflow: u64,
}

impl ListenerEntry {
    /// Whether it takes segments to `port`.
    pub(crate) fn listens_on(&self, port: u16) -> bool {
        !self.closed && self.tcp.local().port() == port
    }

    /// A plain-stream listener (no MPA, no backlog).
    pub(crate) fn is_stream(&self) -> bool {
        self.stream.is_some()
    }
}

impl<D: Domain> Endpoint<D> {
    /// Listens on `port` of our address; accepted connections run MPA as Responder.
    pub fn listen(&mut self, port: u16, settings: QpSettings) -> Result<ListenerId, EndpointError> {
        self.listen_with(port, settings, false)
    }

    /// As [`listen`](Self::listen), but each valid MPA Request is reported as
    /// [`EndpointEvent::ConnectRequest`] and waits for
    /// [`accept_request`](Self::accept_request) or [`reject`](Self::reject).
    pub fn listen_manual(
        &mut self,
        port: u16,
        settings: QpSettings,
    ) -> Result<ListenerId, EndpointError> {
        self.listen_with(port, settings, true)
    }

    fn listen_with(
        &mut self,
        port: u16,
        settings: QpSettings,
        manual_accept: bool,
    ) -> Result<ListenerId, EndpointError> {
        let tcp = self.cfg.tcp.clone();
        self.listen_entry(port, tcp, settings, manual_accept, None)
    }

    /// Adds a listener on `port` whose connections get TCP settings `tcp`; `stream`: a
    /// plain-stream listener.
    pub(crate) fn listen_entry(
        &mut self,
        port: u16,
        tcp: tcp_offload::Config,
        settings: QpSettings,
        manual_accept: bool,
        stream: Option<crate::StreamOptions>,
    ) -> Result<ListenerId, EndpointError> {
        if self.listeners.iter().any(|l| l.listens_on(port)) {
            return Err(EndpointError::PortInUse);
        }
        check_private_data(&settings)?;
        let local = SocketAddr::new(self.cfg.ip, port);
        let tcp = TcpListener::new(tcp, self.cfg.listener.clone(), local, self.gen.clone())
            .map_err(EndpointError::Config)?;
        self.listeners.push(ListenerEntry {
            tcp,
            settings,
            manual_accept,
            backlog: crate::FairBacklog::new(
                self.cfg.listener.max_accept_queue,
                self.cfg.limits.backlog_share,
            ),
            closed: false,
            stream,
        });
        Ok(ListenerId(self.listeners.len() as u32 - 1))
    }

    /// Stops listener `id`: segments to its port no longer reach it (a SYN gets RST unless the
    /// port is listened on again), its half-open handshakes are forgotten and their queued
    /// replies dropped. Connections it accepted before are not touched. Its counters stay in
    /// [`counters`](Self::counters). Unknown or closed ids are ignored.
    pub fn unlisten(&mut self, id: ListenerId) {
        let Some(l) = self.listeners.get_mut(id.0 as usize).filter(|l| !l.closed) else {
            return;
        };
        let lc = l.tcp.counters();
        self.retired_listeners.syn_cookies_sent += lc.cookies_sent;
        self.retired_listeners.half_open_expired += lc.half_open_expired;
        self.retired_listeners.listener_tx_overflow += lc.tx_overflow;
        // A fresh listener holds no half-open entry, timer or queued reply (always made: the
        // TCP settings passed `validate` when the endpoint was made).
        if let Ok(fresh) = TcpListener::new(
            self.cfg.tcp.clone(),
            self.cfg.listener.clone(),
            l.tcp.local(),
            self.gen.clone(),
        ) {
            l.tcp = fresh;
        }
        l.closed = true;
    }

    /// Whether a connection of ours has local port `port` (the XDP program must keep steering
    /// a closed listener's port while its accepted connections live).
    pub fn has_connection_on_port(&self, port: u16) -> bool {
        self.conns
            .values()
            .any(|c| c.tcp.tuple().local.port() == port)
    }

    /// Whether [`Endpoint::listener_timeouts`] at `now` would do nothing: no listener timer
    /// due, no SYN source remembered.
    #[inline(always)]
    pub(crate) fn listeners_idle(&self, now: Timestamp) -> bool {
        self.neighbours.syn_sources_len() == 0
            && self
                .listeners
                .iter()
                .all(|l| l.tcp.poll_timeout().is_none_or(|d| d > now))
    }

    /// Runs the listeners' timers due at the clock's time.
    pub(crate) fn listener_timeouts(&mut self) {
        let now = self.clock.stamp;
        for l in &mut self.listeners {
            if l.tcp.poll_timeout().is_some_and(|d| d <= now) {
                l.tcp.handle_timeout(now);
            }
        }
        // A SYN's source MAC serves only the replies to that SYN (SYN-ACK and its retries,
        // cookie SYN-ACK, RST): once no listener holds a half-open entry or a queued reply, a
        // flood's leftovers are forgotten.
        if self.neighbours.syn_sources_len() > 0
            && self
                .listeners
                .iter()
                .all(|l| l.tcp.half_open_len() == 0 && l.tcp.tx_queue_len() == 0)
        {
            self.neighbours.forget_syn_sources();
        }
    }

    /// Each listener's stateless replies and SYN-ACKs into frames, then its accepts. Most
    /// rounds find no listener with either (a look at each): that is all they run.
    #[inline(always)]
    pub(crate) fn service_listeners(&mut self, now: Instant, io: &mut dyn FrameSink) {
        let idle = |l: &ListenerEntry| l.tcp.has_nothing_to_send() && !l.tcp.has_accepted();
        if !self.listeners.iter().all(idle) {
            self.service_busy_listeners(now, io);
        }
    }

    /// [`Endpoint::service_listeners`] when a listener has something to send or hand over.
    #[inline(never)]
    fn service_busy_listeners(&mut self, now: Instant, io: &mut dyn FrameSink) {
        let ts = self.clock.stamp;
        for li in 0..self.listeners.len() {
            // Stateless replies and SYN-ACKs (no frame taken when there are none).
            while !self.listeners[li].tcp.has_nothing_to_send() {
                let src = self.cfg.mac;
                let mut produced = false;
                let l = &mut self.listeners[li];
                let neighbours = &self.neighbours;
                // (The listener's destination is only known after it wrote the packet.)
                let mut no_hop = false;
                let mut frame_len = 0;
                let r = io.tx_frame(now, &mut |buf: &mut [u8]| {
                    let n = l.tcp.poll_transmit(ts, &mut buf[ethernet::HEADER_LEN..])?;
                    produced = true;
                    // The destination from the headers alone: the checksum may be left to
                    // the device (`tcp_offload::TxChecksum::Offloaded`), so no verifying parse.
                    let ethertype = ethernet::ethertype_of(&buf[ethernet::HEADER_LEN..]);
                    buf[12..14].copy_from_slice(&ethertype.to_be_bytes());
                    let (_, to) = crate::classify::flow_of(&buf[..ethernet::HEADER_LEN + n])?;
                    let Some(dst) = neighbours.reply_hop(to.ip()) else {
                        no_hop = true;
                        return None;
                    };
                    EthernetRepr {
                        dst,
                        src,
                        ethertype,
                    }
                    .emit(buf);
                    frame_len = ethernet::HEADER_LEN + n;
                    Some(frame_len)
                });
                if no_hop {
                    self.counters.no_neighbour += 1;
                }
                match r {
                    TxOutcome::Queued => {
                        self.counters.tx_packets += 1;
                        self.counters.tx_bytes += frame_len as u64;
                    }
                    TxOutcome::NoBuffer => {
                        self.counters.tx_no_buffer += 1;
                        self.busy = true;
                        break;
                    }
                    TxOutcome::Empty => {}
                }
                if !produced {
                    break;
                }
            }
            if self.listeners[li].tcp.has_accepted() {
                self.take_accepted(now, li, None);
            }
        }
    }

    /// Moves listener `li`'s established connections into the flow table, or resets those the
    /// caps refuse; `via` is the MAC the completing segment came from. Runs right after the
    /// listener handled a segment, so the peer's next segments (its first data may follow the
    /// handshake ACK in the same receive batch) take the flow-table path to the connection and
    /// its queue pair starts at once, and the listener's accept queue is always empty between
    /// calls (the bound that counts is the backlog of unfinished MPA startups).
    pub(crate) fn take_accepted(&mut self, now: Instant, li: usize, via: Option<Mac>) {
        while let Some(tcp) = self.listeners[li].tcp.accept() {
            let backlog = match self.admit_passive(li, &tcp, via) {
                Admission::Refused => {
                    self.refuse(now, tcp);
                    continue;
                }
                Admission::Stream => None,
                Admission::Pending(b) => Some(b),
            };
            let settings = self.listeners[li].settings.clone();
            let peer = tcp.tuple().remote;
            let mut c = Conn::new(tcp, Role::Responder, settings);
            let Some(backlog) = backlog else {
                // A byte stream: ready at once, no MPA startup, no backlog.
                c.make_stream();
                let conn = self.add_conn(c);
                self.counters.connections_opened += 1;
                self.events.push_back(EndpointEvent::Accepted {
                    listener: ListenerId(li as u32),
                    conn,
                    peer,
                });
                continue;
            };
            let manual_accept = self.listeners[li].manual_accept;
            let conn = self.add_conn(c);
            self.counters.connections_opened += 1;
            if let Some(c) = self.conns.get_mut(&conn.0) {
                // A responder's queue pair is always made.
                c.start_qp(conn.0, now, manual_accept, Some(backlog));
            }
            self.events.push_back(EndpointEvent::Accepted {
                listener: ListenerId(li as u32),
                conn,
                peer,
            });
        }
    }
}
