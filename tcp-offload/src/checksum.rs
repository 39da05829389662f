//! The Internet checksum (RFC 1071) for TCP over IPv4 and IPv6.
//!
//! The ones'-complement sum does not depend on byte order (RFC 1071 §2 B), so the data is
//! summed in native byte order and the folded result converted to network order once; summing
//! wider words with an end-around carry (2^64 ≡ 1 (mod 2^16 - 1), RFC 1071 §2 C) gives the same
//! checksum as summing 16-bit words. Two loops, picked by length and CPU:
//! - from [`WIDE_FROM`] octets where the CPU has AVX2, sixteen 16-bit words a 256-bit register
//!   (the `wide` module): three instructions per 32 octets;
//! - otherwise native-endian 64-bit words in blocks of 32 (then one of 16 and one of 8), each
//!   block one add-with-carry chain (an `adc` per word, straight from memory) whose carry out is
//!   counted apart, so no carry is lost and none is tested per word.
//!
//! [`code`] names the loop long data takes on this CPU.
//!
//! Partial sums are kept in that native-endian form ([`Sum`]); chain them with [`sum`] (each piece
//! starting at an even offset of the checksummed stream) and finish with [`fold`]. The checksum
//! field gets `!fold(..)`; a received header verifies when `fold(..) == 0xFFFF`. This is the one
//! Internet checksum of the production code (the raw AF_XDP frames use it too).

use std::net::{IpAddr, Ipv4Addr};

mod wide;

/// The code [`sum`] runs on long data (from [`WIDE_FROM`] octets) on this CPU, for reports.
pub fn code() -> &'static str {
    if wide::avx2() {
        "16-bit lanes multiplied-and-added in 256-bit registers (AVX2), 64-bit add-with-carry \
         chains below 256 octets"
    } else {
        "64-bit add-with-carry chains (portable Rust)"
    }
}

/// A partial ones'-complement sum in native byte order (not yet folded).
pub type Sum = u64;

/// Who finishes the TCP checksum of an emitted segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TxChecksum {
    /// We do: the field holds the whole checksum.
    #[default]
    Full,
    /// The device (or the kernel's transmit path) does: the field holds the folded sum of the
    /// pseudo header alone, and whoever sends the frame asks for the sum from the TCP header
    /// to the end, stored at the checksum field (Linux's `CHECKSUM_PARTIAL` convention; AF_XDP
    /// TX metadata `csum_start`/`csum_offset`).
    Offloaded,
}

/// The 16-bit word `v` (network order in the packet) as it enters a native-endian [`Sum`].
pub fn word(v: u16) -> Sum {
    Sum::from(u16::from_ne_bytes(v.to_be_bytes()))
}

/// Adds `data` (starting at an even offset of the checksummed stream) to `acc`. Any length
/// and any `acc`: the result is below 2^34, so callers may add a few sums before [`fold`].
#[inline]
pub fn sum(data: &[u8], acc: Sum) -> Sum {
    if data.len() < SHORT_BLOCK * 8 {
        // Headers and small segments: no block, nothing to set up.
        return sum_small(data, acc);
    }
    if data.len() >= WIDE_FROM {
        return wide::sum(data, acc);
    }
    sum_chains(data, acc)
}

/// From this many octets on, [`sum`] takes the CPU's widest loop ([`code`] names it).
pub const WIDE_FROM: usize = 256;

/// [`sum`] by add-with-carry chains: the portable code, for data of 128 octets and more.
fn sum_chains(data: &[u8], acc: Sum) -> Sum {
    let (words, _) = data.as_chunks::<8>();
    let (blocks, rest) = words.as_chunks::<LONG_BLOCK>();
    let (total, carries) = chains(blocks, acc, 0);
    // At most one chain of each shorter length after the long ones.
    let (short, rest) = rest.as_chunks::<SHORT_BLOCK>();
    let (total, carries) = chains(short, total, carries);
    let (eight, rest) = rest.as_chunks::<8>();
    let (total, carries) = chains(eight, total, carries);
    // The last 0-63 octets as short data, onto the chains' sum (end-around carry again).
    let tail = &data[(words.len() - rest.len()) * 8..];
    let (total, c) = total.overflowing_add(carries);
    sum_small(tail, fold_once(total) + u64::from(c))
}

/// Adds each block to `total` as one add-with-carry chain, and counts the chains' carries out
/// onto `carries` (at most one per block, so below 2^61 for any slice).
#[inline(always)]
fn chains<const N: usize>(blocks: &[[[u8; 8]; N]], mut total: u64, mut carries: u64) -> (u64, u64) {
    for block in blocks {
        let mut carry = false;
        for w in block {
            // One add-with-carry per word (`overflowing_add` twice is how stable Rust spells
            // it; the compiler turns the pair into one `adc`).
            let (s, c1) = total.overflowing_add(u64::from_ne_bytes(*w));
            let (s, c2) = s.overflowing_add(u64::from(carry));
            total = s;
            carry = c1 | c2;
        }
        carries += u64::from(carry);
    }
    (total, carries)
}

/// Words per add-with-carry chain in [`sum`]: long chains keep the per-chain carry bookkeeping
/// (three instructions) small beside their `adc`s; one chain of 16 and one of 8 after them keep a
/// segment's last 64-255 octets out of the slower tail loop, and data shorter than 128 octets
/// takes the tail loop alone.
const LONG_BLOCK: usize = 32;
const SHORT_BLOCK: usize = 16;

/// [`sum`] for short data (any `acc`): 64-bit words in native order added with an end-around
/// carry (2^64 ≡ 1 (mod 2^16 - 1), RFC 1071 §2 C), then the last octets as 16-bit words.
fn sum_small(data: &[u8], acc: Sum) -> Sum {
    let add = |a: u64, w: u64| {
        let (s, carry) = a.overflowing_add(w);
        s + u64::from(carry)
    };
    let (words, rest) = data.as_chunks::<8>();
    let mut acc = acc;
    for w in words {
        acc = add(acc, u64::from_ne_bytes(*w));
    }
    // At most 7 octets left: a 32-bit word (two 16-bit words, mod 2^16 - 1), a 16-bit word,
    // an odd octet; no loop, no call to a copy routine for a padded word.
    let rest = match rest.split_first_chunk::<4>() {
        Some((w, rest)) => {
            acc = add(acc, u64::from(u32::from_ne_bytes(*w)));
            rest
        }
        None => rest,
    };
    let odd = match rest.split_first_chunk::<2>() {
        Some((w, odd)) => {
            acc = add(acc, u64::from(u16::from_ne_bytes(*w)));
            odd
        }
        None => rest,
    };
    if let Some(&b) = odd.first() {
        // Odd length: the last octet is the high (first) half of a word.
        acc = add(acc, u64::from(u16::from_ne_bytes([b, 0])));
    }
    // Back to the form the callers chain and fold (below 2^34).
    fold_once(fold_once(acc))
}

/// The sum of a 20-octet IPv4 header (no options), as [`sum`] gives it: five native-endian
/// 32-bit words (each ≡ its two 16-bit halves, mod 2^16 - 1), without a loop.
pub fn sum_ipv4_header(h: &[u8; 20]) -> Sum {
    let w = |i: usize| Sum::from(u32::from_ne_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
    w(0) + w(4) + w(8) + w(12) + w(16)
}

/// The sum of `N` octets (a multiple of 4, such as a fixed header) as [`sum`] gives it (modulo
/// 2^16 - 1): their native-endian 32-bit words added, without a loop.
#[inline]
pub fn sum_words<const N: usize>(h: &[u8; N]) -> Sum {
    let (words, _) = h.as_chunks::<4>();
    words
        .iter()
        .map(|w| Sum::from(u32::from_ne_bytes(*w)))
        .sum()
}

/// One end-around-carry step that keeps a u64 far from overflow (result < 2^33).
fn fold_once(a: u64) -> u64 {
    (a & 0xFFFF_FFFF) + (a >> 32)
}

/// Folds a sum to 16 bits (ones' complement addition of the carries), in network order: 0
/// only for a zero sum, else in 1..=0xFFFF. Two end-around-carry additions, without a loop.
#[inline]
pub fn fold(acc: Sum) -> u16 {
    let (lo, carry) = (acc as u32).overflowing_add((acc >> 32) as u32);
    let acc32 = lo + u32::from(carry);
    let (lo, carry) = (acc32 as u16).overflowing_add((acc32 >> 16) as u16);
    let acc16 = lo + u16::from(carry);
    u16::from_be_bytes(acc16.to_ne_bytes())
}

/// The value of a checksum field over `data` with the partial sum `start` (0, or a pseudo
/// header's) added: `!fold(sum(data, start))`, in network order. Sum the data with its field
/// zeroed.
pub fn field(data: &[u8], start: Sum) -> u16 {
    !fold(sum(data, start))
}

/// The checksum field a device writes for an offloaded segment (`TxChecksum::Offloaded`):
/// `l4` is the TCP header and payload, its checksum field holding the pseudo header's sum, and
/// the field's final value is the complemented sum of all of `l4` (Linux's `CHECKSUM_PARTIAL`
/// finish). For software that stands in for the device: the kernel's, tests' taps.
pub fn offloaded_field(l4: &[u8]) -> u16 {
    !fold(sum(l4, 0))
}

/// The sum of the TCP pseudo header (RFC 9293 §3.1; RFC 8200 §8.1 for IPv6); `None` for mixed
/// address families.
pub fn pseudo(src: IpAddr, dst: IpAddr, l4_len: usize) -> Option<Sum> {
    // Addresses as native-endian words of their octets (what `sum` would read).
    let ne128 = |o: [u8; 16]| {
        let v = u128::from_ne_bytes(o);
        fold_once(v as u64) + fold_once((v >> 64) as u64)
    };
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => Some(pseudo_v4(s, d, l4_len)),
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            Some(pseudo_tail(l4_len) + ne128(s.octets()) + ne128(d.octets()))
        }
        _ => None,
    }
}

/// The sum of the TCP pseudo header over IPv4 (RFC 9293 §3.1).
pub fn pseudo_v4(src: Ipv4Addr, dst: Ipv4Addr, l4_len: usize) -> Sum {
    let ne32 = |o: [u8; 4]| Sum::from(u32::from_ne_bytes(o));
    pseudo_tail(l4_len) + ne32(src.octets()) + ne32(dst.octets())
}

/// The protocol number and the TCP length of a pseudo header, summed.
fn pseudo_tail(l4_len: usize) -> Sum {
    const TCP: u16 = 6;
    let len = l4_len as u32;
    word(TCP) + word((len >> 16) as u16) + word(len as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The plain RFC 1071 definition (testkit's independent implementation), uncomplemented.
    fn reference(data: &[u8]) -> u16 {
        !testkit::internet_checksum(&[data])
    }

    /// RFC 1071 §3 worked example: words 0001 f203 f4f5 f6f7 sum to ddf2.
    #[test]
    fn rfc1071_example() {
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&data, 0)), 0xddf2);
        // Odd length: the last octet is the high half of a word.
        assert_eq!(fold(sum(&[0x12, 0x34, 0x56], 0)), 0x1234 + 0x5600);
    }

    #[test]
    fn all_ones_data_of_every_length_up_to_three_blocks() {
        // Maximal words carry out of every add of a block's chain, of the blocks' carries and
        // of the tail.
        for n in 0..=3 * LONG_BLOCK * 8 + SHORT_BLOCK * 8 + 9 {
            let data = vec![0xFFu8; n];
            assert_eq!(fold(sum(&data, 0)), reference(&data), "len {n}");
        }
    }

    #[test]
    fn short_sums_of_every_length_and_start_match_reference() {
        // The tail path alone (below one block), its edges into the short and the long blocks: every
        // length, the test pattern's octets, starts that carry out of 64 bits.
        let data = testkit::pattern(2 * LONG_BLOCK * 8 + SHORT_BLOCK * 8 + 70, 7);
        for n in 0..data.len() {
            let d = &data[..n];
            assert_eq!(fold(sum(d, 0)), reference(d), "len {n}");
            for start in [u64::MAX, u64::MAX - 1, 1 << 63, 0xFFFF] {
                let folded = fold(sum(d, start));
                let want = fold(sum(d, 0) + fold_once(fold_once(start)));
                assert_eq!(folded, want, "len {n} start {start:#x}");
            }
        }
    }

    #[test]
    fn ipv4_header_sum_matches_reference() {
        for seed in 0..1000 {
            let mut h = [0u8; 20];
            testkit::fill_pattern(&mut h, seed);
            assert_eq!(fold(sum_ipv4_header(&h)), reference(&h));
        }
        assert_eq!(fold(sum_ipv4_header(&[0xFF; 20])), reference(&[0xFF; 20]));
        assert_eq!(fold(sum_ipv4_header(&[0; 20])), 0);
    }

    #[test]
    fn pseudo_header_matches_reference() {
        let s: IpAddr = "198.18.0.1".parse().unwrap();
        let d: IpAddr = "198.18.0.2".parse().unwrap();
        let mut bytes = vec![198, 18, 0, 1, 198, 18, 0, 2, 0, 6];
        bytes.extend_from_slice(&1500u16.to_be_bytes());
        assert_eq!(fold(pseudo(s, d, 1500).unwrap()), reference(&bytes));
        let s6: IpAddr = "2001:db8::1".parse().unwrap();
        let d6: IpAddr = "2001:db8::ffff:2".parse().unwrap();
        let mut b6 = Vec::new();
        for a in [s6, d6] {
            if let IpAddr::V6(a) = a {
                b6.extend_from_slice(&a.octets());
            }
        }
        b6.extend_from_slice(&70_000u32.to_be_bytes());
        b6.extend_from_slice(&[0, 0, 0, 6]);
        assert_eq!(fold(pseudo(s6, d6, 70_000).unwrap()), reference(&b6));
        assert!(pseudo(s, d6, 1).is_none());
    }

    /// Every length up to a few wide turns, at every offset of a 32-octet chunk, with words that
    /// carry out of every lane (all ones) and the test pattern: the wide loop, its turns of
    /// four, two and one chunk, its masked last chunk and its odd octet.
    #[test]
    fn wide_sum_of_every_length_and_offset_matches_reference() {
        for fill in [None, Some(0xFFu8), Some(0x80), Some(0x7F)] {
            let buf = match fill {
                Some(b) => vec![b; 1100],
                None => testkit::pattern(1100, 3),
            };
            for skip in 0..32 {
                for n in 0..buf.len() - skip {
                    let d = &buf[skip..skip + n];
                    assert_eq!(
                        fold(sum(d, 0)),
                        reference(d),
                        "fill {fill:?} skip {skip} len {n}"
                    );
                }
            }
        }
    }

    /// Data longer than one wide pass: passes chained, sums of all-ones words at the lanes' bound.
    #[test]
    fn sums_over_many_wide_passes_match_reference() {
        for n in [65_535, 65_536, 65_537, 65_568, 131_072 + 33, 300_001] {
            for data in [vec![0xFF; n], testkit::pattern(n, 9)] {
                assert_eq!(fold(sum(&data, 0)), reference(&data), "len {n}");
                assert_eq!(
                    fold(sum(&data, 12_345)),
                    fold(sum(&data, 0) + 12_345),
                    "len {n}"
                );
            }
        }
    }

    /// The two loops give the same partial sum modulo 2^16 - 1 for any data and start.
    #[test]
    fn wide_and_chained_loops_agree() {
        let data = testkit::pattern(9000, 5);
        for n in (0..data.len()).step_by(37) {
            for start in [0, 1, u64::MAX, 1 << 40] {
                let d = &data[..n];
                assert_eq!(
                    fold(wide::sum(d, start)),
                    fold(sum_chains(d, start)),
                    "len {n}"
                );
            }
        }
    }

    /// The report names the loop this CPU runs.
    #[test]
    fn code_names_the_loop_that_runs() {
        assert_eq!(code().contains("AVX2"), wide::avx2());
    }

    /// The fold as RFC 1071 §4.1 writes it: carries added back until none is left.
    fn fold_by_loop(mut acc: Sum) -> u16 {
        while acc >> 16 != 0 {
            acc = (acc & 0xFFFF) + (acc >> 16);
        }
        u16::from_be_bytes((acc as u16).to_ne_bytes())
    }

    #[test]
    fn fold_edges_match_the_loop() {
        for acc in [
            0,
            1,
            0xFFFF,
            0x1_0000,
            0x1_FFFE,
            0xFFFF_FFFF,
            0x1_0000_0000,
            u64::MAX,
        ] {
            assert_eq!(fold(acc), fold_by_loop(acc), "{acc:#x}");
        }
    }

    proptest! {
        /// The fold equals the loop of carries for any sum.
        #[test]
        fn fold_equals_the_loop(acc in any::<u64>(), small in 0u64..0x4_0000) {
            prop_assert_eq!(fold(acc), fold_by_loop(acc));
            prop_assert_eq!(fold(small), fold_by_loop(small));
        }

        /// The fast sum equals the RFC 1071 definition for any data at any alignment in memory,
        /// and chaining pieces that start at even offsets equals summing the whole.
        #[test]
        fn fast_sum_equals_reference(
            buf in prop::collection::vec(any::<u8>(), 0..9100),
            skip in 0usize..16,
            cut in any::<prop::sample::Index>(),
            start in any::<u64>(),
        ) {
            let data = &buf[skip.min(buf.len())..];
            prop_assert_eq!(fold(sum(data, 0)), reference(data));
            let k = cut.index(data.len() + 1) & !1;
            let chained = sum(&data[k..], sum(&data[..k], 0));
            prop_assert_eq!(fold(chained), reference(data));
            // A starting accumulator (as pseudo() passes) is added in.
            let start = start >> 40;
            let want = fold(start + sum(data, 0));
            prop_assert_eq!(fold(sum(data, start)), want);
        }
    }
}
