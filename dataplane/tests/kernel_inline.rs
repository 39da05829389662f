//! The kernel transport in inline mode: no driver thread per connection, the
//! application's own posts and completion-queue polls run each connection. On loopback (no
//! privileges needed): Sends, Writes and Reads with their data checked, a ping-pong, a bulk
//! transfer that fills the socket (markers and CRC on, and one FPDU per segment), an inline
//! end against a threaded one, close from either side, and dropping the device.

use std::time::{Duration, Instant};

use dataplane::{
    Access, CompletionQueue, ConnectionConfig, Device, EngineMode, MpaSettings, Opcode, QpInit,
    QueuePair, RemoteAddr, Status, Transport,
};
use testkit::pattern;

const T: Duration = Duration::from_secs(20);

struct End {
    dev: Device,
    init: QpInit,
    cq: CompletionQueue,
}

fn end(mode: EngineMode) -> End {
    let dev = Device::open_kernel(mode).unwrap();
    let (init, cq) = dev.qp_init();
    End { dev, init, cq }
}

/// A connected pair (client, its queue pair, server, its queue pair) with `cfg` on both sides.
fn pair(
    client: EngineMode,
    server: EngineMode,
    cfg: &ConnectionConfig,
) -> (End, QueuePair, End, QueuePair) {
    let (c, s) = (end(client), end(server));
    let l = s
        .dev
        .listen("127.0.0.1:0".parse().unwrap(), cfg.clone())
        .unwrap();
    let addr = l.local_addr();
    let sinit = s.init.clone();
    let t = std::thread::spawn(move || l.accept_timeout(T).unwrap().accept(sinit, b"s").unwrap());
    let cq = c.dev.connect(addr, c.init.clone(), cfg, b"c").unwrap();
    let sq = t.join().unwrap();
    assert_eq!(
        (cq.peer_private_data(), sq.peer_private_data()),
        (&b"s"[..], &b"c"[..])
    );
    (c, cq, s, sq)
}

/// Driver threads of this process named for queue pair `num` (threaded devices run one each).
fn driver_threads(num: u32) -> usize {
    let want = format!("xwarp-qp{num}");
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim() == want)
        .count()
}

fn wait(cq: &CompletionQueue) -> dataplane::Completion {
    cq.wait(T).expect("a completion in time")
}

#[test]
fn inline_devices_run_no_driver_threads() {
    let (c, cq, s, sq) = pair(
        EngineMode::Inline,
        EngineMode::Inline,
        &ConnectionConfig::default(),
    );
    assert!(c.dev.is_inline() && s.dev.is_inline());
    assert_eq!((driver_threads(cq.num()), driver_threads(sq.num())), (0, 0));
    // The check sees the threads of a threaded pair.
    let (_c2, cq2, _s2, sq2) = pair(
        EngineMode::Threaded,
        EngineMode::Threaded,
        &ConnectionConfig::default(),
    );
    assert_eq!(
        (driver_threads(cq2.num()), driver_threads(sq2.num())),
        (1, 1)
    );
    // Pinning is the AF_XDP engine's.
    assert!(Device::open_kernel(EngineMode::Pinned(0)).is_err());
    assert!(!Device::open(Transport::Kernel).unwrap().is_inline());
}

/// Sends (with solicited and invalidate flags), a Write and a Read, data checked, between
/// every combination of inline and threaded ends.
#[test]
fn sends_writes_and_reads_between_inline_and_threaded_ends() {
    for (client, server) in [
        (EngineMode::Inline, EngineMode::Inline),
        (EngineMode::Inline, EngineMode::Threaded),
        (EngineMode::Threaded, EngineMode::Inline),
    ] {
        let (c, cq, s, sq) = pair(client, server, &ConnectionConfig::default());
        let data = pattern(70_000, 3);
        let src = c.init.pd.register_from(&data, Access::ALL).unwrap();
        let dst = s.init.pd.register(70_000, Access::ALL).unwrap();
        sq.post_recv(1, &dst, 0..70_000).unwrap();
        cq.post_send_with(2, &src, 0..50_000, true, None).unwrap();
        let r = wait(&s.cq);
        assert_eq!(
            (r.wr_id, r.status, r.byte_len, r.solicited),
            (1, Status::Success, 50_000, true)
        );
        assert_eq!(
            dst.read_vec(0, 50_000).unwrap(),
            &data[..50_000],
            "{client:?}/{server:?}"
        );
        assert_eq!(wait(&c.cq).opcode, Opcode::Send);
        let remote = RemoteAddr {
            stag: dst.stag(),
            to: 0,
        };
        let other = pattern(70_000, 9);
        let src2 = c.init.pd.register_from(&other, Access::ALL).unwrap();
        // The server has nothing to complete now, but an inline server must be polled to
        // serve the Read: a thread polls its queue meanwhile (and finds nothing in it).
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let poller = {
            let (scq, stop) = (s.cq.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut found = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    found.extend(scq.poll_one());
                }
                found
            })
        };
        cq.post_write(3, &src2, 0..70_000, remote).unwrap();
        let back = c.init.pd.register(70_000, Access::LOCAL_WRITE).unwrap();
        cq.post_read(4, &back, 0..70_000, remote).unwrap();
        let (w, r) = (wait(&c.cq), wait(&c.cq));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(poller.join().unwrap(), vec![]);
        assert_eq!((w.wr_id, w.status), (3, Status::Success));
        assert_eq!(
            (r.wr_id, r.status, r.opcode),
            (4, Status::Success, Opcode::Read)
        );
        // The Read follows the Write on the same stream: it reads what was written.
        assert_eq!(
            back.read_vec(0, 70_000).unwrap(),
            other,
            "{client:?}/{server:?}"
        );
        assert_eq!(dst.read_vec(0, 70_000).unwrap(), other);
    }
}

/// A ping-pong of small Sends, each checked: the latency benchmark's pattern, both ends inline
/// on their own threads.
#[test]
fn ping_pong_of_small_sends() {
    const ROUNDS: u64 = 2_000;
    let (c, cq, s, sq) = pair(
        EngineMode::Inline,
        EngineMode::Inline,
        &ConnectionConfig::default(),
    );
    let server = std::thread::spawn(move || {
        let rx = s.init.pd.register(64, Access::LOCAL_WRITE).unwrap();
        let tx = s.init.pd.register(64, Access::LOCAL_WRITE).unwrap();
        sq.post_recv(0, &rx, 0..64).unwrap();
        for i in 0..ROUNDS {
            let r = s.cq.wait(T).expect("ping");
            assert_eq!((r.opcode, r.byte_len), (Opcode::Recv, 64));
            let got = rx.read_vec(0, 64).unwrap();
            assert_eq!(got, pattern(64, i), "ping {i}");
            sq.post_recv(i + 1, &rx, 0..64).unwrap();
            tx.write(0, &got).unwrap();
            sq.post_send(i, &tx, 0..64).unwrap();
            assert_eq!(s.cq.wait(T).expect("pong sent").opcode, Opcode::Send);
        }
        (s, sq)
    });
    let rx = c.init.pd.register(64, Access::LOCAL_WRITE).unwrap();
    let tx = c.init.pd.register(64, Access::LOCAL_WRITE).unwrap();
    let start = Instant::now();
    for i in 0..ROUNDS {
        cq.post_recv(i, &rx, 0..64).unwrap();
        tx.write(0, &pattern(64, i)).unwrap();
        cq.post_send(i, &tx, 0..64).unwrap();
        let mut got_pong = false;
        let mut sent = false;
        while !(got_pong && sent) {
            let r = wait(&c.cq);
            assert_eq!(r.status, Status::Success);
            match r.opcode {
                Opcode::Recv => got_pong = true,
                Opcode::Send => sent = true,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(rx.read_vec(0, 64).unwrap(), pattern(64, i), "pong {i}");
    }
    let took = start.elapsed();
    let _ = server.join().unwrap();
    // Not a timing assertion: a figure for the log (the benchmark measures latency).
    eprintln!("{ROUNDS} round trips inline in {took:?}");
}

/// 32 MiB of Writes with markers and CRC, through a socket that fills (the blocked path), then
/// the same with one FPDU per TCP segment (the pause path); every octet checked.
#[test]
fn bulk_writes_fill_the_socket_and_arrive_intact() {
    for per_fpdu in [false, true] {
        let mut cfg = ConnectionConfig::default();
        cfg.mpa = MpaSettings {
            want_markers: true,
            want_crc: true,
            ..cfg.mpa
        };
        cfg.segment_per_fpdu = per_fpdu;
        let (c, cq, s, _sq) = pair(EngineMode::Inline, EngineMode::Inline, &cfg);
        assert!(cq.negotiated().tx_markers && cq.negotiated().rx_markers && cq.negotiated().crc);
        const LEN: usize = 1 << 20;
        let rounds = if per_fpdu { 4 } else { 32 };
        let dst = s.init.pd.register(LEN * rounds, Access::ALL).unwrap();
        let remote = |i: usize| RemoteAddr {
            stag: dst.stag(),
            to: (i * LEN) as u64,
        };
        let all: Vec<u8> = (0..rounds).flat_map(|i| pattern(LEN, i as u64)).collect();
        let src = c.init.pd.register_from(&all, Access::LOCAL_WRITE).unwrap();
        // Only the server's polls run the server's end: a thread polls its queue (it gets no
        // completions from Writes) until the client saw everything placed.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let server = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut found = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    found.extend(s.cq.poll_one());
                }
                assert_eq!(found, vec![]);
                s
            })
        };
        for i in 0..rounds {
            cq.post_write(i as u64, &src, i * LEN..(i + 1) * LEN, remote(i))
                .unwrap();
        }
        for _ in 0..rounds {
            let w = wait(&c.cq);
            assert_eq!(w.status, Status::Success, "per_fpdu {per_fpdu}");
        }
        // A Read of the last octets comes back only after every Write was placed.
        let back = c.init.pd.register(64, Access::LOCAL_WRITE).unwrap();
        let last = RemoteAddr {
            stag: dst.stag(),
            to: (LEN * rounds - 64) as u64,
        };
        cq.post_read(99, &back, 0..64, last).unwrap();
        assert_eq!(wait(&c.cq).status, Status::Success);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let s = server.join().unwrap();
        assert_eq!(
            dst.read_vec(0, LEN * rounds).unwrap(),
            all,
            "per_fpdu {per_fpdu}"
        );
        drop(s);
    }
}

/// Closing an inline queue pair: the peer's receives complete flushed; once the peer closes
/// too, the inline end's polls take the peer's FIN and both ends finish gracefully (the
/// threaded peer's driver thread ends, nothing timed out or failed). Dropping an inline device
/// closes what it ran.
#[test]
fn close_and_device_drop_end_connections() {
    let (c, cq, s, sq) = pair(
        EngineMode::Inline,
        EngineMode::Threaded,
        &ConnectionConfig::default(),
    );
    let server_num = sq.num();
    assert_eq!(driver_threads(server_num), 1);
    let dst = s.init.pd.register(64, Access::LOCAL_WRITE).unwrap();
    sq.post_recv(42, &dst, 0..64).unwrap();
    cq.close();
    let r = wait(&s.cq);
    assert_eq!((r.wr_id, r.status), (42, Status::Flushed));
    assert!(sq.is_peer_closed());
    assert_eq!(sq.error(), None);
    sq.close();
    let deadline = Instant::now() + T;
    while driver_threads(server_num) > 0 && Instant::now() < deadline {
        // Only the client's polls run the client's end of the close.
        let _ = c.cq.poll_one();
    }
    assert_eq!(driver_threads(server_num), 0, "the threaded end finished");
    for d in [&c.dev, &s.dev] {
        let k = d.counters();
        assert_eq!((k.close_timeouts, k.connection_errors), (0, 0), "{k:?}");
    }

    // Dropping the server's device (and with it what runs its connections) closes its
    // connection: the client's posted receive completes flushed.
    let (c, cq, s, sq) = pair(
        EngineMode::Inline,
        EngineMode::Inline,
        &ConnectionConfig::default(),
    );
    let rx = c.init.pd.register(64, Access::LOCAL_WRITE).unwrap();
    cq.post_recv(7, &rx, 0..64).unwrap();
    let End { dev, init, cq: scq } = s;
    drop((dev, init, scq));
    let r = wait(&c.cq);
    assert_eq!((r.wr_id, r.status), (7, Status::Flushed));
    assert!(cq.is_peer_closed() || cq.error().is_some());
    drop(sq);
}
