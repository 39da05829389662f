//! Wire oracle for the store: xwarpd serves a store in one network namespace, the client
//! library drives it from the other, tshark captures from before the connect, and Wireshark's
//! RPC-over-RDMA dissector (`rpcordma`, the heuristic under `iwarp_ddp_rdmap`) decodes every
//! call and reply as the storage program, with no malformed packet, no error-level expert info
//! and no bad CRC. Needs root and tshark (skips elsewhere, fails under CI=true).

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use dataplane::{Access, ConnectionConfig};
use testbed::{for_test, Side};
use testkit::or_skip;
use testkit::{require_tool, unique_temp_path, LiveCapture, Tshark};
use xwarpd::store::{ClientOptions, StoreClient};

const BIN: &str = env!("CARGO_BIN_EXE_xwarpd");
/// rpcrdma::storage::PROGRAM in decimal, as tshark prints it.
const PROGRAM: &str = "536893527";

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn tshark_decodes_store_traffic_as_rpc_over_rdma_without_errors() {
    let test = "tshark_decodes_store_traffic_as_rpc_over_rdma_without_errors";
    let Some(tb) = or_skip("xwire", for_test("xwire")) else {
        return;
    };
    if !require_tool(test, "tshark") {
        return;
    }
    let port = 20049;
    let pid = std::process::id();
    let store = std::env::temp_dir().join(format!("xwarpd-wire-{pid}.img"));
    let ctl = std::env::temp_dir().join(format!("xwarpd-wire-{pid}.sock"));
    let cap = LiveCapture::start(
        tb.command(Side::A, "tshark"),
        tb.ifname(Side::A),
        port,
        unique_temp_path("xwarpd-wire.pcap"),
    );
    let listen = format!("{}:{port}", tb.ip(Side::A));
    let mut d = Killed(
        tb.command(Side::A, BIN)
            .args(["--store", store.to_str().unwrap(), "--size", "8MiB"])
            .args(["--store-listen", &listen, "--segment-per-fpdu", "true"])
            .args(["--metrics", "off", "--control", ctl.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn xwarpd"),
    );
    let mut ready = String::new();
    BufReader::new(d.0.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert!(ready.starts_with("xwarpd ready"), "{ready:?}");

    // Inline and chunked WRITE and READ, COMMIT, GETATTR: 6 calls.
    let addr = listen.parse().unwrap();
    tb.run_in(Side::B, move || {
        let opts = ClientOptions {
            connection: ConnectionConfig::default().with_segment_per_fpdu(true),
            ..ClientOptions::default()
        };
        let mut c = StoreClient::connect(addr, &opts).unwrap();
        let b = c.pd().register(1 << 16, Access::ALL).unwrap();
        let data: Vec<u8> = (0..1 << 16).map(|i| (i * 7 + 3) as u8).collect();
        b.write(0, &data).unwrap();
        c.getattr().unwrap();
        c.write(10, &b, 0..100).unwrap();
        c.write(4096 + 1, &b, 0..1 << 16).unwrap();
        c.commit(0, 0).unwrap();
        assert_eq!(c.read(10, &b, 0..100).unwrap().len, 100);
        assert_eq!(c.read(4097, &b, 0..1 << 16).unwrap().len, 1 << 16);
        let mut got = vec![0u8; 1 << 16];
        b.read(0, &mut got).unwrap();
        assert!(got == data);
    });
    // Stop the daemon cleanly, then the capture.
    // Safety: signalling our own child by its pid (`ip netns exec` execs xwarpd in place).
    unsafe { libc::kill(d.0.id() as i32, libc::SIGTERM) };
    let end = Instant::now() + Duration::from_secs(20);
    while d.0.try_wait().unwrap().is_none() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut err = String::new();
    let _ = d.0.stderr.take().unwrap().read_to_string(&mut err);
    assert!(err.contains("stopped cleanly"), "{err}");
    let path = cap.finish();
    let _ = std::fs::remove_file(&store);

    let tshark = Tshark::read(&path).pref("rpc.dissect_unknown_programs:TRUE");
    let out = tshark
        .fields(
            "rpcordma || rpc",
            &[
                "rpcordma.msg_type",
                "rpcordma.xid",
                "rpc.xid",
                "rpc.msgtyp",
                "rpc.program",
            ],
        )
        .join("\n");
    let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split('\t').collect()).collect();
    // 6 calls and 6 replies, all RDMA_MSG (0); no RDMA_ERROR (4).
    let rdma: Vec<&Vec<&str>> = rows.iter().filter(|r| !r[0].is_empty()).collect();
    assert_eq!(rdma.len(), 12, "rpcordma messages:\n{out}");
    assert!(rdma.iter().all(|r| r[0] == "0"), "{out}");
    // Every RPC message tshark decoded (inline, or a WRITE call it rebuilt from the RDMA Read
    // Response by inserting the read chunk), as (xid, msg type, program).
    let mut rpc = Vec::new();
    for r in &rows {
        let (x, t, p) = (r[2].split(','), r[3].split(','), r[4].split(','));
        for ((x, t), p) in x.zip(t).zip(p) {
            rpc.push((x.to_string(), t.to_string(), p.to_string()));
        }
    }
    let mut xids: Vec<&str> = rdma.iter().map(|r| r[1]).collect();
    xids.dedup();
    assert_eq!(xids.len(), 6, "{out}");
    for xid in xids {
        for t in ["0", "1"] {
            assert!(
                rpc.iter()
                    .any(|(x, ty, p)| x == xid && ty == t && p == PROGRAM),
                "xid {xid}: no RPC message of type {t} of program {PROGRAM} decoded:\n{out}"
            );
        }
    }
    // Nothing malformed, no error-level expert info, every CRC good.
    let bad = tshark.run(&["-Y", "_ws.malformed || _ws.expert.severity == error"]);
    assert!(bad.trim().is_empty(), "malformed or error packets:\n{bad}");
    let v = tshark.verbose("iwarp_mpa");
    assert!(
        v.contains("Good CRC32"),
        "no MPA FPDU with a checked CRC found"
    );
    assert!(!v.contains("Bad CRC32"));
    let _ = std::fs::remove_file(&path);
}
