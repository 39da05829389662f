//! Next-hop MACs by IP address (IPv4 or IPv6), bounded, and whom to trust for them.
//!
//! The policy:
//! - The table holds next hops the caller set (from the kernel's neighbour table, which ARP and
//!   IPv6 Neighbour Discovery (RFC 4861) fill: those frames are the kernel's, see `classify`;
//!   the source for active opens) and next hops learnt from *established* flows (the MAC a handshake was
//!   completed through). A caller's entry replaces what was there; a learnt one never replaces
//!   an existing entry.
//! - A SYN's source MAC is unverified (anyone can send a SYN claiming any address): it is kept
//!   apart, in a small first-in-first-out list, and used only to answer that SYN (SYN-ACK,
//!   cookie, RST) when the table has no entry for the address. It never enters the table on
//!   its own and never overrides an entry.
//! - Anything else goes to the default next hop (a gateway), if any.
//!
//! Both parts are bounded. When the table is full, entries for addresses with no live
//! connection are dropped ([`Neighbours::evict_unused`]); with the table at least twice the
//! connection cap, that always frees room, so the sweep costs O(1) per insertion amortised.
//! If it cannot, the new entry is refused and counted by the caller.

use std::collections::VecDeque;
use std::net::IpAddr;

use crate::endpoint::FastMap;
use crate::ethernet::Mac;

/// The endpoint's neighbour table.
#[derive(Debug)]
pub(crate) struct Neighbours {
    table: FastMap<IpAddr, Mac>,
    capacity: usize,
    /// Unverified SYN sources: address -> (MAC, the sequence number of its newest note).
    syn_sources: FastMap<IpAddr, (Mac, u64)>,
    /// Notes in arrival order, for first-in-first-out eviction (stale ones skipped).
    syn_order: VecDeque<(IpAddr, u64)>,
    syn_capacity: usize,
    syn_seq: u64,
    default: Option<Mac>,
    /// Moves with every change of the table: a next hop looked up at another generation may
    /// be stale ([`Self::generation`]).
    generation: u64,
}

/// Whether an entry could be placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placed {
    /// The address has an entry now (new, replaced, or kept).
    Yes,
    /// The table is full: make room ([`Neighbours::evict_unused`]) and try again, or refuse.
    Full,
}

impl Neighbours {
    /// An empty table of `capacity` entries and `syn_capacity` SYN sources, with `default` for
    /// unknown addresses.
    pub(crate) fn new(default: Option<Mac>, capacity: usize, syn_capacity: usize) -> Self {
        Neighbours {
            table: FastMap::default(),
            capacity: capacity.max(1),
            syn_sources: FastMap::default(),
            syn_order: VecDeque::new(),
            syn_capacity: syn_capacity.max(1),
            syn_seq: 0,
            default,
            generation: 0,
        }
    }

    /// Entries in the table.
    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// SYN sources remembered.
    pub(crate) fn syn_sources_len(&self) -> usize {
        self.syn_sources.len()
    }

    /// Sets the next hop of `ip` (the caller's, from the kernel's table), replacing what was
    /// there.
    pub(crate) fn set(&mut self, ip: IpAddr, mac: Mac) -> Placed {
        if !self.table.contains_key(&ip) && self.table.len() >= self.capacity {
            return Placed::Full;
        }
        self.table.insert(ip, mac);
        self.generation += 1;
        Placed::Yes
    }

    /// Learns `mac` as the next hop of `ip` from an established flow, unless `ip` has an entry
    /// already (which stays).
    pub(crate) fn learn(&mut self, ip: IpAddr, mac: Mac) -> Placed {
        if self.table.contains_key(&ip) {
            return Placed::Yes;
        }
        self.set(ip, mac)
    }

    /// Remembers the source MAC of a SYN from `ip` (unverified; for replies to it only).
    pub(crate) fn note_syn(&mut self, ip: IpAddr, mac: Mac) {
        self.syn_seq += 1;
        self.syn_sources.insert(ip, (mac, self.syn_seq));
        self.syn_order.push_back((ip, self.syn_seq));
        while self.syn_order.len() > self.syn_capacity {
            let Some((old, seq)) = self.syn_order.pop_front() else {
                break;
            };
            if self.syn_sources.get(&old).is_some_and(|e| e.1 == seq) {
                self.syn_sources.remove(&old);
            }
        }
    }

    /// Forgets every SYN source (no reply can need one), giving their memory back.
    pub(crate) fn forget_syn_sources(&mut self) {
        self.syn_sources = FastMap::default();
        self.syn_order = VecDeque::new();
    }

    /// Drops the entries whose address `in_use` does not name; returns how many.
    pub(crate) fn evict_unused(&mut self, in_use: impl Fn(&IpAddr) -> bool) -> usize {
        let before = self.table.len();
        self.table.retain(|ip, _| in_use(ip));
        let evicted = before - self.table.len();
        if evicted > 0 {
            self.generation += 1;
        }
        evicted
    }

    /// The table's generation: while it is the same, [`Self::next_hop`] gives the same answer
    /// for every address (a connection keeps its next hop with the generation it was looked up
    /// at instead of looking it up for every frame).
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// The next hop of an established flow to `ip`: its entry, else the default.
    pub(crate) fn next_hop(&self, ip: IpAddr) -> Option<Mac> {
        self.table.get(&ip).copied().or(self.default)
    }

    /// The next hop for a listener's reply to `ip` (SYN-ACK, cookie, RST): its entry, else the
    /// source of its SYN, else the default.
    pub(crate) fn reply_hop(&self, ip: IpAddr) -> Option<Mac> {
        self.table
            .get(&ip)
            .copied()
            .or_else(|| self.syn_sources.get(&ip).map(|e| e.0))
            .or(self.default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Mac = [2, 0, 0, 0, 0, 0xa];
    const B: Mac = [2, 0, 0, 0, 0, 0xb];

    fn ip(i: u32) -> IpAddr {
        std::net::Ipv4Addr::from(0xc612_0000 + i).into()
    }

    #[test]
    fn a_syn_neither_adds_nor_overrides_an_entry() {
        let mut n = Neighbours::new(None, 8, 8);
        assert_eq!(n.set(ip(1), A), Placed::Yes);
        n.note_syn(ip(1), B);
        n.note_syn(ip(2), B);
        assert_eq!(n.len(), 1, "SYNs do not enter the table");
        assert_eq!(n.next_hop(ip(1)), Some(A));
        assert_eq!(
            n.reply_hop(ip(1)),
            Some(A),
            "the entry wins over a SYN's claim"
        );
        assert_eq!(
            n.next_hop(ip(2)),
            None,
            "an established flow needs a verified hop"
        );
        assert_eq!(
            n.reply_hop(ip(2)),
            Some(B),
            "the SYN is answered where it came from"
        );
    }

    #[test]
    fn learning_keeps_an_existing_entry_and_setting_replaces_it() {
        let mut n = Neighbours::new(None, 8, 8);
        n.learn(ip(1), A);
        n.learn(ip(1), B);
        assert_eq!(n.next_hop(ip(1)), Some(A));
        n.set(ip(1), B);
        assert_eq!(n.next_hop(ip(1)), Some(B));
    }

    /// A next hop kept with the generation it was looked up at is stale exactly when the
    /// generation moved: every change of an entry moves it, SYN notes and kept entries do not.
    #[test]
    fn the_generation_moves_with_every_change_of_an_entry() {
        let mut n = Neighbours::new(Some(B), 8, 8);
        let g0 = n.generation();
        n.note_syn(ip(1), A);
        n.learn(ip(1), A);
        let g1 = n.generation();
        assert_ne!(g1, g0, "a new entry");
        n.learn(ip(1), B);
        assert_eq!(n.generation(), g1, "an entry kept");
        n.set(ip(1), B);
        let g2 = n.generation();
        assert_ne!(g2, g1, "an entry replaced");
        assert_eq!(n.evict_unused(|a| *a == ip(1)), 0);
        assert_eq!(n.generation(), g2, "nothing evicted");
        assert_eq!(n.evict_unused(|_| false), 1);
        assert_ne!(n.generation(), g2, "an entry evicted");
        assert_eq!(n.next_hop(ip(1)), Some(B), "the default again");
    }

    #[test]
    fn both_parts_are_bounded() {
        let mut n = Neighbours::new(Some(B), 4, 16);
        for i in 0..100_000 {
            n.note_syn(ip(i), A);
        }
        assert_eq!(n.syn_sources_len(), 16);
        assert_eq!(n.reply_hop(ip(99_999)), Some(A), "the newest are kept");
        assert_eq!(n.reply_hop(ip(0)), Some(B), "the oldest are gone");
        for i in 0..4 {
            assert_eq!(n.learn(ip(i), A), Placed::Yes);
        }
        assert_eq!(n.learn(ip(9), A), Placed::Full);
        assert_eq!(n.set(ip(9), A), Placed::Full);
        assert_eq!(n.set(ip(3), B), Placed::Yes, "replacing needs no room");
        assert_eq!(n.evict_unused(|a| *a == ip(0)), 3);
        assert_eq!(n.learn(ip(9), A), Placed::Yes);
        assert_eq!(n.len(), 2);
    }

    #[test]
    fn a_renewed_syn_source_survives_the_eviction_of_its_older_note() {
        let mut n = Neighbours::new(None, 4, 3);
        n.note_syn(ip(1), A);
        n.note_syn(ip(2), A);
        n.note_syn(ip(1), B);
        n.note_syn(ip(3), A);
        // ip(1)'s first note left; its renewal stays.
        assert_eq!(n.reply_hop(ip(1)), Some(B));
    }
}
