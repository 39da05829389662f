//! The fast path is a shortcut to the full path's result: the same bulk transfers (both ways, in
//! every data mode, over clean, lossy, reordering and hostile links, fixed seeds) run with
//! `Config::fast_path` on and off put exactly the same packets on the link at the same virtual
//! times, and hand up the same octets.

mod common;

use std::cell::RefCell;
use std::rc::Rc;

use common::ours::{Mode, OursOptions, OursTransport, Passive};
use common::{describe_segment, link_case, stream_seed, SimRole};
use netsim::{BulkApp, BulkConfig, ClosePolicy, Host, RecordPlan, Sim, SimSide, SimTime};
use tcp_offload::{Config, TcpCounters};

/// A packet on the link: who sent it, when, its octets.
type Packet = (SimSide, SimTime, Vec<u8>);

/// One run: every packet, and the counters of A and B.
struct Trace {
    packets: Vec<Packet>,
    counters: [TcpCounters; 2],
}

fn run(seed: u64, mode: Mode, case: &str, fast_path: bool) -> Trace {
    let opts = OursOptions {
        cfg: Config {
            fast_path,
            ..Config::default()
        },
        mode,
        passive: Passive::Connection,
        ..OursOptions::default()
    };
    let a = OursTransport::new(SimRole::Client, seed, &opts).expect("valid TCP settings");
    let b = OursTransport::new(SimRole::Server, seed + 1, &opts).expect("valid TCP settings");
    let len = 300 << 10;
    let (sa, sb) = (stream_seed(seed, SimSide::A), stream_seed(seed, SimSide::B));
    let mut ca = BulkConfig::new(len, sa, len, sb).with_close(ClosePolicy::AfterReceiving);
    let mut cb = BulkConfig::new(len, sb, len, sa).with_close(ClosePolicy::AfterPeerClose);
    if mode != Mode::Bytes {
        // Records the size of FPDUs whose ULPDUs fit the EMSS (1448 with timestamps).
        let mulpdu = 1448 - 6;
        ca = ca.with_records(RecordPlan::fpdus(sa ^ 0x5eed, mulpdu, len));
        cb = cb.with_records(RecordPlan::fpdus(sb ^ 0x5eed, mulpdu, len));
    }
    let (ha, hb) = (
        Host::new(a, BulkApp::new(ca)),
        Host::new(b, BulkApp::new(cb)),
    );
    let link = link_case(case);
    let mut sim = Sim::new(seed, ha, hb, link.clone(), link).expect("link");
    let packets: Rc<RefCell<Vec<Packet>>> = Rc::default();
    let tap = Rc::clone(&packets);
    sim.add_tap(move |side, now, p| tap.borrow_mut().push((side, now, p.to_vec())));
    if let Err(e) = sim.run() {
        panic!("{mode:?} {case} fast path {fast_path}: {e:?}");
    }
    // Every octet arrived, as sent (the apps verify the streams).
    let verified = [
        sim.a.app.verify_stats().bytes,
        sim.b.app.verify_stats().bytes,
    ];
    assert_eq!(verified, [len, len], "{mode:?} {case}");
    let counters = |t: &OursTransport| t.connection().map(|c| *c.counters()).unwrap_or_default();
    let p = packets.borrow().clone();
    Trace {
        packets: p,
        counters: [counters(&sim.a.transport), counters(&sim.b.transport)],
    }
}

#[test]
fn fast_path_on_and_off_emit_the_same_packets() {
    for mode in [Mode::Bytes, Mode::OwnedRecords, Mode::ExternalRecords] {
        for (case, seed) in [("clean", 1), ("loss1", 2), ("reorder", 3), ("hostile", 4)] {
            let fast = run(seed, mode, case, true);
            let full = run(seed, mode, case, false);
            let first_difference = fast
                .packets
                .iter()
                .zip(&full.packets)
                .position(|(f, s)| f != s);
            if let Some(i) = first_difference {
                let show = |t: &Trace| {
                    let (side, at, p) = &t.packets[i];
                    format!("{side:?} at {at}: {}", describe_segment(p))
                };
                panic!(
                    "{mode:?} {case}: packet {i} differs: fast {} / full {}",
                    show(&fast),
                    show(&full)
                );
            }
            assert_eq!(fast.packets.len(), full.packets.len(), "{mode:?} {case}");
            // The fast path was taken (in and out), and only when on; the other counters agree.
            let strip = |mut c: TcpCounters| {
                c.segs_in_fast = 0;
                c.segs_out_fast = 0;
                c
            };
            for side in 0..2 {
                let (f, s) = (fast.counters[side], full.counters[side]);
                assert!(f.segs_in_fast > 0, "{mode:?} {case}: no segment predicted");
                assert!(f.segs_out_fast > 0, "{mode:?} {case}: no segment templated");
                assert_eq!(s.segs_in_fast + s.segs_out_fast, 0, "{mode:?} {case}");
                assert_eq!(strip(f), strip(s), "{mode:?} {case}");
            }
        }
    }
}

/// Two connections A -> B, established by the same exchange (the same ISNs), the fast path
/// as given.
fn established(fast_path: bool) -> (tcp_offload::Connection, tcp_offload::Connection) {
    use tcp_offload::{Connection, FourTuple, IsnGenerator, State, Timestamp};
    let t0 = Timestamp::ZERO;
    let cfg = Config {
        fast_path,
        ..Config::default()
    };
    let g = IsnGenerator::new([3; 16], t0);
    let t = FourTuple {
        local: "198.18.0.1:40000".parse().unwrap(),
        remote: "198.18.0.2:5000".parse().unwrap(),
    };
    let mut a = Connection::connect(cfg.clone(), t, &g, t0).expect("valid TCP settings");
    let mut b = Connection::listen(cfg, t.remote, &g, t0).expect("valid TCP settings");
    netsim::exchange(&mut a, &mut b, t0, 4);
    assert_eq!(
        (a.state(), b.state()),
        (State::Established, State::Established)
    );
    (a, b)
}

#[test]
fn a_buffer_too_short_for_the_bulk_segment_changes_nothing() {
    let t0 = tcp_offload::Timestamp::ZERO;
    let data = testkit::pattern(4000, 11);
    let mut frames = Vec::new();
    for (fast_path, refuse_first) in [(true, true), (true, false), (false, true)] {
        let (mut a, _b) = established(fast_path);
        a.send(&data).unwrap();
        if refuse_first {
            // Too short for the headers and one octet of data: the segment cannot be written.
            let mut short = [0u8; 60];
            assert_eq!(
                a.poll_transmit(t0, &mut short),
                None,
                "fast path {fast_path}"
            );
        }
        let mut out = Vec::new();
        let mut buf = [0u8; 2048];
        while let Some(n) = a.poll_transmit(t0, &mut buf) {
            out.push(buf[..n].to_vec());
        }
        assert!(
            out.len() >= 2,
            "fast path {fast_path}: {} segments",
            out.len()
        );
        let fast_segments = a.counters().segs_out_fast;
        assert_eq!(fast_segments > 0, fast_path, "fast path {fast_path}");
        let strip = |mut c: TcpCounters| {
            c.segs_out_fast = 0;
            c
        };
        frames.push((out, strip(*a.counters())));
    }
    // The refused call left no trace: the same segments and counters as without it, and as
    // the general way writes them.
    assert_eq!(frames[0], frames[1]);
    assert_eq!(frames[0], frames[2]);
}
