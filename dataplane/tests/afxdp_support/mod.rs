//! Shared fixture of the AF_XDP end-to-end tests (`afxdp_*.rs`): an engine on AF_XDP on one
//! side of a netns/veth testbed ([`EngineHost`]: XDP attached natively, the active-open range and
//! listener ports steered, one copy-mode queue), poll helpers with deadlines, and a transfer
//! plan both ends of a connection run and verify byte for byte ([`Layout`], [`EngineEnd`],
//! [`KernelEnd`]).
//!
//! The plan: each end registers a source region (Sends from its first half, Writes from its
//! second), a receive region, a Write target and a Read source, and tells the peer the STags of
//! the last two in its MPA private data. Then each end, for every size, RDMA Writes into the
//! peer's target and RDMA Reads from the peer's source, and after those Sends each size into the
//! peer's posted receives. A Send is delivered after the Writes posted before it (in-order
//! delivery on one stream), so once an end has its four receives the peer's Writes are placed.
#![allow(dead_code)]

use ddp::WorkRequest;
use std::net::{SocketAddr, SocketAddrV4};
use std::ops::Range;
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use afxdp::{
    AttachMode, AttachPolicy, BindMode, LocalPortRange, PortKind, XdpProgram, XskConfig, XskQueue,
};
use dataplane::engine::{Engine, XskIo};
use dataplane::{
    Access, Completion as KCompletion, CompletionQueue, ConnectionConfig, Device, MemoryRegion,
    MpaSettings, Opcode, ProtectionDomain, QpInit, QueuePair, RemoteAddr, Status, Transport,
};
use ddp::{
    LocalBuf, NegotiatedFraming, RegionHandle, RemoteBuf, Stag, WcOpcode, WcStatus, WorkCompletion,
};
use endpoint::{ConnId, EndpointConfig, EndpointEvent, ListenerId, QpSettings, Secrets};
use testbed::{Side, VethTestbed};

/// The sizes every transfer test moves: 1 B to 16 MiB.
pub const SIZES: [usize; 4] = [1, 4096, 1 << 20, 16 << 20];

/// The engine's active-open port range (steered as [`PortKind::ActiveOpen`]).
pub const ACTIVE_PORTS: std::ops::RangeInclusive<u16> = 40000..=40999;

/// Heavy tests of one binary take turns: two busy-polling engines plus kernel peers on the
/// machine's two cores would only slow each other down.
pub fn serial() -> MutexGuard<'static, ()> {
    static HEAVY: Mutex<()> = Mutex::new(());
    HEAVY.lock().unwrap_or_else(|p| p.into_inner())
}

#[allow(unused_imports)] // each test binary uses its own part of this module
pub use testkit::{fill_pattern, pattern};

/// MPA settings of an engine connection.
pub fn engine_settings(markers: bool, crc: bool, private_data: Vec<u8>) -> QpSettings {
    let mut s = QpSettings {
        private_data,
        ..QpSettings::default()
    };
    s.startup.want_markers = markers;
    s.startup.want_crc = crc;
    s
}

/// MPA settings of a kernel-transport connection.
pub fn kernel_config(markers: bool, crc: bool) -> ConnectionConfig {
    ConnectionConfig::default().with_mpa(MpaSettings {
        want_markers: markers,
        want_crc: crc,
        ..MpaSettings::default()
    })
}

/// What MPA negotiation must give (MPA-98: markers per direction, as the receiver asks;
/// MPA-99: CRC if either side asks), seen from the end whose wishes are `local`.
pub fn expect_negotiated(
    got: &NegotiatedFraming,
    local: (bool, bool),
    peer: (bool, bool),
    who: &str,
) {
    let (lm, lc) = local;
    let (pm, pc) = peer;
    assert_eq!(
        (got.rx_markers, got.tx_markers, got.crc),
        (lm, pm, lc || pc),
        "{who}: negotiated {got:?} for local (markers, crc) {local:?}, peer {peer:?}"
    );
}

// ------------------------------------------------------------------------------------------
// The engine on AF_XDP

/// An engine on AF_XDP on one side of the testbed, with everything it received so far.
pub struct EngineHost {
    pub e: Engine<XskIo>,
    pub prog: XdpProgram,
    pub side: Side,
    /// Every event so far, in order.
    pub events: Vec<EndpointEvent>,
    /// Every completion so far, in order.
    pub wcs: Vec<(ConnId, WorkCompletion)>,
}

impl EngineHost {
    /// Attaches the steering program to `side`'s veth end (native mode), steers the active-open
    /// range, binds a copy-mode AF_XDP socket on queue 0 and starts an engine on it. `tweak`
    /// adjusts the engine configuration. The calling thread may be in any namespace.
    pub fn new(
        tb: &VethTestbed,
        side: Side,
        tweak: impl FnOnce(&mut EndpointConfig),
    ) -> EngineHost {
        let _ns = tb.enter(side).expect("enter netns");
        let ifname = tb.ifname(side).to_string();
        let prog = XdpProgram::attach(&ifname, AttachPolicy::NativeOrGeneric).expect("attach XDP");
        assert_eq!(prog.mode(), AttachMode::Native, "veth takes native XDP");
        prog.steer_range(LocalPortRange::new(*ACTIVE_PORTS.start(), *ACTIVE_PORTS.end()).unwrap())
            .expect("steer the active-open range");
        let queue = XskQueue::new(
            &ifname,
            0,
            XskConfig {
                bind_mode: BindMode::Copy,
                ..XskConfig::default()
            },
        )
        .expect("AF_XDP socket");
        prog.register_socket(0, queue.fd()).expect("XSKMAP");
        let secrets = Secrets::fixed_for_tests(u64::from(u32::from(tb.ip(side))));
        let mut cfg = EndpointConfig::new(tb.mac(side).unwrap(), tb.ip(side), secrets);
        cfg.local_ports = ACTIVE_PORTS;
        cfg.default_next_hop = Some(tb.mac(side.peer()).unwrap());
        tweak(&mut cfg);
        // The program owns the address the engine serves (a tweak may pick the IPv6 one).
        prog.set_owned_addrs(&[cfg.ip])
            .expect("own the engine's address");
        let e = Engine::new(cfg, XskIo::new(queue), Instant::now()).expect("valid configuration");
        EngineHost {
            e,
            prog,
            side,
            events: Vec::new(),
            wcs: Vec::new(),
        }
    }

    /// Listens on `port` and steers it to the engine.
    pub fn listen(&mut self, port: u16, settings: QpSettings) -> ListenerId {
        self.prog
            .steer_port(port, PortKind::Listen)
            .expect("steer the listening port");
        self.e
            .endpoint_mut()
            .listen(port, settings)
            .expect("listen")
    }

    /// One round: poll, collect events and completions; when idle, wait up to 1 ms for frames
    /// (leaves the CPU to the kernel peer on a two-core machine).
    pub fn step(&mut self) {
        let now = Instant::now();
        let n = self.e.poll(now);
        while let Some(ev) = self.e.endpoint_mut().poll_event() {
            self.events.push(ev);
        }
        while let Some(wc) = self.e.endpoint_mut().poll_completion() {
            self.wcs.push(wc);
        }
        if n == 0 && self.e.poll_timeout().is_none_or(|t| t > now) {
            let _ = self.e.io_mut().queue_mut().poll_rx(1);
        }
    }

    /// Steps until `done` holds; panics after `timeout` with `what` and the counters.
    pub fn run_until(
        &mut self,
        timeout: Duration,
        what: &str,
        mut done: impl FnMut(&mut EngineHost) -> bool,
    ) {
        let deadline = Instant::now() + timeout;
        loop {
            if done(self) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not done after {timeout:?}; counters {:?}; events {:?}",
                self.e.endpoint().counters(),
                self.events
            );
            self.step();
        }
    }

    /// Steps for `d` (keeps the engine answering while a peer finishes).
    pub fn run_for(&mut self, d: Duration) {
        let end = Instant::now() + d;
        while Instant::now() < end {
            self.step();
        }
    }

    /// The negotiated MPA parameters of `conn`, once established.
    pub fn established(&self, conn: ConnId) -> Option<(NegotiatedFraming, Vec<u8>)> {
        self.events.iter().find_map(|e| match e {
            EndpointEvent::Established {
                conn: c,
                negotiated,
                peer_private_data,
            } if *c == conn => Some((*negotiated, peer_private_data.clone())),
            _ => None,
        })
    }

    /// Connections `listener` accepted so far, in order.
    pub fn accepted(&self, listener: ListenerId) -> Vec<ConnId> {
        self.events
            .iter()
            .filter_map(|e| match e {
                EndpointEvent::Accepted {
                    listener: l, conn, ..
                } if *l == listener => Some(*conn),
                _ => None,
            })
            .collect()
    }

    /// Whether `conn` is gone, and why.
    pub fn closed(&self, conn: ConnId) -> Option<tcp_offload::CloseReason> {
        self.events.iter().find_map(|e| match e {
            EndpointEvent::Closed { conn: c, reason } if *c == conn => Some(*reason),
            _ => None,
        })
    }

    /// Whether the peer closed its side of `conn` (FIN; half-closed, DDP-69).
    pub fn peer_closed(&self, conn: ConnId) -> bool {
        self.events
            .iter()
            .any(|e| matches!(e, EndpointEvent::PeerClosed { conn: c } if *c == conn))
    }

    /// Completions of `conn` so far.
    pub fn completions_of(&self, conn: ConnId) -> Vec<WorkCompletion> {
        self.wcs
            .iter()
            .filter(|(c, _)| *c == conn)
            .map(|(_, w)| *w)
            .collect()
    }

    /// A zeroed region.
    pub fn region(&mut self, len: usize, access: Access) -> (RegionHandle, Stag) {
        self.e.endpoint_mut().register(len.max(1), access)
    }
}

// ------------------------------------------------------------------------------------------
// The transfer plan

/// Where each size sits in an end's regions: size `i` at `offs[i]` (page aligned, a page of
/// untouched gap after each so overruns show).
#[derive(Clone, Debug)]
pub struct Layout {
    pub sizes: Vec<usize>,
    pub offs: Vec<usize>,
    /// Length of the receive, Write-target, Read-source and Read-destination regions.
    pub total: usize,
}

impl Layout {
    pub fn new(sizes: &[usize]) -> Layout {
        let mut offs = Vec::new();
        let mut at = 0;
        for &n in sizes {
            offs.push(at);
            at += n.div_ceil(4096) * 4096 + 4096;
        }
        Layout {
            sizes: sizes.to_vec(),
            offs,
            total: at,
        }
    }

    /// The slot of size `i`.
    pub fn slot(&self, i: usize) -> Range<usize> {
        self.offs[i]..self.offs[i] + self.sizes[i]
    }

    /// What a destination region of this layout must hold when every slot `i` got
    /// `data[base + slot(i)]` and nothing else was touched.
    pub fn expected(&self, data: &[u8], base: usize) -> Vec<u8> {
        let mut v = vec![0u8; self.total];
        for i in 0..self.sizes.len() {
            let s = self.slot(i);
            v[s.clone()].copy_from_slice(&data[base + s.start..base + s.end]);
        }
        v
    }

    /// Total octets moved one way by one end's plan (Sends + Writes + Read Responses).
    pub fn octets_each_way(&self) -> usize {
        3 * self.sizes.iter().sum::<usize>()
    }
}

/// The bytes an end sends: Sends from `src[..total]`, Writes from `src[total..]`, and what its
/// peer Reads from `read_src`.
pub struct Sources {
    pub src: Vec<u8>,
    pub read_src: Vec<u8>,
}

impl Sources {
    pub fn new(layout: &Layout, seed: u64) -> Arc<Sources> {
        Arc::new(Sources {
            src: pattern(2 * layout.total, seed),
            read_src: pattern(layout.total, seed ^ 0xA5A5),
        })
    }
}

/// Private data carrying an end's Write-target and Read-source STags.
pub fn stags_private_data(write: u32, read: u32) -> Vec<u8> {
    let mut v = write.to_be_bytes().to_vec();
    v.extend_from_slice(&read.to_be_bytes());
    v
}

/// The (Write target, Read source) STags from a peer's private data.
pub fn parse_stags(pd: &[u8]) -> (u32, u32) {
    assert!(
        pd.len() >= 8,
        "private data too short for two STags: {pd:?}"
    );
    (
        u32::from_be_bytes(pd[0..4].try_into().unwrap()),
        u32::from_be_bytes(pd[4..8].try_into().unwrap()),
    )
}

/// Which half of the plan an end checks: the requests it initiated (Writes, Reads, Sends and the
/// Read data), and/or what its peer initiated (its receives and the peer's Write data).
#[derive(Clone, Copy, Debug)]
pub struct Part {
    pub ops: bool,
    pub received: bool,
}

/// Both ends initiate.
pub const BOTH: Part = Part {
    ops: true,
    received: true,
};
/// This end initiates, the peer only receives.
pub const OPS_ONLY: Part = Part {
    ops: true,
    received: false,
};
/// The peer initiates, this end only receives.
pub const RECEIVED_ONLY: Part = Part {
    ops: false,
    received: true,
};

impl Part {
    /// Completions this end gets for `n` sizes.
    pub fn completions(self, n: usize) -> usize {
        n * (3 * usize::from(self.ops) + usize::from(self.received))
    }
}

const OP_WRITE: u64 = 1;
const OP_READ: u64 = 2;
const OP_SEND: u64 = 3;
const OP_RECV: u64 = 4;

fn wr(op: u64, i: usize) -> u64 {
    op << 8 | i as u64
}

/// An end's five regions (engine handles or kernel memory regions).
pub struct Regions<R> {
    /// Sends from the first half, Writes from the second (2 x `Layout::total`).
    pub src: R,
    pub recv: R,
    pub write_target: R,
    pub read_src: R,
    pub read_dst: R,
}

impl<R> Regions<R> {
    /// Registers the five regions with `reg(len, access, initial contents)`.
    fn make(
        layout: &Layout,
        sources: &Sources,
        mut reg: impl FnMut(usize, Access, &[u8]) -> R,
    ) -> Self {
        let t = layout.total;
        Regions {
            src: reg(2 * t, Access::LOCAL_WRITE, &sources.src),
            recv: reg(t, Access::LOCAL_WRITE, &[]),
            write_target: reg(t, Access::LOCAL_WRITE | Access::REMOTE_WRITE, &[]),
            read_src: reg(t, Access::REMOTE_READ, &sources.read_src),
            read_dst: reg(t, Access::LOCAL_WRITE, &[]),
        }
    }
}

impl<R> Regions<R> {
    /// Checks the destinations of `part`; `view(region, f)` runs `f` over a region's bytes.
    fn check(
        &self,
        layout: &Layout,
        part: Part,
        peer: &Sources,
        who: &str,
        view: impl Fn(&R, &mut dyn FnMut(&[u8])),
    ) {
        let t = layout.total;
        let slots = |r: &R, data: &[u8], base: usize, what: &str| {
            view(r, &mut |got| {
                check_slots(layout, got, data, base, what, who)
            })
        };
        if part.received {
            slots(&self.recv, &peer.src, 0, "Send data received");
            slots(&self.write_target, &peer.src, t, "RDMA Write data");
        }
        if part.ops {
            slots(&self.read_dst, &peer.read_src, 0, "RDMA Read data");
        }
    }
}

/// One engine end of the plan.
pub struct EngineEnd {
    pub layout: Layout,
    pub r: Regions<RegionHandle>,
    /// (Write target, Read source) STags for the private data.
    pub stags: (u32, u32),
}

impl EngineEnd {
    /// Registers the regions on `h` and fills the sources.
    pub fn register(h: &mut EngineHost, layout: &Layout, sources: &Sources) -> EngineEnd {
        let mut stags = Vec::new();
        let r = Regions::make(layout, sources, |len, access, init| {
            let (r, stag) = h.region(len, access);
            h.e.endpoint_mut().region_mut(r).unwrap()[..init.len()].copy_from_slice(init);
            stags.push(stag.0);
            r
        });
        EngineEnd {
            layout: layout.clone(),
            r,
            stags: (stags[2], stags[3]),
        }
    }

    /// Zeroes the destinations for another run.
    pub fn reset(&self, h: &mut EngineHost) {
        for r in [self.r.recv, self.r.write_target, self.r.read_dst] {
            h.e.endpoint_mut().region_mut(r).unwrap().fill(0);
        }
    }

    pub fn private_data(&self) -> Vec<u8> {
        stags_private_data(self.stags.0, self.stags.1)
    }

    /// Posts one receive per size (before the peer can Send: at Accepted / Established).
    pub fn post_recvs(&self, h: &mut EngineHost, conn: ConnId) {
        for i in 0..self.layout.sizes.len() {
            let b = lbuf(self.r.recv, self.layout.slot(i));
            h.e.endpoint_mut()
                .post(conn, WorkRequest::recv(wr(OP_RECV, i), b))
                .expect("post_recv");
        }
    }

    /// Posts the Writes and Reads of every size, then the Sends.
    pub fn post_ops(&self, h: &mut EngineHost, conn: ConnId, peer: (u32, u32)) {
        let t = self.layout.total;
        for i in 0..self.layout.sizes.len() {
            let s = self.layout.slot(i);
            let remote = |stag: u32| RemoteBuf {
                stag: Stag(stag),
                to: s.start as u64,
            };
            h.e.endpoint_mut()
                .post(
                    conn,
                    WorkRequest::write(
                        wr(OP_WRITE, i),
                        lbuf(self.r.src, t + s.start..t + s.end),
                        remote(peer.0),
                    ),
                )
                .expect("post_write");
            h.e.endpoint_mut()
                .post(
                    conn,
                    WorkRequest::read(
                        wr(OP_READ, i),
                        lbuf(self.r.read_dst, s.clone()),
                        remote(peer.1),
                    ),
                )
                .expect("post_read");
        }
        for i in 0..self.layout.sizes.len() {
            h.e.endpoint_mut()
                .post(
                    conn,
                    WorkRequest::send(
                        wr(OP_SEND, i),
                        lbuf(self.r.src, self.layout.slot(i)),
                        Default::default(),
                    ),
                )
                .expect("post_send");
        }
    }

    /// True once every request of `conn` completed (any status).
    pub fn finished(&self, h: &EngineHost, conn: ConnId, part: Part) -> bool {
        h.completions_of(conn).len() >= part.completions(self.layout.sizes.len())
    }

    /// Checks the completions and destinations of `part` against the peer's sources.
    pub fn verify(&self, h: &EngineHost, conn: ConnId, part: Part, peer: &Sources, who: &str) {
        let wcs: Vec<Done> = h
            .completions_of(conn)
            .iter()
            .map(|w| Done {
                wr_id: w.wr_id,
                op: match w.opcode {
                    WcOpcode::Write => OP_WRITE,
                    WcOpcode::Read => OP_READ,
                    WcOpcode::Send => OP_SEND,
                    _ => OP_RECV,
                },
                ok: w.status == WcStatus::Success,
                byte_len: w.byte_len,
            })
            .collect();
        check_completions(&self.layout, &wcs, part, who);
        self.r.check(&self.layout, part, peer, who, |r, f| {
            f(h.e.endpoint().region(*r).unwrap())
        });
    }
}

/// A completion of either API, reduced to what the plan checks.
#[derive(Debug)]
struct Done {
    wr_id: u64,
    /// Which operation completed (`OP_*`).
    op: u64,
    ok: bool,
    byte_len: u32,
}

/// Every request of `part` completed once, successfully, as the operation it was posted as;
/// every receive got its size.
fn check_completions(layout: &Layout, wcs: &[Done], part: Part, who: &str) {
    for w in wcs {
        assert!(w.ok, "{who}: {w:?}");
        let (op, i) = (w.wr_id >> 8, (w.wr_id & 0xff) as usize);
        assert_eq!(w.op, op, "{who}: {w:?}");
        assert!(
            if op == OP_RECV {
                part.received
            } else {
                part.ops
            },
            "{who}: unexpected {w:?}"
        );
        if op == OP_RECV {
            assert_eq!(w.byte_len as usize, layout.sizes[i], "{who}: {w:?}");
        }
    }
    assert_eq!(
        wcs.len(),
        part.completions(layout.sizes.len()),
        "{who}: {wcs:?}"
    );
}

/// A destination region holds `data[base + slot]` in each slot and zeros elsewhere.
fn check_slots(layout: &Layout, got: &[u8], data: &[u8], base: usize, what: &str, who: &str) {
    let want = layout.expected(data, base);
    assert!(
        got == &want[..],
        "{who}: {what} differs at offset {:?}",
        first_difference(got, &want)
    );
}

fn lbuf(region: RegionHandle, r: Range<usize>) -> LocalBuf {
    LocalBuf {
        region,
        offset: r.start as u64,
        len: (r.end - r.start) as u32,
    }
}

/// The first offset where two buffers differ (for failure messages).
pub fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter().zip(b).position(|(x, y)| x != y)
}

// ------------------------------------------------------------------------------------------
// The kernel transport end

/// One kernel-transport end of the plan (runs on its own thread in the peer namespace).
pub struct KernelEnd {
    pub dev: Device,
    pub pd: ProtectionDomain,
    pub cq: CompletionQueue,
    pub layout: Layout,
    pub r: Regions<MemoryRegion>,
}

impl KernelEnd {
    pub fn new(dev: &Device, layout: &Layout, sources: &Sources) -> KernelEnd {
        let pd = dev.alloc_pd();
        let r = Regions::make(layout, sources, |len, access, init| {
            let mr = pd.register(len, access).unwrap();
            mr.write(0, init).unwrap();
            mr
        });
        KernelEnd {
            dev: dev.clone(),
            cq: dev.create_cq(),
            pd,
            layout: layout.clone(),
            r,
        }
    }

    pub fn init(&self) -> QpInit {
        QpInit {
            pd: self.pd.clone(),
            send_cq: self.cq.clone(),
            recv_cq: self.cq.clone(),
        }
    }

    pub fn private_data(&self) -> Vec<u8> {
        stags_private_data(self.r.write_target.stag(), self.r.read_src.stag())
    }

    pub fn post_recvs(&self, qp: &QueuePair) -> Result<(), dataplane::PostError> {
        for i in 0..self.layout.sizes.len() {
            qp.post_recv(wr(OP_RECV, i), &self.r.recv, self.layout.slot(i))?;
        }
        Ok(())
    }

    /// Connects to `addr` (the calling thread must be in the right namespace) with receives
    /// posted at once.
    pub fn connect(&self, addr: impl Into<SocketAddr>, cfg: &ConnectionConfig) -> QueuePair {
        let qp = self
            .dev
            .connect(addr.into(), self.init(), cfg, &self.private_data())
            .expect("kernel transport connects to the engine");
        self.post_recvs(&qp).unwrap();
        qp
    }

    /// Accepts one connection on `listener` with receives posted before the Reply.
    pub fn accept(&self, listener: &dataplane::Listener) -> (QueuePair, Vec<u8>) {
        let inc = listener
            .accept_timeout(Duration::from_secs(30))
            .expect("the engine connects");
        let pd = inc.private_data().to_vec();
        let qp = inc
            .accept_with(self.init(), &self.private_data(), |qp| self.post_recvs(qp))
            .expect("accept");
        (qp, pd)
    }

    pub fn post_ops(&self, qp: &QueuePair, peer: (u32, u32)) {
        let t = self.layout.total;
        for i in 0..self.layout.sizes.len() {
            let s = self.layout.slot(i);
            let at = |stag| RemoteAddr {
                stag,
                to: s.start as u64,
            };
            qp.post_write(
                wr(OP_WRITE, i),
                &self.r.src,
                t + s.start..t + s.end,
                at(peer.0),
            )
            .expect("kernel post_write");
            qp.post_read(wr(OP_READ, i), &self.r.read_dst, s.clone(), at(peer.1))
                .expect("kernel post_read");
        }
        for i in 0..self.layout.sizes.len() {
            qp.post_send(wr(OP_SEND, i), &self.r.src, self.layout.slot(i))
                .expect("kernel post_send");
        }
    }

    /// Waits for every completion of `part`; returns them (panics on timeout).
    pub fn wait_all(&self, part: Part, timeout: Duration) -> Vec<KCompletion> {
        let deadline = Instant::now() + timeout;
        let mut got = Vec::new();
        while got.len() < part.completions(self.layout.sizes.len()) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "kernel end: only {} completions after {timeout:?}: {got:?}",
                got.len()
            );
            if let Some(c) = self.cq.wait(left.min(Duration::from_millis(200))) {
                got.push(c);
            }
        }
        got
    }

    /// Checks the completions and destinations of `part` against the engine's sources.
    pub fn verify(&self, wcs: &[KCompletion], part: Part, peer: &Sources, who: &str) {
        let wcs: Vec<Done> = wcs
            .iter()
            .map(|w| Done {
                wr_id: w.wr_id,
                op: match w.opcode {
                    Opcode::Write => OP_WRITE,
                    Opcode::Read => OP_READ,
                    Opcode::Send => OP_SEND,
                    Opcode::Recv => OP_RECV,
                },
                ok: w.status == Status::Success,
                byte_len: w.byte_len,
            })
            .collect();
        check_completions(&self.layout, &wcs, part, who);
        self.r.check(&self.layout, part, peer, who, |r, f| {
            f(&r.read_vec(0, r.len()).unwrap())
        });
    }
}

/// The engine's address on `side` with `port`.
pub fn addr(tb: &VethTestbed, side: Side, port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(tb.ip(side), port)
}

/// `side`'s IPv4 address (or IPv6, `v6`) with `port`.
pub fn addr_of(tb: &VethTestbed, side: Side, port: u16, v6: bool) -> SocketAddr {
    if v6 {
        SocketAddr::new(tb.ip6(side).into(), port)
    } else {
        addr(tb, side, port).into()
    }
}

// ------------------------------------------------------------------------------------------
// One engine <-> kernel-transport connection running the plan

/// One connection between the engine (A) and a kernel-transport end (B).
pub struct KernelRun<'a> {
    pub tb: &'a VethTestbed,
    pub esrc: &'a Sources,
    pub ksrc: &'a Sources,
    /// What the engine asks for: (markers, CRC).
    pub engine: (bool, bool),
    /// The kernel end's settings (its MPA wishes included).
    pub kcfg: ConnectionConfig,
    pub port: u16,
    pub engine_connects: bool,
    /// The engine's half of the plan (the kernel end runs the other).
    pub part: Part,
}

impl KernelRun<'_> {
    /// Runs the plan, verified at both ends, then the kernel end closes (graceful: the engine
    /// sees the FIN and closes too).
    pub fn run(&self, h: &mut EngineHost, end: &EngineEnd) {
        let KernelRun {
            tb,
            esrc,
            ksrc,
            engine,
            port,
            engine_connects,
            part,
            ..
        } = *self;
        let kernel_wants = (self.kcfg.mpa.want_markers, self.kcfg.mpa.want_crc);
        let kpart = Part {
            ops: part.received,
            received: part.ops,
        };
        let who = format!(
            "engine (markers, crc) {engine:?}, kernel {kernel_wants:?}, engine connects: \
             {engine_connects}"
        );
        let layout = end.layout.clone();
        // The family of the address the engine serves.
        let v6 = h.e.endpoint().config().ip.is_ipv6();
        end.reset(h);
        // Kernel listening -> engine may connect; engine listening -> kernel may connect.
        let (k_ready_tx, k_ready_rx) = mpsc::channel::<()>();
        let (e_ready_tx, e_ready_rx) = mpsc::channel::<()>();
        let (verified_tx, verified_rx) = mpsc::channel::<()>();
        let (close_tx, close_rx) = mpsc::channel::<()>();
        let started = Instant::now();
        let mut engine_verified = false;
        thread::scope(|s| {
            let (layout, kwho, cfg) = (&layout, who.clone(), self.kcfg.clone());
            let kernel = s.spawn(move || {
                let _ns = tb.enter(Side::B).unwrap();
                let dev = Device::open(Transport::Kernel).unwrap();
                let kend = KernelEnd::new(&dev, layout, ksrc);
                let (qp, peer_pd) = if engine_connects {
                    let listener = dev
                        .listen(addr_of(tb, Side::B, port, v6), cfg)
                        .expect("kernel listen");
                    k_ready_tx.send(()).unwrap();
                    kend.accept(&listener)
                } else {
                    e_ready_rx.recv().unwrap();
                    let qp = kend.connect(addr_of(tb, Side::A, port, v6), &cfg);
                    let pd = qp.peer_private_data().to_vec();
                    (qp, pd)
                };
                if kpart.ops {
                    kend.post_ops(&qp, parse_stags(&peer_pd));
                }
                let wcs = kend.wait_all(kpart, Duration::from_secs(120));
                kend.verify(&wcs, kpart, esrc, &format!("kernel end ({kwho})"));
                verified_tx.send(()).unwrap();
                let _ = close_rx.recv_timeout(Duration::from_secs(120));
                qp.close();
            });
            let settings = engine_settings(engine.0, engine.1, end.private_data());
            let conn = if engine_connects {
                k_ready_rx.recv().unwrap();
                let conn =
                    h.e.endpoint_mut()
                        .connect(Instant::now(), addr_of(tb, Side::B, port, v6), settings)
                        .unwrap();
                h.run_until(Duration::from_secs(30), "MPA startup", |h| {
                    h.established(conn).is_some() || kernel.is_finished()
                });
                conn
            } else {
                let lid = h.listen(port, settings);
                e_ready_tx.send(()).unwrap();
                h.run_until(Duration::from_secs(30), "accept", |h| {
                    !h.accepted(lid).is_empty() || kernel.is_finished()
                });
                h.accepted(lid).first().copied().unwrap_or(ConnId(u64::MAX))
            };
            // Receives go up before the peer can Send: at Accepted (Responder) or at
            // Established (Initiator; the Responder sends nothing before our first FPDU, MPA-85).
            if part.received && h.e.endpoint().tcp(conn).is_some() {
                end.post_recvs(h, conn);
            }
            h.run_until(Duration::from_secs(30), "MPA startup", |h| {
                h.established(conn).is_some() || kernel.is_finished()
            });
            if let Some((neg, pd)) = h.established(conn) {
                expect_negotiated(&neg, engine, kernel_wants, &who);
                if part.ops {
                    end.post_ops(h, conn, parse_stags(&pd));
                }
                let mut verified = false;
                h.run_until(Duration::from_secs(120), "the plan", |h| {
                    verified |= verified_rx.try_recv().is_ok();
                    (verified && end.finished(h, conn, part)) || kernel.is_finished()
                });
                if end.finished(h, conn, part) {
                    end.verify(h, conn, part, ksrc, &format!("engine end ({who})"));
                    engine_verified = true;
                }
            }
            // The kernel end closes first; once its FIN is in, the engine's application closes
            // too (DDP-70), so both ends close gracefully. Without that close the kernel end
            // would wait out its close timeout (5 s) for our FIN and reset the connection.
            // The wait is for the FIN itself, not for the kernel end's thread: its close returns
            // at once and its connection's own thread sends the FIN later, so the thread may end
            // before the FIN is in. Closed then, the engine would close first (an active close)
            // and hold the connection in TIME-WAIT (60 s) after the kernel end's FIN.
            let _ = close_tx.send(());
            let gone = |h: &EngineHost| h.e.endpoint().tcp(conn).is_none();
            let failed = |h: &EngineHost| kernel.is_finished() && h.established(conn).is_none();
            h.run_until(Duration::from_secs(30), "the kernel end's FIN", |h| {
                h.peer_closed(conn) || gone(h) || failed(h)
            });
            if !gone(h) {
                let _ = h.e.endpoint_mut().close(Instant::now(), conn);
            }
            h.run_until(Duration::from_secs(30), "close", |h| gone(h) || failed(h));
            if let Err(p) = kernel.join() {
                std::panic::resume_unwind(p);
            }
        });
        assert!(engine_verified, "{who}: the engine end never finished");
        println!("{who}: done in {:?}", started.elapsed());
    }
}

// ------------------------------------------------------------------------------------------
// Wire oracle: Wireshark's iWARP dissectors on the engine's traffic

/// The wire-oracle test: an engine in A (over IPv6 when `v6`, serving 2001:db8::1) set up for
/// one FPDU per segment (MSS 1036 less 12 octets of timestamps: EMSS 1024, so full FPDUs keep
/// their phase to the markers), the kernel transport in B, the plan of 1 B, 4 KiB and 256 KiB
/// over each of `runs` ([`decode_runs`]). Skipped without root, tshark or dumpcap.
pub fn wireshark_decode_test(
    test: &str,
    tag: &str,
    v6: bool,
    runs: &[(bool, bool, bool)],
    first_port: u16,
) {
    let Some(tb) = testkit::or_skip(tag, testbed::for_test(tag)) else {
        return;
    };
    if !testkit::require_tool(test, "tshark") || !testkit::require_tool(test, "dumpcap") {
        return;
    }
    let _serial = serial();
    tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
    let layout = Layout::new(&[1, 4096, 256 << 10]);
    let esrc = Sources::new(&layout, 5);
    let ksrc = Sources::new(&layout, 6);
    let mut h = EngineHost::new(&tb, Side::A, |c| {
        c.tcp.mss = 1036;
        c.tcp.pack_records = false;
        if v6 {
            c.ip = tb.ip6(Side::A).into();
        }
    });
    let end = EngineEnd::register(&mut h, &layout, &esrc);
    decode_runs(test, &tb, &mut h, (&end, &esrc, &ksrc), runs, first_port);
}

/// Runs `(markers, crc, engine_connects)` connections from `first_port` on between the
/// engine `h` (set up for one FPDU per segment: EMSS 1024) and the kernel transport in B
/// (EMSS 1024, one FPDU per segment), each captured in B with dumpcap, and checks each capture:
/// every segment of the connection is of the engine's address family, TCP analysis finds no
/// lost segment, out-of-order or bad checksum, and Wireshark's iWARP dissectors decode it
/// cleanly (`check_decode`: MPA Request and Reply, one FPDU per segment, Good CRC32 on every
/// FPDU when CRC is on, markers when on). The connecting side Writes (0x00), Read Requests (0x01) and Sends
/// (0x03); the listening side answers with Read Responses (0x02) only.
pub fn decode_runs(
    test: &str,
    tb: &VethTestbed,
    h: &mut EngineHost,
    (end, esrc, ksrc): (&EngineEnd, &Sources, &Sources),
    runs: &[(bool, bool, bool)],
    first_port: u16,
) {
    use testkit::iwarp_oracle::{check_decode, iwarp_tshark, Expect};
    let family = if h.e.endpoint().config().ip.is_ipv6() {
        "ipv6"
    } else {
        "ip"
    };
    for (k, &(markers, crc, engine_connects)) in runs.iter().enumerate() {
        let port = first_port + k as u16;
        let file = testkit::unique_temp_path(&format!("afxdp-{port}.pcapng"));
        let cap = testkit::LiveCapture::start(
            tb.command(Side::B, "dumpcap"),
            tb.ifname(Side::B),
            port,
            file,
        );
        KernelRun {
            tb,
            esrc,
            ksrc,
            engine: (markers, crc),
            kcfg: kernel_config(markers, crc)
                .with_emss(Some(1024))
                .with_segment_per_fpdu(true),
            port,
            engine_connects,
            part: if engine_connects {
                OPS_ONLY
            } else {
                RECEIVED_ONLY
            },
        }
        .run(h, end);
        let path = cap.finish();
        let t = Instant::now();
        let shark = iwarp_tshark(&path);
        let ours = shark.count(&format!("{family} && tcp.port == {port}"));
        let all = shark.count(&format!("tcp.port == {port}"));
        assert!(
            ours > 100 && ours == all,
            "{test}: {ours} of {all} segments are {family} ({})",
            path.display()
        );
        // Retransmissions may happen on a loaded machine; errors may not.
        let bad = shark.count(&format!(
            "tcp.port == {port} && (tcp.checksum.status == 0 || tcp.analysis.lost_segment \
             || tcp.analysis.ack_lost_segment || tcp.analysis.out_of_order)"
        ));
        assert_eq!(bad, 0, "{test}: TCP errors in {}", path.display());
        let expect = Expect {
            markers,
            crc,
            min_fpdus: 500,
            connecting_ops: &["0x00", "0x01", "0x03"],
            listening_ops: &["0x02"],
        };
        let fpdus = check_decode(test, &path, port, &expect);
        println!(
            "{family}, markers {markers}, crc {crc}, engine connects {engine_connects}: {fpdus} \
             FPDUs \
             decoded cleanly in {:?}",
            t.elapsed()
        );
    }
}
