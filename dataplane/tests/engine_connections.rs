//! 64 concurrent connections over two listeners, each verified; graceful close and RST.

mod engine_support;
use std::net::SocketAddrV4;

use dataplane::engine::{ConnId, EngineEvent};
use ddp::{Access, RemoteBuf, WcStatus};
use engine_support::*;
use tcp_offload::CloseReason;

#[test]
fn sixty_four_connections_over_two_listeners_each_verified() {
    let mut p = Pair::clean();
    p.b.listen(5001, settings(true, true)).unwrap();
    p.b.listen(5002, settings(false, true)).unwrap();
    let mut conns = Vec::new();
    for i in 0..64u16 {
        let port = 5001 + (i % 2);
        let c =
            p.a.connect(
                p.now,
                SocketAddrV4::new(IP_B, port),
                settings(i % 3 == 0, true),
            )
            .unwrap();
        conns.push(c);
    }
    p.run_until(200_000, |p| {
        conns.iter().all(|c| established(&p.events_a, *c))
            && p.events_b
                .iter()
                .filter(|e| matches!(e, EngineEvent::Established { .. }))
                .count()
                == 64
    });
    // Each connection writes its own pattern into its own region at B.
    let mut expect = Vec::new();
    for (i, c) in conns.iter().enumerate() {
        let len = 1000 + i * 997;
        let data = pattern(len, i as u64 + 100);
        let (src, _) = filled(&mut p.a, &data, Access::LOCAL_WRITE);
        let (dst, stag) = p.b.register(len, Access::REMOTE_WRITE);
        p.a.post_write(*c, i as u64, buf(src, len), RemoteBuf { stag, to: 0 })
            .unwrap();
        expect.push((dst, data));
    }
    p.run_until(1_000_000, |p| p.wc_a.len() >= 64);
    assert!(p.wc_a.iter().all(|(_, w)| w.status == WcStatus::Success));
    for (dst, data) in expect {
        assert!(p.b.region(dst).unwrap() == &data[..]);
    }
    assert_eq!(p.b.connection_count(), 64);
}

fn closed(ev: &[EngineEvent]) -> Vec<(ConnId, CloseReason)> {
    ev.iter()
        .filter_map(|e| match e {
            EngineEvent::Closed { conn, reason } => Some((*conn, *reason)),
            _ => None,
        })
        .collect()
}

#[test]
fn graceful_close_after_work_completes_both_sides_closed() {
    let mut p = Pair::clean();
    let (ca, cb) = p.establish(4000, settings(false, true), settings(false, true));
    transfer_all(&mut p, ca, cb, 12_345, 1);
    p.a.close(ca).unwrap();
    p.run_until(1_000_000, |p| {
        closed(&p.events_a).iter().any(|c| c.0 == ca)
            && closed(&p.events_b).iter().any(|c| c.0 == cb)
    });
    assert_eq!(closed(&p.events_b)[0].1, CloseReason::Normal);
    assert!(p
        .events_b
        .iter()
        .any(|e| matches!(e, EngineEvent::PeerClosed { .. })));
    assert_eq!(p.a.connection_count() + p.b.connection_count(), 0);
}

#[test]
fn abort_sends_rst_peer_sees_reset_and_flushes() {
    let mut p = Pair::clean();
    let (ca, cb) = p.establish(4000, settings(false, true), settings(false, true));
    let (dst, _) = p.b.register(100, Access::LOCAL_WRITE);
    p.b.post_recv(cb, 77, buf(dst, 100)).unwrap();
    p.a.abort(ca).unwrap();
    p.run_until(100_000, |p| closed(&p.events_b).iter().any(|c| c.0 == cb));
    assert_eq!(closed(&p.events_b)[0].1, CloseReason::Reset);
    // The posted receive is flushed, not lost.
    assert!(p
        .wc_b
        .iter()
        .any(|(_, w)| w.wr_id == 77 && w.status == WcStatus::Flushed));
}
