//! xwarp-rdma: runs Send, RDMA Write and RDMA Read between two processes over the xwarp data
//! plane and verifies every byte.
//!
//! The server registers one data region (remote read + write) and advertises its STag and length
//! in the MPA Reply's private data. For each test the client:
//!   send  - tells the server what to expect, then Sends a patterned buffer; the server checks it;
//!   write - RDMA Writes a patterned buffer into the server's region, then asks the server to check;
//!   read  - asks the server to fill its region with a pattern, then RDMA Reads it and checks it.
//! Control messages are 24-byte Sends. Any mismatch makes both sides exit with status 1.
#![forbid(unsafe_code)]

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand, ValueEnum};
use dataplane::{
    Access, CompletionQueue, ConnectionConfig, Device, EngineMode, MemoryRegion, MpaSettings,
    Opcode, QpInit, QueuePair, RemoteAddr, Transport, TxChecksumOffload, XdpConfig,
};
use tool_support::{ByteSize, Pattern};

#[derive(Parser, Debug)]
#[command(
    name = "xwarp-rdma",
    version,
    about = "Send, RDMA Write and RDMA Read between two processes over xwarp, verified byte for byte",
    long_about = "Runs Send, RDMA Write and RDMA Read between a server and a client over the xwarp \
data plane (iWARP: MPA, DDP, RDMAP) and checks every byte received.\n\n\
Start the server first (`xwarp-rdma server --bind 198.18.0.1`), then the client \
(`xwarp-rdma client --connect 198.18.0.1 --ops send,write,read --sizes 1,4K,1M`).\n\
Both sides must use the same --markers and --no-crc settings to get the same wire format \
(markers are negotiated per direction, CRC is on if either side asks).\n\n\
Exit status: 0 when every transfer verified, 1 on a data mismatch, 2 on a connection or setup error."
)]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand, Debug)]
enum Mode {
    /// Wait for clients and serve their tests.
    Server(ServerArgs),
    /// Connect to a server and run the tests.
    Client(ClientArgs),
}

#[derive(Args, Debug, Clone)]
struct Wire {
    /// Ask the peer to insert MPA markers (every 512 octets) in what it sends.
    #[arg(long)]
    markers: bool,
    /// Ask for CRC32c on every FPDU (the default).
    #[arg(long, overrides_with = "no_crc")]
    crc: bool,
    /// Do not ask for CRC32c (CRC stays on if the peer asks).
    #[arg(long)]
    no_crc: bool,
    /// MPA revision: 2 (RFC 6581: send Rev 2, accept Rev 1 and 2, as siw and Chelsio), 1 (RFC
    /// 5044 only) or 0 (the draft's strict mode).
    #[arg(long, default_value_t = 2)]
    revision: u8,
    /// Inbound RDMA Read Requests served at once (IRD), offered in a Rev 2 frame.
    #[arg(long, default_value_t = 16)]
    ird: u32,
    /// Outbound RDMA Reads kept outstanding (ORD), offered in a Rev 2 frame and lowered to the
    /// peer's IRD.
    #[arg(long, default_value_t = 16)]
    ord: u32,
    /// Rev 2 peer-to-peer mode: the ready-to-receive message types (send, write, read; comma
    /// separated) the client offers / the server takes. Empty: the client asks for none, the
    /// server takes all three.
    #[arg(long, value_delimiter = ',')]
    p2p: Vec<RtrArg>,
    /// Transport: `kernel` (kernel TCP sockets) or `xdp` (the AF_XDP engine with xwarp's own
    /// TCP; needs --interface and root or CAP_NET_ADMIN/CAP_NET_RAW/CAP_BPF/CAP_IPC_LOCK).
    #[arg(long, value_enum, default_value_t = TransportArg::Kernel)]
    transport: TransportArg,
    /// xdp transport: the interface to attach to (its IPv4 address is the local address).
    #[arg(long)]
    interface: Option<String>,
    /// xdp transport: the interface's receive queue.
    #[arg(long, default_value_t = 0)]
    queue: u32,
    /// xdp transport: `inline` (this program's calls drive the engine: lowest latency) or
    /// `threaded` (a busy-polling engine thread).
    #[arg(long, value_enum, default_value_t = EngineArg::Inline)]
    engine: EngineArg,
    /// xdp transport: who computes TCP checksums of sent segments: `auto` (the device where
    /// its driver offers it through AF_XDP TX metadata, else the engine), `engine`, `device`
    /// (not veth towards another AF_XDP engine) or `kernel` (the same request, computed by the
    /// kernel in copy mode).
    #[arg(long, value_enum, default_value_t = TxChecksumArg::Auto)]
    tx_checksum: TxChecksumArg,
    /// Give every FPDU its own TCP segment (slow; for packet captures).
    #[arg(long)]
    segment_per_fpdu: bool,
    /// Test hook: corrupt one byte of every buffer this side provides (the client's Send and
    /// Write sources, the server's region before a Read), to check that mismatches are caught.
    #[arg(long, hide = true)]
    corrupt: bool,
    /// EMSS that MULPDU is derived from (default: the socket's MSS). With markers, 1024 makes
    /// every full FPDU exactly 1024 octets.
    #[arg(long, value_parser = clap::value_parser!(u32).range(128..=65495))]
    emss: Option<u32>,
}

#[derive(ValueEnum, Debug, Clone, Copy)]
enum TransportArg {
    Kernel,
    Xdp,
}

#[derive(ValueEnum, Debug, Clone, Copy)]
enum TxChecksumArg {
    Auto,
    Engine,
    Device,
    Kernel,
}

#[derive(ValueEnum, Debug, Clone, Copy)]
enum EngineArg {
    Inline,
    Threaded,
}

/// Opens the device the wire options name; an xdp device serves `addr` (unspecified: the
/// interface's first address of its family).
fn open_device(w: &Wire, addr: IpAddr) -> Result<Device, Failure> {
    match w.transport {
        TransportArg::Kernel => {
            Device::open(Transport::Kernel).map_err(|e| Failure::Setup(e.to_string()))
        }
        TransportArg::Xdp => {
            let ifname = w.interface.as_deref().ok_or_else(|| {
                Failure::Setup(
                    "--transport xdp needs --interface (the interface to attach to)".into(),
                )
            })?;
            let mut cfg = XdpConfig::new(ifname);
            cfg.queue = w.queue;
            cfg.address = Some(addr);
            cfg.mode = match w.engine {
                EngineArg::Inline => EngineMode::Inline,
                EngineArg::Threaded => EngineMode::Threaded,
            };
            cfg.tx_checksum = match w.tx_checksum {
                TxChecksumArg::Auto => TxChecksumOffload::Auto,
                TxChecksumArg::Engine => TxChecksumOffload::Off,
                TxChecksumArg::Device => TxChecksumOffload::Device,
                TxChecksumArg::Kernel => TxChecksumOffload::Kernel,
            };
            Device::open_xdp(cfg).map_err(|e| Failure::Setup(e.to_string()))
        }
    }
}

#[derive(Args, Debug)]
struct ServerArgs {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    bind: IpAddr,
    /// TCP port.
    #[arg(long, default_value_t = 18515)]
    port: u16,
    /// Serve this many connections, then exit (0 = forever).
    #[arg(long, default_value_t = 1)]
    connections: u32,
    /// Largest transfer the server accepts (size of its data region and receive buffers).
    #[arg(long, default_value = "16M", value_parser = parse_size)]
    max_size: usize,
    #[command(flatten)]
    wire: Wire,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Send,
    Write,
    Read,
}

#[derive(Args, Debug)]
struct ClientArgs {
    /// Server address.
    #[arg(long)]
    connect: IpAddr,
    /// Server TCP port.
    #[arg(long, default_value_t = 18515)]
    port: u16,
    /// Operations to run, in order.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "send,write,read"
    )]
    ops: Vec<Op>,
    /// Transfer sizes in bytes (units K, M, G or KiB, MiB, GiB: powers of 1024; 1,4K,1M).
    #[arg(long, value_delimiter = ',', default_value = "1,4K,1M", value_parser = parse_size)]
    sizes: Vec<usize>,
    /// Repetitions of each (op, size).
    #[arg(long, default_value_t = 1)]
    iterations: u32,
    /// Keep retrying the connection for this many seconds while the server starts.
    #[arg(long, default_value_t = 0)]
    wait_server: u64,
    #[command(flatten)]
    wire: Wire,
}

/// A size on the command line: `tool_support::ByteSize`'s forms (4096, 4K, 4KiB, 1M), as usize.
fn parse_size(s: &str) -> Result<usize, String> {
    let n = s.parse::<ByteSize>().map_err(|e| format!("{s:?}: {e}"))?.0;
    usize::try_from(n).map_err(|_| format!("size too large: {s}"))
}

/// Flips the middle byte when `on` (the --corrupt test hook).
fn corrupt_if(on: bool, buf: &mut [u8]) {
    if on && !buf.is_empty() {
        let m = buf.len() / 2;
        buf[m] ^= 0xff;
    }
}

/// Fills `buf` with the test pattern of `seed` (`tool_support::pattern`).
fn fill(buf: &mut [u8], seed: u64) {
    Pattern::new(seed).fill(0, buf);
}

/// Index of the first byte that differs from the pattern.
fn first_mismatch(buf: &[u8], seed: u64) -> Option<usize> {
    Pattern::new(seed)
        .first_mismatch(0, buf)
        .map(|i| i as usize)
}
// Control messages.
const CTL_LEN: usize = 24;
const EXPECT_SEND: u32 = 1;
const CHECK_WRITE: u32 = 2;
const FILL: u32 = 3;
const OK: u32 = 100;
const BAD: u32 = 101;
const FILLED: u32 = 102;
const PD_MAGIC: &[u8; 4] = b"XWRP";

#[derive(Debug, Clone, Copy)]
struct Ctl {
    kind: u32,
    size: u64,
    seed: u64,
}

impl Ctl {
    fn encode(&self) -> [u8; CTL_LEN] {
        let mut b = [0u8; CTL_LEN];
        b[0..4].copy_from_slice(&self.kind.to_be_bytes());
        b[8..16].copy_from_slice(&self.size.to_be_bytes());
        b[16..24].copy_from_slice(&self.seed.to_be_bytes());
        b
    }
    fn decode(b: &[u8]) -> Option<Ctl> {
        if b.len() != CTL_LEN {
            return None;
        }
        Some(Ctl {
            kind: u32::from_be_bytes(b[0..4].try_into().ok()?),
            size: u64::from_be_bytes(b[8..16].try_into().ok()?),
            seed: u64::from_be_bytes(b[16..24].try_into().ok()?),
        })
    }
}

#[derive(Debug)]
enum Failure {
    Setup(String),
    Mismatch(String),
}

impl From<String> for Failure {
    fn from(s: String) -> Self {
        Failure::Setup(s)
    }
}

impl From<&str> for Failure {
    fn from(s: &str) -> Self {
        Failure::Setup(s.to_string())
    }
}

/// A ready-to-receive message type of peer-to-peer mode (RFC 6581).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum RtrArg {
    Send,
    Write,
    Read,
}

fn config(w: &Wire) -> Result<ConnectionConfig, Failure> {
    let base = match w.revision {
        2 => MpaSettings::default(),
        1 => MpaSettings::rfc5044(),
        0 => MpaSettings::strict_draft(),
        r => {
            return Err(Failure::Setup(format!(
                "--revision must be 0, 1 or 2, not {r}"
            )))
        }
    };
    let rtr = w
        .p2p
        .iter()
        .map(|t| match t {
            RtrArg::Send => mpa::RtrType::Send,
            RtrArg::Write => mpa::RtrType::Write,
            RtrArg::Read => mpa::RtrType::Read,
        })
        .fold(mpa::RtrTypes::NONE, mpa::RtrTypes::with);
    let cfg = ConnectionConfig::default()
        .with_mpa(MpaSettings {
            want_markers: w.markers,
            want_crc: !w.no_crc,
            p2p_offer: rtr,
            p2p_accept: if rtr.is_empty() {
                mpa::RtrTypes::ALL
            } else {
                rtr
            },
            ..base
        })
        .with_ird(w.ird)
        .with_ord(w.ord)
        .with_segment_per_fpdu(w.segment_per_fpdu)
        .with_emss(w.emss);
    Ok(cfg)
}

/// What MPA negotiated, for the connection lines.
fn describe(n: &dataplane::NegotiatedFraming) -> String {
    let on = |b: bool| if b { "on" } else { "off" };
    let mut d = format!(
        "MPA rev {}, markers tx {} rx {}, crc {}, IRD {} ORD {}",
        n.revision,
        on(n.tx_markers),
        on(n.rx_markers),
        on(n.crc),
        n.ird,
        n.ord
    );
    if let Some(t) = n.rtr {
        d.push_str(&format!(", p2p RTR {t:?}"));
    }
    d
}

const WAIT: Duration = Duration::from_secs(30);

fn wait_cq(cq: &CompletionQueue, what: &str) -> Result<dataplane::Completion, Failure> {
    let c = cq
        .wait(WAIT)
        .ok_or_else(|| format!("timed out waiting for {what}"))?;
    if !c.is_ok() {
        return Err(Failure::Setup(format!("{what} failed: {c:?}")));
    }
    Ok(c)
}

struct Ends {
    corrupt: bool,
    qp: QueuePair,
    scq: CompletionQueue,
    rcq: CompletionQueue,
    ctl_tx: MemoryRegion,
}

impl Ends {
    fn new(
        qp: QueuePair,
        scq: CompletionQueue,
        rcq: CompletionQueue,
        pd: &dataplane::ProtectionDomain,
    ) -> Result<Self, Failure> {
        let ctl_tx = pd
            .register(CTL_LEN, Access::default())
            .map_err(|e| e.to_string())?;
        Ok(Ends {
            corrupt: false,
            qp,
            scq,
            rcq,
            ctl_tx,
        })
    }

    fn send_ctl(&self, ctl: Ctl) -> Result<(), Failure> {
        self.ctl_tx
            .write(0, &ctl.encode())
            .ok_or("control buffer")?;
        self.qp
            .post_send(0, &self.ctl_tx, 0..CTL_LEN)
            .map_err(|e| format!("post_send: {e}"))?;
        wait_cq(&self.scq, "control send")?;
        Ok(())
    }
}

// ------------------------------------------------------------------ server

fn server(a: ServerArgs) -> Result<(), Failure> {
    let cfg = config(&a.wire)?;
    let dev = open_device(&a.wire, a.bind)?;
    let pd = dev.alloc_pd();
    let max = a.max_size.max(1);
    let data = pd
        .register(max, Access::ALL)
        .map_err(|e| format!("register {max} bytes: {e}"))?;
    const RECVS: usize = 4;
    let recv_len = max.max(CTL_LEN);
    let recvs: Vec<MemoryRegion> = (0..RECVS)
        .map(|_| pd.register(recv_len, Access::LOCAL_WRITE))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("register receive buffers: {e}"))?;
    let addr = SocketAddr::new(a.bind, a.port);
    let listener = dev
        .listen(addr, cfg)
        .map_err(|e| format!("listen on {addr}: {e}"))?;
    println!("listening on {}", listener.local_addr());
    let mut bad = 0u32;
    let mut served = 0u32;
    while a.connections == 0 || served < a.connections {
        let inc = listener.accept().map_err(|e| e.to_string())?;
        let peer = inc.peer_addr().map(|p| p.to_string()).unwrap_or_default();
        if inc.private_data().get(..4) != Some(&PD_MAGIC[..]) {
            eprintln!("{peer}: not an xwarp-rdma client; rejecting");
            let _ = inc.reject(b"xwarp-rdma only");
            continue;
        }
        let scq = dev.create_cq();
        let rcq = dev.create_cq();
        let mut pdata = PD_MAGIC.to_vec();
        pdata.extend_from_slice(&data.stag().to_be_bytes());
        pdata.extend_from_slice(&(max as u64).to_be_bytes());
        let init = QpInit {
            pd: pd.clone(),
            send_cq: scq.clone(),
            recv_cq: rcq.clone(),
        };
        // Receives are posted before the Reply goes out: the client Sends right after it.
        let prepost = |qp: &QueuePair| {
            for (i, r) in recvs.iter().enumerate() {
                qp.post_recv(i as u64, r, 0..r.len())?;
            }
            Ok(())
        };
        let qp = match inc.accept_with(init, &pdata, prepost) {
            Ok(qp) => qp,
            Err(e) => {
                eprintln!("{peer}: accept failed: {e}");
                continue;
            }
        };
        served += 1;
        println!(
            "connection {served} from {peer} ({})",
            describe(&qp.negotiated())
        );
        let ends = Ends::new(qp, scq, rcq, &pd)?;
        match serve(&ends, &data, &recvs, a.wire.corrupt) {
            Ok(n) => bad += n,
            Err(Failure::Mismatch(m)) => {
                eprintln!("{m}");
                bad += 1
            }
            Err(Failure::Setup(m)) => eprintln!("{peer}: {m}"),
        }
        ends.qp.close();
    }
    let c = dev.counters();
    println!(
        "server done: {served} connection(s), {bad} mismatch(es); crc errors {}, terminates sent {}",
        c.crc_errors, c.terminates_sent
    );
    if bad > 0 {
        Err(Failure::Mismatch(format!(
            "{bad} transfer(s) did not verify"
        )))
    } else {
        Ok(())
    }
}

/// Serves one client until it disconnects; returns the number of failed checks.
fn serve(
    e: &Ends,
    data: &MemoryRegion,
    recvs: &[MemoryRegion],
    corrupt: bool,
) -> Result<u32, Failure> {
    let mut expect: Option<Ctl> = None;
    let mut bad = 0;
    loop {
        let Some(c) = e.rcq.wait(Duration::from_secs(3600)) else {
            continue;
        };
        if !c.is_ok() {
            // The client closed: the remaining receives are flushed.
            return Ok(bad);
        }
        let buf = &recvs[c.wr_id as usize];
        let len = c.byte_len as usize;
        let reply = if let Some(x) = expect.take() {
            let ok = len as u64 == x.size
                && buf
                    .read_vec(0, len)
                    .is_some_and(|s| first_mismatch(&s, x.seed).is_none());
            if !ok {
                eprintln!(
                    "send of {} bytes (seed {}): received {len} bytes that do not match",
                    x.size, x.seed
                );
            }
            if ok {
                OK
            } else {
                BAD
            }
        } else {
            let mut b = [0u8; CTL_LEN];
            let ctl = if len == CTL_LEN {
                buf.read(0, &mut b).and_then(|_| Ctl::decode(&b))
            } else {
                None
            };
            match ctl {
                Some(x) if x.kind == EXPECT_SEND => {
                    expect = Some(x);
                    0
                }
                Some(x) if x.kind == CHECK_WRITE => {
                    let n = x.size as usize;
                    let m = data.read_vec(0, n).map(|s| first_mismatch(&s, x.seed));
                    match m {
                        Some(None) => OK,
                        other => {
                            eprintln!(
                                "write of {n} bytes (seed {}): mismatch at {other:?}",
                                x.seed
                            );
                            BAD
                        }
                    }
                }
                Some(x) if x.kind == FILL => {
                    let n = x.size as usize;
                    match fill_region(data, n, x.seed, corrupt) {
                        Some(()) => FILLED,
                        None => BAD,
                    }
                }
                _ => {
                    eprintln!("unexpected message of {len} bytes");
                    BAD
                }
            }
        };
        e.qp.post_recv(c.wr_id, buf, 0..buf.len())
            .map_err(|x| format!("post_recv: {x}"))?;
        if reply != 0 {
            if reply == BAD {
                bad += 1;
            }
            e.send_ctl(Ctl {
                kind: reply,
                size: 0,
                seed: 0,
            })?;
        }
    }
}

// ------------------------------------------------------------------ client

fn connect(
    a: &ClientArgs,
    dev: &Device,
    init: QpInit,
    cfg: &ConnectionConfig,
) -> Result<QueuePair, Failure> {
    let addr = SocketAddr::new(a.connect, a.port);
    let deadline = Instant::now() + Duration::from_secs(a.wait_server);
    let mut pd = PD_MAGIC.to_vec();
    pd.extend_from_slice(&1u32.to_be_bytes());
    loop {
        match dev.connect(addr, init.clone(), cfg, &pd) {
            Ok(qp) => return Ok(qp),
            Err(dataplane::ConnectError::Io(e)) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(Failure::Setup(format!("cannot connect to {addr}: {e}"))),
        }
    }
}

fn client(a: ClientArgs) -> Result<(), Failure> {
    let cfg = config(&a.wire)?;
    let unspecified: IpAddr = if a.connect.is_ipv6() {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    };
    let dev = open_device(&a.wire, unspecified)?;
    let pd = dev.alloc_pd();
    let scq = dev.create_cq();
    let rcq = dev.create_cq();
    let max = a.sizes.iter().copied().max().unwrap_or(1).max(1);
    let data = pd
        .register(max, Access::ALL)
        .map_err(|e| format!("register {max} bytes: {e}"))?;
    let replies: Vec<MemoryRegion> = (0..2)
        .map(|_| pd.register(CTL_LEN, Access::LOCAL_WRITE))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let init = QpInit {
        pd: pd.clone(),
        send_cq: scq.clone(),
        recv_cq: rcq.clone(),
    };
    let qp = connect(&a, &dev, init, &cfg)?;
    let ppd = qp.peer_private_data();
    if ppd.len() != 16 || &ppd[..4] != PD_MAGIC {
        return Err(Failure::Setup(
            "the server's private data is not xwarp-rdma's".into(),
        ));
    }
    let remote_stag = u32::from_be_bytes(ppd[4..8].try_into().unwrap_or_default());
    let remote_len = u64::from_be_bytes(ppd[8..16].try_into().unwrap_or_default());
    if let Some(s) = a.sizes.iter().find(|s| **s as u64 > remote_len) {
        return Err(Failure::Setup(format!(
            "size {s} exceeds the server's --max-size {remote_len}"
        )));
    }
    println!(
        "connected to {}:{} (server region STag {remote_stag:#010x}, {remote_len} bytes; {})",
        a.connect,
        a.port,
        describe(&qp.negotiated())
    );
    for (i, r) in replies.iter().enumerate() {
        qp.post_recv(i as u64, r, 0..CTL_LEN)
            .map_err(|e| format!("post_recv: {e}"))?;
    }
    let mut ends = Ends::new(qp, scq, rcq, &pd)?;
    ends.corrupt = a.wire.corrupt;
    let remote = RemoteAddr {
        stag: remote_stag,
        to: 0,
    };
    let mut seed = 0x5eed_0000u64;
    let mut failures = 0;
    println!(
        "{:<6} {:>10} {:>6} {:>10} {:>12}  result",
        "op", "bytes", "iters", "time_ms", "MB/s"
    );
    for &op in &a.ops {
        for &size in &a.sizes {
            let t0 = Instant::now();
            let mut ok = true;
            for _ in 0..a.iterations {
                seed += 1;
                let r = match op {
                    Op::Send => run_send(&ends, &data, &replies, size, seed),
                    Op::Write => run_write(&ends, &data, &replies, size, seed, remote),
                    Op::Read => run_read(&ends, &data, &replies, size, seed, remote),
                };
                match r {
                    Ok(()) => {}
                    Err(Failure::Mismatch(m)) => {
                        eprintln!("{op:?} {size}: {m}");
                        ok = false;
                    }
                    Err(f) => return Err(f),
                }
            }
            let dt = t0.elapsed().as_secs_f64();
            let mbs = (size as f64 * f64::from(a.iterations)) / dt / 1e6;
            println!(
                "{:<6} {:>10} {:>6} {:>10.3} {:>12.1}  {}",
                format!("{op:?}").to_lowercase(),
                size,
                a.iterations,
                dt * 1e3,
                mbs,
                if ok { "verified" } else { "MISMATCH" }
            );
            if !ok {
                failures += 1;
            }
        }
    }
    ends.qp.close();
    if failures > 0 {
        return Err(Failure::Mismatch(format!(
            "{failures} test(s) did not verify"
        )));
    }
    println!("all transfers verified");
    Ok(())
}

/// Waits for the server's reply and re-posts its buffer.
fn reply(e: &Ends, replies: &[MemoryRegion]) -> Result<u32, Failure> {
    let c = wait_cq(&e.rcq, "server reply")?;
    let buf = replies.get(c.wr_id as usize).ok_or("bad reply wr_id")?;
    let mut b = [0u8; CTL_LEN];
    buf.read(0, &mut b).ok_or("reply buffer")?;
    e.qp.post_recv(c.wr_id, buf, 0..CTL_LEN)
        .map_err(|x| format!("post_recv: {x}"))?;
    let ctl = Ctl::decode(&b[..c.byte_len as usize]).ok_or("malformed server reply")?;
    Ok(ctl.kind)
}

fn expect_ok(kind: u32, what: &str) -> Result<(), Failure> {
    match kind {
        OK => Ok(()),
        BAD => Err(Failure::Mismatch(format!(
            "the server found the {what} data corrupted"
        ))),
        k => Err(Failure::Setup(format!("unexpected server reply {k}"))),
    }
}

/// Writes the pattern of `seed` (corrupted when asked) into `data[..n]`, by copy.
fn fill_region(data: &MemoryRegion, n: usize, seed: u64, corrupt: bool) -> Option<()> {
    let mut s = vec![0; n];
    fill(&mut s, seed);
    corrupt_if(corrupt, &mut s);
    data.write(0, &s)
}

fn run_send(
    e: &Ends,
    data: &MemoryRegion,
    replies: &[MemoryRegion],
    size: usize,
    seed: u64,
) -> Result<(), Failure> {
    e.send_ctl(Ctl {
        kind: EXPECT_SEND,
        size: size as u64,
        seed,
    })?;
    fill_region(data, size, seed, e.corrupt).ok_or("size")?;
    e.qp.post_send(1, data, 0..size)
        .map_err(|x| format!("post_send: {x}"))?;
    let c = wait_cq(&e.scq, "send")?;
    if c.opcode != Opcode::Send || c.byte_len as usize != size {
        return Err(Failure::Setup(format!("odd send completion {c:?}")));
    }
    expect_ok(reply(e, replies)?, "send")
}

fn run_write(
    e: &Ends,
    data: &MemoryRegion,
    replies: &[MemoryRegion],
    size: usize,
    seed: u64,
    remote: RemoteAddr,
) -> Result<(), Failure> {
    fill_region(data, size, seed, e.corrupt).ok_or("size")?;
    e.qp.post_write(2, data, 0..size, remote)
        .map_err(|x| format!("post_write: {x}"))?;
    let c = wait_cq(&e.scq, "write")?;
    if c.opcode != Opcode::Write {
        return Err(Failure::Setup(format!("odd write completion {c:?}")));
    }
    e.send_ctl(Ctl {
        kind: CHECK_WRITE,
        size: size as u64,
        seed,
    })?;
    expect_ok(reply(e, replies)?, "write")
}

fn run_read(
    e: &Ends,
    data: &MemoryRegion,
    replies: &[MemoryRegion],
    size: usize,
    seed: u64,
    remote: RemoteAddr,
) -> Result<(), Failure> {
    e.send_ctl(Ctl {
        kind: FILL,
        size: size as u64,
        seed,
    })?;
    match reply(e, replies)? {
        FILLED => {}
        k => {
            return Err(Failure::Setup(format!(
                "server could not fill its region (reply {k})"
            )))
        }
    }
    data.write(0, &vec![0; size]).ok_or("size")?;
    e.qp.post_read(3, data, 0..size, remote)
        .map_err(|x| format!("post_read: {x}"))?;
    let c = wait_cq(&e.scq, "read")?;
    if c.opcode != Opcode::Read || c.byte_len as usize != size {
        return Err(Failure::Setup(format!("odd read completion {c:?}")));
    }
    match data
        .read_vec(0, size)
        .and_then(|s| first_mismatch(&s, seed))
    {
        None => Ok(()),
        Some(i) => Err(Failure::Mismatch(format!("read data differs at byte {i}"))),
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let r = match cli.mode {
        Mode::Server(a) => server(a),
        Mode::Client(a) => client(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Mismatch(m)) => {
            eprintln!("xwarp-rdma: {m}");
            ExitCode::from(1)
        }
        Err(Failure::Setup(m)) => {
            eprintln!("xwarp-rdma: {m}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("1M").unwrap(), 1 << 20);
        assert_eq!(parse_size("7").unwrap(), 7);
        // Regression: the KiB form every other tool takes was rejected here.
        assert_eq!(parse_size("4KiB").unwrap(), 4096);
        assert_eq!(parse_size("4 MiB").unwrap(), 4 << 20);
        assert!(parse_size("x").unwrap_err().contains("4KiB"));
        assert!(parse_size("99999999999999999999G").is_err());
    }

    #[test]
    fn pattern_detects_a_flipped_byte() {
        let mut b = vec![0u8; 5000];
        fill(&mut b, 9);
        assert_eq!(first_mismatch(&b, 9), None);
        assert!(first_mismatch(&b, 10).is_some());
        b[4321] ^= 1;
        assert_eq!(first_mismatch(&b, 9), Some(4321));
    }

    #[test]
    fn ctl_roundtrip() {
        let c = Ctl {
            kind: FILL,
            size: 77,
            seed: 5,
        };
        let d = Ctl::decode(&c.encode()).unwrap();
        assert_eq!((d.kind, d.size, d.seed), (FILL, 77, 5));
        assert!(Ctl::decode(&[0; 3]).is_none());
    }
}
