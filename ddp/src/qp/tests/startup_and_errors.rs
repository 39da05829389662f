//! MPA startup (the responder's decision, its wait for the first FPDU, a bad startup frame),
//! errors that terminate (a broken CRC, bad STags and bounds), graceful close, arbitrary
//! octets, and a queue pair made from negotiated parameters.

use super::*;

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
            WorkRequest::recv(5 + i, local(brecv, 100 * i, 100)),
        )
        .unwrap();
        a.qp.post(
            &a.tags,
            WorkRequest::send(1 + i, local(asrc, 0, 100), SendOpts::default()),
        )
        .unwrap();
    }
    a.qp.post(&a.tags, WorkRequest::recv(7, local(asrc, 0, 100)))
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
            None => remote(Stag(bstag.0 ^ 0x01), 0x10_0000),
            Some(off) => remote(bstag, 0x10_0000 + off),
        };
        a.qp.post(&a.tags, WorkRequest::write(1, local(asrc, 0, 16), remote))
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
        WorkRequest::send(1, local(bsrc, 0, 8), SendOpts::default()),
    )
    .unwrap();
    assert!(fpdus(&mut b).is_empty());
    let (asrc, _) = a.region(8, Access::LOCAL_WRITE, pattern(1));
    let (arecv, _) = a.region(8, Access::LOCAL_WRITE, |_| 0);
    a.qp.post(&a.tags, WorkRequest::recv(2, local(arecv, 0, 8)))
        .unwrap();
    let (brecv, _) = b.region(8, Access::LOCAL_WRITE, |_| 0);
    b.qp.post(&b.tags, WorkRequest::recv(3, local(brecv, 0, 8)))
        .unwrap();
    a.qp.post(
        &a.tags,
        WorkRequest::send(4, local(asrc, 0, 8), SendOpts::default()),
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
    b.qp.post(&b.tags, WorkRequest::recv(1, local(brecv, 0, 5000)))
        .unwrap();
    a.qp.post(&a.tags, WorkRequest::recv(2, local(arecv, 0, 8)))
        .unwrap();
    let buf = local(asrc, 0, 5000);
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
        WorkRequest::send(5, local(bsrc, 0, 8), SendOpts::default()),
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
    b.qp.post(&b.tags, WorkRequest::recv(1, local(brecv, 0, 8)))
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
        b.qp.post(&b.tags, WorkRequest::recv(1, local(brecv, 0, 3000)))
            .unwrap();
        a.qp.post(
            &a.tags,
            WorkRequest::send(2, local(asrc, 0, 3000), SendOpts::default()),
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
