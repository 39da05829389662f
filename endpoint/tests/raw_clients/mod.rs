//! Raw TCP clients (our TCP without MPA) from addresses of their own, through their own wires
//! to a [`Pair`]'s B: idle connections that complete TCP and never send an MPA Request, or
//! send what a test crafts.
#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use crate::pair::{drive, link, wires, Pair, Wire, IP_B, MAC_B};
use tcp_offload::{Config, Connection, FourTuple, IsnGenerator, State, Timestamp};

/// The clients' first address.
pub const IP_C: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 3);
/// The MAC the clients' frames come from (whatever their address).
pub const MAC_C: [u8; 6] = [2, 0, 0, 0, 0, 3];

/// Client connections, each from its own port (20000 + its index).
pub struct RawClients {
    pub conns: Vec<Connection>,
    to_b: Wire,
    from_b: Wire,
    out: Vec<u8>,
    gen: IsnGenerator,
    /// RSTs B sent to any of them.
    pub resets: usize,
}

impl RawClients {
    /// `n` clients from [`IP_C`] to `port` on B, opened at `p.now`.
    pub fn open(p: &Pair, n: u16, port: u16) -> RawClients {
        let (to_b, from_b) = wires(p.base, link(), link(), 77);
        let mut r = RawClients {
            conns: Vec::new(),
            to_b,
            from_b,
            out: vec![0; 2048],
            gen: IsnGenerator::new([3; 16], Timestamp::ZERO),
            resets: 0,
        };
        for _ in 0..n {
            r.add(p, IP_C, port);
        }
        r
    }

    /// One more client, from `ip`, to `port` on B, opened at `p.now`; its index.
    pub fn add(&mut self, p: &Pair, ip: Ipv4Addr, port: u16) -> usize {
        let i = self.conns.len();
        let tuple = FourTuple {
            local: SocketAddr::V4(SocketAddrV4::new(ip, 20000 + i as u16)),
            remote: SocketAddr::V4(SocketAddrV4::new(IP_B, port)),
        };
        let c = Connection::connect(Config::default(), tuple, &self.gen, p.ts(p.now))
            .expect("valid TCP settings");
        self.conns.push(c);
        i
    }

    /// One round: the clients transmit, B runs, the clients receive; time moves by `dt`.
    /// Returns the net heap octets B's rounds allocated (the clients' and the wires' memory
    /// is not counted).
    pub fn step(&mut self, p: &mut Pair, dt: Duration) -> i64 {
        let now = p.now;
        for c in &mut self.conns {
            while let Some(n) = c.poll_transmit(p.ts(now), &mut self.out) {
                let f = [&MAC_B[..], &MAC_C[..], &[8, 0], &self.out[..n]].concat();
                self.to_b.send(now, f);
            }
        }
        p.now += dt;
        let (now, ts) = (p.now, p.ts(p.now));
        let (b, to_b, from_b) = (&mut p.b, &mut self.to_b, &mut self.from_b);
        let heap =
            allocation_counter::measure(|| while drive(b, to_b, from_b, now) > 0 {}).bytes_current;
        let (conns, resets) = (&mut self.conns, &mut self.resets);
        self.from_b.recv_batch(now, usize::MAX, |f: &[u8]| {
            let seg = tcp_offload::wire::parse(&f[14..]).expect("B sends TCP");
            *resets += usize::from(seg.flags.rst);
            let i = usize::from(seg.tuple.local.port() - 20000);
            let _ = conns[i].handle_packet(ts, &f[14..]);
        });
        for c in &mut self.conns {
            if c.poll_timeout().is_some_and(|t| t <= ts) {
                c.handle_timeout(ts);
            }
        }
        heap + allocation_counter::measure(|| {
            while let Some(e) = p.b.poll_event() {
                allocation_counter::opt_out(|| p.events_b.push(e));
            }
        })
        .bytes_current
    }

    /// Clients whose connection is established.
    pub fn established(&self) -> usize {
        self.conns
            .iter()
            .filter(|c| c.state() == State::Established)
            .count()
    }
}
