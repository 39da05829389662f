//! Two queue pairs joined by an in-memory byte pipe: MPA startup, then RDMAP over FPDUs.

use super::*;
use crate::ddp::memory::{Memory, RegionHandle, VecMemory};
use crate::ddp::stag::Stag;
use crate::ddp::stag_table::{Access, PdId, RegionSpec, StreamId};
use crate::rdmap::completion::{WcOpcode, WcStatus};
use crate::rdmap::term_code::LlpError;
use crate::rdmap::work_request::{LocalBuf, RemoteBuf, SendOpts, WorkRequest};

pub(crate) struct End {
    pub qp: Qp,
    pub tags: StagTable,
    pub mem: VecMemory,
    /// Octets sent by the other end, not yet fed in.
    pub inbox: Vec<u8>,
}

impl End {
    pub fn new(qp: Qp, seed: u64) -> End {
        End {
            qp,
            tags: StagTable::new(seed),
            mem: VecMemory::new(),
            inbox: Vec::new(),
        }
    }

    pub fn region(
        &mut self,
        len: usize,
        access: Access,
        fill: impl Fn(usize) -> u8,
    ) -> (RegionHandle, Stag) {
        let spec = RegionSpec {
            base_to: 0x10_0000,
            len: len as u64,
            access,
            pd: PdId(1),
            stream: None,
        };
        let (h, s) = self.tags.register(spec).unwrap();
        self.mem.insert(h, (0..len).map(fill).collect());
        (h, s)
    }

    pub fn completions(&mut self) -> Vec<WorkCompletion> {
        std::iter::from_fn(|| self.qp.poll_completion()).collect()
    }

    pub fn events(&mut self) -> Vec<QpEvent> {
        std::iter::from_fn(|| self.qp.poll_event()).collect()
    }
}

pub(crate) fn qp_cfg(stream: u32, markers: bool, crc: bool) -> QpConfig {
    let mut c = QpConfig::default();
    c.engine.stream = StreamId(stream);
    c.engine.pd = PdId(1);
    c.startup.want_markers = markers;
    c.startup.want_crc = crc;
    c
}

pub(crate) fn pair(markers: bool, crc: bool) -> (End, End) {
    let now = Instant::now();
    let mut ic = qp_cfg(1, markers, crc);
    ic.private_data = b"hello".to_vec();
    let mut rc = qp_cfg(2, markers, crc);
    rc.private_data = b"ok".to_vec();
    let a = End::new(Qp::new_initiator(ic, now).unwrap(), 11);
    let b = End::new(Qp::new_responder(rc, now), 22);
    (a, b)
}

/// Move octets both ways until quiet, feeding the receiver in `chunk`-octet pieces (so FPDUs
/// straddle reads), acknowledging everything written at once (the kernel transport's rule).
pub(crate) fn pump(a: &mut End, b: &mut End, chunk: usize) {
    loop {
        let moved = one_way(a, b, chunk) | one_way(b, a, chunk);
        if !moved {
            break;
        }
    }
}

/// Everything `src` wants to send, into `dst`; true if anything moved.
fn one_way(src: &mut End, dst: &mut End, chunk: usize) -> bool {
    let now = Instant::now();
    let mut buf = vec![0u8; 70_000];
    let mut moved = false;
    while let Some(n) = src.qp.poll_transmit(&src.tags, &src.mem, &mut buf) {
        dst.inbox.extend_from_slice(&buf[..n]);
        moved = true;
    }
    src.qp.on_acked(src.qp.tx_offset());
    let inbox = std::mem::take(&mut dst.inbox);
    for piece in inbox.chunks(chunk.max(1)) {
        dst.qp
            .handle_rx_bytes(&mut dst.tags, &mut dst.mem, now, piece);
    }
    moved
}

/// Octet `i` of the shared test pattern of `seed` (`testkit::Pattern`).
fn pattern(seed: usize) -> impl Fn(usize) -> u8 {
    move |i| testkit::Pattern::new(seed as u64).byte_at(i as u64)
}

#[test]
fn startup_then_established_both_sides() {
    let (mut a, mut b) = pair(true, true);
    pump(&mut a, &mut b, 7);
    let ea = a.events();
    let eb = b.events();
    let QpEvent::Established {
        peer_private_data,
        negotiated,
    } = &ea[0]
    else {
        panic!("{ea:?}")
    };
    assert_eq!(peer_private_data, b"ok");
    assert!(negotiated.tx_markers && negotiated.rx_markers && negotiated.crc);
    let QpEvent::Established {
        peer_private_data, ..
    } = &eb[0]
    else {
        panic!("{eb:?}")
    };
    assert_eq!(peer_private_data, b"hello");
    assert!(a.qp.is_established() && b.qp.is_established());
}

/// Send, Send with Invalidate, RDMA Write and RDMA Read of `len` octets, verified byte for byte.
fn run_all_ops(markers: bool, crc: bool, len: usize, chunk: usize) {
    let (mut a, mut b) = pair(markers, crc);
    let (asrc, _) = a.region(len, Access::LOCAL_WRITE, pattern(1));
    let (aread, _) = a.region(len, Access::LOCAL_WRITE, |_| 0);
    let (brecv, _) = b.region(2 * len, Access::LOCAL_WRITE, |_| 0);
    let (bwin, bstag) = b.region(len, Access::REMOTE_WRITE | Access::REMOTE_READ, |_| 0);
    let (_, binv) = b.region(16, Access::REMOTE_WRITE, |_| 0);
    let (bsrc, bsrc_stag) = b.region(len, Access::REMOTE_READ, pattern(2));
    let l = len as u32;
    // Work posted before the connection is up.
    b.qp.post(
        &b.tags,
        WorkRequest::recv(
            100,
            LocalBuf {
                region: brecv,
                offset: 0,
                len: l,
            },
        ),
    )
    .unwrap();
    b.qp.post(
        &b.tags,
        WorkRequest::recv(
            101,
            LocalBuf {
                region: brecv,
                offset: len as u64,
                len: l,
            },
        ),
    )
    .unwrap();
    let src = LocalBuf {
        region: asrc,
        offset: 0,
        len: l,
    };
    a.qp.post(&a.tags, WorkRequest::send(1, src, SendOpts::default()))
        .unwrap();
    a.qp.post(
        &a.tags,
        WorkRequest::send(
            2,
            src,
            SendOpts {
                solicited: false,
                invalidate: Some(binv),
            },
        ),
    )
    .unwrap();
    a.qp.post(
        &a.tags,
        WorkRequest::write(
            3,
            src,
            RemoteBuf {
                stag: bstag,
                to: 0x10_0000,
            },
        ),
    )
    .unwrap();
    let rd = LocalBuf {
        region: aread,
        offset: 0,
        len: l,
    };
    a.qp.post(
        &a.tags,
        WorkRequest::read(
            4,
            rd,
            RemoteBuf {
                stag: bsrc_stag,
                to: 0x10_0000,
            },
        ),
    )
    .unwrap();
    pump(&mut a, &mut b, chunk);
    assert!(
        !a.qp.is_error() && !b.qp.is_error(),
        "{:?} {:?}",
        a.events(),
        b.events()
    );
    let sent: Vec<u8> = (0..len).map(pattern(1)).collect();
    let recv = b.mem.get(brecv).unwrap();
    assert!(
        recv[..len] == sent[..] && recv[len..] == sent[..],
        "Sends placed byte for byte"
    );
    assert!(
        b.mem.get(bwin).unwrap() == &sent[..],
        "Write placed byte for byte"
    );
    let read: Vec<u8> = (0..len).map(pattern(2)).collect();
    assert!(
        a.mem.get(aread).unwrap() == &read[..],
        "Read placed byte for byte"
    );
    let _ = bsrc;
    let ca: Vec<_> = a
        .completions()
        .iter()
        .map(|c| (c.wr_id, c.opcode, c.status, c.byte_len))
        .collect();
    assert_eq!(
        ca,
        [
            (1, WcOpcode::Send, WcStatus::Success, l),
            (2, WcOpcode::Send, WcStatus::Success, l),
            (3, WcOpcode::Write, WcStatus::Success, l),
            (4, WcOpcode::Read, WcStatus::Success, l),
        ]
    );
    let cb: Vec<_> = b
        .completions()
        .iter()
        .map(|c| (c.wr_id, c.opcode, c.byte_len, c.invalidated))
        .collect();
    assert_eq!(
        cb,
        [
            (100, WcOpcode::Recv, l, None),
            (101, WcOpcode::Recv, l, Some(binv))
        ]
    );
    assert!(
        !b.tags.lookup(binv).unwrap().1.valid,
        "Send with Invalidate invalidated the STag"
    );
    // MULPDU respected on the wire (checked through the engine's segment count).
    let mulpdu = a.qp.negotiated().unwrap().mulpdu;
    let min_segments = 2 * len.div_ceil(mulpdu - 18) + len.div_ceil(mulpdu - 14) + 1;
    assert!(a.qp.stats().tx_ulpdus as usize >= min_segments);
}

#[test]
fn loopback_all_ops_markers_off_crc_on() {
    for len in [1, 4096, 1 << 20] {
        run_all_ops(false, true, len, 1000);
    }
}

#[test]
fn loopback_all_ops_markers_on_crc_on() {
    for len in [1, 4096, 1 << 20] {
        run_all_ops(true, true, len, 1000);
    }
}

#[test]
fn loopback_all_ops_markers_off_crc_off() {
    for len in [1, 4096, 1 << 20] {
        run_all_ops(false, false, len, 1000);
    }
}

#[test]
fn loopback_all_ops_markers_on_crc_off() {
    for len in [1, 4096, 1 << 20] {
        run_all_ops(true, false, len, 1000);
    }
}

/// Byte-at-a-time and huge reads give the same result (the stream parser never depends on
/// segmentation).
#[test]
fn loopback_any_segmentation() {
    for chunk in [1, 3, 517, 100_000] {
        run_all_ops(true, true, 3000, chunk);
    }
}

/// Collect the FPDUs `src` wants to send, each with its transmit offset (one per TCP segment,
/// as an MPA-aware TCP sends them).
pub(crate) fn fpdus(src: &mut End) -> Vec<(u64, Vec<u8>)> {
    let mut buf = vec![0u8; 70_000];
    let mut v = Vec::new();
    loop {
        let pos = src.qp.tx_offset();
        let Some(n) = src.qp.poll_transmit(&src.tags, &src.mem, &mut buf) else {
            break;
        };
        v.push((pos, buf[..n].to_vec()));
    }
    v
}

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
        b.qp.post(
            &b.tags,
            WorkRequest::recv(
                9,
                LocalBuf {
                    region: brecv,
                    offset: 0,
                    len: 64,
                },
            ),
        )
        .unwrap();
        a.qp.post(
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
                    to: 0x10_0000,
                },
            ),
        )
        .unwrap();
        a.qp.post(
            &a.tags,
            WorkRequest::send(
                2,
                LocalBuf {
                    region: asrc,
                    offset: 0,
                    len: 64,
                },
                SendOpts::default(),
            ),
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

/// A corrupted CRC: the receiver stops delivery, reports the framing error and sends a
/// Terminate with the LLP CRC code (Layer 2, 0x02); the peer flushes its work on receiving it.
/// (The corrupted FPDU is the second: a Responder may only send after a valid FPDU, MPA-85.)
#[test]
fn corrupted_crc_terminates_with_llp_code() {
    let (mut a, mut b) = pair(false, true);
    pump(&mut a, &mut b, 1 << 20);
    let (asrc, _) = a.region(100, Access::LOCAL_WRITE, pattern(1));
    let (brecv, _) = b.region(200, Access::LOCAL_WRITE, |_| 0);
    for i in 0..2 {
        b.qp.post(
            &b.tags,
            WorkRequest::recv(
                5 + i,
                LocalBuf {
                    region: brecv,
                    offset: 100 * i,
                    len: 100,
                },
            ),
        )
        .unwrap();
        a.qp.post(
            &a.tags,
            WorkRequest::send(
                1 + i,
                LocalBuf {
                    region: asrc,
                    offset: 0,
                    len: 100,
                },
                SendOpts::default(),
            ),
        )
        .unwrap();
    }
    a.qp.post(
        &a.tags,
        WorkRequest::recv(
            7,
            LocalBuf {
                region: asrc,
                offset: 0,
                len: 100,
            },
        ),
    )
    .unwrap();
    let mut segs = fpdus(&mut a);
    segs[1].1[30] ^= 0x01;
    for (_, s) in &segs {
        b.qp.handle_rx_bytes(&mut b.tags, &mut b.mem, Instant::now(), s);
    }
    let eb = b.events();
    assert!(
        eb.contains(&QpEvent::FramingError(FramingError::CrcMismatch)),
        "{eb:?}"
    );
    assert!(
        b.mem.get(brecv).unwrap()[100..].iter().all(|&x| x == 0),
        "nothing of the bad FPDU placed"
    );
    let cb: Vec<_> = b
        .completions()
        .iter()
        .map(|c| (c.wr_id, c.status))
        .collect();
    assert_eq!(cb, [(5, WcStatus::Success), (6, WcStatus::Flushed)]);
    pump(&mut a, &mut b, 1 << 20);
    let eb = b.events();
    let crc = LlpError::Crc.term_code();
    assert!(
        eb.iter()
            .any(|e| matches!(e, QpEvent::TerminateSent(t) if t.code == crc)),
        "{eb:?}"
    );
    let ea = a.events();
    assert!(
        ea.iter()
            .any(|e| matches!(e, QpEvent::TerminateReceived(t) if t.code == crc)),
        "{ea:?}"
    );
    let ca: Vec<_> = a
        .completions()
        .iter()
        .map(|c| (c.wr_id, c.status))
        .collect();
    assert_eq!(
        ca,
        [
            (1, WcStatus::Success),
            (2, WcStatus::Success),
            (7, WcStatus::Flushed)
        ]
    );
}

/// Bad input through MPA: a Write to an invalid STag and one out of bounds each get the
/// Terminate the spec names, seen by the peer.
#[test]
fn bad_stag_and_bounds_over_mpa() {
    for (to_off, code) in [
        (None, crate::ddp::error::DdpError::InvalidStag),
        (Some(60u64), crate::ddp::error::DdpError::BaseBounds),
    ] {
        let (mut a, mut b) = pair(true, true);
        pump(&mut a, &mut b, 1 << 20);
        let (asrc, _) = a.region(16, Access::LOCAL_WRITE, pattern(1));
        let (_, bstag) = b.region(64, Access::REMOTE_WRITE, |_| 0);
        let remote = match to_off {
            None => RemoteBuf {
                stag: Stag(bstag.0 ^ 0x01),
                to: 0x10_0000,
            },
            Some(off) => RemoteBuf {
                stag: bstag,
                to: 0x10_0000 + off,
            },
        };
        a.qp.post(
            &a.tags,
            WorkRequest::write(
                1,
                LocalBuf {
                    region: asrc,
                    offset: 0,
                    len: 16,
                },
                remote,
            ),
        )
        .unwrap();
        pump(&mut a, &mut b, 1 << 20);
        let ea = a.events();
        let want = code.term_code();
        let got = ea.iter().find_map(|e| match e {
            QpEvent::TerminateReceived(t) => Some(*t),
            _ => None,
        });
        let t = got.expect("Terminate received");
        assert_eq!(t.code, want);
        assert_eq!(
            t.ddp_header.unwrap().as_bytes()[0],
            0xC1,
            "the tagged header of the Write"
        );
        assert!(b.qp.is_error() && a.qp.is_error());
    }
}

/// Responder without auto-accept: the ULP sees the Request's private data and rejects;
/// the Initiator sees the rejection with the Reply's private data.
#[test]
fn responder_decides_and_rejects() {
    let now = Instant::now();
    let mut ic = qp_cfg(1, false, true);
    ic.private_data = b"let me in".to_vec();
    let mut rc = qp_cfg(2, false, true);
    rc.auto_accept = false;
    let mut a = End::new(Qp::new_initiator(ic, now).unwrap(), 1);
    let mut b = End::new(Qp::new_responder(rc, now), 2);
    pump(&mut a, &mut b, 5);
    assert_eq!(
        b.events(),
        [QpEvent::ConnectRequest(mpa::RequestInfo {
            private_data: b"let me in".to_vec(),
            peer_wants_markers: false,
            peer_wants_crc: true,
            revision: 2,
            peer_read_depths: Some(mpa::ReadDepths { ird: 16, ord: 16 }),
            p2p_offer: mpa::RtrTypes::NONE,
        })]
    );
    b.qp.reject(b"no").unwrap();
    pump(&mut a, &mut b, 5);
    assert!(a.events().contains(&QpEvent::Rejected {
        private_data: b"no".to_vec()
    }));
    assert!(!a.qp.is_established() && !b.qp.is_established());
}

/// A Responder sends no FPDU before it has received one (MPA-85), even with work queued.
#[test]
fn responder_waits_for_first_fpdu() {
    let (mut a, mut b) = pair(false, true);
    pump(&mut a, &mut b, 1 << 20);
    let (bsrc, _) = b.region(8, Access::LOCAL_WRITE, pattern(1));
    b.qp.post(
        &b.tags,
        WorkRequest::send(
            1,
            LocalBuf {
                region: bsrc,
                offset: 0,
                len: 8,
            },
            SendOpts::default(),
        ),
    )
    .unwrap();
    assert!(fpdus(&mut b).is_empty());
    let (asrc, _) = a.region(8, Access::LOCAL_WRITE, pattern(1));
    let (arecv, _) = a.region(8, Access::LOCAL_WRITE, |_| 0);
    a.qp.post(
        &a.tags,
        WorkRequest::recv(
            2,
            LocalBuf {
                region: arecv,
                offset: 0,
                len: 8,
            },
        ),
    )
    .unwrap();
    let (brecv, _) = b.region(8, Access::LOCAL_WRITE, |_| 0);
    b.qp.post(
        &b.tags,
        WorkRequest::recv(
            3,
            LocalBuf {
                region: brecv,
                offset: 0,
                len: 8,
            },
        ),
    )
    .unwrap();
    a.qp.post(
        &a.tags,
        WorkRequest::send(
            4,
            LocalBuf {
                region: asrc,
                offset: 0,
                len: 8,
            },
            SendOpts::default(),
        ),
    )
    .unwrap();
    pump(&mut a, &mut b, 1 << 20);
    assert_eq!(
        a.mem.get(arecv).unwrap(),
        &(0..8).map(pattern(1)).collect::<Vec<_>>()[..]
    );
}

/// DDP-66, DDP-67: after close, posts fail; what was queued still goes out and completes; the
/// queue pair becomes idle. Reception continues (DDP-71).
#[test]
fn graceful_close_drains_then_idle() {
    let (mut a, mut b) = pair(false, true);
    pump(&mut a, &mut b, 1 << 20);
    let (asrc, _) = a.region(5000, Access::LOCAL_WRITE, pattern(1));
    let (brecv, _) = b.region(5000, Access::LOCAL_WRITE, |_| 0);
    let (arecv, _) = a.region(8, Access::LOCAL_WRITE, |_| 0);
    let (bsrc, _) = b.region(8, Access::LOCAL_WRITE, pattern(2));
    b.qp.post(
        &b.tags,
        WorkRequest::recv(
            1,
            LocalBuf {
                region: brecv,
                offset: 0,
                len: 5000,
            },
        ),
    )
    .unwrap();
    a.qp.post(
        &a.tags,
        WorkRequest::recv(
            2,
            LocalBuf {
                region: arecv,
                offset: 0,
                len: 8,
            },
        ),
    )
    .unwrap();
    let buf = LocalBuf {
        region: asrc,
        offset: 0,
        len: 5000,
    };
    a.qp.post(&a.tags, WorkRequest::send(3, buf, SendOpts::default()))
        .unwrap();
    a.qp.close();
    assert_eq!(
        a.qp.post(&a.tags, WorkRequest::send(4, buf, SendOpts::default())),
        Err(WorkRequestError::InvalidState)
    );
    assert!(!a.qp.is_idle());
    b.qp.post(
        &b.tags,
        WorkRequest::send(
            5,
            LocalBuf {
                region: bsrc,
                offset: 0,
                len: 8,
            },
            SendOpts::default(),
        ),
    )
    .unwrap();
    pump(&mut a, &mut b, 1 << 20);
    assert!(a.qp.is_idle());
    assert_eq!(
        a.completions().iter().map(|c| c.wr_id).collect::<Vec<_>>(),
        [3, 2],
        "still receives after close"
    );
    assert_eq!(
        b.mem.get(brecv).unwrap(),
        &(0..5000).map(pattern(1)).collect::<Vec<_>>()[..]
    );
}

/// A startup failure (bad key) reports StartupFailed once, flushes posted work, and no FPDU
/// ever flows.
#[test]
fn bad_startup_frame_fails_once() {
    let (_, mut b) = pair(false, true);
    let (brecv, _) = b.region(8, Access::LOCAL_WRITE, |_| 0);
    b.qp.post(
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
    b.qp.handle_rx_bytes(
        &mut b.tags,
        &mut b.mem,
        Instant::now(),
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    let ev = b.events();
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert!(matches!(ev[0], QpEvent::StartupFailed(_)));
    assert_eq!(
        b.completions()
            .iter()
            .map(|c| (c.wr_id, c.status))
            .collect::<Vec<_>>(),
        [(1, WcStatus::Flushed)]
    );
    assert!(b
        .qp
        .poll_transmit(&b.tags, &b.mem, &mut [0u8; 100])
        .is_none());
}

proptest::proptest! {
    /// Arbitrary octets into a Responder in startup, and into an established queue pair, never
    /// panic (with markers and CRC on or off).
    #[test]
    fn arbitrary_rx_bytes_never_panic(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600), markers: bool, crc: bool) {
        let (mut a, mut b) = pair(markers, crc);
        b.qp.handle_rx_bytes(&mut b.tags, &mut b.mem, Instant::now(), &data);
        let _ = b.qp.poll_transmit(&b.tags, &b.mem, &mut [0u8; 2000]);
        let (mut a2, mut b2) = pair(markers, crc);
        pump(&mut a2, &mut b2, 1 << 20);
        b2.qp.handle_rx_bytes(&mut b2.tags, &mut b2.mem, Instant::now(), &data);
        let _ = b2.qp.handle_segment(&b2.tags, &mut b2.mem, b2.qp.rx_seq_start() + 4, &data);
        pump(&mut a2, &mut b2, 100);
        let _ = a.qp.poll_transmit(&a.tags, &a.mem, &mut [0u8; 2000]);
    }
}

/// Retransmission without a retransmit copy: every unacknowledged FPDU is rebuilt from its
/// descriptor and the region, octet for octet (markers and CRC included); acknowledged ones
/// are forgotten.
#[test]
fn rebuild_fpdu_reproduces_the_same_octets() {
    for markers in [false, true] {
        let (mut a, mut b) = pair(markers, true);
        a.qp.cfg.keep_for_retransmit = true;
        pump(&mut a, &mut b, 1 << 20);
        let (asrc, _) = a.region(10_000, Access::LOCAL_WRITE, pattern(6));
        let (_, bstag) = b.region(10_000, Access::REMOTE_WRITE | Access::REMOTE_READ, |_| 0);
        let (aread, _) = a.region(100, Access::LOCAL_WRITE, |_| 0);
        a.qp.post(
            &a.tags,
            WorkRequest::write(
                1,
                LocalBuf {
                    region: asrc,
                    offset: 0,
                    len: 10_000,
                },
                RemoteBuf {
                    stag: bstag,
                    to: 0x10_0000,
                },
            ),
        )
        .unwrap();
        a.qp.post(
            &a.tags,
            WorkRequest::read(
                2,
                LocalBuf {
                    region: aread,
                    offset: 0,
                    len: 100,
                },
                RemoteBuf {
                    stag: bstag,
                    to: 0x10_0000,
                },
            ),
        )
        .unwrap();
        let sent = fpdus(&mut a);
        assert!(sent.len() > 5);
        let mut out = vec![0u8; 70_000];
        for (pos, bytes) in &sent {
            let n =
                a.qp.rebuild_fpdu(&a.tags, &a.mem, *pos, &mut out)
                    .expect("kept");
            assert_eq!(&out[..n], &bytes[..], "FPDU at {pos} rebuilt identically");
        }
        // Backwards and skipping: every lookup misses the next-in-order guess.
        for (pos, bytes) in sent.iter().rev().step_by(2) {
            let n =
                a.qp.rebuild_fpdu(&a.tags, &a.mem, *pos, &mut out)
                    .expect("kept");
            assert_eq!(&out[..n], &bytes[..], "FPDU at {pos} rebuilt out of order");
        }
        assert!(
            a.qp.rebuild_fpdu(&a.tags, &a.mem, sent[0].0 + 1, &mut out)
                .is_none(),
            "no FPDU starts there"
        );
        a.qp.on_acked(sent[2].0);
        assert!(
            a.qp.rebuild_fpdu(&a.tags, &a.mem, sent[1].0, &mut out)
                .is_none(),
            "acknowledged: forgotten"
        );
        for (pos, bytes) in &sent[2..] {
            let n =
                a.qp.rebuild_fpdu(&a.tags, &a.mem, *pos, &mut out)
                    .expect("kept");
            assert_eq!(&out[..n], &bytes[..], "FPDU at {pos} rebuilt after the ACK");
        }
        // The rebuilt stream is a valid stream for the peer.
        for (_, bytes) in &sent {
            b.qp.handle_rx_bytes(&mut b.tags, &mut b.mem, Instant::now(), bytes);
        }
        assert!(!b.qp.is_error());
    }
}

/// A region deregistered while its FPDUs are unacknowledged: they cannot be rebuilt (the
/// transport must give the connection up), and the slot's next region is never read for them.
#[test]
fn no_rebuild_from_a_deregistered_region() {
    let (mut a, mut b) = pair(false, true);
    a.qp.cfg.keep_for_retransmit = true;
    pump(&mut a, &mut b, 1 << 20);
    let (src, _) = a.region(3000, Access::LOCAL_WRITE, pattern(6));
    let (_, bstag) = b.region(3000, Access::REMOTE_WRITE, |_| 0);
    let local = LocalBuf {
        region: src,
        offset: 0,
        len: 3000,
    };
    let remote = RemoteBuf {
        stag: bstag,
        to: 0x10_0000,
    };
    a.qp.post(&a.tags, WorkRequest::write(1, local, remote))
        .unwrap();
    let sent = fpdus(&mut a);
    let mut out = vec![0u8; 70_000];
    assert!(a
        .qp
        .rebuild_fpdu(&a.tags, &a.mem, sent[0].0, &mut out)
        .is_some());
    a.tags.deregister(src).unwrap();
    a.mem.remove(src);
    let (next, _) = a.region(3000, Access::LOCAL_WRITE, pattern(7));
    assert_eq!(next.index(), src.index(), "the slot is reused");
    for (pos, _) in &sent {
        assert!(a.qp.rebuild_fpdu(&a.tags, &a.mem, *pos, &mut out).is_none());
    }
}

/// `poll_fpdu_record` claims FPDUs without framing them; `rebuild_fpdu` then frames each once
/// (the AF_XDP engine's first transmission). The stream so produced is placed by the peer exactly
/// like `poll_transmit`'s: same offsets, same lengths, the data lands. Markers on and off.
#[test]
fn claimed_fpdus_framed_once_by_rebuild_make_a_valid_stream() {
    for markers in [false, true] {
        let (mut a, mut b) = pair(markers, true);
        a.qp.cfg.keep_for_retransmit = true;
        pump(&mut a, &mut b, 1 << 20);
        let (asrc, _) = a.region(10_000, Access::LOCAL_WRITE, pattern(7));
        let (bdst, bstag) = b.region(10_000, Access::REMOTE_WRITE, |_| 0);
        let remote = RemoteBuf {
            stag: bstag,
            to: 0x10_0000,
        };
        let local = LocalBuf {
            region: asrc,
            offset: 0,
            len: 10_000,
        };
        a.qp.post(&a.tags, WorkRequest::write(1, local, remote))
            .unwrap();
        assert_eq!(
            a.qp.poll_fpdu_record(&a.tags, 0),
            None,
            "nothing fits in 0 octets"
        );
        let mut out = vec![0u8; 70_000];
        let mut claimed = Vec::new();
        while let Some((pos, len)) = a.qp.poll_fpdu_record(&a.tags, 1500) {
            assert!(len <= 1500, "FPDU of {len} octets exceeds the room given");
            assert_eq!(
                pos + len as u64,
                a.qp.tx_offset(),
                "offsets advance by the wire length"
            );
            let n =
                a.qp.rebuild_fpdu(&a.tags, &a.mem, pos, &mut out)
                    .expect("claimed FPDU is kept");
            assert_eq!(n, len, "rebuilt length equals the claimed length");
            claimed.push(out[..n].to_vec());
        }
        assert!(claimed.len() > 5);
        for bytes in &claimed {
            b.qp.handle_rx_bytes(&mut b.tags, &mut b.mem, Instant::now(), bytes);
        }
        assert!(
            !b.qp.is_error(),
            "the peer accepts the stream (CRC, markers, DDP)"
        );
        // FPDUs framed by poll_transmit after claimed ones sit at the right stream offsets
        // (markers where the peer expects them): claiming kept the framer's offset exact.
        a.qp.post(&a.tags, WorkRequest::write(2, local, remote))
            .unwrap();
        for (_, bytes) in fpdus(&mut a) {
            b.qp.handle_rx_bytes(&mut b.tags, &mut b.mem, Instant::now(), &bytes);
        }
        assert!(
            !b.qp.is_error(),
            "framing after claimed FPDUs stays in step"
        );
        let mut got = vec![0u8; 10_000];
        b.mem.read(bdst, 0, &mut got);
        let want: Vec<u8> = (0..10_000).map(pattern(7)).collect();
        assert_eq!(got, want, "the Writes landed byte for byte");
    }
}

/// A queue pair built from an MPA negotiation done elsewhere: offsets count from SeqStart, and
/// the Responder waits for the first FPDU.
#[test]
fn new_established_from_negotiated() {
    for markers in [false, true] {
        let neg = |role| mpa::Negotiated {
            role,
            tx_markers: markers,
            rx_markers: markers,
            crc: true,
            revision: 1,
            read_depths: mpa::ReadDepths::default(),
            peer_read_depths: None,
            rtr: None,
            peer_private_data: b"pd".to_vec(),
            local_frame_len: 20,
            peer_frame_len: 20,
        };
        let mut a = End::new(
            Qp::new_established(qp_cfg(1, markers, true), &neg(mpa::Role::Initiator)),
            1,
        );
        let mut b = End::new(
            Qp::new_established(qp_cfg(2, markers, true), &neg(mpa::Role::Responder)),
            2,
        );
        assert!(matches!(&a.events()[..], [QpEvent::Established { .. }]));
        let (asrc, _) = a.region(3000, Access::LOCAL_WRITE, pattern(8));
        let (brecv, _) = b.region(3000, Access::LOCAL_WRITE, |_| 0);
        b.qp.post(
            &b.tags,
            WorkRequest::recv(
                1,
                LocalBuf {
                    region: brecv,
                    offset: 0,
                    len: 3000,
                },
            ),
        )
        .unwrap();
        a.qp.post(
            &a.tags,
            WorkRequest::send(
                2,
                LocalBuf {
                    region: asrc,
                    offset: 0,
                    len: 3000,
                },
                SendOpts::default(),
            ),
        )
        .unwrap();
        pump(&mut a, &mut b, 333);
        assert_eq!(
            b.mem.get(brecv).unwrap(),
            &(0..3000).map(pattern(8)).collect::<Vec<_>>()[..]
        );
        assert_eq!(a.completions().len(), 1);
    }
}

/// The batch form fills one buffer with whole FPDUs, and the peer reads the same data.
#[test]
fn poll_transmit_batch_fills_whole_fpdus() {
    let (mut a, mut b) = pair(true, true);
    pump(&mut a, &mut b, 1 << 20);
    let (asrc, _) = a.region(100_000, Access::LOCAL_WRITE, pattern(3));
    let (_, bstag) = b.region(100_000, Access::REMOTE_WRITE, |_| 0);
    let l = LocalBuf {
        region: asrc,
        offset: 0,
        len: 100_000,
    };
    a.qp.post(
        &a.tags,
        WorkRequest::write(
            1,
            l,
            RemoteBuf {
                stag: bstag,
                to: 0x10_0000,
            },
        ),
    )
    .unwrap();
    let mut buf = vec![0u8; 16_384];
    let mut batches = 0;
    loop {
        let n = a.qp.poll_transmit_batch(&a.tags, &a.mem, &mut buf);
        if n == 0 {
            break;
        }
        if a.qp.wants_to_send() {
            let max = a.qp.max_fpdu_len();
            assert!(
                n > buf.len() - max,
                "filled up to the last whole FPDU: {n} {max}"
            );
        }
        batches += 1;
        b.qp.handle_rx_bytes(&mut b.tags, &mut b.mem, Instant::now(), &buf[..n]);
    }
    assert!(batches >= 6);
    let (h, _) = b.tags.lookup(bstag).unwrap();
    assert_eq!(
        b.mem.get(h).unwrap(),
        &(0..100_000).map(pattern(3)).collect::<Vec<_>>()[..]
    );
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
            let r = LocalBuf {
                region: brecv,
                offset: 10_000 * i,
                len: 10_000,
            };
            b.qp.post(&b.tags, WorkRequest::recv(10 + i, r)).unwrap();
            let s = LocalBuf {
                region: asrc,
                offset: 5000 * i,
                len: 10_000,
            };
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
            b.qp.post(&b.tags, WorkRequest::recv(i, LocalBuf { region: brecv, offset: 3000 * i, len: 3000 })).unwrap();
            a.qp.post(&a.tags, WorkRequest::send(i, LocalBuf { region: asrc, offset: 1000 * i, len: 3000 }, SendOpts::default())).unwrap();
        }
        let w = LocalBuf { region: asrc, offset: 0, len: 12_000 };
        a.qp.post(&a.tags, WorkRequest::write(9, w, RemoteBuf { stag: bstag, to: 0x10_0000 })).unwrap();
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
        let r = LocalBuf {
            region: brecv,
            offset: 200 * i,
            len: 200,
        };
        b.qp.post(&b.tags, WorkRequest::recv(i, r)).unwrap();
    }
    let w = LocalBuf {
        region: asrc,
        offset: 0,
        len: 30_000,
    };
    a.qp.post(
        &a.tags,
        WorkRequest::write(
            7,
            w,
            RemoteBuf {
                stag: bstag,
                to: 0x10_0000,
            },
        ),
    )
    .unwrap();
    for i in 0..3u64 {
        let s = LocalBuf {
            region: asrc,
            offset: 100 * i,
            len: 200,
        };
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
        WorkRequest::write(
            1,
            LocalBuf {
                region: asrc,
                offset: 0,
                len: 64,
            },
            RemoteBuf {
                stag: bstag,
                to: 0x10_0000,
            },
        ),
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
    let mut a = End::new(
        Qp::new_initiator(qp_cfg(1, markers, true), now).unwrap(),
        11,
    );
    let mut bs = [true, false].map(|fast| {
        let mut c = qp_cfg(2, markers, true);
        c.fast_path = fast;
        End::new(Qp::new_responder(c, now), 22)
    });
    let (asrc, _) = a.region(LEN, Access::LOCAL_WRITE, pattern(1));
    let (aread, _) = a.region(LEN, Access::LOCAL_WRITE, |_| 0);
    let src = LocalBuf {
        region: asrc,
        offset: 0,
        len: LEN as u32,
    };
    let mut regions = Vec::new();
    let mut stags = Vec::new();
    for b in &mut bs {
        let (recv, _) = b.region(2 * LEN, Access::LOCAL_WRITE, |_| 0);
        let (win, win_stag) = b.region(LEN, Access::REMOTE_WRITE, |_| 0);
        let (inv, inv_stag) = b.region(16, Access::REMOTE_WRITE, |_| 0);
        let (_, read_stag) = b.region(LEN, Access::REMOTE_READ, pattern(2));
        for (id, offset) in [(100, 0), (101, LEN as u64)] {
            let buf = LocalBuf {
                region: recv,
                offset,
                len: LEN as u32,
            };
            b.qp.post(&b.tags, WorkRequest::recv(id, buf)).unwrap();
        }
        regions.push([recv, win, inv]);
        stags.push((win_stag, inv_stag, read_stag));
    }
    assert_eq!(stags[0], stags[1], "{case}: the receivers' STags");
    let (win_stag, inv_stag, read_stag) = stags[0];
    let at = |to: u64| RemoteBuf {
        stag: win_stag,
        to: 0x10_0000 + to,
    };
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
            RemoteBuf {
                stag: read_stag,
                to: 0x10_0000,
            },
        ),
        WorkRequest::write(6, src, at(0)),
    ];
    for wr in posts {
        a.qp.post(&a.tags, wr).unwrap();
    }
    let mut buf = vec![0u8; 70_000];
    let mut broken = !corrupt;
    for _ in 0..20 {
        // The sender's octets: its startup frame, then FPDUs, cut as the case says.
        let mut out = fpdus(&mut a);
        a.qp.on_acked(a.qp.tx_offset());
        if !broken && out.len() > 4 {
            let (_, f) = &mut out[4];
            let mid = f.len() / 2;
            f[mid] ^= 0x40;
            broken = true;
        }
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
        for b in &mut bs {
            for s in &segments {
                b.qp.handle_rx_bytes(&mut b.tags, &mut b.mem, now, s);
            }
        }
        // The receivers' answers (MPA Reply, Read Response, Terminate): the same octets; the
        // fast one's go back to the sender.
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
