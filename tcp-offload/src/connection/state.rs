//! The RFC 9293 §3.3.2 states and the transitions several paths share: establishing, closing
//! (§3.10.4), aborting (§3.10.5), the peer's FIN reaching the in-order point, TIME-WAIT.

use crate::time::Timestamp;

use super::rst::RstOut;
use super::timers::Timer;
use super::{Connection, Event};

/// Connection states, named as in RFC 9293 §3.3.2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// No connection.
    Closed,
    /// Waiting for a SYN.
    Listen,
    /// SYN sent, waiting for a matching SYN.
    SynSent,
    /// SYN received and SYN-ACK sent, waiting for the ACK.
    SynReceived,
    /// Open: data flows both ways.
    Established,
    /// We closed; our FIN is not yet acknowledged.
    FinWait1,
    /// Our FIN is acknowledged; waiting for the peer's FIN.
    FinWait2,
    /// The peer closed; we may still send.
    CloseWait,
    /// Both closed at once; waiting for the ACK of our FIN.
    Closing,
    /// The peer closed first, then we did; waiting for the ACK of our FIN.
    LastAck,
    /// Both FINs acknowledged; waiting 2*MSL.
    TimeWait,
}

impl State {
    /// States after the handshake (RFC 9293 "synchronized states").
    pub fn is_synchronized(self) -> bool {
        !matches!(
            self,
            State::Closed | State::Listen | State::SynSent | State::SynReceived
        )
    }
}

/// Why a connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// Orderly close (both FINs exchanged).
    Normal,
    /// The peer reset the connection.
    Reset,
    /// Retransmissions or keepalives went unanswered.
    TimedOut,
    /// We aborted (sent RST).
    Aborted,
    /// The connection attempt was refused (RST in SYN-SENT).
    Refused,
}

impl Connection {
    /// Orderly close of our sending half (RFC 9293 §3.10.4): a FIN follows the queued data.
    pub fn close(&mut self, now: Timestamp) {
        match self.state {
            State::Listen | State::SynSent => self.terminate(CloseReason::Normal),
            State::SynReceived => {
                // The FIN follows once ESTABLISHED is reached (RFC 9293 §3.10.4).
                self.fin_queued = true;
            }
            State::Established => {
                self.fin_queued = true;
                self.state = State::FinWait1;
            }
            State::CloseWait => {
                self.fin_queued = true;
                self.state = State::LastAck;
            }
            _ => {}
        }
        let _ = now;
    }

    /// Abort (RFC 9293 §3.10.5): sends RST and closes.
    pub fn abort(&mut self) {
        self.abort_with(CloseReason::Aborted);
    }

    /// Abort for `why`: RST to the peer (when it knows the connection), then CLOSED.
    pub(super) fn abort_with(&mut self, why: CloseReason) {
        if self.state.is_synchronized() || self.state == State::SynReceived {
            self.rst_out = Some(RstOut {
                seq: self.snd.seq(self.snd_nxt),
                ack: None,
            });
        }
        self.terminate(why);
    }

    pub(super) fn terminate(&mut self, why: CloseReason) {
        self.closed_normally = why == CloseReason::Normal && self.state.is_synchronized();
        if self.state != State::Closed {
            self.state = State::Closed;
            self.events.push_back(Event::Closed(why));
        }
        self.timers.stop(Timer::Rto);
        self.timers.stop(Timer::DelayedAck);
        self.timers.stop(Timer::Persist);
        self.timers.stop(Timer::Keepalive);
        self.timers.stop(Timer::TimeWait);
        self.timers.stop(Timer::FinWait2);
        self.ack_now = false;
        self.ack_pending = false;
        self.probe_due = false;
        self.syn_due = false;
    }

    pub(super) fn establish(&mut self, now: Timestamp) {
        self.state = State::Established;
        self.events.push_back(Event::Connected);
        if self.syn_timed_out {
            self.rtt.reinit_after_syn_timeout();
        }
        self.rtt.reset_backoff();
        self.syn_due = false;
        self.arm_keepalive(now);
    }

    pub(super) fn check_fin(&mut self, now: Timestamp) {
        let Some(fo) = self.fin_rcvd else { return };
        if self.fin_delivered || self.recv.nxt != fo {
            return;
        }
        self.fin_delivered = true;
        self.recv.nxt = fo + 1;
        self.ack_now = true;
        self.events.push_back(Event::PeerClosed);
        match self.state {
            State::SynReceived | State::Established => self.state = State::CloseWait,
            State::FinWait1 => {
                // Our FIN not yet acked (else we'd be in FIN-WAIT-2): simultaneous close.
                self.state = State::Closing;
            }
            State::FinWait2 => self.enter_time_wait(now),
            _ => {}
        }
    }

    pub(super) fn enter_time_wait(&mut self, now: Timestamp) {
        self.state = State::TimeWait;
        self.timers.stop(Timer::Rto);
        self.timers.stop(Timer::Persist);
        self.timers.stop(Timer::Keepalive);
        self.timers.stop(Timer::FinWait2);
        self.timers.set(Timer::TimeWait, now + self.cfg.time_wait);
    }
}
