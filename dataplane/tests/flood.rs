//! Floods against the xdp engine through the verbs API: an xdp
//! device listens in namespace A; namespace B floods it.
//!
//! - SYN flood: 100,000 SYNs or more with spoofed sources (random addresses in 198.18.0.0/15
//!   outside the testbed's /24, random ports) from a raw socket in B, until the engine has
//!   received 100,000; during the flood a kernel client connects and verifies a 1 MiB RDMA Write. The process's resident memory grows by less
//!   than [`SYN_FLOOD_RSS`], and no half-open state (entries, SYN source MACs) is left once the
//!   SYN-ACK retries are over.
//! - Idle-connection flood: 10,000 kernel TCP connections that complete the handshake and never
//!   send an MPA Request. Those past the backlog are reset at once, the others by the MPA startup
//!   timeout; resident memory stays within [`idle_flood::RSS_PER_CONN`] per connection held and
//!   [`idle_flood::RSS_TOTAL`] in all, and comes back (within [`idle_flood::RSS_LEFT`]) once they are gone.
//!
//! - Fair admission: 5,000 idle connections from 198.18.0.3 (a second address of B) hold only
//!   that address's share of the backlog (64 of 256), the rest reset at once; a client from
//!   198.18.0.2 then connects and verifies a 1 MiB RDMA Write on its first try. The same with
//!   80 connections from 198.18.0.3 that finish MPA and then stay silent. Over IPv6 a source
//!   is a /64: 640 idle connections from 16 addresses of 2001:db8:0:f::/64 hold 64 places
//!   together, and a client from 2001:db8::2 (another /64) gets in on its first try.
//!
//! The engine runs in this process, so its memory is this process's resident set (VmRSS); the
//! client sockets are the kernel's and not in it.

use std::net::{SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use afxdp::BindMode;
use dataplane::{
    Access, CompletionQueue, ConnectionConfig, Device, EngineMode, MpaSettings, Status, Transport,
    XdpConfig,
};
use testbed::packet_socket::PacketSocket;
use testbed::{for_test, Side, VethTestbed};
use testkit::idle_flood;
use testkit::sanitizer::assert_rss_below;
use testkit::source_flood::{self, FLOOD_SOURCE};
use testkit::syn_flood::{self, raise_nofile, rss, wait_until};
use testkit::{or_skip, pattern};

const T: Duration = Duration::from_secs(60);
const LEN: usize = 1 << 20;

/// Most the resident set may grow over the SYN flood (the engine keeps at most `max_half_open`
/// entries and `max_syn_sources` MACs; cookies cost nothing).
const SYN_FLOOD_RSS: u64 = 32 << 20;

/// The tests measure this process's resident set: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Waits for the flood's last handshakes: a client's connect() returns once it has sent the
/// last ACK of the handshake; the engine may not have taken that ACK in yet (or lost it and
/// waits to repeat its SYN-ACK).
fn handshakes_done(x: &Device) {
    wait_until(
        Duration::from_secs(10),
        "the last handshakes completing",
        || x.engine_load().unwrap().half_open == 0,
    );
}

/// The resident set once the allocator has given its free memory back: freed memory stays
/// with the allocator until it is asked (the engine's heap itself comes back: the endpoint's
/// admission tests count it).
fn trimmed_rss() -> u64 {
    // Safety: malloc_trim only releases free memory of the allocator's arenas.
    unsafe { libc::malloc_trim(0) };
    rss(None)
}

fn open_xdp(tb: &VethTestbed, tune: impl FnOnce(&mut XdpConfig)) -> Device {
    let _ns = tb.enter(Side::A).unwrap();
    let mut cfg = XdpConfig::new(tb.ifname(Side::A));
    cfg.bind = BindMode::Copy;
    cfg.mode = EngineMode::Threaded;
    tune(&mut cfg);
    Device::open_xdp(cfg).expect("open the xdp device")
}

fn wait_ok(cq: &CompletionQueue, what: &str) {
    let c = cq
        .wait(T)
        .unwrap_or_else(|| panic!("no completion for {what}"));
    assert_eq!(c.status, Status::Success, "{what}: {c:?}");
}

// ------------------------------------------------------------------ the spoofed SYNs

/// Sends spoofed SYNs to `dst` from a packet socket in B until the engine has received at
/// least `SYNS` frames besides the real client's (`engine_rx`) and `stop` is set (or two
/// minutes passed), at most `AHEAD` frames ahead of it; returns how many were sent.
fn flood(
    tb: &VethTestbed,
    dst: SocketAddrV4,
    stop: &AtomicBool,
    sent: &AtomicU64,
    engine_rx: impl Fn() -> u64,
) -> u64 {
    let _ns = tb.enter(Side::B).unwrap();
    let sock = PacketSocket::open(tb.ifname(Side::B)).expect("AF_PACKET socket in B");
    let macs = (tb.mac(Side::B).unwrap(), tb.mac(Side::A).unwrap());
    let pace = syn_flood::SYN_FLOOD;
    syn_flood::flood(
        macs,
        dst,
        pace,
        stop,
        sent,
        |f| sock.send(f).is_ok(),
        engine_rx,
    )
}

/// The passive side of the real connection: accepts one MPA Request, lets the peer write 1 MiB
/// into its window and checks it once the peer's zero-octet Send says the Write is done.
/// Gives the listener back: dropping it would stop steering its port to the engine.
fn passive(
    dev: Device,
    listener: dataplane::Listener,
    stag: mpsc::Sender<u32>,
) -> dataplane::Listener {
    let (qi, cq) = dev.qp_init();
    let recv = qi.pd.register(16, Access::LOCAL_WRITE).unwrap();
    let win = qi.pd.register(LEN, Access::REMOTE_WRITE).unwrap();
    stag.send(win.stag()).unwrap();
    let inc = listener
        .accept_timeout(T)
        .expect("the real client's MPA Request");
    let qp = inc
        .accept_with(qi, b"", |qp| qp.post_recv(1, &recv, 0..16))
        .expect("accept");
    wait_ok(&cq, "the zero-octet Send after the Write");
    let mut got = vec![0u8; LEN];
    win.read(0, &mut got).unwrap();
    assert!(got == pattern(LEN, 7), "RDMA Write data differs");
    qp.close();
    listener
}

/// The real client: a kernel-transport device in B connects, writes 1 MiB, then Sends nothing.
fn real_client(tb: &VethTestbed, k: &Device, dst: SocketAddr, stag: u32) {
    let (qi, cq) = k.qp_init();
    let qp = {
        let _ns = tb.enter(Side::B).unwrap();
        k.connect(dst, qi.clone(), &ConnectionConfig::default(), b"")
            .expect("the real client connects during the flood")
    };
    let src = qi
        .pd
        .register_from(&pattern(LEN, 7), Access::LOCAL_WRITE)
        .unwrap();
    qp.post_write(2, &src, 0..LEN, dataplane::RemoteAddr { stag, to: 0 })
        .unwrap();
    wait_ok(&cq, "1 MiB RDMA Write");
    qp.post_send(3, &src, 0..0).unwrap();
    wait_ok(&cq, "zero-octet Send");
    drop(qp);
}

#[test]
fn syn_flood_leaves_a_real_client_working_and_no_state_behind() {
    let Some(tb) = or_skip("syf", for_test("syf")) else {
        return;
    };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
    let started = Instant::now();
    // One SYN-ACK retry (1 s + 2 s) instead of five: the half-open entries are gone 3 s after
    // the flood rather than 63 s. Everything else is the default.
    let x = open_xdp(&tb, |c| c.listener.synack_retries = 1);
    let port = 4200;
    let local = SocketAddrV4::new(tb.ip(Side::A), port);
    let listener = x
        .listen(SocketAddr::V4(local), ConnectionConfig::default())
        .unwrap();
    let (stx, srx) = mpsc::channel();
    let x2 = x.clone();
    let acceptor = std::thread::spawn(move || passive(x2, listener, stx));
    let stag = srx.recv_timeout(T).unwrap();
    let k = Device::open(Transport::Kernel).unwrap();
    let before = rss(None);

    let stop = AtomicBool::new(false);
    let sent = AtomicU64::new(0);
    let (n, client_took) = std::thread::scope(|s| {
        let flooder = s.spawn(|| {
            flood(&tb, local, &stop, &sent, || {
                x.engine_counters().unwrap().rx_packets
            })
        });
        // The client starts once a tenth of the flood is out, and must finish while it goes on.
        wait_until(T, "the flood starting", || {
            sent.load(Ordering::Relaxed) >= syn_flood::SYNS / 10
        });
        let t0 = Instant::now();
        real_client(&tb, &k, SocketAddr::V4(local), stag);
        let took = t0.elapsed();
        assert!(!flooder.is_finished(), "the Write finished after the flood");
        stop.store(true, Ordering::Relaxed);
        let n = flooder.join().expect("flooder");
        (n, took)
    });
    let _listener = acceptor.join().expect("the engine's passive side");
    let grown = rss(None).saturating_sub(before);
    let c = x.engine_counters().unwrap();
    let load = x.engine_load().unwrap();
    println!("SYN flood: XDP {:?}", x.xdp_counters());
    println!(
        "SYN flood: {n} SYNs; real client took {client_took:?}; RSS +{} KiB; {load:?}; {c:?}",
        grown >> 10
    );
    assert!(
        c.rx_packets >= syn_flood::SYN_FLOOD.until_received,
        "the engine received {} frames",
        c.rx_packets
    );
    assert_rss_below(grown, SYN_FLOOD_RSS, "resident set growth over the flood");
    assert!(c.syn_cookies_sent > 0, "the half-open table filled: {c:?}");
    assert!(
        load.neighbours <= 1,
        "spoofed SYNs taught neighbours: {load:?}"
    );
    // No half-open state left once the SYN-ACK retries are over; the real connection closes.
    wait_until(
        Duration::from_secs(30),
        "half-open entries expiring",
        || {
            let l = x.engine_load().unwrap();
            l.half_open == 0 && l.connections == 0
        },
    );
    let c = x.engine_counters().unwrap();
    let load = x.engine_load().unwrap();
    println!("SYN flood: afterwards {load:?}");
    assert_eq!(load.syn_sources, 0, "SYN sources left");
    assert!(c.half_open_expired > 0, "{c:?}");
    assert_eq!(x.counters().mpa_established, 1);
    println!("SYN flood test took {:?}", started.elapsed());
}

#[test]
fn idle_connection_flood_is_refused_or_reaped_within_bounded_memory() {
    let Some(tb) = or_skip("idf", for_test("idf")) else {
        return;
    };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
    raise_nofile(idle_flood::CONNECTIONS as u64 + 1024);
    // As xwarpd does: freed memory goes back to the OS (dataplane::heap); AddressSanitizer's
    // allocator takes no such tuning.
    assert_eq!(
        dataplane::heap::return_freed_memory_promptly(dataplane::heap::DEFAULT_RELEASE_THRESHOLD),
        !testkit::ADDRESS_SANITIZER
    );
    let started = Instant::now();
    // One address may hold the whole backlog here: this test measures memory per connection.
    let x = open_xdp(&tb, |c| {
        c.listener.max_accept_queue = idle_flood::BACKLOG;
        c.limits.backlog_share.per_source = idle_flood::BACKLOG;
    });
    let port = 4300;
    let local = SocketAddrV4::new(tb.ip(Side::A), port);
    let cfg = ConnectionConfig::default().with_mpa(MpaSettings {
        // Long enough that the held connections are still there when the last ones are
        // opened (the 10,000 take about 1 s in a debug build); short enough for the test,
        // which waits for it.
        timeout: Duration::from_secs(8),
        ..MpaSettings::default()
    });
    let _listener = x.listen(SocketAddr::V4(local), cfg).unwrap();
    let before = trimmed_rss();

    // Four clients in B open the connections and keep them.
    let t0 = Instant::now();
    // A connection reset before connect() returned (the engine refused it as soon as the
    // handshake completed) reports ECONNRESET: it completed the handshake too.
    let (mut socks, reset_early) = idle_flood::open(SocketAddr::V4(local), T, || {
        tb.enter(Side::B).expect("enter B")
    });
    let opened = t0.elapsed();
    assert_eq!(socks.len() + reset_early, idle_flood::CONNECTIONS);
    handshakes_done(&x);
    let held = x.engine_load().unwrap();
    let grown = rss(None).saturating_sub(before);
    let c = x.engine_counters().unwrap();
    println!(
        "idle flood: {} connections opened in {opened:?} ({reset_early} reset before \
         connect returned); held {held:?}; RSS +{} KiB ({} octets per connection held); {c:?}",
        idle_flood::CONNECTIONS,
        grown >> 10,
        grown / held.connections.max(1) as u64
    );
    assert!(
        held.connections <= idle_flood::BACKLOG,
        "more connections held than the backlog: {held:?}"
    );
    assert!(
        held.connections >= idle_flood::BACKLOG / 2,
        "the held connections were reaped before the flood ended ({opened:?}): {held:?}"
    );
    // Those past the backlog are reset at once.
    assert!(
        c.connections_refused as usize >= idle_flood::CONNECTIONS - idle_flood::BACKLOG,
        "those past the backlog are reset: {c:?}"
    );
    assert_rss_below(grown, idle_flood::RSS_TOTAL, "resident set growth");
    assert_rss_below(
        grown / (held.connections as u64),
        idle_flood::RSS_PER_CONN,
        "resident set per idle connection",
    );
    // The MPA startup timeout reaps the rest.
    wait_until(Duration::from_secs(60), "idle connections reaped", || {
        x.engine_load().unwrap().connections == 0
    });
    let c = x.engine_counters().unwrap();
    assert!(
        c.connections_refused + c.connections_closed >= idle_flood::CONNECTIONS as u64,
        "every idle connection was refused or reaped: {c:?}"
    );
    socks.clear();
    let left = trimmed_rss().saturating_sub(before);
    println!(
        "idle flood: RSS +{} KiB once they are gone; test took {:?}",
        left >> 10,
        started.elapsed()
    );
    assert_rss_below(left, idle_flood::RSS_LEFT, "resident set above the start");
}

// ------------------------------------------------------------------ fair admission

/// Gives B the flooding address [`FLOOD_SOURCE`] beside its own (198.18.0.2 stays the one its
/// connections come from unless bound).
fn add_flood_source(tb: &VethTestbed) {
    let addr = format!("{FLOOD_SOURCE}/24");
    tb.ip_cmd(Side::B, &["addr", "add", &addr, "dev", tb.ifname(Side::B)])
        .expect("add the flooding address to B");
}

/// The application of the fair-admission tests: accepts every MPA Request on `listener` and
/// keeps the queue pairs (the flood's stay silent); the one from B's own address gets a
/// window, and its 1 MiB RDMA Write is checked once its zero-octet Send says it is done.
/// Returns how many flood connections it accepted, and gives the listener back.
fn serve_all(
    dev: Device,
    listener: dataplane::Listener,
    client: std::net::IpAddr,
    stag: mpsc::Sender<u32>,
) -> (usize, dataplane::Listener) {
    let (qi, cq) = dev.qp_init();
    let recv = qi.pd.register(16, Access::LOCAL_WRITE).unwrap();
    let win = qi.pd.register(LEN, Access::REMOTE_WRITE).unwrap();
    stag.send(win.stag()).unwrap();
    let mut flood = Vec::new();
    let qp = loop {
        let inc = listener.accept_timeout(T).expect("an MPA Request");
        if inc.peer_addr().unwrap().ip() == client {
            break inc
                .accept_with(qi, b"", |qp| qp.post_recv(1, &recv, 0..16))
                .expect("accept the client");
        }
        let (fi, _) = dev.qp_init();
        flood.push(inc.accept(fi, b"").expect("accept a flood connection"));
    };
    wait_ok(&cq, "the zero-octet Send after the Write");
    let mut got = vec![0u8; LEN];
    win.read(0, &mut got).unwrap();
    assert!(got == pattern(LEN, 7), "RDMA Write data differs");
    qp.close();
    (flood.len(), listener)
}

/// What a fair-admission test runs against: the engine with its default backlog (256) and
/// share per source (64), listening on `port` of A's IPv4 address with an MPA startup timeout
/// long enough that the flood's idle connections are still held when the client comes, and
/// [`serve_all`] as its application (the handle to join, and the STag of the client's window).
type FairSetup<A> = (
    Device,
    A,
    std::thread::JoinHandle<(usize, dataplane::Listener)>,
    u32,
);

fn fair_setup(tb: &VethTestbed, port: u16) -> FairSetup<SocketAddrV4> {
    add_flood_source(tb);
    let local = SocketAddrV4::new(tb.ip(Side::A), port);
    let (x, _, app, stag) = fair_listen(tb, local.into(), tb.ip(Side::B).into());
    (x, local, app, stag)
}

/// As [`fair_setup`], on `local` (the engine serves its address), the client coming from
/// `client`.
fn fair_listen(
    tb: &VethTestbed,
    local: SocketAddr,
    client: std::net::IpAddr,
) -> FairSetup<SocketAddr> {
    tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
    let x = open_xdp(tb, |c| c.address = Some(local.ip()));
    let cfg = ConnectionConfig::default().with_mpa(MpaSettings {
        timeout: Duration::from_secs(60),
        ..MpaSettings::default()
    });
    let listener = x.listen(local, cfg).unwrap();
    let (stx, srx) = mpsc::channel();
    let x2 = x.clone();
    let app = std::thread::spawn(move || serve_all(x2, listener, client, stx));
    let stag = srx.recv_timeout(T).unwrap();
    (x, local, app, stag)
}

/// A client from B's own address writes through [`real_client`] on its first try while the
/// idle flood (`socks`) holds its share of the backlog of `x` (serving through `app`); the
/// flood sent no MPA Request, its connections were still held, and one connection reached
/// MPA.
fn client_beside_the_held_share(
    tb: &VethTestbed,
    (x, app): (
        Device,
        std::thread::JoinHandle<(usize, dataplane::Listener)>,
    ),
    local: SocketAddr,
    stag: u32,
    socks: Vec<std::net::TcpStream>,
) {
    let share = XdpConfig::new("").limits.backlog_share.per_source;
    let k = Device::open(Transport::Kernel).unwrap();
    let t1 = Instant::now();
    real_client(tb, &k, local, stag);
    let took = t1.elapsed();
    let (flood_accepted, _listener) = app.join().expect("the application");
    assert_eq!(flood_accepted, 0, "idle connections send no Request");
    assert!(
        x.engine_load().unwrap().connections >= share,
        "the flood's connections were still held"
    );
    assert_eq!(x.counters().mpa_established, 1);
    drop(socks);
    println!("fair idle flood: the client took {took:?}");
}

#[test]
fn an_idle_flood_from_one_address_leaves_another_address_a_place_in_the_backlog() {
    let Some(tb) = or_skip("fair_idle", for_test("fai")) else {
        return;
    };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    raise_nofile(source_flood::IDLE as u64 + 1024);
    let started = Instant::now();
    let (x, local, app, stag) = fair_setup(&tb, 4400);
    let share = XdpConfig::new("").limits.backlog_share.per_source;

    let t0 = Instant::now();
    let (socks, reset_early) = source_flood::idle(
        Some(FLOOD_SOURCE.into()),
        SocketAddr::V4(local),
        source_flood::IDLE,
        T,
        || tb.enter(Side::B).expect("enter B"),
    );
    let opened = t0.elapsed();
    assert_eq!(socks.len() + reset_early, source_flood::IDLE);
    handshakes_done(&x);
    let held = x.engine_load().unwrap();
    let c = x.engine_counters().unwrap();
    println!(
        "fair idle flood: {} connections from {FLOOD_SOURCE} in {opened:?}; held {held:?}; {c:?}",
        source_flood::IDLE
    );
    assert_eq!(held.connections, share, "the flood holds its share only");
    assert_eq!(
        c.backlog_share_refused as usize,
        source_flood::IDLE - share,
        "the rest were reset at once: {c:?}"
    );
    assert_eq!(c.backlog_evictions, 0, "{c:?}");

    // The client from 198.18.0.2, on its first try, while the flood's share is held.
    client_beside_the_held_share(&tb, (x, app), SocketAddr::V4(local), stag, socks);
    println!("fair idle flood: test took {:?}", started.elapsed());
}

#[test]
fn silent_mpa_connections_from_one_address_leave_another_address_working() {
    let Some(tb) = or_skip("fair_silent", for_test("fas")) else {
        return;
    };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let (x, local, app, stag) = fair_setup(&tb, 4500);

    let t0 = Instant::now();
    let flood = tb.run_in(Side::B, || {
        source_flood::silent_mpa(
            FLOOD_SOURCE.into(),
            SocketAddr::V4(local),
            source_flood::SILENT,
            T,
        )
    });
    println!(
        "silent flood: {} connections with MPA up from {FLOOD_SOURCE} in {:?} ({} turned away)",
        flood.held.len(),
        t0.elapsed(),
        flood.turned_away
    );
    assert_eq!(
        flood.held.len(),
        source_flood::SILENT,
        "the application took them all"
    );
    let k = Device::open(Transport::Kernel).unwrap();
    let t1 = Instant::now();
    real_client(&tb, &k, SocketAddr::V4(local), stag);
    let took = t1.elapsed();
    let (flood_accepted, _listener) = app.join().expect("the application");
    assert_eq!(flood_accepted, source_flood::SILENT);
    assert_eq!(
        x.counters().mpa_established as usize,
        source_flood::SILENT + 1
    );
    let c = x.engine_counters().unwrap();
    assert_eq!(c.connections_refused, 0, "{c:?}");
    drop(flood);
    println!(
        "silent flood: client took {took:?}; test took {:?}",
        started.elapsed()
    );
}

/// Flooding addresses of the IPv6 test: 2001:db8:0:f::1 to ::16, one /64 (one source).
fn v6_flood_sources() -> impl Iterator<Item = std::net::Ipv6Addr> {
    (1..=V6_FLOOD_ADDRESSES).map(|n| std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 0xf, 0, 0, 0, n))
}

/// Addresses the IPv6 flood comes from, and idle connections from each.
const V6_FLOOD_ADDRESSES: u16 = 16;
const V6_FLOOD_EACH: usize = 40;

/// IPv6 fair admission over the xdp transport: 640 idle connections from 16 addresses of
/// 2001:db8:0:f::/64 hold that /64's share of the backlog (64 of 256) together, the rest are
/// reset at once; meanwhile the client from 2001:db8::2 (another /64) connects and verifies a
/// 1 MiB RDMA Write on its first try.
#[test]
fn an_idle_flood_from_one_ipv6_prefix_leaves_another_prefix_a_place_in_the_backlog() {
    let Some(tb) = or_skip("fair_idle_v6", for_test("fa6")) else {
        return;
    };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let total = usize::from(V6_FLOOD_ADDRESSES) * V6_FLOOD_EACH;
    raise_nofile(total as u64 + 1024);
    let started = Instant::now();
    // The flooding /64 on B; A's kernel answers B's neighbour solicitations from it (the
    // engine answers the connections by the SYN's source MAC).
    for src in v6_flood_sources() {
        let addr = format!("{src}/64");
        tb.ip_cmd(
            Side::B,
            &[
                "-6",
                "addr",
                "add",
                &addr,
                "dev",
                tb.ifname(Side::B),
                "nodad",
            ],
        )
        .expect("add a flooding address to B");
    }
    tb.ip_cmd(
        Side::A,
        &[
            "-6",
            "route",
            "add",
            "2001:db8:0:f::/64",
            "dev",
            tb.ifname(Side::A),
        ],
    )
    .expect("route the flooding /64 in A");
    let local = SocketAddr::new(tb.ip6(Side::A).into(), 4600);
    let (x, _, app, stag) = fair_listen(&tb, local, tb.ip6(Side::B).into());
    let share = XdpConfig::new("").limits.backlog_share.per_source;

    let t0 = Instant::now();
    let mut socks = Vec::new();
    let mut reset_early = 0;
    for src in v6_flood_sources() {
        let (held, reset) = source_flood::idle(Some(src.into()), local, V6_FLOOD_EACH, T, || {
            tb.enter(Side::B).expect("enter B")
        });
        socks.extend(held);
        reset_early += reset;
    }
    let opened = t0.elapsed();
    assert_eq!(socks.len() + reset_early, total);
    handshakes_done(&x);
    let held = x.engine_load().unwrap();
    let c = x.engine_counters().unwrap();
    println!(
        "fair idle flood (IPv6): {total} connections from {V6_FLOOD_ADDRESSES} addresses of \
         2001:db8:0:f::/64 in {opened:?}; held {held:?}; {c:?}"
    );
    assert_eq!(held.connections, share, "the /64 holds its share only");
    assert_eq!(
        c.backlog_share_refused as usize,
        total - share,
        "the rest were reset at once: {c:?}"
    );

    client_beside_the_held_share(&tb, (x, app), local, stag, socks);
    println!("fair idle flood (IPv6): test took {:?}", started.elapsed());
}
