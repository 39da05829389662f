//! Nanoseconds per segment: in-order data receive with ACK generation, and transmit of records.
//!
//! Run: `cargo bench -p tcp-offload --bench segment`

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tcp_offload::{Config, Connection, FourTuple, IsnGenerator, RecordId, RecordSource, State};

const BATCH: usize = 2048;
const SEG: usize = 1448;

struct Pattern;
impl RecordSource for Pattern {
    fn write_record(&mut self, id: RecordId, offset: u32, dst: &mut [u8]) {
        dst.fill((id as u32 ^ offset) as u8);
    }
}

fn cfg() -> Config {
    Config {
        recv_buffer: 64 << 20,
        send_buffer: 64 << 20,
        window_scale: Some(10),
        initial_window: 100_000,
        ..Config::default()
    }
}

/// An established pair (a active, b passive), all handshake packets exchanged.
fn pair(t0: Instant) -> (Connection, Connection) {
    let g = IsnGenerator::new([3; 16], t0);
    let ta = FourTuple {
        local: "198.18.0.1:40000".parse().unwrap(),
        remote: "198.18.0.2:5000".parse().unwrap(),
    };
    let mut a = Connection::connect(cfg(), ta, &g, t0);
    let mut b = Connection::listen(cfg(), ta.remote, &g, t0);
    tcp_offload::exchange(&mut a, &mut b, t0, 4);
    assert_eq!(
        (a.state(), b.state()),
        (State::Established, State::Established)
    );
    a.enter_record_mode();
    (a, b)
}

/// Packets back to back in one reusable buffer (no allocation per packet in the timed loops).
#[derive(Default)]
struct Arena {
    data: Vec<u8>,
    ends: Vec<usize>,
}

impl Arena {
    fn push(&mut self, p: &[u8]) {
        self.data.extend_from_slice(p);
        self.ends.push(self.data.len());
    }
    fn clear(&mut self) {
        self.data.clear();
        self.ends.clear();
    }
    fn len(&self) -> usize {
        self.ends.len()
    }
    fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter().copied())
            .map(|(a, b)| &self.data[a..b])
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("tcp_segment");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.measurement_time(Duration::from_secs(5));

    g.bench_function("rx_in_order_with_ack", |bch| {
        bch.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut pkts = Arena::default();
            let mut acks = Arena::default();
            let mut buf = vec![0u8; 2048];
            let mut rbuf = vec![0u8; 1 << 16];
            for _ in 0..iters {
                let t0 = Instant::now();
                let (mut a, mut b) = pair(t0);
                for id in 0..BATCH {
                    a.send_record(SEG as u32, id as u64).unwrap();
                }
                let mut done = 0;
                while done < BATCH {
                    // a's next flight (not timed), as far as b's window allows.
                    for ack in acks.iter() {
                        a.handle_packet(t0, ack).unwrap();
                    }
                    acks.clear();
                    pkts.clear();
                    while let Some(n) = a.poll_transmit_with(t0, &mut buf, &mut Pattern) {
                        pkts.push(&buf[..n]);
                    }
                    done += pkts.len();
                    // b receives, acknowledges and hands the data up (timed).
                    let start = Instant::now();
                    for p in pkts.iter() {
                        b.handle_packet(t0, p).unwrap();
                        while let Some(n) = b.poll_transmit(t0, &mut buf) {
                            acks.push(&buf[..n]);
                        }
                        while b.recv(&mut rbuf) > 0 {}
                    }
                    total += start.elapsed();
                }
                assert_eq!(b.rcv_nxt_offset(), (BATCH * SEG) as u64);
            }
            total
        })
    });

    g.bench_function("tx_records", |bch| {
        bch.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut pkts = Arena::default();
            let mut acks = Arena::default();
            let mut buf = vec![0u8; 2048];
            let mut rbuf = vec![0u8; 1 << 16];
            for _ in 0..iters {
                let t0 = Instant::now();
                let (mut a, mut b) = pair(t0);
                for id in 0..BATCH {
                    a.send_record(SEG as u32, id as u64).unwrap();
                }
                let mut sent = 0;
                while sent < BATCH {
                    // a: handle the ACKs and emit the segments they allow (timed).
                    let start = Instant::now();
                    for ack in acks.iter() {
                        a.handle_packet(t0, ack).unwrap();
                    }
                    while let Some(n) = a.poll_transmit_with(t0, &mut buf, &mut Pattern) {
                        pkts.push(&buf[..n]);
                    }
                    total += start.elapsed();
                    sent += pkts.len();
                    // b (not timed).
                    acks.clear();
                    for p in pkts.iter() {
                        b.handle_packet(t0, p).unwrap();
                        while let Some(n) = b.poll_transmit(t0, &mut buf) {
                            acks.push(&buf[..n]);
                        }
                        while b.recv(&mut rbuf) > 0 {}
                    }
                    pkts.clear();
                }
            }
            total
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
