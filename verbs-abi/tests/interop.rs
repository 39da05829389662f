//! Across stacks and on the wire: perftest and rping with the server on the kernel transport
//! (Linux TCP) and the client on the xdp transport (xwarp's TCP), and a capture of an
//! `ib_write_bw -R` connection between them decoded by Wireshark's MPA and DDP/RDMAP
//! dissectors: both connections' MPA Request and Reply (Revision 2), the RDMA Writes, every
//! FPDU with a good CRC, nothing malformed. Privileged: skipped without root outside CI.

mod support;

use support::programs::{perftest, rping, Tools};
use testbed::{for_test, Side};
use testkit::iwarp_oracle::iwarp_tshark;
use testkit::{or_skip, require_tool, unique_temp_path, LiveCapture};

const MIXED: (&str, &str) = ("kernel", "xdp");

#[test]
fn xdp_clients_against_kernel_servers() {
    let Some(tb) = or_skip("iox", for_test("iox")) else {
        return;
    };
    let Some(tools) = Tools::get() else {
        return;
    };
    // veth leaves the kernel's TCP checksums to offload, which the engine cannot see.
    tb.tx_checksum_off(Side::A).expect("ethtool -K tx off");
    perftest(&tools, &tb, MIXED, "ib_write_bw", "2000");
    perftest(&tools, &tb, MIXED, "ib_send_lat", "1000");
    rping(&tools, &tb, MIXED);
}

#[test]
fn an_ib_write_bw_capture_decodes_with_good_crcs() {
    let Some(tb) = or_skip("iow", for_test("iow")) else {
        return;
    };
    if !require_tool("an_ib_write_bw_capture_decodes_with_good_crcs", "tshark") {
        return;
    }
    let Some(tools) = Tools::get() else {
        return;
    };
    tb.tx_checksum_off(Side::A).expect("ethtool -K tx off");
    let mut cap = LiveCapture::start(
        tb.command(Side::A, "tshark"),
        tb.ifname(Side::A),
        18515,
        unique_temp_path("ib_write_bw.pcap"),
    );
    let server_ip = tb.ip(Side::A).to_string();
    let (server, client) = tools.pair(
        &tb,
        MIXED,
        "ib_write_bw",
        &["-R", "-n", "50", "-s", "8192"],
        &["-R", "-n", "50", "-s", "8192", &server_ip],
    );
    assert!(server.ok() && client.ok(), "{server:?}\n{client:?}");
    cap.stop();
    let path = cap.path().to_path_buf();
    let t = iwarp_tshark(&path);
    let on = "tcp.port == 18515";
    let requests = t.count(&format!("{on} && iwarp_mpa.req"));
    let replies = t.count(&format!("{on} && iwarp_mpa.rep"));
    let writes = t.count(&format!("{on} && iwarp_rdma.opcode == 0x00"));
    let sends = t.count(&format!("{on} && iwarp_rdma.opcode == 0x03"));
    let malformed = t.count(&format!("{on} && _ws.malformed"));
    let verbose = t.verbose(&format!("{on} && iwarp_mpa.fpdu"));
    let good = verbose.matches("Good CRC32").count();
    let bad = verbose.matches("Bad CRC32").count();
    println!(
        "capture {}: {requests} MPA Requests, {replies} Replies, {writes} segments with Writes, \
         {sends} with Sends, {good} FPDUs with a good CRC32, {bad} bad, {malformed} malformed",
        path.display()
    );
    // The control connection and the test connection, each with its startup.
    assert_eq!((requests, replies), (2, 2));
    assert!(
        verbose.contains("Revision: 2")
            || t.verbose(&format!("{on} && iwarp_mpa.req"))
                .contains("Revision: 2")
    );
    // 50 Writes of 8 KiB, in FPDUs of at most an MSS: many segments carry Writes.
    assert!(writes >= 50, "{writes} segments with Writes");
    assert!(sends > 0);
    assert!(good > writes, "{good} good CRCs");
    assert_eq!(bad, 0);
    assert_eq!(malformed, 0);
    let _ = std::fs::remove_file(&path);
}
