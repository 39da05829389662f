//! The deterministic test pattern: octet `i` of the stream of a seed is a function of the seed
//! and `i` alone, so a shifted, lost, duplicated, misplaced or altered octet shows at once, a
//! mismatch is reproducible, and any range can be written or checked on its own (a store
//! offset, a region, a TCP stream). The one definition for the tools that write and verify data
//! (`xwarp-rdma`, `xwarp-bench rpc_write/rpc_read --verify`), the simulator's stream verifier
//! and the tests (`testkit` re-exports it).
//!
//! Octets `8b..8b+8` are `mix64(seed ^ b * K)` in little-endian order: for one seed, no two
//! 8-octet blocks are equal (both steps are bijections of `b`).

/// SplitMix64's finaliser: a fast 64-bit mixer (a bijection), good enough to make every octet
/// of a test stream depend on its offset and seed, and to derive seeds from seeds.
pub fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The stream of one seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pattern {
    seed: u64,
}

impl Pattern {
    /// The stream of `seed`.
    pub const fn new(seed: u64) -> Pattern {
        Pattern { seed }
    }

    fn word(&self, block: u64) -> [u8; 8] {
        mix64(self.seed ^ block.wrapping_mul(0xd6e8_feb8_6659_fd93)).to_le_bytes()
    }

    /// Octet at stream offset `offset`.
    pub fn byte_at(&self, offset: u64) -> u8 {
        self.word(offset / 8)[(offset % 8) as usize]
    }

    /// Fills `buf` with the octets starting at `offset`.
    pub fn fill(&self, offset: u64, buf: &mut [u8]) {
        let mut pos = offset;
        let mut i = 0;
        while i < buf.len() {
            let w = self.word(pos / 8);
            let from = (pos % 8) as usize;
            let n = (8 - from).min(buf.len() - i);
            buf[i..i + n].copy_from_slice(&w[from..from + n]);
            i += n;
            pos = pos.wrapping_add(n as u64);
        }
    }

    /// The first offset where `data` (placed at `offset`) differs from the stream, if any.
    pub fn first_mismatch(&self, offset: u64, data: &[u8]) -> Option<u64> {
        let mut expected = [0u8; 256];
        for (chunk_no, chunk) in data.chunks(expected.len()).enumerate() {
            let at = offset.wrapping_add((chunk_no * expected.len()) as u64);
            self.fill(at, &mut expected[..chunk.len()]);
            if let Some(i) = chunk.iter().zip(&expected).position(|(a, b)| a != b) {
                return Some(at.wrapping_add(i as u64));
            }
        }
        None
    }
}

/// Fills `buf` with the start of the stream of `seed` (a shorter buffer gets a prefix of a
/// longer one's pattern).
pub fn fill_pattern(buf: &mut [u8], seed: u64) {
    Pattern::new(seed).fill(0, buf);
}

/// `len` octets from the start of the stream of `seed`.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0u8; len];
    fill_pattern(&mut v, seed);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_agrees_with_byte_at_at_every_alignment() {
        let p = Pattern::new(42);
        for start in 0..20u64 {
            let mut buf = vec![0; 37];
            p.fill(start, &mut buf);
            for (i, b) in buf.iter().enumerate() {
                assert_eq!(*b, p.byte_at(start + i as u64));
            }
        }
    }

    #[test]
    fn deterministic_seed_dependent_and_any_length() {
        assert_eq!(pattern(13, 5), pattern(13, 5));
        assert_ne!(pattern(64, 5), pattern(64, 6));
        assert_eq!(&pattern(20, 9)[..13], &pattern(13, 9)[..]);
        assert!(pattern(0, 1).is_empty());
        // Not constant: every eight-octet step differs from the last.
        let p = pattern(64, 1);
        assert!(p.chunks(8).zip(p.chunks(8).skip(1)).all(|(a, b)| a != b));
    }

    #[test]
    fn a_flipped_shifted_or_zeroed_range_is_caught() {
        let p = Pattern::new(7);
        let mut buf = vec![0u8; 8192];
        p.fill(4096, &mut buf);
        assert_eq!(p.first_mismatch(4096, &buf), None);
        // The same octets checked at another offset (a misplaced block) are caught.
        assert_eq!(p.first_mismatch(0, &buf), Some(0));
        assert_eq!(p.first_mismatch(4097, &buf), Some(4097));
        assert!(p.first_mismatch(4096 + 8, &buf).is_some());
        buf[5000] ^= 1;
        assert_eq!(p.first_mismatch(4096, &buf), Some(4096 + 5000));
        assert!(p.first_mismatch(0, &[0u8; 4096]).is_some());
        // Another seed is another stream.
        let mut other = vec![0u8; 64];
        Pattern::new(8).fill(4096, &mut other);
        assert_eq!(p.first_mismatch(4096, &other), Some(4096));
    }

    #[test]
    fn wraps_at_the_end_of_the_offset_space() {
        let p = Pattern::new(3);
        let mut buf = [0u8; 16];
        p.fill(u64::MAX - 3, &mut buf);
        assert_eq!(buf[4], p.byte_at(0));
        assert_eq!(p.first_mismatch(u64::MAX - 3, &buf), None);
    }
}
