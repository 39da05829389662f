//! The in-order RDMA Write shortcut ([`RdmapEngine::place_write_in_order`]) on stretches laid
//! out between MPA markers: it takes every Write whose header or payload a marker interrupts,
//! placing the payload where the header says, and takes nothing else.

use super::tests::{cfg, tagged_seg, Side};
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
        let taken = s.eng.place_write_in_order(
            &s.tags,
            &mut s.mem,
            0,
            &stretch,
            seg.len(),
            Spacing::new(first),
        );
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
            let taken = s
                .eng
                .place_write_in_order(&s.tags, &mut s.mem, 0, &stretch, seg.len(), sp);
            assert!(!taken, "{what}, split after {first}");
        }
    }
    assert!(s.mem.get(h).unwrap().iter().all(|&b| b == 0));
    let st = s.eng.stats();
    assert_eq!((st.rx_ulpdus, st.rx_placed_octets), (0, 0));
}
