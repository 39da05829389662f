//! TCP checksums finished through AF_XDP TX metadata, end to end: two engines that leave every
//! checksum to the kernel move verified data (each receiver drops segments whose checksum is
//! wrong). The queue-level checks are `afxdp/tests/xsk_tx_checksum.rs`. Needs root (skips
//! elsewhere, fails under CI=true).
#![cfg(target_os = "linux")]

mod xwarp_rdma_run;

use std::time::Duration;

use testbed::{for_test, Side};
use testkit::or_skip;
use xwarp_rdma_run::*;

/// Two AF_XDP engines (server in A, client in B) that leave every TCP checksum to the kernel:
/// Send, RDMA Write and RDMA Read of 1 B, 4 KiB and 1 MiB, every byte verified on both sides,
/// at MTU 1500 (one frame per packet) and 9000 (multi-buffer chains, whose checksums the queue
/// finishes itself: the kernel's software checksum covers a chain's first buffer only).
#[test]
fn engines_with_kernel_finished_checksums_move_verified_data() {
    for (mtu, port) in [(1500, 18631), (9000, 18632)] {
        let Some(tb) = or_skip("txce", for_test("txce")) else {
            return;
        };
        tb.set_mtu(mtu).expect("set the MTU");
        let wire = |side: Side| {
            vec![
                "--transport".to_string(),
                "xdp".into(),
                "--interface".into(),
                tb.ifname(side).into(),
                "--tx-checksum".into(),
                "kernel".into(),
            ]
        };
        let sargs = wire(Side::A);
        let sargs: Vec<&str> = sargs.iter().map(String::as_str).collect();
        let srv = start_server(&tb, port, &sargs);
        let cargs = wire(Side::B);
        let mut args = vec!["--ops", "send,write,read", "--sizes", "1,4K,1M"];
        args.extend(cargs.iter().map(String::as_str));
        let out = run_client(&tb, port, &args);
        assert_all_verified(&format!("kernel-finished checksums, MTU {mtu}"), &out);
        let sout = srv.wait_output(Duration::from_secs(30));
        assert!(
            sout.status.success(),
            "MTU {mtu}: server failed: {}",
            String::from_utf8_lossy(&sout.stderr)
        );
    }
}
