//! The peer's graceful half-close (DDP -06 §6.2.1, [`RdmapEngine::peer_half_closed`]).

use super::tests::{buf, cfg, Side};
use super::*;
use crate::rdmap::work_request::{RemoteBuf, SendOpts, WorkRequest};

fn statuses(s: &mut Side) -> Vec<(u64, WcOpcode, WcStatus)> {
    s.completions()
        .iter()
        .map(|c| (c.wr_id, c.opcode, c.status))
        .collect()
}

/// DDP-69: after the peer's FIN, A's posted receive and Read (sent) flush at once, as do a
/// receive and a Read posted later; a Send posted before and a Send and a Write posted after
/// go out, arrive and complete on acknowledgement. The stream is not in error.
#[test]
fn ddp_69_peer_half_close_flushes_receives_and_reads_and_sends_complete() {
    let mut a = Side::new(1, cfg(1));
    let mut b = Side::new(2, cfg(2));
    let (recv, _) = a.region(64, Access::LOCAL_WRITE, |_| 0);
    let (sink, _) = a.region(64, Access::LOCAL_WRITE, |_| 0);
    let (src, _) = a.region(64, Access::LOCAL_WRITE, |i| i as u8 + 1);
    let (_, bsrc) = b.region(64, Access::REMOTE_READ, |_| 0xcc);
    let (brecv, _) = b.region(128, Access::LOCAL_WRITE, |_| 0);
    let (bwin, bwin_stag) = b.region(64, Access::REMOTE_WRITE, |_| 0);
    let remote = RemoteBuf {
        stag: bsrc,
        to: 0x1000,
    };
    a.post(WorkRequest::recv(1, buf(recv, 64)));
    a.post(WorkRequest::read(2, buf(sink, 32), remote));
    a.send_to(&mut b); // the Read Request; B's Response will never come
    a.post(WorkRequest::send(3, buf(src, 64), SendOpts::default()));
    a.eng.peer_half_closed();
    assert!(a.eng.is_peer_closed());
    assert_eq!(
        statuses(&mut a),
        [
            (2, WcOpcode::Read, WcStatus::Flushed),
            (1, WcOpcode::Recv, WcStatus::Flushed)
        ]
    );
    a.post(WorkRequest::recv(4, buf(recv, 64)));
    a.post(WorkRequest::read(5, buf(sink, 32), remote));
    a.post(WorkRequest::send(6, buf(src, 64), SendOpts::default()));
    let w = RemoteBuf {
        stag: bwin_stag,
        to: 0x1000,
    };
    a.post(WorkRequest::write(7, buf(src, 64), w));
    // The Read posted now waits behind the Send in the send queue (completion order).
    assert_eq!(statuses(&mut a), [(4, WcOpcode::Recv, WcStatus::Flushed)]);
    b.post(WorkRequest::recv(10, buf(brecv, 64)));
    let r = LocalBuf {
        offset: 64,
        ..buf(brecv, 64)
    };
    b.post(WorkRequest::recv(11, r));
    a.send_to(&mut b);
    a.eng.on_acked(u64::MAX);
    assert_eq!(
        statuses(&mut a),
        [
            (3, WcOpcode::Send, WcStatus::Success),
            (5, WcOpcode::Read, WcStatus::Flushed),
            (6, WcOpcode::Send, WcStatus::Success),
            (7, WcOpcode::Write, WcStatus::Success),
        ]
    );
    let theirs: Vec<_> = b
        .completions()
        .iter()
        .map(|c| (c.wr_id, c.status))
        .collect();
    assert_eq!(theirs, [(10, WcStatus::Success), (11, WcStatus::Success)]);
    let want: Vec<u8> = (1..=64).collect();
    assert_eq!(&b.mem.get(brecv).unwrap()[..64], &want[..]);
    assert_eq!(&b.mem.get(brecv).unwrap()[64..], &want[..]);
    assert_eq!(b.mem.get(bwin).unwrap(), &want[..]);
    assert!(a.eng.is_idle());
    assert_eq!(a.eng.state(), RdmapState::Active);
    assert!(a.events().is_empty(), "no error event");
}

/// DDP-69: Read Requests delivered before the peer's FIN are still answered: the Read
/// Response goes out after the half-close.
#[test]
fn ddp_69_read_requests_delivered_before_the_fin_are_still_answered() {
    let mut a = Side::new(1, cfg(1));
    let mut b = Side::new(2, cfg(2));
    let (sink, _) = a.region(64, Access::LOCAL_WRITE, |_| 0);
    let (_, bsrc) = b.region(64, Access::REMOTE_READ, |_| 0xcc);
    let remote = RemoteBuf {
        stag: bsrc,
        to: 0x1000,
    };
    a.post(WorkRequest::read(1, buf(sink, 64), remote));
    a.send_to(&mut b);
    b.eng.peer_half_closed(); // A's FIN came right after its Read Request
    b.send_to(&mut a);
    assert_eq!(statuses(&mut a), [(1, WcOpcode::Read, WcStatus::Success)]);
    assert!(a.mem.get(sink).unwrap().iter().all(|&x| x == 0xcc));
    assert!(b.eng.is_idle());
}

/// DDP-68: a ULPDU handed in after the peer's half-close tears the stream down abortively
/// (counted; the transport reports it; what is left flushes).
#[test]
fn ddp_68_data_after_the_peer_half_close_aborts_the_stream() {
    let mut a = Side::new(1, cfg(1));
    let mut b = Side::new(2, cfg(2));
    let (bwin, bstag) = b.region(64, Access::REMOTE_WRITE, |_| 0);
    let (src, _) = a.region(64, Access::LOCAL_WRITE, |_| 7);
    let (bsrc, _) = b.region(64, Access::LOCAL_WRITE, |_| 1);
    b.post(WorkRequest::send(9, buf(bsrc, 64), SendOpts::default()));
    let w = RemoteBuf {
        stag: bstag,
        to: 0x1000,
    };
    a.post(WorkRequest::write(1, buf(src, 64), w));
    b.eng.peer_half_closed();
    a.send_to(&mut b);
    assert_eq!(b.eng.stats().rx_after_peer_close, 1);
    assert!(b.mem.get(bwin).unwrap().iter().all(|&x| x == 0));
    assert_eq!(b.eng.state(), RdmapState::Error);
    assert_eq!(b.events(), [RdmapEvent::TransportFailed]);
    assert_eq!(statuses(&mut b), [(9, WcOpcode::Send, WcStatus::Flushed)]);
}
