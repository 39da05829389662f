//! The Internet checksum over long data in 256-bit registers, picked at run time.
//!
//! Where the CPU has AVX2, each 32 octets are sixteen 16-bit words in one register, and one
//! `vpmaddwd` against ones adds them in pairs into eight 32-bit lanes: three instructions per
//! 32 octets (flip, multiply-add, add), against four `adc`s. `vpmaddwd` multiplies signed
//! words, so each word is first flipped by 0x8000 (its value less 32,768, as a signed word)
//! and 32,768 per word is added back after the lanes are summed: the exact sum of the words,
//! which [`super::sum`]'s callers chain and fold as any other. Elsewhere the portable
//! add-with-carry chains run.

use multiversion::multiversion;

use super::{fold_once, sum_chains, sum_small, Sum};

/// Octets per pass of the wide loop: each lane stays within ±2^30 over a pass (16,384 words of
/// at most ±32,768 each in all), so neither the lanes nor their sum can overflow 32 bits.
const PASS: usize = 1 << 16;

/// Whether this CPU runs the wide loop.
pub(super) fn avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// [`super::sum`] of `data` (any length; meant for 256 octets and more) onto `acc`.
#[multiversion(targets("x86_64+avx2"))]
pub(super) fn sum(data: &[u8], acc: Sum) -> Sum {
    #[multiversion::target::target_cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
    #[multiversion::inherit_target]
    fn run(data: &[u8], acc: Sum) -> Sum {
        if data.len() < 32 {
            return sum_small(data, acc);
        }
        if data.len() <= PASS {
            return pass_sum(data, acc);
        }
        // Passes of an even length: each next one starts at an even offset.
        data.chunks(PASS).fold(acc, |acc, pass| run(pass, acc))
    }
    #[multiversion::target::target_cfg(not(all(target_arch = "x86_64", target_feature = "avx2")))]
    fn run(data: &[u8], acc: Sum) -> Sum {
        sum_chains(data, acc)
    }
    run(data, acc)
}

/// Keeps the last `r` octets of 32 (`r` even, 2..=30): `MASK[r..r + 32]`.
const MASK: [u8; 64] = {
    let mut m = [0u8; 64];
    let mut i = 32;
    while i < 64 {
        m[i] = 0xFF;
        i += 1;
    }
    m
};

/// [`super::sum`] of `pass` (32 to [`PASS`] octets) onto `acc`: whole 32-octet chunks, eight
/// a turn, then four, two and one; the last 2-30 octets of an even length as one chunk read
/// over its neighbour's octets and masked; an odd last octet by itself.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn pass_sum(pass: &[u8], acc: Sum) -> Sum {
    use std::arch::x86_64::{
        __m256i, _mm256_add_epi32, _mm256_and_si256, _mm256_castsi256_si128,
        _mm256_extracti128_si256, _mm256_madd_epi16, _mm256_set1_epi16, _mm256_setzero_si256,
        _mm256_xor_si256, _mm_add_epi32, _mm_cvtsi128_si32, _mm_shuffle_epi32,
    };
    debug_assert!((32..=PASS).contains(&pass.len()));
    let flip = _mm256_set1_epi16(i16::MIN);
    let ones = _mm256_set1_epi16(1);
    // One unaligned 32-octet load.
    let load = |c: &[u8; 32]| -> __m256i { zerocopy::transmute!(*c) };
    let add = |lanes: __m256i, v: __m256i| {
        _mm256_add_epi32(lanes, _mm256_madd_epi16(_mm256_xor_si256(v, flip), ones))
    };
    let chunks = |lanes: __m256i, cs: &[[u8; 32]]| cs.iter().fold(lanes, |l, c| add(l, load(c)));
    let (whole, rest) = pass.as_chunks::<32>();
    let (eights, few) = whole.as_chunks::<8>();
    let mut lanes = eights
        .iter()
        .fold(_mm256_setzero_si256(), |l, e| chunks(l, e));
    // At most seven chunks left: a turn of four, of two, of one, as they are there.
    let (four, few) = few.split_at(few.len() & 4);
    let (two, one) = few.split_at(few.len() & 2);
    lanes = chunks(chunks(chunks(lanes, four), two), one);
    let mut n = whole.len();
    let even = pass.len() & !1;
    let r = rest.len() & !1;
    if r != 0 {
        let last = pass[even - 32..even]
            .first_chunk::<32>()
            .expect("32 octets");
        let mask = MASK[r..].first_chunk::<32>().expect("32 octets");
        lanes = add(lanes, _mm256_and_si256(load(last), load(mask)));
        n += 1;
    }
    // The eight lanes into one, then the 32,768 per word taken by the flip added back.
    let x = _mm_add_epi32(
        _mm256_castsi256_si128(lanes),
        _mm256_extracti128_si256::<1>(lanes),
    );
    let x = _mm_add_epi32(x, _mm_shuffle_epi32::<0b01_00_11_10>(x));
    let x = _mm_add_epi32(x, _mm_shuffle_epi32::<0b10_11_00_01>(x));
    let words = (i64::from(_mm_cvtsi128_si32(x)) + 32_768 * 16 * n as i64) as Sum;
    // An odd last octet is the high (first) half of a word.
    let odd = match pass.len() & 1 {
        1 => Sum::from(u16::from_ne_bytes([pass[pass.len() - 1], 0])),
        _ => 0,
    };
    fold_once(acc) + words + odd
}

/// No wide loop on other architectures.
#[cfg(not(target_arch = "x86_64"))]
fn pass_sum(pass: &[u8], acc: Sum) -> Sum {
    sum_chains(pass, acc)
}
