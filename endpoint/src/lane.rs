//! Lanes: which of a host's N queues (one endpoint each) owns a TCP flow.
//!
//! A multi-queue host runs one endpoint per receive queue. Every lane must agree on the owner
//! of a flow without sharing a table, and so must the peer when it runs lanes too: the owner is
//! a hash of the two (address, port) ends that does not depend on their order ([`Lane::of`]).
//! A lane's active opens take local ports whose flow it owns ([`Lane::owns`]); a segment that
//! arrives on another lane's queue (a NIC's RSS or a kernel peer's transmit queue decided where
//! it went) is handed to its owner by the caller ([`crate::flow_of`], beside `classify`, reads
//! the ends from a frame).
//! Two hosts with the same lane count, each transmitting a flow on its owner's queue, meet on
//! the same lane at both ends (veth: a packet arrives on the queue it was sent from).
//!
//! On a NIC whose RSS key and indirection table are known ([`crate::RssLanes`]), lanes follow
//! the NIC instead ([`Lane::following`]): a flow's owner is the lane of the queue its packets
//! arrive on, so active opens pick ports whose packets the NIC delivers to the opening lane
//! and nothing needs a hand-off.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use tcp_offload::FourTuple;

use crate::RssLanes;

/// One lane of `count`: `index` in `0..count`, owning flows by the symmetric hash or by the
/// NIC's RSS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lane {
    index: u16,
    count: u16,
    rss: Option<Arc<RssLanes>>,
}

impl Default for Lane {
    fn default() -> Self {
        Lane::ONLY
    }
}

impl Lane {
    /// The single lane of a one-queue host: owns every flow.
    pub const ONLY: Lane = Lane {
        index: 0,
        count: 1,
        rss: None,
    };

    /// Lane `index` of `count`, owning flows by the symmetric hash; `None` unless
    /// `index < count`.
    pub fn new(index: u16, count: u16) -> Option<Lane> {
        (index < count).then_some(Lane {
            index,
            count,
            rss: None,
        })
    }

    /// The same lane, owning the flows whose packets `rss` delivers to its queue.
    pub fn following(self, rss: Arc<RssLanes>) -> Lane {
        Lane {
            rss: Some(rss),
            ..self
        }
    }

    /// The NIC's RSS the lanes follow, if they do.
    pub fn rss(&self) -> Option<&RssLanes> {
        self.rss.as_deref()
    }

    /// Its index.
    pub fn index(&self) -> u16 {
        self.index
    }

    /// How many lanes there are.
    pub fn count(&self) -> u16 {
        self.count
    }

    /// The lane of `count` that owns the flow between `a` and `b`, in either order, by the
    /// symmetric hash.
    pub fn of(a: SocketAddr, b: SocketAddr, count: u16) -> u16 {
        if count <= 1 {
            return 0;
        }
        let h = mix(end_key(a)) ^ mix(end_key(b));
        ((h >> 32) % u64::from(count)) as u16
    }

    /// The lane of this lane's set that owns the flow of `local` with `remote`: the lane of
    /// the queue the NIC delivers its packets to when the lanes follow RSS (`None` when no
    /// lane serves that queue), the symmetric hash's otherwise.
    pub fn owner(&self, local: SocketAddr, remote: SocketAddr) -> Option<u16> {
        if self.count <= 1 {
            return Some(0);
        }
        match &self.rss {
            Some(rss) => rss.lane_of(local, remote, self.count),
            None => Some(Lane::of(local, remote, self.count)),
        }
    }

    /// Whether this lane owns `tuple`.
    pub fn owns(&self, tuple: &FourTuple) -> bool {
        self.owner(tuple.local, tuple.remote) == Some(self.index)
    }
}

/// One end folded into 64 bits: the address's octets and the port.
fn end_key(a: SocketAddr) -> u64 {
    let ip = match a.ip() {
        IpAddr::V4(v4) => u64::from(u32::from(v4)),
        IpAddr::V6(v6) => {
            let x = u128::from(v6);
            (x as u64) ^ ((x >> 64) as u64).rotate_left(17)
        }
    };
    ip.rotate_left(16) ^ u64::from(a.port())
}

/// A 64-bit finaliser (splitmix64's): every input bit moves the high bits.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn both_ends_agree_on_the_owner() {
        for p in 40000..40100 {
            let (a, b) = (sa(&format!("198.18.0.1:{p}")), sa("198.18.0.2:4791"));
            assert_eq!(Lane::of(a, b, 4), Lane::of(b, a, 4));
            assert!(Lane::of(a, b, 4) < 4);
            assert_eq!(Lane::of(a, b, 1), 0);
        }
        let (a, b) = (sa("[2001:db8::1]:40000"), sa("[2001:db8::2]:4791"));
        assert_eq!(Lane::of(a, b, 3), Lane::of(b, a, 3));
    }

    #[test]
    fn consecutive_ports_spread_over_the_lanes() {
        let mut per_lane = [0u32; 2];
        for p in 40000..41000 {
            let a = sa(&format!("198.18.0.1:{p}"));
            per_lane[usize::from(Lane::of(a, sa("198.18.0.2:4791"), 2))] += 1;
        }
        // An even split would be 500 each; a hash that ignored the port would give 1000 / 0.
        assert!(
            per_lane.iter().all(|&n| (400..=600).contains(&n)),
            "{per_lane:?}"
        );
    }

    #[test]
    fn a_lane_owns_what_the_hash_gives_it() {
        let t = FourTuple {
            local: sa("198.18.0.1:40001"),
            remote: sa("198.18.0.2:4791"),
        };
        let owner = Lane::of(t.local, t.remote, 2);
        assert!(Lane::new(owner, 2).unwrap().owns(&t));
        assert!(!Lane::new(1 - owner, 2).unwrap().owns(&t));
        assert!(Lane::ONLY.owns(&t));
        assert_eq!(Lane::new(2, 2), None);
    }

    #[test]
    fn an_endpoint_on_a_lane_opens_only_flows_it_owns() {
        let ip: IpAddr = "198.18.0.1".parse().unwrap();
        let remote = sa("198.18.0.2:4791");
        let secrets = crate::Secrets::from_random([7; 24]);
        let mut ports = Vec::new();
        for lane in [Lane::new(0, 2).unwrap(), Lane::new(1, 2).unwrap()] {
            let mut cfg = crate::EndpointConfig::new([2, 0, 0, 0, 0, 1], ip, secrets.clone());
            cfg.local_ports = 40000..=40031;
            cfg.lane = lane.clone();
            let mut ep: crate::Endpoint<crate::NoDomain> =
                crate::Endpoint::new(cfg, std::time::Instant::now()).expect("valid configuration");
            let mine: Vec<u16> = (0..8)
                .map(|_| ep.active_tuple(remote).unwrap())
                .inspect(|t| assert!(lane.owns(t), "{lane:?} took {t:?}"))
                .map(|t| t.local.port())
                .collect();
            ports.push(mine);
        }
        // Each lane took ports of its own; together they are different ports of the range.
        assert!(ports[0].iter().all(|p| !ports[1].contains(p)), "{ports:?}");
    }

    /// Lanes on queues 4 and 5 of a NIC whose table spreads flows over queues 4, 5 and 6.
    fn rss_lanes() -> Arc<RssLanes> {
        let key: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
        let table = (0..128).map(|i| 4 + i % 3).collect();
        Arc::new(RssLanes {
            hash: crate::RssHash::new(key, table).unwrap(),
            first_queue: 4,
        })
    }

    #[test]
    fn lanes_following_rss_own_what_arrives_on_their_queue() {
        let rss = rss_lanes();
        let remote = sa("198.18.0.2:4791");
        let lanes = [0, 1].map(|i| Lane::new(i, 2).unwrap().following(rss.clone()));
        let mut owned = [0u32; 3];
        for p in 40000..40300 {
            let t = FourTuple {
                local: sa(&format!("198.18.0.1:{p}")),
                remote,
            };
            let queue = rss.hash.queue_of(t.remote, t.local).unwrap();
            let owners: Vec<u16> = lanes
                .iter()
                .filter(|l| l.owns(&t))
                .map(|l| l.index())
                .collect();
            match queue {
                // Exactly the lane of the queue the NIC picks owns the flow, whatever the
                // symmetric hash says.
                4 | 5 => assert_eq!(owners, vec![(queue - 4) as u16], "{t:?}"),
                _ => assert!(owners.is_empty(), "{t:?}"),
            }
            owned[(queue - 4) as usize] += 1;
        }
        assert!(owned.iter().all(|&n| n > 50), "{owned:?}");
        assert_eq!(Lane::ONLY.following(rss).owner(remote, remote), Some(0));
    }

    #[test]
    fn an_endpoint_on_an_rss_lane_opens_ports_the_nic_delivers_to_it() {
        let rss = rss_lanes();
        let ip: IpAddr = "198.18.0.1".parse().unwrap();
        let remote = sa("198.18.0.2:4791");
        let secrets = crate::Secrets::from_random([7; 24]);
        for i in 0..2u16 {
            let lane = Lane::new(i, 2).unwrap().following(rss.clone());
            let mut cfg = crate::EndpointConfig::new([2, 0, 0, 0, 0, 1], ip, secrets.clone());
            cfg.local_ports = 40000..=40063;
            cfg.lane = lane;
            let mut ep: crate::Endpoint<crate::NoDomain> =
                crate::Endpoint::new(cfg, std::time::Instant::now()).expect("valid configuration");
            for _ in 0..8 {
                let t = ep.active_tuple(remote).unwrap();
                assert_eq!(rss.hash.queue_of(t.remote, t.local), Some(4 + u32::from(i)));
            }
        }
    }
}
