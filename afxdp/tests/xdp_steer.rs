//! The XDP steering program on a veth pair in two fresh network namespaces: native attach,
//! steered TCP into AF_XDP, everything else to the kernel (ping, other TCP ports), counters,
//! malformed frames dropped and counted, AF_XDP transmission seen by the peer. Root; under
//! `CI=true` these must run.
#![cfg(target_os = "linux")]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use afxdp::{
    resolve_next_hop, steered_queue, AttachMode, AttachPolicy, Frame, PortKind, XdpProgram,
    XskConfig, XskQueue,
};
use testbed::packet_socket::PacketSocket;
use testbed::ping::icmp_echo;
use testbed::tcp_frame::{build_tcp_frame, tcp_payload, RawEndpoint};
use testbed::{for_test, Side};
use testkit::frame_corpus::{frame_corpus, named, CorpusAddrs};
use testkit::or_skip;

const STEERED: u16 = 4791;
const PASSED: u16 = 5001;

/// Receives frames on `q` until `want` of them satisfy `accept` or `timeout` passes.
fn collect(
    q: &mut XskQueue,
    timeout: Duration,
    want: usize,
    accept: impl Fn(&[u8]) -> bool,
) -> usize {
    let deadline = Instant::now() + timeout;
    let mut got = 0;
    let mut rx: Vec<Frame> = Vec::new();
    while got < want && Instant::now() < deadline {
        q.poll_rx(20).unwrap();
        q.recv(&mut rx, 64);
        got += rx.iter().filter(|f| accept(q.data(f))).count();
        q.release(&mut rx);
    }
    got
}

fn tcp_dst_port(frame: &[u8]) -> Option<u16> {
    tcp_payload(frame)?; // an Ethernet/IPv4/TCP frame
    let tcp = 14 + usize::from(frame[14] & 0x0F) * 4;
    Some(u16::from_be_bytes([frame[tcp + 2], frame[tcp + 3]]))
}

fn is_syn_to(frame: &[u8], port: u16) -> bool {
    let tcp = 14 + usize::from(frame.get(14).copied().unwrap_or(0) & 0x0F) * 4;
    tcp_dst_port(frame) == Some(port) && frame[tcp + 13] & 0x02 != 0
}

/// TCP to a steered port lands in the AF_XDP socket of its rx queue;
/// ping and a kernel TCP connection on another port still work (XDP_PASS); counters move.
#[test]
fn steered_port_reaches_af_xdp_and_the_rest_passes_to_the_kernel() {
    let Some(tb) = or_skip("steer", for_test("steer")) else {
        return;
    };
    let _ns = tb.enter(Side::B).unwrap();
    let ifb = tb.ifname(Side::B).to_owned();
    let prog = XdpProgram::attach(&ifb, AttachPolicy::NativeOnly).expect("native XDP on veth");
    assert_eq!(prog.mode(), AttachMode::Native);
    let mut q = XskQueue::new(&ifb, 0, XskConfig::default()).expect("AF_XDP socket");
    assert!(
        !q.is_zero_copy(),
        "veth offers no zero-copy: copy mode expected"
    );
    prog.register_socket(0, q.fd()).unwrap();
    prog.steer_port(STEERED, PortKind::Listen).unwrap();
    assert_eq!(prog.port_kind(STEERED).unwrap(), Some(PortKind::Listen));
    assert_eq!(prog.port_kind(PASSED).unwrap(), None);
    let before = prog.counters().unwrap();

    // A kernel listener on a port we do not steer, in B.
    let listener = TcpListener::bind((tb.ip(Side::B), PASSED)).unwrap();
    let server = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).unwrap();
        s.write_all(&buf).unwrap();
    });

    // From A: a plain TCP connect to the steered port. Its SYNs go to AF_XDP, so the kernel in B
    // never answers and the connect times out.
    let ip_b = tb.ip(Side::B);
    let client = {
        let ns_a = tb.netns_name(Side::A).to_owned();
        thread::spawn(move || {
            let _g = afxdp::netns::NetNs::named(&ns_a).unwrap().enter().unwrap();
            let steered = TcpStream::connect_timeout(
                &SocketAddr::from((ip_b, STEERED)),
                Duration::from_millis(1500),
            );
            let mut s = TcpStream::connect_timeout(
                &SocketAddr::from((ip_b, PASSED)),
                Duration::from_secs(5),
            )
            .expect("kernel TCP on a non-steered port connects");
            s.write_all(b"hello").unwrap();
            let mut echo = [0u8; 5];
            s.read_exact(&mut echo).unwrap();
            (steered.is_ok(), echo)
        })
    };
    let syns = collect(&mut q, Duration::from_secs(5), 1, |f| is_syn_to(f, STEERED));
    let (steered_connected, echo) = client.join().unwrap();
    server.join().unwrap();
    assert!(
        syns >= 1,
        "the SYN to the steered port arrives in the AF_XDP socket"
    );
    assert!(
        !steered_connected,
        "the kernel in B never saw the steered SYN"
    );
    assert_eq!(&echo, b"hello");

    let rtt = {
        let _a = tb.enter(Side::A).unwrap();
        (1..=2)
            .map(|seq| icmp_echo(ip_b, 0x7777, seq, Duration::from_secs(2)).unwrap())
            .collect::<Vec<_>>()
    };
    assert!(
        rtt.iter().all(Option::is_some),
        "ICMP echo passes to B's kernel: {rtt:?}"
    );

    let moved = prog.counters().unwrap().since(&before);
    assert!(moved.redirected >= 1, "{moved:?}");
    assert!(
        moved.passed >= 4,
        "ARP, ICMP and the passed TCP connection: {moved:?}"
    );
    assert_eq!(moved.malformed, 0, "{moved:?}");
    let occ = q.occupancy();
    assert_eq!(
        occ.in_fill,
        XskConfig::default().fill_target(),
        "fill ring topped up: {occ:?}"
    );
}

/// Malformed frames are dropped and counted; a steered port without a
/// socket on the queue goes to the kernel and is counted apart.
#[test]
fn malformed_frames_are_counted_and_unsocketed_steering_passes() {
    let Some(tb) = or_skip("malf", for_test("malf")) else {
        return;
    };
    let ifb = tb.ifname(Side::B).to_owned();
    let mac_b = tb.mac(Side::B).unwrap();
    let prog = {
        let _ns = tb.enter(Side::B).unwrap();
        let prog = XdpProgram::attach(&ifb, AttachPolicy::NativeOnly).unwrap();
        prog.steer_port(STEERED, PortKind::Listen).unwrap();
        prog
    };
    let before = prog.counters().unwrap();
    let _ns = tb.enter(Side::A).unwrap();
    let sock = PacketSocket::open(tb.ifname(Side::A)).unwrap();
    let a = RawEndpoint {
        mac: [2, 0, 0, 0, 0, 1],
        ip: tb.ip(Side::A),
        port: 40000,
    };
    let b = RawEndpoint {
        mac: mac_b,
        ip: tb.ip(Side::B),
        port: STEERED,
    };
    let mut good = [0u8; 128];
    let len = build_tcp_frame(&mut good, &a, &b, 1, b"x").unwrap();
    let mut bad: Vec<Vec<u8>> = Vec::new();
    bad.push(good[..14 + 10].to_vec()); // IPv4 header cut short
    let mut f = good[..len].to_vec();
    f[14] = 0x44; // IHL 4
    bad.push(f);
    let mut f = good[..len].to_vec();
    f[16..18].copy_from_slice(&2000u16.to_be_bytes()); // total length beyond the frame
    bad.push(f);
    let mut f = good[..len].to_vec();
    f[34 + 12] = 0x40; // TCP data offset 4
    bad.push(f);
    for f in &bad {
        // Pad short ones the way a NIC would not: veth delivers them as they are.
        sock.send(f).unwrap();
    }
    // A well-formed steered segment while no socket is registered: passed to the kernel.
    sock.send(&good[..len]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    let moved = loop {
        let moved = prog.counters().unwrap().since(&before);
        if (moved.malformed as usize >= bad.len() && moved.steered_no_socket >= 1)
            || Instant::now() > deadline
        {
            break moved;
        }
        thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(moved.malformed as usize, bad.len(), "{moved:?}");
    assert_eq!(moved.steered_no_socket, 1, "{moved:?}");
    assert_eq!(moved.redirected, 0, "{moved:?}");
}

/// A frame transmitted through AF_XDP reaches the peer namespace, with
/// the destination MAC taken from the kernel's neighbour table.
#[test]
fn af_xdp_transmission_reaches_the_peer() {
    let Some(tb) = or_skip("tx", for_test("tx")) else {
        return;
    };
    let ifa = tb.ifname(Side::A).to_owned();
    let ifb = tb.ifname(Side::B).to_owned();
    let capture = {
        let _ns = tb.enter(Side::A).unwrap();
        PacketSocket::open(&ifa).unwrap()
    };
    let _ns = tb.enter(Side::B).unwrap();
    let (_prog, mut q) =
        steered_queue(&ifb, 0, AttachPolicy::NativeOnly, XskConfig::default(), &[]).unwrap();
    let hop = resolve_next_hop(tb.ip(Side::A).into(), Duration::from_secs(3)).unwrap();
    let (src, dst) = RawEndpoint::pair_from_hop(&hop, STEERED, tb.ip(Side::A), 40123).unwrap();
    let mut f = q.alloc().unwrap();
    let len = build_tcp_frame(q.data_mut_full(&mut f), &src, &dst, 99, b"from AF_XDP").unwrap();
    q.set_len(&mut f, len).unwrap();
    let sent_bytes = q.data(&f).to_vec();
    let mut batch = vec![f];
    assert_eq!(q.send(&mut batch), 1);
    assert!(batch.is_empty(), "the sent token left the batch");
    let got = capture
        .recv_matching(Duration::from_secs(3), |fr| {
            tcp_payload(fr) == Some(&b"from AF_XDP"[..])
        })
        .unwrap()
        .expect("the peer namespace receives the AF_XDP frame");
    assert_eq!(got, sent_bytes);
    // The completion ring hands the frame back.
    let deadline = Instant::now() + Duration::from_secs(2);
    while q.occupancy().in_tx > 0 && Instant::now() < deadline {
        q.kick_tx();
        q.reclaim();
    }
    assert_eq!(q.occupancy().in_tx, 0);
}

/// The rule of which frames are ours on a live
/// interface. The program owns the interface's address (filled by the loader): a steered port
/// at another address (IPv4 or IPv6), a later IPv6 fragment, a VLAN tag and QinQ go to the
/// kernel; first fragments to a steered port (IPv4, IPv6, an IPv6 atomic fragment) are dropped
/// and counted; a segment to our address and port is redirected. (The whole table is checked
/// frame by frame in `frame_agreement.rs`.)
#[test]
fn steering_needs_our_address_and_drops_first_fragments() {
    let Some(tb) = or_skip("addr", for_test("addr")) else {
        return;
    };
    let ifb = tb.ifname(Side::B).to_owned();
    let mac_b = tb.mac(Side::B).unwrap();
    let (prog, mut q) = {
        let _ns = tb.enter(Side::B).unwrap();
        steered_queue(
            &ifb,
            0,
            AttachPolicy::NativeOnly,
            XskConfig::default(),
            &[(STEERED, PortKind::Listen)],
        )
        .unwrap()
    };
    assert_eq!(
        prog.owned_addrs().unwrap(),
        vec![std::net::IpAddr::V4(tb.ip(Side::B))],
        "the loader owns the interface's address"
    );
    let corpus = CorpusAddrs {
        mac: mac_b,
        ip: tb.ip(Side::B).octets(),
        peer_ip: tb.ip(Side::A).octets(),
        steered: STEERED,
        unsteered: PASSED,
        ..CorpusAddrs::default()
    };
    // The corpus's IPv6 address is owned too, so that IPv6 fragments reach rule 12.
    prog.set_owned_addrs(&[tb.ip(Side::B).into(), corpus.ip6.into()])
        .unwrap();
    let frames = frame_corpus(&corpus);
    let pick = |name: &str| named(&frames, name).to_vec();
    let ours = pick("TCP to us, steered port");
    let passed = [
        pick("TCP to another address, steered port"),
        pick("IPv6: TCP to another address, steered port"),
        pick("IPv6: later fragment (offset 8, M set)"),
        pick("802.1Q tagged TCP to us, steered port"),
        pick("QinQ (802.1ad + 802.1Q) TCP to us, steered port"),
    ];
    let fragments = [
        pick("first fragment (MF set), steered port"),
        pick("IPv6: first fragment (M set), steered port"),
        pick("IPv6: atomic fragment (offset 0, M clear), steered port"),
    ];
    let before = prog.counters().unwrap();
    let sock = {
        let _ns = tb.enter(Side::A).unwrap();
        PacketSocket::open(tb.ifname(Side::A)).unwrap()
    };
    for f in passed.iter().chain(&fragments).chain([&ours]) {
        sock.send(f).unwrap();
    }
    let got = collect(&mut q, Duration::from_secs(3), 1, |f| f == &ours[..]);
    assert_eq!(got, 1, "the segment to our address and port is redirected");
    let deadline = Instant::now() + Duration::from_secs(3);
    let moved = loop {
        let moved = prog.counters().unwrap().since(&before);
        if (moved.fragments >= 3 && moved.passed >= passed.len() as u64)
            || Instant::now() > deadline
        {
            break moved;
        }
        thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(moved.redirected, 1, "{moved:?}");
    assert_eq!(
        moved.fragments, 3,
        "IPv4 and IPv6 first fragments: {moved:?}"
    );
    assert_eq!(moved.malformed, 0, "{moved:?}");
    assert!(moved.passed >= passed.len() as u64, "{moved:?}");

    // Owning another address instead: our frame now passes to the kernel.
    prog.set_owned_addrs(&[std::net::IpAddr::V4(std::net::Ipv4Addr::new(198, 18, 7, 7))])
        .unwrap();
    let before = prog.counters().unwrap();
    sock.send(&ours).unwrap();
    let got = collect(&mut q, Duration::from_millis(500), 1, |f| f == &ours[..]);
    assert_eq!(got, 0, "not our address any more");
    let moved = prog.counters().unwrap().since(&before);
    assert_eq!(moved.redirected, 0, "{moved:?}");
}
