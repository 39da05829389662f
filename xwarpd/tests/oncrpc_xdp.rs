//! The store over ONC RPC on TCP on the xdp transport (end to end, in two
//! network namespaces): the xwarp client on our TCP reads 1 GiB from the server with the TCP
//! RDMA option negotiated (every octet verified; the reads skip what the client's TCP placed,
//! counted as copies avoided), the same with the option not negotiated (nothing placed), and a
//! Linux TCP client against the same server (it offers no option: nothing annotated, every
//! octet right).
//!
//! Root needed: skipped elsewhere, failures under CI=true.

use std::io::{Read, Write};
use std::net::{SocketAddr, SocketAddrV4};
use std::process::Command;
use std::sync::Mutex;

use dataplane::{Device, EngineMode, MappedFile};
use testbed::{for_test, for_test_bridged, Side, VethTestbed};
use testkit::{or_skip, pattern, LiveCapture, TempPath, Tshark};
use xwarpd::oncrpc::{
    SharedStore, TcpClientOptions, TcpServerOptions, TcpStoreClient, TcpStoreServer,
};
use xwarpd::store::AllowList;

/// The store: 64 MiB of a known pattern, read 16 times over (1 GiB) in 1 MiB READs.
const STORE: usize = 64 << 20;
const READ: u32 = 1 << 20;
const TOTAL: u64 = 1 << 30;
const SEED: u64 = 0x5107;

fn serial() -> std::sync::MutexGuard<'static, ()> {
    static HEAVY: Mutex<()> = Mutex::new(());
    HEAVY.lock().unwrap_or_else(|p| p.into_inner())
}

/// An xdp device on `side`'s veth end (copy mode, as veth needs), its engine in `mode`.
fn open_xdp(tb: &VethTestbed, side: Side, mode: EngineMode) -> Device {
    let _ns = tb.enter(side).expect("enter the namespace");
    let mut cfg = dataplane::XdpConfig::new(tb.ifname(side));
    cfg.bind = dataplane::BindMode::Copy;
    cfg.mode = mode;
    Device::open_xdp(cfg).expect("open the xdp device")
}

/// A server on side B's xdp device over a store holding `pattern(STORE, SEED)`.
fn serve(tb: &VethTestbed, file: &TempPath, port: u16, tcp_rdma: bool) -> (Device, TcpStoreServer) {
    std::fs::write(file.path(), pattern(STORE, SEED)).unwrap();
    let dev = open_xdp(tb, Side::B, EngineMode::Threaded);
    let store = SharedStore::open(&dev, MappedFile::open(file.path(), None).unwrap()).unwrap();
    let opts = TcpServerOptions {
        allow: AllowList::any(),
        ..TcpServerOptions::default()
    };
    let addr = SocketAddr::V4(SocketAddrV4::new(tb.ip(Side::B), port));
    let srv = TcpStoreServer::start_xdp(&dev, addr, store, opts, tcp_rdma).unwrap();
    (dev, srv)
}

/// One `READ`-sized call at `off` into `buf`, every octet checked against `want` (the store).
fn read_verified(c: &mut TcpStoreClient, want: &[u8], buf: &mut Vec<u8>, off: u64) {
    let r = c.read(off, buf, READ).expect("READ");
    assert_eq!(r.len, READ);
    let o = off as usize;
    assert!(
        buf[..READ as usize] == want[o..o + READ as usize],
        "READ at {off} differs"
    );
}

/// Reads `TOTAL` octets in `READ`-sized calls round the store; checks every octet.
fn read_all(c: &mut TcpStoreClient) {
    let want = pattern(STORE, SEED);
    let mut buf = Vec::new();
    let mut done = 0u64;
    while done < TOTAL {
        read_verified(c, &want, &mut buf, done % STORE as u64);
        done += u64::from(READ);
    }
    assert_eq!(c.counters().bytes_read, TOTAL);
}

fn xwarp_client_reads_1_gib(tag: &str, port: u16, server_offers: bool) {
    let Some(tb) = or_skip(tag, for_test(tag)) else {
        return;
    };
    let _serial = serial();
    let file = TempPath::new(tag);
    let (_sdev, srv) = serve(&tb, &file, port, server_offers);
    let dev = open_xdp(&tb, Side::A, EngineMode::Threaded);
    let mut c =
        TcpStoreClient::connect_xdp(&dev, srv.local_addr(), true, &TcpClientOptions::default())
            .expect("connect");
    assert_eq!(
        c.placement(),
        server_offers,
        "negotiated only when both offer"
    );
    read_all(&mut c);
    let k = c.counters();
    println!(
        "client {k:?}, stream copies avoided {:?}",
        c.stream_copies_avoided()
    );
    if server_offers {
        assert_eq!(k.placed_reads, TOTAL / u64::from(READ));
        assert!(k.copies_avoided > 0, "{k:?}");
        assert!(k.copies_avoided <= TOTAL);
    } else {
        assert_eq!((k.placed_reads, k.copies_avoided), (0, 0));
    }
    // A READ that fails (past the end): a status; with the option its reply carries a
    // zero-length transfer and the client gets its buffer back; the next READ is placed again.
    let mut buf = Vec::new();
    assert!(matches!(
        c.read(STORE as u64 + 1, &mut buf, 4096),
        Err(xwarpd::store::StoreError::Status(
            rpcrdma::storage::StoreStatus::OutOfRange
        ))
    ));
    assert_eq!(buf.len(), 4096, "the buffer came back");
    let r = c.read(0, &mut buf, 4096).expect("READ after a failed one");
    assert_eq!(r.len, 4096);
    assert!(buf[..4096] == pattern(4096, SEED)[..]);
    let st = srv.stats().snapshot();
    assert_eq!(st.totals.bytes_read, TOTAL + 4096);
    assert_eq!(st.totals.errors, 1);
}

#[test]
fn xwarp_client_on_xdp_reads_1_gib_with_the_option() {
    xwarp_client_reads_1_gib("ocxo", 7141, true);
}

#[test]
fn xwarp_client_on_xdp_reads_1_gib_without_the_option() {
    xwarp_client_reads_1_gib("ocxn", 7142, false);
}

/// The capture of the option on the wire: kind 25 on every segment that carries READ data,
/// and tshark finds no TCP error. Between two AF_XDP ends of one veth
/// pair no packet tap sees a frame, so the two sides are bridged through a third namespace and
/// the capture is taken on the bridge port towards the server. Every server segment longer than
/// a reply's record mark and header carries TCP option 25 (TCPRDMA-*), the segments with it
/// carry at least all the READ data, and Wireshark's TCP analysis finds no error.
#[test]
fn read_replies_carry_the_tcp_rdma_option_in_a_capture() {
    const READS: u32 = 16;
    const PORT: u16 = 7144;
    let tag = "occap";
    let Some(tb) = or_skip(tag, for_test_bridged(tag)) else {
        return;
    };
    let _serial = serial();
    let file = TempPath::new(tag);
    let (_sdev, srv) = serve(&tb, &file, PORT, true);
    let dev = open_xdp(&tb, Side::A, EngineMode::Threaded);
    let mut cap = Command::new("ip");
    cap.args(["netns", "exec", tb.middle_netns().unwrap(), "dumpcap"]);
    let path = testkit::unique_temp_path(&format!("{tag}.pcapng"));
    let cap = LiveCapture::start(cap, tb.middle_port(Side::B).unwrap(), PORT, path);
    let mut c =
        TcpStoreClient::connect_xdp(&dev, srv.local_addr(), true, &TcpClientOptions::default())
            .expect("connect");
    assert!(c.placement(), "the option is negotiated");
    let want = pattern(STORE, SEED);
    let mut buf = Vec::new();
    for i in 0..READS {
        read_verified(
            &mut c,
            &want,
            &mut buf,
            u64::from(i) * u64::from(READ) + 777,
        );
    }
    assert_eq!(c.counters().placed_reads, u64::from(READS));
    drop(c);
    let path = cap.finish();
    let shark = Tshark::read(&path).pref("tcp.check_checksum:TRUE");
    let from_server = format!("tcp.srcport == {PORT} && tcp.len > 0");
    let with = shark.fields(
        &format!("{from_server} && tcp.option_kind == 25"),
        &["tcp.len"],
    );
    let without = shark.fields(
        &format!("{from_server} && !(tcp.option_kind == 25)"),
        &["tcp.len"],
    );
    let sum = |v: &[String]| {
        v.iter()
            .map(|l| l.trim().parse::<u64>().unwrap())
            .sum::<u64>()
    };
    println!(
        "capture {}: {} server segments with option 25 ({} octets), {} without ({:?})",
        path.display(),
        with.len(),
        sum(&with),
        without.len(),
        without
    );
    assert!(
        sum(&with) >= u64::from(READS) * u64::from(READ),
        "READ data outside annotated segments"
    );
    // A reply's record mark and header (with the READ result) go out before its data; any
    // segment without the option holds no more than that.
    assert!(
        without
            .iter()
            .all(|l| l.trim().parse::<u64>().unwrap() <= 128),
        "server segments without the option carry data: {without:?}"
    );
    let bad = shark.count(&format!(
        "tcp.port == {PORT} && (tcp.checksum.status == 0 || tcp.analysis.lost_segment \
         || tcp.analysis.ack_lost_segment || tcp.analysis.out_of_order)"
    ));
    assert_eq!(bad, 0, "TCP errors in {}", path.display());
    let good = shark.count(&format!("tcp.port == {PORT} && tcp.checksum.status == 1"));
    assert!(good >= with.len(), "checksums verified: {good}");
    let _ = std::fs::remove_file(&path);
}

/// A Linux TCP client (kernel socket in namespace A, no option) reads and writes the xdp
/// server that offers the option: not negotiated, so nothing annotated, and the data right.
#[test]
fn linux_client_against_the_xdp_server_with_the_option_on() {
    let tag = "ocxl";
    let Some(tb) = or_skip(tag, for_test(tag)) else {
        return;
    };
    let _serial = serial();
    // The kernel's segments must carry full checksums (veth offload leaves them partial).
    tb.tx_checksum_off(Side::A).expect("ethtool -K tx off");
    let file = TempPath::new(tag);
    let (_sdev, srv) = serve(&tb, &file, 7143, true);
    let mut s = tb.run_in(Side::A, || {
        std::net::TcpStream::connect(srv.local_addr()).unwrap()
    });
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let words = |v: &[u32]| -> Vec<u8> { v.iter().flat_map(|w| w.to_be_bytes()).collect() };
    let call = |s: &mut std::net::TcpStream, xid: u32, proc_num: u32, args: &[u8]| -> Vec<u8> {
        let mut m = words(&[xid, 0, 2, 0x2000_5857, 1, proc_num, 0, 0, 0, 0]);
        m.extend_from_slice(args);
        let mut w = (0x8000_0000u32 | m.len() as u32).to_be_bytes().to_vec();
        w.extend(m);
        s.write_all(&w).unwrap();
        let mut mark = [0u8; 4];
        s.read_exact(&mut mark).unwrap();
        let m = u32::from_be_bytes(mark);
        assert!(m & 0x8000_0000 != 0, "one fragment");
        let mut rec = vec![0u8; (m & 0x7fff_ffff) as usize];
        s.read_exact(&mut rec).unwrap();
        assert_eq!(rec[..24], words(&[xid, 1, 0, 0, 0, 0]), "SUCCESS");
        rec[24..].to_vec()
    };
    let want = pattern(STORE, SEED);
    for (i, off) in [0usize, 12_345, 40 << 20].into_iter().enumerate() {
        let n = 300_000usize;
        let r = call(&mut s, 10 + i as u32, 1, &words(&[0, off as u32, n as u32]));
        assert_eq!(r[..12], words(&[0, 0, n as u32]));
        assert!(r[12..12 + n] == want[off..off + n], "READ at {off}");
    }
    let data = pattern(70_000, 77);
    let mut a = words(&[0, 4096, 0, data.len() as u32]);
    a.extend_from_slice(&data);
    let r = call(&mut s, 20, 2, &a);
    assert_eq!(r[..8], words(&[0, 70_000]));
    let r = call(&mut s, 21, 1, &words(&[0, 4096, 70_000]));
    assert!(r[12..12 + 70_000] == data[..]);
    assert_eq!(srv.stats().snapshot().totals.reads, 4);
}
