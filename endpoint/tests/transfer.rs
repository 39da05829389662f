//! Two endpoints over the simulated link: MPA startup, then Send, RDMA Write and RDMA Read of
//! 1 B .. 16 MiB verified byte for byte, markers and CRC on and off.

mod pair;
use ddp::WorkRequest;
use pair::*;

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

/// One copy: in-order data goes from the received frame straight into the region
/// (TCP lends each chunk to placement), so the receiving endpoint allocates next to nothing per
/// segment; the former path copied every chunk into a `Vec` first (at least one octet of heap
/// per octet received). Counted on the receiver's rounds only (the simulated link's own frame
/// buffers are allocated by the sender).
#[test]
fn in_order_receive_places_from_the_frame_without_a_copy_on_the_heap() {
    use ddp::{Access, RemoteBuf, WcStatus};
    use std::time::Duration;
    let mut p = Pair::clean();
    let (ca, _cb) = p.establish(4200, settings(false, true), settings(false, true));
    let len = 4 << 20;
    let (dst, stag) = p.b.register(len, Access::REMOTE_WRITE);
    let data = pattern(len, 42);
    let (src, _) = filled(&mut p.a, &data, Access::LOCAL_WRITE);
    p.a.post(
        ca,
        WorkRequest::write(9, buf(src, len), RemoteBuf { stag, to: 0 }),
    )
    .unwrap();
    let mut rx_heap = 0u64;
    let mut done = None;
    for _ in 0..5_000_000 {
        p.poll_a();
        rx_heap += allocation_counter::measure(|| {
            p.poll_b();
        })
        .bytes_total;
        while let Some((_, wc)) = p.a.poll_completion() {
            done = Some(wc);
        }
        if done.is_some() {
            break;
        }
        let next = [p.wake_a(), p.wake_b()].into_iter().flatten().min();
        p.now = match next {
            Some(t) if t > p.now => t,
            _ => p.now + Duration::from_micros(1),
        };
    }
    assert_eq!(done.expect("the Write completed").status, WcStatus::Success);
    assert!(p.b.region(dst).unwrap() == &data[..], "placed data differs");
    assert!(
        rx_heap < len as u64 / 8,
        "the receiver allocated {rx_heap} heap octets for {len} received"
    );
    println!("receiver heap allocations: {rx_heap} octets for {len} received");
}
