//! xwarpd: the xwarp daemon. Serves RDMA listeners and an RPC-over-RDMA block store on the
//! kernel transport or the AF_XDP engine (a config choice), with counters on a control socket
//! (`xwarpd stats`) and a Prometheus endpoint.
#![forbid(unsafe_code)]

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter};
use xwarpd::daemon::{self, config::DEFAULT_CONTROL, DaemonConfig, DaemonError, Hooks, Overrides};

/// xwarpd: the xwarp data-plane daemon.
///
/// Serves iWARP (MPA/DDP/RDMAP) listeners and, with --store, a block store over RPC-over-RDMA:
/// a file mmap'ed shared and served with READ (server RDMA-Writes into the client's buffer),
/// WRITE (server RDMA-Reads it), COMMIT (msync + fsync) and GETATTR. Settings come from
/// --config FILE (TOML, see deploy/xwarpd.example.toml) with flags on top. Counters: `xwarpd
/// stats`, or Prometheus text over HTTP at --metrics; a summary for people: `xwarpd status`.
/// SIGINT or SIGTERM stops it cleanly (store synced); SIGHUP reloads the configuration (the log
/// filter applies at once; other changed settings are named and wait for a restart). It tells
/// systemd when it is ready (Type=notify) and logs to the journal with priorities when its
/// stderr is the journal. A panic in any of its threads stops it with one log line and exit
/// status 70 (systemd's Restart=on-failure then restarts it).
///
/// The store admits only clients from allowed networks (--store-allow; by default the listen
/// address's own subnet), at most --store-max-connections at once and
/// --store-max-connections-per-source from one source, and closes connections idle for
/// --store-idle-timeout; when it is full, a silent connection (no call for a second) gives way
/// to a new client. Each connection gets its own protection domain.
///
/// Fair admission: a source is an IPv4 address or an IPv6 /64 (admission.source_prefix_v4,
/// admission.source_prefix_v6). A listener's backlog (connections whose MPA startup has not
/// finished: --backlog, 256 by default, on either transport) takes at most --backlog-per-source of
/// them from one source; when it is full, the oldest of the source holding the most is reset
/// to make room for a source holding fewer.
///
/// Transports: "kernel" (kernel TCP sockets; runs anywhere) or "xdp": xwarp's XDP program on
/// --interface steers the listening ports and the --local-ports range into an AF_XDP socket on
/// --queue, where the engine (our own TCP, MPA, DDP, RDMAP) runs on its own thread, pinned with
/// --core. Needs root (or CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF, CAP_SYS_ADMIN, CAP_IPC_LOCK); run
/// it in the interface's network namespace. On SIGINT/SIGTERM the program is detached and the
/// UMEM freed; after a crash (kill -9) the program stays attached until the next xwarpd on that
/// interface replaces it. Per-engine counters (packets, bytes, retransmissions, out-of-order
/// FPDUs placed, CRC errors, Terminates, drops) appear in `xwarpd stats` and --metrics.
#[derive(Debug, Parser)]
#[command(name = "xwarpd", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// TOML configuration file; flags given here override it.
    #[arg(short, long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Transport: "kernel" (kernel TCP sockets) or "xdp" (AF_XDP engine; needs --interface)
    /// [default: kernel].
    #[arg(long, value_name = "NAME")]
    transport: Option<String>,
    /// xdp: the interface to attach to (up, with an IPv4 address).
    #[arg(long, value_name = "IFNAME", help_heading = "xdp transport")]
    interface: Option<String>,
    /// xdp: the interface's receive queue the engine serves [default: 0].
    #[arg(long, value_name = "N", help_heading = "xdp transport")]
    queue: Option<String>,
    /// xdp: AF_XDP bind mode: "auto" (zero-copy when the driver offers it, else copy), "copy"
    /// or "zerocopy" (fail without it) [default: auto].
    #[arg(long, value_name = "MODE", help_heading = "xdp transport")]
    bind: Option<String>,
    /// xdp: XDP attach policy: "auto" (native, else generic with a warning), "native" or
    /// "generic" [default: auto].
    #[arg(long, value_name = "POLICY", help_heading = "xdp transport")]
    attach: Option<String>,
    /// xdp: local ports for the engine's active opens, steered to it; reserve them from the
    /// kernel (deploy/host-setup) [default: 40000-40999].
    #[arg(long, value_name = "FIRST-LAST", help_heading = "xdp transport")]
    local_ports: Option<String>,
    /// xdp: engine mode; only "threaded" (the engine polls on its own thread): inline engines
    /// need an application thread to drive them [default: threaded].
    #[arg(long, value_name = "MODE", help_heading = "xdp transport")]
    engine: Option<String>,
    /// xdp: pin the engine thread to this CPU [default: not pinned].
    #[arg(long, value_name = "CPU", help_heading = "xdp transport")]
    core: Option<String>,
    /// Serve a block store backed by this file (created when --size is given).
    #[arg(long, value_name = "PATH")]
    store: Option<PathBuf>,
    /// Store size (e.g. 1GiB); the file is extended to it, never shrunk, and fully allocated.
    #[arg(long, value_name = "N")]
    size: Option<String>,
    /// Address the store listens on, e.g. 198.18.0.1:20049 (required with --store; on the xdp
    /// transport it defaults to the interface's IPv4 address, port 20049). No wildcard default:
    /// 0.0.0.0 or :: must be given, and then needs --store-allow.
    #[arg(long, value_name = "ADDR")]
    store_listen: Option<String>,
    /// A client network admitted by the store (CIDR like 198.18.0.0/15, or one address); repeat
    /// for more; replaces store.allow. Others are refused, counted and logged once per peer a
    /// minute [default: the listen address's own subnet, from its interface's prefix].
    #[arg(long, value_name = "CIDR")]
    store_allow: Vec<String>,
    /// Most store connections served at once; more are refused and counted, unless a silent
    /// connection gives way [default: 64].
    #[arg(long, value_name = "N")]
    store_max_connections: Option<String>,
    /// Most store connections from one source (an address, or an IPv6 /64); more are refused
    /// and counted [default: a quarter of --store-max-connections].
    #[arg(long, value_name = "N")]
    store_max_connections_per_source: Option<String>,
    /// Most connections in MPA startup a listener holds (its backlog, on either transport;
    /// admission.backlog, or xdp.backlog); more are reset, or the oldest of the source holding
    /// the most gives way [default: 256].
    #[arg(long, value_name = "N")]
    backlog: Option<String>,
    /// Most connections in MPA startup one source may hold in a listener's backlog; more are
    /// reset and counted [default: a quarter of the backlog].
    #[arg(long, value_name = "N")]
    backlog_per_source: Option<String>,
    /// Close a store connection with no call for this long: seconds or a number with a unit ms,
    /// s, m or h (300, 1.5s, 5m, 1h), from 1s to 7 days [default: 5m].
    #[arg(long, value_name = "DURATION")]
    store_idle_timeout: Option<String>,
    /// Also serve the store over ONC RPC on plain TCP: "on" or "off" [default: off]. Same
    /// address, allow-list and limits; its own port (--store-tcp-port).
    #[arg(long, value_name = "on|off")]
    store_tcp: Option<String>,
    /// Port of the ONC RPC over TCP service [default: 20050].
    #[arg(long, value_name = "PORT")]
    store_tcp_port: Option<String>,
    /// xdp: offer the TCP RDMA option (kind 25) to ONC RPC clients, so READ data is placed
    /// where both ends speak it: "on" or "off" [default: off].
    #[arg(long, value_name = "on|off")]
    store_tcp_rdma_option: Option<String>,
    /// An echo listener (each Send comes back); repeat for more.
    #[arg(long, value_name = "ADDR")]
    listen: Vec<String>,
    /// Prometheus endpoint, or "off" [default: 127.0.0.1:9464].
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// Unix control socket for `xwarpd stats` [default: /run/xwarpd/control.sock].
    #[arg(long, value_name = "PATH")]
    control: Option<PathBuf>,
    /// Log filter (info, debug, dataplane=trace, ...) [default: info].
    #[arg(long, value_name = "FILTER")]
    log: Option<String>,
    /// Ask for MPA markers on what we receive.
    #[arg(long, value_name = "BOOL")]
    markers: Option<bool>,
    /// Ask for MPA CRC [default: true].
    #[arg(long, value_name = "BOOL")]
    crc: Option<bool>,
    /// Kernel transport: give every FPDU its own TCP segment (slow; for wire captures).
    #[arg(long, value_name = "BOOL")]
    segment_per_fpdu: Option<bool>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the counters of a running xwarpd (asks its control socket).
    Stats {
        /// The daemon's control socket.
        #[arg(long, value_name = "PATH", default_value = DEFAULT_CONTROL)]
        control: PathBuf,
    },
    /// Print what a running xwarpd serves, for people: transport, XDP mode, zero-copy, queue,
    /// connections and totals (asks its control socket).
    Status {
        /// The daemon's control socket.
        #[arg(long, value_name = "PATH", default_value = DEFAULT_CONTROL)]
        control: PathBuf,
    },
    /// Check a configuration (file and flags) and print the effective one as TOML (every
    /// setting, defaults filled in), without starting anything.
    CheckConfig {
        #[command(flatten)]
        run: Box<RunArgs>,
    },
}

fn load(a: &RunArgs) -> Result<DaemonConfig, DaemonError> {
    let o = Overrides {
        transport: a.transport.clone(),
        control_socket: a.control.clone(),
        metrics: a.metrics.clone(),
        log: a.log.clone(),
        store: a.store.clone(),
        size: a.size.clone(),
        store_listen: a.store_listen.clone(),
        store_allow: a.store_allow.clone(),
        store_max_connections: a.store_max_connections.clone(),
        store_max_connections_per_source: a.store_max_connections_per_source.clone(),
        backlog: a.backlog.clone(),
        backlog_per_source: a.backlog_per_source.clone(),
        store_idle_timeout: a.store_idle_timeout.clone(),
        store_tcp: a.store_tcp.clone(),
        store_tcp_port: a.store_tcp_port.clone(),
        store_tcp_rdma_option: a.store_tcp_rdma_option.clone(),
        listen: a.listen.clone(),
        markers: a.markers,
        crc: a.crc,
        segment_per_fpdu: a.segment_per_fpdu,
        interface: a.interface.clone(),
        queue: a.queue.clone(),
        bind: a.bind.clone(),
        attach: a.attach.clone(),
        local_ports: a.local_ports.clone(),
        engine: a.engine.clone(),
        core: a.core.clone(),
    };
    Ok(DaemonConfig::load(a.config.as_deref(), &o)?)
}

/// True when stderr is the journal's stream (systemd sets `JOURNAL_STREAM` to its
/// `device:inode`).
fn stderr_is_journal() -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(want) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Ok(fd) = std::os::fd::AsFd::as_fd(&std::io::stderr()).try_clone_to_owned() else {
        return false;
    };
    let Ok(m) = std::fs::File::from(fd).metadata() else {
        return false;
    };
    want.to_str() == Some(&format!("{}:{}", m.dev(), m.ino()))
}

/// Installs the log subscriber: to the journal with priorities (and fields) when stderr is the
/// journal, else formatted lines on stderr. Returns the function that replaces the filter.
fn init_logging(filter: &str) -> impl Fn(&str) -> Result<(), String> + Send + 'static {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let (filter, handle) = reload::Layer::new(filter);
    let journald = stderr_is_journal()
        .then(|| tracing_journald::layer().ok())
        .flatten();
    let fmt = journald.is_none().then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
    });
    tracing_subscriber::registry()
        .with(filter)
        .with(journald)
        .with(fmt)
        .init();
    move |f: &str| {
        let f = EnvFilter::try_new(f).map_err(|e| e.to_string())?;
        handle.reload(f).map_err(|e| e.to_string())
    }
}

fn ask(control: &std::path::Path, request: &str) -> ExitCode {
    match daemon::control::query(control, request) {
        Ok(s) => {
            print!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("xwarpd {request}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Stats { control }) => ask(&control, "stats"),
        Some(Command::Status { control }) => ask(&control, "status"),
        Some(Command::CheckConfig { run }) => match load(&run) {
            Ok(c) => {
                print!("{}", c.to_toml());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("xwarpd: {e}");
                ExitCode::from(2)
            }
        },
        None => {
            // Connections come and go in bursts: give their memory back (dataplane::heap).
            dataplane::heap::return_freed_memory_promptly(
                dataplane::heap::DEFAULT_RELEASE_THRESHOLD,
            );
            let cfg = match load(&cli.run) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("xwarpd: {e}");
                    return ExitCode::from(2);
                }
            };
            let set_log = init_logging(&cfg.log);
            let run = cli.run;
            let hooks = Hooks {
                reload: Some(Box::new(move || load(&run))),
                set_log: Some(Box::new(set_log)),
            };
            match daemon::run_with(&cfg, &hooks) {
                Ok(daemon::Stop::Signal(_)) => ExitCode::SUCCESS,
                // Already logged, in one line, by the supervisor.
                Ok(daemon::Stop::Panic) => ExitCode::from(daemon::supervisor::EXIT_PANIC),
                Err(e) => {
                    // One line on stderr, where the log goes too.
                    eprintln!("xwarpd: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
