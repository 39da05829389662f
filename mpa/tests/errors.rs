//! Receive-side error actions of draft §7: corrupted CRC, wrong marker,
//! bad length; each gives the named code and action, and delivery stops (MPA-111) without
//! closing TCP (MPA-112).

mod common;
use common::*;
use mpa::locate::{locate, LocateOptions};
use mpa::{decode_fpdu, ErrorAction, ErrorCode, Framer, FramingConfig, FramingError, StreamParser};

/// Three FPDUs from offset 0x1d0 (so the second holds the marker at 0x200).
fn three(cfg: FramingConfig) -> (Vec<u8>, [usize; 3]) {
    let mut f = Framer::new(cfg, 0x1d0);
    let mut s = Vec::new();
    let a = f.encode_to_vec(&[b"first ULPDU..."], &mut s).unwrap();
    let b = f.encode_to_vec(&[&[0x42u8; 40]], &mut s).unwrap();
    let c = f.encode_to_vec(&[b"third"], &mut s).unwrap();
    (s, [a, b, c])
}

fn drain(p: &mut StreamParser) -> (Vec<Vec<u8>>, Option<FramingError>) {
    let mut got = Vec::new();
    loop {
        match p.next_fpdu() {
            Ok(Some(f)) => got.push(f.ulpdu_to_vec()),
            Ok(None) => return (got, None),
            Err(e) => return (got, Some(e)),
        }
    }
}

/// MPA-55, MPA-111, MPA-112: any single bit flip in Figure 6 (marker bits and CRC field
/// included) is a CRC error: code 2, stop delivery, TCP stays open; nothing delivered.
#[test]
fn mpa_55_every_bit_flip_of_figure_6_is_code_2() {
    let fig6 = hex("00 2a 40 03 00 00 00 00 00 00 00 00 00 00 00 02
                    00 00 00 00 00 00 00 14 00 00 00 00 00 00 00 00
                    00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
                    a1 9c d1 03");
    for bit in 0..fig6.len() * 8 {
        let mut w = fig6.clone();
        w[bit / 8] ^= 1 << (bit % 8);
        match decode_fpdu(MARKERS_CRC, 0x1ec, &w) {
            // Flips in ULPDU_Length may make the FPDU look longer: then it is incomplete,
            // and an in-order parser fed more data would hit the CRC error later.
            Ok(mpa::Decoded::Incomplete { .. }) if bit < 16 => {}
            Err(e) => {
                assert!(
                    matches!(e, FramingError::CrcMismatch | FramingError::UlpduTooLong(_)),
                    "bit {bit}: {e:?}"
                );
                assert_eq!(e.code(), ErrorCode::CrcError);
                assert_eq!(e.action(), ErrorAction::StopDelivery);
            }
            other => panic!("bit {bit}: {other:?}"),
        }
    }
}

/// MPA-111: corrupt FPDU 2 of 3 → FPDU 1 delivered, FPDU 3 never, and the parser keeps
/// reporting the error and takes no more input.
#[test]
fn mpa_111_no_delivery_after_crc_error() {
    let (mut s, [a, _, _]) = three(MARKERS_CRC);
    s[a + 6] ^= 0x01;
    let mut p = StreamParser::new(MARKERS_CRC, 0x1d0);
    p.push(&s);
    let (got, err) = drain(&mut p);
    assert_eq!(got, vec![b"first ULPDU...".to_vec()]);
    let err = err.unwrap();
    assert_eq!(
        (err, err.code(), err.action()),
        (
            FramingError::CrcMismatch,
            ErrorCode::CrcError,
            ErrorAction::StopDelivery
        )
    );
    assert_eq!(p.next_fpdu().unwrap_err(), FramingError::CrcMismatch);
    assert_eq!(p.push(b"more"), 0);
    assert_eq!(p.error(), Some(FramingError::CrcMismatch));
    // MPA-112: TCP stays open; the other half connection can still send (e.g. a Terminate).
    let mut tx = Framer::new(MARKERS_CRC, 0);
    assert!(tx.encode_to_vec(&[b"terminate"], &mut Vec::new()).is_ok());
}

/// MPA-108: a wrong FPDUPTR with a valid CRC (the sender lied consistently) is a marker
/// error: code 3, stop delivery — in order and in the out-of-order locator.
#[test]
fn mpa_108_wrong_fpduptr_with_valid_crc_is_code_3() {
    let (mut s, [a, b, _]) = three(MARKERS_CRC);
    // The marker at stream 0x200 = index 0x30 lies in FPDU 2 ([a, a+b)).
    let m = 0x200 - 0x1d0;
    assert!(a <= m && m < a + b);
    s[m + 2..m + 4].copy_from_slice(&0x0024u16.to_be_bytes());
    let crc = mpa::crc::crc32c(&s[a..a + b - 4]);
    s[a + b - 4..a + b].copy_from_slice(&mpa::crc::crc_to_wire(crc));
    let mut p = StreamParser::new(MARKERS_CRC, 0x1d0);
    p.push(&s);
    let (got, err) = drain(&mut p);
    assert_eq!(got.len(), 1);
    let err = err.unwrap();
    assert_eq!(
        (err, err.code(), err.action()),
        (
            FramingError::MarkerMismatch,
            ErrorCode::MarkerError,
            ErrorAction::StopDelivery
        )
    );
    // Out of order, FPDU 2 found by the length chain from FPDU 1 (gap closing) or from its
    // known start: the marker is checked and the error reported.
    for start in [0, a] {
        let seg = &s[start..];
        let opts = LocateOptions {
            known_start: Some(0x1d0 + start as u32),
        };
        let found: Vec<_> = locate(MARKERS_CRC, 0x1d0 + start as u32, seg, opts).collect();
        let e = found.last().expect("reported").unwrap_err();
        assert_eq!(
            (e.error.code(), e.offset),
            (ErrorCode::MarkerError, 0x1d0 + a as u32)
        );
    }
}

/// MPA-35: low FPDUPTR bits are masked, not an error (the CRC covers them).
#[test]
fn mpa_35_low_pointer_bits_not_an_error() {
    let (mut s, [a, b, _]) = three(MARKERS_CRC);
    let m = 0x200 - 0x1d0;
    s[m + 3] |= 0x03;
    let crc = mpa::crc::crc32c(&s[a..a + b - 4]);
    s[a + b - 4..a + b].copy_from_slice(&mpa::crc::crc_to_wire(crc));
    let mut p = StreamParser::new(MARKERS_CRC, 0x1d0);
    p.push(&s);
    assert_eq!(
        drain(&mut p),
        (
            vec![
                b"first ULPDU...".to_vec(),
                vec![0x42; 40],
                b"third".to_vec()
            ],
            None
        )
    );
}

/// A11: ULPDU_Length above 64768 is rejected at once (no waiting for 64 KiB): reported
/// like code 2, stop delivery.
#[test]
fn a11_bad_length_rejected_at_once() {
    let mut p = StreamParser::new(PLAIN_CRC, 0);
    p.push(&[0xFD, 0x01]);
    let (_, err) = drain(&mut p);
    let err = err.unwrap();
    assert_eq!(err, FramingError::UlpduTooLong(0xFD01));
    assert_eq!(
        (err.code(), err.action()),
        (ErrorCode::CrcError, ErrorAction::StopDelivery)
    );
    // 64768 itself is a legal length: just incomplete.
    let mut p = StreamParser::new(PLAIN_CRC, 0);
    p.push(&64768u16.to_be_bytes());
    assert_eq!(p.next_fpdu(), Ok(None));
}

/// A10 (our choice): ULPDU_Length 0 is a well-formed FPDU; it is delivered as an empty
/// ULPDU (DDP then rejects a segment too short for its header).
#[test]
fn a10_zero_length_ulpdu_delivered_empty() {
    for cfg in [PLAIN_CRC, MARKERS_CRC] {
        let mut f = Framer::new(cfg, 0);
        let mut s = Vec::new();
        f.encode_to_vec(&[], &mut s).unwrap();
        f.encode_to_vec(&[b"after"], &mut s).unwrap();
        let mut p = StreamParser::new(cfg, 0);
        p.push(&s);
        assert_eq!(drain(&mut p), (vec![vec![], b"after".to_vec()], None));
    }
}

/// MPA-28, MPA-48: with CRCs off the field is not checked: garbage is still delivered.
/// MPA-47: with CRCs on (e.g. only the peer asked) it is checked.
#[test]
fn mpa_28_47_48_crc_off_not_checked_on_checked() {
    let off = FramingConfig {
        markers: false,
        crc: false,
    };
    let mut f = Framer::new(off, 0);
    let mut s = Vec::new();
    f.encode_to_vec(&[b"data"], &mut s).unwrap();
    assert_eq!(
        &s[s.len() - 4..],
        &[0, 0, 0, 0],
        "A15: CRC field 0 when off"
    );
    let last = s.len() - 1;
    s[last] = 0x99;
    let mut p = StreamParser::new(off, 0);
    p.push(&s);
    assert_eq!(drain(&mut p), (vec![b"data".to_vec()], None));
    let mut p = StreamParser::new(PLAIN_CRC, 0);
    p.push(&s);
    assert_eq!(drain(&mut p).1, Some(FramingError::CrcMismatch));
}

/// Locator: a corrupted CRC in a marker-anchored FPDU is reported (code 2); a segment that
/// starts mid-FPDU is anchored by its marker alone (MPA-70).
#[test]
fn locator_crc_error_in_marker_anchored_fpdu() {
    let (s, [a, _, _]) = three(MARKERS_CRC);
    // Segment starting mid-FPDU-1: the marker anchors FPDU 2.
    let seg = &s[4..];
    let got: Vec<_> = locate(MARKERS_CRC, 0x1d4, seg, LocateOptions::default()).collect();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].unwrap().fpdu.offset(), 0x1d0 + a as u32);
    assert_eq!(got[1].unwrap().fpdu.ulpdu_to_vec(), b"third");
    let mut bad = s.clone();
    bad[a + 8] ^= 0x80;
    let got: Vec<_> = locate(MARKERS_CRC, 0x1d4, &bad[4..], LocateOptions::default()).collect();
    assert_eq!(got.len(), 1, "iteration ends at the error");
    let e = got[0].unwrap_err();
    assert_eq!(
        (e.error, e.offset),
        (FramingError::CrcMismatch, 0x1d0 + a as u32)
    );
    assert_eq!(e.error.action(), ErrorAction::StopDelivery);
}
