//! A NIC's receive-side scaling (RSS), computed here so that lanes can follow it: the NIC
//! hashes a received TCP packet's source and destination addresses and ports with the
//! Toeplitz function and its secret key, and an entry of its indirection table, chosen by the
//! hash, names the receive queue. Knowing key and table (`ETHTOOL_GRSSH`), a host can tell on
//! which queue a flow's packets will arrive, and pick the local port of an active open so that
//! they arrive on the queue of the lane that opened it ([`crate::Lane::following`]).
//!
//! The hash input is the packet's fields in network order: source address, destination
//! address, source port, destination port (12 octets for IPv4, 36 for IPv6); the key needs 4
//! octets more than the input (16 and 40; NICs use 40 or 52).

use std::net::{IpAddr, SocketAddr};

/// The Toeplitz hash of `input` under `key`: for each input bit set, from the most
/// significant bit of the first octet on, the 32 key bits that start at that bit position are
/// XORed in. Key bits past the end of `key` count as zero.
pub fn toeplitz(key: &[u8], input: &[u8]) -> u32 {
    let key_at = |i: usize| key.get(i).copied().unwrap_or(0);
    let mut window = u32::from_be_bytes([key_at(0), key_at(1), key_at(2), key_at(3)]);
    let mut hash = 0u32;
    for (i, &byte) in input.iter().enumerate() {
        let next = key_at(i + 4);
        for bit in 0..8 {
            if byte & (0x80 >> bit) != 0 {
                hash ^= window;
            }
            // Slide the window one key bit on.
            window = (window << 1) | u32::from((next >> (7 - bit)) & 1);
        }
    }
    hash
}

/// Nibbles of the longest hash input (IPv6 addresses and ports: 36 octets).
const NIBBLES: usize = 72;

/// The 32 key bits that start at bit `bit` of `key` (bits past its end are zero).
fn key_window(key: &[u8], bit: usize) -> u32 {
    let at = |i: usize| key.get(i).copied().unwrap_or(0);
    let o = bit / 8;
    let w = u64::from_be_bytes([at(o), at(o + 1), at(o + 2), at(o + 3), at(o + 4), 0, 0, 0]);
    ((w << (bit % 8)) >> 32) as u32
}

/// [`toeplitz`] as table lookups: entry `[n][v]` is what input nibble `n` contributes when its
/// value is `v` (the XOR of the key windows of its set bits), so a hash is two reads and XORs
/// per input octet instead of eight tests and shifts (4.5 KiB per key).
#[derive(Clone, PartialEq, Eq)]
struct NibbleTables(Box<[[u32; 16]; NIBBLES]>);

impl std::fmt::Debug for NibbleTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Derived from the key, which the owner shows.
        f.write_str("NibbleTables(..)")
    }
}

impl NibbleTables {
    fn new(key: &[u8]) -> Self {
        let mut t = Box::new([[0u32; 16]; NIBBLES]);
        for (n, row) in t.iter_mut().enumerate() {
            for (v, entry) in row.iter_mut().enumerate() {
                // Bit 3 of the nibble is its first (most significant) input bit.
                *entry = (0..4)
                    .filter(|b| v & (8 >> b) != 0)
                    .fold(0, |h, b| h ^ key_window(key, 4 * n + b));
            }
        }
        NibbleTables(t)
    }

    /// The Toeplitz hash of `input` (at most 36 octets; further octets are ignored).
    fn hash(&self, input: &[u8]) -> u32 {
        input
            .iter()
            .zip(self.0.chunks_exact(2))
            .fold(0, |h, (&byte, rows)| {
                h ^ rows[0][usize::from(byte >> 4)] ^ rows[1][usize::from(byte & 0xF)]
            })
    }
}

/// A NIC's RSS for TCP: the Toeplitz key and the indirection table (queue numbers), with
/// ports in the hash for TCP over IPv4 and IPv6 (the NICs' default for TCP).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RssHash {
    key: Box<[u8]>,
    table: Box<[u32]>,
    nibbles: NibbleTables,
}

impl RssHash {
    /// `None` unless the table has entries and the key covers an IPv6 input (40 octets).
    pub fn new(key: Vec<u8>, table: Vec<u32>) -> Option<Self> {
        (!table.is_empty() && key.len() >= 40).then(|| RssHash {
            nibbles: NibbleTables::new(&key),
            key: key.into(),
            table: table.into(),
        })
    }

    /// The entries of the indirection table.
    pub fn table_len(&self) -> usize {
        self.table.len()
    }

    /// The hash of a packet from `src` to `dst`; `None` when their families differ.
    pub fn hash(&self, src: SocketAddr, dst: SocketAddr) -> Option<u32> {
        let mut input = [0u8; 36];
        let n = match (src.ip(), dst.ip()) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                input[..4].copy_from_slice(&s.octets());
                input[4..8].copy_from_slice(&d.octets());
                8
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                input[..16].copy_from_slice(&s.octets());
                input[16..32].copy_from_slice(&d.octets());
                32
            }
            _ => return None,
        };
        input[n..n + 2].copy_from_slice(&src.port().to_be_bytes());
        input[n + 2..n + 4].copy_from_slice(&dst.port().to_be_bytes());
        Some(self.nibbles.hash(&input[..n + 4]))
    }

    /// The receive queue of a packet from `src` to `dst`: the table entry the hash's low bits
    /// pick (the hash modulo the table's length, as drivers do with power-of-two tables).
    pub fn queue_of(&self, src: SocketAddr, dst: SocketAddr) -> Option<u32> {
        let h = self.hash(src, dst)?;
        Some(self.table[h as usize % self.table.len()])
    }
}

/// Lanes that follow a NIC's RSS: lane `i` serves receive queue `first_queue + i`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RssLanes {
    /// The NIC's hash.
    pub hash: RssHash,
    /// The queue of lane 0.
    pub first_queue: u32,
}

impl RssLanes {
    /// The lane (of `count`) whose queue receives the packets `remote` sends to `local`;
    /// `None` when the NIC puts them on a queue no lane serves.
    pub fn lane_of(&self, local: SocketAddr, remote: SocketAddr, count: u16) -> Option<u16> {
        let q = self.hash.queue_of(remote, local)?;
        q.checked_sub(self.first_queue)
            .and_then(|i| u16::try_from(i).ok())
            .filter(|&i| i < count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key of Microsoft's RSS verification suite ("Verifying the RSS Hash Calculation"),
    /// which many NICs also ship as their default.
    const KEY: [u8; 40] = [
        0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f,
        0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
        0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
    ];

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    /// (source, destination, hash with TCP ports) from that suite.
    const TCP_VECTORS: [(&str, &str, u32); 8] = [
        ("66.9.149.187:2794", "161.142.100.80:1766", 0x51cc_c178),
        ("199.92.111.2:14230", "65.69.140.83:4739", 0xc626_b0ea),
        ("24.19.198.95:12898", "12.22.207.184:38024", 0x5c2b_394a),
        ("38.27.205.30:48228", "209.142.163.6:2217", 0xafc7_327f),
        ("153.39.163.191:44251", "202.188.127.2:1303", 0x10e8_28a2),
        (
            "[3ffe:2501:200:1fff::7]:2794",
            "[3ffe:2501:200:3::1]:1766",
            0x4020_7d3d,
        ),
        (
            "[3ffe:501:8::260:97ff:fe40:efab]:14230",
            "[ff02::1]:4739",
            0xdde5_1bbf,
        ),
        (
            "[3ffe:1900:4545:3:200:f8ff:fe21:67cf]:44251",
            "[fe80::200:f8ff:fe21:67cf]:38024",
            0x02d1_feef,
        ),
    ];

    #[test]
    fn toeplitz_matches_the_published_tcp_vectors() {
        let rss = RssHash::new(KEY.to_vec(), vec![0]).unwrap();
        for (src, dst, want) in TCP_VECTORS {
            assert_eq!(rss.hash(sa(src), sa(dst)), Some(want), "{src} -> {dst}");
        }
    }

    #[test]
    fn toeplitz_matches_the_published_address_only_vectors() {
        // The same suite without ports: the input is the two addresses alone.
        let cases: [(&str, &str, u32); 3] = [
            ("66.9.149.187", "161.142.100.80", 0x323e_8fc2),
            ("199.92.111.2", "65.69.140.83", 0xd718_262a),
            ("3ffe:2501:200:1fff::7", "3ffe:2501:200:3::1", 0x2cc1_8cd5),
        ];
        for (src, dst, want) in cases {
            let (s, d): (IpAddr, IpAddr) = (src.parse().unwrap(), dst.parse().unwrap());
            let input: Vec<u8> = match (s, d) {
                (IpAddr::V4(s), IpAddr::V4(d)) => [s.octets(), d.octets()].concat(),
                (IpAddr::V6(s), IpAddr::V6(d)) => [s.octets(), d.octets()].concat(),
                _ => unreachable!(),
            };
            assert_eq!(toeplitz(&KEY, &input), want, "{src} -> {dst}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// The lookup tables compute the bitwise definition, for any key and any input up to
        /// the longest (IPv6 with ports).
        #[test]
        fn nibble_tables_equal_the_bitwise_hash(
            key in proptest::collection::vec(proptest::prelude::any::<u8>(), 40..=52),
            input in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..=36),
        ) {
            proptest::prop_assert_eq!(NibbleTables::new(&key).hash(&input), toeplitz(&key, &input));
        }
    }

    #[test]
    fn the_table_entry_follows_the_low_bits_of_the_hash() {
        let table: Vec<u32> = (0..128).map(|i| 4 + i % 3).collect();
        let rss = RssHash::new(KEY.to_vec(), table.clone()).unwrap();
        let (src, dst) = (sa("66.9.149.187:2794"), sa("161.142.100.80:1766"));
        let h = rss.hash(src, dst).unwrap();
        assert_eq!(rss.queue_of(src, dst), Some(table[h as usize % 128]));
        assert_eq!(rss.queue_of(src, sa("[2001:db8::1]:1766")), None);
        assert_eq!(RssHash::new(KEY.to_vec(), Vec::new()), None);
        assert_eq!(RssHash::new(KEY[..16].to_vec(), vec![0]), None);
    }

    #[test]
    fn lanes_follow_the_queue_the_nic_picks() {
        // Queues 2 and 3 are the lanes' (first_queue 2); the table also names queue 0.
        let table: Vec<u32> = (0..64).map(|i| [2, 3, 0][i % 3]).collect();
        let lanes = RssLanes {
            hash: RssHash::new(KEY.to_vec(), table).unwrap(),
            first_queue: 2,
        };
        let remote = sa("198.18.0.2:4791");
        let mut seen = [0u32; 3];
        for port in 40000..40300 {
            let local = sa(&format!("198.18.0.1:{port}"));
            let q = lanes.hash.queue_of(remote, local).unwrap();
            match lanes.lane_of(local, remote, 2) {
                Some(l) => {
                    assert_eq!(u32::from(l) + 2, q);
                    seen[usize::from(l)] += 1;
                }
                None => {
                    assert_eq!(q, 0);
                    seen[2] += 1;
                }
            }
        }
        // Every outcome occurs: both lanes, and the queue no lane serves.
        assert!(seen.iter().all(|&n| n > 50), "{seen:?}");
    }
}
