//! qperf over xwarp (its rdma_cm mode, `-cm1`), over the kernel transport on loopback: the
//! RC tests iWARP can carry run and report (`rc_lat`, `rc_rdma_read_bw`, `rc_rdma_read_lat`).
//! Not run: `rc_bw`, which outruns the receiver's posted receives (InfiniBand's RNR retry
//! covers that, iWARP has none: the receiver sends a Terminate), and `rc_rdma_write_*`, which
//! use RDMA Write with immediate data (not in iWARP).

mod support;

use std::process::{Command, Stdio};

#[test]
fn qperf_rc_tests_run_over_xwarp() {
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
    std::thread::sleep(std::time::Duration::from_millis(500));
    let tests = ["rc_lat", "rc_rdma_read_bw", "rc_rdma_read_lat"];
    let client = [&["-cm1", "-t", "1", "127.0.0.1"][..], &tests].concat();
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
    assert_eq!(text.matches("latency  =").count(), 2, "{text}");
    assert_eq!(text.matches("bw  =").count(), 1, "{text}");
}
