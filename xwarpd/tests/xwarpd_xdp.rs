//! xwarpd on the AF_XDP transport: it attaches to an interface, serves listeners, shuts down
//! cleanly on SIGINT/SIGTERM (detaches XDP, frees the UMEM), exposes per-engine counters, and
//! takes the interface over again when restarted after a kill -9; here it serves the block
//! store and an echo listener to clients on the kernel transport in the
//! other namespace. XDP attachment is checked both through the kernel's query and `ip link`.
//! In the test command's AddressSanitizer step the daemon is built with the sanitizer too, and
//! its leak check at exit turns a leak on the shutdown path into a failed exit status here.
//!
//! Needs root (network namespaces, XDP): skipped with a message elsewhere, fails under CI=true.

mod xwarpd_support;

use std::time::Duration;

use afxdp::program::attached;
use dataplane::{Access, ConnectionConfig, Device, QpInit, Transport};
use testbed::{for_test, Side, VethTestbed};
use testkit::or_skip;
use xwarpd::store::{ClientOptions, StoreClient};
use xwarpd_support::{http_get, sample, sample_of_queue, Daemon, Tmp, BIN};

const STORE_PORT: u16 = 20049;
const ECHO_PORT: u16 = 18515;

/// Data of write number `seed`: distinct bytes per write.
fn pattern(len: usize, seed: usize) -> Vec<u8> {
    testkit::pattern(len, seed as u64)
}

/// Writes of 1 B to 4 MiB at unaligned offsets.
fn writes() -> Vec<(u64, Vec<u8>)> {
    let mut off = 777u64;
    let mut v = Vec::new();
    for (i, n) in [1usize, 4000, 5000, 1 << 20, 4 << 20]
        .into_iter()
        .enumerate()
    {
        v.push((off, pattern(n, i)));
        off += n as u64 + 12_289;
    }
    v
}

fn testbed(tag: &str) -> Option<VethTestbed> {
    xwarpd_support::xdp_testbed(tag)
}

/// The command line of xwarpd on the xdp transport in A, serving a store; without
/// `--store-listen` in `extra`, on the interface's address (port 20049).
fn xdp_daemon_command(
    tb: &VethTestbed,
    store: &Tmp,
    ctl: &Tmp,
    size: Option<&str>,
    extra: &[&str],
) -> std::process::Command {
    let mut c = tb.command(Side::A, BIN);
    c.args(["--transport", "xdp", "--interface", tb.ifname(Side::A)])
        .args(["--queue", "0", "--store", store.as_str()])
        .args(["--metrics", "127.0.0.1:0"])
        .args(["--control", ctl.as_str(), "--log", "info"])
        .args(extra);
    if let Some(s) = size {
        c.args(["--size", s]);
    }
    c
}

/// xwarpd on the xdp transport in A, serving a store on A's address.
fn start_xdp_daemon(
    tb: &VethTestbed,
    store: &Tmp,
    ctl: &Tmp,
    size: Option<&str>,
    extra: &[&str],
) -> Daemon {
    let listen = format!("{}:{STORE_PORT}", tb.ip(Side::A));
    let mut c = xdp_daemon_command(tb, store, ctl, size, extra);
    c.args(["--store-listen", &listen]);
    let d = Daemon::spawn(c);
    assert!(d.ready.contains("transport=xdp"), "{}", d.ready);
    assert_eq!(d.field("interface"), tb.ifname(Side::A));
    assert_eq!(d.field("queue"), "0");
    assert_eq!(d.field("store"), listen);
    d
}

/// The id of the XDP program attached to A's interface, if any; `ip link` must agree.
fn attached_prog(tb: &VethTestbed) -> Option<u32> {
    let ifa = tb.ifname(Side::A);
    let a = {
        let _ns = tb.enter(Side::A).unwrap();
        attached(ifa).expect("query XDP programs")
    };
    let ip = tb.ip_cmd(Side::A, &["link", "show", "dev", ifa]).unwrap();
    let ip = String::from_utf8_lossy(&ip.stdout).to_string();
    let id = a.native.as_ref().or(a.generic.as_ref()).map(|p| p.id);
    match id {
        Some(id) => assert!(
            ip.contains("prog/xdp") && ip.contains(&format!("id {id} ")),
            "ip link does not show program {id}:\n{ip}"
        ),
        None => assert!(!ip.contains("prog/xdp"), "ip link shows XDP:\n{ip}"),
    }
    id
}

/// `xwarpd stats` against the daemon in A.
fn stats(tb: &VethTestbed, ctl: &Tmp) -> String {
    let out = tb
        .exec(Side::A, &[BIN, "stats", "--control", ctl.as_str()])
        .unwrap();
    assert!(
        out.status.success(),
        "xwarpd stats: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn client(tb: &VethTestbed) -> StoreClient {
    let addr = format!("{}:{STORE_PORT}", tb.ip(Side::A)).parse().unwrap();
    StoreClient::connect(addr, &ClientOptions::default()).expect("connect to xwarpd over xdp")
}

/// Reads every `(offset, data)` back through a fresh buffer and compares.
fn verify(c: &mut StoreClient, expect: &[(u64, Vec<u8>)], when: &str) {
    let buf = c.pd().register(4 << 20, Access::ALL).unwrap();
    for (off, data) in expect {
        buf.write(0, &vec![0u8; data.len()]).unwrap();
        let r = c.read(*off, &buf, 0..data.len()).unwrap();
        assert_eq!(r.len as usize, data.len());
        let mut got = vec![0u8; data.len()];
        buf.read(0, &mut got).unwrap();
        assert!(&got == data, "{} bytes at {off} differ {when}", data.len());
    }
}

/// Sends of 1000 B and 64 KiB (the echo limit) to the echo listener at `addr` from the kernel
/// transport; each comes back byte for byte.
fn echo_round_trips(addr: std::net::SocketAddr) {
    let dev = Device::open(Transport::Kernel).unwrap();
    let pd = dev.alloc_pd();
    let cq = dev.create_cq();
    let max = xwarpd::daemon::echo::ECHO_MAX;
    let mr = pd.register(2 * max, Access::LOCAL_WRITE).unwrap();
    let init = QpInit {
        pd: pd.clone(),
        send_cq: cq.clone(),
        recv_cq: cq.clone(),
    };
    let qp = dev
        .connect(addr, init, &ConnectionConfig::default(), b"")
        .expect("connect to the echo listener over xdp");
    for (i, n) in [1000usize, max].into_iter().enumerate() {
        let data = pattern(n, 40 + i);
        mr.write(0, &data).unwrap();
        mr.write(max, &vec![0u8; max]).unwrap();
        qp.post_recv(1, &mr, max..2 * max).unwrap();
        qp.post_send(2, &mr, 0..n).unwrap();
        let mut got_recv = false;
        let mut got_send = false;
        while !(got_recv && got_send) {
            let c = cq
                .wait(Duration::from_secs(20))
                .expect("echo completion in time");
            assert!(c.is_ok(), "{c:?}");
            match c.wr_id {
                1 => {
                    assert_eq!(c.byte_len as usize, n);
                    got_recv = true;
                }
                _ => got_send = true,
            }
        }
        let mut back = vec![0u8; n];
        mr.read(max, &mut back).unwrap();
        assert!(back == data, "echo of {n} bytes differs");
    }
}

#[test]
fn xdp_daemon_serves_the_store_to_a_kernel_client_counts_and_detaches_on_sigterm() {
    let Some(tb) = testbed("xwd") else { return };
    let store = Tmp::new("xdp-serve.img");
    let ctl = Tmp::new("xdp-serve.sock");
    assert_eq!(attached_prog(&tb), None);
    let echo = format!("{}:{ECHO_PORT}", tb.ip(Side::A));
    let mut d = start_xdp_daemon(&tb, &store, &ctl, Some("32MiB"), &["--listen", &echo]);
    assert_eq!(d.field("listener"), echo);
    assert!(attached_prog(&tb).is_some(), "no XDP program while serving");

    let before = stats(&tb, &ctl);
    assert!(before.contains("transport=\"xdp\"}"), "{before}");
    let rx0 = sample(&before, "xwarpd_engine_rx_bytes_total");
    let tx0 = sample(&before, "xwarpd_engine_tx_packets_total");

    // rpc_write / COMMIT / rpc_read from B on the kernel transport, every byte checked.
    let expect = writes();
    let written: usize = expect.iter().map(|(_, d)| d.len()).sum();
    tb.run_in(Side::B, || {
        let mut c = client(&tb);
        assert_eq!(c.getattr().unwrap().size, 32 << 20);
        let buf = c.pd().register(4 << 20, Access::ALL).unwrap();
        for (off, data) in &expect {
            buf.write(0, data).unwrap();
            c.write(*off, &buf, 0..data.len()).unwrap();
        }
        c.commit(0, 0).unwrap();
        verify(&mut c, &expect, "after WRITE on the xdp transport");
    });
    // The echo listener on the same device: Sends come back unchanged.
    tb.run_in(Side::B, || echo_round_trips(echo.parse().unwrap()));

    // The engine's counters moved, in `xwarpd stats` and on the Prometheus endpoint.
    let after = stats(&tb, &ctl);
    for l in after.lines().filter(|l| l.starts_with("xwarpd_engine_")) {
        eprintln!("{l}");
    }
    let rx = sample(&after, "xwarpd_engine_rx_bytes_total");
    assert!(
        rx >= rx0 + written as u64,
        "engine rx bytes {rx0} -> {rx}, wrote {written}:\n{after}"
    );
    assert!(sample(&after, "xwarpd_engine_rx_packets_total") > 0);
    assert!(sample(&after, "xwarpd_engine_tx_packets_total") > tx0);
    assert!(sample(&after, "xwarpd_engine_tx_bytes_total") >= written as u64);
    for name in [
        "xwarpd_engine_retransmissions_total",
        "xwarpd_engine_ooo_fpdus_placed_total",
        "xwarpd_engine_terminates_total",
        "xwarpd_engine_drops_total",
    ] {
        sample(&after, name);
    }
    assert_eq!(
        sample(&after, "xwarpd_engine_crc_errors_total"),
        0,
        "{after}"
    );
    assert_eq!(
        sample(&after, "xwarpd_engine_malformed_total"),
        0,
        "B's checksums are filled (tx off), so nothing is malformed:\n{after}"
    );
    assert!(after.contains("xwarpd_engine_rx_packets_total{queue=\"0\"}"));
    assert_eq!(
        sample(&after, "xwarpd_store_writes_total"),
        expect.len() as u64
    );
    assert_eq!(
        sample(&after, "xwarpd_store_written_bytes_total"),
        written as u64
    );
    assert_eq!(sample(&after, "xwarpd_echo_messages_total"), 2);
    let metrics = d.field("metrics");
    let prom = tb.run_in(Side::A, || http_get(&metrics));
    assert!(prom.starts_with("HTTP/1.0 200 OK"), "{prom}");
    assert!(sample(&prom, "xwarpd_engine_rx_bytes_total") >= rx);
    // The XDP program's own counters, and the status for people.
    assert!(sample(&prom, "xwarpd_xdp_redirected_total") > 0, "{prom}");
    sample(&prom, "xwarpd_xdp_fragments_total");
    let out = tb
        .exec(Side::A, &[BIN, "status", "--control", ctl.as_str()])
        .unwrap();
    let status = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(status.contains(" XDP, "), "{status}");
    assert!(status.contains("queue 0"), "{status}");
    assert!(status.contains("redirected"), "{status}");

    // SIGTERM: a clean exit, the XDP program detached.
    d.signal(libc::SIGTERM);
    let (status, out, log) = d.wait(Duration::from_secs(30));
    assert!(status.success(), "{status:?}\n{log}");
    assert!(out.contains("xwarpd stopped signal=15"), "{out}");
    assert!(log.contains("stopped cleanly"), "{log}");
    assert!(!log.contains("panicked"), "{log}");
    assert!(
        !log.contains("ip_local_reserved_ports"),
        "ports are reserved: {log}"
    );
    assert_eq!(attached_prog(&tb), None, "XDP still attached after SIGTERM");
    assert!(!ctl.0.exists(), "control socket left behind");
}

#[test]
fn xdp_daemon_kill_9_leaves_its_program_and_a_restart_replaces_it_and_reads_back() {
    let Some(tb) = testbed("xwk") else { return };
    let store = Tmp::new("xdp-kill.img");
    let ctl = Tmp::new("xdp-kill.sock");
    let mut d = start_xdp_daemon(&tb, &store, &ctl, Some("32MiB"), &[]);
    let first = attached_prog(&tb).expect("attached while serving");

    let expect = writes();
    let verifier = tb.run_in(Side::B, || {
        let mut c = client(&tb);
        let buf = c.pd().register(4 << 20, Access::ALL).unwrap();
        for (off, data) in &expect {
            buf.write(0, data).unwrap();
            c.write(*off, &buf, 0..data.len()).unwrap();
        }
        c.commit(0, 0).unwrap()
    });

    // kill -9: no chance to detach; the program stays on the interface.
    d.signal(libc::SIGKILL);
    let (status, _, _) = d.wait(Duration::from_secs(10));
    assert!(!status.success());
    assert_eq!(
        attached_prog(&tb),
        Some(first),
        "a crashed xwarpd leaves its program attached"
    );

    // Restart on the same interface and file (no --size): the stale program is replaced,
    // the committed data reads back.
    let mut d = start_xdp_daemon(&tb, &store, &ctl, None, &[]);
    let second = attached_prog(&tb).expect("attached after restart");
    assert_ne!(second, first, "the restarted xwarpd loads its own program");
    tb.run_in(Side::B, || {
        let mut c = client(&tb);
        let a = c.getattr().unwrap();
        assert_eq!(a.size, 32 << 20);
        assert_ne!(
            a.verifier, verifier,
            "a restarted server has a new verifier"
        );
        verify(&mut c, &expect, "after kill -9 and restart");
    });
    // SIGINT stops it as cleanly as SIGTERM.
    d.signal(libc::SIGINT);
    let (status, out, log) = d.wait(Duration::from_secs(30));
    assert!(status.success(), "{status:?}\n{log}");
    assert!(out.contains("xwarpd stopped signal=2"), "{out}");
    assert_eq!(attached_prog(&tb), None, "XDP still attached after SIGINT");
}

/// Start failures on the xdp transport are one clear message (with the interface and queue)
/// and exit status 1, and leave no XDP program behind: a missing interface and a queue the
/// interface lacks are caught before attaching; zero-copy refused by veth's driver comes after
/// the attach, which is undone. The daemon warns when the engine's local ports are not reserved.
#[test]
fn xdp_daemon_start_failures_are_clear_and_leave_nothing_attached() {
    let Some(tb) = or_skip("xwm", for_test("xwm")) else {
        return;
    };
    let ctl = Tmp::new("xdp-fail.sock");
    let ifa = tb.ifname(Side::A).to_string();
    let cases: [(&[&str], &[&str]); 3] = [
        (
            &["--interface", "xwnosuch0"],
            &["xwnosuch0 queue 0", "no interface", "network namespace"],
        ),
        (
            &["--interface", &ifa, "--queue", "3"],
            &["queue 3", "1 receive queue", "ethtool -L"],
        ),
        (
            &["--interface", &ifa, "--bind", "zerocopy"],
            &["queue 0", "zero-copy", "\"copy\""],
        ),
    ];
    for (flags, needles) in cases {
        let mut argv = vec![BIN, "--transport", "xdp", "--metrics", "off"];
        argv.extend_from_slice(&["--control", ctl.as_str()]);
        argv.extend_from_slice(flags);
        let out = tb.exec(Side::A, &argv).unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flags:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        for n in needles {
            assert!(err.contains(n), "{flags:?}: {err:?} lacks {n:?}");
        }
        assert!(
            err.contains("40000-40999") && err.contains("ip_local_reserved_ports"),
            "no warning about unreserved ports: {err}"
        );
        assert_eq!(attached_prog(&tb), None, "{flags:?} left XDP attached");
    }
}

/// Eight store clients at once over the xdp transport (engine pinned with --core), each
/// writing, committing and reading back its own 1 MiB; then SIGTERM while they are still
/// connected: a clean exit within the stop timeout, every client sees its connection go, and
/// XDP is detached.
#[test]
fn xdp_daemon_serves_concurrent_clients_and_stops_with_them_connected() {
    let Some(tb) = testbed("xwc") else { return };
    let store = Tmp::new("xdp-conc.img");
    let ctl = Tmp::new("xdp-conc.sock");
    let core = core_affinity::get_core_ids().unwrap().last().unwrap().id;
    let mut d = start_xdp_daemon(
        &tb,
        &store,
        &ctl,
        Some("16MiB"),
        &["--core", &core.to_string()],
    );
    const CLIENTS: usize = 8;
    const LEN: usize = 1 << 20;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let stop_rx = std::sync::Mutex::new(stop_rx);
    std::thread::scope(|s| {
        let mut clients = Vec::new();
        for i in 0..CLIENTS {
            let (tb, ready_tx, stop_rx) = (&tb, ready_tx.clone(), &stop_rx);
            clients.push(s.spawn(move || {
                let _ns = tb.enter(Side::B).unwrap();
                let mut c = client(tb);
                let buf = c.pd().register(LEN, Access::ALL).unwrap();
                let data = pattern(LEN, 100 + i);
                let off = (i * (LEN + 4096)) as u64;
                buf.write(0, &data).unwrap();
                c.write(off, &buf, 0..LEN).unwrap();
                c.commit(off, LEN as u32).unwrap();
                verify(&mut c, &[(off, data)], &format!("for client {i}"));
                ready_tx.send(()).unwrap();
                // Stay connected until the daemon was told to stop.
                let _ = stop_rx.lock().unwrap().recv();
                c.getattr().is_err()
            }));
        }
        for _ in 0..CLIENTS {
            ready_rx
                .recv_timeout(Duration::from_secs(120))
                .expect("every client done in time");
        }
        let st = stats(&tb, &ctl);
        assert_eq!(
            sample(&st, "xwarpd_store_connections"),
            CLIENTS as u64,
            "{st}"
        );
        assert!(
            sample(&st, "xwarpd_engine_connections_opened_total") >= CLIENTS as u64,
            "{st}"
        );
        d.signal(libc::SIGTERM);
        let (status, _, log) = d.wait(Duration::from_secs(30));
        assert!(status.success(), "{status:?}\n{log}");
        for _ in 0..CLIENTS {
            stop_tx.send(()).unwrap();
        }
        for (i, h) in clients.into_iter().enumerate() {
            assert!(
                h.join().unwrap(),
                "client {i} still answered after the daemon stopped"
            );
        }
    });
    assert_eq!(attached_prog(&tb), None, "XDP still attached after SIGTERM");
}

/// `[xdp] queues = 2` on a two-queue veth: one engine per queue, each exported with its queue
/// label; store clients on the kernel transport (whose packets reach whichever queue their
/// kernel picks, and the owner lane gets them) write and read back every byte, over
/// RPC-over-RDMA and over ONC RPC on TCP (the store's stream listener on both lanes).
#[test]
fn xdp_daemon_serves_the_store_on_two_queues() {
    let Some(tb) = xwarpd_support::xdp_testbed_with_queues("xwq", 2) else {
        return;
    };
    let store = Tmp::new("xdp-2q.img");
    let ctl = Tmp::new("xdp-2q.sock");
    let conf = Tmp::new("xdp-2q.toml");
    std::fs::write(conf.as_str(), "[xdp]\nqueues = 2\n").unwrap();
    let mut d = start_xdp_daemon(
        &tb,
        &store,
        &ctl,
        Some("16MiB"),
        &[
            "--config",
            conf.as_str(),
            "--store-tcp",
            "on",
            "--store-tcp-port",
            "20050",
        ],
    );
    const CLIENTS: usize = 6;
    const LEN: usize = 256 << 10;
    tb.run_in(Side::B, || {
        for i in 0..CLIENTS {
            let mut c = client(&tb);
            let buf = c.pd().register(LEN, Access::ALL).unwrap();
            let data = pattern(LEN, 200 + i);
            let off = (i * LEN) as u64;
            buf.write(0, &data).unwrap();
            c.write(off, &buf, 0..LEN).unwrap();
            c.commit(off, LEN as u32).unwrap();
            verify(
                &mut c,
                &[(off, data)],
                &format!("for client {i} on two queues"),
            );
        }
        let tcp_at = format!("{}:20050", tb.ip(Side::A)).parse().unwrap();
        for i in 0..CLIENTS {
            let opts = xwarpd::oncrpc::TcpClientOptions::default();
            let mut c = xwarpd::oncrpc::TcpStoreClient::connect_kernel(tcp_at, &opts)
                .expect("connect to the ONC RPC/TCP store");
            let off = (i * LEN) as u64;
            let mut buf = Vec::new();
            let r = c.read(off, &mut buf, LEN as u32).unwrap();
            assert_eq!(r.len as usize, LEN);
            assert!(
                buf[..LEN] == pattern(LEN, 200 + i)[..],
                "ONC RPC/TCP read {i}"
            );
        }
    });
    let st = stats(&tb, &ctl);
    let opened: u64 = (0..2)
        .map(|q| sample_of_queue(&st, "xwarpd_engine_connections_opened_total", q))
        .sum();
    assert!(opened >= CLIENTS as u64, "{st}");
    assert_eq!(sample(&st, "xwarpd_engine_malformed_total"), 0, "{st}");
    d.signal(libc::SIGTERM);
    let (status, _, log) = d.wait(Duration::from_secs(30));
    assert!(status.success(), "{status:?}\n{log}");
    assert_eq!(attached_prog(&tb), None, "XDP still attached after SIGTERM");
}

/// Pipelined calls keep their order: a READ pipelined before an overlapping WRITE returns the
/// old bytes, a READ after it the new ones. On the engine a READ's RDMA Writes leave as the
/// window opens, rebuilt from the store's region, so a WRITE applied before they left would
/// show through. The server waits for each reply's completion before the next call (checked:
/// a variant that served the next call while the reply was in flight failed this in round 0,
/// 994 changed bytes).
#[test]
fn xdp_daemon_keeps_a_read_before_an_overlapping_pipelined_write_old() {
    let Some(tb) = testbed("xwo") else { return };
    let store = Tmp::new("xdp-order.img");
    let ctl = Tmp::new("xdp-order.sock");
    let _d = start_xdp_daemon(&tb, &store, &ctl, Some("8MiB"), &[]);
    let _ns = tb.enter(Side::B).unwrap();
    let mut c = client(&tb);
    const LEN: usize = 1 << 20;
    const TAIL: usize = 1000; // an inline WRITE: its bytes come with the call
    let reg = |c: &StoreClient| std::sync::Arc::new(c.pd().register(LEN, Access::ALL).unwrap());
    let (src, before, after) = (reg(&c), reg(&c), reg(&c));
    for round in 0..8u64 {
        let old = testkit::pattern(LEN, 1000 + round);
        let new = testkit::pattern(TAIL, 2000 + round);
        src.write(0, &old).unwrap();
        c.write(0, &src, 0..LEN).unwrap();
        src.write(0, &new).unwrap();
        let r1 = c.start_read(0, &before, 0..LEN).unwrap();
        let w = c
            .start_write((LEN - TAIL) as u64, &src, 0..TAIL, false)
            .unwrap();
        let r2 = c.start_read(0, &after, 0..LEN).unwrap();
        let mut done = Vec::new();
        while c.in_flight() > 0 {
            let (id, r) = c.wait_any().unwrap();
            r.unwrap_or_else(|e| panic!("round {round}: call failed: {e}"));
            done.push(id);
        }
        assert_eq!(done.len(), 3);
        assert!(done.contains(&r1) && done.contains(&w) && done.contains(&r2));
        let mut got = vec![0u8; LEN];
        before.read(0, &mut got).unwrap();
        assert!(
            got == old,
            "round {round}: the READ before the WRITE saw {} changed bytes",
            got.iter().zip(&old).filter(|(a, b)| a != b).count()
        );
        after.read(0, &mut got).unwrap();
        assert!(got[..LEN - TAIL] == old[..LEN - TAIL], "round {round}");
        assert!(
            got[LEN - TAIL..] == new[..],
            "round {round}: the WRITE is missing"
        );
    }
}

/// Supervision, on a daemon whose store address comes from the interface
/// (no --store-listen): the engine thread panics (XWARP_TEST_PANIC=engine, debug
/// builds, in its first busy round: when a client connects) and the daemon stops with ONE log
/// line naming the engine thread, exit status 70, the XDP program detached and the control
/// socket removed. Before, the daemon kept running with a dead data path.
#[test]
fn an_engine_thread_panic_stops_the_daemon_with_one_line_and_exit_70() {
    let Some(tb) = testbed("xwp") else { return };
    let store = Tmp::new("xdp-panic.img");
    let ctl = Tmp::new("xdp-panic.sock");
    let mut cmd = xdp_daemon_command(&tb, &store, &ctl, Some("1MiB"), &[]);
    cmd.env("XWARP_TEST_PANIC", "engine");
    let d = Daemon::spawn(cmd);
    assert!(attached_prog(&tb).is_some());
    // No --store-listen: the store listens on the interface's address.
    let addr = format!("{}:{STORE_PORT}", tb.ip(Side::A));
    assert_eq!(d.field("store"), addr);
    let addr = addr.parse().unwrap();
    let client = std::thread::scope(|s| {
        let h = s.spawn(|| {
            tb.run_in(Side::B, || {
                let o = ClientOptions {
                    call_timeout: Duration::from_secs(5),
                    ..ClientOptions::default()
                };
                StoreClient::connect(addr, &o).and_then(|mut c| c.getattr())
            })
        });
        let out = d.wait(Duration::from_secs(30));
        (out, h.join().unwrap())
    });
    let ((status, out, log), reached) = client;
    assert!(reached.is_err(), "the dead engine answered: {reached:?}");
    assert_eq!(status.code(), Some(70), "{status:?}\n{log}");
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("panicked")).collect();
    assert_eq!(lines.len(), 1, "one line about the panic:\n{log}");
    assert!(
        lines[0].contains("thread 'xwarp-engine' panicked")
            && lines[0].contains("XWARP_TEST_PANIC=engine"),
        "{log}"
    );
    assert!(!out.contains("xwarpd stopped"), "{out}");
    assert_eq!(
        attached_prog(&tb),
        None,
        "XDP left attached after the panic"
    );
    assert!(!ctl.0.exists(), "control socket left behind");
}
