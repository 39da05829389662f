//! MPA awareness: header-aligned segmentation of records (MPA §5.3, MPA-05/57/61) and out-of-order
//! commit on receive (MPA-12..15), checked by data and counters.

mod harness;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use harness::script::Script;
use harness::{lossy, Pair};
use rand::{Rng, SeedableRng};
use tcp_offload::wire::{self, TcpOptions};
use tcp_offload::{Config, RecordId, RecordSource, State};

/// Record bytes are a function of (id, offset): rebuilt identically at every retransmission.
struct PatternSource;

fn pattern(id: RecordId, off: u32) -> u8 {
    testkit::Pattern::new(id).byte_at(u64::from(off))
}

impl RecordSource for PatternSource {
    fn write_record(&mut self, id: RecordId, offset: u32, dst: &mut [u8]) {
        for (k, b) in dst.iter_mut().enumerate() {
            *b = pattern(id, offset + k as u32);
        }
    }
}

fn open_pair(cfg_a: Config, cfg_b: Config, seed: u64, loss: f64, jitter_ms: u64) -> Pair {
    let mut p = Pair::new(cfg_a, cfg_b);
    p.rate = Some(20_000_000);
    p.delay = Duration::from_millis(2);
    p.jitter = Duration::from_millis(jitter_ms);
    p.rng = SeedableRng::seed_from_u64(seed);
    p.src_a = Box::new(PatternSource);
    assert!(p.run_until(Duration::from_secs(30), |p| p.a.state()
        == State::Established
        && p.b.state() == State::Established));
    p.filter = lossy(seed, loss);
    p.a.enter_record_mode();
    p.b.enter_record_mode();
    p
}

/// What the receiver saw, checked byte by byte against the source.
struct Received {
    have: Vec<bool>,
    early: u64,
}

struct Outcome {
    p: Pair,
    starts: BTreeSet<u64>,
    ends: BTreeSet<u64>,
    rx: Received,
}

/// Sends `count` records of random sizes in `sizes`; b drains committed chunks as they come.
fn run_records(
    mut p: Pair,
    seed: u64,
    count: usize,
    sizes: std::ops::RangeInclusive<u32>,
    read_from: Duration,
) -> Outcome {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0xA5);
    let recs: Vec<u32> = (0..count).map(|_| rng.gen_range(sizes.clone())).collect();
    let total: u64 = recs.iter().map(|&l| u64::from(l)).sum();
    // Expected bytes by stream offset.
    let mut expect = Vec::with_capacity(total as usize);
    let mut starts = BTreeSet::new();
    let mut ends = BTreeSet::new();
    for (id, &l) in recs.iter().enumerate() {
        starts.insert(expect.len() as u64);
        for k in 0..l {
            expect.push(pattern(id as u64, k));
        }
        ends.insert(expect.len() as u64);
    }
    let mut next = 0usize;
    let mut rx = Received {
        have: vec![false; total as usize],
        early: 0,
    };
    let t_read = p.now + read_from;
    let ok = p.run_until(Duration::from_secs(600), |p| {
        while next < recs.len() {
            match p.a.send_record(recs[next], next as u64) {
                Ok(off) => {
                    assert!(starts.contains(&off));
                    next += 1;
                }
                Err(_) => break,
            }
        }
        if p.now >= t_read {
            while let Some(c) = p.b.poll_recv() {
                if c.offset > c.in_order_point {
                    rx.early += 1;
                }
                for (k, &b) in c.data.iter().enumerate() {
                    let o = c.offset as usize + k;
                    assert!(!rx.have[o], "octet {o} handed up twice (MPA-14)");
                    assert_eq!(b, expect[o], "octet {o} differs");
                    rx.have[o] = true;
                }
            }
        }
        p.b.rcv_nxt_offset() == total && rx.have.iter().all(|&h| h)
    });
    assert!(
        ok,
        "seed {seed}: a {:?} b {:?}",
        p.a.counters(),
        p.b.counters()
    );
    Outcome {
        p,
        starts,
        ends,
        rx,
    }
}

/// Checks every data segment a sent: starts on a record and ends on one, except the counted §5.3
/// cases; retransmissions repeat their original boundaries (MPA-61).
fn check_alignment(o: &Outcome) -> (u64, u64) {
    let isn_seq = o.p.a.send_seq_of_offset(0);
    let mut unaligned = BTreeSet::new();
    let mut by_start: BTreeMap<u64, BTreeSet<usize>> = BTreeMap::new();
    let mut segs = 0;
    for (dir, bytes) in &o.p.log {
        if *dir != 0 {
            continue;
        }
        let s = wire::parse(bytes).unwrap();
        if s.payload.is_empty() {
            continue;
        }
        segs += 1;
        // Offsets stay below 2^31 in these tests.
        let off = u64::from(s.seq.0.wrapping_sub(isn_seq.0));
        let end = off + s.payload.len() as u64;
        by_start.entry(off).or_default().insert(s.payload.len());
        if !(o.starts.contains(&off) && o.ends.contains(&end)) {
            unaligned.insert((off, end));
        }
    }
    for (off, lens) in &by_start {
        assert_eq!(
            lens.len(),
            1,
            "segment at {off} resent with other boundaries: {lens:?}"
        );
    }
    let c = o.p.a.counters();
    assert!(
        unaligned.len() as u64 <= c.split_emss + c.split_window + c.unaligned_retransmits,
        "{} unaligned segments, counted {:?}",
        unaligned.len(),
        c
    );
    (segs, unaligned.len() as u64)
}

fn cfg() -> Config {
    Config {
        recv_buffer: 256 << 10,
        ..Config::default()
    }
}

#[test]
fn mpa_s5_3_header_alignment_first_transmissions_and_retransmissions_under_loss_and_reorder() {
    for seed in 0..6 {
        let p = open_pair(cfg(), cfg(), seed, 0.03, 3);
        let emss = p.a.emss();
        let o = run_records(p, seed, 600, 1..=emss, Duration::ZERO);
        let (segs, unaligned) = check_alignment(&o);
        let c = o.p.a.counters();
        assert!(c.retransmits > 0, "loss exercised retransmission");
        assert_eq!(
            unaligned, 0,
            "no exception needed: records fit the EMSS and the window"
        );
        assert!(segs > 300);
        assert_eq!(c.split_emss + c.split_window, 0);
    }
}

#[test]
fn mpa_s5_3_small_records_are_packed_whole() {
    let p = open_pair(cfg(), cfg(), 9, 0.0, 0);
    let o = run_records(p, 9, 2000, 16..=200, Duration::ZERO);
    let (segs, unaligned) = check_alignment(&o);
    assert_eq!(unaligned, 0);
    assert!(
        segs < 2000 / 3,
        "several records per segment: {segs} segments"
    );
}

#[test]
fn mpa_s5_3_records_larger_than_emss_are_split_and_counted() {
    let p = open_pair(cfg(), cfg(), 4, 0.02, 0);
    let emss = p.a.emss();
    let o = run_records(p, 4, 200, emss + 1..=3 * emss, Duration::ZERO);
    let (_, unaligned) = check_alignment(&o);
    assert!(o.p.a.counters().split_emss > 0);
    assert!(unaligned > 0);
}

#[test]
fn mpa_s5_3_window_smaller_than_record_is_split_and_counted() {
    // b reads nothing for 2 s with a small buffer: the window closes below one record while nothing
    // is in flight.
    let small = Config {
        recv_buffer: 3000,
        window_scale: None,
        ..Config::default()
    };
    let p = open_pair(cfg(), small, 5, 0.0, 0);
    let o = run_records(p, 5, 40, 1100..=1400, Duration::from_secs(2));
    let (_, unaligned) = check_alignment(&o);
    let c = o.p.a.counters();
    assert!(c.split_window > 0, "{c:?}");
    assert!(unaligned > 0);
    assert!(c.window_probes > 0 || c.split_window > 0);
}

#[test]
fn mpa_12_15_out_of_order_segments_are_handed_up_before_the_gap_fills_each_octet_once() {
    for seed in 0..6 {
        let p = open_pair(cfg(), cfg(), 100 + seed, 0.03, 6);
        let o = run_records(p, seed, 400, 100..=1400, Duration::ZERO);
        assert!(
            o.rx.early > 0,
            "seed {seed}: some chunks were handed up ahead of the in-order point"
        );
        assert!(o.p.b.counters().ooo_committed > 0);
    }
}

/// Injects "AAAA" out of order at +8, then two overlapping copies with other bytes ("B" from +4,
/// "C" from +0); `between` runs after the first.
fn inject_overlaps(record_mode: bool, between: impl FnOnce(&mut Script)) -> Script {
    let cfg = Config {
        delayed_ack: None,
        ..Config::default()
    };
    let mut s = Script::establish_active(cfg, TcpOptions::default());
    if record_mode {
        s.c.enter_record_mode();
    }
    let base = s.p_nxt;
    let ack = s.c_snd_nxt();
    let o = TcpOptions::default();
    s.inject_raw(base + 8, Some(ack), "A", o, b"AAAA");
    between(&mut s);
    s.inject_raw(base + 4, Some(ack), "A", o, b"BBBBBBBBBBBB");
    s.inject_raw(base, Some(ack), "A", o, b"CCCCCCCCCCCC");
    s
}

#[test]
fn mpa_13_committed_data_never_changes_record_mode() {
    let mut s = inject_overlaps(true, |_| {});
    let mut got = BTreeMap::new();
    while let Some(c) = s.c.poll_recv() {
        for (k, b) in c.data.iter().enumerate() {
            assert!(
                got.insert(c.offset + k as u64, *b).is_none(),
                "octet handed up twice"
            );
        }
    }
    let bytes: Vec<u8> = got.values().copied().collect();
    assert_eq!(bytes, b"CCCCBBBBAAAABBBB");
    assert_eq!(s.c.rcv_nxt_offset(), 16);
    assert!(s.c.counters().duplicate_bytes >= 12);
}

#[test]
fn mpa_17_committed_data_never_changes_byte_mode() {
    let mut s = inject_overlaps(false, |s| {
        assert_eq!(
            s.c.recv_ready(),
            0,
            "byte mode holds out-of-order data back"
        )
    });
    let mut b = [0u8; 32];
    let n = s.c.recv(&mut b);
    assert_eq!(&b[..n], b"CCCCBBBBAAAABBBB");
}

#[test]
fn sack_blocks_report_committed_ranges_rfc2018() {
    let mut s = Script::establish_active(
        Config {
            delayed_ack: None,
            ..Config::default()
        },
        TcpOptions {
            sack_permitted: true,
            ..TcpOptions::default()
        },
    );
    assert!(s.c.sack_enabled());
    let base = s.p_nxt;
    let ack = s.c_snd_nxt();
    s.inject_raw(base + 100, Some(ack), "A", TcpOptions::default(), &[1; 50]);
    s.drain();
    s.inject_raw(base + 300, Some(ack), "A", TcpOptions::default(), &[1; 50]);
    let out = s.drain();
    let o = out.last().unwrap().options;
    // Most recent block first (RFC 2018 §4).
    assert_eq!(o.sack_count, 2);
    assert_eq!((o.sack[0].0 .0, o.sack[0].1 .0), (base + 300, base + 350));
    assert_eq!((o.sack[1].0 .0, o.sack[1].1 .0), (base + 100, base + 150));
    assert_eq!(out.last().unwrap().ack, Some(base));
}

#[test]
fn record_mode_entered_before_the_handshake_survives_the_syn() {
    let mut p = Pair::new(cfg(), cfg());
    p.a.enter_record_mode();
    p.b.enter_record_mode();
    assert!(p.run_until(Duration::from_secs(5), |p| p.a.state()
        == State::Established
        && p.b.state() == State::Established));
    p.a.send_record_bytes(b"first record").unwrap();
    assert!(p.run_until(Duration::from_secs(5), |p| p.b.rcv_nxt_offset() == 12));
    let c = p.b.poll_recv().expect("record mode delivers chunks");
    assert_eq!((c.offset, c.data.as_slice()), (0, &b"first record"[..]));
    assert_eq!(p.b.recv_ready(), 0);
}

/// Established in record mode with SACK and no timestamps; `n` records of `len` octets sent
/// (packed two per segment when they fit).
fn scripted_records(n: usize, len: usize) -> (Script, Vec<harness::script::Out>) {
    let cfg = Config {
        delayed_ack: None,
        timestamps: false,
        ..Config::default()
    };
    let opts = TcpOptions {
        sack_permitted: true,
        mss: Some(1460),
        window_scale: Some(0),
        ..TcpOptions::default()
    };
    let mut s = Script::establish_active(cfg, opts);
    s.c.enter_record_mode();
    for k in 0..n {
        s.c.send_record_bytes(&vec![k as u8; len]).unwrap();
    }
    let out = s.drain();
    (s, out)
}

#[test]
fn a_short_queue_is_packed_into_four_segments_a_deep_one_up_to_the_mss() {
    // 4 x 700 queued: a quarter is one record, so each goes alone (the peer's ACK of the
    // first two comes back while the last two are on their way).
    let (_, out) = scripted_records(4, 700);
    let lens: Vec<_> = out.iter().map(|o| o.payload.len()).collect();
    assert_eq!(lens, [700; 4]);
    // 12 x 300 queued: a quarter is 900, three records.
    let (_, out) = scripted_records(12, 300);
    let lens: Vec<_> = out.iter().map(|o| o.payload.len()).collect();
    assert_eq!(lens, [900; 4]);
    // 40 x 300 queued: a quarter (3000) is more than the MSS (1460): four records, as before.
    let (_, out) = scripted_records(40, 300);
    assert!(out.iter().all(|o| o.payload.len() == 1200), "{out:?}");
}

#[test]
fn mpa_61_retransmission_keeps_boundaries_when_the_window_shrinks() {
    let (mut s, out) = scripted_records(8, 700);
    assert_eq!(out.len(), 4, "two records per segment");
    assert!(out.iter().all(|o| o.payload.len() == 1400));
    // The peer shrinks its window to 100 octets without acknowledging anything; the RTO fires.
    let repr = tcp_offload::wire::SegmentRepr {
        tuple: harness::tuple_b(),
        seq: tcp_offload::SeqNum(s.p_nxt),
        ack: Some(s.c.snd_una()),
        flags: tcp_offload::wire::Flags::default(),
        window: 100,
        options: TcpOptions::default(),
    };
    s.c.handle_packet(s.now, &harness::raw(repr, b"")).unwrap();
    s.advance(s.c.rto());
    let re = s.drain();
    assert_eq!(re.len(), 1);
    assert_eq!(
        (re[0].seq, re[0].payload.len()),
        (out[0].seq, 1400),
        "same segment, same boundaries"
    );
    assert_eq!(s.c.counters().unaligned_retransmits, 0);
}

#[test]
fn mpa_61_retransmission_keeps_boundaries_when_sack_covers_part_of_a_segment() {
    let (mut s, out) = scripted_records(10, 700);
    assert_eq!(out.len(), 5);
    // SACK the second half of segment 0 (its second record) and segments 1..=4.
    let first = out[0].seq;
    let end = out[4].seq + 1400;
    let mut o = TcpOptions::default();
    o.sack[0] = (tcp_offload::SeqNum(first + 700), tcp_offload::SeqNum(end));
    o.sack_count = 1;
    for _ in 0..3 {
        s.inject_raw(s.p_nxt, Some(first), "A", o, b"");
    }
    let re: Vec<_> = s
        .drain()
        .into_iter()
        .filter(|x| !x.payload.is_empty())
        .collect();
    assert_eq!(re.len(), 1, "only the hole's segment is resent");
    assert_eq!(
        (re[0].seq, re[0].payload.len()),
        (first, 1400),
        "the whole original segment, both records"
    );
    assert_eq!(s.c.counters().fast_retransmits, 1);
}

/// A run of records pushed through a `RecordQueue` gets the same results (offsets and errors:
/// empty, too large, the buffer full) and leaves the same send queue as `send_record` called
/// for each; a connection not in record mode, or closed, refuses the queue with
/// `send_record`'s error.
#[test]
fn a_record_queue_queues_what_send_record_queues() {
    let cfg = Config {
        send_buffer: 10_000,
        ..cfg()
    };
    let lens = [1000u32, 0, 4000, 20_000, 3000, 1500, 1, 600, 2000];
    let mut one_by_one = open_pair(cfg.clone(), cfg.clone(), 1, 0.0, 0);
    let mut queued = open_pair(cfg.clone(), cfg.clone(), 1, 0.0, 0);
    let want: Vec<_> = (0..)
        .zip(lens)
        .map(|(id, len)| one_by_one.a.send_record(len, id))
        .collect();
    let mut q = queued.a.record_queue().unwrap();
    let got: Vec<_> = (0..).zip(lens).map(|(id, len)| q.push(len, id)).collect();
    assert_eq!(got, want);
    assert!(want.iter().any(|r| r.is_err()) && want.iter().any(|r| r.is_ok()));
    assert_eq!(queued.a.send_queued(), one_by_one.a.send_queued());
    assert_eq!(queued.a.send_capacity(), one_by_one.a.send_capacity());

    let mut byte_mode = Pair::new(cfg.clone(), cfg.clone());
    let want = byte_mode.a.send_record(100, 0).map(|_| ());
    assert_eq!(byte_mode.a.record_queue().map(|_| ()), want);
    assert!(want.is_err());
    let now = queued.now;
    queued.a.close(now);
    let want = queued.a.send_record(100, 99).map(|_| ());
    assert_eq!(queued.a.record_queue().map(|_| ()), want);
    assert!(want.is_err());
}
