//! Property tests: round trips, no panics on arbitrary input, markers at every phase and
//! across the 32-bit wrap, and the out-of-order locator against the in-order parse.

mod common;
use common::*;
use mpa::enhanced::EnhancedData;
use mpa::locate::{locate, LocateOptions};
use mpa::marker::{self, is_marker_position};
use mpa::startup_frame::{self, FrameKind};
use mpa::{
    decode_fpdu, encode_fpdu, encode_fpdu_with, fpdu_wire_len, Framer, FramingConfig, Initiator,
    ReadDepths, Responder, RtrType, RtrTypes, StartupConfig, StreamParser, MAX_ULPDU_LEN,
};
use proptest::prelude::*;
use std::time::Instant;

/// One FPDU of a generated stream: where it is (index into the stream) and its ULPDU.
#[derive(Debug, Clone)]
struct Sent {
    start: usize,
    end: usize,
    ulpdu: Vec<u8>,
}

/// Frames `sizes` (ULPDU lengths; octets derived from `seed`) from stream `offset`.
fn build_stream(
    cfg: FramingConfig,
    offset: u32,
    sizes: &[usize],
    seed: u8,
) -> (Vec<u8>, Vec<Sent>) {
    let mut framer = Framer::new(cfg, offset);
    let mut stream = Vec::new();
    let mut sent = Vec::new();
    for (k, &n) in sizes.iter().enumerate() {
        let ulpdu: Vec<u8> = (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed ^ k as u8))
            .collect();
        let start = stream.len();
        // Gather list split in two to exercise the multi-part path.
        let cut = n / 3;
        framer
            .encode_to_vec(&[&ulpdu[..cut], &ulpdu[cut..]], &mut stream)
            .unwrap();
        sent.push(Sent {
            start,
            end: stream.len(),
            ulpdu,
        });
    }
    (stream, sent)
}

/// Checks every marker position of the stream holds a marker that names the FPDU containing
/// it (header-relative, MPA-33/34/38/39), and FPDUs own exactly those positions (MPA-32).
fn check_markers(offset: u32, stream: &[u8], sent: &[Sent]) {
    for idx in 0..stream.len() {
        if !is_marker_position(offset.wrapping_add(idx as u32)) {
            continue;
        }
        let f = sent
            .iter()
            .find(|s| s.start <= idx && idx < s.end)
            .expect("inside an FPDU");
        let m = marker::Packet::new_checked(&stream[idx..idx + 4]).unwrap();
        assert_eq!(m.reserved(), 0);
        let t = marker::resolve(offset.wrapping_add(idx as u32), m.fpduptr());
        assert_eq!(
            t.fpdu_start,
            offset.wrapping_add(f.start as u32),
            "marker at {idx}"
        );
        if idx == f.start {
            assert_eq!(m.fpduptr(), 0, "MPA-34: leading marker has FPDUPTR 0");
        }
    }
}

/// Parses the whole stream in order, fed in the given chunk sizes.
fn parse_in_order(
    cfg: FramingConfig,
    offset: u32,
    stream: &[u8],
    chunks: &[usize],
) -> Vec<(u32, Vec<u8>)> {
    let mut p = StreamParser::new(cfg, offset);
    let mut got = Vec::new();
    let mut at = 0;
    let mut k = 0;
    while at < stream.len() {
        let n = chunks
            .get(k)
            .copied()
            .unwrap_or(usize::MAX)
            .max(1)
            .min(stream.len() - at);
        k += 1;
        assert_eq!(p.push(&stream[at..at + n]), n);
        at += n;
        while let Some(f) = p.next_fpdu().unwrap() {
            got.push((f.offset(), f.ulpdu_to_vec()));
        }
    }
    assert_eq!(p.buffered(), 0);
    got
}

fn cfg_strategy() -> impl Strategy<Value = FramingConfig> {
    (any::<bool>(), any::<bool>()).prop_map(|(markers, crc)| FramingConfig { markers, crc })
}

/// Stream offsets: anywhere, near the 32-bit wrap, near marker positions.
/// Only offsets where an FPDU can start (`is_valid_start`): ≡ 4 (mod 512) is skipped.
fn offset_strategy() -> impl Strategy<Value = u32> {
    prop_oneof![
        any::<u32>().prop_map(|o| o & !3),
        (0u32..4096).prop_map(|k| 0u32.wrapping_sub(k * 4)),
        (0u32..128).prop_map(|k| k * 4),
    ]
    .prop_map(|o| {
        if mpa::fpdu::is_valid_start(o) {
            o
        } else {
            o.wrapping_add(4)
        }
    })
}

proptest! {
    /// parse(emit(x)) == x for one FPDU; length and marker slots as computed (MPA-26, MPA-50, MPA-56).
    /// A ULPDU written piece by piece (`encode_fpdu_with`, the sender whose bytes may not be
    /// borrowed) frames to the same octets as the gather list, and the pieces asked for
    /// cover the ULPDU in order, each between two markers.
    #[test]
    fn fill_frames_like_gather(cfg in cfg_strategy(), offset in offset_strategy(),
                               ulpdu in prop::collection::vec(any::<u8>(), 0..2100)) {
        let mut want = vec![0u8; fpdu_wire_len(cfg, offset, ulpdu.len())];
        let n = encode_fpdu(cfg, offset, &[&ulpdu], &mut want).unwrap();
        let mut got = vec![0u8; n];
        let mut at = 0;
        let mut pieces = 0;
        let m = encode_fpdu_with(cfg, offset, ulpdu.len(), &mut |dst| {
            dst.copy_from_slice(&ulpdu[at..at + dst.len()]);
            at += dst.len();
            pieces += 1;
            assert!(!dst.is_empty() && (!cfg.markers || dst.len() <= 512));
        }, &mut got).unwrap();
        prop_assert_eq!(m, n);
        prop_assert_eq!(at, ulpdu.len());
        prop_assert!(cfg.markers || pieces <= 1);
        prop_assert_eq!(got, want);
    }

    #[test]
    fn fpdu_round_trip(cfg in cfg_strategy(), offset in offset_strategy(),
                       ulpdu in prop::collection::vec(any::<u8>(), 0..2100), cut in any::<prop::sample::Index>()) {
        let c = cut.index(ulpdu.len() + 1);
        let mut out = vec![0u8; fpdu_wire_len(cfg, offset, ulpdu.len())];
        let n = encode_fpdu(cfg, offset, &[&ulpdu[..c], &[], &ulpdu[c..]], &mut out).unwrap();
        prop_assert_eq!(n, out.len());
        prop_assert_eq!(n % 4, 0);
        let f = complete(decode_fpdu(cfg, offset, &out));
        prop_assert_eq!(f.ulpdu_to_vec(), ulpdu.clone());
        let mut copy = vec![0u8; ulpdu.len()];
        prop_assert_eq!(f.copy_ulpdu(&mut copy), Ok(ulpdu.len()));
        prop_assert_eq!(copy, ulpdu);
        // Marker slots are exactly the marker positions the FPDU spans (MPA-32).
        let slots: Vec<usize> = f.layout().marker_slots().map(|s| s.pos).collect();
        let expect: Vec<usize> = (0..n)
            .filter(|&i| cfg.markers && is_marker_position(offset.wrapping_add(i as u32)))
            .collect();
        prop_assert_eq!(slots, expect);
        // A shorter buffer is incomplete, never an error or a panic (MPA-71).
        for short in [0, 1, n / 2, n - 1] {
            let incomplete = matches!(decode_fpdu(cfg, offset, &out[..short]), Ok(mpa::Decoded::Incomplete { .. }));
            prop_assert!(incomplete);
        }
    }

    /// A stream of random FPDUs from a random offset (wrap included), cut at random points,
    /// parses back to the same ULPDUs at the same offsets; markers sit at every 512th octet
    /// and name their FPDU (MPA-32..39, MPA-72).
    #[test]
    fn stream_round_trip(cfg in cfg_strategy(), offset in offset_strategy(),
                         sizes in prop::collection::vec(0usize..1600, 1..12),
                         chunks in prop::collection::vec(1usize..700, 0..40), seed in any::<u8>()) {
        let (stream, sent) = build_stream(cfg, offset, &sizes, seed);
        if cfg.markers {
            check_markers(offset, &stream, &sent);
        }
        let got = parse_in_order(cfg, offset, &stream, &chunks);
        let want: Vec<(u32, Vec<u8>)> =
            sent.iter().map(|s| (offset.wrapping_add(s.start as u32), s.ulpdu.clone())).collect();
        prop_assert_eq!(got, want);
    }

    /// The out-of-order locator finds, in each segment of a random cut, exactly the FPDUs
    /// the in-order parse finds there that are reachable from an anchor (a known chain start or a
    /// marker), with the same offsets and ULPDUs; segments are processed in random order
    /// (MPA-01, MPA-12, MPA-70).
    #[test]
    fn locator_matches_in_order_parse(offset in offset_strategy(), crc in any::<bool>(),
                                      chain_known in any::<bool>(),
                                      sizes in prop_oneof![
                                          prop::collection::vec(1usize..1500, 1..16),
                                          prop::collection::vec(1usize..9000, 1..6),
                                      ],
                                      cuts in prop_oneof![
                                          prop::collection::vec(1usize..2500, 1..30),
                                          prop::collection::vec(500usize..12000, 1..8),
                                      ],
                                      order in any::<u64>(), seed in any::<u8>()) {
        let cfg = FramingConfig { markers: true, crc };
        let (stream, sent) = build_stream(cfg, offset, &sizes, seed);
        let in_order = parse_in_order(cfg, offset, &stream, &[]);
        prop_assert_eq!(in_order.len(), sent.len());
        // Random segmentation.
        let mut segs = Vec::new();
        let mut at = 0;
        for &c in cuts.iter().cycle() {
            if at >= stream.len() { break; }
            let n = c.min(stream.len() - at);
            segs.push((at, at + n));
            at += n;
        }
        // Random processing order (Fisher-Yates with a tiny LCG).
        let mut x = order | 1;
        for i in (1..segs.len()).rev() {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            segs.swap(i, (x >> 33) as usize % (i + 1));
        }
        let mut found_all = std::collections::BTreeMap::new();
        for &(s, e) in &segs {
            let seg_off = offset.wrapping_add(s as u32);
            // A known chain start (MPA-70 way 1/3): the first FPDU start inside the segment.
            let known = sent.iter().find(|f| f.start >= s && f.start < e).map(|f| f.start);
            let known = if chain_known { known } else { None };
            let opts = LocateOptions { known_start: known.map(|k| offset.wrapping_add(k as u32)) };
            let got: Vec<(u32, Vec<u8>)> = locate(cfg, seg_off, &stream[s..e], opts)
                .map(|r| {
                    let l = r.expect("no error on a clean stream");
                    // Zero-copy ranges agree with the copied ULPDU.
                    let mut v = Vec::new();
                    for rg in l.segment_ranges() { v.extend_from_slice(&stream[s..e][rg]); }
                    assert_eq!(v, l.fpdu.ulpdu_to_vec());
                    assert_eq!(l.fpdu.offset(), seg_off.wrapping_add(l.start as u32));
                    (l.fpdu.offset(), v)
                })
                .collect();
            // Oracle: anchors = the known start, else the FPDU holding each marker.
            let mut anchor: Option<usize> = known;
            if anchor.is_none() {
                for idx in s..e.saturating_sub(3) {
                    if !is_marker_position(offset.wrapping_add(idx as u32)) { continue; }
                    let f = sent.iter().find(|f| f.start <= idx && idx < f.end).unwrap();
                    if f.start >= s { anchor = Some(f.start); break; }
                }
            }
            let want: Vec<(u32, Vec<u8>)> = match anchor {
                None => vec![],
                Some(a) => sent.iter()
                    .filter(|f| f.start >= a && f.end <= e)
                    .map(|f| (offset.wrapping_add(f.start as u32), f.ulpdu.clone()))
                    .collect(),
            };
            prop_assert_eq!(&got, &want, "segment {}..{}", s, e);
            for g in got { found_all.insert(g.0, g.1); }
        }
        // Everything located is something the in-order parse delivered.
        for (off, u) in found_all {
            prop_assert!(in_order.contains(&(off, u)));
        }
    }

    /// Startup frames: parse(emit(x)) == x (MPA-77, MPA-103), Rev 2's IRD/ORD octets
    /// included (RFC 6581 §7.1).
    #[test]
    fn startup_frame_round_trip(req in any::<bool>(), markers in any::<bool>(), crc in any::<bool>(),
                                reject in any::<bool>(), revision in 0u8..4,
                                enh in any::<bool>(), ird in 0u16..=0x3FFF, ord in 0u16..=0x3FFF,
                                p2p in any::<bool>(), rtr in 0u8..8,
                                pd in prop::collection::vec(any::<u8>(), 0..700)) {
        let kind = if req { FrameKind::Request } else { FrameKind::Reply };
        let rtr = [RtrType::Send, RtrType::Write, RtrType::Read]
            .into_iter()
            .enumerate()
            .filter(|(i, _)| rtr & (1 << i) != 0)
            .fold(RtrTypes::NONE, |s, (_, t)| s.with(t));
        let enhanced = (revision == 2 && enh).then_some(EnhancedData { ird, ord, p2p, rtr });
        let x = startup_frame::Repr { kind, markers, crc, reject, revision, enhanced, private_data: &pd };
        let bytes = x.to_vec();
        prop_assert_eq!(bytes.len(), x.buffer_len());
        let p = startup_frame::Packet::new_checked(&bytes[..]).unwrap();
        prop_assert_eq!(startup_frame::Repr::parse(&p).unwrap(), x);
    }

    /// Marker header: parse(emit(x)) == x.
    #[test]
    fn marker_round_trip(reserved in any::<u16>(), fpduptr in any::<u16>()) {
        let x = marker::Repr { reserved, fpduptr };
        let mut b = [0u8; 4];
        x.emit(&mut marker::Packet::new_unchecked(&mut b[..]));
        prop_assert_eq!(marker::Repr::parse(&marker::Packet::new_checked(&b[..]).unwrap()).unwrap(), x);
    }

    /// Arbitrary bytes into every parser never panic.
    #[test]
    fn arbitrary_bytes_never_panic(cfg in cfg_strategy(), offset in any::<u32>(),
                                   data in prop::collection::vec(any::<u8>(), 0..3000),
                                   chunks in prop::collection::vec(1usize..400, 0..20),
                                   aligned in any::<bool>()) {
        let _ = decode_fpdu(cfg, offset, &data);
        for l in locate(cfg, offset, &data, LocateOptions { known_start: aligned.then_some(offset) }).flatten() {
            let _ = l.segment_ranges().count();
            let _ = l.fpdu.ulpdu_to_vec();
        }
        let mut p = StreamParser::new(cfg, offset);
        let mut at = 0;
        for &c in &chunks {
            let n = c.min(data.len() - at);
            p.push(&data[at..at + n]);
            at += n;
            while let Ok(Some(f)) = p.next_fpdu() { let _ = f.ulpdu_to_vec(); }
        }
        let _ = startup_frame::Packet::new_checked(&data[..])
            .map(|p| startup_frame::Repr::parse(&p));
        let _ = marker::Packet::new_checked(&data[..]).map(|p| marker::Repr::parse(&p));
        let now = Instant::now();
        for config in [StartupConfig::default(), StartupConfig::strict_draft()] {
            let mut i = Initiator::new(config, now, b"", ReadDepths::default()).unwrap();
            let mut r = Responder::new(config, now);
            let mut at = 0;
            for &c in chunks.iter().chain(std::iter::once(&usize::MAX)) {
                let n = c.min(data.len() - at);
                let ui = i.handle_input(now, &data[at..at + n]);
                let ur = r.handle_input(now, &data[at..at + n]);
                prop_assert!(ui <= n && ur <= n);
                at += n;
                if at == data.len() { break; }
            }
            while i.poll_event().is_some() {}
            while r.poll_event().is_some() {}
            let _ = r.accept(&[], ReadDepths::default());
            i.handle_timeout(now);
            r.handle_timeout(now);
        }
    }
}

/// Markers inserted and removed at every start offset modulo 512 (4-octet steps; 4 itself
/// can never start an FPDU, see `no_fpdu_starts_4_past_a_marker`) and for
/// starts just before the 32-bit wrap, over ULPDU lengths that hit every marker case
/// (interior, right after PAD, between FPDUs).
#[test]
fn markers_at_every_phase_and_across_wrap() {
    let cfg = MARKERS_CRC;
    let sizes = [
        1usize, 2, 3, 6, 10, 250, 502, 503, 504, 505, 506, 1000, 1442, 4000,
    ];
    let bases = [
        0u32,
        0x8000_0000,
        0u32.wrapping_sub(512),
        0u32.wrapping_sub(2048),
    ];
    for base in bases {
        for phase in (0..512u32).step_by(4).filter(|&p| p != 4) {
            let offset = base.wrapping_add(phase);
            let (stream, sent) = build_stream(cfg, offset, &sizes, phase as u8);
            check_markers(offset, &stream, &sent);
            let got = parse_in_order(cfg, offset, &stream, &[97, 1, 1, 1000, 3]);
            assert_eq!(got.len(), sizes.len(), "offset {offset:#x}");
            for ((off, u), s) in got.iter().zip(&sent) {
                assert_eq!(*off, offset.wrapping_add(s.start as u32));
                assert_eq!(u, &s.ulpdu);
            }
        }
    }
}

/// The largest ULPDU frames at every phase within MAX_FPDU_LEN and the 16-bit FPDUPTR
/// never overflows (draft §5.1).
#[test]
fn largest_ulpdu_at_every_phase() {
    let big = vec![0xA5u8; MAX_ULPDU_LEN];
    let mut out = vec![0u8; mpa::MAX_FPDU_LEN];
    for phase in (0..512u32).step_by(4).filter(|&p| p != 4) {
        let n = encode_fpdu(MARKERS_CRC, phase, &[&big], &mut out).unwrap();
        assert!(n <= mpa::MAX_FPDU_LEN);
        let f = complete(decode_fpdu(MARKERS_CRC, phase, &out[..n]));
        assert_eq!(f.ulpdu_len(), MAX_ULPDU_LEN);
    }
    assert_eq!(
        encode_fpdu(MARKERS_CRC, 0, &[&big, b"x"], &mut out),
        Err(mpa::EncodeError::UlpduTooLong(MAX_ULPDU_LEN + 1)),
        "MPA-22"
    );
}

/// Offset ≡ 4 (mod 512) follows a marker, so no FPDU starts there: refused, and a stream
/// framed from 0 never reaches one.
#[test]
fn no_fpdu_starts_4_past_a_marker() {
    let mut out = [0u8; 64];
    assert_eq!(
        encode_fpdu(MARKERS_CRC, 516, &[b"x"], &mut out),
        Err(mpa::EncodeError::Misaligned)
    );
    assert_eq!(
        decode_fpdu(MARKERS_CRC, 4, &out).unwrap_err(),
        mpa::FramingError::Misaligned
    );
    assert!(encode_fpdu(PLAIN_CRC, 516, &[b"x"], &mut out).is_ok());
    let sizes: Vec<usize> = (1..300).collect();
    let (_, sent) = build_stream(MARKERS_CRC, 0, &sizes, 1);
    assert!(sent
        .iter()
        .all(|s| mpa::fpdu::is_valid_start(s.start as u32)));
}
