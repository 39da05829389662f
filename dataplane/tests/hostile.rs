//! Bad input from a peer. A hostile client speaks raw bytes over a TCP socket to a listener of
//! the kernel transport (MPA with markers and CRC) while a well-behaved client keeps running
//! Send, RDMA Write and RDMA Read on another connection to the same listener. Each attack must
//! get the action the specs name (close TCP, or a Terminate with the right layer/type/code and
//! then close), nothing may panic, and the good connection must keep working throughout.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use dataplane::{
    Access, CompletionQueue, ConnectionConfig, Device, MemoryRegion, MpaSettings, QpInit,
    QueuePair, RemoteAddr, Transport,
};
use mpa::FramingConfig;

const REGION: usize = 64 * 1024;

static PANICS: AtomicUsize = AtomicUsize::new(0);
static HOOK: Once = Once::new();

fn count_panics() {
    HOOK.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // Count panics of the data plane's threads and the test server's, not the
            // assertion failures of the test threads themselves.
            let t = std::thread::current();
            if t.name().is_some_and(|n| n.starts_with("xwarp")) {
                PANICS.fetch_add(1, Ordering::SeqCst);
            }
            prev(info);
        }));
    });
}

fn listener_config() -> ConnectionConfig {
    ConnectionConfig::default().with_mpa(MpaSettings {
        want_markers: true,
        want_crc: true,
        timeout: Duration::from_secs(1),
        ..MpaSettings::default()
    })
}

/// The server: accepts every valid Request, advertises its region (STag, length) in the Reply,
/// echoes every Send back, and lets peers RDMA Write and Read its region.
struct Server {
    dev: Device,
    addr: SocketAddr,
    _region: Arc<MemoryRegion>,
}

fn serve_qp(qp: QueuePair, rcq: CompletionQueue, scq: CompletionQueue, bufs: Vec<MemoryRegion>) {
    loop {
        let Some(c) = rcq.wait(Duration::from_secs(60)) else {
            return;
        };
        if !c.is_ok() {
            return; // flushed: the connection is over
        }
        let b = &bufs[c.wr_id as usize];
        if qp.post_send(100, b, 0..c.byte_len as usize).is_err() {
            return;
        }
        match scq.wait(Duration::from_secs(10)) {
            Some(s) if s.is_ok() => {}
            _ => return,
        }
        if qp.post_recv(c.wr_id, b, 0..b.len()).is_err() {
            return;
        }
    }
}

fn start_server() -> Server {
    let dev = Device::open(Transport::Kernel).unwrap();
    let pd = dev.alloc_pd();
    let region = Arc::new(pd.register(REGION, Access::ALL).unwrap());
    let listener = dev
        .listen("127.0.0.1:0".parse().unwrap(), listener_config())
        .unwrap();
    let addr = listener.local_addr();
    let mut pdata = region.stag().to_be_bytes().to_vec();
    pdata.extend_from_slice(&(REGION as u64).to_be_bytes());
    let dev2 = dev.clone();
    std::thread::spawn(move || loop {
        let Ok(inc) = listener.accept() else { return };
        let (scq, rcq) = (dev2.create_cq(), dev2.create_cq());
        let init = QpInit {
            pd: pd.clone(),
            send_cq: scq.clone(),
            recv_cq: rcq.clone(),
        };
        let bufs: Vec<MemoryRegion> = (0..4)
            .map(|_| pd.register(4096, Access::LOCAL_WRITE).unwrap())
            .collect();
        // Receives are posted before the Reply goes out: a peer may Send right after it.
        let posted = inc.accept_with(init, &pdata, |qp| {
            for (i, b) in bufs.iter().enumerate() {
                qp.post_recv(i as u64, b, 0..b.len())?;
            }
            Ok(())
        });
        let Ok(qp) = posted else { continue };
        std::thread::Builder::new()
            .name("xwarp-test-serve".into())
            .spawn(move || serve_qp(qp, rcq, scq, bufs))
            .unwrap();
    });
    Server {
        dev,
        addr,
        _region: region,
    }
}

/// A well-behaved client on its own device.
struct Good {
    qp: QueuePair,
    scq: CompletionQueue,
    rcq: CompletionQueue,
    tx: MemoryRegion,
    rx: MemoryRegion,
    remote: RemoteAddr,
    round: u8,
    _dev: Device,
}

impl Good {
    fn connect(addr: SocketAddr) -> Good {
        let dev = Device::open(Transport::Kernel).unwrap();
        let pd = dev.alloc_pd();
        let (scq, rcq) = (dev.create_cq(), dev.create_cq());
        let init = QpInit {
            pd: pd.clone(),
            send_cq: scq.clone(),
            recv_cq: rcq.clone(),
        };
        let cfg = ConnectionConfig::default().with_mpa(MpaSettings {
            want_markers: true,
            ..MpaSettings::default()
        });
        let qp = dev.connect(addr, init, &cfg, b"good").unwrap();
        let p = qp.peer_private_data().to_vec();
        let remote = RemoteAddr {
            stag: u32::from_be_bytes(p[0..4].try_into().unwrap()),
            to: 0,
        };
        let tx = pd.register(4096, Access::ALL).unwrap();
        let rx = pd.register(4096, Access::ALL).unwrap();
        Good {
            qp,
            scq,
            rcq,
            tx,
            rx,
            remote,
            round: 0,
            _dev: dev,
        }
    }

    /// Send (echoed back), RDMA Write then RDMA Read of the same bytes: all verified.
    fn round_trip(&mut self, when: &str) {
        self.round = self.round.wrapping_add(1);
        let data: Vec<u8> = (0..3000u32).map(|i| (i as u8) ^ self.round).collect();
        let n = data.len();
        self.tx.write(0, &data).unwrap();
        self.qp.post_recv(1, &self.rx, 0..4096).unwrap();
        self.qp.post_send(2, &self.tx, 0..n).unwrap();
        let wait = |cq: &CompletionQueue, what: &str| {
            let c = cq
                .wait(Duration::from_secs(10))
                .unwrap_or_else(|| panic!("{when}: no {what} completion"));
            assert!(
                c.is_ok(),
                "{when}: {what} failed: {c:?} ({:?})",
                self.qp.error()
            );
            c
        };
        wait(&self.scq, "send");
        let c = wait(&self.rcq, "echo");
        assert_eq!(c.byte_len as usize, n, "{when}: echo length");
        let mut got = vec![0u8; n];
        self.rx.read(0, &mut got).unwrap();
        assert_eq!(got, data, "{when}: echoed data differs");
        self.qp.post_write(3, &self.tx, 0..n, self.remote).unwrap();
        wait(&self.scq, "write");
        self.rx.write(0, &vec![0; n]).unwrap();
        self.qp.post_read(4, &self.rx, 0..n, self.remote).unwrap();
        wait(&self.scq, "read");
        self.rx.read(0, &mut got).unwrap();
        assert_eq!(got, data, "{when}: read-back data differs");
    }
}

// ------------------------------------------------------------------ the hostile peer

const REQ_KEY: &[u8; 16] = b"MPA ID Req Frame";
const REP_KEY: &[u8; 16] = b"MPA ID Rep Frame";

fn request(key: &[u8; 16], flags: u8, rev: u8, pd_len: u16, pd: &[u8]) -> Vec<u8> {
    let mut v = key.to_vec();
    v.extend_from_slice(&[flags, rev]);
    v.extend_from_slice(&pd_len.to_be_bytes());
    v.extend_from_slice(pd);
    v
}

/// What the server did to the hostile connection.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// TCP closed with no FPDU sent to us.
    Closed,
    /// A Terminate (layer, type, code) arrived, then TCP closed.
    Terminated(u8, u8, u8),
    /// The connection is still open after the wait (no action).
    StillOpen,
}

struct Hostile {
    sock: TcpStream,
    /// Transmit offset from our SeqStart.
    tx_off: u32,
    stag: u32,
    len: u64,
}

fn read_until_closed(sock: &mut TcpStream, wait: Duration) -> (Vec<u8>, bool) {
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let end = Instant::now() + wait;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < end {
        match sock.read(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return (got, true), // reset
        }
    }
    (got, false)
}

/// Sends raw startup bytes and reports what the server did.
fn startup_attack(addr: SocketAddr, bytes: &[u8]) -> Outcome {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(bytes).unwrap();
    match read_until_closed(&mut s, Duration::from_secs(5)) {
        (got, true) if got.is_empty() => Outcome::Closed,
        (got, true) => panic!(
            "server answered a bad startup frame with {} bytes",
            got.len()
        ),
        (_, false) => Outcome::StillOpen,
    }
}

impl Hostile {
    /// A valid MPA startup: we ask for CRC and no markers on what we receive; the server asks
    /// for markers on what we send.
    fn connect(addr: SocketAddr) -> Hostile {
        let mut sock = TcpStream::connect(addr).unwrap();
        sock.set_nodelay(true).unwrap();
        sock.write_all(&request(REQ_KEY, 0x40, 1, 0, &[])).unwrap();
        let mut rep = [0u8; 20 + 12];
        sock.read_exact(&mut rep).unwrap();
        assert_eq!(&rep[..16], REP_KEY);
        assert_eq!(rep[16] & 0xe0, 0xc0, "server Reply: M=1, C=1, R=0");
        let stag = u32::from_be_bytes(rep[20..24].try_into().unwrap());
        let len = u64::from_be_bytes(rep[24..32].try_into().unwrap());
        Hostile {
            sock,
            tx_off: 0,
            stag,
            len,
        }
    }

    /// Frames `ulpdu` as an FPDU at our stream offset (markers and CRC as negotiated).
    fn fpdu(&mut self, ulpdu: &[u8]) -> Vec<u8> {
        let cfg = FramingConfig {
            markers: true,
            crc: true,
        };
        let mut out = vec![0u8; ulpdu.len() + 64 + 4 * (ulpdu.len() / 512 + 2)];
        let n = mpa::encode_fpdu(cfg, self.tx_off, &[ulpdu], &mut out).unwrap();
        out.truncate(n);
        self.tx_off = self.tx_off.wrapping_add(n as u32);
        out
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        self.sock.write_all(bytes).unwrap();
    }

    /// Reads the server's FPDUs (CRC on, no markers) until it closes; returns the outcome.
    fn outcome(mut self) -> Outcome {
        let (got, closed) = read_until_closed(&mut self.sock, Duration::from_secs(5));
        let mut parser = mpa::StreamParser::new(
            FramingConfig {
                markers: false,
                crc: true,
            },
            0,
        );
        parser.push(&got);
        let mut term = None;
        while let Ok(Some(f)) = parser.next_fpdu() {
            let u: Vec<u8> = f.ulpdu_chunks().flatten().copied().collect();
            // Untagged DDP header (18) with RDMAP opcode 7 (Terminate), QN 2; then the control.
            if u.len() >= 22 && u[0] & 0x80 == 0 && u[1] & 0x0f == 7 {
                term = Some((u[18] >> 4, u[18] & 0x0f, u[19]));
            }
        }
        match (term, closed) {
            (Some((l, t, c)), true) => Outcome::Terminated(l, t, c),
            (None, true) => Outcome::Closed,
            (Some(_), false) | (None, false) => Outcome::StillOpen,
        }
    }
}

fn untagged(opcode: u8, qn: u32, msn: u32, mo: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0x41, 0x40 | opcode, 0, 0, 0, 0];
    v.extend_from_slice(&qn.to_be_bytes());
    v.extend_from_slice(&msn.to_be_bytes());
    v.extend_from_slice(&mo.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

fn tagged_write(stag: u32, to: u64, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0xc1, 0x40];
    v.extend_from_slice(&stag.to_be_bytes());
    v.extend_from_slice(&to.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

struct Bench {
    server: Server,
    good: Mutex<Good>,
}

impl Bench {
    fn new() -> Bench {
        count_panics();
        let server = start_server();
        let mut good = Good::connect(server.addr);
        good.round_trip("before any attack");
        Bench {
            server,
            good: Mutex::new(good),
        }
    }

    fn after(&self, attack: &str) {
        self.good
            .lock()
            .unwrap()
            .round_trip(&format!("after {attack}"));
        assert_eq!(
            PANICS.load(Ordering::SeqCst),
            0,
            "a thread panicked during {attack}"
        );
    }
}

// MPA-86, MPA-95: a Request with the wrong key closes TCP.
#[test]
fn bad_key_closes_and_others_keep_working() {
    let b = Bench::new();
    let bad = request(b"MPA ID Xeq Frame", 0x40, 1, 0, &[]);
    assert_eq!(startup_attack(b.server.addr, &bad), Outcome::Closed);
    // MPA-89: a Reply key where a Request is expected is a bad key too.
    assert_eq!(
        startup_attack(b.server.addr, &request(REP_KEY, 0x40, 1, 0, &[])),
        Outcome::Closed
    );
    b.after("bad key");
    assert!(b.server.dev.counters().startup_malformed >= 2);
}

// MPA-102 (with the revisions a setting: by default Rev 1 and Rev 2, RFC 6581): any other
// revision closes TCP.
#[test]
fn bad_revision_closes_and_others_keep_working() {
    let b = Bench::new();
    for rev in [0u8, 3, 0xff] {
        assert_eq!(
            startup_attack(b.server.addr, &request(REQ_KEY, 0x40, rev, 0, &[])),
            Outcome::Closed
        );
    }
    b.after("bad revision");
    assert!(b.server.dev.counters().startup_malformed >= 3);
}

// MPA-91: PD_Length above the local limit (512) is a malformed frame: close, not a reject.
#[test]
fn private_data_over_limit_closes_and_others_keep_working() {
    let b = Bench::new();
    let pd = vec![7u8; 513];
    assert_eq!(
        startup_attack(b.server.addr, &request(REQ_KEY, 0x40, 1, 513, &pd)),
        Outcome::Closed
    );
    // The length alone is enough: the server must not wait for 65535 octets.
    assert_eq!(
        startup_attack(b.server.addr, &request(REQ_KEY, 0x40, 1, 0xffff, &[])),
        Outcome::Closed
    );
    b.after("PD_Length over the limit");
}

// MPA-92: a truncated startup frame times out and closes.
#[test]
fn truncated_startup_frame_times_out_and_closes() {
    let b = Bench::new();
    let req = request(REQ_KEY, 0x40, 1, 0, &[]);
    assert_eq!(startup_attack(b.server.addr, &req[..19]), Outcome::Closed);
    b.after("truncated startup frame");
    assert!(b.server.dev.counters().startup_timeouts >= 1);
}

// MPA-55, MPA-111, MPA-112: a CRC error stops delivery; RDMAP sends a Terminate with the LLP
// code 2 (layer 2, type 0, code 2), then the connection is closed.
#[test]
fn corrupted_crc_gets_terminate_and_others_keep_working() {
    let b = Bench::new();
    let mut h = Hostile::connect(b.server.addr);
    // MPA-85: the responder sends nothing (no Terminate either) before one valid FPDU arrived.
    let ok = h.fpdu(&untagged(3, 0, 1, 0, b"hi"));
    h.send_raw(&ok);
    let mut f = h.fpdu(&untagged(3, 0, 2, 0, b"hello, hostile world"));
    let last = f.len() - 1;
    f[last] ^= 0x5a;
    h.send_raw(&f);
    assert_eq!(h.outcome(), Outcome::Terminated(2, 0, 2));
    b.after("corrupted CRC");
    assert!(b.server.dev.counters().crc_errors >= 1);
}

// MPA-108 (with a valid CRC, a marker disagreeing with the length chain is error 3): Terminate
// with the LLP code 3, then close.
#[test]
fn wrong_marker_gets_terminate_and_others_keep_working() {
    let b = Bench::new();
    let mut h = Hostile::connect(b.server.addr);
    let ok = h.fpdu(&untagged(3, 0, 1, 0, b"hi"));
    h.send_raw(&ok);
    // The second FPDU holds an interior marker; make its FPDUPTR lie, keeping the CRC (which
    // covers markers) valid.
    let start = h.tx_off;
    let mut f = h.fpdu(&untagged(3, 0, 2, 0, &[1u8; 700]));
    let m = (0..f.len())
        .find(|i| (start as usize + i).is_multiple_of(512))
        .expect("an interior marker");
    assert_ne!(m, 0, "the FPDU must not start on a marker here");
    f[m + 2..m + 4].copy_from_slice(&0x0100u16.to_be_bytes());
    let crc_at = f.len() - 4;
    let crc = mpa::crc::crc32c(&f[..crc_at]);
    f[crc_at..].copy_from_slice(&mpa::crc::crc_to_wire(crc));
    h.send_raw(&f);
    assert_eq!(h.outcome(), Outcome::Terminated(2, 0, 3));
    b.after("wrong marker");
    assert!(b.server.dev.counters().marker_errors >= 1);
}

// DDP-06 §7.2: an RDMA Write to an STag that is not registered: tagged buffer error, invalid
// STag (DDP layer 1, type 1, code 0x00).
#[test]
fn invalid_stag_gets_terminate_and_others_keep_working() {
    let b = Bench::new();
    let mut h = Hostile::connect(b.server.addr);
    let bogus = h.stag ^ 0x0000_ff00;
    let f = h.fpdu(&tagged_write(bogus, 0, &[9u8; 64]));
    h.send_raw(&f);
    assert_eq!(h.outcome(), Outcome::Terminated(1, 1, 0));
    b.after("invalid STag");
}

// DDP-06 §7.2: a Write past the end of a valid region: base or bounds violation (1, 1, 0x01).
#[test]
fn to_out_of_bounds_gets_terminate_and_others_keep_working() {
    let b = Bench::new();
    let mut h = Hostile::connect(b.server.addr);
    let f = h.fpdu(&tagged_write(h.stag, h.len - 8, &[9u8; 64]));
    h.send_raw(&f);
    assert_eq!(h.outcome(), Outcome::Terminated(1, 1, 1));
    b.after("TO out of bounds");
}

// DDP-06 §7.2: a Send whose MSN is far outside the window of posted receives: untagged buffer
// error, MSN range not valid (1, 2, 0x03).
#[test]
fn msn_outside_window_gets_terminate_and_others_keep_working() {
    let b = Bench::new();
    let mut h = Hostile::connect(b.server.addr);
    let f = h.fpdu(&untagged(3, 0, 1000, 0, b"out of window"));
    h.send_raw(&f);
    assert_eq!(h.outcome(), Outcome::Terminated(1, 2, 3));
    b.after("MSN outside the window");
}

// A DDP header cut short inside an otherwise valid FPDU (1, 6, 13 and 17 of 18 octets): the
// stream fails with a Terminate (DDP layer, 0x0/0x00) and closes.
#[test]
fn truncated_headers_get_terminate_and_others_keep_working() {
    let b = Bench::new();
    for cut in [1usize, 6, 13, 17] {
        let mut h = Hostile::connect(b.server.addr);
        let full = untagged(3, 0, 1, 0, &[]);
        let f = h.fpdu(&full[..cut]);
        h.send_raw(&f);
        // No -06 §7.2 row covers a segment shorter than its header; an LLP error or DDP
        // 0x0/0x00 would both do, and ddp sends DDP Local Catastrophic.
        assert_eq!(
            h.outcome(),
            Outcome::Terminated(1, 0, 0),
            "truncated header of {cut} octets"
        );
        b.after(&format!("a {cut}-octet truncated header"));
    }
    assert!(b.server.dev.counters().terminates_sent >= 4);
}
