//! MPA Revision 2 (RFC 6581) between two endpoints in virtual time: negotiated IRD/ORD in the
//! events and the engines, peer-to-peer mode with each RTR type, a manual accept choosing its
//! depths, and a Rev 2 Request meeting a Rev 1-only listener.

mod pair;
use ddp::{Access, QpEvent, RemoteBuf, WcOpcode, WcStatus, WorkRequest};
use endpoint::{ConnId, EndpointEvent, QpSettings};
use mpa::{ReadDepths, RtrType, RtrTypes, StartupConfig, StartupError};
use pair::*;
use std::net::SocketAddrV4;

fn with_depths(ird: u32, ord: u32) -> QpSettings {
    QpSettings {
        ird,
        ord,
        ..settings(false, true)
    }
}

fn negotiated(ev: &[EndpointEvent], c: ConnId) -> ddp::NegotiatedFraming {
    ev.iter()
        .find_map(|e| match e {
            EndpointEvent::Established {
                conn, negotiated, ..
            } if *conn == c => Some(*negotiated),
            _ => None,
        })
        .expect("established")
}

/// RFC 6581 §5: the IRD/ORD each end ends with are in its Established event; data moves.
#[test]
fn rfc6581_5_negotiated_depths_in_events() {
    let mut p = Pair::clean();
    let (ca, cb) = p.establish(4100, with_depths(8, 3), with_depths(2, 16));
    let na = negotiated(&p.events_a, ca);
    let nb = negotiated(&p.events_b, cb);
    assert_eq!((na.revision, na.ird, na.ord), (2, 8, 2));
    assert_eq!((nb.revision, nb.ird, nb.ord), (2, 2, 8));
    transfer_all(&mut p, ca, cb, 5000, 3);
}

/// RFC 6581 §5: peer-to-peer mode with each RTR type: the Responder sends first (its Send is
/// received although the Initiator's ULP never sent anything) and neither side sees the RTR.
#[test]
fn rfc6581_5_p2p_responder_sends_first_with_each_rtr() {
    for (i, t) in [RtrType::Send, RtrType::Write, RtrType::Read]
        .into_iter()
        .enumerate()
    {
        let mut p = Pair::clean();
        let mut sa = settings(false, true);
        sa.startup.p2p_offer = RtrTypes::only(t);
        let (ca, cb) = p.establish(4200 + i as u16, sa, settings(false, true));
        assert_eq!(negotiated(&p.events_a, ca).rtr, Some(t));
        assert_eq!(negotiated(&p.events_b, cb).rtr, Some(t));
        let data = pattern(300, 9);
        let (dst, _) = p.a.register(300, Access::LOCAL_WRITE);
        p.a.post(ca, WorkRequest::recv(1, buf(dst, 300))).unwrap();
        let (src, _) = filled(&mut p.b, &data, Access::LOCAL_WRITE);
        p.b.post(cb, WorkRequest::send(2, buf(src, 300), Default::default()))
            .unwrap();
        let r = p.wait_wc(true, 1);
        assert_eq!(
            (r.opcode, r.status, r.byte_len),
            (WcOpcode::Recv, WcStatus::Success, 300)
        );
        assert_eq!(p.a.region(dst).unwrap(), &data[..]);
        assert_eq!(p.wc_a.len(), 1, "{t:?}: no completion for the RTR");
        let s = p.wait_wc(false, 2);
        assert_eq!(s.status, WcStatus::Success);
        assert_eq!(p.wc_b.len(), 1, "{t:?}: only the Send");
    }
}

/// Without peer-to-peer mode, the same Responder-first Send waits (MPA-85): the case RFC 6581's
/// RTR exists for. After the Initiator's first FPDU it goes.
#[test]
fn without_p2p_the_responder_waits_for_the_first_fpdu() {
    let mut p = Pair::clean();
    let (ca, cb) = p.establish(4300, settings(false, true), settings(false, true));
    let (dst, _) = p.a.register(16, Access::LOCAL_WRITE);
    p.a.post(ca, WorkRequest::recv(1, buf(dst, 16))).unwrap();
    let (src, _) = filled(&mut p.b, &[5; 16], Access::LOCAL_WRITE);
    p.b.post(cb, WorkRequest::send(2, buf(src, 16), Default::default()))
        .unwrap();
    for _ in 0..2000 {
        p.step();
    }
    assert!(p.wc_a.is_empty() && p.wc_b.is_empty(), "held back");
    let (_, stag) = p.b.register(16, Access::REMOTE_WRITE);
    let (asrc, _) = filled(&mut p.a, &[1; 16], Access::LOCAL_WRITE);
    p.a.post(
        ca,
        WorkRequest::write(3, buf(asrc, 16), RemoteBuf { stag, to: 0 }),
    )
    .unwrap();
    assert_eq!(p.wait_wc(true, 1).status, WcStatus::Success);
}

/// A manual accept sees the Initiator's revision and depths and answers with its own choice.
#[test]
fn manual_accept_chooses_depths() {
    let mut p = Pair::clean();
    p.b.listen_manual(4400, settings(false, true)).unwrap();
    let ca =
        p.a.connect(p.now, SocketAddrV4::new(IP_B, 4400), with_depths(6, 5))
            .unwrap();
    p.run_until(100_000, |p| {
        p.events_b
            .iter()
            .any(|e| matches!(e, EndpointEvent::ConnectRequest { .. }))
    });
    let (cb, req) = p
        .events_b
        .iter()
        .find_map(|e| match e {
            EndpointEvent::ConnectRequest { conn, request } => Some((*conn, request.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(req.revision, 2);
    assert_eq!(req.peer_read_depths, Some(ReadDepths { ird: 6, ord: 5 }));
    p.b.accept_request_with(cb, b"", ReadDepths { ird: 1, ord: 9 })
        .unwrap();
    p.run_until(100_000, |p| established(&p.events_a, ca));
    let na = negotiated(&p.events_a, ca);
    assert_eq!((na.ird, na.ord), (6, 1), "our ORD drops to their IRD 1");
    let nb = negotiated(&p.events_b, cb);
    assert_eq!((nb.ird, nb.ord), (1, 6));
}

/// RFC 6581 §8: a Rev 2 Request to a Rev 1-only listener: it closes (MPA-102); the Initiator's
/// connection ends without a Reply, and a retry with [`StartupConfig::rev1_fallback`] connects
/// with Rev 1.
#[test]
fn rfc6581_8_rev2_to_rev1_only_listener_then_fallback() {
    let mut p = Pair::clean();
    let rev1_only = QpSettings {
        startup: StartupConfig::rfc5044(),
        ..QpSettings::default()
    };
    p.b.listen(4500, rev1_only).unwrap();
    let sa = settings(false, true);
    let ca =
        p.a.connect(p.now, SocketAddrV4::new(IP_B, 4500), sa.clone())
            .unwrap();
    // The listener resets the connection; the Initiator's startup ends with it (no Reply).
    p.run_until(100_000, |p| {
        p.events_a
            .iter()
            .any(|e| matches!(e, EndpointEvent::Closed { conn, .. } if *conn == ca))
    });
    assert!(!established(&p.events_a, ca));
    assert!(
        p.events_b.iter().any(|e| matches!(
            e,
            EndpointEvent::StartupFailed {
                event: QpEvent::StartupFailed(StartupError::BadRevision(2)),
                ..
            }
        )),
        "the listener closed on Rev 2: {:?}",
        p.events_b
    );
    let retry = QpSettings {
        startup: sa.startup.rev1_fallback().unwrap(),
        ..sa
    };
    let ca =
        p.a.connect(p.now, SocketAddrV4::new(IP_B, 4500), retry)
            .unwrap();
    p.run_until(100_000, |p| established(&p.events_a, ca));
    assert_eq!(negotiated(&p.events_a, ca).revision, 1);
}
