//! Transmit without a retransmit copy: FPDUs claimed, framed once, and rebuilt from their
//! descriptors and regions octet for octet; whole FPDUs per transmit batch.

use super::*;
use crate::ddp::untagged::UNTAGGED_HEADER_LEN;

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
            WorkRequest::write(1, local(asrc, 0, 10_000), remote(bstag, 0x10_0000)),
        )
        .unwrap();
        a.qp.post(
            &a.tags,
            WorkRequest::read(2, local(aread, 0, 100), remote(bstag, 0x10_0000)),
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
    let local = local(src, 0, 3000);
    let remote = remote(bstag, 0x10_0000);
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
        let remote = remote(bstag, 0x10_0000);
        let local = local(asrc, 0, 10_000);
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

/// The batch form fills one buffer with whole FPDUs, and the peer reads the same data.
#[test]
fn poll_transmit_batch_fills_whole_fpdus() {
    let (mut a, mut b) = pair(true, true);
    pump(&mut a, &mut b, 1 << 20);
    let (asrc, _) = a.region(100_000, Access::LOCAL_WRITE, pattern(3));
    let (_, bstag) = b.region(100_000, Access::REMOTE_WRITE, |_| 0);
    let l = local(asrc, 0, 100_000);
    a.qp.post(&a.tags, WorkRequest::write(1, l, remote(bstag, 0x10_0000)))
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

/// Small messages claimed with `claim_fpdus` (a one-segment Send or Write taken whole) make
/// the same FPDUs at the same offsets, and the same completions, as `poll_transmit` cutting
/// them segment by segment: zero-length, one octet, a segment's worth exactly, one octet more
/// (two segments), Sends with SE and Invalidate, a Write, a Send whose region was deregistered
/// before it went (flushed), markers on and off.
#[test]
fn one_segment_messages_claimed_whole_as_poll_transmit_cuts_them() {
    for markers in [false, true] {
        let [mut framed, mut claimed] = [0, 1].map(|_| {
            let (mut a, mut b) = pair(markers, true);
            a.qp.cfg.keep_for_retransmit = true;
            pump(&mut a, &mut b, 1 << 20);
            (a, b)
        });
        let room = claimed.0.qp.engine().config().mulpdu - UNTAGGED_HEADER_LEN;
        for (a, b) in [&mut framed, &mut claimed] {
            let (src, _) = a.region(10_000, Access::LOCAL_WRITE, pattern(5));
            let (gone, _) = a.region(100, Access::LOCAL_WRITE, pattern(6));
            let (_, bstag) = b.region(10_000, Access::REMOTE_WRITE, |_| 0);
            let se_inv = SendOpts {
                solicited: true,
                invalidate: Some(bstag),
            };
            let wrs = [
                WorkRequest::send(1, local(src, 0, 0), SendOpts::default()),
                WorkRequest::send(2, local(src, 3, 1), SendOpts::default()),
                WorkRequest::send(3, local(src, 7, 64), se_inv),
                WorkRequest::send(4, local(src, 0, room as u32), SendOpts::default()),
                WorkRequest::send(5, local(src, 0, room as u32 + 1), SendOpts::default()),
                WorkRequest::send(6, local(gone, 0, 64), SendOpts::default()),
                WorkRequest::write(7, local(src, 9, 64), remote(bstag, 0x10_0000)),
                WorkRequest::send(8, local(src, 11, 64), SendOpts::default()),
            ];
            for wr in wrs {
                a.qp.post(&a.tags, wr).unwrap();
            }
            a.tags.deregister(gone).unwrap();
        }
        let want = fpdus(&mut framed.0);
        assert_eq!(
            want.len(),
            8,
            "one FPDU a message, two for the longer one, none flushed"
        );
        let mut got = Vec::new();
        let mut out = vec![0u8; 70_000];
        let a = &mut claimed.0;
        while let Some((pos, _)) = a.qp.poll_fpdu_record(&a.tags, 70_000) {
            let n = a.qp.rebuild_fpdu(&a.tags, &a.mem, pos, &mut out).unwrap();
            got.push((pos, out[..n].to_vec()));
        }
        assert_eq!(got, want, "markers {markers}: the same FPDUs");
        for (a, _) in [&mut framed, &mut claimed] {
            a.qp.on_acked(a.qp.tx_offset());
        }
        assert_eq!(claimed.0.completions(), framed.0.completions());
    }
}
