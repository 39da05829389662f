//! Property: for any combination of options, congestion control, buffer sizes, loss and
//! reordering, a byte-stream transfer between two of our connections arrives byte-exact and both
//! sides close cleanly.

mod harness;

use std::time::Duration;

use harness::{lossy, payload, transfer, Pair};
use proptest::prelude::*;
use rand::SeedableRng;
use tcp_offload::{Config, CongestionAlgo, State};

fn config() -> impl Strategy<Value = Config> {
    (
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        0usize..3,
        any::<bool>(),
        536u16..=1460,
    )
        .prop_map(|(sack, ts, ws, cubic, buf, delack, mss)| {
            let recv_buffer = [8 * 1024, 64 * 1024, 512 * 1024][buf];
            Config {
                sack,
                timestamps: ts,
                window_scale: (ws || recv_buffer > 65535).then_some(7),
                congestion: if cubic {
                    CongestionAlgo::Cubic
                } else {
                    CongestionAlgo::NewReno
                },
                recv_buffer,
                delayed_ack: delack.then_some(Duration::from_millis(40)),
                mss,
                ..Config::default()
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn any_config_transfers_byte_exact_and_closes(
        ca in config(), cb in config(), seed in any::<u64>(), loss in 0.0f64..0.06, jitter in 0u64..8,
    ) {
        prop_assert!(ca.validate().is_ok() && cb.validate().is_ok());
        let mut p = Pair::new(ca, cb);
        p.rate = Some(5_000_000);
        p.jitter = Duration::from_millis(jitter);
        p.rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        p.filter = lossy(seed, loss);
        prop_assert!(p.run_until(Duration::from_secs(300), |p| p.a.state() == State::Established && p.b.state() == State::Established));
        let data = payload(60_000, seed);
        let got = transfer(&mut p, &data, Duration::from_secs(900));
        prop_assert_eq!(got.len(), data.len());
        prop_assert!(got == data);
        p.a.close(p.now);
        prop_assert!(p.run_until(Duration::from_secs(300), |p| p.b.state() == State::CloseWait));
        p.b.close(p.now);
        prop_assert!(p.run_until(Duration::from_secs(900), |p| p.a.state() == State::Closed && p.b.state() == State::Closed),
            "close: {:?} {:?}", p.a.state(), p.b.state());
    }
}
