//! The endpoint's own software cost per message (issue 11 item 3, the latency path): a
//! ping-pong of 64 B Sends between two endpoints joined by nothing but vectors of frames (no
//! link, no I/O, no clock reads): A posts a Send and runs a transmit round, B runs a round
//! (the frame handled, its receive completed), reposts the receive and answers with a Send
//! (carrying the ACK), A runs a round and takes the answer. One iteration is a round trip: two one-way messages through both ends' post,
//! transmit, receive, placement and completion paths. Markers off and on; CRC on.
//! Run: `cargo bench -p endpoint --bench ping_pong`.

#[path = "../tests/pair/mod.rs"]
mod pair;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use ddp::{Access, WcOpcode, WorkRequest};
use endpoint::{ConnId, Endpoint, FrameSink, TxOutcome};
use pair::{buf, filled, settings, Pair, FRAME_LEN};

/// Transmit frames, kept for the peer (buffers and their lengths reused between rounds: the
/// harness itself allocates and clears nothing per frame).
#[derive(Default)]
struct Frames {
    bufs: Vec<(Vec<u8>, usize)>,
    used: usize,
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

/// The transmit half of an engine round of `ep`: timers, then every connection with work
/// (completions, segments) into `out`, appended to what the peer has not received yet.
fn transmit(ep: &mut Endpoint, out: &mut Frames, now: Instant) {
    ep.handle_timeout(now);
    ep.poll_transmit(now, out);
}

/// The receive half: `ep` handles every frame of `inbox`, in order, as from a wire.
fn receive(ep: &mut Endpoint, inbox: &mut Frames, now: Instant) {
    for (f, len) in &inbox.bufs[..inbox.used] {
        ep.handle_frame(now, &f[..*len]);
    }
    inbox.used = 0;
}

/// Takes completions of `ep` until one of `opcode` arrives.
fn take(ep: &mut Endpoint, opcode: WcOpcode) -> bool {
    let mut found = false;
    while let Some((_, wc)) = ep.poll_completion() {
        found |= wc.opcode == opcode;
    }
    found
}

fn bench(c: &mut Criterion) {
    for markers in [false, true] {
        let mut p = Pair::clean();
        let s = settings(markers, true);
        let (ca, cb): (ConnId, ConnId) = p.establish(4791, s.clone(), s);
        let msg = vec![0x5au8; 64];
        let (src_a, _) = filled(&mut p.a, &msg, Access::LOCAL_WRITE);
        let (src_b, _) = filled(&mut p.b, &msg, Access::LOCAL_WRITE);
        let (dst_a, _) = p.a.register(64, Access::LOCAL_WRITE);
        let (dst_b, _) = p.b.register(64, Access::LOCAL_WRITE);
        let (mut a, mut b) = (p.a, p.b);
        let mut now = p.now;
        let (mut ab, mut ba) = (Frames::default(), Frames::default());
        a.post(ca, WorkRequest::recv(0, buf(dst_a, 64))).unwrap();
        b.post(cb, WorkRequest::recv(0, buf(dst_b, 64))).unwrap();
        let mut round = |a: &mut Endpoint, b: &mut Endpoint, now: Instant| {
            a.post(ca, WorkRequest::send(1, buf(src_a, 64), Default::default()))
                .unwrap();
            transmit(a, &mut ab, now);
            // B's round: the ping arrives, its receive completes.
            receive(b, &mut ab, now);
            transmit(b, &mut ba, now);
            assert!(take(b, WcOpcode::Recv), "B received the ping");
            b.post(cb, WorkRequest::recv(0, buf(dst_b, 64))).unwrap();
            b.post(cb, WorkRequest::send(1, buf(src_b, 64), Default::default()))
                .unwrap();
            transmit(b, &mut ba, now);
            // A's round: the pong (with B's ACK) arrives.
            receive(a, &mut ba, now);
            transmit(a, &mut ab, now);
            assert!(take(a, WcOpcode::Recv), "A received the pong");
            a.post(ca, WorkRequest::recv(0, buf(dst_a, 64))).unwrap();
            // B's Send completes on A's ACK, which the next ping carries.
            take(b, WcOpcode::Send);
        };
        // Warm up, and check the loop holds together.
        for _ in 0..100 {
            now += Duration::from_micros(10);
            round(&mut a, &mut b, now);
        }
        let name = format!("endpoint/ping_pong_64B/markers={markers}");
        c.bench_function(&name, |bn| {
            bn.iter(|| {
                now += Duration::from_micros(10);
                round(&mut a, &mut b, black_box(now));
            })
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
