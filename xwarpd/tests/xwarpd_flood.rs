//! Floods against the xwarpd daemon on the xdp transport (the
//! same floods against the bare engine are `dataplane/tests/flood.rs`). xwarpd serves its
//! store in namespace A; namespace B floods the store's port.
//!
//! - SYN flood: 100,000 SYNs or more with spoofed sources (random addresses in 198.18.0.0/15
//!   outside the testbed's /24, random ports) from a packet socket in B, until the daemon's
//!   engine has received 100,000; during the flood a store client on the kernel transport
//!   connects, WRITEs 1 MiB and READs it back byte for byte. The daemon's resident memory grows
//!   by less than [`SYN_FLOOD_RSS`]; no half-open state (entries, SYN source MACs) is left once
//!   the SYN-ACK retries are over.
//! - Idle-connection flood: 10,000 kernel TCP connections to the store's port that complete
//!   the handshake and never send an MPA Request. Those past the backlog are reset at once,
//!   the others by the MPA startup timeout; the daemon's resident memory stays within
//!   [`idle_flood::RSS_PER_CONN`] per connection held and [`idle_flood::RSS_TOTAL`] in all, and comes back
//!   (within [`idle_flood::RSS_LEFT`]) once they are gone.
//!
//! The daemon's figures come from its metrics endpoint (engine gauges and counters) and its
//! `/proc/PID/status`. Needs root: skipped with a message elsewhere, fails under CI=true.

mod xwarpd_support;

use std::net::{SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use testbed::packet_socket::PacketSocket;
use testbed::{Side, VethTestbed};
use testkit::idle_flood;
use testkit::sanitizer::assert_rss_below;
use testkit::syn_flood::{self, raise_nofile, wait_until};
use xwarpd_support::{
    http_get, sample, scrape, temps, verified_store_calls, xdp_store_config, xdp_testbed, Daemon,
    Tmp, BIN,
};

const T: Duration = Duration::from_secs(60);
const PORT: u16 = 20049;

/// Most the daemon's resident set may grow over the SYN flood (the engine keeps at most
/// `max_half_open` entries and `max_syn_sources` MACs; cookies cost nothing; the store
/// client's connection brings its receive buffers).
const SYN_FLOOD_RSS: u64 = 48 << 20;

/// The tests load the machine (and the flood's pacing reads the engine): one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// xwarpd on the xdp transport in A serving a 64 MiB store on A's address, with `limits`
/// appended to the `[xdp]` section of its config file.
fn start(tb: &VethTestbed, tmp: &[Tmp; 3], limits: &str) -> Daemon {
    let [conf, store, ctl] = tmp;
    std::fs::write(conf.path(), xdp_store_config(tb, ctl, store, PORT, limits)).unwrap();
    let mut c = tb.command(Side::A, BIN);
    c.args(["--config", conf.as_str()]);
    let d = Daemon::spawn(c);
    assert!(d.ready.contains("transport=xdp"), "{}", d.ready);
    d
}

/// Keeps `rx` at the daemon engine's received-frame count (scraped from A every 5 ms) until
/// `stop` is set.
fn follow_rx(tb: &VethTestbed, d: &Daemon, rx: &AtomicU64, stop: &AtomicBool) {
    let addr = d.field("metrics");
    let _ns = tb.enter(Side::A).unwrap();
    while !stop.load(Ordering::Relaxed) {
        rx.store(
            sample(&http_get(&addr), "xwarpd_engine_rx_packets_total"),
            Ordering::Relaxed,
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sends spoofed SYNs to `dst` from a packet socket in B until the engine has received at
/// least `SYNS` frames besides the real client's and `stop` is set (or two minutes passed), at
/// most `AHEAD` frames ahead of `rx`; returns how many were sent.
fn flood(
    tb: &VethTestbed,
    dst: SocketAddrV4,
    stop: &AtomicBool,
    sent: &AtomicU64,
    rx: &AtomicU64,
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
        || rx.load(Ordering::Relaxed),
    )
}

#[test]
fn syn_flood_against_xwarpd_leaves_a_store_client_working_and_no_state_behind() {
    let Some(tb) = xdp_testbed("xsf") else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let tmp = temps("syn-flood");
    // One SYN-ACK retry (1 s + 2 s) instead of five: the half-open entries are gone 3 s after
    // the flood rather than 63 s. Everything else is the default.
    let d = start(&tb, &tmp, "synack_retries = 1");
    let dst = SocketAddrV4::new(tb.ip(Side::A), PORT);
    let before = d.rss();
    let (stop, follow_stop) = (AtomicBool::new(false), AtomicBool::new(false));
    let (sent, rx) = (AtomicU64::new(0), AtomicU64::new(0));
    let (n, client_took) = std::thread::scope(|s| {
        s.spawn(|| follow_rx(&tb, &d, &rx, &follow_stop));
        let flooder = s.spawn(|| flood(&tb, dst, &stop, &sent, &rx));
        // The client starts once a tenth of the flood is out, and must finish while it goes on.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            wait_until(T, "the flood starting", || {
                sent.load(Ordering::Relaxed) >= syn_flood::SYNS / 10
            });
            let t0 = Instant::now();
            verified_store_calls(&tb, SocketAddr::V4(dst));
            let took = t0.elapsed();
            assert!(
                !flooder.is_finished(),
                "the client finished after the flood"
            );
            took
        }));
        stop.store(true, Ordering::Relaxed);
        let n = flooder.join().expect("flooder");
        follow_stop.store(true, Ordering::Relaxed);
        match r {
            Ok(took) => (n, took),
            Err(p) => std::panic::resume_unwind(p),
        }
    });
    let grown = d.rss().saturating_sub(before);
    let m = scrape(&tb, &d);
    let g = |name: &str| sample(&m, name);
    println!(
        "xwarpd SYN flood: {n} SYNs sent, engine received {}; store client took {client_took:?}; \
         RSS +{} KiB; half-open {}, cookies {}",
        g("xwarpd_engine_rx_packets_total"),
        grown >> 10,
        g("xwarpd_engine_half_open"),
        g("xwarpd_engine_syn_cookies_sent_total"),
    );
    assert!(
        g("xwarpd_engine_rx_packets_total") >= syn_flood::SYN_FLOOD.until_received,
        "the engine received too little:\n{m}"
    );
    assert_rss_below(
        grown,
        SYN_FLOOD_RSS,
        "the daemon's resident set growth over the flood",
    );
    assert!(
        g("xwarpd_engine_syn_cookies_sent_total") > 0,
        "the half-open table never filled:\n{m}"
    );
    assert!(
        g("xwarpd_engine_neighbours") <= 1,
        "spoofed SYNs taught neighbours:\n{m}"
    );
    // No half-open state left once the SYN-ACK retries are over; the client's connection closed.
    wait_until(
        Duration::from_secs(30),
        "half-open entries expiring",
        || {
            let m = scrape(&tb, &d);
            sample(&m, "xwarpd_engine_half_open") == 0
                && sample(&m, "xwarpd_engine_connections") == 0
        },
    );
    let m = scrape(&tb, &d);
    assert_eq!(sample(&m, "xwarpd_engine_syn_sources"), 0, "{m}");
    assert!(
        sample(&m, "xwarpd_engine_half_open_expired_total") > 0,
        "{m}"
    );
    assert_eq!(sample(&m, "xwarpd_store_writes_total"), 1, "{m}");
    assert_eq!(sample(&m, "xwarpd_store_reads_total"), 1, "{m}");
    println!("xwarpd SYN flood test took {:?}", started.elapsed());
}

#[test]
fn idle_connection_flood_against_xwarpd_is_refused_or_reaped_within_bounded_memory() {
    let Some(tb) = xdp_testbed("xif") else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    raise_nofile(idle_flood::CONNECTIONS as u64 + 1024);
    let started = Instant::now();
    let tmp = temps("idle-flood");
    // One address may hold the whole backlog here: this test measures memory per connection.
    let d = start(
        &tb,
        &tmp,
        &format!(
            "backlog = {0}\n[admission]\nbacklog_per_source = {0}",
            idle_flood::BACKLOG
        ),
    );
    let dst = SocketAddr::V4(SocketAddrV4::new(tb.ip(Side::A), PORT));
    let before = d.rss();

    // Four clients in B open the connections and keep them. A connection reset before
    // connect() returned (refused as soon as the handshake completed) completed it too.
    let t0 = Instant::now();
    let (mut socks, reset_early) = idle_flood::open(dst, T, || tb.enter(Side::B).expect("enter B"));
    let opened = t0.elapsed();
    assert_eq!(socks.len() + reset_early, idle_flood::CONNECTIONS);
    // A client's connect() returns once it has sent the last ACK of the handshake; the engine
    // may not have taken that ACK in yet (or lost it and waits to repeat its SYN-ACK).
    wait_until(
        Duration::from_secs(10),
        "the last handshakes completing",
        || sample(&scrape(&tb, &d), "xwarpd_engine_half_open") == 0,
    );
    let m = scrape(&tb, &d);
    let held = sample(&m, "xwarpd_engine_connections");
    let grown = d.rss().saturating_sub(before);
    println!(
        "xwarpd idle flood: {} connections opened in {opened:?} ({reset_early} reset \
         before connect returned); held {held}; RSS +{} KiB ({} octets per connection held)",
        idle_flood::CONNECTIONS,
        grown >> 10,
        grown / held.max(1)
    );
    assert!(
        held as usize <= idle_flood::BACKLOG,
        "more connections held than the backlog:\n{m}"
    );
    assert!(held > 0, "no connection held:\n{m}");
    // Those past the backlog are reset at once.
    let refused = sample(&m, "xwarpd_engine_connections_refused_total");
    assert!(
        refused as usize >= idle_flood::CONNECTIONS - idle_flood::BACKLOG,
        "those past the backlog are reset:\n{m}"
    );
    assert_rss_below(
        grown,
        idle_flood::RSS_TOTAL,
        "the daemon's resident set growth",
    );
    assert_rss_below(
        grown / held,
        idle_flood::RSS_PER_CONN,
        "the daemon's resident set per idle connection",
    );
    // The MPA startup timeout (10 s by default) reaps the rest.
    wait_until(Duration::from_secs(60), "idle connections reaped", || {
        sample(&scrape(&tb, &d), "xwarpd_engine_connections") == 0
    });
    let m = scrape(&tb, &d);
    let ended = sample(&m, "xwarpd_engine_connections_refused_total")
        + sample(&m, "xwarpd_engine_connections_closed_total");
    assert!(
        ended >= idle_flood::CONNECTIONS as u64,
        "every idle connection was refused or reaped ({ended}):\n{m}"
    );
    assert_eq!(
        sample(&m, "xwarpd_store_connections_accepted_total"),
        0,
        "none reached the store:\n{m}"
    );
    socks.clear();
    let left = d.rss().saturating_sub(before);
    println!(
        "xwarpd idle flood: RSS +{} KiB once they are gone; test took {:?}",
        left >> 10,
        started.elapsed()
    );
    assert_rss_below(
        left,
        idle_flood::RSS_LEFT,
        "the daemon's resident set above the start",
    );
}
