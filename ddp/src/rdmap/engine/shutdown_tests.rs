//! The ULP's close of a stream for good ([`RdmapEngine::shutdown`]): what would place data
//! into its memory ends at once, what it sent still goes out.

use super::tests::{buf, cfg, pump, Side};
use super::*;
use crate::rdmap::work_request::{RemoteBuf, SendOpts, WorkRequest};

/// Receives and Reads (sent or still queued) flush at once, later posts are refused, a late
/// Read Response and Write from the peer land nowhere (counted), and a Send posted before the
/// close still goes out and completes on acknowledgement; then the engine is idle.
#[test]
fn shutdown_flushes_what_would_place_and_lets_sends_finish() {
    let mut a = Side::new(1, cfg(1));
    let mut b = Side::new(2, cfg(2));
    let (recv, _) = a.region(64, Access::LOCAL_WRITE, |_| 0);
    let (sink, _) = a.region(64, Access::LOCAL_WRITE, |_| 0);
    let (win, window) = a.region(64, Access::REMOTE_WRITE, |_| 0);
    let (src, _) = a.region(64, Access::LOCAL_WRITE, |i| i as u8);
    let (_, bsrc) = b.region(64, Access::REMOTE_READ, |_| 0xcc);
    let (bwrite, _) = b.region(64, Access::LOCAL_WRITE, |_| 0xee);
    let (brecv, _) = b.region(64, Access::LOCAL_WRITE, |_| 0);
    let remote = RemoteBuf {
        stag: bsrc,
        to: 0x1000,
    };
    a.post(WorkRequest::recv(1, buf(recv, 64)));
    a.post(WorkRequest::read(2, buf(sink, 32), remote));
    // The first Read Request reaches the peer, which queues its Response.
    a.send_to(&mut b);
    a.post(WorkRequest::read(3, buf(sink, 32), remote));
    let send = WorkRequest::send(4, buf(src, 64), SendOpts::default());
    a.post(send);
    b.post(WorkRequest::recv(10, buf(brecv, 64)));
    let write = RemoteBuf {
        stag: window,
        to: 0x1000,
    };
    b.post(WorkRequest::write(11, buf(bwrite, 64), write));
    a.eng.shutdown();
    let flushed: Vec<_> = a
        .completions()
        .iter()
        .map(|c| (c.wr_id, c.opcode, c.status))
        .collect();
    assert_eq!(
        flushed,
        [
            (2, WcOpcode::Read, WcStatus::Flushed),
            (3, WcOpcode::Read, WcStatus::Flushed),
            (1, WcOpcode::Recv, WcStatus::Flushed),
        ]
    );
    for wr in [
        WorkRequest::recv(5, buf(recv, 64)),
        WorkRequest::send(6, buf(src, 64), SendOpts::default()),
    ] {
        assert_eq!(
            a.eng.post(&a.tags, wr),
            Err(WorkRequestError::InvalidState),
            "DDP-67"
        );
    }
    pump(&mut a, &mut b);
    let done: Vec<_> = a
        .completions()
        .iter()
        .map(|c| (c.wr_id, c.status))
        .collect();
    assert_eq!(done, [(4, WcStatus::Success)], "the Send went out");
    let theirs: Vec<_> = b
        .completions()
        .iter()
        .map(|c| (c.wr_id, c.status))
        .collect();
    assert_eq!(theirs, [(10, WcStatus::Success), (11, WcStatus::Success)]);
    assert_eq!(b.mem.get(brecv).unwrap(), a.mem.get(src).unwrap());
    assert!(
        a.mem.get(sink).unwrap().iter().all(|x| *x == 0),
        "no Read data"
    );
    assert!(
        a.mem.get(win).unwrap().iter().all(|x| *x == 0),
        "no Write data"
    );
    assert_eq!(
        a.eng.stats().rx_after_close,
        2,
        "the Read Response and the Write"
    );
    assert_eq!(b.eng.stats().rx_ulpdus, 2, "one Read Request and the Send");
    assert!(a.eng.is_idle());
    assert_eq!(a.eng.state(), RdmapState::Active, "no Terminate");
}
