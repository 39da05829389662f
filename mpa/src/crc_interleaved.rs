//! CRC-32C with the CPU's `crc32` instruction over three interleaved streams.
//!
//! One `crc32q` folds eight octets into the register with a latency of three cycles and a
//! throughput of one a cycle, so one stream runs at a third of the instruction's rate. The data
//! is cut into three equal runs of `m` words, each run gets a register of its own (all three
//! advance in the same loop), and the runs are joined at the end: shifting a register over
//! `k` words of zeros is a multiplication by x^(64k) mod P, a carry-less multiply by a constant
//! from [`SHIFT`]; the first register's product (over `2m` words) and the second's (over `m`)
//! are added and one `crc32q` reduces the sum. About 1.1 instructions per eight octets, against
//! some 2.4 in the `crc32c` crate's loop and 3.3 in crc-fast's 128-bit folding (callgrind, at
//! 1,440 octets).
//!
//! The instructions are picked at run time ([`multiversion`]): on a CPU without SSE4.2 and
//! PCLMULQDQ, or another architecture, the `crc32c` crate's own code runs.

use multiversion::multiversion;

/// The reflected CRC-32C polynomial (bit i is the coefficient of x^(31-i)).
const POLY: u32 = 0x82F6_3B78;

/// Longest run, in 8-octet words, that one pass over the three streams takes.
const MAX_RUN_WORDS: usize = 512;

/// Words of one full pass over three runs (12 KiB).
const PASS_WORDS: usize = 3 * MAX_RUN_WORDS;

/// Words of each run one turn of the main loop takes.
const LONG_TURN: usize = 32;

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

/// `SHIFT[m]` = x^(64m - 33) mod P (reflected), for `m` in 1..=2 x [`MAX_RUN_WORDS`]: the
/// carry-less product of a register with it, reduced by `crc32q` (which multiplies by
/// x^32, and the 64-bit product is the polynomial product times x), is the register moved
/// over `m` words of zeros.
static SHIFT: [u32; 2 * MAX_RUN_WORDS + 1] = {
    let mut table = [0u32; 2 * MAX_RUN_WORDS + 1];
    // x^31: x^0 is the top bit in the reflected form.
    let mut r = 1u32 << 31;
    let mut i = 0;
    while i < 31 {
        r = times_x(r);
        i += 1;
    }
    let mut m = 1;
    while m <= 2 * MAX_RUN_WORDS {
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
    #[inline]
    fn run(crc: u32, data: &[u8]) -> u32 {
        // Short data stays in the caller, clear of the long code's register saves.
        if data.len() < INTERLEAVE_FROM {
            one_stream(crc, data)
        } else {
            three_streams(crc, data)
        }
    }
    /// [`run`] for data shorter than [`INTERLEAVE_FROM`]: one register.
    #[multiversion::target::target_cfg(all(
        target_arch = "x86_64",
        target_feature = "sse4.2",
        target_feature = "pclmulqdq"
    ))]
    #[multiversion::inherit_target]
    #[inline]
    fn one_stream(crc: u32, data: &[u8]) -> u32 {
        let (words, tail) = data.as_chunks::<8>();
        let mut reg = u64::from(!crc);
        for w in words {
            reg = std::arch::x86_64::_mm_crc32_u64(reg, u64::from_le_bytes(*w));
        }
        finish(reg, tail)
    }
    /// The register continued over the last 0 to 7 octets, inverted: the CRC.
    #[multiversion::target::target_cfg(all(
        target_arch = "x86_64",
        target_feature = "sse4.2",
        target_feature = "pclmulqdq"
    ))]
    #[multiversion::inherit_target]
    #[inline]
    fn finish(reg: u64, tail: &[u8]) -> u32 {
        use std::arch::x86_64::{_mm_crc32_u32, _mm_crc32_u8};
        // An FPDU is a whole number of 4-octet words: none left over, or one for a `crc32l`.
        let mut reg = reg as u32;
        match *tail {
            [] => return !reg,
            [a, b, c, d] => return !_mm_crc32_u32(reg, u32::from_le_bytes([a, b, c, d])),
            _ => {}
        }
        let (quad, tail) = tail.as_chunks::<4>();
        if let Some(q) = quad.first() {
            reg = _mm_crc32_u32(reg, u32::from_le_bytes(*q));
        }
        for &b in tail {
            reg = _mm_crc32_u8(reg, b);
        }
        !reg
    }
    /// [`run`] for data from [`INTERLEAVE_FROM`] on: three runs, one register each.
    #[multiversion::target::target_cfg(all(
        target_arch = "x86_64",
        target_feature = "sse4.2",
        target_feature = "pclmulqdq"
    ))]
    #[multiversion::inherit_target]
    #[inline(never)]
    fn three_streams(crc: u32, data: &[u8]) -> u32 {
        use std::arch::x86_64::{
            _mm_clmulepi64_si128, _mm_crc32_u64, _mm_cvtsi128_si64, _mm_cvtsi32_si128,
            _mm_cvtsi64_si128, _mm_xor_si128,
        };
        let word = |w: &[u8; 8]| u64::from_le_bytes(*w);
        let (words, tail) = data.as_chunks::<8>();
        let mut reg = u64::from(!crc);
        if words.len() >= PASS_WORDS + 3 {
            return passes(crc, data);
        }
        // Three runs of m words (1 <= m <= MAX_RUN_WORDS), then the 0 to 2 words left.
        let m = words.len() / 3;
        let abc = &words[..3 * m];
        let (a, bc) = abc.split_at(m);
        let (b, c) = bc.split_at(m);
        let (mut reg_b, mut reg_c) = (0u64, 0u64);
        macro_rules! turn {
            ($x:expr, $y:expr, $z:expr) => {
                for i in 0..$x.len() {
                    reg = _mm_crc32_u64(reg, word(&$x[i]));
                    reg_b = _mm_crc32_u64(reg_b, word(&$y[i]));
                    reg_c = _mm_crc32_u64(reg_c, word(&$z[i]));
                }
            };
        }
        // Thirty-two words of each run a turn, then the rest (under thirty-two) in turns of
        // sixteen, eight, four, two and one as its bits say.
        let (a_turns, mut a) = a.as_chunks::<LONG_TURN>();
        let (b_turns, mut b) = b.as_chunks::<LONG_TURN>();
        let (c_turns, mut c) = c.as_chunks::<LONG_TURN>();
        for ((x, y), z) in a_turns.iter().zip(b_turns).zip(c_turns) {
            turn!(x, y, z);
        }
        macro_rules! part {
            ($n:literal) => {
                if let (Some((x, ra)), Some((y, rb)), Some((z, rc))) = (
                    a.split_first_chunk::<$n>(),
                    b.split_first_chunk::<$n>(),
                    c.split_first_chunk::<$n>(),
                ) {
                    turn!(x, y, z);
                    (a, b, c) = (ra, rb, rc);
                }
            };
        }
        part!(16);
        part!(8);
        part!(4);
        part!(2);
        part!(1);
        debug_assert!(a.is_empty() && b.is_empty() && c.is_empty());
        // Move the first register over two runs and the second over one, add the third.
        let product = |r: u64, k: u32| {
            let k = _mm_cvtsi32_si128(k as i32);
            _mm_clmulepi64_si128(_mm_cvtsi64_si128(r as i64), k, 0)
        };
        let moved = _mm_xor_si128(product(reg, SHIFT[2 * m]), product(reg_b, SHIFT[m]));
        reg = _mm_crc32_u64(0, _mm_cvtsi128_si64(moved) as u64) ^ reg_c;
        let rest = &words[3 * m..];
        debug_assert!(rest.len() < 3);
        if let Some(w) = rest.first() {
            reg = _mm_crc32_u64(reg, word(w));
        }
        if let Some(w) = rest.get(1) {
            reg = _mm_crc32_u64(reg, word(w));
        }
        finish(reg, tail)
    }
    /// [`three_streams`] for data longer than one pass takes: a pass at a time, then the
    /// last (at least three words).
    #[multiversion::target::target_cfg(all(
        target_arch = "x86_64",
        target_feature = "sse4.2",
        target_feature = "pclmulqdq"
    ))]
    #[multiversion::inherit_target]
    #[cold]
    #[inline(never)]
    fn passes(mut crc: u32, mut data: &[u8]) -> u32 {
        while data.len() >= 8 * (PASS_WORDS + 3) {
            let (pass, rest) = data.split_at(8 * PASS_WORDS);
            crc = three_streams(crc, pass);
            data = rest;
        }
        three_streams(crc, data)
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
        for m in [1, 2, 3, 60, MAX_RUN_WORDS, 2 * MAX_RUN_WORDS] {
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
        let data: Vec<u8> = (0..26_000u32).map(|i| (i * 131 + 7) as u8).collect();
        let pass = 8 * PASS_WORDS;
        let lens = (0..400)
            .chain([1439, 1440, 1448, 1460, 4095, 8940, 12_999, 25_999])
            .chain([pass, 2 * pass].into_iter().flat_map(|at| at - 9..at + 33));
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

    /// The definition, one bit at a time, continuing from `crc` as [`append`] does.
    fn bitwise(crc: u32, data: &[u8]) -> u32 {
        let mut reg = !crc;
        for &b in data {
            reg ^= u32::from(b);
            for _ in 0..8 {
                reg = (reg >> 1) ^ (POLY & 0u32.wrapping_sub(reg & 1));
            }
        }
        !reg
    }

    proptest::proptest! {
        /// Any length (one pass and more), start value and split agrees with the definition.
        #[test]
        fn any_length_start_and_split_agrees_with_the_definition(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..20_000),
            start in proptest::prelude::any::<u32>(),
            cut in 0usize..20_000,
        ) {
            let want = bitwise(start, &data);
            proptest::prop_assert_eq!(append(start, &data), want);
            let (a, b) = data.split_at(cut.min(data.len()));
            proptest::prop_assert_eq!(append(append(start, a), b), want);
        }
    }
}
