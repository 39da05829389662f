//! Shared harness of the engine tests: two engines over the in-memory link, driven in virtual
//! time (each step jumps to the earliest timer or frame arrival).
#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use dataplane::engine::{mem_link, Engine, FaultConfig, FaultCounters, MemPort, PdHandle};
use ddp::{Access, Completion, LocalBuf, RegionHandle, RemoteBuf, Stag, WcOpcode, WcStatus};
use endpoint::{ConnId, Endpoint, EndpointConfig, EndpointEvent, QpSettings};
use tcp_offload::sim::LinkConfig;

pub const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
pub const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];
pub const IP_A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
pub const IP_B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

/// An engine with the endpoint's calls at hand.
pub struct Host(pub Engine<MemPort>);

impl std::ops::Deref for Host {
    type Target = Endpoint<PdHandle>;
    fn deref(&self) -> &Endpoint<PdHandle> {
        self.0.endpoint()
    }
}

impl std::ops::DerefMut for Host {
    fn deref_mut(&mut self) -> &mut Endpoint<PdHandle> {
        self.0.endpoint_mut()
    }
}

impl Host {
    pub fn poll(&mut self, now: Instant) -> usize {
        self.0.poll(now)
    }
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.0.poll_timeout()
    }
    pub fn io_mut(&mut self) -> &mut MemPort {
        self.0.io_mut()
    }
    pub fn fault_counters(&self) -> FaultCounters {
        self.0.fault_counters()
    }
}

pub struct Pair {
    pub a: Host,
    pub b: Host,
    pub now: Instant,
    pub base: Instant,
    pub events_a: Vec<EndpointEvent>,
    pub events_b: Vec<EndpointEvent>,
    pub wc_a: Vec<(ConnId, Completion)>,
    pub wc_b: Vec<(ConnId, Completion)>,
    pub steps: u64,
}

/// A link with an MTU fitting 1500-octet IP packets plus Ethernet.
pub fn link() -> LinkConfig {
    LinkConfig::default()
        .with_delay(Duration::from_micros(50))
        .with_mtu(1514)
}

pub fn engine_cfg(mac: [u8; 6], ip: Ipv4Addr, peer_mac: [u8; 6]) -> EndpointConfig {
    let mut c = EndpointConfig::new(mac, ip);
    c.default_next_hop = Some(peer_mac);
    c
}

impl Pair {
    pub fn new(
        ab: LinkConfig,
        ba: LinkConfig,
        seed: u64,
        fa: FaultConfig,
        fb: FaultConfig,
    ) -> Pair {
        let base = Instant::now();
        let (pa, pb) = mem_link(base, ab, ba, seed).expect("link config");
        let a = Host(Engine::with_faults(
            engine_cfg(MAC_A, IP_A, MAC_B),
            pa,
            fa,
            base,
        ));
        let b = Host(Engine::with_faults(
            engine_cfg(MAC_B, IP_B, MAC_A),
            pb,
            fb,
            base,
        ));
        Pair {
            a,
            b,
            now: base,
            base,
            events_a: Vec::new(),
            events_b: Vec::new(),
            wc_a: Vec::new(),
            wc_b: Vec::new(),
            steps: 0,
        }
    }

    pub fn clean() -> Pair {
        Pair::new(
            link(),
            link(),
            1,
            FaultConfig::default(),
            FaultConfig::default(),
        )
    }

    /// One step: poll both, collect events and completions, advance virtual time.
    pub fn step(&mut self) {
        self.a.poll(self.now);
        self.b.poll(self.now);
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
        let next = [self.a.poll_timeout(), self.b.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
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

    /// Listener on B, connect from A, run MPA startup; returns (conn at A, conn at B).
    pub fn establish(&mut self, port: u16, sa: QpSettings, sb: QpSettings) -> (ConnId, ConnId) {
        self.b.listen(port, sb).expect("listen");
        let ca = self
            .a
            .connect(self.now, SocketAddrV4::new(IP_B, port), sa)
            .expect("connect");
        self.run_until(100_000, |p| {
            established(&p.events_a, ca)
                && p.events_b
                    .iter()
                    .any(|e| matches!(e, EndpointEvent::Established { .. }))
        });
        let cb = self
            .events_b
            .iter()
            .find_map(|e| match e {
                EndpointEvent::Established { conn, .. } => Some(*conn),
                _ => None,
            })
            .unwrap();
        (ca, cb)
    }

    pub fn wait_wc(&mut self, on_a: bool, wr_id: u64) -> Completion {
        self.run_until(50_000_000, |p| {
            let v = if on_a { &p.wc_a } else { &p.wc_b };
            v.iter().any(|(_, c)| c.wr_id == wr_id)
        });
        let v = if on_a { &self.wc_a } else { &self.wc_b };
        v.iter().find(|(_, c)| c.wr_id == wr_id).unwrap().1
    }
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

pub fn filled(e: &mut Host, data: &[u8], access: Access) -> (RegionHandle, Stag) {
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
pub fn transfer_all(p: &mut Pair, ca: ConnId, cb: ConnId, len: usize, seed: u64) {
    // Send.
    let data = pattern(len, seed);
    let (src, _) = filled(&mut p.a, &data, Access::LOCAL_WRITE);
    let (dst, _) = p.b.register(len.max(1), Access::LOCAL_WRITE);
    p.b.post_recv(cb, seed * 10 + 1, buf(dst, len)).unwrap();
    p.a.post_send(
        cb_on_a(ca),
        seed * 10 + 2,
        buf(src, len),
        Default::default(),
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
    let (dst, stag) =
        p.b.register(len.max(1), Access::REMOTE_WRITE | Access::LOCAL_WRITE);
    p.a.post_write(ca, seed * 10 + 3, buf(src, len), RemoteBuf { stag, to: 0 })
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
    p.a.post_read(ca, seed * 10 + 4, buf(dst, len), RemoteBuf { stag, to: 0 })
        .unwrap();
    let rd = p.wait_wc(true, seed * 10 + 4);
    assert_eq!((rd.opcode, rd.status), (WcOpcode::Read, WcStatus::Success));
    assert!(
        p.a.region(dst).unwrap()[..len] == data[..],
        "Read data differs ({len} B)"
    );
}

fn cb_on_a(ca: ConnId) -> ConnId {
    ca
}
