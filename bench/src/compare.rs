//! `compare`: runs raw, xdp and kernel on a fresh two-namespace testbed, the server in one
//! namespace and the client in the other (each a child `xwarp-bench`), and Linux TCP itself
//! (sockperf, iperf3: [`crate::linux`]) with the same pinning, and prints one table with the
//! ratios xdp/raw, xdp/kernel and xdp/linux. A planned cell that could not be measured makes
//! the run fail (after the table and the JSON are written).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cli::{CompareArgs, TestKind, DEFAULT_PORT};
use crate::report::{self, Record, RULE};
use crate::testbed::{Testbed, ADDR_A};

/// One row of the compare JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompareRecord {
    /// The test as compare names it (`write_lat`, ...).
    pub test: String,
    /// `raw`, `xdp`, `kernel` or `linux`, or a cell beside the table (`xdp-1q`, `linux-poll`,
    /// ...).
    pub transport: String,
    /// Message size.
    pub bytes: u64,
    /// Median latency (latency tests).
    pub t_typical_us: Option<f64>,
    /// 99th percentile (latency tests).
    pub p99_us: Option<f64>,
    /// Average bandwidth (bandwidth tests).
    pub bw_gbps: Option<f64>,
    /// Message rate (bandwidth tests).
    pub msg_rate_mpps: Option<f64>,
    /// The spread of the rounds: the smallest and largest t_typical (latency tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_typical_range_us: Option<[f64; 2]>,
    /// The spread of the rounds: the smallest and largest bandwidth (bandwidth tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bw_range_gbps: Option<[f64; 2]>,
    /// What the run that measured this ran on (its parameter block; the first round's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ran: Option<crate::report::Params>,
    /// The client's CPU time per GB (the ONC RPC over TCP cells).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_s_per_gb: Option<f64>,
    /// Octets the TCP RDMA option placed without a copy (the ONC RPC over TCP cells).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copies_avoided: Option<u64>,
    /// The testbed's MTU when this was measured (compare runs the plan at each MTU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
}

impl CompareRecord {
    fn from_record(test: TestKind, transport: &str, r: Option<&Record>, bytes: u64) -> Self {
        // The storage tests' records have call latencies too; compare shows their bandwidth.
        let lat = r.filter(|_| test.is_latency());
        Self {
            test: test.name().into(),
            transport: transport.into(),
            bytes,
            t_typical_us: lat.and_then(|r| r.t_typical_us),
            p99_us: lat.and_then(|r| r.p99_us),
            bw_gbps: r.and_then(|r| r.bw_gbps),
            msg_rate_mpps: r.and_then(|r| r.msg_rate_mpps),
            t_typical_range_us: None,
            bw_range_gbps: None,
            ran: r.and_then(|r| r.params.clone()),
            cpu_s_per_gb: r.and_then(|r| r.cpu_s_per_gb),
            copies_avoided: r.and_then(|r| r.copies_avoided),
            mtu: None,
        }
    }
}

/// What compare measures: test, size, and the figure the table compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// t_typical, lower is better.
    Typical,
    /// average Gb/s.
    Bandwidth,
    /// Mpps.
    Rate,
}

/// The plan of `compare`: (test, bytes, metric, iterations full, iterations short).
pub const PLAN: [(TestKind, u64, Metric, u64, u64); 5] = [
    (TestKind::WriteLat, 64, Metric::Typical, 3000, 200),
    (TestKind::SendLat, 64, Metric::Typical, 3000, 200),
    (TestKind::WriteBw, 65_536, Metric::Bandwidth, 5000, 300),
    (TestKind::SendBw, 64, Metric::Rate, 100_000, 3000),
    (TestKind::RpcRead, 1 << 20, Metric::Bandwidth, 500, 30),
];

/// The transports, in table order (`linux`: Linux TCP with sockperf and iperf3).
pub const TRANSPORTS: [&str; 4] = ["raw", "xdp", "kernel", "linux"];

/// The raw AF_XDP test standing in for `test`.
pub fn raw_test(test: TestKind) -> TestKind {
    if test.is_latency() {
        TestKind::RawLat
    } else {
        TestKind::RawBw
    }
}

impl Metric {
    /// The figure of a record.
    pub fn of(self, r: &CompareRecord) -> Option<f64> {
        match self {
            Self::Typical => r.t_typical_us,
            Self::Bandwidth => r.bw_gbps,
            Self::Rate => r.msg_rate_mpps,
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Self::Typical => "t_typical[usec]",
            Self::Bandwidth => "BW[Gb/sec]",
            Self::Rate => "MsgRate[Mpps]",
        }
    }
}

/// `a / b` when both are there and b is not zero.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// What the MPA transports run with, for the table's head and the JSON.
fn mpa_setting(markers: bool) -> &'static str {
    if markers {
        "markers and CRC32c on, both directions"
    } else {
        "markers off (--no-markers), CRC32c on"
    }
}

/// Runs compare: the whole plan at each MTU of `--mtu` (default 1500 and 9000), a table each.
pub fn run(args: &CompareArgs) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find own binary: {e}"))?;
    let first = args.mtu.first().copied().unwrap_or(1500);
    // Two queues a side: the queue cells run two engines at each end (the rest serve queue 0).
    let tb = Testbed::up_with_queues(first, 2)?;
    let tmp = std::env::temp_dir().join(format!("xwarp-bench-compare-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
    let rounds = args.rounds.unwrap_or(if args.short { 1 } else { 3 });
    let pin = pinning(args);
    eprintln!(
        "xwarp-bench compare: testbed {} (namespaces {} / {}), server {}, MTU {}; {rounds} \
         round(s), {}",
        tb.name,
        tb.ns_a,
        tb.ns_b,
        ADDR_A,
        args.mtu
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(" then "),
        if pin {
            "server pinned to CPU 0, client to CPU 1 (every transport)"
        } else {
            "not pinned"
        }
    );
    let mpa = mpa_setting(!args.no_markers);
    println!("MPA (xdp, kernel): {mpa}");
    println!("Build: {}", crate::compare_report::build_kind());
    let host_before = crate::host_load::HostLoad::sample(Duration::from_secs(1));
    if let Some(h) = &host_before {
        println!("Host: {}", h.summary());
        if let Some(w) = h.warning() {
            eprintln!("xwarp-bench compare: warning: {w}");
        }
    }
    let mut all: Vec<CompareRecord> = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    let mut port = DEFAULT_PORT;
    let mut host_during = Vec::new();
    for &mtu in &args.mtu {
        tb.set_mtu(mtu)?;
        let window = crate::host_load::Window::start();
        let plan = Plan {
            tb: &tb,
            exe: &exe,
            tmp: &tmp,
            rounds,
            pin,
            short: args.short,
            mtu,
            markers: !args.no_markers,
        };
        let (mut records, notes) = plan.run(&mut port);
        let tcp = crate::compare_tcp::medians(&records);
        let queues = crate::compare_queues::medians(&records);
        let polling = crate::compare_polling::medians(&records);
        records = medians(&records);
        // A run that failed in one round but was measured in another is not an n/a.
        let notes: Vec<String> = notes
            .into_iter()
            .filter(|n| {
                !records.iter().any(|r| {
                    n.starts_with(&format!("{} {}:", r.transport, r.test))
                        && (r.t_typical_us.is_some() || r.bw_gbps.is_some())
                })
            })
            .collect();
        println!("MTU {mtu}");
        print!("{}", table(&records, &notes));
        let rdma = records
            .iter()
            .find(|r| r.test == "rpc_read" && r.transport == "xdp")
            .and_then(|r| r.bw_gbps);
        println!("\n{}", crate::compare_tcp::table(&tcp, rdma));
        println!("{}", crate::compare_queues::table(&queues));
        println!("{}", crate::compare_polling::table(&polling, &records));
        missing.extend(
            missing_cells(&records)
                .into_iter()
                .chain(missing_cells(&queues))
                .chain(missing_cells(&polling))
                .map(|c| format!("{c} (MTU {mtu})")),
        );
        records.extend(tcp);
        records.extend(queues);
        records.extend(polling);
        all.extend(records.into_iter().map(|r| CompareRecord {
            mtu: Some(mtu),
            ..r
        }));
        if let Some(h) = window.end(Some(mtu)) {
            println!(" Host: {}\n", h.summary());
            host_during.push(h);
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    if let Some(path) = &args.json {
        let report = crate::compare_report::CompareReport {
            environment: crate::compare_report::Environment {
                mpa: mpa.into(),
                host_before,
                host_during,
                ..crate::compare_report::Environment::here(&args.mtu, pin, rounds, args.short)
            },
            records: all,
        };
        report::write_json(path, &report)?;
    }
    if !missing.is_empty() {
        return Err(format!("not measured: {}", missing.join(", ")));
    }
    Ok(())
}

/// One MTU's runs of the plan.
struct Plan<'a> {
    tb: &'a Testbed,
    exe: &'a Path,
    tmp: &'a Path,
    rounds: u32,
    pin: bool,
    short: bool,
    mtu: u32,
    /// Both ends of the MPA transports ask for markers (`--markers`).
    markers: bool,
}

/// The arguments both ends of a run over the plan's `transport` column get for MPA:
/// `--markers` for the two transports that speak MPA (xdp, kernel; the xdp queue cells too)
/// when `markers`, nothing for raw frames or Linux TCP. (The ONC RPC over TCP cells have no
/// MPA and get none.)
fn mpa_args(transport: &str, markers: bool) -> &'static [&'static str] {
    if markers && matches!(transport, "xdp" | "kernel") {
        &["--markers"]
    } else {
        &[]
    }
}

impl Plan<'_> {
    /// Every round of the plan: the records of the runs that measured something, and a note
    /// for each that did not. `port` moves on by one per run.
    fn run(&self, port: &mut u16) -> (Vec<CompareRecord>, Vec<String>) {
        let (tb, exe, rounds, pin) = (self.tb, self.exe, self.rounds, self.pin);
        let mut runs: Vec<CompareRecord> = Vec::new();
        let mut notes: Vec<String> = Vec::new();
        // Whole rounds, one after the other, so load that comes and goes hits every column
        // alike.
        for round in 1..=rounds {
            for (test, bytes, _, full, short) in PLAN {
                let iters = if self.short { short } else { full };
                for transport in TRANSPORTS {
                    let (run_test, t) = match transport {
                        "raw" => (raw_test(test), "xdp"),
                        other => (test, other),
                    };
                    self.announce(round, test, bytes, transport);
                    let json = self.tmp.join(format!("{}-{transport}.json", test.name()));
                    let r = if transport == "linux" {
                        crate::linux::run(
                            tb,
                            test,
                            bytes,
                            crate::linux::seconds(self.short),
                            *port,
                            pin,
                            crate::linux::Sockets::Blocking,
                        )
                    } else {
                        let extra = mpa_args(transport, self.markers);
                        run_pair(tb, exe, run_test, t, bytes, iters, *port, &json, pin, extra).map(
                            |rec| CompareRecord::from_record(test, transport, Some(&rec), bytes),
                        )
                    };
                    *port += 1;
                    keep(
                        r,
                        &format!("{transport} {}", test.name()),
                        &mut runs,
                        &mut notes,
                    );
                }
                if test.is_latency() {
                    self.polling_cell(round, test, bytes, port, &mut runs, &mut notes);
                }
                if test == TestKind::WriteBw {
                    self.queue_cells(round, iters, port, &mut runs, &mut notes);
                }
                if test != TestKind::RpcRead {
                    continue;
                }
                // rpc_read over ONC RPC on xwarp's TCP (xdp), the TCP RDMA option off and on.
                for (name, option) in crate::compare_tcp::TCP_CELLS {
                    let extra = crate::compare_tcp::cell_args(option);
                    let cell = XdpCell {
                        name,
                        test,
                        bytes,
                        iters,
                        pin,
                        extra: &extra,
                    };
                    self.xdp_cell(round, &cell, port, &mut runs, &mut notes);
                }
            }
        }
        (runs, notes)
    }
}

/// A cell beside the plan's table: `test` over the xdp transport with `extra` arguments at
/// both ends, recorded as transport `name`.
struct XdpCell<'a> {
    name: &'a str,
    test: TestKind,
    bytes: u64,
    iters: u64,
    pin: bool,
    extra: &'a [&'a str],
}

impl Plan<'_> {
    /// Says on stderr which run starts, with the load average.
    fn announce(&self, round: u32, test: TestKind, bytes: u64, cell: &str) {
        eprintln!(
            "xwarp-bench compare: MTU {} round {round}/{}: {} {bytes} B over {cell} (load \
             average {})",
            self.mtu,
            self.rounds,
            test.name(),
            crate::host_load::load_average()
        );
    }

    /// One round of a polling cell ([`crate::compare_polling`]): latency test `test` over
    /// Linux TCP with sockperf's sockets non-blocking.
    fn polling_cell(
        &self,
        round: u32,
        test: TestKind,
        bytes: u64,
        port: &mut u16,
        runs: &mut Vec<CompareRecord>,
        notes: &mut Vec<String>,
    ) {
        let name = crate::compare_polling::TRANSPORT;
        self.announce(round, test, bytes, name);
        let r = crate::linux::run(
            self.tb,
            test,
            bytes,
            crate::linux::seconds(self.short),
            *port,
            self.pin,
            crate::linux::Sockets::NonBlocking,
        );
        *port += 1;
        keep(r, &format!("{name} {}", test.name()), runs, notes);
    }

    /// One round of the queue cells ([`crate::compare_queues`]): write_bw over one queue and
    /// over two, neither side pinned.
    fn queue_cells(
        &self,
        round: u32,
        iters: u64,
        port: &mut u16,
        runs: &mut Vec<CompareRecord>,
        notes: &mut Vec<String>,
    ) {
        for (name, qps) in crate::compare_queues::QUEUE_CELLS {
            let extra = crate::compare_queues::cell_args(qps);
            let extra: Vec<&str> = extra
                .iter()
                .map(String::as_str)
                .chain(mpa_args("xdp", self.markers).iter().copied())
                .collect();
            let cell = XdpCell {
                name,
                test: TestKind::WriteBw,
                bytes: crate::compare_queues::BYTES,
                iters,
                pin: false,
                extra: &extra,
            };
            self.xdp_cell(round, &cell, port, runs, notes);
        }
    }

    /// Runs `cell` once: its record into `runs`, or why not into `notes`. `port` moves on.
    fn xdp_cell(
        &self,
        round: u32,
        cell: &XdpCell<'_>,
        port: &mut u16,
        runs: &mut Vec<CompareRecord>,
        notes: &mut Vec<String>,
    ) {
        let XdpCell {
            name,
            test,
            bytes,
            iters,
            pin,
            extra,
        } = *cell;
        self.announce(round, test, bytes, name);
        let json = self.tmp.join(format!("{}-{name}.json", test.name()));
        let r = run_pair(
            self.tb, self.exe, test, "xdp", bytes, iters, *port, &json, pin, extra,
        )
        .map(|rec| CompareRecord::from_record(test, name, Some(&rec), bytes));
        *port += 1;
        keep(r, &format!("{name} {}", test.name()), runs, notes);
    }
}

/// A run's record into `runs`, or, when it measured nothing, a note `CELL: why` into `notes`
/// (`cell` is `transport test`).
fn keep(
    r: Result<CompareRecord, String>,
    cell: &str,
    runs: &mut Vec<CompareRecord>,
    notes: &mut Vec<String>,
) {
    match r {
        Ok(rec) => runs.push(rec),
        Err(e) => {
            let note = format!("{cell}: {e}");
            eprintln!("xwarp-bench compare: n/a: {note}");
            notes.push(note);
        }
    }
}

/// The planned cells (`transport test`) that no round measured: those of the table, and those
/// beside it (queue and polling cells), whose test and size are the plan's and whose figure is
/// the plan's metric for them.
pub fn missing_cells(records: &[CompareRecord]) -> Vec<String> {
    records
        .iter()
        .filter(|r| {
            let metric = PLAN
                .iter()
                .find(|p| p.0.name() == r.test && p.1 == r.bytes)
                .map(|p| p.2);
            metric.is_some_and(|m| m.of(r).is_none())
        })
        .map(|r| format!("{} {}", r.transport, r.test))
        .collect()
}

/// A figure of a record.
pub(crate) type Field = fn(&CompareRecord) -> Option<f64>;

/// The values of figure `f` over `runs` that have it, in ascending order.
pub(crate) fn sorted(runs: &[&CompareRecord], f: Field) -> Vec<f64> {
    let mut v: Vec<f64> = runs.iter().filter_map(|r| f(r)).collect();
    v.sort_by(f64::total_cmp);
    v
}

/// The median of ascending `v` (the upper one of an even count).
pub(crate) fn median(v: &[f64]) -> Option<f64> {
    v.get(v.len() / 2).copied()
}

/// One record per (test, transport) of the plan, each figure the median over the rounds that
/// measured it (the upper median of an even count); all null where no round did.
pub fn medians(runs: &[CompareRecord]) -> Vec<CompareRecord> {
    PLAN.iter()
        .flat_map(|p| TRANSPORTS.map(|t| median_record(runs, p.0.name(), t, p.1)))
        .collect()
}

/// The cell (`test`, `transport`, `bytes`) over the rounds of `runs` that measured it: each
/// figure the median (the upper one of an even count), the spreads, the first parameter block;
/// all null where no round did. The table and the cells beside it share it.
pub(crate) fn median_record(
    runs: &[CompareRecord],
    test: &str,
    transport: &str,
    bytes: u64,
) -> CompareRecord {
    let these: Vec<&CompareRecord> = runs
        .iter()
        .filter(|r| r.test == test && r.transport == transport && r.bytes == bytes)
        .collect();
    let med = |f: Field| median(&sorted(&these, f));
    let range = |f: Field| {
        let v = sorted(&these, f);
        Some([*v.first()?, *v.last()?])
    };
    CompareRecord {
        test: test.into(),
        transport: transport.into(),
        bytes,
        t_typical_us: med(|r| r.t_typical_us),
        p99_us: med(|r| r.p99_us),
        bw_gbps: med(|r| r.bw_gbps),
        msg_rate_mpps: med(|r| r.msg_rate_mpps),
        t_typical_range_us: range(|r| r.t_typical_us),
        bw_range_gbps: range(|r| r.bw_gbps),
        ran: these.iter().find_map(|r| r.ran.clone()),
        ..CompareRecord::default()
    }
}

/// The record of cell (`test`, `transport`, `bytes`) among `records`, if there is one.
pub(crate) fn cell<'a>(
    records: &'a [CompareRecord],
    test: &str,
    transport: &str,
    bytes: u64,
) -> Option<&'a CompareRecord> {
    records
        .iter()
        .find(|r| r.test == test && r.transport == transport && r.bytes == bytes)
}

/// A figure for compare's tables with `prec` decimals, or `n/a`.
pub(crate) fn figure(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "n/a".into(), |v| format!("{v:.prec$}"))
}

/// The compare table, with the reasons of every n/a below it.
pub fn table(records: &[CompareRecord], notes: &[String]) -> String {
    let mut out = String::new();
    out.push_str(RULE);
    out.push('\n');
    out.push_str(&format!(
        " {:<10}{:>9}  {:<16}{:>10}{:>10}{:>10}{:>10}{:>10}{:>12}{:>11}\n",
        "test",
        "#bytes",
        "metric",
        "raw",
        "xdp",
        "kernel",
        "linux",
        "xdp/raw",
        "xdp/kernel",
        "xdp/linux"
    ));
    for (test, bytes, metric, _, _) in PLAN {
        let get = |t: &str| cell(records, test.name(), t, bytes).and_then(|r| metric.of(r));
        let (raw, xdp, kernel, linux) = (get("raw"), get("xdp"), get("kernel"), get("linux"));
        out.push_str(&format!(
            " {:<10}{:>9}  {:<16}{:>10}{:>10}{:>10}{:>10}{:>10}{:>12}{:>11}\n",
            test.name(),
            bytes,
            metric.unit(),
            figure(raw, 3),
            figure(xdp, 3),
            figure(kernel, 3),
            figure(linux, 3),
            figure(ratio(xdp, raw), 2),
            figure(ratio(xdp, kernel), 2),
            figure(ratio(xdp, linux), 2),
        ));
    }
    out.push_str(RULE);
    out.push('\n');
    for n in dedup_notes(notes) {
        out.push_str(&format!(" n/a: {n}\n"));
    }
    out
}

fn dedup_notes(notes: &[String]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for n in notes {
        if !v.contains(n) {
            v.push(n.clone());
        }
    }
    v
}

/// The last non-empty line of a child's stderr, without our prefix.
fn last_line(s: &str) -> String {
    s.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("exited without a message")
        .trim_start_matches("xwarp-bench: ")
        .trim_start_matches("error: ")
        .to_string()
}

struct Server {
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Server {
    /// Waits up to `timeout` for the child to exit.
    fn wait(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Some(st);
            }
            if std::time::Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn stderr(&mut self) -> String {
        let mut s = String::new();
        if let Some(e) = self.child.stderr.as_mut() {
            let _ = e.read_to_string(&mut s);
        }
        s
    }
}

/// `--interface IF` for what binds AF_XDP to the testbed's veth end (the raw tests and the xdp
/// transport), nothing for the kernel transport.
fn iface_args(test: TestKind, transport: &str, ifname: &str) -> Vec<String> {
    if matches!(test, TestKind::RawLat | TestKind::RawBw) || transport == "xdp" {
        vec!["--interface".into(), ifname.into()]
    } else {
        Vec::new()
    }
}

/// The command running `exe` on one side: in its namespace, pinned to its own core when `pin`
/// (the server to CPU 0, the client to CPU 1, with `taskset`).
pub(crate) fn side_command(
    tb: &Testbed,
    in_a: bool,
    exe: &Path,
    pin: bool,
) -> std::process::Command {
    if !pin {
        return tb.exec(in_a, exe);
    }
    let mut c = tb.exec(in_a, Path::new("taskset"));
    c.args(["-c", if in_a { "0" } else { "1" }]).arg(exe);
    c
}

/// Whether compare pins its two sides: `--no-pin` not given and at least two CPUs.
fn pinning(args: &CompareArgs) -> bool {
    !args.no_pin && std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2)
}

/// Runs one test: server in namespace a, client in namespace b; returns the client's record.
#[allow(clippy::too_many_arguments)]
pub fn run_pair(
    tb: &Testbed,
    exe: &Path,
    test: TestKind,
    transport: &str,
    bytes: u64,
    iters: u64,
    port: u16,
    json: &PathBuf,
    pin: bool,
    extra: &[&str],
) -> Result<Record, String> {
    let port_s = port.to_string();
    let mut server = Server {
        child: side_command(tb, true, exe, pin)
            .args([test.name(), "--transport", transport, "--port", &port_s])
            .args(iface_args(test, transport, &tb.if_a))
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start the server: {e}"))?,
    };
    // Wait for "listening" (or the server's exit).
    let stdout = server.child.stdout.take();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let Some(out) = stdout else { return };
        let mut lines = BufReader::new(out).lines();
        let ready = lines
            .next()
            .and_then(|l| l.ok())
            .is_some_and(|l| l.contains("listening"));
        let _ = tx.send(ready);
        for _ in lines {}
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(true) => {}
        _ => {
            let _ = server.wait(Duration::from_secs(2));
            return Err(last_line(&server.stderr()));
        }
    }
    let out = side_command(tb, false, exe, pin)
        .args([
            test.name(),
            ADDR_A,
            "--transport",
            transport,
            "--port",
            &port_s,
            "-s",
            &bytes.to_string(),
            "-n",
            &iters.to_string(),
            "--json",
        ])
        .arg(json)
        .args(iface_args(test, transport, &tb.if_b))
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot start the client: {e}"))?;
    if !out.status.success() {
        return Err(last_line(&String::from_utf8_lossy(&out.stderr)));
    }
    if server.wait(Duration::from_secs(10)).is_none() {
        eprintln!("xwarp-bench compare: the server did not exit after the run; stopping it");
    }
    let text = std::fs::read_to_string(json).map_err(|e| format!("no client JSON: {e}"))?;
    let mut rows: Vec<Record> =
        serde_json::from_str(&text).map_err(|e| format!("bad client JSON: {e}"))?;
    rows.pop().ok_or_else(|| "empty client JSON".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The performance targets are set with markers and CRC on: by default both ends of every MPA
    /// run ask for markers, and nothing else gets an option it would refuse.
    #[test]
    fn markers_go_to_the_mpa_transports_only() {
        let want: [(&str, &[&str]); 4] = [
            ("raw", &[]),
            ("xdp", &["--markers"]),
            ("kernel", &["--markers"]),
            ("linux", &[]),
        ];
        // Every column of the plan is in the table above.
        for t in TRANSPORTS {
            assert!(want.iter().any(|(w, _)| *w == t), "{t} not considered");
        }
        for (t, args) in want {
            assert_eq!(mpa_args(t, true), args, "{t}");
            assert!(mpa_args(t, false).is_empty(), "{t}");
        }
    }

    fn rec(test: &str, t: &str, bytes: u64, typ: Option<f64>, bw: Option<f64>) -> CompareRecord {
        CompareRecord {
            test: test.into(),
            transport: t.into(),
            bytes,
            t_typical_us: typ,
            p99_us: typ,
            bw_gbps: bw,
            msg_rate_mpps: None,
            ..CompareRecord::default()
        }
    }

    #[test]
    fn ratios_are_n_a_when_a_side_is_missing() {
        assert_eq!(ratio(Some(3.0), Some(2.0)), Some(1.5));
        assert_eq!(ratio(None, Some(2.0)), None);
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
    }

    #[test]
    fn table_has_a_row_per_test_and_says_why_n_a() {
        let records = vec![
            rec("write_lat", "kernel", 64, Some(20.0), None),
            rec("write_lat", "xdp", 64, Some(5.0), None),
            rec("write_lat", "raw", 64, Some(4.0), None),
            rec("write_lat", "linux", 64, Some(10.0), None),
            rec("write_bw", "kernel", 65_536, None, Some(2.5)),
        ];
        let notes = vec!["xdp write_bw: not available yet".to_string(); 2];
        let t = table(&records, &notes);
        let line = t.lines().find(|l| l.starts_with(" write_lat")).unwrap();
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            cols,
            [
                "write_lat",
                "64",
                "t_typical[usec]",
                "4.000",
                "5.000",
                "20.000",
                "10.000",
                "1.25",
                "0.25",
                "0.50"
            ]
        );
        let bw = t.lines().find(|l| l.starts_with(" write_bw")).unwrap();
        assert!(bw.contains("2.500") && bw.contains("n/a"));
        assert_eq!(
            t.matches("not available yet").count(),
            1,
            "notes deduplicated"
        );
        assert_eq!(t.lines().filter(|l| l.contains("rpc_read")).count(), 1);
    }

    #[test]
    fn a_planned_cell_without_a_figure_is_missing() {
        let mut runs = vec![rec("write_lat", "linux", 64, Some(10.0), None)];
        let missing = missing_cells(&medians(&runs));
        assert_eq!(missing.len(), PLAN.len() * TRANSPORTS.len() - 1);
        assert!(missing.contains(&"xdp write_lat".to_string()));
        assert!(!missing.contains(&"linux write_lat".to_string()));
        for (test, bytes, metric, _, _) in PLAN {
            for t in TRANSPORTS {
                let v = Some(1.0);
                runs.push(match metric {
                    Metric::Typical => rec(test.name(), t, bytes, v, None),
                    Metric::Bandwidth => rec(test.name(), t, bytes, None, v),
                    Metric::Rate => CompareRecord {
                        msg_rate_mpps: v,
                        ..rec(test.name(), t, bytes, None, None)
                    },
                });
            }
        }
        assert!(missing_cells(&medians(&runs)).is_empty());
    }

    #[test]
    fn compare_json_has_exactly_the_issue_keys_with_nulls() {
        let r = CompareRecord::from_record(TestKind::SendBw, "xdp", None, 64);
        let v = serde_json::to_value(&r).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "bw_gbps",
                "bytes",
                "msg_rate_mpps",
                "p99_us",
                "t_typical_us",
                "test",
                "transport"
            ]
        );
        assert!(v["bw_gbps"].is_null());
        assert_eq!(v["bytes"], 64);
    }

    #[test]
    fn medians_take_the_middle_round_and_stay_null_without_one() {
        let runs = vec![
            rec("write_lat", "xdp", 64, Some(9.0), None),
            rec("write_lat", "xdp", 64, Some(4.0), None),
            rec("write_lat", "xdp", 64, Some(5.0), None),
            rec("write_lat", "raw", 64, Some(2.0), None),
        ];
        let m = medians(&runs);
        assert_eq!(
            m.len(),
            PLAN.len() * TRANSPORTS.len(),
            "one row per plan entry"
        );
        let get = |t: &str| {
            m.iter()
                .find(|r| r.test == "write_lat" && r.transport == t)
                .unwrap()
                .clone()
        };
        assert_eq!(
            get("xdp").t_typical_us,
            Some(5.0),
            "median, not mean or best"
        );
        assert_eq!(get("raw").t_typical_us, Some(2.0));
        assert_eq!(get("kernel").t_typical_us, None, "no round measured it");
        assert_eq!(get("xdp").bw_gbps, None);
    }

    #[test]
    fn raw_stands_in_by_traffic_pattern() {
        assert_eq!(raw_test(TestKind::WriteLat), TestKind::RawLat);
        assert_eq!(raw_test(TestKind::SendBw), TestKind::RawBw);
        assert_eq!(raw_test(TestKind::RpcRead), TestKind::RawBw);
    }

    #[test]
    fn xdp_and_raw_runs_bind_the_veth_end_kernel_runs_do_not() {
        let a = ["--interface".to_string(), "veth0".to_string()];
        assert_eq!(iface_args(TestKind::RawLat, "xdp", "veth0"), a);
        assert_eq!(iface_args(TestKind::WriteLat, "xdp", "veth0"), a);
        assert!(iface_args(TestKind::WriteLat, "kernel", "veth0").is_empty());
    }

    #[test]
    fn last_line_strips_the_prefix() {
        assert_eq!(
            last_line("progress\nxwarp-bench: error: cannot reach x\n\n"),
            "cannot reach x"
        );
        assert_eq!(last_line(""), "exited without a message");
    }
}
