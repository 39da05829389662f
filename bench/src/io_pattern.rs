//! The offsets of the storage tests (fio's `--rw`): block after block from 0, wrapping at the
//! end of the store, or blocks drawn uniformly from the whole store by a PRNG seeded with
//! `--seed` (`fastrand`'s wyrand: the same seed gives the same offsets on every host with the
//! locked version). Every
//! offset is a multiple of the block size and the block ends within the store.

use crate::cli::RwArg;

/// Yields the store offset of each I/O.
#[derive(Debug, Clone)]
pub struct Offsets {
    block: u64,
    blocks: u64,
    next: u64,
    rng: Option<fastrand::Rng>,
}

impl Offsets {
    /// Offsets of `block`-byte I/Os in a store of `store_size` bytes; `None` (with why) when
    /// not one block fits.
    pub fn new(rw: RwArg, block: u64, store_size: u64, seed: u64) -> Result<Self, String> {
        let blocks = store_size / block.max(1);
        if blocks == 0 {
            return Err(format!(
                "a block of {block} B does not fit the store of {store_size} B"
            ));
        }
        Ok(Self {
            block,
            blocks,
            next: 0,
            rng: rw.random().then(|| fastrand::Rng::with_seed(seed)),
        })
    }
}

impl Iterator for Offsets {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let index = match &mut self.rng {
            Some(rng) => rng.u64(0..self.blocks),
            None => {
                let i = self.next % self.blocks;
                self.next += 1;
                i
            }
        };
        Some(index * self.block)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first offsets of seed 1 (4 KiB blocks, 64 MiB store), as first measured.
    const PINNED: [u64; 4] = [44_089_344, 35_876_864, 16_080_896, 52_264_960];

    #[test]
    fn sequential_offsets_walk_the_store_and_wrap() {
        let o: Vec<u64> = Offsets::new(RwArg::Read, 4096, 3 * 4096 + 100, 9)
            .unwrap()
            .take(5)
            .collect();
        assert_eq!(o, [0, 4096, 8192, 0, 4096]);
    }

    #[test]
    fn random_offsets_are_aligned_in_range_repeatable_and_seed_dependent() {
        let store = 64 << 20;
        let a: Vec<u64> = Offsets::new(RwArg::Randread, 4096, store, 1)
            .unwrap()
            .take(1000)
            .collect();
        assert!(a.iter().all(|o| o % 4096 == 0 && o + 4096 <= store));
        let again: Vec<u64> = Offsets::new(RwArg::Randwrite, 4096, store, 1)
            .unwrap()
            .take(1000)
            .collect();
        assert_eq!(a, again, "same seed, same offsets");
        let other: Vec<u64> = Offsets::new(RwArg::Randread, 4096, store, 2)
            .unwrap()
            .take(1000)
            .collect();
        assert_ne!(a, other);
        // Not sequential: spread over the store (16384 blocks; 1000 draws hit > 900 of them).
        let mut d = a.clone();
        d.sort_unstable();
        d.dedup();
        assert!(d.len() > 900, "{}", d.len());
        assert!(a.windows(2).any(|w| w[1] < w[0]));
    }

    #[test]
    fn the_offsets_of_a_seed_do_not_change_between_builds() {
        // Pinned: a dependency update that changed them would make old runs unrepeatable.
        let o: Vec<u64> = Offsets::new(RwArg::Randread, 4096, 64 << 20, 1)
            .unwrap()
            .take(4)
            .collect();
        assert_eq!(o, PINNED);
    }

    #[test]
    fn a_block_larger_than_the_store_is_refused() {
        let e = Offsets::new(RwArg::Read, 1 << 20, 4096, 1).unwrap_err();
        assert!(e.contains("does not fit"), "{e}");
    }
}
