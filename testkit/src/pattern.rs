//! Deterministic test data: xorshift64 bytes from a seed, so a mismatch is reproducible and
//! different seeds (different buffers, offsets, peers) never look alike.

/// Fills `buf` with the pattern of `seed` (eight octets a step; a shorter buffer gets a prefix
/// of a longer one's pattern).
pub fn fill_pattern(buf: &mut [u8], seed: u64) {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut chunks = buf.chunks_exact_mut(8);
    for c in &mut chunks {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        c.copy_from_slice(&x.to_le_bytes());
    }
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    let rest = chunks.into_remainder();
    let n = rest.len();
    rest.copy_from_slice(&x.to_le_bytes()[..n]);
}

/// `len` octets of the pattern of `seed`.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0u8; len];
    fill_pattern(&mut v, seed);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
