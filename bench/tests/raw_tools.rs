//! The raw AF_XDP tools of `raw_lat` and `raw_bw` (`bench::raw`): Ethernet/IPv4/TCP frames
//! bounced between two AF_XDP sockets across a veth pair, and a flood counted by a sink. Root;
//! under `CI=true` this must run.
#![cfg(target_os = "linux")]

use std::thread;
use std::time::Duration;

use afxdp::{
    resolve_next_hop, steered_queue, AttachPolicy, BusyPoll, PortKind, XdpProgram, XskConfig,
    XskQueue,
};
use bench::raw::{
    raw_echo, raw_flood, raw_ping_pong, raw_sink, raw_sink_report, PingPongConfig, PingPongReport,
};
use testbed::tcp_frame::RawEndpoint;
use testbed::{for_test, Side, VethTestbed};
use testkit::or_skip;

const PORT: u16 = 18515;
const ROUNDS: u32 = 200;

/// The steering program on `side`'s veth end (native XDP) and an AF_XDP socket made with `xsk`
/// on queue 0, the test port steered to it.
fn steered(tb: &VethTestbed, side: Side, xsk: XskConfig) -> (XdpProgram, XskQueue) {
    let _ns = tb.enter(side).unwrap();
    steered_queue(
        tb.ifname(side),
        0,
        AttachPolicy::NativeOnly,
        xsk,
        &[(PORT, PortKind::Listen)],
    )
    .unwrap()
}

/// A ping-pong of `rounds` 64-byte frames from A to an echo on B, both ends steered by native
/// XDP into AF_XDP sockets made with `xsk`; returns the report, the echo count and how many
/// frames each end's program redirected.
fn ping_pong(
    tb: &VethTestbed,
    xsk: XskConfig,
    rounds: u32,
    busy_poll: bool,
) -> (PingPongReport, u64, [u64; 2]) {
    let (prog_b, mut q_b) = steered(tb, Side::B, xsk);
    let (prog_a, mut q_a) = steered(tb, Side::A, xsk);
    let _a = tb.enter(Side::A).unwrap();
    let hop = resolve_next_hop(tb.ip(Side::B).into(), Duration::from_secs(3)).unwrap();
    let (local, remote) = RawEndpoint::pair_from_hop(&hop, PORT, tb.ip(Side::B), PORT).unwrap();
    let cfg = PingPongConfig {
        local,
        remote,
        payload_len: 64,
        iterations: rounds,
        reply_timeout: Duration::from_secs(2),
        busy_poll,
    };
    let echo = thread::spawn(move || {
        raw_echo(
            &mut q_b,
            u64::from(rounds),
            Duration::from_secs(30),
            busy_poll,
        )
    });
    let report = raw_ping_pong(&mut q_a, &cfg).expect("every ping comes back");
    let echoed = echo.join().unwrap().unwrap();
    let redirected = [&prog_a, &prog_b].map(|p| p.counters().unwrap().redirected);
    (report, echoed, redirected)
}

#[test]
fn raw_ping_pong_over_af_xdp() {
    let Some(tb) = or_skip("raw", for_test("raw")) else {
        return;
    };
    let (report, echoed, redirected) = ping_pong(&tb, XskConfig::default(), ROUNDS, false);
    assert_eq!(report.rtts.len(), ROUNDS as usize);
    assert_eq!(echoed, u64::from(ROUNDS));
    // Every round trip crossed both XDP programs as redirects, never the kernels.
    assert!(
        redirected.iter().all(|&r| r >= u64::from(ROUNDS)),
        "{redirected:?}"
    );
    println!(
        "raw AF_XDP ping-pong, 64 B payload, {ROUNDS} rounds: min {:?} median {:?} p99 {:?}",
        report.quantile(0.0).unwrap(),
        report.quantile(0.5).unwrap(),
        report.quantile(0.99).unwrap()
    );
}

/// One-way flood over raw AF_XDP frames (the groundwork of `raw_bw`): what arrives is counted,
/// never more than was sent, and the steering counters agree.
#[test]
fn raw_flood_is_counted_by_the_sink() {
    let Some(tb) = or_skip("rbw", for_test("rbw")) else {
        return;
    };
    const FRAMES: u64 = 20_000;
    const PAYLOAD: usize = 1024;
    let (prog_b, mut q_b) = {
        let _b = tb.enter(Side::B).unwrap();
        steered_queue(
            tb.ifname(Side::B),
            0,
            AttachPolicy::NativeOnly,
            XskConfig::default(),
            &[(PORT, PortKind::Listen)],
        )
        .unwrap()
    };
    let _a = tb.enter(Side::A).unwrap();
    let mut q_a = XskQueue::new(tb.ifname(Side::A), 0, XskConfig::default()).unwrap();
    let hop = resolve_next_hop(tb.ip(Side::B).into(), Duration::from_secs(3)).unwrap();
    let (local, remote) = RawEndpoint::pair_from_hop(&hop, PORT, tb.ip(Side::B), PORT).unwrap();
    let sink = thread::spawn(move || raw_sink(&mut q_b, FRAMES, Duration::from_secs(5), false));
    let sent = raw_flood(
        &mut q_a,
        &local,
        &remote,
        PAYLOAD,
        FRAMES,
        Duration::from_secs(20),
    )
    .unwrap();
    let got = sink.join().unwrap().unwrap();
    assert_eq!(sent.frames, FRAMES);
    assert!(
        got.frames > 0 && got.frames <= sent.frames,
        "{got:?} of {sent:?}"
    );
    assert_eq!(got.bytes, got.frames * (54 + PAYLOAD) as u64);
    assert!(prog_b.counters().unwrap().redirected >= got.frames);
    let secs = got.elapsed.as_secs_f64().max(1e-9);
    println!(
        "raw AF_XDP flood, {PAYLOAD} B payload: sent {} in {:?}, received {} ({:.0}%), {:.3} Mpps {:.2} Gbit/s at the sink",
        sent.frames,
        sent.elapsed,
        got.frames,
        100.0 * got.frames as f64 / sent.frames as f64,
        got.frames as f64 / secs / 1e6,
        got.bytes as f64 * 8.0 / secs / 1e9
    );
}

/// Jumbo MTU: with `XDP_USE_SG` a 9000-octet packet leaves as a chain of
/// 4 KiB frames, is steered whole by the `xdp.frags` program, arrives as a chain, is echoed as
/// one, and each end counts packets with the octets of all their frames.
#[test]
fn jumbo_packets_travel_as_chains_of_frames() {
    let Some(tb) = or_skip("rjb", for_test("rjb")) else {
        return;
    };
    tb.set_mtu(9000).unwrap();
    const PACKETS: u64 = 300;
    const PAYLOAD: usize = 9000 - 40;
    let xsk = XskConfig {
        frame_size: 4096,
        multi_buffer: true,
        ..XskConfig::default()
    };
    let (prog_b, mut q_b) = steered(&tb, Side::B, xsk);
    let (_prog_a, mut q_a) = steered(&tb, Side::A, xsk);
    assert!(q_a.is_multi_buffer() && q_a.max_packet() >= 9014);
    let _a = tb.enter(Side::A).unwrap();
    let hop = resolve_next_hop(tb.ip(Side::B).into(), Duration::from_secs(3)).unwrap();
    let (local, remote) = RawEndpoint::pair_from_hop(&hop, PORT, tb.ip(Side::B), PORT).unwrap();
    let echo = thread::spawn(move || raw_echo(&mut q_b, u64::MAX, Duration::from_secs(3), false));
    let t = Duration::from_secs(10);
    let sent = raw_flood(&mut q_a, &local, &remote, PAYLOAD, PACKETS, t).unwrap();
    assert_eq!(sent.frames, PACKETS);
    // The echoes wait in A's rings (300 chains of 3 frames fit); count them.
    let back = raw_sink(&mut q_a, PACKETS, Duration::from_secs(2), false).unwrap();
    let echoed_frames = echo.join().unwrap().unwrap();
    assert!(back.frames > 0 && back.frames <= PACKETS, "{back:?}");
    assert_eq!(back.bytes, back.frames * (54 + PAYLOAD) as u64, "{back:?}");
    // 9014 octets over frames of 4096 - 256: three frames a packet.
    assert!(echoed_frames >= 3 * back.frames, "{echoed_frames} {back:?}");
    assert!(prog_b.counters().unwrap().redirected >= back.frames);
    assert_eq!(prog_b.counters().unwrap().malformed, 0);
}

/// `raw_bw` reports what arrived: the client asks the sink after each run and gets the
/// receiver's count for that run alone (a repeated request gets the same answer); the sink's
/// total is the sum of its answers.
#[test]
fn raw_sink_reports_what_arrived_per_run() {
    let Some(tb) = or_skip("rrp", for_test("rrp")) else {
        return;
    };
    let (_prog_b, mut q_b) = steered(&tb, Side::B, XskConfig::default());
    let (_prog_a, mut q_a) = steered(&tb, Side::A, XskConfig::default());
    let _a = tb.enter(Side::A).unwrap();
    let hop = resolve_next_hop(tb.ip(Side::B).into(), Duration::from_secs(3)).unwrap();
    let (local, remote) = RawEndpoint::pair_from_hop(&hop, PORT, tb.ip(Side::B), PORT).unwrap();
    let sink = thread::spawn(move || raw_sink(&mut q_b, u64::MAX, Duration::from_secs(2), false));
    let t = Duration::from_secs(10);
    let first = raw_flood(&mut q_a, &local, &remote, 512, 10_000, t).unwrap();
    let r1 = raw_sink_report(&mut q_a, &local, &remote, 1, t).unwrap();
    let again = raw_sink_report(&mut q_a, &local, &remote, 1, t).unwrap();
    let second = raw_flood(&mut q_a, &local, &remote, 512, 5_000, t).unwrap();
    let r2 = raw_sink_report(&mut q_a, &local, &remote, 2, t).unwrap();
    let total = sink.join().unwrap().unwrap();
    assert!(
        r1.frames > 0 && r1.frames <= first.frames,
        "{r1:?} of {first:?}"
    );
    assert_eq!(again, r1, "a repeated request gets the same answer");
    assert!(
        r2.frames > 0 && r2.frames <= second.frames,
        "{r2:?} of {second:?}"
    );
    assert_eq!(r1.bytes, r1.frames * (54 + 512) as u64);
    assert_eq!(
        total.frames,
        r1.frames + r2.frames,
        "{total:?} = {r1:?} + {r2:?}"
    );
    assert!(r1.elapsed > Duration::ZERO);
}

/// Copy mode on a kernel with `XDP_MAX_TX_SKB_BUDGET` (6.17+): one kick may move the whole tx
/// ring (2048 frames), not 32; older kernels keep 32.
#[test]
fn copy_mode_takes_the_whole_ring_per_kick_where_the_kernel_allows() {
    let Some(tb) = or_skip("rtb", for_test("rtb")) else {
        return;
    };
    let _a = tb.enter(Side::A).unwrap();
    let q = XskQueue::new(tb.ifname(Side::A), 0, XskConfig::default()).unwrap();
    assert!(!q.is_zero_copy());
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut v = release.trim().split(|c: char| !c.is_ascii_digit());
    let major: u32 = v.next().unwrap().parse().unwrap();
    let minor: u32 = v.next().unwrap().parse().unwrap();
    let expected = if (major, minor) >= (6, 17) { 2048 } else { 32 };
    assert_eq!(q.tx_budget(), expected, "kernel {release}");
}

/// Options for real NICs, on veth: with the busy-poll socket options set on
/// both ends, frames still make the round trip; a UMEM on huge pages opens where enough are
/// free and otherwise fails naming the remedy (this VM reserves none: the second branch).
#[test]
fn busy_poll_and_huge_page_options() {
    let Some(tb) = or_skip("rbp", for_test("rbp")) else {
        return;
    };
    let busy = XskConfig {
        busy_poll: Some(BusyPoll::default()),
        ..XskConfig::default()
    };
    let (report, echoed, _) = ping_pong(&tb, busy, 50, true);
    assert_eq!(report.rtts.len(), 50);
    assert_eq!(echoed, 50);

    let huge = XskConfig {
        huge_pages: true,
        ..XskConfig::default()
    };
    let need_pages = (u64::from(huge.frame_count) * u64::from(huge.frame_size)).div_ceil(2 << 20);
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let free_pages: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("HugePages_Free:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    match XskQueue::new(tb.ifname(Side::A), 0, huge) {
        Ok(q) => assert!(
            free_pages >= need_pages,
            "opened without free huge pages: {q:?}"
        ),
        Err(e) => {
            assert!(free_pages < need_pages, "{free_pages} pages free, yet: {e}");
            assert!(e.to_string().contains("--hugepages"), "{e}");
        }
    }
}
