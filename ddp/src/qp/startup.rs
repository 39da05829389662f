//! MPA startup of the queue pair (MPA §7): the Responder's decision, the startup deadline, and
//! the switch to FPDUs once MPA is up.

use std::time::Instant;

use mpa::{ReadDepths, StartupEvent};

use super::{NegotiatedFraming, Phase, Qp, QpEvent, Startup};
use crate::rdmap::term_code::{LlpError, TermCode};

impl Qp {
    /// Accept the pending Request with `private_data` in the Reply; a Rev 2 Reply answers with
    /// the engine's IRD/ORD.
    pub fn accept(&mut self, private_data: &[u8]) -> Result<(), mpa::startup::UsageError> {
        self.decide(false, private_data, self.local_depths())
    }

    /// As [`Qp::accept`], answering a Rev 2 Request with `depths` (the ULP's choice for this
    /// connection) instead of the configured ones.
    pub fn accept_with(
        &mut self,
        private_data: &[u8],
        depths: ReadDepths,
    ) -> Result<(), mpa::startup::UsageError> {
        self.decide(false, private_data, depths)
    }

    /// Reject the pending Request (Reply with R=1); MPA is left, TCP stays open.
    pub fn reject(&mut self, private_data: &[u8]) -> Result<(), mpa::startup::UsageError> {
        self.decide(true, private_data, self.local_depths())
    }

    /// The engine's configured IRD/ORD, as a startup frame carries them.
    fn local_depths(&self) -> ReadDepths {
        ReadDepths::capped(self.cfg.engine.ird, self.cfg.engine.ord)
    }

    fn decide(
        &mut self,
        reject: bool,
        pd: &[u8],
        depths: ReadDepths,
    ) -> Result<(), mpa::startup::UsageError> {
        let Phase::Startup(Startup::Responder(r)) = &mut self.phase else {
            return Err(mpa::startup::UsageError::NotDeciding);
        };
        if reject {
            r.reject(pd, depths)?;
        } else {
            r.accept(pd, depths)?;
        }
        self.pump_startup();
        Ok(())
    }

    /// Drive the startup deadline.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Phase::Startup(s) = &mut self.phase {
            match s {
                Startup::Initiator(i) => i.handle_timeout(now),
                Startup::Responder(r) => r.handle_timeout(now),
            }
            self.pump_startup();
        }
    }

    /// When to call [`Qp::handle_timeout`] next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Startup(Startup::Initiator(i)) => i.poll_timeout(),
            Phase::Startup(Startup::Responder(r)) => r.poll_timeout(),
            _ => None,
        }
    }

    /// Switch to FPDUs with what MPA negotiated; SeqStarts at the given stream offsets. The
    /// engine takes the negotiated read depths, and in peer-to-peer mode the Initiator queues
    /// its RTR message first while the Responder expects it (RFC 6581 §5).
    pub(super) fn enter_operational(
        &mut self,
        n: &mpa::Negotiated,
        tx_seq_start: u64,
        rx_seq_start: u64,
    ) -> NegotiatedFraming {
        let mulpdu = mpa::mulpdu(self.cfg.emss, n.tx_markers);
        self.engine.set_mulpdu(mulpdu);
        let (ird, ord) = (u32::from(n.read_depths.ird), u32::from(n.read_depths.ord));
        self.engine.set_read_depths(ird, ord);
        if let Some(t) = n.rtr {
            match n.role {
                mpa::Role::Initiator => self.engine.send_rtr(t),
                mpa::Role::Responder => self.engine.expect_rtr(t),
            }
        }
        let negotiated = NegotiatedFraming {
            tx_markers: n.tx_markers,
            rx_markers: n.rx_markers,
            crc: n.crc,
            mulpdu,
            revision: n.revision,
            ird,
            ord,
            rtr: n.rtr,
        };
        self.tx_seq_start = tx_seq_start;
        self.rx_seq_start = rx_seq_start;
        self.rx_fpdu_pos = rx_seq_start;
        self.phase = Phase::Operational {
            framer: n.framer(),
            parser: n.stream_parser(),
            negotiated,
        };
        negotiated
    }

    /// SeqStarts of both directions once the startup frames are done.
    fn seq_starts(&self) -> (u64, u64) {
        // SeqStart of our direction is after every startup octet we will send.
        let tx_start = self.tx_total + (self.startup_tx.len() - self.startup_tx_at) as u64;
        (tx_start, self.rx_total)
    }

    /// Take the startup machine's output and events.
    pub(super) fn pump_startup(&mut self) {
        let Phase::Startup(s) = &mut self.phase else {
            return;
        };
        let (tx, evs): (Option<Vec<u8>>, Vec<StartupEvent>) = match s {
            Startup::Initiator(i) => (
                i.poll_transmit(),
                std::iter::from_fn(|| i.poll_event()).collect(),
            ),
            Startup::Responder(r) => (
                r.poll_transmit(),
                std::iter::from_fn(|| r.poll_event()).collect(),
            ),
        };
        if let Some(tx) = tx {
            self.startup_tx.extend_from_slice(&tx);
        }
        for ev in evs {
            match ev {
                StartupEvent::RequestReceived(info) => {
                    if self.cfg.auto_accept {
                        let pd = self.cfg.private_data.clone();
                        let depths = self.local_depths();
                        if let Phase::Startup(Startup::Responder(r)) = &mut self.phase {
                            let _ = r.accept(&pd, depths);
                        }
                        // The accept queued a Reply and an Established event: take them.
                        self.pump_startup();
                        return;
                    }
                    self.events.push_back(QpEvent::ConnectRequest(info));
                }
                StartupEvent::Established(n) => {
                    let (tx_start, rx_start) = self.seq_starts();
                    let negotiated = self.enter_operational(&n, tx_start, rx_start);
                    self.events.push_back(QpEvent::Established {
                        peer_private_data: n.peer_private_data,
                        negotiated,
                    });
                    return;
                }
                StartupEvent::Refused { negotiated, error } => {
                    // RFC 6581 §5: MPA is up, the RDMA parameters cannot work: the stream's
                    // first and only FPDU is a Terminate with the LLP code (then close).
                    let (tx_start, rx_start) = self.seq_starts();
                    self.enter_operational(&negotiated, tx_start, rx_start);
                    self.engine.terminate_with(startup_term_code(error));
                    self.events.push_back(QpEvent::StartupFailed(error));
                    return;
                }
                StartupEvent::Rejected { private_data } => {
                    self.phase = Phase::Closed;
                    self.engine.abort();
                    self.events.push_back(QpEvent::Rejected { private_data });
                    return;
                }
                StartupEvent::Failed(e) => {
                    self.phase = Phase::Closed;
                    self.engine.abort();
                    self.events.push_back(QpEvent::StartupFailed(e));
                    return;
                }
            }
        }
    }
}

/// The Terminate code of an RFC 6581 startup refusal (layer LLP, type MPA).
fn startup_term_code(e: mpa::StartupError) -> TermCode {
    match e {
        mpa::StartupError::InsufficientIrd { .. } => LlpError::InsufficientIrd.term_code(),
        mpa::StartupError::NoMatchingRtr => LlpError::NoMatchingRtr.term_code(),
        _ => LlpError::InvalidStartup.term_code(),
    }
}
