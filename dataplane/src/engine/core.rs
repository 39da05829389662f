//! The engine: flow table, listeners, RX demultiplexing, per-connection service, TX into frames,
//! timers. Single-threaded; drive it with [`Engine::poll`].

use std::collections::{HashMap, VecDeque};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ddp::{
    Completion, LocalBuf, Memory, PdId, Qp, QpConfig, QpEvent, RegionHandle, RegionSpec, RemoteBuf,
    SendOpts, Stag, StagTable, StreamId, VecMemory,
};
use mpa::{FramingError, StartupConfig};
use tcp_offload::{
    emit_rst_for, CloseReason, Config, Connection, Event, FourTuple, IsnGenerator, Listener,
    ListenerConfig, State,
};

use super::conn::{Conn, ConnId, FeedSink, FpduSource, Role};
use super::counters::EngineCounters;
use super::ethernet::{self, EthernetFrame, EthernetRepr, Mac};
use super::fault::{release_held_tx, FaultConfig, FaultCounters, FaultyIo};
use super::io::{PacketIo, TxOutcome};
use super::timer_wheel::TimerWheel;
use crate::pd::{PdInner, PdState};

/// Slots of the timer wheel: with the default 25 us tick, one turn is about 205 ms (the minimum
/// RTO), so most deadlines sit in their own turn.
const WHEEL_SLOTS: usize = 8192;

/// The engine's tables: hashed with foldhash, seeded per process (a peer choosing its ports
/// cannot aim at a bucket), several times cheaper per packet than SipHash.
pub(crate) type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The engine's name for a listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ListenerId(pub u32);

/// MPA and RDMAP settings of a connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QpSettings {
    /// MPA startup: markers wanted on receive, CRC wanted, revision, timeout.
    pub startup: StartupConfig,
    /// Private data of our Request (Initiator) or Reply (Responder).
    pub private_data: Vec<u8>,
    /// Inbound RDMA Read depth.
    pub ird: u32,
    /// Outbound RDMA Read depth.
    pub ord: u32,
}

impl Default for QpSettings {
    fn default() -> Self {
        QpSettings {
            startup: StartupConfig::default(),
            private_data: Vec::new(),
            ird: 16,
            ord: 16,
        }
    }
}

/// Engine settings.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Our MAC.
    pub mac: Mac,
    /// Our IPv4 address.
    pub ip: Ipv4Addr,
    /// TCP settings of every connection.
    pub tcp: Config,
    /// Listener limits.
    pub listener: ListenerConfig,
    /// Local ports for active opens (reserved from the kernel by the host set-up).
    pub local_ports: RangeInclusive<u16>,
    /// Next hop MAC when the neighbour table has no entry for the peer (e.g. a gateway).
    pub default_next_hop: Option<Mac>,
    /// Frames taken per receive batch.
    pub rx_batch: usize,
    /// Secret of the ISN generator (tests fix it; production draws it).
    pub isn_secret: [u8; 16],
    /// Seed of the STag key generator.
    pub stag_seed: u64,
    /// Fault injection (off by default).
    pub fault: FaultConfig,
    /// Granularity of the timer wheel.
    pub timer_tick: Duration,
}

impl EngineConfig {
    /// Defaults for `mac`/`ip`.
    pub fn new(mac: Mac, ip: Ipv4Addr) -> Self {
        EngineConfig {
            mac,
            ip,
            tcp: Config {
                // The peer completes its Sends and Writes when we acknowledge them: a short
                // segment (its sender had no more to send) is acknowledged after 25 us unless
                // our answer carries the ACK first; a lone full one after 1 ms, not 40.
                delayed_ack: Some(Duration::from_millis(1)),
                short_segment_ack: Some(Duration::from_micros(25)),
                ..Config::default()
            },
            listener: ListenerConfig::default(),
            local_ports: 40000..=40999,
            default_next_hop: None,
            rx_batch: 64,
            isn_secret: [7; 16],
            stag_seed: u64::from(u32::from(ip)),
            fault: FaultConfig::default(),
            timer_tick: Duration::from_micros(25),
        }
    }
}

/// What the application learns besides completions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EngineEvent {
    /// A listener accepted a TCP connection; MPA startup runs (post receives now).
    Accepted {
        /// The listener.
        listener: ListenerId,
        /// The new connection.
        conn: ConnId,
        /// The peer.
        peer: SocketAddr,
    },
    /// MPA is up on `conn`.
    Established {
        /// The connection.
        conn: ConnId,
        /// The peer's private data.
        peer_private_data: Vec<u8>,
        /// What was negotiated.
        negotiated: ddp::Negotiated,
    },
    /// A listener opened with manual accept received a valid MPA Request on `conn`: accept or
    /// reject it (verbs API).
    ConnectRequest {
        /// The connection.
        conn: ConnId,
        /// The Request's private data.
        private_data: Vec<u8>,
        /// The Initiator wants markers on what it receives.
        peer_wants_markers: bool,
        /// The Initiator asked for CRCs.
        peer_wants_crc: bool,
    },
    /// MPA startup failed or was rejected; the connection is being closed.
    StartupFailed {
        /// The connection.
        conn: ConnId,
        /// The queue pair's event: `Rejected` or `StartupFailed`.
        event: QpEvent,
    },
    /// The stream entered the error state (Terminate sent or received, framing error).
    StreamError {
        /// The connection.
        conn: ConnId,
        /// The queue pair's event.
        event: QpEvent,
    },
    /// The peer closed its side (FIN).
    PeerClosed {
        /// The connection.
        conn: ConnId,
    },
    /// The connection is gone.
    Closed {
        /// The connection.
        conn: ConnId,
        /// Why TCP ended.
        reason: CloseReason,
    },
}

/// Why an application call was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// No such connection (closed, or never existed).
    #[error("no such connection")]
    NoConnection,
    /// The connection's queue pair does not exist yet (TCP not established).
    #[error("connection not ready")]
    NotReady,
    /// The work request was refused.
    #[error("post refused: {0}")]
    Post(ddp::PostError),
    /// No free local port in the active-open range.
    #[error("no free local port")]
    NoPort,
    /// A listener on this port exists already.
    #[error("port in use")]
    PortInUse,
    /// Private data longer than the MPA limit.
    #[error("private data too long")]
    PrivateDataTooLong,
    /// Only IPv4 is supported.
    #[error("IPv4 only")]
    Ipv4Only,
}

struct ListenerEntry {
    tcp: Listener,
    settings: QpSettings,
    manual_accept: bool,
}

/// The per-queue engine over packet I/O `I`. The application API (memory, connections, work
/// requests, completions, events, counters) is [`EngineCore`]'s, reached through `Deref`.
pub struct Engine<I: PacketIo> {
    io: FaultyIo<I>,
    core: EngineCore,
}

impl<I: PacketIo> std::ops::Deref for Engine<I> {
    type Target = EngineCore;
    fn deref(&self) -> &EngineCore {
        &self.core
    }
}

impl<I: PacketIo> std::ops::DerefMut for Engine<I> {
    fn deref_mut(&mut self) -> &mut EngineCore {
        &mut self.core
    }
}

/// The engine's state apart from its packet I/O: everything the application calls.
pub struct EngineCore {
    cfg: EngineConfig,
    gen: IsnGenerator,
    conns: FastMap<u64, Conn>,
    flows: FastMap<FourTuple, u64>,
    listeners: Vec<ListenerEntry>,
    neighbours: FastMap<Ipv4Addr, Mac>,
    next_conn: u64,
    next_port: u16,
    dirty: Vec<u64>,
    wheel: TimerWheel,
    fired: Vec<u64>,
    tags: StagTable,
    mem: VecMemory,
    next_region: u32,
    completions: VecDeque<(ConnId, Completion)>,
    events: VecDeque<EngineEvent>,
    counters: EngineCounters,
    scratch: Vec<u8>,
    rebuild: Vec<u8>,
    pending_tx: Vec<Vec<u8>>,
    busy: bool,
    last_now: Instant,
}

impl<I: PacketIo> Engine<I> {
    /// An engine over `io`, with `now` as the clock's origin.
    pub fn new(cfg: EngineConfig, io: I, now: Instant) -> Self {
        let gen = IsnGenerator::new(cfg.isn_secret, now);
        let next_port = *cfg.local_ports.start();
        Engine {
            io: FaultyIo::new(io, cfg.fault),
            core: EngineCore {
                gen,
                conns: FastMap::default(),
                flows: FastMap::default(),
                listeners: Vec::new(),
                neighbours: FastMap::default(),
                next_conn: 1,
                next_port,
                dirty: Vec::new(),
                wheel: TimerWheel::new(now, cfg.timer_tick, WHEEL_SLOTS),
                fired: Vec::new(),
                tags: StagTable::new(cfg.stag_seed),
                mem: VecMemory::new(),
                next_region: 0,
                completions: VecDeque::new(),
                events: VecDeque::new(),
                counters: EngineCounters::default(),
                scratch: vec![0; mpa::MAX_FPDU_LEN],
                rebuild: vec![0; mpa::MAX_FPDU_LEN],
                pending_tx: Vec::new(),
                busy: false,
                last_now: now,
                cfg,
            },
        }
    }

    /// What the fault injector did.
    pub fn fault_counters(&self) -> FaultCounters {
        self.io.counters()
    }
    /// The packet I/O.
    pub fn io(&self) -> &I {
        self.io.inner()
    }
    /// The packet I/O, mutably.
    pub fn io_mut(&mut self) -> &mut I {
        self.io.inner_mut()
    }
}

impl EngineCore {
    // ---------------------------------------------------------------------------------------
    // Configuration and state

    /// Counters.
    pub fn counters(&self) -> EngineCounters {
        let mut c = self.counters;
        c.retransmissions += self
            .conns
            .values()
            .map(|k| k.tcp.counters().retransmits.saturating_sub(k.retrans_seen))
            .sum::<u64>();
        c
    }
    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }
    /// Sets the next hop MAC of `ip` (from the kernel's neighbour table).
    pub fn add_neighbour(&mut self, ip: Ipv4Addr, mac: Mac) {
        self.neighbours.insert(ip, mac);
    }
    /// Live connections.
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }
    /// The TCP state of a connection.
    pub fn tcp_state(&self, conn: ConnId) -> Option<State> {
        self.conns.get(&conn.0).map(|c| c.tcp.state())
    }
    /// The TCP connection (diagnostics and tests).
    pub fn tcp(&self, conn: ConnId) -> Option<&Connection> {
        self.conns.get(&conn.0).map(|c| &c.tcp)
    }
    /// Out-of-order octets the engine holds for `conn`, waiting for a gap to fill.
    pub fn ooo_bytes(&self, conn: ConnId) -> Option<u64> {
        self.conns.get(&conn.0).map(|c| c.rx.ooo_bytes)
    }

    // ---------------------------------------------------------------------------------------
    // Memory

    /// Registers a zeroed region of `len` octets (PD of this engine, zero-based TOs).
    pub fn register(&mut self, len: usize, access: ddp::Access) -> (RegionHandle, Stag) {
        let (h, stag) = self
            .tags
            .register(RegionSpec {
                base_to: 0,
                len: len as u64,
                access,
                pd: PdId(0),
                stream: None,
            })
            .expect("STag table has room for 2^24 regions");
        self.mem.insert(h, vec![0; len]);
        self.next_region += 1;
        (h, stag)
    }
    /// A region's bytes.
    pub fn region(&self, h: RegionHandle) -> Option<&[u8]> {
        self.mem.get(h)
    }
    /// A region's bytes, mutably (fill send buffers; not while a request on them runs).
    pub fn region_mut(&mut self, h: RegionHandle) -> Option<&mut [u8]> {
        self.mem.get_mut(h).map(|v| v.as_mut_slice())
    }

    // ---------------------------------------------------------------------------------------
    // Connections

    /// Listens on `port` of our address; accepted connections run MPA as Responder.
    pub fn listen(&mut self, port: u16, settings: QpSettings) -> Result<ListenerId, EngineError> {
        self.listen_with(port, settings, false)
    }

    /// As [`listen`](Self::listen), but each valid MPA Request is reported as
    /// [`EngineEvent::ConnectRequest`] and waits for [`accept_in`](Self::accept_in) or
    /// [`reject`](Self::reject).
    pub(crate) fn listen_manual(
        &mut self,
        port: u16,
        settings: QpSettings,
    ) -> Result<ListenerId, EngineError> {
        self.listen_with(port, settings, true)
    }

    fn listen_with(
        &mut self,
        port: u16,
        settings: QpSettings,
        manual_accept: bool,
    ) -> Result<ListenerId, EngineError> {
        if self.listeners.iter().any(|l| l.tcp.local().port() == port) {
            return Err(EngineError::PortInUse);
        }
        check_private_data(&settings)?;
        let local = SocketAddr::V4(SocketAddrV4::new(self.cfg.ip, port));
        let tcp = Listener::new(
            self.cfg.tcp.clone(),
            self.cfg.listener.clone(),
            local,
            self.gen.clone(),
        );
        self.listeners.push(ListenerEntry {
            tcp,
            settings,
            manual_accept,
        });
        Ok(ListenerId(self.listeners.len() as u32 - 1))
    }

    /// Opens a connection to `remote` from a local port of the range; MPA runs as Initiator.
    pub fn connect(
        &mut self,
        now: Instant,
        remote: SocketAddrV4,
        settings: QpSettings,
    ) -> Result<ConnId, EngineError> {
        check_private_data(&settings)?;
        let range = self.cfg.local_ports.clone();
        let span = u32::from(*range.end()) - u32::from(*range.start()) + 1;
        for _ in 0..span {
            let port = self.next_port;
            self.next_port = if port >= *range.end() {
                *range.start()
            } else {
                port + 1
            };
            let tuple = FourTuple {
                local: SocketAddr::V4(SocketAddrV4::new(self.cfg.ip, port)),
                remote: SocketAddr::V4(remote),
            };
            if self.flows.contains_key(&tuple)
                || self.listeners.iter().any(|l| l.tcp.local().port() == port)
            {
                continue;
            }
            let tcp = Connection::connect(self.cfg.tcp.clone(), tuple, &self.gen, now);
            return Ok(self.add_conn(Conn::new(tcp, Role::Initiator, settings)));
        }
        Err(EngineError::NoPort)
    }

    /// As [`connect`](Self::connect), in protection domain `pd`: work requests and the peer's
    /// tagged accesses reach `pd`'s regions (verbs API).
    pub(crate) fn connect_in(
        &mut self,
        now: Instant,
        remote: SocketAddrV4,
        settings: QpSettings,
        pd: Arc<PdInner>,
    ) -> Result<ConnId, EngineError> {
        let id = self.connect(now, remote, settings)?;
        if let Some(c) = self.conns.get_mut(&id.0) {
            c.pd = Some(pd);
        }
        Ok(id)
    }

    /// Moves `conn` (a responder whose MPA Request is in, see [`EngineEvent::ConnectRequest`])
    /// into protection domain `pd`: receives may be posted before the Reply goes out.
    pub(crate) fn adopt_pd(&mut self, conn: ConnId, pd: Arc<PdInner>) -> Result<(), EngineError> {
        let c = self.conn_mut(conn)?;
        let qp = c.qp.as_mut().ok_or(EngineError::NotReady)?;
        qp.set_pd(pd.id);
        c.pd = Some(pd);
        Ok(())
    }

    /// Accepts the MPA Request of `conn`: the Reply carries `private_data`.
    pub(crate) fn accept_request(
        &mut self,
        conn: ConnId,
        private_data: &[u8],
    ) -> Result<(), EngineError> {
        let c = self.conn_mut(conn)?;
        let qp = c.qp.as_mut().ok_or(EngineError::NotReady)?;
        qp.accept(private_data)
            .map_err(|_| EngineError::PrivateDataTooLong)
    }

    /// Rejects the MPA Request of `conn` with `private_data` (MPA-80); the engine then closes
    /// the connection gracefully.
    pub(crate) fn reject(&mut self, conn: ConnId, private_data: &[u8]) -> Result<(), EngineError> {
        let c = self.conn_mut(conn)?;
        let qp = c.qp.as_mut().ok_or(EngineError::NotReady)?;
        qp.reject(private_data)
            .map_err(|_| EngineError::PrivateDataTooLong)?;
        c.closing = true;
        Ok(())
    }

    fn add_conn(&mut self, c: Conn) -> ConnId {
        let id = self.next_conn;
        self.next_conn += 1;
        self.flows.insert(c.tcp.tuple(), id);
        self.conns.insert(id, c);
        self.dirty.push(id);
        ConnId(id)
    }

    fn conn_mut(&mut self, conn: ConnId) -> Result<&mut Conn, EngineError> {
        let c = self
            .conns
            .get_mut(&conn.0)
            .ok_or(EngineError::NoConnection)?;
        if !c.dirty {
            c.dirty = true;
            self.dirty.push(conn.0);
        }
        Ok(c)
    }

    fn with_qp(
        &mut self,
        conn: ConnId,
        f: impl FnOnce(&mut Qp, &StagTable) -> Result<(), ddp::PostError>,
    ) -> Result<(), EngineError> {
        let c = self
            .conns
            .get_mut(&conn.0)
            .ok_or(EngineError::NoConnection)?;
        let qp = c.qp.as_mut().ok_or(EngineError::NotReady)?;
        match &c.pd {
            Some(pd) => f(qp, &pd.lock().tags),
            None => f(qp, &self.tags),
        }
        .map_err(EngineError::Post)?;
        if !c.dirty {
            c.dirty = true;
            self.dirty.push(conn.0);
        }
        Ok(())
    }

    /// Posts a receive buffer.
    pub fn post_recv(
        &mut self,
        conn: ConnId,
        wr_id: u64,
        buf: LocalBuf,
    ) -> Result<(), EngineError> {
        self.with_qp(conn, |q, t| q.post_recv(t, wr_id, buf))
    }
    /// Posts a Send.
    pub fn post_send(
        &mut self,
        conn: ConnId,
        wr_id: u64,
        buf: LocalBuf,
        opts: SendOpts,
    ) -> Result<(), EngineError> {
        self.with_qp(conn, |q, t| q.post_send(t, wr_id, buf, opts))
    }
    /// Posts an RDMA Write.
    pub fn post_write(
        &mut self,
        conn: ConnId,
        wr_id: u64,
        buf: LocalBuf,
        remote: RemoteBuf,
    ) -> Result<(), EngineError> {
        self.with_qp(conn, |q, t| q.post_write(t, wr_id, buf, remote))
    }
    /// Posts an RDMA Read.
    pub fn post_read(
        &mut self,
        conn: ConnId,
        wr_id: u64,
        buf: LocalBuf,
        remote: RemoteBuf,
    ) -> Result<(), EngineError> {
        self.with_qp(conn, |q, t| q.post_read(t, wr_id, buf, remote))
    }

    /// Graceful close: queued work still goes out; TCP closes (FIN) once all is acknowledged.
    pub fn close(&mut self, conn: ConnId) -> Result<(), EngineError> {
        let c = self.conn_mut(conn)?;
        if let Some(q) = c.qp.as_mut() {
            q.close();
        }
        c.closing = true;
        Ok(())
    }

    /// Abortive close: work requests are flushed and TCP sends RST.
    pub fn abort(&mut self, conn: ConnId) -> Result<(), EngineError> {
        let c = self.conn_mut(conn)?;
        if let Some(q) = c.qp.as_mut() {
            q.abort();
        }
        c.tcp.abort();
        Ok(())
    }

    /// Test hook for peer misbehaviour: queues raw octets into `conn`'s TCP stream, bypassing
    /// MPA and DDP (the peer receives them as if our MPA had sent them; the stream is then
    /// corrupt and the connection should be closed after the test's check).
    #[doc(hidden)]
    pub fn inject_stream_bytes(&mut self, conn: ConnId, bytes: &[u8]) -> Result<(), EngineError> {
        let c = self.conn_mut(conn)?;
        c.tcp
            .send_record_bytes(bytes)
            .map(|_| ())
            .map_err(|_| EngineError::NotReady)
    }

    /// The next work completion of any connection.
    pub fn poll_completion(&mut self) -> Option<(ConnId, Completion)> {
        self.completions.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<EngineEvent> {
        self.events.pop_front()
    }
}

impl<I: PacketIo> Engine<I> {
    // ---------------------------------------------------------------------------------------
    // Polling

    /// When to call [`Engine::poll`] next at the latest (the earliest timer, a pending frame of
    /// the in-memory link, or `now` when work is left); `None` when idle.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t: Option<Instant> = None;
        let mut take = |x: Option<Instant>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        let c = &self.core;
        for k in c.conns.values() {
            take(k.armed.map(|d| c.wheel.fire_time(d)));
        }
        for l in &c.listeners {
            take(l.tcp.poll_timeout());
        }
        take(self.io.next_rx());
        if c.busy || !c.dirty.is_empty() || !c.pending_tx.is_empty() || self.io.holding() {
            // Work is left: poll again at once ("now" is the caller's last one).
            take(Some(c.last_now));
        }
        t
    }

    /// Transmits what `conn` has to send now, without a receive round: for work posted on an
    /// idle connection (nothing in flight), where waiting for the next round only adds latency.
    pub fn transmit_now(&mut self, now: Instant, conn: ConnId) {
        let Engine { io, core: c } = self;
        c.last_now = now;
        c.service(now, conn.0, io);
        c.flush_pending(now, io);
        io.flush(now);
    }

    /// True when `conn` has nothing queued or in flight (posted work may leave at once).
    pub fn is_idle_to_send(&self, conn: ConnId) -> bool {
        self.core
            .conns
            .get(&conn.0)
            .is_some_and(|c| c.tcp.bytes_in_flight() == 0 && c.tcp.send_queued() == 0)
    }

    /// One round of run-to-completion work: receive a batch, run expired timers, service every
    /// connection that has something to do, transmit. Returns the frames received.
    pub fn poll(&mut self, now: Instant) -> usize {
        let Engine { io, core: c } = self;
        c.last_now = now;
        c.busy = false;
        // 1. Receive: each frame is handled in place (placement copies straight from it).
        let max = c.cfg.rx_batch;
        let n = io.rx_batch(now, max, &mut |f: &[u8]| c.handle_frame(now, f));
        // 2. Timers.
        let mut fired = std::mem::take(&mut c.fired);
        c.wheel.expire(now, &mut fired);
        for id in fired.drain(..) {
            if let Some(k) = c.conns.get_mut(&id) {
                if k.armed.is_some_and(|d| d <= now) {
                    k.armed = None;
                    if k.tcp.poll_timeout().is_some_and(|d| d <= now) {
                        k.tcp.handle_timeout(now);
                    }
                    if let Some(q) = k.qp.as_mut() {
                        if q.poll_timeout().is_some_and(|d| d <= now) {
                            q.handle_timeout(now);
                        }
                    }
                    if !k.dirty {
                        k.dirty = true;
                        c.dirty.push(id);
                    }
                }
            }
        }
        c.fired = fired;
        // 3. Listeners: timers, accepts, stateless replies.
        c.service_listeners(now, io);
        // 4. Connections.
        let mut dirty = std::mem::take(&mut c.dirty);
        for id in dirty.drain(..) {
            c.service(now, id, io);
        }
        if c.dirty.is_empty() {
            c.dirty = dirty;
        }
        c.flush_pending(now, io);
        release_held_tx(io, now);
        io.flush(now);
        n
    }
}

fn next_hop(neighbours: &FastMap<Ipv4Addr, Mac>, cfg: &EngineConfig, ip: Ipv4Addr) -> Option<Mac> {
    neighbours.get(&ip).copied().or(cfg.default_next_hop)
}

/// Moves a queue pair's completions and events to the engine's queues; stream errors and
/// failed startups mark the connection for closing.
fn drain_qp(
    c: &mut Conn,
    conn: ConnId,
    events: &mut VecDeque<EngineEvent>,
    completions: &mut VecDeque<(ConnId, Completion)>,
    counters: &mut EngineCounters,
) {
    if let Some(q) = c.qp.as_mut() {
        while let Some(wc) = q.poll_completion() {
            completions.push_back((conn, wc));
        }
        while let Some(e) = q.poll_event() {
            match e {
                QpEvent::Established {
                    peer_private_data,
                    negotiated,
                } => events.push_back(EngineEvent::Established {
                    conn,
                    peer_private_data,
                    negotiated,
                }),
                QpEvent::ConnectRequest {
                    private_data,
                    peer_wants_markers,
                    peer_wants_crc,
                } => events.push_back(EngineEvent::ConnectRequest {
                    conn,
                    private_data,
                    peer_wants_markers,
                    peer_wants_crc,
                }),
                event @ (QpEvent::Rejected { .. } | QpEvent::StartupFailed(_)) => {
                    c.closing = true;
                    c.tcp.abort();
                    events.push_back(EngineEvent::StartupFailed { conn, event });
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
                    c.closing = true;
                    events.push_back(EngineEvent::StreamError { conn, event: ev });
                }
            }
        }
    }
}

fn check_private_data(s: &QpSettings) -> Result<(), EngineError> {
    if s.private_data.len() > usize::from(s.startup.max_private_data) {
        return Err(EngineError::PrivateDataTooLong);
    }
    Ok(())
}

/// Writes an IPv4 packet with an Ethernet header in front into a transmit frame: `emit` writes
/// the packet at `buf[14..]` and returns its length.
fn frame_out(
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
        ethertype: ethernet::ETHERTYPE_IPV4,
    }
    .emit(buf);
    Some(ethernet::HEADER_LEN + n)
}

impl EngineCore {
    fn mark(&mut self, id: u64) {
        if let Some(c) = self.conns.get_mut(&id) {
            if !c.dirty {
                c.dirty = true;
                self.dirty.push(id);
            }
        }
    }

    /// Ethernet, IPv4, TCP checks and demultiplexing of one received frame. Never panics; bad
    /// frames are counted and dropped.
    fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
        self.counters.rx_packets += 1;
        self.counters.rx_bytes += frame.len() as u64;
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            self.counters.malformed += 1;
            return;
        };
        let dst = eth.dst();
        if dst != self.cfg.mac && dst != ethernet::BROADCAST {
            self.counters.drops += 1;
            return;
        }
        if eth.ethertype() != ethernet::ETHERTYPE_IPV4 {
            self.counters.drops += 1;
            return;
        }
        let seg = match tcp_offload::wire::parse(eth.payload()) {
            Ok(s) => s,
            Err(e) => {
                if e.is_malformed() {
                    self.counters.malformed += 1;
                } else {
                    self.counters.drops += 1;
                }
                return;
            }
        };
        if seg.tuple.local.ip() != std::net::IpAddr::V4(self.cfg.ip) {
            self.counters.drops += 1;
            return;
        }
        if let Some(&id) = self.flows.get(&seg.tuple) {
            if let Some(c) = self.conns.get_mut(&id) {
                match c.qp.as_mut() {
                    // The one copy: TCP lends the payload, placement writes it into the region.
                    Some(qp) if c.tcp.record_mode() => {
                        let mut guard = c.pd.as_ref().map(|p| p.lock());
                        let (tags, mem): (&mut StagTable, &mut dyn Memory) =
                            match guard.as_deref_mut() {
                                Some(PdState { tags, mem }) => (tags, mem),
                                None => (&mut self.tags, &mut self.mem),
                            };
                        let mut sink = FeedSink {
                            qp,
                            rx: &mut c.rx,
                            tags,
                            mem,
                            now,
                            counters: &mut self.counters,
                        };
                        c.tcp.handle_segment_with(now, &seg, &mut sink);
                    }
                    _ => c.tcp.handle_segment(now, &seg),
                }
            }
            self.mark(id);
            return;
        }
        if let Some(li) = self.listeners.iter().position(|l| l.tcp.matches(&seg)) {
            let l = &mut self.listeners[li];
            // A SYN's source MAC is the next hop back to its sender (the peer, or the router it
            // came through): learn it when the kernel's table was not consulted for this peer.
            if seg.flags.syn {
                if let SocketAddr::V4(peer) = seg.tuple.remote {
                    self.neighbours.entry(*peer.ip()).or_insert(eth.src());
                }
            }
            l.tcp.handle_segment(now, &seg);
            self.take_accepted(now, li);
            return;
        }
        self.counters.drops += 1;
        if !seg.flags.rst {
            let mut buf = vec![0u8; 128];
            let src = self.cfg.mac;
            let dst = eth.src();
            if let Some(n) = frame_out(&mut buf, src, dst, |b| emit_rst_for(&seg, b)) {
                buf.truncate(n);
                self.counters.rsts_for_unknown += 1;
                if self.pending_tx.len() < 1024 {
                    self.pending_tx.push(buf);
                }
            }
        }
    }

    fn flush_pending(&mut self, now: Instant, io: &mut dyn PacketIo) {
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

    fn service_listeners(&mut self, now: Instant, io: &mut dyn PacketIo) {
        for li in 0..self.listeners.len() {
            let l = &mut self.listeners[li];
            if l.tcp.poll_timeout().is_some_and(|d| d <= now) {
                l.tcp.handle_timeout(now);
            }
            // Stateless replies and SYN-ACKs.
            loop {
                let src = self.cfg.mac;
                let mut produced = false;
                let l = &mut self.listeners[li];
                let neighbours = &self.neighbours;
                let default = self.cfg.default_next_hop;
                // (The listener's destination is only known after it wrote the packet.)
                let mut no_hop = false;
                let r = io.tx_frame(now, &mut |buf: &mut [u8]| {
                    let n = l.tcp.poll_transmit(now, &mut buf[ethernet::HEADER_LEN..])?;
                    produced = true;
                    let dst_ip = match tcp_offload::wire::parse(&buf[ethernet::HEADER_LEN..][..n]) {
                        Ok(s) => match s.tuple.local {
                            SocketAddr::V4(a) => *a.ip(),
                            SocketAddr::V6(_) => return None,
                        },
                        Err(_) => return None,
                    };
                    let Some(dst) = neighbours.get(&dst_ip).copied().or(default) else {
                        no_hop = true;
                        return None;
                    };
                    EthernetRepr {
                        dst,
                        src,
                        ethertype: ethernet::ETHERTYPE_IPV4,
                    }
                    .emit(buf);
                    Some(ethernet::HEADER_LEN + n)
                });
                if no_hop {
                    self.counters.no_neighbour += 1;
                }
                match r {
                    TxOutcome::Queued => self.counters.tx_packets += 1,
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
            self.take_accepted(now, li);
        }
    }

    /// Moves listener `li`'s established connections into the flow table. Runs right after
    /// the listener handled a segment, so the peer's next segments (its first data may follow
    /// the handshake ACK in the same receive batch) take the flow-table path to the connection
    /// and its queue pair starts at once. (The listener also hands segments to connections
    /// still in its accept queue, so this is about speed, not correctness.)
    fn take_accepted(&mut self, now: Instant, li: usize) {
        while let Some(tcp) = self.listeners[li].tcp.accept() {
            let settings = self.listeners[li].settings.clone();
            let peer = tcp.tuple().remote;
            let mut c = Conn::new(tcp, Role::Responder, settings);
            c.listener = Some(ListenerId(li as u32));
            c.manual_accept = self.listeners[li].manual_accept;
            let conn = self.add_conn(c);
            self.counters.connections_opened += 1;
            self.start_qp(now, conn.0);
            self.events.push_back(EngineEvent::Accepted {
                listener: ListenerId(li as u32),
                conn,
                peer,
            });
        }
    }

    /// TCP is established: record mode on, queue pair created with the connection's EMSS.
    fn start_qp(&mut self, now: Instant, id: u64) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if c.qp.is_some() {
            return;
        }
        c.tcp.enter_record_mode();
        let cfg = QpConfig {
            engine: ddp::EngineConfig {
                stream: StreamId(id as u32),
                pd: c.pd.as_ref().map_or(PdId(0), |p| p.id),
                ird: c.settings.ird,
                ord: c.settings.ord,
                ..ddp::EngineConfig::default()
            },
            startup: c.settings.startup,
            emss: c.tcp.emss(),
            private_data: c.settings.private_data.clone(),
            keep_for_retransmit: true,
            auto_accept: !c.manual_accept,
        };
        c.qp = match c.role {
            Role::Initiator => match Qp::new_initiator(cfg, now) {
                Ok(q) => Some(q),
                Err(_) => {
                    self.counters.internal_errors += 1;
                    c.tcp.abort();
                    None
                }
            },
            Role::Responder => Some(Qp::new_responder(cfg, now)),
        };
    }

    /// Runs one connection: TCP events, receive, queue-pair events, transmit, timers.
    fn service(&mut self, now: Instant, id: u64, io: &mut dyn PacketIo) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        c.dirty = false;
        let mut closed = None;
        let mut start = false;
        let mut peer_closed = false;
        while let Some(e) = c.tcp.poll_event() {
            match e {
                Event::Connected => start = true,
                Event::PeerClosed => {
                    self.events
                        .push_back(EngineEvent::PeerClosed { conn: ConnId(id) });
                    peer_closed = true;
                }
                Event::Closed(r) => closed = Some(r),
                Event::Readable | Event::Writable | Event::RecordAcked(_) => {}
            }
        }
        if start && c.role == Role::Initiator {
            self.counters.connections_opened += 1;
            self.start_qp(now, id);
        }
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        // The connection's tags and memory: its protection domain's (held for the whole round;
        // lock order engine -> domain), or the engine's own.
        let pd = c.pd.clone();
        let mut guard = pd.as_ref().map(|p| p.lock());
        let (tags, mem): (&mut StagTable, &mut dyn Memory) = match guard.as_deref_mut() {
            Some(PdState { tags, mem }) => (tags, mem),
            None => (&mut self.tags, &mut self.mem),
        };
        // Receive: in-order feed and out-of-order placement, straight into the regions.
        c.drive_rx(now, tags, mem, &mut self.counters);
        c.drive_acked();
        if peer_closed {
            // Only now: data and ACKs that came with the FIN are in (delivered, completed);
            // what is left is flushed (MPA error 1 unless we were closing).
            if let Some(q) = c.qp.as_mut() {
                q.handle_close();
            }
            c.closing = true;
        }
        // Queue-pair events and completions.
        drain_qp(
            c,
            ConnId(id),
            &mut self.events,
            &mut self.completions,
            &mut self.counters,
        );
        // Transmit: queue-pair output into TCP as records.
        c.drive_tx(mem, &mut self.scratch, &mut self.counters);
        if c.closing && !c.tcp_closed {
            let idle = c.qp.as_ref().is_none_or(|q| q.is_idle() || q.is_error());
            if idle && c.tcp.send_queued() == 0 {
                c.tcp_closed = true;
                c.tcp.close(now);
            }
        }
        // Segments into frames.
        let src = self.cfg.mac;
        let dst_ip = match c.tcp.tuple().remote {
            SocketAddr::V4(a) => *a.ip(),
            SocketAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
        };
        let hop = next_hop(&self.neighbours, &self.cfg, dst_ip);
        match hop {
            None => self.counters.no_neighbour += 1,
            Some(dst) => loop {
                let mut produced = 0usize;
                let mut src_rec = FpduSource {
                    qp: c.qp.as_mut(),
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
                self.counters.internal_errors += src_rec.failures;
                match r {
                    TxOutcome::NoBuffer => {
                        self.counters.tx_no_buffer += 1;
                        self.busy = true;
                        break;
                    }
                    _ if produced == 0 => break,
                    _ => {
                        self.counters.tx_packets += 1;
                        self.counters.tx_bytes += produced as u64;
                    }
                }
                // More room in TCP's send buffer may have opened: top it up.
                c.drive_tx(mem, &mut self.scratch, &mut self.counters);
            },
        }
        // Completions and events of this round's transmissions and ACKs (Terminate sent).
        drain_qp(
            c,
            ConnId(id),
            &mut self.events,
            &mut self.completions,
            &mut self.counters,
        );
        if closed.is_none() && c.tcp.state() == State::Closed {
            closed = Some(CloseReason::Aborted);
        }
        if let Some(reason) = closed {
            if let Some(q) = c.qp.as_mut() {
                q.handle_close();
                while let Some(wc) = q.poll_completion() {
                    self.completions.push_back((ConnId(id), wc));
                }
            }
            let c = self.conns.remove(&id).expect("present");
            self.counters.retransmissions +=
                c.tcp.counters().retransmits.saturating_sub(c.retrans_seen);
            self.flows.remove(&c.tcp.tuple());
            self.counters.connections_closed += 1;
            self.events.push_back(EngineEvent::Closed {
                conn: ConnId(id),
                reason,
            });
            return;
        }
        // Timers.
        if let Some(d) = c.deadline() {
            if c.armed.is_none_or(|a| d < a) {
                c.armed = Some(d);
                self.wheel.insert(id, d);
            }
        }
    }
}
