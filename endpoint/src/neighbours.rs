//! Next-hop MACs by IPv4 address. The policy: an address the caller set (from the kernel's
//! neighbour table) wins; a SYN's source MAC is learnt for a peer nobody set; anything else
//! goes to the default next hop (a gateway), if any.

use std::net::Ipv4Addr;

use crate::endpoint::FastMap;
use crate::ethernet::Mac;

/// The endpoint's neighbour table.
#[derive(Debug)]
pub(crate) struct Neighbours {
    table: FastMap<Ipv4Addr, Mac>,
    default: Option<Mac>,
}

impl Neighbours {
    /// An empty table with `default` for unknown addresses.
    pub(crate) fn new(default: Option<Mac>) -> Self {
        Neighbours {
            table: FastMap::default(),
            default,
        }
    }

    /// Sets the next hop of `ip` (replacing what was there).
    pub(crate) fn insert(&mut self, ip: Ipv4Addr, mac: Mac) {
        self.table.insert(ip, mac);
    }

    /// Learns `mac` as the next hop back to `ip` (a SYN's source: the peer, or the router it
    /// came through) unless `ip` has one already.
    pub(crate) fn learn(&mut self, ip: Ipv4Addr, mac: Mac) {
        self.table.entry(ip).or_insert(mac);
    }

    /// The next hop towards `ip`: its entry, else the default.
    pub(crate) fn next_hop(&self, ip: Ipv4Addr) -> Option<Mac> {
        self.table.get(&ip).copied().or(self.default)
    }
}
