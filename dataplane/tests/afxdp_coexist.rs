//! The AF_XDP engine among other traffic: while it runs in namespace A
//! with XDP attached, ping and kernel TCP on a port it does not steer still work; 64 concurrent
//! connections over two listeners are each verified; malformed frames from a raw socket and
//! MPA/DDP garbage over kernel TCP are counted, never panic the engine and leave a verified
//! connection running at the same time unharmed.
//!
//! Root needed: skipped elsewhere, a failure under CI=true.

mod afxdp_support;

use ddp::WorkRequest;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use afxdp_support::*;
use dataplane::{Access, Device, QpInit, RemoteAddr, Transport};
use ddp::{LocalBuf, WcOpcode, WcStatus};
use endpoint::{ConnId, EndpointEvent, ListenerId};
use tcp_offload::wire::{Flags, SegmentRepr, TcpOptions};
use tcp_offload::{FourTuple, SeqNum};
use testbed::packet_socket::PacketSocket;
use testbed::ping::icmp_echo;
use testbed::{for_test, Side, VethTestbed};
use testkit::or_skip;

/// A verified engine <-> kernel-transport connection (the kernel end connects to `port`).
fn good_connection<'a>(
    tb: &'a VethTestbed,
    esrc: &'a Sources,
    ksrc: &'a Sources,
    port: u16,
) -> KernelRun<'a> {
    KernelRun {
        tb,
        esrc,
        ksrc,
        engine: (true, true),
        kcfg: kernel_config(false, true),
        port,
        engine_connects: false,
        part: BOTH,
    }
}

/// While the engine serves a verified connection with XDP attached in A, ICMP echo
/// from B to A and a kernel TCP connection B -> A on a port the program does not steer work
/// (XDP_PASS), carrying data both ways.
#[test]
fn ping_and_kernel_tcp_on_another_port_pass_while_the_engine_runs() {
    let Some(tb) = or_skip("xcp", for_test("xcp")) else {
        return;
    };
    let _serial = serial();
    tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
    let mut h = EngineHost::new(&tb, Side::A, |_| {});
    let layout = Layout::new(&[4096, 1 << 20, 4 << 20]);
    let (esrc, ksrc) = (Sources::new(&layout, 31), Sources::new(&layout, 32));
    let end = EngineEnd::register(&mut h, &layout, &esrc);
    const PASSED: u16 = 5001;
    assert_eq!(h.prog.port_kind(PASSED).unwrap(), None);
    let listener = {
        let _ns = tb.enter(Side::A).unwrap();
        TcpListener::bind((tb.ip(Side::A), PASSED)).unwrap()
    };
    let before = h.prog.counters().unwrap();
    const LEN: usize = 256 << 10;
    thread::scope(|s| {
        // A's kernel: echo every octet back, inverted.
        s.spawn(move || {
            let (mut sock, _) = listener.accept().unwrap();
            let mut buf = vec![0u8; LEN];
            sock.read_exact(&mut buf).unwrap();
            buf.iter_mut().for_each(|b| *b = !*b);
            sock.write_all(&buf).unwrap();
        });
        let client = s.spawn(|| {
            let _ns = tb.enter(Side::B).unwrap();
            let rtts: Vec<_> = (1..=3)
                .map(|seq| icmp_echo(tb.ip(Side::A), 0x7a7a, seq, Duration::from_secs(2)).unwrap())
                .collect();
            let mut sock = TcpStream::connect_timeout(
                &SocketAddr::from((tb.ip(Side::A), PASSED)),
                Duration::from_secs(5),
            )
            .expect("kernel TCP to a port the engine does not steer");
            let data = pattern(LEN, 9);
            sock.write_all(&data).unwrap();
            let mut back = vec![0u8; LEN];
            sock.read_exact(&mut back).unwrap();
            let echoed = back.iter().zip(&data).all(|(b, d)| *b == !*d);
            (rtts, echoed)
        });
        // The engine serves its own connection meanwhile.
        good_connection(&tb, &esrc, &ksrc, 4800).run(&mut h, &end);
        h.run_until(Duration::from_secs(30), "ping and kernel TCP", |_| {
            client.is_finished()
        });
        let (rtts, echoed) = client.join().unwrap();
        println!("ICMP echo B -> A while the engine runs: {rtts:?}");
        assert!(rtts.iter().all(Option::is_some), "ping lost: {rtts:?}");
        assert!(echoed, "kernel TCP data differs");
    });
    let moved = h.prog.counters().unwrap().since(&before);
    println!("XDP counters: {moved:?}");
    assert!(moved.redirected > 1000, "{moved:?}");
    assert!(moved.passed >= 3 + LEN as u64 / 1500, "{moved:?}");
    assert_eq!(moved.malformed, 0, "{moved:?}");
}

/// 64 concurrent connections over two engine listeners (32 each), kernel-transport
/// peers connecting. Each peer RDMA Writes its own 64 KiB pattern into its slot of one shared
/// engine region (the STag comes in the listener's MPA Reply private data) and then Sends its
/// number; the engine checks the slot on that Send and answers with a Send of a per-peer
/// pattern, which the peer checks; then the peer closes.
#[test]
fn sixty_four_connections_over_two_listeners_each_verified() {
    let Some(tb) = or_skip("x64", for_test("x64")) else {
        return;
    };
    let _serial = serial();
    tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
    const N: usize = 64;
    const LEN: usize = 64 << 10;
    const PORTS: [u16; 2] = [4810, 4811];
    let mut h = EngineHost::new(&tb, Side::A, |_| {});
    let (target, stag) = h.region(N * LEN, Access::LOCAL_WRITE | Access::REMOTE_WRITE);
    let (replies, _) = h.region(N * LEN, Access::LOCAL_WRITE);
    for i in 0..N {
        fill_pattern(
            &mut h.e.endpoint_mut().region_mut(replies).unwrap()[i * LEN..(i + 1) * LEN],
            1000 + i as u64,
        );
    }
    let (ids, _) = h.region(N * 8, Access::LOCAL_WRITE);
    let pd = stags_private_data(stag.0, 0);
    let listeners: Vec<ListenerId> = PORTS
        .iter()
        .map(|&p| h.listen(p, engine_settings(false, true, pd.clone())))
        .collect();
    let started = Instant::now();
    let dev = Device::open(Transport::Kernel).unwrap();
    // Every peer connects, then waits for all others: 64 connections open at once.
    // (A counter with a deadline, not a Barrier: a peer that fails must not hang the others.)
    let all_up = std::sync::atomic::AtomicUsize::new(0);
    thread::scope(|s| {
        let peers: Vec<_> = (0..N)
            .map(|i| {
                let (tb, dev, all_up) = (&tb, dev.clone(), &all_up);
                s.spawn(move || {
                    let _ns = tb.enter(Side::B).unwrap();
                    let pd = dev.alloc_pd();
                    let cq = dev.create_cq();
                    let src = pd.register(LEN, Access::LOCAL_WRITE).unwrap();
                    src.write(0, &pattern(LEN, i as u64)).unwrap();
                    let id = pd.register(8, Access::LOCAL_WRITE).unwrap();
                    id.write(0, &(i as u64).to_le_bytes()).unwrap();
                    let back = pd.register(LEN, Access::LOCAL_WRITE).unwrap();
                    let init = QpInit {
                        pd: pd.clone(),
                        send_cq: cq.clone(),
                        recv_cq: cq.clone(),
                    };
                    let port = PORTS[i * PORTS.len() / N];
                    let qp = dev
                        .connect(
                            addr(tb, Side::A, port).into(),
                            init,
                            &kernel_config(false, true),
                            &[],
                        )
                        .unwrap_or_else(|e| panic!("peer {i}: connect: {e}"));
                    let (wstag, _) = parse_stags(qp.peer_private_data());
                    qp.post_recv(2, &back, 0..LEN).unwrap();
                    all_up.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let deadline = Instant::now() + Duration::from_secs(60);
                    while all_up.load(std::sync::atomic::Ordering::SeqCst) < N {
                        assert!(
                            Instant::now() < deadline,
                            "peer {i}: not all peers connected"
                        );
                        thread::sleep(Duration::from_millis(1));
                    }
                    let at = RemoteAddr {
                        stag: wstag,
                        to: (i * LEN) as u64,
                    };
                    qp.post_write(0, &src, 0..LEN, at).unwrap();
                    qp.post_send(1, &id, 0..8).unwrap();
                    for _ in 0..3 {
                        let c = cq
                            .wait(Duration::from_secs(60))
                            .unwrap_or_else(|| panic!("peer {i}: completions"));
                        assert!(c.is_ok(), "peer {i}: {c:?}");
                    }
                    let mut got = vec![0u8; LEN];
                    back.read(0, &mut got).unwrap();
                    assert!(
                        got == pattern(LEN, 1000 + i as u64),
                        "peer {i}: the engine's reply differs"
                    );
                    qp.close();
                })
            })
            .collect();

        // The engine: a receive per accepted connection; on each peer's Send, check its slot and
        // answer.
        let mut seen = 0;
        let mut slot_of: BTreeMap<ConnId, (usize, ListenerId)> = BTreeMap::new();
        let mut verified: BTreeMap<usize, ConnId> = BTreeMap::new();
        let mut done_wcs = 0;
        let mut most_open = 0;
        h.run_until(Duration::from_secs(120), "64 connections", |h| {
            most_open = most_open.max(h.e.endpoint().connection_count());
            while seen < h.events.len() {
                if let EndpointEvent::Accepted { listener, conn, .. } = h.events[seen] {
                    let slot = slot_of.len();
                    slot_of.insert(conn, (slot, listener));
                    let b = LocalBuf {
                        region: ids,
                        offset: (slot * 8) as u64,
                        len: 8,
                    };
                    h.e.endpoint_mut()
                        .post(conn, WorkRequest::recv(0, b))
                        .unwrap();
                }
                seen += 1;
            }
            while done_wcs < h.wcs.len() {
                let (conn, wc) = h.wcs[done_wcs];
                done_wcs += 1;
                assert_eq!(wc.status, WcStatus::Success, "{conn:?}: {wc:?}");
                if wc.opcode != WcOpcode::Recv {
                    continue;
                }
                let (slot, listener) = slot_of[&conn];
                let idb = &h.e.endpoint().region(ids).unwrap()[slot * 8..slot * 8 + 8];
                let i = u64::from_le_bytes(idb.try_into().unwrap()) as usize;
                assert!(i < N, "peer number {i}");
                assert_eq!(
                    listener,
                    listeners[i * PORTS.len() / N],
                    "peer {i} came in on the wrong listener"
                );
                let got = &h.e.endpoint().region(target).unwrap()[i * LEN..(i + 1) * LEN];
                assert!(
                    got == &pattern(LEN, i as u64)[..],
                    "peer {i}: its RDMA Write differs"
                );
                assert!(verified.insert(i, conn).is_none(), "peer {i} twice");
                let reply = LocalBuf {
                    region: replies,
                    offset: (i * LEN) as u64,
                    len: LEN as u32,
                };
                h.e.endpoint_mut()
                    .post(conn, WorkRequest::send(1, reply, Default::default()))
                    .unwrap();
            }
            peers.iter().all(|p| p.is_finished())
        });
        for p in peers {
            p.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
        }
        // Each peer closed its queue pair: half-closed here (DDP-69); close ours (DDP-70).
        let mut ours_closed = std::collections::BTreeSet::new();
        h.run_until(Duration::from_secs(30), "64 closes", |h| {
            let fins: Vec<ConnId> = h
                .events
                .iter()
                .filter_map(|e| match e {
                    EndpointEvent::PeerClosed { conn } => Some(*conn),
                    _ => None,
                })
                .collect();
            for c in fins {
                if ours_closed.insert(c) {
                    let _ = h.e.endpoint_mut().close(Instant::now(), c);
                }
            }
            slot_of.keys().all(|c| h.closed(*c).is_some())
        });
        assert_eq!(verified.len(), N);
        assert_eq!(most_open, N, "connections open at once");
        let per_listener: Vec<usize> = listeners
            .iter()
            .map(|l| slot_of.values().filter(|(_, x)| x == l).count())
            .collect();
        assert_eq!(per_listener, vec![N / 2, N / 2]);
        for c in slot_of.keys() {
            assert_eq!(
                h.closed(*c),
                Some(tcp_offload::CloseReason::Normal),
                "{c:?}"
            );
        }
    });
    let c = h.e.endpoint().counters();
    println!("64 connections in {:?}; counters {c:?}", started.elapsed());
    assert_eq!(c.connections_opened, N as u64);
    assert_eq!(c.connections_closed, N as u64);
    assert_eq!(
        c.internal_errors + c.terminates_sent + c.crc_errors,
        0,
        "{c:?}"
    );
}

// ------------------------------------------------------------------------------------------
// Bad input

/// An Ethernet frame around `payload`.
fn eth(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = [dst, src].concat();
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An IPv4/TCP segment from `from` to `to` (checksums right); `flags` spells SYN, FIN, RST,
/// PSH as "S", "F", "R", "P" (ACK is set when `ack` is given).
fn segment(
    from: SocketAddrV4,
    to: SocketAddrV4,
    seq: u32,
    ack: Option<u32>,
    flags: &str,
    payload: &[u8],
) -> Vec<u8> {
    let has = |c| flags.contains(c);
    let tuple = FourTuple {
        local: from.into(),
        remote: to.into(),
    };
    let flags = Flags {
        syn: has('S'),
        ack: ack.is_some(),
        fin: has('F'),
        rst: has('R'),
        psh: has('P'),
    };
    let (window, options) = (65535, TcpOptions::default());
    let (seq, ack) = (SeqNum(seq), ack.map(SeqNum));
    let repr = SegmentRepr {
        tuple,
        seq,
        ack,
        flags,
        window,
        options,
    };
    let mut b = vec![0u8; repr.buffer_len(payload.len())];
    let n = repr.emit(&mut b, payload.len(), |d| d.copy_from_slice(payload));
    b.truncate(n.unwrap());
    b
}

/// Frames a raw sender in B throws at the engine in A: those the XDP program must drop as
/// malformed, and those it steers but the engine must drop (counted) or answer with a RST.
fn junk_frames(tb: &VethTestbed, port: u16) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let (ma, mb) = (tb.mac(Side::A).unwrap(), tb.mac(Side::B).unwrap());
    let (a, b) = (
        SocketAddrV4::new(tb.ip(Side::A), port),
        SocketAddrV4::new(tb.ip(Side::B), 33333),
    );
    let good = segment(b, a, 1, Some(1), "P", b"hello");
    let ip = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut p = good.clone();
        f(&mut p);
        eth(ma, mb, 0x0800, &p)
    };
    let xdp_drops = vec![
        ip(&|p| p[0] = 0x65),                                     // IPv4 version 6
        ip(&|p| p[0] = 0x43),                                     // IHL 3
        ip(&|p| p[2..4].copy_from_slice(&4000u16.to_be_bytes())), // total length beyond frame
        ip(&|p| p[32] = 0x30),                                    // TCP data offset 3
        ip(&|p| p.truncate(30)),                                  // TCP header cut short
        ip(&|p| p[32] = 0xf0), // TCP data offset 15: beyond the segment
    ];
    let engine_drops = vec![
        ip(&|p| {
            let l = p.len();
            p[l - 1] ^= 0xff // TCP checksum wrong
        }),
        ip(&|p| p[10] ^= 0xff), // IPv4 header checksum wrong
        eth([2, 9, 9, 9, 9, 9], mb, 0x0800, &good), // someone else's MAC
        // No connection on an active-open port: the engine answers with a RST.
        eth(
            ma,
            mb,
            0x0800,
            &segment(
                b,
                SocketAddrV4::new(tb.ip(Side::A), 40999),
                7,
                Some(7),
                "P",
                b"x",
            ),
        ),
    ];
    (xdp_drops, engine_drops)
}

const REQ_KEY: &[u8; 16] = b"MPA ID Req Frame";
const REP_KEY: &[u8; 16] = b"MPA ID Rep Frame";

/// An MPA Request: `key`, M=0 C=1, Rev 1, no private data (MPA-77).
fn request(key: &[u8; 16]) -> Vec<u8> {
    let mut v = key.to_vec();
    v.extend_from_slice(&[0x40, 1, 0, 0]);
    v
}

/// Reads until the engine closes (or 5 s pass); returns what came and whether it closed
/// (FIN or RST).
fn read_to_close(sock: &mut TcpStream) -> (Vec<u8>, bool) {
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = Vec::new();
    let closed = match sock.read_to_end(&mut got) {
        Ok(_) => true,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    };
    (got, closed)
}

/// A valid MPA startup with the engine's listener (its Reply carries the STag of a region open
/// to RDMA Write), one valid FPDU (a Write there: the Responder sends nothing, not even a
/// Terminate, before a valid FPDU arrived, MPA-85), then `garbage`. Returns what the engine
/// sent after its Reply, and whether it closed.
fn startup_then(a: SocketAddrV4, garbage: &[u8]) -> (Vec<u8>, bool) {
    let mut sock = TcpStream::connect(a).unwrap();
    sock.set_nodelay(true).unwrap();
    sock.write_all(&request(REQ_KEY)).unwrap();
    let mut rep = [0u8; 28];
    sock.read_exact(&mut rep).unwrap();
    assert_eq!(&rep[..16], REP_KEY, "the engine's MPA Reply");
    assert_eq!(rep[18..20], [0, 8], "8 octets of private data");
    let (stag, _) = parse_stags(&rep[20..]);
    let mut bytes = fpdu(&tagged_write(stag, 0, b"valid"));
    bytes.extend_from_slice(garbage);
    sock.write_all(&bytes).unwrap();
    read_to_close(&mut sock)
}

/// One FPDU (no markers, CRC on) carrying `ulpdu` at stream offset 0.
fn fpdu(ulpdu: &[u8]) -> Vec<u8> {
    let cfg = mpa::FramingConfig {
        markers: false,
        crc: true,
    };
    let mut out = vec![0u8; ulpdu.len() + 64];
    let n = mpa::encode_fpdu(cfg, 0, &[ulpdu], &mut out).unwrap();
    out.truncate(n);
    out
}

/// A tagged RDMA Write header (DDP v1, RDMAP v1) to `stag` at `to`, then `payload`.
fn tagged_write(stag: u32, to: u64, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0xc1, 0x40];
    v.extend_from_slice(&stag.to_be_bytes());
    v.extend_from_slice(&to.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

/// True if `bytes` (the engine's stream after its Reply, CRC on, no markers) starts with an
/// FPDU carrying an RDMAP Terminate (untagged, opcode 7).
fn starts_with_terminate(bytes: &[u8]) -> bool {
    bytes.len() >= 4 && bytes[2] & 0x80 == 0 && bytes[3] & 0x0f == 7
}

/// Bad input: from B, a raw packet socket injects malformed Ethernet/IPv4/TCP frames at
/// the engine's MAC, address and ports, and kernel TCP sockets send MPA/DDP garbage to an engine
/// listener: a bad key (MPA-86, MPA-95: closed), a bad CRC (MPA-55: Terminate), a Write to an
/// invalid STag (DDP tagged error: Terminate), a stream of bogus lengths. The XDP program and
/// the engine count what they drop, nothing panics, and a verified connection running at the
/// same time (and one after) is unaffected.
#[test]
fn malformed_frames_and_mpa_garbage_are_counted_and_a_good_connection_is_unaffected() {
    let Some(tb) = or_skip("xbad", for_test("xbad")) else {
        return;
    };
    let _serial = serial();
    tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
    let mut h = EngineHost::new(&tb, Side::A, |_| {});
    let layout = Layout::new(&[4096, 1 << 20, 4 << 20]);
    let (esrc, ksrc) = (Sources::new(&layout, 41), Sources::new(&layout, 42));
    let end = EngineEnd::register(&mut h, &layout, &esrc);
    const GARBAGE: u16 = 4820;
    let (_open, open_stag) = h.region(4096, Access::LOCAL_WRITE | Access::REMOTE_WRITE);
    let lid = h.listen(
        GARBAGE,
        engine_settings(false, true, stags_private_data(open_stag.0, 0)),
    );
    let before_xdp = h.prog.counters().unwrap();
    let (xdp_junk, engine_junk) = junk_frames(&tb, GARBAGE);
    let to_engine = SocketAddrV4::new(tb.ip(Side::A), GARBAGE);
    thread::scope(|s| {
        let attacker = s.spawn(|| {
            let _ns = tb.enter(Side::B).unwrap();
            let raw = PacketSocket::open(tb.ifname(Side::B)).unwrap();
            for f in xdp_junk.iter().chain(&engine_junk) {
                raw.send(f).unwrap();
            }
            // A frame too short for Ethernet may be refused by the kernel already.
            let _ = raw.send(&[1, 2, 3]);
            let mut outcomes = Vec::new();
            // MPA-86/95: wrong key -> closed, no Reply.
            let mut sock = TcpStream::connect(to_engine).unwrap();
            sock.write_all(&request(b"MPA ID Xeq Frame")).unwrap();
            let (got, closed) = read_to_close(&mut sock);
            assert!(closed && got.is_empty(), "bad key: {got:?} closed {closed}");
            outcomes.push("bad key: closed without a Reply".to_string());
            // MPA-55: a CRC that does not match -> Terminate, close.
            let mut bad_crc = fpdu(&tagged_write(0x1234_5678, 0, b"garbage"));
            let l = bad_crc.len();
            bad_crc[l - 1] ^= 0x55;
            // DDP: a Write to an STag nobody registered -> Terminate, close.
            let bad_stag = fpdu(&tagged_write(0xdead_be00, 0, b"garbage"));
            // Lengths that lead nowhere: every word reads as ULPDU_Length 8.
            let bogus = [0u8, 8].repeat(512);
            for (what, bytes) in [
                ("bad CRC", bad_crc),
                ("invalid STag", bad_stag),
                ("bogus lengths", bogus),
            ] {
                let (got, closed) = startup_then(to_engine, &bytes);
                assert!(closed, "{what}: the engine kept the connection open");
                outcomes.push(format!(
                    "{what}: Terminate {}, closed",
                    starts_with_terminate(&got)
                ));
            }
            outcomes
        });
        // The verified connection runs meanwhile; then the engine keeps serving the attacker.
        good_connection(&tb, &esrc, &ksrc, 4821).run(&mut h, &end);
        h.run_until(Duration::from_secs(60), "the attacks", |_| {
            attacker.is_finished()
        });
        let outcomes = attacker
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        println!("attacks: {outcomes:?}");
        assert!(
            outcomes
                .iter()
                .filter(|o| o.contains("Terminate true"))
                .count()
                >= 2,
            "{outcomes:?}"
        );
        h.run_for(Duration::from_millis(200));
    });
    let xdp = h.prog.counters().unwrap().since(&before_xdp);
    let c = h.e.endpoint().counters();
    println!("XDP counters moved: {xdp:?}\nengine counters: {c:?}");
    assert!(xdp.malformed >= 6, "XDP malformed: {xdp:?}");
    assert!(c.malformed >= 2, "engine malformed: {c:?}");
    assert!(c.drops >= 1, "engine drops: {c:?}");
    assert!(c.rsts_for_unknown >= 1, "RST for an unknown flow: {c:?}");
    assert!(c.crc_errors >= 1, "CRC errors: {c:?}");
    assert!(c.terminates_sent >= 3, "Terminates sent: {c:?}");
    assert_eq!(c.internal_errors, 0, "{c:?}");
    let failed = h
        .events
        .iter()
        .filter(|e| matches!(e, EndpointEvent::StartupFailed { .. }))
        .count();
    assert!(failed >= 1, "the bad key's startup failure is reported");
    let garbage_conns: BTreeSet<ConnId> = h.accepted(lid).into_iter().collect();
    assert_eq!(
        garbage_conns.len(),
        4,
        "every garbage connection was accepted"
    );
    // And the engine still serves a fresh connection, verified.
    good_connection(&tb, &esrc, &ksrc, 4822).run(&mut h, &end);
}

/// Regression (engine demultiplexing): a peer's handshake ACK and its first data (the MPA
/// Request) in one receive batch. The ACK completes the handshake in the listener; the Request
/// must then reach the new connection (answered with the MPA Reply), not the listener (which
/// answered it with a RST). The raw sender in B uses an address B's kernel does not own, so
/// only the packet socket sees the engine's answers; the engine is not polled between the two
/// frames, so they arrive in one batch.
#[test]
fn handshake_ack_and_mpa_request_in_one_batch_reach_the_connection() {
    let Some(tb) = or_skip("xbt", for_test("xbt")) else {
        return;
    };
    let _serial = serial();
    let mut h = EngineHost::new(&tb, Side::A, |_| {});
    const PORT: u16 = 4830;
    let lid = h.listen(PORT, engine_settings(false, true, vec![]));
    let (ma, mb) = (tb.mac(Side::A).unwrap(), tb.mac(Side::B).unwrap());
    let a = SocketAddrV4::new(tb.ip(Side::A), PORT);
    let me = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 9), 34567);
    let raw = {
        let _ns = tb.enter(Side::B).unwrap();
        PacketSocket::open(tb.ifname(Side::B)).unwrap()
    };
    let from_engine = |f: &[u8], want: &dyn Fn(&tcp_offload::wire::TcpSegment<'_>) -> bool| {
        f.len() > 14
            && f[12..14] == [8, 0]
            && tcp_offload::wire::parse(&f[14..]).is_ok_and(|s| {
                s.tuple.local == SocketAddr::V4(me)
                    && s.tuple.remote == SocketAddr::V4(a)
                    && want(&s)
            })
    };
    let to_engine = |seg: Vec<u8>| raw.send(&eth(ma, mb, 0x0800, &seg)).unwrap();
    // Polls the engine until a frame of ours from it satisfies `want`.
    let seen = |h: &mut EngineHost, want: &dyn Fn(&tcp_offload::wire::TcpSegment<'_>) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            h.step();
            let f = raw
                .recv_matching(Duration::from_millis(5), |f| from_engine(f, want))
                .unwrap();
            if let Some(f) = f {
                return f;
            }
            assert!(Instant::now() < deadline, "no answer from the engine");
        }
    };
    to_engine(segment(me, a, 1000, None, "S", &[]));
    let synack = seen(&mut h, &|s| s.flags.syn && s.flags.ack);
    let s = tcp_offload::wire::parse(&synack[14..]).unwrap();
    assert_eq!(s.ack, SeqNum(1001));
    let their = s.seq.0.wrapping_add(1);
    // ACK, then the Request as its own segment, both before the engine polls again.
    to_engine(segment(me, a, 1001, Some(their), "", &[]));
    to_engine(segment(me, a, 1001, Some(their), "P", &request(REQ_KEY)));
    thread::sleep(Duration::from_millis(50));
    let reply = seen(&mut h, &|s| s.flags.rst || s.payload.starts_with(REP_KEY));
    let s = tcp_offload::wire::parse(&reply[14..]).unwrap();
    assert!(!s.flags.rst, "the Request drew a RST: {s:?}");
    assert!(s.payload.starts_with(REP_KEY), "{s:?}");
    let conns = h.accepted(lid);
    assert_eq!(conns.len(), 1);
    assert!(h.closed(conns[0]).is_none());
    // Leave cleanly: reset our side.
    let ours = 1001 + request(REQ_KEY).len() as u32;
    to_engine(segment(me, a, ours, None, "R", &[]));
    h.run_until(Duration::from_secs(10), "reset", |h| {
        h.closed(conns[0]).is_some()
    });
}
