//! Tests of the ULPDU-level engine: two engines joined by an in-memory ULPDU pipe.

use super::*;
use crate::ddp::memory::VecMemory;
use crate::ddp::stag_table::RegionSpec;
use crate::rdmap::work_request::{LocalBuf, RemoteBuf, SendOpts, WorkRequest};
use crate::test_support::{filled_region, summary};

/// One side: engine, STag table, memory, and its transmit stream offset.
pub(crate) struct Side {
    pub eng: RdmapEngine,
    pub tags: StagTable,
    pub mem: VecMemory,
    pub tx_pos: u64,
}

impl Side {
    pub fn new(seed: u64, cfg: RdmapConfig) -> Side {
        Side {
            eng: RdmapEngine::new(cfg),
            tags: StagTable::new(seed),
            mem: VecMemory::new(),
            tx_pos: 0,
        }
    }

    /// Register a region of `len` octets filled by `fill(i)`.
    pub fn region(
        &mut self,
        len: usize,
        access: Access,
        fill: impl Fn(usize) -> u8,
    ) -> (RegionHandle, Stag) {
        let at = (0x1000, self.eng.cfg.pd);
        filled_region(&mut self.tags, &mut self.mem, at, len, access, fill)
    }

    /// Posts `wr`, which must be taken.
    pub fn post(&mut self, wr: WorkRequest) {
        self.eng.post(&self.tags, wr).expect("posted");
    }

    /// Hands every ULPDU this side wants to send now to `to`, in order, unacknowledged.
    pub fn send_to(&mut self, to: &mut Side) {
        for (pos, u) in self.drain_tx() {
            to.eng
                .handle_ulpdu_in_order(&mut to.tags, &mut to.mem, pos, &u);
        }
    }

    pub fn completions(&mut self) -> Vec<WorkCompletion> {
        std::iter::from_fn(|| self.eng.poll_completion()).collect()
    }

    pub fn events(&mut self) -> Vec<RdmapEvent> {
        std::iter::from_fn(|| self.eng.poll_event()).collect()
    }

    /// Collect every ULPDU this side wants to send now.
    pub fn drain_tx(&mut self) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 65536];
        while let Some(n) = self.eng.poll_ulpdu(&self.tags, &self.mem, &mut buf) {
            let pos = self.tx_pos;
            // Pretend MPA adds 8 octets per FPDU so stream offsets are not ULPDU offsets.
            self.tx_pos += n as u64 + 8;
            self.eng.ulpdu_framed(self.tx_pos);
            out.push((pos, buf[..n].to_vec()));
        }
        out
    }
}

/// Move ULPDUs both ways, in order, acknowledging everything, until quiet.
pub(crate) fn pump(a: &mut Side, b: &mut Side) {
    loop {
        let mut moved = false;
        for (pos, u) in a.drain_tx() {
            b.eng
                .handle_ulpdu_in_order(&mut b.tags, &mut b.mem, pos, &u);
            moved = true;
        }
        a.eng.on_acked(a.tx_pos);
        for (pos, u) in b.drain_tx() {
            a.eng
                .handle_ulpdu_in_order(&mut a.tags, &mut a.mem, pos, &u);
            moved = true;
        }
        b.eng.on_acked(b.tx_pos);
        if !moved {
            break;
        }
    }
}

/// `len` octets at the start of `region`.
pub(crate) fn buf(region: RegionHandle, len: u32) -> LocalBuf {
    LocalBuf {
        region,
        offset: 0,
        len,
    }
}

pub(crate) fn cfg(stream: u32) -> RdmapConfig {
    RdmapConfig {
        stream: StreamId(stream),
        pd: PdId(1),
        ird: 4,
        ord: 4,
        mulpdu: 1000,
    }
}

/// Octet `i` of the shared test pattern of `seed` (`testkit::Pattern`).
fn pattern(seed: usize) -> impl Fn(usize) -> u8 {
    move |i| testkit::Pattern::new(seed as u64).byte_at(i as u64)
}

#[test]
fn send_write_read_loopback() {
    let mut a = Side::new(1, cfg(1));
    let mut b = Side::new(2, cfg(2));
    let n = 5000usize;
    let (asrc, _) = a.region(n, Access::LOCAL_WRITE, pattern(1));
    let (bdst, bstag) = b.region(
        n,
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
        |_| 0,
    );
    let (brecv, _) = b.region(n, Access::LOCAL_WRITE, |_| 0);
    // Send
    b.eng
        .post(
            &b.tags,
            WorkRequest::recv(
                10,
                LocalBuf {
                    region: brecv,
                    offset: 0,
                    len: n as u32,
                },
            ),
        )
        .unwrap();
    a.eng
        .post(
            &a.tags,
            WorkRequest::send(
                1,
                LocalBuf {
                    region: asrc,
                    offset: 0,
                    len: n as u32,
                },
                SendOpts::default(),
            ),
        )
        .unwrap();
    // Write
    a.eng
        .post(
            &a.tags,
            WorkRequest::write(
                2,
                LocalBuf {
                    region: asrc,
                    offset: 0,
                    len: n as u32,
                },
                RemoteBuf {
                    stag: bstag,
                    to: 0x1000,
                },
            ),
        )
        .unwrap();
    // Read back into a fresh region of A
    let (aback, _) = a.region(n, Access::LOCAL_WRITE, |_| 0);
    a.eng
        .post(
            &a.tags,
            WorkRequest::read(
                3,
                LocalBuf {
                    region: aback,
                    offset: 0,
                    len: n as u32,
                },
                RemoteBuf {
                    stag: bstag,
                    to: 0x1000,
                },
            ),
        )
        .unwrap();
    pump(&mut a, &mut b);
    let want: Vec<u8> = (0..n).map(pattern(1)).collect();
    assert_eq!(b.mem.get(brecv).unwrap(), &want[..]);
    assert_eq!(b.mem.get(bdst).unwrap(), &want[..]);
    assert_eq!(a.mem.get(aback).unwrap(), &want[..]);
    assert_eq!(
        summary(&a.completions()),
        [
            (1, WcOpcode::Send, WcStatus::Success, n as u32),
            (2, WcOpcode::Write, WcStatus::Success, n as u32),
            (3, WcOpcode::Read, WcStatus::Success, n as u32),
        ]
    );
    let cb = b.completions();
    assert_eq!(cb.len(), 1);
    assert_eq!(
        (cb[0].wr_id, cb[0].opcode, cb[0].byte_len),
        (10, WcOpcode::Recv, n as u32)
    );
}

// ---------------------------------------------------------------------------------------------
// The -06 §7.2 error table: one test per row, each showing the Terminate sent.

/// The header and the payload of a produced segment, through the view.
pub(crate) fn parse_segment(seg: &[u8]) -> Result<(DdpRepr, &[u8]), DdpHeaderError> {
    let p = DdpPacket::new_checked(seg)?;
    Ok((DdpRepr::parse(&p)?, &seg[p.header_len()..]))
}

pub(crate) fn tagged_seg(
    last: bool,
    opcode: RdmapOpcode,
    stag: Stag,
    to: u64,
    payload: &[u8],
) -> Vec<u8> {
    let mut v = vec![0u8; TAGGED_HEADER_LEN + payload.len()];
    DdpRepr::Tagged(TaggedRepr {
        last,
        rsvd_ulp: RdmapControl { opcode }.emit(),
        stag,
        to,
    })
    .emit(&mut DdpPacket::new_unchecked(&mut v[..]));
    v[TAGGED_HEADER_LEN..].copy_from_slice(payload);
    v
}

fn untagged_seg(
    last: bool,
    opcode: RdmapOpcode,
    qn: u32,
    msn: u32,
    mo: u32,
    payload: &[u8],
) -> Vec<u8> {
    let mut v = vec![0u8; UNTAGGED_HEADER_LEN + payload.len()];
    let rsvd_ulp = RdmapControl { opcode }.emit();
    DdpRepr::Untagged(UntaggedRepr {
        last,
        rsvd_ulp,
        rsvd_ulp_ext: 0,
        qn,
        msn,
        mo,
    })
    .emit(&mut DdpPacket::new_unchecked(&mut v[..]));
    v[UNTAGGED_HEADER_LEN..].copy_from_slice(payload);
    v
}

/// Feed `seg` to a fresh sink and check the one Terminate it sends: untagged QN 2, MSN 1, L,
/// opcode Terminate, the given code, M set with the segment length, and the offending DDP header
/// copied when `copied` (DDP-80, DDP-81, DDP-83). Also checks that nothing was placed and that
/// a later valid segment is silently dropped (DDP-82).
fn check_terminate(sink: &mut Side, seg: &[u8], code: TermCode, copied: bool) -> TerminateRepr {
    let before = sink.mem.clone();
    let placed_before = sink.eng.stats().rx_placed_octets;
    sink.eng
        .handle_ulpdu_in_order(&mut sink.tags, &mut sink.mem, 100, seg);
    assert_eq!(sink.eng.state(), RdmapState::Error);
    assert_eq!(
        sink.eng.stats().rx_placed_octets,
        placed_before,
        "nothing placed (DDP-80)"
    );
    let tx = sink.drain_tx();
    assert_eq!(tx.len(), 1, "exactly one Terminate");
    let (hdr, payload) = parse_segment(&tx[0].1).unwrap();
    let DdpRepr::Untagged(u) = hdr else {
        panic!("Terminate must be untagged")
    };
    assert_eq!((u.qn, u.msn, u.mo, u.last), (qn::TERMINATE, 1, 0, true));
    assert_eq!(
        RdmapControl::parse(u.rsvd_ulp).unwrap().opcode,
        RdmapOpcode::Terminate
    );
    let t = TerminateRepr::parse(&TerminatePacket::new_checked(payload).unwrap()).unwrap();
    assert_eq!(t.code, code);
    assert_eq!(t.seg_len, Some(seg.len() as u16));
    if copied {
        let hl = if crate::ddp::control::DdpControl::parse(seg[0]).tagged {
            TAGGED_HEADER_LEN
        } else {
            UNTAGGED_HEADER_LEN
        };
        assert_eq!(
            t.ddp_header.unwrap().as_bytes(),
            &seg[..hl],
            "offending header copied"
        );
    } else {
        assert!(t.ddp_header.is_none());
    }
    let ev = sink.events();
    assert!(
        ev.contains(&RdmapEvent::TerminateQueued(t)) && ev.contains(&RdmapEvent::TerminateSent(t))
    );
    // DDP-82: a later valid segment is dropped without effect; nothing more is sent.
    let placed = sink.eng.stats().rx_placed_octets;
    sink.eng.handle_ulpdu_in_order(
        &mut sink.tags,
        &mut sink.mem,
        200,
        &untagged_seg(true, RdmapOpcode::Send, 0, 1, 0, b"x"),
    );
    assert_eq!(sink.eng.stats().rx_placed_octets, placed);
    assert!(sink.drain_tx().is_empty());
    for h in [RegionHandle::new(1, 1), RegionHandle::new(2, 1)] {
        assert_eq!(sink.mem.get(h), before.get(h), "memory unchanged");
    }
    t
}

/// A sink with region 1 (remote write, 64 octets at TO 0x1000) and region 2 (receive buffer, 32 octets).
fn sink() -> (Side, Stag) {
    let mut s = Side::new(7, cfg(1));
    let (_, stag) = s.region(64, Access::REMOTE_WRITE | Access::LOCAL_WRITE, |_| 0xEE);
    let (recv, _) = s.region(32, Access::LOCAL_WRITE, |_| 0xDD);
    s.eng
        .post(
            &s.tags,
            WorkRequest::recv(
                1,
                LocalBuf {
                    region: recv,
                    offset: 0,
                    len: 32,
                },
            ),
        )
        .unwrap();
    (s, stag)
}

/// Row 0x0/0x00 Local Catastrophic: a segment shorter than its header (no §7.2 code exists for
/// it). The header cannot be copied.
#[test]
fn ddp_7_2_row_local_catastrophic_truncated_header() {
    let (mut s, stag) = sink();
    let seg = tagged_seg(true, RdmapOpcode::RdmaWrite, stag, 0x1000, b"");
    check_terminate(
        &mut s,
        &seg[..10],
        DdpError::LocalCatastrophic.term_code(),
        false,
    );
    let (mut s, _) = sink();
    let seg = untagged_seg(true, RdmapOpcode::Send, 0, 1, 0, b"");
    check_terminate(
        &mut s,
        &seg[..17],
        DdpError::LocalCatastrophic.term_code(),
        false,
    );
}

/// Row 0x1/0x00 Invalid STag (DDP-79a, DDP-79b): unknown STag, then an invalidated one.
#[test]
fn ddp_7_2_row_tagged_invalid_stag() {
    let (mut s, stag) = sink();
    let forged = Stag::new(stag.index(), stag.key() ^ 0x5A);
    check_terminate(
        &mut s,
        &tagged_seg(true, RdmapOpcode::RdmaWrite, forged, 0x1000, b"abc"),
        DdpError::InvalidStag.term_code(),
        true,
    );
    let (mut s, stag) = sink();
    s.tags.invalidate(stag).unwrap();
    check_terminate(
        &mut s,
        &tagged_seg(true, RdmapOpcode::RdmaWrite, stag, 0x1000, b"abc"),
        DdpError::InvalidStag.term_code(),
        true,
    );
}

/// Row 0x1/0x01 Base or bounds violation (DDP-79c, DDP-79d): TO out of bounds, below and across the end.
#[test]
fn ddp_7_2_row_tagged_base_bounds() {
    for to in [0x0FFF, 0x1040, 0x103E] {
        let (mut s, stag) = sink();
        check_terminate(
            &mut s,
            &tagged_seg(true, RdmapOpcode::RdmaWrite, stag, to, b"abc"),
            DdpError::BaseBounds.term_code(),
            true,
        );
    }
}

/// Row 0x1/0x02 STag not associated with DDP Stream (DDP-86 PD, DDP-87 stream).
#[test]
fn ddp_7_2_row_tagged_not_associated() {
    let (mut s, _) = sink();
    let spec = RegionSpec {
        base_to: 0,
        len: 8,
        access: Access::REMOTE_WRITE,
        pd: PdId(99),
        stream: None,
    };
    let (_, other_pd) = s.tags.register(spec).unwrap();
    check_terminate(
        &mut s,
        &tagged_seg(true, RdmapOpcode::RdmaWrite, other_pd, 0, b"abc"),
        DdpError::StagNotAssociated.term_code(),
        true,
    );
    let (mut s, _) = sink();
    let spec = RegionSpec {
        base_to: 0,
        len: 8,
        access: Access::REMOTE_WRITE,
        pd: PdId(1),
        stream: Some(StreamId(42)),
    };
    let (_, other_stream) = s.tags.register(spec).unwrap();
    check_terminate(
        &mut s,
        &tagged_seg(true, RdmapOpcode::RdmaWrite, other_stream, 0, b"abc"),
        DdpError::StagNotAssociated.term_code(),
        true,
    );
}

/// Row 0x1/0x03 TO wrap (DDP-79e).
#[test]
fn ddp_7_2_row_tagged_to_wrap() {
    let (mut s, stag) = sink();
    let seg = tagged_seg(true, RdmapOpcode::RdmaWrite, stag, u64::MAX - 1, b"abc");
    check_terminate(&mut s, &seg, DdpError::ToWrap.term_code(), true);
}

/// Row 0x1/0x04 Invalid DDP version on a tagged segment (DDP-21); layout unknown, not copied.
#[test]
fn ddp_7_2_row_tagged_version() {
    let (mut s, stag) = sink();
    let mut seg = tagged_seg(true, RdmapOpcode::RdmaWrite, stag, 0x1000, b"abc");
    seg[0] = (seg[0] & !0x03) | 0x02;
    check_terminate(&mut s, &seg, DdpError::TaggedVersion.term_code(), false);
}

/// Row 0x2/0x01 Invalid QN (DDP-77a).
#[test]
fn ddp_7_2_row_untagged_invalid_qn() {
    let (mut s, _) = sink();
    check_terminate(
        &mut s,
        &untagged_seg(true, RdmapOpcode::Send, 7, 1, 0, b"abc"),
        DdpError::InvalidQn.term_code(),
        true,
    );
}

/// Row 0x2/0x02 Invalid MSN - no buffer available (DDP-77b).
#[test]
fn ddp_7_2_row_untagged_no_buffer() {
    let mut s = Side::new(7, cfg(1));
    s.region(64, Access::ALL, |_| 0);
    s.region(32, Access::ALL, |_| 0);
    check_terminate(
        &mut s,
        &untagged_seg(true, RdmapOpcode::Send, 0, 1, 0, b"abc"),
        DdpError::NoBuffer.term_code(),
        true,
    );
}

/// Row 0x2/0x03 Invalid MSN - MSN range is not valid (DDP-77e): MSN = expected + posted count,
/// and an MSN behind the window.
#[test]
fn ddp_7_2_row_untagged_msn_range() {
    for msn in [2, 0, 0x8000_0000] {
        let (mut s, _) = sink();
        check_terminate(
            &mut s,
            &untagged_seg(true, RdmapOpcode::Send, 0, msn, 0, b"abc"),
            DdpError::MsnRange.term_code(),
            true,
        );
    }
}

/// Row 0x2/0x04 Invalid MO (DDP-77c).
#[test]
fn ddp_7_2_row_untagged_invalid_mo() {
    let (mut s, _) = sink();
    check_terminate(
        &mut s,
        &untagged_seg(false, RdmapOpcode::Send, 0, 1, 32, b"abc"),
        DdpError::InvalidMo.term_code(),
        true,
    );
}

/// Row 0x2/0x05 DDP Message too long for available buffer (DDP-77d).
#[test]
fn ddp_7_2_row_untagged_too_long() {
    let (mut s, _) = sink();
    check_terminate(
        &mut s,
        &untagged_seg(true, RdmapOpcode::Send, 0, 1, 30, b"abc"),
        DdpError::TooLong.term_code(),
        true,
    );
}

/// Row 0x2/0x06 Invalid DDP version on an untagged segment (DDP-21); not copied.
#[test]
fn ddp_7_2_row_untagged_version() {
    let (mut s, _) = sink();
    let mut seg = untagged_seg(true, RdmapOpcode::Send, 0, 1, 0, b"abc");
    seg[0] &= !0x03;
    check_terminate(&mut s, &seg, DdpError::UntaggedVersion.term_code(), false);
}

/// Rows of the RDMAP layer the engine also detects: bad RV, unknown opcode, opcode on the wrong
/// model, write without the right, Read Response without a Read outstanding.
#[test]
fn rdmap_errors_terminate() {
    let (mut s, stag) = sink();
    let mut seg = untagged_seg(true, RdmapOpcode::Send, 0, 1, 0, b"abc");
    seg[1] = 0x83;
    check_terminate(&mut s, &seg, RdmapError::Version.term_code(), true);
    let (mut s, _) = sink();
    let mut seg = untagged_seg(true, RdmapOpcode::Send, 0, 1, 0, b"abc");
    seg[1] = 0x49;
    check_terminate(&mut s, &seg, RdmapError::UnexpectedOpcode.term_code(), true);
    let (mut s, stag2) = sink();
    check_terminate(
        &mut s,
        &tagged_seg(true, RdmapOpcode::Send, stag2, 0x1000, b"a"),
        RdmapError::UnexpectedOpcode.term_code(),
        true,
    );
    let (mut s, _) = sink();
    check_terminate(
        &mut s,
        &tagged_seg(true, RdmapOpcode::RdmaReadResponse, stag, 0x1000, b"a"),
        RdmapError::UnexpectedOpcode.term_code(),
        true,
    );
    let (mut s, _) = sink();
    let (_, ro) = s.region(8, Access::REMOTE_READ, |_| 0);
    check_terminate(
        &mut s,
        &tagged_seg(true, RdmapOpcode::RdmaWrite, ro, 0x1000, b"a"),
        RdmapError::AccessRights.term_code(),
        true,
    );
}

// ---------------------------------------------------------------------------------------------
// Placement out of order, delivery in order (-06 §5.3, §5.4).

/// DDP-18, DDP-55, DDP-58, DDP-60: the segments of a Write and a Send are handed in reversed;
/// the Write data is placed at once, but the Send completes only when the in-order point passes
/// its L segment, and nothing is delivered twice when duplicates arrive (DDP-56, DDP-57).
#[test]
fn tagged_placed_out_of_order_delivered_in_order() {
    let mut a = Side::new(1, cfg(1));
    let mut b = Side::new(2, cfg(2));
    let n = 3000usize;
    let (asrc, _) = a.region(n, Access::LOCAL_WRITE, pattern(3));
    let (bdst, bstag) = b.region(n, Access::REMOTE_WRITE, |_| 0);
    let (brecv, _) = b.region(64, Access::LOCAL_WRITE, |_| 0);
    b.eng
        .post(
            &b.tags,
            WorkRequest::recv(
                77,
                LocalBuf {
                    region: brecv,
                    offset: 0,
                    len: 64,
                },
            ),
        )
        .unwrap();
    a.eng
        .post(
            &a.tags,
            WorkRequest::write(
                1,
                LocalBuf {
                    region: asrc,
                    offset: 0,
                    len: n as u32,
                },
                RemoteBuf {
                    stag: bstag,
                    to: 0x1000,
                },
            ),
        )
        .unwrap();
    a.eng
        .post(
            &a.tags,
            WorkRequest::send(
                2,
                LocalBuf {
                    region: asrc,
                    offset: 0,
                    len: 10,
                },
                SendOpts::default(),
            ),
        )
        .unwrap();
    let tx = a.drain_tx();
    assert!(tx.len() >= 5, "several Write segments plus the Send");
    let (last_pos, last) = tx.last().unwrap().clone();
    // The Send's L segment first: placed, not delivered.
    b.eng.handle_ulpdu(&b.tags, &mut b.mem, last_pos, &last);
    assert_eq!(
        &b.mem.get(brecv).unwrap()[..10],
        &(0..10).map(pattern(3)).collect::<Vec<_>>()[..]
    );
    assert!(
        b.completions().is_empty(),
        "not delivered before the Write is placed"
    );
    // Write segments in reverse order, placed at once.
    for (pos, u) in tx[..tx.len() - 1].iter().rev() {
        b.eng.handle_ulpdu(&b.tags, &mut b.mem, *pos, u);
        b.eng.deliver_through(&mut b.tags, tx[0].0); // the in-order point has not moved
    }
    assert_eq!(
        b.mem.get(bdst).unwrap(),
        &(0..n).map(pattern(3)).collect::<Vec<_>>()[..]
    );
    assert!(b.completions().is_empty());
    // The in-order point passes only the Write: still no delivery.
    b.eng.deliver_through(&mut b.tags, last_pos);
    assert!(b.completions().is_empty());
    // Duplicate of the L segment before delivery: same record, no second completion.
    b.eng.handle_ulpdu(&b.tags, &mut b.mem, last_pos, &last);
    b.eng.deliver_through(&mut b.tags, last_pos + 1);
    let c = b.completions();
    assert_eq!(c.len(), 1);
    assert_eq!((c[0].wr_id, c[0].byte_len), (77, 10));
    // A duplicate after delivery is dropped (DDP-12/57): no error, no completion.
    b.eng.handle_ulpdu(&b.tags, &mut b.mem, last_pos, &last);
    b.eng.deliver_through(&mut b.tags, last_pos + 1);
    assert!(b.completions().is_empty());
    assert_eq!(b.eng.state(), RdmapState::Active);
}

/// DDP-60: message k waits for a withheld segment of message k-1 (untagged Sends).
#[test]
fn untagged_out_of_order_waits_for_gap() {
    let mut a = Side::new(1, cfg(1));
    let mut b = Side::new(2, cfg(2));
    let (asrc, _) = a.region(4000, Access::LOCAL_WRITE, pattern(5));
    let (brecv, _) = b.region(8000, Access::LOCAL_WRITE, |_| 0);
    for i in 0..2u64 {
        b.eng
            .post(
                &b.tags,
                WorkRequest::recv(
                    10 + i,
                    LocalBuf {
                        region: brecv,
                        offset: 4000 * i,
                        len: 4000,
                    },
                ),
            )
            .unwrap();
        a.eng
            .post(
                &a.tags,
                WorkRequest::send(
                    i,
                    LocalBuf {
                        region: asrc,
                        offset: 0,
                        len: 4000,
                    },
                    SendOpts::default(),
                ),
            )
            .unwrap();
    }
    let tx = a.drain_tx();
    let withheld = 1; // second segment of message 1
    for (i, (pos, u)) in tx.iter().enumerate() {
        if i != withheld {
            b.eng.handle_ulpdu(&b.tags, &mut b.mem, *pos, u);
        }
    }
    b.eng.deliver_through(&mut b.tags, tx[withheld].0);
    assert!(b.completions().is_empty(), "nothing after the gap");
    b.eng
        .handle_ulpdu(&b.tags, &mut b.mem, tx[withheld].0, &tx[withheld].1);
    b.eng.deliver_through(&mut b.tags, u64::MAX);
    let c = b.completions();
    assert_eq!(
        c.iter().map(|c| (c.wr_id, c.byte_len)).collect::<Vec<_>>(),
        [(10, 4000), (11, 4000)]
    );
    let want: Vec<u8> = (0..4000).map(pattern(5)).collect();
    assert_eq!(&b.mem.get(brecv).unwrap()[..4000], &want[..]);
    assert_eq!(&b.mem.get(brecv).unwrap()[4000..], &want[..]);
}

/// DDP-35, DDP-37: the MSN wraps from 0xFFFFFFFF to 0 on both sides and Sends keep flowing.
#[test]
fn msn_wraps_through_zero() {
    let mut a = Side::new(1, cfg(1));
    let mut b = Side::new(2, cfg(2));
    a.eng.set_send_msn_for_test(0xFFFF_FFFE, 1);
    b.eng.set_send_msn_for_test(1, 0xFFFF_FFFE);
    let (asrc, _) = a.region(16, Access::LOCAL_WRITE, pattern(1));
    let (brecv, _) = b.region(64, Access::LOCAL_WRITE, |_| 0);
    for i in 0..4u64 {
        b.eng
            .post(
                &b.tags,
                WorkRequest::recv(
                    i,
                    LocalBuf {
                        region: brecv,
                        offset: 16 * i,
                        len: 16,
                    },
                ),
            )
            .unwrap();
        a.eng
            .post(
                &a.tags,
                WorkRequest::send(
                    i,
                    LocalBuf {
                        region: asrc,
                        offset: 0,
                        len: 16,
                    },
                    SendOpts::default(),
                ),
            )
            .unwrap();
    }
    let tx = a.drain_tx();
    let msns: Vec<u32> = tx
        .iter()
        .map(|(_, u)| match parse_segment(u).unwrap().0 {
            DdpRepr::Untagged(h) => h.msn,
            DdpRepr::Tagged(_) => unreachable!(),
        })
        .collect();
    assert_eq!(msns, [0xFFFF_FFFE, 0xFFFF_FFFF, 0, 1]);
    for (pos, u) in &tx {
        b.eng
            .handle_ulpdu_in_order(&mut b.tags, &mut b.mem, *pos, u);
    }
    assert_eq!(b.completions().len(), 4);
    assert_eq!(b.eng.state(), RdmapState::Active);
}

/// DDP-36: each queue's MSN starts at 1, independently (Send, Read Request, Terminate).
#[test]
fn msn_per_queue_starts_at_one() {
    let mut a = Side::new(1, cfg(1));
    let (asrc, _) = a.region(16, Access::LOCAL_WRITE, pattern(1));
    let rb = RemoteBuf {
        stag: Stag(0x100),
        to: 0,
    };
    a.eng
        .post(
            &a.tags,
            WorkRequest::send(
                1,
                LocalBuf {
                    region: asrc,
                    offset: 0,
                    len: 4,
                },
                SendOpts::default(),
            ),
        )
        .unwrap();
    a.eng
        .post(
            &a.tags,
            WorkRequest::read(
                2,
                LocalBuf {
                    region: asrc,
                    offset: 0,
                    len: 4,
                },
                rb,
            ),
        )
        .unwrap();
    a.eng
        .post(
            &a.tags,
            WorkRequest::send(
                3,
                LocalBuf {
                    region: asrc,
                    offset: 0,
                    len: 4,
                },
                SendOpts::default(),
            ),
        )
        .unwrap();
    a.eng
        .post(
            &a.tags,
            WorkRequest::read(
                4,
                LocalBuf {
                    region: asrc,
                    offset: 0,
                    len: 4,
                },
                rb,
            ),
        )
        .unwrap();
    let got: Vec<(u32, u32)> = a
        .drain_tx()
        .iter()
        .map(|(_, u)| match parse_segment(u).unwrap().0 {
            DdpRepr::Untagged(h) => (h.qn, h.msn),
            DdpRepr::Tagged(_) => unreachable!(),
        })
        .collect();
    assert_eq!(got, [(0, 1), (1, 1), (0, 2), (1, 2)]);
}

// ---------------------------------------------------------------------------------------------
// Zero-length messages (DDP-48..50).

/// Send, Write and Read of 0 octets: one segment each, no STag/TO checks for the tagged ones
/// (garbage STags), and all complete.
#[test]
fn zero_length_send_write_read() {
    let mut a = Side::new(1, cfg(1));
    let mut b = Side::new(2, cfg(2));
    let (asrc, _) = a.region(8, Access::LOCAL_WRITE, |_| 1);
    let (brecv, _) = b.region(8, Access::LOCAL_WRITE, |_| 9);
    b.eng
        .post(
            &b.tags,
            WorkRequest::recv(
                50,
                LocalBuf {
                    region: brecv,
                    offset: 0,
                    len: 8,
                },
            ),
        )
        .unwrap();
    let garbage = RemoteBuf {
        stag: Stag(0xDEAD_BEEF),
        to: u64::MAX,
    };
    a.eng
        .post(
            &a.tags,
            WorkRequest::send(
                1,
                LocalBuf {
                    region: asrc,
                    offset: 0,
                    len: 0,
                },
                SendOpts::default(),
            ),
        )
        .unwrap();
    a.eng
        .post(
            &a.tags,
            WorkRequest::write(
                2,
                LocalBuf {
                    region: asrc,
                    offset: 0,
                    len: 0,
                },
                garbage,
            ),
        )
        .unwrap();
    a.eng
        .post(
            &a.tags,
            WorkRequest::read(
                3,
                LocalBuf {
                    region: asrc,
                    offset: 0,
                    len: 0,
                },
                garbage,
            ),
        )
        .unwrap();
    pump(&mut a, &mut b);
    assert_eq!(b.eng.state(), RdmapState::Active);
    assert_eq!(a.eng.state(), RdmapState::Active);
    let ca = summary(&a.completions());
    assert_eq!(
        ca,
        [
            (1, WcOpcode::Send, WcStatus::Success, 0),
            (2, WcOpcode::Write, WcStatus::Success, 0),
            (3, WcOpcode::Read, WcStatus::Success, 0),
        ]
    );
    let cb = b.completions();
    assert_eq!((cb[0].wr_id, cb[0].byte_len), (50, 0));
    assert_eq!(b.mem.get(brecv).unwrap(), &[9u8; 8], "nothing placed");
}

// ---------------------------------------------------------------------------------------------
// IRD / ORD.

/// ORD: with ORD 2, only two Read Requests go out until a response completes one; later Sends
/// wait behind the blocked Read (send queue order).
#[test]
fn ord_limits_outstanding_reads() {
    let mut a = Side::new(1, RdmapConfig { ord: 2, ..cfg(1) });
    let mut b = Side::new(2, cfg(2));
    let (abuf, _) = a.region(64, Access::LOCAL_WRITE, |_| 0);
    let (_, bstag) = b.region(64, Access::REMOTE_READ, pattern(2));
    for i in 0..4u64 {
        a.eng
            .post(
                &a.tags,
                WorkRequest::read(
                    i,
                    LocalBuf {
                        region: abuf,
                        offset: 16 * i,
                        len: 16,
                    },
                    RemoteBuf {
                        stag: bstag,
                        to: 0x1000,
                    },
                ),
            )
            .unwrap();
    }
    let first = a.drain_tx();
    assert_eq!(first.len(), 2, "ORD 2");
    for (pos, u) in &first {
        b.eng
            .handle_ulpdu_in_order(&mut b.tags, &mut b.mem, *pos, u);
    }
    for (pos, u) in b.drain_tx() {
        a.eng
            .handle_ulpdu_in_order(&mut a.tags, &mut a.mem, pos, &u);
    }
    assert_eq!(a.completions().len(), 2);
    assert_eq!(a.drain_tx().len(), 2, "two more once slots free");
}

/// Acknowledgements stop at the first entry they do not reach: Writes behind an outstanding
/// Read are marked by an acknowledgement that comes before the Read's response and complete
/// with it, in posting order, with no further acknowledgement; a Write acknowledged only up to
/// its predecessor's end does not complete, and completes at its own end.
#[test]
fn acknowledgements_mark_writes_behind_an_outstanding_read() {
    let mut a = Side::new(1, cfg(1));
    let mut b = Side::new(2, cfg(2));
    let (abuf, _) = a.region(3000, Access::LOCAL_WRITE, pattern(1));
    let (_, bstag) = b.region(
        3000,
        Access::REMOTE_READ | Access::REMOTE_WRITE | Access::LOCAL_WRITE,
        pattern(2),
    );
    let remote = RemoteBuf {
        stag: bstag,
        to: 0x1000,
    };
    a.post(WorkRequest::read(1, buf(abuf, 16), remote));
    for id in 2..5 {
        a.post(WorkRequest::write(id, buf(abuf, 1500), remote));
    }
    let sent = a.drain_tx();
    assert_eq!(sent.len(), 1 + 3 * 2);
    let ends: Vec<u64> = sent
        .iter()
        .skip(1)
        .map(|(pos, u)| *pos + u.len() as u64 + 8)
        .collect();
    // Up to the end of the second Write: the Read and the third Write stay outstanding.
    a.eng.on_acked(ends[3]);
    assert!(a.completions().is_empty(), "the Read is first in line");
    for (pos, u) in &sent {
        b.eng
            .handle_ulpdu_in_order(&mut b.tags, &mut b.mem, *pos, u);
    }
    for (pos, u) in b.drain_tx() {
        a.eng
            .handle_ulpdu_in_order(&mut a.tags, &mut a.mem, pos, &u);
    }
    let done: Vec<u64> = a.completions().iter().map(|c| c.wr_id).collect();
    assert_eq!(
        done,
        [1, 2, 3],
        "the Read, then the Writes acknowledged before it"
    );
    a.eng.on_acked(ends[5] - 1);
    assert!(
        a.completions().is_empty(),
        "the last Write is not all acknowledged"
    );
    a.eng.on_acked(ends[5]);
    let done: Vec<_> = a
        .completions()
        .iter()
        .map(|c| (c.wr_id, c.status))
        .collect();
    assert_eq!(done, [(4, WcStatus::Success)]);
}

/// Posts `n` Reads of 16 octets from `b`'s region `stag` on `a`; returns what `a` sends.
fn post_reads(a: &mut Side, n: u64, stag: Stag) -> Vec<(u64, Vec<u8>)> {
    let (abuf, _) = a.region(16 * n as usize, Access::LOCAL_WRITE, |_| 0);
    for i in 0..n {
        a.eng
            .post(
                &a.tags,
                WorkRequest::read(
                    i,
                    LocalBuf {
                        region: abuf,
                        offset: 16 * i,
                        len: 16,
                    },
                    RemoteBuf { stag, to: 0x1000 },
                ),
            )
            .unwrap();
    }
    a.drain_tx()
}

/// IRD (RFC 5040): a peer whose Read Request finds every IRD slot busy gets a Terminate with
/// RDMAP Remote Operation Error "Catastrophic error, localized to RDMAP Stream" (0x0/0x2/0x07,
/// as siw sends it), the DDP header copied, and the excess counted. Fails with the earlier rule
/// (DDP MSN range).
#[test]
fn ird_exceeded_terminates() {
    let mut a = Side::new(1, RdmapConfig { ord: 4, ..cfg(1) });
    let mut b = Side::new(2, RdmapConfig { ird: 1, ..cfg(2) });
    let (_, bstag) = b.region(64, Access::REMOTE_READ, pattern(2));
    let tx = post_reads(&mut a, 2, bstag);
    assert_eq!(tx.len(), 2);
    // B handles both before sending any response: the second exceeds IRD 1.
    b.eng
        .handle_ulpdu_in_order(&mut b.tags, &mut b.mem, tx[0].0, &tx[0].1);
    let t = check_terminate(
        &mut b,
        &tx[1].1,
        RdmapError::CatastrophicStream.term_code(),
        true,
    );
    assert_eq!(
        t.ddp_header.unwrap().as_bytes(),
        &tx[1].1[..UNTAGGED_HEADER_LEN]
    );
    assert_eq!(b.eng.stats().rx_ird_exceeded, 1);
}

/// An IRD of 0: the first Read Request already exceeds it.
#[test]
fn ird_zero_refuses_the_first_read() {
    let mut a = Side::new(1, cfg(1));
    let mut b = Side::new(2, RdmapConfig { ird: 0, ..cfg(2) });
    let (_, bstag) = b.region(64, Access::REMOTE_READ, pattern(2));
    let tx = post_reads(&mut a, 1, bstag);
    check_terminate(
        &mut b,
        &tx[0].1,
        RdmapError::CatastrophicStream.term_code(),
        true,
    );
}

/// A Read Request whose MSN no IRD-sized window could hold is a DDP MSN range error
/// (0x1/0x2/0x03), not an IRD excess.
#[test]
fn read_request_msn_beyond_any_window_is_msn_range() {
    let mut a = Side::new(1, RdmapConfig { ord: 4, ..cfg(1) });
    let mut b = Side::new(2, RdmapConfig { ird: 2, ..cfg(2) });
    let (_, bstag) = b.region(64, Access::REMOTE_READ, pattern(2));
    let tx = post_reads(&mut a, 3, bstag);
    // The third alone (MSN 3, two past the next expected 1): outside the window of IRD 2.
    check_terminate(&mut b, &tx[2].1, DdpError::MsnRange.term_code(), true);
    assert_eq!(b.eng.stats().rx_ird_exceeded, 0);
}

/// A Read Request whose Data Source fails its checks: RDMAP Remote Protection Terminate with
/// the DDP header and the Read Request header copied (R bit).
#[test]
fn read_request_bad_source_terminates_with_rdma_header() {
    let mut a = Side::new(1, cfg(1));
    let mut b = Side::new(2, cfg(2));
    let (abuf, _) = a.region(64, Access::LOCAL_WRITE, |_| 0);
    let (_, no_read) = b.region(64, Access::REMOTE_WRITE, pattern(2));
    a.eng
        .post(
            &a.tags,
            WorkRequest::read(
                1,
                LocalBuf {
                    region: abuf,
                    offset: 0,
                    len: 16,
                },
                RemoteBuf {
                    stag: no_read,
                    to: 0x1000,
                },
            ),
        )
        .unwrap();
    let tx = a.drain_tx();
    b.eng
        .handle_ulpdu_in_order(&mut b.tags, &mut b.mem, tx[0].0, &tx[0].1);
    let out = b.drain_tx();
    assert_eq!(out.len(), 1);
    let (_, payload) = parse_segment(&out[0].1).unwrap();
    let t = TerminateRepr::parse(&TerminatePacket::new_checked(payload).unwrap()).unwrap();
    assert_eq!(t.code, RdmapError::AccessRights.term_code());
    assert_eq!(t.ddp_header.unwrap().as_bytes(), &tx[0].1[..18]);
    assert_eq!(&t.rdma_header.unwrap()[..], &tx[0].1[18..46]);
    // A receives it: error state, Read flushed, event.
    a.eng
        .handle_ulpdu_in_order(&mut a.tags, &mut a.mem, out[0].0, &out[0].1);
    assert_eq!(a.eng.state(), RdmapState::Error);
    let c = a.completions();
    assert_eq!((c[0].wr_id, c[0].status), (1, WcStatus::Flushed));
    assert!(a.events().contains(&RdmapEvent::TerminateReceived(t)));
}

// ---------------------------------------------------------------------------------------------
// Send variants and Terminate reception.

/// Send with Invalidate and Send with SE (with and without Invalidate): the receiver
/// invalidates the named STag before delivery and reports it and the solicited flag.
#[test]
fn send_variants_invalidate_and_solicit() {
    let mut a = Side::new(1, cfg(1));
    let mut b = Side::new(2, cfg(2));
    let (asrc, _) = a.region(8, Access::LOCAL_WRITE, pattern(1));
    let (brecv, _) = b.region(32, Access::LOCAL_WRITE, |_| 0);
    let (_, s1) = b.region(8, Access::REMOTE_WRITE, |_| 0);
    let (_, s2) = b.region(8, Access::REMOTE_WRITE, |_| 0);
    for i in 0..4u64 {
        b.eng
            .post(
                &b.tags,
                WorkRequest::recv(
                    i,
                    LocalBuf {
                        region: brecv,
                        offset: 8 * i,
                        len: 8,
                    },
                ),
            )
            .unwrap();
    }
    let buf = LocalBuf {
        region: asrc,
        offset: 0,
        len: 8,
    };
    a.eng
        .post(
            &a.tags,
            WorkRequest::send(
                0,
                buf,
                SendOpts {
                    solicited: false,
                    invalidate: Some(s1),
                },
            ),
        )
        .unwrap();
    a.eng
        .post(
            &a.tags,
            WorkRequest::send(
                1,
                buf,
                SendOpts {
                    solicited: true,
                    invalidate: None,
                },
            ),
        )
        .unwrap();
    a.eng
        .post(
            &a.tags,
            WorkRequest::send(
                2,
                buf,
                SendOpts {
                    solicited: true,
                    invalidate: Some(s2),
                },
            ),
        )
        .unwrap();
    a.eng
        .post(&a.tags, WorkRequest::send(3, buf, SendOpts::default()))
        .unwrap();
    pump(&mut a, &mut b);
    let c: Vec<_> = b
        .completions()
        .iter()
        .map(|c| (c.wr_id, c.invalidated, c.solicited))
        .collect();
    assert_eq!(
        c,
        [
            (0, Some(s1), false),
            (1, None, true),
            (2, Some(s2), true),
            (3, None, false)
        ]
    );
    assert!(!b.tags.lookup(s1).unwrap().1.valid);
    assert!(!b.tags.lookup(s2).unwrap().1.valid);
    // A Write to the invalidated STag is now refused (DDP-102).
    a.eng
        .post(
            &a.tags,
            WorkRequest::write(
                9,
                buf,
                RemoteBuf {
                    stag: s1,
                    to: 0x1000,
                },
            ),
        )
        .unwrap();
    pump(&mut a, &mut b);
    assert_eq!(b.eng.state(), RdmapState::Error);
}

/// Send with Invalidate naming an STag that cannot be invalidated: RDMAP 0x2/0x09.
#[test]
fn send_with_invalidate_of_unknown_stag_terminates() {
    let mut a = Side::new(1, cfg(1));
    let mut b = Side::new(2, cfg(2));
    let (asrc, _) = a.region(8, Access::LOCAL_WRITE, pattern(1));
    let (brecv, _) = b.region(8, Access::LOCAL_WRITE, |_| 0);
    b.eng
        .post(
            &b.tags,
            WorkRequest::recv(
                0,
                LocalBuf {
                    region: brecv,
                    offset: 0,
                    len: 8,
                },
            ),
        )
        .unwrap();
    let buf = LocalBuf {
        region: asrc,
        offset: 0,
        len: 8,
    };
    a.eng
        .post(
            &a.tags,
            WorkRequest::send(
                0,
                buf,
                SendOpts {
                    solicited: false,
                    invalidate: Some(Stag(0x4242_4242)),
                },
            ),
        )
        .unwrap();
    pump(&mut a, &mut b);
    assert_eq!(b.eng.state(), RdmapState::Error);
    let code = RdmapError::CannotInvalidate.term_code();
    assert!(b
        .events()
        .iter()
        .any(|e| matches!(e, RdmapEvent::TerminateSent(t) if t.code == code)));
    assert!(a
        .events()
        .iter()
        .any(|e| matches!(e, RdmapEvent::TerminateReceived(t) if t.code == code)));
    assert_eq!(a.eng.state(), RdmapState::Error);
}

/// Receiving a Terminate moves the stream to error and flushes every outstanding request, in
/// posting order, with a flush status; later posts are refused.
#[test]
fn terminate_received_flushes_work_requests() {
    let mut a = Side::new(1, cfg(1));
    let (asrc, _) = a.region(8, Access::LOCAL_WRITE, pattern(1));
    let buf = LocalBuf {
        region: asrc,
        offset: 0,
        len: 8,
    };
    a.eng.post(&a.tags, WorkRequest::recv(100, buf)).unwrap();
    a.eng
        .post(&a.tags, WorkRequest::send(1, buf, SendOpts::default()))
        .unwrap();
    a.eng
        .post(
            &a.tags,
            WorkRequest::read(
                2,
                buf,
                RemoteBuf {
                    stag: Stag(5),
                    to: 0,
                },
            ),
        )
        .unwrap();
    a.drain_tx(); // sent, not acknowledged
    a.eng
        .post(&a.tags, WorkRequest::send(3, buf, SendOpts::default()))
        .unwrap(); // not sent yet
    let term = TerminateRepr {
        code: DdpError::InvalidQn.term_code(),
        seg_len: None,
        ddp_header: None,
        rdma_header: None,
    };
    let (tb, tl) = term.to_bytes();
    let seg = untagged_seg(true, RdmapOpcode::Terminate, qn::TERMINATE, 1, 0, &tb[..tl]);
    a.eng
        .handle_ulpdu_in_order(&mut a.tags, &mut a.mem, 0, &seg);
    assert_eq!(a.eng.state(), RdmapState::Error);
    assert_eq!(a.events(), [RdmapEvent::TerminateReceived(term)]);
    let c: Vec<_> = a
        .completions()
        .iter()
        .map(|c| (c.wr_id, c.opcode, c.status))
        .collect();
    assert_eq!(
        c,
        [
            (1, WcOpcode::Send, WcStatus::Flushed),
            (2, WcOpcode::Read, WcStatus::Flushed),
            (3, WcOpcode::Send, WcStatus::Flushed),
            (100, WcOpcode::Recv, WcStatus::Flushed),
        ]
    );
    assert_eq!(
        a.eng
            .post(&a.tags, WorkRequest::send(4, buf, SendOpts::default())),
        Err(WorkRequestError::InvalidState)
    );
    assert!(
        a.drain_tx().is_empty(),
        "no Terminate in reply to a Terminate"
    );
}

/// Local checks at post time: out-of-bounds and rights.
#[test]
fn post_checks_local_buffers() {
    let mut a = Side::new(1, cfg(1));
    let (ro, _) = a.region(8, Access::REMOTE_READ, |_| 0);
    let e = a.eng.post(
        &a.tags,
        WorkRequest::recv(
            1,
            LocalBuf {
                region: ro,
                offset: 0,
                len: 8,
            },
        ),
    );
    assert_eq!(
        e,
        Err(WorkRequestError::Local(
            crate::ddp::stag_table::LocalFault::Access
        ))
    );
    let e = a.eng.post(
        &a.tags,
        WorkRequest::send(
            1,
            LocalBuf {
                region: ro,
                offset: 4,
                len: 8,
            },
            SendOpts::default(),
        ),
    );
    assert_eq!(
        e,
        Err(WorkRequestError::Local(
            crate::ddp::stag_table::LocalFault::Bounds
        ))
    );
}

/// MULPDU bounds every segment and the L segment is last (DDP-14, DDP-41) on the engine path.
#[test]
fn segments_respect_mulpdu() {
    let mut a = Side::new(
        1,
        RdmapConfig {
            mulpdu: 200,
            ..cfg(1)
        },
    );
    let (asrc, _) = a.region(5000, Access::LOCAL_WRITE, pattern(1));
    a.eng
        .post(
            &a.tags,
            WorkRequest::write(
                1,
                LocalBuf {
                    region: asrc,
                    offset: 0,
                    len: 5000,
                },
                RemoteBuf {
                    stag: Stag(0x100),
                    to: 7,
                },
            ),
        )
        .unwrap();
    let tx = a.drain_tx();
    assert!(tx.iter().all(|(_, u)| u.len() <= 200));
    let lasts: Vec<bool> = tx
        .iter()
        .map(|(_, u)| parse_segment(u).unwrap().0.last())
        .collect();
    assert_eq!(lasts.iter().filter(|l| **l).count(), 1);
    assert!(lasts[lasts.len() - 1]);
    assert_eq!(tx.iter().map(|(_, u)| u.len() - 14).sum::<usize>(), 5000);
}

// ---------------------------------------------------------------------------------------------
// Arbitrary input.

/// A Memory that fails the test on any access outside a region's registered length.
struct BoundsChecked {
    lens: std::collections::HashMap<RegionHandle, u64>,
    inner: VecMemory,
}

impl Memory for BoundsChecked {
    fn write(&mut self, region: RegionHandle, offset: u64, data: &[u8]) {
        let len = self.lens[&region];
        assert!(
            offset + data.len() as u64 <= len,
            "write outside region {region:?}: {offset}+{}",
            data.len()
        );
        self.inner.write(region, offset, data);
    }
    fn read(&self, region: RegionHandle, offset: u64, out: &mut [u8]) {
        let len = self.lens[&region];
        assert!(offset + out.len() as u64 <= len, "read outside region");
        self.inner.read(region, offset, out);
    }
}

fn fuzz_sink() -> (RdmapEngine, StagTable, BoundsChecked, Vec<Stag>) {
    let mut tags = StagTable::new(3);
    let mut lens = std::collections::HashMap::new();
    let mut stags = Vec::new();
    for (base, len) in [(0u64, 64u64), (0x1000, 100), (u64::MAX - 63, 64)] {
        let spec = RegionSpec {
            base_to: base,
            len,
            access: Access::ALL,
            pd: PdId(1),
            stream: None,
        };
        let (h, s) = tags.register(spec).unwrap();
        lens.insert(h, len);
        stags.push(s);
    }
    let mut eng = RdmapEngine::new(cfg(1));
    eng.post(
        &tags,
        WorkRequest::recv(
            1,
            LocalBuf {
                region: RegionHandle::new(1, 1),
                offset: 8,
                len: 40,
            },
        ),
    )
    .unwrap();
    eng.post(
        &tags,
        WorkRequest::recv(
            2,
            LocalBuf {
                region: RegionHandle::new(2, 1),
                offset: 0,
                len: 100,
            },
        ),
    )
    .unwrap();
    (
        eng,
        tags,
        BoundsChecked {
            lens,
            inner: VecMemory::new(),
        },
        stags,
    )
}

proptest::proptest! {
    /// Arbitrary ULPDUs never panic and never touch memory outside a registered region (DDP-85).
    #[test]
    fn arbitrary_ulpdus_never_panic_or_escape(segs in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..120), 1..8)) {
        let (mut eng, mut tags, mut mem, _) = fuzz_sink();
        for (i, s) in segs.iter().enumerate() {
            eng.handle_ulpdu_in_order(&mut tags, &mut mem, i as u64 * 200, s);
        }
        let mut out = [0u8; 2000];
        while eng.poll_ulpdu(&tags, &mem, &mut out).is_some() {}
    }

    /// Well-formed headers with random fields aimed at real STags: placement stays inside the
    /// regions whatever STag, TO, QN, MSN and MO say (DDP-85, DDP-99).
    #[test]
    fn random_headers_stay_in_bounds(
        hdrs in proptest::collection::vec((proptest::prelude::any::<bool>(), 0usize..4, proptest::prelude::any::<u64>(), 0u32..4, 0u32..4, proptest::prelude::any::<u32>(), 0usize..80, 0u8..8), 1..10)
    ) {
        let (mut eng, mut tags, mut mem, stags) = fuzz_sink();
        for (i, (tagged, si, to, qn, msn, mo, len, op)) in hdrs.into_iter().enumerate() {
            let payload = vec![0xAB; len];
            let opcode = RdmapOpcode::from_u8(op).unwrap();
            let stag = stags.get(si).copied().unwrap_or(Stag(0x0102_0304));
            let to = if to % 2 == 0 { 0x1000 + to % 120 } else { to };
            let seg = if tagged {
                tagged_seg(true, opcode, stag, to, &payload)
            } else {
                untagged_seg(i % 2 == 0, opcode, qn, msn, mo % 128, &payload)
            };
            eng.handle_ulpdu_in_order(&mut tags, &mut mem, i as u64 * 200, &seg);
        }
    }
}

/// Regression (found by `random_headers_stay_in_bounds`): a peer starts MSN 2 while MSN 1
/// never got its L segment. Ensures MSN 2 is not delivered into MSN 1's buffer: the delivery
/// finds MSN 1 still open and terminates with 0x2/0x03, its header copied. (MSN 2 is empty
/// here: a non-empty one would be placed into MSN 2's own buffer first, which is allowed.)
#[test]
fn skipped_last_segment_is_msn_range_error() {
    let (mut s, _) = sink();
    let (recv2, _) = s.region(32, Access::LOCAL_WRITE, |_| 0);
    s.eng
        .post(
            &s.tags,
            WorkRequest::recv(
                2,
                LocalBuf {
                    region: recv2,
                    offset: 0,
                    len: 32,
                },
            ),
        )
        .unwrap();
    s.eng.handle_ulpdu_in_order(
        &mut s.tags,
        &mut s.mem,
        0,
        &untagged_seg(false, RdmapOpcode::Send, 0, 1, 0, b"ab"),
    );
    let seg = untagged_seg(true, RdmapOpcode::Send, 0, 2, 0, b"");
    let t = check_terminate(&mut s, &seg, DdpError::MsnRange.term_code(), true);
    assert_eq!(
        t.ddp_header.unwrap().as_bytes(),
        &seg[..UNTAGGED_HEADER_LEN]
    );
    let c: Vec<_> = s
        .completions()
        .iter()
        .map(|c| (c.wr_id, c.status))
        .collect();
    assert_eq!(c, [(1, WcStatus::Flushed), (2, WcStatus::Flushed)]);
}

/// A Read Response may only write the sink its Read Request named: another local STag (even a
/// valid, writable one) is 0x1/0x00, outside the requested range is 0x1/0x01.
#[test]
fn read_response_limited_to_requested_sink() {
    for (other_stag, to_off, want) in [
        (true, 0u64, DdpError::InvalidStag),
        (false, 12, DdpError::BaseBounds),
    ] {
        let mut a = Side::new(1, cfg(1));
        let (abuf, _) = a.region(64, Access::LOCAL_WRITE, |_| 0);
        let (_, other) = a.region(64, Access::LOCAL_WRITE, |_| 0);
        let rb = RemoteBuf {
            stag: Stag(0x500),
            to: 0,
        };
        a.eng
            .post(
                &a.tags,
                WorkRequest::read(
                    1,
                    LocalBuf {
                        region: abuf,
                        offset: 0,
                        len: 16,
                    },
                    rb,
                ),
            )
            .unwrap();
        let sink = a.tags.region(abuf).unwrap().stag;
        a.drain_tx();
        let stag = if other_stag { other } else { sink };
        let seg = tagged_seg(
            true,
            RdmapOpcode::RdmaReadResponse,
            stag,
            0x1000 + to_off,
            &[7u8; 8],
        );
        check_terminate(&mut a, &seg, want.term_code(), true);
    }
}

/// A ULPDU handed in as pieces (as MPA markers split it), cut anywhere, even inside the DDP
/// header or a Read Request, places and delivers exactly as one slice would.
#[test]
fn ulpdu_parts_cut_anywhere() {
    for piece in [1usize, 3, 7, 19, 500] {
        let mut a = Side::new(1, cfg(1));
        let mut b = Side::new(2, cfg(2));
        let n = 3000usize;
        let (asrc, _) = a.region(n, Access::LOCAL_WRITE, pattern(9));
        let (bdst, bstag) = b.region(n, Access::REMOTE_WRITE | Access::REMOTE_READ, |_| 0);
        let (brecv, _) = b.region(n, Access::LOCAL_WRITE, |_| 0);
        let (aback, _) = a.region(n, Access::LOCAL_WRITE, |_| 0);
        let buf = LocalBuf {
            region: asrc,
            offset: 0,
            len: n as u32,
        };
        let remote = RemoteBuf {
            stag: bstag,
            to: 0x1000,
        };
        b.eng
            .post(
                &b.tags,
                WorkRequest::recv(
                    5,
                    LocalBuf {
                        region: brecv,
                        offset: 0,
                        len: n as u32,
                    },
                ),
            )
            .unwrap();
        a.eng
            .post(&a.tags, WorkRequest::send(1, buf, SendOpts::default()))
            .unwrap();
        a.eng
            .post(&a.tags, WorkRequest::write(2, buf, remote))
            .unwrap();
        a.eng
            .post(
                &a.tags,
                WorkRequest::read(
                    3,
                    LocalBuf {
                        region: aback,
                        offset: 0,
                        len: n as u32,
                    },
                    remote,
                ),
            )
            .unwrap();
        loop {
            let mut moved = false;
            for (pos, u) in a.drain_tx() {
                let parts: Vec<&[u8]> = u.chunks(piece).collect();
                b.eng.handle_ulpdu_parts(&b.tags, &mut b.mem, pos, &parts);
                b.eng.deliver_through(&mut b.tags, pos + 1);
                moved = true;
            }
            for (pos, u) in b.drain_tx() {
                let parts: Vec<&[u8]> = u.chunks(piece).collect();
                a.eng.handle_ulpdu_parts(&a.tags, &mut a.mem, pos, &parts);
                a.eng.deliver_through(&mut a.tags, pos + 1);
                moved = true;
            }
            a.eng.on_acked(a.tx_pos);
            if !moved {
                break;
            }
        }
        let want: Vec<u8> = (0..n).map(pattern(9)).collect();
        assert_eq!(b.mem.get(brecv).unwrap(), &want[..], "piece {piece}");
        assert_eq!(b.mem.get(bdst).unwrap(), &want[..]);
        assert_eq!(a.mem.get(aback).unwrap(), &want[..]);
        assert_eq!(a.completions().len(), 3);
        assert_eq!(b.eng.state(), RdmapState::Active);
    }
}

/// DDP-102 with out-of-order placement: a Write that follows a Send with Invalidate of its
/// STag in the stream, but arrives first, must not land once the Send is known.
#[test]
fn write_after_send_with_invalidate_refused_even_out_of_order() {
    let mut a = Side::new(1, cfg(1));
    let mut b = Side::new(2, cfg(2));
    let (asrc, _) = a.region(8, Access::LOCAL_WRITE, pattern(1));
    let (brecv, _) = b.region(8, Access::LOCAL_WRITE, |_| 0);
    let (bwin, bstag) = b.region(8, Access::REMOTE_WRITE, |_| 0);
    b.eng
        .post(
            &b.tags,
            WorkRequest::recv(
                1,
                LocalBuf {
                    region: brecv,
                    offset: 0,
                    len: 8,
                },
            ),
        )
        .unwrap();
    let buf = LocalBuf {
        region: asrc,
        offset: 0,
        len: 8,
    };
    a.eng
        .post(
            &a.tags,
            WorkRequest::send(
                1,
                buf,
                SendOpts {
                    solicited: false,
                    invalidate: Some(bstag),
                },
            ),
        )
        .unwrap();
    a.eng
        .post(
            &a.tags,
            WorkRequest::write(
                2,
                buf,
                RemoteBuf {
                    stag: bstag,
                    to: 0x1000,
                },
            ),
        )
        .unwrap();
    let tx = a.drain_tx();
    assert_eq!(tx.len(), 2);
    b.eng.handle_ulpdu(&b.tags, &mut b.mem, tx[0].0, &tx[0].1); // the Send, not delivered yet
    b.eng.handle_ulpdu(&b.tags, &mut b.mem, tx[1].0, &tx[1].1); // the Write after it
    b.eng.deliver_through(&mut b.tags, u64::MAX);
    assert_eq!(
        b.mem.get(bwin).unwrap(),
        &[0u8; 8],
        "the Write did not land"
    );
    assert_eq!(b.eng.state(), RdmapState::Error);
    assert_eq!(b.drain_tx().len(), 1);
    let code = DdpError::InvalidStag.term_code();
    assert!(b
        .events()
        .iter()
        .any(|e| matches!(e, RdmapEvent::TerminateSent(t) if t.code == code)));
    let c = b.completions();
    assert_eq!(
        (c[0].wr_id, c[0].invalidated),
        (1, Some(bstag)),
        "the Send itself was delivered"
    );
}
