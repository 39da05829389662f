//! Nanoseconds per segment: in-order data receive with ACK generation, transmit of records, and
//! the sender's side of SACK loss recovery.
//!
//! Run: `cargo bench -p tcp-offload --bench segment`

mod support;

use std::time::{Duration, Instant};

use tcp_offload::Timestamp;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use support::{pair, Arena, Pattern, BATCH, SEG};
use tcp_offload::{wire, Connection, RxRef};

/// `iters` times: a pair, `BATCH` records from a to b; the time b spends in `receive` for each
/// packet plus its ACK generation (a's side untimed).
fn rx_batches(
    iters: u64,
    b_records: bool,
    mut receive: impl FnMut(&mut Connection, Timestamp, &[u8]),
) -> Duration {
    let mut total = Duration::ZERO;
    let mut pkts = Arena::with_capacity();
    let mut acks = Arena::with_capacity();
    let mut buf = vec![0u8; 2048];
    for _ in 0..iters {
        let t0 = Timestamp::ZERO;
        let (mut a, mut b) = pair(t0, b_records);
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
            // b receives, hands the data up and acknowledges (timed).
            let start = Instant::now();
            for p in pkts.iter() {
                receive(&mut b, t0, p);
                while let Some(n) = b.poll_transmit(t0, &mut buf) {
                    acks.push(&buf[..n]);
                }
            }
            total += start.elapsed();
        }
        assert_eq!(b.rcv_nxt_offset(), (BATCH * SEG) as u64);
    }
    total
}

/// `iters` times: a pair, `BATCH` records from a to b; the time a spends handling b's ACKs and
/// emitting the segments they allow (b's side untimed). With `holes`, b loses the first
/// transmission of one record in `SACK_HOLE_EVERY` after the first flight, and the run lasts
/// until a has nothing left to send.
fn tx_batches(iters: u64, holes: bool) -> Duration {
    let mut total = Duration::ZERO;
    let mut pkts = Arena::with_capacity();
    let mut acks = Arena::with_capacity();
    let mut buf = vec![0u8; 2048];
    let mut rbuf = vec![0u8; 1 << 16];
    for _ in 0..iters {
        let t0 = Timestamp::ZERO;
        let (mut a, mut b) = pair(t0, false);
        let first_seq = a.send_seq_of_offset(0).0;
        let mut lost = vec![false; BATCH];
        let (mut sent, mut first_flight) = (0, true);
        loop {
            // a: handle the ACKs and emit the segments they allow (timed).
            let start = Instant::now();
            for ack in acks.iter() {
                a.handle_packet(t0, ack).unwrap();
            }
            while let Some(n) = a.poll_transmit_with(t0, &mut buf, &mut Pattern) {
                pkts.push(&buf[..n]);
            }
            total += start.elapsed();
            if pkts.len() == 0 {
                break;
            }
            sent += pkts.len();
            // b (not timed).
            acks.clear();
            for p in pkts.iter() {
                if holes && !first_flight {
                    let seq = wire::parse(p).unwrap().seq.0;
                    let record = seq.wrapping_sub(first_seq) as usize / SEG;
                    if record % SACK_HOLE_EVERY == SACK_HOLE_EVERY / 2 && !lost[record] {
                        lost[record] = true;
                        continue;
                    }
                }
                b.handle_packet(t0, p).unwrap();
                while let Some(n) = b.poll_transmit(t0, &mut buf) {
                    acks.push(&buf[..n]);
                }
                while b.recv(&mut rbuf) > 0 {}
            }
            pkts.clear();
            first_flight = false;
            if !holes && sent >= BATCH {
                break;
            }
        }
        assert_eq!(b.rcv_nxt_offset(), (BATCH * SEG) as u64);
        if holes {
            let retransmits = BATCH / SACK_HOLE_EVERY - 1;
            assert_eq!(a.counters().retransmits, retransmits as u64);
        }
    }
    total
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("tcp_segment");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.measurement_time(Duration::from_secs(5));

    // b in byte mode: `handle_packet`, ACKs, `recv` into a buffer.
    g.bench_function("rx_in_order_with_ack", |bch| {
        let mut rbuf = vec![0u8; 1 << 16];
        bch.iter_custom(|iters| {
            rx_batches(iters, false, |b, t0, p| {
                b.handle_packet(t0, p).unwrap();
                while b.recv(&mut rbuf) > 0 {}
            })
        })
    });

    // b in record mode: `handle_packet_with`, the sink copies each chunk into a region at its
    // stream offset (the engine's one copy), ACKs.
    g.bench_function("rx_in_order_sink", |bch| {
        let mut region = vec![0u8; BATCH * SEG];
        bch.iter_custom(|iters| {
            rx_batches(iters, true, |b, t0, p| {
                let mut place = |c: RxRef<'_>| {
                    let at = c.offset as usize;
                    region[at..at + c.data.len()].copy_from_slice(c.data);
                };
                b.handle_packet_with(t0, p, &mut place).unwrap();
            })
        })
    });

    g.bench_function("tx_records", |bch| {
        bch.iter_custom(|iters| tx_batches(iters, false))
    });

    // a's side of SACK loss recovery: after the first flight (as far as the SYN-ACK's window
    // allows) b loses the first transmission of one record in `SACK_HOLE_EVERY` and acknowledges
    // every segment after a hole at once with SACK blocks (RFC 2018), so a handles ~BATCH
    // SACK-bearing ACKs over a scoreboard of ~BATCH segments, marks the holes lost (RFC 6675)
    // and retransmits them (timed: a's ACK handling and transmissions).
    g.bench_function("tx_sack_recovery", |bch| {
        bch.iter_custom(|iters| tx_batches(iters, true))
    });
    g.finish();
}

/// One segment in this many of the first flight is lost in `tx_sack_recovery`.
const SACK_HOLE_EVERY: usize = 64;

criterion_group!(benches, bench);
criterion_main!(benches);
