//! Our TCP through the seeded simulated link (`netsim`) via [`OursTransport`]: byte
//! stream and record mode, loss and reordering, header alignment audited on the wire. (The full
//! interop matrix, smoltcp included, lives in the `sim_*` tests.)

use std::time::Duration;

use netsim::ours::{Mode, OursOptions, OursTransport, Passive};
use netsim::{
    BulkApp, BulkConfig, Host, LinkConfig, Pattern, RecordPlan, SegmentAudit, Sim, SimRole,
    SimSide, SimTransport,
};

/// A client, or a server behind a listener, in byte-stream or owned-record mode.
fn ours(role: SimRole, seed: u64, records: bool) -> OursTransport {
    let opts = OursOptions {
        mode: if records {
            Mode::OwnedRecords
        } else {
            Mode::Bytes
        },
        passive: Passive::Listener,
        ..OursOptions::default()
    };
    OursTransport::new(role, seed, &opts).expect("valid TCP settings")
}

fn link(loss: f64, jitter_ms: u64) -> LinkConfig {
    LinkConfig::default()
        .with_delay(Duration::from_millis(5))
        .with_loss(loss)
        .with_jitter(Duration::from_millis(jitter_ms))
}

struct Run {
    audit: [netsim::AuditStats; 2],
    exceptions: [u64; 2],
    ooo: u64,
}

fn run(seed: u64, len: u64, link: LinkConfig, records: bool) -> Run {
    let a = ours(SimRole::Client, 1, records);
    let b = ours(SimRole::Server, 2, records);
    let (sa, sb) = (seed * 2 + 1, seed * 2 + 2);
    let mut ca = BulkConfig::new(len, sa, len, sb);
    let mut cb = BulkConfig::new(len, sb, len, sa);
    let mut audits = [
        SegmentAudit::new().with_pattern(Pattern::new(sa)),
        SegmentAudit::new().with_pattern(Pattern::new(sb)),
    ];
    if records {
        let pa = RecordPlan::fpdus(sa, 1442, len);
        let pb = RecordPlan::fpdus(sb, 1442, len);
        audits = [
            SegmentAudit::new()
                .with_pattern(Pattern::new(sa))
                .with_boundaries(pa.boundaries()),
            SegmentAudit::new()
                .with_pattern(Pattern::new(sb))
                .with_boundaries(pb.boundaries()),
        ];
        ca = ca.with_records(pa);
        cb = cb.with_records(pb);
    }
    let mut sim = Sim::new(
        seed,
        Host::new(a, BulkApp::new(ca)),
        Host::new(b, BulkApp::new(cb)),
        link.clone(),
        link,
    )
    .expect("link config");
    let audits = std::rc::Rc::new(std::cell::RefCell::new(audits));
    let tap = audits.clone();
    sim.add_tap(move |side, _now, p| {
        tap.borrow_mut()[if side == SimSide::A { 0 } else { 1 }].observe(p)
    });
    sim.run().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let au = audits.borrow();
    Run {
        audit: [au[0].stats(), au[1].stats()],
        exceptions: [
            sim.a.transport.stats().unaligned_exceptions,
            sim.b.transport.stats().unaligned_exceptions,
        ],
        ooo: sim.a.app.verify_stats().ooo_deliveries + sim.b.app.verify_stats().ooo_deliveries,
    }
}

#[test]
fn byte_stream_both_ways_under_loss_and_reordering() {
    for seed in 0..6 {
        for (loss, jitter) in [(0.0, 0), (0.01, 0), (0.05, 0), (0.0, 4)] {
            let r = run(seed, 128 * 1024, link(loss, jitter), false);
            for a in &r.audit {
                assert_eq!(a.wrong_payload, 0);
                assert_eq!(a.rst, 0, "orderly close");
            }
        }
    }
}

#[test]
fn record_mode_is_header_aligned_and_commits_out_of_order() {
    let mut ooo = 0;
    for seed in 0..6 {
        let r = run(seed, 256 * 1024, link(0.02, 3), true);
        for (side, a) in r.audit.iter().enumerate() {
            assert_eq!(a.wrong_payload, 0);
            assert!(a.first_tx > 0);
            // MPA §5.3: every first transmission and retransmission is header-aligned, except the
            // counted exceptions (none expected here: records <= EMSS, large windows).
            assert!(
                a.first_tx_unaligned + a.retx_unaligned <= r.exceptions[side],
                "seed {seed} side {side}: {a:?} exceptions {}",
                r.exceptions[side]
            );
            assert_eq!(
                a.retx_reshaped, 0,
                "retransmissions keep the original boundaries (MPA-61)"
            );
        }
        ooo += r.ooo;
    }
    assert!(ooo > 0, "out-of-order commits reached the application");
}

#[test]
fn transport_reports_state_and_stats() {
    let t = ours(SimRole::Client, 1, false);
    assert_eq!(t.state(), netsim::ConnState::Opening);
    assert_eq!(
        t.send_space(),
        0,
        "nothing can be queued before the connection opens"
    );
}
