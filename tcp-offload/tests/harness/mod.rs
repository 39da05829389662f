//! A tiny two-party driver for this crate's own tests (the full seeded link lives in `sim`).
#![allow(dead_code)]

use std::collections::VecDeque;
use std::time::Duration;

use tcp_offload::Timestamp;

use tcp_offload::wire::{self, TcpSegment};
use tcp_offload::{
    Config, Connection, FourTuple, IsnGenerator, ListenerConfig, NoRecordSource, RecordSource,
    TcpListener,
};

pub fn tuple_a() -> FourTuple {
    FourTuple {
        local: "198.18.0.1:40000".parse().unwrap(),
        remote: "198.18.0.2:5000".parse().unwrap(),
    }
}
pub fn tuple_b() -> FourTuple {
    FourTuple {
        local: tuple_a().remote,
        remote: tuple_a().local,
    }
}

pub fn gen(t0: Timestamp) -> IsnGenerator {
    IsnGenerator::new(*b"xwarp-test-key!!", t0)
}

/// Decides per packet (direction, bytes) whether it is delivered.
pub type Filter = Box<dyn FnMut(u8, &[u8]) -> bool>;
/// Extra delay per packet (direction, bytes).
pub type Delay = Box<dyn FnMut(u8, &[u8]) -> Duration>;

/// Owned copy of a packet in flight.
#[derive(Clone, Debug)]
pub struct Pkt {
    pub at: Timestamp,
    pub bytes: Vec<u8>,
}

impl Pkt {
    pub fn seg(&self) -> TcpSegment<'_> {
        wire::parse(&self.bytes).expect("own packets parse")
    }
}

/// Two connections joined by a link with a fixed one-way delay; `filter` decides per packet
/// (direction 0 = a->b, 1 = b->a) whether it is delivered.
pub struct Pair {
    pub a: Connection,
    pub b: Connection,
    pub now: Timestamp,
    pub delay: Duration,
    pub ab: VecDeque<Pkt>,
    pub ba: VecDeque<Pkt>,
    pub log: Vec<(u8, Vec<u8>)>,
    pub filter: Filter,
    /// Extra random delay per packet, up to this (reorders packets).
    pub jitter: Duration,
    pub rng: rand_chacha::ChaCha8Rng,
    /// Link rate in bytes per second (serialization delay); `None` = infinite.
    pub rate: Option<u64>,
    /// Extra delay for one packet (direction, bytes), e.g. to reorder a chosen packet.
    pub extra_delay: Delay,
    link_free: [Timestamp; 2],
    /// Writes a's external records.
    pub src_a: Box<dyn RecordSource>,
}

impl Pair {
    /// A opens actively to B, which listens (single-connection passive open).
    pub fn new(cfg_a: Config, cfg_b: Config) -> Pair {
        let t0 = Timestamp::ZERO;
        let g = gen(t0);
        let a = Connection::connect(cfg_a, tuple_a(), &g, t0).expect("valid TCP settings");
        let b = Connection::listen(cfg_b, tuple_b().local, &g, t0).expect("valid TCP settings");
        Pair {
            a,
            b,
            now: t0,
            delay: Duration::from_millis(5),
            ab: VecDeque::new(),
            ba: VecDeque::new(),
            log: Vec::new(),
            filter: Box::new(|_, _| true),
            jitter: Duration::ZERO,
            rng: rand::SeedableRng::seed_from_u64(1),
            rate: None,
            extra_delay: Box::new(|_, _| Duration::ZERO),
            link_free: [t0, t0],
            src_a: Box::new(NoRecordSource),
        }
    }

    /// Moves every packet either side wants to send onto the link.
    pub fn flush(&mut self) {
        let mut buf = vec![0u8; 70_000];
        loop {
            let mut any = false;
            for dir in 0..2u8 {
                loop {
                    let out = if dir == 0 {
                        self.a
                            .poll_transmit_with(self.now, &mut buf, &mut *self.src_a)
                    } else {
                        self.b.poll_transmit(self.now, &mut buf)
                    };
                    let Some(n) = out else { break };
                    any = true;
                    let bytes = buf[..n].to_vec();
                    if (self.filter)(dir, &bytes) {
                        let at =
                            self.arrival(usize::from(dir), n) + (self.extra_delay)(dir, &bytes);
                        let q = if dir == 0 { &mut self.ab } else { &mut self.ba };
                        insert_sorted(
                            q,
                            Pkt {
                                at,
                                bytes: bytes.clone(),
                            },
                        );
                    }
                    self.log.push((dir, bytes));
                }
            }
            if !any {
                break;
            }
        }
    }

    fn arrival(&mut self, dir: usize, len: usize) -> Timestamp {
        use rand::Rng;
        let j = if self.jitter.is_zero() {
            Duration::ZERO
        } else {
            self.jitter.mul_f64(self.rng.gen::<f64>())
        };
        let mut start = self.now;
        if let Some(rate) = self.rate {
            start = start.max(self.link_free[dir])
                + Duration::from_nanos(len as u64 * 1_000_000_000 / rate);
            self.link_free[dir] = start;
        }
        start + self.delay + j
    }

    fn next_event(&self) -> Option<Timestamp> {
        [
            self.ab.front().map(|p| p.at),
            self.ba.front().map(|p| p.at),
            self.a.poll_timeout(),
            self.b.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// One step: advance to the next event and process it. False when nothing is left to do.
    pub fn step(&mut self) -> bool {
        self.flush();
        let Some(t) = self.next_event() else {
            return false;
        };
        self.now = self.now.max(t);
        while self.ab.front().is_some_and(|p| p.at <= self.now) {
            let p = self.ab.pop_front().unwrap();
            let _ = self.b.handle_packet(self.now, &p.bytes);
        }
        while self.ba.front().is_some_and(|p| p.at <= self.now) {
            let p = self.ba.pop_front().unwrap();
            let _ = self.a.handle_packet(self.now, &p.bytes);
        }
        if self.a.poll_timeout().is_some_and(|d| d <= self.now) {
            self.a.handle_timeout(self.now);
        }
        if self.b.poll_timeout().is_some_and(|d| d <= self.now) {
            self.b.handle_timeout(self.now);
        }
        self.flush();
        true
    }

    /// Runs until `done` or `limit` of virtual time passes.
    pub fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Pair) -> bool) -> bool {
        let end = self.now + limit;
        loop {
            if done(self) {
                return true;
            }
            if self.now > end || !self.step() {
                return done(self);
            }
        }
    }
}

/// A listener-side harness: drives many packets into a listener.
pub fn listener(t0: Timestamp, lcfg: ListenerConfig) -> TcpListener {
    TcpListener::new(Config::default(), lcfg, tuple_b().local, gen(t0)).expect("valid TCP settings")
}

/// Runs `client`'s three-way handshake through `l`, every packet at `t0`.
pub fn handshake_via(l: &mut TcpListener, client: &mut Connection, t0: Timestamp) {
    let mut buf = vec![0u8; 2000];
    for _ in 0..4 {
        while let Some(n) = client.poll_transmit(t0, &mut buf) {
            l.handle_packet(t0, &buf[..n]).unwrap();
        }
        while let Some(n) = l.poll_transmit(t0, &mut buf) {
            client.handle_packet(t0, &buf[..n]).unwrap();
        }
    }
}

/// Builds a raw packet from `tuple` (local = source).
pub fn raw(repr: wire::SegmentRepr, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; repr.buffer_len(payload.len())];
    let n = repr
        .emit(&mut buf, payload.len(), |p| p.copy_from_slice(payload))
        .unwrap();
    buf.truncate(n);
    buf
}

pub mod script;

fn insert_sorted(q: &mut VecDeque<Pkt>, p: Pkt) {
    let i = q.partition_point(|x| x.at <= p.at);
    q.insert(i, p);
}

/// A seeded drop filter: drops each packet with probability `p` (data and ACKs alike).
pub fn lossy(seed: u64, p: f64) -> Filter {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    Box::new(move |_, _| rng.gen::<f64>() >= p)
}

/// Transfers `data` from a to b in byte-stream mode; returns what b read.
pub fn transfer(p: &mut Pair, data: &[u8], limit: Duration) -> Vec<u8> {
    let mut sent = 0;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    p.run_until(limit, |p| {
        if sent < data.len() {
            sent += p.a.send(&data[sent..]).unwrap_or(0);
        }
        loop {
            let n = p.b.recv(&mut buf);
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        got.len() >= data.len()
    });
    got
}

/// `n` octets of the shared test pattern of `seed` (`testkit::pattern`).
pub fn payload(n: usize, seed: u64) -> Vec<u8> {
    testkit::pattern(n, seed)
}
