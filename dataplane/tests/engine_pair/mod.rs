//! Two engines over the in-memory link ([`mem_link`]), driven in virtual time (each step jumps
//! to the earliest timer or frame arrival): for tests of the engine's own I/O layer. Tests of
//! the endpoint itself use the endpoint crate's pair harness.
#![allow(dead_code)]

mod mem_link;

use ddp::WorkRequest;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use dataplane::engine::{Engine, FaultConfig};
use ddp::{Access, LocalBuf, RemoteBuf, WcOpcode, WcStatus, WorkCompletion};
use endpoint::{ConnId, EndpointConfig, EndpointEvent, QpSettings, Secrets};
pub use mem_link::{mem_link, MemPort};
use netsim::LinkConfig;
use testkit::pattern;

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];
const IP_A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

/// A link with an MTU fitting 1500-octet IP packets plus Ethernet.
pub fn link() -> LinkConfig {
    LinkConfig::default()
        .with_delay(Duration::from_micros(50))
        .with_mtu(1514)
}

/// Engines A and B, each with its own fault injector.
pub struct Pair {
    pub a: Engine<MemPort>,
    pub b: Engine<MemPort>,
    pub now: Instant,
    wc_a: Vec<(ConnId, WorkCompletion)>,
    wc_b: Vec<(ConnId, WorkCompletion)>,
    established_b: Option<ConnId>,
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
        let cfg = |mac, ip: Ipv4Addr, peer_mac| {
            let secrets = Secrets::fixed_for_tests(u64::from(u32::from(ip)));
            let mut c = EndpointConfig::new(mac, ip, secrets);
            c.default_next_hop = Some(peer_mac);
            c
        };
        Pair {
            a: Engine::with_faults(cfg(MAC_A, IP_A, MAC_B), pa, fa, base)
                .expect("valid configuration"),
            b: Engine::with_faults(cfg(MAC_B, IP_B, MAC_A), pb, fb, base)
                .expect("valid configuration"),
            now: base,
            wc_a: Vec::new(),
            wc_b: Vec::new(),
            established_b: None,
        }
    }

    /// One step: poll both, collect completions, advance virtual time. Returns A's events.
    pub fn step(&mut self) -> Vec<EndpointEvent> {
        self.a.poll(self.now);
        self.b.poll(self.now);
        let events_a = std::iter::from_fn(|| self.a.endpoint_mut().poll_event()).collect();
        while let Some(e) = self.b.endpoint_mut().poll_event() {
            if let EndpointEvent::Established { conn, .. } = e {
                self.established_b = Some(conn);
            }
        }
        self.wc_a.extend(std::iter::from_fn(|| {
            self.a.endpoint_mut().poll_completion()
        }));
        self.wc_b.extend(std::iter::from_fn(|| {
            self.b.endpoint_mut().poll_completion()
        }));
        let next = [self.a.poll_timeout(), self.b.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        match next {
            Some(t) if t > self.now => self.now = t,
            Some(_) => {}
            None => self.now += Duration::from_millis(1),
        }
        events_a
    }

    /// Listener on B, connect from A, run MPA startup; returns (conn at A, conn at B).
    pub fn establish(&mut self, port: u16, sa: QpSettings, sb: QpSettings) -> (ConnId, ConnId) {
        self.b.endpoint_mut().listen(port, sb).expect("listen");
        let ca = self
            .a
            .endpoint_mut()
            .connect(self.now, SocketAddrV4::new(IP_B, port), sa)
            .expect("connect");
        let mut up_a = false;
        for _ in 0..100_000 {
            if let (true, Some(cb)) = (up_a, self.established_b) {
                return (ca, cb);
            }
            up_a |= self
                .step()
                .iter()
                .any(|e| matches!(e, EndpointEvent::Established { conn, .. } if *conn == ca));
        }
        panic!("MPA startup did not complete");
    }

    fn wait_wc(&mut self, on_a: bool, wr_id: u64) -> WorkCompletion {
        for _ in 0..50_000_000 {
            let v = if on_a { &self.wc_a } else { &self.wc_b };
            if let Some((_, c)) = v.iter().find(|(_, c)| c.wr_id == wr_id) {
                return *c;
            }
            self.step();
        }
        panic!("work request {wr_id} did not complete");
    }
}

/// A region of `e`'s own memory holding `data`.
pub fn filled(e: &mut Engine<MemPort>, data: &[u8], access: Access) -> (LocalBuf, ddp::Stag) {
    let (region, stag) = e.endpoint_mut().register(data.len().max(1), access);
    e.endpoint_mut().region_mut(region).unwrap()[..data.len()].copy_from_slice(data);
    let buf = LocalBuf {
        region,
        offset: 0,
        len: data.len() as u32,
    };
    (buf, stag)
}

/// Send, RDMA Write and RDMA Read of `len` octets from A to B (Read: A reads B), verified.
pub fn transfer_all(p: &mut Pair, ca: ConnId, cb: ConnId, len: usize, seed: u64) {
    let zeros = vec![0u8; len];
    let ops = [WcOpcode::Send, WcOpcode::Write, WcOpcode::Read];
    for (i, op) in ops.into_iter().enumerate() {
        let data = pattern(len, seed + i as u64);
        let wr = seed * 10 + 2 + i as u64;
        let (on_a, dst) = match op {
            WcOpcode::Send => {
                let (dst, _) = filled(&mut p.b, &zeros, Access::LOCAL_WRITE);
                let (src, _) = filled(&mut p.a, &data, Access::LOCAL_WRITE);
                p.b.endpoint_mut()
                    .post(cb, WorkRequest::recv(wr + 100, dst))
                    .unwrap();
                let ep = p.a.endpoint_mut();
                ep.post(ca, WorkRequest::send(wr, src, Default::default()))
                    .unwrap();
                let r = p.wait_wc(false, wr + 100);
                assert_eq!(
                    (r.opcode, r.status, r.byte_len as usize),
                    (WcOpcode::Recv, WcStatus::Success, len)
                );
                (false, dst)
            }
            WcOpcode::Write => {
                let access = Access::REMOTE_WRITE | Access::LOCAL_WRITE;
                let (dst, stag) = filled(&mut p.b, &zeros, access);
                let (src, _) = filled(&mut p.a, &data, Access::LOCAL_WRITE);
                let remote = RemoteBuf { stag, to: 0 };
                p.a.endpoint_mut()
                    .post(ca, WorkRequest::write(wr, src, remote))
                    .unwrap();
                (false, dst)
            }
            _ => {
                let (_, stag) = filled(&mut p.b, &data, Access::REMOTE_READ);
                let (dst, _) = filled(&mut p.a, &zeros, Access::LOCAL_WRITE);
                let remote = RemoteBuf { stag, to: 0 };
                p.a.endpoint_mut()
                    .post(ca, WorkRequest::read(wr, dst, remote))
                    .unwrap();
                (true, dst)
            }
        };
        let wc = p.wait_wc(true, wr);
        assert_eq!((wc.opcode, wc.status), (op, WcStatus::Success));
        let host = if on_a { &p.a } else { &p.b };
        let got = &host.endpoint().region(dst.region).unwrap()[..len];
        assert!(got == &data[..], "{op:?} data differs ({len} B)");
    }
}
