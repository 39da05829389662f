//! The engine's fault injector ([`dataplane::engine::FaultyIo`]) on both paths of two engines
//! over the in-memory link: it drops, duplicates and reorders, and the transfers still verify,
//! with FPDUs placed out of order; it corrupts, and every corrupted frame is caught: by the
//! TCP checksum (dropped, retransmitted, the transfers verify) or, with the checksum mended,
//! by the MPA CRC (the connection terminated, nothing delivered). (The endpoint's own tests, loss and reordering on the link
//! included, run on the endpoint crate's pair harness.)

mod engine_pair;

use dataplane::engine::FaultConfig;
use ddp::{Access, WorkRequest};
use endpoint::QpSettings;
use engine_pair::*;

fn settings(markers: bool, crc: bool) -> QpSettings {
    let mut s = QpSettings::default();
    s.startup.want_markers = markers;
    s.startup.want_crc = crc;
    s
}

#[test]
fn engine_fault_injector_drop_duplicate_reorder() {
    let f = |seed| FaultConfig {
        seed,
        rx_drop: 0.01,
        rx_duplicate: 0.02,
        rx_reorder: 0.25,
        tx_drop: 0.01,
        tx_duplicate: 0.02,
        tx_reorder: 0.25,
        ..FaultConfig::default()
    };
    let mut p = Pair::new(link(), link(), 9, f(1), f(2));
    let (ca, cb) = p.establish(4000, settings(true, true), settings(false, true));
    for (i, len) in [10usize, 200_000, 1 << 20].into_iter().enumerate() {
        transfer_all(&mut p, ca, cb, len, i as u64 + 1);
    }
    let fa = p.a.fault_counters();
    assert!(fa.dropped[0] + fa.dropped[1] > 0 && fa.duplicated[1] > 0 && fa.reordered[1] > 0);
    let placed = |e: &dataplane::engine::Engine<MemPort>| e.endpoint().counters().ooo_fpdus_placed;
    assert!(placed(&p.b) + placed(&p.a) > 0);
}

#[test]
fn corrupted_frames_with_stale_checksums_are_dropped_and_retransmitted() {
    let f = FaultConfig {
        seed: 3,
        rx_corrupt: 0.01,
        tx_corrupt: 0.01,
        ..FaultConfig::default()
    };
    let mut p = Pair::new(link(), link(), 9, f, FaultConfig::default());
    let (ca, cb) = p.establish(4000, settings(true, true), settings(false, true));
    transfer_all(&mut p, ca, cb, 1 << 20, 1);
    let fa = p.a.fault_counters();
    let (a, b) = (p.a.endpoint().counters(), p.b.endpoint().counters());
    println!("{fa:?}; A: {a:?}; B: {b:?}");
    assert!(fa.corrupted[0] > 0 && fa.corrupted[1] > 0, "{fa:?}");
    // Each is dropped by the checksum, on whichever path it was corrupted.
    assert_eq!(a.malformed, fa.corrupted[0]);
    assert_eq!(b.malformed, fa.corrupted[1]);
    assert!(a.retransmissions + b.retransmissions > 0);
    assert_eq!(a.crc_errors + b.crc_errors, 0);
}

#[test]
fn corrupted_frames_with_mended_checksums_fail_the_mpa_crc() {
    let f = FaultConfig {
        seed: 5,
        tx_corrupt_past_checksum: 0.002,
        ..FaultConfig::default()
    };
    let mut p = Pair::new(link(), link(), 9, f, FaultConfig::default());
    let (ca, cb) = p.establish(4000, settings(false, true), settings(false, true));
    let len = 1 << 20;
    let (dst, _) = filled(&mut p.b, &vec![0u8; len], Access::LOCAL_WRITE);
    let (src, _) = filled(&mut p.a, &testkit::pattern(len, 1), Access::LOCAL_WRITE);
    p.b.endpoint_mut()
        .post(cb, WorkRequest::recv(1, dst))
        .unwrap();
    p.a.endpoint_mut()
        .post(ca, WorkRequest::send(2, src, Default::default()))
        .unwrap();
    let crc = |p: &Pair| p.b.endpoint().counters().crc_errors;
    for _ in 0..1_000_000 {
        if crc(&p) > 0 {
            break;
        }
        p.step();
    }
    let fa = p.a.fault_counters();
    let b = p.b.endpoint().counters();
    println!("{fa:?}; B: {b:?}");
    assert!(fa.corrupted_past_checksum[1] > 0, "{fa:?}");
    assert_eq!(b.malformed, 0, "TCP took the mended segments");
    assert_eq!(b.crc_errors, 1, "the MPA CRC caught the first");
    assert!(b.terminates_sent >= 1, "B terminated the connection");
}
