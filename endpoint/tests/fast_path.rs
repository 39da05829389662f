//! The fast path is a shortcut to the full path's result: the same traffic (MPA startup, then
//! Sends, RDMA Writes and RDMA Reads of 1 octet to 1 MiB, markers off and on, over links that
//! lose 1 % and reorder 25 % of the frames, fixed seeds) run with the fast path on and forced off
//! (`EndpointConfig::tcp.fast_path`) puts every frame on the wire the same, in the same order,
//! at the same virtual time, places the same octets, completes the same work and reports the
//! same events and counters.

mod pair;

use std::time::Duration;

use ddp::{Access, WcStatus, WorkRequest};
use endpoint::{EndpointCounters, EndpointEvent};
use pair::*;

/// A frame put on a wire: A to B or B to A, when (since the pair's start), its octets.
type Frame = (bool, Duration, Vec<u8>);

/// What one run showed.
struct Run {
    frames: Vec<Frame>,
    /// Every region written into, in order, as it ended.
    regions: Vec<Vec<u8>>,
    events: [Vec<EndpointEvent>; 2],
    completions: [Vec<String>; 2],
    counters: [EndpointCounters; 2],
}

fn lossy() -> LinkConfig {
    link()
        .with_loss(0.01)
        .with_reorder(0.25, Duration::from_micros(300))
}

/// One connection: a Send, a Write and a Read of each size.
fn one_connection(p: &mut Pair, markers: bool) -> Vec<ddp::RegionHandle> {
    let (ca, cb) = p.establish(4000, settings(markers, true), settings(markers, true));
    let mut written = Vec::new();
    for (i, len) in [1usize, 1000, 5000, 70_000, 1 << 20]
        .into_iter()
        .enumerate()
    {
        written.extend(transfer_all(p, ca, cb, len, i as u64 + 1));
    }
    written
}

/// Two connections whose frames interleave: Sends posted on both at once, so that the
/// receive path's last-flow entry is hit by a run of one connection's frames and missed at
/// every switch to the other.
fn two_connections(p: &mut Pair, markers: bool) -> Vec<ddp::RegionHandle> {
    let s = || settings(markers, true);
    let first = p.establish(4000, s(), s());
    let (ca2, _) = p.establish(4001, s(), s());
    let cb2 = *established_conns(&p.events_b)
        .last()
        .expect("second connection");
    let mut written = Vec::new();
    for (i, len) in [64usize, 3000, 64, 20_000].into_iter().enumerate() {
        let mut ids = Vec::new();
        for (k, (ca, cb)) in [first, (ca2, cb2)].into_iter().enumerate() {
            let id = (i * 2 + k) as u64 * 10 + 100;
            let (src, _) = filled(&mut p.a, &pattern(len, id), Access::LOCAL_WRITE);
            let (dst, _) = p.b.register(len, Access::LOCAL_WRITE);
            p.b.post(cb, WorkRequest::recv(id + 1, buf(dst, len)))
                .unwrap();
            p.a.post(
                ca,
                WorkRequest::send(id + 2, buf(src, len), Default::default()),
            )
            .unwrap();
            written.push(dst);
            ids.push(id);
        }
        for id in ids {
            assert_eq!(p.wait_wc(false, id + 1).status, WcStatus::Success);
            assert_eq!(p.wait_wc(true, id + 2).status, WcStatus::Success);
        }
    }
    written
}

fn run(
    fast: bool,
    markers: bool,
    seed: u64,
    traffic: fn(&mut Pair, bool) -> Vec<ddp::RegionHandle>,
) -> Run {
    let mut cfg_a = endpoint_cfg(MAC_A, IP_A, MAC_B);
    let mut cfg_b = endpoint_cfg(MAC_B, IP_B, MAC_A);
    cfg_a.tcp.fast_path = fast;
    cfg_b.tcp.fast_path = fast;
    let mut p = Pair::with_configs(cfg_a, cfg_b, lossy(), lossy(), seed);
    p.ab.log = Some(Vec::new());
    p.ba.log = Some(Vec::new());
    let written = traffic(&mut p, markers);
    let regions = written
        .iter()
        .map(|&h| {
            let r = p.a.region(h).or_else(|| p.b.region(h)).expect("region");
            r.to_vec()
        })
        .collect();
    let show = |v: &[(endpoint::ConnId, ddp::WorkCompletion)]| {
        v.iter().map(|c| format!("{c:?}")).collect::<Vec<_>>()
    };
    let base = p.base;
    let log = |w: &mut Wire, a_to_b: bool| {
        let frames = w.log.take().unwrap_or_default();
        frames.into_iter().map(move |(t, f)| (a_to_b, t - base, f))
    };
    let mut frames: Vec<Frame> = log(&mut p.ab, true).collect();
    frames.extend(log(&mut p.ba, false));
    Run {
        frames,
        regions,
        events: [p.events_a.clone(), p.events_b.clone()],
        completions: [show(&p.wc_a), show(&p.wc_b)],
        counters: [p.a.counters(), p.b.counters()],
    }
}

#[test]
fn fast_path_on_and_off_give_the_same_frames_placements_and_completions() {
    for (markers, seed) in [(false, 11), (true, 12), (false, 13)] {
        // Both ends send (the Reads' responses come from B): both place on the fast path
        // and both retransmit.
        same_on_both_paths(markers, seed, one_connection, [true, true]);
    }
}

/// The same with two connections' frames interleaved (the fast path's last-flow entry met
/// by both connections in turn).
#[test]
fn fast_path_on_and_off_agree_with_two_connections_interleaved() {
    for (markers, seed) in [(false, 21), (true, 22)] {
        // Only A sends: B places, A retransmits.
        same_on_both_paths(markers, seed, two_connections, [false, true]);
    }
}

/// Runs `traffic` with the fast path on and off and asserts the same frames, placements,
/// events, completions and counters (the fast path's own counts apart). `receives[side]`:
/// that side (A, B) receives messages, so it places ULPDUs on the fast path; the other one
/// sends them and so retransmits over the lossy link.
fn same_on_both_paths(
    markers: bool,
    seed: u64,
    traffic: fn(&mut Pair, bool) -> Vec<ddp::RegionHandle>,
    receives: [bool; 2],
) {
    let fast = run(true, markers, seed, traffic);
    let full = run(false, markers, seed, traffic);
    let case = format!("markers {markers}, seed {seed}");
    if let Some(i) = fast
        .frames
        .iter()
        .zip(&full.frames)
        .position(|(f, s)| f != s)
    {
        panic!(
            "{case}: frame {i} differs:\nfast {:?}\nfull {:?}",
            fast.frames[i], full.frames[i]
        );
    }
    assert_eq!(fast.frames.len(), full.frames.len(), "{case}");
    assert!(fast.regions == full.regions, "{case}: placed octets differ");
    assert_eq!(fast.events, full.events, "{case}");
    assert_eq!(fast.completions, full.completions, "{case}");
    for side in 0..2 {
        let (f, s) = (fast.counters[side], full.counters[side]);
        assert!(
            f.rx_segments_fast > 0
                && f.tx_segments_fast > 0
                && (f.rx_ulpdus_fast > 0 || !receives[side]),
            "{case}: {f:?}"
        );
        let s_fast = s.rx_segments_fast + s.tx_segments_fast + s.rx_ulpdus_fast;
        assert_eq!(s_fast, 0, "{case}: {s:?}");
        let strip = |c: EndpointCounters| EndpointCounters {
            rx_segments_fast: 0,
            tx_segments_fast: 0,
            rx_ulpdus_fast: 0,
            ..c
        };
        assert_eq!(strip(f), strip(s), "{case}");
        // The link lost and reordered: both paths met the out-of-order cases.
        let sends = !receives[side] || receives == [true, true];
        assert!(f.retransmissions > 0 || !sends, "{case}: {f:?}");
    }
}
