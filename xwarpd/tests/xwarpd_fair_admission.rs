//! Fair admission in xwarpd (root, namespaces): floods from 198.18.0.3 (a second address of B)
//! against the store, on the xdp transport and on the kernel transport, and meanwhile a store
//! client from 198.18.0.2 that connects and completes verified calls (1 MiB WRITE, COMMIT,
//! READ back) on its first try.
//!
//! - Idle flood: 5,000 connections that complete TCP and never send an MPA Request. The
//!   listener's backlog (256) takes 64 of them (the source's share), the rest are reset at once
//!   and counted.
//! - Silent flood: 80 connections that finish MPA and then send nothing. The store takes 16 of
//!   them (its share per source, a quarter of its 64 slots) and turns the rest away, counted.
//! - With one source allowed all 64 slots, the silent flood fills the store; once its
//!   connections have been silent for a second, the client takes the slot of the one idle
//!   longest (counted), on its first try.

mod xwarpd_support;

use std::net::{SocketAddr, SocketAddrV4};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use testbed::{Side, VethTestbed};
use testkit::source_flood::{self, FLOOD_SOURCE};
use testkit::syn_flood::{raise_nofile, wait_until};
use xwarpd_support::{
    flood_testbed, sample, scrape, temps, verified_store_calls, Daemon, Tmp, BIN,
};

const T: Duration = Duration::from_secs(60);
const PORT: u16 = 20049;
/// The share of the default backlog (256) per source.
const BACKLOG_SHARE: u64 = 64;
/// The store's default share per source: a quarter of its 64 slots.
const STORE_SHARE: usize = 16;

/// The floods load the machine: one test at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Which transport xwarpd serves on.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Transport {
    Xdp,
    Kernel,
}

/// xwarpd in A serving a 16 MiB store on A's address over `transport`, metrics on, `store`
/// appended to the `[store]` section.
fn start(tb: &VethTestbed, tmp: &[Tmp; 3], transport: Transport, store: &str) -> Daemon {
    start_with(tb, tmp, transport, store, &[])
}

/// As [`start`], with `flags` on the command line.
fn start_with(
    tb: &VethTestbed,
    tmp: &[Tmp; 3],
    transport: Transport,
    store: &str,
    flags: &[&str],
) -> Daemon {
    let [conf, img, ctl] = tmp;
    let xdp = match transport {
        Transport::Xdp => format!(
            "transport = \"xdp\"\n[xdp]\ninterface = \"{}\"\nqueue = 0\n",
            tb.ifname(Side::A)
        ),
        Transport::Kernel => "transport = \"kernel\"\n".into(),
    };
    let text = format!(
        "metrics = \"127.0.0.1:0\"\nlog = \"info\"\ncontrol_socket = \"{}\"\n{xdp}\
         [store]\npath = \"{}\"\nsize = \"16MiB\"\nlisten = \"{}:{PORT}\"\n{store}\n",
        ctl.as_str(),
        img.as_str(),
        tb.ip(Side::A),
    );
    std::fs::write(conf.path(), text).unwrap();
    let mut c = tb.command(Side::A, BIN);
    c.args(["--config", conf.as_str()]).args(flags);
    Daemon::spawn(c)
}

fn dst(tb: &VethTestbed) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(tb.ip(Side::A), PORT))
}

/// Stops the daemon with SIGTERM; it must exit cleanly.
fn stop(mut d: Daemon) {
    d.signal(libc::SIGTERM);
    let (status, _, log) = d.wait(Duration::from_secs(30));
    assert!(status.success(), "{log}");
}

/// The idle flood, then the client.
fn idle_flood(tag: &str, transport: Transport) {
    let Some(tb) = flood_testbed(tag) else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    raise_nofile(source_flood::IDLE as u64 + 1024);
    let started = Instant::now();
    let tmp = temps(tag);
    let d = start(&tb, &tmp, transport, "");
    let t0 = Instant::now();
    let (socks, reset_early) = source_flood::idle(
        Some(FLOOD_SOURCE.into()),
        dst(&tb),
        source_flood::IDLE,
        T,
        || tb.enter(Side::B).expect("enter B"),
    );
    let opened = t0.elapsed();
    assert_eq!(socks.len() + reset_early, source_flood::IDLE);
    let refused = match transport {
        Transport::Xdp => "xwarpd_engine_backlog_share_refused_total",
        Transport::Kernel => "xwarpd_backlog_share_refused_total",
    };
    // Every handshake done and decided (the engine's last ACKs in, the acceptor's accepts).
    wait_until(Duration::from_secs(20), "the flood's admission", || {
        let m = scrape(&tb, &d);
        sample(&m, refused) + BACKLOG_SHARE >= source_flood::IDLE as u64
    });
    let m = scrape(&tb, &d);
    assert_eq!(
        sample(&m, refused),
        source_flood::IDLE as u64 - BACKLOG_SHARE,
        "all but the source's share were reset at once:\n{m}"
    );
    if transport == Transport::Xdp {
        assert_eq!(
            sample(&m, "xwarpd_engine_connections"),
            BACKLOG_SHARE,
            "{m}"
        );
    }
    let t1 = Instant::now();
    verified_store_calls(&tb, dst(&tb));
    let took = t1.elapsed();
    let m = scrape(&tb, &d);
    assert_eq!(
        sample(&m, "xwarpd_store_connections_accepted_total"),
        1,
        "{m}"
    );
    assert_eq!(sample(&m, "xwarpd_store_reads_total"), 1, "{m}");
    assert_eq!(
        sample(&m, refused),
        source_flood::IDLE as u64 - BACKLOG_SHARE
    );
    drop(socks);
    stop(d);
    println!(
        "{transport:?}: idle flood of {} from {FLOOD_SOURCE} opened in {opened:?} ({reset_early} \
         reset before connect returned); client took {took:?}; test took {:?}",
        source_flood::IDLE,
        started.elapsed()
    );
}

/// The silent MPA flood (the store's default share per source), then the client.
fn silent_flood(tag: &str, transport: Transport) {
    let Some(tb) = flood_testbed(tag) else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let tmp = temps(tag);
    let d = start(&tb, &tmp, transport, "");
    let to = dst(&tb);
    let flood = tb.run_in(Side::B, || {
        source_flood::silent_mpa(FLOOD_SOURCE.into(), to, source_flood::SILENT, T)
    });
    assert_eq!(
        flood.held.len(),
        STORE_SHARE,
        "the source's share of the slots"
    );
    assert_eq!(flood.turned_away, source_flood::SILENT - STORE_SHARE);
    let t1 = Instant::now();
    verified_store_calls(&tb, to);
    let took = t1.elapsed();
    let m = scrape(&tb, &d);
    assert_eq!(
        sample(
            &m,
            "xwarpd_store_connections_refused_total{reason=\"source_share\"}"
        ),
        (source_flood::SILENT - STORE_SHARE) as u64,
        "{m}"
    );
    assert_eq!(
        sample(&m, "xwarpd_store_connections_accepted_total"),
        STORE_SHARE as u64 + 1,
        "{m}"
    );
    assert_eq!(
        sample(&m, "xwarpd_store_connections_evicted_total"),
        0,
        "{m}"
    );
    drop(flood);
    stop(d);
    println!(
        "{transport:?}: silent flood of {} from {FLOOD_SOURCE}: client took {took:?}; test took \
         {:?}",
        source_flood::SILENT,
        started.elapsed()
    );
}

#[test]
fn an_idle_flood_from_one_address_leaves_the_store_over_xdp_to_others() {
    idle_flood("xfi", Transport::Xdp);
}

#[test]
fn an_idle_flood_from_one_address_leaves_the_store_over_kernel_tcp_to_others() {
    idle_flood("xki", Transport::Kernel);
}

#[test]
fn silent_mpa_connections_from_one_address_take_only_their_share_over_xdp() {
    silent_flood("xfs", Transport::Xdp);
}

#[test]
fn silent_mpa_connections_from_one_address_take_only_their_share_over_kernel_tcp() {
    silent_flood("xks", Transport::Kernel);
}

/// The backlog setting reaches the kernel transport's listener: with `--backlog 4` (one source
/// allowed all of it), 6 idle connections from 198.18.0.3 leave 4 held and 2 reset for the
/// source's share; then each of 2 from 198.18.0.2 finds the backlog full and resets the oldest
/// of 198.18.0.3 to take its place (the default backlog, 256, would have held them all).
#[test]
fn the_backlog_setting_reaches_the_kernel_transports_listener() {
    let Some(tb) = flood_testbed("xbl") else {
        return;
    };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = temps("backlog");
    let flags = ["--backlog", "4", "--backlog-per-source", "4"];
    let d = start_with(&tb, &tmp, Transport::Kernel, "", &flags);
    let enter = || tb.enter(Side::B).expect("enter B");
    let idle = |src: std::net::Ipv4Addr, n| {
        let (socks, reset_early) = source_flood::idle(Some(src.into()), dst(&tb), n, T, enter);
        assert_eq!(socks.len() + reset_early, n);
        socks
    };
    let decided = |what, metric, want| {
        wait_until(Duration::from_secs(20), what, || {
            sample(&scrape(&tb, &d), metric) >= want
        });
        let m = scrape(&tb, &d);
        assert_eq!(sample(&m, metric), want, "{what}:\n{m}");
    };
    let flood = idle(FLOOD_SOURCE, 6);
    decided(
        "the source's share refused",
        "xwarpd_backlog_share_refused_total",
        2,
    );
    let others = idle(tb.ip(Side::B), 2);
    decided(
        "room made in the full backlog",
        "xwarpd_backlog_evictions_total",
        2,
    );
    let m = scrape(&tb, &d);
    assert_eq!(sample(&m, "xwarpd_backlog_refused_total"), 2, "{m}");
    drop((flood, others));
    stop(d);
}

/// One source may take every slot: the silent flood fills the store. Once its connections
/// have been silent for a second, the client gets in on its first try in place of the one
/// idle longest, which is closed (counted); the store never serves more than its cap.
#[test]
fn a_silent_connection_gives_way_to_a_new_client_when_the_store_is_full() {
    let Some(tb) = flood_testbed("xev") else {
        return;
    };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let tmp = temps("evict");
    let d = start(
        &tb,
        &tmp,
        Transport::Kernel,
        "max_connections_per_source = 64",
    );
    let to = dst(&tb);
    let flood = tb.run_in(Side::B, || {
        source_flood::silent_mpa(FLOOD_SOURCE.into(), to, source_flood::SILENT, T)
    });
    assert_eq!(flood.held.len() + flood.turned_away, source_flood::SILENT);
    assert!(
        flood.held.len() >= 64,
        "the store filled: {}",
        flood.held.len()
    );
    wait_until(Duration::from_secs(10), "the store full", || {
        sample(&scrape(&tb, &d), "xwarpd_store_connections") == 64
    });
    std::thread::sleep(xwarpd::store::DEFAULT_SILENT_AFTER + Duration::from_millis(200));
    let before = sample(&scrape(&tb, &d), "xwarpd_store_connections_evicted_total");
    let t1 = Instant::now();
    verified_store_calls(&tb, to);
    let took = t1.elapsed();
    let m = scrape(&tb, &d);
    assert_eq!(
        sample(&m, "xwarpd_store_connections_evicted_total"),
        before + 1,
        "one silent connection gave way:\n{m}"
    );
    wait_until(Duration::from_secs(5), "the evicted one closing", || {
        sample(&scrape(&tb, &d), "xwarpd_store_connections") <= 63
    });
    let log = d.log();
    assert!(
        log.contains("gave way to a new client"),
        "the evicted connection's close is logged:\n{log}"
    );
    drop(flood);
    stop(d);
    println!(
        "eviction: client took {took:?}; test took {:?}",
        started.elapsed()
    );
}
