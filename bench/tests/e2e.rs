//! End to end: xwarp-bench server in one network namespace, client in the other, over the
//! kernel transport; and the one-line errors of the CLI.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use bench::report::{BW_HEADER, BW_HEADER_MB, LAT_HEADER, STORAGE_HEADER_MB};
use bench::testbed::{Testbed, ADDR_A};

const EXE: &str = env!("CARGO_BIN_EXE_xwarp-bench");

/// Under CI a missing privilege fails; elsewhere the test is skipped with the reason
/// (the workspace's one rule, `testkit::or_skip`).
fn require_root(test: &str) -> bool {
    testkit::or_skip(test, bench::testbed::available()).is_some()
}

fn bench_in(tb: &Testbed, in_a: bool) -> Command {
    let mut c = tb.exec(in_a, std::path::Path::new(EXE));
    c.stdin(Stdio::null());
    c
}

/// A fresh directory for a test's result files (removed by the test at its end).
fn scratch_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("xwarp-bench-e2e-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Spawns the server `cmd` and waits for its "listening" line (its stdout is taken for it).
fn listening(cmd: &mut Command) -> std::process::Child {
    let mut server = cmd.stdout(Stdio::piped()).spawn().expect("spawn server");
    let mut first = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.contains("listening"), "server said: {first}");
    server
}

/// Runs server and client of `test` with `size` bytes and `iters` iterations, each with its
/// extra options; returns the client's output and the server's exit.
#[allow(clippy::too_many_arguments)]
fn run_with(
    tb: &Testbed,
    test: &str,
    size: &str,
    iters: &str,
    port: u16,
    json: &std::path::Path,
    server_extra: &[&str],
    client_extra: &[&str],
) -> Output {
    let port = port.to_string();
    let mut server = listening(
        bench_in(tb, true)
            .args([test, "--port", &port])
            .args(server_extra)
            .stderr(Stdio::inherit()),
    );
    let out = bench_in(tb, false)
        .args([
            test, ADDR_A, "--port", &port, "-s", size, "-n", iters, "--json",
        ])
        .arg(json)
        .args(client_extra)
        .output()
        .expect("spawn client");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(st) = server.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = server.kill();
            panic!("{test}: the server did not exit after the client's last run");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.success(), "{test}: server failed: {status}");
    out
}

#[test]
fn kernel_transport_tests_print_perftest_columns_and_json() {
    if !require_root("kernel_transport_tests_print_perftest_columns_and_json") {
        return;
    }
    let tb = Testbed::up(1500).expect("testbed");
    let dir = scratch_dir("kernel");
    let cases = [
        ("write_lat", "64", "100"),
        ("write_bw", "4K", "300"),
        ("read_lat", "64", "100"),
        ("read_bw", "4K", "300"),
        ("send_lat", "64", "100"),
        ("send_bw", "64", "2000"),
        ("rpc_write", "4K", "50"),
        ("rpc_read", "4K", "50"),
    ];
    for (k, (test, size, iters)) in cases.into_iter().enumerate() {
        let json = dir.join(format!("{test}.json"));
        let out = run_with(&tb, test, size, iters, 19_000 + k as u16, &json, &[], &[]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{test}: client failed: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lat = test.ends_with("_lat");
        let rpc = test.starts_with("rpc_");
        // perftest's default unit, MB/sec; the parameter block before the table.
        let header = match (lat, rpc) {
            (true, _) => LAT_HEADER,
            (_, true) => STORAGE_HEADER_MB,
            _ => BW_HEADER_MB,
        };
        assert!(
            stdout.lines().any(|l| l == header),
            "{test}: no header in\n{stdout}"
        );
        let depth = if rpc {
            " I/O depth       : "
        } else {
            " TX depth        : "
        };
        assert!(
            stdout.contains(" Transport       : kernel") && stdout.contains(depth),
            "{test}: no parameter block in\n{stdout}"
        );
        let bytes = bench::cli::parse_size(size).unwrap().to_string();
        let row: Vec<&str> = stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(bytes.as_str()))
            .unwrap_or_else(|| panic!("{test}: no result row in\n{stdout}"))
            .split_whitespace()
            .collect();
        let columns = match (lat, rpc) {
            (true, _) => 9,
            (_, true) => 8,
            _ => 5,
        };
        assert_eq!(row.len(), columns, "{test}: {row:?}");
        assert_eq!(row[1], iters, "{test}: iterations column");
        let nums: Vec<f64> = row[2..].iter().map(|v| v.parse().unwrap()).collect();
        // every figure is a number; all are positive except a standard deviation, which may
        // round to 0.00
        let stdev = if lat { Some(2) } else { None };
        for (i, v) in nums.iter().enumerate() {
            let ok = v.is_finite() && (*v > 0.0 || (Some(i) == stdev && *v >= 0.0));
            assert!(
                ok,
                "{test}: column {} is {v} in
{stdout}",
                i + 2
            );
        }
        if lat {
            // t_min <= t_typical <= 99% <= 99.9% <= t_max
            assert!(
                nums[0] <= nums[2]
                    && nums[2] <= nums[5]
                    && nums[5] <= nums[6]
                    && nums[6] <= nums[1]
            );
        } else if rpc {
            // BW, IOPS, then p50 <= p90 <= p99 <= p99.9
            assert!(
                nums[2..].windows(2).all(|w| w[0] <= w[1]),
                "{test}: {nums:?}"
            );
        } else {
            assert!(nums[0] >= nums[1], "{test}: peak >= average");
        }
        // JSON: an array with one object per size, every column, nulls where n/a
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let arr = v.as_array().expect("array");
        assert_eq!(arr.len(), 1);
        let o = arr[0].as_object().unwrap();
        for key in [
            "test",
            "transport",
            "bytes",
            "t_typical_us",
            "p99_us",
            "bw_gbps",
            "msg_rate_mpps",
        ] {
            assert!(o.contains_key(key), "{test}: JSON lacks {key}");
        }
        assert_eq!(o["test"], test);
        assert_eq!(o["transport"], "kernel");
        assert_eq!(o["bytes"].as_u64().unwrap().to_string(), bytes);
        assert_eq!(o["t_typical_us"].is_null(), !lat && !rpc);
        // iops is left out where it does not apply
        assert_eq!(o.get("iops").is_none_or(|v| v.is_null()), !rpc);
        assert_eq!(o["bw_gbps"].is_null(), lat);
        assert_eq!(o["msg_rate_mpps"].is_null(), lat);
        assert_eq!(o["params"]["transport"], "kernel", "{test}: {o:?}");
        assert_eq!(o["params"]["num_of_qps"], 1);
        if !test.starts_with("rpc") {
            assert_eq!(o["params"]["crc"], true, "{test}: negotiated CRC in {o:?}");
        }
        if lat || rpc {
            let p = o["percentiles_us"].as_array().expect("percentiles");
            assert!(p.len() > 5 && p.windows(2).all(|w| w[0][1].as_f64() <= w[1][1].as_f64()));
        }
    }
    // --report_gbits, -H and --csv.
    let json = dir.join("extra.json");
    let csv = dir.join("extra.csv");
    let out = run_with(
        &tb,
        "write_bw",
        "4K",
        "300",
        19_100,
        &json,
        &[],
        &["--report_gbits", "--csv", csv.to_str().unwrap()],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.lines().any(|l| l == BW_HEADER), "{stdout}");
    let c = std::fs::read_to_string(&csv).unwrap();
    assert!(
        c.starts_with("test,transport,bytes,")
            && c.lines()
                .nth(1)
                .unwrap()
                .starts_with("write_bw,kernel,4096,300,"),
        "{c}"
    );
    let out = run_with(&tb, "write_lat", "64", "100", 19_101, &json, &[], &["-H"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("Latency histogram of 64 B (usec, count):"),
        "{stdout}"
    );
    let counts: u64 = stdout
        .lines()
        .skip_while(|l| !l.starts_with("Latency histogram"))
        .skip(1)
        .take_while(|l| !l.starts_with("---"))
        .map(|l| l.rsplit(", ").next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(counts, 100, "the histogram counts every sample:\n{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The CPU cores of this host: `cpu_util` is at most 100 per core.
fn cores() -> f64 {
    std::thread::available_parallelism().map_or(1, |n| n.get()) as f64
}

fn read_json(path: &std::path::Path) -> serde_json::Value {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v.as_array().expect("array")[0].clone()
}

/// The CSV's one data row as (column, value) pairs.
fn read_csv(path: &std::path::Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    let row: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    assert_eq!(header.len(), row.len(), "{text}");
    assert!(lines.next().is_none(), "one size, one row: {text}");
    header.into_iter().zip(row).collect()
}

fn csv_f64(row: &[(String, String)], key: &str) -> f64 {
    let v = &row
        .iter()
        .find(|(k, _)| k == key)
        .unwrap_or_else(|| panic!("no {key}"))
        .1;
    v.parse().unwrap_or_else(|_| panic!("{key} = {v:?}"))
}

#[test]
fn storage_tests_report_iops_percentiles_and_cpu_util_in_text_json_and_csv() {
    if !require_root("storage_tests_report_iops_percentiles_and_cpu_util_in_text_json_and_csv") {
        return;
    }
    let tb = Testbed::up(1500).expect("testbed");
    let dir = scratch_dir("fio");
    // (test, --rw, --iodepth, connections): 40 calls in flight take three connections
    for (k, (test, rw, depth, connections)) in [
        ("rpc_write", "randwrite", "4", 1),
        ("rpc_read", "randread", "4", 1),
        ("rpc_read", "read", "40", 3),
    ]
    .into_iter()
    .enumerate()
    {
        let json = dir.join(format!("{test}-{rw}.json"));
        let csv = dir.join(format!("{test}-{rw}.csv"));
        let mut extra = vec![
            "--rw",
            rw,
            "--iodepth",
            depth,
            "--cpu_util",
            "--csv",
            csv.to_str().unwrap(),
        ];
        if rw.starts_with("rand") {
            extra.extend(["--seed", "3"]);
        }
        let out = run_with(
            &tb,
            test,
            "4K",
            "200",
            19_200 + k as u16,
            &json,
            &[],
            &extra,
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{test} {rw}: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains(&format!(" I/O pattern     : {rw}")),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!(" I/O depth       : {depth}")),
            "{stdout}"
        );
        assert!(
            stdout
                .lines()
                .any(|l| l == format!("{STORAGE_HEADER_MB}    CPU_Util[%]")),
            "{stdout}"
        );
        let row = stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some("4096"))
            .unwrap_or_else(|| panic!("no row in\n{stdout}"));
        assert_eq!(row.split_whitespace().count(), 9, "{row}");
        // JSON
        let o = read_json(&json);
        let f = |k: &str| o[k].as_f64().unwrap_or_else(|| panic!("{k} in {o}"));
        assert!(f("iops") > 0.0, "{o}");
        assert_eq!(o["iterations"], 200);
        let p = [f("t_typical_us"), f("p90_us"), f("p99_us"), f("p999_us")];
        assert!(p[0] > 0.0 && p.windows(2).all(|w| w[0] <= w[1]), "{p:?}");
        let cpu = f("cpu_util");
        assert!((0.0..=100.0 * cores()).contains(&cpu), "cpu_util {cpu}");
        assert_eq!(o["params"]["rw"], rw);
        assert_eq!(o["params"]["iodepth"].to_string(), depth);
        assert_eq!(o["params"]["num_of_qps"], connections);
        assert_eq!(o["params"]["store_size"], 64 << 20);
        let seed = if rw.starts_with("rand") {
            serde_json::json!(3)
        } else {
            serde_json::Value::Null
        };
        assert_eq!(o["params"]["seed"], seed);
        // CSV: the same figures
        let c = read_csv(&csv);
        assert!((csv_f64(&c, "iops") - f("iops")).abs() < 1e-6 * f("iops"));
        assert!(csv_f64(&c, "p90_us") <= csv_f64(&c, "p99_us"));
        assert!((0.0..=100.0 * cores()).contains(&csv_f64(&c, "cpu_util")));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `-b` on write_bw and read_bw: both streams and their sum, in the text and the JSON; and
/// `--cpu_util` on a latency test.
#[test]
fn bidirectional_bandwidth_and_cpu_util_on_the_kernel_transport() {
    if !require_root("bidirectional_bandwidth_and_cpu_util_on_the_kernel_transport") {
        return;
    }
    let tb = Testbed::up(1500).expect("testbed");
    let dir = scratch_dir("bidi");
    for (k, test) in ["write_bw", "read_bw"].into_iter().enumerate() {
        let json = dir.join(format!("{test}.json"));
        let out = run_with(
            &tb,
            test,
            "16K",
            "300",
            19_300 + k as u16,
            &json,
            &[],
            &["-b"],
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{test}: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_bidirectional(test, &stdout, &read_json(&json));
    }
    let json = dir.join("write_lat.json");
    let out = run_with(
        &tb,
        "write_lat",
        "64",
        "200",
        19_310,
        &json,
        &[],
        &["--cpu_util"],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l == format!("{LAT_HEADER}    CPU_Util[%]")),
        "{stdout}"
    );
    let cpu = read_json(&json)["cpu_util"].as_f64().expect("cpu_util");
    // A busy-polling client: well above nothing, never above every core.
    assert!(cpu > 1.0 && cpu <= 100.0 * cores(), "cpu_util {cpu}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `-b` run's output: the parameter block says so, the note under the row gives both
/// streams, the JSON's bandwidth is their sum.
fn assert_bidirectional(what: &str, stdout: &str, o: &serde_json::Value) {
    assert!(stdout.contains(" Bidirectional   : on"), "{what}: {stdout}");
    assert!(
        stdout.contains(" bidirectional: client's stream "),
        "{what}: {stdout}"
    );
    let f = |k: &str| {
        o[k].as_f64()
            .unwrap_or_else(|| panic!("{what}: {k} in {o}"))
    };
    let (c, s) = (f("bw_client_gbps"), f("bw_server_gbps"));
    assert!(
        c > 0.0 && s > 0.0,
        "{what}: both directions moved data: {o}"
    );
    assert!(
        (f("bw_gbps") - (c + s)).abs() < 1e-9 * (c + s),
        "{what}: {o}"
    );
    assert_eq!(o["params"]["bidirectional"], true, "{what}");
}

/// `-q 2` on a two-queue testbed: write_bw, read_bw and send_bw over two
/// queue pairs on two xdp lanes at each end, and write_bw with a kernel-transport server (two
/// TCP connections); each run reports the sum, with 2 queue pairs in its parameters.
#[test]
fn two_queue_pairs_run_over_two_queues() {
    let name = "two_queue_pairs_run_over_two_queues";
    if !require_root(name) {
        return;
    }
    let tb = Testbed::up_with_queues(1500, 2).expect("two-queue testbed");
    tb.tx_checksum_off(true).unwrap();
    let dir = scratch_dir("qps");
    let xa = [
        "--transport",
        "xdp",
        "--interface",
        tb.if_a.as_str(),
        "-q",
        "2",
    ];
    let xb = [
        "--transport",
        "xdp",
        "--interface",
        tb.if_b.as_str(),
        "-q",
        "2",
    ];
    let ka = ["-q", "2"];
    let cases: [(&str, &str, &str, &[&str]); 4] = [
        ("write_bw", "64K", "200", &xa),
        ("read_bw", "64K", "100", &xa),
        ("send_bw", "64", "2000", &xa),
        ("write_bw", "64K", "200", &ka),
    ];
    for (k, (test, size, iters, srv)) in cases.into_iter().enumerate() {
        let json = dir.join(format!("{test}-{k}.json"));
        let out = run_with(&tb, test, size, iters, 19_300 + k as u16, &json, srv, &xb);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{test} case {k}: client failed: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("Number of qps   : 2"), "case {k}: {stdout}");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let o = &v.as_array().expect("array")[0];
        assert_eq!(o["params"]["num_of_qps"], 2, "case {k}: {o}");
        // Two streams of `iters` messages each.
        assert_eq!(
            o["iterations"],
            2 * iters.parse::<u64>().unwrap(),
            "case {k}: {o}"
        );
        assert!(
            o["bw_gbps"].as_f64().is_some_and(|f| f > 0.0),
            "case {k}: {o}"
        );
    }
}

/// Whether this build has the xdp transport (it opens on the testbed's veth end; the probe
/// connects to a port nobody serves).
fn xdp_transport_built(tb: &Testbed) -> bool {
    let out = bench_in(tb, false)
        .args([
            "write_lat",
            ADDR_A,
            "--port",
            "1",
            "-n",
            "1",
            "--timeout",
            "2",
        ])
        .args(["--transport", "xdp", "--interface", &tb.if_b])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    !err.contains("being built")
}

#[test]
fn xdp_transport_tests_run_end_to_end_and_interoperate_with_kernel() {
    let name = "xdp_transport_tests_run_end_to_end_and_interoperate_with_kernel";
    if !require_root(name) {
        return;
    }
    let tb = Testbed::up(1500).expect("testbed");
    if !xdp_transport_built(&tb) {
        eprintln!("SKIP {name}: Device::open_xdp is not implemented in this build");
        return;
    }
    // The kernel-transport ends of the mixed cases need real checksums on the wire.
    tb.tx_checksum_off(true).unwrap();
    tb.tx_checksum_off(false).unwrap();
    let dir = scratch_dir("xdp");
    let xa = ["--transport", "xdp", "--interface", tb.if_a.as_str()];
    let xb = ["--transport", "xdp", "--interface", tb.if_b.as_str()];
    let kernel: [&str; 0] = [];
    // -b, one with a threaded engine whose CPU share --cpu_util reports
    let xb_bidi = [&xb[..], &["-b"]].concat();
    let xb_bidi_threaded = [&xb[..], &["-b", "--engine", "threaded", "--cpu_util"]].concat();
    let xb_cpu = [&xb[..], &["--cpu_util"]].concat();
    // (test, size, iterations, server options, client options, client transport)
    type Case<'a> = (
        &'a str,
        &'a str,
        &'a str,
        &'a [&'a str],
        &'a [&'a str],
        &'a str,
    );
    let cases: [Case; 15] = [
        ("write_lat", "64", "100", &xa, &xb, "xdp"),
        ("write_bw", "64K", "200", &xa, &xb, "xdp"),
        ("read_lat", "64", "100", &xa, &xb, "xdp"),
        ("read_bw", "64K", "100", &xa, &xb, "xdp"),
        ("send_lat", "64", "100", &xa, &xb, "xdp"),
        ("send_bw", "64", "2000", &xa, &xb, "xdp"),
        ("rpc_write", "1M", "8", &xa, &xb, "xdp"),
        ("rpc_read", "1M", "8", &xa, &xb, "xdp"),
        // each side's transport is its own choice: xdp against kernel, both ways
        ("write_lat", "64", "50", &xa, &kernel, "kernel"),
        ("send_bw", "64", "1000", &kernel, &xb, "xdp"),
        ("rpc_read", "64K", "20", &kernel, &xb, "xdp"),
        ("write_bw", "64K", "100", &xa, &kernel, "kernel"),
        ("write_bw", "64K", "200", &xa, &xb_bidi_threaded, "xdp"),
        ("read_bw", "64K", "100", &xa, &xb_bidi, "xdp"),
        // --cpu_util on the raw ceiling too: long enough (~50 ms) for the kernel to account
        // the spinning thread's time (schedstat moves at scheduler ticks; 100 iterations,
        // ~1 ms, sometimes read as 0.0)
        ("raw_lat", "64", "5000", &xa, &xb_cpu, "raw"),
    ];
    for (k, (test, size, iters, srv, cli, transport)) in cases.into_iter().enumerate() {
        let json = dir.join(format!("{test}-{k}.json"));
        let out = run_with(&tb, test, size, iters, 19_100 + k as u16, &json, srv, cli);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{test} case {k}: client failed: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let o = &v.as_array().expect("array")[0];
        assert_eq!(o["transport"], transport, "case {k}");
        let figure = if test.ends_with("_lat") {
            &o["t_typical_us"]
        } else {
            &o["bw_gbps"]
        };
        assert!(figure.as_f64().is_some_and(|f| f > 0.0), "case {k}: {o}");
        if cli.contains(&"-b") {
            assert_bidirectional(&format!("case {k}"), &stdout, o);
        }
        if cli.contains(&"--cpu_util") {
            let cpu = o["cpu_util"].as_f64().expect("cpu_util");
            assert!(0.0 < cpu && cpu <= 100.0 * cores(), "case {k}: {o}");
            assert!(stdout.contains("CPU_Util[%]"), "case {k}: {stdout}");
        }
        if cli.contains(&"threaded") {
            let cpu = o["cpu_util"].as_f64().expect("cpu_util");
            let engine = o["cpu_util_engine"]
                .as_f64()
                .expect("the engine thread's share");
            // The engine thread is one of the process's threads.
            assert!(0.0 <= engine && engine <= cpu + 1e-9, "case {k}: {o}");
            assert!(
                stdout.contains(" CPU_Util of the engine thread: "),
                "{stdout}"
            );
        }
        if transport == "xdp" {
            // The parameter block and the JSON say what the xdp transport ran on.
            assert!(
                stdout.contains(" XDP mode        : "),
                "case {k}:\n{stdout}"
            );
            assert!(
                stdout.contains(" AF_XDP bind     : "),
                "case {k}:\n{stdout}"
            );
            assert!(
                stdout.contains(" MSS             : "),
                "case {k}:\n{stdout}"
            );
            let p = &o["params"];
            assert!(
                ["native", "generic"].contains(&p["xdp_mode"].as_str().unwrap_or("")),
                "{p}"
            );
            assert!(p["zero_copy"].is_boolean() && p["mtu"] == 1500, "{p}");
            // What MPA negotiated, the storage tests' connections included (no --markers
            // here; the CRC is on by default).
            assert!(
                p["crc"] == true && p["tx_markers"] == false && p["rx_markers"] == false,
                "case {k}: {p}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn one_line_error(out: &Output, what: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{what}: exit code; stderr {err}"
    );
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{what}: one line, got {err}"
    );
    assert!(!err.contains("panicked"), "{what}: {err}");
    err
}

#[test]
fn unreachable_peer_is_one_line_and_exit_1() {
    // A local port nobody listens on: connection refused at once.
    let out = Command::new(EXE)
        .args(["write_lat", "127.0.0.1", "--port", "1", "-n", "1"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = one_line_error(&out, "refused");
    assert!(err.contains("cannot reach 127.0.0.1:1"), "{err}");
    let out = Command::new(EXE)
        .args(["rpc_read", "127.0.0.1", "--port", "1", "-n", "1"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = one_line_error(&out, "rpc refused");
    assert!(err.contains("cannot reach 127.0.0.1:1"), "{err}");
}

#[test]
fn unreachable_host_in_the_testbed_is_one_line_and_exit_1() {
    if !require_root("unreachable_host_in_the_testbed_is_one_line_and_exit_1") {
        return;
    }
    let tb = Testbed::up(1500).expect("testbed");
    // 198.18.0.3 is on the link but nobody answers ARP: timeout after 1 s.
    let out = bench_in(&tb, false)
        .args(["send_lat", "198.18.0.3", "--timeout", "1"])
        .output()
        .unwrap();
    let err = one_line_error(&out, "no host");
    assert!(err.contains("cannot reach 198.18.0.3:18515"), "{err}");
}

#[test]
fn xdp_transport_set_up_failures_are_one_line() {
    // No such interface: refused before anything is attached anywhere.
    for args in [
        &[
            "write_lat",
            "198.18.0.1",
            "--transport",
            "xdp",
            "--interface",
            "nosuchif0",
        ][..],
        &[
            "rpc_read",
            "198.18.0.1",
            "--transport",
            "xdp",
            "--interface",
            "nosuchif0",
        ],
        &[
            "write_lat",
            "--transport",
            "xdp",
            "--interface",
            "nosuchif0",
        ],
    ] {
        let out = Command::new(EXE)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = one_line_error(&out, &format!("{args:?}"));
        assert!(
            err.contains("cannot open the xdp transport on nosuchif0 queue 0"),
            "{args:?}: {err}"
        );
    }
    // Loopback is never chosen as the default interface (no XDP outside a testbed).
    let out = Command::new(EXE)
        .args(["write_lat", "127.0.0.1", "--transport", "xdp"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = one_line_error(&out, "xdp to 127.0.0.1");
    assert!(err.contains("goes through lo"), "{err}");
}

#[test]
fn raw_tests_need_an_interface() {
    let out = Command::new(EXE)
        .args(["raw_lat", "127.0.0.1"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = one_line_error(&out, "raw_lat");
    assert!(err.contains("needs --interface"), "{err}");
}

#[test]
fn bad_options_fail_with_usage_not_panic() {
    let out = Command::new(EXE)
        .args(["write_lat", "-s", "0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("at least 1 byte") && !err.contains("panicked"),
        "{err}"
    );
}

/// A stream longer than the stall window finishes (`write_bw -D 15` used to fail: its server,
/// which sees a client's RDMA Writes only as bytes arriving, gave up waiting for the FIN after
/// 10 s). With a 1 s window (`XWARP_BENCH_STALL_SECS`), 3 s streams on both transports.
#[test]
fn streams_longer_than_the_stall_window_finish() {
    let name = "streams_longer_than_the_stall_window_finish";
    if !require_root(name) {
        return;
    }
    let tb = Testbed::up(1500).expect("testbed");
    let xa = ["--transport", "xdp", "--interface", tb.if_a.as_str()];
    let xb = ["--transport", "xdp", "--interface", tb.if_b.as_str()];
    let kernel: [&str; 0] = [];
    let mut cases: Vec<(&[&str], &[&str])> = vec![(&kernel, &kernel)];
    if xdp_transport_built(&tb) {
        cases.push((&xa, &xb));
    }
    for (k, (srv, cli)) in cases.into_iter().enumerate() {
        let port = (19_300 + k as u16).to_string();
        let server = listening(
            bench_in(&tb, true)
                .env("XWARP_BENCH_STALL_SECS", "1")
                .args(["write_bw", "--port", &port])
                .args(srv)
                .stderr(Stdio::piped()),
        );
        let out = bench_in(&tb, false)
            .env("XWARP_BENCH_STALL_SECS", "1")
            .args(["write_bw", ADDR_A, "--port", &port, "-s", "64K", "-D", "3"])
            .args(cli)
            .output()
            .expect("spawn client");
        let server = server.wait_with_output().unwrap();
        assert!(
            out.status.success() && server.status.success(),
            "case {k}: client: {}\nserver: {}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&server.stderr)
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(BW_HEADER_MB),
            "case {k}: a bandwidth table"
        );
    }
}
