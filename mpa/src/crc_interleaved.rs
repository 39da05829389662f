//! CRC-32C with the CPU's `crc32` instruction over three interleaved streams.
//!
//! One `crc32q` folds eight octets into the register with a latency of three cycles and a
//! throughput of one a cycle, so one stream runs at a third of the instruction's rate. The data
//! is cut into three equal runs of `m` words, each run gets a register of its own (all three
//! advance in the same loop), and the runs are joined at the end: shifting a register over
//! `m` words of zeros is a multiplication by x^(64m) mod P, done with one carry-less multiply by
//! a constant from [`SHIFT`] and one `crc32q` that reduces the product. About 1.1 instructions
//! per eight octets, against some 2.4 in the `crc32c` crate's loop and 3.3 in crc-fast's
//! 128-bit folding (callgrind, at 1,440 octets).
//!
//! The instructions are picked at run time ([`multiversion`]): on a CPU without SSE4.2 and
//! PCLMULQDQ, or another architecture, the `crc32c` crate's own code runs.

use multiversion::multiversion;

/// The reflected CRC-32C polynomial (bit i is the coefficient of x^(31-i)).
const POLY: u32 = 0x82F6_3B78;

/// Longest run, in 8-octet words, that one pass over the three streams takes (12 KiB a pass).
const MAX_RUN_WORDS: usize = 512;

/// Words of each stream one turn of the main loop takes, and of the one shorter turn after it.
const LONG_TURN: usize = 16;
const SHORT_TURN: usize = 8;

/// Shorter data is one stream: joining three costs more instructions than it saves time.
pub const INTERLEAVE_FROM: usize = 128;

/// `r` times x, mod P, in the reflected form.
const fn times_x(r: u32) -> u32 {
    if r & 1 != 0 {
        (r >> 1) ^ POLY
    } else {
        r >> 1
    }
}

/// `SHIFT[m]` = x^(64m - 33) mod P (reflected), for `m` in 1..=[`MAX_RUN_WORDS`]: the
/// carry-less product of a register with it, reduced by `crc32q` (which multiplies by
/// x^32, and the 64-bit product is the polynomial product times x), is the register moved
/// over `m` words of zeros.
static SHIFT: [u32; MAX_RUN_WORDS + 1] = {
    let mut table = [0u32; MAX_RUN_WORDS + 1];
    // x^31: x^0 is the top bit in the reflected form.
    let mut r = 1u32 << 31;
    let mut i = 0;
    while i < 31 {
        r = times_x(r);
        i += 1;
    }
    let mut m = 1;
    while m <= MAX_RUN_WORDS {
        table[m] = r;
        let mut i = 0;
        while i < 64 {
            r = times_x(r);
            i += 1;
        }
        m += 1;
    }
    table
};

/// Continues a CRC-32C: `append(append(0, a), b)` is the CRC of `a ++ b`; start from 0.
/// Where the CPU has AVX-512 VPCLMULQDQ, data longer than [`crate::crc::SHORT_UP_TO`] goes to
/// crc-fast's wide folding instead ([`crate::crc::CrcCode`] describes the choice); the CPU is
/// asked once, not per call.
#[multiversion(targets("x86_64+avx512f+vpclmulqdq", "x86_64+sse4.2+pclmulqdq"))]
pub fn append(crc: u32, data: &[u8]) -> u32 {
    #[multiversion::target::target_cfg(all(
        target_arch = "x86_64",
        target_feature = "sse4.2",
        target_feature = "pclmulqdq"
    ))]
    #[multiversion::inherit_target]
    fn run(crc: u32, data: &[u8]) -> u32 {
        use std::arch::x86_64::{
            _mm_clmulepi64_si128, _mm_crc32_u32, _mm_crc32_u64, _mm_crc32_u8, _mm_cvtsi128_si64,
            _mm_cvtsi32_si128, _mm_cvtsi64_si128,
        };
        let word = |w: &[u8; 8]| u64::from_le_bytes(*w);
        let (mut words, tail) = data.as_chunks::<8>();
        let mut reg = u64::from(!crc);
        if data.len() >= INTERLEAVE_FROM {
            while words.len() >= 3 {
                let m = (words.len() / 3).min(MAX_RUN_WORDS);
                let (a, rest) = words.split_at(m);
                let (b, rest) = rest.split_at(m);
                let (c, rest) = rest.split_at(m);
                let (mut reg_b, mut reg_c) = (0u64, 0u64);
                // Sixteen words of each stream a turn (48 `crc32q` to three for the loop), then
                // at most one turn of eight, then single words.
                macro_rules! turn {
                    ($x:expr, $y:expr, $z:expr) => {
                        for i in 0..$x.len() {
                            reg = _mm_crc32_u64(reg, word(&$x[i]));
                            reg_b = _mm_crc32_u64(reg_b, word(&$y[i]));
                            reg_c = _mm_crc32_u64(reg_c, word(&$z[i]));
                        }
                    };
                }
                let (a16, a) = a.as_chunks::<LONG_TURN>();
                let (b16, b) = b.as_chunks::<LONG_TURN>();
                let (c16, c) = c.as_chunks::<LONG_TURN>();
                for ((x, y), z) in a16.iter().zip(b16).zip(c16) {
                    turn!(x, y, z);
                }
                let (a8, a) = a.as_chunks::<SHORT_TURN>();
                let (b8, b) = b.as_chunks::<SHORT_TURN>();
                let (c8, c) = c.as_chunks::<SHORT_TURN>();
                for ((x, y), z) in a8.iter().zip(b8).zip(c8) {
                    turn!(x, y, z);
                }
                turn!(a, b, c);
                // Move each register over the next run and add that run's own.
                let k = _mm_cvtsi32_si128(SHIFT[m] as i32);
                let shift = |r: u64| {
                    let product = _mm_clmulepi64_si128(_mm_cvtsi64_si128(r as i64), k, 0);
                    _mm_crc32_u64(0, _mm_cvtsi128_si64(product) as u64)
                };
                reg = shift(reg) ^ reg_b;
                reg = shift(reg) ^ reg_c;
                words = rest;
            }
        }
        for w in words {
            reg = _mm_crc32_u64(reg, word(w));
        }
        let mut reg = reg as u32;
        // An FPDU is a whole number of 4-octet words: one `crc32l` for its last word.
        let (quad, tail) = tail.as_chunks::<4>();
        if let Some(q) = quad.first() {
            reg = _mm_crc32_u32(reg, u32::from_le_bytes(*q));
        }
        for &b in tail {
            reg = _mm_crc32_u8(reg, b);
        }
        !reg
    }
    #[multiversion::target::target_cfg(not(all(
        target_arch = "x86_64",
        target_feature = "sse4.2",
        target_feature = "pclmulqdq"
    )))]
    fn run(crc: u32, data: &[u8]) -> u32 {
        crc32c::crc32c_append(crc, data)
    }
    #[multiversion::target::target_cfg(all(
        target_arch = "x86_64",
        target_feature = "avx512f",
        target_feature = "vpclmulqdq"
    ))]
    #[multiversion::inherit_target]
    fn pick(crc: u32, data: &[u8]) -> u32 {
        if data.len() > crate::crc::SHORT_UP_TO {
            // The register holds the value before the final inversion.
            let mut d = crc_fast::Digest::new_with_init_state(
                crc_fast::CrcAlgorithm::Crc32Iscsi,
                u64::from(!crc),
            );
            d.update(data);
            d.finalize() as u32
        } else {
            run(crc, data)
        }
    }
    #[multiversion::target::target_cfg(not(all(
        target_arch = "x86_64",
        target_feature = "avx512f",
        target_feature = "vpclmulqdq"
    )))]
    #[multiversion::inherit_target]
    fn pick(crc: u32, data: &[u8]) -> u32 {
        run(crc, data)
    }
    pick(crc, data)
}

/// Whether [`append`] runs the interleaved `crc32q` code on this CPU (else the crc32c crate).
pub fn interleaved() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("sse4.2")
            && std::arch::is_x86_feature_detected!("pclmulqdq")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `a * b` mod P, both reflected, one bit at a time (no instruction to trust).
    fn multiply(a: u32, b: u32) -> u32 {
        let mut product = 0;
        let mut b_times_x_i = b;
        for i in 0..32 {
            if a & (1 << (31 - i)) != 0 {
                product ^= b_times_x_i;
            }
            b_times_x_i = times_x(b_times_x_i);
        }
        product
    }

    #[test]
    fn the_shift_table_moves_a_register_over_zero_words() {
        let x33 = (0..33).fold(1u32 << 31, |r, _| times_x(r));
        for m in [1, 2, 3, 60, MAX_RUN_WORDS] {
            let start = 0x1234_5678u32;
            // The register after m zero words, fed one by one (the crate inverts in and out).
            let fed = !crc32c::crc32c_append(!start, &vec![0u8; 8 * m]);
            // The product with the table's constant, times x^33 (the 64-bit product's x and
            // crc32q's x^32).
            assert_eq!(multiply(multiply(start, SHIFT[m]), x33), fed, "m {m}");
        }
    }

    #[test]
    fn every_length_and_start_matches_the_crate() {
        let data: Vec<u8> = (0..13_000u32).map(|i| (i * 131 + 7) as u8).collect();
        let lens = (0..400).chain([1439, 1440, 1448, 1460, 4095, 8940, 12_288, 12_300, 12_999]);
        for len in lens {
            for skip in [0, 1, 3, 7] {
                let d = &data[skip..skip + len.min(data.len() - skip)];
                assert_eq!(append(0, d), crc32c::crc32c(d), "len {len} skip {skip}");
                assert_eq!(
                    append(0xDEAD_BEEF, d),
                    crc32c::crc32c_append(0xDEAD_BEEF, d),
                    "len {len} skip {skip}"
                );
            }
        }
    }
}
