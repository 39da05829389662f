//! A transmit backlog longer than the tx ring drains. Regression: with a 256-entry ring
//! under write_bw, a `send` that queued all of its frames or none never queued a backlog longer
//! than the ring, never kicked, and the connection stalled for good. `send`
//! queues as many whole packets as fit and leaves the rest for the next call; a chain is never
//! split. Needs root (skips elsewhere, fails under CI=true).
#![cfg(target_os = "linux")]

use std::time::Duration;

use afxdp::{BindMode, Frame, XskConfig, XskQueue, XskRefused};
use testbed::packet_socket::PacketSocket;
use testbed::{for_test, Side, VethTestbed};
use testkit::or_skip;

/// An Ethernet frame of `len` octets from A to B of a local experimental EtherType (B's
/// kernel ignores it), numbered by `seq`, its payload derived from it.
fn packet(tb: &VethTestbed, seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&tb.mac(Side::B).unwrap());
    f[6..12].copy_from_slice(&tb.mac(Side::A).unwrap());
    f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    f[14..18].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[18..].iter_mut().enumerate() {
        *b = (i as u32 * 7 + seq) as u8;
    }
    f
}

/// Sends the whole backlog `out` through `q`, as an engine does: `send`, reclaim, kick, again.
/// Returns what each `send` queued. Panics when the backlog does not drain.
fn drain(q: &mut XskQueue, out: &mut Vec<Frame>) -> Vec<usize> {
    let mut queued = Vec::new();
    for _ in 0..2000 {
        if out.is_empty() {
            return queued;
        }
        let n = q.send(out);
        if n > 0 {
            queued.push(n);
        }
        q.reclaim();
        q.kick_tx();
        std::thread::sleep(Duration::from_micros(200));
    }
    panic!("{} frames never left the backlog", out.len());
}

/// Reads `sent` from B's capture socket: each arrives, byte for byte.
fn all_arrive(capture: &PacketSocket, sent: &[Vec<u8>]) {
    for f in sent {
        let seq = &f[14..18];
        let got = capture
            .recv_matching(Duration::from_secs(5), |g| {
                g.len() > 18 && g[12..14] == [0x88, 0xb5] && &g[14..18] == seq
            })
            .unwrap()
            .unwrap_or_else(|| panic!("packet {seq:?} reached B"));
        assert!(got == *f, "packet {seq:?} arrived as written");
    }
}

#[test]
fn a_backlog_of_single_frames_longer_than_the_ring_drains() {
    let Some(tb) = or_skip("txbl", for_test("txbl")) else {
        return;
    };
    let capture = tb.run_in(Side::B, || PacketSocket::open(tb.ifname(Side::B)).unwrap());
    // Three rings' worth of one-frame packets in one backlog.
    let packets: Vec<Vec<u8>> = (0..192).map(|s| packet(&tb, s, 128)).collect();
    tb.run_in(Side::A, || {
        let cfg = XskConfig {
            bind_mode: BindMode::Copy,
            ring_size: 64,
            frame_count: 512,
            ..XskConfig::default()
        };
        let mut q = XskQueue::new(tb.ifname(Side::A), 0, cfg).unwrap();
        let mut out = Vec::new();
        for p in &packets {
            let mut f = q.alloc().expect("a free frame");
            q.data_mut_full(&mut f)[..p.len()].copy_from_slice(p);
            q.set_len(&mut f, p.len()).unwrap();
            out.push(f);
        }
        let queued = drain(&mut q, &mut out);
        assert!(queued.iter().all(|&n| n <= 64), "{queued:?}");
        assert_eq!(queued.iter().sum::<usize>(), packets.len());
        // Three rings' worth of indices and completions from the real kernel: none refused.
        assert_eq!(q.statistics().unwrap().refused, XskRefused::default());
    });
    all_arrive(&capture, &packets);
}

#[test]
fn a_backlog_of_chains_drains_and_no_chain_is_split() {
    let Some(tb) = or_skip("txbc", for_test("txbc")) else {
        return;
    };
    tb.set_mtu(9000).unwrap();
    let capture = tb.run_in(Side::B, || PacketSocket::open(tb.ifname(Side::B)).unwrap());
    // Eight jumbo packets of three frames (what the capture socket's default buffer holds of
    // 9 KB packets): 24 frames through a ring of 16.
    let packets: Vec<Vec<u8>> = (0..8).map(|s| packet(&tb, s, 9014)).collect();
    tb.run_in(Side::A, || {
        let cfg = XskConfig {
            bind_mode: BindMode::Copy,
            frame_size: 4096,
            ring_size: 16,
            frame_count: 256,
            multi_buffer: true,
            ..XskConfig::default()
        };
        let mut q = XskQueue::new(tb.ifname(Side::A), 0, cfg).unwrap();
        let mut out = Vec::new();
        for p in &packets {
            q.scatter(p, &mut out).expect("frames for a chain");
        }
        assert_eq!(out.len(), 3 * packets.len());
        let queued = drain(&mut q, &mut out);
        // Whole chains only: 15 of the 16 slots at most, in threes.
        assert!(queued.iter().all(|&n| n % 3 == 0 && n <= 15), "{queued:?}");
        assert_eq!(queued.iter().sum::<usize>(), 3 * packets.len());
    });
    all_arrive(&capture, &packets);
}
