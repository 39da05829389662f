//! The device: the entry point of the verbs API, bound to one transport.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

use ddp::{QpConfig, RdmapConfig, StreamId};

use crate::counters::{CounterSnapshot, DeviceCounters};
use crate::kernel::{self, DriverOptions, InlineDrivers};
use crate::queue_pair::{next_qp_num, Established, QpKind, QpShared};
use crate::xdp_device::XdpLanes;
use crate::{
    CompletionQueue, ConnectError, ConnectionConfig, DeviceError, EngineMode, Listener, PostError,
    ProtectionDomain, QueuePair, Transport, XdpConfig,
};

static NEXT_DEVICE: AtomicU64 = AtomicU64::new(1);

/// What a new queue pair is made of.
#[derive(Debug, Clone)]
pub struct QpInit {
    /// Its protection domain: the only regions its work requests and its peer can reach.
    pub pd: ProtectionDomain,
    /// Where Send, Write and Read completions go.
    pub send_cq: CompletionQueue,
    /// Where receive completions go.
    pub recv_cq: CompletionQueue,
}

/// An opened device.
#[derive(Debug, Clone)]
pub struct Device {
    id: u64,
    /// The key each protection domain's STag seed is derived from (drawn from the OS random
    /// source at open; see [`crate::pd::StagSeeds`]).
    stag_seeds: crate::pd::StagSeeds,
    transport: Transport,
    counters: Arc<DeviceCounters>,
    /// The AF_XDP engines, one per queue (xdp transport only).
    xdp: Option<Arc<XdpLanes>>,
    /// Kernel transport in inline mode: the connections the application's calls run.
    inline: Option<Arc<InlineDrivers>>,
}

impl Device {
    /// Opens a device on `transport` (the kernel transport with a driver thread per
    /// connection; [`Device::open_kernel`] chooses).
    pub fn open(transport: Transport) -> Result<Self, DeviceError> {
        if transport == Transport::Xdp {
            return Err(DeviceError::TransportUnavailable(
                "the xdp transport needs an interface: open it with Device::open_xdp(XdpConfig)",
            ));
        }
        Self::open_kernel(EngineMode::Threaded)
    }

    /// Opens a kernel-transport device. [`EngineMode::Threaded`]: each connection runs on its
    /// own driver thread. [`EngineMode::Inline`]: no driver threads; posting work writes it to
    /// the socket at once and polling or waiting on a completion queue reads and places what
    /// arrived, on the caller's thread (the lowest latency: no thread hand-off; something
    /// must poll for connections to make progress). [`EngineMode::Pinned`] is for the AF_XDP
    /// engine only.
    pub fn open_kernel(mode: EngineMode) -> Result<Self, DeviceError> {
        let inline = match mode {
            EngineMode::Threaded => None,
            EngineMode::Inline => Some(Arc::new(InlineDrivers::default())),
            EngineMode::Pinned(_) => {
                return Err(DeviceError::TransportUnavailable(
                    "a pinned engine is the AF_XDP transport's: the kernel transport runs threaded or inline",
                ))
            }
        };
        Ok(Self {
            id: NEXT_DEVICE.fetch_add(1, Ordering::Relaxed),
            stag_seeds: crate::pd::StagSeeds::from_os()?,
            transport: Transport::Kernel,
            counters: Arc::default(),
            xdp: None,
            inline,
        })
    }

    /// Opens an AF_XDP device: attaches xwarp's XDP program to `cfg.interface` (replacing a
    /// stale one of ours), binds an AF_XDP socket to each of `cfg.queues` queues from
    /// `cfg.queue` and starts an engine on each. Must be called in the interface's network
    /// namespace. Dropping the last handle detaches XDP.
    pub fn open_xdp(cfg: XdpConfig) -> Result<Self, DeviceError> {
        let counters = Arc::<DeviceCounters>::default();
        let stag_seeds = crate::pd::StagSeeds::from_os()?;
        let xdp = XdpLanes::open(&cfg, counters.clone())?;
        Ok(Self {
            id: NEXT_DEVICE.fetch_add(1, Ordering::Relaxed),
            stag_seeds,
            transport: Transport::Xdp,
            counters,
            xdp: Some(Arc::new(xdp)),
            inline: None,
        })
    }

    /// The AF_XDP engines (xdp transport only).
    pub(crate) fn xdp_lanes(&self) -> Option<&Arc<XdpLanes>> {
        self.xdp.as_ref()
    }

    /// The engines' counters, summed over the device's queues (AF_XDP devices; `None` for the
    /// kernel transport).
    pub fn engine_counters(&self) -> Option<endpoint::EndpointCounters> {
        let x = self.xdp.as_ref()?;
        let mut sum = endpoint::EndpointCounters::default();
        for lane in x.all() {
            sum.add(&lane.shared.lock().engine.endpoint().counters());
        }
        Some(sum)
    }

    /// Each queue's engine counters, in queue order (AF_XDP devices; empty for the kernel
    /// transport): how a multi-queue device spread its work.
    pub fn lane_counters(&self) -> Vec<endpoint::EndpointCounters> {
        self.xdp.as_ref().map_or_else(Vec::new, |x| {
            x.all()
                .iter()
                .map(|lane| lane.shared.lock().engine.endpoint().counters())
                .collect()
        })
    }

    /// Packets a multi-queue device's lanes handed to each other: received on one queue, owned
    /// by another lane (AF_XDP devices; `None` for the kernel transport).
    pub fn lane_handoffs(&self) -> Option<crate::engine::HandOffCounters> {
        self.xdp.as_ref().map(|x| x.handoff_counters())
    }

    /// Received chains of frames (jumbo packets on a multi-buffer queue), summed over the
    /// device's queues: read in place from the receive strip, and gathered into a buffer
    /// (AF_XDP devices; `None` for the kernel transport).
    pub fn rx_chains(&self) -> Option<(u64, u64)> {
        let x = self.xdp.as_ref()?;
        Some(x.all().iter().fold((0, 0), |(p, g), lane| {
            let (lp, lg) = lane.shared.lock().engine.io().rx_chains();
            (p + lp, g + lg)
        }))
    }

    /// What the engines' fault injectors did, summed over the device's queues (AF_XDP devices
    /// with [`crate::XdpConfig::fault`] set; `None` otherwise).
    pub fn fault_counters(&self) -> Option<crate::engine::FaultCounters> {
        let x = self.xdp.as_ref()?;
        let mut sum = crate::engine::FaultCounters::default();
        for lane in x.all() {
            let st = lane.shared.lock();
            if !st.engine.faults_enabled() {
                return None;
            }
            sum.add(&st.engine.fault_counters());
        }
        Some(sum)
    }

    /// What the engines hold now, summed over the device's queues (AF_XDP devices; `None` for
    /// the kernel transport).
    pub fn engine_load(&self) -> Option<EngineLoad> {
        self.xdp.as_ref()?;
        let mut load = EngineLoad::default();
        for l in self.lane_loads() {
            load.connections += l.connections;
            load.half_open += l.half_open;
            load.neighbours += l.neighbours;
            load.syn_sources += l.syn_sources;
        }
        Some(load)
    }

    /// What each queue's engine holds now, in queue order (AF_XDP devices; empty for the
    /// kernel transport).
    pub fn lane_loads(&self) -> Vec<EngineLoad> {
        self.xdp.as_ref().map_or_else(Vec::new, |x| {
            x.all()
                .iter()
                .map(|lane| {
                    let st = lane.shared.lock();
                    let e = st.engine.endpoint();
                    EngineLoad {
                        connections: e.connection_count(),
                        half_open: e.half_open_count(),
                        neighbours: e.neighbour_count(),
                        syn_sources: e.syn_source_count(),
                    }
                })
                .collect()
        })
    }

    /// The XDP program's counters (AF_XDP devices: packets redirected to the engine, passed to
    /// the kernel, dropped as malformed, steered without a socket).
    pub fn xdp_counters(&self) -> Option<afxdp::SteerCounters> {
        let x = self.xdp.as_ref()?;
        let c = x.first().shared.lock().program.counters().ok();
        c
    }

    /// What an AF_XDP device was set up with (attach mode, zero-copy, MTU, MSS, queue);
    /// `None` for the kernel transport.
    pub fn xdp_info(&self) -> Option<crate::XdpInfo> {
        self.xdp.as_ref().map(|x| x.first().shared.info.clone())
    }

    /// True when the application's own calls drive the connections (a device opened in
    /// [`crate::EngineMode::Inline`]): a busy-polling caller need not give up its CPU.
    pub fn is_inline(&self) -> bool {
        self.inline.is_some() || self.xdp.as_ref().is_some_and(|x| x.first().shared.inline)
    }

    /// The device's address, IPv4 or IPv6 (AF_XDP devices: the interface's address they
    /// serve, `XdpConfig::address`).
    pub fn local_ip(&self) -> Option<std::net::IpAddr> {
        self.xdp.as_ref().map(|x| x.first().shared.ip)
    }

    /// Waits until the connections the application closed have finished (FIN exchanged, or
    /// aborted at their close timeout) or `timeout` passed; what a process calls before it
    /// exits, since an AF_XDP device's engines end with it (a peer would otherwise never see
    /// the last acknowledgements and the FIN). Returns at once on the kernel transport, whose
    /// connections the kernel finishes.
    pub fn finish_closing(&self, timeout: std::time::Duration) {
        let Some(x) = &self.xdp else {
            return;
        };
        let deadline = Instant::now() + timeout;
        for lane in x.all() {
            lane.shared.wait_until(deadline, |st| {
                st.engine
                    .endpoint()
                    .lingering_until()
                    .is_none()
                    .then_some(())
            });
        }
    }

    /// The transport this device runs.
    pub fn transport(&self) -> &Transport {
        &self.transport
    }

    /// A new protection domain.
    pub fn alloc_pd(&self) -> ProtectionDomain {
        ProtectionDomain::new(self.id, &self.stag_seeds)
    }

    /// What a queue pair needs in the common case: a new protection domain and one new
    /// completion queue for both directions, which is also returned for polling.
    pub fn qp_init(&self) -> (QpInit, CompletionQueue) {
        let cq = self.create_cq();
        let init = QpInit {
            pd: self.alloc_pd(),
            send_cq: cq.clone(),
            recv_cq: cq.clone(),
        };
        (init, cq)
    }

    /// A new completion queue holding up to [`crate::DEFAULT_CQ_CAPACITY`] unpolled
    /// completions.
    pub fn create_cq(&self) -> CompletionQueue {
        self.create_cq_with(crate::DEFAULT_CQ_CAPACITY)
    }

    /// A new completion queue holding up to `capacity` (at least 1) unpolled completions;
    /// one more overruns it ([`crate::CqError::Overrun`]).
    pub fn create_cq_with(&self, capacity: usize) -> CompletionQueue {
        let mut cq = CompletionQueue::new(self.id, capacity);
        // Inline engines run when the application polls or waits; assisted ones when it polls.
        if let Some(x) = self.xdp.as_ref().filter(|x| x.first().shared.calls_drive()) {
            let weak: std::sync::Weak<XdpLanes> = Arc::downgrade(x);
            cq.driver = Some(weak);
        }
        if let Some(i) = &self.inline {
            let weak: std::sync::Weak<InlineDrivers> = Arc::downgrade(i);
            cq.driver = Some(weak);
        }
        cq
    }

    /// Counters of every listener and connection of this device.
    pub fn counters(&self) -> CounterSnapshot {
        let mut c = self.counters.snapshot();
        // On AF_XDP the engine counts the bytes (frames on the wire, headers included) and
        // the ends of closed connections.
        if let Some(e) = self.engine_counters() {
            c.rx_bytes = e.rx_bytes;
            c.tx_bytes = e.tx_bytes;
            c.rx_after_close = e.rx_after_close;
            c.close_timeouts = e.close_timeouts;
        }
        c
    }

    /// Listens on `addr` as MPA responder with `config`.
    pub fn listen(
        &self,
        addr: SocketAddr,
        config: ConnectionConfig,
    ) -> Result<Listener, ConnectError> {
        match &self.xdp {
            Some(x) => Ok(Listener::xdp(x.listen(addr, config)?, self.id)),
            None => Listener::bind(
                addr,
                config,
                self.counters.clone(),
                self.id,
                self.inline.clone(),
            ),
        }
    }

    /// Connects to `addr` as MPA initiator, sending `private_data` in the Request (with
    /// `config`'s revision, IRD/ORD and peer-to-peer offer). Returns the queue pair once the
    /// peer's Reply accepted; the peer's private data is in [`QueuePair::peer_private_data`],
    /// what was negotiated in [`QueuePair::negotiated`].
    ///
    /// RFC 6581 §8: when a Rev 2 Request meets a Responder that closes TCP before replying (an
    /// RFC 5044 one) and `config` accepts Rev 1, the connection is retried once with Rev 1
    /// ([`mpa::StartupConfig::rev1_fallback`]; counted in `rev1_fallbacks`).
    pub fn connect(
        &self,
        addr: SocketAddr,
        init: QpInit,
        config: &ConnectionConfig,
        private_data: &[u8],
    ) -> Result<QueuePair, ConnectError> {
        self.connect_with(addr, init, config, private_data, |_| Ok(()))
    }

    /// As [`connect`](Self::connect), running `before_start` on the new queue pair before
    /// any of the peer's FPDUs can reach it: the place to post receive buffers, as verbs
    /// applications post them on a queue pair before it connects (the active side's
    /// counterpart of [`crate::Incoming::accept_with`]). On the kernel transport it runs
    /// before the connection's driver starts; on the xdp transport the requests it posts are
    /// handed to the connection when TCP is up, before the MPA Reply can arrive. A refusal in
    /// `before_start` ends the attempt ([`ConnectError::Post`]). Only receives should be
    /// posted there: the queue pair cannot send before MPA is up. With the RFC 6581 fallback
    /// to Rev 1, `before_start` runs on the second attempt's queue pair too.
    pub fn connect_with(
        &self,
        addr: SocketAddr,
        init: QpInit,
        config: &ConnectionConfig,
        private_data: &[u8],
        mut before_start: impl FnMut(&QueuePair) -> Result<(), PostError>,
    ) -> Result<QueuePair, ConnectError> {
        if init.pd.inner.device_id != self.id
            || init.send_cq.device_id != self.id
            || init.recv_cq.device_id != self.id
        {
            return Err(ConnectError::ForeignResource);
        }
        if usize::from(config.mpa.max_private_data) < private_data.len() {
            return Err(ConnectError::Usage(
                mpa::startup::UsageError::PrivateDataTooLong,
            ));
        }
        let before = &mut before_start;
        match self.connect_once(addr, init.clone(), config, private_data, before) {
            Err(ConnectError::Startup(mpa::StartupError::ConnectionClosed)) => {
                let Some(mpa) = config.mpa.rev1_fallback() else {
                    return Err(ConnectError::Startup(mpa::StartupError::ConnectionClosed));
                };
                DeviceCounters::inc(&self.counters.rev1_fallbacks);
                let retry = ConnectionConfig {
                    mpa,
                    ..config.clone()
                };
                self.connect_once(addr, init, &retry, private_data, before)
            }
            r => r,
        }
    }

    /// One connection attempt with `config` as it is.
    fn connect_once(
        &self,
        addr: SocketAddr,
        init: QpInit,
        config: &ConnectionConfig,
        private_data: &[u8],
        before_start: &mut dyn FnMut(&QueuePair) -> Result<(), PostError>,
    ) -> Result<QueuePair, ConnectError> {
        if let Some(x) = &self.xdp {
            let (qp, up) = x.connect(addr, init, config, private_data, before_start)?;
            return Ok(QueuePair::xdp(qp, up));
        }
        let stream = TcpStream::connect_timeout(&addr, config.mpa.timeout)?;
        stream.set_nodelay(true)?;
        let num = next_qp_num();
        let mut cfg = qp_config(num, &stream, &init, config);
        cfg.private_data = private_data.to_vec();
        let qp = ddp::Qp::new_initiator(cfg, Instant::now())?;
        let (tx, rx) = mpsc::sync_channel(1);
        let shared = Arc::new(QpShared::new(num, qp, init.pd, init.send_cq, init.recv_cq)?);
        {
            // The driver is not running yet: nothing the peer sends is read before this.
            let mut early = QueuePair::kernel(
                shared.clone(),
                Established {
                    peer_private_data: Vec::new(),
                    negotiated: ddp::NegotiatedFraming::default(),
                },
            );
            // The handle only lends the queue pair; dropping it must not close it.
            early.detached = true;
            before_start(&early).map_err(ConnectError::Post)?;
        }
        let opts = DriverOptions::of(config);
        let counters = self.counters.clone();
        let up = match &self.inline {
            Some(inline) => {
                // Drive the startup on this thread until the driver reports how it ended (the
                // queue pair's own MPA timer bounds it; the extra second only guards a bug).
                let conn = inline.start(stream, &shared, counters, opts, Some(tx));
                let limit = config.mpa.timeout + std::time::Duration::from_secs(1);
                let nap = std::time::Duration::from_millis(1);
                conn.drive_until(limit, nap, || rx.try_recv().ok())
                    .ok_or(mpsc::RecvError)
            }
            None => {
                let s2 = shared.clone();
                crate::library_thread::spawn(format!("xwarp-qp{num}"), move || {
                    kernel::run(stream, s2, counters, opts, Some(tx))
                })?;
                rx.recv()
            }
        };
        match up {
            Ok(Ok(up)) => Ok(QueuePair::kernel(shared, up)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(ConnectError::Startup(mpa::StartupError::ConnectionClosed)),
        }
    }
}

fn qp_config(num: u32, stream: &TcpStream, init: &QpInit, config: &ConnectionConfig) -> QpConfig {
    QpConfig {
        engine: RdmapConfig {
            stream: StreamId(num),
            pd: init.pd.inner.id,
            ird: config.ird,
            ord: config.ord,
            ..RdmapConfig::default()
        },
        startup: config.mpa,
        emss: config
            .emss
            .or_else(|| kernel::tcp_mss(stream))
            .unwrap_or(mpa::mulpdu::DEFAULT_EMSS),
        private_data: Vec::new(),
        keep_for_retransmit: false,
        auto_accept: false,
        fast_path: true,
    }
}

/// A responder's queue pair between accepting and sending the Reply: work may be posted.
pub(crate) struct PendingQp {
    pub(crate) qp: QueuePair,
}

impl PendingQp {
    /// Starts the connection driver: a thread, or `inline`'s steps.
    pub(crate) fn start(
        &mut self,
        stream: TcpStream,
        config: &ConnectionConfig,
        counters: &Arc<DeviceCounters>,
        inline: Option<&InlineDrivers>,
    ) -> Result<QueuePair, ConnectError> {
        let QpKind::Kernel(shared) = &self.qp.kind else {
            unreachable!("a pending kernel queue pair");
        };
        let shared = shared.clone();
        let opts = DriverOptions::of(config);
        let c2 = counters.clone();
        match inline {
            Some(inline) => {
                inline.start(stream, &shared, c2, opts, None);
            }
            None => {
                let s2 = shared.clone();
                crate::library_thread::spawn(format!("xwarp-qp{}", shared.num), move || {
                    kernel::run(stream, s2, c2, opts, None)
                })?;
            }
        }
        DeviceCounters::inc(&counters.mpa_established);
        let up = Established {
            peer_private_data: std::mem::take(&mut self.qp.peer_private_data),
            negotiated: self.qp.negotiated,
        };
        // The handle moves out; the pending one must not close the connection when dropped.
        let qp = QueuePair::kernel(shared, up);
        self.qp.detached = true;
        Ok(qp)
    }
}

/// Responder side, MPA agreed: the queue pair in Full Operation, before its driver runs.
pub(crate) fn prepare_queue_pair(
    stream: &TcpStream,
    negotiated: &mpa::Negotiated,
    leftover: &[u8],
    init: QpInit,
    config: &ConnectionConfig,
) -> Result<PendingQp, ConnectError> {
    let num = next_qp_num();
    let cfg = qp_config(num, stream, &init, config);
    let mut qp = ddp::Qp::new_established(cfg, negotiated);
    // Drop the Established event: the caller already knows.
    while qp.poll_event().is_some() {}
    let up = Established {
        peer_private_data: negotiated.peer_private_data.clone(),
        negotiated: qp
            .negotiated()
            .ok_or(ConnectError::Startup(mpa::StartupError::ConnectionClosed))?,
    };
    if !leftover.is_empty() {
        let mut st = init.pd.inner.lock();
        let st = &mut *st;
        qp.handle_rx_bytes(&mut st.tags, &mut st.mem, Instant::now(), leftover);
    }
    let shared = Arc::new(QpShared::new(num, qp, init.pd, init.send_cq, init.recv_cq)?);
    Ok(PendingQp {
        qp: QueuePair::kernel(shared, up),
    })
}

/// What an AF_XDP device's engine holds at one moment ([`Device::engine_load`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineLoad {
    /// Live connections (every state after SYN-RECEIVED).
    pub connections: usize,
    /// Half-open handshakes (SYN-RECEIVED) over all listeners.
    pub half_open: usize,
    /// Next-hop entries.
    pub neighbours: usize,
    /// Unverified SYN source MACs kept to answer SYNs.
    pub syn_sources: usize,
}
