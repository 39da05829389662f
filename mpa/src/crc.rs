//! CRC32c (Castagnoli) as MPA uses it (draft §5.2).
//!
//! The value is the standard CRC-32C (iSCSI header/data digest, check value
//! `crc32c(b"123456789") == 0xE306_9283`). On the wire it goes **least significant
//! octet first**, as iSCSI sends it: Figure 5's CRC 0x84B3864C appears as `4C 86 B3 84`.

/// Octets of the CRC field that ends every FPDU.
pub const CRC_LEN: usize = 4;

/// The code that computes CRC-32C, chosen by the CPU and the length. The choice is made here
/// and nowhere else; [`CrcCode::for_len`] says which runs, [`describe`] names it for reports.
///
/// Measured in instructions (callgrind) and time on an AMD EPYC without AVX-512, per call:
/// up to 256 octets crc-fast's unrolled `crc32` takes fewest (206 against 254 at 256 octets);
/// from there to about 4 KiB the `crc32c` crate's three-way `crc32q` loop (SSE4.2) does (690
/// against 1,098 at 1,440 octets, an MTU 1500 FPDU, in about the same time); from 4 KiB
/// crc-fast's carry-less-multiply folding does (3,666 against 4,382 at 8,940, an MTU 9000
/// FPDU). With AVX-512 and VPCLMULQDQ crc-fast's wide folding is the fastest code at every
/// length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrcCode {
    /// The `crc32c` crate: `crc32q` over three interleaved streams (SSE4.2), or its tables.
    Crc32q,
    /// crc-fast: `crc32` unrolled up to 256 octets, carry-less-multiply folding above, at the
    /// widest the CPU has (its own run-time choice, see `crc_fast::get_calculator_target`).
    CrcFast,
}

/// Up to this many octets crc-fast's unrolled `crc32` beats the `crc32c` crate.
pub const SHORT_UP_TO: usize = 256;

/// From this many octets crc-fast's folding beats the `crc32c` crate where the CPU lacks
/// AVX-512 VPCLMULQDQ (an MTU 9000 FPDU folds; an MTU 1500 one does not).
pub const FOLDING_FROM: usize = 4096;

impl CrcCode {
    /// The code [`crc32c()`] runs for `len` octets on this CPU.
    #[inline]
    pub fn for_len(len: usize) -> CrcCode {
        if len <= SHORT_UP_TO || len >= FOLDING_FROM || wide_folding() {
            CrcCode::CrcFast
        } else {
            CrcCode::Crc32q
        }
    }
}

/// Whether the CPU has crc-fast's widest folding (AVX-512 with VPCLMULQDQ), which beats
/// `crc32q` at every length.
#[inline]
fn wide_folding() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("vpclmulqdq")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        true
    }
}

/// Which code computes CRC-32C on this CPU, for reports.
pub fn describe() -> String {
    let fast = crc_fast::get_calculator_target(crc_fast::CrcAlgorithm::Crc32Iscsi);
    match CrcCode::for_len(SHORT_UP_TO + 1) {
        CrcCode::CrcFast => format!("crc-fast {fast}"),
        CrcCode::Crc32q => {
            #[cfg(target_arch = "x86_64")]
            let middle = if std::arch::is_x86_feature_detected!("sse4.2") {
                "crc32c crate's SSE4.2 crc32q 3-way"
            } else {
                "crc32c crate's tables"
            };
            #[cfg(not(target_arch = "x86_64"))]
            let middle = "crc32c crate";
            format!(
                "crc-fast {fast} up to {SHORT_UP_TO} octets and from {FOLDING_FROM}, \
                 {middle} between"
            )
        }
    }
}

/// CRC-32C of `data`, by the code [`CrcCode::for_len`] picks. Inlined into its two callers
/// (FPDU encode and decode): a call of its own cost a 64 B message's four CRCs 80
/// instructions.
#[inline(always)]
pub fn crc32c(data: &[u8]) -> u32 {
    match CrcCode::for_len(data.len()) {
        CrcCode::Crc32q => crc32c::crc32c(data),
        CrcCode::CrcFast => crc_fast::crc32_iscsi(data),
    }
}

/// Continues a CRC-32C: `crc32c_append(crc32c(a), b) == crc32c(a ++ b)`; start from 0.
#[inline]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    match CrcCode::for_len(data.len()) {
        CrcCode::Crc32q => crc32c::crc32c_append(crc, data),
        CrcCode::CrcFast => {
            // The register holds the value before the final inversion.
            let mut d = crc_fast::Digest::new_with_init_state(
                crc_fast::CrcAlgorithm::Crc32Iscsi,
                u64::from(!crc),
            );
            d.update(data);
            d.finalize() as u32
        }
    }
}

/// The four wire octets of a CRC value (least significant octet first).
#[inline]
pub fn crc_to_wire(crc: u32) -> [u8; CRC_LEN] {
    crc.to_le_bytes()
}

/// The CRC value carried by four wire octets (least significant octet first).
#[inline]
pub fn crc_from_wire(wire: [u8; CRC_LEN]) -> u32 {
    u32::from_le_bytes(wire)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_value_matches_the_crc32c_catalogue() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    /// RFC 3720 B.4 digests: the wire octets are the LSB-first value (MPA-51).
    #[test]
    fn rfc3720_vectors_wire_order_lsb_first() {
        assert_eq!(crc_to_wire(crc32c(&[0u8; 32])), [0xaa, 0x36, 0x91, 0x8a]);
        assert_eq!(crc_to_wire(crc32c(&[0xffu8; 32])), [0x43, 0xab, 0xa8, 0x62]);
        let inc: Vec<u8> = (0u8..32).collect();
        assert_eq!(crc_to_wire(crc32c(&inc)), [0x4e, 0x79, 0xdd, 0x46]);
        let dec: Vec<u8> = (0u8..32).rev().collect();
        assert_eq!(crc_to_wire(crc32c(&dec)), [0x5c, 0xdb, 0x3f, 0x11]);
    }

    #[test]
    fn append_equals_one_shot() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        for cut in [0, 1, 3, 4, 511, 999, 1000] {
            let (a, b) = data.split_at(cut);
            assert_eq!(crc32c_append(crc32c(a), b), crc32c(&data), "cut {cut}");
        }
        assert_eq!(crc_from_wire(crc_to_wire(0x84B3_864C)), 0x84B3_864C);
    }

    /// CRC-32C one bit at a time (reflected polynomial 0x82F63B78): the definition, with no
    /// table and no instruction to trust.
    fn reference(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in data {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = (crc >> 1) ^ (0x82F6_3B78 & 0u32.wrapping_sub(crc & 1));
            }
        }
        !crc
    }

    #[test]
    fn the_reference_has_the_catalogue_check_value() {
        assert_eq!(reference(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn the_code_changes_at_the_two_lengths_only() {
        let middle = CrcCode::for_len(SHORT_UP_TO + 1);
        assert_eq!(CrcCode::for_len(FOLDING_FROM - 1), middle);
        for len in [0, 1, SHORT_UP_TO, FOLDING_FROM, 9000] {
            assert_eq!(CrcCode::for_len(len), CrcCode::CrcFast, "len {len}");
        }
        assert!(describe().starts_with("crc-fast"));
    }

    #[test]
    fn every_length_around_the_switches_matches_the_definition() {
        let data: Vec<u8> = (0..FOLDING_FROM as u32 + 70)
            .map(|i| (i * 31 + 7) as u8)
            .collect();
        let around = |at: usize| at.saturating_sub(70)..at + 70;
        for len in (0..70)
            .chain(around(SHORT_UP_TO))
            .chain(around(FOLDING_FROM))
        {
            let d = &data[..len];
            assert_eq!(crc32c(d), reference(d), "len {len}");
            assert_eq!(
                crc32c_append(crc32c(&d[..len / 3]), &d[len / 3..]),
                reference(d)
            );
        }
    }

    proptest::proptest! {
        /// Both codes, and so [`crc32c()`] on every side of [`SHORT_UP_TO`] and
        /// [`FOLDING_FROM`], agree with the bitwise definition at every length and alignment,
        /// appends included.
        #[test]
        fn agrees_with_the_bitwise_definition(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..9000),
            skip in 0usize..64,
            cut in 0usize..9000,
        ) {
            let d = &data[skip.min(data.len())..];
            let want = reference(d);
            proptest::prop_assert_eq!(crc32c(d), want);
            proptest::prop_assert_eq!(crc32c::crc32c(d), want);
            proptest::prop_assert_eq!(crc_fast::crc32_iscsi(d), want);
            let (a, b) = d.split_at(cut.min(d.len()));
            proptest::prop_assert_eq!(crc32c_append(reference(a), b), want);
        }
    }
}
