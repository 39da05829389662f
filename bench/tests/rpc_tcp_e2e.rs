//! `xwarp-bench rpc_read -t tcp` end to end in two namespaces: ONC RPC over TCP on the xdp
//! transport with the TCP RDMA option (negotiated, copies avoided) and without it (not
//! negotiated, nothing avoided), and over kernel TCP. Prints the figures (bandwidth, client
//! CPU per GB) side by side. Root needed: skipped elsewhere, failures under CI=true.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use bench::testbed::{Testbed, ADDR_A};

const EXE: &str = env!("CARGO_BIN_EXE_xwarp-bench");

/// Runs an `rpc_read -t tcp` server in A and its client in B; returns the client's stdout.
fn run(tb: &Testbed, port: u16, server: &[&str], client: &[&str]) -> String {
    let port = port.to_string();
    let mut s = tb
        .exec(true, std::path::Path::new(EXE))
        .args(["rpc_read", "-t", "tcp", "--port", &port])
        .args(server)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn server");
    let mut first = String::new();
    BufReader::new(s.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.contains("listening"), "server said: {first}");
    let out = tb
        .exec(false, std::path::Path::new(EXE))
        .args([
            "rpc_read", ADDR_A, "-t", "tcp", "--port", &port, "-s", "1M", "-n", "64",
        ])
        .args(client)
        .stdin(Stdio::null())
        .output()
        .expect("spawn client");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "client failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the server did not exit");
        std::thread::sleep(Duration::from_millis(10));
    }
    stdout
}

/// The copies-avoided column of the one result row.
fn copies_avoided(out: &str) -> u64 {
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with("1048576"))
        .unwrap_or_else(|| panic!("no result row:\n{out}"));
    row.split_whitespace().last().unwrap().parse().unwrap()
}

#[test]
fn rpc_read_over_tcp_with_and_without_the_option() {
    let name = "rpc_read_over_tcp_with_and_without_the_option";
    if testkit::or_skip(name, bench::testbed::available()).is_none() {
        return;
    }
    let tb = Testbed::up(1500).expect("testbed");
    let xa = ["--transport", "xdp", "--interface", tb.if_a.as_str()];
    let xb = ["--transport", "xdp", "--interface", tb.if_b.as_str()];
    let with = run(&tb, 19_300, &xa, &xb);
    assert!(with.contains("TCP RDMA option negotiated"), "{with}");
    assert_eq!(copies_avoided(&with), 64 << 20, "{with}");
    let off = ["--tcp-rdma-option", "off"];
    let without = run(&tb, 19_301, &[&xa[..], &off].concat(), &xb);
    assert!(without.contains("not negotiated"), "{without}");
    assert_eq!(copies_avoided(&without), 0);
    tb.tx_checksum_off(true).unwrap();
    tb.tx_checksum_off(false).unwrap();
    let kernel = run(&tb, 19_302, &[], &[]);
    assert!(kernel.contains("not negotiated"), "{kernel}");
    println!("with the option:\n{with}\nwithout:\n{without}\nkernel TCP:\n{kernel}");
}
