//! Every RDMAP operation between two queue pairs, markers and CRC on and off, in any
//! segmentation.

use super::*;
use crate::test_support::summary;

#[test]
fn startup_then_established_both_sides() {
    let (mut a, mut b) = pair(true, true);
    pump(&mut a, &mut b, 7);
    let ea = a.events();
    let eb = b.events();
    let QpEvent::Established {
        peer_private_data,
        negotiated,
    } = &ea[0]
    else {
        panic!("{ea:?}")
    };
    assert_eq!(peer_private_data, b"ok");
    assert!(negotiated.tx_markers && negotiated.rx_markers && negotiated.crc);
    let QpEvent::Established {
        peer_private_data, ..
    } = &eb[0]
    else {
        panic!("{eb:?}")
    };
    assert_eq!(peer_private_data, b"hello");
    assert!(a.qp.is_established() && b.qp.is_established());
}

/// Send, Send with Invalidate, RDMA Write and RDMA Read of `len` octets, verified byte for byte.
fn run_all_ops(markers: bool, crc: bool, len: usize, chunk: usize) {
    let (mut a, mut b) = pair(markers, crc);
    let (asrc, _) = a.region(len, Access::LOCAL_WRITE, pattern(1));
    let (aread, _) = a.region(len, Access::LOCAL_WRITE, |_| 0);
    let (brecv, _) = b.region(2 * len, Access::LOCAL_WRITE, |_| 0);
    let (bwin, bstag) = b.region(len, Access::REMOTE_WRITE | Access::REMOTE_READ, |_| 0);
    let (_, binv) = b.region(16, Access::REMOTE_WRITE, |_| 0);
    let (bsrc, bsrc_stag) = b.region(len, Access::REMOTE_READ, pattern(2));
    let l = len as u32;
    // Work posted before the connection is up.
    b.qp.post(&b.tags, WorkRequest::recv(100, local(brecv, 0, l)))
        .unwrap();
    b.qp.post(&b.tags, WorkRequest::recv(101, local(brecv, len as u64, l)))
        .unwrap();
    let src = local(asrc, 0, l);
    a.qp.post(&a.tags, WorkRequest::send(1, src, SendOpts::default()))
        .unwrap();
    a.qp.post(
        &a.tags,
        WorkRequest::send(
            2,
            src,
            SendOpts {
                solicited: false,
                invalidate: Some(binv),
            },
        ),
    )
    .unwrap();
    a.qp.post(
        &a.tags,
        WorkRequest::write(3, src, remote(bstag, 0x10_0000)),
    )
    .unwrap();
    let rd = local(aread, 0, l);
    a.qp.post(
        &a.tags,
        WorkRequest::read(4, rd, remote(bsrc_stag, 0x10_0000)),
    )
    .unwrap();
    pump(&mut a, &mut b, chunk);
    assert!(
        !a.qp.is_error() && !b.qp.is_error(),
        "{:?} {:?}",
        a.events(),
        b.events()
    );
    let sent: Vec<u8> = (0..len).map(pattern(1)).collect();
    let recv = b.mem.get(brecv).unwrap();
    assert!(
        recv[..len] == sent[..] && recv[len..] == sent[..],
        "Sends placed byte for byte"
    );
    assert!(
        b.mem.get(bwin).unwrap() == &sent[..],
        "Write placed byte for byte"
    );
    let read: Vec<u8> = (0..len).map(pattern(2)).collect();
    assert!(
        a.mem.get(aread).unwrap() == &read[..],
        "Read placed byte for byte"
    );
    let _ = bsrc;
    let ca = summary(&a.completions());
    assert_eq!(
        ca,
        [
            (1, WcOpcode::Send, WcStatus::Success, l),
            (2, WcOpcode::Send, WcStatus::Success, l),
            (3, WcOpcode::Write, WcStatus::Success, l),
            (4, WcOpcode::Read, WcStatus::Success, l),
        ]
    );
    let cb: Vec<_> = b
        .completions()
        .iter()
        .map(|c| (c.wr_id, c.opcode, c.byte_len, c.invalidated))
        .collect();
    assert_eq!(
        cb,
        [
            (100, WcOpcode::Recv, l, None),
            (101, WcOpcode::Recv, l, Some(binv))
        ]
    );
    assert!(
        !b.tags.lookup(binv).unwrap().1.valid,
        "Send with Invalidate invalidated the STag"
    );
    // MULPDU respected on the wire (checked through the engine's segment count).
    let mulpdu = a.qp.negotiated().unwrap().mulpdu;
    let min_segments = 2 * len.div_ceil(mulpdu - 18) + len.div_ceil(mulpdu - 14) + 1;
    assert!(a.qp.stats().tx_ulpdus as usize >= min_segments);
}

#[test]
fn loopback_all_ops_markers_off_crc_on() {
    for len in [1, 4096, 1 << 20] {
        run_all_ops(false, true, len, 1000);
    }
}

#[test]
fn loopback_all_ops_markers_on_crc_on() {
    for len in [1, 4096, 1 << 20] {
        run_all_ops(true, true, len, 1000);
    }
}

#[test]
fn loopback_all_ops_markers_off_crc_off() {
    for len in [1, 4096, 1 << 20] {
        run_all_ops(false, false, len, 1000);
    }
}

#[test]
fn loopback_all_ops_markers_on_crc_off() {
    for len in [1, 4096, 1 << 20] {
        run_all_ops(true, false, len, 1000);
    }
}

/// Byte-at-a-time and huge reads give the same result (the stream parser never depends on
/// segmentation).
#[test]
fn loopback_any_segmentation() {
    for chunk in [1, 3, 517, 100_000] {
        run_all_ops(true, true, 3000, chunk);
    }
}
