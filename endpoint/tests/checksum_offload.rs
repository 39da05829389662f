//! Endpoints that leave every TCP checksum to the device (`tcp.tx_checksum = Offloaded`, what
//! the AF_XDP device sets when its queue requests checksums through TX metadata), with a tap
//! on each wire doing the device's part (finishing each TCP checksum): listener SYN-ACKs,
//! MPA startup and Send / RDMA Write / RDMA Read, over IPv4 and IPv6, verified byte for byte.
//! The control: without the finishing tap nothing connects, every segment is refused as
//! malformed.

mod pair;
use std::cell::Cell;
use std::rc::Rc;

use endpoint::EndpointConfig;
use pair::*;
use tcp_offload::{checksum, TxChecksum};

/// The device: finishes the TCP checksum of every IPv4/IPv6 TCP frame (checksum field holding
/// the pseudo header's sum, `CHECKSUM_PARTIAL`) and counts the frames.
fn device(count: Rc<Cell<usize>>) -> Tap {
    Box::new(move |f: &mut Vec<u8>| {
        let l4 = match f[12..14] {
            [0x08, 0x00] if f[23] == 6 => 14 + usize::from(f[14] & 0x0f) * 4,
            [0x86, 0xdd] if f[20] == 6 => 54,
            _ => return true,
        };
        let sum = checksum::offloaded_field(&f[l4..]);
        f[l4 + 16..l4 + 18].copy_from_slice(&sum.to_be_bytes());
        count.set(count.get() + 1);
        true
    })
}

fn offloaded(mut c: EndpointConfig) -> EndpointConfig {
    c.tcp.tx_checksum = TxChecksum::Offloaded;
    c
}

fn pair(v6: bool) -> Pair {
    let (ia, ib): (std::net::IpAddr, std::net::IpAddr) = if v6 {
        (IP6_A.into(), IP6_B.into())
    } else {
        (IP_A.into(), IP_B.into())
    };
    Pair::with_configs(
        offloaded(endpoint_cfg(MAC_A, ia, MAC_B)),
        offloaded(endpoint_cfg(MAC_B, ib, MAC_A)),
        link(),
        link(),
        3,
    )
}

#[test]
fn device_finished_checksums_carry_startup_and_transfers() {
    for v6 in [false, true] {
        let mut p = pair(v6);
        let (na, nb) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
        p.ab.tap = Some(device(na.clone()));
        p.ba.tap = Some(device(nb.clone()));
        let (ca, cb) = p.establish(4000, settings(true, true), settings(true, true));
        for (i, len) in [1usize, 1500, 65_537].into_iter().enumerate() {
            transfer_all(&mut p, ca, cb, len, i as u64 + 1);
        }
        for c in [p.a.counters(), p.b.counters()] {
            assert_eq!(c.malformed + c.drops, 0, "{c:?}");
        }
        assert!(na.get() > 50 && nb.get() > 50, "{} {}", na.get(), nb.get());
    }
}

#[test]
fn unfinished_checksums_are_refused() {
    let mut p = pair(false);
    p.b.listen(4000, settings(false, true)).unwrap();
    let peer = std::net::SocketAddr::new(p.b.config().ip, 4000);
    let ca = p.a.connect(p.now, peer, settings(false, true)).unwrap();
    // A gives up after its SYN retries; B refused every SYN as malformed.
    p.run_until(2_000, |p| closed(&p.events_a, ca).is_some());
    assert!(!established(&p.events_a, ca));
    let b = p.b.counters();
    assert_eq!(
        (b.malformed, b.rx_packets, b.tx_packets),
        (7, 7, 0),
        "{b:?}"
    );
}

/// A SYN to a port nobody listens on gets the endpoint's RST for unknown segments, its
/// checksum left to the device too: finished, it refuses the connection; unfinished (no tap
/// on B's side), A never sees it and times out instead.
#[test]
fn the_rst_for_an_unknown_port_is_offloaded_too() {
    for finished in [true, false] {
        let mut p = pair(false);
        let count = Rc::new(Cell::new(0));
        p.ab.tap = Some(device(count.clone()));
        if finished {
            p.ba.tap = Some(device(Rc::new(Cell::new(0))));
        }
        // A port of B's active-open range with no connection: B answers RST (a port outside
        // it is not steered to the endpoint at all).
        let peer = std::net::SocketAddr::new(p.b.config().ip, 40500);
        let ca = p.a.connect(p.now, peer, settings(false, true)).unwrap();
        p.run_until(5_000, |p| closed(&p.events_a, ca).is_some());
        assert!(p.b.counters().rsts_for_unknown > 0, "{:?}", p.b.counters());
        let want = if finished {
            tcp_offload::CloseReason::Refused
        } else {
            tcp_offload::CloseReason::TimedOut
        };
        assert_eq!(closed(&p.events_a, ca), Some(want));
    }
}
