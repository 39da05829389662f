//! A listener's backlog shared fairly among its sources: connections whose MPA startup has not
//! finished, counted per source (an address, or an IPv6 prefix: [`SourcePrefix`]). No source
//! holds more than its share; when the backlog is full, the oldest pending connection of the
//! source holding the most gives way to a connection from a source holding fewer. So one
//! source can never hold the backlog, and a flood from many sources cannot keep a new source
//! out.
//!
//! Sans-IO and transport-neutral: the endpoint's listeners (xdp transport) and the kernel
//! transport's acceptor both decide with it; each resets what it is told to evict.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// How many leading bits of a peer's address name its source: 32 for IPv4 (one address) and
/// 64 for IPv6 (one /64, what one host or site is usually given) by default. An IPv4-mapped
/// IPv6 peer counts as its IPv4 address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourcePrefix {
    /// Prefix length of an IPv4 source, 0 to 32 (larger values count as 32).
    pub v4: u8,
    /// Prefix length of an IPv6 source, 0 to 128 (larger values count as 128).
    pub v6: u8,
}

impl Default for SourcePrefix {
    fn default() -> Self {
        SourcePrefix { v4: 32, v6: 64 }
    }
}

impl SourcePrefix {
    /// The source `ip` belongs to: its address with the bits past the prefix cleared.
    pub fn key(&self, ip: IpAddr) -> SourceKey {
        let masked = match ip.to_canonical() {
            IpAddr::V4(a) => {
                let keep = u32::MAX.checked_shl(32 - u32::from(self.v4.min(32)));
                IpAddr::V4(Ipv4Addr::from_bits(a.to_bits() & keep.unwrap_or(0)))
            }
            IpAddr::V6(a) => {
                let keep = u128::MAX.checked_shl(128 - u32::from(self.v6.min(128)));
                IpAddr::V6(Ipv6Addr::from_bits(a.to_bits() & keep.unwrap_or(0)))
            }
        };
        SourceKey(masked)
    }
}

/// One source of connections: an address, or the prefix it lies in ([`SourcePrefix::key`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SourceKey(pub IpAddr);

impl std::fmt::Display for SourceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A source's share of something capped (a listener's backlog, a service's connections): at
/// most `per_source` of it per source, sources named by `prefix`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceShare {
    /// Most entries one source may hold (0 counts as 1).
    pub per_source: usize,
    /// What counts as one source.
    pub prefix: SourcePrefix,
}

impl Default for SourceShare {
    /// 64 per source: a quarter of the default backlog (256).
    fn default() -> Self {
        SourceShare {
            per_source: 64,
            prefix: SourcePrefix::default(),
        }
    }
}

/// A pending connection's place in a [`FairBacklog`], to leave it with
/// [`FairBacklog::remove`]. Places are never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PendingSlot(u64);

/// Why a [`FairBacklog`] refused a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BacklogRefusal {
    /// Its source already holds its share.
    SourceShare,
    /// The backlog is full and no source holds more than the connection's own.
    Full,
}

/// A connection a [`FairBacklog`] took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Admitted {
    /// Its place.
    pub slot: PendingSlot,
    /// The caller's id of the connection that left to make room (the oldest of the source
    /// holding the most): the caller resets it. Its place is already gone.
    pub evicted: Option<u64>,
}

/// A listener's backlog of pending connections, fair among sources. Every operation costs
/// O(log n) in the connections held; memory is bounded by the capacity.
#[derive(Clone, Debug)]
pub struct FairBacklog {
    capacity: usize,
    share: SourceShare,
    /// Every pending connection by place (places count up: the smallest is the oldest), with
    /// its source and the caller's id.
    by_slot: BTreeMap<PendingSlot, (SourceKey, u64)>,
    /// Each source's places, oldest first (only sources holding one or more).
    sources: BTreeMap<SourceKey, BTreeSet<PendingSlot>>,
    /// Sources ranked: most held, then the oldest connection, last.
    ranking: BTreeSet<(usize, Reverse<PendingSlot>, SourceKey)>,
    next: u64,
}

impl FairBacklog {
    /// An empty backlog of `capacity` connections (at least 1), `share` of it per source.
    pub fn new(capacity: usize, share: SourceShare) -> Self {
        FairBacklog {
            capacity: capacity.max(1),
            share,
            by_slot: BTreeMap::new(),
            sources: BTreeMap::new(),
            ranking: BTreeSet::new(),
            next: 0,
        }
    }

    /// Pending connections held.
    pub fn len(&self) -> usize {
        self.by_slot.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.by_slot.is_empty()
    }

    /// The most it holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Pending connections held from the source of `peer`.
    pub fn held_by(&self, peer: IpAddr) -> usize {
        self.sources
            .get(&self.share.prefix.key(peer))
            .map_or(0, BTreeSet::len)
    }

    /// Sources holding one or more.
    pub fn source_count(&self) -> usize {
        self.sources.len()
    }

    /// What [`admit`](Self::admit) would do with a connection from `peer`, changing nothing:
    /// `Ok(None)` there is room, `Ok(Some(id))` the connection `id` would make room.
    pub fn check(&self, peer: IpAddr) -> Result<Option<u64>, BacklogRefusal> {
        Ok(self
            .decide(self.share.prefix.key(peer))?
            .map(|s| self.by_slot[&s].1))
    }

    /// Takes the connection `id` (the caller's name for it) from `peer`, or says why not. At
    /// its share, a source is refused; in a full backlog, the oldest connection of the source
    /// holding the most (ties: the one whose oldest is oldest) leaves for it if that source
    /// holds more than the new one's, else the new one is refused.
    pub fn admit(&mut self, id: u64, peer: IpAddr) -> Result<Admitted, BacklogRefusal> {
        let key = self.share.prefix.key(peer);
        let victim = self.decide(key)?;
        let evicted = victim.and_then(|s| self.remove(s));
        let slot = PendingSlot(self.next);
        self.next += 1;
        self.by_slot.insert(slot, (key, id));
        self.rerank(key, |set| {
            set.insert(slot);
        });
        Ok(Admitted { slot, evicted })
    }

    /// The connection at `slot` leaves (MPA is up, it closed, or the application took it);
    /// returns its id, or `None` when it had left already (evicted).
    pub fn remove(&mut self, slot: PendingSlot) -> Option<u64> {
        let (key, id) = self.by_slot.remove(&slot)?;
        self.rerank(key, |set| {
            set.remove(&slot);
        });
        Some(id)
    }

    /// Refusal, room, or the place to free for a connection from `key`.
    fn decide(&self, key: SourceKey) -> Result<Option<PendingSlot>, BacklogRefusal> {
        let held = self.sources.get(&key).map_or(0, BTreeSet::len);
        if held >= self.share.per_source.max(1) {
            return Err(BacklogRefusal::SourceShare);
        }
        if self.len() < self.capacity {
            return Ok(None);
        }
        match self.ranking.last() {
            Some(&(most, Reverse(oldest), _)) if most > held => Ok(Some(oldest)),
            _ => Err(BacklogRefusal::Full),
        }
    }

    /// Changes `key`'s places with `f`, keeping its rank (a source holding none is dropped).
    fn rerank(&mut self, key: SourceKey, f: impl FnOnce(&mut BTreeSet<PendingSlot>)) {
        let set = self.sources.entry(key).or_default();
        if let Some(&oldest) = set.first() {
            self.ranking.remove(&(set.len(), Reverse(oldest), key));
        }
        f(set);
        match set.first() {
            Some(&oldest) => {
                self.ranking.insert((set.len(), Reverse(oldest), key));
            }
            None => {
                self.sources.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn share(per_source: usize) -> SourceShare {
        SourceShare {
            per_source,
            prefix: SourcePrefix::default(),
        }
    }

    #[test]
    fn sources_are_addresses_for_ipv4_and_slash_64s_for_ipv6_by_default() {
        let p = SourcePrefix::default();
        assert_eq!(p.key(ip("198.18.0.3")), SourceKey(ip("198.18.0.3")));
        assert_eq!(
            p.key(ip("2001:db8:0:7::1")),
            p.key(ip("2001:db8:0:7:ffff::9"))
        );
        assert_ne!(p.key(ip("2001:db8:0:7::1")), p.key(ip("2001:db8:0:8::1")));
        assert_eq!(
            p.key(ip("::ffff:198.18.0.3")),
            p.key(ip("198.18.0.3")),
            "an IPv4-mapped peer is its IPv4 address"
        );
        let wide = SourcePrefix { v4: 24, v6: 48 };
        assert_eq!(wide.key(ip("198.18.0.77")), SourceKey(ip("198.18.0.0")));
        assert_eq!(
            wide.key(ip("2001:db8:1:2::3")),
            SourceKey(ip("2001:db8:1::"))
        );
        let odd = SourcePrefix { v4: 0, v6: 200 };
        assert_eq!(odd.key(ip("198.18.0.77")), SourceKey(ip("0.0.0.0")));
        assert_eq!(odd.key(ip("2001:db8::3")), SourceKey(ip("2001:db8::3")));
    }

    #[test]
    fn a_source_at_its_share_is_refused_and_others_still_get_in() {
        let mut b = FairBacklog::new(8, share(3));
        for id in 0..3 {
            b.admit(id, ip("198.18.0.3")).unwrap();
        }
        assert_eq!(
            b.admit(3, ip("198.18.0.3")),
            Err(BacklogRefusal::SourceShare)
        );
        assert_eq!(b.check(ip("198.18.0.3")), Err(BacklogRefusal::SourceShare));
        assert_eq!(b.check(ip("198.18.0.2")), Ok(None));
        let a = b.admit(10, ip("198.18.0.2")).unwrap();
        assert_eq!(a.evicted, None);
        assert_eq!((b.len(), b.held_by(ip("198.18.0.3"))), (4, 3));
    }

    #[test]
    fn ipv6_peers_of_one_slash_64_share_one_source() {
        let mut b = FairBacklog::new(8, share(2));
        b.admit(0, ip("2001:db8::1")).unwrap();
        b.admit(1, ip("2001:db8::ffff:2")).unwrap();
        assert_eq!(
            b.admit(2, ip("2001:db8::3")),
            Err(BacklogRefusal::SourceShare),
            "a third address of the same /64"
        );
        assert!(b.admit(3, ip("2001:db8:0:1::3")).is_ok(), "another /64");
    }

    /// When full, the oldest connection of the source holding the most leaves for a source
    /// holding fewer; ties between sources go to the one whose oldest is oldest.
    #[test]
    fn a_full_backlog_evicts_the_oldest_of_the_source_holding_the_most() {
        let mut b = FairBacklog::new(6, share(6));
        let (c, d, e) = (ip("198.18.0.3"), ip("198.18.0.4"), ip("198.18.0.5"));
        // c: 10, 11, 12, 13; d: 20, 21 (interleaved: 20 is older than 12).
        for (id, peer) in [(10, c), (11, c), (20, d), (12, c), (21, d), (13, c)] {
            assert_eq!(b.admit(id, peer).unwrap().evicted, None);
        }
        assert_eq!(b.check(e), Ok(Some(10)));
        assert_eq!(b.admit(30, e).unwrap().evicted, Some(10), "c's oldest");
        assert_eq!(b.admit(31, e).unwrap().evicted, Some(11));
        // c and d hold 2 each, e 2: none holds more than e.
        assert_eq!(b.admit(32, e), Err(BacklogRefusal::Full));
        // A new source: c and d tie at 2; d's oldest (20) is older than c's (12).
        assert_eq!(b.admit(40, ip("198.18.0.6")).unwrap().evicted, Some(20));
        assert_eq!(b.len(), 6);
        assert_eq!(b.source_count(), 4);
    }

    #[test]
    fn the_newest_source_is_refused_rather_than_evicting_itself() {
        let mut b = FairBacklog::new(2, share(2));
        b.admit(0, ip("198.18.0.3")).unwrap();
        b.admit(1, ip("198.18.0.3")).unwrap();
        assert_eq!(
            b.admit(2, ip("198.18.0.3")),
            Err(BacklogRefusal::SourceShare)
        );
        let mut b = FairBacklog::new(2, share(4));
        b.admit(0, ip("198.18.0.3")).unwrap();
        b.admit(1, ip("198.18.0.3")).unwrap();
        assert_eq!(b.admit(2, ip("198.18.0.3")), Err(BacklogRefusal::Full));
    }

    #[test]
    fn removal_frees_the_place_and_an_evicted_place_is_gone() {
        let mut b = FairBacklog::new(2, share(2));
        let first = b.admit(0, ip("198.18.0.3")).unwrap().slot;
        let second = b.admit(1, ip("198.18.0.3")).unwrap().slot;
        let new = b.admit(2, ip("198.18.0.2")).unwrap();
        assert_eq!(new.evicted, Some(0));
        assert_eq!(b.remove(first), None, "evicted already");
        assert_eq!(b.remove(second), Some(1));
        assert_eq!(b.remove(new.slot), Some(2));
        assert!(b.is_empty());
        assert_eq!(b.source_count(), 0, "no source is kept once it holds none");
        assert!(b.ranking.is_empty());
    }

    /// The ranking always names the source holding the most: checked against a plain count
    /// over a fixed-seed sequence of admissions and removals.
    #[test]
    fn the_ranking_matches_a_plain_count() {
        let mut b = FairBacklog::new(16, share(5));
        let mut held: Vec<(PendingSlot, IpAddr)> = Vec::new();
        let mut seen = [0usize; 3];
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for id in 0..5_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let peer = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1 + (x % 7) as u8));
            if x.is_multiple_of(3) && !held.is_empty() {
                let (s, _) = held.remove((x as usize / 3) % held.len());
                assert!(b.remove(s).is_some());
                continue;
            }
            let count =
                |p: IpAddr, h: &[(PendingSlot, IpAddr)]| h.iter().filter(|(_, q)| *q == p).count();
            let before = held.clone();
            match b.admit(id, peer) {
                Ok(a) => {
                    if let Some(v) = a.evicted {
                        seen[0] += 1;
                        let most = before.iter().map(|(_, p)| count(*p, &before)).max();
                        let at = before.iter().position(|(s, _)| !b.by_slot.contains_key(s));
                        let (_, vp) = before[at.expect("the victim was held")];
                        assert_eq!(Some(count(vp, &before)), most, "evicted {v}");
                        assert!(count(vp, &before) > count(peer, &before));
                        held.remove(at.unwrap());
                    }
                    held.push((a.slot, peer));
                }
                Err(BacklogRefusal::SourceShare) => {
                    seen[1] += 1;
                    assert_eq!(count(peer, &before), 5)
                }
                Err(BacklogRefusal::Full) => {
                    seen[2] += 1;
                    assert_eq!(before.len(), 16);
                    let most = before.iter().map(|(_, p)| count(*p, &before)).max();
                    assert_eq!(most, Some(count(peer, &before)));
                }
            }
            assert_eq!(b.len(), held.len());
            assert!(b.len() <= 16);
        }
        assert!(
            seen.iter().all(|&n| n > 0),
            "evictions, share and full refusals: {seen:?}"
        );
    }
}
