//! Raw Ethernet/IPv4/TCP frames bounced between two AF_XDP sockets across a veth pair (the
//! groundwork of the bench's `raw_lat`). Root; under `CI=true` this must run.
#![cfg(target_os = "linux")]

use std::thread;
use std::time::Duration;

use dataplane::xdp::raw::{raw_echo, raw_ping_pong, PingPongConfig, RawEndpoint};
use dataplane::xdp::testbed::{for_test, Side};
use dataplane::xdp::{resolve_next_hop, AttachPolicy, PortKind, XdpProgram, XskConfig, XskQueue};

const PORT: u16 = 18515;
const ROUNDS: u32 = 200;

#[test]
fn raw_ping_pong_over_af_xdp() {
    let Some(tb) = for_test("raw") else { return };
    // Both ends: native XDP steering PORT into an AF_XDP socket on queue 0.
    let setup = |side: Side| {
        let ifname = tb.ifname(side);
        let prog = XdpProgram::attach(ifname, AttachPolicy::NativeOnly).unwrap();
        let q = XskQueue::new(ifname, 0, XskConfig::default()).unwrap();
        prog.register_socket(0, q.fd()).unwrap();
        prog.steer_port(PORT, PortKind::Listen).unwrap();
        (prog, q)
    };
    let (prog_b, mut q_b) = {
        let _b = tb.enter(Side::B).unwrap();
        setup(Side::B)
    };
    let _a = tb.enter(Side::A).unwrap();
    let (prog_a, mut q_a) = setup(Side::A);
    let hop = resolve_next_hop(tb.ip(Side::B).into(), Duration::from_secs(3)).unwrap();
    let cfg = PingPongConfig {
        local: RawEndpoint {
            mac: hop.src_mac,
            ip: tb.ip(Side::A),
            port: PORT,
        },
        remote: RawEndpoint {
            mac: hop.dst_mac,
            ip: tb.ip(Side::B),
            port: PORT,
        },
        payload_len: 64,
        iterations: ROUNDS,
        reply_timeout: Duration::from_secs(2),
        busy_poll: false,
    };
    let echo = thread::spawn(move || {
        raw_echo(&mut q_b, u64::from(ROUNDS), Duration::from_secs(30), false)
    });
    let report = raw_ping_pong(&mut q_a, &cfg).expect("every ping comes back");
    let echoed = echo.join().unwrap().unwrap();
    assert_eq!(report.rtts.len(), ROUNDS as usize);
    assert_eq!(echoed, u64::from(ROUNDS));
    // Every round trip crossed both XDP programs as redirects, never the kernels.
    assert!(prog_a.counters().unwrap().redirected >= u64::from(ROUNDS));
    assert!(prog_b.counters().unwrap().redirected >= u64::from(ROUNDS));
    println!(
        "raw AF_XDP ping-pong, 64 B payload, {ROUNDS} rounds: min {:?} median {:?} p99 {:?}",
        report.quantile(0.0).unwrap(),
        report.quantile(0.5).unwrap(),
        report.quantile(0.99).unwrap()
    );
    drop(prog_b);
}
