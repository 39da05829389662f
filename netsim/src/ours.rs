//! Our TCP ([`tcp_offload::Connection`], optionally behind a [`tcp_offload::TcpListener`]) as a
//! [`SimTransport`] for the simulated link, in byte-stream mode or in record (MPA) mode with owned or
//! external records, driven in the simulation's virtual time.
//!
//! In record mode (MPA Full Operation) both directions switch once the connection is
//! synchronized: `send_record` queues whole records (header alignment), and `recv` hands up
//! committed chunks at once, out of order included, with the in-order point. A `close` asked for
//! before the connection opened is kept and carried out once it is established.

use std::collections::HashMap;
use std::net::SocketAddr;

use crate::{mix64, ConnState, Delivery, SimTime, SimTransport, TransportStats};
use tcp_offload::{
    CloseReason, Config, Connection, Event, FourTuple, IsnGenerator, ListenerConfig, RecordId,
    RecordSource, State, TcpConfigError, TcpListener, Timestamp,
};

use crate::{SimRole, CLIENT_IP, CLIENT_PORT, SERVER_IP, SERVER_PORT};

/// How the application hands data to our TCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Plain byte stream (`send` / `recv`), as before MPA Full Operation.
    Bytes,
    /// Record mode with records the connection copies (`send_record_bytes`).
    OwnedRecords,
    /// Record mode with records the adapter keeps and writes at every (re)transmission
    /// (`send_record` + [`RecordSource`]), released on [`Event::RecordAcked`].
    ExternalRecords,
}

/// How our server side opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Passive {
    /// `Connection::listen`.
    Connection,
    /// A `TcpListener` (half-open table, SYN cookies), then `accept`.
    Listener,
}

/// Knobs of our endpoint.
#[derive(Clone, Debug)]
pub struct OursOptions {
    /// Connection settings.
    pub cfg: Config,
    /// Data mode.
    pub mode: Mode,
    /// Passive-open path (server role only).
    pub passive: Passive,
    /// Listener settings, for [`Passive::Listener`].
    pub listener: ListenerConfig,
    /// Call `enter_record_mode` right after creating the connection, before the handshake,
    /// instead of once it is synchronized.
    pub early_record_mode: bool,
}

impl Default for OursOptions {
    fn default() -> Self {
        OursOptions {
            cfg: Config::default(),
            mode: Mode::OwnedRecords,
            passive: Passive::Connection,
            listener: ListenerConfig::default(),
            early_record_mode: false,
        }
    }
}

/// External records by id (= stream offset of their first octet).
#[derive(Default)]
struct Records {
    held: HashMap<RecordId, Vec<u8>>,
    /// Writes asked for a record that was already released or never queued.
    bad_writes: u64,
}

impl RecordSource for Records {
    fn write_record(&mut self, id: RecordId, offset: u32, dst: &mut [u8]) {
        match self.held.get(&id) {
            Some(r) if offset as usize + dst.len() <= r.len() => {
                dst.copy_from_slice(&r[offset as usize..offset as usize + dst.len()])
            }
            _ => {
                self.bad_writes += 1;
                dst.fill(0xEE);
            }
        }
    }
}

/// The coarse state of one of our connections: its RFC 9293 state, and for CLOSED why it closed
/// (anything but an orderly close counts as [`ConnState::Reset`]).
fn conn_state(state: State, closed: Option<CloseReason>) -> ConnState {
    use State as S;
    match state {
        S::Listen | S::SynSent | S::SynReceived => ConnState::Opening,
        S::Established => ConnState::Established,
        S::CloseWait => ConnState::PeerClosed,
        S::FinWait1 | S::FinWait2 | S::Closing | S::LastAck => ConnState::Closing,
        S::TimeWait => ConnState::TimeWait,
        S::Closed => match closed {
            Some(CloseReason::Normal) => ConnState::Closed,
            _ => ConnState::Reset,
        },
    }
}

/// Our TCP as a [`SimTransport`].
pub struct OursTransport {
    conn: Option<Connection>,
    listener: Option<TcpListener>,
    mode: Mode,
    records: Records,
    next_record_offset: u64,
    buf: Vec<u8>,
    rx_offset: u64,
    reported_in_order: u64,
    peer_fin: bool,
    close_reason: Option<CloseReason>,
    /// The application asked to close; carried out once the connection is established.
    close_requested: bool,
    /// `poll_timeout` earlier than the `now` it was asked at (never expected).
    pub stale_timeouts: u64,
    /// `RecordAcked` events seen.
    pub records_acked: u64,
}

fn addr(ip: [u8; 4], port: u16) -> SocketAddr {
    SocketAddr::from((ip, port))
}

impl OursTransport {
    /// A client (connects at once) or a server (listens); TCP's clock counts from virtual time
    /// 0. The ISN secret derives from `seed`, so a run repeats exactly. Refuses TCP settings that fail
    /// `Config::validate`.
    pub fn new(role: SimRole, seed: u64, opts: &OursOptions) -> Result<Self, TcpConfigError> {
        let mut secret = [0u8; 16];
        secret[..8].copy_from_slice(&mix64(seed ^ 0x6973_6e5f_6b65_7931).to_le_bytes());
        secret[8..].copy_from_slice(&mix64(seed ^ 0x6973_6e5f_6b65_7932).to_le_bytes());
        let gen = IsnGenerator::new(secret, Timestamp::ZERO);
        let (mut conn, listener) = match (role, opts.passive) {
            (SimRole::Client, _) => {
                let tuple = FourTuple {
                    local: addr(CLIENT_IP, CLIENT_PORT),
                    remote: addr(SERVER_IP, SERVER_PORT),
                };
                (
                    Some(Connection::connect(
                        opts.cfg.clone(),
                        tuple,
                        &gen,
                        Timestamp::ZERO,
                    )?),
                    None,
                )
            }
            (SimRole::Server, Passive::Connection) => (
                Some(Connection::listen(
                    opts.cfg.clone(),
                    addr(SERVER_IP, SERVER_PORT),
                    &gen,
                    Timestamp::ZERO,
                )?),
                None,
            ),
            (SimRole::Server, Passive::Listener) => {
                let l = TcpListener::new(
                    opts.cfg.clone(),
                    opts.listener.clone(),
                    addr(SERVER_IP, SERVER_PORT),
                    gen,
                )?;
                (None, Some(l))
            }
        };
        // Record mode is entered once the connection is synchronized (as MPA does after its
        // startup frames): `enter_record_mode` before the handshake is lost on the receive side,
        // because the SYN rebuilds the receive buffer in byte mode (see sim_commit.rs).
        if opts.early_record_mode && opts.mode != Mode::Bytes {
            if let Some(c) = &mut conn {
                c.enter_record_mode();
            }
        }
        Ok(OursTransport {
            conn,
            listener,
            mode: opts.mode,
            records: Records::default(),
            next_record_offset: 0,
            buf: vec![0; 65536],
            rx_offset: 0,
            reported_in_order: 0,
            peer_fin: false,
            close_reason: None,
            close_requested: false,
            stale_timeouts: 0,
            records_acked: 0,
        })
    }

    fn at(&self, now: SimTime) -> Timestamp {
        Timestamp::from_nanos(now.as_nanos())
    }

    /// The connection, once there is one.
    pub fn connection(&self) -> Option<&Connection> {
        self.conn.as_ref()
    }

    /// External records still held (not yet acknowledged).
    pub fn records_held(&self) -> usize {
        self.records.held.len()
    }

    /// Record writes asked for records not held (must stay 0).
    pub fn bad_record_writes(&self) -> u64 {
        self.records.bad_writes
    }

    /// Picks up an accepted connection, enters record mode and carries out a pending close once
    /// the connection allows, and drains its events; after every input.
    fn drain_events(&mut self, at: Timestamp) {
        if self.conn.is_none() {
            self.conn = self.listener.as_mut().and_then(TcpListener::accept);
        }
        let Some(c) = &mut self.conn else { return };
        if self.mode != Mode::Bytes && !c.record_mode() && c.state().is_synchronized() {
            c.enter_record_mode();
        }
        if self.close_requested && matches!(c.state(), State::Established | State::CloseWait) {
            c.close(at);
        }
        while let Some(e) = c.poll_event() {
            match e {
                Event::PeerClosed => self.peer_fin = true,
                Event::RecordAcked(id) => {
                    self.records_acked += 1;
                    self.records.held.remove(&id);
                }
                Event::Closed(reason) => self.close_reason = Some(reason),
                Event::Connected | Event::Readable | Event::Writable => {}
            }
        }
    }
}

impl SimTransport for OursTransport {
    fn handle_packet(&mut self, now: SimTime, packet: &[u8]) {
        let at = self.at(now);
        // Malformed (e.g. corrupted) packets are dropped and counted by the TCP itself.
        match (&mut self.conn, &mut self.listener) {
            (Some(c), _) => drop(c.handle_packet(at, packet)),
            (None, Some(l)) => drop(l.handle_packet(at, packet)),
            (None, None) => {}
        }
        self.drain_events(at);
    }

    fn poll_transmit(&mut self, now: SimTime) -> Option<Vec<u8>> {
        let at = self.at(now);
        let n = match (&mut self.conn, &mut self.listener) {
            (Some(c), _) => c.poll_transmit_with(at, &mut self.buf, &mut self.records),
            (None, Some(l)) => l.poll_transmit(at, &mut self.buf),
            (None, None) => None,
        };
        self.drain_events(at);
        n.map(|n| self.buf[..n].to_vec())
    }

    fn poll_timeout(&mut self, now: SimTime) -> Option<SimTime> {
        let t = match (&self.conn, &self.listener) {
            (Some(c), _) => c.poll_timeout(),
            (None, Some(l)) => l.poll_timeout(),
            (None, None) => None,
        }?;
        let t = SimTime::from_nanos(t.as_nanos());
        if t < now {
            self.stale_timeouts += 1;
        }
        Some(t)
    }

    fn handle_timeout(&mut self, now: SimTime) {
        let at = self.at(now);
        match (&mut self.conn, &mut self.listener) {
            (Some(c), _) => c.handle_timeout(at),
            (None, Some(l)) => l.handle_timeout(at),
            (None, None) => {}
        }
        self.drain_events(at);
    }

    fn state(&self) -> ConnState {
        let Some(c) = &self.conn else {
            return ConnState::Opening;
        };
        conn_state(c.state(), self.close_reason)
    }

    /// Zero until the connection is established and once a close was asked for.
    fn send_space(&self) -> usize {
        match &self.conn {
            Some(c)
                if matches!(c.state(), State::Established | State::CloseWait)
                    && !self.close_requested =>
            {
                usize::try_from(c.send_capacity()).unwrap_or(usize::MAX)
            }
            _ => 0,
        }
    }

    fn send(&mut self, _now: SimTime, data: &[u8]) -> usize {
        let n = self
            .conn
            .as_mut()
            .and_then(|c| c.send(data).ok())
            .unwrap_or(0);
        self.next_record_offset += n as u64;
        n
    }

    fn send_record(&mut self, now: SimTime, record: &[u8]) -> bool {
        let Some(c) = &mut self.conn else {
            return false;
        };
        match self.mode {
            Mode::Bytes => {
                if self.send_space() < record.len() {
                    return false;
                }
                self.send(now, record) == record.len()
            }
            Mode::OwnedRecords => match c.send_record_bytes(record) {
                Ok(off) => {
                    assert_eq!(off, self.next_record_offset, "record offset");
                    self.next_record_offset += record.len() as u64;
                    true
                }
                Err(_) => false,
            },
            Mode::ExternalRecords => {
                let id = self.next_record_offset;
                match c.send_record(record.len() as u32, id) {
                    Ok(off) => {
                        assert_eq!(off, id, "record offset");
                        self.records.held.insert(id, record.to_vec());
                        self.next_record_offset += record.len() as u64;
                        true
                    }
                    Err(_) => false,
                }
            }
        }
    }

    fn recv(&mut self, _now: SimTime) -> Option<Delivery> {
        let c = self.conn.as_mut()?;
        if self.mode == Mode::Bytes {
            let n = c.recv(&mut self.buf);
            if n == 0 {
                return None;
            }
            let offset = self.rx_offset;
            self.rx_offset += n as u64;
            return Some(Delivery {
                offset,
                data: self.buf[..n].to_vec(),
                in_order: self.rx_offset,
            });
        }
        if let Some(chunk) = c.poll_recv() {
            self.reported_in_order = self.reported_in_order.max(chunk.in_order_point);
            return Some(Delivery {
                offset: chunk.offset,
                data: chunk.data,
                in_order: chunk.in_order_point,
            });
        }
        // No chunk: the in-order point may still have moved past committed out-of-order data.
        let point = c.rcv_nxt_offset();
        (point > self.reported_in_order).then(|| {
            self.reported_in_order = point;
            Delivery {
                offset: point,
                data: Vec::new(),
                in_order: point,
            }
        })
    }

    fn close(&mut self, now: SimTime) {
        self.close_requested = true;
        self.drain_events(self.at(now));
    }

    fn describe(&self) -> String {
        match &self.conn {
            None => "ours: no connection yet".into(),
            Some(c) => format!(
                "ours {:?} in_flight={} queued={} timeout={:?} rcv_nxt_offset={} {:?}",
                c.state(),
                c.bytes_in_flight(),
                c.send_queued(),
                c.poll_timeout()
                    .map(|t| t.saturating_duration_since(Timestamp::ZERO)),
                c.rcv_nxt_offset(),
                c.counters()
            ),
        }
    }

    fn stats(&self) -> TransportStats {
        let Some(c) = &self.conn else {
            return TransportStats::default();
        };
        let k = c.counters();
        TransportStats {
            segments_sent: k.data_segs_out,
            retransmits: k.retransmits,
            unaligned_exceptions: k.split_emss + k.split_window + k.unaligned_retransmits,
            ooo_commits: k.ooo_committed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Application, Host, LinkConfig, Sim};

    /// Closes at its first turn, before the connection opened; done once it closed in order.
    struct CloseAtOnce {
        asked: bool,
    }

    impl Application for CloseAtOnce {
        fn poll(&mut self, now: SimTime, t: &mut dyn SimTransport) {
            if !self.asked {
                assert_eq!(t.state(), ConnState::Opening);
                assert_eq!(t.send_space(), 0, "nothing can be queued before the open");
                t.close(now);
                self.asked = true;
            }
        }
        fn is_done(&self) -> bool {
            false
        }
        fn failure(&self) -> Option<String> {
            None
        }
    }

    #[test]
    fn a_close_asked_for_while_opening_is_carried_out_once_established() {
        let opts = OursOptions {
            passive: Passive::Listener,
            ..OursOptions::default()
        };
        let host = |role, seed| {
            Host::new(
                OursTransport::new(role, seed, &opts).expect("valid TCP settings"),
                CloseAtOnce { asked: false },
            )
        };
        let mut sim = Sim::new(
            7,
            host(SimRole::Client, 1),
            host(SimRole::Server, 2),
            LinkConfig::default(),
            LinkConfig::default(),
        )
        .unwrap();
        sim.run_until(SimTime::from_secs(1)).unwrap();
        for t in [&sim.a.transport, &sim.b.transport] {
            let c = t.connection().expect("the connection opened");
            assert!(
                matches!(c.state(), State::TimeWait | State::Closed),
                "{}",
                t.describe()
            );
            assert_ne!(t.state(), ConnState::Reset);
        }
    }

    #[test]
    fn tcp_states_map_to_what_the_application_sees() {
        assert_eq!(conn_state(State::SynSent, None), ConnState::Opening);
        assert_eq!(conn_state(State::CloseWait, None), ConnState::PeerClosed);
        assert_eq!(conn_state(State::Closing, None), ConnState::Closing);
        assert_eq!(conn_state(State::TimeWait, None), ConnState::TimeWait);
        assert_eq!(
            conn_state(State::Closed, Some(CloseReason::Normal)),
            ConnState::Closed
        );
        assert_eq!(
            conn_state(State::Closed, Some(CloseReason::Reset)),
            ConnState::Reset
        );
        assert_eq!(
            conn_state(State::Closed, Some(CloseReason::TimedOut)),
            ConnState::Reset
        );
    }
}
