//! The command line: perftest's test names as subcommands, plus `compare`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use tool_support::{ByteSize, TimeSpan};

/// perftest's default port (every test but the storage tests).
pub const DEFAULT_PORT: u16 = 18515;
/// The storage tests' default port: the block store's (RPC-over-RDMA, the NFS/RDMA port).
pub const STORE_PORT: u16 = xwarpd::daemon::config::DEFAULT_STORE_PORT;
/// The storage tests' default port over `--rpc-transport tcp`: the store's ONC RPC over TCP
/// service.
pub const TCP_STORE_PORT: u16 = xwarpd::daemon::config::DEFAULT_TCP_STORE_PORT;
/// Largest message size accepted (and the top of `--all`).
pub const MAX_SIZE: u64 = 8 << 20;
/// Smallest size of `--all`.
pub const MIN_ALL_SIZE: u64 = 2;

/// xwarp-bench: perftest-style latency and bandwidth tests over xwarp's transports.
///
/// Run a test without an address to serve it, with the server's address to drive it.
#[derive(Debug, Parser)]
#[command(name = "xwarp-bench", version, about, long_about = None)]
pub struct Cli {
    /// The test to run.
    #[command(subcommand)]
    pub command: Command,
}

/// A subcommand.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// RDMA Write ping-pong latency (half round trip).
    #[command(name = "write_lat")]
    WriteLat(TestArgs),
    /// RDMA Write bandwidth.
    #[command(name = "write_bw")]
    WriteBw(TestArgs),
    /// RDMA Read latency (full round trip).
    #[command(name = "read_lat")]
    ReadLat(TestArgs),
    /// RDMA Read bandwidth.
    #[command(name = "read_bw")]
    ReadBw(TestArgs),
    /// Send/Receive ping-pong latency (half round trip).
    #[command(name = "send_lat")]
    SendLat(TestArgs),
    /// Send bandwidth.
    #[command(name = "send_bw")]
    SendBw(TestArgs),
    /// Storage: READ of the block store over RPC-over-RDMA.
    #[command(name = "rpc_read")]
    RpcRead(TestArgs),
    /// Storage: WRITE to the block store over RPC-over-RDMA.
    #[command(name = "rpc_write")]
    RpcWrite(TestArgs),
    /// Raw AF_XDP Ethernet frames ping-pong, no TCP: the host's latency ceiling.
    #[command(name = "raw_lat")]
    RawLat(TestArgs),
    /// Raw AF_XDP Ethernet frames streaming, no TCP: the host's bandwidth ceiling.
    #[command(name = "raw_bw")]
    RawBw(TestArgs),
    /// Run raw, xdp and kernel on a built-in two-namespace testbed and print the ratios.
    Compare(CompareArgs),
    /// Draw a result file (a test's --json, or compare's) as an SVG chart: bandwidth against
    /// size, latency percentiles (CDF), or compare's grouped bars per transport.
    Plot(PlotArgs),
}

/// Options of `plot`.
#[derive(Debug, Clone, Args)]
pub struct PlotArgs {
    /// The result file (JSON).
    pub input: PathBuf,
    /// The SVG file to write.
    pub output: PathBuf,
}

/// The tests, with a stable wire id for the handshake. In JSON, its name (`write_lat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub enum TestKind {
    /// write_lat
    WriteLat,
    /// write_bw
    WriteBw,
    /// read_lat
    ReadLat,
    /// read_bw
    ReadBw,
    /// send_lat
    SendLat,
    /// send_bw
    SendBw,
    /// rpc_read
    RpcRead,
    /// rpc_write
    RpcWrite,
    /// raw_lat
    RawLat,
    /// raw_bw
    RawBw,
}

const ALL_TESTS: [TestKind; 10] = [
    TestKind::WriteLat,
    TestKind::WriteBw,
    TestKind::ReadLat,
    TestKind::ReadBw,
    TestKind::SendLat,
    TestKind::SendBw,
    TestKind::RpcRead,
    TestKind::RpcWrite,
    TestKind::RawLat,
    TestKind::RawBw,
];

impl TestKind {
    /// perftest-style name.
    pub fn name(self) -> &'static str {
        match self {
            Self::WriteLat => "write_lat",
            Self::WriteBw => "write_bw",
            Self::ReadLat => "read_lat",
            Self::ReadBw => "read_bw",
            Self::SendLat => "send_lat",
            Self::SendBw => "send_bw",
            Self::RpcRead => "rpc_read",
            Self::RpcWrite => "rpc_write",
            Self::RawLat => "raw_lat",
            Self::RawBw => "raw_bw",
        }
    }

    /// Parses a name.
    pub fn from_name(s: &str) -> Option<Self> {
        ALL_TESTS.into_iter().find(|t| t.name() == s)
    }

    /// Handshake id.
    pub fn id(self) -> u8 {
        ALL_TESTS.iter().position(|t| *t == self).unwrap_or(0) as u8 + 1
    }

    /// From a handshake id.
    pub fn from_id(id: u8) -> Option<Self> {
        ALL_TESTS.get(usize::from(id).checked_sub(1)?).copied()
    }

    /// Latency test (else bandwidth).
    pub fn is_latency(self) -> bool {
        matches!(
            self,
            Self::WriteLat | Self::ReadLat | Self::SendLat | Self::RawLat
        )
    }

    /// A storage test (rpc_read, rpc_write).
    pub fn is_storage(self) -> bool {
        matches!(self, Self::RpcRead | Self::RpcWrite)
    }

    /// perftest's default size: 2 B for latency, 64 KiB for bandwidth.
    pub fn default_size(self) -> u64 {
        if self.is_latency() {
            2
        } else {
            65_536
        }
    }

    /// perftest's default iterations: 1000 for latency, 5000 for bandwidth.
    pub fn default_iterations(self) -> u64 {
        if self.is_latency() {
            1000
        } else {
            5000
        }
    }
}

impl From<TestKind> for &'static str {
    fn from(t: TestKind) -> Self {
        t.name()
    }
}

impl TryFrom<String> for TestKind {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        TestKind::from_name(&s).ok_or_else(|| format!("unknown test {s:?}"))
    }
}

/// Who computes TCP checksums of segments the xdp transport sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TxChecksumArg {
    /// The device where its driver offers it, else the engine.
    Auto,
    /// The engine.
    Engine,
    /// The device, through AF_XDP TX metadata.
    Device,
    /// The kernel in software (copy mode), through AF_XDP TX metadata.
    Kernel,
}

impl TxChecksumArg {
    /// The data plane's setting.
    pub fn offload(self) -> dataplane::TxChecksumOffload {
        use dataplane::TxChecksumOffload as T;
        match self {
            TxChecksumArg::Auto => T::Auto,
            TxChecksumArg::Engine => T::Off,
            TxChecksumArg::Device => T::Device,
            TxChecksumArg::Kernel => T::Kernel,
        }
    }
}

/// Which transport carries the test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportArg {
    /// The AF_XDP engine with xwarp's own TCP.
    Xdp,
    /// The same MPA/DDP stack over kernel TCP sockets.
    Kernel,
}

impl TransportArg {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Xdp => "xdp",
            Self::Kernel => "kernel",
        }
    }
}

/// The store's RPC transport in the rpc tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RpcTransportArg {
    /// ONC RPC over plain TCP (record marking; the TCP RDMA option on xdp).
    Tcp,
    /// RPC-over-RDMA.
    Rdma,
}

/// `on` / `off`.
fn on_off(v: &str) -> Result<bool, String> {
    match v {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("'{v}': expected on or off")),
    }
}

/// How the transport's connections run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// The application thread drives them when it posts and polls (xdp: the engine; kernel:
    /// each connection's socket, no driver thread).
    Inline,
    /// On their own threads (xdp: an engine thread per queue; kernel: a driver thread per
    /// connection).
    Threaded,
}

impl EngineArg {
    /// The dataplane's mode for it.
    pub fn mode(self) -> dataplane::EngineMode {
        match self {
            Self::Inline => dataplane::EngineMode::Inline,
            Self::Threaded => dataplane::EngineMode::Threaded,
        }
    }
}

impl EngineArg {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Inline => "inline",
            Self::Threaded => "threaded",
        }
    }
}

/// A ready-to-receive message type of peer-to-peer mode (RFC 6581).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RtrArg {
    /// A zero-length Send.
    Send,
    /// A zero-length RDMA Write.
    Write,
    /// A zero-length RDMA Read.
    Read,
}

impl RtrArg {
    /// The mpa type.
    pub fn rtr(self) -> mpa::RtrType {
        match self {
            RtrArg::Send => mpa::RtrType::Send,
            RtrArg::Write => mpa::RtrType::Write,
            RtrArg::Read => mpa::RtrType::Read,
        }
    }
}

/// The I/O pattern of the storage tests (fio's `--rw`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RwArg {
    /// Sequential READs.
    Read,
    /// Sequential WRITEs.
    Write,
    /// READs at random offsets.
    Randread,
    /// WRITEs at random offsets.
    Randwrite,
}

impl RwArg {
    /// fio's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Randread => "randread",
            Self::Randwrite => "randwrite",
        }
    }

    /// READs (else WRITEs).
    pub fn reads(self) -> bool {
        matches!(self, Self::Read | Self::Randread)
    }

    /// Random offsets (else sequential).
    pub fn random(self) -> bool {
        matches!(self, Self::Randread | Self::Randwrite)
    }
}

/// Calls in flight on one connection of the storage client (the credits it asks for).
pub const CALLS_PER_CONNECTION: u32 = xwarpd::store::MAX_IN_FLIGHT as u32;
/// Connections the storage tests open at most (`--iodepth` above [`CALLS_PER_CONNECTION`]
/// spreads the calls over several).
pub const MAX_CONNECTIONS: u32 = 16;
/// The most calls in flight of `--iodepth`.
pub const MAX_IODEPTH: u32 = CALLS_PER_CONNECTION * MAX_CONNECTIONS;
/// Work requests in flight of the bandwidth tests without `-t` (perftest's default).
pub const DEFAULT_TX_DEPTH: u32 = 128;
/// The seed of the random offsets without `--seed`.
pub const DEFAULT_SEED: u64 = 1;

/// Options of a test run.
#[derive(Debug, Clone, Args)]
pub struct TestArgs {
    /// Server address (host or IP). Without it, this side serves.
    pub address: Option<String>,
    /// TCP port [default: 18515, perftest's; rpc_read and rpc_write: the store's, 20049, or
    /// 20050 with --rpc-transport tcp].
    #[arg(short = 'p', long = "port", value_name = "PORT")]
    pub port_given: Option<u16>,
    /// The port this run uses: `--port`, else the test's ([`TestArgs::default_port`]); set by
    /// [`RunSpec::new`].
    #[arg(skip = DEFAULT_PORT)]
    pub port: u16,
    /// Message size in bytes (suffixes K, M: powers of 1024); for the storage tests the block
    /// size of each I/O (fio's --bs, an alias). Default: 2 for latency, 65536 for bandwidth and
    /// storage tests.
    #[arg(short, long, visible_alias = "bs", value_parser = parse_size, conflicts_with = "all")]
    pub size: Option<u64>,
    /// Run every size from 2 B to 8 MiB in powers of two.
    #[arg(short, long)]
    pub all: bool,
    /// Iterations per size. Default: 1000 for latency, 5000 for bandwidth tests.
    #[arg(short = 'n', long, value_parser = clap::value_parser!(u64).range(1..), conflicts_with = "duration")]
    pub iters: Option<u64>,
    /// Run each size for this long instead of a number of iterations: seconds or a number with
    /// a unit ms, s, m or h (10, 1.5s, 250ms, 5m), from 1 ms to a day.
    #[arg(short = 'D', long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Work requests in flight in bandwidth tests (perftest's TX depth) [default: 128]. The
    /// storage tests take --iodepth instead.
    #[arg(short = 't', long = "tx-depth", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub tx_depth: Option<u32>,
    /// Queue pairs run at once (perftest's -q; `--qps` too): write_bw, read_bw and send_bw run
    /// one stream per queue pair, each on its own thread, and report the sum. On the xdp
    /// transport the device serves as many receive queues (one engine each, from --queue on;
    /// give the server the same -q). At most 64.
    #[arg(short = 'q', long = "qp", visible_alias = "qps", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub qps: u32,
    /// perftest's completion events (-e); refused: xwarp-bench busy-polls its completion queues.
    #[arg(short = 'e', long = "events")]
    pub events: bool,
    /// perftest's "do not fail on CPU frequency warnings" (-F); accepted: xwarp-bench does not
    /// check the CPU frequency.
    #[arg(short = 'F', long = "CPU-freq")]
    pub cpu_freq: bool,
    /// perftest's device (-d): with --transport xdp, the network interface (as --interface);
    /// refused on the kernel transport, which has no device to choose.
    #[arg(short = 'd', long = "ib-dev", value_name = "DEVICE")]
    pub ib_dev: Option<String>,
    /// perftest's GID index (-x); refused: iWARP addresses peers by IP, there is no GID table.
    #[arg(short = 'x', long = "gid-index", value_name = "N")]
    pub gid_index: Option<u32>,
    /// perftest's rdma_cm connection set-up (-R); accepted: xwarp-bench always connects by IP
    /// address and port, as rdma_cm does.
    #[arg(short = 'R', long = "rdma_cm")]
    pub rdma_cm: bool,
    /// Bandwidth in Gb/sec (10^9 bit/s) instead of perftest's default MB/sec (2^20 bytes/s).
    #[arg(long = "report_gbits")]
    pub report_gbits: bool,
    /// Latency tests: print the histogram of the samples after the results (perftest's -H).
    #[arg(short = 'H', long = "report-histogram")]
    pub histogram: bool,
    /// perftest's bidirectional mode (-b), write_bw and read_bw: the server streams towards the
    /// client while the client streams towards it; both directions and their sum are reported.
    /// The server follows its client (-b on the server is accepted and changes nothing).
    #[arg(short = 'b', long = "bidirectional")]
    pub bidirectional: bool,
    /// perftest's --cpu_util: the CPU time this side used during each measurement, in per cent
    /// of one core (and the xdp engine thread's share when it has its own thread).
    #[arg(long = "cpu_util")]
    pub cpu_util: bool,
    /// Storage tests: the I/O pattern, as fio's --rw (sequential or seeded random offsets
    /// aligned to the block size within the store). Its direction must be the test's
    /// [default: read for rpc_read, write for rpc_write].
    #[arg(
        long,
        value_enum,
        value_name = "PATTERN",
        help_heading = "storage tests (rpc_read, rpc_write)"
    )]
    pub rw: Option<RwArg>,
    /// Storage tests: calls in flight, as fio's --iodepth: up to 16 on one connection (the
    /// credits the store client asks for), more over one connection per 16, at most 256
    /// [default: 16].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096), help_heading = "storage tests (rpc_read, rpc_write)")]
    pub iodepth: Option<u32>,
    /// Storage tests: the seed of the random offsets of --rw randread/randwrite (the same seed
    /// gives the same offsets) [default: 1].
    #[arg(
        long,
        value_name = "N",
        help_heading = "storage tests (rpc_read, rpc_write)"
    )]
    pub seed: Option<u64>,
    /// Transport [default: kernel].
    #[arg(long, value_enum, default_value_t = TransportArg::Kernel, help_heading = "xwarp options")]
    pub transport: TransportArg,
    /// xdp: the network interface [default: the route's towards the server].
    #[arg(long, value_name = "IFNAME", help_heading = "xwarp options")]
    pub interface: Option<String>,
    /// xdp: the interface's receive queue [default: 0].
    #[arg(long, value_name = "N", help_heading = "xwarp options")]
    pub queue: Option<u32>,
    /// xdp: who computes the TCP checksums of sent segments: `auto` (the device where its
    /// driver offers it through AF_XDP TX metadata, else the engine), `engine`, `device` (not
    /// veth towards another AF_XDP engine) or `kernel` (the same request, computed by the
    /// kernel in copy mode).
    #[arg(long, value_enum, default_value_t = TxChecksumArg::Auto, help_heading = "xwarp options")]
    pub tx_checksum: TxChecksumArg,
    /// Ask for MPA markers on what this side receives.
    #[arg(long, help_heading = "xwarp options")]
    pub markers: bool,
    /// Do not ask for the MPA CRC (it stays on if the peer asks).
    #[arg(long, help_heading = "xwarp options")]
    pub no_crc: bool,
    /// MPA revision: 2 (RFC 6581, accepts 1 and 2; the default), 1 (RFC 5044 only) or 0 (the
    /// draft's strict mode).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(0..=2))]
    pub revision: u8,
    /// Inbound RDMA Read Requests served at once (IRD; negotiated in a Rev 2 startup).
    #[arg(long, default_value_t = 16)]
    pub ird: u32,
    /// Outbound RDMA Reads kept outstanding (ORD; lowered to the peer's IRD in Rev 2).
    #[arg(long, default_value_t = 16)]
    pub ord: u32,
    /// Rev 2 peer-to-peer mode: ready-to-receive types (send, write, read; comma separated) the
    /// client offers / the server takes (empty: the client asks for none, the server takes all).
    #[arg(long, value_delimiter = ',')]
    pub p2p: Vec<RtrArg>,
    /// Engine mode of either transport. Default: xdp inline (on a host with few cores a
    /// busy-polling engine thread competes with the application for them); kernel inline for
    /// the latency tests (no thread hand-off) and threaded for the others (a driver thread
    /// batches small Sends into one write).
    #[arg(long, value_enum, help_heading = "xwarp options")]
    pub engine: Option<EngineArg>,
    /// Also write the results as CSV to FILE.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Server: address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind: String,
    /// rpc tests: the store's RPC transport, "rdma" (RPC-over-RDMA, the default) or "tcp" (ONC
    /// RPC over plain TCP); `-t tcp|rdma` is its short form on the rpc tests only (elsewhere, and
    /// with a number, -t is the TX depth).
    #[arg(
        long,
        value_enum,
        value_name = "tcp|rdma",
        help_heading = "xwarp options"
    )]
    pub rpc_transport: Option<RpcTransportArg>,
    /// rpc tests over tcp on the xdp transport: offer the TCP RDMA option (READ data placed by
    /// RID) [default: on].
    #[arg(long, value_name = "on|off", value_parser = on_off, help_heading = "xwarp options")]
    pub tcp_rdma_option: Option<bool>,
    /// Write the results as a JSON array to FILE (each record with the parameters it ran
    /// with).
    #[arg(long, value_name = "FILE", alias = "out_json_file")]
    pub json: Option<PathBuf>,
    /// Seconds to wait for the server (connect and MPA startup).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub timeout: u64,
    /// rpc_write: write a pattern that depends on each byte's store offset; rpc_read: check every
    /// byte read against that pattern (run rpc_write --verify first over the same range).
    /// Fails on the first mismatch.
    #[arg(long)]
    pub verify: bool,
}

impl TestArgs {
    /// The engine mode: `--engine`, else inline. (For the kernel transport [`RunSpec::new`]
    /// fills in its faster mode per test first: inline for latency, threaded otherwise.) For
    /// xdp, inline (the rpc tests' store
    /// server too: its acceptor thread no longer spins on an inline engine beside the
    /// connection's thread; measured rpc_read 1 MiB, server pinned to one core: inline 4.1-4.8
    /// Gb/s, threaded 2.6-3.5, five runs each, alternated).
    pub fn engine(&self) -> EngineArg {
        self.engine.unwrap_or(EngineArg::Inline)
    }

    /// The port of `test` without `--port`: the store's for the storage tests (its ONC RPC over
    /// TCP service's with `--rpc-transport tcp`), so they reach `xwarpd --store` as it listens
    /// by default; perftest's for the rest.
    pub fn default_port(&self, test: TestKind) -> u16 {
        match (test.is_storage(), self.rpc_transport) {
            (true, Some(RpcTransportArg::Tcp)) => TCP_STORE_PORT,
            (true, _) => STORE_PORT,
            (false, _) => DEFAULT_PORT,
        }
    }

    /// The receive queue of the xdp transport (default 0).
    pub fn queue(&self) -> u32 {
        self.queue.unwrap_or(0)
    }

    /// Work requests in flight of the bandwidth tests: `-t`, else perftest's 128.
    pub fn tx_depth(&self) -> u32 {
        self.tx_depth.unwrap_or(DEFAULT_TX_DEPTH)
    }

    /// Calls in flight of the storage tests: `--iodepth`, else one connection's worth (what the
    /// storage tests kept in flight before the option existed).
    pub fn iodepth(&self) -> u32 {
        self.iodepth.unwrap_or(CALLS_PER_CONNECTION)
    }

    /// The I/O pattern of storage test `test`: `--rw`, else sequential in the test's direction.
    pub fn rw(&self, test: TestKind) -> RwArg {
        self.rw.unwrap_or(if test == TestKind::RpcWrite {
            RwArg::Write
        } else {
            RwArg::Read
        })
    }

    /// The seed of the random offsets.
    pub fn seed(&self) -> u64 {
        self.seed.unwrap_or(DEFAULT_SEED)
    }

    /// The bandwidth unit of the tables.
    pub fn bw_unit(&self) -> crate::report::BwUnit {
        if self.report_gbits {
            crate::report::BwUnit::Gigabits
        } else {
            crate::report::BwUnit::MegaBytes
        }
    }

    /// The perftest options xwarp-bench refuses, and the options that do not apply to the
    /// chosen transport: the first one given, with one line saying why.
    pub fn refusal(&self, test: TestKind) -> Option<String> {
        let raw = matches!(test, TestKind::RawLat | TestKind::RawBw);
        let rpc = matches!(test, TestKind::RpcRead | TestKind::RpcWrite);
        if !rpc && (self.rpc_transport.is_some() || self.tcp_rdma_option.is_some()) {
            return Some(
                "--rpc-transport and --tcp-rdma-option apply to rpc_read and rpc_write only".into(),
            );
        }
        if self.tcp_rdma_option.is_some() && self.rpc_transport != Some(RpcTransportArg::Tcp) {
            return Some("--tcp-rdma-option applies to ONC RPC over TCP: add -t tcp".into());
        }
        if self.qps > 1 {
            if !matches!(
                test,
                TestKind::WriteBw | TestKind::ReadBw | TestKind::SendBw
            ) {
                return Some(format!(
                    "-q {} with {}: several queue pairs run in write_bw, read_bw and send_bw only",
                    self.qps,
                    test.name()
                ));
            }
            if self.bidirectional {
                return Some(format!("-q {} with -b: one or the other", self.qps));
            }
        }
        if self.events {
            return Some("-e: completion events are not supported: xwarp-bench busy-polls its completion queues".into());
        }
        if self.gid_index.is_some() {
            return Some(
                "-x: iWARP addresses peers by IP address; there is no GID table to index".into(),
            );
        }
        if self.bidirectional {
            if let Some(why) = bidirectional_refusal(test) {
                return Some(format!("-b with {}: {why}", test.name()));
            }
        }
        if let Some(why) = self.storage_refusal(test) {
            return Some(why);
        }
        if let (Some(d), Some(i)) = (&self.ib_dev, &self.interface) {
            if d != i {
                return Some(format!(
                    "-d {d} and --interface {i} name different interfaces; give one"
                ));
            }
        }
        if self.transport == TransportArg::Kernel && !raw {
            for (given, flag) in [
                (self.ib_dev.is_some(), "-d"),
                (self.interface.is_some(), "--interface"),
                (self.queue.is_some(), "--queue"),
            ] {
                if given {
                    return Some(format!("{flag} applies to the xdp transport only (the kernel transport has no device or queue of ours): add --transport xdp"));
                }
            }
        }
        if self.histogram && !test.is_latency() {
            return Some(
                "-H: the histogram is of latency samples; use it with a *_lat test".into(),
            );
        }
        None
    }
}

impl TestArgs {
    /// The storage options given to a test that is not a storage test, an I/O pattern against
    /// the test's direction, or perftest's `-t` on a storage test.
    fn storage_refusal(&self, test: TestKind) -> Option<String> {
        if !test.is_storage() {
            for (given, flag) in [
                (self.rw.is_some(), "--rw"),
                (self.iodepth.is_some(), "--iodepth"),
                (self.seed.is_some(), "--seed"),
                (self.verify, "--verify"),
            ] {
                if given {
                    return Some(format!(
                        "{flag} applies to the storage tests (rpc_read, rpc_write) only"
                    ));
                }
            }
            return None;
        }
        if let Some(t) = self.tx_depth {
            return Some(format!(
                "-t {t}: the storage tests keep --iodepth calls in flight (perftest's TX depth is for the RDMA tests)"
            ));
        }
        if let Some(rw) = self.rw {
            if rw.reads() != (test == TestKind::RpcRead) {
                let other = if rw.reads() { "rpc_read" } else { "rpc_write" };
                return Some(format!(
                    "--rw {}: {} {}; run {other} for it",
                    rw.name(),
                    test.name(),
                    if test == TestKind::RpcRead {
                        "reads"
                    } else {
                        "writes"
                    }
                ));
            }
        }
        if self.seed.is_some() && !self.rw(test).random() {
            return Some(
                "--seed chooses random offsets: give it with --rw randread or randwrite".into(),
            );
        }
        if let Some(n) = self.iodepth.filter(|n| *n > MAX_IODEPTH) {
            return Some(format!(
                "--iodepth {n}: at most {MAX_IODEPTH} calls in flight ({MAX_CONNECTIONS} connections of {CALLS_PER_CONNECTION}, the credits the store client asks for on each)"
            ));
        }
        None
    }
}

/// Why `-b` does not apply to `test`, `None` where it does (write_bw, read_bw).
pub fn bidirectional_refusal(test: TestKind) -> Option<&'static str> {
    match test {
        TestKind::WriteBw | TestKind::ReadBw => None,
        TestKind::WriteLat | TestKind::ReadLat | TestKind::SendLat => {
            Some("a latency test already goes both ways (ping-pong or request and response)")
        }
        TestKind::SendBw => Some(
            "not supported: send_bw's flow control and its control messages share each side's receive queue, which a second stream would need for its own ring",
        ),
        TestKind::RpcRead | TestKind::RpcWrite => Some(
            "a storage test's direction is the test; run rpc_read and rpc_write side by side",
        ),
        TestKind::RawLat | TestKind::RawBw => {
            Some("the raw tests measure one stream of frames; run a client from each side")
        }
    }
}

/// Options of `compare`.
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// Write the results as a JSON array to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Fewer iterations (a smoke test, seconds instead of a minute).
    #[arg(long)]
    pub short: bool,
    /// Rounds of the whole plan; each figure is the median over them (default 3, 1 with
    /// --short).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub rounds: Option<u32>,
    /// Do not pin the server to CPU 0 and the client to CPU 1 (by default every transport's
    /// endpoints each get their own core, which keeps latency figures from depending on where
    /// the scheduler put the two busy-polling processes).
    #[arg(long)]
    pub no_pin: bool,
    /// MTUs of the testbed's veth pair, one whole plan each (comma-separated or repeated;
    /// above 3826 AF_XDP packets span several UMEM frames: multi-buffer). Up to 65535, the
    /// most veth takes; the xdp transport's packets stop at 16 frames (61440 octets) there.
    #[arg(
        long,
        value_delimiter = ',',
        default_values_t = [1500, 9000],
        value_parser = clap::value_parser!(u32).range(576..=65535)
    )]
    pub mtu: Vec<u32>,
    /// Run the MPA transports (xdp, kernel) without markers. By default both ends ask for
    /// them, so every FPDU carries markers and a CRC32c each way, as the performance targets
    /// are set ("markers and CRC on").
    #[arg(long)]
    pub no_markers: bool,
}

/// Parses a message size: `tool_support::ByteSize`'s forms (64, 4K, 4KiB, 1M: powers of 1024),
/// from 1 byte to [`MAX_SIZE`].
pub fn parse_size(s: &str) -> Result<u64, String> {
    let v = s
        .parse::<ByteSize>()
        .map_err(|e| format!("'{s}' is not a size: {e}"))?
        .0;
    if v == 0 {
        return Err("the message size must be at least 1 byte".into());
    }
    if v > MAX_SIZE {
        return Err(format!("'{s}' exceeds the largest message size, 8 MiB"));
    }
    Ok(v)
}

/// Parses a run's duration: `tool_support::TimeSpan`'s forms (10, 1.5s, 250ms, 5m, 1h), from
/// 1 ms to a day.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = Duration::from(
        s.parse::<TimeSpan>()
            .map_err(|e| format!("'{s}' is not a duration: {e}"))?,
    );
    if !(Duration::from_millis(1)..=Duration::from_secs(86_400)).contains(&d) {
        return Err(format!(
            "'{s}': the duration must be between 1 ms and 1 day"
        ));
    }
    Ok(d)
}

/// How long each size runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Length {
    /// A number of iterations.
    Iterations(u64),
    /// A duration.
    Duration(Duration),
}

/// A validated test run.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// Which test.
    pub test: TestKind,
    /// Sizes to run, in order.
    pub sizes: Vec<u64>,
    /// Iterations or duration per size.
    pub length: Length,
    /// The options as given.
    pub args: TestArgs,
}

impl Command {
    /// The test and its options, `None` for `compare`.
    pub fn test(&self) -> Option<(TestKind, &TestArgs)> {
        let t = match self {
            Self::WriteLat(a) => (TestKind::WriteLat, a),
            Self::WriteBw(a) => (TestKind::WriteBw, a),
            Self::ReadLat(a) => (TestKind::ReadLat, a),
            Self::ReadBw(a) => (TestKind::ReadBw, a),
            Self::SendLat(a) => (TestKind::SendLat, a),
            Self::SendBw(a) => (TestKind::SendBw, a),
            Self::RpcRead(a) => (TestKind::RpcRead, a),
            Self::RpcWrite(a) => (TestKind::RpcWrite, a),
            Self::RawLat(a) => (TestKind::RawLat, a),
            Self::RawBw(a) => (TestKind::RawBw, a),
            Self::Compare(_) | Self::Plot(_) => return None,
        };
        Some(t)
    }
}

/// Every size of `--all`: 2 B to 8 MiB in powers of two.
pub fn all_sizes() -> Vec<u64> {
    (1..=23).map(|p| 1u64 << p).collect()
}

impl RunSpec {
    /// Checks the combination of options.
    pub fn new(test: TestKind, args: &TestArgs) -> Result<Self, String> {
        if let Some(why) = args.refusal(test) {
            return Err(why);
        }
        let mut args = args.clone();
        args.port = args.port_given.unwrap_or(args.default_port(test));
        if args.interface.is_none() {
            args.interface = args.ib_dev.clone();
        }
        if args.transport == TransportArg::Kernel && args.engine.is_none() {
            // The kernel transport's faster mode for the test: inline saves two thread hand-offs
            // per one-way trip, but writes each post at once, while a driver thread batches
            // small Sends into one write (64 B send_bw 0.47 Mpps threaded against 0.14 inline,
            // write_bw and rpc_read alike; /work/cmp/kbw.sh). Compare measures it at its best.
            args.engine = Some(if test.is_latency() {
                EngineArg::Inline
            } else {
                EngineArg::Threaded
            });
        }
        let sizes = if args.all {
            all_sizes()
        } else {
            vec![args.size.unwrap_or(test.default_size())]
        };
        let length = match (args.iters, args.duration) {
            (_, Some(d)) => Length::Duration(d),
            (Some(n), None) => Length::Iterations(n),
            (None, None) => Length::Iterations(test.default_iterations()),
        };
        Ok(Self {
            test,
            sizes,
            length,
            args,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("xwarp-bench").chain(args.iter().copied()))
    }

    fn spec(args: &[&str]) -> Result<RunSpec, String> {
        let cli = parse(args).map_err(|e| e.to_string())?;
        let (t, a) = cli.command.test().ok_or("compare")?;
        RunSpec::new(t, a)
    }

    #[test]
    fn defaults_follow_perftest() {
        let s = spec(&["write_lat", "198.18.0.1"]).unwrap();
        assert_eq!(s.args.port, 18515);
        assert_eq!(s.sizes, [2]);
        assert_eq!(s.length, Length::Iterations(1000));
        assert_eq!(s.args.address.as_deref(), Some("198.18.0.1"));
        let s = spec(&["write_bw"]).unwrap();
        assert_eq!(s.sizes, [65_536]);
        assert_eq!(s.length, Length::Iterations(5000));
        assert!(s.args.address.is_none(), "no address: server");
    }

    /// The storage tests reach the block store where `xwarpd --store` listens without
    /// `--port` (over RDMA and over TCP), the rest perftest's port; `--port` wins; the help
    /// says which default applies.
    #[test]
    fn storage_tests_default_to_the_stores_port() {
        use xwarpd::daemon::config::{DEFAULT_STORE_PORT, DEFAULT_TCP_STORE_PORT};
        for test in ["rpc_read", "rpc_write"] {
            let s = spec(&[test, "198.18.0.1"]).unwrap();
            assert_eq!(s.args.port, DEFAULT_STORE_PORT, "{test}");
            assert_eq!(s.args.port, 20049);
            let s = spec(&[test, "198.18.0.1", "--rpc-transport", "tcp"]).unwrap();
            assert_eq!(s.args.port, DEFAULT_TCP_STORE_PORT, "{test} over tcp");
            let s = spec(&[test, "198.18.0.1", "-p", "7000"]).unwrap();
            assert_eq!(s.args.port, 7000, "{test} --port");
        }
        for test in ["write_lat", "send_bw", "raw_lat"] {
            assert_eq!(spec(&[test]).unwrap().args.port, DEFAULT_PORT, "{test}");
        }
        let help = parse(&["rpc_read", "--help"]).unwrap_err().to_string();
        assert!(
            help.contains("the store's, 20049") && help.contains("20050"),
            "{help}"
        );
    }

    /// -D takes the one duration grammar of every tool (tool_support::TimeSpan) within 1 ms
    /// to a day, as it took plain seconds before.
    #[test]
    fn durations_take_units_and_plain_seconds() {
        for (text, ms) in [
            ("10", 10_000),
            ("1.5", 1_500),
            ("1.5s", 1_500),
            ("250ms", 250),
            ("5m", 300_000),
            ("1h", 3_600_000),
            ("0.001", 1),
        ] {
            assert_eq!(
                parse_duration(text),
                Ok(Duration::from_millis(ms)),
                "{text}"
            );
            let s = spec(&["write_bw", "-D", text]).unwrap();
            assert_eq!(s.length, Length::Duration(Duration::from_millis(ms)));
        }
        assert!(parse_duration("0")
            .unwrap_err()
            .contains("between 1 ms and 1 day"));
        assert!(parse_duration("25h")
            .unwrap_err()
            .contains("between 1 ms and 1 day"));
        let e = parse_duration("forever").unwrap_err();
        assert!(e.contains("not a duration") && e.contains("250ms"), "{e}");
        assert!(parse_duration("5d").is_err());
    }

    /// xwarp-bench -D and xwarpd's durations (its idle timeout, from a flag or the file) read
    /// the same strings as the same length of time, and refuse the same nonsense.
    #[test]
    fn bench_and_xwarpd_read_the_same_durations() {
        use xwarpd::daemon::{DaemonConfig, Overrides};
        let store = "[store]\npath = \"/x\"\nlisten = \"198.18.0.1:20049\"\n";
        let xwarpd_flag = |v: &str| {
            let o = Overrides {
                store_idle_timeout: Some(v.into()),
                ..Overrides::default()
            };
            DaemonConfig::from_toml(store, "t", &o).map(|c| c.store.unwrap().idle_timeout)
        };
        let xwarpd_file = |v: &str| {
            let text = format!("{store}idle_timeout = \"{v}\"");
            DaemonConfig::from_toml(&text, "t", &Overrides::default())
                .map(|c| c.store.unwrap().idle_timeout)
        };
        // Within both tools' limits (xwarpd: 1 s to 7 days; -D: 1 ms to a day).
        for text in [
            "10", "1.5", "1.5s", "2500ms", "5m", "5min", "0.5h", "1h", " 90s ",
        ] {
            let bench = parse_duration(text).unwrap();
            assert_eq!(xwarpd_flag(text).unwrap(), bench, "{text:?}");
            assert_eq!(xwarpd_file(text).unwrap(), bench, "{text:?}");
        }
        for bad in [
            "", "forever", "-1", "5d", "1e3", "inf", "1 s", "1h30m", "10sec",
        ] {
            assert!(parse_duration(bad).is_err(), "-D {bad:?}");
            assert!(xwarpd_flag(bad).is_err(), "--store-idle-timeout {bad:?}");
            assert!(xwarpd_file(bad).is_err(), "idle_timeout = {bad:?}");
        }
    }

    #[test]
    fn all_sizes_are_powers_of_two_from_2_b_to_8_mib() {
        let s = spec(&["send_bw", "-a"]).unwrap();
        assert_eq!(s.sizes.len(), 23);
        assert_eq!(s.sizes[0], 2);
        assert_eq!(*s.sizes.last().unwrap(), 8 << 20);
        assert!(s.sizes.windows(2).all(|w| w[1] == 2 * w[0]));
    }

    #[test]
    fn sizes_take_suffixes_and_reject_nonsense() {
        assert_eq!(parse_size("64K"), Ok(65_536));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("7"), Ok(7));
        assert!(parse_size("0").unwrap_err().contains("at least 1"));
        assert!(parse_size("16M").unwrap_err().contains("8 MiB"));
        assert!(parse_size("x").is_err());
        assert_eq!(parse_size("4 KiB"), Ok(4096));
        assert!(parse_size("4Q").unwrap_err().contains("not a size"));
        assert!(parse_size("99999999999999999999").is_err());
    }

    #[test]
    fn parse_errors_are_clap_errors_not_panics() {
        for bad in [
            &["write_lat", "-s", "0"][..],
            &["write_lat", "-s", "64K", "-a"],
            &["write_lat", "-n", "0"],
            &["write_lat", "-n", "10", "-D", "1"],
            &["write_lat", "-D", "forever"],
            &["write_lat", "--transport", "rdma"],
            &["write_lat", "--port", "70000"],
            &["write_lat", "--engine", "fast"],
            &["no_such_test"],
            &["write_lat", "a", "b"],
            &["compare", "--mtu", "100"],
            &["compare", "--mtu", "65536"],
        ] {
            let e = parse(bad).unwrap_err();
            assert_ne!(e.kind(), clap::error::ErrorKind::DisplayHelp, "{bad:?}");
        }
    }

    #[test]
    fn engine_modes_apply_to_both_transports() {
        for t in ["kernel", "xdp"] {
            for e in ["inline", "threaded"] {
                let s = spec(&["write_lat", "--engine", e, "--transport", t]).unwrap();
                assert_eq!(s.args.engine().name(), e);
            }
        }
        // Defaults: xdp inline; the kernel transport inline for latency, threaded for the rest
        // (its faster mode for each).
        for (test, t, want) in [
            ("write_lat", "xdp", EngineArg::Inline),
            ("send_bw", "xdp", EngineArg::Inline),
            ("write_lat", "kernel", EngineArg::Inline),
            ("send_lat", "kernel", EngineArg::Inline),
            ("send_bw", "kernel", EngineArg::Threaded),
            ("write_bw", "kernel", EngineArg::Threaded),
            ("rpc_read", "kernel", EngineArg::Threaded),
        ] {
            let s = spec(&[test, "--transport", t]).unwrap();
            assert_eq!(s.args.engine(), want, "{test} {t}");
        }
        let e = spec(&["write_lat", "--queue", "1"]).unwrap_err();
        assert!(e.contains("--transport xdp"), "{e}");
    }

    #[test]
    fn perftest_flags_mean_what_they_mean_in_perftest() {
        let s = spec(&[
            "write_bw",
            "-t",
            "64",
            "-q",
            "1",
            "-F",
            "-R",
            "--report_gbits",
        ])
        .unwrap();
        assert_eq!(s.args.tx_depth(), 64);
        assert_eq!(s.args.qps, 1);
        assert_eq!(s.args.bw_unit(), crate::report::BwUnit::Gigabits);
        assert_eq!(
            spec(&["write_bw"]).unwrap().args.bw_unit(),
            crate::report::BwUnit::MegaBytes
        );
        let s = spec(&["write_lat", "--transport", "xdp", "-d", "xw0"]).unwrap();
        assert_eq!(s.args.interface.as_deref(), Some("xw0"));
        assert!(spec(&["write_lat", "-H"]).unwrap().args.histogram);
        let s = spec(&["write_bw", "--out_json_file", "/tmp/r.json"]).unwrap();
        assert_eq!(s.args.json.unwrap().to_str(), Some("/tmp/r.json"));
    }

    #[test]
    fn refused_options_say_why_in_one_line() {
        for (args, needle) in [
            (
                &["write_lat", "-q", "2"][..],
                "write_bw, read_bw and send_bw only",
            ),
            (&["write_bw", "-q", "2", "-b"][..], "one or the other"),
            (&["write_lat", "-e"], "busy-polls"),
            (&["write_lat", "-x", "3"], "GID"),
            (&["write_lat", "-b"], "latency test already goes both ways"),
            (&["send_bw", "-b"], "receive queue"),
            (&["rpc_read", "-b"], "direction is the test"),
            (&["write_lat", "-d", "mlx5_0"], "xdp transport only"),
            (&["write_lat", "--interface", "eth1"], "xdp transport only"),
            (&["write_lat", "--queue", "1"], "xdp transport only"),
            (&["write_bw", "-H"], "latency"),
            (
                &[
                    "write_lat",
                    "--transport",
                    "xdp",
                    "-d",
                    "a0",
                    "--interface",
                    "b0",
                ],
                "different",
            ),
        ] {
            let e = spec(args).unwrap_err();
            assert!(e.contains(needle), "{args:?}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }

    #[test]
    fn storage_options_are_fio_like() {
        let s = spec(&[
            "rpc_read",
            "--rw",
            "randread",
            "--bs",
            "4K",
            "--iodepth",
            "8",
        ])
        .unwrap();
        assert_eq!(s.sizes, [4096], "--bs is -s");
        assert_eq!(s.args.rw(s.test), RwArg::Randread);
        assert_eq!(s.args.iodepth(), 8);
        assert_eq!(s.args.seed(), DEFAULT_SEED);
        let s = spec(&["rpc_write", "--rw", "randwrite", "--seed", "42"]).unwrap();
        assert_eq!(s.args.seed(), 42);
        // Defaults: sequential in the test's direction, 16 calls in flight (as before --iodepth).
        let s = spec(&["rpc_write"]).unwrap();
        assert_eq!(s.args.rw(s.test), RwArg::Write);
        assert_eq!(s.args.iodepth(), CALLS_PER_CONNECTION);
        assert_eq!(
            spec(&["rpc_read", "--iodepth", "256"])
                .unwrap()
                .args
                .iodepth(),
            256
        );
        assert_eq!(
            spec(&["rpc_read"]).unwrap().args.rw(TestKind::RpcRead),
            RwArg::Read
        );
        assert_eq!(spec(&["rpc_read", "-s", "1M"]).unwrap().sizes, [1 << 20]);
        assert!(parse(&["rpc_read", "--rw", "trim"]).is_err());
        assert!(parse(&["rpc_read", "--iodepth", "0"]).is_err());
    }

    #[test]
    fn cpu_util_and_bidirectional_are_accepted_where_they_apply() {
        for t in [
            "write_lat",
            "write_bw",
            "read_bw",
            "send_bw",
            "rpc_read",
            "raw_lat",
        ] {
            assert!(spec(&[t, "--cpu_util"]).unwrap().args.cpu_util, "{t}");
        }
        for t in ["write_bw", "read_bw"] {
            let s = spec(&[t, "-b", "--transport", "xdp"]).unwrap();
            assert!(s.args.bidirectional, "{t}");
            assert!(spec(&[t, "--bidirectional"]).is_ok());
        }
        assert_eq!(
            spec(&["write_bw"]).unwrap().args.tx_depth(),
            DEFAULT_TX_DEPTH
        );
        for t in ALL_TESTS {
            // -b is accepted exactly where it is implemented.
            let ok = spec(&[t.name(), "-b"]).is_ok();
            assert_eq!(ok, bidirectional_refusal(t).is_none(), "{}", t.name());
        }
    }

    #[test]
    fn storage_options_elsewhere_and_against_the_test_are_refused() {
        for (args, needle) in [
            (
                &["write_bw", "--rw", "read"][..],
                "--rw applies to the storage tests",
            ),
            (
                &["read_lat", "--iodepth", "4"],
                "--iodepth applies to the storage tests",
            ),
            (
                &["send_bw", "--seed", "3"],
                "--seed applies to the storage tests",
            ),
            (
                &["write_lat", "--verify"],
                "--verify applies to the storage tests",
            ),
            (
                &["rpc_read", "--rw", "write"],
                "rpc_read reads; run rpc_write",
            ),
            (
                &["rpc_write", "--rw", "randread"],
                "rpc_write writes; run rpc_read",
            ),
            (&["rpc_read", "--seed", "5"], "--rw randread or randwrite"),
            (&["rpc_read", "--iodepth", "257"], "at most 256 calls"),
            (&["rpc_read", "-t", "8"], "--iodepth"),
            (&["raw_bw", "-b"], "one stream of frames"),
        ] {
            let e = spec(args).unwrap_err();
            assert!(e.contains(needle), "{args:?}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }

    #[test]
    fn xdp_engine_defaults_to_inline_and_follows_the_flag() {
        let s = spec(&["write_lat", "--transport", "xdp"]).unwrap();
        assert_eq!(s.args.engine(), EngineArg::Inline);
        let s = spec(&["write_bw", "--transport", "xdp", "--engine", "threaded"]).unwrap();
        assert_eq!(s.args.engine(), EngineArg::Threaded);
        let s = spec(&["rpc_read", "--transport", "xdp"]).unwrap();
        assert_eq!(s.args.engine(), EngineArg::Inline);
        let s = spec(&["rpc_read", "--transport", "xdp", "--engine", "threaded"]).unwrap();
        assert_eq!(s.args.engine(), EngineArg::Threaded);
    }

    #[test]
    fn duration_replaces_iterations() {
        let s = spec(&["read_bw", "-D", "2.5"]).unwrap();
        assert_eq!(s.length, Length::Duration(Duration::from_millis(2500)));
    }

    #[test]
    fn test_ids_and_names_round_trip() {
        for t in ALL_TESTS {
            assert_eq!(TestKind::from_id(t.id()), Some(t));
            assert_eq!(TestKind::from_name(t.name()), Some(t));
        }
        assert_eq!(TestKind::from_id(0), None);
        assert_eq!(TestKind::from_id(11), None);
    }

    #[test]
    fn compare_takes_json() {
        let cli = parse(&["compare", "--json", "/tmp/x.json", "--short"]).unwrap();
        match cli.command {
            Command::Compare(c) => {
                assert!(c.short);
                assert_eq!(c.json.unwrap().to_str(), Some("/tmp/x.json"));
            }
            _ => panic!("not compare"),
        }
    }

    /// The performance targets hold with markers and CRC on: compare asks for markers unless told
    /// not to, and takes MTUs up to veth's largest.
    #[test]
    fn compare_runs_markers_by_default_and_mtus_up_to_veths_largest() {
        let Command::Compare(c) = parse(&["compare"]).unwrap().command else {
            panic!("not compare");
        };
        assert!(!c.no_markers);
        assert_eq!(c.mtu, [1500, 9000]);
        let Command::Compare(c) = parse(&["compare", "--no-markers", "--mtu", "1500,65535"])
            .unwrap()
            .command
        else {
            panic!("not compare");
        };
        assert!(c.no_markers);
        assert_eq!(c.mtu, [1500, 65535]);
    }
}
