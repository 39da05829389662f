//! MPA Rev 2 (RFC 6581) through two queue pairs: the negotiated read depths reach the engine
//! and ORD holds, peer-to-peer mode's RTR message goes first and is never surfaced, and a
//! refused negotiation ends with the Terminate RFC 6581 names.

use super::tests::{local, pump, qp_cfg, remote, End};
use super::*;
use crate::ddp::segment::{DdpPacket, DdpRepr};
use crate::ddp::stag_table::Access;
use crate::rdmap::control::{RdmapControl, RdmapOpcode};
use crate::rdmap::term_code::LlpError;
use crate::rdmap::terminate::{TerminatePacket, TerminateRepr};
use crate::rdmap::work_request::{SendOpts, WorkRequest};
use mpa::{FramingConfig, RtrTypes};

/// An Initiator with IRD/ORD `ia` and a Responder with `ra`; the Initiator offers `offer`.
fn pair_with(ia: (u32, u32), ra: (u32, u32), offer: RtrTypes, take: RtrTypes) -> (End, End) {
    let now = Instant::now();
    let mut ic = qp_cfg(1, false, true);
    (ic.engine.ird, ic.engine.ord) = ia;
    ic.startup.p2p_offer = offer;
    let mut rc = qp_cfg(2, false, true);
    (rc.engine.ird, rc.engine.ord) = ra;
    rc.startup.p2p_accept = take;
    (
        End::new(Qp::new_initiator(ic, now).unwrap(), 1),
        End::new(Qp::new_responder(rc, now), 2),
    )
}

fn negotiated(e: &mut End) -> NegotiatedFraming {
    match e.events().first() {
        Some(QpEvent::Established { negotiated, .. }) => *negotiated,
        other => panic!("{other:?}"),
    }
}

/// The ULPDUs of `bytes`, an FPDU stream framed with CRC and no markers.
fn ulpdus(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut p = mpa::StreamParser::new(
        FramingConfig {
            markers: false,
            crc: true,
        },
        0,
    );
    p.push(bytes);
    std::iter::from_fn(|| p.next_fpdu().unwrap().map(|f| f.ulpdu_to_vec())).collect()
}

/// What `e` sends next, FPDUs only (its startup frame already went).
fn drain(e: &mut End) -> Vec<u8> {
    let mut out = vec![0u8; 70_000];
    let mut wire = Vec::new();
    while let Some(n) = e.qp.poll_transmit(&e.tags, &e.mem, &mut out) {
        wire.extend_from_slice(&out[..n]);
    }
    wire
}

/// RFC 6581 §5: the depths each end ends with reach its engine and its Established event:
/// the Initiator's ORD drops to the Responder's IRD, the Responder's ORD to the Initiator's
/// IRD; ORD then holds (never more outstanding Reads than the peer's IRD, later ones wait in
/// order) and every Read completes.
#[test]
fn rfc6581_5_negotiated_depths_reach_the_engine_and_ord_holds() {
    let (mut a, mut b) = pair_with((8, 6), (2, 16), RtrTypes::NONE, RtrTypes::ALL);
    pump(&mut a, &mut b, 64);
    let na = negotiated(&mut a);
    let nb = negotiated(&mut b);
    assert_eq!((na.revision, na.ird, na.ord), (2, 8, 2));
    assert_eq!((nb.revision, nb.ird, nb.ord), (2, 2, 8));
    assert_eq!(
        (a.qp.engine().config().ird, a.qp.engine().config().ord),
        (8, 2)
    );
    let (dst, _) = a.region(64, Access::LOCAL_WRITE, |_| 0);
    let (_, src) = b.region(64, Access::REMOTE_READ, |i| i as u8);
    for i in 0..5u64 {
        let local = local(dst, 8 * i, 8);
        let remote = remote(src, 0x10_0000 + 8 * i);
        a.qp.post(&a.tags, WorkRequest::read(i, local, remote))
            .unwrap();
    }
    let wire = drain(&mut a);
    assert_eq!(
        ulpdus(&wire).len(),
        2,
        "ORD 2: two Read Requests, the rest wait"
    );
    b.qp.handle_rx_bytes(&mut b.tags, &mut b.mem, Instant::now(), &wire);
    pump(&mut a, &mut b, 64);
    let done: Vec<u64> = a.completions().iter().map(|c| c.wr_id).collect();
    assert_eq!(done, [0, 1, 2, 3, 4], "every Read completes, in order");
    assert!(!a.qp.is_error() && !b.qp.is_error());
    assert_eq!(
        a.mem.get(dst).unwrap()[..40],
        (0..40).collect::<Vec<u8>>()[..]
    );
}

/// The header of an RTR ULPDU: (tagged, opcode, STag or QN, payload length).
fn rtr_shape(u: &[u8]) -> (bool, RdmapOpcode, u32, usize) {
    let p = DdpPacket::new_checked(u).unwrap();
    match DdpRepr::parse(&p).unwrap() {
        DdpRepr::Tagged(t) => (
            true,
            RdmapControl::parse(t.rsvd_ulp).unwrap().opcode,
            t.stag.0,
            u.len() - crate::ddp::tagged::TAGGED_HEADER_LEN,
        ),
        DdpRepr::Untagged(h) => (
            false,
            RdmapControl::parse(h.rsvd_ulp).unwrap().opcode,
            h.qn,
            u.len() - crate::ddp::untagged::UNTAGGED_HEADER_LEN,
        ),
    }
}

/// RFC 6581 §5: for each RTR type, the Initiator's first FPDU is that RTR message (zero-length
/// Send on QN 0, zero-length Write to STag 0, zero-length Read Request on QN 1); the
/// Responder consumes it (counted, no completion, no receive buffer taken) and may then send
/// although the Initiator's ULP sent nothing: no MPA-85 deadlock. A Send RTR leaves the
/// Responder's posted receive to the Initiator's first real Send (MSN 2).
#[test]
fn rfc6581_5_each_rtr_goes_first_and_is_never_surfaced() {
    for t in [mpa::RtrType::Send, mpa::RtrType::Write, mpa::RtrType::Read] {
        let (mut a, mut b) = pair_with((4, 4), (4, 4), RtrTypes::only(t), RtrTypes::ALL);
        // The Responder's receive, posted before MPA is up.
        let (brecv, _) = b.region(16, Access::LOCAL_WRITE, |_| 0);
        b.qp.post(&b.tags, WorkRequest::recv(50, local(brecv, 0, 16)))
            .unwrap();
        // Startup only: the Request, then the Reply.
        let mut out = vec![0u8; 4096];
        let n = a.qp.poll_transmit(&a.tags, &a.mem, &mut out).unwrap();
        b.qp.handle_rx_bytes(&mut b.tags, &mut b.mem, Instant::now(), &out[..n]);
        let n = b.qp.poll_transmit(&b.tags, &b.mem, &mut out).unwrap();
        a.qp.handle_rx_bytes(&mut a.tags, &mut a.mem, Instant::now(), &out[..n]);
        assert_eq!(negotiated(&mut a).rtr, Some(t));
        assert_eq!(negotiated(&mut b).rtr, Some(t));
        let first = drain(&mut a);
        let us = ulpdus(&first);
        assert_eq!(us.len(), 1, "{t:?}: the RTR alone");
        let want = match t {
            mpa::RtrType::Send => (false, RdmapOpcode::Send, 0, 0),
            mpa::RtrType::Write => (true, RdmapOpcode::RdmaWrite, 0, 0),
            mpa::RtrType::Read => (false, RdmapOpcode::RdmaReadRequest, 1, 28),
        };
        assert_eq!(rtr_shape(&us[0]), want, "{t:?}");
        b.qp.handle_rx_bytes(&mut b.tags, &mut b.mem, Instant::now(), &first);
        assert_eq!(b.qp.stats().rx_rtr, 1, "{t:?}: consumed");
        // The Responder sends at once (a Read RTR's zero-length Response first).
        let (bsrc, _) = b.region(8, Access::LOCAL_WRITE, |_| 7);
        let (arecv, _) = a.region(8, Access::LOCAL_WRITE, |_| 0);
        a.qp.post(&a.tags, WorkRequest::recv(60, local(arecv, 0, 8)))
            .unwrap();
        b.qp.post(
            &b.tags,
            WorkRequest::send(61, local(bsrc, 0, 8), SendOpts::default()),
        )
        .unwrap();
        pump(&mut a, &mut b, 64);
        let ac: Vec<u64> = a.completions().iter().map(|c| c.wr_id).collect();
        assert_eq!(
            ac,
            [60],
            "{t:?}: the Initiator sees only its receive, no RTR completion"
        );
        assert_eq!(a.mem.get(arecv).unwrap(), &[7; 8]);
        let bc: Vec<u64> = b.completions().iter().map(|c| c.wr_id).collect();
        assert_eq!(
            bc,
            [61],
            "{t:?}: the RTR took no receive of the Responder's"
        );
        // The Initiator's first real Send lands in the Responder's receive.
        let (asrc, _) = a.region(16, Access::LOCAL_WRITE, |_| 9);
        a.qp.post(
            &a.tags,
            WorkRequest::send(62, local(asrc, 0, 16), SendOpts::default()),
        )
        .unwrap();
        pump(&mut a, &mut b, 64);
        let bc = b.completions();
        assert_eq!(
            (bc.len(), bc[0].wr_id, bc[0].byte_len),
            (1, 50, 16),
            "{t:?}"
        );
        assert!(!a.qp.is_error() && !b.qp.is_error(), "{t:?}");
    }
}

/// The Terminate `e` sent after its startup frame, from its wire bytes.
fn terminate_in(wire: &[u8]) -> TerminateRepr {
    let us = ulpdus(wire);
    assert_eq!(us.len(), 1, "the Terminate alone");
    let u = &us[0];
    let p = DdpPacket::new_checked(&u[..]).unwrap();
    let DdpRepr::Untagged(h) = DdpRepr::parse(&p).unwrap() else {
        panic!("untagged")
    };
    assert_eq!(
        RdmapControl::parse(h.rsvd_ulp).unwrap().opcode,
        RdmapOpcode::Terminate
    );
    let payload = &u[crate::ddp::untagged::UNTAGGED_HEADER_LEN..];
    TerminateRepr::parse(&TerminatePacket::new_checked(payload).unwrap()).unwrap()
}

/// RFC 6581 §5, §9: a Reply whose ORD exceeds the Initiator's IRD: the Initiator's first and
/// only FPDU is a Terminate "Insufficient IRD resources" (LLP, MPA, 0x06), reported as a
/// startup failure whose action is Terminate-then-close.
#[test]
fn rfc6581_5_insufficient_ird_terminates_with_llp_code_6() {
    let (mut a, _) = pair_with((4, 4), (4, 4), RtrTypes::NONE, RtrTypes::ALL);
    let mut out = vec![0u8; 4096];
    a.qp.poll_transmit(&a.tags, &a.mem, &mut out).unwrap();
    let reply = mpa::startup_frame::Repr {
        kind: mpa::startup_frame::FrameKind::Reply,
        markers: false,
        crc: true,
        reject: false,
        revision: 2,
        enhanced: Some(mpa::enhanced::EnhancedData {
            ird: 4,
            ord: 5,
            p2p: false,
            rtr: RtrTypes::NONE,
        }),
        private_data: b"",
    }
    .to_vec();
    a.qp.handle_rx_bytes(&mut a.tags, &mut a.mem, Instant::now(), &reply);
    let err = mpa::StartupError::InsufficientIrd {
        ird: 4,
        peer_ord: 5,
    };
    assert_eq!(a.events().first(), Some(&QpEvent::StartupFailed(err)));
    assert_eq!(err.action(), mpa::ErrorAction::Terminate);
    let t = terminate_in(&drain(&mut a));
    assert_eq!(t.code, LlpError::InsufficientIrd.term_code());
    assert_eq!((t.code.etype, t.code.code), (0, 6));
}

/// RFC 6581 §5, §9: the Responder takes none of the offered RTR types: the Initiator refuses
/// with "No matching RTR option" (0x07), which the Responder receives as a Terminate.
#[test]
fn rfc6581_5_no_matching_rtr_terminates_with_llp_code_7() {
    let (mut a, mut b) = pair_with(
        (4, 4),
        (4, 4),
        RtrTypes::only(mpa::RtrType::Send),
        RtrTypes::only(mpa::RtrType::Write),
    );
    pump(&mut a, &mut b, 64);
    assert!(a
        .events()
        .contains(&QpEvent::StartupFailed(mpa::StartupError::NoMatchingRtr)));
    let got = b.events().into_iter().find_map(|e| match e {
        QpEvent::TerminateReceived(t) => Some(t.code),
        _ => None,
    });
    assert_eq!(got, Some(LlpError::NoMatchingRtr.term_code()));
}
