//! Admission: what the endpoint's caps let in, and how it refuses the rest.
//!
//! - A handshake a listener completed becomes a connection only under `max_connections`, with
//!   a place in its listener's backlog (`ListenerConfig::max_accept_queue`: connections whose
//!   MPA startup has not finished, the MPA Request awaiting the application included), and
//!   with a next hop for the peer (learnt from the MAC the handshake completed through).
//!   Otherwise it is reset at once and counted in `connections_refused`: nothing of it is kept.
//! - The backlog is shared fairly among sources ([`crate::FairBacklog`], the share
//!   `EndpointLimits::backlog_share`): a source holding its share is refused
//!   (`backlog_share_refused`); in a full backlog, the oldest connection of the source holding
//!   the most is reset to make room for a source holding fewer (`backlog_evictions`).
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
use crate::fair_backlog::{BacklogRefusal, PendingSlot};
use crate::neighbours::Placed;

/// The address of a connection's peer.
pub(crate) fn peer_ip(tcp: &Connection) -> IpAddr {
    tcp.tuple().remote.ip()
}

/// A connection's place in its listener's backlog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BacklogSlot {
    pub(crate) listener: ListenerId,
    pub(crate) slot: PendingSlot,
}

/// What admission gave a handshake a listener completed.
pub(crate) enum Admission {
    /// Reset (counted).
    Refused,
    /// A plain-stream connection: no MPA startup, no backlog.
    Stream,
    /// An iWARP connection, with its place in the backlog.
    Pending(BacklogSlot),
}

impl<D: Domain> Endpoint<D> {
    /// Whether listener `li` may hand over the established `tcp`: the connection cap, a place
    /// in the listener's backlog for its source (a connection of the source holding the most
    /// may be reset to make it), a next hop for the peer (learnt from `via`, the MAC the
    /// handshake completed through, or the one its SYN came from). Counts a refusal. The place
    /// is taken for the connection [`Endpoint::add_conn`] makes next.
    pub(crate) fn admit_passive(
        &mut self,
        li: usize,
        tcp: &Connection,
        via: Option<Mac>,
    ) -> Admission {
        let peer = peer_ip(tcp);
        let stream = self.listeners[li].is_stream();
        let mut room = self.conns.len() < self.cfg.limits.max_connections;
        if room && !stream {
            if let Err(why) = self.listeners[li].backlog.check(peer) {
                if why == BacklogRefusal::SourceShare {
                    self.counters.backlog_share_refused += 1;
                }
                room = false;
            }
        }
        let admitted = room
            && via
                .or_else(|| self.neighbours.reply_hop(peer))
                .is_some_and(|mac| self.place_neighbour(peer, mac, false));
        if !admitted {
            self.counters.connections_refused += 1;
            return Admission::Refused;
        }
        if stream {
            return Admission::Stream;
        }
        // (The connection is added right after: the backlog knows it by the id it will get.)
        let id = self.conns.next_id();
        match self.listeners[li].backlog.admit(id, peer) {
            Ok(a) => {
                if let Some(victim) = a.evicted {
                    self.evict_pending(victim);
                }
                Admission::Pending(BacklogSlot {
                    listener: ListenerId(li as u32),
                    slot: a.slot,
                })
            }
            Err(_) => {
                // (`check` just said yes, and nothing changed the backlog since.)
                self.counters.internal_errors += 1;
                self.counters.connections_refused += 1;
                Admission::Refused
            }
        }
    }

    /// Resets connection `id`, evicted from a full backlog (its place is gone already); its
    /// round sends the RST and removes it.
    fn evict_pending(&mut self, id: u64) {
        self.counters.backlog_evictions += 1;
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        c.forget_backlog();
        c.abort();
        c.closing.begin();
        c.mark(id, &mut self.dirty);
    }

    /// Resets `tcp` (a handshake the caps refused): RST to the peer, nothing kept.
    pub(crate) fn refuse(&mut self, now: Instant, mut tcp: Connection) {
        tcp.abort();
        let Some(dst) = self.neighbours.reply_hop(peer_ip(&tcp)) else {
            self.counters.no_neighbour += 1;
            return;
        };
        let mut buf = vec![0u8; 128];
        let ts = self.clock.stamp_of(now);
        if let Some(n) = frame_out(&mut buf, self.cfg.mac, dst, |b| tcp.poll_transmit(ts, b)) {
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

/// A connection leaves its place `b` in its listener's backlog (MPA is up, or it closed).
pub(crate) fn leave_backlog(listeners: &mut [ListenerEntry], b: BacklogSlot) {
    if let Some(l) = listeners.get_mut(b.listener.0 as usize) {
        l.backlog.remove(b.slot);
    }
}
