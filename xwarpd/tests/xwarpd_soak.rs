//! The soak: `deploy/xwarp soak [MINUTES]` (CI: 3 minutes). xwarpd serves its store over the
//! xdp transport in namespace A with its engine injecting faults at the rates of [`FAULTS`]
//! (`XWARP_TEST_FAULTS`: loss, duplication, reordering, and one flipped bit of TCP payload with
//! the checksum left stale or mended past it, in both directions). From namespace B,
//! [`CLIENTS`] store clients (kernel transport, 198.18.0.2) write blocks of their own part of
//! the store, commit them, and read them back, checking every octet against what they last
//! wrote; a call that fails (a corrupted FPDU caught by the MPA CRC ends its connection)
//! reconnects and is done again. Every [`CYCLE`] a SYN flood (spoofed sources outside the
//! testbed's /24) and then an idle-connection flood come in bursts, bounded in count and time;
//! the idle connections come from 198.18.0.3, another address of B than the clients'.
//!
//! Every report interval it prints operations, octets verified, retransmissions, what the
//! injector did and what caught it, and xwarpd's resident memory. It fails on any mismatch, on
//! the daemon exiting or restarting, on a call that cannot be completed within
//! [`OP_LIMIT`], and on resident memory more than [`RSS_GROWTH`] above its level after the
//! first cycle (measured at the same quiet point of each cycle, before its floods).
//!
//! Ignored by `cargo test` (it runs for minutes); the minutes come from `XWARP_SOAK_MINUTES`.
//! Needs root and a debug build (the fault hook is compiled into debug builds only).

mod xwarpd_support;

use std::net::{SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use dataplane::{Access, Device, MemoryRegion, Transport};
use testbed::packet_socket::PacketSocket;
use testbed::{Side, VethTestbed};
use testkit::source_flood::FLOOD_SOURCE;
use testkit::syn_flood::{syn_frame, SpoofRng};
use testkit::{idle_flood, pattern};
use xwarpd::store::{ClientOptions, StoreClient};
use xwarpd_support::{flood_testbed, sample, scrape, temps, xdp_store_config, Daemon, BIN};

/// The engine's faults, per frame and direction: 0.2 % lost, 0.1 % duplicated, 1 % held
/// back behind the next frame, 0.1 % with a bit of TCP payload flipped (checksum stale), and
/// 1 in 100,000 flipped with the checksum mended (only the MPA CRC can catch it; it ends the
/// connection).
const FAULTS: &str = "seed=36,\
    rx_drop=0.002,tx_drop=0.002,rx_duplicate=0.001,tx_duplicate=0.001,\
    rx_reorder=0.01,tx_reorder=0.01,rx_corrupt=0.001,tx_corrupt=0.001,\
    rx_corrupt_past_checksum=0.00001,tx_corrupt_past_checksum=0.00001";
/// Store clients.
const CLIENTS: usize = 4;
/// Each client's part of the store: this many blocks of [`BLOCK`] octets.
const BLOCKS: u64 = 32;
/// The largest write or read (a block).
const BLOCK: usize = 256 << 10;
/// The flood cycle: a SYN burst at 20 s, an idle-connection burst at 40 s.
const CYCLE: Duration = Duration::from_secs(60);
/// A SYN burst: at most this many spoofed SYNs, for at most [`BURST`], 2 a millisecond.
const SYN_BURST: u64 = 20_000;
/// An idle burst: this many connections from [`FLOOD_SOURCE`], held for [`BURST`].
const IDLE_BURST: usize = 300;
/// How long a burst lasts at most.
const BURST: Duration = Duration::from_secs(10);
/// Most the daemon's resident memory may grow from the first cycle's end.
const RSS_GROWTH: u64 = 2 << 20;
/// Longest one call may take, reconnections and retries included.
const OP_LIMIT: Duration = Duration::from_secs(60);
const PORT: u16 = 20049;

/// What the clients and the floods did, summed.
#[derive(Default)]
struct Tally {
    ops: AtomicU64,
    verified: AtomicU64,
    reconnects: AtomicU64,
    mismatches: AtomicU64,
    /// The clients' devices (their CRC counts).
    devices: Mutex<Vec<Device>>,
    /// Spoofed SYNs sent.
    syns: AtomicU64,
    /// Idle connections each burst held.
    idle: Mutex<Vec<usize>>,
    /// What ended the soak early: why.
    failure: Mutex<Option<String>>,
}

impl Tally {
    fn fail(&self, why: String) {
        self.failure.lock().unwrap().get_or_insert(why);
    }
    fn failed(&self) -> bool {
        self.failure.lock().unwrap().is_some() || self.mismatches.load(Ordering::Relaxed) > 0
    }
    /// FPDUs the clients' MPA CRC (and framing checks) caught.
    fn client_crc(&self) -> u64 {
        let devices = self.devices.lock().unwrap();
        devices
            .iter()
            .map(|d| {
                let c = d.counters();
                c.crc_errors + c.framing_errors + c.marker_errors
            })
            .sum()
    }
}

/// One client's connection and its buffer.
struct Session {
    buf: MemoryRegion,
    c: StoreClient,
}

/// Connects (again) through `dev`, retrying until `deadline`.
fn session(dev: &Device, dst: SocketAddr, deadline: Instant) -> Result<Session, String> {
    let opts = ClientOptions {
        call_timeout: Duration::from_secs(10),
        ..ClientOptions::default()
    };
    loop {
        match StoreClient::connect_on(dev, dst, &opts) {
            Ok(c) => {
                let buf = c
                    .pd()
                    .register(BLOCK, Access::ALL)
                    .map_err(|e| e.to_string())?;
                return Ok(Session { buf, c });
            }
            Err(e) if Instant::now() >= deadline => return Err(format!("connect: {e}")),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// What a client last wrote and committed in a block: its pattern's seed and length.
type Written = Option<(u64, usize)>;

/// Client `i`: writes, commits and reads back its own blocks until `end`, the same plan every
/// run; a failed call reconnects and runs again (the same data, so a half-done write is
/// written whole).
fn client(i: usize, dst: SocketAddr, end: Instant, tally: &Tally) {
    let dev = Device::open(Transport::Kernel).expect("a kernel device");
    tally.devices.lock().unwrap().push(dev.clone());
    let mut rng = fastrand::Rng::with_seed(0x5eed + i as u64);
    let mut model: Vec<Written> = vec![None; BLOCKS as usize];
    let base = i as u64 * BLOCKS * BLOCK as u64;
    let mut s = match session(&dev, dst, Instant::now() + OP_LIMIT) {
        Ok(s) => s,
        Err(e) => return tally.fail(format!("client {i}: {e}")),
    };
    let mut next_seed = (i as u64 + 1) << 40;
    while Instant::now() < end && !tally.failed() {
        let block = rng.usize(..BLOCKS as usize);
        let off = base + block as u64 * BLOCK as u64;
        let read = model[block].is_some() && rng.bool();
        let (seed, len) = match model[block] {
            Some(w) if read => w,
            _ => {
                next_seed += 1;
                (next_seed, rng.usize(1..=BLOCK))
            }
        };
        let want = pattern(len, seed);
        let deadline = Instant::now() + OP_LIMIT;
        loop {
            let done = if read {
                s.c.read(off, &s.buf, 0..len).map(|r| r.len as usize == len)
            } else {
                s.buf.write(0, &want).expect("the buffer takes the block");
                s.c.write(off, &s.buf, 0..len)
                    .and_then(|_| s.c.commit(off, len as u32))
                    .map(|_| true)
            };
            match done {
                Ok(true) => break,
                Ok(false) => {
                    return tally.fail(format!("client {i}: short READ of block {block}"));
                }
                Err(_) if Instant::now() < deadline => {
                    tally.reconnects.fetch_add(1, Ordering::Relaxed);
                    drop(s);
                    s = match session(&dev, dst, deadline) {
                        Ok(s) => s,
                        Err(e) => return tally.fail(format!("client {i}: {e}")),
                    };
                }
                Err(e) => {
                    return tally.fail(format!("client {i}: block {block} not done in time: {e}"))
                }
            }
        }
        if read {
            let got = s.buf.read_vec(0, len).expect("the buffer reads");
            if got != want {
                let at = got.iter().zip(&want).position(|(a, b)| a != b);
                tally.mismatches.fetch_add(1, Ordering::Relaxed);
                tally.fail(format!(
                    "client {i}: block {block} ({len} octets at {off}) read back differs, first at {at:?}"
                ));
            }
            tally.verified.fetch_add(len as u64, Ordering::Relaxed);
        } else {
            model[block] = Some((seed, len));
        }
        tally.ops.fetch_add(1, Ordering::Relaxed);
    }
}

/// A burst of spoofed SYNs from a packet socket in B: [`SYN_BURST`] at most, within [`BURST`],
/// about two a millisecond. Returns how many were sent.
fn syn_burst(tb: &VethTestbed, dst: SocketAddrV4, rng: &mut SpoofRng) -> u64 {
    let _ns = tb.enter(Side::B).unwrap();
    let sock = PacketSocket::open(tb.ifname(Side::B)).expect("AF_PACKET socket in B");
    let macs = (tb.mac(Side::B).unwrap(), tb.mac(Side::A).unwrap());
    let end = Instant::now() + BURST;
    let mut sent = 0;
    while sent < SYN_BURST && Instant::now() < end {
        for _ in 0..2 {
            let f = syn_frame(macs, rng.spoofed(), dst, rng.next_u64() as u32);
            sent += u64::from(sock.send(&f).is_ok());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    sent
}

/// A burst of idle connections from [`FLOOD_SOURCE`]: opened, held for [`BURST`], closed.
/// Returns how many connected.
fn idle_burst(tb: &VethTestbed, dst: SocketAddrV4) -> usize {
    let _ns = tb.enter(Side::B).unwrap();
    let t0 = Instant::now();
    let (held, _) = idle_flood::open_from(FLOOD_SOURCE, dst, IDLE_BURST, Duration::from_secs(2));
    std::thread::sleep(BURST.saturating_sub(t0.elapsed()));
    held.len()
}

/// The kernel's TCP checksum errors in B (`TcpInCsumErrors`, /proc/net/snmp): the frames the
/// engine sent with a stale checksum that B's kernel dropped.
fn b_checksum_errors(tb: &VethTestbed) -> u64 {
    let out = tb.exec(Side::B, &["cat", "/proc/net/snmp"]).unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut tcp = text.lines().filter(|l| l.starts_with("Tcp:"));
    let (names, values) = (tcp.next().unwrap_or(""), tcp.next().unwrap_or(""));
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "InCsumErrors")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

/// One look at the daemon: its metrics and resident memory.
struct Look {
    m: String,
    rss: u64,
}

impl Look {
    /// The look, or why there is none: the daemon exited.
    fn take(tb: &VethTestbed, d: &mut Daemon) -> Result<Look, String> {
        if !d.is_running() {
            return Err(format!("xwarpd exited during the soak:\n{}", d.log()));
        }
        Ok(Look {
            m: scrape(tb, d),
            rss: d.rss(),
        })
    }
    fn get(&self, name: &str) -> u64 {
        sample(&self.m, name)
    }
    fn fault(&self, kind: &str, dir: &str) -> u64 {
        let head =
            format!("xwarpd_engine_faults_injected_total{{kind=\"{kind}\",direction=\"{dir}\"}} ");
        self.m
            .lines()
            .find_map(|l| l.strip_prefix(&head)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {head} in:\n{}", self.m))
    }
}

#[test]
#[ignore = "minutes long: deploy/xwarp soak [MINUTES]"]
fn soak_store_over_xdp_with_faults_and_floods() {
    let minutes: u64 = std::env::var("XWARP_SOAK_MINUTES")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(60);
    let Some(tb) = flood_testbed("soak") else {
        return;
    };
    testkit::syn_flood::raise_nofile(4096);
    let [conf, store, ctl] = temps("soak");
    let text = xdp_store_config(&tb, &ctl, &store, PORT, "synack_retries = 2");
    std::fs::write(conf.path(), text).unwrap();
    let mut cmd = tb.command(Side::A, BIN);
    cmd.args(["--config", conf.as_str()])
        .env("XWARP_TEST_FAULTS", FAULTS);
    let mut d = Daemon::spawn(cmd);
    let first = Look::take(&tb, &mut d).unwrap();
    assert!(
        first.m.contains("xwarpd_engine_faults_injected_total"),
        "xwarpd injects no faults: XWARP_TEST_FAULTS needs a debug build\n{}",
        first.m
    );
    let dst = SocketAddrV4::new(tb.ip(Side::A), PORT);
    let started = Instant::now();
    let end = started + Duration::from_secs(minutes * 60);
    let every = if minutes <= 10 {
        Duration::from_secs(10)
    } else {
        Duration::from_secs(60)
    };
    let tally = Tally::default();
    let flooding = AtomicBool::new(true);
    let csum_b0 = b_checksum_errors(&tb);
    println!("soak: {minutes} min; faults {FAULTS}; {CLIENTS} clients; floods every {CYCLE:?}");

    let (baseline, mut compared, mut worst) = std::thread::scope(|s| {
        for i in 0..CLIENTS {
            let (tb, tally) = (&tb, &tally);
            s.spawn(move || {
                let _ns = tb.enter(Side::B).unwrap();
                client(i, SocketAddr::V4(dst), end, tally);
            });
        }
        // The floods, cycle after cycle, while the clients run.
        let floods = s.spawn(|| {
            let mut rng = SpoofRng::new();
            let mut cycle = started;
            while flooding.load(Ordering::Relaxed) {
                let at = |secs| cycle + Duration::from_secs(secs);
                for (when, syn) in [(at(20), true), (at(40), false)] {
                    while Instant::now() < when && flooding.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    if !flooding.load(Ordering::Relaxed) {
                        break;
                    }
                    if syn {
                        let n = syn_burst(&tb, dst, &mut rng);
                        tally.syns.fetch_add(n, Ordering::Relaxed);
                    } else {
                        let n = idle_burst(&tb, dst);
                        tally.idle.lock().unwrap().push(n);
                    }
                }
                cycle += CYCLE;
            }
        });
        // Reports, and the resident set at each cycle's quiet start.
        // The first cycle's end sets the baseline; each later cycle's end is compared to it.
        let (mut baseline, mut compared, mut worst) = (None, 0u32, 0u64);
        let (mut next_report, mut next_cycle) = (started + every, started + CYCLE);
        let mut last_uptime = 0;
        while Instant::now() < end && !tally.failed() {
            std::thread::sleep(Duration::from_millis(200));
            let now = Instant::now();
            if now >= next_cycle {
                let rss = d.rss();
                match baseline {
                    None => baseline = Some(rss),
                    Some(b) => {
                        worst = worst.max(rss.saturating_sub(b));
                        compared += 1;
                    }
                }
                next_cycle += CYCLE;
            }
            if now >= next_report {
                let l = match Look::take(&tb, &mut d) {
                    Ok(l) => l,
                    Err(e) => {
                        tally.fail(e);
                        break;
                    }
                };
                let up = l.get("xwarpd_uptime_seconds");
                if up < last_uptime {
                    tally.fail(format!(
                        "xwarpd restarted (uptime {up} s after {last_uptime} s)"
                    ));
                }
                last_uptime = up;
                report(
                    &l,
                    &tally,
                    b_checksum_errors(&tb) - csum_b0,
                    started.elapsed(),
                );
                next_report += every;
            }
        }
        flooding.store(false, Ordering::Relaxed);
        floods.join().expect("the floods");
        (baseline, compared, worst)
    });
    // The run ends on a cycle's end too: one more comparison.
    if let Some(b) = baseline.filter(|_| !tally.failed()) {
        worst = worst.max(d.rss().saturating_sub(b));
        compared += 1;
    }
    let failure = tally.failure.lock().unwrap().clone();
    assert_eq!(failure, None, "the soak failed");
    let l = Look::take(&tb, &mut d).unwrap();
    let b_csum = b_checksum_errors(&tb) - csum_b0;
    report(&l, &tally, b_csum, started.elapsed());
    assert_eq!(tally.mismatches.load(Ordering::Relaxed), 0);
    let f = |kind, dir| l.fault(kind, dir);
    let engine_csum = l.get("xwarpd_engine_malformed_total");
    let engine_crc = l.get("xwarpd_engine_crc_errors_total");
    let client_crc = tally.client_crc();
    let (syns, idle) = (
        tally.syns.load(Ordering::Relaxed),
        tally.idle.lock().unwrap().clone(),
    );
    // Every corrupted frame is caught. Received with a stale checksum: the engine drops each
    // (nothing else sends it malformed frames; a corrupted frame the injector also duplicated
    // is dropped twice). Sent so: B's kernel drops them (the same, or fewer when a frame was
    // lost on the way). Mended: the MPA CRC (fewer when a connection had already ended, or TCP
    // had the bytes already); the octets read back prove none got through.
    let rx_corrupt = f("corrupt", "rx");
    assert!(
        (rx_corrupt..=rx_corrupt + f("duplicate", "rx")).contains(&engine_csum),
        "engine checksum drops {engine_csum} for {rx_corrupt} corrupted"
    );
    assert!(
        b_csum <= f("corrupt", "tx") + f("duplicate", "tx"),
        "B's checksum drops {b_csum}"
    );
    assert!(engine_crc <= f("corrupt_past_checksum", "rx"));
    assert!(client_crc <= f("corrupt_past_checksum", "tx"));
    assert!(
        f("corrupt", "rx") > 0 && f("corrupt", "tx") > 0 && f("drop", "rx") > 0,
        "the faults were injected"
    );
    assert!(
        syns > 0 && !idle.is_empty() && idle.iter().all(|&n| n > 0),
        "the floods ran"
    );
    assert!(
        worst <= RSS_GROWTH,
        "xwarpd's resident memory grew by {worst} octets after the first cycle (bound {RSS_GROWTH})"
    );
    // A clean stop.
    d.signal(libc::SIGTERM);
    let (status, _, log) = d.wait(Duration::from_secs(30));
    assert!(status.success(), "{status:?}\n{log}");
    println!(
        "soak PASSED: {minutes} min, {} ops, {} MiB verified, 0 mismatches, 0 restarts; \
         {} retransmissions; corrupted frames caught: {engine_csum} + {b_csum} by checksum \
         (engine, B's kernel), {engine_crc} + {client_crc} by the MPA CRC (engine, clients), \
         {} reconnections; floods: {syns} SYNs, {} idle connections from {FLOOD_SOURCE} in {} \
         bursts; \
         RSS {} MiB, +{} KiB at most over {compared} cycles after the first{} (bound {} KiB)",
        tally.ops.load(Ordering::Relaxed),
        tally.verified.load(Ordering::Relaxed) >> 20,
        l.get("xwarpd_engine_retransmissions_total"),
        tally.reconnects.load(Ordering::Relaxed),
        idle.iter().sum::<usize>(),
        idle.len(),
        l.rss >> 20,
        worst >> 10,
        if compared == 0 {
            " (no cycle after the first: not measured)"
        } else {
            ""
        },
        RSS_GROWTH >> 10,
    );
}

/// One report line (`b_csum`: B's kernel's checksum drops so far).
fn report(l: &Look, t: &Tally, b_csum: u64, at: Duration) {
    let f = |kind, dir| l.fault(kind, dir);
    println!(
        "soak {:>5}s ops {:>7} verified {:>6} MiB mismatches {} reconnects {:>4} \
         retransmits {:>6} | injected rx/tx: drop {}/{} corrupt {}/{} past-checksum {}/{} | \
         caught rx/tx: checksum {}/{} crc {}/{} | floods: {} SYNs, {} idle | rss {:.1} MiB",
        at.as_secs(),
        t.ops.load(Ordering::Relaxed),
        t.verified.load(Ordering::Relaxed) >> 20,
        t.mismatches.load(Ordering::Relaxed),
        t.reconnects.load(Ordering::Relaxed),
        l.get("xwarpd_engine_retransmissions_total"),
        f("drop", "rx"),
        f("drop", "tx"),
        f("corrupt", "rx"),
        f("corrupt", "tx"),
        f("corrupt_past_checksum", "rx"),
        f("corrupt_past_checksum", "tx"),
        l.get("xwarpd_engine_malformed_total"),
        b_csum,
        l.get("xwarpd_engine_crc_errors_total"),
        t.client_crc(),
        t.syns.load(Ordering::Relaxed),
        t.idle.lock().unwrap().iter().sum::<usize>(),
        l.rss as f64 / (1 << 20) as f64,
    );
}
