//! The endpoint's own cost of bulk RDMA Writes, without I/O: A writes `N` × 64 KiB into B over
//! an in-memory wire (no loss, no delay, frames handed over in receive batches of 64 as the
//! AF_XDP engine does), and the run prints frames per 64 KiB each way.
//!
//! Meant for a deterministic instruction count, which a loaded or virtual machine without
//! hardware counters still gives (the engine's share of the bulk cost model in PERFORMANCE.md):
//!
//! ```text
//! cargo build --release -p endpoint --example bulk_cost
//! valgrind --tool=callgrind --callgrind-out-file=cg.out target/release/examples/bulk_cost 400
//! callgrind_annotate --inclusive=yes cg.out | head -40
//! ```
//! Two runs with different `N` give the cost per 64 KiB without the set-up:
//! (Ir(N2) - Ir(N1)) / (N2 - N1). Arguments: `N` (default 200), `markers` (0/1), `crc` (0/1),
//! `mtu` (the IP MTU both ends' segments are sized by, default 1500; 9000 for jumbo frames).
//! `deploy/xwarp counts` runs these and prints the costs per 64 KiB, octet and frame.
//!
//! With `stream` or `stream-option` as the first argument, the same for a plain TCP stream as
//! the ONC RPC store uses it: B sends `N` replies of a 100-octet header and 64 KiB of data, A
//! reads the header and then the data: with `stream`, copied out of the receive buffer
//! (`stream_recv`); with `stream-option`, the TCP RDMA option negotiated and the data marked as
//! a transfer, placed into A's buffer as it arrives (`stream_recv_transfer` skips it).

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use ddp::{Access, LocalBuf, RemoteBuf, WcStatus, WorkRequest};
use endpoint::{
    ConnId, Endpoint, EndpointConfig, EndpointEvent, FrameSink, QpSettings, Secrets, StreamOptions,
    TxOutcome,
};
use tcp_offload::rdma::Transfer;

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];
const IP_A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// One message: what `xwarp-bench write_bw` writes by default.
const MSG: usize = 64 << 10;
/// Writes outstanding at once (the bench's TX depth is 128; 16 keeps the window full).
const DEPTH: u64 = 16;
/// Frames an endpoint takes per round, as the engine's receive batch.
const RX_BATCH: usize = 64;
/// Ethernet header octets in front of an IP packet.
const ETHERNET: usize = 14;

/// One direction of the wire: frames in order, their buffers reused.
struct Wire {
    frames: VecDeque<Vec<u8>>,
    spare: Vec<Vec<u8>>,
    sent: u64,
    /// A transmit buffer's size: the largest Ethernet frame.
    frame_len: usize,
}

impl Wire {
    fn new(mtu: u16) -> Self {
        Wire {
            frames: VecDeque::new(),
            spare: Vec::new(),
            sent: 0,
            frame_len: usize::from(mtu) + ETHERNET,
        }
    }
}

impl FrameSink for Wire {
    fn tx_frame(
        &mut self,
        _now: Instant,
        fill: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> TxOutcome {
        let mut b = self.spare.pop().unwrap_or_else(|| vec![0; self.frame_len]);
        b.resize(self.frame_len, 0);
        match fill(&mut b) {
            Some(n) => {
                b.truncate(n);
                self.frames.push_back(b);
                self.sent += 1;
                TxOutcome::Queued
            }
            None => {
                self.spare.push(b);
                TxOutcome::Empty
            }
        }
    }
}

/// One round of `ep`: a receive batch from `rx`, the timers, the transmits onto `tx`.
fn round(ep: &mut Endpoint, rx: &mut Wire, tx: &mut Wire, now: Instant) {
    for _ in 0..RX_BATCH {
        let Some(f) = rx.frames.pop_front() else {
            break;
        };
        ep.handle_frame(now, &f);
        rx.spare.push(f);
    }
    ep.handle_timeout(now);
    ep.poll_transmit(now, tx);
}

/// An endpoint's settings, its segments sized for IP packets of `mtu` octets (as the AF_XDP
/// device sets them: the MSS is the MTU less the IPv4 and TCP headers).
fn config(mac: [u8; 6], ip: Ipv4Addr, peer: [u8; 6], mtu: u16) -> EndpointConfig {
    let mut c = EndpointConfig::new(mac, ip, Secrets::fixed_for_tests(u64::from(u32::from(ip))));
    c.default_next_hop = Some(peer);
    c.tcp.mtu = mtu;
    c.tcp.mss = mtu - 40;
    c
}

fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("stream") => return stream_replies(false),
        Some("stream-option") => return stream_replies(true),
        _ => {}
    }
    let arg = |i: usize, d: u64| {
        std::env::args()
            .nth(i)
            .map_or(d, |a| a.parse().expect("a number"))
    };
    let (n, markers, crc) = (arg(1, 200), arg(2, 0) == 1, arg(3, 1) == 1);
    let mtu = u16::try_from(arg(4, 1500)).expect("an MTU below 65536");
    let t0 = Instant::now();
    let mut now = t0;
    let mut a = Endpoint::new(config(MAC_A, IP_A, MAC_B, mtu), now).expect("valid configuration");
    let mut b = Endpoint::new(config(MAC_B, IP_B, MAC_A, mtu), now).expect("valid configuration");
    let (mut ab, mut ba) = (Wire::new(mtu), Wire::new(mtu));
    let mut s = QpSettings::default();
    s.startup.want_markers = markers;
    s.startup.want_crc = crc;
    b.listen(4000, s.clone()).expect("listen");
    let ca: ConnId = a
        .connect(now, SocketAddrV4::new(IP_B, 4000), s)
        .expect("connect");
    let mut up = (false, false);
    while !(up.0 && up.1) {
        round(&mut a, &mut ba, &mut ab, now);
        round(&mut b, &mut ab, &mut ba, now);
        while let Some(e) = a.poll_event() {
            up.0 |= matches!(e, EndpointEvent::Established { .. });
        }
        while let Some(e) = b.poll_event() {
            up.1 |= matches!(e, EndpointEvent::Established { .. });
        }
        now += Duration::from_micros(10);
        assert!(now - t0 < Duration::from_secs(10), "no MPA startup");
    }
    let (dst, stag) = b.register(MSG, Access::REMOTE_WRITE);
    let (src, _) = a.register(MSG, Access::LOCAL_WRITE);
    a.region_mut(src)
        .expect("source")
        .iter_mut()
        .enumerate()
        .for_each(|(i, x)| *x = i as u8 | 1);
    let (ab0, ba0) = (ab.sent, ba.sent);
    let (mut posted, mut done) = (0u64, 0u64);
    while done < n {
        while posted < n && posted - done < DEPTH {
            let local = LocalBuf {
                region: src,
                offset: 0,
                len: MSG as u32,
            };
            a.post(
                ca,
                WorkRequest::write(posted, local, RemoteBuf { stag, to: 0 }),
            )
            .expect("post");
            posted += 1;
        }
        round(&mut a, &mut ba, &mut ab, now);
        round(&mut b, &mut ab, &mut ba, now);
        while let Some((_, wc)) = a.poll_completion() {
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
            done += 1;
        }
        while b.poll_completion().is_some() {}
        while a.poll_event().is_some() || b.poll_event().is_some() {}
        now += Duration::from_micros(5);
    }
    assert!(
        b.region(dst).expect("target").iter().all(|&x| x != 0),
        "the target was not written"
    );
    let per = |x: u64| x as f64 / n as f64;
    println!(
        "{n} x 64 KiB Writes (markers {markers}, CRC {crc}): {:.1} frames A->B and {:.1} B->A per 64 KiB, MTU {mtu}",
        per(ab.sent - ab0),
        per(ba.sent - ba0)
    );
    print_code();
}

/// The ONC RPC reply pattern over a plain stream: see the module documentation.
fn stream_replies(option: bool) {
    const HEADER: usize = 100;
    let n: u64 = std::env::args()
        .nth(2)
        .map_or(200, |a| a.parse().expect("a number"));
    let t0 = Instant::now();
    let mut now = t0;
    let mut a = Endpoint::new(config(MAC_A, IP_A, MAC_B, 1500), now).expect("valid configuration");
    let mut b = Endpoint::new(config(MAC_B, IP_B, MAC_A, 1500), now).expect("valid configuration");
    let (mut ab, mut ba) = (Wire::new(1500), Wire::new(1500));
    let opts = StreamOptions {
        tcp_rdma: option,
        ..StreamOptions::default()
    };
    b.stream_listen(4000, opts).expect("listen");
    let ca = a
        .stream_connect(now, SocketAddrV4::new(IP_B, 4000), opts)
        .expect("connect");
    let mut cb = None;
    let mut up = false;
    while !(up && cb.is_some()) {
        round(&mut a, &mut ba, &mut ab, now);
        round(&mut b, &mut ab, &mut ba, now);
        while let Some(e) = a.poll_event() {
            up |= matches!(e, EndpointEvent::StreamConnected { .. });
        }
        while let Some(e) = b.poll_event() {
            if let EndpointEvent::Accepted { conn, .. } = e {
                cb = Some(conn);
            }
        }
        now += Duration::from_micros(10);
        assert!(now - t0 < Duration::from_secs(10), "no handshake");
    }
    let cb = cb.expect("accepted");
    assert_eq!(a.stream_rdma_enabled(ca), Ok(option));
    let reply: Vec<u8> = (0..HEADER + MSG).map(|i| i as u8 | 1).collect();
    let (ab0, ba0) = (ab.sent, ba.sent);
    let mut buf = vec![0u8; MSG];
    let mut header = [0u8; HEADER];
    for rid in 0..n {
        if option {
            a.stream_expect_transfer(ca, rid, std::mem::take(&mut buf))
                .expect("expect");
            let at = b.stream_send_position(cb).expect("position");
            b.stream_mark_message_start(cb, at).expect("mark");
            let t = Transfer {
                rid,
                buffer_offset: 0,
                total: Some(MSG as u32),
                unsolicited: false,
            };
            b.stream_mark_transfer(cb, at + HEADER as u64, MSG as u32, t)
                .expect("mark");
        }
        let (mut sent, mut got_header, mut got) = (0, 0, 0);
        while got < MSG {
            if sent < reply.len() {
                sent += b.stream_send(cb, &reply[sent..]).expect("send");
            }
            round(&mut b, &mut ab, &mut ba, now);
            round(&mut a, &mut ba, &mut ab, now);
            while got_header < HEADER {
                let k = a.stream_recv(ca, &mut header[got_header..]).expect("recv");
                if k == 0 {
                    break;
                }
                got_header += k;
            }
            if got_header == HEADER {
                got += if option {
                    let k = (MSG - got) as u32;
                    a.stream_recv_transfer(ca, rid, got as u32, k)
                        .expect("transfer") as usize
                } else {
                    a.stream_recv(ca, &mut buf[got..]).expect("recv")
                };
            }
            now += Duration::from_micros(5);
        }
        if option {
            let t = a.stream_take_transfer(ca, rid).expect("conn").expect("rid");
            buf = t.buf;
        }
        assert!(buf[..] == reply[HEADER..], "reply {rid} differs");
    }
    let per = |x: u64| x as f64 / n as f64;
    let k = a.counters();
    println!(
        "{n} x 64 KiB stream replies (option {option}): {:.1} frames B->A and {:.1} A->B per 64 KiB, {} octets placed, {} copied",
        per(ba.sent - ba0),
        per(ab.sent - ab0),
        k.rdma_copies_avoided,
        k.rdma_bytes_copied
    );
    print_code();
}

/// Names the code that computed the CRCs and checksums of this run (it depends on the CPU).
fn print_code() {
    println!(
        "CRC32c: {}; Internet checksum: {}",
        mpa::crc::describe(),
        tcp_offload::checksum::code()
    );
}
