//! Initial sequence numbers per RFC 6528: `ISN = M + F(4-tuple, secret)`, where `M` is a 4 µs clock
//! and `F` a keyed hash (SipHash-2-4, keyed by a per-process secret).

use crate::time::Timestamp;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;

use siphasher::sip::SipHasher24;

use crate::seq::SeqNum;

/// The connection identifier the hash covers (RFC 6528 §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct FourTuple {
    /// Our address and port.
    pub local: SocketAddr,
    /// The peer's address and port.
    pub remote: SocketAddr,
}

impl FourTuple {
    pub(crate) fn hash_into(&self, h: &mut impl Hasher) {
        for a in [self.local, self.remote] {
            match a {
                SocketAddr::V4(v) => h.write(&v.ip().octets()),
                SocketAddr::V6(v) => h.write(&v.ip().octets()),
            }
            h.write_u16(a.port());
        }
    }
}

/// Hashed as addresses and ports packed into one integer for IPv4 (a flow table looks a
/// tuple up per received segment; the derived hash fed every field of both `SocketAddr`s
/// separately). Equal tuples hash equally: what `Eq` compares beyond these (an IPv6 address's
/// flow info and scope) can only make tuples unequal.
impl Hash for FourTuple {
    fn hash<H: Hasher>(&self, h: &mut H) {
        match (self.local, self.remote) {
            (SocketAddr::V4(l), SocketAddr::V4(r)) => h.write_u128(
                (u128::from(l.ip().to_bits()) << 96)
                    | (u128::from(r.ip().to_bits()) << 64)
                    | (u128::from(l.port()) << 16)
                    | u128::from(r.port()),
            ),
            _ => self.hash_into(h),
        }
    }
}

/// Keyed generator of ISNs and other per-connection secrets (timestamp offsets, SYN cookies).
///
/// Create one per process with a secret from the OS random source (the caller draws it: the
/// endpoint's `Secrets`); tests pass a fixed secret.
#[derive(Clone, Debug)]
pub struct IsnGenerator {
    key: [u64; 2],
    epoch: Timestamp,
}

impl IsnGenerator {
    /// A generator with a fixed secret (tests, or a secret the caller manages). `epoch` is the
    /// origin of the 4 µs clock `M`.
    pub fn new(secret: [u8; 16], epoch: Timestamp) -> Self {
        let k0 = u64::from_le_bytes(secret[..8].try_into().unwrap_or([0; 8]));
        let k1 = u64::from_le_bytes(secret[8..].try_into().unwrap_or([0; 8]));
        IsnGenerator {
            key: [k0, k1],
            epoch,
        }
    }

    fn hasher(&self, domain: u8) -> SipHasher24 {
        let mut h = SipHasher24::new_with_keys(self.key[0], self.key[1]);
        h.write_u8(domain);
        h
    }

    /// `F(tuple, secret)` of RFC 6528 §3.
    fn f(&self, tuple: &FourTuple) -> u32 {
        let mut h = self.hasher(0);
        tuple.hash_into(&mut h);
        h.finish() as u32
    }

    /// The ISN for `tuple` at `now` (RFC 6528 §3).
    pub fn isn(&self, tuple: &FourTuple, now: Timestamp) -> SeqNum {
        let m = (now.nanos_since(self.epoch) / 4_000) as u32;
        SeqNum(m.wrapping_add(self.f(tuple)))
    }

    /// A per-connection random offset for the timestamp clock (RFC 7323 §5.4, RFC 6528 spirit).
    pub fn ts_offset(&self, tuple: &FourTuple) -> u32 {
        let mut h = self.hasher(1);
        tuple.hash_into(&mut h);
        h.finish() as u32
    }

    /// A keyed 32-bit MAC over `tuple`, the peer's ISN and a counter (SYN cookies).
    pub(crate) fn cookie_mac(&self, tuple: &FourTuple, peer_isn: SeqNum, counter: u32) -> u32 {
        let mut h = self.hasher(2);
        tuple.hash_into(&mut h);
        h.write_u32(peer_isn.0);
        h.write_u32(counter);
        h.finish() as u32
    }

    /// The generator's epoch (origin of its clocks).
    pub fn epoch(&self) -> Timestamp {
        self.epoch
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Tuples that differ in one field each (ports swapped included): IPv4, IPv6, mixed.
    fn samples() -> Vec<FourTuple> {
        let t = |l: &str, r: &str| FourTuple {
            local: l.parse().unwrap(),
            remote: r.parse().unwrap(),
        };
        vec![
            t("198.18.0.1:5000", "198.18.0.2:6000"),
            t("198.18.0.2:5000", "198.18.0.1:6000"),
            t("198.18.0.1:6000", "198.18.0.2:5000"),
            t("198.18.0.1:5000", "198.18.0.2:6001"),
            t("198.19.0.1:5000", "198.18.0.2:6000"),
            t("[2001:db8::1]:5000", "[2001:db8::2]:6000"),
            t("[2001:db8::1]:6000", "[2001:db8::2]:5000"),
            t("198.18.0.1:5000", "198.18.0.3:6000"),
            t("[2001:db8::1]:5000", "198.18.0.2:6000"),
            t("[::ffff:198.18.0.1]:5000", "198.18.0.2:6000"),
        ]
    }

    /// The packed hash: a map finds every one of several IPv4 and IPv6 tuples that differ in
    /// one field each (ports swapped included), and keeps them apart.
    #[test]
    fn four_tuples_hash_by_their_fields() {
        use std::collections::HashMap;
        let all = samples();
        let map: HashMap<FourTuple, usize> = all.iter().enumerate().map(|(i, &x)| (x, i)).collect();
        assert_eq!(map.len(), all.len());
        for (i, x) in all.iter().enumerate() {
            assert_eq!(map.get(x), Some(&i));
        }
    }

    fn tuple(port: u16) -> FourTuple {
        FourTuple {
            local: "198.18.0.1:5000".parse().unwrap(),
            remote: SocketAddr::from(([198, 18, 0, 2], port)),
        }
    }

    #[test]
    fn isn_advances_with_4us_clock_rfc6528_s3() {
        let t0 = Timestamp::ZERO;
        let g = IsnGenerator::new([7; 16], t0);
        let a = g.isn(&tuple(1), t0);
        let b = g.isn(&tuple(1), t0 + Duration::from_micros(400));
        assert_eq!(b.diff(a), 100);
    }

    #[test]
    fn isn_depends_on_tuple_and_secret_rfc6528_s3() {
        let t0 = Timestamp::ZERO;
        let g = IsnGenerator::new([7; 16], t0);
        let h = IsnGenerator::new([8; 16], t0);
        assert_ne!(g.isn(&tuple(1), t0), g.isn(&tuple(2), t0));
        assert_ne!(g.isn(&tuple(1), t0), h.isn(&tuple(1), t0));
        assert_eq!(g.isn(&tuple(1), t0), g.isn(&tuple(1), t0));
    }
}
