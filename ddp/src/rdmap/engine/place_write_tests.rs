//! The in-order RDMA Write shortcut ([`RdmapEngine::place_write_quiet`]) on stretches laid
//! out between MPA markers: it takes every Write whose header or payload a marker interrupts,
//! placing the payload where the header says, and takes nothing else.

use super::tests::{cfg, parse_segment, tagged_seg, Side};
use super::*;
use mpa::spacing::{Spacing, RUN};

const MARKER_SLOT: [u8; 4] = [0xA5; 4];

/// `seg` laid out as a stretch whose first hole (a marker's slot, filled with a sentinel)
/// comes after `first` octets, then one after every [`RUN`] octets.
fn spaced(seg: &[u8], first: usize) -> Vec<u8> {
    let spacing = Spacing::new(first);
    let mut out = vec![0u8; spacing.span(seg.len())];
    spacing.copy_in(seg, &mut out);
    // The holes keep a sentinel, so a payload read across one would show it.
    let mut at = first;
    while at < out.len() {
        out[at..at + 4].copy_from_slice(&MARKER_SLOT);
        at += 4 + RUN;
    }
    out
}

/// What the receive path does with an in-order Write: the shortcut where the position is
/// quiet ([`RdmapEngine::quiet_at`]).
fn shortcut(s: &mut Side, pos: u64, stretch: &[u8], len: usize, spacing: Spacing) -> bool {
    s.eng.quiet_at(pos)
        && s.eng
            .place_write_quiet(&s.tags, &mut s.mem, pos, stretch, len, spacing)
}

/// A sink for Writes: one 4 KiB window, zeroed.
fn window() -> (Side, RegionHandle, Stag) {
    let mut s = Side::new(9, cfg(1));
    let (h, stag) = s.region(4096, Access::REMOTE_WRITE, |_| 0);
    (s, h, stag)
}

/// Every phase of a marker inside the 14-octet tagged header (and one just past it, in the
/// payload): the shortcut takes the Write and the payload lands whole at its offset.
#[test]
fn a_write_split_by_a_marker_is_placed_by_the_shortcut() {
    let payload: Vec<u8> = (0..700u32).map(|i| (i * 7 + 3) as u8).collect();
    for first in 1..=TAGGED_HEADER_LEN + 1 {
        let (mut s, h, stag) = window();
        let seg = tagged_seg(true, RdmapOpcode::RdmaWrite, stag, 0x1000 + 100, &payload);
        let stretch = spaced(&seg, first);
        assert!(stretch.len() > seg.len(), "the stretch has holes");
        let taken = shortcut(&mut s, 0, &stretch, seg.len(), Spacing::new(first));
        assert!(
            taken,
            "header split after {first} octets: the shortcut took it"
        );
        let mem = s.mem.get(h).unwrap();
        assert!(
            mem[100..800] == payload[..],
            "split after {first}: placed whole"
        );
        assert!(
            mem[..100].iter().chain(&mem[800..]).all(|&b| b == 0),
            "nothing else"
        );
        let st = s.eng.stats();
        assert_eq!(
            (st.rx_ulpdus, st.rx_ulpdus_fast),
            (1, 1),
            "split after {first}"
        );
        assert_eq!(st.rx_placed_octets, 700);
    }
}

/// A split Write the shortcut must not take (an unknown STag; a Send) is left untouched for
/// the general path: false, no octet written, nothing counted.
#[test]
fn the_shortcut_leaves_a_split_segment_it_cannot_take() {
    let payload = [0x5Au8; 64];
    let (mut s, h, stag) = window();
    let bad = Stag(stag.0 ^ 0x100);
    let send = tagged_seg(true, RdmapOpcode::Send, stag, 0x1000, &payload);
    let unknown = tagged_seg(true, RdmapOpcode::RdmaWrite, bad, 0x1000, &payload);
    for (what, seg) in [("a Send", send), ("an unknown STag", unknown)] {
        for first in [1, 7, 13] {
            let stretch = spaced(&seg, first);
            let sp = Spacing::new(first);
            let taken = shortcut(&mut s, 0, &stretch, seg.len(), sp);
            assert!(!taken, "{what}, split after {first}");
        }
    }
    assert!(s.mem.get(h).unwrap().iter().all(|&b| b == 0));
    let st = s.eng.stats();
    assert_eq!((st.rx_ulpdus, st.rx_placed_octets), (0, 0));
}

/// The first of two 700-octet segments of one Write through the shortcut (it takes it), then
/// `between` on the sink, then the second (TO `second_to`) through the in-order path: the
/// second must be refused with a Terminate carrying `code`, as if it were the first the
/// sink had seen, and place nothing.
fn second_segment_refused(
    between: impl FnOnce(&mut Side, RegionHandle, Stag),
    second_to: u64,
    code: TermCode,
) {
    let (mut s, h, stag) = window();
    let first = tagged_seg(false, RdmapOpcode::RdmaWrite, stag, 0x1000, &[1; 700]);
    let sp = Spacing::new(usize::MAX);
    assert!(shortcut(&mut s, 0, &first, first.len(), sp));
    between(&mut s, h, stag);
    let second = tagged_seg(true, RdmapOpcode::RdmaWrite, stag, second_to, &[2; 700]);
    let pos = first.len() as u64;
    assert!(!shortcut(&mut s, pos, &second, second.len(), sp));
    s.eng
        .handle_ulpdu_in_order(&mut s.tags, &mut s.mem, pos, &second);
    assert_eq!(s.eng.state(), RdmapState::Error);
    assert_eq!(
        s.eng.stats().rx_placed_octets,
        700,
        "the second placed nothing"
    );
    if let Some(mem) = s.mem.get(h) {
        assert!(mem.iter().all(|&b| b != 2));
    }
    let tx = s.drain_tx();
    assert_eq!(tx.len(), 1, "exactly one Terminate");
    let (_, payload) = parse_segment(&tx[0].1).unwrap();
    let t = TerminateRepr::parse(&TerminatePacket::new_checked(payload).unwrap()).unwrap();
    assert_eq!(t.code, code);
    let copied = t.ddp_header.as_ref().map(|d| d.as_bytes());
    assert_eq!(copied, Some(&second[..TAGGED_HEADER_LEN]));
}

/// An STag invalidated, deregistered, or replaced in its slot between two segments of one
/// Write: the second finds it dead (0x1/0x00), not the window the first was placed through.
#[test]
fn an_stag_revoked_between_two_segments_refuses_the_second() {
    let invalid = DdpError::InvalidStag.term_code();
    second_segment_refused(
        |s, _, stag| {
            s.tags.invalidate(stag).unwrap();
        },
        0x1000 + 700,
        invalid,
    );
    second_segment_refused(
        |s, _, stag| {
            s.tags
                .invalidate_remote(stag, PdId(1), StreamId(1))
                .unwrap();
        },
        0x1000 + 700,
        invalid,
    );
    second_segment_refused(
        |s, h, _| {
            s.tags.deregister(h).unwrap();
        },
        0x1000 + 700,
        invalid,
    );
    second_segment_refused(
        |s, h, _| {
            s.tags.deregister(h).unwrap();
            s.mem.remove(h);
            let (h2, _) = s.region(4096, Access::REMOTE_WRITE, |_| 0);
            assert_eq!(h2.index(), h.index(), "the same slot");
        },
        0x1000 + 700,
        invalid,
    );
}

/// A PD change between two segments (0x1/0x02), and a second segment past the window the
/// first was checked against (0x1/0x01) or wrapping 2^64 (0x1/0x03).
#[test]
fn a_second_segment_is_checked_as_the_first_was() {
    second_segment_refused(
        |s, _, _| s.eng.set_pd(PdId(2)),
        0x1000 + 700,
        DdpError::StagNotAssociated.term_code(),
    );
    second_segment_refused(
        |_, _, _| {},
        0x1000 + 4096 - 699,
        DdpError::BaseBounds.term_code(),
    );
    second_segment_refused(|_, _, _| {}, 0x0FFF, DdpError::BaseBounds.term_code());
    second_segment_refused(|_, _, _| {}, u64::MAX - 100, DdpError::ToWrap.term_code());
}
