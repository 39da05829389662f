//! Placement only where the specs allow it, through the endpoint and a reordering, lossy link: Send payloads made of
//! valid FPDU images (an RDMA Write into the receiver's window and a Send, CRC and all), markers
//! off and on. Only what was sent is placed and delivered, byte for byte; with markers off
//! nothing is placed out of order (no anchor reaches past a gap, MPA-70), with markers on the
//! markers find FPDUs out of order.

mod pair;
use std::time::Duration;

use ddp::{Access, Stag, WcStatus, WorkRequest};
use pair::*;

/// `ulpdu` framed as a whole markers-off FPDU (length, ULPDU, pad, CRC).
fn fpdu_image(ulpdu: &[u8]) -> Vec<u8> {
    let mut f = mpa::Framer::new(mpa::FramingConfig::default(), 0);
    let mut out = Vec::new();
    f.encode_to_vec(&[ulpdu], &mut out).unwrap();
    out
}

/// An RDMA Write (DDP tagged, L=1, RDMAP opcode 0) of `fill` octets to `stag` at TO 0, and a
/// Send (untagged, QN 0, MSN 2, MO 3000) of `FORGED`, framed as FPDUs, between filler.
fn payload(window: Stag, i: usize, len: usize) -> Vec<u8> {
    let mut write = vec![0xC1, 0x40];
    write.extend_from_slice(&window.0.to_be_bytes());
    write.extend_from_slice(&0u64.to_be_bytes());
    write.extend_from_slice(&[0xEE; 200]);
    let mut send = vec![
        0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0x0B, 0xB8,
    ];
    send.extend_from_slice(b"FORGED");
    let mut p = pattern(7 + i, i as u64);
    while p.len() < len {
        p.extend_from_slice(&fpdu_image(&write));
        p.extend_from_slice(&pattern(1 + i % 5, i as u64 + 100));
        p.extend_from_slice(&fpdu_image(&send));
    }
    p.truncate(len);
    p
}

fn run(markers: bool, seed: u64) -> (u64, u64) {
    let link = link()
        .with_loss(0.02)
        .with_reorder(0.3, Duration::from_micros(300));
    let mut p = Pair::new(link.clone(), link, seed);
    let (ca, cb) = p.establish(4100, settings(markers, true), settings(markers, true));
    let (window, wstag) = p.b.register(4096, Access::REMOTE_WRITE);
    const N: usize = 24;
    const RECV: usize = 8192;
    let (recv, _) = p.b.register(N * RECV, Access::LOCAL_WRITE);
    let mut sent = Vec::new();
    for i in 0..N {
        let msg = payload(wstag, i, 1000 + 277 * i);
        let (src, _) = filled(&mut p.a, &msg, Access::LOCAL_WRITE);
        let mut r = buf(recv, RECV);
        r.offset = (i * RECV) as u64;
        p.b.post(cb, WorkRequest::recv(i as u64, r)).unwrap();
        p.a.post(
            ca,
            WorkRequest::send(i as u64, buf(src, msg.len()), Default::default()),
        )
        .unwrap();
        sent.push(msg);
    }
    for i in 0..N as u64 {
        let c = p.wait_wc(false, i);
        assert_eq!(c.status, WcStatus::Success, "{c:?}");
        assert_eq!(c.byte_len as usize, sent[i as usize].len());
    }
    assert!(
        p.b.region(window).unwrap().iter().all(|&x| x == 0),
        "a forged Write landed"
    );
    let got = p.b.region(recv).unwrap();
    for (i, m) in sent.iter().enumerate() {
        let b = &got[i * RECV..(i + 1) * RECV];
        assert!(b[..m.len()] == m[..], "message {i} differs");
        assert!(
            b[m.len()..].iter().all(|&x| x == 0),
            "message {i}: octets past its end"
        );
    }
    let b = p.b.counters();
    assert_eq!(
        b.crc_errors + b.framing_errors + b.internal_errors,
        0,
        "{b:?}"
    );
    assert!(p.a.counters().retransmissions + b.retransmissions > 0);
    (b.ooo_fpdus_placed, b.ooo_bytes_max)
}

#[test]
fn mpa_70_fpdu_images_in_sends_over_a_reordering_link_markers_off() {
    let (placed, held) = run(false, 21);
    assert_eq!(placed, 0, "markers off: nothing located out of order");
    assert!(held > 0, "segments waited for the gap");
}

#[test]
fn mpa_70_fpdu_images_in_sends_over_a_reordering_link_markers_on() {
    let (placed, _) = run(true, 22);
    assert!(placed > 0, "markers locate FPDUs out of order");
}
