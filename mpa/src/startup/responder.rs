//! The MPA Responder: waits for the Request, lets the ULP decide, sends the Reply (rules 2, 4,
//! 5, 6, 8, 9, 10; RFC 6581 §5 for the Rev 2 parameters).

use std::time::Instant;

use super::reader::{Common, FrameReader};
use super::{RequestInfo, Role, StartupConfig, StartupEvent, UsageError};
use crate::enhanced::{EnhancedData, RtrTypes};
use crate::error::StartupError;
use crate::read_depths::{responder_reply, ReadDepths};
use crate::startup_frame::{FrameKind, Packet, Repr};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ResponderState {
    AwaitingRequest,
    Deciding,
    Done,
}

/// The MPA Responder.
#[derive(Debug)]
pub struct Responder {
    c: Common,
    state: ResponderState,
    /// The Request's octets while the ULP decides.
    request: Option<Vec<u8>>,
}

impl Responder {
    /// Starts waiting for a Request whose revision `cfg.accept` holds, with the deadline at
    /// `now + timeout`.
    pub fn new(cfg: StartupConfig, now: Instant) -> Self {
        let reader = FrameReader::new(FrameKind::Request, cfg.accept, cfg.max_private_data);
        Responder {
            c: Common::new(cfg, reader, now),
            state: ResponderState::AwaitingRequest,
            request: None,
        }
    }

    /// Queues a last streaming-mode message to go out before MPA mode (MPA-105, §6.1.4).
    pub fn with_last_streaming_message(mut self, msg: &[u8]) -> Self {
        self.c.transmit.extend_from_slice(msg);
        self
    }

    /// Octets to send, if any (the Reply after a decision).
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.c.take_transmit()
    }

    /// Feeds received octets; returns how many belong to the Request. Octets after it are
    /// FPDU stream: keep them for [`crate::Negotiated::stream_parser`].
    pub fn handle_input(&mut self, _now: Instant, data: &[u8]) -> usize {
        if self.state != ResponderState::AwaitingRequest || self.c.done {
            return 0;
        }
        let (used, frame) = self.c.read(data);
        if self.c.done {
            self.state = ResponderState::Done;
        }
        if let Some(frame) = frame {
            let Ok(req) = Repr::parse(&Packet::new_unchecked(&frame[..])) else {
                self.c.fail(StartupError::BadEnhancedData);
                self.state = ResponderState::Done;
                return used;
            };
            let info = RequestInfo {
                private_data: req.private_data.to_vec(),
                peer_wants_markers: req.markers,
                peer_wants_crc: req.crc,
                revision: req.revision,
                peer_read_depths: req.enhanced.map(|e| ReadDepths {
                    ird: e.ird,
                    ord: e.ord,
                }),
                p2p_offer: match req.enhanced {
                    Some(e) if e.p2p => e.rtr,
                    _ => RtrTypes::NONE,
                },
            };
            self.c.events.push_back(StartupEvent::RequestReceived(info));
            self.request = Some(frame);
            self.state = ResponderState::Deciding;
        }
        used
    }

    /// Accepts the Request: queues a Reply with R=0, the Request's revision and
    /// `private_data`, and reports [`StartupEvent::Established`] (MPA-81). A Rev 2 Reply
    /// answers the Request's IRD/ORD and peer-to-peer offer from `depths` (RFC 6581 §5).
    pub fn accept(&mut self, private_data: &[u8], depths: ReadDepths) -> Result<(), UsageError> {
        self.decide(false, private_data, depths)
    }

    /// Rejects the Request: queues a Reply with R=1 and `private_data` (a Rev 2 Reply carries
    /// `depths`), leaves MPA and keeps TCP open: reports [`StartupEvent::Rejected`] (MPA-80).
    pub fn reject(&mut self, private_data: &[u8], depths: ReadDepths) -> Result<(), UsageError> {
        self.decide(true, private_data, depths)
    }

    fn decide(&mut self, reject: bool, pd: &[u8], depths: ReadDepths) -> Result<(), UsageError> {
        if self.state != ResponderState::Deciding {
            return Err(UsageError::NotDeciding);
        }
        let Some(bytes) = self.request.take() else {
            return Err(UsageError::NotDeciding);
        };
        let Ok(req) = Repr::parse(&Packet::new_unchecked(&bytes[..])) else {
            return Err(UsageError::NotDeciding);
        };
        let reply = req.enhanced.map(|peer| {
            if reject {
                EnhancedData {
                    ird: depths.ird,
                    ord: depths.ord,
                    p2p: false,
                    rtr: RtrTypes::NONE,
                }
            } else {
                responder_reply(depths, &peer, self.c.cfg.p2p_accept)
            }
        });
        let frame = match self
            .c
            .frame(FrameKind::Reply, reject, req.revision, reply, pd)
        {
            Ok(f) => f,
            Err(e) => {
                self.request = Some(bytes);
                return Err(e);
            }
        };
        self.c.send(frame);
        self.state = ResponderState::Done;
        self.c.done = true;
        let ev = if reject {
            StartupEvent::Rejected {
                private_data: pd.to_vec(),
            }
        } else {
            let agreed = reply.map_or(depths, |r| ReadDepths {
                ird: r.ird,
                ord: r.ord,
            });
            let rtr = reply.and_then(|r| r.rtr.single());
            StartupEvent::Established(self.c.negotiated(
                Role::Responder,
                &req,
                bytes.len(),
                agreed,
                rtr,
            ))
        };
        self.c.events.push_back(ev);
        Ok(())
    }

    /// Fails with [`StartupError::Timeout`] once `now` reaches the deadline while waiting
    /// for the Request (Responder/Responder detection, MPA-90).
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.state == ResponderState::AwaitingRequest {
            self.c.handle_timeout(now);
            if self.c.done {
                self.state = ResponderState::Done;
            }
        }
    }

    /// TCP closed or reset during startup.
    pub fn handle_close(&mut self) {
        self.c.handle_close();
        self.state = ResponderState::Done;
    }

    /// When to call [`Self::handle_timeout`] next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.state == ResponderState::AwaitingRequest {
            self.c.deadline
        } else {
            None
        }
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<StartupEvent> {
        self.c.events.pop_front()
    }

    /// True once the startup has ended (established, rejected or failed).
    pub fn is_done(&self) -> bool {
        self.state == ResponderState::Done
    }
}
