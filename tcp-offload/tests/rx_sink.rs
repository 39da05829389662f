//! The borrowed-slice receive hook (`Connection::handle_segment_with` + `RxSink`): for any segment
//! sequence it hands up exactly the chunks `handle_segment` + `poll_recv` would have (same chunks,
//! order, fields; each octet once, MPA-12..15) and the connection behaves the same afterwards (ACKs,
//! windows, SACK blocks, timers, counters, events).

use std::time::Duration;

use tcp_offload::Timestamp;

use netsim::exchange;
use proptest::prelude::*;
use tcp_offload::wire::{self, Flags, TcpOptions, TcpSegment};
use tcp_offload::{Config, Connection, FourTuple, IsnGenerator, RxChunk, RxRef, SeqNum, State};

/// An established receiver `b` and what the test needs to forge segments from its peer: the
/// peer's tuple, the ACK number the peer would send and the peer's last TSval.
struct Rx {
    b: Connection,
    peer: FourTuple,
    peer_isn_next: SeqNum,
    ack: SeqNum,
    tsval: Option<u32>,
}

fn tuple() -> FourTuple {
    FourTuple {
        local: "198.18.0.1:40000".parse().unwrap(),
        remote: "198.18.0.2:5000".parse().unwrap(),
    }
}

/// Two calls with the same `t0` and config give identical receivers.
fn receiver(cfg: Config, t0: Timestamp) -> Rx {
    let g = IsnGenerator::new([9; 16], t0);
    let ta = tuple();
    let mut a = Connection::connect(cfg.clone(), ta, &g, t0).expect("valid TCP settings");
    let mut b = Connection::listen(cfg, ta.remote, &g, t0).expect("valid TCP settings");
    // Handshake by hand to learn a's ISN and TSval.
    let mut buf = vec![0u8; 2048];
    let mut tsval = None;
    let mut peer_isn_next = SeqNum(0);
    for _ in 0..4 {
        while let Some(n) = a.poll_transmit(t0, &mut buf) {
            let s = wire::parse(&buf[..n]).unwrap();
            tsval = s.options.timestamps.map(|t| t.0);
            peer_isn_next = s.seq.plus(u32::from(s.flags.syn));
            b.handle_packet(t0, &buf[..n]).unwrap();
        }
        while let Some(n) = b.poll_transmit(t0, &mut buf) {
            a.handle_packet(t0, &buf[..n]).unwrap();
        }
    }
    assert_eq!(exchange(&mut a, &mut b, t0, 4), 0);
    assert_eq!(
        (a.state(), b.state()),
        (State::Established, State::Established)
    );
    let ack = b.snd_una();
    Rx {
        b,
        peer: FourTuple {
            local: ta.remote,
            remote: ta.local,
        },
        peer_isn_next,
        ack,
        tsval,
    }
}

/// One forged segment: stream range, a variant that changes its octets (so overlapping copies
/// differ and first-copy-wins shows), FIN, and the time step before it.
#[derive(Clone, Debug)]
struct Op {
    start: u64,
    len: usize,
    variant: u8,
    fin: bool,
    wait_ms: u64,
}

fn octet(off: u64, variant: u8) -> u8 {
    (off.wrapping_mul(131) >> 3) as u8 ^ variant
}

fn ops(stream: u64, max_len: usize) -> impl Strategy<Value = Vec<Op>> {
    let op = (
        0..stream,
        0..=max_len,
        prop_oneof![3 => Just(0u8), 1 => any::<u8>()],
        prop::bool::weighted(0.05),
        prop_oneof![4 => Just(0u64), 1 => 0u64..300],
    )
        .prop_map(|(start, len, variant, fin, wait_ms)| Op {
            start,
            len,
            variant,
            fin,
            wait_ms,
        });
    prop::collection::vec(op, 1..60)
}

/// Sorted in-order delivery of the whole stream plus shuffled, duplicated and overlapping copies.
fn ops_mixed(stream: u64, seg: usize) -> impl Strategy<Value = Vec<Op>> {
    let in_order: Vec<Op> = (0..stream.div_ceil(seg as u64))
        .map(|k| Op {
            start: k * seg as u64,
            len: seg.min((stream - k * seg as u64) as usize),
            variant: 0,
            fin: false,
            wait_ms: 0,
        })
        .collect();
    (Just(in_order).prop_shuffle(), ops(stream, 2 * seg)).prop_map(|(mut a, b)| {
        a.extend(b);
        a
    })
}

fn forge<'p>(rx: &Rx, op: &Op, ts_bump: u32, payload: &'p [u8]) -> TcpSegment<'p> {
    TcpSegment {
        tuple: rx.peer,
        seq: rx.peer_isn_next.plus(op.start as u32),
        ack: rx.ack,
        flags: Flags {
            ack: true,
            psh: !payload.is_empty(),
            fin: op.fin,
            ..Default::default()
        },
        window: 65535,
        options: TcpOptions {
            timestamps: rx.tsval.map(|v| (v.wrapping_add(ts_bump), 0)),
            ..Default::default()
        },
        payload,
        payload_offset: 0,
    }
}

/// What one side produced after one step.
#[derive(Debug, PartialEq, Eq)]
struct Step {
    chunks: Vec<RxChunk>,
    packets: Vec<Vec<u8>>,
    timeout: Option<Timestamp>,
}

/// Runs `ops` through `handle_segment` + `poll_recv` (`sink == false`) or `handle_segment_with`
/// (`sink == true`); record mode starts before op `switch_at` (earlier ops arrive in byte mode
/// and stay unread, so record mode begins with queued chunks).
fn run(cfg: &Config, t0: Timestamp, ops: &[Op], switch_at: usize, sink: bool) -> Vec<Step> {
    let mut rx = receiver(cfg.clone(), t0);
    let mut now = t0;
    let mut steps = Vec::new();
    let mut buf = vec![0u8; 2048];
    let mut payload = Vec::new();
    for (k, op) in ops.iter().enumerate() {
        if k == switch_at {
            rx.b.enter_record_mode();
        }
        now += Duration::from_millis(op.wait_ms);
        if rx.b.poll_timeout().is_some_and(|t| t <= now) {
            rx.b.handle_timeout(now);
        }
        payload.clear();
        payload.extend((0..op.len as u64).map(|i| octet(op.start + i, op.variant)));
        let seg = forge(&rx, op, k as u32, &payload);
        let mut chunks = Vec::new();
        if sink {
            rx.b.handle_segment_with(now, &seg, &mut |c: RxRef<'_>| chunks.push(c.to_chunk()));
        } else {
            rx.b.handle_segment(now, &seg);
            if rx.b.record_mode() {
                while let Some(c) = rx.b.poll_recv() {
                    chunks.push(c);
                }
            }
        }
        let mut packets = Vec::new();
        while let Some(n) = rx.b.poll_transmit(now, &mut buf) {
            packets.push(buf[..n].to_vec());
        }
        steps.push(Step {
            chunks,
            packets,
            timeout: rx.b.poll_timeout(),
        });
    }
    // The end state agrees too.
    let mut events = Vec::new();
    while let Some(e) = rx.b.poll_event() {
        events.push(e);
    }
    steps.push(Step {
        chunks: Vec::new(),
        packets: vec![
            format!("{:?}", rx.b.counters()).into_bytes(),
            format!("{:?} {:?} {:?}", rx.b.state(), rx.b.rcv_nxt(), events).into_bytes(),
        ],
        timeout: rx.b.poll_timeout(),
    });
    steps
}

fn config(recv_buffer: u32, max_ooo_ranges: usize, timestamps: bool, sack: bool) -> Config {
    Config {
        recv_buffer,
        max_ooo_ranges,
        timestamps,
        sack,
        ..Config::default()
    }
}

/// Without the quick-ACK phase, so that delayed ACKs (and window updates) show.
fn no_quick_acks(cfg: Config) -> Config {
    Config {
        quick_acks: 0,
        ..cfg
    }
}

/// Every octet handed up once, with the first copy's content (MPA-13, MPA-14).
fn check_chunks(steps: &[Step], ops: &[Op]) {
    let mut seen = std::collections::BTreeMap::new();
    for c in steps.iter().flat_map(|s| &s.chunks) {
        for (i, &b) in c.data.iter().enumerate() {
            let off = c.offset + i as u64;
            assert!(seen.insert(off, b).is_none(), "octet {off} handed up twice");
            // Some op carrying this offset has this octet.
            assert!(ops.iter().any(|o| o.start <= off
                && off < o.start + o.len as u64
                && octet(off, o.variant) == b));
        }
    }
}

fn cfg_strategy() -> impl Strategy<Value = Config> {
    (
        prop_oneof![
            Just(1460u32),
            Just(3000),
            Just(6000),
            Just(20_000),
            Just(1 << 20)
        ],
        prop_oneof![Just(2usize), Just(64)],
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(rb, r, ts, sack, quick)| {
            let c = config(rb, r, ts, sack);
            if quick {
                c
            } else {
                no_quick_acks(c)
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Arbitrary segments (in order, reordered, duplicated, overlapping, beyond the window, FINs,
    /// time passing): identical chunk sequences and identical packets out, step by step.
    #[test]
    fn sink_path_equals_queue_path(
        cfg in cfg_strategy(),
        ops in ops(12_000, 3000),
        switch_at in prop_oneof![Just(0usize), 0usize..8],
    ) {
        let t0 = Timestamp::ZERO;
        let queued = run(&cfg, t0, &ops, switch_at, false);
        let sunk = run(&cfg, t0, &ops, switch_at, true);
        check_chunks(&sunk, &ops);
        prop_assert_eq!(queued, sunk);
    }

    /// A whole stream in shuffled full segments plus extra copies: the same, and the stream is
    /// complete in the end.
    #[test]
    fn sink_path_equals_queue_path_for_reordered_streams(
        cfg in cfg_strategy(),
        ops in ops_mixed(8_000, 1000),
    ) {
        let t0 = Timestamp::ZERO;
        let queued = run(&cfg, t0, &ops, 0, false);
        let sunk = run(&cfg, t0, &ops, 0, true);
        check_chunks(&sunk, &ops);
        prop_assert_eq!(queued, sunk);
    }
}

/// In-order data reaches the sink as one chunk per segment, borrowed straight from the payload
/// (the slice points into the segment's buffer: nothing was copied), and nothing is left queued.
#[test]
fn in_order_chunks_borrow_the_payload() {
    let t0 = Timestamp::ZERO;
    let mut rx = receiver(config(1 << 20, 64, true, true), t0);
    rx.b.enter_record_mode();
    for k in 0..10u64 {
        let op = Op {
            start: k * 1000,
            len: 1000,
            variant: 0,
            fin: false,
            wait_ms: 0,
        };
        let payload: Vec<u8> = (0..1000).map(|i| octet(op.start + i, 0)).collect();
        let seg = forge(&rx, &op, k as u32, &payload);
        let mut got = 0;
        rx.b.handle_segment_with(t0, &seg, &mut |c: RxRef<'_>| {
            assert_eq!(c.data.as_ptr(), payload.as_ptr());
            assert_eq!((c.offset, c.data.len(), c.in_order), (k * 1000, 1000, true));
            assert_eq!(c.in_order_point, (k + 1) * 1000);
            got += 1;
        });
        assert_eq!(got, 1);
        assert!(rx.b.poll_recv().is_none());
    }
    assert_eq!(rx.b.rcv_nxt_offset(), 10_000);
}

/// A gap-filling segment reports the in-order point past the ranges it joined, like the queue.
#[test]
fn gap_fill_reports_the_new_in_order_point() {
    let t0 = Timestamp::ZERO;
    let mut rx = receiver(config(1 << 20, 64, true, true), t0);
    rx.b.enter_record_mode();
    let mut got: Vec<RxChunk> = Vec::new();
    for (k, start) in [1000u64, 0].into_iter().enumerate() {
        let op = Op {
            start,
            len: 1000,
            variant: 0,
            fin: false,
            wait_ms: 0,
        };
        let payload: Vec<u8> = (0..1000).map(|i| octet(start + i, 0)).collect();
        let seg = forge(&rx, &op, k as u32, &payload);
        rx.b.handle_segment_with(t0, &seg, &mut |c: RxRef<'_>| got.push(c.to_chunk()));
    }
    let f: Vec<_> = got
        .iter()
        .map(|c| (c.offset, c.in_order, c.in_order_point))
        .collect();
    assert_eq!(f, vec![(1000, false, 0), (0, true, 2000)]);
}

/// Byte-stream mode: the sink is never called; the data waits for `recv` as with
/// `handle_segment`.
#[test]
fn byte_mode_keeps_data_for_recv() {
    let t0 = Timestamp::ZERO;
    let mut rx = receiver(config(1 << 20, 64, true, true), t0);
    let op = Op {
        start: 0,
        len: 5,
        variant: 0,
        fin: false,
        wait_ms: 0,
    };
    let seg = forge(&rx, &op, 0, b"hello");
    rx.b.handle_segment_with(t0, &seg, &mut |_c: RxRef<'_>| panic!("byte mode"));
    let mut buf = [0u8; 8];
    assert_eq!(rx.b.recv(&mut buf), 5);
    assert_eq!(&buf[..5], b"hello");
}

/// One copy: with the sink, in-order record data costs no heap allocation at all
/// (segment in, chunk to the sink, ACKs out, events drained); the queue path allocates a `Vec`
/// per chunk, which is what this counts. Counted per thread by `allocation_counter`.
#[test]
fn sink_path_allocates_nothing_for_in_order_data() {
    let t0 = Timestamp::ZERO;
    let segs = 200u64;
    let payloads: Vec<Vec<u8>> = (0..segs)
        .map(|k| (0..1448).map(|i| octet(k * 1448 + i, 0)).collect())
        .collect();
    let mut buf = vec![0u8; 2048];
    for sink in [true, false] {
        let mut rx = receiver(config(1 << 20, 64, true, true), t0);
        rx.b.enter_record_mode();
        let forged: Vec<TcpSegment<'_>> = payloads
            .iter()
            .enumerate()
            .map(|(k, p)| {
                let op = Op {
                    start: k as u64 * 1448,
                    len: 1448,
                    variant: 0,
                    fin: false,
                    wait_ms: 0,
                };
                forge(&rx, &op, k as u32, p)
            })
            .collect();
        let mut octets = 0u64;
        let mut step = |b: &mut Connection, seg: &TcpSegment<'_>, octets: &mut u64| {
            if sink {
                b.handle_segment_with(t0, seg, &mut |c: RxRef<'_>| *octets += c.data.len() as u64);
            } else {
                b.handle_segment(t0, seg);
                while let Some(c) = b.poll_recv() {
                    *octets += c.data.len() as u64;
                }
            }
            while b.poll_transmit(t0, &mut buf).is_some() {}
            while b.poll_event().is_some() {}
        };
        // Warm-up: the first segments may size the connection's queues once.
        for seg in &forged[..4] {
            step(&mut rx.b, seg, &mut octets);
        }
        let info = allocation_counter::measure(|| {
            for seg in &forged[4..] {
                step(&mut rx.b, seg, &mut octets);
            }
        });
        assert_eq!(octets, segs * 1448);
        assert_eq!(rx.b.rcv_nxt_offset(), segs * 1448);
        if sink {
            assert_eq!(info.count_total, 0, "sink path allocated: {info:?}");
        } else {
            assert!(info.count_total >= segs - 4, "queue path: {info:?}");
        }
    }
}
