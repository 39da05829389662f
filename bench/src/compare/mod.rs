//! `compare`: runs raw, xdp and kernel on a fresh two-namespace testbed, the server in one
//! namespace and the client in the other (each a child `xwarp-bench`), and Linux TCP itself
//! (sockperf, iperf3: [`linux`]) with the same pinning, and prints one table with the ratios
//! xdp/raw, xdp/kernel and xdp/linux, and the rows beside it. A planned cell that could not be
//! measured makes the run fail (after the table and the JSON are written).
//!
//! This file holds the plan, its run and the main table. Beside it:
//! - [`record`]: a row of the JSON, and the [`Cell`]s a record can be measured over;
//! - [`table`]: what every table shares (metric, lookup, median, ratio, figures, missing cells);
//! - [`pair`]: one run's two ends on the testbed; [`linux`]: Linux TCP's runs;
//! - [`tcp`], [`queues`], [`polling`]: the rows beside the table; [`report`]: the JSON file.
//!
//! Each of those depends on `record` and `table` (and `linux` on `pair`), never on this file,
//! so the folder has no import circle (`bench/tests/compare_layout.rs` checks it).

pub mod linux;
pub mod pair;
pub mod polling;
pub mod queues;
pub mod record;
pub mod report;
pub mod table;
pub mod tcp;

use std::fmt;
use std::path::Path;
use std::time::Duration;

pub use record::{Cell, CompareRecord};
pub use report::CompareReport;
pub use table::Metric;

use crate::cli::{CompareArgs, TestKind, TransportArg, DEFAULT_PORT};
use crate::report::{write_json, RULE};
use crate::testbed::{Testbed, ADDR_A};
use linux::Sockets;
use pair::PairRun;
use table::{figure, find, missing_cells, ratio};

/// One test of the plan: its size and iterations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanStep {
    /// The test.
    pub test: TestKind,
    /// Message size.
    pub bytes: u64,
    /// Iterations of a full run.
    pub iters: u64,
    /// Iterations with `--short`.
    pub short_iters: u64,
}

const fn step(test: TestKind, bytes: u64, iters: u64, short_iters: u64) -> PlanStep {
    PlanStep {
        test,
        bytes,
        iters,
        short_iters,
    }
}

/// The plan of `compare`: the table's rows, in order. Each row is compared by its test's
/// [`Metric`].
pub const PLAN: [PlanStep; 5] = [
    step(TestKind::WriteLat, 64, 3000, 200),
    step(TestKind::SendLat, 64, 3000, 200),
    step(TestKind::WriteBw, 65_536, 5000, 300),
    step(TestKind::SendBw, 64, 100_000, 3000),
    step(TestKind::RpcRead, 1 << 20, 500, 30),
];

/// The raw AF_XDP test standing in for `test`.
pub fn raw_test(test: TestKind) -> TestKind {
    if test.is_latency() {
        TestKind::RawLat
    } else {
        TestKind::RawBw
    }
}

/// The cells of the table: every row of the plan over every column.
fn table_cells() -> impl Iterator<Item = (TestKind, Cell, u64)> {
    PLAN.into_iter()
        .flat_map(|p| Cell::TABLE.map(|c| (p.test, c, p.bytes)))
}

/// The polling cells: the plan's latency tests over Linux TCP, polling.
fn polling_cells() -> impl Iterator<Item = (TestKind, Cell, u64)> {
    PLAN.into_iter()
        .filter(|p| p.test.is_latency())
        .map(|p| (p.test, polling::CELL, p.bytes))
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
    println!("Build: {}", report::build_kind());
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
        let measured = plan.run(&mut port);
        let runs = &measured.runs;
        let records = table::medians(runs, table_cells());
        let tcp_rows = table::medians(runs, tcp::planned());
        let queue_rows = table::medians(runs, queues::planned());
        let polling_rows = table::medians(runs, polling_cells());
        // A run that failed in one round but was measured in another is not an n/a.
        let notes: Vec<&Note> = measured
            .notes
            .iter()
            .filter(|n| {
                let medians = [&records, &tcp_rows, &queue_rows, &polling_rows];
                !medians.iter().any(|rows| {
                    rows.iter().any(|r| {
                        r.test == n.test
                            && r.transport == n.cell
                            && Metric::of_test(r.test).of(r).is_some()
                    })
                })
            })
            .collect();
        println!("MTU {mtu}");
        print!("{}", table(&records, &notes));
        let rdma = find(&records, tcp::TEST, Cell::Xdp, tcp::BYTES).and_then(|r| r.bw_gbps);
        println!("\n{}", tcp::table(&tcp_rows, rdma));
        println!("{}", queues::table(&queue_rows));
        println!("{}", polling::table(&polling_rows, &records));
        missing.extend(
            missing_cells(&records)
                .into_iter()
                .chain(missing_cells(&queue_rows))
                .chain(missing_cells(&polling_rows))
                .map(|c| format!("{c} (MTU {mtu})")),
        );
        all.extend(
            [records, tcp_rows, queue_rows, polling_rows]
                .into_iter()
                .flatten()
                .map(|r| CompareRecord {
                    mtu: Some(mtu),
                    ..r
                }),
        );
        if let Some(h) = window.end(Some(mtu)) {
            println!(" Host: {}\n", h.summary());
            host_during.push(h);
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    if let Some(path) = &args.json {
        let report = CompareReport {
            environment: report::Environment {
                mpa: mpa.into(),
                host_before,
                host_during,
                ..report::Environment::here(&args.mtu, pin, rounds, args.short)
            },
            records: all,
        };
        write_json(path, &report)?;
    }
    if !missing.is_empty() {
        return Err(format!("not measured: {}", missing.join(", ")));
    }
    Ok(())
}

/// Whether compare pins its two sides: `--no-pin` not given and at least two CPUs.
fn pinning(args: &CompareArgs) -> bool {
    !args.no_pin && std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2)
}

/// Why a run of a cell measured nothing.
#[derive(Debug, Clone, PartialEq)]
struct Note {
    test: TestKind,
    cell: Cell,
    why: String,
}

impl fmt::Display for Note {
    /// `cell test: why`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.cell, self.test.name(), self.why)
    }
}

/// What the rounds of one MTU measured: each run's record, and a note for each run that
/// measured nothing.
#[derive(Debug, Default)]
struct Measured {
    runs: Vec<CompareRecord>,
    notes: Vec<Note>,
}

impl Measured {
    /// A run's record, or, when it measured nothing, a note (said on stderr too).
    fn keep(&mut self, r: Result<CompareRecord, String>, test: TestKind, cell: Cell) {
        match r {
            Ok(rec) => self.runs.push(rec),
            Err(why) => {
                let note = Note { test, cell, why };
                eprintln!("xwarp-bench compare: n/a: {note}");
                self.notes.push(note);
            }
        }
    }
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

/// One run of a cell: `test` of `bytes` over `cell`, with `extra` arguments at both ends.
#[derive(Debug, Clone, Copy)]
struct CellRun<'a> {
    test: TestKind,
    cell: Cell,
    bytes: u64,
    iters: u64,
    pin: bool,
    extra: &'a [&'a str],
}

/// The arguments both ends of a cell get for MPA: `--markers` for the cells that speak MPA
/// (the xdp and kernel transports, the xdp queue cells) when `markers`, nothing for raw frames,
/// Linux TCP or the ONC RPC over TCP cells (no MPA there).
fn mpa_args(cell: Cell, markers: bool) -> &'static [&'static str] {
    let mpa = match cell {
        Cell::Xdp | Cell::Kernel | Cell::XdpOneQueue | Cell::XdpTwoQueues => true,
        Cell::Raw | Cell::Linux | Cell::LinuxPoll | Cell::XdpTcp | Cell::XdpTcpOption => false,
    };
    if markers && mpa {
        &["--markers"]
    } else {
        &[]
    }
}

impl Plan<'_> {
    /// Every round of the plan. `port` moves on by one per run.
    fn run(&self, port: &mut u16) -> Measured {
        let mut out = Measured::default();
        // Whole rounds, one after the other, so load that comes and goes hits every column
        // alike.
        for round in 1..=self.rounds {
            for p in PLAN {
                let iters = if self.short { p.short_iters } else { p.iters };
                let cell = |cell, pin| CellRun {
                    test: p.test,
                    cell,
                    bytes: p.bytes,
                    iters,
                    pin,
                    extra: &[],
                };
                for c in Cell::TABLE {
                    self.run_cell(round, &cell(c, self.pin), port, &mut out);
                }
                if p.test.is_latency() {
                    self.run_cell(round, &cell(polling::CELL, self.pin), port, &mut out);
                }
                if p.test == queues::TEST {
                    for (c, qps) in queues::CELLS {
                        let extra = queues::cell_args(qps);
                        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
                        let run = CellRun {
                            bytes: queues::BYTES,
                            extra: &extra,
                            ..cell(c, false)
                        };
                        self.run_cell(round, &run, port, &mut out);
                    }
                }
                if p.test == tcp::TEST {
                    for (c, option) in tcp::CELLS {
                        let extra = tcp::cell_args(option);
                        let run = CellRun {
                            bytes: tcp::BYTES,
                            extra: &extra,
                            ..cell(c, self.pin)
                        };
                        self.run_cell(round, &run, port, &mut out);
                    }
                }
            }
        }
        out
    }

    /// Says on stderr which run starts, with the load average.
    fn announce(&self, round: u32, run: &CellRun<'_>) {
        eprintln!(
            "xwarp-bench compare: MTU {} round {round}/{}: {} {} B over {} (load average {})",
            self.mtu,
            self.rounds,
            run.test.name(),
            run.bytes,
            run.cell,
            crate::host_load::load_average()
        );
    }

    /// Runs `run` once: Linux TCP's tools for the Linux cells, else a child `xwarp-bench` at
    /// each end (the raw test standing in for raw). Its record, or why not, into `out`; `port`
    /// moves on.
    fn run_cell(&self, round: u32, run: &CellRun<'_>, port: &mut u16, out: &mut Measured) {
        let CellRun {
            test,
            cell,
            bytes,
            iters,
            pin,
            extra,
        } = *run;
        self.announce(round, run);
        let transport = match cell {
            Cell::Linux | Cell::LinuxPoll => None,
            Cell::Kernel => Some((test, TransportArg::Kernel)),
            Cell::Raw => Some((raw_test(test), TransportArg::Xdp)),
            Cell::Xdp
            | Cell::XdpOneQueue
            | Cell::XdpTwoQueues
            | Cell::XdpTcp
            | Cell::XdpTcpOption => Some((test, TransportArg::Xdp)),
        };
        let r = match transport {
            None => {
                let sockets = if cell == Cell::LinuxPoll {
                    Sockets::NonBlocking
                } else {
                    Sockets::Blocking
                };
                let secs = linux::seconds(self.short);
                linux::run(self.tb, test, bytes, secs, *port, pin, sockets)
            }
            Some((bench_test, transport)) => {
                let json = self.tmp.join(format!("{}-{cell}.json", test.name()));
                let args: Vec<&str> = extra
                    .iter()
                    .chain(mpa_args(cell, self.markers))
                    .copied()
                    .collect();
                let pair = PairRun {
                    test: bench_test,
                    transport,
                    bytes,
                    iters,
                    port: *port,
                    json: &json,
                    pin,
                    extra: &args,
                };
                pair.run(self.tb, self.exe)
                    .map(|rec| CompareRecord::from_record(test, cell, Some(&rec), bytes))
            }
        };
        *port += 1;
        out.keep(r, test, cell);
    }
}

/// The compare table (`records`: the medians of its cells), with the reasons of every n/a
/// below it.
fn table(records: &[CompareRecord], notes: &[&Note]) -> String {
    let mut out = String::new();
    out.push_str(RULE);
    out.push('\n');
    let row = |cols: [&str; 10]| {
        format!(
            " {:<10}{:>9}  {:<16}{:>10}{:>10}{:>10}{:>10}{:>10}{:>12}{:>11}\n",
            cols[0],
            cols[1],
            cols[2],
            cols[3],
            cols[4],
            cols[5],
            cols[6],
            cols[7],
            cols[8],
            cols[9]
        )
    };
    let [raw, xdp, kernel, linux] = Cell::TABLE.map(Cell::name);
    out.push_str(&row([
        "test",
        "#bytes",
        "metric",
        raw,
        xdp,
        kernel,
        linux,
        "xdp/raw",
        "xdp/kernel",
        "xdp/linux",
    ]));
    for p in PLAN {
        let metric = Metric::of_test(p.test);
        let get = |c: Cell| find(records, p.test, c, p.bytes).and_then(|r| metric.of(r));
        let [raw, xdp, kernel, linux] = Cell::TABLE.map(get);
        out.push_str(&row([
            p.test.name(),
            &p.bytes.to_string(),
            metric.column(),
            &figure(raw, 3),
            &figure(xdp, 3),
            &figure(kernel, 3),
            &figure(linux, 3),
            &figure(ratio(xdp, raw), 2),
            &figure(ratio(xdp, kernel), 2),
            &figure(ratio(xdp, linux), 2),
        ]));
    }
    out.push_str(RULE);
    out.push('\n');
    let mut said: Vec<&Note> = Vec::new();
    for n in notes {
        if !said.contains(n) {
            out.push_str(&format!(" n/a: {n}\n"));
            said.push(n);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The targets are set with markers and CRC on: by default both ends of every MPA run ask
    /// for markers, and nothing else gets an option it would refuse.
    #[test]
    fn markers_go_to_the_mpa_cells_only() {
        use Cell::*;
        let with = [Xdp, Kernel, XdpOneQueue, XdpTwoQueues];
        for c in Cell::ALL {
            let want: &[&str] = if with.contains(&c) {
                &["--markers"]
            } else {
                &[]
            };
            assert_eq!(mpa_args(c, true), want, "{c}");
            assert!(mpa_args(c, false).is_empty(), "{c}");
        }
    }

    fn rec(
        test: TestKind,
        c: Cell,
        bytes: u64,
        typ: Option<f64>,
        bw: Option<f64>,
    ) -> CompareRecord {
        CompareRecord {
            t_typical_us: typ,
            p99_us: typ,
            bw_gbps: bw,
            ..CompareRecord::new(test, c, bytes)
        }
    }

    #[test]
    fn table_has_a_row_per_test_and_says_why_n_a() {
        use TestKind::{WriteBw, WriteLat};
        let records = vec![
            rec(WriteLat, Cell::Kernel, 64, Some(20.0), None),
            rec(WriteLat, Cell::Xdp, 64, Some(5.0), None),
            rec(WriteLat, Cell::Raw, 64, Some(4.0), None),
            rec(WriteLat, Cell::Linux, 64, Some(10.0), None),
            rec(WriteBw, Cell::Kernel, 65_536, None, Some(2.5)),
        ];
        let note = Note {
            test: WriteBw,
            cell: Cell::Xdp,
            why: "not available yet".into(),
        };
        let t = table(&records, &[&note, &note.clone()]);
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
        let head = t.lines().nth(1).unwrap();
        assert_eq!(
            head.split_whitespace().collect::<Vec<_>>()[3..7],
            ["raw", "xdp", "kernel", "linux"]
        );
        let bw = t.lines().find(|l| l.starts_with(" write_bw")).unwrap();
        assert!(bw.contains("2.500") && bw.contains("n/a"));
        assert_eq!(
            t.matches("not available yet").count(),
            1,
            "notes deduplicated"
        );
        assert!(t.contains(" n/a: xdp write_bw: not available yet"), "{t}");
        assert_eq!(t.lines().filter(|l| l.contains("rpc_read")).count(), 1);
        let send_bw = t.lines().find(|l| l.starts_with(" send_bw")).unwrap();
        assert!(send_bw.contains("MsgRate[Mpps]"), "{send_bw}");
    }

    #[test]
    fn a_planned_cell_without_a_figure_is_missing() {
        let mut runs = vec![rec(TestKind::WriteLat, Cell::Linux, 64, Some(10.0), None)];
        let missing = missing_cells(&table::medians(&runs, table_cells()));
        assert_eq!(missing.len(), PLAN.len() * Cell::TABLE.len() - 1);
        assert!(missing.contains(&"xdp write_lat".to_string()));
        assert!(!missing.contains(&"linux write_lat".to_string()));
        for (test, c, bytes) in table_cells() {
            let v = Some(1.0);
            runs.push(match Metric::of_test(test) {
                Metric::Typical => rec(test, c, bytes, v, None),
                Metric::Bandwidth => rec(test, c, bytes, None, v),
                Metric::Rate => CompareRecord {
                    msg_rate_mpps: v,
                    ..rec(test, c, bytes, None, None)
                },
            });
        }
        assert!(missing_cells(&table::medians(&runs, table_cells())).is_empty());
    }

    /// The rows beside the table are measured at a test and size of the plan, so their
    /// neighbours in the table (RPC/RDMA beside the TCP rows, xdp beside the polling rows)
    /// exist.
    #[test]
    fn the_side_rows_stand_on_rows_of_the_plan() {
        let planned = |test, bytes| PLAN.iter().any(|p| p.test == test && p.bytes == bytes);
        assert!(planned(tcp::TEST, tcp::BYTES));
        assert!(planned(queues::TEST, queues::BYTES));
        assert_eq!(polling_cells().count(), 2, "write_lat and send_lat");
        assert!(polling_cells().all(|(t, c, b)| planned(t, b) && c == Cell::LinuxPoll));
    }

    #[test]
    fn raw_stands_in_by_traffic_pattern() {
        assert_eq!(raw_test(TestKind::WriteLat), TestKind::RawLat);
        assert_eq!(raw_test(TestKind::SendBw), TestKind::RawBw);
        assert_eq!(raw_test(TestKind::RpcRead), TestKind::RawBw);
    }
}
