//! The engine's fault injector ([`dataplane::engine::FaultyIo`]) on both paths of two engines
//! over the in-memory link: it drops, duplicates and reorders, and the transfers still verify,
//! with FPDUs placed out of order. (The endpoint's own tests, loss and reordering on the link
//! included, run on the endpoint crate's pair harness.)

mod engine_pair;

use dataplane::engine::FaultConfig;
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
