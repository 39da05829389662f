//! Either TCP behind one type, so one runner serves every pairing.

use netsim::{ConnState, Delivery, SimTime, SimTransport, TransportStats};

use super::ours::OursTransport;
use super::smol::SmolTransport;

/// Our TCP or smoltcp.
pub enum Peer {
    /// Ours.
    Ours(Box<OursTransport>),
    /// smoltcp.
    Smol(Box<SmolTransport>),
}

impl Peer {
    fn t(&self) -> &dyn SimTransport {
        match self {
            Peer::Ours(t) => t.as_ref(),
            Peer::Smol(t) => t.as_ref(),
        }
    }
    fn t_mut(&mut self) -> &mut dyn SimTransport {
        match self {
            Peer::Ours(t) => t.as_mut(),
            Peer::Smol(t) => t.as_mut(),
        }
    }
    /// smoltcp, if it is.
    pub fn smol(&self) -> Option<&SmolTransport> {
        match self {
            Peer::Ours(_) => None,
            Peer::Smol(t) => Some(t),
        }
    }

    /// Ours, if it is.
    pub fn ours(&self) -> Option<&OursTransport> {
        match self {
            Peer::Ours(t) => Some(t),
            Peer::Smol(_) => None,
        }
    }
}

impl SimTransport for Peer {
    fn handle_packet(&mut self, now: SimTime, packet: &[u8]) {
        self.t_mut().handle_packet(now, packet)
    }
    fn poll_transmit(&mut self, now: SimTime) -> Option<Vec<u8>> {
        self.t_mut().poll_transmit(now)
    }
    fn poll_timeout(&mut self, now: SimTime) -> Option<SimTime> {
        self.t_mut().poll_timeout(now)
    }
    fn handle_timeout(&mut self, now: SimTime) {
        self.t_mut().handle_timeout(now)
    }
    fn state(&self) -> ConnState {
        self.t().state()
    }
    fn send_space(&self) -> usize {
        self.t().send_space()
    }
    fn send(&mut self, now: SimTime, data: &[u8]) -> usize {
        self.t_mut().send(now, data)
    }
    fn send_record(&mut self, now: SimTime, record: &[u8]) -> bool {
        self.t_mut().send_record(now, record)
    }
    fn recv(&mut self, now: SimTime) -> Option<Delivery> {
        self.t_mut().recv(now)
    }
    fn close(&mut self, now: SimTime) {
        self.t_mut().close(now)
    }
    fn stats(&self) -> TransportStats {
        self.t().stats()
    }
    fn describe(&self) -> String {
        self.t().describe()
    }
}
