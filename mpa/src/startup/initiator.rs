//! The MPA Initiator: sends the Request, waits for the Reply (rules 1, 3, 5, 8, 9, 10;
//! RFC 6581 §5 for the Rev 2 parameters).

use std::time::Instant;

use super::reader::{Common, FrameReader};
use super::{Role, StartupConfig, StartupEvent, UsageError};
use crate::enhanced::{EnhancedData, RtrTypes};
use crate::error::StartupError;
use crate::read_depths::{initiator_accept, ReadDepths};
use crate::revision::REVISION_ENHANCED;
use crate::startup_frame::{FrameKind, Packet, Repr};

/// The MPA Initiator.
#[derive(Debug)]
pub struct Initiator {
    c: Common,
    depths: ReadDepths,
}

impl Initiator {
    /// Starts: queues the Request (MPA-77) with our M/C bits, revision and `private_data`; a
    /// Rev 2 Request also carries `depths` and the peer-to-peer offer (RFC 6581 §7.1). Arms
    /// the startup deadline at `now + timeout`.
    pub fn new(
        cfg: StartupConfig,
        now: Instant,
        private_data: &[u8],
        depths: ReadDepths,
    ) -> Result<Self, UsageError> {
        // A Reply never carries a revision above the Request's.
        let reader = FrameReader::new(
            FrameKind::Reply,
            cfg.accept.up_to(cfg.revision),
            cfg.max_private_data,
        );
        let mut c = Common::new(cfg, reader, now);
        let enhanced = (cfg.revision == REVISION_ENHANCED).then_some(EnhancedData {
            ird: depths.ird,
            ord: depths.ord,
            p2p: !cfg.p2p_offer.is_empty(),
            rtr: cfg.p2p_offer,
        });
        let frame = c.frame(
            FrameKind::Request,
            false,
            cfg.revision,
            enhanced,
            private_data,
        )?;
        c.send(frame);
        Ok(Initiator { c, depths })
    }

    /// Octets to send, if any (the Request, once).
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.c.take_transmit()
    }

    /// The peer-to-peer RTR types the Request offered.
    fn offer(&self) -> RtrTypes {
        if self.c.cfg.revision == REVISION_ENHANCED {
            self.c.cfg.p2p_offer
        } else {
            RtrTypes::NONE
        }
    }

    /// Feeds received octets; returns how many belong to the Reply. The rest is FPDU stream.
    pub fn handle_input(&mut self, _now: Instant, data: &[u8]) -> usize {
        if self.c.done {
            return 0;
        }
        let (used, frame) = self.c.read(data);
        let Some(frame) = frame else {
            return used;
        };
        self.c.done = true;
        // The reader has checked key, length, revision, PD_Length and the Rev 2 octets.
        let Ok(rep) = Repr::parse(&Packet::new_unchecked(&frame[..])) else {
            self.c.fail(StartupError::BadEnhancedData);
            return used;
        };
        if rep.reject {
            self.c.events.push_back(StartupEvent::Rejected {
                private_data: rep.private_data.to_vec(),
            });
            return used;
        }
        // RFC 6581 §5: depths and the RTR choice of a Rev 2 Reply. A Rev 1 Reply (the
        // Responder chose RFC 5044) exchanges none; peer-to-peer mode needs Rev 2 at both ends.
        let offer = self.offer();
        let agreed = match rep.enhanced {
            Some(e) => initiator_accept(self.depths, offer, &e),
            None if rep.revision == REVISION_ENHANCED && !offer.is_empty() => {
                Err(StartupError::NoMatchingRtr)
            }
            None => Ok((self.depths, None)),
        };
        let ev = match agreed {
            Ok((depths, rtr)) => StartupEvent::Established(self.c.negotiated(
                Role::Initiator,
                &rep,
                frame.len(),
                depths,
                rtr,
            )),
            Err(error) => StartupEvent::Refused {
                negotiated: self.c.negotiated(
                    Role::Initiator,
                    &rep,
                    frame.len(),
                    self.depths,
                    None,
                ),
                error,
            },
        };
        self.c.events.push_back(ev);
        used
    }

    /// Fails with [`StartupError::Timeout`] once `now` reaches the deadline.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.c.handle_timeout(now);
    }

    /// TCP closed or reset during startup. After a Rev 2 Request, the Responder may be an
    /// RFC 5044 one: see [`StartupConfig::rev1_fallback`].
    pub fn handle_close(&mut self) {
        self.c.handle_close();
    }

    /// When to call [`Self::handle_timeout`] next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.c.done {
            None
        } else {
            self.c.deadline
        }
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<StartupEvent> {
        self.c.events.pop_front()
    }

    /// True once the startup has ended (established, refused, rejected or failed).
    pub fn is_done(&self) -> bool {
        self.c.done
    }
}
