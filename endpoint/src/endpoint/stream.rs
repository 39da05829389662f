//! Plain TCP byte-stream connections beside the iWARP ones: no MPA startup,
//! no queue pair; the application reads and writes TCP's byte stream, optionally with the TCP
//! RDMA option (draft-csapuntz-tcprdma-00, `tcp_offload::rdma`): the sender marks transfer
//! bytes, the receiver registers a buffer per RID and reads the stream skipping what was
//! already placed.
//!
//! A stream connection has the same bounds, timers and caps as an iWARP one (connection cap,
//! listener half-open table and SYN cookies, neighbours, close timeout, keepalive); its
//! receive path is TCP's own byte buffer (`Connection::handle_segment`), which also places
//! annotated runs into the registered buffers as segments are accepted, in order or not.
//!
//! Events: [`EndpointEvent::Accepted`] (stream listener: ready for bytes at once),
//! [`crate::EndpointEvent::StreamConnected`], [`EndpointEvent::StreamReadable`],
//! [`crate::EndpointEvent::StreamWritable`], [`EndpointEvent::PeerClosed`] (half-close: the rest can
//! still be read, then [`Endpoint::stream_eof`]), [`EndpointEvent::Closed`].

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tcp_offload::rdma::{AnnotateError, PlacedTransfer, PlacementError, Transfer};
use tcp_offload::{Config, Connection, FourTuple, SendError, State};

use super::listeners::ListenerId;
use super::Endpoint;
use crate::config::QpSettings;
use crate::conn::{Conn, ConnId, Role};
use crate::domain::Domain;
use crate::error::EndpointError;

/// Settings of a stream connection or listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamOptions {
    /// Offer the TCP RDMA option (kind 25) in the SYN / SYN-ACK; used only when the peer
    /// offers it too (TCPRDMA-14). Off by default.
    pub tcp_rdma: bool,
    /// How long a connection the application closed may take to finish (queued octets out,
    /// FIN exchanged) before it is aborted with RST.
    pub close_timeout: Duration,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            tcp_rdma: false,
            close_timeout: QpSettings::default().close_timeout,
        }
    }
}

impl StreamOptions {
    /// TCP settings of such a connection: the endpoint's, with the option offered or not.
    pub(crate) fn tcp_config(&self, base: &Config) -> Config {
        Config {
            tcp_rdma: self.tcp_rdma,
            ..base.clone()
        }
    }

    /// The per-connection settings the endpoint's close path reads (no MPA here).
    pub(crate) fn qp_settings(&self) -> QpSettings {
        QpSettings {
            close_timeout: self.close_timeout,
            ..QpSettings::default()
        }
    }
}

/// What a stream connection keeps beside its TCP.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct StreamState {
    /// The peer's FIN arrived (in order): after the buffered octets, the stream ends.
    pub peer_fin: bool,
    /// The application shut its sending half (FIN queued after the data).
    pub write_shut: bool,
    /// TCP ended (first reason seen); the connection may be held for its unread octets.
    pub ended: Option<tcp_offload::CloseReason>,
}

/// When TCP ended on a stream connection with `reason`: `None` while the connection is held
/// for the application (closed in order with octets still unread, and not closed by the
/// application: it stays until they are read, then [`EndpointEvent::Closed`] follows), else the
/// reason to report. Held connections count against `max_connections`.
pub(crate) fn close_reason_unless_held<D>(
    c: &mut Conn<D>,
    reason: tcp_offload::CloseReason,
) -> Option<tcp_offload::CloseReason> {
    let closing = c.closing;
    let unread = c.tcp.recv_ready() > 0;
    let Some(s) = c.stream_mut() else {
        return Some(reason);
    };
    let reason = *s.ended.get_or_insert(reason);
    // Closed (`close`) or aborted (`abort`) by the application: nobody will read.
    let let_go = closing.deadline().is_some() || (closing.is_closing() && !s.write_shut);
    let held = reason == tcp_offload::CloseReason::Normal && unread && !let_go;
    (!held).then_some(reason)
}

fn annotate_error(e: AnnotateError) -> EndpointError {
    EndpointError::Annotate(e)
}

fn placement_error(e: PlacementError) -> EndpointError {
    EndpointError::Placement(e)
}

impl<D: Domain> Endpoint<D> {
    /// Listens on `port` for plain TCP streams.
    pub fn stream_listen(
        &mut self,
        port: u16,
        opts: StreamOptions,
    ) -> Result<ListenerId, EndpointError> {
        let tcp = opts.tcp_config(&self.cfg.tcp);
        self.listen_entry(port, tcp, opts.qp_settings(), false, Some(opts))
    }

    /// Opens a plain TCP stream to `remote` from a local port of the active-open range.
    /// [`crate::EndpointEvent::StreamConnected`] reports the handshake done.
    pub fn stream_connect(
        &mut self,
        now: Instant,
        remote: impl Into<SocketAddr>,
        opts: StreamOptions,
    ) -> Result<ConnId, EndpointError> {
        let remote = remote.into();
        if remote.is_ipv4() != self.cfg.ip.is_ipv4() {
            return Err(EndpointError::AddressFamily);
        }
        let tcp = opts.tcp_config(&self.cfg.tcp);
        let tuple = self.active_tuple(remote)?;
        let ts = self.clock.stamp_of(now);
        let tcp = Connection::connect(tcp, tuple, &self.gen, ts).map_err(EndpointError::Config)?;
        let mut c = Conn::new(tcp, Role::Initiator, opts.qp_settings());
        c.make_stream();
        Ok(self.add_conn(c))
    }

    /// A four-tuple from a free local port of the range to `remote`, under the connection cap.
    pub(crate) fn active_tuple(&mut self, remote: SocketAddr) -> Result<FourTuple, EndpointError> {
        if self.conns.len() >= self.cfg.limits.max_connections {
            return Err(EndpointError::TooManyConnections);
        }
        let (ip, lane) = (self.cfg.ip, &self.cfg.lane);
        let tuple_of = |port| FourTuple {
            local: SocketAddr::new(ip, port),
            remote,
        };
        let (flows, listeners, ports) = (&self.flows, &self.listeners, &mut self.ports);
        let port = ports
            .allocate(|port| {
                let tuple = tuple_of(port);
                !lane.owns(&tuple)
                    || flows.contains_key(&tuple)
                    || listeners.iter().any(|l| l.tcp.local().port() == port)
            })
            .ok_or(EndpointError::NoPort)?;
        Ok(tuple_of(port))
    }

    fn stream_conn(&mut self, conn: ConnId) -> Result<&mut Conn<D>, EndpointError> {
        let id = conn.0;
        let c = self.conns.get_mut(&id).ok_or(EndpointError::NoConnection)?;
        if !c.is_stream() {
            return Err(EndpointError::NotAStream);
        }
        c.mark(id, &mut self.dirty);
        Ok(c)
    }

    fn stream_ref(&self, conn: ConnId) -> Result<&Conn<D>, EndpointError> {
        let c = self.conns.get(&conn.0).ok_or(EndpointError::NoConnection)?;
        if !c.is_stream() {
            return Err(EndpointError::NotAStream);
        }
        Ok(c)
    }

    /// Queues as much of `data` as TCP's send buffer takes; returns the count (0: full, wait
    /// for [`crate::EndpointEvent::StreamWritable`]). Refused before the handshake completed
    /// and after the sending half was shut.
    pub fn stream_send(&mut self, conn: ConnId, data: &[u8]) -> Result<usize, EndpointError> {
        let c = self.stream_conn(conn)?;
        if c.closing.is_closing() || !matches!(c.tcp.state(), State::Established | State::CloseWait)
        {
            return Err(EndpointError::NotReady);
        }
        // The only refusal left is the state TCP is in (checked above): not ready.
        c.tcp
            .send(data)
            .map_err(|_: SendError| EndpointError::NotReady)
    }

    /// Room in the send buffer now.
    pub fn stream_send_capacity(&self, conn: ConnId) -> Result<u64, EndpointError> {
        Ok(self.stream_ref(conn)?.tcp.send_capacity())
    }

    /// Reads in-order octets into `buf`; 0 when none are ready (see [`Self::stream_eof`]).
    pub fn stream_recv(&mut self, conn: ConnId, buf: &mut [u8]) -> Result<usize, EndpointError> {
        Ok(self.stream_conn(conn)?.tcp.recv(buf))
    }

    /// Octets ready for [`Self::stream_recv`].
    pub fn stream_recv_ready(&self, conn: ConnId) -> Result<usize, EndpointError> {
        Ok(self.stream_ref(conn)?.tcp.recv_ready())
    }

    /// True when the peer's FIN arrived and every octet before it was read. A connection that
    /// is gone (closed, reset) reports [`EndpointError::NoConnection`].
    pub fn stream_eof(&self, conn: ConnId) -> Result<bool, EndpointError> {
        let c = self.stream_ref(conn)?;
        Ok(c.stream().is_some_and(|s| s.peer_fin) && c.tcp.recv_ready() == 0)
    }

    /// Whether the handshake completed (octets can be sent).
    pub fn stream_is_connected(&self, conn: ConnId) -> Result<bool, EndpointError> {
        Ok(self.stream_ref(conn)?.tcp.state().is_synchronized())
    }

    /// Shuts the sending half: a FIN follows the queued octets; receiving goes on. The
    /// connection ends when both FINs are exchanged (or by [`Endpoint::close`]'s timeout).
    pub fn stream_shutdown(&mut self, conn: ConnId) -> Result<(), EndpointError> {
        let c = self.stream_conn(conn)?;
        if let Some(s) = c.stream_mut() {
            s.write_shut = true;
        }
        c.closing.begin();
        Ok(())
    }

    /// True when the peer acknowledged every octet queued on `conn`, and its FIN too once
    /// the sending half was shut ([`Self::stream_shutdown`]): nothing of ours is left to
    /// deliver. A connection that is gone reports [`EndpointError::NoConnection`].
    pub fn stream_flushed(&self, conn: ConnId) -> Result<bool, EndpointError> {
        let c = self.stream_ref(conn)?;
        let data_acked = c.tcp.send_queued() == 0 && c.tcp.bytes_in_flight() == 0;
        let shut = c.stream().is_some_and(|s| s.write_shut);
        let fin_acked = matches!(c.tcp.state(), State::FinWait2 | State::TimeWait);
        Ok(data_acked && (!shut || fin_acked))
    }

    /// True when both SYNs carried the TCP RDMA option: marks are sent and placement runs.
    pub fn stream_rdma_enabled(&self, conn: ConnId) -> Result<bool, EndpointError> {
        Ok(self.stream_ref(conn)?.tcp.rdma_enabled())
    }

    /// Stream offset (from 0) of the next octet [`Self::stream_send`] queues.
    pub fn stream_send_position(&self, conn: ConnId) -> Result<u64, EndpointError> {
        Ok(self.stream_ref(conn)?.tcp.send_position())
    }

    /// Sender: marks `len` octets from stream offset `start` (not yet sent, after every earlier
    /// run) as bytes of transfer `t` (TCPRDMA-02/06/07/10/11/13).
    pub fn stream_mark_transfer(
        &mut self,
        conn: ConnId,
        start: u64,
        len: u32,
        t: Transfer,
    ) -> Result<(), EndpointError> {
        self.stream_conn(conn)?
            .tcp
            .mark_transfer(start, len, t)
            .map_err(annotate_error)
    }

    /// Sender: the segment starting at stream offset `at` carries A = 1 (TCPRDMA-09).
    pub fn stream_mark_message_start(
        &mut self,
        conn: ConnId,
        at: u64,
    ) -> Result<(), EndpointError> {
        self.stream_conn(conn)?
            .tcp
            .mark_message_start(at)
            .map_err(annotate_error)
    }

    /// Receiver: `buf` is the destination of transfer `rid`; annotated runs of it are placed
    /// there as TCP accepts their segments, in order or not (TCPRDMA-08/32).
    pub fn stream_expect_transfer(
        &mut self,
        conn: ConnId,
        rid: u64,
        buf: Vec<u8>,
    ) -> Result<(), EndpointError> {
        self.stream_conn(conn)?
            .tcp
            .expect_transfer(rid, buf)
            .map_err(placement_error)
    }

    /// Receiver: consumes up to `len` in-order octets that the application knows are octets
    /// `[buffer_offset, ..)` of transfer `rid`: those already placed are skipped (copies
    /// avoided), the rest copied into the buffer. Returns the octets consumed (0: none ready).
    pub fn stream_recv_transfer(
        &mut self,
        conn: ConnId,
        rid: u64,
        buffer_offset: u32,
        len: u32,
    ) -> Result<u32, EndpointError> {
        self.stream_conn(conn)?
            .tcp
            .recv_transfer(rid, buffer_offset, len)
            .map_err(placement_error)
    }

    /// Receiver: the buffer of `rid` with what was placed and copied; forgets the RID.
    pub fn stream_take_transfer(
        &mut self,
        conn: ConnId,
        rid: u64,
    ) -> Result<Option<PlacedTransfer>, EndpointError> {
        Ok(self.stream_conn(conn)?.tcp.take_transfer(rid))
    }
}

/// A stream connection's view of one TCP event: the application's events, and the peer's FIN
/// noted (the endpoint's own `PeerClosed` is pushed by the round).
pub(crate) fn stream_event<D>(
    c: &mut Conn<D>,
    conn: ConnId,
    e: tcp_offload::Event,
    events: &mut std::collections::VecDeque<crate::EndpointEvent>,
) {
    use crate::EndpointEvent as E;
    use tcp_offload::Event;
    match e {
        Event::Connected if c.role == Role::Initiator => {
            events.push_back(E::StreamConnected { conn })
        }
        Event::Readable => events.push_back(E::StreamReadable { conn }),
        Event::Writable => events.push_back(E::StreamWritable { conn }),
        Event::PeerClosed => {
            if let Some(s) = c.stream_mut() {
                s.peer_fin = true;
            }
        }
        _ => {}
    }
}
