//! Receive: out-of-order placement delivered in order once, any arrival order with
//! duplicates, markers locating unaligned segments, a moved protection domain, and the
//! in-order loop against the parser's path.

use super::*;

/// The AF_XDP path: FPDU-aligned segments handed in shuffled through MPA's locator, which finds
/// each by its markers (MPA-70 way 2); Write data is placed out of order, the Send completes
/// only when the in-order point passes it, and all data matches (DDP-55, DDP-58, DDP-60;
/// MPA-01). Markers off: see `mpa_70_markers_off_out_of_order_segments_wait_for_the_chain`.
#[test]
fn out_of_order_segments_placed_then_delivered_in_order() {
    {
        let markers = true;
        let (mut a, mut b) = pair(markers, true);
        pump(&mut a, &mut b, 1 << 20);
        let n = 200_000usize;
        let (asrc, _) = a.region(n, Access::LOCAL_WRITE, pattern(4));
        let (bwin, bstag) = b.region(n, Access::REMOTE_WRITE, |_| 0);
        let (brecv, _) = b.region(64, Access::LOCAL_WRITE, |_| 0);
        b.qp.post(&b.tags, WorkRequest::recv(9, local(brecv, 0, 64)))
            .unwrap();
        a.qp.post(
            &a.tags,
            WorkRequest::write(1, local(asrc, 0, n as u32), remote(bstag, 0x10_0000)),
        )
        .unwrap();
        a.qp.post(
            &a.tags,
            WorkRequest::send(2, local(asrc, 0, 64), SendOpts::default()),
        )
        .unwrap();
        let mut segs = fpdus(&mut a);
        let end = a.qp.tx_offset();
        // A deterministic shuffle: reverse, then swap neighbours.
        segs.reverse();
        for i in (0..segs.len() - 1).step_by(2) {
            segs.swap(i, i + 1);
        }
        let first = segs.iter().map(|s| s.0).min().unwrap();
        let mut found = 0;
        for (pos, seg) in &segs {
            found += b.qp.handle_segment(&b.tags, &mut b.mem, *pos, seg);
            b.qp.deliver_through(&mut b.tags, first); // the in-order point is stuck at the first
        }
        // Every full-size FPDU holds a marker; the short last one of the Write and the Send
        // may hold none and then wait for the chain.
        assert!(found >= segs.len() - 2, "{found} of {}", segs.len());
        assert!(
            b.completions().is_empty(),
            "no delivery before the gap closes"
        );
        // Placed out of order, all but the Write's short last FPDU (< 1442 octets).
        let want: Vec<u8> = (0..n).map(pattern(4)).collect();
        assert!(
            b.mem.get(bwin).unwrap()[..n - 1442] == want[..n - 1442],
            "placed out of order"
        );
        segs.sort_by_key(|s| s.0); // TCP's in-order delivery once the gap closes
        for (_, seg) in &segs {
            b.qp.handle_rx_bytes(&mut b.tags, &mut b.mem, Instant::now(), seg);
        }
        b.qp.deliver_through(&mut b.tags, end);
        assert!(b.mem.get(bwin).unwrap() == &want[..]);
        let c = b.completions();
        assert_eq!((c.len(), c[0].wr_id, c[0].byte_len), (1, 9, 64));
        assert!(!b.qp.is_error());
    }
}

/// Both receive paths on one connection, as a TCP that places out-of-order segments early and
/// still feeds the in-order byte stream: FPDUs seen twice are placed twice (harmless, DDP-56)
/// and delivered exactly once, in order (DDP-57, DDP-58).
#[test]
fn out_of_order_then_in_order_bytes_deliver_once() {
    for markers in [false, true] {
        let (mut a, mut b) = pair(markers, true);
        pump(&mut a, &mut b, 1 << 20);
        let (asrc, _) = a.region(25_000, Access::LOCAL_WRITE, pattern(5));
        let (brecv, _) = b.region(40_000, Access::LOCAL_WRITE, |_| 0);
        for i in 0..4u64 {
            let r = local(brecv, 10_000 * i, 10_000);
            b.qp.post(&b.tags, WorkRequest::recv(10 + i, r)).unwrap();
            let s = local(asrc, 5000 * i, 10_000);
            a.qp.post(&a.tags, WorkRequest::send(i, s, SendOpts::default()))
                .unwrap();
        }
        let segs = fpdus(&mut a);
        // Every third FPDU arrives early, out of order.
        for (pos, seg) in segs.iter().rev().step_by(3) {
            b.qp.handle_segment(&b.tags, &mut b.mem, *pos, seg);
        }
        assert!(b.completions().is_empty());
        for (_, seg) in &segs {
            b.qp.handle_rx_bytes(&mut b.tags, &mut b.mem, Instant::now(), seg);
        }
        let c: Vec<_> = b
            .completions()
            .iter()
            .map(|c| (c.wr_id, c.byte_len))
            .collect();
        assert_eq!(c, [(10, 10_000), (11, 10_000), (12, 10_000), (13, 10_000)]);
        let src: Vec<u8> = (0..25_000).map(pattern(5)).collect();
        for i in 0..4usize {
            let got = &b.mem.get(brecv).unwrap()[10_000 * i..10_000 * (i + 1)];
            assert!(got == &src[5000 * i..5000 * i + 10_000], "message {i}");
        }
        assert!(!b.qp.is_error());
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// Random arrival order with duplicates (DDP-55..58): whatever order and repetition the
    /// FPDU-aligned segments arrive in (located by markers or the length chain, or not at all),
    /// once the in-order stream has passed the end every Send is delivered exactly once, in
    /// order, and every octet of the Sends and the Write is right.
    #[test]
    fn any_arrival_order_with_duplicates(
        order in proptest::collection::vec(proptest::prelude::any::<proptest::sample::Index>(), 1..120),
        markers: bool,
    ) {
        let (mut a, mut b) = pair(markers, true);
        pump(&mut a, &mut b, 1 << 20);
        let (asrc, _) = a.region(12_000, Access::LOCAL_WRITE, pattern(7));
        let (brecv, _) = b.region(9_000, Access::LOCAL_WRITE, |_| 0);
        let (bwin, bstag) = b.region(12_000, Access::REMOTE_WRITE, |_| 0);
        for i in 0..3u64 {
            b.qp.post(&b.tags, WorkRequest::recv(i, local(brecv, 3000 * i, 3000))).unwrap();
            a.qp.post(&a.tags, WorkRequest::send(i, local(asrc, 1000 * i, 3000), SendOpts::default())).unwrap();
        }
        let w = local(asrc, 0, 12_000);
        a.qp.post(&a.tags, WorkRequest::write(9, w, remote(bstag, 0x10_0000))).unwrap();
        let segs = fpdus(&mut a);
        let end = a.qp.tx_offset();
        // Random picks (with repeats), then every segment once so none is missing.
        for ix in &order {
            let (pos, seg) = ix.get(&segs);
            b.qp.handle_segment(&b.tags, &mut b.mem, *pos, seg);
        }
        // Then TCP's in-order delivery of the whole stream (what nothing located waited for).
        for (_, seg) in &segs {
            b.qp.handle_rx_bytes(&mut b.tags, &mut b.mem, Instant::now(), seg);
        }
        b.qp.deliver_through(&mut b.tags, end);
        b.qp.deliver_through(&mut b.tags, end);
        let c: Vec<_> = b.completions().iter().map(|c| (c.wr_id, c.byte_len)).collect();
        proptest::prop_assert_eq!(c, vec![(0, 3000), (1, 3000), (2, 3000)]);
        let src: Vec<u8> = (0..12_000).map(pattern(7)).collect();
        for i in 0..3usize {
            proptest::prop_assert!(b.mem.get(brecv).unwrap()[3000 * i..3000 * (i + 1)] == src[1000 * i..1000 * i + 3000]);
        }
        proptest::prop_assert!(b.mem.get(bwin).unwrap() == &src[..]);
        proptest::prop_assert!(!b.qp.is_error());
    }
}

/// Markers on, the byte stream cut into segments that ignore FPDU boundaries (as a Linux peer
/// or a large-receive offload would cut it), handed in shuffled: MPA's markers locate the FPDUs inside each
/// segment at their true stream positions; the in-order bytes then fill in the rest; every
/// message is delivered once with the right data.
#[test]
fn unaligned_segments_located_by_markers() {
    let (mut a, mut b) = pair(true, true);
    pump(&mut a, &mut b, 1 << 20);
    let (asrc, _) = a.region(30_000, Access::LOCAL_WRITE, pattern(2));
    let (bwin, bstag) = b.region(30_000, Access::REMOTE_WRITE, |_| 0);
    let (brecv, _) = b.region(600, Access::LOCAL_WRITE, |_| 0);
    for i in 0..3u64 {
        let r = local(brecv, 200 * i, 200);
        b.qp.post(&b.tags, WorkRequest::recv(i, r)).unwrap();
    }
    let w = local(asrc, 0, 30_000);
    a.qp.post(&a.tags, WorkRequest::write(7, w, remote(bstag, 0x10_0000)))
        .unwrap();
    for i in 0..3u64 {
        let s = local(asrc, 100 * i, 200);
        a.qp.post(&a.tags, WorkRequest::send(i, s, SendOpts::default()))
            .unwrap();
    }
    let segs = fpdus(&mut a);
    let start = segs[0].0;
    let stream: Vec<u8> = segs.iter().flat_map(|(_, s)| s.iter().copied()).collect();
    let cuts: Vec<(u64, &[u8])> = stream
        .chunks(4000)
        .enumerate()
        .map(|(i, c)| (start + 4000 * i as u64, c))
        .collect();
    let mut found = 0;
    for (pos, c) in cuts.iter().rev() {
        found += b.qp.handle_segment(&b.tags, &mut b.mem, *pos, c);
    }
    assert!(
        found > 0,
        "some FPDUs lie wholly inside a 4000-octet segment"
    );
    assert!(b.completions().is_empty());
    // What was placed early was placed where it belongs.
    let src: Vec<u8> = (0..30_000).map(pattern(2)).collect();
    let early = b.mem.get(bwin).unwrap();
    let placed = early
        .iter()
        .zip(&src)
        .filter(|(g, w)| **g != 0 && g == w)
        .count();
    assert!(placed > 1000, "early placement happened");
    assert!(
        early.iter().zip(&src).all(|(g, w)| *g == 0 || g == w),
        "nothing misplaced"
    );
    b.qp.handle_rx_bytes(&mut b.tags, &mut b.mem, Instant::now(), &stream);
    let c: Vec<_> = b.completions().iter().map(|c| c.wr_id).collect();
    assert_eq!(c, [0, 1, 2]);
    assert!(b.mem.get(bwin).unwrap() == &src[..]);
    for i in 0..3usize {
        assert!(b.mem.get(brecv).unwrap()[200 * i..200 * (i + 1)] == src[100 * i..100 * i + 200]);
    }
    assert!(!b.qp.is_error());
}

/// A responder created in one protection domain and moved to another at accept time: tagged
/// accesses are checked against the new domain (DDP-06 §8: the STag's PD must match the
/// stream's), so a Write into the new domain's region lands and one into a region of the old
/// domain would be refused.
#[test]
fn set_pd_moves_tagged_checks_to_the_new_domain() {
    let now = Instant::now();
    let ic = qp_cfg(1, false, true);
    let mut rc = qp_cfg(2, false, true);
    rc.auto_accept = false;
    rc.engine.pd = PdId(9);
    let mut a = End::new(Qp::new_initiator(ic, now).unwrap(), 1);
    let mut b = End::new(Qp::new_responder(rc, now), 2);
    pump(&mut a, &mut b, 64);
    assert!(matches!(
        b.events()[..],
        [QpEvent::ConnectRequest(mpa::RequestInfo {
            peer_wants_crc: true,
            peer_wants_markers: false,
            ..
        })]
    ));
    // b's regions are registered in PdId(1) (End::region); the queue pair joins that domain.
    let (bwin, bstag) = b.region(64, Access::REMOTE_WRITE, |_| 0);
    b.qp.set_pd(PdId(1));
    b.qp.accept(b"").unwrap();
    let (asrc, _) = a.region(64, Access::LOCAL_WRITE, pattern(3));
    pump(&mut a, &mut b, 64);
    a.qp.post(
        &a.tags,
        WorkRequest::write(1, local(asrc, 0, 64), remote(bstag, 0x10_0000)),
    )
    .unwrap();
    pump(&mut a, &mut b, 64);
    assert!(!b.qp.is_error(), "{:?}", b.events());
    assert_eq!(
        b.mem.get(bwin).unwrap(),
        &(0..64).map(pattern(3)).collect::<Vec<u8>>()[..]
    );
}

/// How the receive test below cuts the sender's octets into segments.
#[derive(Clone, Copy, Debug)]
enum Cut {
    /// Segments of this many whole FPDUs (an MPA-aware TCP that packs FPDUs).
    Fpdus(usize),
    /// Segments of this many octets, wherever FPDUs begin and end (kernel TCP).
    Octets(usize),
}

/// The in-order receive loop (the fast path: whole FPDUs placed where they lie, an RDMA Write
/// at once) is a shortcut to the parser's callback path. The same octets from one sender
/// (Sends, a Send with Invalidate, RDMA Writes small and large, an RDMA Read; markers off and
/// on) go to two receivers alike but for `fast_path`, in segments of one and of three whole
/// FPDUs and in cuts of 1,000 and of 3 octets, once with a CRC broken in one FPDU: both place
/// the same octets, complete the same work, report the same events and counters (the fast
/// path's own count apart) and answer with the same octets.
/// A sender and two receivers alike but for the fast path (on, off), markers as given.
fn sender_and_twins(markers: bool, now: Instant) -> (End, [End; 2]) {
    let a = End::new(
        Qp::new_initiator(qp_cfg(1, markers, true), now).unwrap(),
        11,
    );
    let bs = [true, false].map(|fast| {
        let mut c = qp_cfg(2, markers, true);
        c.fast_path = fast;
        End::new(Qp::new_responder(c, now), 22)
    });
    (a, bs)
}

/// Runs `a` against the twin receivers `bs` until both sides are quiet (at most 20 turns):
/// `a`'s FPDUs, after `tamper`, cut as `cut` says, go to both; their answers (MPA Reply, Read
/// Response, Terminate) must be the same octets, and the first's go back to `a`.
fn exchange_with_twins(
    a: &mut End,
    bs: &mut [End; 2],
    cut: Cut,
    now: Instant,
    case: &str,
    mut tamper: impl FnMut(&mut Vec<(u64, Vec<u8>)>),
) {
    let mut buf = vec![0u8; 70_000];
    for _ in 0..20 {
        let mut out = fpdus(a);
        a.qp.on_acked(a.qp.tx_offset());
        tamper(&mut out);
        let segments: Vec<Vec<u8>> = match cut {
            Cut::Fpdus(k) => out
                .chunks(k)
                .map(|g| g.iter().flat_map(|(_, f)| f.iter().copied()).collect())
                .collect(),
            Cut::Octets(n) => {
                let all: Vec<u8> = out.iter().flat_map(|(_, f)| f.iter().copied()).collect();
                all.chunks(n).map(<[u8]>::to_vec).collect()
            }
        };
        for b in bs.iter_mut() {
            for s in &segments {
                b.qp.handle_rx_bytes(&mut b.tags, &mut b.mem, now, s);
            }
        }
        let mut answers = [Vec::new(), Vec::new()];
        for (b, ans) in bs.iter_mut().zip(&mut answers) {
            while let Some(n) = b.qp.poll_transmit(&b.tags, &b.mem, &mut buf) {
                ans.extend_from_slice(&buf[..n]);
            }
            b.qp.on_acked(b.qp.tx_offset());
        }
        assert!(
            answers[0] == answers[1],
            "{case}: the receivers answer alike"
        );
        if out.is_empty() && answers[0].is_empty() {
            break;
        }
        a.qp.handle_rx_bytes(&mut a.tags, &mut a.mem, now, &answers[0]);
    }
}

#[test]
fn in_order_receive_loop_equals_the_parser_path() {
    for markers in [false, true] {
        for cut in [
            Cut::Fpdus(1),
            Cut::Fpdus(3),
            Cut::Octets(1000),
            Cut::Octets(3),
        ] {
            for corrupt in [false, true] {
                receive_both_ways(markers, cut, corrupt);
            }
        }
    }
}

fn receive_both_ways(markers: bool, cut: Cut, corrupt: bool) {
    const LEN: usize = 20_000;
    let case = format!("markers {markers}, {cut:?}, CRC broken {corrupt}");
    let now = Instant::now();
    let (mut a, mut bs) = sender_and_twins(markers, now);
    let (asrc, _) = a.region(LEN, Access::LOCAL_WRITE, pattern(1));
    let (aread, _) = a.region(LEN, Access::LOCAL_WRITE, |_| 0);
    let src = local(asrc, 0, LEN as u32);
    let mut regions = Vec::new();
    let mut stags = Vec::new();
    for b in &mut bs {
        let (recv, _) = b.region(2 * LEN, Access::LOCAL_WRITE, |_| 0);
        let (win, win_stag) = b.region(LEN, Access::REMOTE_WRITE, |_| 0);
        let (inv, inv_stag) = b.region(16, Access::REMOTE_WRITE, |_| 0);
        let (_, read_stag) = b.region(LEN, Access::REMOTE_READ, pattern(2));
        for (id, offset) in [(100, 0), (101, LEN as u64)] {
            let buf = local(recv, offset, LEN as u32);
            b.qp.post(&b.tags, WorkRequest::recv(id, buf)).unwrap();
        }
        regions.push([recv, win, inv]);
        stags.push((win_stag, inv_stag, read_stag));
    }
    assert_eq!(stags[0], stags[1], "{case}: the receivers' STags");
    let (win_stag, inv_stag, read_stag) = stags[0];
    let at = |to: u64| remote(win_stag, 0x10_0000 + to);
    let one = LocalBuf { len: 1, ..src };
    let posts = [
        WorkRequest::send(1, src, SendOpts::default()),
        WorkRequest::write(2, src, at(0)),
        WorkRequest::write(3, one, at(7)),
        WorkRequest::send(
            4,
            src,
            SendOpts {
                solicited: false,
                invalidate: Some(inv_stag),
            },
        ),
        WorkRequest::read(
            5,
            LocalBuf {
                region: aread,
                ..src
            },
            remote(read_stag, 0x10_0000),
        ),
        WorkRequest::write(6, src, at(0)),
    ];
    for wr in posts {
        a.qp.post(&a.tags, wr).unwrap();
    }
    let mut broken = !corrupt;
    exchange_with_twins(&mut a, &mut bs, cut, now, &case, |out| {
        if !broken && out.len() > 4 {
            let (_, f) = &mut out[4];
            let mid = f.len() / 2;
            f[mid] ^= 0x40;
            broken = true;
        }
    });
    let [fast, full] = &mut bs;
    let seen = |b: &mut End| (b.completions(), b.events(), b.qp.stats());
    let (mut f, s) = (seen(fast), seen(full));
    assert!(f.2.rx_ulpdus_fast > 0 && s.2.rx_ulpdus_fast == 0, "{case}");
    f.2.rx_ulpdus_fast = 0;
    assert_eq!(f, s, "{case}");
    for (rf, rs) in regions[0].iter().zip(&regions[1]) {
        assert!(
            fast.mem.get(*rf) == full.mem.get(*rs),
            "{case}: placed octets differ"
        );
    }
    if !corrupt {
        let sent: Vec<u8> = (0..LEN).map(pattern(1)).collect();
        assert!(fast.mem.get(regions[0][1]).unwrap() == &sent[..], "{case}");
        let read: Vec<u8> = (0..LEN).map(pattern(2)).collect();
        assert!(a.mem.get(aread).unwrap() == &read[..], "{case}: Read");
        assert_eq!(a.completions().len(), 6, "{case}");
    } else {
        assert!(fast.qp.is_error(), "{case}: the broken CRC was found");
    }
}

/// RDMA Writes whose FPDUs start at every phase of the marker interval, so that some have
/// their DDP header split by a marker (the in-order loop places those at once too, the
/// header gathered from around its marker): the octets placed, completions, events and
/// counters are those of the parser's path, and each Write's payload is where it was sent.
#[test]
fn writes_with_a_marker_inside_the_header_are_placed_at_once() {
    const WRITES: u64 = 600;
    const WINDOW: usize = 1 << 18;
    let now = Instant::now();
    let mut a = End::new(Qp::new_initiator(qp_cfg(1, true, true), now).unwrap(), 11);
    let mut bs = [true, false].map(|fast| {
        let mut c = qp_cfg(2, true, true);
        c.fast_path = fast;
        End::new(Qp::new_responder(c, now), 22)
    });
    let (asrc, _) = a.region(1000, Access::LOCAL_WRITE, pattern(3));
    let mut wins = Vec::new();
    for b in &mut bs {
        wins.push(b.region(WINDOW, Access::REMOTE_WRITE, |_| 0));
    }
    assert_eq!(wins[0].1, wins[1].1, "the receivers' STags");
    let mut to = 0;
    for i in 0..WRITES {
        let len = (37 * i % 700 + 1) as u32;
        let src = local(asrc, i % 200, len);
        let dst = remote(wins[0].1, 0x10_0000 + to);
        a.qp.post(&a.tags, WorkRequest::write(i, src, dst)).unwrap();
        to += u64::from(len);
    }
    assert!(to as usize <= WINDOW);
    let cfg = mpa::FramingConfig {
        markers: true,
        crc: true,
    };
    let mut split = 0;
    for _ in 0..20 {
        let sent = fpdus(&mut a);
        for (pos, f) in sent.iter().filter(|(pos, _)| *pos >= a.qp.tx_seq_start) {
            let offset = (pos - a.qp.tx_seq_start) as u32;
            if let Ok(mpa::Decoded::Complete(r)) = mpa::decode_fpdu(cfg, offset, f) {
                split +=
                    usize::from(r.ulpdu_spaced().1.first() < crate::ddp::tagged::TAGGED_HEADER_LEN);
            }
        }
        let out: Vec<u8> = sent.into_iter().flat_map(|(_, f)| f).collect();
        a.qp.on_acked(a.qp.tx_offset());
        let mut answers = [Vec::new(), Vec::new()];
        let mut buf = vec![0u8; 70_000];
        for (b, ans) in bs.iter_mut().zip(&mut answers) {
            b.qp.handle_rx_bytes(&mut b.tags, &mut b.mem, now, &out);
            while let Some(n) = b.qp.poll_transmit(&b.tags, &b.mem, &mut buf) {
                ans.extend_from_slice(&buf[..n]);
            }
            b.qp.on_acked(b.qp.tx_offset());
        }
        assert!(answers[0] == answers[1], "the receivers answer alike");
        if out.is_empty() && answers[0].is_empty() {
            break;
        }
        a.qp.handle_rx_bytes(&mut a.tags, &mut a.mem, now, &answers[0]);
    }
    assert!(split >= 3, "{split} Writes with a marker inside the header");
    let [fast, full] = &mut bs;
    let seen = |b: &mut End| (b.completions(), b.events(), b.qp.stats());
    let (mut f, s) = (seen(fast), seen(full));
    assert_eq!(
        f.2.rx_ulpdus_fast, WRITES,
        "every Write counted as placed at once"
    );
    f.2.rx_ulpdus_fast = 0;
    assert_eq!(f, s);
    assert!(
        fast.mem.get(wins[0].0) == full.mem.get(wins[1].0),
        "placed octets differ"
    );
    let mut want = vec![0u8; WINDOW];
    let mut at = 0;
    for i in 0..WRITES {
        let len = (37 * i % 700 + 1) as usize;
        let off = (i % 200) as usize;
        for (k, b) in want[at..at + len].iter_mut().enumerate() {
            *b = pattern(3)(off + k);
        }
        at += len;
    }
    assert!(
        fast.mem.get(wins[0].0).unwrap() == &want[..],
        "placed where written"
    );
    assert_eq!(a.completions().len(), WRITES as usize);
}

/// How the small Sends of [`small_sends_both_ways`] end.
#[derive(Debug, Clone, Copy)]
enum SendsEnd {
    /// Every Send finds a buffer.
    Clean,
    /// The last is longer than its buffer (DDP TooLong).
    TooLong,
    /// The last finds no buffer posted (DDP NoBuffer).
    NoBuffer,
}

/// The in-order shortcut for a whole Send in one segment is a shortcut to the parser's path:
/// Sends of 64, 1 (with Solicited Event) and 0 octets, one to a buffer deregistered after its
/// post and one after it, then a clean end or a Send the receiver must refuse, go to two
/// receivers alike but for `fast_path`, markers off and on, one FPDU a segment and in cuts of
/// 5 octets: both place the same octets, complete the same work, report the same events and
/// counters (the fast path's own count apart) and answer with the same octets.
#[test]
fn small_sends_in_order_equal_the_parser_path() {
    for markers in [false, true] {
        for cut in [Cut::Fpdus(1), Cut::Fpdus(2), Cut::Octets(5)] {
            for end in [SendsEnd::Clean, SendsEnd::TooLong, SendsEnd::NoBuffer] {
                small_sends_both_ways(markers, cut, end);
            }
        }
    }
}

fn small_sends_both_ways(markers: bool, cut: Cut, end: SendsEnd) {
    let case = format!("markers {markers}, {cut:?}, {end:?}");
    let now = Instant::now();
    let (mut a, mut bs) = sender_and_twins(markers, now);
    let (asrc, _) = a.region(256, Access::LOCAL_WRITE, pattern(3));
    let mut regions = Vec::new();
    for b in &mut bs {
        let (recv, _) = b.region(512, Access::LOCAL_WRITE, |_| 0);
        let (gone, _) = b.region(64, Access::LOCAL_WRITE, |_| 0);
        let mut bufs = vec![
            local(recv, 0, 64),
            local(recv, 64, 16),
            local(recv, 80, 8),
            local(gone, 0, 64),
            local(recv, 96, 100),
        ];
        match end {
            SendsEnd::Clean | SendsEnd::TooLong => bufs.push(local(recv, 200, 16)),
            SendsEnd::NoBuffer => {}
        }
        for (id, buf) in bufs.into_iter().enumerate() {
            b.qp.post(&b.tags, WorkRequest::recv(100 + id as u64, buf))
                .unwrap();
        }
        assert!(b.tags.deregister(gone).is_some());
        regions.push(recv);
    }
    let send = |id: u64, len: u32, solicited: bool| {
        let opts = SendOpts {
            solicited,
            invalidate: None,
        };
        WorkRequest::send(id, local(asrc, id, len), opts)
    };
    let mut posts = vec![
        send(1, 64, false),
        send(2, 1, true),
        send(3, 0, false),
        send(4, 64, false),
        send(5, 100, true),
    ];
    match end {
        SendsEnd::Clean => posts.push(send(6, 16, false)),
        SendsEnd::TooLong => posts.push(send(6, 17, false)),
        SendsEnd::NoBuffer => posts.push(send(6, 10, false)),
    }
    for wr in posts {
        a.qp.post(&a.tags, wr).unwrap();
    }
    exchange_with_twins(&mut a, &mut bs, cut, now, &case, |_| {});
    let [fast, full] = &mut bs;
    let seen = |b: &mut End| (b.completions(), b.events(), b.qp.stats());
    let (mut f, s) = (seen(fast), seen(full));
    if matches!(cut, Cut::Fpdus(_)) {
        assert!(f.2.rx_ulpdus_fast > 0, "{case}");
    }
    assert_eq!(s.2.rx_ulpdus_fast, 0, "{case}");
    f.2.rx_ulpdus_fast = 0;
    assert_eq!(f, s, "{case}");
    assert!(
        fast.mem.get(regions[0]) == full.mem.get(regions[1]),
        "{case}: placed octets differ"
    );
    let recvs: Vec<_> =
        f.0.iter()
            .map(|wc| (wc.wr_id, wc.status, wc.byte_len))
            .collect();
    let flushed = |id| (id, WcStatus::Flushed, 0);
    let mut expect = vec![
        (100, WcStatus::Success, 64),
        (101, WcStatus::Success, 1),
        (102, WcStatus::Success, 0),
        flushed(103),
        (104, WcStatus::Success, 100),
    ];
    match end {
        SendsEnd::Clean => expect.push((105, WcStatus::Success, 16)),
        SendsEnd::TooLong => expect.push(flushed(105)),
        SendsEnd::NoBuffer => {}
    }
    assert_eq!(recvs, expect, "{case}");
    assert!(f.0[1].solicited && !f.0[0].solicited, "{case}");
    assert_eq!(
        fast.qp.is_error(),
        !matches!(end, SendsEnd::Clean),
        "{case}"
    );
}
