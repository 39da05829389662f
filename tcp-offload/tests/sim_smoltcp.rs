//! The simulation machinery proven with smoltcp on both ends: the link's faults are survived by
//! an independent, mature TCP, the verifier accepts exactly what it should, and a corrupted,
//! lost or doubled octet is caught (negative tests).

mod common;

use common::smol::{SmolConfig, SmolRsts, SmolTransport};
use common::wrap::{Hooks, Wrapped};
use common::{
    link_case, par_seeds, run_bulk as run_bulk_keep, stream_seed, threads, Outcome, SimRole,
    Summary,
};
use netsim::{
    BulkConfig, ClosePolicy, Delivery, LinkConfig, Pattern, SegmentAudit, SimConfig, SimSide,
    SimTime, SimTransport,
};

const KIB: u64 = 1024;

/// [`common::run_bulk`] without the transports.
#[allow(clippy::too_many_arguments)]
fn run_bulk<A: SimTransport, B: SimTransport>(
    seed: u64,
    a: A,
    b: B,
    ca: BulkConfig,
    cb: BulkConfig,
    ab: LinkConfig,
    ba: LinkConfig,
    audits: [SegmentAudit; 2],
    limits: SimConfig,
) -> Result<Outcome, String> {
    run_bulk_keep(seed, a, b, ca, cb, ab, ba, audits, limits).map(|r| r.0)
}

fn smol_pair(seed: u64, cfg: &SmolConfig) -> (SmolTransport, SmolTransport) {
    (
        SmolTransport::new(SimRole::Client, seed, cfg),
        SmolTransport::new(SimRole::Server, seed ^ 0xffff, cfg),
    )
}

/// A sends `a_len`, B sends `b_len`. smoltcp 0.12 disarms its retransmission timer when a FIN
/// arrives while it has data or its own FIN unacknowledged ((ESTABLISHED, FIN) -> CLOSE-WAIT and
/// (FIN-WAIT-1, FIN) -> CLOSING both call `set_for_idle`), and then stalls for ever if that data
/// was lost. Found by this simulation. So between two smoltcps the client closes only after it
/// has everything (its FIN acknowledges all) and the server closes passively. (In LAST-ACK it
/// also idles the timer on an ACK not covering its FIN, so a duplicated or reordered ACK and a
/// lost FIN can still hang the server; the seeds here do not hit it.)
fn bulk(seed: u64, a_len: u64, b_len: u64) -> (BulkConfig, BulkConfig) {
    let (sa, sb) = (stream_seed(seed, SimSide::A), stream_seed(seed, SimSide::B));
    (
        BulkConfig::new(a_len, sa, b_len, sb).with_close(ClosePolicy::AfterReceiving),
        BulkConfig::new(b_len, sb, a_len, sa).with_close(ClosePolicy::AfterPeerClose),
    )
}

fn audits(seed: u64) -> [SegmentAudit; 2] {
    [
        SegmentAudit::new().with_pattern(Pattern::new(stream_seed(seed, SimSide::A))),
        SegmentAudit::new().with_pattern(Pattern::new(stream_seed(seed, SimSide::B))),
    ]
}

/// The outcome and each side's RSTs.
fn smol_vs_smol(
    seed: u64,
    link: &LinkConfig,
    len: u64,
) -> Result<(Outcome, [SmolRsts; 2]), String> {
    let cfg = SmolConfig::default();
    let (a, b) = smol_pair(seed, &cfg);
    let (ca, cb) = bulk(seed, len, len);
    run_bulk_keep(
        seed,
        a,
        b,
        ca,
        cb,
        link.clone(),
        link.clone(),
        audits(seed),
        SimConfig::default(),
    )
    .map(|(o, a, b)| (o, [a.rsts(), b.rsts()]))
}

fn check_case(name: &str, seeds: u64, len: u64) -> Summary {
    let link = link_case(name);
    let seeds: Vec<u64> = (0..seeds).collect();
    let outcomes = par_seeds(&seeds, threads(), |s| smol_vs_smol(s, &link, len));
    let mut sum = Summary::default();
    for r in &outcomes {
        let (o, rsts) = r
            .as_ref()
            .unwrap_or_else(|e| panic!("smoltcp vs smoltcp, {name}: {e}"));
        for (side, r) in rsts.iter().enumerate() {
            // Every RST on the wire is a CLOSED port's RFC 9293 §3.10.7.1 answer (see SmolRsts).
            assert!(
                r.other == 0 && r.closed_replies == o.audit[side].rst,
                "seed {}: side {side} sent {} RSTs: {r:?}",
                o.seed,
                o.audit[side].rst,
            );
            assert_eq!(
                o.audit[side].wrong_payload, 0,
                "seed {}: segment payload differs from the stream",
                o.seed
            );
            assert_eq!(
                o.rst_before_close[side], 0,
                "seed {}: RST on an orderly close",
                o.seed
            );
            assert!(
                o.audit[side].syn >= 1 && o.audit[side].fin >= 1,
                "seed {}: SYN and FIN from each side",
                o.seed
            );
        }
        sum.add(o);
    }
    assert_eq!(
        sum.bytes,
        2 * len * seeds.len() as u64,
        "every octet verified both ways"
    );
    eprintln!(
        "{}",
        sum.line(&format!(
            "smoltcp<->smoltcp {name} {} KiB each way",
            len / KIB
        ))
    );
    sum
}

#[test]
fn smoltcp_pair_transfers_byte_exact_on_a_clean_link() {
    let s = check_case("clean", 4, 256 * KIB);
    assert_eq!(s.link.dropped() + s.link.reordered, 0);
    assert_eq!(s.audit.retx, 0, "nothing to retransmit on a clean link");
}

#[test]
fn smoltcp_pair_survives_one_percent_loss() {
    let s = check_case("loss1", 8, 128 * KIB);
    assert!(
        s.link.lost > 0 && s.audit.retx > 0,
        "losses happened and were repaired: {s:?}"
    );
}

#[test]
fn smoltcp_pair_survives_five_percent_loss() {
    let s = check_case("loss5", 8, 64 * KIB);
    assert!(s.link.lost > 0 && s.audit.retx > 0);
}

#[test]
fn smoltcp_pair_survives_heavy_reordering() {
    let s = check_case("reorder", 8, 128 * KIB);
    // Seeds 2 and 4: the server's socket reached CLOSED (LAST-ACK) and its interface answered the
    // client's late segments with RST. The classifier the matrix relies on must see them.
    assert!(s.audit.rst > 0, "the reorder seeds show closed-port RSTs");
    assert!(
        s.link.reordered > s.link.sent / 20,
        "at least 5% reordered: {:?}",
        s.link
    );
}

#[test]
fn smoltcp_pair_survives_duplication_and_corruption() {
    let s = check_case("hostile", 8, 64 * KIB);
    assert!(s.link.duplicated > 0 && s.link.corrupted > 0 && s.link.lost > 0);
}

#[test]
fn oversize_packets_are_dropped_so_a_small_mtu_link_needs_a_small_mss() {
    // smoltcp believes its device MTU (1500) but the link carries only 1000: full-size data
    // segments vanish and the transfer cannot finish; with the device MTU matching, it does.
    let link = LinkConfig::default().with_mtu(1000);
    let (a, b) = smol_pair(1, &SmolConfig::default());
    let (ca, cb) = bulk(1, 64 * KIB, 0);
    let limits = SimConfig {
        time_limit: SimTime::from_secs(60),
        ..SimConfig::default()
    };
    let err = run_bulk(
        1,
        a,
        b,
        ca,
        cb,
        link.clone(),
        link.clone(),
        audits(1),
        limits,
    )
    .unwrap_err();
    assert!(
        err.contains("time limit") && err.contains("dropped_mtu: "),
        "{err}"
    );
    let cfg = SmolConfig {
        mtu: 1000,
        ..SmolConfig::default()
    };
    let (a, b) = smol_pair(1, &cfg);
    let (ca, cb) = bulk(1, 64 * KIB, 0);
    let o = run_bulk(1, a, b, ca, cb, link.clone(), link, audits(1), limits).unwrap();
    assert_eq!(o.report.a_to_b.dropped_mtu, 0);
    assert_eq!(o.verify[1].bytes, 64 * KIB);
}

#[test]
fn same_seed_same_run() {
    let link = link_case("hostile");
    let a = smol_vs_smol(17, &link, 32 * KIB).unwrap().0;
    let b = smol_vs_smol(17, &link, 32 * KIB).unwrap().0;
    assert_eq!((a.report, a.audit), (b.report, b.audit));
    let c = smol_vs_smol(18, &link, 32 * KIB).unwrap().0;
    assert_ne!(a.report, c.report);
}

#[test]
fn negative_corruption_reaches_the_verifier_when_checksums_are_not_checked() {
    // Proves a corrupted octet WOULD be caught: turn off smoltcp's checksum verification and
    // flip bits on the link; the receiving application's verifier must refuse the stream.
    let link = link_case("clean").with_corrupt(0.05);
    let cfg = SmolConfig {
        verify_checksums: false,
        ..SmolConfig::default()
    };
    let (a, b) = smol_pair(5, &cfg);
    let (ca, cb) = bulk(5, 256 * KIB, 0);
    let err = run_bulk(
        5,
        a,
        b,
        ca,
        cb,
        link.clone(),
        LinkConfig::default(),
        audits(5),
        SimConfig::default(),
    )
    .expect_err("flipped bits must not pass unnoticed");
    assert!(
        err.contains("endpoint B failed") && err.contains("receive check failed"),
        "{err}"
    );
    // With checksums checked (the default), the same link is harmless.
    let (a, b) = smol_pair(5, &SmolConfig::default());
    let (ca, cb) = bulk(5, 256 * KIB, 0);
    run_bulk(
        5,
        a,
        b,
        ca,
        cb,
        link,
        LinkConfig::default(),
        audits(5),
        SimConfig::default(),
    )
    .unwrap();
}

/// Spoils the first delivery it hands up, in one of three ways.
struct Spoil {
    how: &'static str,
    done: bool,
    again: Option<Delivery>,
}

impl<T: SimTransport> Hooks<T> for Spoil {
    fn recv(&mut self, inner: &mut T, now: SimTime) -> Option<Delivery> {
        if let Some(d) = self.again.take() {
            return Some(d);
        }
        let mut d = inner.recv(now)?;
        if self.done || d.data.is_empty() {
            return Some(d);
        }
        self.done = true;
        match self.how {
            "flip" => {
                let mid = d.data.len() / 2;
                d.data[mid] ^= 0x04;
            }
            "lose" => {
                d.data.pop();
            }
            "repeat" => self.again = Some(d.clone()),
            _ => unreachable!(),
        }
        Some(d)
    }
}

#[test]
fn negative_the_verifier_catches_a_flipped_a_lost_and_a_repeated_octet() {
    for (how, expect) in [
        ("flip", "wrong octet"),
        ("lose", "in-order point"),
        ("repeat", "handed up twice"),
    ] {
        let (a, b) = smol_pair(9, &SmolConfig::default());
        let b = Wrapped {
            inner: b,
            hooks: Spoil {
                how,
                done: false,
                again: None,
            },
        };
        let (ca, cb) = bulk(9, 64 * KIB, 0);
        let err = run_bulk(
            9,
            a,
            b,
            ca,
            cb,
            link_case("clean"),
            link_case("clean"),
            audits(9),
            SimConfig::default(),
        )
        .expect_err(how);
        assert!(err.contains(expect), "{how}: {err}");
    }
}

#[test]
fn negative_a_sender_putting_wrong_octets_on_the_wire_is_caught_at_the_link_and_the_receiver() {
    // A sends the stream of the wrong seed: the audit of A's segments flags every data
    // segment, and B's verifier refuses the data at its first octet.
    let (a, b) = smol_pair(3, &SmolConfig::default());
    let (mut ca, mut cb) = bulk(3, 16 * KIB, 0);
    ca.tx_seed ^= 1;
    let err = run_bulk(
        3,
        a,
        b,
        ca.clone(),
        cb.clone(),
        link_case("clean"),
        link_case("clean"),
        audits(3),
        SimConfig::default(),
    )
    .unwrap_err();
    assert!(err.contains("wrong octet at stream offset 0"), "{err}");
    // Let B expect what A sends: the transfer passes, and the audit (still expecting the
    // run's own pattern) flags every data segment A sent.
    cb.rx_seed = ca.tx_seed;
    let (a, b) = smol_pair(3, &SmolConfig::default());
    let o = run_bulk(
        3,
        a,
        b,
        ca,
        cb,
        link_case("clean"),
        link_case("clean"),
        audits(3),
        SimConfig::default(),
    )
    .unwrap();
    assert!(o.audit[0].first_tx > 0);
    assert_eq!(
        o.audit[0].wrong_payload,
        o.audit[0].first_tx + o.audit[0].retx
    );
}

#[test]
fn open_and_close_complete_with_either_side_sending_nothing() {
    for (a_len, b_len) in [(0, 0), (10 * KIB, 0), (0, 10 * KIB)] {
        let (a, b) = smol_pair(2, &SmolConfig::default());
        let (ca, cb) = bulk(2, a_len, b_len);
        let o = run_bulk(
            2,
            a,
            b,
            ca,
            cb,
            link_case("loss5"),
            link_case("loss5"),
            audits(2),
            SimConfig::default(),
        )
        .unwrap();
        assert_eq!(o.rst_before_close, [0, 0]);
        assert!(
            o.audit[0].fin >= 1 && o.audit[1].fin >= 1,
            "both sides sent FIN"
        );
        assert!(
            o.report.end >= SimTime::from_secs(10),
            "TIME-WAIT (10 s in smoltcp) ran out"
        );
    }
}
