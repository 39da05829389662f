//! qperf over xwarp (its rdma_cm mode, `-cm1`): the RC tests iWARP can carry run and report
//! (`rc_lat`, `rc_rdma_read_bw`, `rc_rdma_read_lat`), over the kernel transport on loopback and
//! between two network namespaces over the kernel and the xdp transports (qperf's control
//! connection is a kernel TCP socket in every case). Not run: `rc_bw`, which outruns the
//! receiver's posted receives (InfiniBand's RNR retry covers that, iWARP has none: the receiver
//! sends a Terminate), and `rc_rdma_write_*`, which use RDMA Write with immediate data (not in
//! iWARP). Privileged (the namespaces): skipped without root outside CI.

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

use support::programs::{Tools, DEADLINE, QPERF_PORT};
use testbed::{for_test, Side};
use testkit::or_skip;

/// The client's tests and options after the server's address.
const TESTS: [&str; 3] = ["rc_lat", "rc_rdma_read_bw", "rc_rdma_read_lat"];

/// The client's report holds two latencies and one bandwidth.
fn assert_report(text: &str) {
    assert_eq!(text.matches("latency  =").count(), 2, "{text}");
    assert_eq!(text.matches("bw  =").count(), 1, "{text}");
}

/// Waits (at most 30 s) until a socket listens on TCP `port` of this host (the qperf server's
/// control port).
fn wait_listening(port: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let listening = || {
        Command::new("ss")
            .args(["-ltnH", &format!("sport = :{port}")])
            .output()
            .is_ok_and(|o| !o.stdout.trim_ascii().is_empty())
    };
    while !listening() {
        assert!(
            std::time::Instant::now() < deadline,
            "the qperf server does not listen on port {port}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn qperf_rc_tests_run_over_xwarp_on_loopback() {
    let Some(tools) = support::rdma_tools() else {
        return;
    };
    let libs = support::verbs_libs();
    let qperf = tools.join("usr/bin/qperf");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    // xwarp-run's arguments for `qperf -lp PORT ARGS`.
    let with = |args: &[&str]| -> Vec<std::ffi::OsString> {
        let mut v: Vec<std::ffi::OsString> = ["--interface", "lo", "--lib-dir"]
            .iter()
            .map(Into::into)
            .collect();
        v.push(libs.clone().into());
        v.push("--".into());
        v.push(qperf.clone().into());
        v.extend(["-lp", &port].iter().chain(args).map(Into::into));
        v
    };
    let run = env!("CARGO_BIN_EXE_xwarp-run");
    let mut server = Command::new(run)
        .args(with(&[]))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the qperf server");
    wait_listening(&port);
    let client = [&["-cm1", "-t", "1", "127.0.0.1"][..], &TESTS].concat();
    let out = Command::new("timeout")
        .arg("120")
        .arg(run)
        .args(with(&client))
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let text = String::from_utf8_lossy(&out.stdout);
    println!(
        "xwarp-run -- qperf {}\n{text}{}",
        client.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{:?}", out.status);
    assert_report(&text);
}

/// The qperf server in A and its client in B, both on `transport`.
fn qperf_between_namespaces(tag: &str, transport: &str) {
    let Some(tb) = or_skip(tag, for_test(tag)) else {
        return;
    };
    let Some(tools) = Tools::get() else {
        return;
    };
    let port = QPERF_PORT.to_string();
    let server = tools.start(&tb, Side::A, transport, "qperf", &["-lp", &port]);
    // The control connection is the kernel's, whatever the transport.
    tools.wait_ready(&tb, "kernel", "qperf");
    let ip = tb.ip(Side::A).to_string();
    let args = [&["-lp", &port, "-cm1", "-t", "1", &ip][..], &TESTS].concat();
    let client = tools
        .start(&tb, Side::B, transport, "qperf", &args)
        .wait(DEADLINE);
    // The server serves until it is stopped.
    let _ = server.wait(Duration::ZERO);
    println!(
        "== {transport}: xwarp-run -- qperf {} (client, exit {:?}, {:.1} s)\n{}{}",
        args.join(" "),
        client.status,
        client.took.as_secs_f64(),
        client.stdout,
        client.stderr
    );
    assert!(client.ok(), "qperf client on {transport}: {client:?}");
    assert_report(&client.stdout);
}

#[test]
fn qperf_rc_tests_between_namespaces_over_the_kernel_transport() {
    qperf_between_namespaces("qpk", "kernel");
}

#[test]
fn qperf_rc_tests_between_namespaces_over_the_xdp_transport() {
    qperf_between_namespaces("qpx", "xdp");
}
