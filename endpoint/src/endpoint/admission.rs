//! Admission: what the endpoint's caps let in, and how it refuses the rest.
//!
//! - A handshake a listener completed becomes a connection only under `max_connections`, under
//!   its listener's backlog (`ListenerConfig::max_accept_queue`: connections whose MPA startup
//!   has not finished, the MPA Request awaiting the application included), and with a next hop
//!   for the peer (learnt from the MAC the handshake completed through). Otherwise it is reset
//!   at once and counted in `connections_refused`: nothing of it is kept.
//! - A connection leaves its listener's backlog when MPA is up or it closes.
//! - Next hops: see `neighbours.rs`; when the table is full, entries of addresses without a live
//!   connection make room, else the entry is refused (`neighbours_refused`).

use std::net::IpAddr;
use std::time::Instant;

use tcp_offload::Connection;

use super::listeners::{ListenerEntry, ListenerId};
use super::rx::PENDING_TX_MAX;
use super::service::frame_out;
use super::Endpoint;
use crate::domain::Domain;
use crate::ethernet::Mac;
use crate::neighbours::Placed;

/// The address of a connection's peer.
pub(crate) fn peer_ip(tcp: &Connection) -> IpAddr {
    tcp.tuple().remote.ip()
}

impl<D: Domain> Endpoint<D> {
    /// Whether listener `li` may hand over the established `tcp`: the connection cap, the
    /// listener's backlog, a next hop for the peer (learnt from `via`, the MAC the handshake
    /// completed through, or the one its SYN came from). Counts a refusal.
    pub(crate) fn admit_passive(&mut self, li: usize, tcp: &Connection, via: Option<Mac>) -> bool {
        let room = self.conns.len() < self.cfg.limits.max_connections
            && self.listeners[li].backlog < self.cfg.listener.max_accept_queue;
        let admitted = room
            && via
                .or_else(|| self.neighbours.reply_hop(peer_ip(tcp)))
                .is_some_and(|mac| self.place_neighbour(peer_ip(tcp), mac, false));
        if !admitted {
            self.counters.connections_refused += 1;
        }
        admitted
    }

    /// Resets `tcp` (a handshake the caps refused): RST to the peer, nothing kept.
    pub(crate) fn refuse(&mut self, now: Instant, mut tcp: Connection) {
        tcp.abort();
        let Some(dst) = self.neighbours.reply_hop(peer_ip(&tcp)) else {
            self.counters.no_neighbour += 1;
            return;
        };
        let mut buf = vec![0u8; 128];
        if let Some(n) = frame_out(&mut buf, self.cfg.mac, dst, |b| tcp.poll_transmit(now, b)) {
            buf.truncate(n);
            if self.pending_tx.len() < PENDING_TX_MAX {
                self.pending_tx.push(buf);
            }
        }
    }

    /// Sets (`set`: the caller's, replacing) or learns the next hop of `ip`, making room in a
    /// full table from addresses without a live connection. False when refused (counted).
    pub(crate) fn place_neighbour(&mut self, ip: IpAddr, mac: Mac, set: bool) -> bool {
        let place = |n: &mut crate::neighbours::Neighbours| {
            if set {
                n.set(ip, mac)
            } else {
                n.learn(ip, mac)
            }
        };
        if place(&mut self.neighbours) == Placed::Yes {
            return true;
        }
        let conns = &self.conns;
        let live: crate::endpoint::FastMap<IpAddr, ()> = conns
            .values()
            .map(|c| peer_ip(&c.tcp))
            .map(|ip| (ip, ()))
            .collect();
        self.neighbours.evict_unused(|a| live.contains_key(a));
        if place(&mut self.neighbours) == Placed::Yes {
            return true;
        }
        self.counters.neighbours_refused += 1;
        false
    }
}

/// A connection of listener `l` leaves its backlog (MPA is up, or it closed).
pub(crate) fn leave_backlog(listeners: &mut [ListenerEntry], l: ListenerId) {
    if let Some(l) = listeners.get_mut(l.0 as usize) {
        l.backlog = l.backlog.saturating_sub(1);
    }
}
