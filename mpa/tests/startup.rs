//! Startup rules of draft §6.1, one test per rule, citing MPA ids.

mod common;
use common::*;
use mpa::startup::UsageError;
use mpa::startup_frame::{FrameKind, Repr};
use mpa::{
    ErrorAction, ErrorCode, Initiator, Negotiated, ReadDepths, RequestInfo, Responder, Role,
    StartupConfig, StartupError, StartupEvent,
};
use std::time::{Duration, Instant};

/// A startup frame with C=1.
fn frame(kind: FrameKind, markers: bool, reject: bool, revision: u8, pd: &[u8]) -> Vec<u8> {
    Repr {
        kind,
        markers,
        crc: true,
        reject,
        revision,
        enhanced: None,
        private_data: pd,
    }
    .to_vec()
}

fn cfg(markers: bool, crc: bool) -> StartupConfig {
    StartupConfig {
        want_markers: markers,
        want_crc: crc,
        ..StartupConfig::default()
    }
}

/// Runs a full exchange with the given configs; returns both sides' Negotiated.
fn handshake(ic: StartupConfig, rc: StartupConfig) -> (Negotiated, Negotiated) {
    let now = Instant::now();
    let mut i = Initiator::new(ic, now, b"hello", ReadDepths::default()).unwrap();
    let mut r = Responder::new(rc, now);
    let req = i.poll_transmit().unwrap();
    assert_eq!(r.handle_input(now, &req), req.len());
    match r.poll_event() {
        Some(StartupEvent::RequestReceived(RequestInfo { private_data, .. })) => {
            assert_eq!(private_data, b"hello")
        }
        e => panic!("{e:?}"),
    }
    r.accept(b"welcome", ReadDepths::default()).unwrap();
    let rn = match r.poll_event() {
        Some(StartupEvent::Established(n)) => n,
        e => panic!("{e:?}"),
    };
    let rep = r.poll_transmit().unwrap();
    assert_eq!(i.handle_input(now, &rep), rep.len());
    let inn = match i.poll_event() {
        Some(StartupEvent::Established(n)) => n,
        e => panic!("{e:?}"),
    };
    assert_eq!(inn.peer_private_data, b"welcome");
    assert_eq!(rn.peer_private_data, b"hello");
    assert!(i.is_done() && r.is_done());
    (inn, rn)
}

/// MPA-77, MPA-94, MPA-102 (RFC 5044 mode, Rev 1): the Request's exact bytes.
#[test]
fn mpa_77_request_bytes() {
    let rev1 = StartupConfig {
        want_markers: true,
        ..StartupConfig::rfc5044()
    };
    let mut i = Initiator::new(rev1, Instant::now(), b"pd", ReadDepths::default()).unwrap();
    let req = i.poll_transmit().unwrap();
    assert_eq!(
        req,
        hex("4d 50 41 20 49 44 20 52 65 71 20 46 72 61 6d 65 c0 01 00 02 70 64")
    );
    assert!(i.poll_transmit().is_none(), "sent once");
    let strict = StartupConfig {
        want_markers: false,
        ..StartupConfig::strict_draft()
    };
    let mut i = Initiator::new(strict, Instant::now(), b"", ReadDepths::default()).unwrap();
    assert_eq!(
        i.poll_transmit().unwrap(),
        hex("4d 50 41 20 49 44 20 52 65 71 20 46 72 61 6d 65 40 00 00 00")
    );
}

/// MPA-43: the default configuration asks for CRCs, no markers, PD limit 512; it sends Rev 2
/// and accepts Rev 1 and 2 (what siw and Chelsio send by default), never Rev 0; no
/// peer-to-peer request, every RTR type taken.
#[test]
fn mpa_43_defaults() {
    let c = StartupConfig::default();
    assert!(c.want_crc && !c.want_markers);
    assert_eq!((c.revision, c.max_private_data), (2, 512));
    assert!(c.accept.contains(1) && c.accept.contains(2) && !c.accept.contains(0));
    assert!(c.p2p_offer.is_empty());
    assert_eq!(c.p2p_accept, mpa::RtrTypes::ALL);
}

/// MPA-98, MPA-99: markers per direction, CRC if either asks; all 16 combinations.
#[test]
fn mpa_98_99_negotiation_matrix() {
    for bits in 0..16u8 {
        let (im, ic, rm, rc) = (bits & 1 != 0, bits & 2 != 0, bits & 4 != 0, bits & 8 != 0);
        let (i, r) = handshake(cfg(im, ic), cfg(rm, rc));
        assert_eq!((i.role, r.role), (Role::Initiator, Role::Responder));
        assert_eq!(
            i.tx_markers, rm,
            "initiator sends markers iff the Reply had M=1"
        );
        assert_eq!(i.rx_markers, im);
        assert_eq!(
            r.tx_markers, im,
            "responder sends markers iff the Request had M=1"
        );
        assert_eq!(r.rx_markers, rm);
        assert_eq!(i.crc, ic || rc);
        assert_eq!(r.crc, ic || rc);
        assert_eq!(i.tx_config(), r.rx_config());
        assert_eq!(r.tx_config(), i.rx_config());
    }
}

/// MPA-86, MPA-95: a bad key in the Request closes the connection (code 4), reported as
/// soon as the first wrong octet arrives.
#[test]
fn mpa_95_bad_request_key_closes() {
    let now = Instant::now();
    let mut r = Responder::new(cfg(false, true), now);
    let mut bad = frame(FrameKind::Request, false, false, 1, &[]);
    bad[3] = b'X';
    assert_eq!(
        r.handle_input(now, &bad),
        4,
        "stops at the first wrong octet"
    );
    let e = expect_failed(r.poll_event());
    assert_eq!(e, StartupError::BadKey);
    assert_eq!(
        (e.action(), e.code()),
        (ErrorAction::Close, ErrorCode::InvalidStartupFrame)
    );
    assert!(r.is_done());
    assert_eq!(r.handle_input(now, &bad), 0);
}

fn expect_failed(e: Option<StartupEvent>) -> StartupError {
    match e {
        Some(StartupEvent::Failed(e)) => e,
        other => panic!("expected Failed, got {other:?}"),
    }
}

/// MPA-82, MPA-97: a bad key in the Reply closes.
#[test]
fn mpa_97_bad_reply_key_closes() {
    let now = Instant::now();
    let mut i = Initiator::new(cfg(false, true), now, b"", ReadDepths::default()).unwrap();
    let mut rep = frame(FrameKind::Reply, false, false, 1, &[]);
    rep[15] = b'E';
    i.handle_input(now, &rep);
    assert_eq!(expect_failed(i.poll_event()), StartupError::BadKey);
}

/// MPA-89: Initiator/Initiator: each sees a Request key where a Reply is expected.
#[test]
fn mpa_89_initiator_initiator_detected() {
    let now = Instant::now();
    let mut a = Initiator::new(cfg(false, true), now, b"", ReadDepths::default()).unwrap();
    let mut b = Initiator::new(cfg(false, true), now, b"", ReadDepths::default()).unwrap();
    let ra = a.poll_transmit().unwrap();
    let rb = b.poll_transmit().unwrap();
    a.handle_input(now, &rb);
    b.handle_input(now, &ra);
    for e in [a.poll_event(), b.poll_event()] {
        let e = expect_failed(e);
        assert_eq!(e, StartupError::PeerIsInitiator);
        assert_eq!(e.action(), ErrorAction::Close);
    }
}

/// MPA-90: Responder/Responder: both wait for a Request; the timeout ends it.
#[test]
fn mpa_90_responder_responder_times_out() {
    let now = Instant::now();
    let t = Duration::from_secs(3);
    let mut a = Responder::new(
        StartupConfig {
            timeout: t,
            ..cfg(false, true)
        },
        now,
    );
    assert_eq!(a.poll_timeout(), Some(now + t));
    a.handle_timeout(now + t - Duration::from_millis(1));
    assert!(a.poll_event().is_none(), "not before the deadline");
    a.handle_timeout(now + t);
    let e = expect_failed(a.poll_event());
    assert_eq!((e, e.action()), (StartupError::Timeout, ErrorAction::Close));
    assert_eq!(a.poll_timeout(), None);
}

/// MPA-92: 19 of the 20 header octets then silence → timeout (close).
#[test]
fn mpa_92_partial_frame_times_out() {
    let now = Instant::now();
    let mut i = Initiator::new(cfg(false, true), now, b"", ReadDepths::default()).unwrap();
    let rep = frame(FrameKind::Reply, false, false, 1, &[]);
    assert_eq!(i.handle_input(now, &rep[..19]), 19);
    assert!(i.poll_event().is_none());
    let deadline = i.poll_timeout().unwrap();
    i.handle_timeout(deadline);
    assert_eq!(expect_failed(i.poll_event()), StartupError::Timeout);
}

/// MPA-102: a revision other than the configured one closes, in both modes.
#[test]
fn mpa_102_bad_revision_closes() {
    let now = Instant::now();
    for (mode, sent) in [
        (StartupConfig::default(), 0u8),
        (StartupConfig::default(), 3),
        (StartupConfig::rfc5044(), 2),
        (StartupConfig::strict_draft(), 1),
        (StartupConfig::strict_draft(), 2),
    ] {
        let mut r = Responder::new(mode, now);
        let req = frame(FrameKind::Request, false, false, sent, &[]);
        assert_eq!(r.handle_input(now, &req), 18, "decided at the Rev octet");
        let e = expect_failed(r.poll_event());
        assert_eq!(
            (e, e.action()),
            (StartupError::BadRevision(sent), ErrorAction::Close)
        );
    }
    // Strict draft peers interoperate with each other (Rev 0).
    let (i, r) = handshake(StartupConfig::strict_draft(), StartupConfig::strict_draft());
    assert_eq!((i.revision, r.revision), (0, 0));
}

/// MPA-91, A16: PD_Length above the local limit closes (not a reject), decided from the
/// header alone (no waiting for the private data).
#[test]
fn mpa_91_pd_length_over_limit_closes() {
    let now = Instant::now();
    let mut r = Responder::new(cfg(false, true), now);
    let mut hdr = frame(FrameKind::Request, false, false, 1, &[]);
    hdr[18..20].copy_from_slice(&513u16.to_be_bytes());
    assert_eq!(r.handle_input(now, &hdr), 20);
    let e = expect_failed(r.poll_event());
    assert_eq!(
        (e, e.action()),
        (StartupError::PrivateDataTooLong(513), ErrorAction::Close)
    );
    // Exactly at the limit is fine.
    let pd = vec![7u8; 512];
    let mut i = Initiator::new(cfg(false, true), now, &pd, ReadDepths::default()).unwrap();
    let mut r = Responder::new(cfg(false, true), now);
    let req = i.poll_transmit().unwrap();
    assert_eq!(req.len(), 20 + 4 + 512, "Rev 2: IRD/ORD octets on top");
    assert_eq!(r.handle_input(now, &req), req.len());
    assert!(matches!(
        r.poll_event(),
        Some(StartupEvent::RequestReceived(_))
    ));
    // And we refuse to send more than the limit ourselves.
    assert_eq!(
        Initiator::new(cfg(false, true), now, &[0; 513], ReadDepths::default()).unwrap_err(),
        UsageError::PrivateDataTooLong
    );
}

/// MPA-80, MPA-83: reject (R=1) leaves TCP open at both ends; no close action anywhere.
#[test]
fn mpa_80_83_reject_keeps_tcp_open() {
    let now = Instant::now();
    let mut i = Initiator::new(cfg(false, true), now, b"may I?", ReadDepths::default()).unwrap();
    let mut r = Responder::new(cfg(false, true), now);
    let req = i.poll_transmit().unwrap();
    r.handle_input(now, &req);
    assert!(matches!(
        r.poll_event(),
        Some(StartupEvent::RequestReceived(_))
    ));
    r.reject(b"no", ReadDepths::default()).unwrap();
    assert_eq!(
        r.poll_event(),
        Some(StartupEvent::Rejected {
            private_data: b"no".to_vec()
        })
    );
    let rep = r.poll_transmit().unwrap();
    assert_eq!(rep[16] & 0x20, 0x20, "Reply carries R=1");
    assert_eq!(i.handle_input(now, &rep), rep.len());
    assert_eq!(
        i.poll_event(),
        Some(StartupEvent::Rejected {
            private_data: b"no".to_vec()
        })
    );
    assert!(i.is_done() && r.is_done());
    assert_eq!(
        r.accept(b"", ReadDepths::default()),
        Err(UsageError::NotDeciding)
    );
}

/// MPA-100: R=1 in a Request is not checked.
#[test]
fn mpa_100_request_r_bit_ignored() {
    let now = Instant::now();
    let mut r = Responder::new(cfg(false, true), now);
    let req = frame(FrameKind::Request, true, true, 1, b"x");
    r.handle_input(now, &req);
    assert!(matches!(
        r.poll_event(),
        Some(StartupEvent::RequestReceived(_))
    ));
}

/// MPA-85: the Responder's framer is gated until an FPDU arrives; the Initiator's is not.
#[test]
fn mpa_85_responder_silent_until_first_fpdu() {
    let (i, r) = handshake(cfg(true, true), cfg(true, true));
    let mut ifr = i.framer();
    let mut rfr = r.framer();
    let mut rparser = r.stream_parser();
    let mut out = vec![0u8; 256];
    assert_eq!(
        rfr.encode(&[b"too early"], &mut out),
        Err(mpa::EncodeError::AwaitingPeerFpdu)
    );
    assert_eq!(rfr.offset(), 0, "nothing framed, offset unchanged");
    let n = ifr.encode(&[b"first"], &mut out).unwrap();
    assert_eq!(
        &out[..4],
        &[0, 0, 0, 0],
        "MPA-37/88: first FPDU starts with marker 0"
    );
    rparser.push(&out[..n]);
    assert!(rparser.next_fpdu().unwrap().is_some());
    assert_eq!(rparser.fpdus_delivered(), 1);
    rfr.peer_fpdu_received();
    assert!(rfr.encode(&[b"now"], &mut out).is_ok());
}

/// The Request/Reply may arrive split anywhere and coalesced with the first FPDU: the
/// machines consume exactly the frame and the rest parses as FPDUs (A17).
#[test]
fn frames_split_and_coalesced_with_first_fpdu() {
    let now = Instant::now();
    let pd = b"some private data";
    let mut i = Initiator::new(cfg(true, true), now, pd, ReadDepths::default()).unwrap();
    let req = i.poll_transmit().unwrap();
    for cut in 0..=req.len() {
        let mut r = Responder::new(cfg(false, true), now);
        assert_eq!(r.handle_input(now, &req[..cut]), cut);
        if cut < req.len() {
            assert!(r.poll_event().is_none(), "nothing before the whole frame");
        }
        assert_eq!(r.handle_input(now, &req[cut..]), req.len() - cut);
        assert!(
            matches!(r.poll_event(), Some(StartupEvent::RequestReceived(_))),
            "cut {cut}"
        );
    }
    // Reply + first FPDU in one read at the Initiator.
    let mut r = Responder::new(cfg(true, true), now);
    r.handle_input(now, &req);
    r.poll_event();
    r.accept(b"", ReadDepths::default()).unwrap();
    let rn = match r.poll_event() {
        Some(StartupEvent::Established(n)) => n,
        e => panic!("{e:?}"),
    };
    let mut wire = r.poll_transmit().unwrap();
    let reply_len = wire.len();
    // Pretend the Responder got an FPDU already so it may send (MPA-85).
    let mut rfr = rn.framer();
    rfr.peer_fpdu_received();
    rfr.encode_to_vec(&[b"fpdu after reply"], &mut wire)
        .unwrap();
    let used = i.handle_input(now, &wire);
    assert_eq!(used, reply_len);
    let inn = match i.poll_event() {
        Some(StartupEvent::Established(n)) => n,
        e => panic!("{e:?}"),
    };
    assert_eq!(inn.peer_frame_len as usize, reply_len);
    let mut p = inn.stream_parser();
    p.push(&wire[used..]);
    assert_eq!(
        p.next_fpdu().unwrap().unwrap().ulpdu_to_vec(),
        b"fpdu after reply"
    );
}

/// Code 1: the connection closing during startup is reported (no close action needed).
#[test]
fn close_during_startup_reported() {
    let now = Instant::now();
    let mut r = Responder::new(cfg(false, true), now);
    r.handle_close();
    let e = expect_failed(r.poll_event());
    assert_eq!(
        (e.code(), e.action()),
        (ErrorCode::ConnectionLost, ErrorAction::Report)
    );
}

/// MPA-105: a last streaming message goes out before anything else.
#[test]
fn mpa_105_last_streaming_message() {
    let mut r =
        Responder::new(cfg(false, true), Instant::now()).with_last_streaming_message(b"bye");
    assert_eq!(r.poll_transmit().unwrap(), b"bye");
}

/// MPA-101: Res bits set in a received frame are not checked.
#[test]
fn mpa_101_res_bits_not_checked() {
    let now = Instant::now();
    let mut r = Responder::new(cfg(false, true), now);
    let mut req = frame(FrameKind::Request, false, false, 1, b"");
    req[16] |= 0x1F;
    assert_eq!(r.handle_input(now, &req), 20);
    assert!(matches!(
        r.poll_event(),
        Some(StartupEvent::RequestReceived(_))
    ));
}

proptest::proptest! {
    /// Full sans-IO session: random settings, frames and FPDUs cut at random points and
    /// coalesced; both sides agree on framing, the Responder stays silent until the
    /// Initiator's first FPDU (MPA-85), and data flows both ways (MPA-98, MPA-99).
    #[test]
    fn session_with_random_cuts(im: bool, ic: bool, rm: bool, rc: bool,
                                cut_req in 0usize..60, cut_rep in 0usize..60,
                                pd in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40)) {
        let now = Instant::now();
        let mut i = Initiator::new(cfg(im, ic), now, &pd, ReadDepths::default()).unwrap();
        let mut r = Responder::new(cfg(rm, rc), now);
        // Initiator -> Responder: the Request, cut once.
        let req = i.poll_transmit().unwrap();
        let c = cut_req.min(req.len());
        let used = r.handle_input(now, &req[..c]) + r.handle_input(now, &req[c..]);
        proptest::prop_assert_eq!(used, req.len());
        let Some(StartupEvent::RequestReceived(RequestInfo { private_data, .. })) = r.poll_event() else {
            panic!("no request")
        };
        proptest::prop_assert_eq!(&private_data, &pd);
        r.accept(&pd, ReadDepths::default()).unwrap();
        let Some(StartupEvent::Established(rn)) = r.poll_event() else { panic!("responder") };
        let rep = r.poll_transmit().unwrap();
        // Responder -> Initiator: the Reply, cut once; the Initiator then sends an FPDU.
        let c = cut_rep.min(rep.len());
        let used = i.handle_input(now, &rep[..c]) + i.handle_input(now, &rep[c..]);
        proptest::prop_assert_eq!(used, rep.len());
        let Some(StartupEvent::Established(inn)) = i.poll_event() else { panic!("initiator") };
        proptest::prop_assert_eq!(inn.tx_config(), rn.rx_config());
        proptest::prop_assert_eq!(rn.tx_config(), inn.rx_config());
        let (mut itx, mut rtx) = (inn.framer(), rn.framer());
        let (mut irx, mut rrx) = (inn.stream_parser(), rn.stream_parser());
        let mut wire = Vec::new();
        proptest::prop_assert!(rtx.encode_to_vec(&[b"early"], &mut wire).is_err());
        itx.encode_to_vec(&[b"hello responder"], &mut wire).unwrap();
        rrx.push(&wire);
        let got = rrx.next_fpdu().unwrap().unwrap().ulpdu_to_vec();
        proptest::prop_assert_eq!(got, b"hello responder".to_vec());
        rtx.peer_fpdu_received();
        wire.clear();
        rtx.encode_to_vec(&[b"hello initiator"], &mut wire).unwrap();
        irx.push(&wire);
        let got = irx.next_fpdu().unwrap().unwrap().ulpdu_to_vec();
        proptest::prop_assert_eq!(got, b"hello initiator".to_vec());
    }
}
