//! Placement only where the specs allow it: out-of-order FPDUs are located by
//! markers or by the ULPDU_Length chain from a known FPDU start (MPA-70), never by a CRC that
//! happens to match; after a receive error nothing later in the stream is placed (DDP-82).

use super::tests::{fpdus, local, pair, pump, remote, End};
use super::*;
use crate::ddp::memory::RegionHandle;
use crate::ddp::stag::Stag;
use crate::ddp::stag_table::Access;
use crate::rdmap::completion::WcStatus;
use crate::rdmap::term_code::TermCode;
use crate::rdmap::work_request::{LocalBuf, SendOpts, WorkRequest};
use crate::DdpError;

/// A whole FPDU (MPA header, DDP/RDMAP header, payload, pad, CRC) as markers-off framing
/// makes it: a valid FPDU image wherever it starts a segment of a markers-off stream.
fn fpdu_image(ulpdu: &[u8]) -> Vec<u8> {
    let cfg = mpa::FramingConfig::default();
    let mut out = vec![0u8; mpa::fpdu_wire_len(cfg, 0, ulpdu.len())];
    mpa::encode_fpdu(cfg, 0, &[ulpdu], &mut out).unwrap();
    out
}

/// RDMA Write ULPDU (RFC 5040/DDP tagged header, L=1) of `payload` to `stag` at `to`.
fn write_ulpdu(stag: Stag, to: u64, payload: &[u8]) -> Vec<u8> {
    let mut u = vec![0xC1, 0x40];
    u.extend_from_slice(&stag.0.to_be_bytes());
    u.extend_from_slice(&to.to_be_bytes());
    u.extend_from_slice(payload);
    u
}

/// Send ULPDU (untagged, QN 0, L=1) with this MSN and MO.
fn send_ulpdu(msn: u32, mo: u32, payload: &[u8]) -> Vec<u8> {
    let mut u = vec![0x41, 0x43, 0, 0, 0, 0];
    u.extend_from_slice(&0u32.to_be_bytes());
    u.extend_from_slice(&msn.to_be_bytes());
    u.extend_from_slice(&mo.to_be_bytes());
    u.extend_from_slice(payload);
    u
}

const MSGS: usize = 4;
const RECV_LEN: usize = 2048;
const BASE_TO: u64 = 0x10_0000;

/// Send payloads made of valid FPDU images: an RDMA Write into the receiver's window and a
/// Send into a receive buffer past the real message's end, between filler octets.
fn forged_payloads(window: Stag) -> Vec<Vec<u8>> {
    (0..MSGS)
        .map(|i| {
            let mut p = vec![0x30 + i as u8; 13 + 7 * i];
            p.extend_from_slice(&fpdu_image(&write_ulpdu(window, BASE_TO, &[0xEE; 64])));
            p.extend_from_slice(&vec![0x60 + i as u8; 5 + 3 * i]);
            p.extend_from_slice(&fpdu_image(&send_ulpdu(
                (i + 1) as u32,
                1900,
                b"FORGED MESSAGE",
            )));
            p.extend_from_slice(&[0x70; 9]);
            p
        })
        .collect()
}

struct Forgery {
    b: End,
    window: RegionHandle,
    recv: RegionHandle,
    payloads: Vec<Vec<u8>>,
    /// The stream as it leaves A, from its first FPDU.
    stream: Vec<u8>,
    start: u64,
    /// Where each FPDU image inside the payloads starts in `stream`, and the FPDU boundaries.
    cut_points: Vec<usize>,
}

fn forgery(markers: bool) -> Forgery {
    let (mut a, mut b) = pair(markers, true);
    pump(&mut a, &mut b, 1 << 20);
    let (window, wstag) = b.region(256, Access::REMOTE_WRITE, |_| 0);
    let (recv, _) = b.region(RECV_LEN * MSGS, Access::LOCAL_WRITE, |_| 0);
    let payloads = forged_payloads(wstag);
    let all: Vec<u8> = payloads.concat();
    let (src, _) = a.region(all.len(), Access::LOCAL_WRITE, |i| all[i]);
    let mut at = 0u64;
    for (i, p) in payloads.iter().enumerate() {
        let r = local(recv, (RECV_LEN * i) as u64, RECV_LEN as u32);
        b.qp.post(&b.tags, WorkRequest::recv(i as u64, r)).unwrap();
        let s = local(src, at, p.len() as u32);
        a.qp.post(&a.tags, WorkRequest::send(i as u64, s, SendOpts::default()))
            .unwrap();
        at += p.len() as u64;
    }
    let f = fpdus(&mut a);
    let start = f[0].0;
    let mut stream = Vec::new();
    let mut cut_points = Vec::new();
    for (_, bytes) in &f {
        cut_points.push(stream.len());
        stream.extend_from_slice(bytes);
    }
    // Every place where an image's MPA header starts (its length field, found by content).
    {
        for img in [
            fpdu_image(&write_ulpdu(wstag, BASE_TO, &[0xEE; 64])),
            fpdu_image(&send_ulpdu(1, 1900, b"FORGED MESSAGE")),
        ] {
            let mut from = 0;
            while let Some(k) = find(&stream[from..], &img[..20]) {
                cut_points.push(from + k);
                from += k + 1;
            }
        }
    }
    cut_points.sort_unstable();
    cut_points.dedup();
    Forgery {
        b,
        window,
        recv,
        payloads,
        stream,
        start,
        cut_points,
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

impl Forgery {
    /// Cuts the stream at every cut point (plus `extra` cuts), hands the segments to B out of
    /// order (`order` picks), then feeds the whole stream in order as TCP would once the gaps
    /// close; returns how many FPDUs the out-of-order path found.
    fn run(&mut self, extra: &[usize], order: u64) -> usize {
        let mut cuts: Vec<usize> = self.cut_points.clone();
        cuts.extend(extra.iter().map(|e| e % self.stream.len()));
        cuts.push(self.stream.len());
        cuts.sort_unstable();
        cuts.dedup();
        let mut segs: Vec<(usize, usize)> = Vec::new();
        let mut at = 0;
        for &c in &cuts {
            if c > at {
                segs.push((at, c));
                at = c;
            }
        }
        let mut x = order | 1;
        for i in (1..segs.len()).rev() {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            segs.swap(i, (x >> 33) as usize % (i + 1));
        }
        let b = &mut self.b;
        let mut found = 0;
        for &(s, e) in &segs {
            let pos = self.start + s as u64;
            found +=
                b.qp.handle_segment(&b.tags, &mut b.mem, pos, &self.stream[s..e]);
        }
        b.qp.handle_rx_bytes(&mut b.tags, &mut b.mem, Instant::now(), &self.stream);
        found
    }

    /// Nothing placed or delivered but what was sent, byte for byte.
    fn check(&mut self) -> Result<(), String> {
        let b = &mut self.b;
        if b.mem.get(self.window).unwrap().iter().any(|&x| x != 0) {
            return Err("a forged Write landed in the window".into());
        }
        let c = b.completions();
        let got: Vec<_> = c.iter().map(|c| (c.wr_id, c.status, c.byte_len)).collect();
        let want: Vec<_> = (0..MSGS)
            .map(|i| (i as u64, WcStatus::Success, self.payloads[i].len() as u32))
            .collect();
        if got != want {
            return Err(format!("completions {got:?}"));
        }
        let recv = b.mem.get(self.recv).unwrap();
        for (i, p) in self.payloads.iter().enumerate() {
            let buf = &recv[RECV_LEN * i..RECV_LEN * (i + 1)];
            if buf[..p.len()] != p[..] || buf[p.len()..].iter().any(|&x| x != 0) {
                return Err(format!("receive buffer {i} holds other octets"));
            }
        }
        if b.qp.is_error() {
            return Err(format!("stream in error: {:?}", b.events()));
        }
        Ok(())
    }
}

/// MPA-70: Send payloads that hold valid FPDU images (CRC and all), cut so that images start
/// segments, reordered: markers off, nothing out of order is placed at all (no anchor reaches
/// past a gap); markers on, only what the markers and the chain find. Either way only what was
/// sent is placed and delivered, byte for byte.
#[test]
fn mpa_70_fpdu_images_in_payloads_are_never_placed_markers_off_and_on() {
    for markers in [false, true] {
        let mut f = forgery(markers);
        let found = f.run(&[], 0x5eed);
        f.check()
            .unwrap_or_else(|e| panic!("markers {markers}: {e}"));
        if !markers {
            assert_eq!(found, 0, "markers off: no anchor reaches past a gap");
        }
        // The forged images start segments: the old CRC-match guess would have taken them.
        let s = &f.stream;
        assert!(f.cut_points.iter().any(|&c| {
            mpa::decode_fpdu(
                mpa::FramingConfig {
                    markers: false,
                    crc: true,
                },
                0,
                &s[c..],
            )
            .is_ok_and(|d| matches!(d, mpa::Decoded::Complete(f) if f.ulpdu_len() == 78))
        }));
    }
}

/// FPDUs with their transmit offsets.
type Fpdus = Vec<(u64, Vec<u8>)>;

/// A and B established (markers off); A has posted `n` RDMA Writes of 1000 octets each into
/// B's window at `1000 * i`; returns B, its window, A's FPDUs (one per Write) and the data.
fn thousand_octet_writes(n: u64) -> (End, RegionHandle, Fpdus, Vec<u8>) {
    let (mut a, mut b) = pair(false, true);
    pump(&mut a, &mut b, 1 << 20);
    let len = 1000 * n as usize;
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8 + 1).collect();
    let (asrc, _) = a.region(len, Access::LOCAL_WRITE, |i| data[i]);
    let (bwin, bstag) = b.region(len, Access::REMOTE_WRITE, |_| 0);
    for i in 0..n {
        let l = local(asrc, 1000 * i, 1000);
        let r = remote(bstag, BASE_TO + 1000 * i);
        a.qp.post(&a.tags, WorkRequest::write(i, l, r)).unwrap();
    }
    let segs = fpdus(&mut a);
    assert_eq!(segs.len(), n as usize);
    (b, bwin, segs, data)
}

/// MPA-70 ways 1 and 3 with markers off: a segment that starts where the in-order parser's next
/// FPDU starts is located, and so is the one the length chain then reaches; a segment after a
/// gap is not (it waits for in-order delivery), and nothing of it is placed.
#[test]
fn mpa_70_markers_off_out_of_order_segments_wait_for_the_chain() {
    let (mut b, bwin, segs, want) = thousand_octet_writes(4);
    let placed = |b: &End, i: usize| {
        b.mem.get(bwin).unwrap()[1000 * i..1000 * (i + 1)]
            .iter()
            .any(|&x| x != 0)
    };
    // Segments 3 and 2 first: no marker, no known start inside them.
    for i in [3, 2] {
        let (pos, s) = &segs[i];
        assert_eq!(b.qp.handle_segment(&b.tags, &mut b.mem, *pos, s), 0);
        assert!(!placed(&b, i));
    }
    // Segment 0 starts at the in-order point (way 1), segment 1 where 0's length leads (way 3).
    for i in [0, 1] {
        let (pos, s) = &segs[i];
        assert_eq!(b.qp.handle_segment(&b.tags, &mut b.mem, *pos, s), 1);
        assert!(placed(&b, i));
    }
    // Segment 2 again: now the chain reaches it.
    let (pos, s) = &segs[2];
    assert_eq!(b.qp.handle_segment(&b.tags, &mut b.mem, *pos, s), 1);
    assert!(placed(&b, 2) && !placed(&b, 3));
    for (_, s) in &segs {
        b.qp.handle_rx_bytes(&mut b.tags, &mut b.mem, Instant::now(), s);
    }
    assert!(b.mem.get(bwin).unwrap() == &want[..]);
    assert!(!b.qp.is_error());
}

/// MPA-70 way 1 inside an FPDU: the in-order parser holds the first part of an FPDU (its
/// length is in), so the FPDU after it is a known start, and an out-of-order segment that
/// begins there is located.
#[test]
fn mpa_70_length_of_a_partly_received_fpdu_gives_the_next_start() {
    let (mut b, bwin, segs, want) = thousand_octet_writes(2);
    b.qp.handle_rx_bytes(&mut b.tags, &mut b.mem, Instant::now(), &segs[0].1[..100]);
    let (pos, s) = &segs[1];
    assert_eq!(b.qp.handle_segment(&b.tags, &mut b.mem, *pos, s), 1);
    assert!(b.mem.get(bwin).unwrap()[1000..] == want[1000..]);
    assert!(b.mem.get(bwin).unwrap()[..1000].iter().all(|&x| x == 0));
}

/// DDP-82 (-06 §7.1 "MUST silently drop any subsequent incoming DDP Segments"): an RDMA Write
/// to an unknown STag arrives out of order; every segment after it in the stream is dropped
/// at once and counted (the window stays untouched there), while the segments before it that
/// fill the gap are still placed; once the in-order point reaches the error, the Terminate
/// (DDP 0x1/0x00, invalid STag) is queued and the stream is in error. Markers on, so the
/// segments are located out of order.
#[test]
fn ddp_82_error_out_of_order_stops_placement_of_every_later_segment() {
    let (mut a, mut b) = pair(true, true);
    pump(&mut a, &mut b, 1 << 20);
    let n = 6000usize;
    let (asrc, _) = a.region(n, Access::LOCAL_WRITE, |i| (i % 241) as u8 + 1);
    let (bwin, bstag) = b.region(2 * n, Access::REMOTE_WRITE, |_| 0);
    let l = local(asrc, 0, n as u32);
    let w = |to: u64, stag: Stag| remote(stag, to);
    a.qp.post(&a.tags, WorkRequest::write(1, l, w(BASE_TO, bstag)))
        .unwrap();
    let first = fpdus(&mut a);
    let bad = Stag(bstag.0 ^ 0x5a5a_0000);
    // Long enough to hold a marker (one every 512 octets), so it is located out of order.
    let small = LocalBuf { len: 1200, ..l };
    a.qp.post(&a.tags, WorkRequest::write(2, small, w(BASE_TO, bad)))
        .unwrap();
    let err = fpdus(&mut a);
    assert_eq!(err.len(), 1);
    a.qp.post(
        &a.tags,
        WorkRequest::write(3, l, w(BASE_TO + n as u64, bstag)),
    )
    .unwrap();
    let later = fpdus(&mut a);
    assert!(first.len() > 1 && later.len() > 1);
    let end = a.qp.tx_offset();

    // The erroneous segment first, with a gap before it; then everything after it.
    let (epos, eseg) = &err[0];
    assert_eq!(b.qp.handle_segment(&b.tags, &mut b.mem, *epos, eseg), 1);
    let dropped0 = b.qp.stats().rx_dropped_after_error;
    for (pos, seg) in &later {
        assert_eq!(b.qp.handle_segment(&b.tags, &mut b.mem, *pos, seg), 1);
    }
    assert_eq!(
        b.qp.stats().rx_dropped_after_error - dropped0,
        later.len() as u64,
        "every later segment dropped and counted"
    );
    assert!(
        b.mem.get(bwin).unwrap()[n..].iter().all(|&x| x == 0),
        "nothing after the error was placed"
    );
    assert!(!b.qp.is_error(), "the error waits for the in-order point");
    // The gap before the error fills: placed (it precedes the error in the stream).
    for (pos, seg) in &first {
        b.qp.handle_segment(&b.tags, &mut b.mem, *pos, seg);
    }
    let want: Vec<u8> = (0..n).map(|i| (i % 241) as u8 + 1).collect();
    assert!(b.mem.get(bwin).unwrap()[..n] == want[..]);
    b.qp.deliver_through(&mut b.tags, end);
    assert!(b.qp.is_error());
    let mut buf = vec![0u8; 4096];
    while b.qp.poll_transmit(&b.tags, &b.mem, &mut buf).is_some() {}
    let code: TermCode = DdpError::InvalidStag.term_code();
    let ev = b.events();
    assert!(
        ev.iter()
            .any(|e| matches!(e, QpEvent::TerminateSent(t) if t.code == code)),
        "{ev:?}"
    );
    assert!(b.mem.get(bwin).unwrap()[n..].iter().all(|&x| x == 0));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]

    /// MPA-70 as a property: for any extra cuts and any processing order, markers off and on,
    /// Send payloads holding valid FPDU images give exactly the sent messages, byte for byte,
    /// and nothing else is placed.
    #[test]
    fn mpa_70_reordered_fpdu_images_never_placed(
        markers: bool,
        extra in proptest::collection::vec(0usize..100_000, 0..24),
        order: u64,
    ) {
        let mut f = forgery(markers);
        f.run(&extra, order);
        let r = f.check();
        proptest::prop_assert!(r.is_ok(), "{:?}", r);
    }
}
