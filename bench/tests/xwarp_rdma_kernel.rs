//! End to end over kernel TCP between two network namespaces joined by veth: Send, RDMA Write
//! and RDMA Read of 1 B, 4 KiB and 1 MiB, every byte verified by `xwarp-rdma` on both sides,
//! with markers on and off and CRC on and off. Needs root (skips elsewhere, fails under CI=true).

mod xwarp_rdma_run;

use std::time::Duration;

use testbed::for_test;
use testkit::or_skip;
use xwarp_rdma_run::*;

fn run_matrix(test: &str, port: u16, wire: &[&str]) {
    let Some(tb) = or_skip("e2e", for_test("e2e")) else {
        return;
    };
    let server = start_server(&tb, port, wire);
    let mut args = vec!["--ops", "send,write,read", "--sizes", "1,4K,1M"];
    args.extend_from_slice(wire);
    let out = run_client(&tb, port, &args);
    assert_all_verified(test, &out);
    let sout = server.wait_output(Duration::from_secs(30));
    assert!(
        sout.status.success(),
        "{test}: server failed: {}",
        String::from_utf8_lossy(&sout.stderr)
    );
}

#[test]
fn e2e_kernel_markers_off_crc_on() {
    run_matrix("e2e_kernel_markers_off_crc_on", 18601, &[]);
}

#[test]
fn e2e_kernel_markers_on_crc_on() {
    run_matrix("e2e_kernel_markers_on_crc_on", 18602, &["--markers"]);
}

#[test]
fn e2e_kernel_markers_off_crc_off() {
    run_matrix("e2e_kernel_markers_off_crc_off", 18603, &["--no-crc"]);
}

#[test]
fn e2e_kernel_markers_on_crc_off() {
    run_matrix(
        "e2e_kernel_markers_on_crc_off",
        18604,
        &["--markers", "--no-crc"],
    );
}
