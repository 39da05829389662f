//! The application's close of a connection (`Endpoint::close`): receives and Reads flush at
//! once, late data from the peer lands nowhere, and a close that cannot finish is aborted by
//! the endpoint's own timer.

mod pair;

use std::time::Duration;

use ddp::{Access, RemoteBuf, WcOpcode, WcStatus, WorkRequest};
use pair::*;
use tcp_offload::CloseReason;

/// A closes with a receive and a Read outstanding while B's Read Response and an RDMA Write
/// are on their way; then B falls silent (never acknowledges A's FIN). A's receive and Read
/// complete flushed at once, the late Response and Write are dropped and counted, and A
/// aborts the connection at its close timeout: B sees the RST.
#[test]
fn close_flushes_at_once_drops_late_data_and_aborts_at_the_timeout() {
    let mut p = Pair::clean();
    let mut sa = settings(false, true);
    sa.close_timeout = Duration::from_secs(1);
    let (ca, cb) = p.establish(4000, sa, settings(false, true));
    let (recv, _) = p.a.register(64, Access::LOCAL_WRITE);
    let (sink, _) = p.a.register(1024, Access::LOCAL_WRITE);
    let (window, wstag) = p.a.register(64, Access::REMOTE_WRITE);
    let (_, src) = filled(&mut p.b, &[0xcc; 1024], Access::REMOTE_READ);
    let (bsrc, _) = filled(&mut p.b, &[0xee; 64], Access::LOCAL_WRITE);
    p.a.post(ca, WorkRequest::recv(1, buf(recv, 64))).unwrap();
    let remote = RemoteBuf { stag: src, to: 0 };
    p.a.post(ca, WorkRequest::read(2, buf(sink, 1024), remote))
        .unwrap();
    // A's Read Request reaches B, whose Response is on its way when A closes; B's Write
    // follows right after the close.
    let before = p.ba.stats().bytes_sent;
    p.run_until(100_000, |p| p.ba.stats().bytes_sent - before > 1024);
    p.a.close(p.now, ca).unwrap();
    let to_window = RemoteBuf { stag: wstag, to: 0 };
    p.b.post(cb, WorkRequest::write(3, buf(bsrc, 64), to_window))
        .unwrap();
    p.poll_b();
    let flushed: Vec<_> = std::iter::from_fn(|| p.a.poll_completion())
        .map(|(_, c)| (c.wr_id, c.opcode, c.status))
        .collect();
    assert_eq!(
        flushed,
        [
            (2, WcOpcode::Read, WcStatus::Flushed),
            (1, WcOpcode::Recv, WcStatus::Flushed)
        ]
    );
    // From here on B is silent: A runs alone until it gives the connection up.
    let start = p.now;
    let mut events = Vec::new();
    for _ in 0..100_000 {
        p.poll_a();
        events.extend(std::iter::from_fn(|| p.a.poll_event()));
        if closed(&events, ca).is_some() {
            break;
        }
        p.now = p.wake_a().expect("a timer");
    }
    assert_eq!(closed(&events, ca), Some(CloseReason::Aborted));
    let waited = p.now - start;
    assert!(
        waited >= Duration::from_secs(1) && waited < Duration::from_secs(2),
        "aborted at the close timeout, not {waited:?}"
    );
    let c = p.a.counters();
    assert_eq!((c.close_timeouts, c.rx_after_close), (1, 2), "{c:?}");
    for r in [recv, sink, window] {
        assert!(
            p.a.region(r).unwrap().iter().all(|b| *b == 0),
            "nothing landed"
        );
    }
    // The RST is on its way to B (behind A's FIN retransmissions).
    let mut rst = false;
    p.ab.recv_batch(p.now + Duration::from_secs(1), usize::MAX, |f| {
        let seg = tcp_offload::wire::parse(&f[14..]).expect("a TCP segment");
        rst |= seg.flags.rst;
    });
    assert!(rst, "A sent RST");
}
