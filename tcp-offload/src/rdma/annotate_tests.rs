//! The draft's §4 tables and the segmentation property.

use proptest::prelude::*;

use super::*;

const RID: u64 = 0x1A2B_3C4D;

/// Draft §4: Header [0,100), Section 1 [100,2100), Trailer [2100,2200), Header [2200,2300),
/// Section 2 [2300,4300): one transfer of 4000 octets; messages start at both headers.
fn section4_marks() -> SendMarks {
    let mut m = SendMarks::default();
    let t = |bo| Transfer {
        rid: RID,
        buffer_offset: bo,
        total: Some(4000),
        unsolicited: false,
    };
    m.mark_message(0).unwrap();
    m.mark_run(100, 2000, t(0)).unwrap();
    m.mark_message(2200).unwrap();
    m.mark_run(2300, 2000, t(2000)).unwrap();
    m
}

/// (seq, A, buffer offset, data offset, data length) of every segment, MSS 1000, draft
/// accounting ("max payload = 1000").
fn segment(m: &mut SendMarks, align: bool) -> Vec<(u64, bool, u32, u16, u16)> {
    let mut out = Vec::new();
    let mut s = 0;
    while s < 4300 {
        let (len, opt) = m.next_segment(s, (4300 - s) as u32, 1000, MssAccounting::Draft, align);
        let Some(RdmaOption::Transfer(t)) = opt else {
            panic!("segment at {s} carries transfer bytes but no option: {opt:?}")
        };
        assert_eq!((t.rid, t.total, t.unsolicited), (RID, Some(4000), false));
        out.push((s, t.aligned, t.buffer_offset, t.data_offset, t.data_len));
        s += u64::from(len);
    }
    out
}

/// TCPRDMA-13: draft §4 segmentation A (every message starts a segment), exactly.
#[test]
fn tcprdma_13_draft_section4_segmentation_a() {
    assert_eq!(
        segment(&mut section4_marks(), true),
        vec![
            (0, true, 0, 100, 900),
            (1000, false, 900, 0, 1000),
            (2000, false, 1900, 0, 100),
            (2200, true, 2000, 100, 900),
            (3200, false, 2900, 0, 1000),
            (4200, false, 3900, 0, 100),
        ]
    );
}

/// TCPRDMA-13: draft §4 segmentation B (segment 3 also carries the next header), exactly.
#[test]
fn tcprdma_13_draft_section4_segmentation_b() {
    assert_eq!(
        segment(&mut section4_marks(), false),
        vec![
            (0, true, 0, 100, 900),
            (1000, false, 900, 0, 1000),
            (2000, false, 1900, 0, 100),
            (2300, false, 2000, 0, 1000),
            (3300, false, 3000, 0, 1000),
        ]
    );
}

/// RFC 6691 accounting: the 20-octet option comes out of a 1000-octet EMSS.
#[test]
fn rfc6691_accounting_takes_the_option_out_of_the_payload() {
    let mut m = section4_marks();
    let (len, opt) = m.next_segment(0, 4300, 1000, MssAccounting::Rfc6691, false);
    assert_eq!(len, 980);
    assert_eq!(opt.map(|o| o.len()), Some(20));
    // A-only segments lose 4 octets: a message start without transfer bytes after it.
    let mut m = SendMarks::default();
    m.mark_message(0).unwrap();
    assert_eq!(
        m.next_segment(0, 5000, 1000, MssAccounting::Rfc6691, false),
        (996, Some(RdmaOption::Aligned { aligned: true }))
    );
}

/// TCPRDMA-06: a run without a total gives the 16-octet form.
#[test]
fn tcprdma_06_unknown_total_gives_the_sixteen_octet_form() {
    let mut m = SendMarks::default();
    m.mark_run(
        0,
        10,
        Transfer {
            rid: 7,
            buffer_offset: 0,
            total: None,
            unsolicited: true,
        },
    )
    .unwrap();
    assert_eq!(m.annotation(0, 10).map(|o| o.len()), Some(16));
}

#[test]
fn marks_are_checked_and_bounded() {
    let t = Transfer {
        rid: 1,
        buffer_offset: 0,
        total: Some(100),
        unsolicited: false,
    };
    let mut m = SendMarks::default();
    assert_eq!(
        m.mark_run(
            0,
            1,
            Transfer {
                rid: RID_LIMIT,
                ..t
            }
        ),
        Err(AnnotateError::BadRid)
    );
    assert_eq!(m.mark_run(0, 0, t), Err(AnnotateError::Empty));
    assert_eq!(m.mark_run(0, 101, t), Err(AnnotateError::TooLong));
    m.mark_run(10, 50, t).unwrap();
    assert_eq!(m.mark_run(59, 1, t), Err(AnnotateError::OutOfOrder));
    // Continuing run: merged into one.
    m.mark_run(
        60,
        10,
        Transfer {
            buffer_offset: 50,
            ..t
        },
    )
    .unwrap();
    assert_eq!(m.runs.len(), 1);
    m.mark_message(5).unwrap();
    assert_eq!(m.mark_message(4), Err(AnnotateError::OutOfOrder));
    for k in 0..MAX_SEND_RUNS as u64 - 1 {
        m.mark_run(100 + 2 * k, 1, Transfer { rid: 2 + k, ..t })
            .unwrap();
    }
    assert_eq!(
        m.mark_run(1_000_000, 1, Transfer { rid: 9, ..t }),
        Err(AnnotateError::Full)
    );
    m.release(70);
    assert_eq!(m.runs.len(), MAX_SEND_RUNS - 1);
    assert!(m.messages.is_empty());
}

/// One piece of a generated send stream: plain bytes (maybe starting a message) or a run of
/// transfer `which`.
#[derive(Clone, Copy, Debug)]
enum Piece {
    Plain { len: u32, message: bool },
    Run { len: u32, which: usize },
}

fn layout() -> impl Strategy<Value = Vec<Piece>> {
    proptest::collection::vec(
        prop_oneof![
            (1u32..2500, any::<bool>()).prop_map(|(len, message)| Piece::Plain { len, message }),
            (1u32..4000, 0usize..3).prop_map(|(len, which)| Piece::Run { len, which }),
        ],
        1..12,
    )
}

/// The truth of a layout: per transfer the total, per stream octet its (transfer, offset in the
/// transfer, run index), and the message starts.
struct Truth {
    totals: [u32; 3],
    at: Vec<Option<(usize, u32, usize)>>,
    messages: Vec<u64>,
}

fn build(pieces: &[Piece]) -> (SendMarks, Truth) {
    let mut totals = [0u32; 3];
    for p in pieces {
        if let Piece::Run { len, which } = *p {
            totals[which] += len;
        }
    }
    let mut m = SendMarks::default();
    let mut truth = Truth {
        totals,
        at: Vec::new(),
        messages: Vec::new(),
    };
    let mut done = [0u32; 3];
    for (k, p) in pieces.iter().enumerate() {
        let s = truth.at.len() as u64;
        match *p {
            Piece::Plain { len, message } => {
                if message {
                    m.mark_message(s).unwrap();
                    truth.messages.push(s);
                }
                truth.at.extend((0..len).map(|_| None));
            }
            Piece::Run { len, which } => {
                let t = Transfer {
                    rid: 0x3F00_0000_0000 | which as u64,
                    buffer_offset: done[which],
                    total: (which != 2).then_some(totals[which]),
                    unsolicited: which == 1,
                };
                m.mark_run(s, len, t).unwrap();
                // Adjacent runs of one transfer with continuous offsets are one run.
                let run = match (k.checked_sub(1).map(|j| pieces[j]), truth.at.last()) {
                    (Some(Piece::Run { which: w, .. }), Some(&Some((_, _, r)))) if w == which => r,
                    _ => k,
                };
                truth
                    .at
                    .extend((0..len).map(|i| Some((which, done[which] + i, run))));
                done[which] += len;
            }
        }
    }
    (m, truth)
}

/// Checks the option of segment `[s, s + len)` against the truth; returns its placement.
fn check(
    truth: &Truth,
    s: u64,
    len: u32,
    opt: Option<RdmaOption>,
) -> Result<Option<(usize, u32, u32)>, TestCaseError> {
    let bytes = &truth.at[s as usize..(s + u64::from(len)) as usize];
    let runs: Vec<usize> = {
        let mut v: Vec<usize> = bytes.iter().flatten().map(|b| b.2).collect();
        v.dedup();
        v
    };
    prop_assert!(runs.len() <= 1, "segment at {} mixes runs {:?}", s, runs);
    let starts_message = truth.messages.binary_search(&s).is_ok();
    prop_assert_eq!(opt.is_some_and(|o| o.aligned()), starts_message);
    let Some(first) = bytes.iter().position(|b| b.is_some()) else {
        prop_assert!(!matches!(opt, Some(RdmaOption::Transfer(_))));
        return Ok(None);
    };
    let Some(RdmaOption::Transfer(t)) = opt else {
        return Err(TestCaseError::fail(format!(
            "transfer bytes at {s} without option"
        )));
    };
    let (which, off, _) = bytes[first].unwrap();
    let n = bytes.iter().filter(|b| b.is_some()).count();
    prop_assert_eq!(usize::from(t.data_offset), first);
    prop_assert_eq!(usize::from(t.data_len), n);
    prop_assert_eq!(
        t.buffer_offset,
        off,
        "buffer offset = transfer octets before the run"
    );
    prop_assert_eq!(t.rid, 0x3F00_0000_0000 | which as u64);
    prop_assert_eq!(t.total, (which != 2).then_some(truth.totals[which]));
    prop_assert_eq!(t.unsolicited, which == 1);
    Ok(Some((which, t.buffer_offset, u32::from(t.data_len))))
}

proptest! {
    /// TCPRDMA-02/07/09/11/13: for any layout, MSS, accounting and alignment policy: no
    /// segment mixes two runs, every segment with transfer bytes carries the option with the
    /// right RID, total, offsets and buffer offset (transfer octets before the run), A exactly
    /// on message starts, and the runs tile each transfer exactly once. A resend of any suffix
    /// of a segment (re-segmentation after a partial ACK) is annotated correctly too.
    #[test]
    fn tcprdma_13_segmentation_tiles_each_transfer_once(
        pieces in layout(),
        emss in 64u32..3000,
        rfc6691 in any::<bool>(),
        align in any::<bool>(),
        suffix in any::<prop::sample::Index>(),
    ) {
        let (mut m, truth) = build(&pieces);
        let acct = if rfc6691 { MssAccounting::Rfc6691 } else { MssAccounting::Draft };
        let end = truth.at.len() as u64;
        let mut placed: [Vec<(u32, u32)>; 3] = Default::default();
        let mut s = 0;
        while s < end {
            let (len, opt) = m.next_segment(s, (end - s) as u32, emss, acct, align);
            prop_assert!(len >= 1 && len <= emss);
            if let (MssAccounting::Rfc6691, Some(o)) = (acct, opt) {
                prop_assert!(len as usize + o.padded_len() <= emss as usize);
            }
            if let Some((which, bo, dl)) = check(&truth, s, len, opt)? {
                placed[which].push((bo, dl));
            }
            let k = suffix.index(len as usize);
            check(&truth, s + k as u64, len - k as u32, m.annotation(s + k as u64, len - k as u32))?;
            s += u64::from(len);
        }
        for (which, p) in placed.iter_mut().enumerate() {
            p.sort();
            let mut next = 0;
            for &(bo, dl) in p.iter() {
                prop_assert_eq!(bo, next, "transfer {} not tiled exactly once", which);
                next += dl;
            }
            prop_assert_eq!(next, truth.totals[which]);
        }
    }
}

proptest! {
    /// `next_segment_encoded` (its shortcut inside a run, the run it keeps between segments,
    /// its out-of-line path) gives the general computation's length and option, encoded octet
    /// for octet, at every segment of a walk over any layout, from any start (after any
    /// release), for any room, EMSS, accounting and alignment, with more marks made in the
    /// middle of the walk and the EMSS shrinking now and then, with the sum of those octets;
    /// `next_segment` (the same, decoded) gives the general option.
    #[test]
    fn next_segment_inside_a_run_matches_the_general_path(
        pieces in layout(),
        at in any::<prop::sample::Index>(),
        released in any::<prop::sample::Index>(),
        rooms in prop::collection::vec(0u32..5000, 1..40),
        emss in 0u32..3000,
        rfc6691 in any::<bool>(),
        align in any::<bool>(),
        later in prop::collection::vec((0usize..40, 0u8..5, 1u32..3000), 0..4),
    ) {
        let (mut m, truth) = build(&pieces);
        let mut end = truth.at.len() as u64;
        let mut s = at.index(end as usize) as u64;
        m.release(released.index(end as usize + 1).min(s as usize) as u64);
        let acct = if rfc6691 { MssAccounting::Rfc6691 } else { MssAccounting::Draft };
        for (step, &avail) in rooms.iter().enumerate() {
            for &(when, what, len) in &later {
                if when != step {
                    continue;
                }
                // Marks appended to the stream: a run that may continue the last one, a
                // message start, a zero-length transfer (refused ones change nothing); or a
                // segment sent again (its option set in between).
                let t = Transfer { rid: 0x3F00_0000_0000, buffer_offset: 0, total: None, unsolicited: false };
                let _ = match what {
                    0 => m.mark_run(end, len, Transfer { buffer_offset: 1 << 20, ..t }),
                    1 => m.mark_run(end, len, Transfer { rid: 77, ..t }),
                    2 => m.mark_message(end.max(s)),
                    3 => m.mark_empty(end.max(s), t),
                    _ => {
                        let again = match len % 3 {
                            0 => m.annotation(s.saturating_sub(u64::from(len)), len.min(1500)),
                            1 => Some(RdmaOption::Aligned { aligned: true }),
                            _ => None,
                        };
                        m.set_encoded(again);
                        continue;
                    }
                };
                end += u64::from(len);
            }
            // Now and then a smaller EMSS (the path's MTU shrank).
            let emss = if (step + emss as usize) % 5 == 4 { emss - emss / 3 } else { emss };
            let general = m.next_segment_general(s, avail, emss, acct, align);
            // The encoded form first (its shortcut reads the run kept so far), octet for octet
            // the general option's encoding.
            let (len, kind) = m.next_segment_encoded(s, avail, emss, acct, align);
            let want = general.1.map_or(([0; 20], 0), |o| o.encoded());
            prop_assert_eq!((len, *m.encoded()), (general.0, want));
            prop_assert_eq!(kind, SegmentOption::of(&want));
            // The sum kept with it is the octets' sum (what the header's checksum adds).
            let sum = crate::checksum::sum(&want.0[..want.1], 0);
            prop_assert_eq!(crate::checksum::fold(m.encoded_with_sum().1), crate::checksum::fold(sum));
            prop_assert_eq!(m.next_segment(s, avail, emss, acct, align), general);
            s += u64::from(general.0.max(1));
        }
    }
}

/// TCPRDMA-21: a zero-length transfer (a failed READ reply at 0) starts its own segment with
/// DL = 0, Total = 0 and A; the next reply's run does not share that segment.
#[test]
fn tcprdma_21_zero_length_transfer_starts_a_segment_without_transfer_bytes() {
    let empty = Transfer {
        rid: 5,
        buffer_offset: 0,
        total: Some(0),
        unsolicited: false,
    };
    let run = Transfer {
        rid: 6,
        total: Some(1000),
        ..empty
    };
    let mut m = SendMarks::default();
    m.mark_message(0).unwrap();
    m.mark_empty(0, empty).unwrap();
    m.mark_message(40).unwrap();
    m.mark_run(80, 1000, run).unwrap();
    assert_eq!(m.mark_empty(79, empty), Err(AnnotateError::OutOfOrder));
    assert_eq!(
        m.mark_run(
            0,
            1,
            Transfer {
                rid: 7,
                total: None,
                ..empty
            }
        ),
        Err(AnnotateError::OutOfOrder),
        "a run may not start at or before a zero-length transfer"
    );
    let (len, opt) = m.next_segment(0, 1080, 1460, MssAccounting::Rfc6691, false);
    assert_eq!(len, 80, "the segment with DL = 0 ends before the run");
    assert_eq!(
        opt,
        Some(RdmaOption::Transfer(RdmaAnnotation {
            aligned: true,
            unsolicited: false,
            rid: 5,
            buffer_offset: 0,
            data_offset: 0,
            data_len: 0,
            total: Some(0),
        }))
    );
    let (len, opt) = m.next_segment(80, 1000, 1460, MssAccounting::Rfc6691, false);
    assert_eq!(len, 1000);
    assert!(matches!(opt, Some(RdmaOption::Transfer(t)) if t.rid == 6 && t.data_len == 1000));
    // A zero-length transfer later in a segment cuts the segment before it.
    let mut m = SendMarks::default();
    m.mark_empty(300, empty).unwrap();
    assert_eq!(m.cut(0, 1000, false), 300);
    assert_eq!(m.annotation(0, 300), None);
    m.release(301);
    assert!(m.is_empty());
}
