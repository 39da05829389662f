//! A bulk-transfer application: sends a seeded stream (as bytes or as records), verifies the
//! stream it receives octet by octet, closes after sending and finishes once the connection
//! closed cleanly.

use super::stream::{Application, ConnState, SimTransport};
use super::time::SimTime;
use super::verify::{Pattern, RecordPlan, StreamVerifier, VerifyStats};

/// When a [`BulkApp`] counts as done (besides all data through and its FIN sent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    /// In TIME-WAIT or fully closed.
    TimeWaitOrClosed,
    /// Fully closed (TIME-WAIT over).
    Closed,
}

/// When a [`BulkApp`] closes its sending direction (sends FIN).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClosePolicy {
    /// As soon as all its data is queued: half-close while the peer may still send, and
    /// simultaneous closes when both do it.
    AfterSending,
    /// Once all its data is queued and all the peer's data arrived: an active close whose FIN
    /// acknowledges everything.
    AfterReceiving,
    /// Once all its data is queued, all the peer's data arrived and the peer's FIN too: a
    /// passive close.
    AfterPeerClose,
}

/// What a [`BulkApp`] sends and expects.
#[derive(Clone, Debug)]
pub struct BulkConfig {
    /// Octets to send.
    pub send_len: u64,
    /// Octets to expect.
    pub recv_len: u64,
    /// Seed of the stream sent.
    pub tx_seed: u64,
    /// Seed of the stream expected.
    pub rx_seed: u64,
    /// Send as these records (whole, via [`SimTransport::send_record`]) instead of as bytes;
    /// the plan's total must equal `send_len`.
    pub records: Option<RecordPlan>,
    /// Largest single `send` in byte mode.
    pub write_chunk: usize,
    /// When to count as done.
    pub finish: Finish,
    /// When to send FIN.
    pub close: ClosePolicy,
}

impl BulkConfig {
    /// Send `send_len` octets of `tx_seed`, expect `recv_len` of `rx_seed`, bytes mode,
    /// done when fully closed.
    pub fn new(send_len: u64, tx_seed: u64, recv_len: u64, rx_seed: u64) -> Self {
        BulkConfig {
            send_len,
            recv_len,
            tx_seed,
            rx_seed,
            records: None,
            write_chunk: 64 * 1024,
            finish: Finish::Closed,
            close: ClosePolicy::AfterSending,
        }
    }

    /// Close as `policy` says.
    pub fn with_close(mut self, policy: ClosePolicy) -> Self {
        self.close = policy;
        self
    }

    /// Send as records of this plan.
    pub fn with_records(mut self, plan: RecordPlan) -> Self {
        assert_eq!(
            plan.total(),
            self.send_len,
            "record plan must cover the stream"
        );
        self.records = Some(plan);
        self
    }

    /// Count as done in TIME-WAIT already.
    pub fn finish_in_time_wait(mut self) -> Self {
        self.finish = Finish::TimeWaitOrClosed;
        self
    }
}

/// See the module doc.
#[derive(Clone, Debug)]
pub struct BulkApp {
    cfg: BulkConfig,
    tx: Pattern,
    verifier: StreamVerifier,
    sent: u64,
    next_record: usize,
    buf: Vec<u8>,
    fin_sent: bool,
    error: Option<String>,
    /// When the connection left `Opening`.
    pub established_at: Option<SimTime>,
    /// When the app finished.
    pub done_at: Option<SimTime>,
}

impl BulkApp {
    /// An app doing what `cfg` says.
    pub fn new(cfg: BulkConfig) -> Self {
        BulkApp {
            tx: Pattern::new(cfg.tx_seed),
            verifier: StreamVerifier::new(Pattern::new(cfg.rx_seed), cfg.recv_len),
            cfg,
            sent: 0,
            next_record: 0,
            buf: Vec::new(),
            fin_sent: false,
            error: None,
            established_at: None,
            done_at: None,
        }
    }

    /// Octets handed to the transport so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Receive-side counters (out-of-order commits among them).
    pub fn verify_stats(&self) -> VerifyStats {
        self.verifier.stats()
    }

    /// True once all expected octets arrived, verified.
    pub fn received_all(&self) -> bool {
        self.verifier.is_complete()
    }

    fn fail(&mut self, now: SimTime, what: String) {
        if self.error.is_none() {
            self.error = Some(format!(
                "{what} (at {now}, sent {}, received {})",
                self.sent,
                self.verifier.prefix()
            ));
        }
    }

    fn send_some(&mut self, now: SimTime, t: &mut dyn SimTransport) {
        if let Some(plan) = &self.cfg.records {
            while let Some(&size) = plan.sizes().get(self.next_record) {
                self.buf.resize(size, 0);
                self.tx.fill(self.sent, &mut self.buf);
                if !t.send_record(now, &self.buf) {
                    break;
                }
                self.sent += size as u64;
                self.next_record += 1;
            }
            return;
        }
        while self.sent < self.cfg.send_len {
            let left = usize::try_from(self.cfg.send_len - self.sent).unwrap_or(usize::MAX);
            let n = t.send_space().min(left).min(self.cfg.write_chunk);
            if n == 0 {
                break;
            }
            self.buf.resize(n, 0);
            self.tx.fill(self.sent, &mut self.buf);
            let taken = t.send(now, &self.buf);
            self.sent += taken as u64;
            if taken < n {
                break;
            }
        }
    }
}

impl Application for BulkApp {
    fn poll(&mut self, now: SimTime, t: &mut dyn SimTransport) {
        if self.done_at.is_some() || self.error.is_some() {
            return;
        }
        while let Some(d) = t.recv(now) {
            if let Err(e) = self.verifier.accept(&d) {
                return self.fail(now, format!("receive check failed: {e}"));
            }
        }
        let state = t.state();
        if state == ConnState::Reset {
            return self.fail(now, "connection reset".into());
        }
        if state != ConnState::Opening && self.established_at.is_none() {
            self.established_at = Some(now);
        }
        if matches!(state, ConnState::Established | ConnState::PeerClosed) {
            self.send_some(now, t);
            let close = self.sent == self.cfg.send_len
                && match self.cfg.close {
                    ClosePolicy::AfterSending => true,
                    ClosePolicy::AfterReceiving => self.verifier.is_complete(),
                    ClosePolicy::AfterPeerClose => {
                        self.verifier.is_complete() && state == ConnState::PeerClosed
                    }
                };
            if close && !self.fin_sent {
                t.close(now);
                self.fin_sent = true;
            }
        }
        let state = t.state();
        let closed = match self.cfg.finish {
            Finish::Closed => state == ConnState::Closed,
            Finish::TimeWaitOrClosed => matches!(state, ConnState::TimeWait | ConnState::Closed),
        };
        if state == ConnState::Closed && !(self.fin_sent && self.verifier.is_complete()) {
            return self.fail(
                now,
                format!("closed before the transfer finished ({state:?})"),
            );
        }
        if closed && self.fin_sent && self.verifier.is_complete() {
            self.done_at = Some(now);
        }
    }

    fn is_done(&self) -> bool {
        self.done_at.is_some()
    }

    fn failure(&self) -> Option<String> {
        self.error.clone()
    }
}
