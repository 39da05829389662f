//! Transmit slabs (the bulk path at jumbo MTUs): a packet longer than a frame is
//! written in place into contiguous frames and leaves as a chain, byte for byte the packet
//! written; slabs come back after their completions, so more packets than slabs go out; a
//! queue with TX metadata or without multi-buffer has none. Needs root (skips elsewhere, fails
//! under CI=true).
#![cfg(target_os = "linux")]

use std::time::Duration;

use afxdp::{BindMode, TxChecksumOffload, XskConfig, XskQueue};
use testbed::packet_socket::PacketSocket;
use testbed::{for_test, Side, VethTestbed};
use testkit::or_skip;

/// A 9014-octet Ethernet frame from A to B of a local experimental EtherType (B's kernel
/// ignores it), its payload numbered by `seq`.
fn jumbo(tb: &VethTestbed, seq: u32) -> Vec<u8> {
    let mut f = vec![0u8; 9014];
    f[..6].copy_from_slice(&tb.mac(Side::B).unwrap());
    f[6..12].copy_from_slice(&tb.mac(Side::A).unwrap());
    f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    f[14..18].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[18..].iter_mut().enumerate() {
        *b = (i as u32 * 31 + seq) as u8;
    }
    f
}

fn config(tx_checksum: TxChecksumOffload, multi_buffer: bool) -> XskConfig {
    XskConfig {
        bind_mode: BindMode::Copy,
        frame_size: 4096,
        multi_buffer,
        slab_frames: 3,
        tx_checksum,
        ..XskConfig::default()
    }
}

#[test]
fn jumbo_packets_written_in_slabs_leave_whole_and_slabs_come_back() {
    let Some(tb) = or_skip("slab", for_test("slab")) else {
        return;
    };
    tb.set_mtu(9000).unwrap();
    let capture = tb.run_in(Side::B, || PacketSocket::open(tb.ifname(Side::B)).unwrap());
    // Twice as many packets as there are slabs (64), in batches of 8 (what the capture
    // socket's default buffer holds of 9 KB packets).
    const PACKETS: u32 = 128;
    let frames: Vec<Vec<u8>> = (0..PACKETS).map(|s| jumbo(&tb, s)).collect();
    tb.run_in(Side::A, || {
        let mut q =
            XskQueue::new(tb.ifname(Side::A), 0, config(TxChecksumOffload::Off, true)).unwrap();
        assert_eq!(q.slab_capacity(), 3 * 4096 - 256);
        let mut out = Vec::new();
        for batch in frames.chunks(8) {
            for f in batch {
                let mut slab = q.alloc_slab().expect("a free slab");
                q.slab_mut(&mut slab)[..f.len()].copy_from_slice(f);
                assert!(q.send_slab(slab, f.len(), &mut out));
            }
            // Three frames a packet: 3840 + 4096 + 1078 octets.
            assert_eq!(out.len(), 3 * batch.len());
            assert_eq!(q.send(&mut out), 3 * batch.len());
            let mut done = 0;
            for _ in 0..1000 {
                done += q.reclaim();
                if done == 3 * batch.len() {
                    break;
                }
                q.kick_tx();
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(done, 3 * batch.len(), "transmissions completed");
            // Read each batch before the next (the capture socket's buffer is small).
            for f in batch {
                let seq = &f[14..18];
                let got = capture
                    .recv_matching(Duration::from_secs(5), |g| {
                        g.len() > 18 && &g[14..18] == seq
                    })
                    .unwrap()
                    .unwrap_or_else(|| panic!("packet {seq:?} reached B"));
                assert!(got == *f, "packet {seq:?} arrived as written");
            }
        }
        // Every slab is free again; an empty or overlong packet gives its slab back.
        let all: Vec<_> = (0..64)
            .map(|_| q.alloc_slab().expect("all slabs back"))
            .collect();
        assert!(q.alloc_slab().is_none());
        for (i, s) in all.into_iter().enumerate() {
            let len = if i % 2 == 0 { 0 } else { q.slab_capacity() + 1 };
            assert!(!q.send_slab(s, len, &mut out));
        }
        assert!(out.is_empty());
        assert!(q.alloc_slab().is_some());
        // Every slab frame went back to its slab, none to the ordinary pool, which is whole.
        let occ = q.occupancy();
        assert_eq!(occ.in_tx, 0);
        let frames = config(TxChecksumOffload::Off, true).frame_count as usize;
        assert_eq!(occ.free + occ.in_fill, frames, "{occ:?}");
    });
}

#[test]
fn queues_with_tx_metadata_or_one_frame_packets_have_no_slabs() {
    let Some(tb) = or_skip("slbn", for_test("slbn")) else {
        return;
    };
    tb.set_mtu(9000).unwrap();
    // One socket per interface queue: one case on each side.
    for (side, cks, mb) in [
        (Side::A, TxChecksumOffload::Kernel, true),
        (Side::B, TxChecksumOffload::Off, false),
    ] {
        tb.run_in(side, || {
            let mut q = XskQueue::new(tb.ifname(side), 0, config(cks, mb)).unwrap();
            assert_eq!(q.slab_capacity(), 0);
            assert!(q.alloc_slab().is_none());
        });
    }
}
