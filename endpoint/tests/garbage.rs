//! Bad input never panics, is counted, and never harms another connection: malformed
//! Ethernet/IPv4/TCP frames, segments for nobody, and MPA/DDP garbage on a live connection.

mod pair;
use std::net::{SocketAddr, SocketAddrV4};

use endpoint::EndpointEvent;
use pair::*;
use tcp_offload::wire::{Flags, SegmentRepr, TcpOptions};
use tcp_offload::FourTuple;

fn eth(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A valid IPv4/TCP segment from A's side of `tuple` (local = A) carrying `payload`.
fn segment(tuple: FourTuple, seq: u32, ack: u32, payload: &[u8]) -> Vec<u8> {
    let repr = SegmentRepr {
        tuple,
        seq: tcp_offload::SeqNum(seq),
        ack: Some(tcp_offload::SeqNum(ack)),
        flags: Flags {
            psh: true,
            ..Flags::default()
        },
        window: 1000,
        options: TcpOptions::default(),
    };
    let mut b = vec![0u8; repr.buffer_len(payload.len())];
    let n = repr
        .emit(&mut b, payload.len(), |d| d.copy_from_slice(payload))
        .unwrap();
    b.truncate(n);
    b
}

#[test]
fn malformed_frames_and_mpa_garbage_are_counted_and_isolated() {
    let mut p = Pair::clean();
    let (ca1, cb1) = p.establish(4000, settings(true, true), settings(true, true));
    let ca2 =
        p.a.connect(p.now, SocketAddrV4::new(IP_B, 4000), settings(false, true))
            .unwrap();
    p.run_until(100_000, |p| established(&p.events_a, ca2));
    let cb2 = p
        .events_b
        .iter()
        .filter_map(|e| match e {
            EndpointEvent::Established { conn, .. } => Some(*conn),
            _ => None,
        })
        .find(|c| *c != cb1)
        .unwrap();

    // 1. Frame-level garbage at B.
    let now = p.now;
    let before = p.b.counters();
    let mut junk: Vec<Vec<u8>> = vec![
        vec![],
        vec![1, 2, 3],
        eth(MAC_B, MAC_A, 0x0800, &[]),
        eth(MAC_B, MAC_A, 0x0800, &[0x45, 0, 0, 20]),
        eth(MAC_B, MAC_A, 0x0800, &[0x4f; 60]),
        eth(MAC_B, MAC_A, 0x8100, &[0, 1]),
        eth(MAC_B, MAC_A, 0x86dd, &[0x60; 60]),
        eth([9; 6], MAC_A, 0x0800, &[0x45; 60]),
    ];
    let tuple = p.a.tcp(ca1).unwrap().tuple();
    let mut bad_csum = segment(tuple, 1, 1, b"hello");
    let l = bad_csum.len();
    bad_csum[l - 1] ^= 0xff;
    junk.push(eth(MAC_B, MAC_A, 0x0800, &bad_csum));
    let mut truncated = segment(tuple, 1, 1, &[0u8; 100]);
    truncated.truncate(50);
    junk.push(eth(MAC_B, MAC_A, 0x0800, &truncated));
    // A segment to a steered port (B's active-open range) for no connection: answered with
    // RST, counted.
    let stray = FourTuple {
        local: SocketAddr::V4(SocketAddrV4::new(IP_A, 9)),
        remote: SocketAddr::V4(SocketAddrV4::new(IP_B, 40999)),
    };
    junk.push(eth(MAC_B, MAC_A, 0x0800, &segment(stray, 1, 1, b"x")));
    for j in junk {
        p.ab.send(now, j);
    }
    for _ in 0..20 {
        p.step();
    }
    let after = p.b.counters();
    assert!(after.malformed >= before.malformed + 6, "{after:?}");
    assert!(after.drops > before.drops, "{after:?}");
    assert!(after.rsts_for_unknown > before.rsts_for_unknown);

    // A segment to a port B neither listens on nor uses for active opens is not ours (the XDP
    // program would give it to the kernel): dropped without a RST.
    let unsteered = FourTuple {
        local: SocketAddr::V4(SocketAddrV4::new(IP_A, 9)),
        remote: SocketAddr::V4(SocketAddrV4::new(IP_B, 9)),
    };
    let before = p.b.counters();
    p.ab.send(
        p.now,
        eth(MAC_B, MAC_A, 0x0800, &segment(unsteered, 1, 1, b"x")),
    );
    for _ in 0..20 {
        p.step();
    }
    let after = p.b.counters();
    assert_eq!(after.drops, before.drops + 1, "{after:?}");
    assert_eq!(after.rsts_for_unknown, before.rsts_for_unknown);

    // 2. MPA garbage inside connection 1's byte stream (sent through A's TCP, so TCP stays in
    // sync): FPDUs whose CRC (and markers) cannot match.
    transfer_all(&mut p, ca1, cb1, 3000, 4); // the Initiator's first FPDU ungates B (MPA-85)
                                             // Every 16-bit word reads as ULPDU_Length 8, wherever the parser (or a marker) falls.
    let garbage: Vec<u8> = [0u8, 8].repeat(512);
    p.a.inject_stream_bytes(ca1, &garbage).unwrap();
    p.run_until(100_000, |p| {
        p.b.counters().crc_errors + p.b.counters().framing_errors > 0
    });
    p.run_until(100_000, |p| {
        p.events_b
            .iter()
            .any(|e| matches!(e, EndpointEvent::StreamError { conn, .. } if *conn == cb1))
    });
    // B's Terminate reaches A, which reports the stream error too.
    p.run_until(100_000, |p| {
        p.events_a
            .iter()
            .any(|e| matches!(e, EndpointEvent::StreamError { conn, .. } if *conn == ca1))
    });
    assert!(p.b.counters().terminates_sent > 0);
    assert!(p.a.counters().terminates_received > 0);

    // 3. Connection 2 is unaffected.
    transfer_all(&mut p, ca2, cb2, 50_000, 5);
    assert!(!p
        .events_b
        .iter()
        .any(|e| matches!(e, EndpointEvent::StreamError { conn, .. } if *conn == cb2)));
}
