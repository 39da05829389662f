//! The seam between a TCP implementation and a test application: a [`SimTransport`] is any TCP
//! (ours, smoltcp, ...) seen from the link and from its application; an [`Application`] drives
//! one; a [`Host`] pairs them into a [`SimEndpoint`] for the [`Sim`](super::Sim).

use super::driver::SimEndpoint;
use super::time::SimTime;

/// Coarse connection state, as an application sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConnState {
    /// Listening or handshaking.
    Opening,
    /// Both directions open.
    Established,
    /// The peer's FIN arrived; we may still send (CLOSE-WAIT).
    PeerClosed,
    /// We sent our FIN and wait for the rest (FIN-WAIT-1/2, CLOSING, LAST-ACK).
    Closing,
    /// TIME-WAIT.
    TimeWait,
    /// Fully closed after an orderly close.
    Closed,
    /// Ended by a RST, sent or received, or aborted.
    Reset,
}

/// Stream data handed up by a transport.
///
/// `offset` counts from the first data octet of the stream (sequence number ISN + 1).
/// `in_order` is the transport's in-order point when it hands this up: every octet below it has
/// been handed up, by this delivery or an earlier one. A plain byte stream always delivers at
/// `in_order == offset + data.len()`; a transport that commits out-of-order segments hands them up
/// with `offset > in_order` and later moves `in_order` past them (possibly with empty `data`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Delivery {
    /// Stream offset of `data[0]`.
    pub offset: u64,
    /// The octets.
    pub data: Vec<u8>,
    /// The in-order point after this delivery.
    pub in_order: u64,
}

/// Counters a transport may report to the tests; zero where it does not know.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransportStats {
    /// Data segments sent, retransmissions included.
    pub segments_sent: u64,
    /// Data segments retransmitted (RTO, fast retransmit, SACK recovery).
    pub retransmits: u64,
    /// Segments the transport knowingly sent not starting with a record or splitting one
    /// (the counted exceptions of MPA draft §5.3: window or EMSS smaller than a record).
    pub unaligned_exceptions: u64,
    /// Out-of-order segments committed and handed up before the gap filled.
    pub ooo_commits: u64,
}

/// A TCP seen from both sides: the link (IPv4 packets in and out, timers) and its application
/// (stream data in and out, state).
pub trait SimTransport {
    /// An IPv4 packet arrived (maybe corrupted).
    fn handle_packet(&mut self, now: SimTime, packet: &[u8]);
    /// The next IPv4 packet to send.
    fn poll_transmit(&mut self, now: SimTime) -> Option<Vec<u8>>;
    /// When `handle_timeout` wants to run next.
    fn poll_timeout(&mut self, now: SimTime) -> Option<SimTime>;
    /// A deadline from `poll_timeout` has passed.
    fn handle_timeout(&mut self, now: SimTime);

    /// Connection state now.
    fn state(&self) -> ConnState;
    /// Octets `send` would accept now.
    fn send_space(&self) -> usize;
    /// Queues stream octets; returns how many were taken.
    fn send(&mut self, now: SimTime, data: &[u8]) -> usize;
    /// Queues one record (an MPA FPDU) whole, or nothing. A record-aware transport keeps record
    /// boundaries for header alignment; the default writes the octets if they all fit.
    fn send_record(&mut self, now: SimTime, record: &[u8]) -> bool {
        if self.send_space() < record.len() {
            return false;
        }
        let taken = self.send(now, record);
        assert_eq!(
            taken,
            record.len(),
            "send took less than send_space promised"
        );
        true
    }
    /// The next data handed up, if any.
    fn recv(&mut self, now: SimTime) -> Option<Delivery>;
    /// Closes our sending direction after the queued data (sends FIN).
    fn close(&mut self, now: SimTime);
    /// Counters, where the transport keeps them.
    fn stats(&self) -> TransportStats {
        TransportStats::default()
    }
    /// Implementation-specific state for failure reports (exact TCP state, timers, ...).
    fn describe(&self) -> String {
        format!("{:?}", self.state())
    }
}

/// What runs on top of a [`SimTransport`] in a [`Host`].
pub trait Application {
    /// The application's turn: move data, react to the state.
    fn poll(&mut self, now: SimTime, transport: &mut dyn SimTransport);
    /// True once it finished (data through, connection closed as wanted).
    fn is_done(&self) -> bool;
    /// What went wrong, if something did.
    fn failure(&self) -> Option<String>;
}

/// A transport and its application: a [`SimEndpoint`] for the simulation.
#[derive(Debug)]
pub struct Host<T, A> {
    /// The TCP.
    pub transport: T,
    /// Its application.
    pub app: A,
}

impl<T: SimTransport, A: Application> Host<T, A> {
    /// Pairs a transport with an application.
    pub fn new(transport: T, app: A) -> Self {
        Host { transport, app }
    }
}

impl<T: SimTransport, A: Application> SimEndpoint for Host<T, A> {
    fn handle_packet(&mut self, now: SimTime, packet: &[u8]) {
        self.transport.handle_packet(now, packet);
    }
    fn poll_transmit(&mut self, now: SimTime) -> Option<Vec<u8>> {
        self.transport.poll_transmit(now)
    }
    fn poll_timeout(&mut self, now: SimTime) -> Option<SimTime> {
        self.transport.poll_timeout(now)
    }
    fn handle_timeout(&mut self, now: SimTime) {
        self.transport.handle_timeout(now);
    }
    fn poll_app(&mut self, now: SimTime) {
        self.app.poll(now, &mut self.transport);
    }
    fn is_done(&self) -> bool {
        self.app.is_done()
    }
    fn failure(&self) -> Option<String> {
        self.app.failure()
    }
}
