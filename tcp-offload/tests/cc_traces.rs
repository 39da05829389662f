//! Congestion-control traces (cwnd, ssthresh over virtual time) for slow start, loss, recovery and
//! RTO, and reordering within the duplicate threshold.

mod harness;

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use harness::{payload, Pair};
use tcp_offload::wire;
use tcp_offload::{Config, CongestionAlgo, State};

#[derive(Clone, Copy, Debug)]
struct Sample {
    t_ms: u64,
    cwnd: u32,
    ssthresh: u32,
    recovery: bool,
}

fn cfg(algo: CongestionAlgo, sack: bool) -> Config {
    Config {
        congestion: algo,
        sack,
        delayed_ack: None,
        initial_window: 4,
        recv_buffer: 4 << 20,
        send_buffer: 8 << 20,
        ..Config::default()
    }
}

/// Runs a transfer of `n` octets and records (cwnd, ssthresh) after every step.
fn trace(p: Pair, n: usize) -> (Pair, Vec<Sample>) {
    trace_with(p, n, |_| {})
}

/// [`trace`] with a hook that may change the link at every step.
fn trace_with(mut p: Pair, n: usize, mut hook: impl FnMut(&mut Pair)) -> (Pair, Vec<Sample>) {
    assert!(p.run_until(Duration::from_secs(10), |p| p.a.state()
        == State::Established));
    let t0 = p.now;
    let data = payload(n, 3);
    let mut sent = 0;
    let mut got = 0;
    let mut buf = vec![0u8; 1 << 16];
    let mut tr = Vec::new();
    let ok = p.run_until(Duration::from_secs(120), |p| {
        if sent < data.len() {
            sent += p.a.send(&data[sent..]).unwrap();
        }
        got += p.b.recv(&mut buf);
        hook(p);
        tr.push(Sample {
            t_ms: (p.now - t0).as_millis() as u64,
            cwnd: p.a.cwnd(),
            ssthresh: p.a.ssthresh(),
            recovery: p.a.in_recovery(),
        });
        got == data.len()
    });
    assert!(
        ok,
        "transfer incomplete ({got} of {n}): a {:?} b {:?} last {:?}",
        p.a.counters(),
        p.b.counters(),
        tr.last()
    );
    (p, tr)
}

/// A link of 10 MB/s with 10 ms one-way delay.
fn link(c: Config) -> Pair {
    let mut p = Pair::new(c.clone(), c);
    p.rate = Some(10_000_000);
    p.delay = Duration::from_millis(10);
    p
}

/// Drops the `k`-th data segment from a (first transmission only).
fn drop_nth_data(k: usize) -> harness::Filter {
    let count = Rc::new(Cell::new(0usize));
    Box::new(move |dir, b| {
        if dir != 0 || wire::parse(b).unwrap().payload.is_empty() {
            return true;
        }
        count.set(count.get() + 1);
        count.get() != k
    })
}

#[test]
fn rfc5681_s3_1_slow_start_grows_exponentially() {
    let (p, tr) = trace(link(cfg(CongestionAlgo::NewReno, true)), 400_000);
    let mss = p.a.emss();
    assert_eq!(tr[0].cwnd, 4 * mss);
    assert!(
        tr.iter().all(|s| s.ssthresh == u32::MAX),
        "no loss, no ssthresh"
    );
    // Non-decreasing, and at least doubled after ~2 RTTs (40 ms) with an ACK per segment.
    assert!(tr.windows(2).all(|w| w[1].cwnd >= w[0].cwnd));
    let at = |ms| tr.iter().rev().find(|s| s.t_ms <= ms).unwrap().cwnd;
    assert!(at(45) >= 2 * at(2), "cwnd {} -> {}", at(2), at(45));
    assert!(at(85) >= 2 * at(45), "cwnd {} -> {}", at(45), at(85));
    assert_eq!(p.a.counters().retransmits, 0);
}

fn loss_trace(algo: CongestionAlgo, sack: bool) -> (Pair, Vec<Sample>) {
    let mut p = link(cfg(algo, sack));
    p.filter = drop_nth_data(60);
    trace(p, 600_000)
}

#[test]
fn rfc6582_newreno_loss_recovery_trace() {
    let (p, tr) = loss_trace(CongestionAlgo::NewReno, false);
    let c = p.a.counters();
    assert_eq!(c.recoveries, 1, "{c:?}");
    assert_eq!(c.rto_expiries, 0, "recovered without RTO: {c:?}");
    assert_eq!(c.fast_retransmits, 1);
    let i = tr.iter().position(|s| s.recovery).unwrap();
    let before = tr[i - 1];
    let during = tr[i];
    // RFC 5681 eq. 4: ssthresh = max(FlightSize/2, 2*SMSS); cwnd <= before.
    assert!(
        during.ssthresh <= before.cwnd / 2 + p.a.emss(),
        "{before:?} {during:?}"
    );
    assert!(during.ssthresh >= 2 * p.a.emss());
    let end = tr[i..]
        .iter()
        .position(|s| !s.recovery)
        .map(|k| tr[i + k])
        .unwrap();
    // Leaving recovery: cwnd deflated to at most ssthresh, then congestion avoidance (linear).
    assert!(end.cwnd <= end.ssthresh, "{end:?}");
    let later = tr.last().unwrap();
    assert!(later.cwnd >= end.cwnd && later.ssthresh == end.ssthresh);
}

#[test]
fn rfc9438_cubic_sack_loss_recovery_trace() {
    let (p, tr) = loss_trace(CongestionAlgo::Cubic, true);
    let c = p.a.counters();
    assert_eq!(c.recoveries, 1, "{c:?}");
    assert_eq!(c.rto_expiries, 0, "{c:?}");
    let i = tr.iter().position(|s| s.recovery).unwrap();
    let before = tr[i - 1];
    let during = tr[i];
    // CUBIC: multiplicative decrease by beta = 0.7 (of the flight, bounded by cwnd).
    let ratio = f64::from(during.ssthresh) / f64::from(before.cwnd);
    assert!(
        (0.6..=0.75).contains(&ratio),
        "ratio {ratio}: {before:?} {during:?}"
    );
    let end = tr[i..]
        .iter()
        .position(|s| !s.recovery)
        .map(|k| tr[i + k])
        .unwrap();
    assert_eq!(end.cwnd, end.ssthresh);
    // Then growth resumes.
    assert!(tr.last().unwrap().cwnd > end.cwnd);
}

#[test]
fn rfc6298_rto_trace_collapses_cwnd_to_one_segment() {
    let p = link(cfg(CongestionAlgo::NewReno, true));
    // Once 40 kB are out, the link goes dark both ways (no duplicate ACKs can reach the
    // sender) until the RTO fires; then it heals.
    let mut phase = 0;
    let (p, tr) = trace_with(p, 300_000, |p| {
        if phase == 0 && p.a.counters().bytes_sent > 40_000 {
            p.filter = Box::new(|_, _| false);
            phase = 1;
        } else if phase == 1 && p.a.counters().rto_expiries >= 1 {
            p.filter = Box::new(|_, _| true);
            phase = 2;
        }
    });
    let c = p.a.counters();
    assert!(c.rto_expiries >= 1, "{c:?}");
    let mss = p.a.emss();
    assert!(
        tr.iter().any(|s| s.cwnd == mss && s.ssthresh >= 2 * mss),
        "cwnd collapsed to 1 SMSS"
    );
}

#[test]
fn rfc5681_reordering_within_dupthresh_causes_no_retransmission() {
    for algo in [CongestionAlgo::NewReno, CongestionAlgo::Cubic] {
        for sack in [false, true] {
            let mut p = link(cfg(algo, sack));
            // Every 7th data segment arrives two packets late (depth 2 < DupThresh 3).
            let count = Rc::new(Cell::new(0usize));
            p.extra_delay = Box::new(move |dir, b| {
                let len = wire::parse(b).unwrap().payload.len();
                if dir != 0 || len == 0 {
                    return Duration::ZERO;
                }
                count.set(count.get() + 1);
                if count.get().is_multiple_of(7) {
                    // Two full-size packets at 10 MB/s take ~300 us; arrive in between 2 and 3 later.
                    Duration::from_micros(380)
                } else {
                    Duration::ZERO
                }
            });
            let (p, _) = trace(p, 500_000);
            let a = p.a.counters();
            let b = p.b.counters();
            assert!(b.ooo_committed > 10, "reordering happened: {b:?}");
            assert!(a.dupacks > 10, "{a:?}");
            assert_eq!(a.retransmits, 0, "{algo:?} sack {sack}: {a:?}");
            assert_eq!(a.recoveries, 0);
        }
    }
}
