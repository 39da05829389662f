//! Half-close through the endpoint (DDP -06 §6.2.1): A sends, then closes its
//! sending side; B delivers what came before A's FIN, flushes its other receive, and still
//! finishes sending (a Send and an RDMA Write posted after the FIN arrive at A, whose reception
//! is still on); then B closes and both connections end normally. Clean and lossy links.

mod pair;
use std::time::Duration;

use ddp::{Access, RemoteBuf, Stag, WcOpcode, WcStatus, WorkRequest};
use endpoint::{ConnId, EndpointEvent, QpSettings};
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

/// A closes its sending side (FIN) and B hears of it.
fn a_half_closes(p: &mut Pair, ca: ConnId) {
    p.a.close_send(ca).unwrap();
    p.run_until(5_000_000, |p| {
        p.events_b
            .iter()
            .any(|e| matches!(e, EndpointEvent::PeerClosed { .. }))
    });
}

/// B posts a Send of `data` (work request 12) and an RDMA Write of `wdata` to A's `astag`
/// (13), each from a region of its own.
fn b_sends_and_writes(p: &mut Pair, cb: ConnId, data: &[u8], wdata: &[u8], astag: Stag) {
    let (bsrc, _) = filled(&mut p.b, data, Access::LOCAL_WRITE);
    let (bwsrc, _) = filled(&mut p.b, wdata, Access::LOCAL_WRITE);
    p.b.post(
        cb,
        WorkRequest::send(12, buf(bsrc, data.len()), Default::default()),
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
    a_half_closes(&mut p, ca);
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
    b_sends_and_writes(&mut p, cb, &after, &wdata, astag);
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

/// When B's application closes (DDP-70), relative to the Sends and Writes it posted after A's
/// FIN.
#[derive(Clone, Copy, Debug)]
enum CloseAt {
    /// Right after posting, before B's next round.
    Posted,
    /// After B's first round put them on the wire, none acknowledged.
    InFlight,
    /// Between the receive batch that acknowledged the last of them and the round after it.
    AckedBeforeRound,
    /// After their completions came out.
    Completed,
}

/// B is in CLOSE-WAIT (A half-closed) with a Send and a Write posted; its application closes
/// at `at`. Once B has handled the ACK of everything it sent, its FIN goes out in its own
/// rounds, with no frame in (only time passing); B's side ends normally well within its
/// close timeout, A's after its TIME-WAIT.
fn close_in_close_wait(at: CloseAt, l: LinkConfig, seed: u64) {
    let mut p = pair_over(l, seed);
    p.ba.log = Some(Vec::new());
    let (ca, cb) = p.establish(4210, settings(false, true), settings(false, true));
    let data = pattern(150_000, 4);
    let wdata = pattern(70_000, 5);
    let (arecv, _) = p.a.register(data.len(), Access::LOCAL_WRITE);
    let (awin, astag) = p.a.register(wdata.len(), Access::REMOTE_WRITE);
    p.a.post(ca, WorkRequest::recv(1, buf(arecv, data.len())))
        .unwrap();
    // A's first FPDU, which B (the MPA responder) waits for before it sends any (MPA-85).
    let (asrc, _) = filled(&mut p.a, b"hello", Access::LOCAL_WRITE);
    let (brecv, _) = p.b.register(16, Access::LOCAL_WRITE);
    p.b.post(cb, WorkRequest::recv(10, buf(brecv, 16))).unwrap();
    p.a.post(ca, WorkRequest::send(2, buf(asrc, 5), Default::default()))
        .unwrap();
    a_half_closes(&mut p, ca);
    // B sends no FIN before its close: any from here on is its close's.
    let sent = p.ba.log.as_ref().unwrap().len();
    b_sends_and_writes(&mut p, cb, &data, &wdata, astag);
    let queued = |p: &Pair| p.b.tcp(cb).map_or(0, |t| t.send_queued());
    let closed_at = match at {
        CloseAt::Posted => p.now,
        CloseAt::InFlight => {
            p.step();
            assert!(queued(&p) > 0, "nothing in flight");
            p.now
        }
        CloseAt::AckedBeforeRound => {
            p.run_until(5_000_000, |p| queued(p) > 0);
            let mut closed = None;
            for _ in 0..5_000_000 {
                let now = p.now;
                p.step_with(|b| {
                    if b.tcp(cb).is_some_and(|t| t.send_queued() == 0) {
                        b.close(now, cb).unwrap();
                        closed = Some(now);
                    }
                });
                if closed.is_some() {
                    break;
                }
            }
            closed.expect("B's data never acknowledged")
        }
        CloseAt::Completed => {
            p.wait_wc(false, 12);
            p.wait_wc(false, 13);
            p.now
        }
    };
    if !matches!(at, CloseAt::AckedBeforeRound) {
        p.b.close(p.now, cb).unwrap();
    }
    // Until B has handled the ACK of everything it sent (A's frames come in; its queue
    // filled once its round took the work in)...
    let mut filled = !matches!(at, CloseAt::Posted);
    p.run_until(5_000_000, |p| {
        filled |= queued(p) > 0;
        filled && queued(p) == 0
    });
    // ... then B alone, nothing coming in: its FIN goes out (if that round did not send it).
    let (mut silent, _) = pair::wires(p.base, link(), link(), 99);
    let mut fin = false;
    for _ in 0..1000 {
        drive(&mut p.b, &mut silent, &mut p.ba, p.now);
        fin = p.ba.log.as_ref().unwrap()[sent..]
            .iter()
            .any(|(_, f)| tcp_offload::wire::parse(&f[14..]).is_ok_and(|s| s.flags.fin));
        if fin {
            break;
        }
        p.now = match p.wake_b() {
            Some(t) if t > p.now => t.min(p.now + Duration::from_millis(1)),
            _ => p.now + Duration::from_millis(1),
        };
    }
    assert!(
        fin,
        "{at:?}: B's FIN did not go out by {:?} after B's data was acknowledged; B's TCP {:?}",
        p.now - closed_at,
        p.b.tcp(cb).map(|t| t.state())
    );
    // B (LAST-ACK) ends once A acknowledges the FIN, A after its TIME-WAIT.
    // (A step jumps time after its rounds: the rounds of the step that closed B ran at
    // `polled`.)
    let mut polled = p.now;
    p.run_until(5_000_000, |p| {
        let done = closed(p, false).is_some();
        if !done {
            polled = p.now;
        }
        done
    });
    assert_eq!(closed(&p, false), Some(CloseReason::Normal), "{at:?}");
    assert_eq!(p.b.counters().close_timeouts, 0, "{at:?}");
    assert!(
        polled - closed_at < QpSettings::default().close_timeout,
        "{at:?}: B closed {:?} after its close",
        polled - closed_at
    );
    p.run_until(5_000_000, |p| closed(p, true).is_some());
    assert_eq!(closed(&p, true), Some(CloseReason::Normal), "{at:?}");
    let s = p.wc_b.iter().map(|(_, w)| (w.wr_id, w.status));
    assert_eq!(
        s.filter(|(id, _)| *id >= 12).collect::<Vec<_>>(),
        [(12, WcStatus::Success), (13, WcStatus::Success)],
        "{at:?}"
    );
    assert!(p.a.region(arecv).unwrap() == &data[..]);
    assert!(p.a.region(awin).unwrap() == &wdata[..]);
}

#[test]
fn ddp_70_close_in_close_wait_sends_fin_once_the_work_is_acknowledged() {
    for at in [
        CloseAt::Posted,
        CloseAt::InFlight,
        CloseAt::AckedBeforeRound,
        CloseAt::Completed,
    ] {
        close_in_close_wait(at, link(), 3);
    }
}

#[test]
fn ddp_70_close_in_close_wait_sends_fin_once_the_work_is_acknowledged_lossy_link() {
    let l = link()
        .with_loss(0.02)
        .with_reorder(0.2, Duration::from_micros(300));
    for (at, seed) in [
        (CloseAt::Posted, 41),
        (CloseAt::InFlight, 42),
        (CloseAt::AckedBeforeRound, 43),
        (CloseAt::Completed, 44),
    ] {
        close_in_close_wait(at, l.clone(), seed);
    }
}
