//! IPv6 end to end between two endpoints over the simulated link: MPA startup
//! and Send / RDMA Write / RDMA Read verified byte for byte, markers on and off, every frame on
//! the wire IPv6 with good checksums; IPv4 and IPv6 first fragments dropped and counted while
//! TCP recovers; Neighbour Discovery frames never enter the neighbour table, which stays
//! bounded.

mod pair;
use std::cell::RefCell;
use std::net::{Ipv6Addr, SocketAddr};
use std::rc::Rc;

use endpoint::{Endpoint, EndpointError};
use pair::*;

/// A tap that checks each frame A sends: EtherType IPv6, an IPv6/TCP packet that
/// `tcp_offload::wire` parses (checksums verified), from `IP6_A` to `IP6_B`. Counts frames and
/// records the MSS of the SYN.
fn checking_tap(seen: Rc<RefCell<(usize, Option<u16>)>>) -> Tap {
    Box::new(move |f: &mut Vec<u8>| {
        assert_eq!(f[12..14], [0x86, 0xDD], "EtherType IPv6");
        let seg = tcp_offload::wire::parse(&f[14..]).expect("an IPv6/TCP packet, checksums good");
        assert_eq!(seg.tuple.remote.ip(), IP6_A);
        assert_eq!(seg.tuple.local.ip(), IP6_B);
        let mut s = seen.borrow_mut();
        s.0 += 1;
        if seg.flags.syn {
            s.1 = seg.options.mss;
        }
        true
    })
}

/// IPv6 end to end, markers off and on.
#[test]
fn send_write_read_over_ipv6_markers_off_and_on() {
    for markers in [false, true] {
        let mut p = Pair::clean_v6();
        let seen = Rc::new(RefCell::new((0, None)));
        p.ab.tap = Some(checking_tap(seen.clone()));
        let (ca, cb) = p.establish(4000, settings(markers, true), settings(markers, true));
        for (i, len) in [1usize, 1500, 65_537, 300_001].into_iter().enumerate() {
            transfer_all(&mut p, ca, cb, len, i as u64 + 1);
        }
        let framing = p.a.negotiated(ca).expect("negotiated");
        assert_eq!(framing.rx_markers && framing.tx_markers, markers);
        for c in [p.a.counters(), p.b.counters()] {
            assert_eq!(
                c.malformed + c.crc_errors + c.framing_errors + c.internal_errors + c.drops,
                0,
                "{c:?}"
            );
        }
        let (frames, mss) = *seen.borrow();
        assert!(frames > 300, "A sent {frames} frames");
        // RFC 9293 §3.7.1: our MSS is at most the MTU (1500) less 60 over IPv6.
        assert_eq!(mss, Some(1440));
    }
}

#[test]
fn an_ipv6_endpoint_connects_to_ipv6_only() {
    let mut p = Pair::clean_v6();
    let v4: SocketAddr = "198.18.0.2:4000".parse().unwrap();
    assert_eq!(
        p.a.connect(p.now, v4, settings(false, true)),
        Err(EndpointError::AddressFamily)
    );
    let mut q = Pair::clean();
    let v6: SocketAddr = "[2001:db8::2]:4000".parse().unwrap();
    assert_eq!(
        q.a.connect(q.now, v6, settings(false, true)),
        Err(EndpointError::AddressFamily)
    );
}

/// `frame` (Ethernet + IP + TCP) turned into the first fragment of its segment: IPv4 with More
/// Fragments set (DF cleared, header checksum redone); IPv6 with a Fragment header (offset 0,
/// M set) in front of TCP, the payload length kept.
fn as_first_fragment(frame: &[u8]) -> Vec<u8> {
    let mut f = frame.to_vec();
    if f[12..14] == [0x08, 0x00] {
        f[14 + 6..14 + 8].copy_from_slice(&0x2000u16.to_be_bytes());
        f[14 + 10..14 + 12].fill(0);
        let c = testkit::internet_checksum(&[&f[14..34]]);
        f[14 + 10..14 + 12].copy_from_slice(&c.to_be_bytes());
        return f;
    }
    // The fragment stays within the MTU: its last 8 octets would be in the next fragment.
    f[20] = 44;
    let frag = [6, 0, 0, 1, 0, 0, 0, 7];
    f.splice(54..54, frag);
    f.truncate(f.len() - 8);
    f
}

/// Fragments: a first fragment to a steered port is dropped and
/// counted, never placed, and TCP's retransmission delivers the data: every fourth data frame
/// A sends goes out as a first fragment once, over IPv4 and over IPv6.
#[test]
fn first_fragments_are_dropped_and_counted_and_tcp_recovers() {
    for v6 in [false, true] {
        let mut p = if v6 { Pair::clean_v6() } else { Pair::clean() };
        let made = Rc::new(RefCell::new(0u64));
        let m = made.clone();
        let mut k = 0u64;
        p.ab.tap = Some(Box::new(move |f: &mut Vec<u8>| {
            let hdrs = if v6 { 14 + 40 + 20 } else { 14 + 20 + 20 };
            if f.len() > hdrs + 12 {
                k += 1;
                if k.is_multiple_of(4) {
                    *f = as_first_fragment(f);
                    *m.borrow_mut() += 1;
                }
            }
            true
        }));
        let (ca, cb) = p.establish(4000, settings(false, true), settings(false, true));
        transfer_all(&mut p, ca, cb, 200_000, 7);
        let made = *made.borrow();
        let c = p.b.counters();
        assert!(made >= 10, "{made} fragments made");
        assert_eq!(
            c.fragments,
            made,
            "v6 {v6}: every first fragment counted: {c:?}, A {:?}, link {:?}",
            p.a.counters(),
            p.ab.stats()
        );
        assert_eq!(c.malformed + c.crc_errors + c.framing_errors, 0, "{c:?}");
        assert!(
            p.a.counters().retransmissions >= made,
            "{:?}",
            p.a.counters()
        );
    }
}

/// An IPv6 packet from `src` to `dst` with `next_header` and `payload`, in an Ethernet frame
/// to `dst_mac`.
fn ipv6_frame(dst_mac: [u8; 6], src: Ipv6Addr, dst: Ipv6Addr, next: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = [&dst_mac[..], &MAC_A[..], &[0x86, 0xDD]].concat();
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    f.extend_from_slice(&[next, 255]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(payload);
    f
}

/// Neighbour discovery: the endpoint learns next hops from the
/// caller (the kernel's neighbour table, which NDP fills) and from established flows only.
/// Unsolicited Neighbour Advertisements and Solicitations, however many, enter nothing; the
/// table and the SYN sources stay within their caps as over IPv4.
#[test]
fn neighbour_discovery_frames_are_not_learnt_and_the_table_is_bounded() {
    let mut cfg = endpoint_cfg(MAC_B, IP6_B, MAC_A);
    cfg.default_next_hop = None;
    cfg.limits.max_neighbours = 4;
    cfg.limits.max_syn_sources = 8;
    let now = std::time::Instant::now();
    let mut e: Endpoint = Endpoint::new(cfg, now).expect("valid configuration");
    e.listen(4000, settings(false, true)).unwrap();
    let addr = |i: u16| Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 1, i);
    for i in 0..1000u16 {
        // Unsolicited Neighbour Advertisement (RFC 4861 §4.4, Override set) with a target
        // link-layer address option, to us and to all nodes.
        let na = [
            &[136, 0, 0, 0, 0x20, 0, 0, 0][..],
            &addr(i).octets()[..],
            &[2, 1],
            &[2, 0, 0, 0, (i >> 8) as u8, i as u8][..],
        ]
        .concat();
        e.handle_frame(now, &ipv6_frame(MAC_B, addr(i), IP6_B, 58, &na));
        let all_nodes = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
        e.handle_frame(
            now,
            &ipv6_frame([0x33, 0x33, 0, 0, 0, 1], addr(i), all_nodes, 58, &na),
        );
        // A Neighbour Solicitation for our address.
        let ns = [
            &[135, 0, 0, 0, 0, 0, 0, 0][..],
            &IP6_B.octets()[..],
            &[1, 1],
            &MAC_A[..],
        ]
        .concat();
        e.handle_frame(now, &ipv6_frame(MAC_B, addr(i), IP6_B, 58, &ns));
    }
    assert_eq!(e.neighbour_count(), 0, "no NDP frame is learnt");
    assert_eq!(e.counters().drops, 3000, "each is the kernel's: not ours");

    // SYNs from many IPv6 sources: remembered for the answer only, within the cap.
    for i in 0..100u16 {
        let syn = tcp_syn(addr(i), 40000 + i, IP6_B, 4000);
        e.handle_frame(now, &ipv6_frame(MAC_B, addr(i), IP6_B, 6, &syn));
    }
    assert_eq!(e.neighbour_count(), 0, "a SYN is not a neighbour entry");
    assert!(e.syn_source_count() <= 8, "{}", e.syn_source_count());

    // The caller's entries (from the kernel's table): never more than the cap (entries of
    // addresses without a connection make room).
    for i in 0..100 {
        e.add_neighbour(addr(i), MAC_A).unwrap();
        assert!(e.neighbour_count() <= 4, "{}", e.neighbour_count());
    }
}

/// A TCP SYN (no options) from `src`:`sport` to `dst`:`dport`, checksum over the IPv6 pseudo
/// header.
fn tcp_syn(src: Ipv6Addr, sport: u16, dst: Ipv6Addr, dport: u16) -> Vec<u8> {
    let mut t = Vec::new();
    t.extend_from_slice(&sport.to_be_bytes());
    t.extend_from_slice(&dport.to_be_bytes());
    t.extend_from_slice(&[
        0, 0, 0x10, 0, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0,
    ]);
    let len = (t.len() as u32).to_be_bytes();
    let pseudo = [
        &src.octets()[..],
        &dst.octets()[..],
        &len[..],
        &[0, 0, 0, 6],
    ]
    .concat();
    let c = testkit::internet_checksum(&[&pseudo, &t]);
    t[16..18].copy_from_slice(&c.to_be_bytes());
    t
}
