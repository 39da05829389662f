//! The endpoint's secrets. The endpoint reads no randomness itself: the caller supplies them,
//! drawn from the OS random source (tests: fixed ones, by name).

use std::fmt;

/// The secrets of an endpoint: the key of its ISN and SYN-cookie generator (RFC 6528: sequence
/// numbers an off-path attacker cannot predict) and the seed of its STag key generator
/// (DDP-06 §8: STags a peer cannot guess). `Debug` does not show them.
#[derive(Clone)]
pub struct Secrets {
    isn_key: [u8; 16],
    stag_seed: u64,
}

impl Secrets {
    /// Secrets from 24 octets of the OS random source (16 for the ISN key, 8 for the STag
    /// seed).
    pub fn from_random(octets: [u8; 24]) -> Self {
        let mut isn_key = [0u8; 16];
        isn_key.copy_from_slice(&octets[..16]);
        let mut seed = [0u8; 8];
        seed.copy_from_slice(&octets[16..]);
        Secrets {
            isn_key,
            stag_seed: u64::from_le_bytes(seed),
        }
    }

    /// Fixed secrets derived from `seed`, for deterministic tests only: an endpoint built with
    /// them has predictable ISNs and STags.
    pub fn fixed_for_tests(seed: u64) -> Self {
        let mut state = seed;
        let mut octets = [0u8; 24];
        for chunk in octets.chunks_mut(8) {
            chunk.copy_from_slice(&splitmix64(&mut state).to_le_bytes());
        }
        Secrets::from_random(octets)
    }

    /// The ISN generator's key.
    pub(crate) fn isn_key(&self) -> [u8; 16] {
        self.isn_key
    }

    /// The STag key generator's seed.
    pub(crate) fn stag_seed(&self) -> u64 {
        self.stag_seed
    }
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secrets(..)")
    }
}

/// SplitMix64: spreads a test seed over the octets of the secrets.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn octets_split_into_key_and_seed_and_debug_hides_them() {
        let mut o = [0u8; 24];
        o[..16].fill(0xab);
        o[16] = 1;
        let s = Secrets::from_random(o);
        assert_eq!((s.isn_key(), s.stag_seed()), ([0xab; 16], 1));
        assert_eq!(format!("{s:?}"), "Secrets(..)");
    }

    #[test]
    fn test_secrets_differ_per_seed() {
        let (a, b) = (Secrets::fixed_for_tests(1), Secrets::fixed_for_tests(2));
        assert_ne!(a.isn_key(), b.isn_key());
        assert_ne!(a.stag_seed(), b.stag_seed());
        assert_eq!(a.isn_key(), Secrets::fixed_for_tests(1).isn_key());
    }
}
