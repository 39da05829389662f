//! Path properties over the simulated link with our TCP: a small MTU honoured through the MSS,
//! a black hole when the MSS is too large for the path, a bottleneck with a small queue, and
//! runs that repeat exactly by seed.

mod common;

use std::time::Duration;

use common::ours::{Mode, OursOptions, OursTransport, Passive};
use common::peer::Peer;
use common::smol::{SmolConfig, SmolTransport};
use common::{link_case, run_bulk, stream_seed, Outcome, SimRole};
use netsim::{
    BulkConfig, ClosePolicy, LinkConfig, Pattern, SegmentAudit, SimConfig, SimSide, SimTime,
};
use tcp_offload::Config;

const KIB: u64 = 1024;

fn ours(role: SimRole, seed: u64, cfg: &Config) -> Peer {
    let opts = OursOptions {
        cfg: cfg.clone(),
        mode: Mode::Bytes,
        passive: Passive::Connection,
        ..OursOptions::default()
    };
    Peer::Ours(Box::new(
        OursTransport::new(role, seed, &opts).expect("valid TCP settings"),
    ))
}

fn transfer(
    seed: u64,
    a: Peer,
    b: Peer,
    link: LinkConfig,
    len: u64,
    limits: SimConfig,
) -> Result<Outcome, String> {
    let (sa, sb) = (stream_seed(seed, SimSide::A), stream_seed(seed, SimSide::B));
    let ca = BulkConfig::new(len, sa, len, sb).with_close(ClosePolicy::AfterReceiving);
    let cb = BulkConfig::new(len, sb, len, sa).with_close(ClosePolicy::AfterPeerClose);
    let audits = [
        SegmentAudit::new().with_pattern(Pattern::new(sa)),
        SegmentAudit::new().with_pattern(Pattern::new(sb)),
    ];
    run_bulk(seed, a, b, ca, cb, link.clone(), link, audits, limits).map(|r| r.0)
}

#[test]
fn a_small_mtu_is_honoured_through_the_announced_mss_rfc9293_3_7_1() {
    // Both ends configured for a 1000-octet path: nothing oversize ever reaches the link, ours
    // against ours and against smoltcp (which announces MSS 960).
    let cfg = Config {
        mtu: 1000,
        mss: 960,
        ..Config::default()
    };
    let link = link_case("loss1").with_mtu(1000);
    let smol = SmolConfig {
        mtu: 1000,
        ..SmolConfig::default()
    };
    let pairs: [(Peer, Peer); 2] = [
        (
            ours(SimRole::Client, 1, &cfg),
            ours(SimRole::Server, 2, &cfg),
        ),
        (
            ours(SimRole::Client, 1, &cfg),
            Peer::Smol(Box::new(SmolTransport::new(SimRole::Server, 2, &smol))),
        ),
    ];
    for (a, b) in pairs {
        let o = transfer(5, a, b, link.clone(), 256 * KIB, SimConfig::default()).unwrap();
        assert_eq!(o.report.a_to_b.dropped_mtu + o.report.b_to_a.dropped_mtu, 0);
        assert_eq!(o.verify[0].bytes + o.verify[1].bytes, 512 * KIB);
    }
}

#[test]
fn an_mss_too_large_for_the_path_is_a_black_hole_not_corruption() {
    // Ours believes in 1500 but the path carries 1000 (no PMTU discovery): full segments vanish,
    // the transfer cannot finish within the time limit, and nothing wrong is ever handed up.
    let link = link_case("clean").with_mtu(1000);
    let cfg = Config::default();
    let limits = SimConfig {
        time_limit: SimTime::from_secs(120),
        ..SimConfig::default()
    };
    let err = transfer(
        6,
        ours(SimRole::Client, 1, &cfg),
        ours(SimRole::Server, 2, &cfg),
        link,
        64 * KIB,
        limits,
    )
    .unwrap_err();
    assert!(
        err.contains("dropped_mtu: ") && !err.contains("receive check failed"),
        "{err}"
    );
    assert!(
        err.contains("time limit") || err.contains("connection reset"),
        "{err}"
    );
}

#[test]
fn a_bottleneck_with_a_small_queue_drops_and_the_transfer_still_completes() {
    // 10 Mbit/s with 16 KiB of queue: congestion losses, repaired.
    let link = LinkConfig::default()
        .with_delay(Duration::from_millis(10))
        .with_rate(1_250_000, 16 * 1024);
    let cfg = Config::default();
    let o = transfer(
        7,
        ours(SimRole::Client, 1, &cfg),
        ours(SimRole::Server, 2, &cfg),
        link,
        1024 * KIB,
        SimConfig::default(),
    )
    .unwrap();
    let drops = o.report.a_to_b.dropped_queue + o.report.b_to_a.dropped_queue;
    assert!(drops > 0, "the queue never overflowed");
    assert!(o.audit[0].retx + o.audit[1].retx > 0);
    eprintln!("bottleneck: {drops} queue drops, ends at {}", o.report.end);
}

#[test]
fn runs_repeat_exactly_by_seed() {
    let cfg = Config::default();
    let run = |seed: u64| {
        let o = transfer(
            seed,
            ours(SimRole::Client, seed, &cfg),
            ours(SimRole::Server, seed + 1, &cfg),
            link_case("hostile"),
            64 * KIB,
            SimConfig::default(),
        )
        .unwrap();
        (o.report, o.audit, o.transport)
    };
    assert_eq!(run(3), run(3));
    assert_ne!(run(3).0, run(4).0);
}
