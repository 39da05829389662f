//! Work on a region that is deregistered before the engine reaches it: it completes flushed,
//! touches no memory, and never reaches the region registered later in the same slot.

use super::tests::{buf, cfg, parse_segment, pump, Side};
use super::*;
use crate::rdmap::work_request::{RemoteBuf, SendOpts, WorkRequest};
use crate::test_support::summary;

/// Deregisters `h` and registers a zeroed region of the same length in its slot (the table
/// reuses the oldest free slot, and this is the only one).
fn replace(side: &mut Side, h: RegionHandle, len: usize, access: Access) -> (RegionHandle, Stag) {
    side.tags.deregister(h).expect("registered");
    side.mem.remove(h);
    let (new, stag) = side.region(len, access, |_| 0);
    assert_eq!(new.index(), h.index(), "the slot is reused");
    assert_ne!(new.generation(), h.generation());
    (new, stag)
}

fn send(side: &mut Side, wr_id: u64, src: RegionHandle, len: u32) {
    let wr = WorkRequest::send(wr_id, buf(src, len), SendOpts::default());
    side.post(wr);
}

/// A receive posted on a region deregistered since: the Send that consumes it completes it
/// flushed, its data lands nowhere (not in the slot's new region), and the stream goes on.
#[test]
fn receive_on_a_deregistered_region_completes_flushed_and_the_new_region_is_untouched() {
    let mut a = Side::new(1, cfg(1));
    let mut b = Side::new(2, cfg(2));
    let (src, _) = a.region(16, Access::LOCAL_WRITE, |i| i as u8 + 1);
    let (old, _) = b.region(32, Access::LOCAL_WRITE, |_| 0);
    b.post(WorkRequest::recv(7, buf(old, 32)));
    let (new, _) = replace(&mut b, old, 32, Access::LOCAL_WRITE);
    send(&mut a, 1, src, 16);
    pump(&mut a, &mut b);
    let wc = b.completions();
    assert_eq!(wc.len(), 1, "{wc:?}");
    assert_eq!(
        (wc[0].wr_id, wc[0].opcode, wc[0].status, wc[0].byte_len),
        (7, WcOpcode::Recv, WcStatus::Flushed, 0)
    );
    assert_eq!(
        b.mem.get(new).unwrap(),
        &[0u8; 32][..],
        "new region untouched"
    );
    assert_eq!(b.eng.stats().rx_region_gone, 1);
    // The stream goes on: the next Send reaches a receive posted on the new region.
    b.post(WorkRequest::recv(8, buf(new, 32)));
    send(&mut a, 2, src, 16);
    pump(&mut a, &mut b);
    let wc = b.completions();
    assert_eq!(
        (wc[0].wr_id, wc[0].status, wc[0].byte_len),
        (8, WcStatus::Success, 16)
    );
    assert_eq!(&b.mem.get(new).unwrap()[..16], a.mem.get(src).unwrap());
    assert_eq!(b.eng.state(), RdmapState::Active);
}

/// An RDMA Read whose sink was deregistered before its Response came: the Read completes
/// flushed and nothing lands, even when the region now in the slot has the very STag the Read
/// Request named (so the peer's Response is indistinguishable from one for the new region).
#[test]
fn read_into_a_deregistered_sink_completes_flushed_even_under_the_same_stag() {
    let mut a = Side::new(1, cfg(1));
    let mut b = Side::new(2, cfg(2));
    let (sink, sink_stag) = a.region(64, Access::LOCAL_WRITE, |_| 0);
    let (_, src) = b.region(64, Access::REMOTE_READ, |i| i as u8 ^ 0x5a);
    let remote = RemoteBuf {
        stag: src,
        to: 0x1000,
    };
    a.post(WorkRequest::read(3, buf(sink, 64), remote));
    // The Read Request reaches the peer, which queues its Response.
    a.send_to(&mut b);
    let (new, mut stag) = replace(&mut a, sink, 64, Access::LOCAL_WRITE);
    // Keys are 8 bits: give the new region the old STag outright.
    for _ in 0..100_000 {
        if stag == sink_stag {
            break;
        }
        stag = a.tags.revalidate(new).unwrap();
    }
    assert_eq!(stag, sink_stag, "the new region holds the Read's sink STag");
    pump(&mut a, &mut b);
    assert_eq!(
        summary(&a.completions()),
        [(3, WcOpcode::Read, WcStatus::Flushed, 0)]
    );
    assert_eq!(
        a.mem.get(new).unwrap(),
        &[0u8; 64][..],
        "new region untouched"
    );
    assert_eq!(a.eng.stats().rx_region_gone, 1);
    assert_eq!(a.eng.state(), RdmapState::Active, "no Terminate");
    assert_eq!(b.eng.state(), RdmapState::Active);
}

/// A Send whose region is deregistered before its first octet goes out completes flushed
/// without taking an MSN: nothing is sent for it, and the next Send meets the peer's next
/// receive.
#[test]
fn send_on_a_deregistered_region_completes_flushed_and_sends_nothing() {
    let mut a = Side::new(1, cfg(1));
    let mut b = Side::new(2, cfg(2));
    let (gone, _) = a.region(16, Access::LOCAL_WRITE, |_| 0xee);
    let (src, _) = a.region(16, Access::LOCAL_WRITE, |i| i as u8);
    let (rx, _) = b.region(16, Access::LOCAL_WRITE, |_| 0);
    b.post(WorkRequest::recv(9, buf(rx, 16)));
    send(&mut a, 1, gone, 16);
    send(&mut a, 2, src, 16);
    a.tags.deregister(gone).unwrap();
    a.mem.remove(gone);
    pump(&mut a, &mut b);
    let wc = a.completions();
    assert_eq!(
        wc.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(),
        [(1, WcStatus::Flushed), (2, WcStatus::Success)]
    );
    assert_eq!(a.eng.stats().tx_region_gone, 1);
    let wc = b.completions();
    assert_eq!(
        (wc[0].wr_id, wc[0].status, wc[0].byte_len),
        (9, WcStatus::Success, 16)
    );
    assert_eq!(b.mem.get(rx).unwrap(), a.mem.get(src).unwrap());
    assert_eq!(a.eng.state(), RdmapState::Active);
}

/// A region deregistered while its Send is half sent: the rest cannot be produced, so the
/// stream ends with a Terminate (RDMAP catastrophic error) and the Send is flushed.
#[test]
fn a_message_cut_by_deregistration_ends_the_stream_with_a_terminate() {
    let mut a = Side::new(1, cfg(1));
    let (src, _) = a.region(3000, Access::LOCAL_WRITE, |_| 1);
    send(&mut a, 1, src, 3000);
    let mut first = vec![0u8; 1000];
    assert!(a.eng.poll_ulpdu(&a.tags, &a.mem, &mut first).is_some());
    a.tags.deregister(src).unwrap();
    a.mem.remove(src);
    let rest = a.drain_tx();
    assert_eq!(rest.len(), 1, "only the Terminate");
    let (h, payload) = parse_segment(&rest[0].1).unwrap();
    assert!(matches!(h, DdpRepr::Untagged(u) if u.qn == qn::TERMINATE));
    let t = TerminateRepr::parse(&TerminatePacket::new_checked(payload).unwrap()).unwrap();
    assert_eq!(t.code, RdmapError::CatastrophicStream.term_code());
    assert_eq!(a.eng.state(), RdmapState::Error);
    let wc = a.completions();
    assert_eq!((wc[0].wr_id, wc[0].status), (1, WcStatus::Flushed));
}
