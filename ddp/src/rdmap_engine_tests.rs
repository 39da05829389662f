//! Tests of the ULPDU-level engine: two engines joined by an in-memory ULPDU pipe.

use super::*;
use crate::memory::VecMemory;
use crate::stag_table::RegionSpec;

/// One side: engine, STag table, memory, and its transmit stream offset.
pub(crate) struct Side {
    pub eng: RdmapEngine,
    pub tags: StagTable,
    pub mem: VecMemory,
    pub tx_pos: u64,
}

impl Side {
    pub fn new(seed: u64, cfg: EngineConfig) -> Side {
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
        let spec = RegionSpec {
            base_to: 0x1000,
            len: len as u64,
            access,
            pd: self.eng.cfg.pd,
            stream: None,
        };
        let (h, s) = self.tags.register(spec).unwrap();
        self.mem.insert(h, (0..len).map(fill).collect());
        (h, s)
    }

    pub fn completions(&mut self) -> Vec<Completion> {
        std::iter::from_fn(|| self.eng.poll_completion()).collect()
    }

    pub fn events(&mut self) -> Vec<EngineEvent> {
        std::iter::from_fn(|| self.eng.poll_event()).collect()
    }

    /// Collect every ULPDU this side wants to send now.
    pub fn drain_tx(&mut self) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 65536];
        while let Some(n) = self.eng.poll_ulpdu(&self.mem, &mut buf) {
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

pub(crate) fn cfg(stream: u32) -> EngineConfig {
    EngineConfig {
        stream: StreamId(stream),
        pd: PdId(1),
        ird: 4,
        ord: 4,
        mulpdu: 1000,
    }
}

fn pattern(seed: usize) -> impl Fn(usize) -> u8 {
    move |i| (i.wrapping_mul(31).wrapping_add(seed * 7)) as u8
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
        .post_recv(
            &b.tags,
            10,
            LocalBuf {
                region: brecv,
                offset: 0,
                len: n as u32,
            },
        )
        .unwrap();
    a.eng
        .post_send(
            &a.tags,
            1,
            LocalBuf {
                region: asrc,
                offset: 0,
                len: n as u32,
            },
            SendOpts::default(),
        )
        .unwrap();
    // Write
    a.eng
        .post_write(
            &a.tags,
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
        )
        .unwrap();
    // Read back into a fresh region of A
    let (aback, _) = a.region(n, Access::LOCAL_WRITE, |_| 0);
    a.eng
        .post_read(
            &a.tags,
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
        )
        .unwrap();
    pump(&mut a, &mut b);
    let want: Vec<u8> = (0..n).map(pattern(1)).collect();
    assert_eq!(b.mem.get(brecv).unwrap(), &want[..]);
    assert_eq!(b.mem.get(bdst).unwrap(), &want[..]);
    assert_eq!(a.mem.get(aback).unwrap(), &want[..]);
    let ca = a.completions();
    assert_eq!(
        ca.iter()
            .map(|c| (c.wr_id, c.opcode, c.status, c.byte_len))
            .collect::<Vec<_>>(),
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

fn tagged_seg(last: bool, opcode: Opcode, stag: Stag, to: u64, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8; TAGGED_HEADER_LEN + payload.len()];
    DdpHeader::Tagged(TaggedRepr {
        last,
        rsvd_ulp: RdmapControl { opcode }.emit(),
        stag,
        to,
    })
    .emit(&mut v);
    v[TAGGED_HEADER_LEN..].copy_from_slice(payload);
    v
}

fn untagged_seg(last: bool, opcode: Opcode, qn: u32, msn: u32, mo: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8; UNTAGGED_HEADER_LEN + payload.len()];
    let rsvd_ulp = RdmapControl { opcode }.emit();
    DdpHeader::Untagged(UntaggedRepr {
        last,
        rsvd_ulp,
        rsvd_ulp_ext: 0,
        qn,
        msn,
        mo,
    })
    .emit(&mut v);
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
    assert_eq!(sink.eng.state(), EngineState::Error);
    assert_eq!(
        sink.eng.stats().rx_placed_octets,
        placed_before,
        "nothing placed (DDP-80)"
    );
    let tx = sink.drain_tx();
    assert_eq!(tx.len(), 1, "exactly one Terminate");
    let (hdr, payload) = DdpHeader::parse(&tx[0].1).unwrap();
    let DdpHeader::Untagged(u) = hdr else {
        panic!("Terminate must be untagged")
    };
    assert_eq!((u.qn, u.msn, u.mo, u.last), (qn::TERMINATE, 1, 0, true));
    assert_eq!(
        RdmapControl::parse(u.rsvd_ulp).unwrap().opcode,
        Opcode::Terminate
    );
    let t = TerminateRepr::parse(&TerminatePacket::new_checked(payload).unwrap()).unwrap();
    assert_eq!(t.code, code);
    assert_eq!(t.seg_len, Some(seg.len() as u16));
    if copied {
        let hl = if crate::control::is_tagged(seg[0]) {
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
        ev.contains(&EngineEvent::TerminateQueued(t))
            && ev.contains(&EngineEvent::TerminateSent(t))
    );
    // DDP-82: a later valid segment is dropped without effect; nothing more is sent.
    let placed = sink.eng.stats().rx_placed_octets;
    sink.eng.handle_ulpdu_in_order(
        &mut sink.tags,
        &mut sink.mem,
        200,
        &untagged_seg(true, Opcode::Send, 0, 1, 0, b"x"),
    );
    assert_eq!(sink.eng.stats().rx_placed_octets, placed);
    assert!(sink.drain_tx().is_empty());
    for (h, bytes) in
        [(RegionHandle(1), ()), (RegionHandle(2), ())].map(|(h, _)| (h, before.get(h)))
    {
        assert_eq!(sink.mem.get(h), bytes, "memory unchanged");
    }
    t
}

/// A sink with region 1 (remote write, 64 octets at TO 0x1000) and region 2 (receive buffer, 32 octets).
fn sink() -> (Side, Stag) {
    let mut s = Side::new(7, cfg(1));
    let (_, stag) = s.region(64, Access::REMOTE_WRITE | Access::LOCAL_WRITE, |_| 0xEE);
    let (recv, _) = s.region(32, Access::LOCAL_WRITE, |_| 0xDD);
    s.eng
        .post_recv(
            &s.tags,
            1,
            LocalBuf {
                region: recv,
                offset: 0,
                len: 32,
            },
        )
        .unwrap();
    (s, stag)
}

/// Row 0x0/0x00 Local Catastrophic: a segment shorter than its header (no §7.2 code exists for
/// it; digest §4.5 design choice). The header cannot be copied.
#[test]
fn ddp_7_2_row_local_catastrophic_truncated_header() {
    let (mut s, stag) = sink();
    let seg = tagged_seg(true, Opcode::RdmaWrite, stag, 0x1000, b"");
    check_terminate(
        &mut s,
        &seg[..10],
        DdpError::LocalCatastrophic.term_code(),
        false,
    );
    let (mut s, _) = sink();
    let seg = untagged_seg(true, Opcode::Send, 0, 1, 0, b"");
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
        &tagged_seg(true, Opcode::RdmaWrite, forged, 0x1000, b"abc"),
        DdpError::InvalidStag.term_code(),
        true,
    );
    let (mut s, stag) = sink();
    s.tags.invalidate(stag).unwrap();
    check_terminate(
        &mut s,
        &tagged_seg(true, Opcode::RdmaWrite, stag, 0x1000, b"abc"),
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
            &tagged_seg(true, Opcode::RdmaWrite, stag, to, b"abc"),
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
        &tagged_seg(true, Opcode::RdmaWrite, other_pd, 0, b"abc"),
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
        &tagged_seg(true, Opcode::RdmaWrite, other_stream, 0, b"abc"),
        DdpError::StagNotAssociated.term_code(),
        true,
    );
}

/// Row 0x1/0x03 TO wrap (DDP-79e).
#[test]
fn ddp_7_2_row_tagged_to_wrap() {
    let (mut s, stag) = sink();
    let seg = tagged_seg(true, Opcode::RdmaWrite, stag, u64::MAX - 1, b"abc");
    check_terminate(&mut s, &seg, DdpError::ToWrap.term_code(), true);
}

/// Row 0x1/0x04 Invalid DDP version on a tagged segment (DDP-21); layout unknown, not copied.
#[test]
fn ddp_7_2_row_tagged_version() {
    let (mut s, stag) = sink();
    let mut seg = tagged_seg(true, Opcode::RdmaWrite, stag, 0x1000, b"abc");
    seg[0] = (seg[0] & !0x03) | 0x02;
    check_terminate(&mut s, &seg, DdpError::TaggedVersion.term_code(), false);
}

/// Row 0x2/0x01 Invalid QN (DDP-77a).
#[test]
fn ddp_7_2_row_untagged_invalid_qn() {
    let (mut s, _) = sink();
    check_terminate(
        &mut s,
        &untagged_seg(true, Opcode::Send, 7, 1, 0, b"abc"),
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
        &untagged_seg(true, Opcode::Send, 0, 1, 0, b"abc"),
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
            &untagged_seg(true, Opcode::Send, 0, msn, 0, b"abc"),
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
        &untagged_seg(false, Opcode::Send, 0, 1, 32, b"abc"),
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
        &untagged_seg(true, Opcode::Send, 0, 1, 30, b"abc"),
        DdpError::TooLong.term_code(),
        true,
    );
}

/// Row 0x2/0x06 Invalid DDP version on an untagged segment (DDP-21); not copied.
#[test]
fn ddp_7_2_row_untagged_version() {
    let (mut s, _) = sink();
    let mut seg = untagged_seg(true, Opcode::Send, 0, 1, 0, b"abc");
    seg[0] &= !0x03;
    check_terminate(&mut s, &seg, DdpError::UntaggedVersion.term_code(), false);
}

/// Rows of the RDMAP layer the engine also detects: bad RV, unknown opcode, opcode on the wrong
/// model, write without the right, Read Response without a Read outstanding.
#[test]
fn rdmap_errors_terminate() {
    let (mut s, stag) = sink();
    let mut seg = untagged_seg(true, Opcode::Send, 0, 1, 0, b"abc");
    seg[1] = 0x83;
    check_terminate(&mut s, &seg, RdmapError::Version.term_code(), true);
    let (mut s, _) = sink();
    let mut seg = untagged_seg(true, Opcode::Send, 0, 1, 0, b"abc");
    seg[1] = 0x49;
    check_terminate(&mut s, &seg, RdmapError::UnexpectedOpcode.term_code(), true);
    let (mut s, stag2) = sink();
    check_terminate(
        &mut s,
        &tagged_seg(true, Opcode::Send, stag2, 0x1000, b"a"),
        RdmapError::UnexpectedOpcode.term_code(),
        true,
    );
    let (mut s, _) = sink();
    check_terminate(
        &mut s,
        &tagged_seg(true, Opcode::RdmaReadResponse, stag, 0x1000, b"a"),
        RdmapError::UnexpectedOpcode.term_code(),
        true,
    );
    let (mut s, _) = sink();
    let (_, ro) = s.region(8, Access::REMOTE_READ, |_| 0);
    check_terminate(
        &mut s,
        &tagged_seg(true, Opcode::RdmaWrite, ro, 0x1000, b"a"),
        RdmapError::AccessRights.term_code(),
        true,
    );
}
