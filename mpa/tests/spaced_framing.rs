//! The one-pass framing (the ULPDU written once into its stretch between marker slots, the
//! markers afterwards) against a reference that frames octet by octet, at every FPDU start a
//! 512-octet marker interval allows and at lengths around every boundary; and the receive
//! side's stretch read back to the same ULPDU.

use mpa::crc::{crc32c, crc_to_wire};
use mpa::fpdu::{is_valid_start, pad_len};
use mpa::{decode_fpdu, encode_fpdu_spaced, encode_fpdu_with, Decoded, FramingConfig};

/// Octet-by-octet framing straight from the draft's rules: a marker before any octet that
/// falls on a stream offset that is a multiple of 512 (FPDUPTR 0 if it leads the FPDU, else
/// its distance back to ULPDU_Length), one after PAD on such an offset, then the CRC.
fn reference(offset: u32, ulpdu: &[u8]) -> Vec<u8> {
    let mut body = (ulpdu.len() as u16).to_be_bytes().to_vec();
    body.extend_from_slice(ulpdu);
    body.extend(std::iter::repeat_n(0u8, pad_len(ulpdu.len())));
    let mut out = Vec::new();
    let on_marker = |out: &Vec<u8>| (offset as usize + out.len()).is_multiple_of(512);
    let mut header = None;
    for &b in &body {
        if on_marker(&out) {
            let ptr = header.map_or(0u16, |h: usize| (out.len() - h) as u16);
            out.extend_from_slice(&[0, 0, (ptr >> 8) as u8, ptr as u8]);
        }
        header.get_or_insert(out.len());
        out.push(b);
    }
    if on_marker(&out) {
        let ptr = (out.len() - header.unwrap()) as u16;
        out.extend_from_slice(&[0, 0, (ptr >> 8) as u8, ptr as u8]);
    }
    let crc = crc32c(&out);
    out.extend_from_slice(&crc_to_wire(crc));
    out
}

const LENS: [usize; 16] = [
    0, 1, 2, 3, 13, 14, 17, 18, 100, 505, 506, 507, 508, 1017, 1440, 2600,
];

/// Every frame the one-pass encoder emits equals the reference, markers at every offset of
/// an interval; and `encode_fpdu_with` hands its filler exactly the runs between markers.
#[test]
fn one_pass_framing_equals_octet_by_octet_framing() {
    let cfg = FramingConfig {
        markers: true,
        crc: true,
    };
    for offset in (0..1024u32).step_by(4).filter(|&o| is_valid_start(o)) {
        for len in LENS {
            let ulpdu: Vec<u8> = (0..len).map(|i| (i * 7 + 1) as u8).collect();
            let want = reference(offset, &ulpdu);
            let mut out = vec![0xAAu8; want.len() + 8];
            let n = encode_fpdu_spaced(
                cfg,
                offset,
                len,
                &mut |dst, spacing| spacing.copy_in(&ulpdu, dst),
                &mut out,
            )
            .unwrap();
            assert_eq!(&out[..n], &want[..], "offset {offset} len {len}");

            let mut at = 0;
            let mut pieces = 0;
            let mut out2 = vec![0x55u8; want.len()];
            encode_fpdu_with(
                cfg,
                offset,
                len,
                &mut |dst| {
                    dst.copy_from_slice(&ulpdu[at..at + dst.len()]);
                    at += dst.len();
                    pieces += 1;
                },
                &mut out2,
            )
            .unwrap();
            assert_eq!(out2, want, "offset {offset} len {len}");
            let markers_inside = (0..want.len())
                .filter(|p| (offset as usize + p).is_multiple_of(512))
                .count();
            assert!(pieces <= markers_inside + 1, "offset {offset} len {len}");

            let Decoded::Complete(f) = decode_fpdu(cfg, offset, &want).unwrap() else {
                panic!("incomplete at offset {offset} len {len}");
            };
            let (stretch, spacing) = f.ulpdu_spaced();
            let mut back = vec![0u8; len];
            spacing.copy_out(stretch, &mut back);
            assert_eq!(back, ulpdu, "offset {offset} len {len}");
            assert_eq!(back, f.ulpdu_to_vec());
        }
    }
}

/// A marker whose FPDUPTR is wrong is still refused by the receiver, at any marker of the
/// FPDU; the literal origin (A1) is still accepted.
#[test]
fn a_wrong_marker_is_refused_anywhere() {
    let cfg = FramingConfig {
        markers: true,
        crc: false,
    };
    for offset in [0u32, 8, 500, 508] {
        let ulpdu = vec![3u8; 1440];
        let good = reference(offset, &ulpdu);
        let marks: Vec<usize> = (0..good.len() - 4)
            .filter(|p| (offset as usize + p).is_multiple_of(512))
            .collect();
        assert!(!marks.is_empty());
        for &m in &marks {
            let mut bad = good.clone();
            bad[m + 3] ^= 0x10;
            assert!(
                decode_fpdu(cfg, offset, &bad).is_err(),
                "offset {offset} marker {m}"
            );
            if m > 0 && offset % 512 == 0 {
                // Pointer to the leading marker instead of ULPDU_Length: accepted.
                let mut lit = good.clone();
                lit[m + 2..m + 4].copy_from_slice(&(m as u16).to_be_bytes());
                assert!(
                    decode_fpdu(cfg, offset, &lit).is_ok(),
                    "offset {offset} marker {m}"
                );
            }
        }
    }
}

/// `Framer::fit` gives a ULPDU whose FPDU fits the room, and `skip_fitted` moves
/// the offset exactly as `skip` does, whether or not the ULPDU is the fitted one.
#[test]
fn fit_and_skip_fitted_agree_with_skip() {
    for markers in [false, true] {
        let cfg = FramingConfig { markers, crc: true };
        for offset in (0..1024u32).step_by(4).filter(|&o| is_valid_start(o)) {
            for room in [0usize, 20, 600, 1448, 9000] {
                let f = mpa::Framer::new(cfg, offset);
                let fit = f.fit(1426, room);
                let cap = fit.ulpdu_len();
                assert!(
                    cap == 0 || f.wire_len(cap) <= room,
                    "{markers} {offset} {room}"
                );
                for len in [cap, cap / 2] {
                    let (mut a, mut b) = (f.clone(), f.clone());
                    assert_eq!(a.skip_fitted(fit, len), b.skip(len));
                    assert_eq!(a.offset(), b.offset());
                }
            }
        }
    }
}
