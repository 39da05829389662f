//! Half-close through the endpoint (DDP -06 §6.2.1): A sends, then closes its
//! sending side; B delivers what came before A's FIN, flushes its other receive, and still
//! finishes sending (a Send and an RDMA Write posted after the FIN arrive at A, whose reception
//! is still on); then B closes and both connections end normally. Clean and lossy links.

mod pair;
use std::time::Duration;

use ddp::{Access, RemoteBuf, WcOpcode, WcStatus, WorkRequest};
use endpoint::EndpointEvent;
use pair::*;
use tcp_offload::CloseReason;

fn closed(p: &Pair, on_a: bool) -> Option<CloseReason> {
    let ev = if on_a { &p.events_a } else { &p.events_b };
    ev.iter().find_map(|e| match e {
        EndpointEvent::Closed { reason, .. } => Some(*reason),
        _ => None,
    })
}

/// A pair over `l` whose A (the side that half-closes) has no FIN-WAIT-2 limit: the harness
/// jumps virtual time to the next timer whenever both sides are idle, and A is not an orphan
/// (tcp-offload applies `fin_wait2_timeout` to every FIN-WAIT-2, 60 s by default).
fn pair_over(l: LinkConfig, seed: u64) -> Pair {
    let mut a = endpoint_cfg(MAC_A, IP_A, MAC_B);
    a.tcp.fin_wait2_timeout = None;
    Pair::with_configs(a, endpoint_cfg(MAC_B, IP_B, MAC_A), l.clone(), l, seed)
}

fn half_close(mut p: Pair, markers: bool) {
    let (ca, cb) = p.establish(4200, settings(markers, true), settings(markers, true));
    let before = pattern(50_000, 1);
    let (src, _) = filled(&mut p.a, &before, Access::LOCAL_WRITE);
    let (arecv, _) = p.a.register(200_000, Access::LOCAL_WRITE);
    let (awin, astag) = p.a.register(70_000, Access::REMOTE_WRITE);
    let (brecv, _) = p.b.register(50_000, Access::LOCAL_WRITE);
    p.a.post(ca, WorkRequest::recv(1, buf(arecv, 200_000)))
        .unwrap();
    p.b.post(cb, WorkRequest::recv(10, buf(brecv, 50_000)))
        .unwrap();
    p.b.post(cb, WorkRequest::recv(11, buf(brecv, 50_000)))
        .unwrap();
    p.a.post(
        ca,
        WorkRequest::send(2, buf(src, before.len()), Default::default()),
    )
    .unwrap();
    p.a.close_send(ca).unwrap();
    p.run_until(5_000_000, |p| {
        p.events_b
            .iter()
            .any(|e| matches!(e, EndpointEvent::PeerClosed { .. }))
    });
    // What came before the FIN was delivered; the other receive flushed.
    let r = p.wait_wc(false, 10);
    assert_eq!(
        (r.status, r.byte_len as usize),
        (WcStatus::Success, before.len())
    );
    assert!(p.b.region(brecv).unwrap() == &before[..]);
    assert_eq!(p.wait_wc(false, 11).status, WcStatus::Flushed);
    assert_eq!(p.wait_wc(true, 2).status, WcStatus::Success);
    // B still sends: a Send and a Write posted after the FIN; a receive posted now flushes.
    let after = pattern(150_000, 2);
    let wdata = pattern(70_000, 3);
    let (bsrc, _) = filled(&mut p.b, &after, Access::LOCAL_WRITE);
    let (bwsrc, _) = filled(&mut p.b, &wdata, Access::LOCAL_WRITE);
    p.b.post(
        cb,
        WorkRequest::send(12, buf(bsrc, after.len()), Default::default()),
    )
    .unwrap();
    p.b.post(
        cb,
        WorkRequest::write(
            13,
            buf(bwsrc, wdata.len()),
            RemoteBuf { stag: astag, to: 0 },
        ),
    )
    .unwrap();
    p.b.post(cb, WorkRequest::recv(14, buf(brecv, 100)))
        .unwrap();
    assert_eq!(p.wait_wc(false, 14).status, WcStatus::Flushed);
    let s = p.wait_wc(false, 12);
    assert_eq!((s.opcode, s.status), (WcOpcode::Send, WcStatus::Success));
    let w = p.wait_wc(false, 13);
    assert_eq!((w.opcode, w.status), (WcOpcode::Write, WcStatus::Success));
    let r = p.wait_wc(true, 1);
    assert_eq!(
        (r.status, r.byte_len as usize),
        (WcStatus::Success, after.len())
    );
    assert!(p.a.region(arecv).unwrap()[..after.len()] == after[..]);
    assert!(p.a.region(awin).unwrap() == &wdata[..]);
    assert!(
        closed(&p, false).is_none(),
        "B's side stays open until it closes"
    );
    // B closes (DDP-70): its FIN; both end normally.
    p.b.close(p.now, cb).unwrap();
    p.run_until(5_000_000, |p| {
        closed(p, true).is_some() && closed(p, false).is_some()
    });
    assert_eq!(closed(&p, true), Some(CloseReason::Normal));
    assert_eq!(closed(&p, false), Some(CloseReason::Normal));
    let (a, b) = (p.a.counters(), p.b.counters());
    assert_eq!(
        a.internal_errors + b.internal_errors + a.terminates_sent + b.terminates_sent,
        0
    );
}

#[test]
fn ddp_69_half_close_clean_link() {
    half_close(pair_over(link(), 1), false);
}

#[test]
fn ddp_69_half_close_lossy_reordering_link_markers_on() {
    let l = link()
        .with_loss(0.02)
        .with_reorder(0.2, Duration::from_micros(300));
    half_close(pair_over(l, 31), true);
}
