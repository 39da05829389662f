//! The pair harness: endpoints joined by the seeded link simulator, driven in virtual time (no
//! sockets, no threads). A round of an endpoint is what the AF_XDP engine does per poll: a
//! receive batch, the timers, the transmits; each step of a [`Pair`] runs both and jumps to the
//! earliest timer or frame arrival. The simulator is named only here.
#![allow(dead_code)]

use ddp::WorkRequest;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use ddp::{Access, LocalBuf, RegionHandle, RemoteBuf, Stag, WcOpcode, WcStatus, WorkCompletion};
use endpoint::{
    ConnId, Endpoint, EndpointConfig, EndpointEvent, FrameSink, QpSettings, Secrets, TxOutcome,
};
pub use netsim::LinkConfig;
use netsim::{Link, LinkStats, SimTime};

pub const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
pub const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];
pub const IP_A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
pub const IP_B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
pub const IP6_A: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
pub const IP6_B: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

/// Transmit buffer of an endpoint (a 2048-octet UMEM frame).
pub const FRAME_LEN: usize = 2048;
/// Frames an endpoint handles per round (as the AF_XDP engine).
pub const RX_BATCH: usize = 64;

/// Looks at (and may rewrite) each frame put on a wire; false drops it.
pub type Tap = Box<dyn FnMut(&mut Vec<u8>) -> bool>;

/// One direction of the wire: a seeded simulated link, its time counted from `base`, with an
/// optional tap (a hostile middle: drops or rewrites frames before the link).
pub struct Wire {
    link: Link,
    base: Instant,
    pub tap: Option<Tap>,
    /// When set, every frame put on the wire (after the tap) with its time.
    pub log: Option<Vec<(Instant, Vec<u8>)>>,
}

/// Two directions, `a_to_b` seeded with `seed` and `b_to_a` with a seed derived from it.
pub fn wires(base: Instant, a_to_b: LinkConfig, b_to_a: LinkConfig, seed: u64) -> (Wire, Wire) {
    let wire = |cfg, seed| Wire {
        link: Link::new(cfg, seed).expect("link config"),
        base,
        tap: None,
        log: None,
    };
    (wire(a_to_b, seed), wire(b_to_a, seed ^ 0x5bd1_e995))
}

impl Wire {
    /// Puts `frame` on the wire at `now` (crafted or garbage frames too).
    pub fn send(&mut self, now: Instant, mut frame: Vec<u8>) {
        if let Some(tap) = self.tap.as_mut() {
            if !tap(&mut frame) {
                return;
            }
        }
        if let Some(log) = self.log.as_mut() {
            log.push((now, frame.clone()));
        }
        self.link.send(SimTime::from_instant(self.base, now), frame);
    }

    /// Hands each frame arrived by `now` (at most `max`) to `f`; returns how many.
    pub fn recv_batch(&mut self, now: Instant, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        let t = SimTime::from_instant(self.base, now);
        let mut n = 0;
        while n < max {
            let Some(frame) = self.link.pop_arrived(t) else {
                break;
            };
            f(&frame);
            // The link's copy is the wire's memory, not the receiver's.
            allocation_counter::opt_out(|| drop(frame));
            n += 1;
        }
        n
    }

    /// When the next frame arrives.
    pub fn next_arrival(&self) -> Option<Instant> {
        self.link.next_arrival().map(|t| t.to_instant(self.base))
    }

    /// What the link did.
    pub fn stats(&self) -> LinkStats {
        *self.link.stats()
    }
}

/// An endpoint's transmit buffer over a wire: each frame written goes on the wire.
struct WireSink<'a> {
    wire: &'a mut Wire,
    buf: &'a mut [u8],
}

impl FrameSink for WireSink<'_> {
    fn tx_frame(
        &mut self,
        now: Instant,
        fill: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> TxOutcome {
        match fill(self.buf) {
            Some(n) => {
                // The link's copy is the wire's memory, not the sender's.
                allocation_counter::opt_out(|| {
                    let frame = self.buf[..n.min(self.buf.len())].to_vec();
                    self.wire.send(now, frame);
                });
                TxOutcome::Queued
            }
            None => TxOutcome::Empty,
        }
    }
}

/// A transmit ring with room for every frame: each written into a buffer of its own, kept.
#[derive(Default)]
pub struct Keep(pub Vec<Vec<u8>>);

impl FrameSink for Keep {
    fn tx_frame(
        &mut self,
        _: Instant,
        fill: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> TxOutcome {
        let mut buf = vec![0u8; FRAME_LEN];
        match fill(&mut buf) {
            Some(n) => {
                buf.truncate(n);
                self.0.push(buf);
                TxOutcome::Queued
            }
            None => TxOutcome::Empty,
        }
    }
}

/// Transmit frames kept for the peer, for the no-I/O cost harnesses (`benches/ping_pong.rs`,
/// `examples/message_cost.rs`): buffers and their lengths are reused between rounds, so the
/// harness itself allocates and clears nothing per frame. The peer takes `bufs[..used]`.
#[derive(Default)]
pub struct Frames {
    pub bufs: Vec<(Vec<u8>, usize)>,
    pub used: usize,
}

impl FrameSink for Frames {
    fn tx_frame(
        &mut self,
        _now: Instant,
        fill: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> TxOutcome {
        if self.used == self.bufs.len() {
            self.bufs.push((vec![0; FRAME_LEN], 0));
        }
        let (b, len) = &mut self.bufs[self.used];
        match fill(b) {
            Some(n) if n > 0 && n <= b.len() => {
                *len = n;
                self.used += 1;
                TxOutcome::Queued
            }
            _ => TxOutcome::Empty,
        }
    }
}

impl Frames {
    /// `ep` handles every kept frame, in order, as from a wire; none are kept after.
    pub fn deliver(&mut self, ep: &mut Endpoint, now: Instant) {
        for (f, len) in &self.bufs[..self.used] {
            ep.handle_frame(now, &f[..*len]);
        }
        self.used = 0;
    }
}

/// One round of `ep` at `now`: a receive batch from `rx`, the timers, the transmits onto `tx`.
/// Returns the frames received.
pub fn drive(ep: &mut Endpoint, rx: &mut Wire, tx: &mut Wire, now: Instant) -> usize {
    drive_with(ep, rx, tx, now, |_| {})
}

/// [`drive`] with `between` called on `ep` after the receive batch, before the timers and the
/// transmits (an application call landing between what a batch did and the round after it).
pub fn drive_with(
    ep: &mut Endpoint,
    rx: &mut Wire,
    tx: &mut Wire,
    now: Instant,
    between: impl FnOnce(&mut Endpoint),
) -> usize {
    let n = rx.recv_batch(now, RX_BATCH, |f| ep.handle_frame(now, f));
    between(ep);
    ep.handle_timeout(now);
    let mut buf = [0u8; FRAME_LEN];
    ep.poll_transmit(
        now,
        &mut WireSink {
            wire: tx,
            buf: &mut buf,
        },
    );
    n
}

/// When to drive `ep` next at the latest: its own timeout or the next arrival on `rx`.
pub fn next_wake(ep: &Endpoint, rx: &Wire) -> Option<Instant> {
    [ep.poll_timeout(), rx.next_arrival()]
        .into_iter()
        .flatten()
        .min()
}

/// A link with an MTU fitting 1500-octet IP packets plus Ethernet.
pub fn link() -> LinkConfig {
    LinkConfig::default()
        .with_delay(Duration::from_micros(50))
        .with_mtu(1514)
}

/// The configuration of a test endpoint: fixed secrets (from its address), `peer_mac` as its
/// default next hop.
pub fn endpoint_cfg(mac: [u8; 6], ip: impl Into<IpAddr>, peer_mac: [u8; 6]) -> EndpointConfig {
    let ip = ip.into();
    let seed = match ip {
        IpAddr::V4(v4) => u64::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6) as u64 ^ 0x6666,
    };
    let secrets = Secrets::fixed_for_tests(seed);
    let mut c = EndpointConfig::new(mac, ip, secrets);
    c.default_next_hop = Some(peer_mac);
    c
}

/// Endpoints A and B over `ab` (A to B) and `ba`.
pub struct Pair {
    pub a: Endpoint,
    pub b: Endpoint,
    pub ab: Wire,
    pub ba: Wire,
    pub now: Instant,
    pub base: Instant,
    pub events_a: Vec<EndpointEvent>,
    pub events_b: Vec<EndpointEvent>,
    pub wc_a: Vec<(ConnId, WorkCompletion)>,
    pub wc_b: Vec<(ConnId, WorkCompletion)>,
    pub steps: u64,
    /// A's net heap octets allocated inside its rounds (`poll_a`), and the most at any time.
    pub heap_a: i64,
    pub heap_a_peak: i64,
    /// B's net heap octets allocated inside its rounds (`poll_b`).
    pub heap_b: i64,
}

impl Pair {
    pub fn new(ab: LinkConfig, ba: LinkConfig, seed: u64) -> Pair {
        Pair::with_configs(
            endpoint_cfg(MAC_A, IP_A, MAC_B),
            endpoint_cfg(MAC_B, IP_B, MAC_A),
            ab,
            ba,
            seed,
        )
    }

    /// Endpoints with the given configurations (A's address is `IP_A`, B's `IP_B`).
    pub fn with_configs(
        cfg_a: EndpointConfig,
        cfg_b: EndpointConfig,
        ab: LinkConfig,
        ba: LinkConfig,
        seed: u64,
    ) -> Pair {
        let base = Instant::now();
        let (ab, ba) = wires(base, ab, ba, seed);
        Pair {
            a: Endpoint::new(cfg_a, base).expect("valid configuration"),
            b: Endpoint::new(cfg_b, base).expect("valid configuration"),
            ab,
            ba,
            now: base,
            base,
            events_a: Vec::new(),
            events_b: Vec::new(),
            wc_a: Vec::new(),
            wc_b: Vec::new(),
            steps: 0,
            heap_a: 0,
            heap_a_peak: 0,
            heap_b: 0,
        }
    }

    pub fn clean() -> Pair {
        Pair::new(link(), link(), 1)
    }

    /// `t` as a bare TCP connection beside the pair counts time (from `base`).
    #[allow(dead_code)]
    pub fn ts(&self, t: Instant) -> tcp_offload::Timestamp {
        tcp_offload::Timestamp::since(self.base, t)
    }

    /// A clean pair over IPv6: A is `IP6_A`, B `IP6_B`.
    pub fn clean_v6() -> Pair {
        Pair::with_configs(
            endpoint_cfg(MAC_A, IP6_A, MAC_B),
            endpoint_cfg(MAC_B, IP6_B, MAC_A),
            link(),
            link(),
            1,
        )
    }

    /// One round of A at the current time (its heap use measured).
    pub fn poll_a(&mut self) -> usize {
        let mut n = 0;
        let (a, ba, ab, now) = (&mut self.a, &mut self.ba, &mut self.ab, self.now);
        let info = allocation_counter::measure(|| n = drive(a, ba, ab, now));
        self.heap_a += info.bytes_current;
        self.heap_a_peak = self.heap_a_peak.max(self.heap_a);
        n
    }

    /// One round of B at the current time (its heap use measured).
    pub fn poll_b(&mut self) -> usize {
        self.poll_b_with(|_| {})
    }

    /// [`Pair::poll_b`] with `between` called on B after its receive batch (see
    /// [`drive_with`]).
    pub fn poll_b_with(&mut self, between: impl FnOnce(&mut Endpoint)) -> usize {
        let mut n = 0;
        let (b, ab, ba, now) = (&mut self.b, &mut self.ab, &mut self.ba, self.now);
        let info = allocation_counter::measure(|| n = drive_with(b, ab, ba, now, between));
        self.heap_b += info.bytes_current;
        n
    }

    /// When A must run next.
    pub fn wake_a(&self) -> Option<Instant> {
        next_wake(&self.a, &self.ba)
    }

    /// When B must run next.
    pub fn wake_b(&self) -> Option<Instant> {
        next_wake(&self.b, &self.ab)
    }

    /// One step: poll both, collect events and completions, advance virtual time.
    pub fn step(&mut self) {
        self.step_with(|_| {})
    }

    /// [`Pair::step`] with `between` called on B after its receive batch (see [`drive_with`]).
    pub fn step_with(&mut self, between: impl FnOnce(&mut Endpoint)) {
        self.poll_a();
        self.poll_b_with(between);
        while let Some(e) = self.a.poll_event() {
            self.events_a.push(e);
        }
        while let Some(e) = self.b.poll_event() {
            self.events_b.push(e);
        }
        while let Some(c) = self.a.poll_completion() {
            self.wc_a.push(c);
        }
        while let Some(c) = self.b.poll_completion() {
            self.wc_b.push(c);
        }
        let next = [self.wake_a(), self.wake_b()].into_iter().flatten().min();
        self.steps += 1;
        match next {
            Some(t) if t > self.now => self.now = t,
            Some(_) => {}
            None => self.now += Duration::from_millis(1),
        }
    }

    /// Steps until `done` holds; panics after `max_steps`.
    pub fn run_until(&mut self, max_steps: u64, mut done: impl FnMut(&mut Pair) -> bool) {
        for _ in 0..max_steps {
            if done(self) {
                return;
            }
            self.step();
        }
        panic!(
            "not done after {max_steps} steps (virtual {:?}); a={:?} b={:?}",
            self.now - self.base,
            self.a.counters(),
            self.b.counters()
        );
    }

    /// Listener on B, connect from A (to B's address), run MPA startup; returns (conn at A,
    /// conn at B).
    pub fn establish(&mut self, port: u16, sa: QpSettings, sb: QpSettings) -> (ConnId, ConnId) {
        self.b.listen(port, sb).expect("listen");
        let ca = self
            .a
            .connect(self.now, SocketAddr::new(self.b.config().ip, port), sa)
            .expect("connect");
        self.run_until(100_000, |p| {
            established(&p.events_a, ca)
                && p.events_b
                    .iter()
                    .any(|e| matches!(e, EndpointEvent::Established { .. }))
        });
        (ca, established_conns(&self.events_b)[0])
    }

    pub fn wait_wc(&mut self, on_a: bool, wr_id: u64) -> WorkCompletion {
        self.run_until(50_000_000, |p| {
            let v = if on_a { &p.wc_a } else { &p.wc_b };
            v.iter().any(|(_, c)| c.wr_id == wr_id)
        });
        let v = if on_a { &self.wc_a } else { &self.wc_b };
        v.iter().find(|(_, c)| c.wr_id == wr_id).unwrap().1
    }
}

/// The connections `ev` reports established, in order.
pub fn established_conns(ev: &[EndpointEvent]) -> Vec<ConnId> {
    ev.iter()
        .filter_map(|e| match e {
            EndpointEvent::Established { conn, .. } => Some(*conn),
            _ => None,
        })
        .collect()
}

/// Why connection `c` closed, once `ev` reports it.
pub fn closed(ev: &[EndpointEvent], c: ConnId) -> Option<tcp_offload::CloseReason> {
    ev.iter().find_map(|e| match e {
        EndpointEvent::Closed { conn, reason } if *conn == c => Some(*reason),
        _ => None,
    })
}

pub fn established(ev: &[EndpointEvent], c: ConnId) -> bool {
    ev.iter()
        .any(|e| matches!(e, EndpointEvent::Established { conn, .. } if *conn == c))
}

pub fn settings(markers: bool, crc: bool) -> QpSettings {
    let mut s = QpSettings::default();
    s.startup.want_markers = markers;
    s.startup.want_crc = crc;
    s
}

#[allow(unused_imports)] // each test binary uses its own part of this module
pub use testkit::pattern;

pub fn filled(e: &mut Endpoint, data: &[u8], access: Access) -> (RegionHandle, Stag) {
    let (h, s) = e.register(data.len().max(1), access);
    e.region_mut(h).unwrap()[..data.len()].copy_from_slice(data);
    (h, s)
}

pub fn buf(region: RegionHandle, len: usize) -> LocalBuf {
    LocalBuf {
        region,
        offset: 0,
        len: len as u32,
    }
}

/// Send, RDMA Write and RDMA Read of `len` octets from A to B (Read: A reads B), verified.
/// Returns the regions written into: the Send's and the Write's on B, the Read's on A.
pub fn transfer_all(
    p: &mut Pair,
    ca: ConnId,
    cb: ConnId,
    len: usize,
    seed: u64,
) -> [RegionHandle; 3] {
    // Send.
    let data = pattern(len, seed);
    let (src, _) = filled(&mut p.a, &data, Access::LOCAL_WRITE);
    let (send_dst, _) = p.b.register(len.max(1), Access::LOCAL_WRITE);
    let dst = send_dst;
    p.b.post(cb, WorkRequest::recv(seed * 10 + 1, buf(dst, len)))
        .unwrap();
    p.a.post(
        ca,
        WorkRequest::send(seed * 10 + 2, buf(src, len), Default::default()),
    )
    .unwrap();
    let r = p.wait_wc(false, seed * 10 + 1);
    assert_eq!(
        (r.opcode, r.status, r.byte_len as usize),
        (WcOpcode::Recv, WcStatus::Success, len)
    );
    let s = p.wait_wc(true, seed * 10 + 2);
    assert_eq!((s.opcode, s.status), (WcOpcode::Send, WcStatus::Success));
    assert!(
        p.b.region(dst).unwrap()[..len] == data[..],
        "Send data differs ({len} B)"
    );

    // RDMA Write.
    let data = pattern(len, seed + 1);
    let (src, _) = filled(&mut p.a, &data, Access::LOCAL_WRITE);
    let (write_dst, stag) =
        p.b.register(len.max(1), Access::REMOTE_WRITE | Access::LOCAL_WRITE);
    let dst = write_dst;
    p.a.post(
        ca,
        WorkRequest::write(seed * 10 + 3, buf(src, len), RemoteBuf { stag, to: 0 }),
    )
    .unwrap();
    let w = p.wait_wc(true, seed * 10 + 3);
    assert_eq!((w.opcode, w.status), (WcOpcode::Write, WcStatus::Success));
    assert!(
        p.b.region(dst).unwrap()[..len] == data[..],
        "Write data differs ({len} B)"
    );

    // RDMA Read.
    let data = pattern(len, seed + 2);
    let (_src, stag) = filled(&mut p.b, &data, Access::REMOTE_READ);
    let (dst, _) = p.a.register(len.max(1), Access::LOCAL_WRITE);
    p.a.post(
        ca,
        WorkRequest::read(seed * 10 + 4, buf(dst, len), RemoteBuf { stag, to: 0 }),
    )
    .unwrap();
    let rd = p.wait_wc(true, seed * 10 + 4);
    assert_eq!((rd.opcode, rd.status), (WcOpcode::Read, WcStatus::Success));
    assert!(
        p.a.region(dst).unwrap()[..len] == data[..],
        "Read data differs ({len} B)"
    );
    [send_dst, write_dst, dst]
}
