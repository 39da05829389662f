//! The per-segment work of `benches/segment.rs`, once, with the timed parts in named functions
//! so that callgrind counts their instructions exactly (machine load does not change the count):
//!
//! ```text
//! cargo build --release -p tcp-offload --example segment_profile
//! valgrind --tool=callgrind --toggle-collect='*timed*' target/release/examples/segment_profile rx
//! ```
//!
//! Modes: `rx` (in-order receive in byte mode, ACK generation, `recv`), `sink` (the same in record
//! mode through `handle_packet_with`, each chunk copied into a region), `tx` (ACK handling and
//! record transmission).

#[path = "../benches/support/mod.rs"]
mod support;

use tcp_offload::Timestamp;

use support::{pair, Arena, Pattern, BATCH, SEG};
use tcp_offload::{Connection, RxRef};

/// b receives, acknowledges and reads (byte mode) or places into `region` (record mode).
fn rx(b: &mut Connection, t0: Timestamp, pkts: &Arena, acks: &mut Arena, region: &mut [u8]) {
    let mut buf = [0u8; 2048];
    let mut rbuf = [0u8; 4096];
    for p in pkts.iter() {
        if b.record_mode() {
            let mut place = |c: RxRef<'_>| {
                let at = c.offset as usize;
                region[at..at + c.data.len()].copy_from_slice(c.data);
            };
            b.handle_packet_with(t0, p, &mut place).unwrap();
        } else {
            b.handle_packet(t0, p).unwrap();
        }
        while let Some(n) = b.poll_transmit(t0, &mut buf) {
            acks.push(&buf[..n]);
        }
        while b.recv(&mut rbuf) > 0 {}
    }
}

/// a handles the ACKs and sends what they allow.
fn tx(a: &mut Connection, t0: Timestamp, acks: &Arena, pkts: &mut Arena) {
    let mut buf = [0u8; 2048];
    for ack in acks.iter() {
        a.handle_packet(t0, ack).unwrap();
    }
    while let Some(n) = a.poll_transmit_with(t0, &mut buf, &mut Pattern) {
        pkts.push(&buf[..n]);
    }
}

#[inline(never)]
fn timed_rx(b: &mut Connection, t0: Timestamp, pkts: &Arena, acks: &mut Arena, region: &mut [u8]) {
    rx(b, t0, pkts, acks, region)
}

#[inline(never)]
fn timed_tx(a: &mut Connection, t0: Timestamp, acks: &Arena, pkts: &mut Arena) {
    tx(a, t0, acks, pkts)
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "rx".into());
    let t0 = Timestamp::ZERO;
    let (mut a, mut b) = pair(t0, mode == "sink");
    let mut region = vec![0u8; BATCH * SEG];
    let (mut pkts, mut acks) = (Arena::with_capacity(), Arena::with_capacity());
    let (mut done, mut rounds) = (0, 0);
    while done < BATCH {
        pkts.clear();
        if mode == "tx" {
            timed_tx(&mut a, t0, &acks, &mut pkts);
        } else {
            tx(&mut a, t0, &acks, &mut pkts);
        }
        acks.clear();
        done += pkts.len();
        if mode == "tx" {
            rx(&mut b, t0, &pkts, &mut acks, &mut region);
        } else {
            timed_rx(&mut b, t0, &pkts, &mut acks, &mut region);
        }
        rounds += 1;
    }
    assert_eq!(b.rcv_nxt_offset(), (BATCH * SEG) as u64);
    println!("{mode}: {BATCH} segments in {rounds} rounds");
}
