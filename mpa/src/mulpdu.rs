//! MULPDU, the largest ULPDU that keeps an FPDU within one segment (draft §5.3.2).

use crate::fpdu::MAX_ULPDU_LEN;

/// Smallest MULPDU ever offered (MPA-67, MPA-68).
pub const MIN_MULPDU: usize = 128;
/// Largest MULPDU (MPA-21, MPA-22).
pub const MAX_MULPDU: usize = MAX_ULPDU_LEN;
/// EMSS to assume when TCP cannot report one (MPA-11, A13).
pub const DEFAULT_EMSS: u32 = 1460;

/// MULPDU for an EMSS (A12: min(MSS, PMTU − IP/TCP headers)), with or without markers:
/// `EMSS − (6 + 4⌈EMSS/512⌉ + EMSS mod 4)` with markers (MPA-63), `EMSS − (6 + EMSS mod 4)`
/// without (MPA-64), clamped to [128, 64768] (MPA-21, MPA-67).
pub fn mulpdu(emss: u32, markers: bool) -> usize {
    let e = i64::from(emss);
    let marker_room = if markers { 4 * ((e + 511) / 512) } else { 0 };
    let raw = e - (6 + marker_room + e % 4);
    raw.clamp(MIN_MULPDU as i64, MAX_MULPDU as i64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fpdu::{fpdu_wire_len, FramingConfig};

    /// MPA-63/64/67: EMSS against MULPDU with and without markers.
    #[test]
    fn mulpdu_table() {
        let rows: [(u32, usize, usize); 12] = [
            (128, 128, 128),
            (136, 128, 130),
            (536, 522, 530),
            (1448, 1430, 1442),
            (1460, 1442, 1454),
            (1461, 1442, 1454),
            (1462, 1442, 1454),
            (1463, 1442, 1454),
            (4096, 4058, 4090),
            (8960, 8882, 8954),
            (9000, 8922, 8994),
            (65495, 64768, 64768),
        ];
        for (emss, with, without) in rows {
            assert_eq!(mulpdu(emss, true), with, "EMSS {emss} markers");
            assert_eq!(mulpdu(emss, false), without, "EMSS {emss} no markers");
        }
        // MPA-11: unknown EMSS → 1460.
        assert_eq!(mulpdu(DEFAULT_EMSS, true), 1442);
        assert_eq!(mulpdu(DEFAULT_EMSS, false), 1454);
        // MPA-67: EMSS 100 → 128.
        assert_eq!(mulpdu(100, true), 128);
        assert_eq!(mulpdu(0, false), 128);
    }

    /// MPA-21 over every EMSS, and: an FPDU carrying a MULPDU-sized ULPDU never exceeds EMSS
    /// at any marker phase once EMSS ≥ 140 (brute force).
    #[test]
    fn mpa_21_bounds_and_fit_for_every_emss() {
        for emss in 0..=65535u32 {
            for markers in [false, true] {
                let m = mulpdu(emss, markers);
                assert!((MIN_MULPDU..=MAX_MULPDU).contains(&m));
                if m != MIN_MULPDU && m != MAX_MULPDU {
                    assert_eq!(m % 4, 2, "MULPDU ≡ 2 mod 4 so a full FPDU needs no PAD");
                }
            }
        }
        for emss in (140..=65495u32).step_by(97).chain([140, 1460, 9000, 65495]) {
            for markers in [false, true] {
                let m = mulpdu(emss, markers);
                if m == MAX_MULPDU || m == MIN_MULPDU {
                    continue;
                }
                let cfg = FramingConfig { markers, crc: true };
                for phase in (0..512u32).step_by(4) {
                    assert!(
                        fpdu_wire_len(cfg, phase, m) <= emss as usize,
                        "emss {emss} markers {markers} phase {phase}"
                    );
                }
            }
        }
    }
}
