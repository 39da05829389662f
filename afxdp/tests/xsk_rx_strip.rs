//! The receive strip (the bulk path at jumbo MTUs: in-order data read in place from
//! the frames): a multi-buffer socket whose fill ring draws from the strip receives every
//! jumbo packet as a chain of frames that is one run of the UMEM (`XskQueue::chain_run`), the
//! run byte for byte the packet sent; the strip's positions come back and are posted again,
//! past its end and round. Without the strip the same chains are not runs (they are gathered).
//! Needs root (skips elsewhere, fails under CI=true).
#![cfg(target_os = "linux")]

use std::time::{Duration, Instant};

use afxdp::{
    resolve_next_hop, steered_queue, AttachPolicy, BindMode, Frame, PortKind, XdpProgram,
    XskConfig, XskQueue, XskRefused,
};
use testbed::tcp_frame::{build_tcp_frame, RawEndpoint};
use testbed::{for_test, Side, VethTestbed};
use testkit::or_skip;

const PORT: u16 = 18519;

fn config(rx_strip: bool) -> XskConfig {
    XskConfig {
        bind_mode: BindMode::Copy,
        frame_size: 4096,
        multi_buffer: true,
        slab_frames: 3,
        rx_strip,
        ..XskConfig::default()
    }
}

/// The payload of packet `seq`: `len` octets numbered by it.
fn payload(seq: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u32 * 7 + seq * 13) as u8).collect()
}

/// Sends `count` TCP packets of `len` payload octets from A to B's steered port, `batch` at a
/// time, B receiving each batch before the next; returns B's packets (from chains read in
/// place where `chain_run` gives them, else gathered here) and how many were read in place.
fn exchange(tb: &VethTestbed, rx_strip: bool, count: u32, len: usize) -> (Vec<Vec<u8>>, usize) {
    let (_prog_b, mut q_b): (XdpProgram, XskQueue) = tb.run_in(Side::B, || {
        steered_queue(
            tb.ifname(Side::B),
            0,
            AttachPolicy::NativeOnly,
            config(rx_strip),
            &[(PORT, PortKind::Listen)],
        )
        .unwrap()
    });
    assert_eq!(q_b.has_rx_strip(), rx_strip);
    let mut got = Vec::new();
    let mut in_place = 0;
    tb.run_in(Side::A, || {
        let hop = resolve_next_hop(tb.ip(Side::B).into(), Duration::from_secs(3)).unwrap();
        let (src, dst) = RawEndpoint::pair_from_hop(&hop, PORT, tb.ip(Side::B), PORT).unwrap();
        let mut q_a = XskQueue::new(tb.ifname(Side::A), 0, config(false)).unwrap();
        let mut out = Vec::new();
        let (mut rx, mut held): (Vec<Frame>, Vec<Frame>) = (Vec::new(), Vec::new());
        for first in (0..count).step_by(8) {
            let batch = first..(first + 8).min(count);
            for seq in batch.clone() {
                let mut slab = q_a.alloc_slab().expect("a free slab");
                let n =
                    build_tcp_frame(q_a.slab_mut(&mut slab), &src, &dst, seq, &payload(seq, len))
                        .unwrap();
                assert!(q_a.send_slab(slab, n, &mut out));
            }
            let queued = out.len();
            assert_eq!(q_a.send(&mut out), queued);
            let want = got.len() + batch.len();
            let deadline = Instant::now() + Duration::from_secs(5);
            while got.len() < want && Instant::now() < deadline {
                q_a.reclaim();
                q_a.kick_tx();
                q_b.recv(&mut rx, 64);
                for f in rx.drain(..) {
                    let ends = !f.continues();
                    held.push(f);
                    if !ends {
                        continue;
                    }
                    match q_b.chain_run(&held) {
                        Some(run) => {
                            in_place += 1;
                            got.push(run.to_vec());
                        }
                        None => got.push(held.iter().flat_map(|f| q_b.data(f).to_vec()).collect()),
                    }
                    q_b.release(&mut held);
                }
            }
            assert_eq!(got.len(), want, "batch from {first} reached B");
        }
        // The real kernel's indices, receive positions and completions all pass the queues'
        // checks: nothing refused.
        for q in [&q_a, &q_b] {
            assert_eq!(q.statistics().unwrap().refused, XskRefused::default());
        }
    });
    (got, in_place)
}

#[test]
fn jumbo_chains_land_as_one_run_of_the_strip() {
    let Some(tb) = or_skip("strip", for_test("strip")) else {
        return;
    };
    tb.set_mtu(9000).unwrap();
    // 9000 - 40 octets of headers: three frames a packet (3840 + 3840 + 1334 octets). 1500
    // packets take 4500 positions, past the strip's end (2 x 2048) and round again.
    const PACKETS: u32 = 1500;
    let len = 8960;
    let (got, in_place) = exchange(&tb, true, PACKETS, len);
    for (seq, p) in got.iter().enumerate() {
        assert_eq!(p.len(), 14 + 40 + len, "packet {seq}");
        assert!(
            p[54..] == payload(seq as u32, len)[..],
            "packet {seq} read as sent"
        );
    }
    // Only a chain across the strip's end is not one run: one per pass.
    assert!(
        in_place >= PACKETS as usize - 2,
        "{in_place} of {PACKETS} chains read in place"
    );
}

#[test]
fn without_the_strip_chains_are_gathered() {
    let Some(tb) = or_skip("nostr", for_test("nostr")) else {
        return;
    };
    tb.set_mtu(9000).unwrap();
    let (got, in_place) = exchange(&tb, false, 16, 8960);
    assert_eq!(got.len(), 16);
    assert!(got[5][54..] == payload(5, 8960)[..]);
    assert_eq!(in_place, 0);
}

#[test]
fn auto_on_veth_takes_the_strip() {
    let Some(tb) = or_skip("strau", for_test("strau")) else {
        return;
    };
    tb.set_mtu(9000).unwrap();
    // veth offers no zero-copy (its `xdp-features` lack xsk-zerocopy): copy mode for sure.
    let q = tb.run_in(Side::A, || {
        let cfg = XskConfig {
            bind_mode: BindMode::Auto,
            ..config(true)
        };
        XskQueue::new(tb.ifname(Side::A), 0, cfg).unwrap()
    });
    assert!(q.has_rx_strip());
    assert!(!q.is_zero_copy());
}

/// With a strip the fill ring draws from it, so the pool serves transmission only and holds
/// at most a tx ring's worth of frames (the UMEM shrinks by the rest); without one the pool
/// keeps every frame asked for, half of them in the fill ring.
#[test]
fn a_strip_queues_pool_holds_a_tx_rings_worth() {
    let Some(tb) = or_skip("strpl", for_test("strpl")) else {
        return;
    };
    tb.set_mtu(9000).unwrap();
    for (side, rx_strip) in [(Side::A, true), (Side::B, false)] {
        let q = tb.run_in(side, || {
            let cfg = XskConfig {
                frame_count: 8192,
                ..config(rx_strip)
            };
            XskQueue::new(tb.ifname(side), 0, cfg).unwrap()
        });
        assert_eq!(q.has_rx_strip(), rx_strip);
        let occ = q.occupancy();
        if rx_strip {
            assert_eq!(occ.free, 2048, "{occ:?}");
        } else {
            assert_eq!((occ.free, occ.in_fill), (8192 - 2048, 2048), "{occ:?}");
        }
    }
}
