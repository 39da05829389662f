//! The AF_XDP engine in namespace A against the kernel transport (Linux TCP + our MPA/DDP
//! through the verbs API) in namespace B, over veth with XDP attached natively and AF_XDP in
//! copy mode:
//!
//! - Send, RDMA Write and RDMA Read of 1 B, 4 KiB, 1 MiB and 16 MiB, both ways, verified byte for
//!   byte, each side connecting, over every MPA negotiation outcome: markers in neither, either
//!   or both directions (MPA-98), CRC off or on because one or both sides asked (MPA-99).
//! - Out-of-order marker recovery: the kernel's RDMA Writes through netem reordering and loss.
//! - The capture of engine traffic decodes cleanly in Wireshark's iWARP dissectors.
//! - Teardown: graceful close and abortive close (RST), both directions.
//!
//! Root and tools (ethtool, tc, tshark) needed: skipped elsewhere, failures under CI=true.

mod afxdp_support;

use ddp::WorkRequest;
use std::io::{Read, Write};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use afxdp_support::*;
use dataplane::{Access, Device, Transport};
use endpoint::{ConnId, EndpointConfig};
use testbed::{for_test, Side, VethTestbed};
use testkit::or_skip;

/// What each end asks for in its MPA frame: (markers on what it receives, CRC).
#[derive(Clone, Copy, Debug)]
struct Combo {
    engine: (bool, bool),
    kernel: (bool, bool),
}

/// Markers: none, engine-bound only, kernel-bound only, both (MPA-98). CRC: off (neither asks),
/// on because only the engine asks, only the kernel asks, both ask (MPA-99). Each who-connects
/// test takes every marker case once and every CRC case once.
fn combos(rotate: usize) -> Vec<Combo> {
    let marks = [(false, false), (true, false), (false, true), (true, true)];
    let crcs = [(false, false), (true, false), (false, true), (true, true)];
    (0..4)
        .map(|k| {
            let (em, km) = marks[k];
            let (ec, kc) = crcs[(k + rotate) % 4];
            Combo {
                engine: (em, ec),
                kernel: (km, kc),
            }
        })
        .collect()
}

fn transfer_matrix(tag: &str, engine_connects: bool, first_port: u16) {
    let Some(tb) = or_skip(tag, for_test(tag)) else {
        return;
    };
    let _serial = serial();
    tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
    let layout = Layout::new(&SIZES);
    let esrc = Sources::new(&layout, 1);
    let ksrc = Sources::new(&layout, 2);
    let mut h = EngineHost::new(&tb, Side::A, |_: &mut EndpointConfig| {});
    let end = EngineEnd::register(&mut h, &layout, &esrc);
    let started = Instant::now();
    for (k, combo) in combos(usize::from(engine_connects)).into_iter().enumerate() {
        KernelRun {
            tb: &tb,
            esrc: &esrc,
            ksrc: &ksrc,
            engine: combo.engine,
            kcfg: kernel_config(combo.kernel.0, combo.kernel.1),
            port: first_port + k as u16,
            engine_connects,
            part: BOTH,
        }
        .run(&mut h, &end);
    }
    println!(
        "{tag}: {:?} in all; engine counters {:?}",
        started.elapsed(),
        h.e.endpoint().counters()
    );
}

/// The engine connects to the kernel transport; Send, Write and Read of 1 B..16 MiB
/// both ways, verified, under each marker direction case (MPA-98) and each CRC case (MPA-99).
#[test]
fn engine_connects_to_kernel_send_write_read_1b_to_16mib_every_mpa_negotiation() {
    transfer_matrix("xkc", true, 4100);
}

/// The kernel transport connects to an engine listener; the same plan and cases.
#[test]
fn kernel_connects_to_engine_send_write_read_1b_to_16mib_every_mpa_negotiation() {
    transfer_matrix("xkl", false, 4200);
}

// ------------------------------------------------------------------------------------------
// Out-of-order marker recovery

/// Reordering and loss on `side`'s egress: netem (delay 1 ms, 25 % of segments sent at once,
/// 1 % loss) when the kernel has it. Otherwise (this machine's kernel has no sch_netem) an HTB
/// keyed on the IPv4 ID, which Linux TCP counts up per segment: ID % 4 == 0 (a quarter) goes
/// out at once, overtaking the rest, which queue in a 50 Mbit/s class; ID % 64 == 33 (1.6 %)
/// goes into a 500 kbit/s class with a 1-packet FIFO, so those are dropped or come ~24 ms late
/// (after their retransmission). Returns what was installed.
fn reorder_and_drop_on_egress(tb: &VethTestbed, side: Side) -> String {
    let ifname = tb.ifname(side).to_string();
    let tc = |args: &str| {
        let mut argv = vec!["tc"];
        argv.extend(args.split_whitespace());
        tb.exec(side, &argv).expect("run tc")
    };
    let netem = "delay 1ms reorder 25% 50% loss 1%";
    let out = tc(&format!("qdisc add dev {ifname} root netem {netem}"));
    if out.status.success() {
        return format!("netem {netem}");
    }
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(err.contains("unknown"), "tc qdisc add netem: {out:?}");
    for cmd in [
        "qdisc add dev IF root handle 1: htb default 20",
        "class add dev IF parent 1: classid 1:10 htb rate 10gbit",
        "class add dev IF parent 1: classid 1:20 htb rate 50mbit ceil 50mbit",
        "qdisc add dev IF parent 1:20 handle 20: pfifo limit 30",
        "class add dev IF parent 1: classid 1:30 htb rate 500kbit ceil 500kbit",
        "qdisc add dev IF parent 1:30 handle 30: pfifo limit 1",
        "filter add dev IF parent 1: protocol ip prio 1 u32 match u16 0 3 at 4 flowid 1:10",
        "filter add dev IF parent 1: protocol ip prio 2 u32 match u16 33 63 at 4 flowid 1:30",
    ] {
        let out = tc(&cmd.replace("IF", &ifname));
        assert!(out.status.success(), "tc {cmd}: {out:?}");
    }
    "no sch_netem in this kernel: HTB on the IPv4 ID, 1/4 overtaking, 1/64 dropped or late".into()
}

/// What `side`'s egress qdiscs did (sent, dropped), for the log.
fn egress_stats(tb: &VethTestbed, side: Side) -> String {
    let out = tb
        .exec(side, &["tc", "-s", "qdisc", "show", "dev", tb.ifname(side)])
        .expect("run tc");
    String::from_utf8_lossy(&out.stdout).replace('\n', " ")
}

/// Out-of-order placement (MPA-12, MPA-70 (2)): the kernel end RDMA Writes 8 MiB to the engine through
/// reordering and loss on its egress ([`reorder_and_drop_on_egress`]), with markers on what the
/// engine receives. The engine places tagged FPDUs it finds through markers in segments that
/// arrive before their gap fills (`ooo_fpdus_placed` > 0), all data lands correctly, and the
/// out-of-order octets it holds stay within TCP's bound (`max_ooo_bytes`, at most
/// `recv_buffer`).
#[test]
fn reordered_and_lost_kernel_writes_are_placed_out_of_order_via_markers() {
    let Some(tb) = or_skip("xoo", for_test("xoo")) else {
        return;
    };
    let _serial = serial();
    tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
    let how = reorder_and_drop_on_egress(&tb, Side::B);

    const LEN: usize = 8 << 20;
    const CHUNK: usize = 1 << 20;
    let port = 4400;
    let mut h = EngineHost::new(&tb, Side::A, |_| {});
    let bound = {
        let t = &h.e.endpoint().config().tcp;
        u64::from(t.max_ooo_bytes.min(t.recv_buffer))
    };
    let (target, stag) = h.region(LEN, Access::LOCAL_WRITE | Access::REMOTE_WRITE);
    let (fence, _) = h.region(64, Access::LOCAL_WRITE);
    let lid = h.listen(
        port,
        engine_settings(true, true, stags_private_data(stag.0, 0)),
    );
    let data = pattern(LEN, 77);
    let started = Instant::now();
    thread::scope(|s| {
        let kernel = s.spawn(|| {
            let _ns = tb.enter(Side::B).unwrap();
            let dev = Device::open(Transport::Kernel).unwrap();
            let pd = dev.alloc_pd();
            let cq = dev.create_cq();
            let src = pd.register(LEN, Access::LOCAL_WRITE).unwrap();
            src.write(0, &data).unwrap();
            let init = dataplane::QpInit {
                pd: pd.clone(),
                send_cq: cq.clone(),
                recv_cq: cq.clone(),
            };
            let qp = dev
                .connect(
                    addr(&tb, Side::A, port).into(),
                    init,
                    // One FPDU per segment (MPA-57): what lets a receiver place a segment that
                    // arrives before its gap fills.
                    &kernel_config(false, true).with_segment_per_fpdu(true),
                    &[],
                )
                .expect("connect to the engine");
            let (wstag, _) = parse_stags(qp.peer_private_data());
            for k in 0..LEN / CHUNK {
                let at = dataplane::RemoteAddr {
                    stag: wstag,
                    to: (k * CHUNK) as u64,
                };
                qp.post_write(k as u64, &src, k * CHUNK..(k + 1) * CHUNK, at)
                    .unwrap();
            }
            // The Send is delivered after every Write before it is placed.
            qp.post_send(99, &src, 0..16).unwrap();
            let mut done = 0;
            while done < LEN / CHUNK + 1 {
                let c = cq
                    .wait(Duration::from_secs(120))
                    .expect("kernel completions");
                assert!(c.is_ok(), "{c:?}");
                done += 1;
            }
            // Stay connected until the engine has the fence.
            thread::sleep(Duration::from_millis(200));
            qp
        });
        h.run_until(Duration::from_secs(30), "accept", |h| {
            !h.accepted(lid).is_empty() || kernel.is_finished()
        });
        let conn = h.accepted(lid)[0];
        h.e.endpoint_mut()
            .post(
                conn,
                WorkRequest::recv(
                    1,
                    ddp::LocalBuf {
                        region: fence,
                        offset: 0,
                        len: 64,
                    },
                ),
            )
            .unwrap();
        h.run_until(Duration::from_secs(120), "the fence Send", |h| {
            !h.completions_of(conn).is_empty()
        });
        let wc = h.completions_of(conn)[0];
        assert_eq!(
            (wc.status, wc.byte_len),
            (ddp::WcStatus::Success, 16),
            "{wc:?}"
        );
        let (neg, _) = h.established(conn).unwrap();
        assert!(neg.rx_markers, "markers on what the engine receives");
        // The kernel end closes once it returns.
        let qp = kernel
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        drop(qp);
    });
    let got = h.e.endpoint().region(target).unwrap();
    assert!(
        got == &data[..],
        "RDMA Write data differs at {:?}",
        first_difference(got, &data)
    );
    let c = h.e.endpoint().counters();
    println!(
        "out-of-order run ({how}): {} MiB in {:?}; ooo_fpdus_placed {}, ooo_bytes_max {} \
         (bound {bound}); counters {c:?}; egress: {}",
        LEN >> 20,
        started.elapsed(),
        c.ooo_fpdus_placed,
        c.ooo_bytes_max,
        egress_stats(&tb, Side::B)
    );
    assert!(c.ooo_fpdus_placed > 0, "no FPDU placed out of order: {c:?}");
    assert!(
        c.ooo_bytes_max > 0 && c.ooo_bytes_max <= bound,
        "out-of-order memory {} outside (0, {bound}]",
        c.ooo_bytes_max
    );
    assert_eq!(
        c.crc_errors + c.framing_errors + c.internal_errors,
        0,
        "{c:?}"
    );
}

// ------------------------------------------------------------------------------------------
// Wire oracle: Wireshark's iWARP dissectors on the engine's traffic

/// The engine's traffic with the kernel transport, captured in B, decodes as cleanly as the
/// kernel transport's own (`bench/tests/xwarp_rdma_wire_oracle.rs`), for markers on/off x CRC
/// on/off with the engine connecting and Sending, Writing and Reading 1 B, 4 KiB and 256 KiB,
/// and once with the kernel end doing so to an engine listener; one FPDU per segment on both
/// sides, EMSS 1024 so full FPDUs keep their phase to the markers.
#[test]
fn engine_traffic_decodes_cleanly_in_wireshark() {
    // (markers, crc, engine connects): the engine as Initiator under every marker/CRC case, and
    // once as Responder (its Reply and Read Responses on the wire).
    let runs = [
        (true, true, true),
        (false, true, true),
        (true, false, true),
        (false, false, true),
        (true, true, false),
    ];
    wireshark_decode_test(
        "engine_traffic_decodes_cleanly_in_wireshark",
        "xws",
        false,
        &runs,
        4500,
    );
}

// ------------------------------------------------------------------------------------------
// Teardown

/// A kernel-transport end with `n` receive buffers of `len` octets posted.
struct SmallKernelEnd {
    dev: Device,
    cq: dataplane::CompletionQueue,
    pd: dataplane::ProtectionDomain,
    buf: dataplane::MemoryRegion,
    n: usize,
    len: usize,
}

impl SmallKernelEnd {
    fn new(n: usize, len: usize) -> SmallKernelEnd {
        let dev = Device::open(Transport::Kernel).unwrap();
        let pd = dev.alloc_pd();
        let buf = pd.register(n * len, Access::LOCAL_WRITE).unwrap();
        SmallKernelEnd {
            cq: dev.create_cq(),
            dev,
            pd,
            buf,
            n,
            len,
        }
    }

    fn init(&self) -> dataplane::QpInit {
        dataplane::QpInit {
            pd: self.pd.clone(),
            send_cq: self.cq.clone(),
            recv_cq: self.cq.clone(),
        }
    }

    fn post_recvs(&self, qp: &dataplane::QueuePair) -> Result<(), dataplane::PostError> {
        (0..self.n)
            .try_for_each(|i| qp.post_recv(i as u64, &self.buf, i * self.len..(i + 1) * self.len))
    }

    /// The next completion (panics after 30 s).
    fn next(&self) -> dataplane::Completion {
        self.cq
            .wait(Duration::from_secs(30))
            .expect("a kernel completion")
    }

    /// Waits until the queue pair reports an error (returned) or the peer's half-close (DDP-69,
    /// `Ok`).
    fn end_of(qp: &dataplane::QueuePair) -> Result<(), dataplane::QpError> {
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(e) = qp.error() {
                return Err(e);
            }
            if qp.is_peer_closed() {
                return Ok(());
            }
            assert!(Instant::now() < end, "the kernel end saw no end");
            thread::sleep(Duration::from_millis(5));
        }
    }
}

const TEARDOWN_LEN: usize = 4096;

/// The engine connects to a kernel listener on `port` (2 receives posted there); returns the
/// connection once MPA is up, with one engine receive posted and a 4 KiB source registered.
fn engine_to_kernel(
    tb: &VethTestbed,
    h: &mut EngineHost,
    port: u16,
    ready: &mpsc::Receiver<()>,
) -> (ConnId, ddp::LocalBuf) {
    ready.recv().unwrap();
    let conn =
        h.e.endpoint_mut()
            .connect(
                Instant::now(),
                addr(tb, Side::B, port),
                engine_settings(false, true, vec![]),
            )
            .unwrap();
    h.run_until(Duration::from_secs(30), "MPA startup", |h| {
        h.established(conn).is_some()
    });
    let (rbuf, _) = h.region(TEARDOWN_LEN, Access::LOCAL_WRITE);
    h.e.endpoint_mut()
        .post(conn, WorkRequest::recv(500, buf_of(rbuf)))
        .unwrap();
    let (src, _) = h.region(TEARDOWN_LEN, Access::LOCAL_WRITE);
    h.e.endpoint_mut()
        .region_mut(src)
        .unwrap()
        .copy_from_slice(&pattern(TEARDOWN_LEN, u64::from(port)));
    (conn, buf_of(src))
}

fn buf_of(region: ddp::RegionHandle) -> ddp::LocalBuf {
    ddp::LocalBuf {
        region,
        offset: 0,
        len: TEARDOWN_LEN as u32,
    }
}

/// The kernel end's view of a connection the engine ends: the 4 KiB Send arrived intact, the
/// second receive was flushed, and the queue pair's error says how TCP ended.
fn kernel_sees(
    tb: &VethTestbed,
    port: u16,
    ready: mpsc::Sender<()>,
) -> Result<(), dataplane::QpError> {
    let _ns = tb.enter(Side::B).unwrap();
    let k = SmallKernelEnd::new(2, TEARDOWN_LEN);
    let listener = k
        .dev
        .listen(addr(tb, Side::B, port).into(), kernel_config(false, true))
        .unwrap();
    ready.send(()).unwrap();
    let inc = listener.accept_timeout(Duration::from_secs(30)).unwrap();
    let qp = inc
        .accept_with(k.init(), &[], |qp| k.post_recvs(qp))
        .unwrap();
    let first = k.next();
    assert_eq!(
        (first.opcode, first.status, first.byte_len as usize),
        (
            dataplane::Opcode::Recv,
            dataplane::Status::Success,
            TEARDOWN_LEN
        ),
        "{first:?}"
    );
    let mut got = vec![0u8; TEARDOWN_LEN];
    k.buf.read(0, &mut got).unwrap();
    assert!(got == pattern(TEARDOWN_LEN, u64::from(port)), "Send data");
    let second = k.next();
    assert_eq!(second.status, dataplane::Status::Flushed, "{second:?}");
    let end = SmallKernelEnd::end_of(&qp);
    qp.close(); // after a half-close, our side closes too (DDP-70)
    end
}

/// Teardown, the engine's side. Graceful: the engine Sends 4 KiB and closes at once;
/// the Send still arrives, the kernel end sees the FIN (half-closed, DDP-69: the other receive
/// flushed; it then closes too), and the engine's connection ends `Normal` after TIME-WAIT. Abortive: the engine
/// aborts after a Send; the kernel end sees the RST (`ConnectionReset`), and the engine's posted
/// receive completes flushed with the connection `Aborted`.
#[test]
fn engine_graceful_close_and_abort_reach_the_kernel_end() {
    let Some(tb) = or_skip("xtd", for_test("xtd")) else {
        return;
    };
    let _serial = serial();
    tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
    let mut h = EngineHost::new(&tb, Side::A, |c| {
        c.tcp.time_wait = Duration::from_millis(200)
    });
    thread::scope(|s| {
        // Graceful.
        let (tx, rx) = mpsc::channel();
        let kernel = s.spawn(|| kernel_sees(&tb, 4600, tx));
        let (conn, src) = engine_to_kernel(&tb, &mut h, 4600, &rx);
        h.e.endpoint_mut()
            .post(conn, WorkRequest::send(1, src, Default::default()))
            .unwrap();
        h.e.endpoint_mut().close(Instant::now(), conn).unwrap();
        h.run_until(Duration::from_secs(30), "graceful close", |h| {
            h.closed(conn).is_some()
        });
        let err = kernel
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        assert_eq!(err, Ok(()), "kernel end after a FIN: half-closed (DDP-69)");
        assert_eq!(h.closed(conn), Some(tcp_offload::CloseReason::Normal));
        let wcs = h.completions_of(conn);
        let send = wcs.iter().find(|w| w.wr_id == 1).expect("Send completion");
        assert_eq!(send.status, ddp::WcStatus::Success, "{wcs:?}");

        // Abortive.
        let (tx, rx) = mpsc::channel();
        let kernel = s.spawn(|| kernel_sees(&tb, 4601, tx));
        let (conn, src) = engine_to_kernel(&tb, &mut h, 4601, &rx);
        h.e.endpoint_mut()
            .post(conn, WorkRequest::send(1, src, Default::default()))
            .unwrap();
        h.run_until(Duration::from_secs(30), "Send acknowledged", |h| {
            !h.completions_of(conn).is_empty()
        });
        h.e.endpoint_mut().abort(conn).unwrap();
        h.run_until(Duration::from_secs(30), "abort", |h| {
            h.closed(conn).is_some()
        });
        h.run_for(Duration::from_millis(100));
        let err = kernel
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        assert_eq!(
            err,
            Err(dataplane::QpError::Io(std::io::ErrorKind::ConnectionReset)),
            "kernel end after a RST"
        );
        assert_eq!(h.closed(conn), Some(tcp_offload::CloseReason::Aborted));
        let recv = h.completions_of(conn).into_iter().find(|w| w.wr_id == 500);
        assert_eq!(
            recv.map(|w| w.status),
            Some(ddp::WcStatus::Flushed),
            "the engine's posted receive after abort"
        );
    });
    println!(
        "teardown (engine side): counters {:?}",
        h.e.endpoint().counters()
    );
}

/// Teardown, the kernel's side. Graceful: a kernel-transport end Sends 4 KiB and closes;
/// the engine delivers the Send, reports `PeerClosed` (half-closed, DDP-69), flushes its other
/// receive, closes its side (DDP-70) and ends `Normal`. Abortive: a kernel socket that finished MPA startup resets (SO_LINGER 0);
/// the engine reports the connection `Reset` and flushes its posted receive.
#[test]
fn kernel_graceful_close_and_reset_reach_the_engine() {
    let Some(tb) = or_skip("xtk", for_test("xtk")) else {
        return;
    };
    let _serial = serial();
    tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
    let mut h = EngineHost::new(&tb, Side::A, |_| {});

    // Graceful.
    let lid = h.listen(4610, engine_settings(false, true, vec![]));
    thread::scope(|s| {
        let kernel = s.spawn(|| {
            let _ns = tb.enter(Side::B).unwrap();
            let k = SmallKernelEnd::new(1, TEARDOWN_LEN);
            k.buf.write(0, &pattern(TEARDOWN_LEN, 4610)).unwrap();
            let qp = k
                .dev
                .connect(
                    addr(&tb, Side::A, 4610).into(),
                    k.init(),
                    &kernel_config(false, true),
                    &[],
                )
                .unwrap();
            qp.post_send(7, &k.buf, 0..TEARDOWN_LEN).unwrap();
            let c = k.next();
            assert!(c.is_ok(), "{c:?}");
            qp.close();
        });
        let conn = accept_until_closed(&mut h, lid);
        kernel
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        let wcs = h.completions_of(conn);
        assert_eq!(wcs.len(), 2, "{wcs:?}");
        assert_eq!(
            (wcs[0].wr_id, wcs[0].status, wcs[0].byte_len as usize),
            (0, ddp::WcStatus::Success, TEARDOWN_LEN)
        );
        assert_eq!((wcs[1].wr_id, wcs[1].status), (1, ddp::WcStatus::Flushed));
        assert!(h
            .events
            .iter()
            .any(|e| matches!(e, endpoint::EndpointEvent::PeerClosed { conn: c } if *c == conn)));
        assert_eq!(h.closed(conn), Some(tcp_offload::CloseReason::Normal));
    });

    // Abortive: a plain kernel socket does the MPA startup by hand, then resets.
    let lid = h.listen(4611, engine_settings(false, true, vec![]));
    thread::scope(|s| {
        let kernel = s.spawn(|| {
            let _ns = tb.enter(Side::B).unwrap();
            let mut sock = std::net::TcpStream::connect(addr(&tb, Side::A, 4611)).unwrap();
            // MPA Request (RFC 5044 Rev 1): key, M=0 C=1, Rev 1, no private data (MPA-77).
            let mut req = b"MPA ID Req Frame".to_vec();
            req.extend_from_slice(&[0x40, 1, 0, 0]);
            sock.write_all(&req).unwrap();
            let mut rep = [0u8; 20];
            sock.read_exact(&mut rep).unwrap();
            assert_eq!(&rep[..16], b"MPA ID Rep Frame");
            reset_on_close(&sock);
            drop(sock);
        });
        let conn = accept_until_closed(&mut h, lid);
        kernel
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        assert_eq!(h.closed(conn), Some(tcp_offload::CloseReason::Reset));
        let wcs = h.completions_of(conn);
        assert!(
            wcs.len() == 2 && wcs.iter().all(|w| w.status == ddp::WcStatus::Flushed),
            "{wcs:?}"
        );
    });
    println!(
        "teardown (kernel side): counters {:?}",
        h.e.endpoint().counters()
    );
}

/// Waits for `lid`'s connection, posts two 4 KiB receives (wr_id 0 and 1) on it, and runs
/// until it is gone.
fn accept_until_closed(h: &mut EngineHost, lid: endpoint::ListenerId) -> ConnId {
    h.run_until(Duration::from_secs(30), "accept", |h| {
        !h.accepted(lid).is_empty()
    });
    let conn = h.accepted(lid)[0];
    for i in 0..2 {
        let (r, _) = h.region(TEARDOWN_LEN, Access::LOCAL_WRITE);
        h.e.endpoint_mut()
            .post(conn, WorkRequest::recv(i, buf_of(r)))
            .unwrap();
    }
    let peer_closed = |h: &EngineHost| {
        h.events
            .iter()
            .any(|e| matches!(e, endpoint::EndpointEvent::PeerClosed { conn: c } if *c == conn))
    };
    h.run_until(Duration::from_secs(30), "close", |h| {
        h.closed(conn).is_some() || peer_closed(h)
    });
    if h.closed(conn).is_none() {
        // Half-closed by the peer's FIN (DDP-69): the application closes its side (DDP-70).
        h.e.endpoint_mut().close(Instant::now(), conn).unwrap();
        h.run_until(Duration::from_secs(30), "close", |h| {
            h.closed(conn).is_some()
        });
    }
    conn
}

/// SO_LINGER {on, 0}: closing the socket sends RST instead of FIN.
fn reset_on_close(sock: &std::net::TcpStream) {
    use std::os::fd::AsRawFd;
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // Safety: a valid socket fd and a linger struct of the size passed.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "SO_LINGER");
}
