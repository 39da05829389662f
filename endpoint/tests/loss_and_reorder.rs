//! Transfers under loss 1% and reorder 25% on the link: data correct, FPDUs placed out of
//! order before their gap filled, out-of-order memory bounded. (The AF_XDP engine's own fault
//! injector is tested in dataplane.)

mod pair;
use std::time::Duration;

use pair::*;

fn lossy() -> LinkConfig {
    link()
        .with_loss(0.01)
        .with_reorder(0.25, Duration::from_micros(300))
}

#[test]
fn loss_and_reorder_markers_on_places_out_of_order() {
    let mut p = Pair::new(lossy(), lossy(), 7);
    let (ca, cb) = p.establish(4000, settings(true, true), settings(true, true));
    for (i, len) in [1usize, 5000, 300_000, 2 << 20].into_iter().enumerate() {
        transfer_all(&mut p, ca, cb, len, i as u64 + 1);
    }
    let (a, b) = (p.a.counters(), p.b.counters());
    println!(
        "ooo placed: a={} b={}; ooo max a={} b={}; retrans a={} b={}",
        a.ooo_fpdus_placed,
        b.ooo_fpdus_placed,
        a.ooo_bytes_max,
        b.ooo_bytes_max,
        a.retransmissions,
        b.retransmissions
    );
    assert!(
        b.ooo_fpdus_placed > 0,
        "B placed nothing out of order: {b:?}"
    );
    assert!(
        a.ooo_fpdus_placed > 0,
        "A (Read Responses) placed nothing out of order: {a:?}"
    );
    assert!(a.retransmissions + b.retransmissions > 0);
    // The endpoint holds out-of-order data only inside TCP's receive window.
    let bound = u64::from(p.a.config().tcp.recv_buffer);
    assert!(
        a.ooo_bytes_max <= bound && b.ooo_bytes_max <= bound,
        "{a:?} {b:?}"
    );
    assert_eq!(
        a.crc_errors + b.crc_errors + a.internal_errors + b.internal_errors,
        0
    );
}

#[test]
fn loss_and_reorder_markers_off_crc_off() {
    let mut p = Pair::new(lossy(), lossy(), 8);
    let (ca, cb) = p.establish(4000, settings(false, false), settings(false, false));
    for (i, len) in [3usize, 70_000, 1 << 20].into_iter().enumerate() {
        transfer_all(&mut p, ca, cb, len, i as u64 + 1);
    }
    let b = p.b.counters();
    // Without markers and CRC an aligned start cannot be trusted: out-of-order segments wait
    // for their gap (data correctness is the point here).
    assert!(
        b.retransmissions + p.a.counters().retransmissions > 0,
        "{b:?}"
    );
    assert_eq!(
        b.crc_errors + b.framing_errors + b.internal_errors,
        0,
        "{b:?}"
    );
}
