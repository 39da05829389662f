//! CRC32c (Castagnoli) as MPA uses it (draft §5.2).
//!
//! The value is the standard CRC-32C (iSCSI header/data digest, check value
//! `crc32c(b"123456789") == 0xE306_9283`). On the wire it goes **least significant
//! octet first**, as iSCSI sends it: Figure 5's CRC 0x84B3864C appears as `4C 86 B3 84`.

/// Octets of the CRC field that ends every FPDU.
pub const CRC_LEN: usize = 4;

/// Which code computes CRC-32C on this CPU, for reports.
pub fn describe() -> String {
    let folding = crc_fast::get_calculator_target(crc_fast::CrcAlgorithm::Crc32Iscsi);
    format!("crc-fast {folding}")
}

/// CRC-32C of `data`. `crc-fast` picks the widest carry-less-multiply folding the CPU has at
/// run time (PCLMULQDQ, VPCLMULQDQ/AVX-512): about four times the `crc32c` crate's
/// rate on a 1460-octet FPDU (`cargo bench -p mpa --bench framing`).
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(data)
}

/// Continues a CRC-32C: `crc32c_append(crc32c(a), b) == crc32c(a ++ b)`; start from 0.
#[inline]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    // The register holds the value before the final inversion.
    let mut d =
        crc_fast::Digest::new_with_init_state(crc_fast::CrcAlgorithm::Crc32Iscsi, u64::from(!crc));
    d.update(data);
    d.finalize() as u32
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

    proptest::proptest! {
        /// crc-fast agrees with an independent implementation (the `crc32c` crate) at every
        /// length and alignment, appends included.
        #[test]
        fn agrees_with_the_crc32c_crate(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..9000),
            skip in 0usize..64,
            cut in 0usize..9000,
        ) {
            let d = &data[skip.min(data.len())..];
            proptest::prop_assert_eq!(crc32c(d), crc32c::crc32c(d));
            let (a, b) = d.split_at(cut.min(d.len()));
            proptest::prop_assert_eq!(crc32c_append(crc32c::crc32c(a), b), crc32c::crc32c(d));
        }
    }
}
