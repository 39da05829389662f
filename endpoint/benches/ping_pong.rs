//! The endpoint's own software cost per message (the latency path): a
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

use criterion::{criterion_group, Criterion};
use ddp::{Access, RegionHandle, WcOpcode, WorkRequest};
use endpoint::{ConnId, Endpoint};
use pair::{buf, filled, settings, Frames, Pair};

/// The transmit half of an engine round of `ep`: timers, then every connection with work
/// (completions, segments) into `out`, appended to what the peer has not received yet.
fn transmit(ep: &mut Endpoint, out: &mut Frames, now: Instant) {
    ep.handle_timeout(now);
    ep.poll_transmit(now, out);
}

/// Takes completions of `ep` until one of `opcode` arrives.
fn take(ep: &mut Endpoint, opcode: WcOpcode) -> bool {
    let mut found = false;
    while let Some((_, wc)) = ep.poll_completion() {
        found |= wc.opcode == opcode;
    }
    found
}

/// Two established endpoints with a 64 B Send each way posted, and the loop's buffers.
struct PingPong {
    a: Endpoint,
    b: Endpoint,
    ca: ConnId,
    cb: ConnId,
    src_a: RegionHandle,
    src_b: RegionHandle,
    dst_a: RegionHandle,
    dst_b: RegionHandle,
    now: Instant,
    ab: Frames,
    ba: Frames,
}

impl PingPong {
    fn new(markers: bool) -> Self {
        let mut p = Pair::clean();
        let s = settings(markers, true);
        let (ca, cb): (ConnId, ConnId) = p.establish(4791, s.clone(), s);
        let msg = vec![0x5au8; 64];
        let (src_a, _) = filled(&mut p.a, &msg, Access::LOCAL_WRITE);
        let (src_b, _) = filled(&mut p.b, &msg, Access::LOCAL_WRITE);
        let (dst_a, _) = p.a.register(64, Access::LOCAL_WRITE);
        let (dst_b, _) = p.b.register(64, Access::LOCAL_WRITE);
        let (mut a, mut b) = (p.a, p.b);
        a.post(ca, WorkRequest::recv(0, buf(dst_a, 64))).unwrap();
        b.post(cb, WorkRequest::recv(0, buf(dst_b, 64))).unwrap();
        let mut pp = PingPong {
            a,
            b,
            ca,
            cb,
            src_a,
            src_b,
            dst_a,
            dst_b,
            now: p.now,
            ab: Frames::default(),
            ba: Frames::default(),
        };
        // Warm up, and check the loop holds together.
        for _ in 0..100 {
            pp.round();
        }
        pp
    }

    /// One round trip, 10 us of simulated time after the last.
    fn round(&mut self) {
        self.now += Duration::from_micros(10);
        let now = black_box(self.now);
        let (a, b) = (&mut self.a, &mut self.b);
        let (ca, cb) = (self.ca, self.cb);
        a.post(
            ca,
            WorkRequest::send(1, buf(self.src_a, 64), Default::default()),
        )
        .unwrap();
        transmit(a, &mut self.ab, now);
        // B's round: the ping arrives, its receive completes.
        self.ab.deliver(b, now);
        transmit(b, &mut self.ba, now);
        assert!(take(b, WcOpcode::Recv), "B received the ping");
        b.post(cb, WorkRequest::recv(0, buf(self.dst_b, 64)))
            .unwrap();
        b.post(
            cb,
            WorkRequest::send(1, buf(self.src_b, 64), Default::default()),
        )
        .unwrap();
        transmit(b, &mut self.ba, now);
        // A's round: the pong (with B's ACK) arrives.
        self.ba.deliver(a, now);
        transmit(a, &mut self.ab, now);
        assert!(take(a, WcOpcode::Recv), "A received the pong");
        a.post(ca, WorkRequest::recv(0, buf(self.dst_a, 64)))
            .unwrap();
        // B's Send completes on A's ACK, which the next ping carries.
        take(b, WcOpcode::Send);
    }
}

fn bench(c: &mut Criterion) {
    for markers in [false, true] {
        let mut pp = PingPong::new(markers);
        let name = format!("endpoint/ping_pong_64B/markers={markers}");
        c.bench_function(&name, |bn| bn.iter(|| pp.round()));
    }
}

criterion_group!(benches, bench);

/// With `PING_PONG_ROUNDS=N` set, runs N round trips (markers off, on with
/// `PING_PONG_MARKERS=1`) and nothing else: a fixed amount of work for an instruction count
/// (`valgrind --tool=callgrind`), which this shared host's timings are too noisy to replace.
/// Otherwise criterion as usual.
fn main() {
    if let Some(n) = std::env::var("PING_PONG_ROUNDS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        let markers = std::env::var("PING_PONG_MARKERS").is_ok_and(|v| v == "1");
        let mut pp = PingPong::new(markers);
        for _ in 0..n {
            pp.round();
        }
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
