//! The draft's printed FPDUs (Figures 5 and 6) and vectors derived from its layouts (CRCs
//! cross-checked with an independent CRC-32C), encoded byte for byte and decoded back.

mod common;
use common::*;
use mpa::fpdu::FpduLayout;
use mpa::{decode_fpdu, encode_fpdu, fpdu_wire_len, Framer, FramingConfig, StreamParser};

const FIG5: &str = "00 00 00 00 00 2a 40 03 00 00 00 00 00 00 00 00
                    00 00 00 01 00 00 00 00 00 00 00 00 00 00 00 00
                    00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
                    4c 86 b3 84";
const FIG6: &str = "00 2a 40 03 00 00 00 00 00 00 00 00 00 00 00 02
                    00 00 00 00 00 00 00 14 00 00 00 00 00 00 00 00
                    00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
                    a1 9c d1 03";

fn encode(cfg: FramingConfig, offset: u32, parts: &[&[u8]]) -> Vec<u8> {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    let mut out = vec![0u8; fpdu_wire_len(cfg, offset, len)];
    let n = encode_fpdu(cfg, offset, parts, &mut out).expect("encode");
    assert_eq!(n, out.len());
    out
}

/// Figure 5: first FPDU of the stream, leading marker (MPA-34, MPA-37, MPA-88), CRC over
/// the marker (MPA-53), CRC LSB first (MPA-51, MPA-54). Gather list: DDP header + payload.
#[test]
fn figure_5_byte_for_byte_and_back() {
    let hdr = send_header([0x40, 0x03], 1);
    let data = [0u8; 24];
    let wire = encode(MARKERS_CRC, 0, &[&hdr, &data]);
    assert_eq!(wire, hex(FIG5));
    assert_eq!(&wire[48..], &[0x4C, 0x86, 0xB3, 0x84]);
    let f = complete(decode_fpdu(MARKERS_CRC, 0, &wire));
    assert_eq!(f.ulpdu_len(), 42, "MPA-24: one 42-octet ULPDU");
    assert_eq!(f.ulpdu_to_vec(), [hdr.clone(), data.to_vec()].concat());
    assert_eq!(f.offset(), 0);
    assert_eq!(f.end_offset(), 52);
    assert!(f.layout().has_leading_marker());
}

/// Figure 6: interior marker at 0x200 with FPDUPTR 0x14 (MPA-33), splitting header from
/// data; CRC over the marker (MPA-52); delivered ULPDU has the marker removed (MPA-41).
#[test]
fn figure_6_byte_for_byte_and_back() {
    let hdr = send_header([0x40, 0x03], 2);
    let data = [0u8; 24];
    let wire = encode(MARKERS_CRC, 0x1ec, &[&hdr, &data]);
    assert_eq!(wire, hex(FIG6));
    assert_eq!(&wire[48..], &[0xA1, 0x9C, 0xD1, 0x03]);
    let f = complete(decode_fpdu(MARKERS_CRC, 0x1ec, &wire));
    assert_eq!(f.ulpdu_to_vec(), [hdr.clone(), data.to_vec()].concat());
    assert_eq!(f.ulpdu_ranges().collect::<Vec<_>>(), vec![2..20, 24..48]);
    assert_eq!(f.ulpdu_contiguous(), None);
    assert_eq!(f.end_offset(), 0x220, "next FPDU at 0x0220");
}

/// The printed CRCs match only with markers inside the coverage (MPA-52, MPA-53).
#[test]
fn crc_excluding_markers_would_not_match() {
    let fig5 = hex(FIG5);
    assert_ne!(mpa::crc::crc32c(&fig5[4..48]), 0x84B3_864C);
    assert_eq!(mpa::crc::crc32c(&fig5[4..48]), 0xC414_81A9);
    let fig6 = hex(FIG6);
    let without: Vec<u8> = [&fig6[..20], &fig6[24..48]].concat();
    assert_eq!(mpa::crc::crc32c(&without), 0xD994_AA37);
    assert_eq!(mpa::crc::crc32c(&fig6[..48]), 0x03D1_9CA1);
}

/// D1: Figure 4 made concrete: ULPDU 00..0f at 0x1f4, marker FPDUPTR 0x000C.
#[test]
fn d1_figure_4_concrete() {
    let ulpdu: Vec<u8> = (0u8..16).collect();
    let wire = encode(MARKERS_CRC, 0x1f4, &[&ulpdu]);
    assert_eq!(
        wire,
        hex("00 10 00 01 02 03 04 05 06 07 08 09 00 00 00 0c 0a 0b 0c 0d 0e 0f 00 00 10 5b 1c 88")
    );
    let f = complete(decode_fpdu(MARKERS_CRC, 0x1f4, &wire));
    assert_eq!(f.ulpdu_to_vec(), ulpdu);
    assert_eq!(f.end_offset(), 0x210);
}

/// D2: marker between PAD and CRC belongs to this FPDU (A14, MPA-52).
#[test]
fn d2_marker_between_pad_and_crc() {
    let ulpdu = [0x11u8; 10];
    let wire = encode(MARKERS_CRC, 0x1f4, &[&ulpdu]);
    assert_eq!(
        wire,
        hex("00 0a 11 11 11 11 11 11 11 11 11 11 00 00 00 0c 16 0c f5 43")
    );
    let f = complete(decode_fpdu(MARKERS_CRC, 0x1f4, &wire));
    assert_eq!(f.ulpdu_to_vec(), ulpdu);
    assert_eq!(f.end_offset(), 0x208);
}

/// D3: marker exactly between FPDUs leads the next FPDU with FPDUPTR 0 (MPA-34, A14).
#[test]
fn d3_marker_between_fpdus() {
    let mut framer = Framer::new(MARKERS_CRC, 0x1f8);
    let mut stream = Vec::new();
    framer.encode_to_vec(&[b"AB"], &mut stream).unwrap();
    assert_eq!(stream, hex("00 02 41 42 f2 2a fd 4b"));
    framer.encode_to_vec(&[b"CD"], &mut stream).unwrap();
    assert_eq!(
        &stream[8..],
        &hex("00 00 00 00 00 02 43 44 b9 04 56 8e")[..]
    );
    assert!(FpduLayout::new(true, 0x1f8, 2).ends_on_marker_position());
    assert!(!FpduLayout::new(true, 0x200, 2).ends_on_marker_position());
    assert!(!FpduLayout::new(false, 0x1f8, 2).ends_on_marker_position());
    let mut p = StreamParser::new(MARKERS_CRC, 0x1f8);
    assert_eq!(p.push(&stream), stream.len());
    assert_eq!(p.next_fpdu().unwrap().unwrap().ulpdu_to_vec(), b"AB");
    let b = p.next_fpdu().unwrap().unwrap();
    assert_eq!((b.offset(), b.ulpdu_to_vec()), (0x200, b"CD".to_vec()));
    assert!(p.next_fpdu().unwrap().is_none());
}

fn d4_ulpdu() -> Vec<u8> {
    (0..600u32).map(|i| (i & 0xff) as u8).collect()
}

/// D4 / A1: we send the header-relative pointer 0x01FC (CRC 6a 66 28 1a) and accept the
/// draft-literal 0x0200 (CRC 73 26 e9 c5) as well (MPA-38).
#[test]
fn d4_a1_both_pointer_variants() {
    let ulpdu = d4_ulpdu();
    let wire = encode(MARKERS_CRC, 0, &[&ulpdu]);
    assert_eq!(wire.len(), 616);
    assert_eq!(&wire[..4], &[0, 0, 0, 0]);
    assert_eq!(&wire[512..516], &[0, 0, 0x01, 0xFC]);
    assert_eq!(&wire[612..], &[0x6a, 0x66, 0x28, 0x1a]);
    assert_eq!(
        complete(decode_fpdu(MARKERS_CRC, 0, &wire)).ulpdu_to_vec(),
        ulpdu
    );

    let mut literal = wire.clone();
    literal[512..516].copy_from_slice(&[0, 0, 0x02, 0x00]);
    let crc = mpa::crc::crc32c(&literal[..612]);
    literal[612..].copy_from_slice(&mpa::crc::crc_to_wire(crc));
    assert_eq!(&literal[612..], &[0x73, 0x26, 0xe9, 0xc5]);
    assert_eq!(
        complete(decode_fpdu(MARKERS_CRC, 0, &literal)).ulpdu_to_vec(),
        ulpdu
    );
}

/// D5: no markers, PAD 3 zeros (MPA-26, MPA-27).
#[test]
fn d5_no_markers() {
    let wire = encode(PLAIN_CRC, 0, &[b"MPA"]);
    assert_eq!(wire, hex("00 03 4d 50 41 00 00 00 6a 26 7a c9"));
    // The offset does not matter without markers.
    assert_eq!(encode(PLAIN_CRC, 0x1234_5677, &[b"M", b"PA"]), wire);
    assert_eq!(
        complete(decode_fpdu(PLAIN_CRC, 7, &wire)).ulpdu_to_vec(),
        b"MPA"
    );
}

/// MPA-27: non-zero PAD is accepted when the CRC over it matches.
#[test]
fn mpa_27_nonzero_pad_accepted() {
    let mut wire = hex("00 03 4d 50 41 00 00 00 6a 26 7a c9");
    wire[5] = 0xEE;
    let crc = mpa::crc::crc32c(&wire[..8]);
    wire[8..].copy_from_slice(&mpa::crc::crc_to_wire(crc));
    assert_eq!(
        complete(decode_fpdu(PLAIN_CRC, 0, &wire)).ulpdu_to_vec(),
        b"MPA"
    );
}

/// MPA-30: marker RESERVED is ignored on receive (but is in the CRC).
#[test]
fn mpa_30_marker_reserved_ignored() {
    let mut wire = hex(FIG6);
    wire[20..22].copy_from_slice(&[0xFF, 0xFF]);
    let crc = mpa::crc::crc32c(&wire[..48]);
    wire[48..].copy_from_slice(&mpa::crc::crc_to_wire(crc));
    let f = complete(decode_fpdu(MARKERS_CRC, 0x1ec, &wire));
    assert_eq!(f.ulpdu_len(), 42);
}

/// RFC-era variant (control 41 43): Fig. 5 layout → 52 23 99 83, Fig. 6 → 84 92 58 98.
#[test]
fn rfc_era_variants_of_figures_5_and_6() {
    let data = [0u8; 24];
    let w5 = encode(MARKERS_CRC, 0, &[&send_header([0x41, 0x43], 1), &data]);
    assert_eq!(&w5[48..], &[0x52, 0x23, 0x99, 0x83]);
    let w6 = encode(MARKERS_CRC, 0x1ec, &[&send_header([0x41, 0x43], 2), &data]);
    assert_eq!(&w6[48..], &[0x84, 0x92, 0x58, 0x98]);
}

/// A stream whose second FPDU is exactly Figure 6: the first FPDU is 492 octets
/// (leading marker + ULPDU of 482), as the draft describes.
fn fig6_stream() -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut framer = Framer::new(MARKERS_CRC, 0);
    let mut stream = Vec::new();
    let first = [send_header([0x40, 0x03], 1), vec![0x5a; 482 - 18]].concat();
    framer.encode_to_vec(&[&first], &mut stream).unwrap();
    assert_eq!(stream.len(), 492);
    let second = [send_header([0x40, 0x03], 2), vec![0; 24]].concat();
    framer.encode_to_vec(&[&second], &mut stream).unwrap();
    assert_eq!(&stream[0x1ec..], &hex(FIG6)[..]);
    let third = b"tail FPDU after figure 6".to_vec();
    framer.encode_to_vec(&[&third], &mut stream).unwrap();
    (stream, vec![first, second, third])
}

/// MPA-72: the stream containing Figure 6, split at every possible point (and fed one
/// octet at a time), yields identical output; nothing before the last CRC octet (MPA-71).
#[test]
fn mpa_72_every_split_of_the_figure_6_stream() {
    let (stream, ulpdus) = fig6_stream();
    for cut in 0..=stream.len() {
        let mut p = StreamParser::new(MARKERS_CRC, 0);
        let mut got = Vec::new();
        for part in [&stream[..cut], &stream[cut..]] {
            assert_eq!(p.push(part), part.len());
            while let Some(f) = p.next_fpdu().unwrap() {
                got.push(f.ulpdu_to_vec());
            }
        }
        assert_eq!(got, ulpdus, "cut at {cut}");
    }
    let mut p = StreamParser::new(MARKERS_CRC, 0);
    let mut got = Vec::new();
    for (i, b) in stream.iter().enumerate() {
        p.push(std::slice::from_ref(b));
        while let Some(f) = p.next_fpdu().unwrap() {
            assert_eq!(
                f.end_offset() as usize,
                i + 1,
                "MPA-71: delivered at its last octet"
            );
            got.push(f.ulpdu_to_vec());
        }
    }
    assert_eq!(got, ulpdus);
}

/// MPA-40: two FPDUs in one read give two ULPDUs; layout bookkeeping matches the wire.
#[test]
fn mpa_40_boundaries_kept() {
    let (stream, _) = fig6_stream();
    let l = FpduLayout::new(true, 0x1ec, 42);
    assert_eq!((l.wire_len(), l.marker_count(), l.crc_pos()), (52, 1, 48));
    let mut p = StreamParser::new(MARKERS_CRC, 0);
    p.push(&stream);
    let mut n = 0;
    while p.next_fpdu().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 3);
}
