//! `xwarp-rdma` over IPv6 between two network namespaces: the server in A
//! at 2001:db8::1, the client in B; Send, RDMA Write and RDMA Read of 1 B, 4 KiB and 1 MiB,
//! every byte verified on both sides, markers off and on, with the xdp transport on one end and
//! the kernel transport (Linux TCP) on the other, each way round. Needs root (skips elsewhere,
//! fails under CI=true).

mod xwarp_rdma_run;

use std::time::Duration;

use testbed::{for_test, Side};
use testkit::or_skip;
use xwarp_rdma_run::*;

fn run(test: &str, port: u16, server: &[&str], client: &[&str]) {
    let Some(tb) = or_skip("e6", for_test("e6")) else {
        return;
    };
    // Both ends' kernels send full checksums (the engine checks them).
    tb.tx_checksum_off(Side::A).expect("ethtool -K tx off");
    tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
    let at = |side: Side, args: &[&str]| -> Vec<String> {
        args.iter()
            .map(|a| a.replace("IF", tb.ifname(side)))
            .collect()
    };
    let sargs = at(Side::A, server);
    let sargs: Vec<&str> = sargs.iter().map(String::as_str).collect();
    let srv = start_server_at(&tb, &tb.ip6(Side::A).to_string(), port, &sargs);
    let mut args = vec!["--ops", "send,write,read", "--sizes", "1,4K,1M"];
    let cargs = at(Side::B, client);
    args.extend(cargs.iter().map(String::as_str));
    let out = run_client_to(&tb, &tb.ip6(Side::A).to_string(), port, &args);
    assert_all_verified(test, &out);
    let sout = srv.wait_output(Duration::from_secs(30));
    assert!(
        sout.status.success(),
        "{test}: server failed: {}",
        String::from_utf8_lossy(&sout.stderr)
    );
}

const XDP: [&str; 4] = ["--transport", "xdp", "--interface", "IF"];

#[test]
fn e2e_ipv6_xdp_server_kernel_client_markers_off() {
    run("xdp server, markers off", 18611, &XDP, &[]);
}

#[test]
fn e2e_ipv6_xdp_server_kernel_client_markers_on() {
    let mut s = XDP.to_vec();
    s.push("--markers");
    run("xdp server, markers on", 18612, &s, &["--markers"]);
}

#[test]
fn e2e_ipv6_kernel_server_xdp_client_markers_on() {
    let mut c = XDP.to_vec();
    c.push("--markers");
    run("xdp client, markers on", 18613, &["--markers"], &c);
}
