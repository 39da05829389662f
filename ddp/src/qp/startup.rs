//! MPA startup of the queue pair (MPA §7): the Responder's decision, the startup deadline, and
//! the switch to FPDUs once MPA is up.

use std::time::Instant;

use mpa::StartupEvent;

use super::{NegotiatedFraming, Phase, Qp, QpEvent, Startup};

impl Qp {
    /// Accept the pending Request with `private_data` in the Reply.
    pub fn accept(&mut self, private_data: &[u8]) -> Result<(), mpa::startup::UsageError> {
        self.decide(false, private_data)
    }

    /// Reject the pending Request (Reply with R=1); MPA is left, TCP stays open.
    pub fn reject(&mut self, private_data: &[u8]) -> Result<(), mpa::startup::UsageError> {
        self.decide(true, private_data)
    }

    fn decide(&mut self, reject: bool, pd: &[u8]) -> Result<(), mpa::startup::UsageError> {
        let Phase::Startup(Startup::Responder(r)) = &mut self.phase else {
            return Err(mpa::startup::UsageError::NotDeciding);
        };
        if reject {
            r.reject(pd)?;
        } else {
            r.accept(pd)?;
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

    /// Switch to FPDUs with what MPA negotiated; SeqStarts at the given stream offsets.
    pub(super) fn enter_operational(
        &mut self,
        n: &mpa::Negotiated,
        tx_seq_start: u64,
        rx_seq_start: u64,
    ) {
        let mulpdu = mpa::mulpdu(self.cfg.emss, n.tx_markers);
        self.engine.set_mulpdu(mulpdu);
        let negotiated = NegotiatedFraming {
            tx_markers: n.tx_markers,
            rx_markers: n.rx_markers,
            crc: n.crc,
            mulpdu,
        };
        self.tx_seq_start = tx_seq_start;
        self.rx_seq_start = rx_seq_start;
        self.rx_fpdu_pos = rx_seq_start;
        self.phase = Phase::Operational {
            framer: n.framer(),
            parser: n.stream_parser(),
            negotiated,
        };
        let peer_private_data = n.peer_private_data.clone();
        self.events.push_back(QpEvent::Established {
            peer_private_data,
            negotiated,
        });
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
                StartupEvent::RequestReceived {
                    private_data,
                    peer_wants_markers,
                    peer_wants_crc,
                } => {
                    if self.cfg.auto_accept {
                        let pd = self.cfg.private_data.clone();
                        if let Phase::Startup(Startup::Responder(r)) = &mut self.phase {
                            let _ = r.accept(&pd);
                        }
                        // The accept queued a Reply and an Established event: take them.
                        self.pump_startup();
                        return;
                    }
                    self.events.push_back(QpEvent::ConnectRequest {
                        private_data,
                        peer_wants_markers,
                        peer_wants_crc,
                    });
                }
                StartupEvent::Established(n) => {
                    // SeqStart of our direction is after every startup octet we will send.
                    let tx_start =
                        self.tx_total + (self.startup_tx.len() - self.startup_tx_at) as u64;
                    let rx_start = self.rx_total;
                    self.enter_operational(&n, tx_start, rx_start);
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
