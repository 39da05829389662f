//! Byte-exact transfers between two of our connections under loss and reordering (quick version;
//! the full seeded matrix lives in the `sim` tests).

mod harness;

use std::time::Duration;

use harness::{lossy, payload, transfer, Pair};
use tcp_offload::{Config, CongestionAlgo, State};

fn run(cfg: Config, seed: u64, loss: f64, jitter_ms: u64, n: usize) -> Pair {
    let mut p = Pair::new(cfg.clone(), cfg);
    p.filter = lossy(seed, loss);
    p.jitter = Duration::from_millis(jitter_ms);
    assert!(p.run_until(Duration::from_secs(120), |p| p.a.state()
        == State::Established
        && p.b.state() == State::Established));
    let data = payload(n, seed);
    let got = transfer(&mut p, &data, Duration::from_secs(600));
    assert_eq!(
        got.len(),
        data.len(),
        "seed {seed} loss {loss}: {:?} / {:?}",
        p.a.counters(),
        p.b.counters()
    );
    assert!(got == data, "seed {seed}: data differs");
    p.a.close(p.now);
    p.b.close(p.now);
    assert!(
        p.run_until(Duration::from_secs(600), |p| p.a.state() == State::Closed
            && p.b.state() == State::Closed),
        "close seed {seed}: {:?} {:?}",
        p.a.state(),
        p.b.state()
    );
    p
}

#[test]
fn transfers_under_loss_sack_cubic() {
    for seed in 0..8 {
        for loss in [0.01, 0.05] {
            let p = run(Config::default(), seed, loss, 0, 200_000);
            let c = p.a.counters();
            eprintln!(
                "seed {seed} loss {loss}: rexmit {} fast {} rto {} spurious {} recoveries {}",
                c.retransmits,
                c.fast_retransmits,
                c.rto_retransmits,
                c.spurious_retransmits,
                c.recoveries
            );
            if loss >= 0.05 {
                assert!(c.retransmits > 0);
            }
        }
    }
}

#[test]
fn transfers_under_loss_newreno_without_sack_or_timestamps() {
    let cfg = Config {
        sack: false,
        timestamps: false,
        congestion: CongestionAlgo::NewReno,
        ..Config::default()
    };
    for seed in 0..8 {
        for loss in [0.01, 0.05] {
            run(cfg.clone(), seed, loss, 0, 200_000);
        }
    }
}

#[test]
fn transfers_under_heavy_reordering_and_loss() {
    for seed in 0..6 {
        let p = run(Config::default(), seed, 0.02, 20, 200_000);
        assert!(p.b.counters().ooo_committed > 0);
    }
}
