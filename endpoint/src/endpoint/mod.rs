//! The endpoint: the tables of one iWARP host, the calls that drive it (frames and time in;
//! frames, events and completions out) and the calls an application makes on it.
//!
//! The [`Endpoint`] type, its constructor, the driving calls and the application's calls on
//! connections live here; the rest is split by concern, each file an `impl Endpoint` block:
//!
//! * `rx`: one received frame: the checks, the demultiplexing (flow table, listeners, else a
//!   RST) and the one copy from the frame into the region;
//! * `service`: a connection's round, stage by stage, and the frames built outside a connection;
//! * `listeners`: passive opens, their SYN-ACKs and replies, and the hand-over of accepted
//!   connections;
//! * `admission`: what the caps let in (connections, each source's share of a backlog, next
//!   hops) and how the rest is refused;
//! * `stream`: plain TCP byte-stream connections beside the iWARP ones.

pub(crate) mod admission;
pub(crate) mod listeners;
mod rx;
mod service;
pub(crate) mod stream;

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use ddp::{
    PdId, RegionHandle, RegionSpec, Stag, StagTable, VecMemory, WorkCompletion, WorkRequest,
};
use tcp_offload::{Connection, FourTuple, IsnGenerator, State, Timestamp};

use crate::clock::Clock;
use crate::config::{EndpointConfig, QpSettings};
use crate::conn::{Conn, ConnId, Role};
use crate::conn_table::ConnTable;
use crate::counters::EndpointCounters;
use crate::domain::{Domain, DomainGuard, NoDomain};
use crate::error::EndpointError;
use crate::ethernet::Mac;
use crate::event::EndpointEvent;
use crate::frame_sink::FrameSink;
use crate::local_ports::LocalPorts;
use crate::neighbours::Neighbours;
use crate::timer_wheel::{Armed, TimerWheel};
use listeners::ListenerEntry;

/// Work completions waiting for `poll_completion`, with their connections, oldest first.
pub(crate) type CompletionQueue = ddp::CompletionRing<ddp::KeyedCompletion>;

/// Slots of the timer wheel: with the default 25 us tick, one turn is about 205 ms (the minimum
/// RTO), so most deadlines sit in their own turn.
const WHEEL_SLOTS: usize = 8192;

/// The endpoint's tables: hashed with foldhash, seeded per process (a peer choosing its ports
/// cannot aim at a bucket), several times cheaper per packet than SipHash.
pub type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Gives a table's memory back once it is mostly empty (after a flood of connections is
/// gone): below a quarter full it shrinks to twice its length, so it never shrinks and grows
/// in turn.
pub(crate) fn shrink_sparse<K: Eq + std::hash::Hash, V>(m: &mut FastMap<K, V>) {
    if m.len() < m.capacity() / 4 {
        m.shrink_to(m.len() * 2);
    }
}

/// As [`shrink_sparse`], for the endpoint's queues, once drained.
fn shrink_drained<T>(q: &mut VecDeque<T>) {
    if q.is_empty() && q.capacity() > 64 {
        q.shrink_to_fit();
    }
}

/// One iWARP host on one address: connections (our TCP + MPA + DDP/RDMAP), listeners, local
/// ports, neighbours and timers. Single-threaded and sans-IO: drive it with
/// [`handle_frame`](Self::handle_frame), [`handle_timeout`](Self::handle_timeout) and
/// [`poll_transmit`](Self::poll_transmit), wake it at [`poll_timeout`](Self::poll_timeout),
/// and collect [`poll_event`](Self::poll_event) and [`poll_completion`](Self::poll_completion).
/// Connections reach memory through a caller-owned protection domain `D` or, without one,
/// through the endpoint's own table and memory.
pub struct Endpoint<D: Domain = NoDomain> {
    pub(crate) cfg: EndpointConfig,
    pub(crate) gen: IsnGenerator,
    /// The connections, by id (an id names its slot: no hashing).
    pub(crate) conns: ConnTable<Conn<D>>,
    pub(crate) flows: FastMap<FourTuple, u64>,
    /// The entry of `flows` the fast path looked up last, its tuple as segments spell it: a
    /// run of frames of one connection (a bulk transfer, a message and its ACK) compares
    /// their octets instead of hashing a tuple. Cleared whenever `flows` changes.
    pub(crate) last_flow: Option<(tcp_offload::Ends, u64)>,
    pub(crate) listeners: Vec<ListenerEntry>,
    pub(crate) retired_listeners: listeners::RetiredListenerCounters,
    pub(crate) neighbours: Neighbours,
    pub(crate) ports: LocalPorts,
    /// Connections with something to do in the next round.
    pub(crate) dirty: Vec<u64>,
    pub(crate) wheel: TimerWheel,
    fired: Vec<u64>,
    /// The queued deadlines (delayed ACKs) that fell due in an expiry, with their connections.
    fired_acks: Vec<(u64, Timestamp)>,
    pub(crate) tags: StagTable,
    pub(crate) mem: VecMemory,
    pub(crate) completions: CompletionQueue,
    /// Work requests posted and not yet taken with `poll_completion`.
    outstanding: usize,
    pub(crate) events: VecDeque<EndpointEvent>,
    pub(crate) counters: EndpointCounters,
    /// Startup frames and claimed FPDUs are written here before TCP takes them.
    pub(crate) scratch: Vec<u8>,
    /// FPDUs rebuilt for a partial retransmission.
    pub(crate) rebuild: Vec<u8>,
    /// Frames built outside a connection (RSTs for strays), waiting for a transmit buffer.
    pub(crate) pending_tx: Vec<Vec<u8>>,
    /// The sink ran out of buffers in this round.
    pub(crate) busy: bool,
    /// A frame went to a listener since the last `poll_transmit`: its round may not wait
    /// ([`Endpoint::service_received`]).
    pub(crate) listener_rx: bool,
    /// The time of the last call that drove the endpoint, and its epoch.
    pub(crate) clock: Clock,
}

impl<D: Domain> Endpoint<D> {
    /// An endpoint with `now` as the clock's origin. Refuses a configuration that fails
    /// [`EndpointConfig::validate`].
    pub fn new(cfg: EndpointConfig, now: Instant) -> Result<Self, EndpointError> {
        cfg.validate()?;
        Ok(Endpoint {
            gen: IsnGenerator::new(cfg.secrets.isn_key(), Timestamp::ZERO),
            conns: ConnTable::default(),
            flows: FastMap::default(),
            last_flow: None,
            listeners: Vec::new(),
            retired_listeners: Default::default(),
            neighbours: Neighbours::new(
                cfg.default_next_hop,
                cfg.limits.max_neighbours,
                cfg.limits.max_syn_sources,
            ),
            ports: LocalPorts::new(cfg.local_ports.clone()),
            dirty: Vec::new(),
            wheel: TimerWheel::new(Timestamp::ZERO, cfg.timer_tick, WHEEL_SLOTS),
            fired: Vec::new(),
            fired_acks: Vec::new(),
            tags: StagTable::new(cfg.secrets.stag_seed()),
            mem: VecMemory::new(),
            completions: CompletionQueue::default(),
            outstanding: 0,
            events: VecDeque::new(),
            counters: EndpointCounters::default(),
            scratch: vec![0; mpa::MAX_FPDU_LEN],
            rebuild: vec![0; mpa::MAX_FPDU_LEN],
            pending_tx: Vec::new(),
            busy: false,
            listener_rx: false,
            clock: Clock::new(now),
            cfg,
        })
    }

    // ---------------------------------------------------------------------------------------
    // Driving: time and frames in, frames out

    /// Runs the timers due at `now`: TCP's and the MPA startup's of every connection, and the
    /// listeners'.
    pub fn handle_timeout(&mut self, now: Instant) {
        let ts = self.clock.set(now);
        if let Some(tick) = self.wheel.advance(ts) {
            self.expire_connections(now, ts, tick);
        }
        // Most calls find no listener timer due and no SYN source to forget: that check is
        // all they run of the listeners' part.
        if !self.listeners_idle(ts) {
            self.listener_timeouts();
        }
    }

    /// The connection timers of the wheel's ticks up to `now` (of wheel tick `tick`).
    fn expire_connections(&mut self, now: Instant, ts: Timestamp, tick: u64) {
        self.wheel
            .expire_to(tick, &mut self.fired, &mut self.fired_acks);
        for &id in &self.fired {
            if let Some(k) = self.conns.get_mut(&id) {
                // Its one wheel entry fired and is kept for it: the round re-arms it for the
                // next deadline.
                k.armed = k.armed.map(Armed::fired);
                // (TCP finds its due timers itself, nothing when the entry fired early.)
                k.tcp.handle_timeout(ts);
                if let Some(q) = k.qp_mut() {
                    if q.poll_timeout().is_some_and(|d| d <= now) {
                        q.handle_timeout(now);
                    }
                }
                k.mark(id, &mut self.dirty);
            }
        }
        self.fired.clear();
        for &(id, at) in &self.fired_acks {
            // The connection's queued delayed ACK (one queued earlier since made it stale):
            // TCP's own deadline, if it still has one, fires now when due (as a wheel entry
            // armed for an earlier deadline finds the timers due at its expiry), else is
            // queued; one that went out with data is let go, without a round.
            let Some(k) = self.conns.get_mut(&id).filter(|k| k.ack_queued == Some(at)) else {
                continue;
            };
            k.ack_queued = None;
            match k.tcp.delayed_ack_deadline() {
                Some(d) if d <= ts => {
                    k.tcp.handle_delayed_ack_timeout(ts);
                    k.mark(id, &mut self.dirty);
                }
                Some(d) => {
                    self.wheel.queue(id, d);
                    k.ack_queued = Some(d);
                }
                None => {}
            }
        }
        self.fired_acks.clear();
    }

    /// One round of transmit work: listeners (SYN-ACKs, stateless replies, accepts), then
    /// every connection with something to do (TCP events, receive, queue-pair events, work
    /// requests into TCP, segments into `sink`'s frames, timers), then frames built outside a
    /// connection.
    pub fn poll_transmit(&mut self, now: Instant, sink: &mut dyn FrameSink) {
        self.clock.set(now);
        self.busy = false;
        self.listener_rx = false;
        self.service_listeners(now, sink);
        // The connections marked before the round; the marks its services leave are pushed
        // after them, for the next round.
        let marked = self.dirty.len();
        for i in 0..marked {
            let id = self.dirty[i];
            // Through `black_box` (an identity the optimizer does not see through): the
            // addresses of the endpoint's parts a full round uses are found where it runs,
            // not hoisted out of the loop and kept on the stack for every round, where most
            // (quiet and ACK rounds) use few of them.
            std::hint::black_box(&mut *self).service(now, id, sink, true);
        }
        if self.dirty.len() == marked {
            self.dirty.clear();
        } else {
            self.dirty.drain(..marked);
        }
        if !self.pending_tx.is_empty() {
            self.flush_pending(now, sink);
        }
    }

    /// Runs `conn` alone and transmits what it has to send now, without a receive round: for
    /// work posted on an idle connection (nothing in flight), where waiting for the next round
    /// only adds latency.
    pub fn transmit_conn(&mut self, now: Instant, conn: ConnId, sink: &mut dyn FrameSink) {
        self.clock.set(now);
        if !self.service(now, conn.0, sink, false) && self.dirty.last() == Some(&conn.0) {
            // The mark the post left is spent (the service did not mark it again): no round
            // for it.
            self.dirty.pop();
        }
        if !self.pending_tx.is_empty() {
            self.flush_pending(now, sink);
        }
    }

    /// When to drive the endpoint next at the latest (the earliest timer, or the last `now`
    /// when work is left); `None` when idle.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t: Option<Instant> = None;
        let mut take = |x: Option<Instant>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        // The connections' timers: the wheel's earliest armed tick (not a walk of every
        // connection).
        take(self.wheel.next_fire().map(|d| self.clock.instant(d)));
        for l in &self.listeners {
            take(l.tcp.poll_timeout().map(|d| self.clock.instant(d)));
        }
        if self.busy || !self.dirty.is_empty() || !self.pending_tx.is_empty() {
            // Work is left: poll again at once ("now" is the caller's last one).
            take(Some(self.clock.last));
        }
        t
    }

    /// The next work completion of any connection.
    pub fn poll_completion(&mut self) -> Option<(ConnId, WorkCompletion)> {
        let (conn, wc) = self.completions.pop()?;
        self.outstanding = self.outstanding.saturating_sub(1);
        Some((ConnId(conn), wc))
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<EndpointEvent> {
        let e = self.events.pop_front();
        if e.is_none() {
            shrink_drained(&mut self.events);
        }
        e
    }

    // ---------------------------------------------------------------------------------------
    // Configuration and state

    /// Counters.
    pub fn counters(&self) -> EndpointCounters {
        let mut c = self.counters;
        for k in self.conns.values() {
            k.fold_counters(&mut c);
        }
        for l in &self.listeners {
            let lc = l.tcp.counters();
            c.syn_cookies_sent += lc.cookies_sent;
            c.half_open_expired += lc.half_open_expired;
            c.listener_tx_overflow += lc.tx_overflow;
        }
        c.syn_cookies_sent += self.retired_listeners.syn_cookies_sent;
        c.half_open_expired += self.retired_listeners.half_open_expired;
        c.listener_tx_overflow += self.retired_listeners.listener_tx_overflow;
        c
    }
    /// The configuration.
    pub fn config(&self) -> &EndpointConfig {
        &self.cfg
    }
    /// Sets the next hop MAC of `ip` (from the kernel's neighbour table), replacing what was
    /// there. Fails when the table is full of addresses in use (counted).
    pub fn add_neighbour(&mut self, ip: impl Into<IpAddr>, mac: Mac) -> Result<(), EndpointError> {
        if self.place_neighbour(ip.into(), mac, true) {
            Ok(())
        } else {
            Err(EndpointError::NeighboursFull)
        }
    }
    /// Entries in the neighbour table (set or learnt; SYN sources not included).
    pub fn neighbour_count(&self) -> usize {
        self.neighbours.len()
    }
    /// Unverified SYN sources remembered for listener replies.
    pub fn syn_source_count(&self) -> usize {
        self.neighbours.syn_sources_len()
    }
    /// Live connections.
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }
    /// Connections in SYN-RECEIVED, over all listeners.
    pub fn half_open_count(&self) -> usize {
        self.listeners.iter().map(|l| l.tcp.half_open_len()).sum()
    }
    /// Connections of a listener whose MPA startup has not finished (its backlog).
    pub fn backlog_len(&self, listener: crate::ListenerId) -> usize {
        self.listeners
            .get(listener.0 as usize)
            .map_or(0, |l| l.backlog.len())
    }
    /// Work requests posted and not yet taken with `poll_completion`.
    pub fn outstanding_work(&self) -> usize {
        self.outstanding
    }
    /// What MPA negotiated on a connection (framing, revision, IRD/ORD, RTR), once it is up.
    pub fn negotiated(&self, conn: ConnId) -> Option<ddp::NegotiatedFraming> {
        self.conns.get(&conn.0)?.qp()?.negotiated()
    }
    /// The TCP state of a connection.
    pub fn tcp_state(&self, conn: ConnId) -> Option<State> {
        self.conns.get(&conn.0).map(|c| c.tcp.state())
    }
    /// The TCP connection (diagnostics and tests).
    pub fn tcp(&self, conn: ConnId) -> Option<&Connection> {
        self.conns.get(&conn.0).map(|c| &c.tcp)
    }
    /// Out-of-order octets the endpoint holds for `conn`, waiting for a gap to fill.
    pub fn ooo_bytes(&self, conn: ConnId) -> Option<u64> {
        self.conns.get(&conn.0).map(|c| c.ooo_bytes())
    }
    /// True when `conn` has nothing queued or in flight (posted work may leave at once).
    pub fn is_idle_to_send(&self, conn: ConnId) -> bool {
        self.conns
            .get(&conn.0)
            .is_some_and(|c| c.tcp.bytes_in_flight() == 0 && c.tcp.send_queued() == 0)
    }

    // ---------------------------------------------------------------------------------------
    // Memory

    /// Registers a zeroed region of `len` octets in the endpoint's own table and memory (for
    /// connections without a domain; zero-based TOs).
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

    /// Opens a connection to `remote` (of the endpoint's address family) from a local port of
    /// the range; MPA runs as Initiator.
    pub fn connect(
        &mut self,
        now: Instant,
        remote: impl Into<SocketAddr>,
        settings: QpSettings,
    ) -> Result<ConnId, EndpointError> {
        let remote = remote.into();
        if remote.is_ipv4() != self.cfg.ip.is_ipv4() {
            return Err(EndpointError::AddressFamily);
        }
        check_private_data(&settings)?;
        let tuple = self.active_tuple(remote)?;
        let ts = self.clock.stamp_of(now);
        let tcp = Connection::connect(self.cfg.tcp.clone(), tuple, &self.gen, ts)
            .map_err(EndpointError::Config)?;
        Ok(self.add_conn(Conn::new(tcp, Role::Initiator, settings)))
    }

    /// As [`connect`](Self::connect), in protection domain `pd`: work requests and the peer's
    /// tagged accesses reach `pd`'s regions.
    pub fn connect_in(
        &mut self,
        now: Instant,
        remote: impl Into<SocketAddr>,
        settings: QpSettings,
        pd: D,
    ) -> Result<ConnId, EndpointError> {
        let id = self.connect(now, remote, settings)?;
        if let Some(c) = self.conns.get_mut(&id.0) {
            c.pd = Some(pd);
        }
        Ok(id)
    }

    /// Moves `conn` (a responder whose MPA Request is in, see
    /// [`EndpointEvent::ConnectRequest`]) into protection domain `pd`: receives may be posted
    /// before the Reply goes out.
    pub fn adopt_pd(&mut self, conn: ConnId, pd: D) -> Result<(), EndpointError> {
        let c = self.conn_mut(conn)?;
        let qp = c.qp_mut().ok_or(EndpointError::NotReady)?;
        qp.set_pd(pd.id());
        c.pd = Some(pd);
        Ok(())
    }

    /// Accepts the MPA Request of `conn`: the Reply carries `private_data` (and, to a Rev 2
    /// Request, the connection's IRD/ORD from its [`QpSettings`]).
    pub fn accept_request(
        &mut self,
        conn: ConnId,
        private_data: &[u8],
    ) -> Result<(), EndpointError> {
        let c = self.conn_mut(conn)?;
        let qp = c.qp_mut().ok_or(EndpointError::NotReady)?;
        qp.accept(private_data)
            .map_err(|_| EndpointError::PrivateDataTooLong)?;
        c.answered();
        Ok(())
    }

    /// As [`accept_request`](Self::accept_request), answering a Rev 2 Request with `depths`
    /// (RFC 6581 §5: the Reply's IRD/ORD are negotiated from these and the Request's).
    pub fn accept_request_with(
        &mut self,
        conn: ConnId,
        private_data: &[u8],
        depths: mpa::ReadDepths,
    ) -> Result<(), EndpointError> {
        let c = self.conn_mut(conn)?;
        let qp = c.qp_mut().ok_or(EndpointError::NotReady)?;
        qp.accept_with(private_data, depths)
            .map_err(|_| EndpointError::PrivateDataTooLong)?;
        c.answered();
        Ok(())
    }

    /// Rejects the MPA Request of `conn` with `private_data` (MPA-80); the endpoint then
    /// closes the connection gracefully.
    pub fn reject(&mut self, conn: ConnId, private_data: &[u8]) -> Result<(), EndpointError> {
        let c = self.conn_mut(conn)?;
        let qp = c.qp_mut().ok_or(EndpointError::NotReady)?;
        qp.reject(private_data)
            .map_err(|_| EndpointError::PrivateDataTooLong)?;
        c.answered();
        c.closing.begin();
        Ok(())
    }

    pub(crate) fn add_conn(&mut self, c: Conn<D>) -> ConnId {
        let tuple = c.tcp.tuple();
        let id = self.conns.insert(c);
        self.flows.insert(tuple, id);
        self.last_flow = None;
        self.dirty.push(id);
        ConnId(id)
    }

    fn conn_mut(&mut self, conn: ConnId) -> Result<&mut Conn<D>, EndpointError> {
        let c = self
            .conns
            .get_mut(&conn.0)
            .ok_or(EndpointError::NoConnection)?;
        c.mark(conn.0, &mut self.dirty);
        Ok(c)
    }

    /// Posts a work request on `conn` (see [`ddp::RdmapEngine::post`]); refusals come back at
    /// once, with nothing queued.
    pub fn post(&mut self, conn: ConnId, wr: WorkRequest) -> Result<(), EndpointError> {
        if self.outstanding >= self.cfg.limits.max_outstanding_work {
            self.counters.work_refused += 1;
            return Err(EndpointError::TooMuchWork);
        }
        let c = self
            .conns
            .get_mut(&conn.0)
            .ok_or(EndpointError::NoConnection)?;
        let Some(qp) = c.state.iwarp_mut().map(|i| &mut i.qp) else {
            return Err(EndpointError::NotReady);
        };
        match &c.pd {
            Some(pd) => qp.post(pd.lock().parts().0, wr),
            None => qp.post(&self.tags, wr),
        }
        .map_err(EndpointError::Post)?;
        self.outstanding += 1;
        c.mark(conn.0, &mut self.dirty);
        Ok(())
    }

    /// The application closes `conn` (the verbs API's queue-pair close; see
    /// [`ddp::Qp::shutdown`]): its posted receives and RDMA Reads complete flushed now (ready in
    /// [`poll_completion`](Self::poll_completion)), nothing the peer sends later is placed
    /// (counted in `rx_after_close`), posted Sends and Writes still go out; TCP closes (FIN)
    /// once they are acknowledged. A connection not finished within its `close_timeout`
    /// ([`QpSettings`]) from `now` is aborted (RST, the rest flushed) by the endpoint's timers.
    pub fn close(&mut self, now: Instant, conn: ConnId) -> Result<(), EndpointError> {
        let c = self
            .conns
            .get_mut(&conn.0)
            .ok_or(EndpointError::NoConnection)?;
        if let Some(q) = c.qp_mut() {
            q.shutdown();
            q.move_completions(&mut self.completions);
        }
        c.closing.begin_by(now + c.settings.close_timeout);
        c.mark(conn.0, &mut self.dirty);
        Ok(())
    }

    /// The application's graceful half-close (DDP -06 §6.2.1, DDP-71; [`ddp::Qp::close`]): no
    /// more Sends, Writes or Reads are taken (receives are), what is posted still goes out and
    /// completes, then TCP sends our FIN. Reception stays on: the peer's messages are placed
    /// and delivered until its own FIN. [`close`](Self::close) ends the rest.
    pub fn close_send(&mut self, conn: ConnId) -> Result<(), EndpointError> {
        let c = self
            .conns
            .get_mut(&conn.0)
            .ok_or(EndpointError::NoConnection)?;
        if let Some(q) = c.qp_mut() {
            q.close();
        }
        c.closing.begin();
        c.mark(conn.0, &mut self.dirty);
        Ok(())
    }

    /// Connections the application closed that are still finishing (not yet in TIME-WAIT or
    /// gone), and the latest time by which each will have finished or been aborted; `None`
    /// when there are none. A caller about to stop driving the endpoint drives it until then.
    pub fn lingering_until(&self) -> Option<Instant> {
        self.conns
            .values()
            .filter(|c| c.is_lingering())
            .filter_map(|c| c.closing.deadline())
            .max()
    }

    /// Abortive close: work requests are flushed and TCP sends RST.
    pub fn abort(&mut self, conn: ConnId) -> Result<(), EndpointError> {
        let c = self.conn_mut(conn)?;
        c.abort();
        // (A stream held for its unread octets is let go.)
        c.closing.begin();
        Ok(())
    }

    /// Test hook for peer misbehaviour: queues raw octets into `conn`'s TCP stream, bypassing
    /// MPA and DDP (the peer receives them as if our MPA had sent them; the stream is then
    /// corrupt and the connection should be closed after the test's check).
    #[doc(hidden)]
    pub fn inject_stream_bytes(&mut self, conn: ConnId, bytes: &[u8]) -> Result<(), EndpointError> {
        let c = self.conn_mut(conn)?;
        c.tcp
            .send_record_bytes(bytes)
            .map(|_| ())
            .map_err(|_| EndpointError::NotReady)
    }
}

pub(crate) fn check_private_data(s: &QpSettings) -> Result<(), EndpointError> {
    if s.private_data.len() > usize::from(s.startup.max_private_data) {
        return Err(EndpointError::PrivateDataTooLong);
    }
    Ok(())
}
