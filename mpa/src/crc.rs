//! CRC32c (Castagnoli) as MPA uses it (draft §5.2).
//!
//! The value is the standard CRC-32C (iSCSI header/data digest, check value
//! `crc32c(b"123456789") == 0xE306_9283`). On the wire it goes **least significant
//! octet first**, as iSCSI sends it: Figure 5's CRC 0x84B3864C appears as `4C 86 B3 84`.

/// Octets of the CRC field that ends every FPDU.
pub const CRC_LEN: usize = 4;

/// The code that computes CRC-32C, chosen by the CPU and the length: `crc_interleaved::append`
/// makes the choice (the CPU asked once, the length per call), [`CrcCode::for_len`] says which
/// runs, [`describe`] names it for reports.
///
/// Measured in instructions (callgrind, whose virtual CPU has no AVX-512; a loop of calls on
/// one buffer, its own few instructions included), per call: at 1,440 octets (an MTU 1500
/// FPDU) the interleaved `crc32q` takes 297 against the `crc32c` crate's 651 and crc-fast's
/// 979; at 8,940 (MTU 9000) 1,269 against 4,347 and 3,589; at 90, 94 against 183 and 123. With AVX-512 and VPCLMULQDQ crc-fast's wide folding moves more octets a cycle than
/// `crc32q` can, and takes over above [`SHORT_UP_TO`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrcCode {
    /// Ours: `crc32q` over three interleaved streams joined by a carry-less multiply (SSE4.2
    /// and PCLMULQDQ), or the `crc32c` crate where the CPU lacks them.
    Interleaved,
    /// crc-fast's carry-less-multiply folding at AVX-512 width.
    WideFolding,
}

/// Up to this many octets the interleaved code runs on every CPU.
pub const SHORT_UP_TO: usize = 256;

impl CrcCode {
    /// The code [`crc32c()`] runs for `len` octets on this CPU.
    #[inline]
    pub fn for_len(len: usize) -> CrcCode {
        if len > SHORT_UP_TO && wide_folding() {
            CrcCode::WideFolding
        } else {
            CrcCode::Interleaved
        }
    }
}

/// Whether the CPU has crc-fast's widest folding (AVX-512 with VPCLMULQDQ).
#[inline]
fn wide_folding() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("vpclmulqdq")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Which code computes CRC-32C on this CPU, for reports.
pub fn describe() -> String {
    let ours = if crate::crc_interleaved::interleaved() {
        "crc32q 3-way interleaved (SSE4.2, PCLMULQDQ join)"
    } else {
        "crc32c crate"
    };
    match CrcCode::for_len(SHORT_UP_TO + 1) {
        CrcCode::Interleaved => ours.to_string(),
        CrcCode::WideFolding => {
            let fast = crc_fast::get_calculator_target(crc_fast::CrcAlgorithm::Crc32Iscsi);
            format!("{ours} up to {SHORT_UP_TO} octets, crc-fast {fast} above")
        }
    }
}

/// CRC-32C of `data`, by the code [`CrcCode::for_len`] names.
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c_append(0, data)
}

/// Continues a CRC-32C: `crc32c_append(crc32c(a), b) == crc32c(a ++ b)`; start from 0. The
/// code was picked once for this CPU (`crc_interleaved::append`); [`CrcCode::for_len`] names it.
#[inline]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    crate::crc_interleaved::append(crc, data)
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
    fn the_code_changes_at_one_length_only() {
        for len in [0, 1, SHORT_UP_TO] {
            assert_eq!(CrcCode::for_len(len), CrcCode::Interleaved, "len {len}");
        }
        let long = CrcCode::for_len(SHORT_UP_TO + 1);
        assert_eq!(CrcCode::for_len(9000), long);
        assert_eq!(long == CrcCode::WideFolding, wide_folding());
        assert!(describe().starts_with("crc32"));
    }

    #[test]
    fn every_length_around_the_switches_matches_the_definition() {
        let data: Vec<u8> = (0..13_000u32).map(|i| (i * 31 + 7) as u8).collect();
        let around = |at: usize| at.saturating_sub(70)..at + 70;
        for len in (0..70)
            .chain(around(crate::crc_interleaved::INTERLEAVE_FROM))
            .chain(around(SHORT_UP_TO))
            .chain(around(12_288))
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
        /// Every code, and so [`crc32c()`] on every side of [`SHORT_UP_TO`], agrees with the
        /// bitwise definition at every length and alignment, appends included.
        #[test]
        fn agrees_with_the_bitwise_definition(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..9000),
            skip in 0usize..64,
            cut in 0usize..9000,
        ) {
            let d = &data[skip.min(data.len())..];
            let want = reference(d);
            proptest::prop_assert_eq!(crc32c(d), want);
            proptest::prop_assert_eq!(crate::crc_interleaved::append(0, d), want);
            proptest::prop_assert_eq!(crc32c::crc32c(d), want);
            proptest::prop_assert_eq!(crc_fast::crc32_iscsi(d), want);
            let (a, b) = d.split_at(cut.min(d.len()));
            proptest::prop_assert_eq!(crc32c_append(reference(a), b), want);
        }
    }
}
