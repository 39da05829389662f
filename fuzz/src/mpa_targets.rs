//! MPA: startup frames and their state machines, the in-order FPDU stream parser, the
//! out-of-order FPDU locator.

use std::time::{Duration, Instant};

use mpa::startup_frame::{Packet, Repr};
use mpa::{
    locate, FramingConfig, LocateOptions, ReadDepths, Responder, Revisions, RtrType, RtrTypes,
    StartupConfig, StreamParser,
};

use crate::Input;

/// RTR types from the low three bits of `bits`.
fn rtr_types(bits: u8) -> RtrTypes {
    [RtrType::Send, RtrType::Write, RtrType::Read]
        .into_iter()
        .enumerate()
        .filter(|(i, _)| bits & (1 << i) != 0)
        .fold(RtrTypes::NONE, |s, (_, t)| s.with(t))
}

/// Arbitrary octets as a startup frame, then as a Responder's and an Initiator's input: a
/// parsed frame re-emits to the same octets (the Res bits aside, MPA-101; the Enhanced bit
/// counts only in Rev 2, RFC 6581 §7.1); the state machines (revision policy, Rev 2 IRD/ORD
/// and peer-to-peer negotiation chosen by the input) never panic and never take more than they
/// were given; the ULP never gets more private data than the limit.
pub fn mpa_startup(data: &[u8]) {
    if let Ok(p) = Packet::new_checked(data) {
        if let Ok(r) = Repr::parse(&p) {
            let again = r.to_vec();
            let mut orig = data[..p.frame_len()].to_vec();
            orig[16] &= !0x0F; // Res: ignored on receive, zero on send
            if r.enhanced.is_none() {
                orig[16] &= !0x10; // a Res bit outside Rev 2
            }
            assert_eq!(again, orig);
        }
    }
    let mut input = Input::new(data);
    let accept_bits = input.u8();
    let cfg = StartupConfig {
        revision: input.u8() % 3,
        accept: (0..3u8)
            .filter(|r| accept_bits & (1 << r) != 0)
            .fold(Revisions::NONE, Revisions::with),
        max_private_data: input.u16() & 0x03FF,
        want_markers: input.bool(),
        want_crc: input.bool(),
        timeout: Duration::from_secs(1),
        p2p_offer: rtr_types(accept_bits >> 3),
        p2p_accept: rtr_types(accept_bits >> 6),
    };
    let depths = ReadDepths {
        ird: input.u16(),
        ord: input.u16(),
    };
    let accept = input.bool();
    let chunk = usize::from(input.u8()).max(1);
    let rest = input.rest();
    let t0 = Instant::now();
    let mut r = Responder::new(cfg, t0);
    for c in rest.chunks(chunk) {
        let n = r.handle_input(t0, c);
        assert!(n <= c.len());
        while let Some(e) = r.poll_event() {
            if let mpa::StartupEvent::RequestReceived(info) = e {
                assert!(info.private_data.len() <= usize::from(cfg.max_private_data));
                assert!(cfg.accept.contains(info.revision));
                let _ = if accept {
                    r.accept(b"ok", depths)
                } else {
                    r.reject(b"no", depths)
                };
            }
        }
        while r.poll_transmit().is_some() {}
    }
    r.handle_timeout(t0 + Duration::from_secs(2));
    while r.poll_event().is_some() {}
    if let Ok(mut i) = mpa::Initiator::new(cfg, t0, b"hello", depths) {
        while i.poll_transmit().is_some() {}
        for c in rest.chunks(chunk) {
            assert!(i.handle_input(t0, c) <= c.len());
            while let Some(e) = i.poll_event() {
                if let mpa::StartupEvent::Established(n) = e {
                    assert!(n.revision <= cfg.revision && cfg.accept.contains(n.revision));
                    assert!(n.read_depths.ord <= depths.ord && n.read_depths.ird == depths.ird);
                    assert!(n.peer_private_data.len() <= usize::from(cfg.max_private_data));
                }
            }
        }
        i.handle_close();
        while i.poll_event().is_some() {}
    }
}

/// Arbitrary octets as an FPDU stream (markers and CRC chosen by the input) pushed in
/// input-chosen pieces: the parser yields exactly what it yields for the whole stream pushed at
/// once (segmentation never changes the FPDUs or the error), and offsets advance by wire
/// length.
pub fn mpa_stream(data: &[u8]) {
    let mut input = Input::new(data);
    let cfg = FramingConfig {
        markers: input.bool(),
        crc: input.bool(),
    };
    let offset = input.u32() & !3;
    let piece = usize::from(input.u16() % 2048).max(1);
    let stream = input.rest();
    let whole = parse_all(cfg, offset, &[stream]);
    let pieces: Vec<&[u8]> = stream.chunks(piece).collect();
    assert_eq!(parse_all(cfg, offset, &pieces), whole);
}

/// The ULPDUs a fresh parser delivers for `pieces` pushed in order (FPDUs pulled after every
/// push, and once more at the end), and its final error.
fn parse_all(
    cfg: FramingConfig,
    offset: u32,
    pieces: &[&[u8]],
) -> (Vec<Vec<u8>>, Option<mpa::FramingError>) {
    let mut p = StreamParser::new(cfg, offset);
    let mut out = Vec::new();
    for piece in pieces {
        let mut rest = *piece;
        loop {
            let n = p.push(rest);
            rest = &rest[n..];
            if drain(&mut p, &mut out).is_err() || rest.is_empty() || n == 0 {
                break;
            }
        }
    }
    let _ = drain(&mut p, &mut out);
    (out, p.error())
}

/// Pulls every complete FPDU; checks each advances the offset by its wire length.
fn drain(p: &mut StreamParser, out: &mut Vec<Vec<u8>>) -> Result<(), mpa::FramingError> {
    loop {
        let before = p.next_offset();
        match p.next_fpdu()? {
            Some(f) => {
                let (len, ulpdu) = (f.wire_len() as u32, f.ulpdu_to_vec());
                assert!(ulpdu.len() <= mpa::MAX_ULPDU_LEN);
                out.push(ulpdu);
                assert_eq!(p.next_offset(), before.wrapping_add(len));
            }
            None => return Ok(()),
        }
    }
}

/// Arbitrary octets as one out-of-order segment at an input-chosen stream offset: everything
/// the locator reports lies inside the segment, and the ULPDU it reports copies out whole.
pub fn mpa_locate(data: &[u8]) {
    let mut input = Input::new(data);
    let cfg = FramingConfig {
        markers: input.bool(),
        crc: input.bool(),
    };
    // The flag: the segment's first octet is an FPDU start the length chain reached.
    let known = input.bool();
    let seg_offset = input.u32();
    let opts = LocateOptions {
        known_start: known.then_some(seg_offset),
    };
    let seg = input.rest();
    let mut out = vec![0u8; mpa::MAX_ULPDU_LEN];
    for found in locate(cfg, seg_offset, seg, opts).take(seg.len() + 1) {
        let Ok(f) = found else { continue };
        assert!(f.start + f.fpdu.wire_len() <= seg.len());
        let mut total = 0;
        for r in f.segment_ranges() {
            assert!(r.start <= r.end && r.end <= seg.len());
            total += r.len();
        }
        assert_eq!(total, f.fpdu.ulpdu_len());
        assert_eq!(f.copy_ulpdu(&mut out), Ok(f.fpdu.ulpdu_len()));
    }
}
