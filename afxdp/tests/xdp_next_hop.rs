//! Next hops from the kernel's tables and the active-open port range, in fresh namespaces.
//! Root; under `CI=true` these must run.
#![cfg(target_os = "linux")]

use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use afxdp::netlink::RtNetlink;
use afxdp::netns::NetNs;
use afxdp::ports::{is_reserved, reserve_local_ports};
use afxdp::program::ifindex;
use afxdp::{resolve_next_hop, AttachPolicy, LocalPortRange, PortKind, XdpError, XdpProgram};
use testbed::{for_test, Side};
use testkit::or_skip;

/// The next-hop MAC comes from the kernel's neighbour table, and a
/// missing entry is resolved by the kernel when we ask.
#[test]
fn missing_neighbour_is_resolved_through_the_kernel() {
    let Some(tb) = or_skip("neigh", for_test("neigh")) else {
        return;
    };
    let mac_b = tb.mac(Side::B).unwrap();
    let _a = tb.enter(Side::A).unwrap();
    let if_a = ifindex(tb.ifname(Side::A)).unwrap();
    let ip_b: IpAddr = tb.ip(Side::B).into();
    let mut nl = RtNetlink::new().unwrap();
    assert_eq!(
        nl.neighbour(if_a, ip_b)
            .unwrap()
            .and_then(|n| n.usable_mac()),
        None,
        "a fresh namespace has not resolved B yet"
    );
    let route = nl.route_get(ip_b).unwrap();
    assert_eq!(route.oif, if_a);
    assert_eq!(route.gateway, None, "B is on-link");
    assert_eq!(route.pref_src, Some(tb.ip(Side::A).into()));

    let hop = resolve_next_hop(ip_b, Duration::from_secs(3)).unwrap();
    assert_eq!(hop.dst_mac, mac_b);
    assert_eq!(hop.hop_ip, ip_b);
    assert_eq!(hop.ifindex, if_a);
    assert_eq!(hop.src_ip, IpAddr::from(tb.ip(Side::A)));
    assert_eq!(hop.src_mac, nl.link_mac(if_a).unwrap());
    let entry = nl
        .neighbour(if_a, ip_b)
        .unwrap()
        .expect("the entry now exists");
    assert_eq!(entry.mac, Some(mac_b));
}

/// Routes come from the kernel's table: via a gateway the next hop is the gateway; without a
/// route the answer is NoRoute.
#[test]
fn routes_come_from_the_kernel_table() {
    let Some(tb) = or_skip("route", for_test("route")) else {
        return;
    };
    let _a = tb.enter(Side::A).unwrap();
    let far: IpAddr = Ipv4Addr::new(198, 19, 7, 7).into();
    assert_eq!(
        resolve_next_hop(far, Duration::from_millis(200)).err(),
        Some(XdpError::NoRoute)
    );
    tb.ip_cmd(
        Side::A,
        &["route", "add", "198.19.0.0/16", "via", "198.18.0.2"],
    )
    .unwrap();
    let route = RtNetlink::new().unwrap().route_get(far).unwrap();
    assert_eq!(route.gateway, Some(tb.ip(Side::B).into()));
    assert_eq!(route.next_hop(far), IpAddr::from(tb.ip(Side::B)));
    let hop = resolve_next_hop(far, Duration::from_secs(3)).unwrap();
    assert_eq!(hop.hop_ip, IpAddr::from(tb.ip(Side::B)));
}

fn root_reserved_ports() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_reserved_ports").unwrap()
}

/// The active-open range is reserved from the kernel (per namespace,
/// here only inside the test namespace) and steered by the XDP program; the kernel's own
/// connections then avoid it.
#[test]
fn active_open_range_is_reserved_in_the_test_namespace_and_steered() {
    let Some(tb) = or_skip("ports", for_test("ports")) else {
        return;
    };
    // The test thread starts in the namespace the tests were started in (the host's).
    let host = NetNs::current().unwrap();
    let host_before = root_reserved_ports();
    let listener = {
        let _b = tb.enter(Side::B).unwrap();
        TcpListener::bind((tb.ip(Side::B), 5002)).unwrap()
    };
    let server = thread::spawn(move || {
        for _ in 0..4 {
            let (mut s, _) = listener.accept().unwrap();
            let _ = s.read(&mut [0u8; 1]);
        }
    });
    let range = LocalPortRange::new(40000, 40007).unwrap();
    let local_ports = {
        let _a = tb.enter(Side::A).unwrap();
        assert!(
            !host.is_current().unwrap(),
            "never touch the host's sysctls"
        );
        // A small ephemeral range overlapping ours, so the reservation visibly matters.
        std::fs::write("/proc/sys/net/ipv4/ip_local_port_range", "40000 40015").unwrap();
        reserve_local_ports(range).unwrap();
        assert!(is_reserved(40000).unwrap() && is_reserved(40007).unwrap());
        assert!(!is_reserved(40008).unwrap());
        let prog = XdpProgram::attach(tb.ifname(Side::A), AttachPolicy::NativeOnly).unwrap();
        prog.steer_range(range).unwrap();
        assert_eq!(prog.port_kind(40003).unwrap(), Some(PortKind::ActiveOpen));
        assert_eq!(prog.port_kind(40008).unwrap(), None);
        let conns: Vec<TcpStream> = (0..4)
            .map(|_| {
                TcpStream::connect_timeout(
                    &SocketAddr::from((tb.ip(Side::B), 5002)),
                    Duration::from_secs(3),
                )
                .unwrap()
            })
            .collect();
        conns
            .iter()
            .map(|c| c.local_addr().unwrap().port())
            .collect::<Vec<_>>()
    };
    server.join().unwrap();
    for p in &local_ports {
        assert!(
            !range.contains(*p),
            "kernel picked reserved port {p}: {local_ports:?}"
        );
    }
    assert_eq!(
        root_reserved_ports(),
        host_before,
        "the host namespace is untouched"
    );
}

/// IPv6 next hops resolve the same way (neighbour discovery instead of ARP). The addresses
/// exist only inside the test namespaces.
#[test]
fn ipv6_neighbour_is_resolved_through_the_kernel() {
    let Some(tb) = or_skip("neigh6", for_test("neigh6")) else {
        return;
    };
    let a6: IpAddr = "2001:db8:18::1".parse().unwrap();
    let b6: IpAddr = "2001:db8:18::2".parse().unwrap();
    for (side, addr) in [
        (Side::A, "2001:db8:18::1/64"),
        (Side::B, "2001:db8:18::2/64"),
    ] {
        tb.ip_cmd(
            side,
            &["-6", "addr", "add", addr, "dev", tb.ifname(side), "nodad"],
        )
        .unwrap();
    }
    let mac_b = tb.mac(Side::B).unwrap();
    let _a = tb.enter(Side::A).unwrap();
    let hop = resolve_next_hop(b6, Duration::from_secs(3)).unwrap();
    assert_eq!(hop.dst_mac, mac_b);
    assert_eq!(hop.src_ip, a6);
    assert_eq!(hop.hop_ip, b6);
}
