//! IRD/ORD and the peer-to-peer RTR choice negotiated in Rev 2 startup frames (RFC 6581 §5).
//!
//! IRD is how many RDMA Read Requests a peer serves at once, ORD how many it keeps outstanding
//! (RFC 5040). The rule both ends follow: never more outstanding Reads than the other end's IRD.
//! An end may always lower its ORD; it cannot raise its IRD past what it has.
//!
//! - The Initiator sends its IRD and ORD in the Request.
//! - The Responder replies with IRD = min(its IRD, the Initiator's ORD) (no more than will be
//!   used) and ORD = min(its ORD, the Initiator's IRD).
//! - The Initiator then lowers its ORD to the Reply's IRD. A Reply whose ORD exceeds the
//!   Initiator's IRD cannot be served: the Initiator sends a Terminate "Insufficient IRD
//!   resources" (LLP/MPA code 6, RFC 6581 §9) and closes.
//!
//! Peer-to-peer mode: the Initiator offers one or more RTR types; the Responder chooses one of
//! those it takes, in the order of [`RtrType::PREFERENCE`] (a Read RTR only with an IRD of at
//! least 1). A Reply that chooses none of the offered types (or more than one) gets a
//! Terminate "No matching RTR option" (code 7).

use crate::enhanced::{EnhancedData, RtrType, RtrTypes, MAX_READ_DEPTH};
use crate::error::StartupError;

/// An end's RDMA Read queue depths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReadDepths {
    /// Inbound: Read Requests served at once.
    pub ird: u16,
    /// Outbound: Read Requests kept outstanding at most.
    pub ord: u16,
}

impl Default for ReadDepths {
    /// 16 each, what the RDMAP engine defaults to.
    fn default() -> Self {
        ReadDepths { ird: 16, ord: 16 }
    }
}

impl ReadDepths {
    /// Depths from an engine's `u32` settings, capped at the 14 bits the frames carry.
    pub fn capped(ird: u32, ord: u32) -> Self {
        let cap = |v: u32| v.min(u32::from(MAX_READ_DEPTH)) as u16;
        ReadDepths {
            ird: cap(ird),
            ord: cap(ord),
        }
    }
}

/// The Responder's Reply values for a Request carrying `peer` (RFC 6581 §5): its depths, and
/// the RTR type chosen when the Initiator asked for peer-to-peer mode (`None`: it did not,
/// or no offered type is taken, which the Initiator answers with code 7).
pub fn responder_reply(local: ReadDepths, peer: &EnhancedData, take: RtrTypes) -> EnhancedData {
    let ird = local.ird.min(peer.ord);
    let ord = local.ord.min(peer.ird);
    let rtr = if peer.p2p {
        let mut usable = peer.rtr.intersection(take);
        if ird == 0 {
            // A Read RTR would exceed the IRD just offered.
            usable = RtrType::PREFERENCE
                .into_iter()
                .filter(|t| *t != RtrType::Read && usable.contains(*t))
                .fold(RtrTypes::NONE, RtrTypes::with);
        }
        usable.preferred()
    } else {
        None
    };
    EnhancedData {
        ird,
        ord,
        p2p: peer.p2p,
        rtr: rtr.map_or(RtrTypes::NONE, RtrTypes::only),
    }
}

/// What the Initiator takes from a Reply carrying `reply`, having offered `local` and the RTR
/// types `offered` (empty: no peer-to-peer mode): its final depths and the RTR to send, or the
/// error to Terminate with (RFC 6581 §5).
pub fn initiator_accept(
    local: ReadDepths,
    offered: RtrTypes,
    reply: &EnhancedData,
) -> Result<(ReadDepths, Option<RtrType>), StartupError> {
    if reply.ord > local.ird {
        return Err(StartupError::InsufficientIrd {
            ird: local.ird,
            peer_ord: reply.ord,
        });
    }
    let rtr = if offered.is_empty() {
        None
    } else {
        let chosen = reply.rtr.single().filter(|t| offered.contains(*t));
        match chosen {
            Some(t) if reply.p2p => Some(t),
            _ => return Err(StartupError::NoMatchingRtr),
        }
    };
    let depths = ReadDepths {
        ird: local.ird,
        ord: local.ord.min(reply.ird),
    };
    Ok((depths, rtr))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(ird: u16, ord: u16, rtr: RtrTypes) -> EnhancedData {
        EnhancedData {
            ird,
            ord,
            p2p: !rtr.is_empty(),
            rtr,
        }
    }

    /// RFC 6581 §5: the Reply's ORD never exceeds the Initiator's IRD, its IRD is no more than
    /// the Initiator's ORD; the Initiator's ORD ends at most the Reply's IRD. Below, equal to
    /// and above the local values.
    #[test]
    fn rfc6581_5_ird_ord_below_equal_above() {
        let ours = ReadDepths { ird: 8, ord: 8 };
        for (peer, reply_ird, reply_ord) in [(4, 4, 4), (8, 8, 8), (12, 8, 8)] {
            let r = responder_reply(ours, &req(peer, peer, RtrTypes::NONE), RtrTypes::ALL);
            assert_eq!((r.ird, r.ord), (reply_ird, reply_ord), "peer {peer}");
            assert!(!r.p2p && r.rtr.is_empty());
        }
        // The Initiator's side: its ORD drops to the Reply's IRD.
        let (d, rtr) = initiator_accept(ours, RtrTypes::NONE, &req(4, 2, RtrTypes::NONE)).unwrap();
        assert_eq!((d.ird, d.ord, rtr), (8, 4, None));
        let (d, _) = initiator_accept(ours, RtrTypes::NONE, &req(8, 8, RtrTypes::NONE)).unwrap();
        assert_eq!((d.ird, d.ord), (8, 8));
        let (d, _) = initiator_accept(ours, RtrTypes::NONE, &req(20, 3, RtrTypes::NONE)).unwrap();
        assert_eq!(
            (d.ird, d.ord),
            (8, 8),
            "a larger IRD does not raise our ORD"
        );
    }

    /// RFC 6581 §5, §9: a Reply ORD above the Initiator's IRD is "Insufficient IRD resources".
    #[test]
    fn rfc6581_5_reply_ord_above_our_ird_is_insufficient_ird() {
        let e = initiator_accept(
            ReadDepths { ird: 2, ord: 2 },
            RtrTypes::NONE,
            &req(2, 3, RtrTypes::NONE),
        )
        .unwrap_err();
        assert_eq!(
            e,
            StartupError::InsufficientIrd {
                ird: 2,
                peer_ord: 3
            }
        );
        assert_eq!(e.code() as u8, 6);
    }

    /// RFC 6581 §5: the Responder chooses one offered type it takes, Write before Read before
    /// Send; no Read with an IRD of 0; none when nothing matches.
    #[test]
    fn rfc6581_5_responder_chooses_one_offered_rtr() {
        let ours = ReadDepths::default();
        let choose = |offer: RtrTypes, take: RtrTypes, peer_ord: u16| {
            let r = responder_reply(ours, &req(16, peer_ord, offer), take);
            assert!(r.p2p);
            assert!(r.rtr.len() <= 1);
            r.rtr.single()
        };
        use RtrType::*;
        assert_eq!(choose(RtrTypes::ALL, RtrTypes::ALL, 4), Some(Write));
        let read_send = RtrTypes::only(Read).with(Send);
        assert_eq!(choose(read_send, RtrTypes::ALL, 4), Some(Read));
        assert_eq!(
            choose(read_send, RtrTypes::ALL, 0),
            Some(Send),
            "IRD 0: no Read"
        );
        assert_eq!(choose(RtrTypes::only(Send), RtrTypes::ALL, 4), Some(Send));
        assert_eq!(choose(RtrTypes::only(Send), RtrTypes::only(Write), 4), None);
        assert_eq!(choose(RtrTypes::ALL, RtrTypes::only(Send), 4), Some(Send));
    }

    /// RFC 6581 §5, §9: the Initiator takes the one chosen type it offered; anything else is
    /// "No matching RTR option".
    #[test]
    fn rfc6581_5_initiator_checks_the_rtr_choice() {
        use RtrType::*;
        let ours = ReadDepths::default();
        let offered = RtrTypes::only(Write).with(Read);
        let reply = |rtr: RtrTypes, p2p| EnhancedData {
            ird: 16,
            ord: 16,
            p2p,
            rtr,
        };
        assert_eq!(
            initiator_accept(ours, offered, &reply(RtrTypes::only(Read), true))
                .unwrap()
                .1,
            Some(Read)
        );
        for bad in [
            reply(RtrTypes::NONE, true),
            reply(RtrTypes::only(Send), true),
            reply(offered, true),
            reply(RtrTypes::only(Write), false),
        ] {
            assert_eq!(
                initiator_accept(ours, offered, &bad),
                Err(StartupError::NoMatchingRtr),
                "{bad:?}"
            );
        }
        // Without an offer, RTR bits in the Reply are ignored.
        assert_eq!(
            initiator_accept(ours, RtrTypes::NONE, &reply(RtrTypes::only(Send), true))
                .unwrap()
                .1,
            None
        );
    }

    #[test]
    fn depths_cap_at_14_bits() {
        assert_eq!(
            ReadDepths::capped(1 << 20, 5),
            ReadDepths {
                ird: MAX_READ_DEPTH,
                ord: 5
            }
        );
    }
}
