//! Two engines over the in-memory link: MPA startup, then Send, RDMA Write and RDMA Read of
//! 1 B .. 16 MiB verified byte for byte, markers and CRC on and off.

mod engine_support;
use engine_support::*;

#[test]
fn startup_and_small_transfers_markers_off_crc_on() {
    let mut p = Pair::clean();
    let (ca, cb) = p.establish(4000, settings(false, true), settings(false, true));
    for (i, len) in [1usize, 2, 1000, 1500, 4096, 65_537]
        .into_iter()
        .enumerate()
    {
        transfer_all(&mut p, ca, cb, len, i as u64 + 1);
    }
    let c = p.a.counters();
    assert_eq!(c.malformed + c.crc_errors + c.internal_errors, 0, "{c:?}");
}

#[test]
fn markers_and_crc_matrix_each_side_asking() {
    // MPA-99: CRC is on if either side asks; markers go the way the receiver asked for them.
    for (i, (ma, ca_crc, mb, cb_crc)) in [
        (true, true, true, true),
        (true, false, false, false),
        (false, false, true, false),
        (false, false, false, false),
    ]
    .into_iter()
    .enumerate()
    {
        let mut p = Pair::clean();
        let (ca, cb) = p.establish(4000, settings(ma, ca_crc), settings(mb, cb_crc));
        for (j, len) in [1usize, 777, 9000, 100_003].into_iter().enumerate() {
            transfer_all(&mut p, ca, cb, len, (i * 10 + j) as u64 + 1);
        }
        let c = p.b.counters();
        assert_eq!(
            c.malformed + c.crc_errors + c.framing_errors + c.internal_errors,
            0,
            "{c:?}"
        );
    }
}

#[test]
fn sixteen_mib_send_write_read_markers_on() {
    let mut p = Pair::clean();
    let (ca, cb) = p.establish(4000, settings(true, true), settings(true, true));
    transfer_all(&mut p, ca, cb, 16 << 20, 99);
    assert_eq!(p.a.counters().internal_errors, 0);
}
