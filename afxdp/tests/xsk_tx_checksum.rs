//! TCP checksums finished through AF_XDP TX metadata: a frame queued with its
//! checksum field holding only the pseudo header's sum leaves the veth with the whole checksum,
//! byte for byte what the engine would have computed; without the request it leaves unfinished
//! (the control). End to end with two engines: `bench/tests/xwarp_rdma_tx_checksum.rs`. Needs
//! root (skips elsewhere, fails under CI=true).
#![cfg(target_os = "linux")]

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use afxdp::{BindMode, TxChecksumOffload, XskConfig, XskQueue};
use tcp_offload::wire::{Flags, SegmentRepr, TcpOptions};
use tcp_offload::{FourTuple, SeqNum, TxChecksum};
use testbed::packet_socket::PacketSocket;
use testbed::{for_test, Side, VethTestbed};
use testkit::or_skip;

const PORT: u16 = 47001;

/// An Ethernet frame from A to B carrying one TCP segment with `payload`, its checksum as `cks`.
fn frame(tb: &VethTestbed, src: IpAddr, dst: IpAddr, payload: &[u8], cks: TxChecksum) -> Vec<u8> {
    let repr = SegmentRepr {
        tuple: FourTuple {
            local: SocketAddr::new(src, PORT),
            remote: SocketAddr::new(dst, PORT + 1),
        },
        seq: SeqNum(0x0102_0304),
        ack: Some(SeqNum(0x0a0b_0c0d)),
        flags: Flags {
            psh: true,
            ..Flags::default()
        },
        window: 4321,
        options: TcpOptions::default(),
    };
    let mut buf = vec![0u8; 14 + repr.buffer_len(payload.len())];
    buf[..6].copy_from_slice(&tb.mac(Side::B).unwrap());
    buf[6..12].copy_from_slice(&tb.mac(Side::A).unwrap());
    let ethertype: u16 = if src.is_ipv4() { 0x0800 } else { 0x86dd };
    buf[12..14].copy_from_slice(&ethertype.to_be_bytes());
    let n = repr
        .emit_with(
            &mut buf[14..],
            payload.len(),
            |p| p.copy_from_slice(payload),
            cks,
        )
        .unwrap();
    buf.truncate(14 + n);
    buf
}

/// Sends `frames` from an AF_XDP socket on A (copy mode, `offload`) and returns what B's
/// interface received of them, in order.
fn send_and_capture(
    tb: &VethTestbed,
    offload: TxChecksumOffload,
    frames: &[Vec<u8>],
) -> Vec<Vec<u8>> {
    let capture = tb.run_in(Side::B, || PacketSocket::open(tb.ifname(Side::B)).unwrap());
    tb.run_in(Side::A, || {
        let mut q = XskQueue::new(
            tb.ifname(Side::A),
            0,
            XskConfig {
                bind_mode: BindMode::Copy,
                tx_checksum: offload,
                ..XskConfig::default()
            },
        )
        .unwrap();
        assert_eq!(q.offloads_tcp_checksum(), offload != TxChecksumOffload::Off);
        let mut out = Vec::new();
        for f in frames {
            let mut fr = q.alloc().unwrap();
            q.write(&mut fr, f).unwrap();
            out.push(fr);
        }
        assert_eq!(q.send(&mut out), frames.len());
        // Copy mode: the kick above transmitted them (the completion ring says so).
        let mut done = 0;
        for _ in 0..1000 {
            done += q.reclaim();
            if done == frames.len() {
                break;
            }
            q.kick_tx();
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(done, frames.len(), "transmissions completed");
    });
    frames
        .iter()
        .map(|f| {
            capture
                .recv_matching(Duration::from_secs(5), |got| same_but_checksum(got, f))
                .unwrap()
                .expect("the frame reached B")
        })
        .collect()
}

/// Whether `a` and `b` are the same frame but for their TCP checksum fields.
fn same_but_checksum(a: &[u8], b: &[u8]) -> bool {
    let l4 = if b[12..14] == [0x08, 0x00] { 34 } else { 54 };
    let field = l4 + 16..l4 + 18;
    a.len() == b.len() && a[..field.start] == b[..field.start] && a[field.end..] == b[field.end..]
}

fn addresses(tb: &VethTestbed) -> [(IpAddr, IpAddr); 2] {
    [
        (tb.ip(Side::A).into(), tb.ip(Side::B).into()),
        (tb.ip6(Side::A).into(), tb.ip6(Side::B).into()),
    ]
}

/// The kernel finishes requested checksums in software (`XDP_UMEM_TX_SW_CSUM`): what B
/// receives equals the frames with the checksum the engine computes, for IPv4 and IPv6, odd
/// and even payload lengths; without the request (the control) the partial sum arrives as is.
#[test]
fn kernel_finishes_requested_tcp_checksums() {
    let Some(tb) = or_skip("txck", for_test("txck")) else {
        return;
    };
    let mut partial = Vec::new();
    let mut full = Vec::new();
    for (src, dst) in addresses(&tb) {
        for len in [0usize, 1, 64, 1001, 1400] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
            partial.push(frame(&tb, src, dst, &payload, TxChecksum::Offloaded));
            full.push(frame(&tb, src, dst, &payload, TxChecksum::Full));
        }
    }
    assert!(partial.iter().zip(&full).all(|(p, f)| p != f));

    let finished = send_and_capture(&tb, TxChecksumOffload::Kernel, &partial);
    for (i, (got, want)) in finished.iter().zip(&full).enumerate() {
        assert_eq!(
            got, want,
            "frame {i}: the kernel's checksum is the engine's"
        );
    }
    let control = send_and_capture(&tb, TxChecksumOffload::Off, &partial);
    for (i, (got, sent)) in control.iter().zip(&partial).enumerate() {
        assert_eq!(
            got, sent,
            "frame {i}: without the request nothing finishes the sum"
        );
    }
}

/// `Auto` asks the driver: veth offers no AF_XDP TX checksum, so the engine keeps computing
/// them (the query answers with veth's XDP feature bits, so it did reach the driver).
#[test]
fn auto_leaves_checksums_to_the_engine_on_veth() {
    let Some(tb) = or_skip("txca", for_test("txca")) else {
        return;
    };
    tb.run_in(Side::A, || {
        let ifname = tb.ifname(Side::A);
        let idx = afxdp::program::ifindex(ifname).unwrap();
        let features = afxdp::xsk_features::dev_features(idx).unwrap();
        // veth's XDP features (basic, redirect, ndo-xmit, ...): the query was answered.
        assert_ne!(features.xdp, 0, "{features:?}");
        assert_eq!(features.xsk & afxdp::xsk_features::XSK_TX_CHECKSUM, 0);
        assert_eq!(
            TxChecksumOffload::Auto.resolve(ifname),
            TxChecksumOffload::Off
        );
        let q = XskQueue::new(
            ifname,
            0,
            XskConfig {
                bind_mode: BindMode::Copy,
                tx_checksum: TxChecksumOffload::Auto,
                ..XskConfig::default()
            },
        )
        .unwrap();
        assert!(!q.offloads_tcp_checksum());
        // The other settings are what they say.
        for t in [
            TxChecksumOffload::Off,
            TxChecksumOffload::Device,
            TxChecksumOffload::Kernel,
        ] {
            assert_eq!(t.resolve(ifname), t);
        }
    });
}

/// `Device` in copy mode: the request reaches the driver as `CHECKSUM_PARTIAL`; a device that
/// cannot checksum (veth with `tx off`) gets it finished by the kernel's transmit path.
#[test]
fn device_request_is_finished_where_the_device_cannot() {
    let Some(tb) = or_skip("txcd", for_test("txcd")) else {
        return;
    };
    tb.tx_checksum_off(Side::A).expect("ethtool -K tx off");
    let (src, dst) = addresses(&tb)[0];
    let payload = vec![0xa5u8; 777];
    let partial = frame(&tb, src, dst, &payload, TxChecksum::Offloaded);
    let full = frame(&tb, src, dst, &payload, TxChecksum::Full);
    let got = send_and_capture(
        &tb,
        TxChecksumOffload::Device,
        std::slice::from_ref(&partial),
    );
    assert_eq!(got[0], full);
}
