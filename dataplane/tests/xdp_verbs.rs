//! The verbs API on the `xdp` transport (`Device::open_xdp`): the same calls as the kernel
//! transport, the AF_XDP engine underneath. An xdp device in namespace A, a kernel device in
//! namespace B; each side listens once and connects once; Send, RDMA Write and RDMA Read of
//! 1 MiB are verified byte for byte, in inline and threaded engine mode, and the device's
//! counters move. Also: the engine pair on both ends through the verbs API.

mod veth_device;
use veth_device::open_xdp;

use std::net::{SocketAddr, SocketAddrV4};
use std::sync::mpsc;
use std::time::Duration;

use afxdp::program::attached;
use dataplane::{
    Access, CompletionQueue, ConnectionConfig, Device, DeviceError, EngineMode, Opcode, QpInit,
    QueuePair, RemoteAddr, Status, XdpConfig, XdpError,
};
use testbed::{for_test, Side, VethTestbed};
use testkit::or_skip;
use testkit::pattern;

const T: Duration = Duration::from_secs(30);
const LEN: usize = 1 << 20;

fn wait_ok(cq: &CompletionQueue, what: &str) -> dataplane::Completion {
    let c = cq
        .wait(T)
        .unwrap_or_else(|| panic!("no completion for {what}"));
    assert_eq!(c.status, Status::Success, "{what}: {c:?}");
    c
}

/// The active side: Send, Write and Read against the passive side's regions, all verified
/// by the passive side (Send, Write) or here (Read).
fn active_side(qp: &QueuePair, dev: &Device, pd: &QpInit, cq: &CompletionQueue, stags: (u32, u32)) {
    let src = pd
        .pd
        .register_from(&pattern(LEN, 1), Access::LOCAL_WRITE)
        .unwrap();
    let dst = pd.pd.register(LEN, Access::LOCAL_WRITE).unwrap();
    qp.post_send(1, &src, 0..LEN).unwrap();
    assert_eq!(wait_ok(cq, "send").opcode, Opcode::Send);
    qp.post_write(
        2,
        &src,
        0..LEN,
        RemoteAddr {
            stag: stags.0,
            to: 0,
        },
    )
    .unwrap();
    assert_eq!(wait_ok(cq, "write").opcode, Opcode::Write);
    qp.post_read(
        3,
        &dst,
        0..LEN,
        RemoteAddr {
            stag: stags.1,
            to: 0,
        },
    )
    .unwrap();
    let c = wait_ok(cq, "read");
    assert_eq!((c.opcode, c.byte_len as usize), (Opcode::Read, LEN));
    let mut got = vec![0u8; LEN];
    dst.read(0, &mut got).unwrap();
    assert!(got == pattern(LEN, 2), "RDMA Read data differs");
    // Tell the passive side the Write is complete: a zero-byte Send.
    qp.post_send(4, &src, 0..0).unwrap();
    wait_ok(cq, "final send");
    let _ = dev;
}

/// The passive side: regions, accept (receive posted before the Reply), verification.
fn passive_side(dev: Device, listener: dataplane::Listener, stags: mpsc::Sender<(u32, u32)>) {
    let (qi, cq) = dev.qp_init();
    let recv = qi.pd.register(LEN, Access::LOCAL_WRITE).unwrap();
    let win = qi.pd.register(LEN, Access::REMOTE_WRITE).unwrap();
    let rsrc = qi
        .pd
        .register_from(&pattern(LEN, 2), Access::REMOTE_READ)
        .unwrap();
    stags.send((win.stag(), rsrc.stag())).unwrap();
    let inc = listener.accept_timeout(T).expect("an MPA Request");
    assert_eq!(inc.private_data(), b"hello");
    let qp = inc
        .accept_with(qi, b"welcome", |qp| {
            qp.post_recv(1, &recv, 0..LEN)?;
            qp.post_recv(2, &recv, 0..LEN)
        })
        .unwrap();
    let c = wait_ok(&cq, "receive");
    assert_eq!(c.byte_len as usize, LEN);
    let mut got = vec![0u8; LEN];
    recv.read(0, &mut got).unwrap();
    assert!(got == pattern(LEN, 1), "Send data differs");
    let c = wait_ok(&cq, "final receive");
    assert_eq!(c.byte_len, 0);
    win.read(0, &mut got).unwrap();
    assert!(got == pattern(LEN, 1), "RDMA Write data differs");
    qp.close();
}

/// `side`'s IPv4 address, or its IPv6 one (`v6`), with `port`.
fn addr_of(tb: &VethTestbed, side: Side, port: u16, v6: bool) -> SocketAddr {
    if v6 {
        SocketAddr::new(tb.ip6(side).into(), port)
    } else {
        SocketAddr::V4(SocketAddrV4::new(tb.ip(side), port))
    }
}

fn run_pair(tb: &VethTestbed, a: Device, b: Device, port: u16) {
    run_pair_over(tb, a, b, port, Over::default())
}

/// How [`run_pair_over`] connects.
#[derive(Clone, Copy)]
struct Over {
    /// Over the IPv6 addresses.
    v6: bool,
    /// The listening device's side.
    listener: Side,
    /// Both ask for markers.
    markers: bool,
}

impl Default for Over {
    fn default() -> Self {
        Over {
            v6: false,
            listener: Side::B,
            markers: false,
        }
    }
}

/// `b` listens on the IPv4 (or IPv6) address of its side, `a` connects from the other side;
/// the plan, verified.
fn run_pair_over(tb: &VethTestbed, a: Device, b: Device, port: u16, over: Over) {
    let Over {
        v6,
        listener: b_side,
        markers,
    } = over;
    let mut cfg = ConnectionConfig::default().with_emss(None);
    cfg.mpa.want_markers = markers;
    // B listens (in its namespace for the kernel transport), A connects.
    let listener = {
        let _ns = tb.enter(b_side).unwrap();
        b.listen(addr_of(tb, b_side, port, v6), cfg.clone())
            .unwrap()
    };
    let (stx, srx) = mpsc::channel();
    let b2 = b.clone();
    let passive = std::thread::spawn(move || passive_side(b2, listener, stx));
    let stags = srx.recv_timeout(T).unwrap();
    let (qi, cq) = a.qp_init();
    let qp = {
        let _ns = tb.enter(b_side.peer()).unwrap();
        a.connect(addr_of(tb, b_side, port, v6), qi.clone(), &cfg, b"hello")
            .expect("connect")
    };
    assert_eq!(qp.peer_private_data(), b"welcome");
    active_side(&qp, &a, &qi, &cq, stags);
    passive.join().expect("passive side");
    drop(qp);
}

fn xdp_against_kernel(mode: EngineMode, tag: &str) {
    let Some(tb) = or_skip(tag, for_test(tag)) else {
        return;
    };
    tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
    let x = open_xdp(&tb, Side::A, mode);
    let k = Device::open(dataplane::Transport::Kernel).unwrap();
    // The xdp device connects to the kernel's listener ...
    run_pair(&tb, x.clone(), k.clone(), 4100);
    // ... and the kernel connects to the xdp device's listener.
    let listener = x
        .listen(
            SocketAddr::V4(SocketAddrV4::new(tb.ip(Side::A), 4101)),
            ConnectionConfig::default(),
        )
        .unwrap();
    let (stx, srx) = mpsc::channel();
    let x2 = x.clone();
    let passive = std::thread::spawn(move || passive_side(x2, listener, stx));
    let stags = srx.recv_timeout(T).unwrap();
    let (qi, cq) = k.qp_init();
    let qp = {
        let _ns = tb.enter(Side::B).unwrap();
        k.connect(
            SocketAddr::V4(SocketAddrV4::new(tb.ip(Side::A), 4101)),
            qi.clone(),
            &ConnectionConfig::default(),
            b"hello",
        )
        .unwrap_or_else(|e| {
            panic!(
                "kernel connects to the engine: {e:?}; engine {:?}; xdp {:?}; device {:?}",
                x.engine_counters(),
                x.xdp_counters(),
                x.counters()
            )
        })
    };
    active_side(&qp, &k, &qi, &cq, stags);
    passive.join().expect("engine's passive side");
    drop(qp);
    // Closing does not wait: a threaded engine may still exchange FINs while the counters are
    // read. Take the device's byte counts between two equal readings of the engine's (a round
    // that moved frames in between would change the engine's).
    let bytes = |c: &endpoint::EndpointCounters| (c.rx_bytes, c.tx_bytes);
    let (c, d) = (0..1000)
        .find_map(|_| {
            let c1 = x.engine_counters().expect("engine counters");
            let d = x.counters();
            let c2 = x.engine_counters().expect("engine counters");
            std::thread::sleep(Duration::from_millis(5));
            (bytes(&c1) == bytes(&c2)).then_some((c1, d))
        })
        .expect("the engine's counters settle");
    println!("engine counters ({mode:?}): {c:?}");
    assert!(c.rx_packets > 1000 && c.tx_packets > 1000, "{c:?}");
    assert_eq!(c.malformed, 0, "{c:?}");
    assert_eq!(d.mpa_established, 2, "{d:?}");
    assert_eq!((d.rx_bytes, d.tx_bytes), (c.rx_bytes, c.tx_bytes), "{d:?}");
    // Dropping the last handle of the device stops its engine and detaches its XDP program,
    // although the device's routes still held the completion queues of closed queue pairs
    // (a leftover program kept steering the interface: bench runs after it were slowed).
    drop(x);
    let _ns = tb.enter(Side::A).unwrap();
    let left = attached(tb.ifname(Side::A)).unwrap();
    assert!(left.is_empty(), "{mode:?}: program left attached: {left:?}");
}

#[test]
fn verbs_on_xdp_inline_against_kernel() {
    xdp_against_kernel(EngineMode::Inline, "vxi");
}

#[test]
fn verbs_on_xdp_threaded_against_kernel() {
    xdp_against_kernel(EngineMode::Threaded, "vxt");
}

#[test]
fn verbs_on_xdp_both_ends() {
    let Some(tb) = or_skip("vxx", for_test("vxx")) else {
        return;
    };
    let a = open_xdp(&tb, Side::A, EngineMode::Threaded);
    let b = open_xdp(&tb, Side::B, EngineMode::Threaded);
    run_pair(&tb, a, b, 4102);
}

/// Jumbo MTU: packets longer than a UMEM frame travel as chains of frames
/// (`XDP_USE_SG`, the `xdp.frags` program), and the MSS follows the MTU, not the frame.
fn jumbo(tag: &str, peer: Option<dataplane::Transport>) {
    let Some(tb) = or_skip(tag, for_test(tag)) else {
        return;
    };
    tb.set_mtu(9000).expect("MTU 9000 on the veth pair");
    let x = open_xdp(&tb, Side::A, EngineMode::Threaded);
    let info = x.xdp_info().expect("an xdp device");
    assert_eq!(info.mtu, 9000);
    // 9000 - 20 (IPv4) - 20 (TCP), announced; the segments carry 12 octets of timestamps
    // and 8948 of payload: more than one 4 KiB frame carries.
    assert_eq!(info.mss, 8960, "{info:?}");
    let other = match peer {
        Some(t) => {
            tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
            Device::open(t).unwrap()
        }
        None => open_xdp(&tb, Side::B, EngineMode::Threaded),
    };
    run_pair(&tb, x.clone(), other, 4110);
    let c = x.engine_counters().expect("engine counters");
    println!("jumbo {tag}: {c:?}");
    // Send, Write and Read of 1 MiB: the data went in full 9000-octet packets, ACKs between
    // them, so the average packet each way is longer than MTU 1500 allows (1514 octets).
    assert!(c.rx_bytes / c.rx_packets.max(1) > 2 * 1514, "{c:?}");
    assert!(c.tx_bytes / c.tx_packets.max(1) > 2 * 1514, "{c:?}");
    assert_eq!(c.malformed, 0, "{c:?}");
    // The chains arrived on consecutive positions of the receive strip and were read in
    // place, not gathered (only one across the strip's end, 4096 positions, could not be).
    let (in_place, gathered) = x.rx_chains().expect("an xdp device");
    println!("jumbo {tag}: chains read in place {in_place}, gathered {gathered}");
    assert!(in_place > 0, "no chain read in place ({gathered} gathered)");
    assert!(
        gathered <= 1 + in_place / 1000,
        "{in_place} in place, {gathered} gathered"
    );
}

#[test]
fn verbs_on_xdp_both_ends_at_mtu_9000() {
    jumbo("vjx", None);
}

#[test]
fn verbs_on_xdp_against_kernel_at_mtu_9000() {
    jumbo("vjk", Some(dataplane::Transport::Kernel));
}

#[test]
fn xdp_device_refuses_a_foreign_address_and_a_missing_interface() {
    let Some(tb) = or_skip("vxe", for_test("vxe")) else {
        return;
    };
    let x = open_xdp(&tb, Side::A, EngineMode::Inline);
    assert!(x
        .listen(
            "198.18.9.9:4000".parse().unwrap(),
            ConnectionConfig::default()
        )
        .is_err());
    let _ns = tb.enter(Side::A).unwrap();
    assert!(Device::open_xdp(XdpConfig::new("xw-no-such-if")).is_err());
}

/// A second xdp device (a second engine) on an interface refuses
/// to open with one message that names the interface and what to do, and the first device's
/// program stays attached; it detaches when the first device closes.
#[test]
fn second_xdp_device_on_an_interface_refuses_to_open() {
    let Some(tb) = or_skip("twodev", for_test("twodev")) else {
        return;
    };
    let _ns = tb.enter(Side::B).unwrap();
    let ifb = tb.ifname(Side::B);
    let first = Device::open_xdp(XdpConfig::new(ifb)).expect("the first device opens");
    let id = attached(ifb).unwrap().native.expect("attached").id;
    let err = Device::open_xdp(XdpConfig::new(ifb)).expect_err("the second is refused");
    assert!(
        matches!(
            err,
            DeviceError::Xdp {
                error: XdpError::ProgramInUse { id: i, pid, .. },
                ..
            } if i == id && pid == std::process::id()
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains(ifb) && msg.contains("Stop that process"),
        "{msg}"
    );
    assert_eq!(attached(ifb).unwrap().native.map(|p| p.id), Some(id));
    drop(first);
    assert!(attached(ifb).unwrap().is_empty());
}

/// Dropping an xdp listener keeps the connections it accepted working (the XDP program keeps
/// steering the port while they live: their segments must not reach the kernel, which would
/// reset them); a SYN to the dropped listener's port is refused; listening on the port again
/// works and accepts.
#[test]
fn dropped_listener_keeps_its_connections_and_the_port_can_be_listened_on_again() {
    let Some(tb) = or_skip("vxl", for_test("vxl")) else {
        return;
    };
    tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
    let x = open_xdp(&tb, Side::A, EngineMode::Threaded);
    let k = Device::open(dataplane::Transport::Kernel).unwrap();
    let at = SocketAddr::V4(SocketAddrV4::new(tb.ip(Side::A), 4103));
    let connect = |k: &Device| {
        let (qi, cq) = k.qp_init();
        let _ns = tb.enter(Side::B).unwrap();
        k.connect(at, qi.clone(), &ConnectionConfig::default(), b"hi")
            .map(|qp| (qp, qi, cq))
    };
    for round in 0..2 {
        let listener = x.listen(at, ConnectionConfig::default()).expect("listen");
        let x2 = x.clone();
        let server = std::thread::spawn(move || {
            let (qi, cq) = x2.qp_init();
            let buf = qi.pd.register(8192, Access::LOCAL_WRITE).unwrap();
            let inc = listener.accept_timeout(T).expect("an MPA Request");
            let qp = inc
                .accept_with(qi, b"ok", |qp| {
                    qp.post_recv(1, &buf, 0..4096)?;
                    qp.post_recv(2, &buf, 4096..8192)
                })
                .unwrap();
            wait_ok(&cq, "receive before the listener is dropped");
            drop(listener);
            wait_ok(&cq, "receive after the listener was dropped");
            let mut got = vec![0u8; 8192];
            buf.read(0, &mut got).unwrap();
            (qp, got)
        });
        let (qp, qi, cq) = connect(&k).expect("connect");
        let src = qi
            .pd
            .register_from(&pattern(8192, round), Access::LOCAL_WRITE)
            .unwrap();
        qp.post_send(1, &src, 0..4096).unwrap();
        wait_ok(&cq, "send");
        // Let the server drop its listener before the second message.
        std::thread::sleep(Duration::from_millis(300));
        qp.post_send(2, &src, 4096..8192).unwrap();
        wait_ok(&cq, "send");
        let (sqp, got) = server.join().expect("server side");
        assert!(got == pattern(8192, round), "round {round}: data differs");
        // No listener on the port now: a new connection is refused.
        assert!(
            connect(&k).is_err(),
            "round {round}: connected without a listener"
        );
        drop((qp, sqp));
    }
}

/// An xdp device serving `side`'s IPv6 address.
fn open_xdp_v6(tb: &VethTestbed, side: Side) -> Device {
    let _ns = tb.enter(side).unwrap();
    let mut cfg = XdpConfig::new(tb.ifname(side));
    cfg.bind = afxdp::BindMode::Copy;
    cfg.address = Some(tb.ip6(side).into());
    Device::open_xdp(cfg).expect("open the xdp device on IPv6")
}

/// The verbs API over IPv6 on both transports. The xdp device
/// serves 2001:db8::1 (next hops from the kernel's neighbour table, which NDP fills; the
/// steering program owns the IPv6 address), the kernel transport 2001:db8::2: each connects
/// to the other's listener (markers off, then on); then two kernel-transport devices over IPv6.
/// Send, Write and Read of 1 MiB verified each time.
#[test]
fn verbs_over_ipv6_xdp_and_kernel_transports() {
    let Some(tb) = or_skip("vx6", for_test("vx6")) else {
        return;
    };
    tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
    let x = open_xdp_v6(&tb, Side::A);
    assert_eq!(x.local_ip(), Some(tb.ip6(Side::A).into()));
    let k = Device::open(dataplane::Transport::Kernel).unwrap();
    // The xdp device connects to the kernel's IPv6 listener ...
    let v6 = Over {
        v6: true,
        ..Over::default()
    };
    run_pair_over(&tb, x.clone(), k.clone(), 4110, v6);
    // ... the kernel connects to the xdp device's ...
    let to_a = Over {
        listener: Side::A,
        markers: true,
        ..v6
    };
    run_pair_over(&tb, k.clone(), x.clone(), 4111, to_a);
    // ... and an IPv4 peer address is refused by the IPv6 device.
    let (qi, _cq) = x.qp_init();
    let v4 = addr_of(&tb, Side::B, 4112, false);
    assert!(x
        .connect(v4, qi, &ConnectionConfig::default(), b"")
        .is_err());
    let c = x.engine_counters().expect("engine counters");
    assert!(c.rx_packets > 1000 && c.malformed == 0, "{c:?}");
    let steer = x.xdp_counters().expect("steering counters");
    assert!(steer.redirected >= c.rx_packets, "{steer:?} {c:?}");
    // Two kernel-transport devices over IPv6 (the xdp device gone first: its program would
    // steer A's IPv6 address on the active-open range, where the kernel's ephemeral ports lie).
    drop(x);
    {
        let _ns = tb.enter(Side::A).unwrap();
        assert!(attached(tb.ifname(Side::A)).unwrap().is_empty());
    }
    let k2 = Device::open(dataplane::Transport::Kernel).unwrap();
    run_pair_over(&tb, k2, k, 4113, v6);
}

/// Our pair over IPv6, two xdp devices (each serving its side's
/// IPv6 address), markers off and on.
#[test]
fn verbs_on_xdp_both_ends_over_ipv6_markers_off_and_on() {
    let Some(tb) = or_skip("vx6x", for_test("vx6x")) else {
        return;
    };
    let a = open_xdp_v6(&tb, Side::A);
    let b = open_xdp_v6(&tb, Side::B);
    for (port, markers) in [(4120, false), (4121, true)] {
        let over = Over {
            v6: true,
            markers,
            ..Over::default()
        };
        run_pair_over(&tb, a.clone(), b.clone(), port, over);
    }
    for d in [&a, &b] {
        let c = d.engine_counters().expect("engine counters");
        assert!(
            c.rx_packets > 500 && c.malformed + c.crc_errors == 0,
            "{c:?}"
        );
    }
}
