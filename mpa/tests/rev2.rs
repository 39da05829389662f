//! MPA Revision 2 (RFC 6581) through the startup machines, one test per rule, named after the
//! RFC section: the Rev 2 frames, IRD/ORD negotiation, peer-to-peer mode and its RTR choice,
//! every revision pairing and the Rev 2 / Rev 1 interoperation of §8.

mod common;
use common::*;
use mpa::startup_frame::{FrameKind, Repr};
use mpa::{
    enhanced::EnhancedData, ErrorAction, Initiator, Negotiated, ReadDepths, RequestInfo, Responder,
    Revisions, RtrType, RtrTypes, StartupConfig, StartupError, StartupEvent,
};
use std::time::Instant;

fn depths(ird: u16, ord: u16) -> ReadDepths {
    ReadDepths { ird, ord }
}

/// What a Request brings the Responder.
fn request_info(r: &mut Responder) -> RequestInfo {
    match r.poll_event() {
        Some(StartupEvent::RequestReceived(i)) => i,
        e => panic!("expected a Request, got {e:?}"),
    }
}

fn established(e: Option<StartupEvent>) -> Negotiated {
    match e {
        Some(StartupEvent::Established(n)) => n,
        e => panic!("expected Established, got {e:?}"),
    }
}

/// Runs Request and Reply between the two configs with the given depths. Returns the
/// Responder's view of the Request, the Reply's octets, and both ends' final events.
struct Run {
    info: RequestInfo,
    reply: Vec<u8>,
    initiator: Option<StartupEvent>,
    responder: Option<StartupEvent>,
}

fn run(ic: StartupConfig, id: ReadDepths, rc: StartupConfig, rd: ReadDepths) -> Run {
    let now = Instant::now();
    let mut i = Initiator::new(ic, now, b"init pd", id).unwrap();
    let mut r = Responder::new(rc, now);
    let req = i.poll_transmit().unwrap();
    assert_eq!(r.handle_input(now, &req), req.len());
    let info = request_info(&mut r);
    r.accept(b"resp pd", rd).unwrap();
    let responder = r.poll_event();
    let reply = r.poll_transmit().unwrap();
    assert_eq!(i.handle_input(now, &reply), reply.len());
    Run {
        info,
        reply,
        initiator: i.poll_event(),
        responder,
    }
}

fn p2p(offer: RtrTypes) -> StartupConfig {
    StartupConfig {
        p2p_offer: offer,
        ..StartupConfig::default()
    }
}

/// RFC 6581 §7.1: the default Initiator's Request: Rev 2, Enhanced flag, IRD and ORD ahead of
/// the ULP's private data, which PD_Length counts.
#[test]
fn rfc6581_7_1_default_request_bytes() {
    let mut i = Initiator::new(
        StartupConfig::default(),
        Instant::now(),
        b"pd",
        depths(16, 4),
    )
    .unwrap();
    assert_eq!(
        i.poll_transmit().unwrap(),
        hex("4d 50 41 20 49 44 20 52 65 71 20 46 72 61 6d 65 50 02 00 06 00 10 00 04 70 64")
    );
}

/// RFC 6581 §5, §7.1: the ULP never sees the IRD/ORD octets: each end gets the other's own
/// private data, and the Responder learns the Initiator's depths.
#[test]
fn rfc6581_5_ulp_sees_only_its_private_data() {
    let r = run(
        StartupConfig::default(),
        depths(7, 3),
        StartupConfig::default(),
        depths(16, 16),
    );
    assert_eq!(r.info.private_data, b"init pd");
    assert_eq!(r.info.revision, 2);
    assert_eq!(r.info.peer_read_depths, Some(depths(7, 3)));
    let i = established(r.initiator);
    let s = established(r.responder);
    assert_eq!(i.peer_private_data, b"resp pd");
    assert_eq!(s.peer_private_data, b"init pd");
    assert_eq!((i.revision, s.revision), (2, 2));
    assert_eq!(r.reply[17], 2, "the Reply carries Rev 2");
    assert_eq!(r.reply[16] & 0x10, 0x10, "with the Enhanced flag");
}

/// RFC 6581 §5: IRD/ORD of the Initiator below, equal to and above the Responder's: neither end
/// ever has more Reads outstanding than the other's IRD; the Responder offers no more IRD than
/// the Initiator's ORD asks for.
#[test]
fn rfc6581_5_ird_ord_below_equal_above() {
    let ours = depths(8, 8);
    for peer in [2u16, 8, 30] {
        let r = run(
            StartupConfig::default(),
            depths(peer, peer),
            StartupConfig::default(),
            ours,
        );
        let s = established(r.responder);
        let i = established(r.initiator);
        let agreed = peer.min(8);
        assert_eq!(
            s.read_depths,
            depths(agreed, agreed),
            "responder, peer {peer}"
        );
        assert_eq!(s.peer_read_depths, Some(depths(peer, peer)));
        assert!(s.read_depths.ord <= peer, "responder ORD <= initiator IRD");
        assert_eq!(
            i.read_depths,
            depths(peer, agreed),
            "initiator, peer {peer}"
        );
        assert!(
            i.read_depths.ord <= s.read_depths.ird,
            "initiator ORD <= responder IRD"
        );
        assert_eq!(i.peer_read_depths, Some(s.read_depths));
    }
}

/// RFC 6581 §5, §9: a Reply whose ORD exceeds the Initiator's IRD: MPA is in Full Operation
/// (the framing is known) and the Initiator must Terminate with code 6.
#[test]
fn rfc6581_5_reply_ord_above_initiator_ird_refused_with_code_6() {
    let now = Instant::now();
    let mut i = Initiator::new(StartupConfig::default(), now, b"", depths(2, 2)).unwrap();
    i.poll_transmit();
    let reply = Repr {
        kind: FrameKind::Reply,
        markers: true,
        crc: true,
        reject: false,
        revision: 2,
        enhanced: Some(EnhancedData {
            ird: 2,
            ord: 5,
            p2p: false,
            rtr: RtrTypes::NONE,
        }),
        private_data: b"x",
    }
    .to_vec();
    assert_eq!(i.handle_input(now, &reply), reply.len());
    match i.poll_event() {
        Some(StartupEvent::Refused { negotiated, error }) => {
            assert_eq!(
                error,
                StartupError::InsufficientIrd {
                    ird: 2,
                    peer_ord: 5
                }
            );
            assert_eq!(
                (error.code() as u8, error.action()),
                (6, ErrorAction::Terminate)
            );
            assert!(negotiated.tx_markers && negotiated.crc);
            assert_eq!(negotiated.peer_private_data, b"x");
        }
        e => panic!("{e:?}"),
    }
    assert!(i.is_done());
}

/// RFC 6581 §5: peer-to-peer mode with each RTR type alone: the Responder chooses it and both
/// ends agree on the RTR message the Initiator sends first.
#[test]
fn rfc6581_5_p2p_each_rtr_type() {
    for t in [RtrType::Send, RtrType::Write, RtrType::Read] {
        let r = run(
            p2p(RtrTypes::only(t)),
            depths(4, 4),
            StartupConfig::default(),
            depths(4, 4),
        );
        assert_eq!(r.info.p2p_offer, RtrTypes::only(t));
        assert_eq!(established(r.initiator).rtr, Some(t), "{t:?}");
        assert_eq!(established(r.responder).rtr, Some(t), "{t:?}");
    }
}

/// RFC 6581 §5: offered several, the Responder picks one it takes (Write, then Read, then
/// Send); its policy narrows the choice.
#[test]
fn rfc6581_5_responder_chooses_among_offered() {
    let cases = [
        (RtrTypes::ALL, RtrTypes::ALL, RtrType::Write),
        (
            RtrTypes::only(RtrType::Send).with(RtrType::Read),
            RtrTypes::ALL,
            RtrType::Read,
        ),
        (RtrTypes::ALL, RtrTypes::only(RtrType::Send), RtrType::Send),
    ];
    for (offer, take, chosen) in cases {
        let rc = StartupConfig {
            p2p_accept: take,
            ..StartupConfig::default()
        };
        let r = run(p2p(offer), depths(4, 4), rc, depths(4, 4));
        let on_wire = EnhancedData::parse(
            &mpa::enhanced::EnhancedPacket::new_checked(&r.reply[20..24]).unwrap(),
        );
        assert!(on_wire.p2p);
        assert_eq!(
            on_wire.rtr,
            RtrTypes::only(chosen),
            "exactly one type on the wire"
        );
        assert_eq!(established(r.responder).rtr, Some(chosen));
        assert_eq!(established(r.initiator).rtr, Some(chosen));
    }
}

/// RFC 6581 §5, §9: a Responder that takes none of the offered types answers without a
/// choice; the Initiator refuses with "No matching RTR option" (code 7).
#[test]
fn rfc6581_5_no_matching_rtr_refused_with_code_7() {
    let rc = StartupConfig {
        p2p_accept: RtrTypes::only(RtrType::Write),
        ..StartupConfig::default()
    };
    let r = run(
        p2p(RtrTypes::only(RtrType::Send)),
        depths(4, 4),
        rc,
        depths(4, 4),
    );
    assert_eq!(established(r.responder).rtr, None);
    match r.initiator {
        Some(StartupEvent::Refused { error, .. }) => {
            assert_eq!(error, StartupError::NoMatchingRtr);
            assert_eq!(error.code() as u8, 7);
        }
        e => panic!("{e:?}"),
    }
}

/// RFC 6581 §5: a Read RTR needs an IRD: with an Initiator ORD of 0 the Responder's IRD is 0 and
/// it chooses another offered type.
#[test]
fn rfc6581_5_read_rtr_needs_an_ird() {
    let r = run(
        p2p(RtrTypes::only(RtrType::Read).with(RtrType::Send)),
        depths(4, 0),
        StartupConfig::default(),
        depths(4, 4),
    );
    let s = established(r.responder);
    assert_eq!((s.read_depths.ird, s.rtr), (0, Some(RtrType::Send)));
}

/// Every revision pairing of Initiator (what it sends) and Responder (what it accepts): the
/// Responder answers with the Request's revision when its policy allows it (RFC 6581 §8, RFC
/// 5044 §7.1.1), and closes on any other (MPA-102); Rev 0 only in the draft's strict mode.
#[test]
fn rfc6581_8_every_revision_pairing() {
    let policies = [
        ("default {1,2}", StartupConfig::default()),
        ("rfc5044 {1}", StartupConfig::rfc5044()),
        ("strict {0}", StartupConfig::strict_draft()),
        (
            "rev2 only {2}",
            StartupConfig {
                accept: Revisions::only(2),
                ..StartupConfig::default()
            },
        ),
    ];
    for sent in 0..=2u8 {
        for (name, rc) in policies {
            let now = Instant::now();
            let ic = StartupConfig {
                revision: sent,
                accept: Revisions::only(sent),
                ..StartupConfig::default()
            };
            let mut i = Initiator::new(ic, now, b"", depths(4, 4)).unwrap();
            let mut r = Responder::new(rc, now);
            let req = i.poll_transmit().unwrap();
            r.handle_input(now, &req);
            if rc.accept.contains(sent) {
                let info = request_info(&mut r);
                assert_eq!(info.revision, sent);
                assert_eq!(
                    info.peer_read_depths.is_some(),
                    sent == 2,
                    "{name} rev {sent}"
                );
                r.accept(b"", depths(4, 4)).unwrap();
                let rep = r.poll_transmit().unwrap();
                assert_eq!(rep[17], sent, "{name}: Reply revision = Request revision");
                i.handle_input(now, &rep);
                assert_eq!(established(i.poll_event()).revision, sent);
            } else {
                match r.poll_event() {
                    Some(StartupEvent::Failed(e)) => {
                        assert_eq!(e, StartupError::BadRevision(sent), "{name}");
                        assert_eq!(e.action(), ErrorAction::Close);
                    }
                    e => panic!("{name} rev {sent}: {e:?}"),
                }
                assert!(r.poll_transmit().is_none(), "{name}: no Reply, TCP closes");
            }
        }
    }
}

/// RFC 6581 §8: a Rev 2 Request to a Rev 1-only Responder: it closes TCP; the Initiator sees
/// the close before any Reply and retries once with Rev 1, which the same Responder answers.
#[test]
fn rfc6581_8_rev2_request_to_rev1_only_responder_falls_back() {
    let now = Instant::now();
    let ic = StartupConfig::default();
    let mut i = Initiator::new(ic, now, b"hi", depths(4, 4)).unwrap();
    let mut r = Responder::new(StartupConfig::rfc5044(), now);
    let req = i.poll_transmit().unwrap();
    r.handle_input(now, &req);
    assert!(matches!(
        r.poll_event(),
        Some(StartupEvent::Failed(StartupError::BadRevision(2)))
    ));
    // TCP closes; the Initiator learns it.
    i.handle_close();
    assert_eq!(
        i.poll_event(),
        Some(StartupEvent::Failed(StartupError::ConnectionClosed))
    );
    let retry = ic
        .rev1_fallback()
        .expect("Rev 2 Initiator taking Rev 1 falls back");
    assert_eq!(retry.revision, 1);
    assert_eq!(StartupConfig::rfc5044().rev1_fallback(), None, "only once");
    let r = run(retry, depths(4, 4), StartupConfig::rfc5044(), depths(9, 9));
    let n = established(r.initiator);
    assert_eq!((n.revision, n.peer_read_depths, n.rtr), (1, None, None));
    assert_eq!(n.read_depths, depths(4, 4), "no exchange: the local depths");
    assert_eq!(n.peer_private_data, b"resp pd");
}

/// RFC 6581 §8: a Rev 1 Reply to a Rev 2 Request (a Responder choosing RFC 5044) is taken when
/// the Initiator accepts Rev 1: no IRD/ORD exchange, no peer-to-peer mode.
#[test]
fn rfc6581_8_rev1_reply_to_rev2_request_taken() {
    let now = Instant::now();
    let mut i = Initiator::new(p2p(RtrTypes::ALL), now, b"", depths(3, 3)).unwrap();
    i.poll_transmit();
    let rep = Repr {
        kind: FrameKind::Reply,
        markers: false,
        crc: true,
        reject: false,
        revision: 1,
        enhanced: None,
        private_data: b"v1",
    }
    .to_vec();
    i.handle_input(now, &rep);
    let n = established(i.poll_event());
    assert_eq!((n.revision, n.rtr, n.peer_read_depths), (1, None, None));
    assert_eq!(n.read_depths, depths(3, 3));
    // An Initiator that takes Rev 2 only closes on it.
    let ic = StartupConfig {
        accept: Revisions::only(2),
        ..StartupConfig::default()
    };
    let mut i = Initiator::new(ic, now, b"", depths(3, 3)).unwrap();
    i.handle_input(now, &rep);
    assert_eq!(
        i.poll_event(),
        Some(StartupEvent::Failed(StartupError::BadRevision(1)))
    );
}

/// RFC 6581 §8, MPA-102: a Reply above the Request's revision closes.
#[test]
fn rfc6581_8_reply_above_request_revision_closes() {
    let now = Instant::now();
    let mut i = Initiator::new(StartupConfig::rfc5044(), now, b"", depths(3, 3)).unwrap();
    let rep = Repr {
        kind: FrameKind::Reply,
        markers: false,
        crc: true,
        reject: false,
        revision: 2,
        enhanced: None,
        private_data: b"",
    }
    .to_vec();
    assert_eq!(i.handle_input(now, &rep), 18, "decided at the Rev octet");
    assert_eq!(
        i.poll_event(),
        Some(StartupEvent::Failed(StartupError::BadRevision(2)))
    );
}

/// RFC 6581 §7.1: a Rev 2 Reject carries the Responder's depths too; the Initiator sees only
/// the private data.
#[test]
fn rfc6581_7_1_rev2_reject_carries_depths() {
    let now = Instant::now();
    let mut i = Initiator::new(StartupConfig::default(), now, b"", depths(3, 3)).unwrap();
    let mut r = Responder::new(StartupConfig::default(), now);
    r.handle_input(now, &i.poll_transmit().unwrap());
    request_info(&mut r);
    r.reject(b"go away", depths(5, 6)).unwrap();
    let rep = r.poll_transmit().unwrap();
    assert_eq!(&rep[16..24], &[0x70, 2, 0, 11, 0, 5, 0, 6]);
    i.handle_input(now, &rep);
    assert_eq!(
        i.poll_event(),
        Some(StartupEvent::Rejected {
            private_data: b"go away".to_vec()
        })
    );
}

/// RFC 6581 §7.1: a Rev 2 frame with the Enhanced flag and fewer than 4 octets of private data
/// is malformed (close); the private-data limit counts the ULP's octets, the 4 come on top.
#[test]
fn rfc6581_7_1_short_enhanced_data_and_pd_limit() {
    let now = Instant::now();
    let mut bad = hex("4d 50 41 20 49 44 20 52 65 71 20 46 72 61 6d 65 50 02 00 02 00 10");
    let mut r = Responder::new(StartupConfig::default(), now);
    assert_eq!(r.handle_input(now, &bad), 20, "decided from the header");
    assert_eq!(
        r.poll_event(),
        Some(StartupEvent::Failed(StartupError::BadEnhancedData))
    );
    // 512 + 4 is within the limit, 512 + 5 is not.
    for (len, ok) in [(516u16, true), (517, false)] {
        bad.truncate(18);
        bad.extend_from_slice(&len.to_be_bytes());
        bad.resize(20 + usize::from(len), 0);
        let mut r = Responder::new(StartupConfig::default(), now);
        r.handle_input(now, &bad);
        match r.poll_event() {
            Some(StartupEvent::RequestReceived(i)) if ok => {
                assert_eq!(i.private_data.len(), 512)
            }
            Some(StartupEvent::Failed(StartupError::PrivateDataTooLong(n))) if !ok => {
                assert_eq!(n, len)
            }
            e => panic!("{len}: {e:?}"),
        }
    }
}

/// RFC 6581 §7.1: a Rev 2 Request without the Enhanced flag exchanges no depths: the Reply is
/// Rev 2 without them too, and both ends keep their own.
#[test]
fn rfc6581_7_1_rev2_without_enhanced_flag() {
    let now = Instant::now();
    let req = Repr {
        kind: FrameKind::Request,
        markers: false,
        crc: true,
        reject: false,
        revision: 2,
        enhanced: None,
        private_data: b"plain",
    }
    .to_vec();
    let mut r = Responder::new(StartupConfig::default(), now);
    r.handle_input(now, &req);
    let info = request_info(&mut r);
    assert_eq!(
        (info.private_data.as_slice(), info.peer_read_depths),
        (&b"plain"[..], None)
    );
    r.accept(b"", depths(6, 6)).unwrap();
    let n = established(r.poll_event());
    assert_eq!((n.read_depths, n.rtr), (depths(6, 6), None));
    let rep = r.poll_transmit().unwrap();
    assert_eq!((rep[16] & 0x10, rep[17], rep.len()), (0, 2, 20));
}
