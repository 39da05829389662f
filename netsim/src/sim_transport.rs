//! Our TCP as a [`crate::Transport`]: a client ([`Connection::connect`]) or a server (a
//! [`Listener`] until the connection is accepted), driven in the simulation's virtual time.
//!
//! In record mode (MPA Full Operation) both directions switch once the connection is open:
//! `send_record` queues whole records (header alignment), and `recv` hands up committed chunks
//! at once, out of order included, with the in-order point.

use std::time::Instant;

use crate::{ConnState, Delivery, SimTime, Transport, TransportStats};
use tcp_offload::config::Config;
use tcp_offload::connection::{CloseReason, Connection, Event, State};
use tcp_offload::isn::{FourTuple, IsnGenerator};
use tcp_offload::listener::{Listener, ListenerConfig};

/// Our TCP seen by the simulation.
#[derive(Debug)]
pub struct SimTransport {
    base: Instant,
    conn: Option<Connection>,
    listener: Option<Listener>,
    record_mode: bool,
    closed: Option<CloseReason>,
    close_requested: bool,
    /// The application acted (send, recv, close): transmit soon.
    dirty: bool,
    rx_offset: u64,
    reported_in_order: u64,
    buf: Vec<u8>,
    scratch: Vec<u8>,
}

impl SimTransport {
    /// Active open from `tuple.local` to `tuple.remote`. `secret` keys the ISNs; `base` is the
    /// instant virtual time 0 maps to.
    pub fn client(
        cfg: Config,
        tuple: FourTuple,
        secret: [u8; 16],
        base: Instant,
        record_mode: bool,
    ) -> Self {
        let gen = IsnGenerator::new(secret, base);
        let conn = Connection::connect(cfg, tuple, &gen, base);
        Self::with(base, Some(conn), None, record_mode)
    }

    /// Passive open on `tuple.local` through a [`Listener`] (half-open table, SYN cookies).
    pub fn server(
        cfg: Config,
        lcfg: ListenerConfig,
        tuple: FourTuple,
        secret: [u8; 16],
        base: Instant,
        record_mode: bool,
    ) -> Self {
        let gen = IsnGenerator::new(secret, base);
        let l = Listener::new(cfg, lcfg, tuple.local, gen);
        Self::with(base, None, Some(l), record_mode)
    }

    fn with(
        base: Instant,
        conn: Option<Connection>,
        listener: Option<Listener>,
        record_mode: bool,
    ) -> Self {
        SimTransport {
            base,
            conn,
            listener,
            record_mode,
            closed: None,
            close_requested: false,
            dirty: true,
            rx_offset: 0,
            reported_in_order: 0,
            buf: vec![0; 70_000],
            scratch: vec![0; 1 << 16],
        }
    }

    /// The connection, once there is one.
    pub fn connection(&self) -> Option<&Connection> {
        self.conn.as_ref()
    }

    /// The listener (server side).
    pub fn listener(&self) -> Option<&Listener> {
        self.listener.as_ref()
    }

    fn at(&self, now: SimTime) -> Instant {
        now.to_instant(self.base)
    }

    /// Picks up an accepted connection and drains events after every input.
    fn settle(&mut self) {
        if self.conn.is_none() {
            if let Some(c) = self.listener.as_mut().and_then(Listener::accept) {
                self.conn = Some(c);
            }
        }
        let Some(c) = self.conn.as_mut() else { return };
        if self.record_mode && !c.record_mode() && c.state().is_synchronized() {
            c.enter_record_mode();
        }
        if self.close_requested && c.state() == State::Established {
            c.close(self.base);
        }
        while let Some(e) = c.poll_event() {
            if let Event::Closed(r) = e {
                self.closed = Some(r);
            }
        }
    }
}

impl Transport for SimTransport {
    fn handle_packet(&mut self, now: SimTime, packet: &[u8]) {
        let t = self.at(now);
        match self.conn.as_mut() {
            Some(c) => {
                let _ = c.handle_packet(t, packet);
            }
            None => {
                if let Some(l) = self.listener.as_mut() {
                    let _ = l.handle_packet(t, packet);
                }
            }
        }
        self.settle();
    }

    fn poll_transmit(&mut self, now: SimTime) -> Option<Vec<u8>> {
        let t = self.at(now);
        if let Some(c) = self.conn.as_mut() {
            if let Some(n) = c.poll_transmit(t, &mut self.buf) {
                return Some(self.buf[..n].to_vec());
            }
        }
        let sent = self
            .listener
            .as_mut()
            .and_then(|l| l.poll_transmit(t, &mut self.buf));
        if sent.is_none() {
            self.dirty = false;
        }
        Some(self.buf[..sent?].to_vec())
    }

    fn poll_timeout(&mut self, now: SimTime) -> Option<SimTime> {
        if self.dirty {
            return Some(now);
        }
        let a = self.conn.as_ref().and_then(Connection::poll_timeout);
        let b = if self.conn.is_none() {
            self.listener.as_ref().and_then(Listener::poll_timeout)
        } else {
            None
        };
        let t = [a, b].into_iter().flatten().min()?;
        Some(SimTime::from_instant(self.base, t))
    }

    fn handle_timeout(&mut self, now: SimTime) {
        self.settle();
        let t = self.at(now);
        if let Some(c) = self.conn.as_mut() {
            c.handle_timeout(t);
        } else if let Some(l) = self.listener.as_mut() {
            l.handle_timeout(t);
        }
        self.settle();
    }

    fn state(&self) -> ConnState {
        let Some(c) = self.conn.as_ref() else {
            return ConnState::Opening;
        };
        match c.state() {
            State::Listen | State::SynSent | State::SynReceived => ConnState::Opening,
            State::Established => ConnState::Established,
            State::CloseWait => ConnState::PeerClosed,
            State::FinWait1 | State::FinWait2 | State::Closing | State::LastAck => {
                ConnState::Closing
            }
            State::TimeWait => ConnState::TimeWait,
            State::Closed => match self.closed {
                Some(CloseReason::Normal) => ConnState::Closed,
                _ => ConnState::Reset,
            },
        }
    }

    fn send_space(&self) -> usize {
        match self.conn.as_ref() {
            Some(c)
                if matches!(c.state(), State::Established | State::CloseWait)
                    && !self.close_requested =>
            {
                c.send_capacity() as usize
            }
            _ => 0,
        }
    }

    fn send(&mut self, _now: SimTime, data: &[u8]) -> usize {
        self.dirty = true;
        if self.send_space() == 0 {
            return 0;
        }
        let Some(c) = self.conn.as_mut() else {
            return 0;
        };
        if c.record_mode() {
            // Whole records only in record mode.
            return if c.send_record_bytes(data).is_ok() {
                data.len()
            } else {
                0
            };
        }
        c.send(data).unwrap_or(0)
    }

    fn send_record(&mut self, now: SimTime, record: &[u8]) -> bool {
        if self.send_space() < record.len() {
            return false;
        }
        self.settle();
        match self.conn.as_mut() {
            Some(c) if c.record_mode() => c.send_record_bytes(record).is_ok(),
            _ => self.send(now, record) == record.len(),
        }
    }

    fn recv(&mut self, _now: SimTime) -> Option<Delivery> {
        self.dirty = true;
        let c = self.conn.as_mut()?;
        if c.record_mode() {
            if let Some(ch) = c.poll_recv() {
                let end = ch.offset + ch.data.len() as u64;
                let in_order = ch.in_order_point.max(if ch.in_order { end } else { 0 });
                self.reported_in_order = self.reported_in_order.max(in_order);
                return Some(Delivery {
                    offset: ch.offset,
                    data: ch.data,
                    in_order: self.reported_in_order,
                });
            }
            // Everything handed up: move the in-order point on.
            let point = c.rcv_nxt_offset();
            if point > self.reported_in_order {
                self.reported_in_order = point;
                return Some(Delivery {
                    offset: point,
                    data: Vec::new(),
                    in_order: point,
                });
            }
            return None;
        }
        let n = c.recv(&mut self.scratch);
        if n == 0 {
            return None;
        }
        let offset = self.rx_offset;
        self.rx_offset += n as u64;
        self.reported_in_order = self.rx_offset;
        Some(Delivery {
            offset,
            data: self.scratch[..n].to_vec(),
            in_order: self.rx_offset,
        })
    }

    fn close(&mut self, now: SimTime) {
        self.close_requested = true;
        self.dirty = true;
        let t = self.at(now);
        if let Some(c) = self.conn.as_mut() {
            if matches!(c.state(), State::Established | State::CloseWait) {
                c.close(t);
            }
        }
    }

    fn stats(&self) -> TransportStats {
        let Some(c) = self.conn.as_ref() else {
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
