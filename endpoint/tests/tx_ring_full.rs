//! A full transmit ring (the sink has no free buffer) delays a connection's frames to the next
//! round, and loses none of them.

mod pair;
use ddp::{Access, LocalBuf, RemoteBuf, WcOpcode, WcStatus, WorkRequest};
use endpoint::{FrameSink, TxOutcome};
use pair::*;
use std::time::Instant;

/// A transmit ring with no free buffer.
struct Full;

impl FrameSink for Full {
    fn tx_frame(&mut self, _: Instant, _: &mut dyn FnMut(&mut [u8]) -> Option<usize>) -> TxOutcome {
        TxOutcome::NoBuffer
    }
}

/// The round that found the ring full leaves the connection marked: the next round sends its
/// Write although no frame arrived and no timer is due (before, it waited for the peer's next
/// segment or the retransmission timer, whichever came first).
#[test]
fn frames_refused_by_a_full_ring_go_out_at_the_next_round() {
    let mut p = Pair::clean();
    let (ca, _cb) = p.establish(4300, settings(true, true), settings(true, true));
    let len = 1000;
    let data = pattern(len, 7);
    let (dst, stag) = p.b.register(len, Access::REMOTE_WRITE);
    let (src, _) = filled(&mut p.a, &data, Access::LOCAL_WRITE);
    p.a.post(
        ca,
        WorkRequest::write(5, buf(src, len), RemoteBuf { stag, to: 0 }),
    )
    .unwrap();
    let now = p.now;
    p.a.poll_transmit(now, &mut Full);
    assert_eq!(p.a.counters().tx_no_buffer, 1);
    assert!(
        p.a.poll_timeout().is_some_and(|t| t <= now),
        "work is left: the endpoint asks to run again at once"
    );
    let mut out = Keep::default();
    p.a.poll_transmit(now, &mut out);
    assert_eq!(out.0.len(), 1, "the Write's segment, at the next round");
    // It is the Write: delivered to B, which acknowledges it, and A completes it.
    for f in &out.0 {
        p.b.handle_frame(now, f);
    }
    let wc = p.wait_wc(true, 5);
    assert_eq!((wc.opcode, wc.status), (WcOpcode::Write, WcStatus::Success));
    assert_eq!(p.b.region(dst).unwrap()[..len], data[..]);
}

/// A connection serviced by `transmit_conn` after a post is not serviced again for the same
/// mark: no round is due for it, a round sends nothing, and what comes later still goes out.
#[test]
fn a_round_after_transmit_conn_sends_nothing_twice() {
    let mut p = Pair::clean();
    let (ca, _cb) = p.establish(4301, settings(false, true), settings(false, true));
    let (dst, stag) = p.b.register(64, Access::REMOTE_WRITE);
    let (src, _) = filled(&mut p.a, &pattern(64, 9), Access::LOCAL_WRITE);
    let now = p.now;
    let mut sent = Keep::default();
    for (i, to) in [(1u64, 0u64), (2, 32)] {
        let local = LocalBuf {
            region: src,
            offset: to,
            len: 32,
        };
        p.a.post(ca, WorkRequest::write(i, local, RemoteBuf { stag, to }))
            .unwrap();
        p.a.transmit_conn(now, ca, &mut sent);
        assert_eq!(sent.0.len(), i as usize, "write {i} out at once");
        assert!(
            p.a.poll_timeout().is_none_or(|t| t > now),
            "no round left to run for the post"
        );
        let mut round = Keep::default();
        p.a.poll_transmit(now, &mut round);
        assert!(
            round.0.is_empty(),
            "the round after write {i}: {} frames",
            round.0.len()
        );
    }
    for f in &sent.0 {
        p.b.handle_frame(now, f);
    }
    p.poll_b();
    assert_eq!(p.b.region(dst).unwrap()[..64], pattern(64, 9)[..]);
}
