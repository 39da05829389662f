//! Lanes: which of a host's N queues (one endpoint each) owns a TCP flow.
//!
//! A multi-queue host runs one endpoint per receive queue. Every lane must agree on the owner
//! of a flow without sharing a table, and so must the peer when it runs lanes too: the owner is
//! a hash of the two (address, port) ends that does not depend on their order ([`Lane::of`]).
//! A lane's active opens take local ports whose flow it owns ([`Lane::owns`]); a segment that
//! arrives on another lane's queue (a NIC's RSS or a kernel peer's transmit queue decided where
//! it went) is handed to its owner by the caller ([`flow_of`] reads the ends from a frame).
//! Two hosts with the same lane count, each transmitting a flow on its owner's queue, meet on
//! the same lane at both ends (veth: a packet arrives on the queue it was sent from).

use std::net::{IpAddr, SocketAddr};

use tcp_offload::FourTuple;

/// One lane of `count`: `index` in `0..count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lane {
    index: u16,
    count: u16,
}

impl Default for Lane {
    fn default() -> Self {
        Lane::ONLY
    }
}

impl Lane {
    /// The single lane of a one-queue host: owns every flow.
    pub const ONLY: Lane = Lane { index: 0, count: 1 };

    /// Lane `index` of `count`; `None` unless `index < count`.
    pub fn new(index: u16, count: u16) -> Option<Lane> {
        (index < count).then_some(Lane { index, count })
    }

    /// Its index.
    pub fn index(self) -> u16 {
        self.index
    }

    /// How many lanes there are.
    pub fn count(self) -> u16 {
        self.count
    }

    /// The lane of `count` that owns the flow between `a` and `b`, in either order.
    pub fn of(a: SocketAddr, b: SocketAddr, count: u16) -> u16 {
        if count <= 1 {
            return 0;
        }
        let h = mix(end_key(a)) ^ mix(end_key(b));
        ((h >> 32) % u64::from(count)) as u16
    }

    /// Whether this lane owns `tuple`.
    pub fn owns(self, tuple: &FourTuple) -> bool {
        self.count <= 1 || Lane::of(tuple.local, tuple.remote, self.count) == self.index
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

/// The (source, destination) ends of an Ethernet frame carrying TCP over IPv4 or IPv6 (no
/// IPv6 extension headers); `None` for anything else or a frame too short to say.
pub fn flow_of(frame: &[u8]) -> Option<(SocketAddr, SocketAddr)> {
    let ethertype = u16::from_be_bytes(frame.get(12..14)?.try_into().ok()?);
    let ip = frame.get(14..)?;
    let (src, dst, l4) = match ethertype {
        0x0800 => {
            let ihl = usize::from(ip.first()? & 0x0f) * 4;
            if ip.first()? >> 4 != 4 || ihl < 20 || *ip.get(9)? != 6 {
                return None;
            }
            let src: [u8; 4] = ip.get(12..16)?.try_into().ok()?;
            let dst: [u8; 4] = ip.get(16..20)?.try_into().ok()?;
            (IpAddr::from(src), IpAddr::from(dst), ip.get(ihl..)?)
        }
        0x86dd => {
            if ip.first()? >> 4 != 6 || *ip.get(6)? != 6 {
                return None;
            }
            let src: [u8; 16] = ip.get(8..24)?.try_into().ok()?;
            let dst: [u8; 16] = ip.get(24..40)?.try_into().ok()?;
            (IpAddr::from(src), IpAddr::from(dst), ip.get(40..)?)
        }
        _ => return None,
    };
    let port = |at: usize| -> Option<u16> {
        Some(u16::from_be_bytes(l4.get(at..at + 2)?.try_into().ok()?))
    };
    Some((
        SocketAddr::new(src, port(0)?),
        SocketAddr::new(dst, port(2)?),
    ))
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
            cfg.lane = lane;
            let mut ep: crate::Endpoint<crate::NoDomain> =
                crate::Endpoint::new(cfg, std::time::Instant::now());
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

    #[test]
    fn flow_of_reads_ipv4_and_ipv6_tcp_frames() {
        let mut f4 = vec![0u8; 14 + 20 + 20];
        f4[12..14].copy_from_slice(&[0x08, 0x00]);
        f4[14] = 0x45;
        f4[14 + 9] = 6;
        f4[26..30].copy_from_slice(&[198, 18, 0, 2]);
        f4[30..34].copy_from_slice(&[198, 18, 0, 1]);
        f4[34..38].copy_from_slice(&[0x12, 0xb7, 0x9c, 0x40]);
        assert_eq!(
            flow_of(&f4),
            Some((sa("198.18.0.2:4791"), sa("198.18.0.1:40000")))
        );
        // Not TCP; truncated; not IP.
        let mut udp = f4.clone();
        udp[14 + 9] = 17;
        assert_eq!(flow_of(&udp), None);
        assert_eq!(flow_of(&f4[..36]), None);
        assert_eq!(flow_of(&f4[..10]), None);
        let mut arp = f4.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(flow_of(&arp), None);

        let mut f6 = vec![0u8; 14 + 40 + 20];
        f6[12..14].copy_from_slice(&[0x86, 0xdd]);
        f6[14] = 0x60;
        f6[14 + 6] = 6;
        f6[14 + 8 + 15] = 2;
        f6[14 + 8] = 0x20;
        f6[14 + 24] = 0x20;
        f6[14 + 24 + 15] = 1;
        f6[54..58].copy_from_slice(&[0x12, 0xb7, 0x9c, 0x40]);
        let (s, d) = flow_of(&f6).unwrap();
        assert_eq!((s.port(), d.port()), (4791, 40000));
        assert!(s.is_ipv6() && d.is_ipv6());
    }
}
