//! Multi-queue AF_XDP devices: one engine (lane) per receive queue behind one
//! XDP program. On a two-queue veth pair: queue pairs spread over the lanes, a listener accepts
//! on every lane, data is verified byte for byte; between two xwarp ends no packet crosses
//! lanes (each end transmits a flow on its owner's queue), and packets a kernel peer sends on
//! the wrong queue are handed to their owner.

mod veth_device;
use veth_device::open_xdp_on_queues;

use std::net::{SocketAddr, SocketAddrV4};
use std::time::Duration;

use afxdp::rss;
use dataplane::{
    Access, CompletionQueue, ConnectionConfig, Device, EngineMode, Listener, Status, XdpConfig,
};
use testbed::{available, Side, VethTestbed};
use testkit::{or_skip, pattern};

const T: Duration = Duration::from_secs(30);
const LEN: usize = 256 << 10;
/// Queue pairs per test: each lane gets half of them (round robin).
const QPS: usize = 4;

fn two_queue_testbed(tag: &str) -> Option<VethTestbed> {
    or_skip(
        tag,
        available().map(|()| {
            VethTestbed::create_with_queues(tag, 2).expect("create a two-queue veth testbed")
        }),
    )
}

fn wait_ok(cq: &CompletionQueue, what: &str) {
    let c = cq
        .wait(T)
        .unwrap_or_else(|| panic!("no completion for {what}"));
    assert_eq!(c.status, Status::Success, "{what}: {c:?}");
}

/// Accepts `QPS` connections on `listener`; on each, one Send of `LEN` octets is received and
/// verified.
fn serve(dev: Device, listener: Listener) {
    let mut served = Vec::new();
    for i in 0..QPS {
        let (qi, cq) = dev.qp_init();
        let buf = qi.pd.register(LEN, Access::LOCAL_WRITE).unwrap();
        let inc = listener.accept_timeout(T).expect("an MPA Request");
        let qp = inc
            .accept_with(qi, b"", |qp| qp.post_recv(1, &buf, 0..LEN))
            .unwrap();
        served.push((qp, cq, buf, i));
    }
    for (qp, cq, buf, i) in served {
        wait_ok(&cq, &format!("receive {i}"));
        let mut got = vec![0u8; LEN];
        buf.read(0, &mut got).unwrap();
        // Each client sends its own pattern; which one arrived on which accept is not fixed.
        assert!(
            (0..QPS as u8).any(|s| got == pattern(LEN, u64::from(s) + 10)),
            "queue pair {i}: data differs"
        );
        qp.close();
    }
}

/// `client` connects `QPS` queue pairs to `server_at` and sends each one pattern.
fn send_from(client: &Device, tb: &VethTestbed, side: Side, server_at: SocketAddr) {
    let cfg = ConnectionConfig::default();
    let mut qps = Vec::new();
    for i in 0..QPS {
        let (qi, cq) = client.qp_init();
        let qp = {
            let _ns = tb.enter(side).unwrap();
            client
                .connect(server_at, qi.clone(), &cfg, b"")
                .expect("connect")
        };
        let src = qi
            .pd
            .register_from(&pattern(LEN, i as u64 + 10), Access::LOCAL_WRITE)
            .unwrap();
        qp.post_send(1, &src, 0..LEN).unwrap();
        qps.push((qp, cq, src));
    }
    for (i, (qp, cq, _src)) in qps.into_iter().enumerate() {
        wait_ok(&cq, &format!("send {i}"));
        qp.close();
    }
}

/// Both lanes of `dev` received and sent frames.
fn both_lanes_busy(dev: &Device, who: &str) {
    let lanes = dev.lane_counters();
    assert_eq!(lanes.len(), 2, "{who}");
    for (i, c) in lanes.iter().enumerate() {
        assert!(
            c.rx_packets > 0 && c.tx_packets > 0,
            "{who} lane {i} idle: {c:?}"
        );
        assert_eq!(c.malformed + c.rsts_for_unknown, 0, "{who} lane {i}: {c:?}");
    }
}

#[test]
fn two_lanes_at_both_ends_share_the_queue_pairs_and_hand_nothing_over() {
    both_ends("vql", EngineMode::Threaded);
}

#[test]
fn two_inline_lanes_at_both_ends() {
    both_ends("vqi", EngineMode::Inline);
}

fn both_ends(tag: &str, mode: EngineMode) {
    let Some(tb) = two_queue_testbed(tag) else {
        return;
    };
    let a = open_xdp_on_queues(&tb, Side::A, mode, 2);
    let b = open_xdp_on_queues(&tb, Side::B, mode, 2);
    assert_eq!(a.xdp_info().unwrap().queues, 2);
    // veth reports no RSS: the lanes own flows by the symmetric hash (LaneSteering::Auto).
    assert!(!a.xdp_info().unwrap().lanes_follow_rss);
    let at = SocketAddr::V4(SocketAddrV4::new(tb.ip(Side::B), 4120));
    let listener = b.listen(at, ConnectionConfig::default()).unwrap();
    let b2 = b.clone();
    let server = std::thread::spawn(move || serve(b2, listener));
    send_from(&a, &tb, Side::A, at);
    server.join().expect("server");
    both_lanes_busy(&a, "client");
    both_lanes_busy(&b, "server");
    // The same lane count at both ends: a flow's packets leave on its owner's queue and veth
    // delivers them on the same queue at the other end, where the same lane owns the flow.
    assert_eq!(a.lane_handoffs().unwrap().handed, 0);
    assert_eq!(b.lane_handoffs().unwrap().handed, 0);
}

#[test]
fn packets_a_kernel_peer_sends_on_one_queue_reach_the_lane_that_owns_them() {
    kernel_peer_on_one_queue("vqk", EngineMode::Threaded);
}

/// Inline: a completion queue drives its own queue pairs' lane, and the other lanes now and
/// then, where its flows' packets may have arrived.
#[test]
fn inline_lanes_get_packets_that_arrived_on_another_lane() {
    kernel_peer_on_one_queue("vqj", EngineMode::Inline);
}

fn kernel_peer_on_one_queue(tag: &str, mode: EngineMode) {
    let Some(tb) = two_queue_testbed(tag) else {
        return;
    };
    tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
    // The kernel peer transmits everything on queue 0 (XPS: every CPU on tx-0, none on tx-1):
    // the segments of flows that lane 1 owns arrive on lane 0's queue.
    let ifname = tb.ifname(Side::B).to_owned();
    let cpus = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(32);
    let all = format!("{:x}", (1u64 << cpus) - 1);
    let xps = format!(
        "echo {all} > /sys/class/net/{ifname}/queues/tx-0/xps_cpus && \
         echo 0 > /sys/class/net/{ifname}/queues/tx-1/xps_cpus"
    );
    let out = tb.exec(Side::B, &["sh", "-c", &xps]).expect("set XPS");
    assert!(out.status.success(), "{out:?}");

    let x = open_xdp_on_queues(&tb, Side::A, mode, 2);
    let k = Device::open(dataplane::Transport::Kernel).unwrap();
    let at = SocketAddr::V4(SocketAddrV4::new(tb.ip(Side::B), 4121));
    let listener = {
        let _ns = tb.enter(Side::B).unwrap();
        k.listen(at, ConnectionConfig::default()).unwrap()
    };
    let k2 = k.clone();
    let server = std::thread::spawn(move || serve(k2, listener));
    // The xdp side connects: its active opens alternate between the lanes, each from a port
    // whose flow that lane owns, so half the flows are lane 1's.
    send_from(&x, &tb, Side::A, at);
    server.join().expect("server");
    both_lanes_busy(&x, "xdp");
    let h = x.lane_handoffs().unwrap();
    assert!(h.handed > 0, "{h:?}");
    assert_eq!(h.dropped, 0, "{h:?}");
}

#[test]
fn a_device_serves_one_to_64_queues() {
    let Some(tb) = two_queue_testbed("vqe") else {
        return;
    };
    let _ns = tb.enter(Side::A).unwrap();
    for bad in [0, 65] {
        let mut cfg = XdpConfig::new(tb.ifname(Side::A));
        cfg.bind = afxdp::BindMode::Copy;
        cfg.queues = bad;
        let e = Device::open_xdp(cfg).unwrap_err();
        assert!(
            matches!(e, dataplane::DeviceError::Queues(n) if n == bad),
            "{e}"
        );
    }
}

/// Which RSS a device has: veth's driver reports none (the lanes then use the symmetric
/// hash), and a missing interface is an error, not "no RSS".
#[test]
fn veth_reports_no_rss_and_a_missing_interface_is_an_error() {
    let Some(tb) = two_queue_testbed("vqr") else {
        return;
    };
    let _ns = tb.enter(Side::A).unwrap();
    assert_eq!(
        rss::read_rss(tb.ifname(Side::A)).unwrap(),
        Err(rss::NoRss::NotReported)
    );
    assert!(matches!(
        rss::read_rss("xwnosuch0"),
        Err(afxdp::XdpError::NoSuchInterface)
    ));
}

/// Stream sockets on two lanes: a listener on every lane accepts kernel clients (their packets
/// reach whichever queue their kernel picks; the owner lane gets them), `tcp_connect` goes to
/// the lanes in turn; every byte echoed and checked.
#[test]
fn stream_sockets_spread_over_the_lanes() {
    use std::io::{Read, Write};
    let Some(tb) = two_queue_testbed("vqs") else {
        return;
    };
    tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
    let x = open_xdp_on_queues(&tb, Side::A, EngineMode::Threaded, 2);
    let at = SocketAddr::V4(SocketAddrV4::new(tb.ip(Side::A), 4123));
    let listener = x
        .tcp_listen(at, dataplane::StreamConfig::default())
        .unwrap();
    const CLIENTS: usize = 6;
    let echo = std::thread::spawn(move || {
        for _ in 0..CLIENTS {
            let (mut s, _) = listener.accept_timeout(T).expect("a stream");
            let mut buf = vec![0u8; 64 << 10];
            s.read_exact(&mut buf).unwrap();
            s.write_all(&buf).unwrap();
        }
    });
    tb.run_in(Side::B, || {
        for i in 0..CLIENTS {
            let mut c = std::net::TcpStream::connect_timeout(&at, T).unwrap();
            c.set_read_timeout(Some(T)).unwrap();
            let data = pattern(64 << 10, 30 + i as u64);
            c.write_all(&data).unwrap();
            let mut back = vec![0u8; data.len()];
            c.read_exact(&mut back).unwrap();
            assert!(back == data, "client {i}: echo differs");
        }
    });
    echo.join().expect("echo side");
    // Active opens: a kernel listener in B, four streams from A, alternating lanes.
    let server = {
        let _ns = tb.enter(Side::B).unwrap();
        std::net::TcpListener::bind(SocketAddrV4::new(tb.ip(Side::B), 4124)).unwrap()
    };
    let echo = std::thread::spawn(move || {
        for _ in 0..4 {
            let (mut s, _) = server.accept().unwrap();
            let mut buf = vec![0u8; 16 << 10];
            s.read_exact(&mut buf).unwrap();
            s.write_all(&buf).unwrap();
        }
    });
    let to = SocketAddr::V4(SocketAddrV4::new(tb.ip(Side::B), 4124));
    for i in 0..4u64 {
        let mut s = {
            let _ns = tb.enter(Side::A).unwrap();
            x.tcp_connect(to, &dataplane::StreamConfig::default())
                .expect("tcp_connect")
        };
        let data = pattern(16 << 10, 50 + i);
        s.write_all(&data).unwrap();
        let mut back = vec![0u8; data.len()];
        s.read_exact(&mut back).unwrap();
        assert!(back == data, "stream {i}: echo differs");
    }
    echo.join().expect("kernel echo side");
    both_lanes_busy(&x, "streams");
}
